/* test-session-faults.c - every driver call of every session operation
 * fails in turn.
 *
 * With the driver table wrapped (curd_test_faults_begin), call 1, then
 * call 2, ... of one operation returns CUDA_ERROR_UNKNOWN, until a run
 * makes fewer calls than the armed number. Each run starts from a fresh
 * session in the same state. After it, either the operation succeeded and
 * did all of its work, or it failed with a "Fix:" sentence and:
 *  - the device's levels (resident bytes and buffers, both pools' live
 *    bytes) and transfer counters are as they were: a static upload that
 *    failed part way freed what it had made, and nothing was counted;
 *  - the session's statistics are as they were, every counter included,
 *    and nothing half-uploaded is cached (the same upload afterwards is a
 *    miss whose buffers hold the bytes).
 * Operations that need no driver call (hits, releases kept idle, the
 * statistics) are shown to make none. Needs a GPU (or the stand-in
 * driver); skips with the reason otherwise. */
#include <glib.h>
#include <stdbool.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer-test.h"

#define CU_ERROR_UNKNOWN 999

typedef struct fixture {
    curd_device *device;
    curd_session *session;
    curd_buffer lent[2];
    const curd_static_set *set;
    curd_buffer out;
    const curd_static_set *out_set;
    /* The payloads: three small ones, or one past a staging chunk (the
     * pipelined upload, with its events and copy threads) and a small. */
    size_t count;
    unsigned char *bytes[3];
    curd_static_payload payloads[3];
    uint64_t total;
    bool keyed; /* the case's: static uploads under a key */
} fixture;

/* The levels a failed operation must leave as they were: a rollback may
 * count an allocation and its free in the cumulative counters. */
typedef struct levels {
    transfer_test_snapshot device;
    curd_session_stats session;
} levels;

static curd_session_stats stats_of(curd_session *session)
{
    curd_session_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    g_assert_cmpint(curd_session_stats_get(session, &stats), ==, CURD_OK);
    return stats;
}

static levels levels_take(const fixture *f)
{
    levels l = {transfer_test_take(f->device), stats_of(f->session)};
    return l;
}

static void assert_levels_equal(const levels *a, const levels *b)
{
    g_assert_cmpuint(a->device.h2d_bytes, ==, b->device.h2d_bytes);
    g_assert_cmpuint(a->device.d2h_bytes, ==, b->device.d2h_bytes);
    g_assert_cmpuint(a->device.copy_ops, ==, b->device.copy_ops);
    g_assert_cmpuint(a->device.fences, ==, b->device.fences);
    assert_snapshot_levels_equal(a->device, b->device);
    /* The whole session struct: levels, counters and budgets. */
    g_assert_cmpmem(&a->session, sizeof a->session, &b->session,
                    sizeof b->session);
}

/* One operation under test: set up a fresh session (no fault armed), run
 * the operation (faults armed), judge a success, and tear down. */
typedef struct fault_case {
    uint64_t idle_budget;
    uint64_t static_budget;
    uint32_t flags;
    bool large_payload;
    bool keyed; /* static uploads under a key (upload_op) */
    void (*setup)(fixture *f);
    curd_status (*op)(fixture *f);
    void (*succeeded)(fixture *f, const levels *before);
    /* Optional, after a failure's levels are checked. */
    void (*failed)(fixture *f);
    /* The driver calls the operation makes when none fails: none, or at
     * least min_calls. */
    bool no_calls;
    unsigned min_calls;
} fault_case;

static void payloads_fresh(fixture *f, bool large)
{
    const size_t small[3] = {4096, 777, 20000};
    const size_t pipelined[2] = {(3u << 20) + 77u, 4096};
    f->count = large ? 2 : 3;
    f->total = 0;
    for (size_t i = 0; i < f->count; i++) {
        size_t len = large ? pipelined[i] : small[i];
        g_free(f->bytes[i]);
        f->bytes[i] = g_malloc(len);
        curd_test_fill_random(f->bytes[i], len);
        f->payloads[i] = (curd_static_payload){f->bytes[i], len};
        f->total += len;
    }
}

