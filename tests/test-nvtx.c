/* test-nvtx.c - curd's work shows as NVTX ranges (lib/base/nvtx.h): an
 * upload, a download, a dispatch (with the kernel's name inside), an
 * asynchronous dispatch and its wait, a batch run, a graph batch's capture
 * and replays, a copy and a collective, each a range of the domain "curd"
 * on the calling thread, nested as the work is; with CURD_NVTX=0 none is
 * pushed and no tool is even loaded.
 *
 * The tool is the stand-in injection library tests/fake/nvtx-recorder.c,
 * which make tests builds beside this program and which NVTX loads from
 * NVTX_INJECTION64_PATH, as it loads Nsight Systems' own. NVTX and curd
 * decide once per process whether to listen, so each test runs in a
 * subprocess of its own with the environment it needs. Built twice: here
 * on a GPU (skips without one) and as test-nvtx-fake on the stand-in
 * driver and NCCL. */
#include <dlfcn.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/nvtx.h"
#include "curd.h"
#include "curd_comm.h"
#include "support/curd-test.h"
#include "support/kernel-load.h"

#define ELEMENTS 4096u
#define BYTES (ELEMENTS * sizeof(uint32_t))

static void check_ok(curd_status status, const char *call)
{
    if (status != CURD_OK)
        g_error("%s: %s: %s", call, curd_status_name(status),
                curd_last_error());
}

/* ------------------------------------------------------------------------
 * The recorder, as NVTX loaded it (NULL: not loaded)
 * ---------------------------------------------------------------------- */
typedef struct recorder {
    char *(*take)(void);
    long (*registrations)(void);
    long (*threads)(void);
    long (*curd_domains)(void);
} recorder;

