/* pool-model.h - a host upstream and a reference model of one pool, for
 * tests/test-pool.c, tests/test-pool-threads.c and fuzz/fuzz-pool.c.
 *
 * The upstream hands out malloc'd memory (so Valgrind sees every block) or,
 * for sizes no host could hold, fake addresses; it fails with
 * CURD_E_OUT_OF_MEMORY past a capacity, and its Nth allocation attempt can
 * be made to fail with a chosen status.
 *
 * The model is the pool's documented behaviour for one thread, written as
 * plainly as possible: per-class LIFO lists of cached addresses, a list of
 * live blocks, and every statistic of curd_pool_stats kept by hand. It
 * simulates the upstream's decisions (attempt numbers, capacity) itself, so
 * a test runs the same operation on the pool and on the model and compares
 * status, address, class and every statistic but upstream_ns. Plain C11:
 * the fuzzer includes it without GLib. */
#ifndef CURD_TESTS_POOL_MODEL_H
#define CURD_TESTS_POOL_MODEL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "curd.h"
#include "memory/pool.h"

/* ------------------------------------------------------------------------
 * The host upstream
 * ---------------------------------------------------------------------- */
typedef struct pm_upstream {
    pthread_mutex_t lock;
    uint64_t capacity_bytes; /* allocations past this fail: OUT_OF_MEMORY */
    uint64_t held_bytes;
    uint64_t held_blocks;
    uint64_t attempts; /* alloc calls so far */
    uint64_t fail_at;  /* the attempt that fails with fail_status; 0: none */
    curd_status fail_status;
    bool fake_addresses; /* hand out unique fake addresses, no memory */
    uint64_t next_fake;
    uint64_t frees;
} pm_upstream;

static inline void pm_upstream_init(pm_upstream *upstream,
                                    uint64_t capacity_bytes)
{
    memset(upstream, 0, sizeof *upstream);
    pthread_mutex_init(&upstream->lock, NULL);
    upstream->capacity_bytes = capacity_bytes;
    upstream->fail_status = CURD_E_OUT_OF_MEMORY;
    upstream->next_fake = (uint64_t)1 << 44;
}

static inline void pm_upstream_fini(pm_upstream *upstream)
{
    pthread_mutex_destroy(&upstream->lock);
}

static inline curd_status pm_upstream_alloc(void *context, size_t byte_len,
                                            uint64_t *out_address)
{
    pm_upstream *upstream = context;
    pthread_mutex_lock(&upstream->lock);
    upstream->attempts++;
    if (upstream->fail_at != 0 && upstream->attempts == upstream->fail_at) {
        curd_status status = upstream->fail_status;
        pthread_mutex_unlock(&upstream->lock);
        return curdi_fail(status,
                          "test upstream: attempt %" PRIu64 " fails by "
                          "request. Fix: none, this is a test.",
                          upstream->fail_at);
    }
    if (byte_len > upstream->capacity_bytes - upstream->held_bytes) {
        pthread_mutex_unlock(&upstream->lock);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "test upstream: %zu bytes do not fit. Fix: none, "
                          "this is a test.",
                          byte_len);
    }
    uint64_t address;
    if (upstream->fake_addresses) {
        address = upstream->next_fake;
        upstream->next_fake += 4096;
    } else {
        void *memory = malloc(byte_len);
        if (memory == NULL) {
            pthread_mutex_unlock(&upstream->lock);
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "test upstream: malloc(%zu) failed. Fix: none.",
                              byte_len);
        }
        address = (uint64_t)(uintptr_t)memory;
    }
    upstream->held_bytes += byte_len;
    upstream->held_blocks++;
    pthread_mutex_unlock(&upstream->lock);
    *out_address = address;
    return CURD_OK;
}

static inline curd_status pm_upstream_free(void *context, uint64_t address,
                                           size_t byte_len)
{
    pm_upstream *upstream = context;
    pthread_mutex_lock(&upstream->lock);
    upstream->held_bytes -= byte_len;
    upstream->held_blocks--;
    upstream->frees++;
    bool fake = upstream->fake_addresses;
    pthread_mutex_unlock(&upstream->lock);
    if (!fake)
        free((void *)(uintptr_t)address);
    return CURD_OK;
}