static void assert_set_holds(const fixture *f, const curd_static_set *set)
{
    g_assert_cmpuint(set->count, ==, f->count);
    for (size_t i = 0; i < f->count; i++)
        assert_buffer_holds(f->device, set->buffers[i], f->bytes[i],
                            f->payloads[i].byte_len);
}

/* Runs the case with call 1, 2, ... failing, then checks how many driver
 * calls the operation makes when none fails. */
static void sweep(const fault_case *c)
{
    fixture f;
    memset(&f, 0, sizeof f);
    f.device = curd_test_gpu_open();
    if (f.device == NULL)
        return;
    f.keyed = c->keyed;
    for (unsigned fail_at = 1;; fail_at++) {
        curd_session_options options;
        curd_session_options_init(&options);
        options.idle_budget_bytes = c->idle_budget;
        options.static_budget_bytes = c->static_budget;
        options.flags = c->flags;
        g_assert_cmpint(curd_session_new(f.device, &options, &f.session), ==,
                        CURD_OK);
        payloads_fresh(&f, c->large_payload);
        if (c->setup != NULL)
            c->setup(&f);
        /* Empty the pools' caches so allocations reach the driver. */
        g_assert_cmpint(curd_device_trim(f.device, 0), ==, CURD_OK);
        f.out.id = 0;
        f.out_set = NULL;
        levels before = levels_take(&f);
        curd_test_faults_begin(fail_at, CU_ERROR_UNKNOWN, NULL);
        curd_status status = c->op(&f);
        gboolean fired = curd_test_faults_fired();
        (void)curd_test_faults_end();
        curd_test_pop_leftover_contexts();
        if (status == CURD_OK) {
            c->succeeded(&f, &before);
        } else {
            g_assert_true(fired);
            curd_test_assert_fix_sentence();
            levels after = levels_take(&f);
            assert_levels_equal(&after, &before);
            g_assert_cmpuint(f.out.id, ==, 0);
            g_assert_null(f.out_set);
            if (c->failed != NULL)
                c->failed(&f);
        }
        g_assert_cmpint(curd_session_free(f.session), ==, CURD_OK);
        if (!fired) {
            g_assert_cmpint(status, ==, CURD_OK);
            g_test_message("%u driver calls failed in turn", fail_at - 1);
            g_assert_cmpint(curd_device_close(f.device), ==, CURD_OK);
            for (size_t i = 0; i < G_N_ELEMENTS(f.bytes); i++)
                g_free(f.bytes[i]);
            if (c->no_calls)
                g_assert_cmpuint(fail_at - 1, ==, 0);
            else
                g_assert_cmpuint(fail_at - 1, >=, c->min_calls);
            return;
        }
        g_assert_cmpuint(fail_at, <, 1000);
    }
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */
static curd_status alloc_op(fixture *f)
{
    return curd_session_alloc(f->session, 12345, &f->out);
}

static void alloc_miss_succeeded(fixture *f, const levels *before)
{
    size_t size = 0;
    g_assert_cmpint(curd_buffer_size(f->device, f->out, &size), ==, CURD_OK);
    g_assert_cmpuint(size, ==, 12345);
    curd_session_stats stats = stats_of(f->session);
    g_assert_cmpuint(stats.reuse_misses, ==, before->session.reuse_misses + 1);
    g_assert_cmpuint(stats.lent_bytes, ==, 12345);
}

static void test_each_failing_call_of_an_allocation_miss(void)
{
    static const fault_case c = {
        .op = alloc_op,
        .succeeded = alloc_miss_succeeded,
        .min_calls = 2};
    sweep(&c);
}

static void keep_one_idle(fixture *f)
{
    curd_buffer buffer;
    g_assert_cmpint(curd_session_alloc(f->session, 12345, &buffer), ==,
                    CURD_OK);
    g_assert_cmpint(curd_session_release(f->session, buffer), ==, CURD_OK);
}

static void alloc_hit_succeeded(fixture *f, const levels *before)
{
    curd_session_stats stats = stats_of(f->session);
    g_assert_cmpuint(stats.reuse_hits, ==, before->session.reuse_hits + 1);
    g_assert_cmpuint(stats.idle_buffers, ==, 0);
    assert_snapshot_equal(transfer_test_take(f->device), before->device);
}

static void test_an_allocation_hit_makes_no_driver_call(void)
{
    static const fault_case c = {
        .idle_budget = 1u << 20,
        .setup = keep_one_idle,
        .op = alloc_op,
        .succeeded = alloc_hit_succeeded,
        .no_calls = true};
    sweep(&c);
}

/* Two 64-byte buffers lent, one 64-byte buffer idle. */
static void lend_two_keep_one(fixture *f)
{
    curd_buffer idle;
    for (size_t i = 0; i < 2; i++)
        g_assert_cmpint(curd_session_alloc(f->session, 64, &f->lent[i]), ==,
                        CURD_OK);
    g_assert_cmpint(curd_session_alloc(f->session, 64, &idle), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(f->session, idle), ==, CURD_OK);
}

static curd_status release_op(fixture *f)
{
    return curd_session_release(f->session, f->lent[0]);
}

static void release_evicting_succeeded(fixture *f, const levels *before)
{
    curd_session_stats stats = stats_of(f->session);
    g_assert_cmpuint(stats.idle_evictions, ==, 1);
    g_assert_cmpuint(stats.idle_buffers, ==, 1);
    g_assert_cmpuint(stats.lent_buffers, ==, 1);
    g_assert_cmpuint(transfer_test_take(f->device).resident_bytes.current, ==,
                     before->device.resident_bytes.current - 64);
}

static void test_each_failing_call_of_a_release_that_evicts(void)
{
    static const fault_case c = {
        .idle_budget = 64,
        .setup = lend_two_keep_one,
        .op = release_op,
        .succeeded = release_evicting_succeeded,
        /* The evicted block goes to the device pool's cache. */
        .no_calls = true};
    sweep(&c);
}

static void release_freeing_succeeded(fixture *f, const levels *before)
{
    curd_session_stats stats = stats_of(f->session);
    g_assert_cmpuint(stats.release_frees, ==, 1);
    g_assert_cmpuint(stats.idle_buffers, ==, 0);
    g_assert_cmpuint(transfer_test_take(f->device).resident_bytes.current, ==,
                     before->device.resident_bytes.current - 64);
}

static void lend_two(fixture *f)
{
    for (size_t i = 0; i < 2; i++)
        g_assert_cmpint(curd_session_alloc(f->session, 64, &f->lent[i]), ==,
                        CURD_OK);
}

static void test_each_failing_call_of_a_release_that_frees(void)
{
    static const fault_case c = {
        .flags = CURD_SESSION_NO_REUSE,
        .setup = lend_two,
        .op = release_op,
        .succeeded = release_freeing_succeeded,
        .no_calls = true};
    sweep(&c);
}

/* ------------------------------------------------------------------------
 * Static sets
 * ---------------------------------------------------------------------- */
static curd_status upload_into(fixture *f, const curd_static_set **out_set)
{
    return f->keyed ? curd_session_upload_static_keyed(
                          f->session, "faults", "v1", 2, f->payloads,
                          f->count, out_set)
                    : curd_session_upload_static(f->session, "faults",
                                                 f->payloads, f->count,
                                                 out_set);
}

static curd_status upload_op(fixture *f)
{
    return upload_into(f, &f->out_set);
}

/* The misses and hits of the fixture's kind of upload. */
static uint64_t misses_of(const fixture *f, curd_session_stats stats)
{
    return f->keyed ? stats.static_keyed_misses : stats.static_misses;
}

static uint64_t hits_of(const fixture *f, curd_session_stats stats)
{
    return f->keyed ? stats.static_keyed_hits : stats.static_hits;
}

static void upload_miss_succeeded(fixture *f, const levels *before)
{
    transfer_test_snapshot now = transfer_test_take(f->device);
    g_assert_cmpuint(now.h2d_bytes - before->device.h2d_bytes, ==, f->total);
    g_assert_cmpuint(now.fences - before->device.fences, ==, 1);
    g_assert_cmpuint(now.resident_bytes.current, ==,
                     before->device.resident_bytes.current + f->total);
    g_assert_cmpuint(misses_of(f, stats_of(f->session)), ==,
                     misses_of(f, before->session) + 1);
    assert_set_holds(f, f->out_set);
}

/* After a failed upload nothing is cached: the same upload misses, and
 * its buffers hold the bytes. */
static void upload_again_misses(fixture *f)
{
    const curd_static_set *set = NULL;
    uint64_t misses = misses_of(f, stats_of(f->session));
    curd_status status = upload_into(f, &set);
    if (status != CURD_OK)
        g_error("%s", curd_last_error());
    g_assert_cmpuint(misses_of(f, stats_of(f->session)), ==, misses + 1);
    assert_set_holds(f, set);
    g_assert_cmpint(curd_session_release_static(f->session, set), ==,
                    CURD_OK);
}

static void test_each_failing_call_of_a_static_upload_miss(void)
{
    static const fault_case c = {
        .op = upload_op,
        .succeeded = upload_miss_succeeded,
        .failed = upload_again_misses,
        .min_calls = 5};
    sweep(&c);
}

static void test_each_failing_call_of_a_pipelined_static_upload_miss(void)
{
    static const fault_case c = {
        .large_payload = true,
        .op = upload_op,
        .succeeded = upload_miss_succeeded,
        .failed = upload_again_misses,
        .min_calls = 5};
    sweep(&c);
}

static void upload_once(fixture *f)
{
    g_assert_cmpint(upload_op(f), ==, CURD_OK);
    f->set = f->out_set;
    g_assert_cmpint(curd_session_release_static(f->session, f->set), ==,
                    CURD_OK);
}

static void upload_hit_succeeded(fixture *f, const levels *before)
{
    assert_snapshot_equal(transfer_test_take(f->device), before->device);
    g_assert_true(f->out_set == f->set);
    g_assert_cmpuint(hits_of(f, stats_of(f->session)), ==,
                     hits_of(f, before->session) + 1);
}

static void test_a_static_upload_hit_makes_no_driver_call(void)
{
    static const fault_case c = {
        .setup = upload_once,
        .op = upload_op,
        .succeeded = upload_hit_succeeded,
        .no_calls = true};
    sweep(&c);
}

static void test_each_failing_call_of_a_keyed_upload_miss(void)
{
    static const fault_case c = {
        .keyed = true,
        .op = upload_op,
        .succeeded = upload_miss_succeeded,
        .failed = upload_again_misses,
        .min_calls = 5};
    sweep(&c);
}

static void test_a_keyed_upload_hit_makes_no_driver_call(void)
{
    static const fault_case c = {
        .keyed = true,
        .setup = upload_once,
        .op = upload_op,
        .succeeded = upload_hit_succeeded,
        .no_calls = true};
    sweep(&c);
}

/* 3 MiB: compared by the copy team, with no driver call either. */
static void test_a_team_compared_static_upload_hit_makes_no_driver_call(void)
{
    static const fault_case c = {
        .large_payload = true,
        .setup = upload_once,
        .op = upload_op,
        .succeeded = upload_hit_succeeded,
        .no_calls = true};
    sweep(&c);
}

static void upload_and_hold(fixture *f)
{
    g_assert_cmpint(upload_op(f), ==, CURD_OK);
    f->set = f->out_set;
}

static curd_status release_static_op(fixture *f)
{
    return curd_session_release_static(f->session, f->set);
}

static void release_static_succeeded(fixture *f, const levels *before)
{
    g_assert_cmpuint(transfer_test_take(f->device).resident_bytes.current, ==,
                     before->device.resident_bytes.current - f->total);
    g_assert_cmpuint(stats_of(f->session).unretained_sets, ==, 0);
}

static void test_each_failing_call_of_a_static_release_that_frees(void)
{
    static const fault_case c = {
        .flags = CURD_SESSION_NO_STATIC_CACHE,
        .setup = upload_and_hold,
        .op = release_static_op,
        .succeeded = release_static_succeeded,
        .no_calls = true};
    sweep(&c);
}

/* ------------------------------------------------------------------------
 * The statistics, and a whole session's life
 * ---------------------------------------------------------------------- */
static curd_status stats_op(fixture *f)
{
    curd_session_stats stats;
    stats.struct_size = sizeof stats;
    return curd_session_stats_get(f->session, &stats);
}

static void nothing_moved(fixture *f, const levels *before)
{
    levels now = levels_take(f);
    assert_levels_equal(&now, before);
}

static void test_the_statistics_make_no_driver_call(void)
{
    static const fault_case c = {
        .setup = upload_and_hold,
        .op = stats_op,
        .succeeded = nothing_moved,
        .no_calls = true};
    sweep(&c);
}

/* A session's whole life with a fault somewhere in it: every failure is
 * typed, and freeing the session returns the device to its baseline. */
static void test_each_failing_call_of_a_session_life(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t lens[2] = {5000, 123};
    unsigned char *bytes[2];
    curd_static_payload payloads[2];
    for (size_t i = 0; i < 2; i++) {
        bytes[i] = g_malloc(lens[i]);
        curd_test_fill_random(bytes[i], lens[i]);
        payloads[i] = (curd_static_payload){bytes[i], lens[i]};
    }
    unsigned fail_at;
    for (fail_at = 1; fail_at < 1000; fail_at++) {
        g_assert_cmpint(curd_device_trim(device, 0), ==, CURD_OK);
        transfer_test_snapshot baseline = transfer_test_take(device);
        curd_session *session = NULL;
        curd_buffer buffers[3] = {{0}};
        const curd_static_set *sets[2] = {NULL, NULL};
        curd_test_faults_begin(fail_at, CU_ERROR_UNKNOWN, NULL);
        curd_status status = curd_session_new(device, NULL, &session);
        for (size_t i = 0; i < 3 && status == CURD_OK; i++)
            status = curd_session_alloc(session, 1000 * (i + 1), &buffers[i]);
        if (status == CURD_OK)
            status = curd_session_release(session, buffers[1]);
        for (size_t i = 0; i < 2 && status == CURD_OK; i++)
            status = curd_session_upload_static(session, "life", payloads, 2,
                                                &sets[i]);
        if (status == CURD_OK)
            status = curd_session_release_static(session, sets[0]);
        gboolean fired = curd_test_faults_fired();
        (void)curd_test_faults_end();
        curd_test_pop_leftover_contexts();
        if (status != CURD_OK)
            curd_test_assert_fix_sentence();
        if (session != NULL)
            g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
        assert_snapshot_levels_equal(transfer_test_take(device), baseline);
        if (!fired) {
            g_assert_cmpint(status, ==, CURD_OK);
            break;
        }
    }
    g_test_message("%u driver calls failed in turn", fail_at - 1);
    g_assert_cmpuint(fail_at, >, 5);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(bytes[0]);
    g_free(bytes[1]);
}

static const transfer_test_case cases[] = {
    {"each-failing-call-of-an-allocation-miss",
     test_each_failing_call_of_an_allocation_miss},
    {"an-allocation-hit-makes-no-driver-call",
     test_an_allocation_hit_makes_no_driver_call},
    {"each-failing-call-of-a-release-that-evicts",
     test_each_failing_call_of_a_release_that_evicts},
    {"each-failing-call-of-a-release-that-frees",
     test_each_failing_call_of_a_release_that_frees},
    {"each-failing-call-of-a-static-upload-miss",
     test_each_failing_call_of_a_static_upload_miss},
    {"each-failing-call-of-a-pipelined-static-upload-miss",
     test_each_failing_call_of_a_pipelined_static_upload_miss},
    {"a-static-upload-hit-makes-no-driver-call",
     test_a_static_upload_hit_makes_no_driver_call},
    {"each-failing-call-of-a-keyed-upload-miss",
     test_each_failing_call_of_a_keyed_upload_miss},
    {"a-keyed-upload-hit-makes-no-driver-call",
     test_a_keyed_upload_hit_makes_no_driver_call},
    {"a-team-compared-static-upload-hit-makes-no-driver-call",
     test_a_team_compared_static_upload_hit_makes_no_driver_call},
    {"each-failing-call-of-a-static-release-that-frees",
     test_each_failing_call_of_a_static_release_that_frees},
    {"the-statistics-make-no-driver-call",
     test_the_statistics_make_no_driver_call},
    {"each-failing-call-of-a-session-life",
     test_each_failing_call_of_a_session_life},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "session-faults", cases,
                              G_N_ELEMENTS(cases));
}
