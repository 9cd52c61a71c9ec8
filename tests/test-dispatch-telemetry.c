/* test-dispatch-telemetry.c - what curd_device_stats says about programs
 * and dispatches, and what CURD_TRACE writes for each dispatch.
 *
 * Known loads and dispatches, then exact counts: module cache hits,
 * misses, modules loaded and idle, evictions; dispatches and launches,
 * and timing sums equal to the sums of the curd_timing each wait
 * returned. A refused load or dispatch counts nothing; the reset zeroes
 * what is cumulative and keeps the levels. A caller built against curd
 * 1.0's smaller curd_stats gets its fields and nothing past them.
 *
 * Every test opens device 0 or skips with the reason.
 * In its stand-in twin test-dispatch-telemetry-fake (CURD_TEST_ON_FAKE,
 * tests/README.md) the stand-in libcuda runs every test
 * (its event timer reads 1 us per dispatch, which is checked too). */
#include <glib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch-test.h"
#include "support/curd-test.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/dispatch-telemetry-fake"
#else
#define PATH_ROOT "/dispatch-telemetry"
#endif

/* The stand-in's cuEventElapsedTime: 0.001 ms. */
#define FAKE_DEVICE_NS 1000u

/* curd_stats as curd 1.0 declared it: what an older caller passes. */
typedef struct stats_1_0 {
    size_t struct_size;
    curd_pool_stats device_pool;
    curd_pool_stats pinned_pool;
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t copy_ops;
    uint64_t fences;
    uint64_t fill_ops;
    uint64_t fill_bytes;
    curd_stat_family resident_bytes;
    curd_stat_family resident_buffers;
    uint64_t accounting_repairs;
} stats_1_0;
G_STATIC_ASSERT(sizeof(stats_1_0) == offsetof(curd_stats, module_cache_hits));

/* add_one_borrowed (dispatch-test.h) through curd_dispatch_async and a
 * wait that fills *timing: borrowed memory, or a resident buffer read
 * back whole. */
static void add_one_async(curd_device *device, curd_program *program,
                          uint32_t n, uint32_t iterations, gboolean resident,
                          curd_timing *timing)
{
    uint32_t *data = random_words(n);
    uint32_t *want = g_memdup2(data, n * sizeof *data);
    for (uint32_t i = 0; i < n; i++)
        want[i] += iterations;
    curd_buffer buffer = {0};
    curd_launch launch = launch_over(n, 256);
    launch.iterations = iterations;
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, data, n * sizeof *data),
                       curd_arg_scalar(&n, sizeof n)};
    if (resident) {
        buffer = upload_new(device, data, n * sizeof *data);
        curd_test_poison(data, n * sizeof *data);
        args[0] = curd_arg_buffer(CURD_ROLE_INOUT, buffer);
        args[0].host = data;
        args[0].byte_len = n * sizeof *data;
    }
    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(device, program, &launch, args, 2, &pending),
             "curd_dispatch_async");
    timing->struct_size = sizeof *timing;
    check_ok(curd_pending_wait(pending, timing), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    assert_words(data, want, n, resident ? "add_one, resident" : "add_one");
    if (resident)
        check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(data);
    g_free(want);
}

static curd_program *load_text(curd_device *device, const char *text,
                               const char *entry, curd_status want)
{
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = text;
    desc.image_bytes = strlen(text);
    desc.entry = entry;
    curd_program *program = NULL;
    g_assert_cmpint(curd_program_load(device, &desc, &program), ==, want);
    if (want != CURD_OK)
        curd_test_assert_fix_sentence();
    return program;
}

/* ------------------------------------------------------------------------
 * The size of curd_stats
 * ---------------------------------------------------------------------- */