static inline bool pm_upstream_free_bytes(void *context, uint64_t *out)
{
    pm_upstream *upstream = context;
    pthread_mutex_lock(&upstream->lock);
    *out = upstream->capacity_bytes - upstream->held_bytes;
    pthread_mutex_unlock(&upstream->lock);
    return true;
}

static inline curdi_upstream pm_upstream_table(pm_upstream *upstream)
{
    curdi_upstream table = {
        .alloc = pm_upstream_alloc,
        .free = pm_upstream_free,
        .free_bytes = pm_upstream_free_bytes,
        .context = upstream,
    };
    return table;
}

/* A pool named name over the upstream, with the given cache budget and
 * live limit (0: none); curdi_pool_lifecycle_create's status. */
static inline curd_status pm_pool_create(pm_upstream *upstream,
                                         const char *name, uint64_t budget,
                                         uint64_t limit, curdi_pool **out)
{
    curdi_upstream table = pm_upstream_table(upstream);
    curdi_pool_config config = {
        .name = name,
        .cache_budget_bytes = budget,
        .live_limit_bytes = limit,
    };
    return curdi_pool_lifecycle_create(&table, &config, out);
}

/* ------------------------------------------------------------------------
 * The model
 * ---------------------------------------------------------------------- */
#define PM_MAX_CLASSES 512u
#define PM_SLOTS_MAX 1024u
#define PM_RESERVED_MAX ((uint64_t)1 << 62)
#define PM_BLOCK_MAX (UINT64_MAX / 16u) /* 2^60 - 1 */

typedef struct pm_block {
    uint64_t address;
    size_t class_bytes;
    size_t byte_len;
} pm_block;

typedef struct pm_stack {
    uint64_t *addresses; /* the top is the last one */
    uint32_t count;
    uint32_t capacity;
} pm_stack;

typedef struct pool_model {
    uint64_t budget;
    uint64_t limit;
    /* The upstream, simulated: same rules as pm_upstream. */
    uint64_t capacity;
    uint64_t held;
    uint64_t attempts;
    uint64_t fail_at;
    curd_status fail_status;
    pm_block *live;
    size_t live_count;
    size_t live_capacity;
    pm_stack cached[PM_MAX_CLASSES];
    uint64_t cached_total;
    curd_pool_stats stats; /* what the pool must report (not upstream_ns) */
} pool_model;

static inline void pm_init(pool_model *model, uint64_t budget, uint64_t limit,
                           uint64_t capacity)
{
    memset(model, 0, sizeof *model);
    model->budget = budget;
    model->limit = limit;
    model->capacity = capacity;
    model->fail_status = CURD_E_OUT_OF_MEMORY;
    model->stats.cache_budget_bytes = budget;
    model->stats.live_limit_bytes = limit;
}

static inline void pm_fini(pool_model *model)
{
    for (unsigned i = 0; i < PM_MAX_CLASSES; i++)
        free(model->cached[i].addresses);
    free(model->live);
    memset(model, 0, sizeof *model);
}

static inline void pm_up(curd_stat_family *family, uint64_t amount)
{
    family->current += amount;
    family->allocated += amount;
    if (family->current > family->peak)
        family->peak = family->current;
}

static inline void pm_down(curd_stat_family *family, uint64_t amount)
{
    family->current -= amount;
    family->freed += amount;
}

static inline uint32_t pm_slots(const pool_model *model, size_t class_bytes)
{
    uint64_t fit = model->budget / class_bytes;
    return fit == 0 ? 1u : fit > PM_SLOTS_MAX ? PM_SLOTS_MAX : (uint32_t)fit;
}

static inline void pm_push_live(pool_model *model, pm_block block)
{
    if (model->live_count == model->live_capacity) {
        size_t capacity = model->live_capacity ? model->live_capacity * 2 : 64;
        model->live = realloc(model->live, capacity * sizeof *model->live);
        if (model->live == NULL)
            abort();
        model->live_capacity = capacity;
    }
    model->live[model->live_count++] = block;
}

static inline void pm_push_cached(pool_model *model, unsigned class_index,
                                  uint64_t address)
{
    pm_stack *stack = &model->cached[class_index];
    if (stack->count == stack->capacity) {
        uint32_t capacity = stack->capacity ? stack->capacity * 2 : 8;
        stack->addresses =
            realloc(stack->addresses, capacity * sizeof *stack->addresses);
        if (stack->addresses == NULL)
            abort();
        stack->capacity = capacity;
    }
    stack->addresses[stack->count++] = address;
}

