/* test-dispatch-faults.c - every driver call of a program load and of each
 * dispatch form fails in turn.
 *
 * With the driver table wrapped (curd_test_faults_begin), call 1, then
 * call 2, ... of one operation returns an error, until a run makes fewer
 * calls than the armed number. The operations: a cold program load (an
 * image never loaded), a load of a new entry of a cached module, a load
 * that finds everything cached (it makes no driver call at all), a
 * borrowed dispatch, a resident dispatch that reads part of its buffer
 * back, and an asynchronous dispatch with its wait. Each is swept once
 * with CUDA_ERROR_UNKNOWN and once with CUDA_ERROR_ILLEGAL_ADDRESS (an
 * error that loses the context), each run starting from cold pools (the
 * device trimmed), so the pools' driver calls fail in turn too.
 *
 * After each run, either the operation succeeded (the failed call was one
 * the library may ignore, such as popping the context) and did all its
 * work, counted exactly once, or it failed with a sentence ending in a
 * Fix and:
 *  - every counter of curd_device_stats that the operation could move
 *    (program and dispatch counters, transfer counters, resident
 *    statistics, accounting repairs) and both pools' live bytes are as
 *    they were, and the stand-in driver holds no more modules;
 *  - the caller's memory is untouched, and a bystander buffer holds its
 *    bytes;
 *  - for CUDA_ERROR_UNKNOWN the device works on (the next run proves it);
 *    for a lost context the call said CURD_E_DEVICE_LOST, the device
 *    refuses later calls the same way, and a device opened again works.
 * Needs a GPU (or the stand-in driver); skips with the reason otherwise. */
#include <glib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch-test.h"
#include "support/curd-test.h"
#include "transfer-test.h"

#define CU_ERROR_UNKNOWN 999
#define CU_ERROR_ILLEGAL_ADDRESS 700
#define ENTRY_COUNT 64u
#define BYSTANDER_BYTES 100000u

typedef struct fixture {
    curd_device *device;
    curd_program *add_one;
    curd_program *reduce_sum;
    curd_program *first_entry; /* keeps the many-entry module loaded */
    curd_buffer bystander;
    unsigned char *bystander_model;
    /* The borrowed dispatches' memory: n words, and a copy. */
    uint32_t n;
    uint32_t *host;
    uint32_t *host_copy;
    uint64_t sum; /* reduce_sum's output */
    /* The resident dispatch: a buffer of n words, and part of it read
     * back into part. */
    curd_buffer target;
    uint32_t *target_model;
    uint32_t part_offset, part_count;
    uint32_t *part;
    unsigned next_image;  /* cold loads: a new image each */
    unsigned next_entry;  /* new entries of the many-entry module */
    char *many_entries;   /* PTX with ENTRY_COUNT copies of add_one */
} fixture;

/* add_one's PTX with its entry repeated as curd_add_one_0, _1, ... */
static char *many_entry_image(void)
{
    const char *ptx = kernel_image("add_one.ptx");
    const char *entry = strstr(ptx, ".visible .entry curd_add_one(");
    g_assert_nonnull(entry);
    GString *text = g_string_new_len(ptx, entry - ptx);
    for (unsigned k = 0; k < ENTRY_COUNT; k++) {
        GString *copy = g_string_new(entry);
        char *name = g_strdup_printf("curd_add_one_%u", k);
        g_string_replace(copy, "curd_add_one", name, 0);
        g_string_append(text, copy->str);
        g_free(name);
        g_string_free(copy, TRUE);
    }
    return g_string_free(text, FALSE);
}

static curd_status load_entry(curd_device *device, const char *image,
                              const char *entry, curd_program **out)
{
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = image;
    desc.image_bytes = strlen(image);
    desc.entry = entry;
    return curd_program_load(device, &desc, out);
}

