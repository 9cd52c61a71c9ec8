/* pool_stats.c - the pool's statistics off its hit paths: the slow-path
 * counters (upstream calls, misses, out-of-memory events, upstream time),
 * a front's change folded into the pool's levels, its owner's look at the
 * pool once a move left its band, and the sentence of a counter that
 * would pass its share. See pool_stats.h. */
#include "memory/pool_stats.h"

#include <stdatomic.h>

#include "base/status.h"

bool curdi_pool_stats_global_headroom(curdi_pool *pool)
{
    _Atomic uint64_t *counters[] = {
        &pool->upstream_allocs, &pool->upstream_frees, &pool->cache_misses,
        &pool->oom_retries,     &pool->oom_failures,   &pool->upstream_ns};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        if (atomic_load_explicit(counters[i], memory_order_relaxed) >
            GLOBAL_COUNTER_MAX)
            return false;
    return true;
}

void curdi_pool_stats_global_count(_Atomic uint64_t *counter, uint64_t amount)
{
    /* Cannot pass 2^64: curdi_pool_stats_global_headroom() held before the
     * operation began, and no operation adds anywhere near 2^62. */
    atomic_fetch_add_explicit(counter, amount, memory_order_relaxed);
}

void curdi_pool_stats_front_fold(curdi_pool *pool, pool_front *front)
{
    for (unsigned f = 0; f < FAMILY_COUNT; f++) {
        int64_t delta = front_delta(front, (enum pool_family)f);
        if (delta != 0)
            atomic_fetch_add_explicit(&pool->families[f].level, delta,
                                      memory_order_relaxed);
    }
    front->folded = front->moves;
}

/* How far a family's estimate may rise before it passes the family's
 * peak, once the peak has been raised past the estimate (0 when a bound
 * kept the peak below it: the next rise looks again). */
static int64_t peak_headroom(curdi_pool *pool, enum pool_family family,
                             int64_t level)
{
    peak_check(pool, family, level);
    int64_t peak = (int64_t)atomic_load_explicit(&pool->families[family].peak,
                                                 memory_order_relaxed);
    return peak > level ? peak - level : 0;
}

/* The owner's look at the pool once a move used up one of its front's
 * headrooms: folds the front's level change into the pool's levels once it
 * reaches a quantum, raises each peak its estimate passed, as family_up
 * does for a shard (the estimate adds the owner's shard's unflushed change,
 * so that one thread's level is exact), and measures the headrooms again. */
__attribute__((noinline, cold)) void
curdi_pool_stats_front_settle_and_leave(curdi_pool *pool, pool_front *front,
                                        const pool_shard *own)
{
    static const enum pool_family live[HEADROOM_COUNT] = {
        FAMILY_LIVE_BYTES, FAMILY_LIVE_BLOCKS, FAMILY_REQUESTED_BYTES};
    /* The cached family that moves by the live one's negative, if any. */
    static const enum pool_family cached[HEADROOM_COUNT] = {
        FAMILY_CACHED_BYTES, FAMILY_CACHED_BLOCKS, FAMILY_COUNT};
    int64_t net[HEADROOM_COUNT];
    bool fold = false;
    for (unsigned r = 0; r < HEADROOM_COUNT; r++) {
        net[r] = front_delta(front, live[r]);
        fold = fold || past_quantum(net[r], family_quantum[live[r]]);
    }
    if (fold) {
        curdi_pool_stats_front_fold(pool, front);
        memset(net, 0, sizeof net);
    }
    const family_part *f = own->families;
    for (unsigned r = 0; r < HEADROOM_COUNT; r++) {
        enum pool_family family = live[r];
        int64_t quantum = family_quantum[family];
        int64_t rise = quantum - 1 - net[r], fall = quantum - 1 + net[r];
        int64_t headroom = peak_headroom(pool, family,
                                         pool_level(pool, family) + net[r]
                                             + delta_of(&f[family]));
        rise = headroom < rise ? headroom : rise;
        if (cached[r] != FAMILY_COUNT) {
            headroom = peak_headroom(pool, cached[r],
                                     pool_level(pool, cached[r]) - net[r]
                                         + delta_of(&f[cached[r]]));
            fall = headroom < fall ? headroom : fall;
        }
        atomic_store_explicit(&front->rise_headroom[r], rise,
                              memory_order_relaxed);
        front->headroom_band[r] = rise + fall;
    }
    front_leave(front);
}

curd_status curdi_pool_stats_fail_counters_full(const curdi_pool *pool,
                                                const char *op)
{
    return curdi_fail(CURD_E_OVERFLOW,
                      "The %s pool cannot count this %s: a cumulative "
                      "statistic would pass its limit (2^64 / %u per thread "
                      "shard, or 2^64 - 2^62 for the upstream counters). "
                      "Fix: call curd_device_stats_reset() to restart the "
                      "cumulative counters.",
                      pool->name, op, SHARD_COUNT);
}
