/* pool_upstream.c - the pool's side facing its upstream: its alloc and
 * free, timed and counted; the bytes the pool holds there, capped; and
 * the trim, which takes cached blocks out of every shard and front
 * (planned and checked first, so it never stops half way) and frees them
 * upstream, for curdi_pool_trim and the out-of-memory ladder. See
 * pool_upstream.h. */
#include "memory/pool_upstream.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/status.h"
#include "memory/pool_fronts.h"
#include "memory/pool_records.h"
#include "memory/pool_stats.h"

/* ------------------------------------------------------------------------
 * Upstream calls, timed and counted
 * ---------------------------------------------------------------------- */
curd_status curdi_pool_upstream_alloc(curdi_pool *pool, size_t class_bytes,
                                      uint64_t *out_address)
{
    uint64_t start = curdi_clock_ns();
    curd_status status =
        pool->upstream.alloc(pool->upstream.context, class_bytes, out_address);
    curdi_pool_stats_global_count(&pool->upstream_ns,
                                  curdi_clock_ns() - start);
    if (status == CURD_OK)
        curdi_pool_stats_global_count(&pool->upstream_allocs, 1);
    return status;
}

/* Frees the block upstream and its record. */
void curdi_pool_upstream_free(curdi_pool *pool, pool_block *block)
{
    uint64_t start = curdi_clock_ns();
    curd_status status = pool->upstream.free(
        pool->upstream.context, block->address, block->class_bytes);
    curdi_pool_stats_global_count(&pool->upstream_ns,
                                  curdi_clock_ns() - start);
    curdi_pool_stats_global_count(&pool->upstream_frees, 1);
    atomic_fetch_sub_explicit(&pool->reserved_bytes, block->class_bytes,
                              memory_order_relaxed);
    if (status != CURD_OK)
        curdi_trace("the %s pool's upstream failed to free %zu bytes at 0x%" PRIx64
                    " (%s); the block is gone",
                    pool->name, block->class_bytes, block->address,
                    curd_status_name(status));
    curdi_pool_records_retire(&pool->records, block);
}

bool curdi_pool_upstream_reserved_add(curdi_pool *pool, uint64_t bytes)
{
    uint64_t reserved =
        atomic_load_explicit(&pool->reserved_bytes, memory_order_relaxed);
    do {
        if (bytes > RESERVED_MAX || reserved > RESERVED_MAX - bytes)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &pool->reserved_bytes, &reserved, reserved + bytes,
        memory_order_relaxed, memory_order_relaxed));
    return true;
}

/* ------------------------------------------------------------------------
 * Trim
 * ---------------------------------------------------------------------- */
/* Every shard locked and the fronts revoked: lease_free + the sum of
 * leases is the budget (a block moving between shards carries its lease
 * outside both for a moment, so it may be less, never more). Only a
 * CURDI_ASSERT calls it, which the release build compiles away. */
static inline __attribute__((unused)) bool
leases_within_budget(curdi_pool *pool)
{
    uint64_t total =
        atomic_load_explicit(&pool->lease_free, memory_order_relaxed);
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        total += pool->shards[i].lease_bytes
                 + pool->shards[i].front.lease_bytes;
    return total <= pool->cache_budget_bytes;
}

/* The bytes and blocks a trim takes from each shard. */
typedef struct trim_plan {
    uint64_t bytes[SHARD_COUNT];
    uint64_t blocks[SHARD_COUNT];
} trim_plan;

/* Walks the blocks a trim takes, largest class first, shard by shard, top
 * of each stack first, until at most keep of the cached bytes stay. With
 * plan set it only counts them, per shard; otherwise it pops them onto
 * *detached and counts them down. Both walks see the same stacks (every
 * shard stays locked from one to the other), so they take the same blocks.
 * Returns the bytes taken. */