static gboolean fixture_open(fixture *f)
{
    f->device = curd_test_gpu_open();
    if (f->device == NULL)
        return FALSE;
    f->add_one = load(f->device, "add_one.ptx", "curd_add_one");
    f->reduce_sum = load(f->device, "reduce_sum.ptx", "curd_reduce_sum");
    if (f->many_entries == NULL)
        f->many_entries = many_entry_image();
    f->next_entry = 1;
    check_ok(load_entry(f->device, f->many_entries, "curd_add_one_0",
                        &f->first_entry),
             "curd_program_load");
    if (f->bystander_model == NULL)
        f->bystander_model = g_malloc(BYSTANDER_BYTES);
    curd_test_fill_random(f->bystander_model, BYSTANDER_BYTES);
    f->bystander = upload_new(f->device, f->bystander_model, BYSTANDER_BYTES);
    if (f->host == NULL) {
        f->n = random_count(1000, 20000);
        f->host = g_new(uint32_t, f->n);
        f->host_copy = g_new(uint32_t, f->n);
        f->target_model = g_new(uint32_t, f->n);
        f->part_offset = f->n / 3;
        f->part_count = f->n / 4;
        f->part = g_new(uint32_t, f->part_count);
    }
    check_ok(curd_buffer_alloc(f->device, f->n * sizeof(uint32_t), &f->target),
             "curd_buffer_alloc");
    return TRUE;
}

/* Frees what the device holds: every buffer and program must go. */
static void fixture_close_device(fixture *f)
{
    check_ok(curd_buffer_free(f->device, f->target), "curd_buffer_free");
    check_ok(curd_buffer_free(f->device, f->bystander), "curd_buffer_free");
    check_ok(curd_program_free(f->first_entry), "curd_program_free");
    check_ok(curd_program_free(f->reduce_sum), "curd_program_free");
    check_ok(curd_program_free(f->add_one), "curd_program_free");
    check_ok(curd_device_close(f->device), "curd_device_close");
}

static void fixture_free(fixture *f)
{
    g_free(f->many_entries);
    g_free(f->bystander_model);
    g_free(f->host);
    g_free(f->host_copy);
    g_free(f->target_model);
    g_free(f->part);
}

/* Fresh random words in the caller's memory and the resident buffer,
 * poisoned outputs, and cold pools. */
static void fixture_reset(fixture *f)
{
    curd_test_fill_random(f->host, f->n * sizeof *f->host);
    memcpy(f->host_copy, f->host, f->n * sizeof *f->host);
    curd_test_fill_random(f->target_model, f->n * sizeof *f->target_model);
    check_ok(curd_buffer_upload(f->device, f->target, f->target_model,
                                f->n * sizeof *f->target_model),
             "curd_buffer_upload");
    curd_test_poison(f->part, f->part_count * sizeof *f->part);
    curd_test_poison(&f->sum, sizeof f->sum);
    check_ok(curd_device_trim(f->device, 0), "curd_device_trim");
}

/* ------------------------------------------------------------------------
 * Counters
 * ---------------------------------------------------------------------- */
/* The counters of curd_stats beyond the transfer snapshot's. */
static const struct {
    const char *name;
    size_t offset;
} counted[] = {
#define COUNTED_(field) {#field, offsetof(curd_stats, field)}
    COUNTED_(module_cache_hits), COUNTED_(module_cache_misses),
    COUNTED_(jit_ns),            COUNTED_(modules_loaded),
    COUNTED_(modules_cached),    COUNTED_(module_evictions),
    COUNTED_(dispatches),        COUNTED_(launches),
    COUNTED_(dispatch_device_ns), COUNTED_(dispatch_enqueue_ns),
    COUNTED_(dispatch_wait_ns),
    /* A dispatch's copies, zeroing and wait count as a transfer's do. */
    COUNTED_(h2d_bytes),         COUNTED_(d2h_bytes),
    COUNTED_(copy_ops),          COUNTED_(fences),
    COUNTED_(fill_ops),          COUNTED_(fill_bytes),
#undef COUNTED_
};

