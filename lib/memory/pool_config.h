/* pool_config.h - what a pool is made over and with: its upstream
 * allocator, the steps of the out-of-memory ladder that reach past it, its
 * configuration and its shard count.
 *
 * A header alone, below the pool's modules, because they all need these
 * types (the pool's layout in pool_shards.h holds the upstream and the
 * relieve callback) while memory/pool.h, the pool's interface to the rest of
 * the library, stands above them; pool.h includes it, so its users see no
 * difference. */
#ifndef CURD_LIB_MEMORY_POOL_CONFIG_H
#define CURD_LIB_MEMORY_POOL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

typedef struct curdi_upstream {
    /* CURD_OK with *out_address set; CURD_E_OUT_OF_MEMORY when the upstream
     * lacks memory (the pool then runs its recovery ladder); any other
     * status is reported as is (the message already set). */
    curd_status (*alloc)(void *context, size_t byte_len, uint64_t *out_address);
    /* The block is gone whatever this returns. */
    curd_status (*free)(void *context, uint64_t address, size_t byte_len);
    /* Optional (NULL: not known): the memory the upstream has free now, for
     * the out-of-memory message. Returns false when it cannot tell. */
    bool (*free_bytes)(void *context, uint64_t *out_free_bytes);
    void *context;
} curdi_upstream;

/* Steps of the out-of-memory ladder that reach beyond one pool. */
typedef enum curdi_relief_step {
    CURDI_RELIEF_RECLAIM = 1,  /* the application's reclaim callback */
    CURDI_RELIEF_TRIM_ALL = 2  /* every cached block of every device pool */
} curdi_relief_step;

typedef struct curdi_pool_config {
    const char *name; /* "device" or "pinned", for messages */
    /* Which pointer of a curd_block carries its address
     * (curdi_pool_acquire_block): device_ptr for CURD_POOL_DEVICE,
     * host_ptr for CURD_POOL_PINNED; also its pool_kind. */
    curd_pool_kind kind;
    uint64_t cache_budget_bytes;
    uint64_t live_limit_bytes; /* 0: no cap */
    /* The most memory the upstream has in all (a device's total memory,
     * the host's physical memory); 0: not known. A request whose class is
     * larger can never be met, so it is refused before anything is tried:
     * no cache trimmed, no callback asked, no counter moved. */
    uint64_t upstream_total_bytes;
    /* Called with no pool lock held; returns the bytes it freed. NULL: the
     * ladder skips those steps. */
    uint64_t (*relieve)(void *context, uint64_t bytes_needed,
                        curdi_relief_step step);
    void *relieve_context;
} curdi_pool_config;

typedef struct curdi_pool curdi_pool;

/* A pool is split into this many shards, one per thread while no more
 * threads than that are alive at once. */
#define CURDI_POOL_SHARD_COUNT 16u

#endif
