/* test-pool-threads.c - many threads on one pool over a host upstream.
 *
 * Each worker acquires and releases blocks of a few classes, hands some to
 * other threads to release, and stamps every block it holds with its own
 * tag (checked again before it lets go), so two threads holding one block
 * at once is caught. Afterwards every statistic must add up exactly to
 * what the workers counted. `make check-tsan` runs this program under
 * ThreadSanitizer. Each worker draws from its own GRand, seeded from the
 * test's seed (g_test_rand_* is not thread-safe). */
#include <glib.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/checked.h"
#include "memory/pool.h"
#include "pool-model.h"
#include "support/curd-test.h"

#define THREADS 8
#define HELD_MAX 24
#define HANDOFF_MAX 256

static const size_t sizes[] = {64, 256, 1000, 4096, 4096, 5000, 65536, 200000};

/* Blocks handed from one thread to another to release. */
typedef struct handoff {
    pthread_mutex_t lock;
    uint64_t addresses[HANDOFF_MAX];
    uint64_t tags[HANDOFF_MAX];
    size_t count;
} handoff;

typedef struct shared {
    curdi_pool *pool;
    handoff handoff;
    unsigned operations;
    bool check_limit;
    uint64_t limit;
    atomic_uint_fast64_t held_bytes; /* by the workers' own count */
    atomic_uint_fast64_t held_max;
} shared;

typedef struct worker {
    shared *shared;
    pthread_t thread;
    guint32 seed;
    uint64_t tag;
    uint64_t acquires, releases, hits_seen;
    uint64_t class_bytes_acquired, requested_acquired;
    uint64_t budget_failures, memory_failures;
    uint64_t addresses[HELD_MAX];
    size_t classes[HELD_MAX];
    size_t held;
} worker;

/* The first 8 bytes of a held block carry its holder's tag. */
static void stamp(uint64_t address, uint64_t tag)
{
    memcpy((void *)(uintptr_t)address, &tag, sizeof tag);
}

static void check_stamp(uint64_t address, uint64_t tag)
{
    uint64_t found;
    memcpy(&found, (void *)(uintptr_t)address, sizeof found);
    if (found != tag)
        g_error("block 0x%" PRIx64 " carries tag %" PRIx64 ", not its "
                "holder's %" PRIx64 ": two holders at once",
                address, found, tag);
}

static void raise_max(atomic_uint_fast64_t *max, uint64_t value)
{
    uint64_t seen = atomic_load(max);
    while (seen < value && !atomic_compare_exchange_weak(max, &seen, value)) {
    }
}

static void worker_release(worker *w, size_t at)
{
    shared *s = w->shared;
    uint64_t address = w->addresses[at];
    check_stamp(address, w->tag);
    if (s->check_limit)
        atomic_fetch_sub(&s->held_bytes, w->classes[at]);
    curd_status status = curdi_pool_release(s->pool, address);
    if (status != CURD_OK)
        g_error("release: %s: %s", curd_status_name(status),
                curd_last_error());
    w->releases++;
    w->addresses[at] = w->addresses[w->held - 1];
    w->classes[at] = w->classes[w->held - 1];
    w->held--;
}

static void worker_acquire(worker *w, GRand *rand)
{
    shared *s = w->shared;
    size_t byte_len = sizes[g_rand_int_range(rand, 0, G_N_ELEMENTS(sizes))];
    uint64_t address = 0;
    size_t class_bytes = 0;
    curd_status status =
        curdi_pool_acquire(s->pool, byte_len, &address, &class_bytes);
    if (status == CURD_E_BUDGET) {
        w->budget_failures++;
        return;
    }
    if (status == CURD_E_OUT_OF_MEMORY) {
        w->memory_failures++;
        return;
    }
    if (status != CURD_OK)
        g_error("acquire: %s: %s", curd_status_name(status), curd_last_error());
    stamp(address, w->tag);
    w->acquires++;
    w->class_bytes_acquired += class_bytes;
    w->requested_acquired += byte_len;
    if (s->check_limit) {
        uint64_t now = atomic_fetch_add(&s->held_bytes, class_bytes) +
                       class_bytes;
        raise_max(&s->held_max, now);
    }
    w->addresses[w->held] = address;
    w->classes[w->held] = class_bytes;
    w->held++;
}

/* Gives one held block to the handoff (retagged), or takes one from it and
 * releases it here. */
