/* api-sweep.c - one faulted run of an entry of the list and the invariants
 * after it (see api-sweep.h). */
#include "support/api-sweep.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "driver/driver.h"
#include "driver/nccl.h"
#include "launch/program.h"
#include "support/driver-faults.h"
#include "support/fake-live.h"
#include "support/nccl-faults.h"
#include "transfer/gather.h"

const int api_fault_results[] = {CURDI_CUDA_ERROR_UNKNOWN,
                                 CURDI_CUDA_ERROR_ILLEGAL_ADDRESS};
const size_t api_fault_result_count =
    sizeof api_fault_results / sizeof api_fault_results[0];

/* ------------------------------------------------------------------------
 * curd_stats, field by field
 * ---------------------------------------------------------------------- */
#define API_FIELD_(path, rule)                                               \
    {#path, offsetof(curd_stats, path), rule}
#define API_FAMILY_(family, current_rule)                                    \
    API_FIELD_(family.current, current_rule),                                \
        API_FIELD_(family.peak, API_STAT_GROWS),                             \
        API_FIELD_(family.allocated, API_STAT_GROWS),                        \
        API_FIELD_(family.freed, API_STAT_GROWS)
/* A pool's levels of live blocks and bytes are exact after a failed call
 * (but for one that lets go whatever it returns); its traffic (blocks
 * taken for staging and given back, cache hits and misses, upstream calls
 * and their time) is history that may grow; its cached level moves only
 * by blocks it took upstream and kept. */
#define API_POOL_(pool)                                                      \
    API_FAMILY_(pool.live_bytes, API_STAT_HELD),                             \
        API_FAMILY_(pool.cached_bytes, API_STAT_LEVEL),                      \
        API_FAMILY_(pool.requested_bytes, API_STAT_HELD),                    \
        API_FAMILY_(pool.live_blocks, API_STAT_HELD),                        \
        API_FAMILY_(pool.cached_blocks, API_STAT_LEVEL),                     \
        API_FIELD_(pool.upstream_allocs, API_STAT_GROWS),                    \
        API_FIELD_(pool.upstream_frees, API_STAT_GROWS),                     \
        API_FIELD_(pool.cache_hits, API_STAT_GROWS),                         \
        API_FIELD_(pool.cache_misses, API_STAT_GROWS),                       \
        API_FIELD_(pool.oom_retries, API_STAT_EXACT),                        \
        API_FIELD_(pool.oom_failures, API_STAT_EXACT),                       \
        API_FIELD_(pool.upstream_ns, API_STAT_GROWS),                        \
        API_FIELD_(pool.cache_budget_bytes, API_STAT_EXACT),                 \
        API_FIELD_(pool.live_limit_bytes, API_STAT_EXACT)
/* The resident module counts a buffer made or freed only when the call
 * that made or freed it succeeds: its families are exact, their history
 * too (but see API_MAY_MAKE_AND_FREE). */
#define API_RESIDENT_(family)                                                \
    API_FIELD_(family.current, API_STAT_EXACT),                              \
        API_FIELD_(family.peak, API_STAT_RESIDENT),                          \
        API_FIELD_(family.allocated, API_STAT_RESIDENT),                     \
        API_FIELD_(family.freed, API_STAT_RESIDENT)

const api_stat_field api_stat_fields[] = {
    API_POOL_(device_pool),
    API_POOL_(pinned_pool),
    /* Transfers, and dispatches' traffic, count on success only. */
    API_FIELD_(h2d_bytes, API_STAT_EXACT),
    API_FIELD_(d2h_bytes, API_STAT_EXACT),
    API_FIELD_(copy_ops, API_STAT_EXACT),
    API_FIELD_(fences, API_STAT_EXACT),
    API_FIELD_(fill_ops, API_STAT_EXACT),
    API_FIELD_(fill_bytes, API_STAT_EXACT),
    API_RESIDENT_(resident_bytes),
    API_RESIDENT_(resident_buffers),
    API_FIELD_(accounting_repairs, API_STAT_EXACT),
    /* The module cache counts only loads that succeeded (but see
     * API_MAY_LOAD); its levels are checked against the driver's modules
     * too (held_now). */
    API_FIELD_(module_cache_hits, API_STAT_LOADS),
    API_FIELD_(module_cache_misses, API_STAT_LOADS),
    API_FIELD_(jit_ns, API_STAT_LOADS),
    API_FIELD_(modules_loaded, API_STAT_HELD),
    API_FIELD_(modules_cached, API_STAT_HELD),
    API_FIELD_(module_evictions, API_STAT_LOADS),
    /* Dispatches and batch runs count once their work is complete (the
     * graph captures and in-place updates of a run with it): a failed one
     * counts nothing. */
    API_FIELD_(dispatches, API_STAT_EXACT),
    API_FIELD_(launches, API_STAT_EXACT),
    API_FIELD_(dispatch_device_ns, API_STAT_EXACT),
    API_FIELD_(dispatch_enqueue_ns, API_STAT_EXACT),
    API_FIELD_(dispatch_wait_ns, API_STAT_EXACT),
    API_FIELD_(batch_runs, API_STAT_EXACT),
    API_FIELD_(graph_replays, API_STAT_EXACT),
    API_FIELD_(graph_captures, API_STAT_EXACT),
    API_FIELD_(graph_updates, API_STAT_EXACT),
    /* Copies between buffers count once complete (a synchronous copy's
     * fence, a pending's wait, a batch run's): a failed one counts
     * nothing, on either device. */
    API_FIELD_(d2d_bytes, API_STAT_EXACT),
    API_FIELD_(d2d_ops, API_STAT_EXACT),
    API_FIELD_(peer_bytes, API_STAT_EXACT),
    API_FIELD_(peer_ops, API_STAT_EXACT),
    /* Collectives count once complete: a failed run counts nothing. */
    API_FIELD_(collective_ops, API_STAT_EXACT),
    API_FIELD_(collective_bytes, API_STAT_EXACT),
    /* A failed import imports nothing; a free forgets, or not. */
    API_FIELD_(imported_bytes, API_STAT_EXACT),
};
const size_t api_stat_field_count =
    sizeof api_stat_fields / sizeof api_stat_fields[0];

/* A rule as an entry's failure_may widens it: exact, may grow, or left
 * to the balances below and the driver's counts (API_STAT_LEVEL). */
static api_stat_rule rule_for(const api_stat_field *field,
                              unsigned failure_may)
{
    switch (field->rule) {
    case API_STAT_HELD:
        return (failure_may & API_MAY_LET_GO) != 0 ? API_STAT_LEVEL
                                                   : API_STAT_EXACT;
    case API_STAT_LOADS:
        return (failure_may & API_MAY_LOAD) != 0 ? API_STAT_GROWS
                                                 : API_STAT_EXACT;
    case API_STAT_RESIDENT:
        return (failure_may & API_MAY_MAKE_AND_FREE) != 0 ? API_STAT_GROWS
                                                          : API_STAT_EXACT;
    default:
        return field->rule;
    }
}

bool api_stat_rules_cover_the_struct(void)
{
    size_t first = offsetof(curd_stats, device_pool);
    size_t words = (sizeof(curd_stats) - first) / sizeof(uint64_t);
    unsigned char seen[sizeof(curd_stats) / sizeof(uint64_t)] = {0};
    if (first != sizeof(size_t) || api_stat_field_count != words)
        return false;
    for (size_t i = 0; i < api_stat_field_count; i++) {
        size_t offset = api_stat_fields[i].offset;
        if (offset < first || (offset - first) % sizeof(uint64_t) != 0 ||
            offset >= sizeof(curd_stats) || seen[offset / sizeof(uint64_t)])
            return false;
        seen[offset / sizeof(uint64_t)] = 1;
    }
    return true;
}

static uint64_t field_at(const curd_stats *stats, size_t offset)
{
    uint64_t value;
    memcpy(&value, (const unsigned char *)stats + offset, sizeof value);
    return value;
}

static void family_balanced(const char *name, const curd_stat_family *before,
                            const curd_stat_family *after)
{
    /* allocated - freed moves as current does (all within 2^64). */
    uint64_t moved_in = after->allocated - before->allocated;
    uint64_t moved_out = after->freed - before->freed;
    uint64_t level = after->current - before->current;
    API_CHECK(moved_in - moved_out == level,
              "%s: +%" PRIu64 " allocated, +%" PRIu64 " freed, but the level"
              " moved by %" PRId64,
              name, moved_in, moved_out, (int64_t)level);
}

static void pool_balanced(const char *name, const curd_pool_stats *before,
                          const curd_pool_stats *after)
{
    family_balanced(name, &before->live_bytes, &after->live_bytes);
    family_balanced(name, &before->cached_bytes, &after->cached_bytes);
    family_balanced(name, &before->requested_bytes, &after->requested_bytes);
    family_balanced(name, &before->live_blocks, &after->live_blocks);
    family_balanced(name, &before->cached_blocks, &after->cached_blocks);
    /* Every block is live or cached: together they moved by exactly the
     * blocks taken from upstream less those given back (live ones stay
     * put but where a call lets go whatever it returns). */
    uint64_t kept = (after->upstream_allocs - before->upstream_allocs) -
                    (after->upstream_frees - before->upstream_frees);
    uint64_t moved =
        (after->cached_blocks.current - before->cached_blocks.current) +
        (after->live_blocks.current - before->live_blocks.current);
    API_CHECK(moved == kept,
              "%s: the live and cached blocks moved by %" PRId64 ", but %"
              PRId64 " blocks were taken from upstream and kept",
              name, (int64_t)moved, (int64_t)kept);
}

void api_stats_check(const curd_stats *before, const curd_stats *after,
                     unsigned failure_may)
{
    for (size_t i = 0; i < api_stat_field_count; i++) {
        const api_stat_field *field = &api_stat_fields[i];
        uint64_t was = field_at(before, field->offset);
        uint64_t is = field_at(after, field->offset);
        switch (rule_for(field, failure_may)) {
        case API_STAT_EXACT:
            API_CHECK(is == was,
                      "curd_stats.%s is %" PRIu64 " after the failed call,"
                      " %" PRIu64 " before it",
                      field->name, is, was);
            break;
        case API_STAT_GROWS:
            API_CHECK(is >= was,
                      "curd_stats.%s fell from %" PRIu64 " to %" PRIu64,
                      field->name, was, is);
            break;
        default:
            break; /* pool_balanced, family_balanced */
        }
    }
    pool_balanced("device_pool", &before->device_pool, &after->device_pool);
    pool_balanced("pinned_pool", &before->pinned_pool, &after->pinned_pool);
    family_balanced("resident_bytes", &before->resident_bytes,
                    &after->resident_bytes);
    family_balanced("resident_buffers", &before->resident_buffers,
                    &after->resident_buffers);
}

curd_stats api_stats_of(curd_device *device)
{
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    API_OK(curd_device_stats(device, &stats));
    return stats;
}

/* ------------------------------------------------------------------------
 * What the stand-in driver holds that curd does not account for
 * ---------------------------------------------------------------------- */
static const char *const held_kinds[API_HELD_KINDS] = {
    "device_memory", "host_memory",     "stream",        "event",
    "module",        "registered",      "graph",         "graph_exec",
    "context_retains", "context_stack", "registered_bytes", "link_state",
    "allocation",    "mem_handle",      "va_range",
};
#define HELD_KINDS API_HELD_KINDS

typedef struct held {
    bool counted; /* false: not the stand-in driver */
    long counts[HELD_KINDS];
} held;

/* The stand-in's live objects, less those the world's device holds on
 * purpose: its pools' blocks (live and cached), its idle streams and
 * events, the events it keeps of others' work to wait for (dropped by
 * the next stream it takes), its upload stream, and its loaded modules
 * (the program module's and, once a transfer gathered, the transfer
 * kernels'). */
static held held_now(api_world *w)
{
    held h;
    memset(&h, 0, sizeof h);
    h.counted = fake_live_read(held_kinds, HELD_KINDS, h.counts);
    if (!h.counted || w->device == NULL)
        return h;
    curd_stats stats = api_stats_of(w->device);
    curd_device *device = w->device;
    h.counts[0] -= (long)(stats.device_pool.live_blocks.current +
                          stats.device_pool.cached_blocks.current);
    h.counts[1] -= (long)(stats.pinned_pool.live_blocks.current +
                          stats.pinned_pool.cached_blocks.current);
    pthread_mutex_lock(&device->pool_lock);
    h.counts[2] -= (long)device->idle_stream_count + 1;
    h.counts[3] -= (long)(device->idle_event_count +
                          device->idle_timed_event_count);
    pthread_mutex_unlock(&device->pool_lock);
    h.counts[3] -= (long)atomic_load(&device->wait_count);
    curdi_program_counts programs;
    curdi_program_counts_read(device, &programs);
    h.counts[4] -= (long)programs.modules_loaded +
                   (curdi_gather_loaded(device) ? 1 : 0);
    return h;
}

/* Nothing leaked, unless the run abandoned what it let go (tally);
 * returns whether it did. */
static bool held_same(const held *before, const held *after, bool abandoning,
                      api_tally *tally)
{
    bool abandoned = false;
    if (!before->counted || !after->counted)
        return false;
    for (size_t i = 0; i < HELD_KINDS; i++) {
        long kept = after->counts[i] - before->counts[i];
        if (abandoning && kept > 0) {
            tally->abandoned[i] += kept;
            abandoned = true;
            continue;
        }
        API_CHECK(kept == 0,
                  "the stand-in driver holds %ld %s that curd does not"
                  " account for, %ld before: leaked",
                  after->counts[i], held_kinds[i], before->counts[i]);
    }
    return abandoned;
}

void api_world_close_checked(api_world *w, api_tally *tally)
{
    long counts[HELD_KINDS];
    /* The last device of a lost GPU resets its context, and with it
     * everything abandoned in it. */
    bool reset = api_world_lost(w, CURD_OK);
    api_world_close(w);
    if (reset)
        memset(tally->abandoned, 0, sizeof tally->abandoned);
    if (!fake_live_read(held_kinds, HELD_KINDS, counts))
        return;
    for (size_t i = 0; i < HELD_KINDS; i++)
        API_CHECK(counts[i] == tally->abandoned[i],
                  "the stand-in driver holds %ld %s after the world closed"
                  " (%ld abandoned on purpose)",
                  counts[i], held_kinds[i], tally->abandoned[i]);
}

/* ------------------------------------------------------------------------
 * After a run
 * ---------------------------------------------------------------------- */
/* A buffer round trip, every byte compared: the device works. */
static void device_works(api_world *w)
{
    unsigned char sent[1000], back[1000];
    curd_buffer buffer;
    api_world_random(w, sent, sizeof sent);
    memset(back, 0xA5, sizeof back);
    API_OK(curd_buffer_alloc(w->device, sizeof sent, &buffer));
    API_OK(curd_buffer_upload(w->device, buffer, sent, sizeof sent));
    API_OK(curd_buffer_download(w->device, buffer, back, sizeof back));
    API_OK(curd_buffer_free(w->device, buffer));
    API_CHECK(memcmp(sent, back, sizeof sent) == 0,
              "a round trip after the run came back different");
}

/* After CURD_E_DEVICE_LOST: close the world (the stand-in must then hold
 * nothing of it) and open it again. */
static void reopen(api_world *w, api_tally *tally)
{
    uint64_t seed = w->random_state;
    api_world_close_checked(w, tally);
    API_OK(api_world_open(w, seed));
}

/* ------------------------------------------------------------------------
 * Runs
 * ---------------------------------------------------------------------- */
/* The fault of one run: a driver call failing with a CUresult, or an
 * NCCL call failing with an ncclResult_t. */
typedef struct fault {
    bool nccl;
    unsigned fail_at;
    int result;
} fault;

static void typed_error(curd_status status, const fault *f)
{
    const char *message = curd_last_error();
    size_t length = strlen(message);
    API_CHECK(strcmp(curd_status_name(status), "CURD_E_UNKNOWN") != 0,
              "status %d is no curd_status", (int)status);
    API_CHECK(strstr(message, "Fix: ") != NULL && length > 0 &&
                  message[length - 1] == '.',
              "%s without a Fix sentence: \"%s\"", curd_status_name(status),
              message);
    if (f->nccl) {
        /* A failed call's own mapping, or CURD_E_COMM: a communicator
         * that reported it, or was aborted for it. */
        curd_status mapped =
            curdi_nccl_status_of((curdi_nccl_result)f->result);
        API_CHECK(status == mapped || status == CURD_E_COMM,
                  "%s, where the injected NCCL failure maps to %s: %s",
                  curd_status_name(status), curd_status_name(mapped),
                  message);
        return;
    }
    curd_status mapped = curdi_driver_status_of((curdi_cu_result)f->result);
    API_CHECK(status == mapped,
              "%s, where the injected failure maps to %s: %s",
              curd_status_name(status), curd_status_name(mapped), message);
    API_CHECK(curd_last_driver_code() == f->result,
              "the last driver code is %d, not the injected %d",
              curd_last_driver_code(), f->result);
}

static void describe(const api_op *op, const fault *f, const char *entry)
{
    snprintf(api_run_description, sizeof api_run_description,
             "%s (%s), %s call %u%s%s%s failing with %d", op->function,
             op->path, f->nccl ? "NCCL" : "driver", f->fail_at,
             entry != NULL ? " (" : "", entry != NULL ? entry : "",
             entry != NULL ? ")" : "", f->result);
}

/* One run (api-sweep.h); *out_calls is how many calls of the faulted
 * kind it made. */
static bool sweep_run(api_world *w, const api_op *op, const fault *f,
                      api_tally *tally, unsigned *out_calls)
{
    describe(op, f, NULL);
    held held_before = held_now(w);
    op->setup(w);
    curd_stats before = api_stats_of(w->device);
    API_CHECK(f->nccl ? nccl_faults_begin(f->fail_at, (unsigned)f->result)
                      : driver_faults_begin(f->fail_at, f->result, NULL),
              "faults armed already");
    curd_status status = op->call(w);
    unsigned calls = f->nccl ? nccl_faults_end() : driver_faults_end();
    const char *entry = f->nccl ? nccl_faults_fired_entry()
                                : driver_faults_fired_entry();
    bool fired = entry != NULL;
    *out_calls = calls;
    if (fired) {
        describe(op, f, entry);
        tally->points++;
    } else if (f->fail_at == 0 && !f->nccl) {
        tally->clean_calls += calls;
    }
    bool gone = api_world_lost(w, status);
    if (status != CURD_OK) {
        API_CHECK(fired, "%s without a failure injected: %s",
                  curd_status_name(status), curd_last_error());
        typed_error(status, f);
        if (!gone) {
            curd_stats after = api_stats_of(w->device);
            api_stats_check(&before, &after, op->failure_may);
        }
        tally->failed++;
    }
    op->finish(w, status);
    long communicators = 0;
    API_CHECK(!fake_live_nccl_comms(&communicators) || communicators == 0,
              "%ld communicators live in the stand-in NCCL after the "
              "entry's finish",
              communicators);
    long abandoned = 0;
    API_CHECK(!fake_live_nccl_abandoned_joins(&abandoned) || abandoned == 0,
              "%ld communicators were aborted while NCCL's thread still "
              "joined them (real NCCL keeps what that join had allocated)",
              abandoned);
    /* The caller's memory as the next run finds it. */
    memcpy(w->host_copy, w->host, w->host_len);
    if (!f->nccl && status == CURD_OK && driver_faults_fired_release()) {
        /* With a context current, as the library made the call. */
        API_OK(curdi_core_device_enter(w->device));
        tally->released += driver_faults_complete_release();
        curdi_core_device_leave(w->device);
    }
    if (gone || api_world_lost(w, CURD_OK)) {
        tally->lost++;
        reopen(w, tally);
    } else {
        /* A context that cannot be made current keeps what lives in it:
         * a call that let go of its objects anyway abandoned them. */
        bool abandoning =
            fired && !f->nccl && strcmp(entry, "cuCtxPushCurrent") == 0 &&
            (status == CURD_OK ||
             strcmp(op->function, "curd_device_close") == 0);
        API_CHECK(api_world_bystander_sum(w) == w->bystander_sum,
                  "the bystander buffer's bytes changed");
        held held_after = held_now(w);
        if (held_same(&held_before, &held_after, abandoning, tally)) {
            tally->abandoning++;
            if (getenv("API_SWEEP_TRACE") != NULL)
                fprintf(stderr, "abandoned: %s\n", api_run_description);
        }
    }
    device_works(w);
    api_run_description[0] = '\0';
    return fired;
}

bool api_sweep_run(api_world *w, const api_op *op, unsigned fail_at,
                   int cu_result, api_tally *tally)
{
    fault f = {false, fail_at, cu_result};
    unsigned calls;
    return sweep_run(w, op, &f, tally, &calls);
}

bool api_sweep_nccl_run(api_world *w, const api_op *op, unsigned fail_at,
                        unsigned nccl_result, api_tally *tally)
{
    fault f = {true, fail_at, (int)nccl_result};
    unsigned calls;
    return sweep_run(w, op, &f, tally, &calls);
}

void api_sweep_op(api_world *w, const api_op *op, size_t result_count,
                  unsigned stride, api_tally *tally)
{
    API_CHECK(stride >= 1, "a stride of 0");
    unsigned clean = tally->clean_calls;
    API_CHECK(!api_sweep_run(w, op, 0, 0, tally), "nothing was armed");
    API_CHECK(tally->clean_calls > clean,
              "%s (%s) made no driver call: its entry does not reach the"
              " driver",
              op->function, op->path);
    for (size_t r = 0; r < result_count && r < api_fault_result_count; r++) {
        unsigned fail_at = 1;
        while (api_sweep_run(w, op, fail_at, api_fault_results[r], tally)) {
            API_CHECK(fail_at < 10000, "%s (%s): more than 10000 driver"
                      " calls", op->function, op->path);
            fail_at += stride;
        }
    }
    /* Then every NCCL call of the entries that make some, each failing
     * with a system error (what a dead peer's socket gives). */
    fault no_fault = {true, 0, 0};
    unsigned nccl_calls = 0;
    (void)sweep_run(w, op, &no_fault, tally, &nccl_calls);
    for (unsigned fail_at = 1; nccl_calls > 0; fail_at += stride) {
        if (!api_sweep_nccl_run(w, op, fail_at, CURDI_NCCL_SystemError,
                                tally))
            break;
        API_CHECK(fail_at < 10000, "%s (%s): more than 10000 NCCL calls",
                  op->function, op->path);
    }
}
