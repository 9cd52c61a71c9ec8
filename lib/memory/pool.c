/* pool.c - a size-class cache over an upstream allocator.
 *
 * Requests round up to a size class (checked.c: 8 steps per power of two,
 * so a class wastes less than 1/8 of the request, at most 255 bytes below
 * 2 KiB; a 1.1 GiB request holds 1.125 GiB). A released block goes back to
 * a cache of its class when a slot and the cached-bytes budget allow, else
 * upstream. The next acquire of that class takes it from the cache.
 *
 * Shape (why it is sharded)
 * -------------------------
 * A cache hit must cost tens of nanoseconds and scale with threads, so the
 * hot path writes no cache line that another thread writes too. The pool is
 * split into SHARD_COUNT shards; a thread uses the shard its thread-local
 * index names, the same in every pool. A thread takes the index that the
 * fewest live threads hold on its first pool call and gives it back when
 * it exits, so up to SHARD_COUNT threads alive at once each get their own
 * shard however many came and went before (more than that share shards,
 * and two busy threads on one shard pass its cache lines back and forth on
 * every operation: on the H100 host a hit then took about 170 ns instead
 * of 65). A shard holds, under its own lock:
 *   - a LIFO stack of cached blocks per class (host-side records, never
 *     inside the block: device memory cannot be written from here);
 *   - a map (base/hash_map) of the blocks it handed out (live), for the stale
 *     check on release;
 *   - its share of every statistic;
 *   - a lease of the cached-bytes budget (below).
 * An acquire looks in its own shard, then takes a cached block of the class
 * from another shard (one lock at a time), and only then goes upstream.
 * A release finds the block in the acquiring shard's table (its own, in
 * the common case; else it looks in the others) and caches it there. No
 * code path holds two shard locks except trim, stats and destroy, which
 * take all of them in index order. No lock is held across an upstream call
 * or a relieve callback.
 *
 * Budget leases. The cached-bytes budget is a hard pool-wide bound, but a
 * shared "cached bytes" counter would be written on every hit. Instead each
 * shard holds a lease (bytes it may keep cached) and the pool holds the
 * unleased rest in one atomic: lease_free + the sum of leases == budget, and
 * a shard's cached bytes never pass its lease, so the pool never caches past
 * its budget. A shard takes what it needs (plus some slack) from
 * lease_free, gives back unused lease past twice the slack, and when
 * lease_free is short it collects the unused lease of every other shard
 * before deciding not to cache. Used from one thread, this is exactly "cache
 * when cached + class <= budget"; under contention it may free a block
 * upstream that would just have fitted while another thread held the lease.
 *
 * Slots. A shard caches at most slots(class) = min(budget / class, 1024),
 * at least 1, blocks of a class, its owner's front included (so one thread
 * sees exactly that rule; N threads together may hold N times as many
 * small blocks, always within the byte budget).
 *
 * Fronts (why a hit takes no lock) and tokens (why a release needs no
 * table): pool_fronts.c and pool_records.c say what they are and why.
 * Their blocks and leases belong to the shards all the same: trim, stats,
 * reset and destroy revoke the fronts and walk them with every shard
 * locked, and destroy sweeps the directory for the blocks out with a
 * token.
 *
 * Modules (why the pool is split)
 * -------------------------------
 * This file owns the sharded cache: the caching rule, acquire and release,
 * curdi_pool_trim and the out-of-memory ladder. Counting the statistics
 * (below) is pool_stats.h's, inline on the hit paths, with its
 * out-of-line part in pool_stats.c; the upstream calls, the bytes held
 * upstream and the trim itself are pool_upstream.c's; create and destroy
 * pool_lifecycle.c's and reading and resetting the statistics
 * pool_report.c's, both beside this interface. The pool's layout (the
 * pool, its shards and their fronts) and the shard primitives the fronts
 * need too are in pool_shards.h; the fronts, with
 * the thread's shard index, the revoke handshake and the thread-exit
 * registry, in pool_fronts.c; the block records and their token
 * directory in pool_records.c. Each header below pool.h is the pool's
 * alone, and what the hit path calls across them is inline there.
 *
 * Statistics
 * ----------
 * Each family (live, cached and requested bytes; live and cached blocks)
 * keeps per shard, and per front, its cumulative allocated and freed
 * amounts and an unflushed level change (delta); the pool keeps the
 * flushed level and the peak in two atomics. A block may be counted up in
 * one part and down in another (taken from a front, released to a shard on
 * another thread): only the sums mean anything, and they are exact. A
 * part folds its delta into the pool level once it reaches a quantum
 * (1 MiB for bytes, 16 for blocks) and after each rise raises the peak to
 * pool level + the thread's own two deltas (its shard's and its front's).
 * A front does both by headrooms measured at its owner's last look at the
 * pool (front_count), so a hit reads neither the levels nor the peaks.
 * So:
 *   - current, allocated and freed are exact (sums taken with every shard
 *     locked and every front revoked, so a stats call also sees a
 *     consistent snapshot);
 *   - peak is exact while one thread uses the pool; with several threads
 *     at once it can be off by less than 2 * (SHARD_COUNT - 1) quanta (the
 *     other shards' and fronts' unflushed deltas): an exact running maximum of a sum over
 *     threads needs one shared counter written on every operation, which
 *     is what this design avoids. A stats call folds every delta in and
 *     raises the peak to the level it reports, so peak >= current always.
 *     The error never yields a level the pool cannot have held: the peak
 *     moves only to an estimate clamped to sure bounds (family_up: the
 *     cache budget for cached bytes, the bytes held upstream for any byte
 *     family) or to an exact level taken with every shard locked (stats,
 *     reset), so a cached-bytes peak never passes the cache budget.
 * Counters never saturate: a shard's share of a cumulative counter stops at
 * 2^64 / SHARD_COUNT - 2^52 and a front's at 2^52 - 1, so the sum of the
 * parts always fits; the operation
 * that would pass it fails with CURD_E_OVERFLOW and changes nothing, until
 * curd_device_stats_reset(). For the same reason a block's class may not
 * pass 2^60 - 1 bytes (CURD_E_OVERFLOW, like a request past the largest
 * class; the largest class below 2^60 is 2^60 - 2^56, which leaves a
 * shard's share headroom for 2^56 - 2^52 bytes of other traffic before its
 * counters are full). Counters of the slow path (upstream calls,
 * misses, out-of-memory events, upstream time) are pool-wide atomics that
 * stop 2^62 below 2^64 so that a check made before an upstream call cannot
 * be outrun. The bytes a pool holds upstream (live + cached) are capped at
 * 2^62, which bounds every level.
 *
 * Out of memory
 * -------------
 * When the upstream reports CURD_E_OUT_OF_MEMORY: (a) free just enough
 * cached blocks (largest class first) and retry; (b) ask the relieve
 * callback to run the application's reclaim callback, free what that put
 * into this cache, retry; (c) ask it to trim every device pool of the
 * device's ordinal, retry; then fail with the requested size, the live and
 * cached bytes and the upstream's free memory in the sentence. A step that
 * frees nothing is not followed by a retry. oom_retries counts the retries,
 * oom_failures the acquires that failed after the whole ladder.
 *
 * Closing. destroy takes the pool off the registry, marks it closing,
 * detaches every block (live in a table or out with a token, cached on a
 * stack or in any thread's front, revoked) under all locks, waits for
 * operations that are between locks on a slow path, and frees the blocks
 * upstream. A thread whose front held blocks of it never touches the
 * pool again unless it calls it. A release that runs while
 * the pool is closing frees its block upstream instead of caching it, so
 * no block is leaked. Calls that start after destroy has returned are use
 * after free, as for any object. */
