/* test-interop.c - curd's work ordered with a caller's own CUDA work, both
 * ways, with no host wait: curd_device_wait_stream and _wait_event (curd
 * waits for the caller), curd_pending_stream_wait and curd_pending_event
 * (the caller waits for curd), and curd's work enqueued on the caller's
 * stream (curd_launch.cu_stream, curd_batch_options.cu_stream); and the
 * caller's device memory as a curd_buffer (curd_buffer_import).
 *
 * The caller here is what another library would be: it retains the
 * primary context itself, creates its own stream and launches add_one
 * (tests/kernels/) with cuLaunchKernel, through the driver table curd
 * loaded. Each test runs many launches on one side before the other side
 * reads or adds, so that on a GPU a missing order shows as wrong words.
 *
 * Every test opens device 0 or skips with the reason; in its stand-in
 * twin test-interop-fake (CURD_TEST_ON_FAKE, tests/README.md) the
 * stand-in libcuda (tests/fake/) runs every test, with two devices for
 * the test of a stream of another context, and its held events for the
 * test that curd stops waiting once the caller's work completed. */
#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "dispatch-test.h"
#include "driver/driver.h"
#include "launch/program.h"
#include "support/curd-test.h"
#include "support/fake-live.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/interop-fake"
#else
#define PATH_ROOT "/interop"
#endif

/* Launches on one side before the other side looks: long enough on a
 * GPU that the other side would overtake them if nothing ordered it. */
#define LAUNCHES 64u
#define WORDS (1u << 20)

/* ------------------------------------------------------------------------
 * The caller: its own retain of the primary context, its own stream.
 * ---------------------------------------------------------------------- */
typedef struct caller {
    const curdi_driver *driver;
    curdi_cu_device cu_device;
    curdi_cu_context context;
    curdi_cu_stream stream;
} caller;

static void caller_push(const caller *c)
{
    g_assert_cmpint(c->driver->cuCtxPushCurrent(c->context), ==, 0);
}

static void caller_pop(const caller *c)
{
    curdi_cu_context popped = NULL;
    g_assert_cmpint(c->driver->cuCtxPopCurrent(&popped), ==, 0);
}

/* The caller of GPU `ordinal` (curd has loaded the driver by then). */
static caller caller_begin(int ordinal)
{
    caller c = {.driver = curdi_driver_get()};
    g_assert_nonnull(c.driver);
    g_assert_cmpint(c.driver->cuDeviceGet(&c.cu_device, ordinal), ==, 0);
    g_assert_cmpint(c.driver->cuDevicePrimaryCtxRetain(&c.context,
                                                       c.cu_device),
                    ==, 0);
    caller_push(&c);
    g_assert_cmpint(c.driver->cuStreamCreate(&c.stream,
                                             CURDI_CU_STREAM_NON_BLOCKING),
                    ==, 0);
    caller_pop(&c);
    return c;
}

static void caller_sync(const caller *c)
{
    caller_push(c);
    g_assert_cmpint(c->driver->cuStreamSynchronize(c->stream), ==, 0);
    caller_pop(c);
}

static void caller_end(caller *c)
{
    caller_push(c);
    g_assert_cmpint(c->driver->cuStreamSynchronize(c->stream), ==, 0);
    g_assert_cmpint(c->driver->cuStreamDestroy(c->stream), ==, 0);
    caller_pop(c);
    g_assert_cmpint(c->driver->cuDevicePrimaryCtxRelease(c->cu_device), ==,
                    0);
}

/* add_one over the buffer's words, `launches` times, on the caller's
 * stream (the kernel's function from curd's program, as a library that
 * loaded the same PTX would have its own). */
static void caller_add_one(const caller *c, const curd_program *program,
                           curd_device *device, curd_buffer buffer,
                           uint32_t launches)
{
    uint64_t device_ptr = 0;
    check_ok(curd_buffer_device_ptr(device, buffer, &device_ptr),
             "curd_buffer_device_ptr");
    uint32_t n = WORDS;
    void *params[] = {&device_ptr, &n};
    caller_push(c);
    for (uint32_t i = 0; i < launches; i++)
        g_assert_cmpint(c->driver->cuLaunchKernel(
                            curdi_program_function(program), WORDS / 256u, 1,
                            1, 256, 1, 1, 0, c->stream, params, NULL),
                        ==, 0);
    caller_pop(c);
}

