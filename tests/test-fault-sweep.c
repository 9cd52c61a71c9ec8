/* test-fault-sweep.c - every public function that reaches the driver, each
 * of its driver calls failed in turn (with a transient error and with a
 * fault that loses the context), and after each failure: a typed error,
 * every statistic at its baseline, no other buffer's bytes changed, no
 * driver object leaked, and a device that works (or, after
 * CURD_E_DEVICE_LOST, one that opens again and works). The entries and
 * the invariants are tests/support/api-ops.c and api-sweep.c (see
 * api-sweep.h); the last test prints how many fault points survived.
 *
 * Also: include/curd.h (with include/curd_comm.h, which it includes)
 * declares no function that is in neither the sweep's list nor its list
 * of functions that make no driver call, and the statistics rules name
 * every field of curd_stats.
 *
 * CURD_SWEEP_QUICK=1 injects only the transient failure (the sanitizer
 * runs on the GPU use it).
 *
 * Needs a GPU (skips with the reason otherwise); its stand-in
 * twin test-fault-sweep-fake (CURD_TEST_ON_FAKE, tests/README.md) runs it
 * on the stand-in driver (tests/fake/), where no skip is allowed and the
 * stand-in's live counts prove that nothing leaked. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "support/api-sweep.h"
#include "support/curd-test.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/fault-sweep-fake"
#else
#define PATH_ROOT "/fault-sweep"
#endif

static api_tally tally;
/* CURD_SWEEP_QUICK=1 (the GPU sanitizer runs) injects only the transient
 * failure: the context-losing one reopens the device after most of its
 * failures, which costs a context each on a GPU. */
static size_t results;
/* CURD_SWEEP_STRIDE=N fails every N-th call only (the first, then each N
 * calls on): racecheck and initcheck, which look at the kernels rather
 * than at the error paths, take the sweep's paths at a quarter of the
 * cost (tests/gpu/run-remote.sh). */
static unsigned stride = 1;
static unsigned entries_swept;
static char device_name[256]; /* the first world's */

static void glib_handler(const char *file, int line, const char *message)
{
    g_assertion_message(G_LOG_DOMAIN, file, line, "api-sweep", message);
    abort(); /* g_assertion_message returns under non-fatal assertions */
}

/* ------------------------------------------------------------------------
 * The header against the lists
 * ---------------------------------------------------------------------- */
/* One public header (include/<name>) from the source tree: the working
 * directory is the tree's root (make, tests/gpu/run-remote.sh), or the
 * program sits in BUILD/tests/ beneath it. */
static char *read_one_header(const char *name)
{
    char *text = NULL;
    char *here = g_build_filename("include", name, NULL);
    gboolean found = g_file_get_contents(here, &text, NULL, NULL);
    g_free(here);
    if (found)
        return text;
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_assert_nonnull(exe);
    char *dir = g_path_get_dirname(exe);
    char *path = g_build_filename(dir, "..", "..", "include", name, NULL);
    found = g_file_get_contents(path, &text, NULL, NULL);
    if (!found)
        g_error("include/%s is neither in the working directory nor"
                " at %s", name, path);
    g_free(path);
    g_free(dir);
    g_free(exe);
    return text;
}

/* The public API's text: include/curd.h and include/curd_comm.h, which
 * curd.h includes (the communicators and collectives). */
static char *read_header(void)
{
    char *main_header = read_one_header("curd.h");
    char *comm_header = read_one_header("curd_comm.h");
    char *text = g_strconcat(main_header, "\n", comm_header, NULL);
    g_free(main_header);
    g_free(comm_header);
    return text;
}

static bool swept(const char *function)
{
    for (size_t i = 0; i < api_op_count; i++)
        if (strcmp(api_ops[i].function, function) == 0)
            return true;
    return false;
}

static bool quiet(const char *function)
{
    for (size_t i = 0; i < api_quiet_function_count; i++)
        if (strcmp(api_quiet_functions[i].function, function) == 0)
            return true;
    return false;
}

static void test_every_public_function_is_swept_or_named_quiet(void)
{
    char *header = read_header();
    GRegex *declaration = g_regex_new(
        "^CURD_API\\s+[^;(]*?\\b(curd_\\w+)\\s*\\(",
        G_REGEX_MULTILINE, 0, NULL);
    GMatchInfo *match = NULL;
    GString *missing = g_string_new("");
    unsigned functions = 0;
    g_regex_match(declaration, header, 0, &match);
    for (; g_match_info_matches(match); g_match_info_next(match, NULL)) {
        char *function = g_match_info_fetch(match, 1);
        functions++;
        g_assert_false(swept(function) && quiet(function));
        if (!swept(function) && !quiet(function))
            g_string_append_printf(missing, " %s", function);
        g_free(function);
    }
    g_match_info_free(match);
    g_regex_unref(declaration);
    g_free(header);
    g_test_message("curd.h declares %u functions: %zu entries sweep the"
                   " ones that reach the driver, %zu make no driver call",
                   functions, api_op_count, api_quiet_function_count);
    g_assert_cmpuint(functions, >=, api_quiet_function_count + 20);
    if (missing->len != 0)
        g_error("curd.h declares functions in neither list of"
                " tests/support/api-ops.c:%s. Fix: add an entry to"
                " api_ops[] for each (setup, call, finish), or name it in"
                " api_quiet_functions[] with why it makes no driver call.",
                missing->str);
    g_string_free(missing, TRUE);
    /* And every name in the lists is one curd.h declares. */
    header = read_header();
    for (size_t i = 0; i < api_op_count; i++) {
        char *call = g_strconcat(api_ops[i].function, "(", NULL);
        g_assert_nonnull(strstr(header, call));
        g_free(call);
    }
    for (size_t i = 0; i < api_quiet_function_count; i++) {
        char *call = g_strconcat(api_quiet_functions[i].function, "(", NULL);
        g_assert_nonnull(strstr(header, call));
        g_free(call);
    }
    g_free(header);
}