static void test_a_1_0_sized_stats_gets_its_fields_and_nothing_past(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    add_one_borrowed(device, program, random_count(100, 5000), 256, 1);
    curd_stats full = curd_test_device_stats(device);
    g_assert_cmpuint(full.dispatches, ==, 1);
    g_assert_cmpuint(full.h2d_bytes + full.device_pool.cache_misses, >, 0);

    /* curd 1.0's struct, with poisoned bytes after it. */
    struct {
        stats_1_0 stats;
        unsigned char after[64];
    } old;
    curd_test_poison(&old, sizeof old);
    old.stats.struct_size = sizeof old.stats;
    unsigned char poison[64];
    memcpy(poison, old.after, sizeof poison);
    g_assert_cmpint(curd_device_stats(device, (curd_stats *)(void *)&old), ==,
                    CURD_OK);
    g_assert_cmpuint(old.stats.struct_size, ==, sizeof old.stats);
    g_assert_true(memcmp(old.after, poison, sizeof poison) == 0);
    /* Nothing ran in between: the same values as the full read. */
    g_assert_true(memcmp(&old.stats.device_pool, &full.device_pool,
                         sizeof old.stats -
                             offsetof(stats_1_0, device_pool)) == 0);

    /* A newer caller's struct: its tail is left as it was. */
    struct {
        curd_stats stats;
        unsigned char tail[64];
    } newer;
    curd_test_poison(&newer, sizeof newer);
    memcpy(poison, newer.tail, sizeof poison);
    newer.stats.struct_size = sizeof newer;
    g_assert_cmpint(curd_device_stats(device, &newer.stats), ==, CURD_OK);
    g_assert_cmpuint(newer.stats.struct_size, ==, sizeof newer);
    g_assert_cmpuint(newer.stats.dispatches, ==, 1);
    g_assert_cmpuint(newer.stats.module_cache_misses, ==, 1);
    g_assert_true(memcmp(newer.tail, poison, sizeof poison) == 0);

    /* Smaller than 1.0's: refused, nothing written. */
    curd_test_poison(&old, sizeof old);
    old.stats.struct_size = sizeof old.stats - 8;
    stats_1_0 untouched = old.stats;
    g_assert_cmpint(curd_device_stats(device, (curd_stats *)(void *)&old), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_true(memcmp(&old.stats, &untouched, sizeof untouched) == 0);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Programs
 * ---------------------------------------------------------------------- */
static void assert_module_counts(curd_device *device, uint64_t hits,
                                 uint64_t misses, uint64_t loaded,
                                 uint64_t cached, uint64_t evictions)
{
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.module_cache_hits, ==, hits);
    g_assert_cmpuint(stats.module_cache_misses, ==, misses);
    g_assert_cmpuint(stats.modules_loaded, ==, loaded);
    g_assert_cmpuint(stats.modules_cached, ==, cached);
    g_assert_cmpuint(stats.module_evictions, ==, evictions);
}

static void test_loads_count_hits_misses_modules_and_evictions(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.module_cache_count = 1;
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    assert_module_counts(device, 0, 0, 0, 0, 0);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, ==, 0);

    curd_program *first = load(device, "add_one.ptx", "curd_add_one");
    assert_module_counts(device, 0, 1, 1, 0, 0);
    uint64_t jit_ns = curd_test_device_stats(device).jit_ns;
    g_assert_cmpuint(jit_ns, >, 0);
    curd_program *second = load(device, "add_one.ptx", "curd_add_one");
    assert_module_counts(device, 1, 1, 1, 0, 0);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, ==, jit_ns);
    check_ok(curd_program_free(first), "curd_program_free");
    assert_module_counts(device, 1, 1, 1, 0, 0);
    check_ok(curd_program_free(second), "curd_program_free");
    assert_module_counts(device, 1, 1, 1, 1, 0);

    /* A second module; once it is idle too, the bound (1) unloads the
     * least recently used, add_one. */
    curd_program *saxpy = load(device, "saxpy.ptx", "curd_saxpy");
    assert_module_counts(device, 1, 2, 2, 1, 0);
    check_ok(curd_program_free(saxpy), "curd_program_free");
    assert_module_counts(device, 1, 2, 1, 1, 1);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, >, jit_ns);

    /* Refused loads count nothing: no known kind, a PTX that does not
     * compile (the stand-in's marker; ptxas refuses the instruction). */
    uint64_t jit_before = curd_test_device_stats(device).jit_ns;
    (void)load_text(device, "GIF89a", "k", CURD_E_PROGRAM);
    (void)load_text(device,
                    ".version 7.0\n.target sm_50\n.address_size 64\n"
                    "// fake: jit error\n.visible .entry k()\n{\n"
                    "    not_an_instruction;\n    ret;\n}\n",
                    "k", CURD_E_PROGRAM);
    assert_module_counts(device, 1, 2, 1, 1, 1);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, ==, jit_before);

    /* The reset zeroes the cumulative counters; the levels stay. */
    check_ok(curd_device_stats_reset(device), "curd_device_stats_reset");
    assert_module_counts(device, 0, 0, 1, 1, 0);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, ==, 0);
    /* saxpy is still cached: a hit, no JIT. */
    saxpy = load(device, "saxpy.ptx", "curd_saxpy");
    assert_module_counts(device, 1, 0, 1, 0, 0);
    g_assert_cmpuint(curd_test_device_stats(device).jit_ns, ==, 0);
    check_ok(curd_program_free(saxpy), "curd_program_free");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Dispatches
 * ---------------------------------------------------------------------- */
