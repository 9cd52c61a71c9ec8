/* bench-pool.c - curd-bench scenarios for the memory pools.
 *
 * pool/device-hit   a device-pool cache hit (acquire + release of 4 KiB)
 *                   against cuMemAlloc + cuMemFree and against
 *                   cuMemAllocAsync + cuMemFreeAsync on the driver's warm
 *                   default pool.
 * pool/pinned-hit   a pinned-pool cache hit against cuMemHostAlloc +
 *                   cuMemFreeHost.
 * pool/threads      cache-hit throughput at 1, 2, 4 and 8 threads, with
 *                   cuMemAllocAsync + cuMemFreeAsync (a stream per thread)
 *                   at the same thread counts, and the machine's own
 *                   ceiling: the same hits on a private pool per thread
 *                   (nothing shared between threads).
 *
 * The internal pool calls (curdi_pool_acquire/release on the device's pool)
 * time the pool alone; curd_block_acquire/release time what an application
 * pays, argument checks and handle validation included. */
#include "bench-common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "pool.h"

#define POOL_BLOCK_BYTES (4 * BENCH_KIB)

typedef struct pool_context {
    const bench_env *env;
    curdi_pool *pool;
    curd_pool_kind kind;
    curdi_cu_stream stream;
    size_t byte_len;
} pool_context;

/* ------------------------------------------------------------------------
 * The timed operations. Each runs `iterations` acquire+release pairs.
 * ---------------------------------------------------------------------- */
typedef int (*pool_loop_fn)(pool_context *context, uint64_t iterations);

/* The pool's upstream needs the device's context current should it miss,
 * and the raw driver calls need it always; entering once per batch keeps
 * that cost out of the per-op time. */
static int run_entered(void *opaque, uint64_t iterations, pool_loop_fn loop)
{
    pool_context *context = opaque;
    int result;
    if (bench_raw_enter(context->env) != 0)
        return -1;
    result = loop(context, iterations);
    bench_raw_leave(context->env);
    return result;
}

static int pool_loop(pool_context *context, uint64_t iterations)
{
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        uint64_t address = 0;
        size_t class_bytes = 0;
        curd_status status = curdi_pool_acquire(
            context->pool, context->byte_len, &address, &class_bytes);
        if (status != CURD_OK)
            return bench_fail_curd("curdi_pool_acquire", status);
        status = curdi_pool_release(context->pool, address);
        if (status != CURD_OK)
            return bench_fail_curd("curdi_pool_release", status);
    }
    return 0;
}

static int op_pool_internal(void *opaque, uint64_t iterations)
{
    return run_entered(opaque, iterations, pool_loop);
}

static int op_block_public(void *opaque, uint64_t iterations)
{
    pool_context *context = opaque;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        curd_block block;
        BENCH_CURD(curd_block_acquire(context->env->device, context->kind,
                                      context->byte_len, &block));
        BENCH_CURD(curd_block_release(context->env->device, &block));
    }
    return 0;
}

static int raw_alloc_loop(pool_context *context, uint64_t iterations)
{
    const curdi_driver *driver = context->env->driver;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        curdi_cu_deviceptr device_ptr = 0;
        BENCH_CU(driver->cuMemAlloc(&device_ptr, context->byte_len));
        BENCH_CU(driver->cuMemFree(device_ptr));
    }
    return 0;
}

static int op_raw_alloc(void *opaque, uint64_t iterations)
{
    return run_entered(opaque, iterations, raw_alloc_loop);
}

static int raw_alloc_async_loop(pool_context *context, uint64_t iterations)
{
    const curdi_driver *driver = context->env->driver;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        curdi_cu_deviceptr device_ptr = 0;
        BENCH_CU(driver->cuMemAllocAsync(&device_ptr, context->byte_len,
                                         context->stream));
        BENCH_CU(driver->cuMemFreeAsync(device_ptr, context->stream));
    }
    /* One fence per batch: the stream-ordered frees complete here. */
    BENCH_CU(driver->cuStreamSynchronize(context->stream));
    return 0;
}

static int op_raw_alloc_async(void *opaque, uint64_t iterations)
{
    return run_entered(opaque, iterations, raw_alloc_async_loop);
}

static int raw_host_alloc_loop(pool_context *context, uint64_t iterations)
{
    const curdi_driver *driver = context->env->driver;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        void *host_ptr = NULL;
        BENCH_CU(driver->cuMemHostAlloc(&host_ptr, context->byte_len,
                                        CURDI_CU_MEMHOSTALLOC_PORTABLE));
        BENCH_CU(driver->cuMemFreeHost(host_ptr));
    }
    return 0;
}