static void worker_handoff(worker *w, GRand *rand)
{
    shared *s = w->shared;
    handoff *h = &s->handoff;
    if (w->held > 0 && g_rand_boolean(rand)) {
        pthread_mutex_lock(&h->lock);
        if (h->count < HANDOFF_MAX) {
            size_t at = w->held - 1;
            check_stamp(w->addresses[at], w->tag);
            uint64_t tag = w->tag ^ UINT64_C(0x5A5A5A5A5A5A5A5A);
            stamp(w->addresses[at], tag);
            h->addresses[h->count] = w->addresses[at];
            h->tags[h->count] = tag;
            h->count++;
            w->addresses[at] = 0;
            w->held--;
        }
        pthread_mutex_unlock(&h->lock);
        return;
    }
    pthread_mutex_lock(&h->lock);
    if (h->count == 0) {
        pthread_mutex_unlock(&h->lock);
        return;
    }
    h->count--;
    uint64_t address = h->addresses[h->count];
    uint64_t tag = h->tags[h->count];
    pthread_mutex_unlock(&h->lock);
    check_stamp(address, tag);
    /* Released by a thread that did not acquire it. */
    curd_status status = curdi_pool_release(s->pool, address);
    if (status != CURD_OK)
        g_error("handoff release: %s: %s", curd_status_name(status),
                curd_last_error());
    w->releases++;
}

static void *worker_main(void *opaque)
{
    worker *w = opaque;
    GRand *rand = g_rand_new_with_seed(w->seed);
    for (unsigned i = 0; i < w->shared->operations; i++) {
        int op = g_rand_int_range(rand, 0, 100);
        if (op < 48 && w->held < HELD_MAX)
            worker_acquire(w, rand);
        else if (op < 92 && w->held > 0)
            worker_release(w, (size_t)g_rand_int_range(rand, 0, (gint32)w->held));
        else if (!w->shared->check_limit)
            worker_handoff(w, rand);
    }
    while (w->held > 0)
        worker_release(w, w->held - 1);
    g_rand_free(rand);
    return NULL;
}

static unsigned operations(void)
{
    /* Fewer under a sanitizer or Valgrind, which are 10-50x slower. */
    return g_test_slow() ? 200000 : g_test_thorough() ? 60000 : 20000;
}

static void run_workers(shared *s, worker *workers, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        workers[i].shared = s;
        workers[i].seed = g_test_rand_int();
        workers[i].tag = UINT64_C(0xC0DE000000000000) | (i + 1u);
        g_assert_cmpint(pthread_create(&workers[i].thread, NULL, worker_main,
                                       &workers[i]),
                        ==, 0);
    }
    for (unsigned i = 0; i < count; i++)
        g_assert_cmpint(pthread_join(workers[i].thread, NULL), ==, 0);
}

static curdi_pool *pool_new(pm_upstream *upstream, uint64_t budget,
                            uint64_t limit)
{
    curdi_pool *pool = NULL;
    g_assert_cmpint(pm_pool_create(upstream, "threads", budget, limit, &pool), ==,
                    CURD_OK);
    return pool;
}

static void destroy_and_check_no_bytes_held(curdi_pool *pool,
                                            pm_upstream *upstream)
{
    curdi_pool_lifecycle_destroy(pool);
    g_assert_cmpuint(upstream->held_bytes, ==, 0);
    pm_upstream_fini(upstream);
}

static void shared_init(shared *s, curdi_pool *pool)
{
    memset(s, 0, sizeof *s);
    s->pool = pool;
    pthread_mutex_init(&s->handoff.lock, NULL);
    s->operations = operations();
}

/* Releases what is left in the handoff from this (main) thread. */
static uint64_t drain_handoff(shared *s)
{
    uint64_t released = 0;
    for (size_t i = 0; i < s->handoff.count; i++) {
        check_stamp(s->handoff.addresses[i], s->handoff.tags[i]);
        g_assert_cmpint(curdi_pool_release(s->pool, s->handoff.addresses[i]),
                        ==, CURD_OK);
        released++;
    }
    s->handoff.count = 0;
    pthread_mutex_destroy(&s->handoff.lock);
    return released;
}

static void assert_family_settled(const curd_stat_family *family)
{
    g_assert_cmpuint(family->peak, >=, family->current);
    g_assert_cmpuint(family->allocated - family->freed, ==, family->current);
}