static void test_dispatches_count_launches_and_sum_their_timing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.dispatches + stats.launches, ==, 0);
    g_assert_cmpuint(stats.dispatch_device_ns + stats.dispatch_enqueue_ns +
                         stats.dispatch_wait_ns,
                     ==, 0);

    /* Two waited with timing: the sums are theirs exactly. */
    uint32_t first_iterations = (uint32_t)g_test_rand_int_range(1, 5);
    uint32_t second_iterations = (uint32_t)g_test_rand_int_range(1, 5);
    curd_timing a, b;
    add_one_async(device, program, random_count(100, 20000),
                  first_iterations, FALSE, &a);
    add_one_async(device, program, random_count(100, 20000),
                  second_iterations, TRUE, &b);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.dispatches, ==, 2);
    g_assert_cmpuint(stats.launches, ==, first_iterations + second_iterations);
    g_assert_cmpuint(stats.dispatch_device_ns, ==, a.device_ns + b.device_ns);
    g_assert_cmpuint(stats.dispatch_enqueue_ns, ==,
                     a.enqueue_ns + b.enqueue_ns);
    g_assert_cmpuint(stats.dispatch_wait_ns, ==, a.wait_ns + b.wait_ns);
    g_assert_cmpuint(stats.dispatch_enqueue_ns, >, 0);
    if (CURD_TEST_ON_FAKE)
        g_assert_cmpuint(stats.dispatch_device_ns, ==, 2 * FAKE_DEVICE_NS);

    /* A synchronous one, and one freed without a wait: both complete. */
    add_one_borrowed(device, program, random_count(100, 20000), 256, 3);
    uint32_t n = 1000;
    uint32_t *data = random_words(n);
    uint32_t *copy = g_memdup2(data, n * sizeof *data);
    curd_launch launch = launch_over(n, 128);
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, data, n * sizeof *data),
                       curd_arg_scalar(&n, sizeof n)};
    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(device, program, &launch, args, 2, &pending),
             "curd_dispatch_async");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    /* Freed without a wait: its outputs were not written. */
    assert_words(data, copy, n, "add_one freed unwaited");
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(after.dispatches, ==, 4);
    g_assert_cmpuint(after.launches, ==,
                     first_iterations + second_iterations + 3 + 1);
    g_assert_cmpuint(after.dispatch_enqueue_ns, >, stats.dispatch_enqueue_ns);
    g_assert_cmpuint(after.dispatch_wait_ns, >=, stats.dispatch_wait_ns);
    /* The synchronous one asked for no timing: it ran untimed (no events,
     * one stream synchronisation), so only the other adds device time. */
    if (CURD_TEST_ON_FAKE)
        g_assert_cmpuint(after.dispatch_device_ns, ==, 3 * FAKE_DEVICE_NS);

    /* Refused dispatches count nothing. */
    launch.iterations = 0;
    g_assert_cmpint(curd_dispatch(device, program, &launch, args, 2), ==,
                    CURD_E_INVALID_ARGUMENT);
    launch.iterations = 1;
    g_assert_cmpint(curd_dispatch(device, program, &launch, args, 1), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_stats refused = curd_test_device_stats(device);
    g_assert_cmpuint(refused.dispatches, ==, after.dispatches);
    g_assert_cmpuint(refused.launches, ==, after.launches);
    g_assert_cmpuint(refused.dispatch_device_ns, ==, after.dispatch_device_ns);
    g_assert_cmpuint(refused.dispatch_enqueue_ns, ==,
                     after.dispatch_enqueue_ns);
    g_assert_cmpuint(refused.dispatch_wait_ns, ==, after.dispatch_wait_ns);
    assert_words(data, copy, n, "add_one refused");

    /* The reset zeroes them all. */
    check_ok(curd_device_stats_reset(device), "curd_device_stats_reset");
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.dispatches + stats.launches, ==, 0);
    g_assert_cmpuint(stats.dispatch_device_ns + stats.dispatch_enqueue_ns +
                         stats.dispatch_wait_ns,
                     ==, 0);
    g_free(data);
    g_free(copy);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * CURD_TRACE
 * ---------------------------------------------------------------------- */