static uint64_t counter(const curd_stats *stats, size_t index)
{
    uint64_t value;
    memcpy(&value, (const unsigned char *)stats + counted[index].offset,
           sizeof value);
    return value;
}

/* What the operation may have moved: the named counters by the deltas
 * given (NULL: none), the rest not at all. */
typedef struct counter_delta {
    const char *name;
    uint64_t delta; /* UINT64_MAX: grew by any amount */
} counter_delta;

static void assert_counters_moved(const curd_stats *before,
                                  const curd_stats *after,
                                  const counter_delta *deltas, size_t count)
{
    for (size_t i = 0; i < G_N_ELEMENTS(counted); i++) {
        uint64_t want = 0;
        gboolean any = FALSE;
        for (size_t d = 0; d < count; d++)
            if (strcmp(deltas[d].name, counted[i].name) == 0) {
                any = deltas[d].delta == UINT64_MAX;
                want = deltas[d].delta;
            }
        uint64_t moved = counter(after, i) - counter(before, i);
        if (any ? counter(after, i) < counter(before, i) : moved != want)
            g_error("%s moved by %" PRIu64 " (from %" PRIu64 "), expected %s%"
                    PRIu64,
                    counted[i].name, moved, counter(before, i),
                    any ? "any amount, not " : "", any ? UINT64_MAX : want);
    }
}

/* The transfer counters stay 0 here: counted[] checks them, with each
 * operation's deltas. */
static transfer_test_snapshot snapshot_of(const curd_stats *stats)
{
    transfer_test_snapshot snapshot;
    memset(&snapshot, 0, sizeof snapshot);
    snapshot.accounting_repairs = stats->accounting_repairs;
    snapshot.resident_bytes = stats->resident_bytes;
    snapshot.resident_buffers = stats->resident_buffers;
    snapshot.device_live_bytes = stats->device_pool.live_bytes.current;
    snapshot.pinned_live_bytes = stats->pinned_pool.live_bytes.current;
    return snapshot;
}

static long fake_modules(void)
{
    static const char *const kinds[] = {"module"};
    long count = -1;
    if (!curd_test_fake_live(kinds, 1, &count))
        return -1;
    return count;
}

/* ------------------------------------------------------------------------
 * The sweep
 * ---------------------------------------------------------------------- */
typedef struct operation {
    const char *name;
    curd_status (*run)(fixture *f);
    /* The counters a success moves. */
    counter_delta success[11];
    size_t success_count;
    /* Judges the caller's memory and the buffers, for a success or a
     * failure. */
    void (*check)(fixture *f, curd_status status);
} operation;

/* After a lost context: the device refuses the next call the same way,
 * closes, and one opened again works (the next run uses it). */
static void reopen_after_loss(fixture *f)
{
    curd_buffer buffer;
    g_assert_cmpint(curd_buffer_alloc(f->device, 64, &buffer), ==,
                    CURD_E_DEVICE_LOST);
    curd_test_assert_fix_sentence();
    curd_status closed = curd_device_close(f->device);
    g_assert_true(closed == CURD_OK || closed == CURD_E_DEVICE_LOST);
    g_assert_true(fixture_open(f));
}

