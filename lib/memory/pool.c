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
 * Fronts (why a hit takes no lock)
 * --------------------------------
 * Even on its own shard a hit took the shard lock twice (an atomic
 * exchange each: about 5 ns apiece on the H100 host's Xeon) and hashed the
 * address into and out of the live table. So each shard also holds a
 * front: FRONT_DEPTH blocks per class up to FRONT_CLASS_MAX, owned by the
 * one thread that holds the shard's index exclusively (the first to claim
 * an index while no other owns it; a thread sharing an index has none). The
 * owner takes a block from its front and puts one back with no locked
 * instruction at all (front_enter: a plain store of `busy` and a plain load
 * of `revoked`). Everyone else reaches a front only with every shard lock
 * held (trim, stats, reset, destroy), after fronts_revoke: it stores
 * `revoked`, runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts
 * a full barrier on every running thread of the process, and waits for
 * `busy` to drop: either the owner's load saw `revoked` (and it goes to the
 * shard by the lock, which the revoker holds) or its `busy` was seen (and
 * the revoker waits). A revoke costs about a microsecond and only happens
 * while some front of the pool has been used; a hit pays nothing for it.
 * The owner also reaches its front while it holds its own shard's lock
 * (no revoker can run then): for one thread the front and the shard's stack
 * are one LIFO (front_push_locked), so which block comes back and what a
 * trim frees are as without fronts. A front has its own lease of the cache
 * budget and its own share of each counter (a front share that is full only
 * sends its owner to the shard). A thread that exits gives its fronts back:
 * the key destructor moves every front block onto its shard's stack in
 * every pool on the registry (pools join it when made and leave it before
 * destroy frees anything), then frees the index's ownership. Without
 * membarrier (not Linux, an old kernel, or CURD_POOL_NO_FRONTS set) there
 * are no fronts and every hit takes the shard lock as before.
 *
 * Tokens (why a release needs no table)
 * -------------------------------------
 * A block handed out through curd_block_acquire carries a token in
 * curd_block.reserved: its record's index in the pool's directory and the
 * low 8 bits of a generation that every hand-out moves on. The record is
 * in no live table; its state says it is out under that generation. The
 * release looks the record up by index (two loads), checks that the state,
 * the address and both sizes are what the block says, and claims it with
 * one compare-and-swap of the state (of two releases of one block at once,
 * one wins; the other is stale). So a release is O(1) on any thread, and
 * a copy altered in any field (a forged token included) is refused: a
 * token names only records of this pool, and an index whose record is not
 * out under that generation with those sizes at that address is refused
 * before anything changes. Records are never freed before the pool: when
 * a block goes upstream its record waits on a spare list for the next one
 * (keeping its index and generation), so no token, however stale, reads
 * freed memory. Past 2^24 - 1 records a new record has no index; its
 * block is handed out with token 0 and found by its address in the live
 * tables, as every block of curdi_pool_acquire is.
 *
 * Statistics
 * ----------
 * Each family (live, cached and requested bytes; live and cached blocks)
 * keeps per shard, and per front, its cumulative allocated and freed
 * amounts and an unflushed level change (delta); the pool keeps the
 * flushed level and the peak in two atomics. A block may be counted up in
 * one part and down in another (taken from a front, released to a shard on
 * another thread): only the sums mean anything, and they are exact. A part folds its delta into the pool level once it
 * reaches a quantum (1 MiB for bytes, 16 for blocks) and after each rise
 * raises the peak to pool level + the thread's own two deltas (its shard's
 * and its front's). So:
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
 * 2^64 / SHARD_COUNT - 2^56 and a front's at 2^56 - 1, so the sum of the
 * parts always fits; the operation
 * that would pass it fails with CURD_E_OVERFLOW and changes nothing, until
 * curd_device_stats_reset(). For the same reason a block's class may not
 * pass 2^60 - 1 bytes (CURD_E_OVERFLOW, like a request past the largest
 * class; the largest class below 2^60 is 2^60 - 2^56, a shard's share). Counters of the slow path (upstream calls,
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
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#define HAVE_MEMBARRIER 1
#endif

#include "base/checked.h"
#include "base/clock.h"
#include "base/hash_map.h"
#include "base/status.h"

#define SHARD_COUNT CURDI_POOL_SHARD_COUNT
#define SLOTS_MAX 1024u
/* A shard's live table starts with room for this many blocks. */
#define INITIAL_LIVE_SLOTS 32u
#define CACHE_LINE 64u
/* Intel's L2 fetches cache lines in 128-byte aligned pairs (the adjacent
 * line prefetcher), so data written by different threads is kept a pair
 * apart, not just a line. */
#define LINE_PAIR 128u

/* A front's share of a cumulative counter (fronts below). A front whose
 * share is full stops taking blocks (its thread uses the shard) until a
 * reset: at 4 KiB a hit, 2^56 bytes is 2^44 hits. */
#define FRONT_COUNTER_MAX (((uint64_t)1 << 56) - 1u)
/* A shard's share of a cumulative counter: the sum of SHARD_COUNT shard
 * shares and SHARD_COUNT front shares stays within 2^64 - 1. It is itself
 * a size class (2^59 * 15/8), so the classes a pool serves are those below
 * 2^60, as before fronts took their part. */
#define SHARD_COUNTER_MAX (UINT64_MAX / SHARD_COUNT - FRONT_COUNTER_MAX)
/* Pool-wide slow-path counters stop this far below 2^64. */
#define GLOBAL_COUNTER_MAX (UINT64_MAX - ((uint64_t)1 << 62))
/* The largest block: one shard's share of a counter can count it. */
#define BLOCK_MAX SHARD_COUNTER_MAX
/* Bytes one pool may hold upstream (live + cached). */
#define RESERVED_MAX ((uint64_t)1 << 62)

/* A thread's front keeps up to FRONT_DEPTH blocks of each class up to
 * FRONT_CLASS_MAX bytes. */
#define FRONT_DEPTH 2u
#define FRONT_CLASS_MAX ((size_t)64 << 10)
/* The smallest class step (checked.c): requests in one step of it share a
 * class below FRONT_CLASS_MAX. */
#define HOT_STEP ((size_t)256)
/* Tokens: a record's directory index (below 2^24, 0 for none) and the low
 * 8 bits of its hand-out generation. */
#define TOKEN_GENERATION_BITS 8u
#define DIRECTORY_CHUNK_SHIFT 12u
#define DIRECTORY_CHUNK (1u << DIRECTORY_CHUNK_SHIFT)
#define DIRECTORY_CHUNKS (1u << 12)
#define DIRECTORY_MAX (DIRECTORY_CHUNK * DIRECTORY_CHUNKS)

#define BYTES_QUANTUM ((int64_t)1 << 20)
#define BLOCKS_QUANTUM ((int64_t)16)

enum pool_family {
    FAMILY_LIVE_BYTES,
    FAMILY_CACHED_BYTES,
    FAMILY_REQUESTED_BYTES,
    FAMILY_LIVE_BLOCKS,
    FAMILY_CACHED_BLOCKS,
    FAMILY_COUNT
};

static const int64_t family_quantum[FAMILY_COUNT] = {
    BYTES_QUANTUM, BYTES_QUANTUM, BYTES_QUANTUM, BLOCKS_QUANTUM,
    BLOCKS_QUANTUM};

/* The host-side record of one upstream block. It sits in exactly one place
 * at a time: a shard's live table (keyed by its address), a shard's class
 * stack (linked through next), a front's slots, or, handed out with a
 * token, nowhere but its directory entry (state BLOCK_HELD). A record
 * keeps its directory index for the pool's life: when its block goes
 * upstream it waits on the spare list (state BLOCK_SPARE) for the next
 * block, so a token, however stale, never names freed memory. */
typedef struct pool_block {
    uint64_t address;
    size_t class_bytes;
    size_t byte_len; /* what the current holder asked for, while live */
    unsigned class_index;
    uint32_t index; /* in the pool's directory; 0: none (no token) */
    /* kind (BLOCK_*) in the low 8 bits, the hand-out generation above. */
    _Atomic uint32_t state;
    struct pool_block *next;
} pool_block;

enum block_kind {
    BLOCK_IDLE,  /* cached, in a live table, or between places */
    BLOCK_HELD,  /* handed out with a token: in no table */
    BLOCK_SPARE  /* its block is gone upstream; waiting for the next */
};
_Static_assert(sizeof(pool_block) <= CACHE_LINE,
               "a block record fits the cache line it is allocated as");

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

/* A thread's front in one pool (the header comment says who may touch
 * it when). */
typedef struct pool_front {
    _Atomic bool busy;    /* its owner is inside it */
    _Atomic bool revoked; /* a trim, stats or destroy has it */
    bool active;          /* used since its owner came; under the lock */
    uint8_t *counts;      /* blocks per hot class */
    pool_block **slots;   /* FRONT_DEPTH per hot class, top last */
    uint64_t cached_bytes;
    uint64_t lease_bytes; /* >= cached_bytes */
    front_moves moves;  /* since the last stats reset */
    front_moves folded; /* moves when the front last folded its level */
    bool unfolded;      /* moves != folded: the front changed a level */
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

    /* Index -> record for tokens: chunks made as records are, never moved
     * or freed before the pool. */
    _Atomic(pool_block *) *_Atomic *directory;
    pthread_mutex_t records_lock; /* records_made, spare_records */
    uint32_t records_made;
    pool_block *spare_records;
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

/* ------------------------------------------------------------------------
 * Threads and shards
 * ---------------------------------------------------------------------- */
/* The calling thread's shard index + 1; 0 until its first pool call.
 * initial-exec: in libcurd.so the default model calls __tls_get_addr on
 * every access (each acquire and each release); 4 bytes of the static TLS
 * surplus that glibc keeps for dlopen'ed libraries avoid that. */
static _Thread_local unsigned thread_shard
    __attribute__((tls_model("initial-exec")));

/* Live threads holding each index (a placement hint: nothing depends on it
 * being exact). Where ties begin rotates, so threads that never exit still
 * get the indices round robin. */
static atomic_uint shard_holders[SHARD_COUNT];
static atomic_uint next_thread_shard;
/* Its destructor gives a thread's index back when the thread exits. */
static pthread_key_t shard_key;
static pthread_once_t shard_key_once = PTHREAD_ONCE_INIT;
static atomic_bool shard_key_ready;

/* Whether the calling thread owns the front of its shard index in every
 * pool: FRONT_UNKNOWN until its first pool call; FRONT_NONE when another
 * thread owns them, fronts are off, or the thread is exiting. */
enum { FRONT_UNKNOWN, FRONT_OWNED, FRONT_NONE };
static _Thread_local unsigned char thread_front
    __attribute__((tls_model("initial-exec")));
/* The owner of each index's fronts, if any. */
static atomic_bool front_owned[SHARD_COUNT];

/* Fronts need the asymmetric fence (fronts_revoke); without it they stay
 * off and every call takes its shard's lock, as before. */
static pthread_once_t fronts_once = PTHREAD_ONCE_INIT;
static atomic_bool fronts_on;

static void fronts_enable(void)
{
#ifdef HAVE_MEMBARRIER
    if (getenv("CURD_POOL_NO_FRONTS") == NULL &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                0) == 0)
        atomic_store(&fronts_on, true);
#endif
}

/* A full memory barrier on every running thread of the process, so that
 * the fast path's plain store + load (front_enter) need no fence. */
static void barrier_everywhere(void)
{
#ifdef HAVE_MEMBARRIER
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#endif
}

/* Every pool alive, for exiting threads (fronts_give_back): created pools
 * join, destroy takes a pool off before it frees anything. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static curdi_pool *registry_first;

static void fronts_give_back(unsigned index);

static void shard_thread_exit(void *value)
{
    unsigned index = (unsigned)(uintptr_t)value - 1u;
    if (thread_front == FRONT_OWNED) {
        /* Later calls of this thread (other destructors) take the shard's
         * lock; the next thread may own the fronts. */
        thread_front = FRONT_NONE;
        fronts_give_back(index);
        atomic_store_explicit(&front_owned[index], false,
                              memory_order_release);
    }
    atomic_fetch_sub_explicit(&shard_holders[index], 1u,
                              memory_order_relaxed);
}