/* The subprocess: CURD_TRACE is read once per process, at its first use,
 * so setting it before any curd call turns tracing on for this process
 * alone. Two dispatches that complete, one refused. */
static void trace_two_dispatches(gboolean traced)
{
    if (traced)
        g_assert_cmpint(setenv("CURD_TRACE", "1", 1), ==, 0);
    else
        g_assert_cmpint(unsetenv("CURD_TRACE"), ==, 0);
    curd_device *device = curd_test_gpu_open();
    g_assert_nonnull(device);
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    /* 1000 elements in blocks of 256: a grid of 4. */
    add_one_borrowed(device, program, 1000, 256, 2);
    curd_timing timing;
    add_one_async(device, program, 1000, 1, TRUE, &timing);
    curd_launch launch = launch_over(1000, 256);
    launch.iterations = 0;
    g_assert_cmpint(curd_dispatch(device, program, &launch, NULL, 0), ==,
                    CURD_E_INVALID_ARGUMENT);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* Runs trace_two_dispatches in a subprocess (when there is a device)
 * with tracing on or off; FALSE when skipped. */
static gboolean trap_two_dispatches(gboolean traced)
{
    if (g_test_subprocess()) {
        trace_two_dispatches(traced);
        return FALSE;
    }
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return FALSE;
    check_ok(curd_device_close(device), "curd_device_close");
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    return TRUE;
}

static void test_trace_writes_each_dispatch_s_stage_times(void)
{
    if (!trap_two_dispatches(TRUE))
        return;
    /* One line per completed dispatch, in order, with every stage. */
    g_test_trap_assert_stderr(
        "*curd: dispatch curd_add_one grid 4x1x1 block 256x1x1 x2: validate "
        "* ns, stage * ns, enqueue * ns, wait * ns, copy-out * ns, total * ns "
        "(device * ns)\n*curd: dispatch curd_add_one grid 4x1x1 block "
        "256x1x1 x1: validate * ns, stage * ns, enqueue * ns, wait * ns, "
        "copy-out * ns, total * ns (device * ns)\n*");
    /* The refused one is traced as its failure, not as a dispatch. */
    g_test_trap_assert_stderr_unmatched(
        "*curd: dispatch *curd: dispatch *curd: dispatch *");
    g_test_trap_assert_stderr("*curd: CURD_E_INVALID_ARGUMENT: *iterations*");
}

static void test_without_trace_a_dispatch_writes_nothing(void)
{
    if (trap_two_dispatches(FALSE))
        g_test_trap_assert_stderr_unmatched("*curd: *");
}

/* ------------------------------------------------------------------------
 * A dispatch's traffic and its split timing
 * ---------------------------------------------------------------------- */
/* The counters a transfer moves, by what a dispatch moved. */
static void assert_traffic(const curd_stats *before, const curd_stats *after,
                           uint64_t h2d, uint64_t d2h, uint64_t copies,
                           uint64_t fills, uint64_t fill_bytes,
                           uint64_t fences)
{
    g_assert_cmpuint(after->h2d_bytes - before->h2d_bytes, ==, h2d);
    g_assert_cmpuint(after->d2h_bytes - before->d2h_bytes, ==, d2h);
    g_assert_cmpuint(after->copy_ops - before->copy_ops, ==, copies);
    g_assert_cmpuint(after->fill_ops - before->fill_ops, ==, fills);
    g_assert_cmpuint(after->fill_bytes - before->fill_bytes, ==, fill_bytes);
    g_assert_cmpuint(after->fences - before->fences, ==, fences);
}

/* Staged inputs, zeroed outputs and read-backs count as a transfer's
 * copies and fills do, the wait as its fence: a user checking bytes
 * moved per step gets them all. A refused dispatch counts none. */
static void test_a_dispatchs_traffic_counts_as_transfers_do(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *reduce = load(device, "reduce_sum.ptx", "curd_reduce_sum");
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = random_count(100, 20000);
    uint32_t *in = random_words(n);
    uint64_t sum = 0, want = 0;
    for (uint32_t i = 0; i < n; i++)
        want += in[i];
    curd_launch launch = launch_over(n, 256);
    curd_arg reduce_args[] = {
        curd_arg_host(CURD_ROLE_INPUT, in, n * sizeof *in),
        curd_arg_scalar(&n, sizeof n),
        curd_arg_host(CURD_ROLE_OUTPUT, &sum, sizeof sum)};
    curd_stats before = curd_test_device_stats(device);
    check_ok(curd_dispatch(device, reduce, &launch, reduce_args, 3),
             "curd_dispatch");
    g_assert_cmpuint(sum, ==, want);
    curd_stats after = curd_test_device_stats(device);
    /* In up, the sum zeroed and read back, one wait. */
    assert_traffic(&before, &after, n * sizeof *in, sizeof sum, 2, 1,
                   sizeof sum, 1);

    /* Part of a resident buffer read back, asynchronously. */
    curd_buffer buffer = upload_new(device, in, n * sizeof *in);
    uint32_t part = n / 3u;
    uint32_t *back = g_new(uint32_t, part);
    curd_arg add_args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                           curd_arg_scalar(&n, sizeof n)};
    add_args[0].host = back;
    add_args[0].byte_len = part * sizeof *back;
    add_args[0].read_offset = sizeof *back;
    add_args[0].read_len = part * sizeof *back;
    before = curd_test_device_stats(device);
    curd_pending *pending = NULL;
    check_ok(curd_dispatch_async(device, add_one, &launch, add_args, 2,
                                 &pending),
             "curd_dispatch_async");
    check_ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    for (uint32_t i = 0; i < part; i++)
        g_assert_cmpuint(back[i], ==, in[i + 1u] + 1u);
    after = curd_test_device_stats(device);
    assert_traffic(&before, &after, 0, part * sizeof *back, 1, 0, 0, 1);

    launch.iterations = 0;
    g_assert_cmpint(curd_dispatch(device, reduce, &launch, reduce_args, 3),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_stats refused = curd_test_device_stats(device);
    assert_traffic(&after, &refused, 0, 0, 0, 0, 0, 0);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(back);
    g_free(in);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* device_ns is the kernels alone; the staging before and the read-back
 * after have their own fields. A synchronous dispatch asks for its timing
 * through curd_launch.timing (no CURD_TRACE); a curd 1.0 caller's
 * smaller curd_timing gets its fields and nothing past them. */
static void test_timing_splits_staging_kernels_and_read_back(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = random_count(1000, 20000);
    uint32_t *data = random_words(n);
    curd_launch launch = launch_over(n, 256);
    launch.iterations = 4;
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, data, n * sizeof *data),
                       curd_arg_scalar(&n, sizeof n)};
    curd_timing timing;
    curd_test_poison(&timing, sizeof timing);
    timing.struct_size = sizeof timing;
    launch.timing = &timing;
    curd_stats before = curd_test_device_stats(device);
    check_ok(curd_dispatch(device, program, &launch, args, 2),
             "curd_dispatch with launch.timing");
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(timing.struct_size, ==, sizeof timing);
    g_assert_cmpuint(after.dispatch_device_ns - before.dispatch_device_ns, ==,
                     timing.device_ns);
    if (CURD_TEST_ON_FAKE) {
        g_assert_cmpuint(timing.staging_ns, ==, FAKE_DEVICE_NS);
        g_assert_cmpuint(timing.device_ns, ==, FAKE_DEVICE_NS);
        g_assert_cmpuint(timing.readback_ns, ==, FAKE_DEVICE_NS);
    } else {
        g_assert_cmpuint(timing.device_ns, >, 0);
        g_assert_cmpuint(timing.staging_ns, >, 0);
        g_assert_cmpuint(timing.readback_ns, >, 0);
    }
    g_assert_cmpuint(timing.wall_ns, >=, timing.enqueue_ns);

    /* An asynchronous dispatch's timing comes from its wait. */
    curd_pending *pending = NULL;
    g_assert_cmpint(curd_dispatch_async(device, program, &launch, args, 2,
                                        &pending),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_null(pending);
    launch.timing = NULL;
    check_ok(curd_dispatch_async(device, program, &launch, args, 2, &pending),
             "curd_dispatch_async");
    struct {
        curd_timing timing;
        unsigned char after[16];
    } old;
    curd_test_poison(&old, sizeof old);
    old.timing.struct_size = offsetof(curd_timing, staging_ns);
    curd_timing poisoned = old.timing;
    check_ok(curd_pending_wait(pending, &old.timing),
             "curd_pending_wait with curd 1.0's curd_timing");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    g_assert_cmpuint(old.timing.wall_ns, >=, old.timing.enqueue_ns);
    g_assert_true(memcmp(&old.timing.staging_ns, &poisoned.staging_ns,
                         sizeof old.timing
                             - offsetof(curd_timing, staging_ns))
                  == 0);
    /* Too small even for curd 1.0: refused. */
    curd_timing tiny = {.struct_size = sizeof(size_t)};
    launch.timing = &tiny;
    g_assert_cmpint(curd_dispatch(device, program, &launch, args, 2), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_free(data);
    check_ok(curd_device_close(device), "curd_device_close");
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    g_test_add_func(PATH_ROOT "/a-1-0-sized-stats-gets-its-fields-and-nothing-past",
                    test_a_1_0_sized_stats_gets_its_fields_and_nothing_past);
    g_test_add_func(PATH_ROOT "/loads-count-hits-misses-modules-and-evictions",
                    test_loads_count_hits_misses_modules_and_evictions);
    g_test_add_func(PATH_ROOT "/dispatches-count-launches-and-sum-their-timing",
                    test_dispatches_count_launches_and_sum_their_timing);
    g_test_add_func(PATH_ROOT "/trace-writes-each-dispatch-s-stage-times",
                    test_trace_writes_each_dispatch_s_stage_times);
    g_test_add_func(PATH_ROOT "/without-trace-a-dispatch-writes-nothing",
                    test_without_trace_a_dispatch_writes_nothing);
    g_test_add_func(PATH_ROOT "/a-dispatchs-traffic-counts-as-transfers-do",
                    test_a_dispatchs_traffic_counts_as_transfers_do);
    g_test_add_func(PATH_ROOT "/timing-splits-staging-kernels-and-read-back",
                    test_timing_splits_staging_kernels_and_read_back);
    return g_test_run();
}