#include "memory/pool.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/checked.h"
#include "base/hash_map.h"
#include "base/status.h"
#include "memory/pool_fronts.h"
#include "memory/pool_records.h"
#include "memory/pool_shards.h"
#include "memory/pool_stats.h"
#include "memory/pool_upstream.h"

/* The largest block: one shard's share of a counter can count it. */
#define BLOCK_MAX SHARD_COUNTER_MAX

/* ------------------------------------------------------------------------
 * Threads and shards (pool_fronts.c claims a thread's index)
 * ---------------------------------------------------------------------- */
unsigned curdi_pool_thread_shard(void)
{
    return own_shard_index();
}

/* ------------------------------------------------------------------------
 * The live table of a shard: address -> record.
 * ---------------------------------------------------------------------- */
static inline pool_block *table_find(pool_shard *shard, uint64_t address,
                                     curdi_hash_map_cursor *cursor)
{
    return curdi_hash_map_find(&shard->live, &address, cursor);
}

/* False when the table is full and cannot grow (host memory short). */
static inline bool table_insert(pool_shard *shard, pool_block *block)
{
    return curdi_hash_map_insert(&shard->live, &block->address, block);
}

static curd_status fail_live_table(const curdi_pool *pool)
{
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "The %s pool's table of live blocks could not grow. "
                      "Fix: free host memory and try again.",
                      pool->name);
}

/* ------------------------------------------------------------------------
 * Budget leases across shards, and the caching rule
 * ---------------------------------------------------------------------- */
/* Collects the unused lease of every shard but `except` (locking one at a
 * time; the caller holds none). True when any came back. */
static bool lease_sweep(curdi_pool *pool, const pool_shard *except)
{
    uint64_t collected = 0;
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        if (shard == except)
            continue;
        shard_lock(shard);
        collected += lease_give_back(pool, &shard->lease_bytes,
                                     shard->cached_bytes, 0);
        shard_unlock(shard);
    }
    return collected != 0;
}

/* Whether a block of this class may go into this shard's cache, as far as
 * the closing flag, the slots and the budget go (the lease is separate);
 * also_cached: blocks of the class in the caller's own front. */
static inline bool cacheable(curdi_pool *pool, const pool_shard *shard,
                             const pool_block *block, unsigned also_cached)
{
    return !atomic_load_explicit(&pool->closing, memory_order_relaxed) &&
           block->class_bytes <= pool->cache_budget_bytes &&
           stack_count(&shard->stacks[block->class_index]) + also_cached <
               pool->slots[block->class_index];
}

/* ------------------------------------------------------------------------
 * Trim (pool_upstream.c walks and frees)
 * ---------------------------------------------------------------------- */