static inline unsigned pm_class_index(size_t class_bytes)
{
    size_t check = 0;
    unsigned index = 0;
    if (curdi_checked_size_class(class_bytes, &check, &index) != CURD_OK
        || check != class_bytes)
        abort();
    return index;
}

/* Trims cached blocks, largest class first, top of each list first, until
 * at most keep bytes stay cached. Returns the bytes freed. */
static inline uint64_t pm_trim(pool_model *model, uint64_t keep)
{
    uint64_t freed = 0;
    for (unsigned i = PM_MAX_CLASSES; i-- > 0 && model->cached_total > keep;) {
        pm_stack *stack = &model->cached[i];
        size_t class_bytes = curdi_checked_size_class_bytes(i);
        while (stack->count > 0 && model->cached_total > keep) {
            stack->count--;
            model->cached_total -= class_bytes;
            model->held -= class_bytes;
            pm_down(&model->stats.cached_bytes, class_bytes);
            pm_down(&model->stats.cached_blocks, 1);
            model->stats.upstream_frees++;
            freed += class_bytes;
        }
    }
    return freed;
}

static inline curd_status pm_upstream_try(pool_model *model, size_t class_bytes)
{
    model->attempts++;
    if (model->fail_at != 0 && model->attempts == model->fail_at)
        return model->fail_status;
    if (class_bytes > model->capacity - model->held)
        return CURD_E_OUT_OF_MEMORY;
    model->held += class_bytes;
    model->stats.upstream_allocs++;
    return CURD_OK;
}

/* The expected result of acquiring byte_len bytes. actual_address is what
 * the pool returned (used for a miss that succeeds). *out_predicted is the
 * address the pool must return on a hit, 0 on a miss. */
static inline curd_status pm_acquire(pool_model *model, size_t byte_len,
                                     uint64_t actual_address,
                                     uint64_t *out_predicted,
                                     size_t *out_class_bytes)
{
    *out_predicted = 0;
    *out_class_bytes = 0;
    if (byte_len == 0)
        return CURD_E_INVALID_ARGUMENT;
    size_t class_bytes = 0;
    unsigned class_index = 0;
    curd_status status =
        curdi_checked_size_class(byte_len, &class_bytes, &class_index);
    if (status != CURD_OK)
        return status;
    if (class_bytes > PM_BLOCK_MAX)
        return CURD_E_OVERFLOW;
    if (model->limit != 0 &&
        class_bytes > model->limit - model->stats.live_bytes.current)
        return CURD_E_BUDGET;
    if (model->limit != 0 && model->stats.live_bytes.current > model->limit)
        return CURD_E_BUDGET;
    *out_class_bytes = class_bytes;
    pm_stack *stack = &model->cached[class_index];
    uint64_t address;
    if (stack->count > 0) {
        address = stack->addresses[--stack->count];
        model->cached_total -= class_bytes;
        pm_down(&model->stats.cached_bytes, class_bytes);
        pm_down(&model->stats.cached_blocks, 1);
        model->stats.cache_hits++;
        *out_predicted = address;
    } else {
        /* A pool holds at most 2^62 bytes upstream: past that, overflow,
         * before anything is counted. */
        if (class_bytes > PM_RESERVED_MAX - model->held)
            return CURD_E_OVERFLOW;
        model->stats.cache_misses++;
        status = pm_upstream_try(model, class_bytes);
        if (status == CURD_E_OUT_OF_MEMORY && model->cached_total > 0) {
            uint64_t keep = model->cached_total > class_bytes
                                ? model->cached_total - class_bytes
                                : 0;
            if (pm_trim(model, keep) > 0) {
                model->stats.oom_retries++;
                status = pm_upstream_try(model, class_bytes);
            }
        }
        if (status == CURD_E_OUT_OF_MEMORY)
            model->stats.oom_failures++;
        if (status != CURD_OK)
            return status;
        address = actual_address;
    }
    pm_block block = {address, class_bytes, byte_len};
    pm_push_live(model, block);
    pm_up(&model->stats.live_bytes, class_bytes);
    pm_up(&model->stats.live_blocks, 1);
    pm_up(&model->stats.requested_bytes, byte_len);
    return CURD_OK;
}

