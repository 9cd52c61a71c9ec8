/* pool.c - the pools alone, without the public API.
 *
 * pool/device-hit, pool/pinned-hit  curdi_pool_acquire + release of 4 KiB
 *     on the device's own pool, beside curd_block_acquire + release: the
 *     difference is what argument checks and handle validation cost.
 * pool/threads  the same hits on the shared device pool from 1, 2, 4 and 8
 *     threads, and the machine's ceiling ("ref"): the same hits on a
 *     private pool per thread (malloc upstream, made on the worker's own
 *     thread so that its memory comes from that thread's malloc arena).
 *     Same code, same work, nothing shared between threads: its speedup is
 *     what this machine allows for this work (cores, hyperthread siblings,
 *     clocks, the cost of locked instructions under load), and the shared
 *     pool is judged against it as well as against the k-fold line. */
#include "internal/internal.h"
#include "scenarios/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "harness/check-memory.h"
#include "harness/report.h"
#include "memory/pool.h"

/* Against the machine: the shared pool's k-thread rate is at least this
 * fraction of k private pools' rate. */
#define CEILING_TARGET 0.9

typedef struct pool_loop {
    const bench_env *env;
    curdi_pool *pool;
    size_t byte_len;
} pool_loop;

/* The pool's upstream needs the device's context current should it miss;
 * entering once per batch keeps that cost out of the per-op time. */
static int op_pool_internal(void *opaque, uint64_t iterations)
{
    const pool_loop *loop = opaque;
    uint64_t iteration;
    int result = 0;
    BENCH_CURD(curdi_core_device_enter(loop->env->device));
    for (iteration = 0; iteration < iterations && result == 0; iteration++) {
        uint64_t address = 0;
        size_t class_bytes = 0;
        curd_status status = curdi_pool_acquire(loop->pool, loop->byte_len,
                                                &address, &class_bytes);
        if (status == CURD_OK)
            status = curdi_pool_release(loop->pool, address);
        if (status != CURD_OK)
            result = bench_fail_curd("curdi_pool_acquire/release", status);
    }
    curdi_core_device_leave(loop->env->device);
    return result;
}

/* The pool's own block holds what is written to it. */
static int check_pool_block(const pool_loop *loop, curd_pool_kind kind)
{
    uint64_t seed = loop->env->seed ^ 0x9009u;
    uint64_t address = 0;
    size_t class_bytes = 0;
    curd_status status;
    int result;
    BENCH_CURD(curdi_core_device_enter(loop->env->device));
    status = curdi_pool_acquire(loop->pool, loop->byte_len, &address,
                                &class_bytes);
    curdi_core_device_leave(loop->env->device);
    if (status != CURD_OK)
        return bench_fail_curd("curdi_pool_acquire", status);
    result = kind == CURD_POOL_DEVICE
                 ? bench_check_device_memory(loop->env, &seed, address,
                                             loop->byte_len,
                                             "curd pool block")
                 : bench_check_host_memory(loop->env, &seed,
                                           (void *)(uintptr_t)address,
                                           loop->byte_len,
                                           "curd pinned pool block");
    curdi_pool_release(loop->pool, address);
    return result;
}

static int pool_hit(const bench_env *env, const char *name,
                    curd_pool_kind kind)
{
    bench_scenario scenario;
    pool_loop internal = {env,
                          kind == CURD_POOL_DEVICE ? env->device->device_pool
                                                   : env->device->pinned_pool,
                          BENCH_POOL_BLOCK_BYTES};
    bench_block_loop block = {env, kind, BENCH_POOL_BLOCK_BYTES};
    bench_hit_counters counters;
    bool pinned = kind == CURD_POOL_PINNED;
    int internal_index, public_index;

    if (check_pool_block(&internal, kind) != 0 ||
        bench_prime_pool(env, kind, BENCH_POOL_BLOCK_BYTES, 1) != 0)
        return -1;
    bench_scenario_init(&scenario, env, name, env->samples,
                        "4 KiB %s block: the pool's cache hit alone vs the "
                        "public acquire+release",
                        pinned ? "page-locked host" : "device");
    internal_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = pinned ? "curdi_pool_acquire+release (pinned)"
                        : "curdi_pool_acquire+release",
        .role = BENCH_ROLE_CURD, .op = op_pool_internal,
        .context = &internal});
    public_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = pinned ? "curd_block_acquire+release (pinned)"
                        : "curd_block_acquire+release",
        .role = BENCH_ROLE_CURD, .op = bench_block_acquire_release,
        .context = &block});
    if (internal_index < 0 || public_index < 0)
        return -1;
    bench_watch_hits(&scenario, &counters, env, kind);
    if (bench_measure(&scenario) != 0)
        return -1;
    bench_check_median_ns(&scenario, internal_index, 100.0, "< 100 ns");
    bench_check_median_ns(&scenario, public_index, 100.0, "< 100 ns");
    /* What the public layer costs over the pool. */
    bench_check_ratio(&scenario, public_index, internal_index, 0.0, NULL);
    bench_note_hits(&scenario, &counters);
    bench_report_scenario(&scenario);
    return 0;
}