curd_status curdi_pool_trim_checked(curdi_pool *pool, uint64_t keep_bytes,
                                    uint64_t *out_freed_bytes)
{
    uint64_t freed = 0;
    curd_status status =
        pool != NULL
            ? curdi_pool_upstream_trim_cache(pool, false, keep_bytes, &freed)
            : CURD_OK;
    /* A trim gives memory back: the live tables too, those that a burst
     * of blocks grew and that now stand mostly empty. Never on the hot
     * path, where a table that shrank would only grow again. */
    for (unsigned i = 0; pool != NULL && i < SHARD_COUNT; i++) {
        shard_lock(&pool->shards[i]);
        curdi_hash_map_shrink(&pool->shards[i].live);
        shard_unlock(&pool->shards[i]);
    }
    if (out_freed_bytes != NULL)
        *out_freed_bytes = freed;
    return status;
}

uint64_t curdi_pool_trim(curdi_pool *pool, uint64_t keep_bytes)
{
    uint64_t freed = 0;
    (void)curdi_pool_trim_checked(pool, keep_bytes, &freed);
    return freed;
}

/* ------------------------------------------------------------------------
 * Acquire
 * ---------------------------------------------------------------------- */
static curd_status fail_closing(const curdi_pool *pool)
{
    return curdi_fail(CURD_E_UNSUPPORTED,
                      "The %s pool is being destroyed (its device is "
                      "closing). Fix: finish every use of a device before "
                      "calling curd_device_close() on it.",
                      pool->name);
}

static curd_status live_reserve(curdi_pool *pool, size_t class_bytes,
                                size_t byte_len)
{
    uint64_t live =
        atomic_load_explicit(&pool->live_reserved, memory_order_relaxed);
    do {
        if (class_bytes > pool->live_limit_bytes ||
            live > pool->live_limit_bytes - class_bytes)
            return curdi_fail(CURD_E_BUDGET,
                              "The %s pool cannot hand out %zu bytes (the "
                              "%zu-byte class of the request): %" PRIu64
                              " bytes are live and the live limit is %" PRIu64
                              " bytes. Fix: release blocks first, or raise "
                              "%s_live_limit_bytes in curd_device_options "
                              "(0 means no limit).",
                              pool->name, byte_len, class_bytes, live,
                              pool->live_limit_bytes, pool->name);
    } while (!atomic_compare_exchange_weak_explicit(
        &pool->live_reserved, &live, live + class_bytes, memory_order_relaxed,
        memory_order_relaxed));
    return CURD_OK;
}

static void live_unreserve(curdi_pool *pool, size_t class_bytes)
{
    if (pool->live_limit_bytes != 0)
        atomic_fetch_sub_explicit(&pool->live_reserved, class_bytes,
                                  memory_order_relaxed);
}

/* Takes a cached block of the class from another shard (one lock at a
 * time), with its lease; NULL when no shard has one. */
static pool_block *take_from_other_shard(curdi_pool *pool,
                                         const pool_shard *own,
                                         unsigned class_index)
{
    unsigned start = (unsigned)(own - pool->shards);
    for (unsigned i = 1; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[(start + i) % SHARD_COUNT];
        if (stack_count(&shard->stacks[class_index]) == 0)
            continue;
        shard_lock(shard);
        pool_block *block = stack_pop(shard, class_index);
        if (block != NULL)
            shard->lease_bytes -= block->class_bytes; /* travels with it */
        shard_unlock(shard);
        if (block != NULL)
            return block;
    }
    return NULL;
}

static curd_status fail_out_of_memory(curdi_pool *pool, size_t class_bytes,
                                      size_t byte_len)
{
    curd_pool_stats stats;
    curdi_pool_report_stats(pool, &stats);
    uint64_t free_bytes = 0;
    bool free_known =
        pool->upstream.free_bytes != NULL &&
        pool->upstream.free_bytes(pool->upstream.context, &free_bytes);
    char free_text[96] = "";
    if (free_known)
        snprintf(free_text, sizeof free_text,
                 "; the upstream reports %" PRIu64 " bytes free", free_bytes);
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "The %s pool could not get %zu bytes (the %zu-byte class "
                      "of a %zu-byte request) from its upstream after "
                      "trimming its cache%s: %" PRIu64 " bytes are live and "
                      "%" PRIu64 " cached in this pool%s. Fix: free buffers "
                      "or blocks, lower the pools' cache budgets, or request "
                      "less.",
                      pool->name, class_bytes, class_bytes, byte_len,
                      pool->relieve != NULL
                          ? ", asking the reclaim callback and trimming every "
                            "pool of the device"
                          : "",
                      stats.live_bytes.current, stats.cached_bytes.current,
                      free_text);
}

