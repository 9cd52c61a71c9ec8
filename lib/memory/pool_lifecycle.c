/* pool_lifecycle.c - making and destroying a pool: create sizes the
 * classes and their slots, allocates the shards on cache lines of their
 * own and joins the registry that an exiting thread's fronts go through;
 * destroy takes the pool off that registry, detaches every block (live,
 * cached, in any front, out with a token) under all locks, waits for the
 * slow paths between locks, and frees the blocks upstream. pool.c's
 * header comment says why closing goes this way. Declared in pool.h. */
#include "memory/pool.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/hash_map.h"
#include "base/status.h"
#include "memory/pool_fronts.h"
#include "memory/pool_records.h"
#include "memory/pool_shards.h"
#include "memory/pool_stats.h"
#include "memory/pool_upstream.h"

#define SLOTS_MAX 1024u
/* A shard's live table starts with space for this many blocks. */
#define INITIAL_LIVE_SLOTS 32u

/* Zeroed memory on whole cache lines of its own, so that the arrays of two
 * shards (allocated one after the other) never share a line. NULL when
 * the size overflows or memory is short. */
static void *shard_calloc(size_t count, size_t size)
{
    size_t bytes;
    if (!curdi_size_mul(count, size, &bytes) ||
        !curdi_size_add(bytes, CACHE_LINE - 1u, &bytes))
        return NULL;
    bytes &= ~(size_t)(CACHE_LINE - 1u);
    void *memory = aligned_alloc(CACHE_LINE, bytes);
    if (memory != NULL)
        memset(memory, 0, bytes);
    return memory;
}

/* ------------------------------------------------------------------------
 * Create and destroy
 * ---------------------------------------------------------------------- */
static void free_shards(curdi_pool *pool, unsigned initialised)
{
    for (unsigned i = 0; i < initialised; i++) {
        pool_shard *shard = &pool->shards[i];
        free(shard->stacks);
        free(shard->front.counts);
        free(shard->front.slots);
        curdi_hash_map_fini(&shard->live);
    }
    curdi_pool_records_fini(&pool->records);
    free(pool->slots);
    free(pool);
}

