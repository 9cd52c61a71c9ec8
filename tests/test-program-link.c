/* test-program-link.c - programs linked from several images
 * (curd_program_desc.link_images): the list checked before any driver
 * call, two PTX modules of the linker's harness (tests/kernels/link_*.cu,
 * compiled with -rdc=true: link_apply calls link_mix's curd_link_mix)
 * linked and launched over fresh random data against a host reference,
 * an unresolved function refused with the linker's log, the module cache
 * keyed by the whole list, the JIT options reaching the link, and a
 * device-code library as an input. The fault sweep's entry
 * "curd_program_load/link-of-two-ptx-not-cached" (tests/support/api-ops.c)
 * fails each driver call of a link in turn.
 *
 * Every test that needs a device opens device 0 or skips with the reason
 * (make check-gpu counts a skip as a failure). In its stand-in
 * twin test-program-link-fake (CURD_TEST_ON_FAKE, tests/README.md) the
 * stand-in libcuda (tests/fake/) links by joining its inputs' texts, runs
 * every test, allows no skip, and after each test must hold no more
 * objects (link states included) than when it began. */
#include <glib.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/program.h"
#include "support/curd-test.h"
#include "support/kernel-load.h"

static curd_program *const untouched_program = (curd_program *)(uintptr_t)0x77;

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */
static const char *ptx_of(const char *file)
{
    const char *ptx = curd_test_kernel_ptx(file);
    if (ptx == NULL)
        g_error("no kernel image %s in tests/kernels/", file);
    return ptx;
}

static curd_program_image image_of(const void *bytes, size_t byte_len)
{
    curd_program_image image = {bytes, byte_len};
    return image;
}

static curd_program_image ptx_image(const char *file)
{
    const char *ptx = ptx_of(file);
    return image_of(ptx, strlen(ptx));
}

/* A desc of image, linked with links[0 .. count - 1]. */
static curd_program_desc linked_desc(curd_program_image image,
                                     const curd_program_image *links,
                                     size_t count, const char *entry)
{
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = image.image;
    desc.image_bytes = image.image_bytes;
    desc.entry = entry;
    desc.link_images = links;
    desc.link_count = count;
    return desc;
}

/* The harness's link: link_apply.ptx with [link_mix.ptx] (*mix, which
 * must outlive the desc). */
static curd_program_desc apply_with_mix(curd_program_image *mix)
{
    *mix = ptx_image("link_mix.ptx");
    return linked_desc(ptx_image("link_apply.ptx"), mix, 1,
                       "curd_link_apply");
}

static curd_program *load_ok(curd_device *device,
                             const curd_program_desc *desc)
{
    curd_program *program = NULL;
    curd_status status = curd_program_load(device, desc, &program);
    if (status != CURD_OK)
        g_error("linking %s: %s: %s", desc->entry, curd_status_name(status),
                curd_last_error());
    g_assert_nonnull(program);
    return program;
}

static curdi_program_counts counts_of(curd_device *device)
{
    curdi_program_counts counts;
    curdi_program_counts_read(device, &counts);
    return counts;
}

/* The stand-in's running count of links; -1 on a GPU. */
static long links_made(void)
{
    return curd_test_fake_count("link_completions");
}

/* The stand-in's live objects, compared before and after each test. */
static const char *const fake_kinds[] = {
    "device_memory", "host_memory",     "stream",        "event",
    "module",        "link_state",      "context_retains", "context_stack",
    "sticky_faults",
};

static void run_test(gconstpointer data)
{
    long before[G_N_ELEMENTS(fake_kinds)];
    gboolean counted;
    curd_test_run_holding_nothing((void (*)(void))(uintptr_t)data,
                                  fake_kinds, G_N_ELEMENTS(fake_kinds), before,
                                  &counted);
}

/* curd_link_mix of link_mix.cu, on the host. */
static uint32_t link_mix(uint32_t x, uint32_t key)
{
    x = (x ^ key) * 0x9E3779B1u;
    return x ^ (x >> 16);
}

/* Launches curd_link_apply over fresh random words with a random key;
 * the output starts poisoned (one word more than n, which must keep its
 * poison) and every byte is compared with the host reference. */