/* The upstream allocation with the out-of-memory ladder (no lock held). */
static curd_status alloc_with_ladder(curdi_pool *pool, size_t class_bytes,
                                     size_t byte_len, uint64_t *out_address)
{
    curd_status status =
        curdi_pool_upstream_alloc(pool, class_bytes, out_address);
    if (status != CURD_E_OUT_OF_MEMORY)
        return status;
    /* (a) just enough of this pool's cache */
    /* Trimming is best effort on this ladder: a trim whose counters are full
     * frees nothing, and the ladder goes on to its next step. */
    uint64_t freed = 0;
    (void)curdi_pool_upstream_trim_cache(pool, true, class_bytes, &freed);
    if (freed > 0) {
        curdi_pool_stats_global_count(&pool->oom_retries, 1);
        status = curdi_pool_upstream_alloc(pool, class_bytes, out_address);
        if (status != CURD_E_OUT_OF_MEMORY)
            return status;
    }
    if (pool->relieve != NULL) {
        /* (b) the application's reclaim callback; what it releases may land
         * in this very cache, so free that much again before retrying. */
        if (pool->relieve(pool->relieve_context, class_bytes,
                          CURDI_RELIEF_RECLAIM) > 0) {
            (void)curdi_pool_upstream_trim_cache(pool, true, class_bytes,
                                                 &freed);
            curdi_pool_stats_global_count(&pool->oom_retries, 1);
            status = curdi_pool_upstream_alloc(pool, class_bytes, out_address);
            if (status != CURD_E_OUT_OF_MEMORY)
                return status;
        }
        /* (c) every cached block of every pool of the device */
        if (pool->relieve(pool->relieve_context, class_bytes,
                          CURDI_RELIEF_TRIM_ALL) > 0) {
            curdi_pool_stats_global_count(&pool->oom_retries, 1);
            status = curdi_pool_upstream_alloc(pool, class_bytes, out_address);
            if (status != CURD_E_OUT_OF_MEMORY)
                return status;
        }
    }
    curdi_pool_stats_global_count(&pool->oom_failures, 1);
    return fail_out_of_memory(pool, class_bytes, byte_len);
}

/* The block goes upstream-new to the caller: into its shard's live table,
 * or (out_token set, the block has an index) out with a token. */