static void shard_key_create(void)
{
    if (pthread_key_create(&shard_key, shard_thread_exit) == 0)
        atomic_store_explicit(&shard_key_ready, true, memory_order_release);
}

/* Once libcurd.so is unloaded, exiting threads must not call into it. */
__attribute__((destructor)) static void shard_key_delete(void)
{
    if (atomic_load_explicit(&shard_key_ready, memory_order_acquire))
        pthread_key_delete(shard_key);
}

static unsigned claim_shard_index(void)
{
    pthread_once(&shard_key_once, shard_key_create);
    unsigned start = atomic_fetch_add_explicit(&next_thread_shard, 1u,
                                               memory_order_relaxed);
    unsigned index, holders;
    do {
        index = start % SHARD_COUNT;
        holders = atomic_load_explicit(&shard_holders[index],
                                       memory_order_relaxed);
        for (unsigned i = 1; i < SHARD_COUNT && holders != 0; i++) {
            unsigned other = (start + i) % SHARD_COUNT;
            unsigned count = atomic_load_explicit(&shard_holders[other],
                                                  memory_order_relaxed);
            if (count < holders) {
                index = other;
                holders = count;
            }
        }
    } while (!atomic_compare_exchange_weak_explicit(
        &shard_holders[index], &holders, holders + 1u, memory_order_relaxed,
        memory_order_relaxed));
    /* Without the key the index is never given back: a worse hint, no
     * more. */
    bool key_set =
        atomic_load_explicit(&shard_key_ready, memory_order_acquire) &&
        pthread_setspecific(shard_key, (void *)(uintptr_t)(index + 1u)) == 0;
    /* Fronts only with the key: its destructor is what gives them back. */
    pthread_once(&fronts_once, fronts_enable);
    bool expected = false;
    if (thread_front == FRONT_UNKNOWN) {
        thread_front =
            key_set && atomic_load(&fronts_on) &&
                    atomic_compare_exchange_strong(&front_owned[index],
                                                   &expected, true)
                ? FRONT_OWNED
                : FRONT_NONE;
    }
    thread_shard = index + 1u;
    return index;
}