static inline curd_status pm_release(pool_model *model, uint64_t address)
{
    size_t at = 0;
    while (at < model->live_count && model->live[at].address != address)
        at++;
    if (at == model->live_count)
        return CURD_E_STALE_HANDLE;
    pm_block block = model->live[at];
    model->live[at] = model->live[--model->live_count];
    pm_down(&model->stats.live_bytes, block.class_bytes);
    pm_down(&model->stats.live_blocks, 1);
    pm_down(&model->stats.requested_bytes, block.byte_len);
    unsigned class_index = pm_class_index(block.class_bytes);
    if (block.class_bytes <= model->budget &&
        model->cached[class_index].count < pm_slots(model, block.class_bytes) &&
        model->cached_total + block.class_bytes <= model->budget) {
        pm_push_cached(model, class_index, address);
        model->cached_total += block.class_bytes;
        pm_up(&model->stats.cached_bytes, block.class_bytes);
        pm_up(&model->stats.cached_blocks, 1);
    } else {
        model->held -= block.class_bytes;
        model->stats.upstream_frees++;
    }
    return CURD_OK;
}

static inline void pm_reset_family(curd_stat_family *family)
{
    family->allocated = 0;
    family->freed = 0;
    family->peak = family->current;
}

static inline void pm_stats_reset(pool_model *model)
{
    curd_pool_stats *s = &model->stats;
    pm_reset_family(&s->live_bytes);
    pm_reset_family(&s->cached_bytes);
    pm_reset_family(&s->requested_bytes);
    pm_reset_family(&s->live_blocks);
    pm_reset_family(&s->cached_blocks);
    s->upstream_allocs = s->upstream_frees = s->cache_hits = 0;
    s->cache_misses = s->oom_retries = s->oom_failures = 0;
}

/* Compares every statistic but upstream_ns; on a difference writes which
 * into why and returns false. */
static inline bool pm_compare_family(const char *name,
                                     const curd_stat_family *want,
                                     const curd_stat_family *got, char *why,
                                     size_t why_len)
{
    if (want->current == got->current && want->peak == got->peak &&
        want->allocated == got->allocated && want->freed == got->freed)
        return true;
    snprintf(why, why_len,
             "%s: want current %" PRIu64 " peak %" PRIu64 " allocated %" PRIu64
             " freed %" PRIu64 ", got %" PRIu64 " %" PRIu64 " %" PRIu64
             " %" PRIu64,
             name, want->current, want->peak, want->allocated, want->freed,
             got->current, got->peak, got->allocated, got->freed);
    return false;
}

static inline bool pm_compare(const pool_model *model,
                              const curd_pool_stats *got, char *why,
                              size_t why_len)
{
    const curd_pool_stats *want = &model->stats;
    if (!pm_compare_family("live_bytes", &want->live_bytes, &got->live_bytes,
                           why, why_len) ||
        !pm_compare_family("cached_bytes", &want->cached_bytes,
                           &got->cached_bytes, why, why_len) ||
        !pm_compare_family("requested_bytes", &want->requested_bytes,
                           &got->requested_bytes, why, why_len) ||
        !pm_compare_family("live_blocks", &want->live_blocks,
                           &got->live_blocks, why, why_len) ||
        !pm_compare_family("cached_blocks", &want->cached_blocks,
                           &got->cached_blocks, why, why_len))
        return false;
    const struct {
        const char *name;
        uint64_t want, got;
    } counters[] = {
        {"upstream_allocs", want->upstream_allocs, got->upstream_allocs},
        {"upstream_frees", want->upstream_frees, got->upstream_frees},
        {"cache_hits", want->cache_hits, got->cache_hits},
        {"cache_misses", want->cache_misses, got->cache_misses},
        {"oom_retries", want->oom_retries, got->oom_retries},
        {"oom_failures", want->oom_failures, got->oom_failures},
        {"cache_budget_bytes", want->cache_budget_bytes,
         got->cache_budget_bytes},
        {"live_limit_bytes", want->live_limit_bytes, got->live_limit_bytes},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (counters[i].want != counters[i].got) {
            snprintf(why, why_len, "%s: want %" PRIu64 ", got %" PRIu64,
                     counters[i].name, counters[i].want, counters[i].got);
            return false;
        }
    }
    return true;
}

#endif