static curd_status acquire_upstream(curdi_pool *pool, pool_shard *own,
                                    size_t byte_len, size_t class_bytes,
                                    unsigned class_index,
                                    uint64_t *out_address,
                                    uint32_t *out_token)
{
    if (!curdi_pool_stats_global_headroom(pool))
        return curdi_pool_stats_fail_counters_full(pool, "acquire");
    pool_block *block = curdi_pool_records_new(&pool->records);
    if (block == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The %s pool could not allocate the %zu-byte host "
                          "record of a new block. Fix: free host memory and "
                          "try again.",
                          pool->name, sizeof *block);
    if (!curdi_pool_upstream_reserved_add(pool, class_bytes)) {
        curdi_pool_records_retire(&pool->records, block);
        return curdi_fail(CURD_E_OVERFLOW,
                          "The %s pool cannot hold %zu more bytes: it would "
                          "hold more than 2^62 bytes. Fix: release blocks or "
                          "request less.",
                          pool->name, class_bytes);
    }
    atomic_fetch_add(&pool->busy, 1u);
    if (atomic_load(&pool->closing)) {
        atomic_fetch_sub_explicit(&pool->reserved_bytes, class_bytes,
                                  memory_order_relaxed);
        curdi_pool_records_retire(&pool->records, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return fail_closing(pool);
    }
    curdi_pool_stats_global_count(&pool->cache_misses, 1);
    uint64_t address = 0;
    curd_status status =
        alloc_with_ladder(pool, class_bytes, byte_len, &address);
    if (status != CURD_OK) {
        atomic_fetch_sub_explicit(&pool->reserved_bytes, class_bytes,
                                  memory_order_relaxed);
        curdi_pool_records_retire(&pool->records, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return status;
    }
    block->address = address;
    block->class_bytes = class_bytes;
    block->byte_len = byte_len;
    block->class_index = class_index;
    block->next = NULL;
    bool tokened = out_token != NULL && block->index != 0;

    shard_lock(own);
    bool closing = atomic_load(&pool->closing);
    if (closing
        || !headroom_for_acquire(own->families, own->cache_hits,
                                 SHARD_COUNTER_MAX, class_bytes, byte_len,
                                 false)) {
        /* Only another thread sharing this shard can have used up the headroom
         * checked before the upstream call. */
        shard_unlock(own);
        curdi_pool_upstream_free(pool, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return closing ? fail_closing(pool)
                       : curdi_pool_stats_fail_counters_full(pool, "acquire");
    }
    if (!tokened && !table_insert(own, block)) {
        shard_unlock(own);
        curdi_pool_upstream_free(pool, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return fail_live_table(pool);
    }
    count_live_up(pool, own->families, owner_front_of(own), class_bytes,
                  byte_len);
    uint32_t token = tokened ? hand_out(block, byte_len) : 0;
    shard_unlock(own);
    atomic_fetch_sub(&pool->busy, 1u);
    *out_address = address;
    if (out_token != NULL)
        *out_token = token;
    return CURD_OK;
}

/* A block as curd_block_acquire hands it out. */
static inline __attribute__((always_inline)) void
block_fill(const curdi_pool *pool, curd_block *out_block, uint64_t address,
           size_t byte_len, size_t class_bytes, uint32_t token)
{
    bool device = pool->kind == CURD_POOL_DEVICE;
    *out_block = (curd_block){
        .device_ptr = device ? address : 0,
        .host_ptr = device ? NULL : (void *)(uintptr_t)address,
        .byte_len = byte_len,
        .class_bytes = class_bytes,
        .pool_kind = (uint32_t)pool->kind,
        .reserved = token,
    };
}

/* A hit in the calling thread's own front: no lock, no table. False (with
 * nothing changed) when the front has no block of the class, is revoked,
 * or its counters are full. */
static inline __attribute__((always_inline)) bool
acquire_from_front(curdi_pool *pool, pool_shard *own, pool_front *front,
                   size_t byte_len, size_t class_bytes, unsigned class_index,
                   curd_block *out_block)
{
    if (!front_enter(front))
        return false;
    if (front->counts[class_index] == 0 ||
        !front_may_spend(front, class_bytes)) {
        front_leave(front);
        return false;
    }
    pool_block *block = *front_top(front, class_index);
    front->counts[class_index]--;
    front->cached_bytes -= class_bytes;
    bool settle = front_count(front, class_bytes, byte_len, true);
    if (front->lease_bytes - front->cached_bytes > 2u * pool->lease_slack)
        lease_give_back(pool, &front->lease_bytes, front->cached_bytes,
                        pool->lease_slack);
    /* Fronts hold indexed blocks: each has a token. */
    block_fill(pool, out_block, block->address, byte_len, class_bytes,
               hand_out(block, byte_len));
    front_leave_counted(pool, front, own, settle);
    return true;
}

static curd_status acquire(curdi_pool *pool, size_t byte_len,
                           uint64_t *out_address, size_t *out_class_bytes,
                           uint32_t *out_token)
{
    if (pool == NULL || out_address == NULL || out_class_bytes == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_pool_acquire: %s is NULL. Fix: pass a pool "
                          "and both out pointers.",
                          pool == NULL          ? "pool"
                          : out_address == NULL ? "out_address"
                                                : "out_class_bytes");
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "The %s pool was asked for a block of 0 bytes. Fix: "
                          "request at least one byte (a zero-byte transfer "
                          "needs no block).",
                          pool->name);
    size_t class_bytes = 0;
    unsigned class_index = 0;
    curd_status status =
        curdi_checked_size_class(byte_len, &class_bytes, &class_index);
    if (status != CURD_OK)
        return status;
    if (class_bytes > BLOCK_MAX)
        return curdi_fail(CURD_E_OVERFLOW,
                          "The %s pool was asked for %zu bytes, whose %zu-byte "
                          "class passes the largest block a pool counts "
                          "(2^60 - 1 bytes). Fix: request less.",
                          pool->name, byte_len, class_bytes);
    if (pool->upstream_total_bytes != 0 &&
        class_bytes > pool->upstream_total_bytes)
        return curdi_fail(
            CURD_E_OUT_OF_MEMORY,
            "The %s pool was asked for %zu bytes (a %zu-byte "
            "block), more than its upstream has in all (%" PRIu64
            " bytes): no trim or reclaim could make headroom, so "
            "none was tried and nothing changed. Fix: request "
            "at most that much, or split the data into parts.",
            pool->name, byte_len, class_bytes, pool->upstream_total_bytes);
    if (atomic_load_explicit(&pool->closing, memory_order_relaxed))
        return fail_closing(pool);
    if (pool->live_limit_bytes != 0) {
        status = live_reserve(pool, class_bytes, byte_len);
        if (status != CURD_OK)
            return status;
    }

    unsigned own_index = own_shard_index();
    pool_shard *own = &pool->shards[own_index];
    /* The front serves token-bearing blocks only: one that goes into a
     * table takes the lock anyway (and curdi_pool_release puts blocks back
     * on the stack, cache_locked says why). Its lock-free hit is
     * curdi_pool_acquire_block's; here, by the lock, its blocks come
     * first. */
    pool_front *front = out_token != NULL && class_index < pool->hot_count
                            ? owned_front(pool, own_index)
                            : NULL;
    shard_lock(own);
    if (front != NULL)
        front_renew_if_short(front);
    /* The own front (by the lock: the owner) and the stack are one LIFO,
     * the front on top. */
    bool in_front = front != NULL && front->counts[class_index] != 0;
    if (!in_front && own->stacks[class_index].top == NULL) {
        shard_unlock(own);
        pool_block *taken = take_from_other_shard(pool, own, class_index);
        shard_lock(own);
        if (taken != NULL) {
            /* Its lease came with it, so the shard's lease still covers
             * what it caches. Cached totals do not change. */
            own->lease_bytes += taken->class_bytes;
            stack_push(own, taken);
        }
    }
    pool_block *block = in_front ? *front_top(front, class_index)
                                 : own->stacks[class_index].top;
    if (block != NULL) {
        if (!headroom_for_acquire(own->families, own->cache_hits,
                                  SHARD_COUNTER_MAX, class_bytes, byte_len,
                                  true)) {
            shard_unlock(own);
            live_unreserve(pool, class_bytes);
            return curdi_pool_stats_fail_counters_full(pool, "acquire");
        }
        bool tokened = out_token != NULL && block->index != 0;
        /* Into the live table before it leaves the cache, so that a
         * table that cannot grow changes nothing. */
        if (!tokened && !table_insert(own, block)) {
            shard_unlock(own);
            live_unreserve(pool, class_bytes);
            return fail_live_table(pool);
        }
        if (in_front) {
            /* Its lease stays with the front, unused, until given back. */
            front->counts[class_index]--;
            front->cached_bytes -= class_bytes;
        } else {
            (void)stack_pop(own, class_index);
        }
        count_cached_down(pool, own->families, class_bytes);
        count_live_up(pool, own->families, owner_front_of(own), class_bytes,
                      byte_len);
        own->cache_hits++;
        if (own->lease_bytes - own->cached_bytes > 2u * pool->lease_slack)
            lease_give_back(pool, &own->lease_bytes, own->cached_bytes,
                            pool->lease_slack);
        block->byte_len = byte_len;
        uint32_t token = tokened ? hand_out(block, byte_len) : 0;
        uint64_t address = block->address;
        shard_unlock(own);
        *out_address = address;
        *out_class_bytes = class_bytes;
        if (out_token != NULL)
            *out_token = token;
        return CURD_OK;
    }
    bool headroom =
        headroom_for_acquire(own->families, own->cache_hits, SHARD_COUNTER_MAX,
                             class_bytes, byte_len, false);
    shard_unlock(own);
    if (!headroom) {
        live_unreserve(pool, class_bytes);
        return curdi_pool_stats_fail_counters_full(pool, "acquire");
    }
    status = acquire_upstream(pool, own, byte_len, class_bytes, class_index,
                              out_address, out_token);
    if (status != CURD_OK) {
        live_unreserve(pool, class_bytes);
        return status;
    }
    *out_class_bytes = class_bytes;
    return CURD_OK;
}

curd_status curdi_pool_acquire(curdi_pool *pool, size_t byte_len,
                               uint64_t *out_address, size_t *out_class_bytes)
{
    return acquire(pool, byte_len, out_address, out_class_bytes, NULL);
}

/* A block by the whole path: by the lock, a token out only on success.
 * Not inline, so that the hit keeps no register of its own. */
static __attribute__((noinline)) curd_status
acquire_block_by_lock(curdi_pool *pool, size_t byte_len,
                      curd_block *out_block)
{
    uint64_t address = 0;
    size_t class_bytes = 0;
    uint32_t token = 0;
    curd_status status =
        acquire(pool, byte_len, &address, &class_bytes, &token);
    if (status == CURD_OK)
        block_fill(pool, out_block, address, byte_len, class_bytes, token);
    return status;
}

curd_status curdi_pool_acquire_block(curdi_pool *pool, size_t byte_len,
                                     curd_block *out_block)
{
    /* The hit in the caller's own front, the only lock-free one, with the
     * fewest checks: a request of 1 to FRONT_CLASS_MAX bytes has a hot
     * class, which the table gives; a block in the front proves the class
     * fits the upstream; without a live limit nothing is reserved (with
     * one, the whole path below takes the front's block by the lock).
     * Everything else takes the whole path. */
    if (byte_len - 1u < FRONT_CLASS_MAX &&
        curdi_thread_front == FRONT_OWNED && pool->live_limit_bytes == 0 &&
        !atomic_load_explicit(&pool->closing, memory_order_relaxed)) {
        unsigned own_index = curdi_thread_shard - 1u;
        pool_front *front = &pool->shards[own_index].front;
        size_t step = (byte_len - 1u) / HOT_STEP;
        unsigned class_index = pool->hot_class[step];
        size_t class_bytes = pool->hot_class_bytes[step];
        if (front->active &&
            acquire_from_front(pool, &pool->shards[own_index], front,
                               byte_len, class_bytes, class_index,
                               out_block))
            return CURD_OK;
    }
    return acquire_block_by_lock(pool, byte_len, out_block);
}

/* ------------------------------------------------------------------------
 * Release
 * ---------------------------------------------------------------------- */
/* Caches a released block in a locked shard, on the caller's own front
 * when it has one for the class and the block came back by its token
 * (a block of curdi_pool_acquire goes back to the stack: its next acquire
 * takes the lock anyway, and keeping its lease in the shard keeps that
 * path as cheap as before fronts), and counts it there. */
static inline __attribute__((always_inline)) void
cache_locked(curdi_pool *pool, pool_shard *shard, pool_block *block,
             pool_front *own_front, bool to_front)
{
    if (to_front && own_front != NULL && own_front->active &&
        block->index != 0 && block->class_index < pool->hot_count)
        curdi_pool_fronts_push_locked(shard, own_front, block);
    else
        stack_push(shard, block);
    count_cached_up(pool, shard->families, own_front, block->class_bytes);
}

/* The rest of a release once the block is the caller's to place: found in
 * shard's live table at `at`, or claimed by its token (at NULL, shard the
 * caller's own). Counted in shard (locked on entry, unlocked on return),
 * cached there or freed upstream. own_front: the caller's front when shard
 * is its own shard and it owns the fronts, else NULL. On CURD_E_OVERFLOW
 * nothing was counted or moved. */
static inline __attribute__((always_inline)) curd_status
release_locked(curdi_pool *pool, pool_shard *shard, pool_block *block,
               curdi_hash_map_cursor *at, pool_front *own_front)
{
    size_t class_bytes = block->class_bytes;
    /* The front's blocks of the class count against the slots on the
     * token path, where the front and the stack are one LIFO. */
    unsigned in_front = at == NULL && own_front != NULL &&
                                block->class_index < pool->hot_count
                            ? own_front->counts[block->class_index]
                            : 0;
    bool may_cache = cacheable(pool, shard, block, in_front);
    bool cache = may_cache && lease_cover(pool, &shard->lease_bytes,
                                          shard->cached_bytes, class_bytes);
    /* The caller's own front may sit on lease it does not use. */
    if (may_cache && !cache && own_front != NULL &&
        lease_give_back(pool, &own_front->lease_bytes,
                        own_front->cached_bytes, 0) != 0)
        cache = lease_cover(pool, &shard->lease_bytes, shard->cached_bytes,
                            class_bytes);
    if (!headroom_for_release(shard->families, SHARD_COUNTER_MAX, class_bytes,
                              block->byte_len, cache)
        || (!cache && !curdi_pool_stats_global_headroom(pool))) {
        shard_unlock(shard);
        return curdi_pool_stats_fail_counters_full(pool, "release");
    }
    if (at != NULL)
        curdi_hash_map_remove_at(&shard->live, at);
    count_live_down(pool, shard->families, class_bytes, block->byte_len);
    live_unreserve(pool, class_bytes);
    if (cache) {
        cache_locked(pool, shard, block, own_front, at == NULL);
        shard_unlock(shard);
        return CURD_OK;
    }
    atomic_fetch_add(&pool->busy, 1u);
    shard_unlock(shard);
    if (may_cache && lease_sweep(pool, shard)) {
        /* Other shards held unused lease; with it the block may fit. */
        shard_lock(shard);
        if (cacheable(pool, shard, block, in_front)
            && headroom_for_cache(shard->families, SHARD_COUNTER_MAX,
                                  class_bytes)
            && lease_cover(pool, &shard->lease_bytes, shard->cached_bytes,
                           class_bytes)) {
            cache_locked(pool, shard, block, own_front, at == NULL);
            shard_unlock(shard);
            atomic_fetch_sub(&pool->busy, 1u);
            return CURD_OK;
        }
        shard_unlock(shard);
    }
    curdi_pool_upstream_free(pool, block);
    atomic_fetch_sub(&pool->busy, 1u);
    return CURD_OK;
}

/* Releases the live block at address found by its address in the live
 * tables; with `stated` set, only when its class and requested sizes are
 * the ones stated (else, like an address the pool does not have live,
 * CURD_E_STALE_HANDLE with nothing changed). */
static curd_status release(curdi_pool *pool, uint64_t address,
                           const pool_block *stated)
{
    if (pool == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_pool_release: pool is NULL. Fix: release "
                          "to the pool the block came from.");
    unsigned own_index = own_shard_index();
    pool_shard *shard = &pool->shards[own_index];
    shard_lock(shard);
    curdi_hash_map_cursor at;
    pool_block *block = table_find(shard, address, &at);
    for (unsigned i = 1; block == NULL && i < SHARD_COUNT; i++) {
        /* Released by another thread than the one that acquired it. */
        shard_unlock(shard);
        shard = &pool->shards[(own_index + i) % SHARD_COUNT];
        shard_lock(shard);
        block = table_find(shard, address, &at);
    }
    if (block == NULL) {
        shard_unlock(shard);
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "The %s pool has no live block at 0x%" PRIx64
                          ": it was released already, belongs to another "
                          "pool or device, or was never handed out. Fix: "
                          "release each block exactly once, to the device "
                          "and pool that handed it out.",
                          pool->name, address);
    }
    if (stated != NULL && (block->class_bytes != stated->class_bytes ||
                           block->byte_len != stated->byte_len)) {
        size_t live_class = block->class_bytes, live_len = block->byte_len;
        shard_unlock(shard);
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "The %s pool handed out the block at 0x%" PRIx64
                          " for %zu bytes of a %zu-byte class, but it comes "
                          "back as %zu bytes of a %zu-byte class: not a "
                          "block curd handed out; nothing was released. Fix: "
                          "release the curd_block that curd_block_acquire() "
                          "filled in, unchanged.",
                          pool->name, address, live_len, live_class,
                          stated->byte_len, stated->class_bytes);
    }
    /* Any class: release_locked may need the front's unused lease. */
    pool_front *own_front = shard == &pool->shards[own_index]
                                ? owned_front(pool, own_index)
                                : NULL;
    return release_locked(pool, shard, block, &at, own_front);
}

/* A release into the calling thread's own front: no lock. False (with
 * nothing changed) when the front is revoked or full for the class, the
 * block may not be cached, or the front's counters or lease are short. */
static inline __attribute__((always_inline)) bool
release_to_front(curdi_pool *pool, pool_shard *own,
                                    pool_front *front, pool_block *block)
{
    if (!front_enter(front))
        return false;
    unsigned class_index = block->class_index;
    size_t class_bytes = block->class_bytes;
    unsigned count = front->counts[class_index];
    if (count >= FRONT_DEPTH || !cacheable(pool, own, block, count) ||
        !front_may_spend(front, class_bytes) ||
        !lease_cover(pool, &front->lease_bytes, front->cached_bytes,
                     class_bytes)) {
        front_leave(front);
        return false;
    }
    front->counts[class_index] = (uint8_t)(count + 1u);
    *front_top(front, class_index) = block;
    front->cached_bytes += class_bytes;
    bool settle = front_count(front, class_bytes, block->byte_len, false);
    live_unreserve(pool, class_bytes);
    front_leave_counted(pool, front, own, settle);
    return true;
}

static __attribute__((noinline, cold)) curd_status
fail_stale_token(const curdi_pool *pool, uint64_t address, size_t class_bytes,
                 size_t byte_len, uint32_t token)
{
    return curdi_fail(CURD_E_STALE_HANDLE,
                      "The %s pool has no block out as 0x%" PRIx64
                      " (%zu bytes of a %zu-byte class, token 0x%" PRIx32
                      "): it was released already, belongs to another pool "
                      "or device, or the curd_block was altered; nothing "
                      "was released. Fix: release the curd_block that "
                      "curd_block_acquire() filled in, unchanged, exactly "
                      "once, to the device that handed it out.",
                      pool->name, address, byte_len, class_bytes, token);
}

/* The rest of a release by token whose block the caller has claimed, by
 * its shard's lock (not inline, as acquire_block_by_lock; release_token
 * claims it). */
static __attribute__((noinline)) curd_status
release_claimed_by_lock(curdi_pool *pool, pool_block *block,
                        uint32_t generation)
{
    unsigned own_index = own_shard_index();
    pool_shard *own = &pool->shards[own_index];
    pool_front *front = owned_front(pool, own_index);
    bool hot = block->class_index < pool->hot_count;
    shard_lock(own);
    if (hot && front != NULL) {
        front_activate(pool, front);
        front_renew_if_short(front);
    }
    curd_status status = release_locked(pool, own, block, NULL, front);
    if (status != CURD_OK) /* nothing changed: it is still out */
        atomic_store_explicit(&block->state, state_of(generation, BLOCK_HELD),
                              memory_order_release);
    return status;
}

/* A release by token: the directory names the record, and one atomic
 * exchange of its state claims it (of two releases of one block at once,
 * one wins). */
static curd_status release_token(curdi_pool *pool, uint64_t address,
                                 size_t class_bytes, size_t byte_len,
                                 uint32_t token)
{
    pool_block *block =
        directory_record(&pool->records, token >> TOKEN_GENERATION_BITS);
    uint32_t generation = token & ((1u << TOKEN_GENERATION_BITS) - 1u);
    uint32_t held = state_of(generation, BLOCK_HELD);
    /* The sizes and address are read only once the state says the block is
     * out under this generation, which the holder's hand_out published. */
    if (block == NULL ||
        atomic_load_explicit(&block->state, memory_order_acquire) != held ||
        block->address != address || block->class_bytes != class_bytes ||
        block->byte_len != byte_len ||
        !atomic_compare_exchange_strong_explicit(
            &block->state, &held, state_of(generation, BLOCK_IDLE),
            memory_order_acquire, memory_order_relaxed))
        return fail_stale_token(pool, address, class_bytes, byte_len, token);
    /* A thread that owns fronts has its shard index already. */
    if (curdi_thread_front == FRONT_OWNED &&
        block->class_index < pool->hot_count) {
        pool_shard *own = &pool->shards[curdi_thread_shard - 1u];
        if (own->front.active &&
            release_to_front(pool, own, &own->front, block))
            return CURD_OK;
    }
    return release_claimed_by_lock(pool, block, generation);
}

curd_status curdi_pool_release(curdi_pool *pool, uint64_t address)
{
    return release(pool, address, NULL);
}

/* A block without a token goes back by its address (not inline, as
 * acquire_block_by_lock). */
static __attribute__((noinline)) curd_status
release_stated(curdi_pool *pool, uint64_t address, size_t class_bytes,
               size_t byte_len)
{
    const pool_block stated = {.class_bytes = class_bytes,
                               .byte_len = byte_len};
    return release(pool, address, &stated);
}

__attribute__((cold)) curd_status
curdi_pool_fail_foreign_block(const curd_block *block)
{
    return curdi_fail(CURD_E_STALE_HANDLE,
                      "curd_block_release: the block (pool_kind %" PRIu32
                      ", device_ptr 0x%" PRIx64 ", host_ptr %p, byte_len "
                      "%zu, class_bytes %zu, reserved %" PRIu32 ") is not "
                      "one curd hands out. Fix: release the curd_block "
                      "that curd_block_acquire() filled in, unchanged.",
                      block->pool_kind, block->device_ptr, block->host_ptr,
                      block->byte_len, block->class_bytes, block->reserved);
}

curd_status curdi_pool_release_block(curdi_pool *pool,
                                     const curd_block *block)
{
    /* The address in the pointer of the pool's kind, the other empty: then
     * every other field must be what the pool handed out, since a copy
     * altered in its sizes or its token names a block curd never handed
     * out. A token's record holds the sizes and address it was handed out
     * with, so the release by token compares with those alone. */
    bool device = pool->kind == CURD_POOL_DEVICE;
    uint64_t address = device ? block->device_ptr
                              : (uint64_t)(uintptr_t)block->host_ptr;
    bool other_empty = device ? block->host_ptr == NULL
                              : block->device_ptr == 0;
    if (!other_empty)
        return curdi_pool_fail_foreign_block(block);
    if (block->reserved != 0)
        return release_token(pool, address, block->class_bytes,
                             block->byte_len, block->reserved);
    if (address == 0 || block->byte_len == 0 ||
        block->byte_len > block->class_bytes)
        return curdi_pool_fail_foreign_block(block);
    return release_stated(pool, address, block->class_bytes,
                          block->byte_len);
}