static inline unsigned own_shard_index(void)
{
    unsigned index = thread_shard;
    if (__builtin_expect(index != 0, true))
        return index - 1u;
    return claim_shard_index();
}

unsigned curdi_pool_thread_shard(void)
{
    return own_shard_index();
}

/* A shard lock is one flag: taking it is one atomic exchange, giving it
 * back one release store. A pthread mutex adds a second locked instruction
 * on unlock (the exchange that tells whether to wake a sleeper) and two
 * calls: on the H100 host's Xeon an uncontended lock+unlock pair cost
 * 23 ns as a mutex and 10.5 ns as exchange + store, and a cache hit
 * (acquire+release, two pairs) went from 52 to 34 ns with the change. The
 * price is that a waiter cannot sleep in the kernel: it spins, then
 * yields. That suits these locks: a thread mostly takes its own shard's,
 * critical sections are short (the longest, stats and trim, walk the
 * shards' counters and stacks), and none is held across an upstream call,
 * a callback or anything else that blocks. */
static void shard_lock_wait(pool_shard *shard)
{
    /* Backing off exponentially leaves the holder's cache lines alone long
     * enough for it to get work done: two threads that share a shard (more
     * threads alive than shards) made about twice as many hits with it as
     * with a waiter that polls after every pause. */
    unsigned pauses = 1;
    for (;;) {
        if (!atomic_load_explicit(&shard->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&shard->lock, true,
                                      memory_order_acquire))
            return;
        if (pauses <= 64u) {
            for (unsigned i = 0; i < pauses; i++)
                curdi_clock_pause();
            pauses *= 2u;
        } else {
            sched_yield(); /* the holder may have been preempted */
        }
    }
}

static inline void shard_lock(pool_shard *shard)
{
    if (__builtin_expect(
            atomic_exchange_explicit(&shard->lock, true, memory_order_acquire),
            false))
        shard_lock_wait(shard);
}

static inline void shard_unlock(pool_shard *shard)
{
    atomic_store_explicit(&shard->lock, false, memory_order_release);
}

/* Trim, stats and destroy take every shard lock, always in index order;
 * everything else holds at most one. */
static void lock_all(curdi_pool *pool)
{
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        shard_lock(&pool->shards[i]);
}

static void unlock_all(curdi_pool *pool)
{
    for (unsigned i = SHARD_COUNT; i-- > 0;)
        shard_unlock(&pool->shards[i]);
}

/* ------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------- */

static bool global_room(curdi_pool *pool)
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

static void global_count(_Atomic uint64_t *counter, uint64_t amount)
{
    /* Cannot pass 2^64: global_room() held before the operation began, and
     * no operation adds anywhere near 2^62. */
    atomic_fetch_add_explicit(counter, amount, memory_order_relaxed);
}

static inline int64_t delta_of(const family_part *part)
{
    return atomic_load_explicit(&part->delta, memory_order_relaxed);
}

/* One writer at a time (family_part says who reads it meanwhile). */
static inline void delta_set(family_part *part, int64_t value)
{
    atomic_store_explicit(&part->delta, value, memory_order_relaxed);
}

static void family_flush(curdi_pool *pool, family_part *part,
                         enum pool_family family)
{
    int64_t delta = delta_of(part);
    if (delta != 0) {
        atomic_fetch_add_explicit(&pool->families[family].level, delta,
                                  memory_order_relaxed);
        delta_set(part, 0);
    }
}

static void peak_raise(family_total *total, uint64_t value)
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