static int op_raw_host_alloc(void *opaque, uint64_t iterations)
{
    return run_entered(opaque, iterations, raw_host_alloc_loop);
}

/* ------------------------------------------------------------------------
 * Correctness: each kind of block must hold what is written to it.
 * ---------------------------------------------------------------------- */

/* Random bytes in through cuMemcpyHtoD, out through cuMemcpyDtoH into
 * poisoned memory, every byte compared. Called with the context entered. */
static int check_device_memory(const bench_env *env, uint64_t *seed,
                               curdi_cu_deviceptr device_ptr, size_t byte_len,
                               const char *what)
{
    unsigned char expected[POOL_BLOCK_BYTES];
    unsigned char actual[POOL_BLOCK_BYTES];
    if (byte_len > sizeof expected)
        return bench_fail("%s: check size %zu too large", what, byte_len);
    bench_fill_random(seed, expected, byte_len);
    bench_poison(actual, byte_len);
    BENCH_CU(env->driver->cuMemcpyHtoD(device_ptr, expected, byte_len));
    BENCH_CU(env->driver->cuMemcpyDtoH(actual, device_ptr, byte_len));
    return bench_compare(what, expected, actual, byte_len);
}

/* Random bytes written on the host, through the device and back into
 * poisoned pageable memory. Called with the context entered. */
static int check_host_memory(const bench_env *env, uint64_t *seed,
                             void *host_ptr, size_t byte_len,
                             const char *what)
{
    unsigned char expected[POOL_BLOCK_BYTES];
    unsigned char actual[POOL_BLOCK_BYTES];
    curdi_cu_deviceptr scratch = 0;
    int result;
    if (byte_len > sizeof expected)
        return bench_fail("%s: check size %zu too large", what, byte_len);
    bench_fill_random(seed, expected, byte_len);
    memcpy(host_ptr, expected, byte_len);
    bench_poison(actual, byte_len);
    BENCH_CU(env->driver->cuMemAlloc(&scratch, byte_len));
    result = 0;
    if (env->driver->cuMemcpyHtoD(scratch, host_ptr, byte_len) !=
        CURDI_CUDA_SUCCESS)
        result = bench_fail("%s: cuMemcpyHtoD from the block failed", what);
    if (result == 0 && env->driver->cuMemcpyDtoH(actual, scratch, byte_len) !=
                           CURDI_CUDA_SUCCESS)
        result = bench_fail("%s: cuMemcpyDtoH of the check failed", what);
    if (result == 0)
        result = bench_compare(what, expected, actual, byte_len);
    env->driver->cuMemFree(scratch);
    return result;
}

static int check_device_paths(const bench_env *env, pool_context *context,
                              bool with_async)
{
    const curdi_driver *driver = env->driver;
    uint64_t seed = env->seed ^ 0x1001u;
    uint64_t address = 0;
    size_t class_bytes = 0;
    curdi_cu_deviceptr device_ptr = 0;
    curd_block block;

    /* curd's public block first (its own enter/leave), then the rest with
     * the context entered. */
    BENCH_CURD(curd_block_acquire(env->device, CURD_POOL_DEVICE,
                                  context->byte_len, &block));
    if (block.device_ptr == 0 || block.class_bytes < context->byte_len) {
        curd_block_release(env->device, &block);
        return bench_fail("curd_block_acquire gave device_ptr 0x%llx, "
                          "class_bytes %zu for %zu bytes",
                          (unsigned long long)block.device_ptr,
                          block.class_bytes, context->byte_len);
    }
    if (bench_raw_enter(env) != 0)
        return -1;
    if (check_device_memory(env, &seed, (curdi_cu_deviceptr)block.device_ptr,
                            context->byte_len, "curd device block") != 0)
        goto fail;
    bench_raw_leave(env);
    BENCH_CURD(curd_block_release(env->device, &block));

    if (bench_raw_enter(env) != 0)
        return -1;
    {
        curd_status status = curdi_pool_acquire(context->pool,
                                                context->byte_len, &address,
                                                &class_bytes);
        if (status != CURD_OK) {
            bench_fail_curd("curdi_pool_acquire", status);
            goto fail_entered;
        }
    }
    if (check_device_memory(env, &seed, (curdi_cu_deviceptr)address,
                            context->byte_len, "curd pool block") != 0) {
        curdi_pool_release(context->pool, address);
        goto fail_entered;
    }
    if (curdi_pool_release(context->pool, address) != CURD_OK) {
        bench_fail("curdi_pool_release of a block just acquired failed: %s",
                   curd_last_error());
        goto fail_entered;
    }

    if (driver->cuMemAlloc(&device_ptr, context->byte_len) != 0) {
        bench_fail("raw cuMemAlloc of %zu bytes failed", context->byte_len);
        goto fail_entered;
    }
    if (check_device_memory(env, &seed, device_ptr, context->byte_len,
                            "cuMemAlloc block") != 0) {
        driver->cuMemFree(device_ptr);
        goto fail_entered;
    }
    driver->cuMemFree(device_ptr);

    if (with_async) {
        device_ptr = 0;
        if (driver->cuMemAllocAsync(&device_ptr, context->byte_len,
                                    context->stream) != 0 ||
            driver->cuStreamSynchronize(context->stream) != 0) {
            bench_fail("raw cuMemAllocAsync of %zu bytes failed",
                       context->byte_len);
            goto fail_entered;
        }
        if (check_device_memory(env, &seed, device_ptr, context->byte_len,
                                "cuMemAllocAsync block") != 0)
            goto fail_entered;
        if (driver->cuMemFreeAsync(device_ptr, context->stream) != 0 ||
            driver->cuStreamSynchronize(context->stream) != 0) {
            bench_fail("raw cuMemFreeAsync failed");
            goto fail_entered;
        }
    }
    bench_raw_leave(env);
    return 0;

fail:
    bench_raw_leave(env);
    curd_block_release(env->device, &block);
    return -1;
fail_entered:
    bench_raw_leave(env);
    return -1;
}

