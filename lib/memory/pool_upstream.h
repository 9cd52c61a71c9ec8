/* pool_upstream.h - the pool's side facing its upstream: the calls,
 * timed and counted, the bytes held there, and the trim that gives
 * cached blocks back to it (pool_upstream.c). Only the pool's modules
 * include it. */
#ifndef CURD_LIB_MEMORY_POOL_UPSTREAM_H
#define CURD_LIB_MEMORY_POOL_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/pool_shards.h"

/* Bytes one pool may hold upstream (live + cached). */
#define RESERVED_MAX ((uint64_t)1 << 62)

/* The upstream's alloc and free, timed and counted (free also retires
 * the block's record); the bytes held upstream, refused past
 * RESERVED_MAX; and the trim: cached blocks freed, largest class first,
 * until at most `value` bytes stay cached (with `need`: until `value`
 * bytes were freed, if the cache has them), *out_freed the bytes freed,
 * CURD_E_OVERFLOW with nothing freed when a counter lacks headroom to count
 * the whole trim. */
curd_status curdi_pool_upstream_alloc(curdi_pool *pool, size_t class_bytes,
                                      uint64_t *out_address);
void curdi_pool_upstream_free(curdi_pool *pool, pool_block *block);
bool curdi_pool_upstream_reserved_add(curdi_pool *pool, uint64_t bytes);
curd_status curdi_pool_upstream_trim_cache(curdi_pool *pool, bool need,
                                           uint64_t value,
                                           uint64_t *out_freed);

#endif
