/* memory.c - the device's pools, their driver upstreams, the reclaim
 * callback, and the public block, trim and reclaim entry points; their
 * statistics, which lib/device.c composes into curd_device_stats.
 * memory.h says what the upstreams and budgets are. */
#include "memory/memory.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "memory/pool.h"

/* ------------------------------------------------------------------------
 * Upstreams. Each call pushes the device's context (nesting is fine when
 * the caller has it current already) so that a pool can go upstream from
 * any thread, including one trimming another device's pool.
 * ---------------------------------------------------------------------- */
/* The two pools' upstreams differ only in the driver calls and in what an
 * allocation failure's sentence suggests. */
static curd_status upstream_alloc(curd_device *device, bool pinned,
                                  size_t byte_len, uint64_t *out_address)
{
    curd_status status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_deviceptr device_ptr = 0;
    void *host_ptr = NULL;
    curdi_cu_result rc =
        /* Mapped: the transfer kernels reach staging across the bus
         * (lib/transfer/gather.h). */
        pinned ? driver->cuMemHostAlloc(&host_ptr, byte_len,
                                        CURDI_CU_MEMHOSTALLOC_PORTABLE
                                            | CURDI_CU_MEMHOSTALLOC_DEVICEMAP)
               : driver->cuMemAlloc(&device_ptr, byte_len);
    if (rc == CURDI_CUDA_SUCCESS)
        *out_address = pinned ? (uint64_t)(uintptr_t)host_ptr : device_ptr;
    else if (pinned)
        status = curdi_driver_fail(
            (int)rc, "cuMemHostAlloc",
            "free page-locked host memory (pinned blocks, registered "
            "ranges), lower the pinned pool's cache budget, or raise the "
            "locked-memory limit (ulimit -l)");
    else
        status = curdi_driver_fail(
            (int)rc, "cuMemAlloc",
            "free device memory (buffers, blocks, other processes' use) or "
            "lower the device pool's cache budget");
    curdi_core_device_leave(device);
    return status;
}

static curd_status upstream_free(curd_device *device, bool pinned,
                                 uint64_t address)
{
    if (!curdi_driver_usable())
        return CURD_OK; /* the driver is going away, and its memory with it */
    /* Freed even when the push fails: nearly every caller has the context
     * current already (a trim from another thread is the exception), and
     * the pool lets go of the block whatever this returns. */
    curd_status entered = curdi_core_device_enter(device);
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_result rc = curdi_driver_note(
        pinned ? driver->cuMemFreeHost((void *)(uintptr_t)address)
               : driver->cuMemFree((curdi_cu_deviceptr)address));
    curd_status status = CURD_OK;
    if (rc != CURDI_CUDA_SUCCESS && rc != CURDI_CUDA_ERROR_DEINITIALIZED)
        status = curdi_driver_fail(
            (int)rc, pinned ? "cuMemFreeHost" : "cuMemFree", NULL);
    if (entered == CURD_OK)
        curdi_core_device_leave(device);
    return status;
}

static curd_status device_upstream_alloc(void *context, size_t byte_len,
                                         uint64_t *out_address)
{
    return upstream_alloc(context, false, byte_len, out_address);
}

static curd_status device_upstream_free(void *context, uint64_t address,
                                        size_t byte_len)
{
    (void)byte_len;
    return upstream_free(context, false, address);
}

static bool device_upstream_free_bytes(void *context, uint64_t *out_free_bytes)
{
    curd_device *device = context;
    if (curdi_core_device_enter(device) != CURD_OK)
        return false;
    size_t free_bytes = 0, total_bytes = 0;
    curdi_cu_result rc =
        curdi_driver_get()->cuMemGetInfo(&free_bytes, &total_bytes);
    curdi_core_device_leave(device);
    if (rc != CURDI_CUDA_SUCCESS)
        return false;
    *out_free_bytes = free_bytes;
    return true;
}

static curd_status pinned_upstream_alloc(void *context, size_t byte_len,
                                         uint64_t *out_address)
{
    return upstream_alloc(context, true, byte_len, out_address);
}

static curd_status pinned_upstream_free(void *context, uint64_t address,
                                        size_t byte_len)
{
    (void)byte_len;
    return upstream_free(context, true, address);
}

/* The host's physical memory: no pinned block can be larger. 0 when it
 * cannot tell. */