/* Everything released: the statistics must equal the workers' counts. */
static void check_totals(curdi_pool *pool, pm_upstream *upstream,
                         const worker *workers, unsigned count,
                         uint64_t main_releases, uint64_t budget)
{
    uint64_t acquires = 0, releases = main_releases, class_bytes = 0,
             requested = 0, memory_failures = 0;
    for (unsigned i = 0; i < count; i++) {
        acquires += workers[i].acquires;
        releases += workers[i].releases;
        class_bytes += workers[i].class_bytes_acquired;
        requested += workers[i].requested_acquired;
        memory_failures += workers[i].memory_failures;
    }
    g_test_message("%" PRIu64 " acquires, %" PRIu64 " releases", acquires,
                   releases);
    g_assert_cmpuint(acquires, ==, releases);
    curd_pool_stats stats;
    curdi_pool_report_stats(pool, &stats);
    g_test_message("hits %" PRIu64 ", misses %" PRIu64 ", upstream allocs %"
                   PRIu64 " frees %" PRIu64 ", cached %" PRIu64 " bytes",
                   stats.cache_hits, stats.cache_misses, stats.upstream_allocs,
                   stats.upstream_frees, stats.cached_bytes.current);
    g_assert_cmpuint(stats.live_bytes.current, ==, 0);
    g_assert_cmpuint(stats.live_blocks.current, ==, 0);
    g_assert_cmpuint(stats.requested_bytes.current, ==, 0);
    g_assert_cmpuint(stats.live_bytes.allocated, ==, class_bytes);
    g_assert_cmpuint(stats.live_bytes.freed, ==, class_bytes);
    g_assert_cmpuint(stats.requested_bytes.allocated, ==, requested);
    g_assert_cmpuint(stats.requested_bytes.freed, ==, requested);
    g_assert_cmpuint(stats.live_blocks.allocated, ==, acquires);
    g_assert_cmpuint(stats.live_blocks.freed, ==, acquires);
    g_assert_cmpuint(stats.cache_hits + stats.cache_misses, ==,
                     acquires + memory_failures);
    g_assert_cmpuint(stats.upstream_allocs, ==,
                     stats.cache_misses - memory_failures);
    g_assert_cmpuint(stats.oom_failures, ==, memory_failures);
    g_assert_cmpuint(stats.upstream_allocs - stats.upstream_frees, ==,
                     upstream->held_blocks);
    g_assert_cmpuint(stats.cached_blocks.current, ==, upstream->held_blocks);
    g_assert_cmpuint(stats.cached_bytes.current, ==, upstream->held_bytes);
    g_assert_cmpuint(stats.cached_bytes.current, <=, budget);
    g_assert_cmpuint(stats.cached_bytes.peak, <=, budget);
    assert_family_settled(&stats.live_bytes);
    assert_family_settled(&stats.cached_bytes);
    assert_family_settled(&stats.requested_bytes);
    assert_family_settled(&stats.live_blocks);
    assert_family_settled(&stats.cached_blocks);
}