static void front_fold(curdi_pool *pool, pool_front *front)
{
    for (unsigned f = 0; f < FAMILY_COUNT; f++) {
        int64_t delta = front_delta(front, (enum pool_family)f);
        if (delta != 0)
            atomic_fetch_add_explicit(&pool->families[f].level, delta,
                                      memory_order_relaxed);
    }
    front->folded = front->moves;
    front->unfolded = false;
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
 * caller has checked the room for allocated. own_front: the calling
 * thread's front when it owns the one beside this shard part and the front
 * has an unfolded change (unfolded_front_of), else NULL: that change
 * counts in the estimate, so that one thread's level is exact. */
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
 * own_front as for family_up. */
static inline void count_live_up(curdi_pool *pool, family_part *parts,
                                 const pool_front *own_front,
                                 size_t class_bytes, size_t byte_len)
{
    family_up(pool, &parts[FAMILY_LIVE_BYTES], own_front, FAMILY_LIVE_BYTES,
              class_bytes);
    family_up(pool, &parts[FAMILY_LIVE_BLOCKS], own_front,
              FAMILY_LIVE_BLOCKS, 1);
    family_up(pool, &parts[FAMILY_REQUESTED_BYTES], own_front,
              FAMILY_REQUESTED_BYTES, byte_len);
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
                                   const pool_front *own_front,
                                   size_t class_bytes)
{
    family_up(pool, &parts[FAMILY_CACHED_BYTES], own_front,
              FAMILY_CACHED_BYTES, class_bytes);
    family_up(pool, &parts[FAMILY_CACHED_BLOCKS], own_front,
              FAMILY_CACHED_BLOCKS, 1);
}

static inline void count_cached_down(curdi_pool *pool, family_part *parts,
                                     size_t class_bytes)
{
    family_down(pool, &parts[FAMILY_CACHED_BYTES], FAMILY_CACHED_BYTES,
                class_bytes);
    family_down(pool, &parts[FAMILY_CACHED_BLOCKS], FAMILY_CACHED_BLOCKS, 1);
}

/* A block out of the front (a hit) and into it, counted in its moves by
 * its owner. The live families rise on a hit, the cached ones on a
 * release (their changes are the live ones' negatives); a change past a
 * quantum folds the front into the pool's levels; the estimate for the
 * peak adds the owner's shard's unflushed change, so that one thread's
 * level is exact. */
static inline bool past_quantum(int64_t delta, int64_t quantum)
{
    return delta >= quantum || delta <= -quantum;
}

static inline __attribute__((always_inline)) void
front_count(curdi_pool *pool, pool_front *front, const pool_shard *own,
            size_t class_bytes, size_t byte_len, bool out)
{
    front_moves *moves = &front->moves;
    front->unfolded = true;
    if (out) {
        moves->out_blocks += 1;
        moves->out_bytes += class_bytes;
        moves->out_requested += byte_len;
    } else {
        moves->in_blocks += 1;
        moves->in_bytes += class_bytes;
        moves->in_requested += byte_len;
    }
    int64_t live_bytes = front_delta(front, FAMILY_LIVE_BYTES);
    int64_t live_blocks = front_delta(front, FAMILY_LIVE_BLOCKS);
    int64_t requested = front_delta(front, FAMILY_REQUESTED_BYTES);
    if (past_quantum(live_bytes, BYTES_QUANTUM) ||
        past_quantum(live_blocks, BLOCKS_QUANTUM) ||
        past_quantum(requested, BYTES_QUANTUM)) {
        front_fold(pool, front);
        live_bytes = live_blocks = requested = 0;
    }
    const family_part *f = own->families;
    if (out) {
        peak_check(pool, FAMILY_LIVE_BYTES,
                   pool_level(pool, FAMILY_LIVE_BYTES) + live_bytes +
                       delta_of(&f[FAMILY_LIVE_BYTES]));
        peak_check(pool, FAMILY_LIVE_BLOCKS,
                   pool_level(pool, FAMILY_LIVE_BLOCKS) + live_blocks +
                       delta_of(&f[FAMILY_LIVE_BLOCKS]));
        peak_check(pool, FAMILY_REQUESTED_BYTES,
                   pool_level(pool, FAMILY_REQUESTED_BYTES) + requested +
                       delta_of(&f[FAMILY_REQUESTED_BYTES]));
    } else {
        peak_check(pool, FAMILY_CACHED_BYTES,
                   pool_level(pool, FAMILY_CACHED_BYTES) - live_bytes +
                       delta_of(&f[FAMILY_CACHED_BYTES]));
        peak_check(pool, FAMILY_CACHED_BLOCKS,
                   pool_level(pool, FAMILY_CACHED_BLOCKS) - live_blocks +
                       delta_of(&f[FAMILY_CACHED_BLOCKS]));
    }
}

/* Room in a front's moves for one more: a front whose share is full only
 * sends its owner to the shard. */
static inline bool front_room(const front_moves *moves, size_t class_bytes,
                              size_t byte_len)
{
    uint64_t any = moves->out_blocks | moves->out_bytes |
                   moves->out_requested | moves->in_blocks | moves->in_bytes |
                   moves->in_requested | class_bytes | byte_len;
    return any <= FRONT_COUNTER_MAX / 2u;
}

/* Shares stay far below their cap in any real run. When every value and
 * amount an operation checks is below half the cap, every sum fits, and one
 * test of their bitwise OR says so (about 30 instructions fewer per cache
 * hit than the checks one by one, which decide the rare rest). The same
 * checks serve a shard (cap SHARD_COUNTER_MAX) and a front
 * (FRONT_COUNTER_MAX). */
static inline bool share_room(uint64_t value, uint64_t amount, uint64_t cap)
{
    return amount <= cap && value <= cap - amount;
}

/* Room in a part array's counters (and its hits) for an acquire (a hit
 * also takes the block out of the cache). */
static inline bool room_for_acquire(const family_part *f, uint64_t hits,
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
    if (!share_room(f[FAMILY_LIVE_BYTES].allocated, class_bytes, cap) ||
        !share_room(f[FAMILY_REQUESTED_BYTES].allocated, byte_len, cap) ||
        !share_room(f[FAMILY_LIVE_BLOCKS].allocated, 1, cap))
        return false;
    return !hit || (share_room(f[FAMILY_CACHED_BYTES].freed, class_bytes,
                               cap) &&
                    share_room(f[FAMILY_CACHED_BLOCKS].freed, 1, cap) &&
                    share_room(hits, 1, cap));
}

static bool room_for_cache(const family_part *f, uint64_t cap,
                           size_t class_bytes)
{
    return share_room(f[FAMILY_CACHED_BYTES].allocated, class_bytes, cap) &&
           share_room(f[FAMILY_CACHED_BLOCKS].allocated, 1, cap);
}

static inline bool room_for_release(const family_part *f, uint64_t cap,
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
    if (!share_room(f[FAMILY_LIVE_BYTES].freed, class_bytes, cap) ||
        !share_room(f[FAMILY_REQUESTED_BYTES].freed, byte_len, cap) ||
        !share_room(f[FAMILY_LIVE_BLOCKS].freed, 1, cap))
        return false;
    return !cache || room_for_cache(f, cap, class_bytes);
}

static curd_status fail_counters_full(const curdi_pool *pool, const char *op)
{
    return curdi_fail(CURD_E_OVERFLOW,
                      "The %s pool cannot count this %s: a cumulative "
                      "statistic would pass its limit (2^64 / %u per thread "
                      "shard, or 2^64 - 2^62 for the upstream counters). "
                      "Fix: call curd_device_stats_reset() to restart the "
                      "cumulative counters.",
                      pool->name, op, SHARD_COUNT);
}

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
    return true;
}

/* Gives back a lease's unused part beyond keep_unused bytes; returns what
 * it gave. */
static uint64_t lease_give_back(curdi_pool *pool, uint64_t *lease_bytes,
                                uint64_t cached, uint64_t keep_unused)
{
    uint64_t unused = *lease_bytes - cached;
    if (unused <= keep_unused)
        return 0;
    uint64_t give = unused - keep_unused;
    *lease_bytes -= give;
    atomic_fetch_add_explicit(&pool->lease_free, give, memory_order_relaxed);
    return give;
}

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
 * Fronts: a thread's own blocks, taken and given without a lock
 * ---------------------------------------------------------------------- */
/* The calling thread's front in this pool when it owns the fronts of its
 * shard index, else NULL. */
static inline pool_front *owned_front(curdi_pool *pool, unsigned index)
{
    return thread_front == FRONT_OWNED ? &pool->shards[index].front : NULL;
}

/* The front beside the caller's own shard when the caller owns it and it
 * has a level change not yet folded (what family_up must add), else NULL. */
static inline const pool_front *unfolded_front_of(const pool_shard *own)
{
    return thread_front == FRONT_OWNED && own->front.unfolded ? &own->front
                                                              : NULL;
}

/* The owner's way in: a plain store and a plain load, no locked
 * instruction and no fence. fronts_revoke makes that safe: it stores
 * `revoked`, runs a barrier on every thread of the process, then waits for
 * `busy` to drop, so either the owner's load sees `revoked` (and it leaves
 * by the shard's lock) or its store of `busy` is seen (and the revoker
 * waits for it). The release store on leaving, and the acquire loads on
 * either side, order the front's contents between owner and revoker. */
static inline bool front_enter(pool_front *front)
{
    atomic_store_explicit(&front->busy, true, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(
            !atomic_load_explicit(&front->revoked, memory_order_acquire),
            true))
        return true;
    atomic_store_explicit(&front->busy, false, memory_order_release);
    return false;
}

static inline void front_leave(pool_front *front)
{
    atomic_store_explicit(&front->busy, false, memory_order_release);
}

/* Takes every active front from its owner (every shard locked, so no owner
 * is activating one or taking its own by the lock); fronts_restore gives
 * them back. Costs a system call (about a microsecond) when a front has
 * been used since the last revoke, nothing otherwise. */
static void fronts_revoke(curdi_pool *pool)
{
    if (!atomic_load_explicit(&pool->fronts_active, memory_order_relaxed))
        return;
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        if (pool->shards[i].front.active)
            atomic_store_explicit(&pool->shards[i].front.revoked, true,
                                  memory_order_relaxed);
    barrier_everywhere();
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_front *front = &pool->shards[i].front;
        while (front->active &&
               atomic_load_explicit(&front->busy, memory_order_acquire))
            sched_yield(); /* its owner is inside, or was preempted there */
    }
}