static bool has_stream_ordered_alloc(const bench_env *env)
{
    return (env->props.capabilities & CURD_CAP_STREAM_ORDERED_ALLOC) != 0 &&
           env->driver->cuMemAllocAsync != NULL &&
           env->driver->cuMemFreeAsync != NULL;
}

/* The issue compares against cuMemAllocAsync "on a warm pool": the default
 * pool's release threshold is 0, so every synchronize would hand its memory
 * back to the OS and the next batch would pay to map it again. Raising the
 * threshold keeps the pool warm, as an application tuning for speed would.
 * Drivers without the pool entries keep the default (said in the note). */
static bool warm_default_pool(const bench_env *env)
{
    const curdi_driver *driver = env->driver;
    curdi_cu_mempool pool = NULL;
    uint64_t threshold = UINT64_MAX;
    bool warm = false;
    if (driver->cuDeviceGetDefaultMemPool == NULL ||
        driver->cuMemPoolSetAttribute == NULL)
        return false;
    if (bench_raw_enter(env) != 0)
        return false;
    if (driver->cuDeviceGetDefaultMemPool(&pool, env->device->cu_device) ==
            CURDI_CUDA_SUCCESS &&
        driver->cuMemPoolSetAttribute(pool,
                                      CURDI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                      &threshold) == CURDI_CUDA_SUCCESS)
        warm = true;
    bench_raw_leave(env);
    return warm;
}

/* The cache counters of a pool, to show that a "hit" scenario hit. */
typedef struct hit_counters {
    curdi_pool *pool;
    uint64_t hits;
    uint64_t misses;
} hit_counters;

static void pool_counters(curdi_pool *pool, uint64_t *hits, uint64_t *misses)
{
    curd_pool_stats stats;
    memset(&stats, 0, sizeof stats);
    curdi_pool_stats(pool, &stats);
    *hits = stats.cache_hits;
    *misses = stats.cache_misses;
}

/* Reads the counters as the timed samples start (bench_scenario's
 * sampling_start). */
static void counters_at_sampling_start(void *opaque)
{
    hit_counters *counters = opaque;
    pool_counters(counters->pool, &counters->hits, &counters->misses);
}

/* Primes the pool with one block of the class (a miss), so that every
 * timed acquire can hit. */
static int prime_pool(const bench_env *env, curdi_pool *pool, size_t byte_len)
{
    uint64_t address = 0;
    size_t class_bytes = 0;
    curd_status status;
    if (bench_raw_enter(env) != 0)
        return -1;
    status = curdi_pool_acquire(pool, byte_len, &address, &class_bytes);
    if (status == CURD_OK)
        status = curdi_pool_release(pool, address);
    bench_raw_leave(env);
    if (status != CURD_OK)
        return bench_fail_curd("priming the pool", status);
    return 0;
}