static void sweep(fixture *f, const operation *op, int cu_result)
{
    unsigned failed_runs = 0, lost_runs = 0;
    for (unsigned fail_at = 1;; fail_at++) {
        fixture_reset(f);
        curd_stats before = curd_test_device_stats(f->device);
        long modules = fake_modules();
        curd_test_faults_begin(fail_at, cu_result, NULL);
        curd_status status = op->run(f);
        gboolean fired = curd_test_faults_fired();
        (void)curd_test_faults_end();
        curd_test_pop_leftover_contexts();
        if (!fired) {
            g_assert_cmpint(status, ==, CURD_OK);
            g_test_message("%s: %u driver calls failed in turn, %u runs "
                           "failed, %u lost the device",
                           op->name, fail_at - 1, failed_runs, lost_runs);
            break;
        }
        g_assert_cmpuint(fail_at, <, 1000);
        if (status == CURD_E_DEVICE_LOST) {
            g_assert_cmpint(cu_result, ==, CU_ERROR_ILLEGAL_ADDRESS);
            g_assert_cmpint(curd_last_driver_code(), ==, cu_result);
            curd_test_assert_fix_sentence();
            op->check(f, status);
            failed_runs++;
            lost_runs++;
            reopen_after_loss(f);
            continue;
        }
        curd_stats after = curd_test_device_stats(f->device);
        if (status != CURD_OK) {
            g_assert_cmpint(status, ==, CURD_E_DRIVER);
            g_assert_cmpint(curd_last_driver_code(), ==, cu_result);
            curd_test_assert_fix_sentence();
            failed_runs++;
            assert_counters_moved(&before, &after, NULL, 0);
            if (modules >= 0)
                g_assert_cmpint(fake_modules(), ==, modules);
        } else {
            assert_counters_moved(&before, &after, op->success,
                                  op->success_count);
        }
        assert_snapshot_equal(snapshot_of(&after), snapshot_of(&before));
        op->check(f, status);
        assert_buffer_holds(f->device, f->bystander, f->bystander_model,
                            BYSTANDER_BYTES);
    }
    g_assert_cmpuint(failed_runs, >=, 3);
    if (cu_result == CU_ERROR_ILLEGAL_ADDRESS)
        g_assert_cmpuint(lost_runs, >=, 1);
}

/* ------------------------------------------------------------------------
 * Program loads
 * ---------------------------------------------------------------------- */
/* An image never loaded before: add_one's PTX under a new first line. */
static curd_status op_cold_load(fixture *f)
{
    char *image = g_strdup_printf("// image %u\n%s", f->next_image++,
                                  kernel_image("add_one.ptx"));
    curd_program *program = NULL;
    curd_status status = load_entry(f->device, image, "curd_add_one",
                                    &program);
    g_free(image);
    if (status == CURD_OK)
        check_ok(curd_program_free(program), "curd_program_free");
    else
        g_assert_null(program);
    return status;
}

/* A new entry of the cached many-entry module. */
static curd_status op_new_entry(fixture *f)
{
    g_assert_cmpuint(f->next_entry, <, ENTRY_COUNT);
    char *name = g_strdup_printf("curd_add_one_%u", f->next_entry);
    curd_program *program = NULL;
    curd_status status = load_entry(f->device, f->many_entries, name,
                                    &program);
    g_free(name);
    if (status == CURD_OK) {
        f->next_entry++;
        check_ok(curd_program_free(program), "curd_program_free");
    } else {
        g_assert_null(program);
    }
    return status;
}

static void check_nothing(fixture *f, curd_status status)
{
    (void)f;
    (void)status;
}

static const operation cold_load = {
    "a cold program load", op_cold_load,
    {{"module_cache_misses", 1}, {"jit_ns", UINT64_MAX},
     {"modules_loaded", 1}, {"modules_cached", 1}},
    4, check_nothing};

static const operation new_entry_load = {
    "a load of a new entry of a cached module", op_new_entry,
    {{"module_cache_hits", 1}}, 1, check_nothing};

/* ------------------------------------------------------------------------
 * Dispatches
 * ---------------------------------------------------------------------- */
#define BORROWED_ITERATIONS 2u

static curd_status op_borrowed(fixture *f)
{
    curd_launch launch = launch_over(f->n, 128);
    launch.iterations = BORROWED_ITERATIONS;
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, f->host, f->n * sizeof *f->host),
        curd_arg_scalar(&f->n, sizeof f->n)};
    return curd_dispatch(f->device, f->add_one, &launch, args, 2);
}

static void check_borrowed(fixture *f, curd_status status)
{
    if (status == CURD_OK)
        for (uint32_t i = 0; i < f->n; i++)
            f->host_copy[i] += BORROWED_ITERATIONS;
    assert_words(f->host, f->host_copy, f->n, "the borrowed words");
}