/* A resident buffer of WORDS random words; *out_model their copy. */
static curd_buffer words_buffer(curd_device *device, uint32_t **out_model)
{
    uint32_t *words = random_words(WORDS);
    curd_buffer buffer = upload_new(device, words, WORDS * sizeof *words);
    *out_model = words;
    return buffer;
}

/* The buffer holds the model plus `added` in every word. */
static void assert_added(curd_device *device, curd_buffer buffer,
                         const uint32_t *model, uint32_t added,
                         const char *what)
{
    uint32_t *got = g_new(uint32_t, WORDS);
    uint32_t *want = g_new(uint32_t, WORDS);
    curd_test_poison(got, WORDS * sizeof *got);
    for (uint32_t i = 0; i < WORDS; i++)
        want[i] = model[i] + added;
    check_ok(curd_buffer_download(device, buffer, got, WORDS * sizeof *got),
             "curd_buffer_download");
    assert_words(got, want, WORDS, what);
    g_free(want);
    g_free(got);
}

/* What most tests stand on: device 0, add_one, a buffer of WORDS random
 * words (model: their copy) and the caller of GPU 0. False when the test
 * skips (no GPU). */
typedef struct scene {
    curd_device *device;
    curd_program *program;
    uint32_t *model;
    curd_buffer buffer;
    caller c;
} scene;

static gboolean scene_begin(scene *s)
{
    s->device = curd_test_gpu_open();
    if (s->device == NULL)
        return FALSE;
    s->program = load(s->device, "add_one.ptx", "curd_add_one");
    s->buffer = words_buffer(s->device, &s->model);
    s->c = caller_begin(0);
    return TRUE;
}

static void scene_end(scene *s)
{
    caller_end(&s->c);
    g_free(s->model);
    check_ok(curd_buffer_free(s->device, s->buffer), "curd_buffer_free");
    check_ok(curd_program_free(s->program), "curd_program_free");
    check_ok(curd_device_close(s->device), "curd_device_close");
}

/* A dispatch of add_one over the buffer, `iterations` times, in flight. */
static curd_pending *curd_add_one_async(curd_device *device,
                                        const curd_program *program,
                                        curd_buffer buffer,
                                        uint32_t iterations)
{
    uint32_t n = WORDS;
    curd_launch launch = launch_over(n, 256);
    launch.iterations = iterations;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(device, program, &launch, args, 2, &pending),
             "curd_dispatch_async");
    return pending;
}

/* add_one over fresh borrowed words by a synchronous dispatch on
 * cu_stream: every word comes back plus one. */
static void add_one_on_stream(curd_device *device,
                              const curd_program *program, void *cu_stream)
{
    uint32_t n = 4099;
    uint32_t *data = random_words(n);
    uint32_t *want = g_memdup2(data, n * sizeof *data);
    for (uint32_t i = 0; i < n; i++)
        want[i] += 1u;
    curd_launch launch = launch_over(n, 256);
    launch.cu_stream = cu_stream;
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, data, n * sizeof *data),
                       curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_dispatch(device, program, &launch, args, 2),
             "curd_dispatch on the caller's stream");
    assert_words(data, want, n, "add_one, borrowed, on the caller's stream");
    g_free(data);
    g_free(want);
}

/* ------------------------------------------------------------------------
 * curd after the caller
 * ---------------------------------------------------------------------- */
static void test_curd_waits_for_the_callers_stream(void)
{
    scene s;
    if (!scene_begin(&s))
        return;
    caller_add_one(&s.c, s.program, s.device, s.buffer, LAUNCHES);
    check_ok(curd_device_wait_stream(s.device, s.c.stream),
             "curd_device_wait_stream");
    /* The download starts after the caller's launches, with no host wait
     * of the caller's. */
    assert_added(s.device, s.buffer, s.model, LAUNCHES,
                 "after the caller's stream");
    scene_end(&s);
}

/* The event as it was recorded when curd was told: recording it again
 * later (on an idle stream, so it completes at once) does not let curd's
 * work start before the launches it marked. */