/* Arms the counters: read again as sampling starts, compared after. */
static void watch_hits(bench_scenario *scenario, hit_counters *counters,
                       curdi_pool *pool)
{
    memset(counters, 0, sizeof *counters);
    counters->pool = pool;
    scenario->sampling_start = counters_at_sampling_start;
    scenario->sampling_context = counters;
}

static void note_hits(bench_scenario *scenario, const hit_counters *before)
{
    uint64_t hits = 0;
    uint64_t misses = 0;
    pool_counters(before->pool, &hits, &misses);
    bench_note(scenario,
               "pool counters over the timed samples: %llu cache hits, "
               "%llu misses%s",
               (unsigned long long)(hits - before->hits),
               (unsigned long long)(misses - before->misses),
               misses != before->misses
                   ? " (WARNING: not all hits, the times include upstream "
                     "allocations)"
                   : "");
}

/* ------------------------------------------------------------------------
 * pool/device-hit
 * ---------------------------------------------------------------------- */
int bench_pool_device_hit(const bench_env *env)
{
    bench_scenario scenario;
    pool_context context;
    bool with_async = has_stream_ordered_alloc(env);
    bool async_warm = with_async && warm_default_pool(env);
    hit_counters counters;
    int internal, public_api, raw_async = -1, raw_alloc;
    int result = -1;

    memset(&context, 0, sizeof context);
    context.env = env;
    context.pool = env->device->device_pool;
    context.kind = CURD_POOL_DEVICE;
    context.byte_len = POOL_BLOCK_BYTES;
    if (with_async)
        if (bench_stream_acquire(env, &context.stream) != 0)
            return -1;

    if (check_device_paths(env, &context, with_async) != 0)
        goto done;
    if (prime_pool(env, context.pool, context.byte_len) != 0)
        goto done;

    bench_scenario_init(&scenario, env, "pool/device-hit", env->samples,
                        "4 KiB device block: curd cache-hit acquire+release "
                        "vs the driver's allocators");
    internal = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curdi_pool_acquire+release", .role = BENCH_ROLE_CURD,
        .op = op_pool_internal, .context = &context});
    public_api = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_block_acquire+release", .role = BENCH_ROLE_CURD,
        .op = op_block_public, .context = &context});
    if (with_async)
        raw_async = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = "cuMemAllocAsync+cuMemFreeAsync (default pool)",
            .role = BENCH_ROLE_RAW, .op = op_raw_alloc_async,
            .context = &context});
    raw_alloc = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "cuMemAlloc+cuMemFree", .role = BENCH_ROLE_RAW,
        .op = op_raw_alloc, .context = &context});
    if (internal < 0 || public_api < 0 || raw_alloc < 0)
        goto done;

    watch_hits(&scenario, &counters, context.pool);
    if (bench_measure(&scenario) != 0)
        goto done;

    bench_check_median_ns(&scenario, internal, 100.0, "< 100 ns");
    bench_check_median_ns(&scenario, public_api, 100.0, "< 100 ns");
    if (raw_async >= 0) {
        bench_check_ratio(&scenario, internal, raw_async, 0.1,
                          ">= 10x faster");
        bench_check_ratio(&scenario, public_api, raw_async, 0.1,
                          ">= 10x faster");
    }
    bench_check_ratio(&scenario, internal, raw_alloc, 1.0 / 500.0,
                      ">= 500x faster");
    bench_check_ratio(&scenario, public_api, raw_alloc, 1.0 / 500.0,
                      ">= 500x faster");
    note_hits(&scenario, &counters);
    if (raw_async >= 0)
        bench_note(&scenario,
                   "cuMemAllocAsync: a pooled non-blocking stream, one sync "
                   "per batch; default pool release threshold %s",
                   async_warm ? "raised to UINT64_MAX (warm pool)"
                              : "left at the driver's default (no pool "
                                "entries in this driver)");
    bench_report_scenario(&scenario);
    if (!with_async)
        bench_report_skip("pool/device-hit",
                          "cuMemAllocAsync variant: the driver has no "
                          "stream-ordered allocator");
    result = 0;

done:
    if (with_async)
        bench_stream_release(env, context.stream);
    return result;
}

/* ------------------------------------------------------------------------
 * pool/pinned-hit
 * ---------------------------------------------------------------------- */