int bench_internal_device_hit(const bench_env *env)
{
    return pool_hit(env, "pool/device-hit", CURD_POOL_DEVICE);
}

int bench_internal_pinned_hit(const bench_env *env)
{
    return pool_hit(env, "pool/pinned-hit", CURD_POOL_PINNED);
}

/* ------------------------------------------------------------------------
 * pool/threads
 * ---------------------------------------------------------------------- */

/* A host upstream for the private pools: their blocks are handed out and
 * taken back, never used as memory. */
static curd_status host_upstream_alloc(void *context, size_t byte_len,
                                       uint64_t *out_address)
{
    void *memory = malloc(byte_len);
    (void)context;
    if (memory == NULL)
        return CURD_E_OUT_OF_MEMORY;
    *out_address = (uint64_t)(uintptr_t)memory;
    return CURD_OK;
}

static curd_status host_upstream_free(void *context, uint64_t address,
                                      size_t byte_len)
{
    (void)context;
    (void)byte_len;
    free((void *)(uintptr_t)address);
    return CURD_OK;
}

/* Creates the worker's private pool and primes it with one block of the
 * class, then checks that the next acquire is a cache hit on that very
 * block. */
static int private_pool_start(void *team_loops, unsigned worker)
{
    static const curdi_upstream upstream = {.alloc = host_upstream_alloc,
                                            .free = host_upstream_free};
    const curdi_pool_config config = {.name = "bench-private",
                                      .cache_budget_bytes = 64 * BENCH_MIB};
    pool_loop *loop = (pool_loop *)team_loops + worker;
    curd_pool_stats stats;
    uint64_t first = 0, again = 0;
    size_t class_bytes = 0;
    BENCH_CURD(curdi_pool_lifecycle_create(&upstream, &config, &loop->pool));
    BENCH_CURD(curdi_pool_acquire(loop->pool, loop->byte_len, &first,
                                  &class_bytes));
    BENCH_CURD(curdi_pool_release(loop->pool, first));
    BENCH_CURD(curdi_pool_acquire(loop->pool, loop->byte_len, &again,
                                  &class_bytes));
    BENCH_CURD(curdi_pool_release(loop->pool, again));
    curdi_pool_report_stats(loop->pool, &stats);
    if (again != first || stats.cache_hits != 1 || stats.cache_misses != 1)
        return bench_fail("a private pool's second acquire was not a cache "
                          "hit on the primed block (0x%llx, then 0x%llx; "
                          "%llu hits, %llu misses)",
                          (unsigned long long)first,
                          (unsigned long long)again,
                          (unsigned long long)stats.cache_hits,
                          (unsigned long long)stats.cache_misses);
    return 0;
}