static curd_status op_resident(fixture *f)
{
    curd_launch launch = launch_over(f->n, 256);
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, f->target),
                       curd_arg_scalar(&f->n, sizeof f->n)};
    args[0].host = f->part;
    args[0].byte_len = f->part_count * sizeof *f->part;
    args[0].read_offset = (uint64_t)f->part_offset * sizeof *f->part;
    args[0].read_len = args[0].byte_len;
    args[0].elem_bytes = 4;
    args[0].length_arg = 1;
    return curd_dispatch(f->device, f->add_one, &launch, args, 2);
}

static void check_resident(fixture *f, curd_status status)
{
    uint32_t *added = g_memdup2(f->target_model, f->n * sizeof *added);
    for (uint32_t i = 0; i < f->n; i++)
        added[i]++;
    if (status == CURD_OK) {
        assert_words(f->part, added + f->part_offset, f->part_count,
                     "the read-back part");
        assert_buffer_holds(f->device, f->target, added,
                            f->n * sizeof *added);
    } else {
        /* The caller's memory is untouched; the buffer holds its bytes,
         * or the launch's whole result if it ran before the failure. */
        uint32_t *poison = g_new(uint32_t, f->part_count);
        curd_test_poison(poison, f->part_count * sizeof *poison);
        assert_words(f->part, poison, f->part_count, "the read-back part");
        g_free(poison);
        if (status != CURD_E_DEVICE_LOST) {
            unsigned char *now = transfer_test_contents(
                f->device, f->target, f->n * sizeof *added);
            if (memcmp(now, f->target_model, f->n * sizeof *added) != 0)
                assert_same_bytes(now, added, f->n * sizeof *added);
            g_free(now);
        }
    }
    g_free(added);
}

static curd_status op_async_and_wait(fixture *f)
{
    curd_launch launch = launch_over(f->n, 256);
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INPUT, f->host, f->n * sizeof *f->host),
        curd_arg_scalar(&f->n, sizeof f->n),
        curd_arg_host(CURD_ROLE_OUTPUT, &f->sum, sizeof f->sum)};
    curd_pending *pending = NULL;
    curd_status status = curd_dispatch_async(f->device, f->reduce_sum,
                                             &launch, args, 3, &pending);
    if (status != CURD_OK) {
        g_assert_null(pending);
        return status;
    }
    curd_timing timing = {.struct_size = sizeof timing};
    status = curd_pending_wait(pending, &timing);
    /* Whatever the wait said, the pending frees: on a lost device it is
     * host bookkeeping only. */
    check_ok(curd_pending_free(pending), "curd_pending_free");
    return status;
}

static void check_async(fixture *f, curd_status status)
{
    assert_words(f->host, f->host_copy, f->n, "the input words");
    uint64_t want;
    if (status == CURD_OK) {
        want = 0;
        for (uint32_t i = 0; i < f->n; i++)
            want += f->host[i];
    } else {
        curd_test_poison(&want, sizeof want);
    }
    g_assert_cmpuint(f->sum, ==, want);
}

static const operation borrowed = {
    "a borrowed dispatch", op_borrowed,
    {{"dispatches", 1}, {"launches", BORROWED_ITERATIONS},
     {"dispatch_enqueue_ns", UINT64_MAX}, {"dispatch_wait_ns", UINT64_MAX},
     {"dispatch_device_ns", UINT64_MAX}, {"h2d_bytes", UINT64_MAX},
     {"d2h_bytes", UINT64_MAX}, {"copy_ops", 2}, {"fences", 1}},
    9, check_borrowed};

static const operation resident = {
    "a resident dispatch with a read-back", op_resident,
    {{"dispatches", 1}, {"launches", 1},
     {"dispatch_enqueue_ns", UINT64_MAX}, {"dispatch_wait_ns", UINT64_MAX},
     {"dispatch_device_ns", UINT64_MAX}, {"d2h_bytes", UINT64_MAX},
     {"copy_ops", 1}, {"fences", 1}},
    8, check_resident};