static int check_pinned_paths(const bench_env *env, pool_context *context)
{
    uint64_t seed = env->seed ^ 0x2002u;
    uint64_t address = 0;
    size_t class_bytes = 0;
    void *host_ptr = NULL;
    curd_block block;
    int result;

    BENCH_CURD(curd_block_acquire(env->device, CURD_POOL_PINNED,
                                  context->byte_len, &block));
    if (block.host_ptr == NULL || block.class_bytes < context->byte_len) {
        curd_block_release(env->device, &block);
        return bench_fail("curd_block_acquire (pinned) gave host_ptr %p, "
                          "class_bytes %zu for %zu bytes",
                          block.host_ptr, block.class_bytes,
                          context->byte_len);
    }
    if (bench_raw_enter(env) != 0) {
        curd_block_release(env->device, &block);
        return -1;
    }
    result = check_host_memory(env, &seed, block.host_ptr, context->byte_len,
                               "curd pinned block");
    bench_raw_leave(env);
    curd_block_release(env->device, &block);
    if (result != 0)
        return -1;

    if (bench_raw_enter(env) != 0)
        return -1;
    result = -1;
    if (curdi_pool_acquire(context->pool, context->byte_len, &address,
                           &class_bytes) != CURD_OK) {
        bench_fail("curdi_pool_acquire (pinned) failed: %s",
                   curd_last_error());
        goto done;
    }
    if (check_host_memory(env, &seed, (void *)(uintptr_t)address,
                          context->byte_len, "curd pinned pool block") != 0) {
        curdi_pool_release(context->pool, address);
        goto done;
    }
    if (curdi_pool_release(context->pool, address) != CURD_OK) {
        bench_fail("curdi_pool_release (pinned) failed: %s",
                   curd_last_error());
        goto done;
    }
    if (env->driver->cuMemHostAlloc(&host_ptr, context->byte_len,
                                    CURDI_CU_MEMHOSTALLOC_PORTABLE) !=
        CURDI_CUDA_SUCCESS) {
        bench_fail("raw cuMemHostAlloc of %zu bytes failed",
                   context->byte_len);
        goto done;
    }
    if (check_host_memory(env, &seed, host_ptr, context->byte_len,
                          "cuMemHostAlloc block") != 0) {
        env->driver->cuMemFreeHost(host_ptr);
        goto done;
    }
    env->driver->cuMemFreeHost(host_ptr);
    result = 0;
done:
    bench_raw_leave(env);
    return result;
}

int bench_pool_pinned_hit(const bench_env *env)
{
    bench_scenario scenario;
    pool_context context;
    hit_counters counters;
    int internal, public_api, raw_host;

    memset(&context, 0, sizeof context);
    context.env = env;
    context.pool = env->device->pinned_pool;
    context.kind = CURD_POOL_PINNED;
    context.byte_len = POOL_BLOCK_BYTES;

    if (check_pinned_paths(env, &context) != 0)
        return -1;
    if (prime_pool(env, context.pool, context.byte_len) != 0)
        return -1;

    bench_scenario_init(&scenario, env, "pool/pinned-hit", env->samples,
                        "4 KiB page-locked host block: curd cache-hit "
                        "acquire+release vs cuMemHostAlloc+cuMemFreeHost");
    internal = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curdi_pool_acquire+release (pinned)",
        .role = BENCH_ROLE_CURD, .op = op_pool_internal,
        .context = &context});
    public_api = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_block_acquire+release (pinned)",
        .role = BENCH_ROLE_CURD, .op = op_block_public, .context = &context});
    raw_host = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "cuMemHostAlloc+cuMemFreeHost", .role = BENCH_ROLE_RAW,
        .op = op_raw_host_alloc, .context = &context});
    if (internal < 0 || public_api < 0 || raw_host < 0)
        return -1;

    watch_hits(&scenario, &counters, context.pool);
    if (bench_measure(&scenario) != 0)
        return -1;
    bench_check_median_ns(&scenario, internal, 100.0, "< 100 ns");
    bench_check_median_ns(&scenario, public_api, 100.0, "< 100 ns");
    bench_check_ratio(&scenario, internal, raw_host, 0.0, NULL);
    bench_check_ratio(&scenario, public_api, raw_host, 0.0, NULL);
    note_hits(&scenario, &counters);
    bench_report_scenario(&scenario);
    return 0;
}

/* ------------------------------------------------------------------------
 * pool/threads
 *
 * A team of worker threads per thread count, created once and kept waiting
 * on a barrier between samples; a sample releases them, each runs the same
 * number of acquire+release pairs, and the sample ends when the last one is
 * done. Per-op time is wall time over the operations of all threads, so
 * ops/s = 1e9 / per-op ns and the speedup is the 1-thread per-op time over
 * the k-thread one.
 *
 * The reference: each worker also owns a private pool (over malloc, made
 * on the worker's own thread so that its memory comes from that thread's
 * malloc arena) and runs the same curdi_pool_acquire+release hits on it.
 * Same code, same work, no data shared between threads: its speedup is
 * what this machine allows for this work (its cores, hyperthread siblings,
 * clocks, and the cost of locked instructions under load), and the shared
 * pool is judged against it as well as against the k-fold line.
 * ---------------------------------------------------------------------- */