static void expect_link_apply_works(curd_device *device,
                                    const curd_program *program)
{
    uint32_t n = (uint32_t)g_test_rand_int_range(1, 100000);
    uint32_t key = g_test_rand_int();
    size_t bytes = (size_t)n * 4;
    uint32_t *in = g_malloc(bytes);
    uint32_t *out = g_malloc(bytes + 4);
    uint32_t *want = g_malloc(bytes + 4);
    curd_test_fill_random(in, bytes);
    curd_test_poison(out, bytes + 4);
    curd_test_poison(want, bytes + 4);
    for (uint32_t i = 0; i < n; i++)
        want[i] = link_mix(in[i], key);
    curd_arg args[4] = {
        curd_arg_host(CURD_ROLE_INPUT, in, bytes),
        /* In and out: the device starts from the poison too. */
        curd_arg_host(CURD_ROLE_INOUT, out, bytes + 4),
        curd_arg_scalar(&n, sizeof n),
        curd_arg_scalar(&key, sizeof key),
    };
    curd_launch launch;
    curd_launch_init(&launch);
    launch.block[0] = 256;
    launch.elements = n;
    curd_status status = curd_dispatch(device, program, &launch, args, 4);
    if (status != CURD_OK)
        g_error("curd_dispatch of the linked kernel: %s: %s",
                curd_status_name(status), curd_last_error());
    if (memcmp(out, want, bytes + 4) != 0) {
        for (uint32_t i = 0; i <= n; i++)
            if (out[i] != want[i])
                g_error("n %u, key 0x%08x: word %u is 0x%08x, expected "
                        "0x%08x%s",
                        n, key, i, out[i], want[i],
                        i == n ? " (the poison past n)" : "");
    }
    g_free(want);
    g_free(out);
    g_free(in);
}

/* ------------------------------------------------------------------------
 * The list, checked before any driver call
 * ---------------------------------------------------------------------- */
static void test_desc_init_leaves_nothing_to_link(void)
{
    curd_program_desc desc;
    curd_test_poison(&desc, sizeof desc);
    curd_program_desc_init(&desc);
    g_assert_null(desc.link_images);
    g_assert_cmpuint(desc.link_count, ==, 0);
    g_assert_cmpuint(desc.struct_size, ==, sizeof desc);
}

/* One refusal: the status, a Fix sentence naming `names`, no driver call,
 * out_program untouched. */
static void expect_refused(curd_device *device, const curd_program_desc *desc,
                           curd_status want, const char *names)
{
    curd_program *program = untouched_program;
    curd_test_faults_begin(0, 0, NULL);
    curd_status status = curd_program_load(device, desc, &program);
    unsigned calls = curd_test_faults_end();
    if (status != want)
        g_error("expected %s, got %s: %s", curd_status_name(want),
                curd_status_name(status), curd_last_error());
    curd_test_assert_fix_sentence();
    if (strstr(curd_last_error(), names) == NULL)
        g_error("the sentence does not name %s: %s", names,
                curd_last_error());
    g_assert_cmpuint(calls, ==, 0);
    g_assert_true(program == untouched_program);
}