static void test_curd_waits_for_the_callers_event_as_recorded_then(void)
{
    scene s;
    if (!scene_begin(&s))
        return;
    curdi_cu_event event = NULL;
    curdi_cu_stream idle = NULL;
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventCreate(&event,
                                            CURDI_CU_EVENT_DISABLE_TIMING),
                    ==, 0);
    g_assert_cmpint(s.c.driver->cuStreamCreate(&idle,
                                             CURDI_CU_STREAM_NON_BLOCKING),
                    ==, 0);
    caller_pop(&s.c);
    caller_add_one(&s.c, s.program, s.device, s.buffer, LAUNCHES);
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventRecord(event, s.c.stream), ==, 0);
    caller_pop(&s.c);
    check_ok(curd_device_wait_event(s.device, event),
             "curd_device_wait_event");
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventRecord(event, idle), ==, 0);
    caller_pop(&s.c);
    assert_added(s.device, s.buffer, s.model, LAUNCHES,
                 "after the caller's event");
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuStreamDestroy(idle), ==, 0);
    g_assert_cmpint(s.c.driver->cuEventDestroy(event), ==, 0);
    caller_pop(&s.c);
    scene_end(&s);
}

/* ------------------------------------------------------------------------
 * The caller after curd
 * ---------------------------------------------------------------------- */
/* curd adds LAUNCHES, the caller's stream waits (by `through_event`: the
 * pending's end event, which the caller waits on itself; else
 * curd_pending_stream_wait) and adds one more: every word is up by
 * LAUNCHES + 1 only if the caller's launch came after all of curd's. */
static void caller_after_a_dispatch(gboolean through_event)
{
    scene s;
    if (!scene_begin(&s))
        return;
    curd_pending *pending =
        curd_add_one_async(s.device, s.program, s.buffer, LAUNCHES);
    if (through_event) {
        void *event = NULL;
        check_ok(curd_pending_event(pending, &event), "curd_pending_event");
        g_assert_nonnull(event);
        caller_push(&s.c);
        g_assert_cmpint(s.c.driver->cuStreamWaitEvent(
                            s.c.stream, (curdi_cu_event)event, 0),
                        ==, 0);
        caller_pop(&s.c);
    } else {
        check_ok(curd_pending_stream_wait(pending, s.c.stream),
                 "curd_pending_stream_wait");
    }
    caller_add_one(&s.c, s.program, s.device, s.buffer, 1);
    caller_sync(&s.c);
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    assert_added(s.device, s.buffer, s.model, LAUNCHES + 1u,
                 "the caller's launch after curd's");
    scene_end(&s);
}

static void test_the_callers_stream_waits_for_a_pending(void)
{
    caller_after_a_dispatch(FALSE);
}

static void test_a_pendings_end_event_orders_the_callers_stream(void)
{
    caller_after_a_dispatch(TRUE);
}

/* ------------------------------------------------------------------------
 * curd's work on the caller's stream
 * ---------------------------------------------------------------------- */
/* The caller adds LAUNCHES, an asynchronous dispatch on its stream adds
 * one (ordered by the stream alone: no wait was asked for), the caller
 * adds one more after it; the caller synchronises its stream, then the
 * pending's wait has nothing left to wait for. A synchronous dispatch of
 * borrowed memory on the stream comes back right too. */
static void test_a_dispatch_runs_on_the_callers_stream(void)
{
    scene s;
    if (!scene_begin(&s))
        return;
    caller_add_one(&s.c, s.program, s.device, s.buffer, LAUNCHES);
    uint32_t n = WORDS;
    curd_launch launch = launch_over(n, 256);
    launch.cu_stream = s.c.stream;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, s.buffer),
                       curd_arg_scalar(&n, sizeof n)};
    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(s.device, s.program, &launch, args, 2,
                                 &pending),
             "curd_dispatch_async on the caller's stream");
    caller_add_one(&s.c, s.program, s.device, s.buffer, 1);
    caller_sync(&s.c);
    int ready = 0;
    check_ok(curd_pending_ready(pending, &ready), "curd_pending_ready");
    g_assert_cmpint(ready, ==, 1);
    /* The caller times its own stream: curd records no timed event
     * there, so the device time is 0 and the wall time is there. */
    curd_timing timing = {.struct_size = sizeof timing};
    check_ok(curd_pending_wait(pending, &timing), "curd_pending_wait");
    g_assert_cmpuint(timing.device_ns, ==, 0);
    g_assert_cmpuint(timing.wall_ns, >, 0);
    check_ok(curd_pending_free(pending), "curd_pending_free");
    assert_added(s.device, s.buffer, s.model, LAUNCHES + 2u,
                 "a dispatch between the caller's launches");
    add_one_on_stream(s.device, s.program, s.c.stream);
    scene_end(&s);
}

