/* pool_stats.h - the pool's statistics as its hit paths count them: each
 * shard's and front's parts of the families (live, cached and requested
 * bytes; live and cached blocks), the quanta that fold a part into the
 * pool's level, the peaks, a front's headrooms, and the checks that keep a
 * cumulative counter within its share. Inline because every hit and
 * release counts; what runs off those paths is in pool_stats.c. pool.c's
 * header comment says how exact the statistics are and why they are
 * kept this way. Only the pool's modules include it. */
#ifndef CURD_LIB_MEMORY_POOL_STATS_H
#define CURD_LIB_MEMORY_POOL_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/pool_fronts.h"
#include "memory/pool_shards.h"

/* A shard's share of a cumulative counter: the sum of SHARD_COUNT shard
 * shares and SHARD_COUNT front shares stays within 2^64 - 1. It passes the
 * largest class below 2^60 (2^59 * 15/8) by 2^56 - 2^52 bytes, so a block
 * of that class can be counted after other traffic, nearly as before
 * fronts took their part (2^56). */
#define SHARD_COUNTER_MAX (UINT64_MAX / SHARD_COUNT - FRONT_COUNTER_MAX)
/* Pool-wide slow-path counters stop this far below 2^64. */
#define GLOBAL_COUNTER_MAX (UINT64_MAX - ((uint64_t)1 << 62))

#define BYTES_QUANTUM ((int64_t)1 << 20)
#define BLOCKS_QUANTUM ((int64_t)16)

static const int64_t family_quantum[FAMILY_COUNT] = {
    BYTES_QUANTUM, BYTES_QUANTUM, BYTES_QUANTUM, BLOCKS_QUANTUM,
    BLOCKS_QUANTUM};

/* ------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------- */
/* Out of line, off the hit paths: the slow-path counters' check and
 * count, a front's change folded in, a front's owner settling its headrooms,
 * and the sentence of a full counter. */
bool curdi_pool_stats_global_headroom(curdi_pool *pool);
void curdi_pool_stats_global_count(_Atomic uint64_t *counter, uint64_t amount);
void curdi_pool_stats_front_fold(curdi_pool *pool, pool_front *front);
__attribute__((noinline, cold)) void
curdi_pool_stats_front_settle_and_leave(curdi_pool *pool, pool_front *front,
                                        const pool_shard *own);
curd_status curdi_pool_stats_fail_counters_full(const curdi_pool *pool,
                                                const char *op);

static inline int64_t delta_of(const family_part *part)
{
    return atomic_load_explicit(&part->delta, memory_order_relaxed);
}

/* One writer at a time (family_part says who reads it meanwhile). */
static inline void delta_set(family_part *part, int64_t value)
{
    atomic_store_explicit(&part->delta, value, memory_order_relaxed);
}

static inline void family_flush(curdi_pool *pool, family_part *part,
                                enum pool_family family)
{
    int64_t delta = delta_of(part);
    if (delta != 0) {
        atomic_fetch_add_explicit(&pool->families[family].level, delta,
                                  memory_order_relaxed);
        delta_set(part, 0);
    }
}