static void test_concurrent_acquire_release_keep_every_statistic_exact(void)
{
    pm_upstream upstream;
    pm_upstream_init(&upstream, UINT64_MAX);
    const uint64_t budget = 2u << 20;
    curdi_pool *pool = pool_new(&upstream, budget, 0);
    shared s;
    shared_init(&s, pool);
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    run_workers(&s, workers, THREADS);
    uint64_t main_releases = drain_handoff(&s);
    check_totals(pool, &upstream, workers, THREADS, main_releases, budget);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

static void test_the_live_limit_is_never_overshot_under_contention(void)
{
    pm_upstream upstream;
    pm_upstream_init(&upstream, UINT64_MAX);
    const uint64_t limit = 1u << 20; /* well below what 8 workers want */
    curdi_pool *pool = pool_new(&upstream, 4u << 20, limit);
    shared s;
    shared_init(&s, pool);
    s.check_limit = true;
    s.limit = limit;
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    run_workers(&s, workers, THREADS);
    drain_handoff(&s);
    uint64_t budget_failures = 0;
    for (unsigned i = 0; i < THREADS; i++)
        budget_failures += workers[i].budget_failures;
    g_test_message("held at most %" PRIu64 " of %" PRIu64 " bytes; %" PRIu64
                   " acquires refused",
                   (uint64_t)atomic_load(&s.held_max), limit, budget_failures);
    g_assert_cmpuint(atomic_load(&s.held_max), <=, limit);
    g_assert_cmpuint(budget_failures, >, 0);
    curd_pool_stats stats;
    curdi_pool_report_stats(pool, &stats);
    g_assert_cmpuint(stats.live_bytes.current, ==, 0);
    check_totals(pool, &upstream, workers, THREADS, 0, 4u << 20);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

/* A thread that trims and reads statistics while the workers run. */
typedef struct observer {
    curdi_pool *pool;
    uint64_t budget;
    atomic_bool stop;
    guint32 seed;
    uint64_t snapshots;
} observer;

static void *observer_main(void *opaque)
{
    observer *o = opaque;
    GRand *rand = g_rand_new_with_seed(o->seed);
    while (!atomic_load(&o->stop)) {
        curd_pool_stats stats;
        curdi_pool_report_stats(o->pool, &stats);
        const curd_stat_family *families[] = {
            &stats.live_bytes, &stats.cached_bytes, &stats.requested_bytes,
            &stats.live_blocks, &stats.cached_blocks};
        for (size_t i = 0; i < G_N_ELEMENTS(families); i++)
            if (families[i]->peak < families[i]->current)
                g_error("family %zu: peak %" PRIu64 " below current %" PRIu64,
                        i, families[i]->peak, families[i]->current);
        if (stats.cached_bytes.current > o->budget)
            g_error("%" PRIu64 " bytes cached, past the budget of %" PRIu64,
                    stats.cached_bytes.current, o->budget);
        if (g_rand_int_range(rand, 0, 4) == 0)
            curdi_pool_trim(o->pool,
                            (uint64_t)g_rand_int_range(rand, 0, 1 << 21));
        o->snapshots++;
    }
    g_rand_free(rand);
    return NULL;
}

static void test_trim_and_stats_during_traffic_stay_consistent(void)
{
    pm_upstream upstream;
    pm_upstream_init(&upstream, UINT64_MAX);
    const uint64_t budget = 1u << 20;
    curdi_pool *pool = pool_new(&upstream, budget, 0);
    shared s;
    shared_init(&s, pool);
    observer o = {.pool = pool, .budget = budget, .seed = g_test_rand_int()};
    atomic_init(&o.stop, false);
    pthread_t observer_thread;
    g_assert_cmpint(pthread_create(&observer_thread, NULL, observer_main, &o),
                    ==, 0);
    worker workers[THREADS - 1];
    memset(workers, 0, sizeof workers);
    run_workers(&s, workers, THREADS - 1);
    atomic_store(&o.stop, true);
    g_assert_cmpint(pthread_join(observer_thread, NULL), ==, 0);
    g_test_message("%" PRIu64 " snapshots", o.snapshots);
    uint64_t main_releases = drain_handoff(&s);
    check_totals(pool, &upstream, workers, THREADS - 1, main_releases, budget);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

static void test_out_of_memory_under_contention_keeps_counters_exact(void)
{
    /* An upstream far smaller than what the workers want: the ladder runs
     * in many threads at once, each trimming the shared cache. */
    pm_upstream upstream;
    pm_upstream_init(&upstream, 3u << 19);
    const uint64_t budget = 1u << 20;
    curdi_pool *pool = pool_new(&upstream, budget, 0);
    shared s;
    shared_init(&s, pool);
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    run_workers(&s, workers, THREADS);
    uint64_t main_releases = drain_handoff(&s);
    uint64_t memory_failures = 0;
    for (unsigned i = 0; i < THREADS; i++)
        memory_failures += workers[i].memory_failures;
    g_test_message("%" PRIu64 " acquires failed for lack of memory",
                   memory_failures);
    check_totals(pool, &upstream, workers, THREADS, main_releases, budget);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

/* More threads alive than the pool has shards: threads share shards and
 * wait for each other's shard locks, and every statistic still adds up. */
static void test_more_threads_than_shards_keep_every_statistic_exact(void)
{
    enum { CROWD = 2 * CURDI_POOL_SHARD_COUNT + 3 };
    pm_upstream upstream;
    pm_upstream_init(&upstream, UINT64_MAX);
    const uint64_t budget = 2u << 20;
    curdi_pool *pool = pool_new(&upstream, budget, 0);
    shared s;
    shared_init(&s, pool);
    s.operations /= 4; /* four times the threads of the other tests */
    worker *workers = g_new0(worker, CROWD);
    run_workers(&s, workers, CROWD);
    uint64_t main_releases = drain_handoff(&s);
    check_totals(pool, &upstream, workers, CROWD, main_releases, budget);
    g_free(workers);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

typedef struct shard_holder {
    pthread_t thread;
    pthread_barrier_t *all_alive;
    curdi_pool *pool;
    unsigned shard;
} shard_holder;

static void *short_lived_main(void *opaque)
{
    curdi_pool *pool = opaque;
    uint64_t address = 0;
    size_t class_bytes = 0;
    if (curdi_pool_acquire(pool, 4096, &address, &class_bytes) != CURD_OK ||
        curdi_pool_release(pool, address) != CURD_OK)
        g_error("a short-lived thread's hit failed: %s", curd_last_error());
    return NULL;
}

static void *shard_holder_main(void *opaque)
{
    shard_holder *holder = opaque;
    short_lived_main(holder->pool);
    holder->shard = curdi_pool_thread_shard();
    /* Nobody leaves before all hold their shard at once. */
    pthread_barrier_wait(holder->all_alive);
    return NULL;
}

/* Threads that exit give their shard back: after many short-lived threads,
 * as many threads alive at once as there are shards (the main thread
 * counted) still each get a shard of their own. Handed out round robin
 * forever, a later thread would share the main thread's shard. */
static void test_exited_threads_give_their_shard_back(void)
{
    enum { HOLDERS = CURDI_POOL_SHARD_COUNT - 1u };
    pm_upstream upstream;
    pm_upstream_init(&upstream, UINT64_MAX);
    curdi_pool *pool = pool_new(&upstream, 1u << 20, 0);
    unsigned main_shard = curdi_pool_thread_shard();
    g_assert_cmpuint(main_shard, <, CURDI_POOL_SHARD_COUNT);
    unsigned short_lived = 2u * CURDI_POOL_SHARD_COUNT + 5u;
    for (unsigned i = 0; i < short_lived; i++) {
        pthread_t thread;
        g_assert_cmpint(pthread_create(&thread, NULL, short_lived_main, pool),
                        ==, 0);
        g_assert_cmpint(pthread_join(thread, NULL), ==, 0);
    }
    pthread_barrier_t all_alive;
    g_assert_cmpint(pthread_barrier_init(&all_alive, NULL, HOLDERS), ==, 0);
    shard_holder holders[HOLDERS];
    for (unsigned i = 0; i < HOLDERS; i++) {
        holders[i] = (shard_holder){.all_alive = &all_alive, .pool = pool};
        g_assert_cmpint(pthread_create(&holders[i].thread, NULL,
                                       shard_holder_main, &holders[i]),
                        ==, 0);
    }
    bool taken[CURDI_POOL_SHARD_COUNT] = {false};
    taken[main_shard] = true;
    for (unsigned i = 0; i < HOLDERS; i++) {
        g_assert_cmpint(pthread_join(holders[i].thread, NULL), ==, 0);
        g_assert_cmpuint(holders[i].shard, <, CURDI_POOL_SHARD_COUNT);
        if (taken[holders[i].shard])
            g_error("shard %u is held by two live threads", holders[i].shard);
        taken[holders[i].shard] = true;
    }
    pthread_barrier_destroy(&all_alive);
    destroy_and_check_no_bytes_held(pool, &upstream);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pool-threads/concurrent-acquire-and-release-keep-every-statistic-exact",
                    test_concurrent_acquire_release_keep_every_statistic_exact);
    g_test_add_func("/pool-threads/the-live-limit-is-never-overshot-under-contention",
                    test_the_live_limit_is_never_overshot_under_contention);
    g_test_add_func("/pool-threads/trim-and-stats-during-traffic-stay-consistent",
                    test_trim_and_stats_during_traffic_stay_consistent);
    g_test_add_func("/pool-threads/out-of-memory-under-contention-keeps-counters-exact",
                    test_out_of_memory_under_contention_keeps_counters_exact);
    g_test_add_func("/pool-threads/more-threads-than-shards-keep-every-statistic-exact",
                    test_more_threads_than_shards_keep_every_statistic_exact);
    g_test_add_func("/pool-threads/exited-threads-give-their-shard-back",
                    test_exited_threads_give_their_shard_back);
    return g_test_run();
}