static void fronts_restore(curdi_pool *pool)
{
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        atomic_store_explicit(&pool->shards[i].front.revoked, false,
                              memory_order_release);
}

/* The owner's first use of its front since it came (its shard locked):
 * from now on revokes include it. */
static void front_activate(curdi_pool *pool, pool_front *front)
{
    if (!front->active) {
        front->active = true;
        atomic_store(&pool->fronts_active, true);
    }
}

static inline pool_block **front_top(pool_front *front, unsigned class_index)
{
    return &front->slots[class_index * FRONT_DEPTH +
                         front->counts[class_index] - 1u];
}

/* Moves every block of the front onto its shard's stacks, with their
 * lease, and gives back the rest of the front's lease (the shard locked,
 * and the front revoked or owned by the caller). Counts nothing: the
 * blocks stay cached, and each part keeps its own history. */
static void front_drain(curdi_pool *pool, pool_shard *shard)
{
    pool_front *front = &shard->front;
    for (unsigned c = 0; c < pool->hot_count; c++) {
        while (front->counts[c] != 0) {
            pool_block *block = *front_top(front, c);
            front->counts[c]--;
            front->cached_bytes -= block->class_bytes;
            front->lease_bytes -= block->class_bytes;
            shard->lease_bytes += block->class_bytes;
            stack_push(shard, block);
        }
    }
    lease_give_back(pool, &front->lease_bytes, 0, 0);
}

/* Puts a released block on top of the caller's own front (its shard
 * locked, the block's lease covered by the shard's), the front's oldest
 * block of the class going down to the shard's stack when the front is
 * full: for one thread the front and the stack stay one LIFO, so the
 * block it gets back, and the order a trim frees them in, are what they
 * were without fronts. Leases move with the blocks. */
static void front_push_locked(pool_shard *shard, pool_front *front,
                              pool_block *block)
{
    unsigned class_index = block->class_index;
    pool_block **slots = &front->slots[class_index * FRONT_DEPTH];
    if (front->counts[class_index] == FRONT_DEPTH) {
        pool_block *oldest = slots[0];
        memmove(slots, slots + 1, (FRONT_DEPTH - 1u) * sizeof *slots);
        front->counts[class_index]--;
        front->cached_bytes -= oldest->class_bytes;
        front->lease_bytes -= oldest->class_bytes;
        shard->lease_bytes += oldest->class_bytes;
        stack_push(shard, oldest);
    }
    shard->lease_bytes -= block->class_bytes;
    front->lease_bytes += block->class_bytes;
    slots[front->counts[class_index]++] = block;
    front->cached_bytes += block->class_bytes;
}