#define TEAM_MAX_THREADS 8
/* "Near-linear": at least this fraction of k times the 1-thread rate. */
#define TEAM_EFFICIENCY_TARGET 0.75
/* Against the machine: the shared pool's k-thread rate is at least this
 * fraction of k private pools' rate. */
#define TEAM_CEILING_TARGET 0.9

typedef enum team_mode {
    TEAM_POOL_INTERNAL = 0,
    TEAM_BLOCK_PUBLIC = 1,
    TEAM_RAW_ASYNC = 2,
    TEAM_PRIVATE_POOL = 3
} team_mode;
#define TEAM_MODES 4

typedef struct team team;

typedef struct team_worker {
    team *team;
    pthread_t thread;
    pool_context context; /* with the worker's own raw stream */
    pool_context private_context; /* the worker's private pool */
    bool started;
} team_worker;

struct team {
    const bench_env *env;
    unsigned thread_count;
    pthread_barrier_t start;
    pthread_barrier_t done;
    bool barriers_ready;
    team_worker workers[TEAM_MAX_THREADS];
    /* Written by the main thread before the start barrier, read by the
     * workers after it (the barrier orders the accesses). */
    team_mode mode;
    uint64_t iterations;
    bool quit;
    atomic_int failures;
};

typedef struct team_variant {
    team *team;
    team_mode mode;
} team_variant;

static int team_work(team_worker *worker, team_mode mode, uint64_t iterations)
{
    pool_context *context = &worker->context;
    switch (mode) {
    case TEAM_POOL_INTERNAL:
        return op_pool_internal(context, iterations);
    case TEAM_PRIVATE_POOL:
        /* The context is entered as for the shared pool, so that the two
         * differ only in what the threads share. */
        return op_pool_internal(&worker->private_context, iterations);
    case TEAM_BLOCK_PUBLIC:
        return op_block_public(context, iterations);
    case TEAM_RAW_ASYNC:
        return op_raw_alloc_async(context, iterations);
    }
    return bench_fail("unknown team mode %d", (int)mode);
}

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

/* Creates the worker's private pool on the worker's thread and primes it
 * with one block of the class, then checks that the next acquire is a
 * cache hit on that very block. */
