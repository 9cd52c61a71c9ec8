/* pool_shards.h - the pool's layout, which its modules share: the pool, its
 * shards (lock, class stacks, live table, statistics parts, lease) and
 * the front each shard holds, with the few operations on a shard that the
 * fronts need too (its lock, its stacks, a lease's cover and give-back),
 * and the lock of every shard that trim, stats and destroy take.
 *
 * Why a header of its own: the fronts (pool_fronts.c) live inside the
 * shards and move blocks between a front and its shard's stack, and the
 * pool (pool.c) reaches into the fronts for trim, stats and destroy, so
 * both need one layout, and neither may include the other's module from
 * below. pool.c still decides what goes where (caching, trim, stats, the
 * out-of-memory ladder); this header only describes the memory and the
 * shard primitives, inline because the hit paths call them. The lock's
 * slow wait is in pool_shards.c. Only the pool's modules include it. */
#ifndef CURD_LIB_MEMORY_POOL_SHARDS_H
#define CURD_LIB_MEMORY_POOL_SHARDS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/assert.h"
#include "base/hash_map.h"
#include "memory/pool_config.h"
#include "memory/pool_records.h"

#define SHARD_COUNT CURDI_POOL_SHARD_COUNT

/* Intel's L2 fetches cache lines in 128-byte aligned pairs (the adjacent
 * line prefetcher), so data written by different threads is kept a pair
 * apart, not just a line. */
#define LINE_PAIR 128u

/* A front's share of a cumulative counter (pool_fronts.c). A front whose
 * share is full stops taking blocks (its thread uses the shard) until a
 * reset: at 4 KiB a hit, 2^52 bytes is 2^40 hits. Kept small so that a
 * shard's share (pool.c) keeps headroom above the largest class. */
#define FRONT_COUNTER_MAX (((uint64_t)1 << 52) - 1u)

/* A thread's front keeps up to FRONT_DEPTH blocks of each class up to
 * FRONT_CLASS_MAX bytes. */
#define FRONT_DEPTH 2u
#define FRONT_CLASS_MAX ((size_t)64 << 10)
/* The smallest class step (checked.c): requests in one step of it share a
 * class below FRONT_CLASS_MAX. */
#define HOT_STEP ((size_t)256)

enum pool_family {
    FAMILY_LIVE_BYTES,
    FAMILY_CACHED_BYTES,
    FAMILY_REQUESTED_BYTES,
    FAMILY_LIVE_BLOCKS,
    FAMILY_CACHED_BLOCKS,
    FAMILY_COUNT
};

typedef struct class_stack {
    pool_block *top;
    /* Written under the shard lock; read without it by other shards
     * looking for a block to take, hence atomic. */
    _Atomic uint32_t count;
} class_stack;

typedef struct family_part {
    /* Level change not yet folded into the pool level. Atomic (relaxed
     * loads and stores, never a locked instruction) because the owner of
     * a shard's front reads the shard's delta, and the shard's lock
     * holders the front's, for the peak. */
    _Atomic int64_t delta;
    uint64_t allocated;
    uint64_t freed;
} family_part;

/* What went through a front: blocks taken out (its hits) and put in, with
 * their class and requested bytes. Every family's amounts follow from
 * these six (front_amounts), so a hit or a release into the front counts
 * three additions, not ten. Each stays within a front's share of a
 * counter (FRONT_COUNTER_MAX). */
typedef struct front_moves {
    uint64_t out_blocks, out_bytes, out_requested;
    uint64_t in_blocks, in_bytes, in_requested;
} front_moves;

/* The live families a front watches as it moves (its cached families
 * move by the live ones' negatives), in the order of its headrooms. */
enum front_headroom_family {
    HEADROOM_BYTES,
    HEADROOM_BLOCKS,
    HEADROOM_REQUESTED,
    HEADROOM_COUNT
};

/* The bytes a front may move between two looks at its counters' headroom
 * (curdi_pool_fronts_renew): a front's share keeps this much headroom above
 * half of it, so no move can pass the share in between. */