static const operation async_and_wait = {
    "an asynchronous dispatch and its wait", op_async_and_wait,
    {{"dispatches", 1}, {"launches", 1},
     {"dispatch_enqueue_ns", UINT64_MAX}, {"dispatch_wait_ns", UINT64_MAX},
     {"dispatch_device_ns", UINT64_MAX}, {"h2d_bytes", UINT64_MAX},
     {"d2h_bytes", sizeof(uint64_t)}, {"copy_ops", 2}, {"fences", 1},
     {"fill_ops", 1}, {"fill_bytes", sizeof(uint64_t)}},
    11, check_async};

/* ------------------------------------------------------------------------
 * The tests
 * ---------------------------------------------------------------------- */
static void sweep_both_errors(const operation *op)
{
    fixture f;
    memset(&f, 0, sizeof f);
    if (!fixture_open(&f))
        return;
    sweep(&f, op, CU_ERROR_UNKNOWN);
    sweep(&f, op, CU_ERROR_ILLEGAL_ADDRESS);
    /* Usable at the end, nothing left marked: every buffer frees. */
    fixture_reset(&f);
    check_ok(op->run(&f), op->name);
    op->check(&f, CURD_OK);
    fixture_close_device(&f);
    fixture_free(&f);
}

static void test_each_failing_call_of_a_cold_program_load(void)
{
    sweep_both_errors(&cold_load);
}

static void test_each_failing_call_of_a_load_of_a_new_entry(void)
{
    sweep_both_errors(&new_entry_load);
}

static void test_a_cached_load_makes_no_driver_call(void)
{
    fixture f;
    memset(&f, 0, sizeof f);
    if (!fixture_open(&f))
        return;
    curd_stats before = curd_test_device_stats(f.device);
    curd_test_faults_begin(1, CU_ERROR_UNKNOWN, NULL);
    curd_program *program = NULL;
    curd_status status = load_entry(f.device, kernel_image("add_one.ptx"),
                                    "curd_add_one", &program);
    gboolean fired = curd_test_faults_fired();
    unsigned calls = curd_test_faults_end();
    check_ok(status, "curd_program_load (cached)");
    g_assert_false(fired);
    g_assert_cmpuint(calls, ==, 0);
    g_assert_true(program != f.add_one);
    curd_stats after = curd_test_device_stats(f.device);
    const counter_delta hit[] = {{"module_cache_hits", 1}};
    assert_counters_moved(&before, &after, hit, 1);
    check_ok(curd_program_free(program), "curd_program_free");
    fixture_close_device(&f);
    fixture_free(&f);
}

static void test_each_failing_call_of_a_borrowed_dispatch(void)
{
    sweep_both_errors(&borrowed);
}

static void test_each_failing_call_of_a_resident_dispatch(void)
{
    sweep_both_errors(&resident);
}

static void test_each_failing_call_of_an_async_dispatch_and_its_wait(void)
{
    sweep_both_errors(&async_and_wait);
}

static const transfer_test_case cases[] = {
    {"each-failing-call-of-a-cold-program-load",
     test_each_failing_call_of_a_cold_program_load},
    {"each-failing-call-of-a-load-of-a-new-entry",
     test_each_failing_call_of_a_load_of_a_new_entry},
    {"a-cached-load-makes-no-driver-call",
     test_a_cached_load_makes_no_driver_call},
    {"each-failing-call-of-a-borrowed-dispatch",
     test_each_failing_call_of_a_borrowed_dispatch},
    {"each-failing-call-of-a-resident-dispatch",
     test_each_failing_call_of_a_resident_dispatch},
    {"each-failing-call-of-an-async-dispatch-and-its-wait",
     test_each_failing_call_of_an_async_dispatch_and_its_wait},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "dispatch-faults", cases,
                              G_N_ELEMENTS(cases));
}