/* The recorder if NVTX has loaded it (RTLD_NOLOAD loads nothing). */
static bool recorder_find(recorder *r)
{
    void *handle =
        dlopen(g_getenv("NVTX_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL)
        return false;
    *(void **)&r->take = dlsym(handle, "nvtx_recorder_take");
    *(void **)&r->registrations = dlsym(handle, "nvtx_recorder_registrations");
    *(void **)&r->threads = dlsym(handle, "nvtx_recorder_threads");
    *(void **)&r->curd_domains = dlsym(handle, "nvtx_recorder_curd_domains");
    g_assert_nonnull(r->take);
    g_assert_nonnull(r->curd_domains);
    g_assert_nonnull(r->registrations);
    g_assert_nonnull(r->threads);
    dlclose(handle); /* NVTX keeps its own reference */
    return true;
}

/* With ranges on: what the step pushed since the last step is want. With
 * them off: curd made no domain and pushed nothing. The tool may be
 * loaded all the same: NCCL, on a GPU, loads it for ranges of its own. */
static void expect(bool on, const char *step, const char *want)
{
    recorder r;
    bool loaded = recorder_find(&r);
    if (!on) {
#if CURD_TEST_ON_FAKE
        if (loaded) /* nothing else here uses NVTX */
            g_error("%s: CURD_NVTX=0, but NVTX loaded the tool", step);
#endif
        if (loaded && r.curd_domains() != 0)
            g_error("%s: CURD_NVTX=0, but curd made its NVTX domain", step);
        if (loaded) {
            char *got = r.take();
            if (got[0] != '\0')
                g_error("%s: CURD_NVTX=0, but curd pushed %s", step, got);
            free(got);
        }
        return;
    }
    if (!loaded)
        g_error("%s: NVTX did not load %s", step,
                g_getenv("NVTX_INJECTION64_PATH"));
    char *got = r.take();
    if (strcmp(got, want) != 0)
        g_error("%s: the ranges pushed were\n  %s\nnot\n  %s", step, got,
                want);
    free(got);
}

/* ------------------------------------------------------------------------
 * The work
 * ---------------------------------------------------------------------- */
static curd_buffer buffer_new(curd_device *device)
{
    curd_buffer buffer;
    check_ok(curd_buffer_alloc(device, BYTES, &buffer), "curd_buffer_alloc");
    return buffer;
}

static void batch_runs(curd_device *device, curd_program *add_one,
                       const curd_arg *args, bool on)
{
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = ELEMENTS;
    launch.block[0] = 256;
    for (int graph = 0; graph <= 1; graph++) {
        curd_batch_options options;
        curd_batch_options_init(&options);
        options.flags = graph ? CURD_BATCH_GRAPH : 0u;
        curd_batch *batch = NULL;
        check_ok(curd_batch_new(device, &options, &batch), "curd_batch_new");
        check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
                 "curd_batch_launch");
        expect(on, "recording a batch", "");
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        expect(on, graph ? "a graph batch's first run" : "a batch run",
               graph ? "curd_batch_run{graph capture{curd_add_one{}}"
                       "graph replay{}}"
                     : "curd_batch_run{curd_add_one{}}");
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        expect(on,
               graph ? "a graph batch's second run" : "a batch's second run",
               graph ? "curd_batch_run{graph replay{}}"
                     : "curd_batch_run{curd_add_one{}}");
        check_ok(curd_batch_free(batch), "curd_batch_free");
    }
}

/* A one-rank all-reduce, where NCCL is there (the stand-in always is). */
static void collective_run(curd_device *device, curd_buffer send,
                           curd_buffer recv, bool on)
{
    curd_comm_id id;
    curd_status status = curd_comm_id_new(&id);
    if (status == CURD_E_UNSUPPORTED) {
        g_test_message("no NCCL, no collective: %s", curd_last_error());
        return;
    }
    check_ok(status, "curd_comm_id_new");
    curd_comm *comm = NULL;
    check_ok(curd_comm_open_all(&device, 1, NULL, &comm),
             "curd_comm_open_all");
    curd_collective op;
    memset(&op, 0, sizeof op);
    op.comm = comm;
    op.kind = CURD_COLLECTIVE_ALL_REDUCE;
    op.dtype = CURD_DTYPE_UINT32;
    op.op = CURD_REDUCE_SUM;
    op.send = send;
    op.recv = recv;
    op.count = ELEMENTS;
    check_ok(curd_collective_run(&op, 1), "curd_collective_run");
    expect(on, "a collective", "curd_collective_run{}");
    check_ok(curd_comm_close(comm), "curd_comm_close");
}

/* Every kind of work once (the uploads twice), each step checked. */
static void work(bool on)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = NULL;
    check_ok(
        curd_test_kernel_load(device, "add_one.ptx", "curd_add_one", &add_one),
        "curd_test_kernel_load");
    uint32_t *words = g_new0(uint32_t, ELEMENTS);
    curd_buffer a = buffer_new(device), b = buffer_new(device);

    check_ok(curd_buffer_upload(device, a, words, BYTES),
             "curd_buffer_upload");
    expect(on, "an upload", "curd_buffer_upload{}");
    recorder r;
    long registered = on && recorder_find(&r) ? r.registrations() : 0;
    check_ok(curd_buffer_upload(device, a, words, BYTES),
             "curd_buffer_upload");
    expect(on, "a second upload", "curd_buffer_upload{}");
    if (on)
        g_assert_cmpint(r.registrations(), ==, registered); /* once a site */

    check_ok(curd_buffer_download(device, a, words, BYTES),
             "curd_buffer_download");
    expect(on, "a download", "curd_buffer_download{}");

    uint32_t n = ELEMENTS;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, a),
                       curd_arg_scalar(&n, sizeof n)};
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = ELEMENTS;
    launch.block[0] = 256;
    check_ok(curd_dispatch(device, add_one, &launch, args, 2),
             "curd_dispatch");
    expect(on, "a dispatch", "curd_dispatch{curd_add_one{}}");

    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(device, add_one, &launch, args, 2, &pending),
             "curd_dispatch_async");
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    expect(on, "an asynchronous dispatch and its wait",
           "curd_dispatch_async{curd_add_one{}}curd_pending_wait{}");

    batch_runs(device, add_one, args, on);

    curd_copy copy = {b, 0, a, 0, BYTES};
    check_ok(curd_buffer_copy(device, device, &copy, 1), "curd_buffer_copy");
    expect(on, "a copy", "curd_buffer_copy{}");

    collective_run(device, a, b, on);

    if (on) {
        g_assert_true(recorder_find(&r));
        g_assert_cmpint(r.threads(), ==, 1); /* the calling thread's alone */
    }
    check_ok(curd_buffer_free(device, a), "curd_buffer_free");
    check_ok(curd_buffer_free(device, b), "curd_buffer_free");
    check_ok(curd_program_free(add_one), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
    g_free(words);
}

/* ------------------------------------------------------------------------
 * Tests
 * ---------------------------------------------------------------------- */
static void in_subprocess(void (*body)(void))
{
    if (g_test_subprocess()) {
        body();
        return;
    }
    /* No GPU: this test skips, saying why, rather than its subprocess. */
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    check_ok(curd_device_close(device), "curd_device_close");
    g_test_trap_subprocess(NULL, 0,
                           G_TEST_SUBPROCESS_INHERIT_STDOUT
                               | G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
}

static void ranges_on(void)
{
    g_unsetenv("CURD_NVTX");
    work(true);
}

static void ranges_off(void)
{
    g_setenv("CURD_NVTX", "0", TRUE);
    work(false);
}

static void test_every_kind_of_work_is_a_named_range(void)
{
    if (!CURDI_NVTX) {
        g_test_skip("built with NVTX=0: the ranges are compiled out");
        return;
    }
    in_subprocess(ranges_on);
}

static void test_curd_nvtx_0_pushes_nothing(void)
{
    in_subprocess(ranges_off);
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
#endif
    char *path = curd_test_path_beside("libnvtx-recorder.so");
    g_setenv("NVTX_INJECTION64_PATH", path, TRUE);
    g_free(path);
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/nvtx/every-kind-of-work-is-a-named-range",
                    test_every_kind_of_work_is_a_named_range);
    g_test_add_func("/nvtx/curd-nvtx-0-pushes-nothing",
                    test_curd_nvtx_0_pushes_nothing);
    return g_test_run();
}
