/* pool_fronts.h - a thread's fronts (pool_fronts.c says what they are):
 * the calling thread's shard index and whether it owns its fronts, the
 * owner's way in and out of a front, and what the pool does to every
 * front (revoke, restore, drain, push by the lock).
 *
 * The hit and the token release call the thread-locals and the inline
 * functions here on every operation, so those stay inline, as they were
 * when they were static in pool.c; everything that takes a lock or makes
 * a system call is in pool_fronts.c. Only the pool's modules include it. */
#ifndef CURD_LIB_MEMORY_POOL_FRONTS_H
#define CURD_LIB_MEMORY_POOL_FRONTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/pool_shards.h"

/* The calling thread's shard index + 1; 0 until its first pool call.
 * initial-exec: in libcurd.so the default model calls __tls_get_addr on
 * every access (each acquire and each release); 4 bytes of the static TLS
 * surplus that glibc keeps for dlopen'ed libraries avoid that. */
extern _Thread_local unsigned curdi_thread_shard
    __attribute__((tls_model("initial-exec")));

/* Whether the calling thread owns the front of its shard index in every
 * pool: FRONT_UNKNOWN until its first pool call; FRONT_NONE when another
 * thread owns them, fronts are off, or the thread is exiting. */
enum { FRONT_UNKNOWN, FRONT_OWNED, FRONT_NONE };
extern _Thread_local unsigned char curdi_thread_front
    __attribute__((tls_model("initial-exec")));

/* Takes the calling thread's shard index on its first pool call (and its
 * fronts, when no other thread owns them and fronts are on). */
unsigned curdi_pool_fronts_claim_shard_index(void);

static inline unsigned own_shard_index(void)
{
    unsigned index = curdi_thread_shard;
    if (__builtin_expect(index != 0, true))
        return index - 1u;
    return curdi_pool_fronts_claim_shard_index();
}

/* Every front of the pool taken from its owner and given back (trim,
 * stats, reset and destroy, with every shard locked). */
void curdi_pool_fronts_revoke(curdi_pool *pool);
void curdi_pool_fronts_restore(curdi_pool *pool);
/* Moves the shard's front's blocks onto its stacks (the shard locked). */
void curdi_pool_fronts_drain(curdi_pool *pool, pool_shard *shard);
/* Puts a released block on the caller's own front, its shard locked. */
void curdi_pool_fronts_push_locked(pool_shard *shard, pool_front *front,
                                   pool_block *block);
/* A pool joins the registry of pools that exiting threads give their
 * fronts back to as it is made, and leaves it before destroy frees
 * anything. */
void curdi_pool_fronts_registry_join(curdi_pool *pool);
void curdi_pool_fronts_registry_leave(curdi_pool *pool);

/* The calling thread's front in this pool when it owns the fronts of its
 * shard index, else NULL. */
static inline pool_front *owned_front(curdi_pool *pool, unsigned index)
{
    return curdi_thread_front == FRONT_OWNED ? &pool->shards[index].front
                                             : NULL;
}

/* The front beside the caller's own shard when the caller owns it, else
 * NULL: what the shard's counting must add to its estimates and tell of
 * its own moves (front_headroom_close). */
static inline pool_front *owner_front_of(pool_shard *own)
{
    return curdi_thread_front == FRONT_OWNED ? &own->front : NULL;
}

/* The owner's way in: a plain store and a plain load, no locked
 * instruction and no fence. curdi_pool_fronts_revoke makes that safe: it
 * stores `revoked`, runs a barrier on every thread of the process, then
 * waits for `busy` to drop, so either the owner's load sees `revoked`
 * (and it leaves by the shard's lock) or its store of `busy` is seen (and
 * the revoker waits for it). The release store on leaving, and the acquire loads on
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

/* The owner's first use of its front since it came (its shard locked):
 * from now on revokes include it. */
static inline void front_activate(curdi_pool *pool, pool_front *front)
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

/* Whether the front's counters may take a move of class_bytes without a
 * look: each move spends its class from spend_headroom, and once that is short
 * the owner goes by its shard's lock, which looks at the counters again
 * (front_renew_if_short). A front whose share is full only sends its owner
 * to the shard. */
static inline bool front_may_spend(const pool_front *front,
                                   size_t class_bytes)
{
    return front->spend_headroom >= (int64_t)class_bytes;
}

/* A new spend when the counters have headroom for it (else the spend stays
 * short, and the owner keeps to the shard until a reset). */
void curdi_pool_fronts_renew(pool_front *front);

/* By the owner, its shard locked. */
static inline void front_renew_if_short(pool_front *front)
{
    if (front->spend_headroom < (int64_t)FRONT_CLASS_MAX)
        curdi_pool_fronts_renew(front);
}

/* The pool's levels or peaks changed beside the front's owner (its own
 * shard counted a rise, a reset lowered the peaks, a new owner came): its
 * next move looks at the pool again. */
static inline void front_headroom_close(pool_front *front)
{
    for (unsigned r = 0; r < HEADROOM_COUNT; r++) {
        atomic_store_explicit(&front->rise_headroom[r], 0,
                              memory_order_relaxed);
        front->headroom_band[r] = 0;
    }
}

#endif
