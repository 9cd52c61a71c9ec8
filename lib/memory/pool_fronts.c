/* pool_fronts.c - a thread's own blocks in each pool, taken and given
 * back without a lock, and the threads that own them.
 *
 * Why a module of its own: a front's safety rests on one handshake between
 * its owner and everyone else (front_enter against fronts_revoke and the
 * process-wide barrier) and on one guarantee about threads (an exiting
 * thread's fronts go back through the registry before another thread may
 * own its index). Both are here, with the thread's shard index and front
 * ownership that they depend on; pool.c only calls them, and never writes
 * a front's flags itself. The pool's layout (pool_shards.h) holds the
 * fronts, because a front lives inside its shard.
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
 */
#include "memory/pool_fronts.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && __has_include(<linux/membarrier.h>)
#include <linux/membarrier.h>
#define HAVE_MEMBARRIER 1
#endif

/* ------------------------------------------------------------------------
 * Threads and shards
 * ---------------------------------------------------------------------- */
/* The calling thread's shard index + 1; 0 until its first pool call.
 * initial-exec: in libcurd.so the default model calls __tls_get_addr on
 * every access (each acquire and each release); 4 bytes of the static TLS
 * surplus that glibc keeps for dlopen'ed libraries avoid that. */
_Thread_local unsigned curdi_thread_shard
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
_Thread_local unsigned char curdi_thread_front
    __attribute__((tls_model("initial-exec")));
/* The owner of each index's fronts, if any. */
static atomic_bool front_owned[SHARD_COUNT];

/* Fronts need the asymmetric fence (curdi_pool_fronts_revoke); without it
 * they stay off and every call takes its shard's lock, as before. */
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
    if (curdi_thread_front == FRONT_OWNED) {
        /* Later calls of this thread (other destructors) take the shard's
         * lock; the next thread may own the fronts. */
        curdi_thread_front = FRONT_NONE;
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

unsigned curdi_pool_fronts_claim_shard_index(void)
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
    if (curdi_thread_front == FRONT_UNKNOWN) {
        curdi_thread_front =
            key_set && atomic_load(&fronts_on) &&
                    atomic_compare_exchange_strong(&front_owned[index],
                                                   &expected, true)
                ? FRONT_OWNED
                : FRONT_NONE;
    }
    curdi_thread_shard = index + 1u;
    return index;
}

/* Takes every active front from its owner (every shard locked, so no owner
 * is activating one or taking its own by the lock);
 * curdi_pool_fronts_restore gives them back. Costs a system call (about a
 * microsecond) when a front has been used since the last revoke, nothing
 * otherwise. */
void curdi_pool_fronts_revoke(curdi_pool *pool)
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

void curdi_pool_fronts_restore(curdi_pool *pool)
{
    for (unsigned i = 0; i < SHARD_COUNT; i++)
        atomic_store_explicit(&pool->shards[i].front.revoked, false,
                              memory_order_release);
}

/* Moves every block of the front onto its shard's stacks, with their
 * lease, and gives back the rest of the front's lease (the shard locked,
 * and the front revoked or owned by the caller). Counts nothing: the
 * blocks stay cached, and each part keeps its own history. */
void curdi_pool_fronts_drain(curdi_pool *pool, pool_shard *shard)
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
void curdi_pool_fronts_push_locked(pool_shard *shard, pool_front *front,
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

void curdi_pool_fronts_renew(pool_front *front)
{
    const front_moves *moves = &front->moves;
    uint64_t any = moves->out_blocks | moves->out_bytes |
                   moves->out_requested | moves->in_blocks | moves->in_bytes |
                   moves->in_requested;
    /* Below half the share less a spend: the spend cannot pass the half,
     * so the share is never passed. */
    if (any <= FRONT_COUNTER_MAX / 2u - (uint64_t)FRONT_SPEND)
        front->spend_headroom = FRONT_SPEND;
}

/* An exiting thread's fronts go back to their shards in every pool. */
static void fronts_give_back(unsigned index)
{
    pthread_mutex_lock(&registry_lock);
    for (curdi_pool *pool = registry_first; pool != NULL;
         pool = pool->registry_next) {
        pool_shard *shard = &pool->shards[index];
        shard_lock(shard);
        curdi_pool_fronts_drain(pool, shard);
        shard->front.active = false;
        front_headroom_close(&shard->front); /* the next owner looks first */
        shard_unlock(shard);
    }
    pthread_mutex_unlock(&registry_lock);
}

void curdi_pool_fronts_registry_join(curdi_pool *pool)
{
    pthread_mutex_lock(&registry_lock);
    pool->registry_next = registry_first;
    if (registry_first != NULL)
        registry_first->registry_prev = pool;
    registry_first = pool;
    pthread_mutex_unlock(&registry_lock);
}

void curdi_pool_fronts_registry_leave(curdi_pool *pool)
{
    pthread_mutex_lock(&registry_lock);
    if (pool->registry_prev != NULL)
        pool->registry_prev->registry_next = pool->registry_next;
    else
        registry_first = pool->registry_next;
    if (pool->registry_next != NULL)
        pool->registry_next->registry_prev = pool->registry_prev;
    pthread_mutex_unlock(&registry_lock);
}
