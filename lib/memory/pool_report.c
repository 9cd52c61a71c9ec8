/* pool_report.c - what a pool tells of itself: curdi_pool_report_stats reads
 * every family's level, peak and traffic (each thread's front folded in
 * under all locks, as pool.c's header comment says under "Statistics"),
 * and curdi_pool_report_stats_reset starts the traffic and the peaks again.
 * Declared in pool.h; listed after it in lib/LAYERS, beside
 * pool_lifecycle. */
#include "memory/pool.h"

#include <stdatomic.h>
#include <string.h>

#include "memory/pool_fronts.h"
#include "memory/pool_shards.h"
#include "memory/pool_stats.h"

static void family_read(curdi_pool *pool, enum pool_family family,
                        curd_stat_family *out)
{
    uint64_t allocated = 0, freed = 0;
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        family_flush(pool, &shard->families[family], family);
        uint64_t front_allocated, front_freed;
        front_amounts(&shard->front.moves, family, &front_allocated,
                      &front_freed);
        /* A shard's and a front's shares together stay within
         * 2^64 / SHARD_COUNT: the sums fit. */
        allocated += shard->families[family].allocated + front_allocated;
        freed += shard->families[family].freed + front_freed;
    }
    int64_t level = atomic_load(&pool->families[family].level);
    out->current = level > 0 ? (uint64_t)level : 0;
    peak_raise(&pool->families[family], out->current);
    out->peak = atomic_load(&pool->families[family].peak);
    out->allocated = allocated;
    out->freed = freed;
}

void curdi_pool_report_stats(curdi_pool *pool, curd_pool_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (pool == NULL)
        return;
    /* Every thread's front is folded in: revoked, so its owner is out. */
    lock_all(pool);
    curdi_pool_fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        curdi_pool_stats_front_fold(pool, &pool->shards[i].front);
    family_read(pool, FAMILY_LIVE_BYTES, &out->live_bytes);
    family_read(pool, FAMILY_CACHED_BYTES, &out->cached_bytes);
    family_read(pool, FAMILY_REQUESTED_BYTES, &out->requested_bytes);
    family_read(pool, FAMILY_LIVE_BLOCKS, &out->live_blocks);
    family_read(pool, FAMILY_CACHED_BLOCKS, &out->cached_blocks);
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        out->cache_hits +=
            pool->shards[i].cache_hits + pool->shards[i].front.moves.out_blocks;
    curdi_pool_fronts_restore(pool);
    unlock_all(pool);
    out->upstream_allocs = atomic_load(&pool->upstream_allocs);
    out->upstream_frees = atomic_load(&pool->upstream_frees);
    out->cache_misses = atomic_load(&pool->cache_misses);
    out->oom_retries = atomic_load(&pool->oom_retries);
    out->oom_failures = atomic_load(&pool->oom_failures);
    out->upstream_ns = atomic_load(&pool->upstream_ns);
    out->cache_budget_bytes = pool->cache_budget_bytes;
    out->live_limit_bytes = pool->live_limit_bytes;
}

void curdi_pool_report_stats_reset(curdi_pool *pool)
{
    if (pool == NULL)
        return;
    lock_all(pool);
    curdi_pool_fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_front *front = &pool->shards[i].front;
        curdi_pool_stats_front_fold(pool, front);
        memset(&front->moves, 0, sizeof front->moves);
        memset(&front->folded, 0, sizeof front->folded);
        front_headroom_close(front); /* the peaks come down to the levels */
    }
    for (unsigned f = 0; f < FAMILY_COUNT; f++) {
        for (unsigned i = 0; i < SHARD_COUNT; i++) {
            family_part *part = &pool->shards[i].families[f];
            family_flush(pool, part, (enum pool_family)f);
            part->allocated = 0;
            part->freed = 0;
        }
        int64_t level = atomic_load(&pool->families[f].level);
        atomic_store(&pool->families[f].peak, level > 0 ? (uint64_t)level : 0);
    }
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        pool->shards[i].cache_hits = 0;
    curdi_pool_fronts_restore(pool);
    unlock_all(pool);
    atomic_store(&pool->upstream_allocs, 0);
    atomic_store(&pool->upstream_frees, 0);
    atomic_store(&pool->cache_misses, 0);
    atomic_store(&pool->oom_retries, 0);
    atomic_store(&pool->oom_failures, 0);
    atomic_store(&pool->upstream_ns, 0);
}