static int private_pool_start(team_worker *worker)
{
    const curdi_upstream upstream = {.alloc = host_upstream_alloc,
                                     .free = host_upstream_free};
    const curdi_pool_config config = {.name = "bench-private",
                                      .cache_budget_bytes = 64 * BENCH_MIB};
    pool_context *context = &worker->private_context;
    curd_pool_stats stats;
    uint64_t first = 0, again = 0;
    size_t class_bytes = 0;
    BENCH_CURD(curdi_pool_create(&upstream, &config, &context->pool));
    BENCH_CURD(curdi_pool_acquire(context->pool, context->byte_len, &first,
                                  &class_bytes));
    BENCH_CURD(curdi_pool_release(context->pool, first));
    BENCH_CURD(curdi_pool_acquire(context->pool, context->byte_len, &again,
                                  &class_bytes));
    BENCH_CURD(curdi_pool_release(context->pool, again));
    curdi_pool_stats(context->pool, &stats);
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

static void *team_main(void *opaque)
{
    team_worker *worker = opaque;
    team *crew = worker->team;
    /* A failure here fails the first sample; the worker still meets the
     * others at every barrier. */
    if (private_pool_start(worker) != 0)
        atomic_fetch_add(&crew->failures, 1);
    for (;;) {
        pthread_barrier_wait(&crew->start);
        if (crew->quit)
            break;
        if (team_work(worker, crew->mode, crew->iterations) != 0)
            atomic_fetch_add(&crew->failures, 1);
        pthread_barrier_wait(&crew->done);
    }
    return NULL;
}

static int op_team(void *opaque, uint64_t iterations)
{
    team_variant *variant = opaque;
    team *crew = variant->team;
    crew->mode = variant->mode;
    crew->iterations = iterations;
    pthread_barrier_wait(&crew->start);
    pthread_barrier_wait(&crew->done);
    if (atomic_load(&crew->failures) != 0)
        return -1;
    return 0;
}

static void team_stop(team *crew)
{
    unsigned index;
    bool any_started = false;
    for (index = 0; index < crew->thread_count; index++)
        any_started = any_started || crew->workers[index].started;
    if (crew->barriers_ready && any_started) {
        crew->quit = true;
        pthread_barrier_wait(&crew->start);
    }
    for (index = 0; index < crew->thread_count; index++) {
        team_worker *worker = &crew->workers[index];
        if (worker->started)
            pthread_join(worker->thread, NULL);
        worker->started = false;
        /* After the join: the worker made it, the main thread frees it. */
        curdi_pool_destroy(worker->private_context.pool);
        worker->private_context.pool = NULL;
        if (worker->context.stream != NULL)
            bench_stream_release(crew->env, worker->context.stream);
        worker->context.stream = NULL;
    }
    if (crew->barriers_ready) {
        pthread_barrier_destroy(&crew->start);
        pthread_barrier_destroy(&crew->done);
        crew->barriers_ready = false;
    }
}

static int team_start(team *crew, const bench_env *env, unsigned thread_count,
                      bool with_streams)
{
    unsigned index;
    memset(crew, 0, sizeof *crew);
    crew->env = env;
    crew->thread_count = thread_count;
    atomic_init(&crew->failures, 0);
    for (index = 0; index < thread_count; index++) {
        team_worker *worker = &crew->workers[index];
        worker->team = crew;
        worker->context.env = env;
        worker->context.pool = env->device->device_pool;
        worker->context.kind = CURD_POOL_DEVICE;
        worker->context.byte_len = POOL_BLOCK_BYTES;
        worker->private_context = worker->context;
        worker->private_context.pool = NULL; /* made by the worker */
        if (with_streams) {
            if (bench_stream_acquire(env, &worker->context.stream) != 0) {
                team_stop(crew);
                return -1;
            }
        }
    }
    /* All the workers and the main thread meet at each barrier. With every
     * worker waiting at the start barrier, a thread that failed to start
     * would deadlock the first sample, so a failed create stops the team
     * before any sample runs. */
    if (pthread_barrier_init(&crew->start, NULL, thread_count + 1) != 0 ||
        pthread_barrier_init(&crew->done, NULL, thread_count + 1) != 0) {
        team_stop(crew);
        return bench_fail("pthread_barrier_init failed");
    }
    crew->barriers_ready = true;
    for (index = 0; index < thread_count; index++) {
        team_worker *worker = &crew->workers[index];
        if (pthread_create(&worker->thread, NULL, team_main, worker) != 0) {
            /* The started workers wait at a start barrier that can never
             * fill, so the team is left as it is (never stopped: that would
             * wait forever) and the run fails; main() ends the process. */
            return bench_fail("pthread_create of worker %u of %u failed",
                              index + 1, thread_count);
        }
        worker->started = true;
    }
    return 0;
}

int bench_pool_threads(const bench_env *env)
{
    static const unsigned thread_counts[] = {1, 2, 4, 8};
    enum { COUNTS = sizeof thread_counts / sizeof thread_counts[0] };
    team crews[COUNTS];
    team_variant variants[COUNTS][TEAM_MODES];
    int index_of[COUNTS][TEAM_MODES];
    bench_scenario scenario;
    bench_env threaded_env = *env;
    bool with_async = has_stream_ordered_alloc(env);
    hit_counters counters;
    unsigned count;
    unsigned started = 0;
    int result = -1;

    if (with_async)
        (void)warm_default_pool(env); /* said in pool/device-hit's note */

    /* A longer sample keeps the barrier wake-ups (microseconds) under a
     * percent of it. */
    if (threaded_env.sample_target_ns < 20000000u)
        threaded_env.sample_target_ns = 20000000u;

    memset(index_of, 0xff, sizeof index_of);
    for (count = 0; count < COUNTS; count++) {
        if (team_start(&crews[count], &threaded_env, thread_counts[count],
                       with_async) != 0)
            goto done;
        started = count + 1;
    }
    /* Prime enough blocks of the class for every thread to hit. */
    {
        uint64_t addresses[TEAM_MAX_THREADS];
        size_t class_bytes = 0;
        unsigned held;
        curd_status status = CURD_OK;
        if (bench_raw_enter(env) != 0)
            goto done;
        for (held = 0; held < TEAM_MAX_THREADS && status == CURD_OK; held++)
            status = curdi_pool_acquire(env->device->device_pool,
                                        POOL_BLOCK_BYTES, &addresses[held],
                                        &class_bytes);
        if (status != CURD_OK)
            held--;
        while (held > 0)
            curdi_pool_release(env->device->device_pool, addresses[--held]);
        bench_raw_leave(env);
        if (status != CURD_OK) {
            bench_fail_curd("priming the device pool for 8 threads", status);
            goto done;
        }
    }

    bench_scenario_init(&scenario, &threaded_env, "pool/threads",
                        env->quick ? env->samples : (env->samples + 1) / 2,
                        "4 KiB device cache-hit acquire+release on 1, 2, 4, "
                        "8 threads at once (one size class, shared pool; "
                        "ref: a private pool per thread)");
    for (count = 0; count < COUNTS; count++) {
        static const char *const mode_names[TEAM_MODES] = {
            "curdi_pool_acquire+release", "curd_block_acquire+release",
            "cuMemAllocAsync+cuMemFreeAsync",
            "curdi_pool_acquire+release, private pools"};
        static const bench_role roles[TEAM_MODES] = {
            BENCH_ROLE_CURD, BENCH_ROLE_CURD, BENCH_ROLE_RAW, BENCH_ROLE_REF};
        unsigned mode;
        for (mode = 0; mode < TEAM_MODES; mode++) {
            static char labels[COUNTS][TEAM_MODES][80];
            if (mode == TEAM_RAW_ASYNC && !with_async)
                continue;
            variants[count][mode].team = &crews[count];
            variants[count][mode].mode = (team_mode)mode;
            snprintf(labels[count][mode], sizeof labels[count][mode],
                     "%s, %u thread%s", mode_names[mode],
                     thread_counts[count], thread_counts[count] > 1 ? "s" : "");
            index_of[count][mode] = bench_add_variant(&scenario,
                &(bench_variant_spec){
                    .label = labels[count][mode],
                    .role = roles[mode],
                    .op = op_team, .context = &variants[count][mode],
                    .ops_per_iteration = thread_counts[count],
                    .threads = thread_counts[count]});
            if (index_of[count][mode] < 0)
                goto done;
        }
    }

    watch_hits(&scenario, &counters, env->device->device_pool);
    if (bench_measure(&scenario) != 0)
        goto done;

    for (count = 1; count < COUNTS; count++) {
        unsigned mode;
        char target[64];
        double limit = TEAM_EFFICIENCY_TARGET * thread_counts[count];
        snprintf(target, sizeof target, ">= %.1fx (%.2f x %u threads)", limit,
                 TEAM_EFFICIENCY_TARGET, thread_counts[count]);
        for (mode = 0; mode < 2; mode++)
            bench_check_speedup(&scenario, index_of[count][mode],
                                index_of[0][mode], limit, target);
        /* The machine's ceiling for this work, reported without a target. */
        bench_check_speedup(&scenario, index_of[count][TEAM_PRIVATE_POOL],
                            index_of[0][TEAM_PRIVATE_POOL], 0.0, NULL);
    }
    for (count = 0; count < COUNTS; count++) {
        /* Shared pool over private pools, same thread count: what sharing
         * costs. At 1 thread, reported only (the same code either way). */
        char target[64];
        snprintf(target, sizeof target, "<= %.2f (>= %.0f%% of the private "
                 "pools' rate)", 1.0 / TEAM_CEILING_TARGET,
                 100.0 * TEAM_CEILING_TARGET);
        bench_check_ratio(&scenario, index_of[count][TEAM_POOL_INTERNAL],
                          index_of[count][TEAM_PRIVATE_POOL],
                          count == 0 ? 0.0 : 1.0 / TEAM_CEILING_TARGET,
                          target);
    }
    if (with_async) {
        for (count = 0; count < COUNTS; count++)
            bench_check_ratio(&scenario, index_of[count][TEAM_BLOCK_PUBLIC],
                              index_of[count][TEAM_RAW_ASYNC], 0.0, NULL);
        bench_note(&scenario, "cuMemAllocAsync: one pooled stream per thread, "
                              "one cuStreamSynchronize per thread per sample");
    }
    note_hits(&scenario, &counters);
    bench_note(&scenario, "rate = ops/s of all threads together; speedup = "
                          "k-thread rate over 1-thread rate");
    bench_note(&scenario, "ref: the same hits on one private pool per thread "
                          "(malloc upstream, nothing shared): this machine's "
                          "ceiling for the work");
    bench_report_scenario(&scenario);
    if (!with_async)
        bench_report_skip("pool/threads",
                          "cuMemAllocAsync variants: the driver has no "
                          "stream-ordered allocator");
    result = 0;

done:
    while (started > 0)
        team_stop(&crews[--started]);
    return result;
}