static uint64_t host_total_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_bytes = sysconf(_SC_PAGESIZE);
    uint64_t bytes;
    if (pages <= 0 || page_bytes <= 0)
        return 0;
    if (!curdi_u64_mul((uint64_t)pages, (uint64_t)page_bytes, &bytes))
        return 0;
    return bytes;
}

/* Host memory still available to the process (pinned memory is host
 * memory). */
static bool pinned_upstream_free_bytes(void *context, uint64_t *out_free_bytes)
{
    (void)context;
    long pages = sysconf(_SC_AVPHYS_PAGES);
    long page_bytes = sysconf(_SC_PAGESIZE);
    if (pages < 0 || page_bytes <= 0)
        return false;
    uint64_t bytes;
    if (!curdi_u64_mul((uint64_t)pages, (uint64_t)page_bytes, &bytes))
        bytes = UINT64_MAX;
    *out_free_bytes = bytes;
    return true;
}

/* ------------------------------------------------------------------------
 * The out-of-memory ladder beyond one pool
 * ---------------------------------------------------------------------- */
typedef struct trim_all {
    curd_device *except; /* trimmed by the caller already */
    curd_pool_kind kind;
    uint64_t freed;
} trim_all;

/* These trims are steps of the ladder, best effort: a pool whose counters
 * are full frees nothing here (curdi_pool_trim returns 0) and the ladder
 * goes on; curd_device_trim is where that is reported. */
static void trim_one_device(curd_device *device, void *context)
{
    trim_all *all = context;
    if (device == all->except)
        return;
    curdi_pool *pool = curdi_memory_pool(device, all->kind);
    if (pool != NULL)
        all->freed += curdi_pool_trim(pool, 0);
}

/* Empties the caches of this device's pool of a kind and of every other
 * open device of the same ordinal. This device may not be on the open list
 * (while it opens or closes), hence the direct trim first. */
static uint64_t trim_every_pool(curd_device *device, curd_pool_kind kind)
{
    trim_all all = {.except = device, .kind = kind, .freed = 0};
    curdi_pool *own = curdi_memory_pool(device, kind);
    if (own != NULL)
        all.freed += curdi_pool_trim(own, 0);
    curdi_core_devices_for_ordinal(device->ordinal, trim_one_device, &all);
    return all.freed;
}

static uint64_t relieve_device_memory(void *context, uint64_t bytes_needed,
                                      curdi_relief_step step)
{
    curd_device *device = context;
    if (step == CURDI_RELIEF_RECLAIM) {
        pthread_mutex_lock(&device->reclaim_lock);
        curd_reclaim_fn fn = device->reclaim_fn;
        void *fn_context = device->reclaim_context;
        pthread_mutex_unlock(&device->reclaim_lock);
        /* Called with no curd lock held: it may free buffers and release
         * blocks. */
        return fn != NULL ? fn(fn_context, bytes_needed) : 0;
    }
    return trim_every_pool(device, CURD_POOL_DEVICE);
}

static uint64_t relieve_pinned_memory(void *context, uint64_t bytes_needed,
                                      curdi_relief_step step)
{
    (void)bytes_needed;
    if (step == CURDI_RELIEF_RECLAIM)
        return 0; /* the reclaim callback is about device memory */
    return trim_every_pool(context, CURD_POOL_PINNED);
}

/* ------------------------------------------------------------------------
 * Open and close
 * ---------------------------------------------------------------------- */
uint64_t curdi_memory_default_device_cache(uint64_t total_bytes)
{
    uint64_t eighth = total_bytes / 8u;
    return eighth < CURDI_DEVICE_CACHE_MAX_DEFAULT
               ? eighth
               : CURDI_DEVICE_CACHE_MAX_DEFAULT;
}