static void test_the_statistics_rules_name_every_field(void)
{
    g_assert_true(api_stat_rules_cover_the_struct());
}

/* ------------------------------------------------------------------------
 * One entry, every driver call failed in turn
 * ---------------------------------------------------------------------- */
static void sweep_entry(gconstpointer data)
{
    const api_op *op = data;
    api_world world;
    uint64_t seed = ((uint64_t)g_test_rand_int() << 32) | g_test_rand_int();
    curd_status status = api_world_open(&world, seed);
    if (status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE) {
        /* curd_test_gpu_open words the skip (or the failure, where a GPU
         * is required). */
        g_assert_null(curd_test_gpu_open());
        return;
    }
    if (status != CURD_OK)
        g_error("opening the world: %s: %s", curd_status_name(status),
                curd_last_error());
    if (device_name[0] == '\0')
        g_strlcpy(device_name, curd_test_device_info(world.device).name,
                  sizeof device_name);
    curd_comm_id id;
    if (strncmp(op->function, "curd_comm", 9) == 0 ||
        strncmp(op->function, "curd_collective", 15) == 0) {
        if (curd_comm_id_new(&id) == CURD_E_UNSUPPORTED) {
            /* A GPU host without NCCL (the stand-in runs always have it). */
            g_test_skip_printf("no NCCL: %s", curd_last_error());
            api_world_close_checked(&world, &tally);
            return;
        }
    }
    unsigned before = tally.points;
    api_sweep_op(&world, op, results, stride, &tally);
    g_test_message("%s (%s): %u fault points", op->function, op->path,
                   tally.points - before);
    entries_swept++;
    api_world_close_checked(&world, &tally);
}

static void test_fault_points_survived(void)
{
    if (entries_swept == 0) {
        g_test_skip("no entry was swept (no GPU)");
        return;
    }
    unsigned functions = 0;
    for (size_t i = 0; i < api_op_count; i++)
        functions += i == 0 ||
                     strcmp(api_ops[i].function, api_ops[i - 1].function) != 0;
    g_test_message(
        "fault sweep on %s: %u fault points survived over %u entries of %u"
        " public"
        " functions that reach the driver: %u failed with a typed error (%u"
        " of them CURD_E_DEVICE_LOST, the device closed and opened again),"
        " %u succeeded; %u failed releases made again for the driver once"
        " curd had let go; %u failed context pushes left a released block"
        " with its context",
        device_name, tally.points, entries_swept, functions, tally.failed,
        tally.lost,
        tally.points - tally.failed, tally.released, tally.abandoning);
    if (stride > 1)
        g_test_message("(one driver and NCCL call of each %u failed:"
                       " CURD_SWEEP_STRIDE)", stride);
    g_assert_cmpuint(tally.points, >, entries_swept);
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
    /* Two stand-in devices, so that copies between devices are swept on
     * both of their routes (the world itself opens device 0). */
    g_setenv("FAKE_CUDA_DEVICES", "2", TRUE);
    /* Every join and split still runs for a few polls after its call, as
     * NCCL's init job does in its own thread: an open that fails then
     * must let it end before aborting (the stand-in counts the ones it
     * did not, which real NCCL leaks). */
    g_setenv("FAKE_NCCL_JOIN_POLLS", "3", TRUE);
#endif
    g_test_init(&argc, &argv, NULL);
    api_check_set_handler(glib_handler);
    const char *stride_text = g_getenv("CURD_SWEEP_STRIDE");
    if (stride_text != NULL && atoi(stride_text) > 0)
        stride = (unsigned)atoi(stride_text);
    results = g_strcmp0(g_getenv("CURD_SWEEP_QUICK"), "1") == 0
                  ? 1
                  : api_fault_result_count;
    g_test_add_func(PATH_ROOT "/every-public-function-is-swept-or-named-quiet",
                    test_every_public_function_is_swept_or_named_quiet);
    g_test_add_func(PATH_ROOT "/the-statistics-rules-name-every-field",
                    test_the_statistics_rules_name_every_field);
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; i < api_op_count; i++) {
        char *path = g_strdup_printf(PATH_ROOT "/%s/%s", api_ops[i].function,
                                     api_ops[i].path);
        g_ptr_array_add(paths, path);
        g_test_add_data_func(path, &api_ops[i], sweep_entry);
    }
    g_test_add_func(PATH_ROOT "/survived/fault-points",
                    test_fault_points_survived);
    int result = g_test_run();
    g_ptr_array_free(paths, TRUE);
    return result;
}