static inline void peak_raise(family_total *total, uint64_t value)
{
    uint64_t peak = atomic_load_explicit(&total->peak, memory_order_relaxed);
    while (peak < value &&
           !atomic_compare_exchange_weak_explicit(&total->peak, &peak, value,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* A front's cumulative amounts of a family, from its moves. */
static inline void front_amounts(const front_moves *moves,
                                 enum pool_family family,
                                 uint64_t *allocated, uint64_t *freed)
{
    switch (family) {
    case FAMILY_LIVE_BYTES:
        *allocated = moves->out_bytes;
        *freed = moves->in_bytes;
        return;
    case FAMILY_LIVE_BLOCKS:
        *allocated = moves->out_blocks;
        *freed = moves->in_blocks;
        return;
    case FAMILY_REQUESTED_BYTES:
        *allocated = moves->out_requested;
        *freed = moves->in_requested;
        return;
    case FAMILY_CACHED_BYTES:
        *allocated = moves->in_bytes;
        *freed = moves->out_bytes;
        return;
    case FAMILY_CACHED_BLOCKS:
    default:
        *allocated = moves->in_blocks;
        *freed = moves->out_blocks;
        return;
    }
}

/* A front's level change of a family not yet folded into the pool's
 * level (unsigned differences: each count only grows between folds). */
static inline int64_t front_delta(const pool_front *front,
                                  enum pool_family family)
{
    uint64_t allocated, freed, folded_allocated, folded_freed;
    front_amounts(&front->moves, family, &allocated, &freed);
    front_amounts(&front->folded, family, &folded_allocated, &folded_freed);
    return (int64_t)((allocated - folded_allocated) - (freed - folded_freed));
}

/* Raises the peak of a family past which `level`, an estimate of the
 * current level, went. Under concurrency the estimate can run ahead of
 * the true level by other threads' unfolded drops; it never passes what
 * is surely a bound. */
static inline void peak_check(curdi_pool *pool, enum pool_family family,
                              int64_t level)
{
    if (level <= 0 ||
        (uint64_t)level <= atomic_load_explicit(&pool->families[family].peak,
                                                memory_order_relaxed))
        return; /* the common case: no new peak */
    uint64_t estimate = (uint64_t)level;
    if (family == FAMILY_CACHED_BYTES && estimate > pool->cache_budget_bytes)
        estimate = pool->cache_budget_bytes;
    if (family != FAMILY_LIVE_BLOCKS && family != FAMILY_CACHED_BLOCKS) {
        uint64_t reserved = atomic_load_explicit(&pool->reserved_bytes,
                                                 memory_order_relaxed);
        if (estimate > reserved)
            estimate = reserved;
    }
    peak_raise(&pool->families[family], estimate);
}

static inline int64_t pool_level(curdi_pool *pool, enum pool_family family)
{
    return atomic_load_explicit(&pool->families[family].level,
                                memory_order_relaxed);
}

/* amount is at most BLOCK_MAX and the levels stay below RESERVED_MAX +
 * 2 * SHARD_COUNT quanta, so the int64 arithmetic cannot overflow. The
 * caller has checked the headroom for allocated. own_front: the calling
 * thread's front when it owns the one beside this shard part
 * (owner_front_of), else NULL: its unfolded change counts in the
 * estimate, so that one thread's level is exact. */
static inline void family_up(curdi_pool *pool, family_part *part,
                             const pool_front *own_front,
                             enum pool_family family, uint64_t amount)
{
    part->allocated += amount;
    int64_t delta = delta_of(part) + (int64_t)amount;
    delta_set(part, delta);
    if (delta >= family_quantum[family]) {
        family_flush(pool, part, family);
        delta = 0;
    }
    peak_check(pool, family,
               pool_level(pool, family) + delta +
                   (own_front != NULL ? front_delta(own_front, family) : 0));
}

static inline void family_down(curdi_pool *pool, family_part *part,
                               enum pool_family family, uint64_t amount)
{
    part->freed += amount;
    int64_t delta = delta_of(part) - (int64_t)amount;
    delta_set(part, delta);
    if (delta <= -family_quantum[family])
        family_flush(pool, part, family);
}

/* The families a block moves through, counted in a shard's part array;
 * own_front as for family_up. A rise moves the estimates the front's
 * headrooms were measured against, so they close. */
static inline void count_live_up(curdi_pool *pool, family_part *parts,
                                 pool_front *own_front, size_t class_bytes,
                                 size_t byte_len)
{
    family_up(pool, &parts[FAMILY_LIVE_BYTES], own_front, FAMILY_LIVE_BYTES,
              class_bytes);
    family_up(pool, &parts[FAMILY_LIVE_BLOCKS], own_front,
              FAMILY_LIVE_BLOCKS, 1);
    family_up(pool, &parts[FAMILY_REQUESTED_BYTES], own_front,
              FAMILY_REQUESTED_BYTES, byte_len);
    if (own_front != NULL)
        front_headroom_close(own_front);
}

static inline void count_live_down(curdi_pool *pool, family_part *parts,
                                   size_t class_bytes, size_t byte_len)
{
    family_down(pool, &parts[FAMILY_LIVE_BYTES], FAMILY_LIVE_BYTES,
                class_bytes);
    family_down(pool, &parts[FAMILY_LIVE_BLOCKS], FAMILY_LIVE_BLOCKS, 1);
    family_down(pool, &parts[FAMILY_REQUESTED_BYTES], FAMILY_REQUESTED_BYTES,
                byte_len);
}

static inline void count_cached_up(curdi_pool *pool, family_part *parts,
                                   pool_front *own_front, size_t class_bytes)
{
    family_up(pool, &parts[FAMILY_CACHED_BYTES], own_front,
              FAMILY_CACHED_BYTES, class_bytes);
    family_up(pool, &parts[FAMILY_CACHED_BLOCKS], own_front,
              FAMILY_CACHED_BLOCKS, 1);
    if (own_front != NULL)
        front_headroom_close(own_front);
}

static inline void count_cached_down(curdi_pool *pool, family_part *parts,
                                     size_t class_bytes)
{
    family_down(pool, &parts[FAMILY_CACHED_BYTES], FAMILY_CACHED_BYTES,
                class_bytes);
    family_down(pool, &parts[FAMILY_CACHED_BLOCKS], FAMILY_CACHED_BLOCKS, 1);
}

static inline bool past_quantum(int64_t delta, int64_t quantum)
{
    return delta >= quantum || delta <= -quantum;
}

/* Moves a front's rise headroom by amount and returns it: a relaxed load and
 * store, never a locked instruction (the owner is its only writer while it
 * moves). The headrooms are atomics only so that the compiler updates them one
 * at a time: GCC 12 at -O2 packed the plain ones into SSE lanes, and a hit
 * took 1.3 ns longer on the H100 host's Xeon. */
static inline int64_t headroom_add(_Atomic int64_t *headroom, int64_t amount)
{
    int64_t value =
        atomic_load_explicit(headroom, memory_order_relaxed) + amount;
    atomic_store_explicit(headroom, value, memory_order_relaxed);
    return value;
}

/* A block out of the front (a hit) or into it, counted in its moves by its
 * owner. A hit raises the live families and lowers the cached ones, a
 * release the other way. Instead of reading the pool's levels and peaks
 * on every move, the front keeps headrooms measured at its last look
 * (curdi_pool_stats_front_settle_and_leave): how far each live family may
 * still rise, and the band it may move in (the rise and the fall allowed
 * then, summed: a hit spends rise headroom and gives the same fall headroom
 * back, so the band stays as it was). The owner looks again only once a
 * move leaves the band, when its change must fold (a quantum) or its
 * estimate passed a peak. Changes
 * beside it that could make a headroom too large close the headrooms
 * (front_headroom_close): its own shard's rises and a reset of the peaks.
 * Other threads' folds can too, which is the error the peaks already allow
 * (a quantum per other thread). */
static inline __attribute__((always_inline)) bool
front_count(pool_front *front, size_t class_bytes, size_t byte_len, bool out)
{
    front_moves *moves = &front->moves;
    _Atomic int64_t *rise = front->rise_headroom;
    int64_t sign = out ? -1 : 1;
    front->spend_headroom -= (int64_t)class_bytes;
    if (out) {
        moves->out_blocks += 1;
        moves->out_bytes += class_bytes;
        moves->out_requested += byte_len;
    } else {
        moves->in_blocks += 1;
        moves->in_bytes += class_bytes;
        moves->in_requested += byte_len;
    }
    int64_t bytes =
        headroom_add(&rise[HEADROOM_BYTES], sign * (int64_t)class_bytes);
    int64_t blocks = headroom_add(&rise[HEADROOM_BLOCKS], sign);
    int64_t requested =
        headroom_add(&rise[HEADROOM_REQUESTED], sign * (int64_t)byte_len);
    if (!out) { /* what is left of the band below the rise */
        const int64_t *band = front->headroom_band;
        bytes = band[HEADROOM_BYTES] - bytes;
        blocks = band[HEADROOM_BLOCKS] - blocks;
        requested = band[HEADROOM_REQUESTED] - requested;
    }
    return __builtin_expect((bytes | blocks | requested) < 0, false);
}

/* Leaves the front after a move: with a look at the pool first when the
 * move left its band (front_count). The look is a call, made last, so that
 * the hit keeps no register across it. */
static inline __attribute__((always_inline)) void
front_leave_counted(curdi_pool *pool, pool_front *front,
                    const pool_shard *own, bool settle)
{
    if (__builtin_expect(settle, false)) {
        curdi_pool_stats_front_settle_and_leave(pool, front, own);
        return;
    }
    front_leave(front);
}

/* Shares stay far below their cap in any real run. When every value and
 * amount an operation checks is below half the cap, every sum fits, and one
 * test of their bitwise OR says so (about 30 instructions fewer per cache
 * hit than the checks one by one, which decide the rare rest). The same
 * checks serve a shard (cap SHARD_COUNTER_MAX) and a front
 * (FRONT_COUNTER_MAX). */
static inline bool share_headroom(uint64_t value, uint64_t amount,
                                  uint64_t cap)
{
    return amount <= cap && value <= cap - amount;
}

/* Headroom in a part array's counters (and its hits) for an acquire (a hit
 * also takes the block out of the cache). */
static inline bool headroom_for_acquire(const family_part *f, uint64_t hits,
                                        uint64_t cap, size_t class_bytes,
                                        size_t byte_len, bool hit)
{
    uint64_t any = f[FAMILY_LIVE_BYTES].allocated |
                   f[FAMILY_REQUESTED_BYTES].allocated |
                   f[FAMILY_LIVE_BLOCKS].allocated | class_bytes | byte_len;
    if (hit)
        any |= f[FAMILY_CACHED_BYTES].freed | f[FAMILY_CACHED_BLOCKS].freed |
               hits;
    if (any < cap / 2u + 1u)
        return true;
    if (!share_headroom(f[FAMILY_LIVE_BYTES].allocated, class_bytes, cap)
        || !share_headroom(f[FAMILY_REQUESTED_BYTES].allocated, byte_len, cap)
        || !share_headroom(f[FAMILY_LIVE_BLOCKS].allocated, 1, cap))
        return false;
    return !hit
           || (share_headroom(f[FAMILY_CACHED_BYTES].freed, class_bytes, cap)
               && share_headroom(f[FAMILY_CACHED_BLOCKS].freed, 1, cap)
               && share_headroom(hits, 1, cap));
}

static bool headroom_for_cache(const family_part *f, uint64_t cap,
                               size_t class_bytes)
{
    return share_headroom(f[FAMILY_CACHED_BYTES].allocated, class_bytes, cap)
           && share_headroom(f[FAMILY_CACHED_BLOCKS].allocated, 1, cap);
}

static inline bool headroom_for_release(const family_part *f, uint64_t cap,
                                        size_t class_bytes, size_t byte_len,
                                        bool cache)
{
    uint64_t any = f[FAMILY_LIVE_BYTES].freed |
                   f[FAMILY_REQUESTED_BYTES].freed |
                   f[FAMILY_LIVE_BLOCKS].freed | class_bytes | byte_len;
    if (cache)
        any |= f[FAMILY_CACHED_BYTES].allocated |
               f[FAMILY_CACHED_BLOCKS].allocated;
    if (any < cap / 2u + 1u)
        return true;
    if (!share_headroom(f[FAMILY_LIVE_BYTES].freed, class_bytes, cap)
        || !share_headroom(f[FAMILY_REQUESTED_BYTES].freed, byte_len, cap)
        || !share_headroom(f[FAMILY_LIVE_BLOCKS].freed, 1, cap))
        return false;
    return !cache || headroom_for_cache(f, cap, class_bytes);
}

#endif
