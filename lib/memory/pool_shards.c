/* pool_shards.c - the slow wait of a shard's lock (pool_shards.h has the
 * pool's layout and the inline shard operations).
 *
 * A shard lock is one flag: taking it is one atomic exchange, giving it
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
#include "memory/pool_shards.h"

#include <sched.h>

#include "base/clock.h"

void curdi_pool_shards_lock_wait(pool_shard *shard)
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