curd_status curdi_memory_open(curd_device *device)
{
    if (device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_memory_open: device is NULL. Fix: report "
                          "this as a curd bug.");
    const curd_device_options *options = &device->options;
    if (pthread_mutex_init(&device->reclaim_lock, NULL) != 0)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "The device's reclaim lock could not be created. "
                          "Fix: free host resources and try again.");
    device->reclaim_fn = NULL;
    device->reclaim_context = NULL;
    device->device_pool = NULL;
    device->pinned_pool = NULL;

    const curdi_upstream device_upstream = {
        .alloc = device_upstream_alloc,
        .free = device_upstream_free,
        .free_bytes = device_upstream_free_bytes,
        .context = device,
    };
    const curdi_pool_config device_config = {
        .name = "device",
        .kind = CURD_POOL_DEVICE,
        .cache_budget_bytes =
            options->device_cache_bytes != 0
                ? options->device_cache_bytes
                : curdi_memory_default_device_cache(
                      device->props.total_memory_bytes),
        .live_limit_bytes = options->device_live_limit_bytes,
        .upstream_total_bytes = device->props.total_memory_bytes,
        .relieve = relieve_device_memory,
        .relieve_context = device,
    };
    const curdi_upstream pinned_upstream = {
        .alloc = pinned_upstream_alloc,
        .free = pinned_upstream_free,
        .free_bytes = pinned_upstream_free_bytes,
        .context = device,
    };
    const curdi_pool_config pinned_config = {
        .name = "pinned",
        .kind = CURD_POOL_PINNED,
        .cache_budget_bytes = options->pinned_cache_bytes != 0
                                  ? options->pinned_cache_bytes
                                  : CURDI_PINNED_CACHE_DEFAULT,
        .live_limit_bytes = options->pinned_live_limit_bytes,
        .upstream_total_bytes = host_total_bytes(),
        .relieve = relieve_pinned_memory,
        .relieve_context = device,
    };
    curdi_pool *device_pool = NULL, *pinned_pool = NULL;
    curd_status status = curdi_pool_lifecycle_create(
        &device_upstream, &device_config, &device_pool);
    if (status == CURD_OK) {
        status = curdi_pool_lifecycle_create(&pinned_upstream, &pinned_config,
                                             &pinned_pool);
        if (status != CURD_OK)
            curdi_pool_lifecycle_destroy(device_pool);
    }
    if (status != CURD_OK) {
        pthread_mutex_destroy(&device->reclaim_lock);
        return status;
    }
    device->device_pool = device_pool;
    device->pinned_pool = pinned_pool;
    return CURD_OK;
}

void curdi_memory_close(curd_device *device)
{
    if (device == NULL || device->device_pool == NULL)
        return;
    /* Every block still live (the modules closed before this one gave theirs
     * back) and every cached one goes upstream here. */
    curdi_pool_lifecycle_destroy(device->pinned_pool);
    curdi_pool_lifecycle_destroy(device->device_pool);
    device->pinned_pool = NULL;
    device->device_pool = NULL;
    device->reclaim_fn = NULL;
    device->reclaim_context = NULL;
    pthread_mutex_destroy(&device->reclaim_lock);
}

curdi_pool *curdi_memory_pool(curd_device *device, curd_pool_kind kind)
{
    if (device == NULL)
        return NULL;
    switch (kind) {
    case CURD_POOL_DEVICE:
        return device->device_pool;
    case CURD_POOL_PINNED:
        return device->pinned_pool;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Blocks
 * ---------------------------------------------------------------------- */
/* The public entries and the library's own modules share these, inlined in
 * both: a pool hit is a few tens of nanoseconds, and a call layer less is
 * a measurable part of it. Each ends in a tail call and keeps its
 * refusals in a function of their own, so a hit saves no register. */
static __attribute__((noinline, cold)) curd_status
fail_acquire_arguments(const curd_block *out_block, curd_pool_kind kind)
{
    if (out_block == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_block_acquire: out_block is NULL. Fix: pass "
                          "the address of a curd_block.");
    if (kind != CURD_POOL_DEVICE && kind != CURD_POOL_PINNED)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_block_acquire: pool kind %d is neither "
                          "CURD_POOL_DEVICE (0) nor CURD_POOL_PINNED (1). "
                          "Fix: pass one of those.",
                          (int)kind);
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "curd_block_acquire: byte_len is 0. Fix: request at "
                      "least one byte; a zero-byte transfer needs no "
                      "block.");
}

static __attribute__((noinline, cold)) curd_status fail_release_null(void)
{
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "curd_block_release: block is NULL. Fix: pass the "
                      "block that curd_block_acquire() filled in.");
}

static inline __attribute__((always_inline)) curd_status
block_acquire(curd_device *device, curd_pool_kind kind, size_t byte_len,
              curd_block *out_block)
{
    curdi_pool *pool = curdi_memory_pool(device, kind);
    if (__builtin_expect(out_block == NULL || pool == NULL || byte_len == 0,
                         false))
        return fail_acquire_arguments(out_block, kind);
    return curdi_pool_acquire_block(pool, byte_len, out_block);
}