/* A batch made with the caller's stream runs there, streamed or as a
 * graph (captured on it, then replayed), between the caller's launches. */
static void batch_on_the_callers_stream(uint32_t flags)
{
    scene s;
    if (!scene_begin(&s))
        return;
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    options.cu_stream = s.c.stream;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(s.device, &options, &batch), "curd_batch_new");
    uint32_t n = WORDS;
    curd_launch launch = launch_over(n, 256);
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, s.buffer),
                       curd_arg_scalar(&n, sizeof n)};
    size_t item = 0;
    check_ok(curd_batch_launch(batch, s.program, &launch, args, 2, &item),
             "curd_batch_launch");
    for (int run = 0; run < 2; run++) {
        caller_add_one(&s.c, s.program, s.device, s.buffer, LAUNCHES);
        curd_pending *pending = NULL;
        check_ok(curd_batch_run_async(batch, &pending),
                 "curd_batch_run_async on the caller's stream");
        caller_add_one(&s.c, s.program, s.device, s.buffer, 1);
        caller_sync(&s.c);
        check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
        check_ok(curd_pending_free(pending), "curd_pending_free");
    }
    /* A synchronous run there waits for its own end event. */
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
    assert_added(s.device, s.buffer, s.model, 2u * (LAUNCHES + 2u) + 1u,
                 "batch runs between the caller's launches");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    scene_end(&s);
}

static void test_a_streamed_batch_runs_on_the_callers_stream(void)
{
    batch_on_the_callers_stream(0);
}

static void test_a_graph_batch_runs_on_the_callers_stream(void)
{
    batch_on_the_callers_stream(CURD_BATCH_GRAPH);
}

/* A caller built against curd 1.0 passes a curd_launch that ends
 * before cu_stream: accepted, on curd's own stream. */
static void test_a_curd_1_0_launch_still_runs(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = 4099;
    uint32_t *data = random_words(n);
    uint32_t *want = g_memdup2(data, n * sizeof *data);
    for (uint32_t i = 0; i < n; i++)
        want[i] += 1u;
    curd_launch launch = launch_over(n, 256);
    launch.struct_size = offsetof(curd_launch, cu_stream);
    launch.cu_stream = (void *)&launch; /* past its struct_size: unread */
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, data, n * sizeof *data),
                       curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_dispatch(device, program, &launch, args, 2),
             "curd_dispatch with curd 1.0's curd_launch");
    assert_words(data, want, n, "add_one, curd 1.0's launch");
    g_free(data);
    g_free(want);
    check_ok(curd_program_free(program), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A batch's launch takes no stream of its own. */
static void test_a_batch_launch_naming_a_stream_is_refused(void)
{
    scene s;
    if (!scene_begin(&s))
        return;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(s.device, NULL, &batch), "curd_batch_new");
    uint32_t n = WORDS;
    curd_launch launch = launch_over(n, 256);
    launch.cu_stream = s.c.stream;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, s.buffer),
                       curd_arg_scalar(&n, sizeof n)};
    size_t item = 99;
    g_assert_cmpint(curd_batch_launch(batch, s.program, &launch, args, 2,
                                      &item),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpuint(item, ==, 99);
    check_ok(curd_batch_free(batch), "curd_batch_free");
    scene_end(&s);
}

/* ------------------------------------------------------------------------
 * Bad input
 * ---------------------------------------------------------------------- */