#define FRONT_SPEND ((int64_t)1 << 40)

/* A thread's front in one pool (pool_fronts.c says who may touch it
 * when). */
typedef struct pool_front {
    _Atomic bool busy;    /* its owner is inside it */
    _Atomic bool revoked; /* a trim, stats or destroy has it */
    bool active;          /* used since its owner came; under the lock */
    uint8_t *counts;      /* blocks per hot class */
    pool_block **slots;   /* FRONT_DEPTH per hot class, top last */
    uint64_t cached_bytes;
    uint64_t lease_bytes; /* >= cached_bytes */
    /* What its owner's moves may use up before it looks at the pool
     * (pool.c's front_count says how they are kept): how far each live
     * family may rise (by hits) before a level must fold or a peak rise,
     * and the band it may move in (rise + fall allowed), and the bytes it
     * may move before its counters' headroom is looked at. All 0: look at the
     * next move. */
    _Atomic int64_t
        rise_headroom[HEADROOM_COUNT]; /* pool.c's headroom_add says why */
    int64_t headroom_band[HEADROOM_COUNT];
    int64_t spend_headroom;
    front_moves moves;  /* since the last stats reset */
    front_moves folded; /* moves when the front last folded its level */
} pool_front;

typedef struct pool_shard {
    _Alignas(LINE_PAIR) atomic_bool lock; /* shard_lock() says why */
    class_stack *stacks; /* one per class */
    curdi_hash_map live; /* address -> pool_block, the blocks handed out */
    uint64_t cached_bytes; /* in this shard's stacks */
    uint64_t lease_bytes;  /* >= cached_bytes */
    uint64_t cache_hits;
    family_part families[FAMILY_COUNT];
    /* Its own line pair: the owner writes it on every hit, other threads
     * write the lock above. */
    _Alignas(LINE_PAIR) pool_front front;
} pool_shard;

typedef struct family_total {
    _Atomic int64_t level; /* the flushed part of the current level */
    _Atomic uint64_t peak;
} family_total;

struct curdi_pool {
    curdi_upstream upstream;
    const char *name;
    curd_pool_kind kind;
    uint64_t cache_budget_bytes;
    uint64_t live_limit_bytes;
    uint64_t upstream_total_bytes;
    uint64_t (*relieve)(void *context, uint64_t bytes_needed,
                        curdi_relief_step step);
    void *relieve_context;
    unsigned class_count;
    uint32_t *slots; /* per class, per shard */
    uint64_t lease_slack;
    unsigned hot_count; /* classes 0..hot_count-1 have front slots */
    /* The class index of a hot request, by (byte_len - 1) / HOT_STEP: the
     * front's fast path looks its class up instead of computing it. */
    uint8_t hot_class[FRONT_CLASS_MAX / HOT_STEP];
    uint32_t hot_class_bytes[FRONT_CLASS_MAX / HOT_STEP];

    /* Index -> record for tokens (pool_records.h). */
    pool_records records;
    /* On the list of pools that exiting threads empty their fronts into. */
    struct curdi_pool *registry_prev, *registry_next;
    /* Some front was used: trim, stats and destroy must revoke fronts. */
    _Atomic bool fronts_active;

    /* Read on every hit (the peak check), written rarely. */
    _Alignas(CACHE_LINE) family_total families[FAMILY_COUNT];
    /* Written on lease moves (rare on the hot path). */
    _Alignas(CACHE_LINE) _Atomic uint64_t lease_free;
    /* Written on every acquire and release, but only with a live limit. */
    _Alignas(CACHE_LINE) _Atomic uint64_t live_reserved;
    /* The slow path's state. */
    _Alignas(CACHE_LINE) _Atomic uint64_t reserved_bytes;
    _Atomic bool closing;
    _Atomic unsigned busy; /* slow-path operations between locks */
    _Atomic uint64_t upstream_allocs;
    _Atomic uint64_t upstream_frees;
    _Atomic uint64_t cache_misses;
    _Atomic uint64_t oom_retries;
    _Atomic uint64_t oom_failures;
    _Atomic uint64_t upstream_ns;

