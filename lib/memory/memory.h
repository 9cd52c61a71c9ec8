/* memory.h - the device's two pools (device memory, pinned host memory),
 * its reclaim callback, and the curd_block_*, curd_device_trim and
 * curd_device_set_reclaim entry points.
 *
 * Upstreams. The device pool allocates with cuMemAlloc and frees with
 * cuMemFree; the pinned pool allocates with cuMemHostAlloc(PORTABLE) and
 * frees with cuMemFreeHost. Each upstream call pushes the device's context
 * itself, so a cache hit makes no driver call and needs no context; a free
 * made once the driver is going away (curdi_driver_usable() false) is
 * skipped, the process exit returns that memory.
 *
 * Budgets (curd_device_options, 0 picks the default):
 *   device_cache_bytes   default min(total device memory / 8, 4 GiB)
 *   pinned_cache_bytes   default 256 MiB
 *   *_live_limit_bytes   0: no cap
 * A request whose class passes what the upstream has in all (the
 * device's total memory; the host's physical memory for pinned blocks) is
 * refused with CURD_E_OUT_OF_MEMORY before the ladder below runs.
 * Size classes (checked.c) waste less than 1/8 of a request above 2 KiB
 * and at most 255 bytes below it; pool.c says how caching, statistics and
 * the out-of-memory ladder work.
 *
 * The out-of-memory ladder's steps beyond one pool (pool.h's relieve):
 * for the device pool, RECLAIM calls the application's reclaim callback
 * (no curd lock held) and TRIM_ALL empties this device's device-pool cache
 * and that of every other open curd_device of the same ordinal (they share
 * the primary context). For the pinned pool, RECLAIM does nothing (the
 * callback is about device memory) and TRIM_ALL does the same for the
 * pinned pools. */
#ifndef CURD_LIB_MEMORY_MEMORY_H
#define CURD_LIB_MEMORY_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/staging.h"

/* The pools themselves (memory/pool.h) stay inside memory/: the modules
 * above reach the device's pools through the calls below. */
typedef struct curdi_pool curdi_pool;

struct curd_device;

#define CURDI_DEVICE_CACHE_MAX_DEFAULT ((uint64_t)4 << 30)
#define CURDI_PINNED_CACHE_DEFAULT ((uint64_t)256 << 20)

/* Creates dev->device_pool and dev->pinned_pool from dev->options and
 * dev->props and initialises the reclaim lock. Called by curd_device_open
 * with the device's context current; on failure nothing is left to
 * close. */
curd_status curdi_memory_open(struct curd_device *device);
/* Destroys both pools (every block, cached or live). Called by
 * curd_device_close after the resident and transfer modules have given their
 * blocks back; skips driver calls when curdi_driver_usable() is false.
 * NULL-safe. */
void curdi_memory_close(struct curd_device *device);

/* The two pools' statistics, for curd_device_stats and its reset. */
void curdi_memory_stats(struct curd_device *device, curd_stats *stats);
void curdi_memory_stats_reset(struct curd_device *device);

/* The default cache budget of a device pool for a device of total_bytes. */
uint64_t curdi_memory_default_device_cache(uint64_t total_bytes);

/* The pool of a kind; NULL for a kind that is not a curd_pool_kind. */
curdi_pool *curdi_memory_pool(struct curd_device *device, curd_pool_kind kind);

/* A block of the device pool (device memory) of at least byte_len bytes,
 * and its release: curdi_pool_acquire and _release on the device's pool,
 * for the modules above memory/. */
curd_status curdi_memory_device_acquire(struct curd_device *device,
                                        size_t byte_len,
                                        uint64_t *out_address,
                                        size_t *out_class_bytes);
curd_status curdi_memory_device_release(struct curd_device *device,
                                        uint64_t address);
/* Pinned staging of byte_len bytes from the device's pinned pool
 * (curdi_staging_acquire on it); curdi_staging_release gives it back. */
curd_status curdi_memory_staging_acquire(struct curd_device *device,
                                         size_t byte_len,
                                         curdi_staging *out_staging);

/* curd_block_acquire / curd_block_release for the library's own modules
 * (device already validated): the same checks on everything else. */
curd_status curdi_memory_block_acquire(struct curd_device *device,
                                       curd_pool_kind kind, size_t byte_len,
                                       curd_block *out_block);
curd_status curdi_memory_block_release(struct curd_device *device,
                                       const curd_block *block);

#endif