/* An exiting thread's fronts go back to their shards in every pool. */
static void fronts_give_back(unsigned index)
{
    pthread_mutex_lock(&registry_lock);
    for (curdi_pool *pool = registry_first; pool != NULL;
         pool = pool->registry_next) {
        pool_shard *shard = &pool->shards[index];
        shard_lock(shard);
        front_drain(pool, shard);
        shard->front.active = false;
        shard_unlock(shard);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ------------------------------------------------------------------------
 * Records and tokens
 * ---------------------------------------------------------------------- */
static inline uint32_t state_of(uint32_t generation, enum block_kind kind)
{
    return generation << 8 | (uint32_t)kind;
}

/* A record for a new upstream block: a spare one (its index kept), else a
 * new one with the next index, else (past DIRECTORY_MAX - 1 records) one
 * without an index, whose block is handed out without a token. NULL when
 * host memory is short. */
static pool_block *record_new(curdi_pool *pool)
{
    pthread_mutex_lock(&pool->records_lock);
    pool_block *block = pool->spare_records;
    if (block != NULL) {
        pool->spare_records = block->next;
        pthread_mutex_unlock(&pool->records_lock);
        block->next = NULL;
        /* Its generation goes on, so that no earlier token names it. */
        uint32_t generation = atomic_load(&block->state) >> 8;
        atomic_store_explicit(&block->state, state_of(generation, BLOCK_IDLE),
                              memory_order_relaxed);
        return block;
    }
    /* A cache line of its own: a record is written on every acquire and
     * release, by whichever thread holds it now, and records allocated one
     * after the other by one thread may be used by different threads. */
    block = aligned_alloc(CACHE_LINE, CACHE_LINE);
    if (block == NULL) {
        pthread_mutex_unlock(&pool->records_lock);
        return NULL;
    }
    memset(block, 0, sizeof *block);
    atomic_init(&block->state, state_of(0, BLOCK_IDLE));
    uint32_t index = pool->records_made + 1u;
    if (index < DIRECTORY_MAX) {
        _Atomic(pool_block *) *chunk = atomic_load_explicit(
            &pool->directory[index >> DIRECTORY_CHUNK_SHIFT],
            memory_order_relaxed);
        if (chunk == NULL) {
            chunk = calloc(DIRECTORY_CHUNK, sizeof *chunk);
            if (chunk != NULL)
                atomic_store_explicit(
                    &pool->directory[index >> DIRECTORY_CHUNK_SHIFT], chunk,
                    memory_order_release);
        }
        if (chunk != NULL) {
            block->index = index;
            pool->records_made = index;
            atomic_store_explicit(&chunk[index & (DIRECTORY_CHUNK - 1u)],
                                  block, memory_order_release);
        }
    }
    pthread_mutex_unlock(&pool->records_lock);
    return block;
}

/* The record of a block gone upstream: kept for its index, or freed when
 * it has none. */
static void record_retire(curdi_pool *pool, pool_block *block)
{
    if (block->index == 0) {
        free(block);
        return;
    }
    uint32_t generation = atomic_load(&block->state) >> 8;
    atomic_store_explicit(&block->state, state_of(generation, BLOCK_SPARE),
                          memory_order_relaxed);
    pthread_mutex_lock(&pool->records_lock);
    block->next = pool->spare_records;
    pool->spare_records = block;
    pthread_mutex_unlock(&pool->records_lock);
}

/* The record a token's index names, or NULL (no such index). */
static inline pool_block *directory_record(curdi_pool *pool, uint32_t index)
{
    if (index == 0 || index >= DIRECTORY_MAX)
        return NULL;
    _Atomic(pool_block *) *chunk =
        atomic_load_explicit(&pool->directory[index >> DIRECTORY_CHUNK_SHIFT],
                             memory_order_acquire);
    if (chunk == NULL)
        return NULL;
    return atomic_load_explicit(&chunk[index & (DIRECTORY_CHUNK - 1u)],
                                memory_order_acquire);
}

/* Hands a block out with a token (it goes in no table): a new generation,
 * published with the sizes it is handed out with. */
static inline uint32_t hand_out(pool_block *block, size_t byte_len)
{
    block->byte_len = byte_len;
    uint32_t generation =
        ((atomic_load_explicit(&block->state, memory_order_relaxed) >> 8) +
         1u) & ((1u << TOKEN_GENERATION_BITS) - 1u);
    atomic_store_explicit(&block->state, state_of(generation, BLOCK_HELD),
                          memory_order_release);
    return block->index << TOKEN_GENERATION_BITS | generation;
}

/* ------------------------------------------------------------------------
 * Upstream calls, timed and counted
 * ---------------------------------------------------------------------- */
static curd_status upstream_alloc(curdi_pool *pool, size_t class_bytes,
                                  uint64_t *out_address)
{
    uint64_t start = curdi_clock_ns();
    curd_status status =
        pool->upstream.alloc(pool->upstream.context, class_bytes, out_address);
    global_count(&pool->upstream_ns, curdi_clock_ns() - start);
    if (status == CURD_OK)
        global_count(&pool->upstream_allocs, 1);
    return status;
}

/* Frees the block upstream and its record. */
static void upstream_free(curdi_pool *pool, pool_block *block)
{
    uint64_t start = curdi_clock_ns();
    curd_status status = pool->upstream.free(
        pool->upstream.context, block->address, block->class_bytes);
    global_count(&pool->upstream_ns, curdi_clock_ns() - start);
    global_count(&pool->upstream_frees, 1);
    atomic_fetch_sub_explicit(&pool->reserved_bytes, block->class_bytes,
                              memory_order_relaxed);
    if (status != CURD_OK)
        curdi_trace("the %s pool's upstream failed to free %zu bytes at 0x%" PRIx64
                    " (%s); the block is gone",
                    pool->name, block->class_bytes, block->address,
                    curd_status_name(status));
    record_retire(pool, block);
}

static bool reserved_add(curdi_pool *pool, uint64_t bytes)
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
 * room to count the whole trim: the trim is planned and checked first, so
 * it never stops half way. */
static curd_status trim_cache(curdi_pool *pool, bool need, uint64_t value,
                              uint64_t *out_freed)
{
    *out_freed = 0;
    if (!global_room(pool))
        return fail_counters_full(pool, "trim");
    lock_all(pool);
    fronts_revoke(pool);
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
        if (!share_room(f[FAMILY_CACHED_BYTES].freed, plan.bytes[i],
                        SHARD_COUNTER_MAX) ||
            !share_room(f[FAMILY_CACHED_BLOCKS].freed, plan.blocks[i],
                        SHARD_COUNTER_MAX)) {
            fronts_restore(pool);
            unlock_all(pool);
            return fail_counters_full(pool, "trim");
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
    atomic_fetch_add(&pool->busy, 1u);
    fronts_restore(pool);
    unlock_all(pool);
    while (detached != NULL) {
        pool_block *next = detached->next;
        upstream_free(pool, detached);
        detached = next;
    }
    atomic_fetch_sub(&pool->busy, 1u);
    *out_freed = freed;
    return CURD_OK;
}

curd_status curdi_pool_trim_checked(curdi_pool *pool, uint64_t keep_bytes,
                                    uint64_t *out_freed_bytes)
{
    uint64_t freed = 0;
    curd_status status =
        pool != NULL ? trim_cache(pool, false, keep_bytes, &freed) : CURD_OK;
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
    /* Every record with an index (spare or not: destroy has sent every
     * block upstream) and the directory. */
    for (unsigned c = 0; pool->directory != NULL && c < DIRECTORY_CHUNKS;
         c++) {
        _Atomic(pool_block *) *chunk = atomic_load(&pool->directory[c]);
        for (unsigned j = 0; chunk != NULL && j < DIRECTORY_CHUNK; j++)
            free(atomic_load(&chunk[j]));
        free(chunk);
    }
    free(pool->directory);
    pthread_mutex_destroy(&pool->records_lock);
    free(pool->slots);
    free(pool);
}

curd_status curdi_pool_create(const curdi_upstream *upstream,
                              const curdi_pool_config *config,
                              curdi_pool **out_pool)
{
    if (out_pool == NULL || upstream == NULL || config == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_pool_create: %s is NULL. Fix: pass an "
                          "upstream, a configuration and an out pointer.",
                          out_pool == NULL   ? "out_pool"
                          : upstream == NULL ? "upstream"
                                             : "config");
    if (upstream->alloc == NULL || upstream->free == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_pool_create: the upstream has no %s "
                          "function. Fix: give the upstream both alloc and "
                          "free.",
                          upstream->alloc == NULL ? "alloc" : "free");
    const char *name = config->name != NULL ? config->name : "memory";
    /* sizeof is a multiple of the struct's alignment (the shards'). */
    curdi_pool *pool = aligned_alloc(_Alignof(curdi_pool), sizeof *pool);
    if (pool != NULL)
        memset(pool, 0, sizeof *pool);
    unsigned class_count = curdi_size_class_count();
    uint32_t *slots = calloc(class_count, sizeof *slots);
    _Atomic(pool_block *) *_Atomic *directory =
        calloc(DIRECTORY_CHUNKS, sizeof *directory);
    if (pool == NULL || slots == NULL || directory == NULL ||
        pthread_mutex_init(&pool->records_lock, NULL) != 0) {
        free(pool);
        free(slots);
        free(directory);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The %s pool's %zu bytes of host bookkeeping could "
                          "not be allocated. Fix: free host memory and try "
                          "again.",
                          name, sizeof *pool);
    }
    pool->directory = directory;
    for (unsigned c = 0; c < DIRECTORY_CHUNKS; c++)
        atomic_init(&directory[c], NULL);
    atomic_init(&pool->fronts_active, false);
    pool->hot_count = 0;
    while (pool->hot_count < class_count &&
           curdi_size_class_bytes(pool->hot_count) <= FRONT_CLASS_MAX)
        pool->hot_count++;
    for (size_t step = 0; step < FRONT_CLASS_MAX / HOT_STEP; step++) {
        size_t class_bytes = 0;
        unsigned class_index = 0;
        /* Every byte_len of the step has the class of its last byte. */
        (void)curdi_size_class((step + 1u) * HOT_STEP, &class_bytes,
                               &class_index);
        pool->hot_class[step] = (uint8_t)class_index;
        pool->hot_class_bytes[step] = (uint32_t)class_bytes;
    }
    pool->upstream = *upstream;
    pool->name = name;
    pool->cache_budget_bytes = config->cache_budget_bytes;
    pool->live_limit_bytes = config->live_limit_bytes;
    pool->upstream_total_bytes = config->upstream_total_bytes;
    pool->relieve = config->relieve;
    pool->relieve_context = config->relieve_context;
    pool->class_count = class_count;
    pool->slots = slots;
    for (unsigned i = 0; i < class_count; i++) {
        uint64_t fit = config->cache_budget_bytes / curdi_size_class_bytes(i);
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
    pthread_mutex_lock(&registry_lock);
    pool->registry_next = registry_first;
    if (registry_first != NULL)
        registry_first->registry_prev = pool;
    registry_first = pool;
    pthread_mutex_unlock(&registry_lock);
    *out_pool = pool;
    return CURD_OK;
}

void curdi_pool_destroy(curdi_pool *pool)
{
    if (pool == NULL)
        return;
    atomic_store(&pool->closing, true);
    /* Off the registry first: no exiting thread touches the pool after. */
    pthread_mutex_lock(&registry_lock);
    if (pool->registry_prev != NULL)
        pool->registry_prev->registry_next = pool->registry_next;
    else
        registry_first = pool->registry_next;
    if (pool->registry_next != NULL)
        pool->registry_next->registry_prev = pool->registry_prev;
    pthread_mutex_unlock(&registry_lock);
    pool_block *detached = NULL;
    lock_all(pool);
    /* Other threads' fronts too: revoked, they are never given back (their
     * owners' later calls on this pool would be use after free anyway). */
    fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_shard *shard = &pool->shards[i];
        front_drain(pool, shard);
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
    for (unsigned c = 0; c < DIRECTORY_CHUNKS; c++) {
        _Atomic(pool_block *) *chunk = atomic_load(&pool->directory[c]);
        for (unsigned j = 0; chunk != NULL && j < DIRECTORY_CHUNK; j++) {
            pool_block *block = atomic_load(&chunk[j]);
            if (block != NULL &&
                (atomic_load(&block->state) & 0xffu) == BLOCK_HELD) {
                block->next = detached;
                detached = block;
            }
        }
    }
    unlock_all(pool);
    /* A slow path between its locks either saw `closing` (and frees its
     * block itself) or had put the block where the sweep above found it;
     * wait for it to stop touching the pool. */
    while (atomic_load(&pool->busy) != 0)
        sched_yield();
    while (detached != NULL) {
        pool_block *next = detached->next;
        upstream_free(pool, detached);
        detached = next;
    }
    free_shards(pool, SHARD_COUNT);
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
    curdi_pool_stats(pool, &stats);
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
    curd_status status = upstream_alloc(pool, class_bytes, out_address);
    if (status != CURD_E_OUT_OF_MEMORY)
        return status;
    /* (a) just enough of this pool's cache */
    /* Trimming is best effort on this ladder: a trim whose counters are full
     * frees nothing, and the ladder goes on to its next step. */
    uint64_t freed = 0;
    (void)trim_cache(pool, true, class_bytes, &freed);
    if (freed > 0) {
        global_count(&pool->oom_retries, 1);
        status = upstream_alloc(pool, class_bytes, out_address);
        if (status != CURD_E_OUT_OF_MEMORY)
            return status;
    }
    if (pool->relieve != NULL) {
        /* (b) the application's reclaim callback; what it releases may land
         * in this very cache, so free that much again before retrying. */
        if (pool->relieve(pool->relieve_context, class_bytes,
                          CURDI_RELIEF_RECLAIM) > 0) {
            (void)trim_cache(pool, true, class_bytes, &freed);
            global_count(&pool->oom_retries, 1);
            status = upstream_alloc(pool, class_bytes, out_address);
            if (status != CURD_E_OUT_OF_MEMORY)
                return status;
        }
        /* (c) every cached block of every pool of the device */
        if (pool->relieve(pool->relieve_context, class_bytes,
                          CURDI_RELIEF_TRIM_ALL) > 0) {
            global_count(&pool->oom_retries, 1);
            status = upstream_alloc(pool, class_bytes, out_address);
            if (status != CURD_E_OUT_OF_MEMORY)
                return status;
        }
    }
    global_count(&pool->oom_failures, 1);
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
    if (!global_room(pool))
        return fail_counters_full(pool, "acquire");
    pool_block *block = record_new(pool);
    if (block == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The %s pool could not allocate the %zu-byte host "
                          "record of a new block. Fix: free host memory and "
                          "try again.",
                          pool->name, sizeof *block);
    if (!reserved_add(pool, class_bytes)) {
        record_retire(pool, block);
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
        record_retire(pool, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return fail_closing(pool);
    }
    global_count(&pool->cache_misses, 1);
    uint64_t address = 0;
    curd_status status =
        alloc_with_ladder(pool, class_bytes, byte_len, &address);
    if (status != CURD_OK) {
        atomic_fetch_sub_explicit(&pool->reserved_bytes, class_bytes,
                                  memory_order_relaxed);
        record_retire(pool, block);
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
    if (closing || !room_for_acquire(own->families, own->cache_hits,
                                     SHARD_COUNTER_MAX, class_bytes,
                                     byte_len, false)) {
        /* Only another thread sharing this shard can have used up the room
         * checked before the upstream call. */
        shard_unlock(own);
        upstream_free(pool, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return closing ? fail_closing(pool)
                       : fail_counters_full(pool, "acquire");
    }
    if (!tokened && !table_insert(own, block)) {
        shard_unlock(own);
        upstream_free(pool, block);
        atomic_fetch_sub(&pool->busy, 1u);
        return fail_live_table(pool);
    }
    count_live_up(pool, own->families, unfolded_front_of(own), class_bytes,
                  byte_len);
    uint32_t token = tokened ? hand_out(block, byte_len) : 0;
    shard_unlock(own);
    atomic_fetch_sub(&pool->busy, 1u);
    *out_address = address;
    if (out_token != NULL)
        *out_token = token;
    return CURD_OK;
}

/* A hit in the calling thread's own front: no lock, no table. False (with
 * nothing changed) when the front has no block of the class, is revoked,
 * or its counters are full. */
static inline __attribute__((always_inline)) bool
acquire_from_front(curdi_pool *pool, pool_shard *own,
                                      pool_front *front, size_t byte_len,
                                      size_t class_bytes,
                                      unsigned class_index,
                                      uint64_t *out_address,
                                      uint32_t *out_token)
{
    if (!front_enter(front))
        return false;
    if (front->counts[class_index] == 0 ||
        !front_room(&front->moves, class_bytes, byte_len)) {
        front_leave(front);
        return false;
    }
    pool_block *block = *front_top(front, class_index);
    front->counts[class_index]--;
    front->cached_bytes -= class_bytes;
    front_count(pool, front, own, class_bytes, byte_len, true);
    if (front->lease_bytes - front->cached_bytes > 2u * pool->lease_slack)
        lease_give_back(pool, &front->lease_bytes, front->cached_bytes,
                        pool->lease_slack);
    *out_address = block->address;
    *out_token = hand_out(block, byte_len); /* fronts hold indexed blocks */
    front_leave(front);
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
    curd_status status = curdi_size_class(byte_len, &class_bytes, &class_index);
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
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The %s pool was asked for %zu bytes (a %zu-byte "
                          "block), more than its upstream has in all (%" PRIu64
                          " bytes): no trim or reclaim could make room, so "
                          "none was tried and nothing changed. Fix: request "
                          "at most that much, or split the data into parts.",
                          pool->name, byte_len, class_bytes,
                          pool->upstream_total_bytes);
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
        if (!room_for_acquire(own->families, own->cache_hits,
                              SHARD_COUNTER_MAX, class_bytes, byte_len,
                              true)) {
            shard_unlock(own);
            live_unreserve(pool, class_bytes);
            return fail_counters_full(pool, "acquire");
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
        count_live_up(pool, own->families, unfolded_front_of(own), class_bytes,
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
    bool room = room_for_acquire(own->families, own->cache_hits,
                                 SHARD_COUNTER_MAX, class_bytes, byte_len,
                                 false);
    shard_unlock(own);
    if (!room) {
        live_unreserve(pool, class_bytes);
        return fail_counters_full(pool, "acquire");
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

curd_status curdi_pool_acquire_block(curdi_pool *pool, size_t byte_len,
                                     uint64_t *out_address,
                                     size_t *out_class_bytes,
                                     uint32_t *out_token)
{
    /* The hit in the caller's own front, the only lock-free one, with the
     * fewest checks: a request of 1 to FRONT_CLASS_MAX bytes has a hot
     * class, which the table gives; a block in the front proves the class
     * fits the upstream; without a live limit nothing is reserved (with
     * one, the whole path below takes the front's block by the lock).
     * Everything else takes the whole path. */
    if (pool != NULL && out_address != NULL && out_class_bytes != NULL &&
        out_token != NULL && byte_len - 1u < FRONT_CLASS_MAX &&
        thread_front == FRONT_OWNED && pool->live_limit_bytes == 0 &&
        !atomic_load_explicit(&pool->closing, memory_order_relaxed)) {
        unsigned own_index = thread_shard - 1u;
        pool_front *front = &pool->shards[own_index].front;
        size_t step = (byte_len - 1u) / HOT_STEP;
        unsigned class_index = pool->hot_class[step];
        size_t class_bytes = pool->hot_class_bytes[step];
        if (front->active &&
            acquire_from_front(pool, &pool->shards[own_index], front,
                               byte_len, class_bytes, class_index,
                               out_address, out_token)) {
            *out_class_bytes = class_bytes;
            return CURD_OK;
        }
    }
    uint32_t token = 0;
    curd_status status =
        acquire(pool, byte_len, out_address, out_class_bytes, &token);
    if (status == CURD_OK && out_token != NULL)
        *out_token = token;
    return status;
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
        front_push_locked(shard, own_front, block);
    else
        stack_push(shard, block);
    count_cached_up(pool, shard->families,
                    own_front != NULL && own_front->unfolded ? own_front
                                                             : NULL,
                    block->class_bytes);
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
    if (!room_for_release(shard->families, SHARD_COUNTER_MAX, class_bytes,
                          block->byte_len, cache) ||
        (!cache && !global_room(pool))) {
        shard_unlock(shard);
        return fail_counters_full(pool, "release");
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
        if (cacheable(pool, shard, block, in_front) &&
            room_for_cache(shard->families, SHARD_COUNTER_MAX, class_bytes) &&
            lease_cover(pool, &shard->lease_bytes, shard->cached_bytes,
                        class_bytes)) {
            cache_locked(pool, shard, block, own_front, at == NULL);
            shard_unlock(shard);
            atomic_fetch_sub(&pool->busy, 1u);
            return CURD_OK;
        }
        shard_unlock(shard);
    }
    upstream_free(pool, block);
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
        !front_room(&front->moves, class_bytes, block->byte_len) ||
        !lease_cover(pool, &front->lease_bytes, front->cached_bytes,
                     class_bytes)) {
        front_leave(front);
        return false;
    }
    front->counts[class_index] = (uint8_t)(count + 1u);
    *front_top(front, class_index) = block;
    front->cached_bytes += class_bytes;
    front_count(pool, front, own, class_bytes, block->byte_len, false);
    live_unreserve(pool, class_bytes);
    front_leave(front);
    return true;
}

static curd_status fail_stale_token(const curdi_pool *pool, uint64_t address,
                                    size_t class_bytes, size_t byte_len,
                                    uint32_t token)
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

/* A release by token: the directory names the record, and one atomic
 * exchange of its state claims it (of two releases of one block at once,
 * one wins). */
static curd_status release_token(curdi_pool *pool, uint64_t address,
                                 size_t class_bytes, size_t byte_len,
                                 uint32_t token)
{
    pool_block *block =
        directory_record(pool, token >> TOKEN_GENERATION_BITS);
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
    unsigned own_index = own_shard_index();
    pool_shard *own = &pool->shards[own_index];
    pool_front *front = owned_front(pool, own_index);
    bool hot = block->class_index < pool->hot_count;
    if (hot && front != NULL && front->active &&
        release_to_front(pool, own, front, block))
        return CURD_OK;
    shard_lock(own);
    if (hot && front != NULL)
        front_activate(pool, front);
    curd_status status = release_locked(pool, own, block, NULL, front);
    if (status != CURD_OK) /* nothing changed: it is still out */
        atomic_store_explicit(&block->state, state_of(generation, BLOCK_HELD),
                              memory_order_release);
    return status;
}

curd_status curdi_pool_release(curdi_pool *pool, uint64_t address)
{
    return release(pool, address, NULL);
}

curd_status curdi_pool_release_block(curdi_pool *pool, uint64_t address,
                                     size_t class_bytes, size_t byte_len,
                                     uint32_t token)
{
    if (pool != NULL && token != 0)
        return release_token(pool, address, class_bytes, byte_len, token);
    const pool_block stated = {.class_bytes = class_bytes,
                               .byte_len = byte_len};
    return release(pool, address, &stated);
}

/* ------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------- */
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

void curdi_pool_stats(curdi_pool *pool, curd_pool_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (pool == NULL)
        return;
    /* Every thread's front is folded in: revoked, so its owner is out. */
    lock_all(pool);
    fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        front_fold(pool, &pool->shards[i].front);
    family_read(pool, FAMILY_LIVE_BYTES, &out->live_bytes);
    family_read(pool, FAMILY_CACHED_BYTES, &out->cached_bytes);
    family_read(pool, FAMILY_REQUESTED_BYTES, &out->requested_bytes);
    family_read(pool, FAMILY_LIVE_BLOCKS, &out->live_blocks);
    family_read(pool, FAMILY_CACHED_BLOCKS, &out->cached_blocks);
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        out->cache_hits +=
            pool->shards[i].cache_hits + pool->shards[i].front.moves.out_blocks;
    fronts_restore(pool);
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

void curdi_pool_stats_reset(curdi_pool *pool)
{
    if (pool == NULL)
        return;
    lock_all(pool);
    fronts_revoke(pool);
    for (unsigned i = 0; i < SHARD_COUNT; i++) {
        pool_front *front = &pool->shards[i].front;
        front_fold(pool, front);
        memset(&front->moves, 0, sizeof front->moves);
        memset(&front->folded, 0, sizeof front->folded);
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
    fronts_restore(pool);
    unlock_all(pool);
    atomic_store(&pool->upstream_allocs, 0);
    atomic_store(&pool->upstream_frees, 0);
    atomic_store(&pool->cache_misses, 0);
    atomic_store(&pool->oom_retries, 0);
    atomic_store(&pool->oom_failures, 0);
    atomic_store(&pool->upstream_ns, 0);
}