    pool_shard shards[SHARD_COUNT];
};

/* Spins, then yields, until the shard's lock is free and taken
 * (pool_shards.c says why a shard lock is a flag). */
void curdi_pool_shards_lock_wait(pool_shard *shard);

static inline void shard_lock(pool_shard *shard)
{
    if (__builtin_expect(
            atomic_exchange_explicit(&shard->lock, true, memory_order_acquire),
            false))
        curdi_pool_shards_lock_wait(shard);
}

static inline void shard_unlock(pool_shard *shard)
{
    atomic_store_explicit(&shard->lock, false, memory_order_release);
}

/* ------------------------------------------------------------------------
 * Class stacks and budget leases (shard locked)
 * ---------------------------------------------------------------------- */
static inline uint32_t stack_count(const class_stack *stack)
{
    return atomic_load_explicit(&stack->count, memory_order_relaxed);
}

static inline void stack_push(pool_shard *shard, pool_block *block)
{
    class_stack *stack = &shard->stacks[block->class_index];
    block->next = stack->top;
    stack->top = block;
    atomic_store_explicit(&stack->count, stack_count(stack) + 1u,
                          memory_order_relaxed);
    shard->cached_bytes += block->class_bytes;
}

static inline pool_block *stack_pop(pool_shard *shard, unsigned class_index)
{
    class_stack *stack = &shard->stacks[class_index];
    pool_block *block = stack->top;
    if (block == NULL)
        return NULL;
    stack->top = block->next;
    block->next = NULL;
    atomic_store_explicit(&stack->count, stack_count(stack) - 1u,
                          memory_order_relaxed);
    shard->cached_bytes -= block->class_bytes;
    return block;
}

/* Makes a lease (a shard's or a front's) cover `more` cached bytes beyond
 * `cached`, taking from the pool's unleased budget (with slack, so a hot
 * loop does not come back each time). False when the unleased budget is
 * short. */
static inline bool lease_cover(curdi_pool *pool, uint64_t *lease_bytes,
                               uint64_t cached, uint64_t more)
{
    uint64_t end = cached + more; /* both below 2^62 */
    if (end <= *lease_bytes)
        return true;
    uint64_t need = end - *lease_bytes;
    uint64_t available =
        atomic_load_explicit(&pool->lease_free, memory_order_relaxed);
    uint64_t take;
    do {
        if (available < need)
            return false;
        take = available - need > pool->lease_slack ? need + pool->lease_slack
                                                    : available;
    } while (!atomic_compare_exchange_weak_explicit(
        &pool->lease_free, &available, available - take,
        memory_order_relaxed, memory_order_relaxed));
    *lease_bytes += take;
    CURDI_ASSERT(end <= *lease_bytes);
    return true;
}

/* Gives back a lease's unused part beyond keep_unused bytes; returns what
 * it gave. */
static inline uint64_t lease_give_back(curdi_pool *pool,
                                       uint64_t *lease_bytes, uint64_t cached,
                                       uint64_t keep_unused)
{
    /* A lease always covers what its holder caches. */
    CURDI_ASSERT(cached <= *lease_bytes);
    uint64_t unused = *lease_bytes - cached;
    if (unused <= keep_unused)
        return 0;
    uint64_t give = unused - keep_unused;
    *lease_bytes -= give;
    uint64_t unleased = atomic_fetch_add_explicit(&pool->lease_free, give,
                                                  memory_order_relaxed);
    /* lease_free + the sum of leases == budget, so what comes back never
     * takes the unleased rest past the budget. */
    CURDI_ASSERT(unleased + give <= pool->cache_budget_bytes);
    (void)unleased;
    return give;
}

/* Trim, stats and destroy take every shard lock, always in index order;
 * everything else holds at most one. */
static inline void lock_all(curdi_pool *pool)
{
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        shard_lock(&pool->shards[i]);
}

static inline void unlock_all(curdi_pool *pool)
{
    for (unsigned i = SHARD_COUNT; i-- > 0;)
        shard_unlock(&pool->shards[i]);
}

#endif