static void test_a_stream_of_another_context_is_refused(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    /* A stream of another context: device 1's. */
    if (!curd_test_have_gpus(2)) {
        check_ok(curd_device_close(device), "curd_device_close");
        return;
    }
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    uint32_t *model = NULL;
    curd_buffer buffer = words_buffer(device, &model);
    caller other = caller_begin(1);
    g_assert_cmpint(curd_device_wait_stream(device, other.stream), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "another CUDA context"));
    curd_pending *pending = curd_add_one_async(device, program, buffer, 1);
    g_assert_cmpint(curd_pending_stream_wait(pending, other.stream), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    /* Nor does a dispatch or a batch run go there. */
    uint32_t n = WORDS;
    curd_launch launch = launch_over(n, 256);
    launch.cu_stream = other.stream;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    g_assert_cmpint(curd_dispatch(device, program, &launch, args, 2), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.cu_stream = other.stream;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(device, &options, &batch), "curd_batch_new");
    launch.cu_stream = NULL;
    size_t item = 0;
    check_ok(curd_batch_launch(batch, program, &launch, args, 2, &item),
             "curd_batch_launch");
    g_assert_cmpint(curd_batch_run(batch, NULL), ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    check_ok(curd_batch_free(batch), "curd_batch_free");
    /* Refused, the pending is as it was: it completes with its words. */
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    assert_added(device, buffer, model, 1, "after the refused calls");
    caller_end(&other);
    g_free(model);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    check_ok(curd_program_free(program), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A freed pending is refused by every call that takes one, without
 * being read (Valgrind would see a read of freed memory). */
static void test_a_freed_pending_is_refused(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    uint32_t *model = NULL;
    curd_buffer buffer = words_buffer(device, &model);
    curd_pending *pending = curd_add_one_async(device, program, buffer, 1);
    check_ok(curd_pending_free(pending), "curd_pending_free");
    void *event = NULL;
    int ready = -1;
    g_assert_cmpint(curd_pending_stream_wait(pending, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "not live"));
    g_assert_cmpint(curd_pending_event(pending, &event), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_null(event);
    g_assert_cmpint(curd_pending_ready(pending, &ready), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(ready, ==, -1);
    g_assert_cmpint(curd_pending_wait(pending, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_device_wait_event(device, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_free(model);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    check_ok(curd_program_free(program), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Imported memory
 * ---------------------------------------------------------------------- */
/* byte_len bytes of device memory the caller allocates itself. */
static curdi_cu_deviceptr caller_alloc(const caller *c, size_t byte_len)
{
    curdi_cu_deviceptr device_ptr = 0;
    caller_push(c);
    g_assert_cmpint(c->driver->cuMemAlloc(&device_ptr, byte_len), ==, 0);
    caller_pop(c);
    return device_ptr;
}

static void caller_free(const caller *c, curdi_cu_deviceptr device_ptr)
{
    caller_push(c);
    g_assert_cmpint(c->driver->cuMemFree(device_ptr), ==, 0);
    caller_pop(c);
}

/* The caller's allocation, imported from an offset on: uploaded into,
 * dispatched on, read back by a batch and a download, and the caller's
 * own read sees curd's bytes; it counts only as imported bytes, freeing
 * it forgets it (the caller frees the memory), and a free while a
 * dispatch on it is in flight is refused. */
static void test_imported_memory_is_a_buffer_like_any_other(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    caller c = caller_begin(0);
    const size_t offset = 256;
    const size_t byte_len = WORDS * sizeof(uint32_t);
    curdi_cu_deviceptr memory = caller_alloc(&c, offset + byte_len);
    curd_stats before = curd_test_device_stats(device);
    curd_buffer buffer;
    check_ok(curd_buffer_import(device, memory + offset, byte_len, &buffer),
             "curd_buffer_import");
    curd_stats imported = curd_test_device_stats(device);
    g_assert_cmpuint(imported.imported_bytes, ==, byte_len);
    g_assert_cmpuint(imported.resident_bytes.current, ==,
                     before.resident_bytes.current);
    g_assert_cmpuint(imported.device_pool.live_bytes.current, ==,
                     before.device_pool.live_bytes.current);
    uint64_t device_ptr = 0;
    check_ok(curd_buffer_device_ptr(device, buffer, &device_ptr),
             "curd_buffer_device_ptr");
    g_assert_cmpuint(device_ptr, ==, memory + offset);

    uint32_t *model = random_words(WORDS);
    check_ok(curd_buffer_upload(device, buffer, model, byte_len),
             "curd_buffer_upload");
    curd_pending *pending = curd_add_one_async(device, program, buffer, 3);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_BUSY);
    curd_test_assert_fix_sentence();
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");

    uint32_t *got = g_new(uint32_t, WORDS);
    uint32_t *want = g_new(uint32_t, WORDS);
    for (uint32_t i = 0; i < WORDS; i++)
        want[i] = model[i] + 3u;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(device, NULL, &batch), "curd_batch_new");
    curd_test_poison(got, byte_len);
    check_ok(curd_batch_download_range(batch, buffer, 0, byte_len, got,
                                       byte_len),
             "curd_batch_download_range");
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
    assert_words(got, want, WORDS, "a batch's download of imported memory");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    curd_test_poison(got, byte_len);
    caller_push(&c);
    g_assert_cmpint(c.driver->cuMemcpyDtoH(got, memory + offset, byte_len),
                    ==, 0);
    caller_pop(&c);
    assert_words(got, want, WORDS, "the caller's own read");

    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, 4), ==,
                    CURD_E_STALE_HANDLE);
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(after.imported_bytes, ==, 0);
    g_assert_cmpuint(after.resident_bytes.freed, ==,
                     before.resident_bytes.freed);
    caller_free(&c, memory);
    caller_end(&c);
    g_free(got);
    g_free(want);
    g_free(model);
    check_ok(curd_program_free(program), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* What is not device memory of this device, whole in one allocation, is
 * refused, with nothing imported. */
static void test_an_import_that_is_not_this_devices_memory_is_refused(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    caller c = caller_begin(0);
    const size_t byte_len = 4096;
    curdi_cu_deviceptr memory = caller_alloc(&c, byte_len);
    curd_buffer buffer = {.id = 7};
    unsigned char *host = g_malloc(byte_len);
    g_assert_cmpint(curd_buffer_import(device, (uint64_t)(uintptr_t)host,
                                       byte_len, &buffer),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_buffer_import(device, memory + 16, byte_len, &buffer),
                    ==, CURD_E_RANGE);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_buffer_import(device, memory, 0, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_buffer_import(device, memory, UINT64_MAX, &buffer),
                    ==, CURD_E_OVERFLOW);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_buffer_import(device, 0, byte_len, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_buffer_import(device, memory, byte_len, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    int count = 0;
    check_ok(curd_device_count(&count), "curd_device_count");
    if (count >= 2) {
        caller other = caller_begin(1);
        curdi_cu_deviceptr theirs = caller_alloc(&other, byte_len);
        g_assert_cmpint(curd_buffer_import(device, theirs, byte_len, &buffer),
                        ==, CURD_E_INVALID_ARGUMENT);
        curd_test_assert_fix_sentence();
        g_assert_nonnull(strstr(curd_last_error(), "memory of device 1"));
        caller_free(&other, theirs);
        caller_end(&other);
    }
    g_assert_cmpuint(buffer.id, ==, 7);
    g_assert_cmpuint(curd_test_device_stats(device).imported_bytes, ==, 0);
    g_free(host);
    caller_free(&c, memory);
    caller_end(&c);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Asynchronous downloads
 * ---------------------------------------------------------------------- */
/* Into a registered range, after an asynchronous upload of the same
 * bytes, and into a pinned block: the bytes land by the wait, the buffer
 * and the registration stay busy until then, and it counts as a
 * download does. Pageable memory and a range past the buffer are
 * refused. */
static void test_an_asynchronous_download_lands_in_page_locked_memory(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t byte_len = WORDS * sizeof(uint32_t);
    const size_t offset = 4096;
    const size_t part = byte_len - 2 * offset;
    uint32_t *model = random_words(WORDS);
    curd_buffer buffer;
    check_ok(curd_buffer_alloc(device, byte_len, &buffer),
             "curd_buffer_alloc");
    curd_block staged;
    check_ok(curd_block_acquire(device, CURD_POOL_PINNED, byte_len, &staged),
             "curd_block_acquire");
    memcpy(staged.host_ptr, model, byte_len);
    check_ok(curd_buffer_upload_async(device, buffer, 0, staged.host_ptr,
                                      byte_len),
             "curd_buffer_upload_async");
    unsigned char *registered = g_malloc(part);
    curd_test_poison(registered, part);
    check_ok(curd_host_register(device, registered, part),
             "curd_host_register");
    curd_stats before = curd_test_device_stats(device);
    curd_pending *pending = NULL;
    check_ok(curd_buffer_download_async(device, buffer, offset, registered,
                                        part, &pending),
             "curd_buffer_download_async");
    g_assert_cmpint(curd_host_unregister(device, registered), ==,
                    CURD_E_BUSY);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_BUSY);
    curd_timing timing = {.struct_size = sizeof timing};
    check_ok(curd_pending_wait(pending, &timing), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    g_assert_true(memcmp(registered, (unsigned char *)model + offset, part)
                  == 0);
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, part);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(after.fences - before.fences, ==, 1);
    check_ok(curd_device_sync_uploads(device), "curd_device_sync_uploads");
    check_ok(curd_host_unregister(device, registered),
             "curd_host_unregister");

    /* Into a pinned block, and the caller's stream after it. */
    memset(staged.host_ptr, 0, byte_len);
    caller c = caller_begin(0);
    check_ok(curd_buffer_download_async(device, buffer, 0, staged.host_ptr,
                                        byte_len, &pending),
             "curd_buffer_download_async into a pinned block");
    check_ok(curd_pending_stream_wait(pending, c.stream),
             "curd_pending_stream_wait");
    caller_sync(&c);
    check_ok(curd_pending_free(pending), "curd_pending_free");
    g_assert_true(memcmp(staged.host_ptr, model, byte_len) == 0);
    caller_end(&c);

    /* Refused: pageable memory, a range past the buffer, no bytes; none
     * counts anything. */
    curd_stats pre = curd_test_device_stats(device);
    g_assert_cmpint(curd_buffer_download_async(device, buffer, 0, registered,
                                               part, &pending),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "page-locked"));
    g_assert_cmpint(curd_buffer_download_async(device, buffer, 8,
                                               staged.host_ptr, byte_len,
                                               &pending),
                    ==, CURD_E_RANGE);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_buffer_download_async(device, buffer, 0,
                                               staged.host_ptr, 0, &pending),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_stats refused = curd_test_device_stats(device);
    g_assert_cmpuint(refused.d2h_bytes, ==, pre.d2h_bytes);
    g_assert_cmpuint(refused.copy_ops, ==, pre.copy_ops);
    check_ok(curd_block_release(device, &staged), "curd_block_release");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(registered);
    g_free(model);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * The stand-in's held events: curd waits while the caller's work runs,
 * and stops once it saw its own work behind it complete.
 * ---------------------------------------------------------------------- */
static void hold_events(int hold)
{
    g_assert_true(fake_hold_events(hold));
}

static long fake_stream_waits(void)
{
    static const char *const kinds[] = {"stream_waits"};
    long count = -1;
    g_assert_true(curd_test_fake_live(kinds, 1, &count));
    return count;
}

static void test_waits_end_once_the_callers_work_completed(void)
{
    curd_device *device = curd_test_gpu_open();
    g_assert_nonnull(device);
    uint32_t *model = NULL;
    curd_buffer buffer = words_buffer(device, &model);
    caller c = caller_begin(0);
    hold_events(1);
    check_ok(curd_device_wait_stream(device, c.stream),
             "curd_device_wait_stream");
    long before = fake_stream_waits();
    /* The first transfer's stream waits for the caller's work; once that
     * transfer is seen complete, so is the caller's work before it. */
    assert_added(device, buffer, model, 0, "while the caller's work runs");
    g_assert_cmpint(fake_stream_waits() - before, ==, 1);
    g_assert_cmpuint(atomic_load(&device->wait_count), ==, 0);
    hold_events(0);
    before = fake_stream_waits();
    assert_added(device, buffer, model, 0, "after the caller's work");
    assert_added(device, buffer, model, 0, "after the caller's work");
    g_assert_cmpint(fake_stream_waits() - before, ==, 0);
    caller_end(&c);
    g_free(model);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A wait on a caller's event is taken by a pooled stream: the work right
 * after it goes on that stream, which waits on nothing more; work on
 * another stream meanwhile waits on curd's event; and once curd saw the
 * first stream's work complete, the entry is gone. */
static void test_a_wait_costs_the_next_work_on_its_stream_nothing(void)
{
    scene s;
    g_assert_true(scene_begin(&s));
    curdi_cu_event event = NULL;
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventCreate(&event,
                                              CURDI_CU_EVENT_DISABLE_TIMING),
                    ==, 0);
    caller_pop(&s.c);
    hold_events(1);
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventRecord(event, s.c.stream), ==, 0);
    caller_pop(&s.c);
    check_ok(curd_device_wait_event(s.device, event), "curd_device_wait_event");
    g_assert_cmpuint(atomic_load(&s.device->wait_count), ==, 1);
    long before = fake_stream_waits();
    /* The stream that took the wait: no wait of its own. */
    curd_pending *pending =
        curd_add_one_async(s.device, s.program, s.buffer, LAUNCHES);
    g_assert_cmpint(fake_stream_waits() - before, ==, 0);
    /* Another stream while it is busy: it waits on curd's event. */
    assert_added(s.device, s.buffer, s.model, LAUNCHES,
                 "while the caller's work runs");
    g_assert_cmpint(fake_stream_waits() - before, ==, 1);
    g_assert_cmpuint(atomic_load(&s.device->wait_count), ==, 1);
    hold_events(0);
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    /* Its stream's work seen complete: nothing is left to wait for. */
    g_assert_cmpuint(atomic_load(&s.device->wait_count), ==, 0);
    before = fake_stream_waits();
    assert_added(s.device, s.buffer, s.model, LAUNCHES,
                 "after the caller's work");
    g_assert_cmpint(fake_stream_waits() - before, ==, 0);
    caller_push(&s.c);
    g_assert_cmpint(s.c.driver->cuEventDestroy(event), ==, 0);
    caller_pop(&s.c);
    scene_end(&s);
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    /* A second GPU for the stream of another context; set before the
     * stand-in loads. */
    g_setenv("FAKE_CUDA_DEVICES", "2", TRUE);
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    g_test_add_func(PATH_ROOT "/curd-waits-for-the-callers-stream",
                    test_curd_waits_for_the_callers_stream);
    g_test_add_func(PATH_ROOT
                    "/curd-waits-for-the-callers-event-as-recorded-then",
                    test_curd_waits_for_the_callers_event_as_recorded_then);
    g_test_add_func(PATH_ROOT "/the-callers-stream-waits-for-a-pending",
                    test_the_callers_stream_waits_for_a_pending);
    g_test_add_func(PATH_ROOT
                    "/a-pendings-end-event-orders-the-callers-stream",
                    test_a_pendings_end_event_orders_the_callers_stream);
    g_test_add_func(PATH_ROOT "/a-dispatch-runs-on-the-callers-stream",
                    test_a_dispatch_runs_on_the_callers_stream);
    g_test_add_func(PATH_ROOT "/a-streamed-batch-runs-on-the-callers-stream",
                    test_a_streamed_batch_runs_on_the_callers_stream);
    g_test_add_func(PATH_ROOT "/a-graph-batch-runs-on-the-callers-stream",
                    test_a_graph_batch_runs_on_the_callers_stream);
    g_test_add_func(PATH_ROOT "/a-curd-1.0-launch-still-runs",
                    test_a_curd_1_0_launch_still_runs);
    g_test_add_func(PATH_ROOT "/a-batch-launch-naming-a-stream-is-refused",
                    test_a_batch_launch_naming_a_stream_is_refused);
    g_test_add_func(PATH_ROOT "/a-stream-of-another-context-is-refused",
                    test_a_stream_of_another_context_is_refused);
    g_test_add_func(PATH_ROOT "/a-freed-pending-is-refused",
                    test_a_freed_pending_is_refused);
    g_test_add_func(PATH_ROOT "/imported-memory-is-a-buffer-like-any-other",
                    test_imported_memory_is_a_buffer_like_any_other);
    g_test_add_func(PATH_ROOT
                    "/an-import-that-is-not-this-devices-memory-is-refused",
                    test_an_import_that_is_not_this_devices_memory_is_refused);
    g_test_add_func(PATH_ROOT
                    "/an-asynchronous-download-lands-in-page-locked-memory",
                    test_an_asynchronous_download_lands_in_page_locked_memory);
    /* The stand-in's alone: it holds the caller's events on request. */
    if (CURD_TEST_ON_FAKE) {
        g_test_add_func(PATH_ROOT "/waits-end-once-the-callers-work-completed",
                        test_waits_end_once_the_callers_work_completed);
        g_test_add_func(PATH_ROOT
                        "/a-wait-costs-the-next-work-on-its-stream-nothing",
                        test_a_wait_costs_the_next_work_on_its_stream_nothing);
    }
    return g_test_run();
}