static uint64_t trim_walk(curdi_pool *pool, uint64_t cached, uint64_t keep,
                          trim_plan *plan, pool_block **detached)
{
    uint64_t taken = 0;
    for (unsigned class_index = pool->class_count;
         class_index-- > 0 && cached > keep;) {
        for (unsigned i = 0; i < SHARD_COUNT && cached > keep; i++) {
            pool_shard *shard = &pool->shards[i];
            pool_front *front = &shard->front;
            /* The front's blocks first (revoked: every shard is locked),
             * counted in the shard's part. */
            unsigned in_front =
                class_index < pool->hot_count ? front->counts[class_index] : 0;
            while (in_front > 0 && cached > keep) {
                pool_block *top = front->slots[class_index * FRONT_DEPTH +
                                               in_front - 1u];
                size_t class_bytes = top->class_bytes;
                in_front--;
                if (plan != NULL) {
                    plan->bytes[i] += class_bytes;
                    plan->blocks[i] += 1;
                } else {
                    front->counts[class_index] = (uint8_t)in_front;
                    front->cached_bytes -= class_bytes;
                    count_cached_down(pool, shard->families, class_bytes);
                    top->next = *detached;
                    *detached = top;
                }
                cached -= class_bytes;
                taken += class_bytes;
            }
            pool_block *block = shard->stacks[class_index].top;
            while (block != NULL && cached > keep) {
                pool_block *below = block->next;
                size_t class_bytes = block->class_bytes;
                if (plan != NULL) {
                    plan->bytes[i] += class_bytes;
                    plan->blocks[i] += 1;
                } else {
                    stack_pop(shard, class_index); /* block, the top */
                    count_cached_down(pool, shard->families, class_bytes);
                    block->next = *detached;
                    *detached = block;
                }
                cached -= class_bytes;
                taken += class_bytes;
                block = below;
            }
        }
    }
    return taken;
}

/* Frees cached blocks, largest class first, until at most keep bytes stay
 * cached; with `need` set, keep is (cached - value) instead of value (free
 * at least value bytes, if the cache has them). Sets *out_freed to the
 * bytes freed. CURD_E_OVERFLOW, with nothing freed, when a counter lacks
 * headroom to count the whole trim: the trim is planned and checked first, so
 * it never stops half way. */
curd_status curdi_pool_upstream_trim_cache(curdi_pool *pool, bool need,
                                           uint64_t value, uint64_t *out_freed)
{
    *out_freed = 0;
    if (!curdi_pool_stats_global_headroom(pool))
        return curdi_pool_stats_fail_counters_full(pool, "trim");
    lock_all(pool);
    curdi_pool_fronts_revoke(pool);
    uint64_t cached = 0;
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        cached += pool->shards[i].cached_bytes +
                  pool->shards[i].front.cached_bytes;
    uint64_t keep = need ? (cached > value ? cached - value : 0) : value;
    trim_plan plan;
    memset(&plan, 0, sizeof plan);
    trim_walk(pool, cached, keep, &plan, NULL);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        const family_part *f = pool->shards[i].families;
        if (!share_headroom(f[FAMILY_CACHED_BYTES].freed, plan.bytes[i],
                            SHARD_COUNTER_MAX)
            || !share_headroom(f[FAMILY_CACHED_BLOCKS].freed, plan.blocks[i],
                               SHARD_COUNTER_MAX)) {
            curdi_pool_fronts_restore(pool);
            unlock_all(pool);
            return curdi_pool_stats_fail_counters_full(pool, "trim");
        }
    }
    pool_block *detached = NULL;
    uint64_t freed = trim_walk(pool, cached, keep, NULL, &detached);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        lease_give_back(pool, &shard->lease_bytes, shard->cached_bytes, 0);
        lease_give_back(pool, &shard->front.lease_bytes,
                        shard->front.cached_bytes, 0);
    }
    CURDI_ASSERT(leases_within_budget(pool));
    atomic_fetch_add(&pool->busy, 1u);
    curdi_pool_fronts_restore(pool);
    unlock_all(pool);
    while (detached != NULL) {
        pool_block *next = detached->next;
        curdi_pool_upstream_free(pool, detached);
        detached = next;
    }
    atomic_fetch_sub(&pool->busy, 1u);
    *out_freed = freed;
    return CURD_OK;
}