int bench_internal_threads(const bench_env *env)
{
    enum { COUNTS = BENCH_POOL_THREAD_COUNTS };
    bench_team *teams[COUNTS];
    bench_team_work shared_work[COUNTS], private_work[COUNTS];
    /* Each worker's private pool, made on the worker's thread by
     * private_pool_start; destroyed here after the workers are joined. */
    pool_loop (*private_loops)[BENCH_TEAM_MAX_THREADS] =
        calloc(COUNTS, sizeof *private_loops);
    pool_loop shared = {env, env->device->device_pool,
                        BENCH_POOL_BLOCK_BYTES};
    int shared_index[COUNTS], private_index[COUNTS];
    char label[80];
    bench_scenario scenario;
    bench_env threaded_env = *env;
    bench_hit_counters counters;
    unsigned count, worker;
    int result = -1;

    memset(teams, 0, sizeof teams);
    if (private_loops == NULL)
        return bench_fail("out of memory for the private pools");
    if (threaded_env.sample_target_ns < 20000000u)
        threaded_env.sample_target_ns = 20000000u;
    for (count = 0; count < COUNTS; count++) {
        for (worker = 0; worker < BENCH_TEAM_MAX_THREADS; worker++)
            private_loops[count][worker] =
                (pool_loop){&threaded_env, NULL, BENCH_POOL_BLOCK_BYTES};
        if (bench_team_start(&teams[count], bench_pool_thread_counts[count],
                             private_pool_start, private_loops[count]) != 0)
            goto done;
    }
    if (bench_prime_pool(env, CURD_POOL_DEVICE, BENCH_POOL_BLOCK_BYTES,
                         BENCH_TEAM_MAX_THREADS) != 0)
        goto done;

    bench_scenario_init(&scenario, &threaded_env, "pool/threads",
                        env->quick ? env->samples : (env->samples + 1) / 2,
                        "4 KiB device cache-hit acquire+release on 1, 2, 4, "
                        "8 threads at once (one size class, shared pool; "
                        "ref: a private pool per thread)");
    for (count = 0; count < COUNTS; count++) {
        unsigned threads = bench_pool_thread_counts[count];
        shared_work[count] = (bench_team_work){teams[count], op_pool_internal,
                                               {NULL}};
        private_work[count] = (bench_team_work){teams[count],
                                                op_pool_internal, {NULL}};
        for (worker = 0; worker < threads; worker++) {
            shared_work[count].contexts[worker] = &shared;
            private_work[count].contexts[worker] =
                &private_loops[count][worker];
        }
        shared_index[count] = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = bench_team_label(label, sizeof label,
                                      "curdi_pool_acquire+release", threads),
            .role = BENCH_ROLE_CURD, .op = bench_team_run,
            .context = &shared_work[count], .ops_per_iteration = threads,
            .threads = threads});
        private_index[count] = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = bench_team_label(label, sizeof label,
                                      "curdi_pool_acquire+release, private "
                                      "pools",
                                      threads),
            .role = BENCH_ROLE_REF, .op = bench_team_run,
            .context = &private_work[count], .ops_per_iteration = threads,
            .threads = threads});
        if (shared_index[count] < 0 || private_index[count] < 0)
            goto done;
    }

    bench_watch_hits(&scenario, &counters, env, CURD_POOL_DEVICE);
    if (bench_measure(&scenario) != 0)
        goto done;
    bench_check_team_speedups(&scenario, shared_index);
    /* The machine's ceiling for this work, reported without a target. */
    for (count = 1; count < COUNTS; count++)
        bench_check_speedup(&scenario, private_index[count],
                            private_index[0], 0.0, NULL);
    for (count = 0; count < COUNTS; count++) {
        /* Shared pool over private pools, same thread count: what sharing
         * costs. At 1 thread, reported only (the same code either way). */
        char target[64];
        snprintf(target, sizeof target,
                 "<= %.2f (>= %.0f%% of the private pools' rate)",
                 1.0 / CEILING_TARGET, 100.0 * CEILING_TARGET);
        bench_check_ratio(&scenario, shared_index[count],
                          private_index[count],
                          count == 0 ? 0.0 : 1.0 / CEILING_TARGET, target);
    }
    bench_note_hits(&scenario, &counters);
    bench_note(&scenario, "rate = ops/s of all threads together; speedup = "
                          "k-thread rate over 1-thread rate");
    bench_note(&scenario, "ref: the same hits on one private pool per thread "
                          "(malloc upstream, nothing shared): this machine's "
                          "ceiling for the work");
    bench_report_scenario(&scenario);
    result = 0;

done:
    bench_pool_teams_stop(teams);
    for (count = 0; count < COUNTS; count++)
        for (worker = 0; worker < BENCH_TEAM_MAX_THREADS; worker++)
            curdi_pool_lifecycle_destroy(private_loops[count][worker].pool);
    free(private_loops);
    return result;
}