static inline __attribute__((always_inline)) curd_status
block_release(curd_device *device, const curd_block *block)
{
    if (__builtin_expect(block == NULL, false))
        return fail_release_null();
    /* Its kind picks the pool, which checks the rest. */
    curdi_pool *pool =
        curdi_memory_pool(device, (curd_pool_kind)block->pool_kind);
    if (__builtin_expect(pool == NULL, false))
        return curdi_pool_fail_foreign_block(block);
    return curdi_pool_release_block(pool, block);
}

/* The public entries by the whole device check (a device the thread has
 * not checked since the last close). */
static __attribute__((noinline)) curd_status
acquire_checking_device(curd_device *device, curd_pool_kind kind,
                        size_t byte_len, curd_block *out_block)
{
    curd_status status =
        curdi_core_device_check_fully(device, "curd_block_acquire");
    if (status != CURD_OK)
        return status;
    return block_acquire(device, kind, byte_len, out_block);
}

static __attribute__((noinline)) curd_status
release_checking_device(curd_device *device, const curd_block *block)
{
    curd_status status =
        curdi_core_device_check_fully(device, "curd_block_release");
    if (status != CURD_OK)
        return status;
    return block_release(device, block);
}

CURD_API curd_status curd_block_acquire(curd_device *device,
                                        curd_pool_kind kind, size_t byte_len,
                                        curd_block *out_block)
{
    if (__builtin_expect(!curdi_core_device_known(device), false))
        return acquire_checking_device(device, kind, byte_len, out_block);
    return block_acquire(device, kind, byte_len, out_block);
}

CURD_API curd_status curd_block_release(curd_device *device,
                                        const curd_block *block)
{
    if (__builtin_expect(!curdi_core_device_known(device), false))
        return release_checking_device(device, block);
    return block_release(device, block);
}

curd_status curdi_memory_block_acquire(curd_device *device,
                                       curd_pool_kind kind, size_t byte_len,
                                       curd_block *out_block)
{
    return block_acquire(device, kind, byte_len, out_block);
}

curd_status curdi_memory_block_release(curd_device *device,
                                       const curd_block *block)
{
    return block_release(device, block);
}

/* ------------------------------------------------------------------------
 * Statistics, trim, reclaim
 * ---------------------------------------------------------------------- */
void curdi_memory_stats(curd_device *device, curd_stats *stats)
{
    curdi_pool_report_stats(device->device_pool, &stats->device_pool);
    curdi_pool_report_stats(device->pinned_pool, &stats->pinned_pool);
}

void curdi_memory_stats_reset(curd_device *device)
{
    curdi_pool_report_stats_reset(device->device_pool);
    curdi_pool_report_stats_reset(device->pinned_pool);
}

CURD_API curd_status curd_device_trim(curd_device *device, uint64_t keep_bytes)
{
    curd_status status = curdi_core_device_check(device, "curd_device_trim");
    if (status != CURD_OK)
        return status;
    /* The context current for the whole trim: a block whose own push
     * fails is still freed (upstream_free), not dropped. */
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    status = curdi_pool_trim_checked(device->device_pool, keep_bytes, NULL);
    if (status == CURD_OK)
        status = curdi_pool_trim_checked(device->pinned_pool, keep_bytes,
                                         NULL);
    curdi_core_device_leave(device);
    return status;
}

CURD_API curd_status curd_device_set_reclaim(curd_device *device,
                                             curd_reclaim_fn fn, void *context)
{
    curd_status status =
        curdi_core_device_check(device, "curd_device_set_reclaim");
    if (status != CURD_OK)
        return status;
    pthread_mutex_lock(&device->reclaim_lock);
    device->reclaim_fn = fn;
    device->reclaim_context = fn != NULL ? context : NULL;
    pthread_mutex_unlock(&device->reclaim_lock);
    return CURD_OK;
}

curd_status curdi_memory_device_acquire(curd_device *device, size_t byte_len,
                                        uint64_t *out_address,
                                        size_t *out_class_bytes)
{
    return curdi_pool_acquire(device->device_pool, byte_len, out_address,
                              out_class_bytes);
}

curd_status curdi_memory_device_release(curd_device *device, uint64_t address)
{
    return curdi_pool_release(device->device_pool, address);
}

curd_status curdi_memory_staging_acquire(curd_device *device, size_t byte_len,
                                         curdi_staging *out_staging)
{
    return curdi_staging_acquire(device->pinned_pool, byte_len, out_staging);
}