curd_status curdi_pool_lifecycle_create(const curdi_upstream *upstream,
                                        const curdi_pool_config *config,
                                        curdi_pool **out_pool)
{
    if (out_pool == NULL || upstream == NULL || config == NULL)
        return curdi_fail(
            CURD_E_INVALID_ARGUMENT,
            "curdi_pool_lifecycle_create: %s is NULL. Fix: pass an "
            "upstream, a configuration and an out pointer.",
            out_pool == NULL   ? "out_pool"
            : upstream == NULL ? "upstream"
                               : "config");
    if (upstream->alloc == NULL || upstream->free == NULL)
        return curdi_fail(
            CURD_E_INVALID_ARGUMENT,
            "curdi_pool_lifecycle_create: the upstream has no %s "
            "function. Fix: give the upstream both alloc and "
            "free.",
            upstream->alloc == NULL ? "alloc" : "free");
    const char *name = config->name != NULL ? config->name : "memory";
    /* sizeof is a multiple of the struct's alignment (the shards'). */
    curdi_pool *pool = aligned_alloc(_Alignof(curdi_pool), sizeof *pool);
    if (pool != NULL)
        memset(pool, 0, sizeof *pool);
    unsigned class_count = curdi_checked_size_class_count();
    uint32_t *slots = calloc(class_count, sizeof *slots);
    if (pool == NULL || slots == NULL ||
        !curdi_pool_records_init(&pool->records)) {
        free(pool);
        free(slots);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The %s pool's %zu bytes of host bookkeeping could "
                          "not be allocated. Fix: free host memory and try "
                          "again.",
                          name, sizeof *pool);
    }
    atomic_init(&pool->fronts_active, false);
    pool->hot_count = 0;
    while (pool->hot_count < class_count
           && curdi_checked_size_class_bytes(pool->hot_count)
                  <= FRONT_CLASS_MAX)
        pool->hot_count++;
    for (size_t step = 0; step < FRONT_CLASS_MAX / HOT_STEP; step++) {
        size_t class_bytes = 0;
        unsigned class_index = 0;
        /* Every byte_len of the step has the class of its last byte. */
        (void)curdi_checked_size_class((step + 1u) * HOT_STEP, &class_bytes,
                                       &class_index);
        pool->hot_class[step] = (uint8_t)class_index;
        pool->hot_class_bytes[step] = (uint32_t)class_bytes;
    }
    pool->upstream = *upstream;
    pool->name = name;
    pool->kind = config->kind;
    pool->cache_budget_bytes = config->cache_budget_bytes;
    pool->live_limit_bytes = config->live_limit_bytes;
    pool->upstream_total_bytes = config->upstream_total_bytes;
    pool->relieve = config->relieve;
    pool->relieve_context = config->relieve_context;
    pool->class_count = class_count;
    pool->slots = slots;
    for (unsigned i = 0; i < class_count; i++) {
        uint64_t fit =
            config->cache_budget_bytes / curdi_checked_size_class_bytes(i);
        slots[i] = fit == 0 ? 1u : fit > SLOTS_MAX ? SLOTS_MAX : (uint32_t)fit;
    }
    pool->lease_slack = config->cache_budget_bytes / (4u * SHARD_COUNT);
    for (unsigned f = 0; f < FAMILY_COUNT; f++) {
        atomic_init(&pool->families[f].level, 0);
        atomic_init(&pool->families[f].peak, 0);
    }
    atomic_init(&pool->lease_free, config->cache_budget_bytes);
    atomic_init(&pool->live_reserved, 0);
    atomic_init(&pool->reserved_bytes, 0);
    atomic_init(&pool->closing, false);
    atomic_init(&pool->busy, 0u);
    atomic_init(&pool->upstream_allocs, 0);
    atomic_init(&pool->upstream_frees, 0);
    atomic_init(&pool->cache_misses, 0);
    atomic_init(&pool->oom_retries, 0);
    atomic_init(&pool->oom_failures, 0);
    atomic_init(&pool->upstream_ns, 0);

    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        shard->stacks = shard_calloc(class_count, sizeof *shard->stacks);
        pool_front *front = &shard->front;
        front->counts = shard_calloc(pool->hot_count, sizeof *front->counts);
        front->slots = shard_calloc((size_t)pool->hot_count * FRONT_DEPTH,
                                    sizeof *front->slots);
        atomic_init(&front->busy, false);
        atomic_init(&front->revoked, false);
        for (unsigned f = 0; f < FAMILY_COUNT; f++)
            atomic_init(&shard->families[f].delta, 0);
        bool live_made =
            curdi_hash_map_init(&shard->live, 0, INITIAL_LIVE_SLOTS);
        atomic_init(&shard->lock, false);
        if (shard->stacks == NULL || front->counts == NULL ||
            front->slots == NULL || !live_made) {
            free(shard->stacks);
            free(front->counts);
            free(front->slots);
            curdi_hash_map_fini(&shard->live);
            free_shards(pool, i);
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "The %s pool's per-thread shards could not be "
                              "allocated. Fix: free host memory and try "
                              "again.",
                              name);
        }
        for (unsigned c = 0; c < class_count; c++)
            atomic_init(&shard->stacks[c].count, 0u);
    }
    curdi_pool_fronts_registry_join(pool);
    *out_pool = pool;
    return CURD_OK;
}

void curdi_pool_lifecycle_destroy(curdi_pool *pool)
{
    if (pool == NULL)
        return;
    atomic_store(&pool->closing, true);
    /* Off the registry first: no exiting thread touches the pool after. */
    curdi_pool_fronts_registry_leave(pool);
    pool_block *detached = NULL;
    lock_all(pool);
    /* Other threads' fronts too: revoked, they are never given back (their
     * owners' later calls on this pool would be use after free anyway). */
    curdi_pool_fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        curdi_pool_fronts_drain(pool, shard);
        size_t position = 0;
        for (pool_block *block;
             (block = curdi_hash_map_next_entry(&shard->live, &position)) !=
             NULL;) {
            block->next = detached;
            detached = block;
        }
        curdi_hash_map_clear(&shard->live);
        for (unsigned c = 0; c < pool->class_count; c++) {
            pool_block *block;
            while ((block = stack_pop(shard, c)) != NULL) {
                block->next = detached;
                detached = block;
            }
        }
    }
    /* Blocks out with a token are in no table: the directory has them. */
    curdi_pool_records_detach_held(&pool->records, &detached);
    unlock_all(pool);
    /* A slow path between its locks either saw `closing` (and frees its
     * block itself) or had put the block where the sweep above found it;
     * wait for it to stop touching the pool. */
    while (atomic_load(&pool->busy) != 0)
        sched_yield();
    while (detached != NULL) {
        pool_block *next = detached->next;
        curdi_pool_upstream_free(pool, detached);
        detached = next;
    }
    free_shards(pool, SHARD_COUNT);
}