static void test_bad_link_lists_are_refused_before_any_driver_call(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program_image apply = ptx_image("link_apply.ptx");
    curd_program_image links[CURD_PROGRAM_LINK_MAX + 1];
    for (size_t i = 0; i < G_N_ELEMENTS(links); i++)
        links[i] = ptx_image("link_mix.ptx");
    curd_program_desc desc =
        linked_desc(apply, NULL, 1, "curd_link_apply");
    expect_refused(device, &desc, CURD_E_INVALID_ARGUMENT,
                   "desc->link_images is NULL");
    desc = linked_desc(apply, links, 0, "curd_link_apply");
    expect_refused(device, &desc, CURD_E_INVALID_ARGUMENT,
                   "desc->link_count is 0");
    desc = linked_desc(apply, links, CURD_PROGRAM_LINK_MAX + 1,
                       "curd_link_apply");
    expect_refused(device, &desc, CURD_E_INVALID_ARGUMENT, "65");

    links[1] = image_of(NULL, 100);
    desc = linked_desc(apply, links, 2, "curd_link_apply");
    expect_refused(device, &desc, CURD_E_INVALID_ARGUMENT,
                   "desc->link_images[1]");
    links[1] = image_of(ptx_of("link_mix.ptx"), 0);
    expect_refused(device, &desc, CURD_E_INVALID_ARGUMENT,
                   "desc->link_images[1]");
    links[1] = image_of("GIF89a, not code", 16);
    expect_refused(device, &desc, CURD_E_PROGRAM, "desc->link_images[1]");
    /* A library whose one member runs past its end. */
    static const char short_archive[] =
        "!<arch>\n"
        "link_mix.o/     0           0     0     644     900       `\n"
        "only a few bytes";
    links[1] = image_of(short_archive, sizeof short_archive - 1);
    expect_refused(device, &desc, CURD_E_PROGRAM, "desc->link_images[1]");
    /* A library alone: the driver only links one. */
    links[1] = ptx_image("link_mix.ptx");
    static const char archive[] =
        "!<arch>\n"
        "link_mix.o/     0           0     0     644     4         `\n"
        "code";
    desc = linked_desc(image_of(archive, sizeof archive - 1), NULL, 0,
                       "curd_link_apply");
    expect_refused(device, &desc, CURD_E_PROGRAM, "desc->image is a library");
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A caller built before curd 1.1's list has a shorter desc: whatever lies
 * past its struct_size is not read, so nothing is linked, and link_apply
 * alone fails in the JIT (its curd_link_mix unresolved). */
static void test_a_desc_that_ends_before_the_list_links_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program_image mix;
    curd_program_desc desc = apply_with_mix(&mix);
    desc.struct_size = offsetof(curd_program_desc, link_images);
    curd_program *program = untouched_program;
    g_assert_cmpint(curd_program_load(device, &desc, &program), ==,
                    CURD_E_PROGRAM);
    g_test_message("%s", curd_last_error());
    g_assert_nonnull(strstr(curd_last_error(), "cuModuleLoadDataEx"));
    g_assert_nonnull(strstr(curd_last_error(), "curd_link_mix"));
    g_assert_true(program == untouched_program);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Links that work and links that fail
 * ---------------------------------------------------------------------- */
static void test_two_ptx_modules_link_and_run(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program_image mix;
    curd_program_desc desc = apply_with_mix(&mix);
    curd_program *program = load_ok(device, &desc);
    curd_program_props props;
    curd_test_poison(&props, sizeof props);
    props.struct_size = sizeof props;
    g_assert_cmpint(curd_program_info(program, &props), ==, CURD_OK);
    /* What the driver loaded is the linker's cubin. */
    g_assert_cmpint(props.image_kind, ==, CURD_IMAGE_CUBIN);
    g_assert_cmpuint(props.param_count_known ? props.param_count : 4, ==, 4);
    for (int run = 0; run < 3; run++)
        expect_link_apply_works(device, program);
    size_t log_len = 0;
    g_assert_cmpint(curd_program_log(program, NULL, 0, &log_len), ==,
                    CURD_OK);
    char *log = g_malloc(log_len + 1);
    g_assert_cmpint(curd_program_log(program, log, log_len + 1, NULL), ==,
                    CURD_OK);
    g_test_message("the linker's information log (%zu bytes): %s", log_len,
                   log);
    if (CURD_TEST_ON_FAKE)
        g_assert_nonnull(strstr(log, "linked 2 inputs"));
    g_free(log);
    g_assert_cmpint(curd_program_free(program), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_an_unresolved_function_fails_with_the_linkers_log(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curdi_program_counts before = counts_of(device);
    /* add_one defines no curd_link_mix. */
    curd_program_image other = ptx_image("add_one.ptx");
    curd_program_desc desc = linked_desc(ptx_image("link_apply.ptx"), &other,
                                         1, "curd_link_apply");
    curd_program *program = untouched_program;
    curd_status status = curd_program_load(device, &desc, &program);
    g_test_message("%s", curd_last_error());
    g_assert_cmpint(status, ==, CURD_E_PROGRAM);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "linker log"));
    g_assert_nonnull(strstr(curd_last_error(), "curd_link_mix"));
    g_assert_cmpint(curd_last_driver_code(), !=, 0);
    g_assert_true(program == untouched_program);
    /* Nothing was cached or counted. */
    curdi_program_counts after = counts_of(device);
    g_assert_cmpuint(after.misses, ==, before.misses);
    g_assert_cmpuint(after.modules_loaded, ==, before.modules_loaded);
    /* And loaded alone, without the list, the JIT refuses it too. */
    desc = linked_desc(ptx_image("link_apply.ptx"), NULL, 0,
                       "curd_link_apply");
    g_assert_cmpint(curd_program_load(device, &desc, &program), ==,
                    CURD_E_PROGRAM);
    g_assert_nonnull(strstr(curd_last_error(), "curd_link_mix"));
    g_assert_true(program == untouched_program);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * The module cache
 * ---------------------------------------------------------------------- */
/* Loads desc, expecting a hit (TRUE) or a miss; frees the program. */
static void expect_load(curd_device *device, const curd_program_desc *desc,
                        gboolean hit, const char *what)
{
    curdi_program_counts before = counts_of(device);
    long links_before = links_made();
    curd_test_faults_begin(0, 0, NULL);
    curd_program *program = NULL;
    curd_status status = curd_program_load(device, desc, &program);
    unsigned calls = curd_test_faults_end();
    if (status != CURD_OK)
        g_error("%s: %s: %s", what, curd_status_name(status),
                curd_last_error());
    curdi_program_counts after = counts_of(device);
    if (hit) {
        if (after.hits != before.hits + 1 || calls != 0)
            g_error("%s: expected a cache hit without a driver call, got "
                    "%" PRIu64 " hits more and %u driver calls",
                    what, after.hits - before.hits, calls);
    } else if (after.misses != before.misses + 1) {
        g_error("%s: expected a link (a cache miss); hits went from %" PRIu64
                " to %" PRIu64,
                what, before.hits, after.hits);
    }
    if (links_before >= 0)
        g_assert_cmpint(links_made(), ==, links_before + (hit ? 0 : 1));
    if (!hit)
        expect_link_apply_works(device, program);
    g_assert_cmpint(curd_program_free(program), ==, CURD_OK);
}

static void test_the_cache_key_covers_every_image_in_order(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.module_cache_count = 16;
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    curd_program_image apply = ptx_image("link_apply.ptx");
    curd_program_image mix = ptx_image("link_mix.ptx");
    curd_program_desc desc = linked_desc(apply, &mix, 1, "curd_link_apply");
    expect_load(device, &desc, FALSE, "apply + [mix]");
    expect_load(device, &desc, TRUE, "apply + [mix] again");
    /* The same images in the other order: another link. */
    curd_program_desc swapped = linked_desc(mix, &apply, 1, "curd_link_apply");
    expect_load(device, &swapped, FALSE, "mix + [apply]");
    expect_load(device, &swapped, TRUE, "mix + [apply] again");
    /* One image changed (a comment added): another link. */
    char *changed = g_strconcat(ptx_of("link_mix.ptx"),
                                "// changed by the test\n", NULL);
    curd_program_image changed_mix = image_of(changed, strlen(changed));
    curd_program_desc edited =
        linked_desc(apply, &changed_mix, 1, "curd_link_apply");
    expect_load(device, &edited, FALSE, "apply + [mix, one comment more]");
    /* The same list with another JIT option: another link. */
    curd_program_desc tuned = desc;
    tuned.jit_max_registers = 32;
    expect_load(device, &tuned, FALSE, "apply + [mix], 32 registers");
    /* And the first list is still cached. */
    expect_load(device, &desc, TRUE, "apply + [mix] at the end");
    g_assert_cmpuint(counts_of(device).modules_loaded, ==, 4);
    g_free(changed);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_jit_options_reach_the_link(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program_image mix;
    curd_program_desc desc = apply_with_mix(&mix);
    desc.flags = CURD_PROGRAM_OPTIMIZATION_LEVEL | CURD_PROGRAM_LINE_INFO;
    desc.jit_optimization_level = 1;
    desc.jit_max_registers = 24;
    curd_program *program = load_ok(device, &desc);
    curd_program_props props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    g_assert_cmpint(curd_program_info(program, &props), ==, CURD_OK);
    g_assert_cmpint(props.registers_per_thread, <=, 24);
    if (CURD_TEST_ON_FAKE) {
        char log[512];
        g_assert_cmpint(curd_program_log(program, log, sizeof log, NULL), ==,
                        CURD_OK);
        g_assert_nonnull(strstr(log, "optimization level 1, max registers "
                                     "24, target -1, line info 1"));
    }
    expect_link_apply_works(device, program);
    g_assert_cmpint(curd_program_free(program), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Libraries
 * ---------------------------------------------------------------------- */
/* On the stand-in: an archive of one member, link_mix's PTX (the stand-in
 * reads a library's members as text). */
static char *stand_in_library(size_t *out_bytes)
{
    const char *member = ptx_of("link_mix.ptx");
    size_t size = strlen(member);
    char header[96];
    snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n",
             "link_mix.o/", "0", "0", "0", "644", size);
    char *archive = g_strdup_printf("!<arch>\n%.60s%s%s", header, member,
                                    size % 2 != 0 ? "\n" : "");
    *out_bytes = strlen(archive);
    return archive;
}

/* On a GPU: the CUDA toolkit's device runtime library, where there is
 * one; NULL otherwise. */
static char *device_runtime_library(size_t *out_bytes, char **out_path)
{
    const char *home = g_getenv("CUDA_HOME");
    char *candidates[] = {
        home != NULL ? g_build_filename(home, "lib64", "libcudadevrt.a", NULL)
                     : NULL,
        g_strdup("/usr/local/cuda/lib64/libcudadevrt.a"),
        g_strdup("/usr/lib/x86_64-linux-gnu/libcudadevrt.a"),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(candidates); i++) {
        gsize len = 0;
        if (found == NULL && candidates[i] != NULL &&
            g_file_get_contents(candidates[i], &found, &len, NULL)) {
            *out_bytes = len;
            *out_path = g_strdup(candidates[i]);
        }
        g_free(candidates[i]);
    }
    return found;
}

static void test_a_library_links_with_the_code_that_calls_it(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    size_t library_bytes = 0;
    char *path = NULL;
    char *library = CURD_TEST_ON_FAKE
                        ? stand_in_library(&library_bytes)
                        : device_runtime_library(&library_bytes, &path);
    if (library == NULL) {
        g_test_skip("no libcudadevrt.a in $CUDA_HOME/lib64, "
                    "/usr/local/cuda/lib64 or /usr/lib/x86_64-linux-gnu:"
                    " a library link needs a device-code library");
        g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
        return;
    }
    /* On the stand-in the library defines curd_link_mix; on a GPU the
     * device runtime joins a link that link_mix completes. */
    curd_program_image links[2] = {
        image_of(library, library_bytes),
        ptx_image("link_mix.ptx"),
    };
    curd_program_desc desc =
        linked_desc(ptx_image("link_apply.ptx"), links,
                    CURD_TEST_ON_FAKE ? 1 : 2, "curd_link_apply");
    g_test_message("linking link_apply.ptx with %s (%zu bytes)%s",
                   CURD_TEST_ON_FAKE ? "an archive of link_mix.ptx" : path,
                   library_bytes,
                   CURD_TEST_ON_FAKE ? "" : " and link_mix.ptx");
    curd_program *program = load_ok(device, &desc);
    expect_link_apply_works(device, program);
    g_assert_cmpint(curd_program_free(program), ==, CURD_OK);
    g_free(library);
    g_free(path);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    static const struct {
        const char *path;
        void (*body)(void);
    } tests[] = {
        {"/desc-init-leaves-nothing-to-link",
         test_desc_init_leaves_nothing_to_link},
        {"/bad-link-lists-are-refused-before-any-driver-call",
         test_bad_link_lists_are_refused_before_any_driver_call},
        {"/a-desc-that-ends-before-the-list-links-nothing",
         test_a_desc_that_ends_before_the_list_links_nothing},
        {"/two-ptx-modules-link-and-run", test_two_ptx_modules_link_and_run},
        {"/an-unresolved-function-fails-with-the-linkers-log",
         test_an_unresolved_function_fails_with_the_linkers_log},
        {"/the-cache-key-covers-every-image-in-order",
         test_the_cache_key_covers_every_image_in_order},
        {"/jit-options-reach-the-link", test_jit_options_reach_the_link},
        {"/a-library-links-with-the-code-that-calls-it",
         test_a_library_links_with_the_code_that_calls_it},
    };
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; i < G_N_ELEMENTS(tests); i++) {
        char *path = g_strconcat(CURD_TEST_ON_FAKE ? "/program-link-fake"
                                                   : "/program-link",
                                 tests[i].path, NULL);
        g_ptr_array_add(paths, path);
        g_test_add_data_func(path, (gconstpointer)(uintptr_t)tests[i].body,
                             run_test);
    }
    int result = g_test_run();
    g_ptr_array_free(paths, TRUE);
    return result;
}
