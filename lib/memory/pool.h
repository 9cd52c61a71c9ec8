/* pool.h - a size-class cache over an upstream allocator.
 *
 * One implementation serves device memory (cuMemAlloc/cuMemFree), pinned
 * host memory (cuMemHostAlloc/cuMemFreeHost) and, in the tests, plain host
 * memory. Addresses are uint64_t so one type carries both a CUdeviceptr and
 * a host pointer. The pool never holds a lock across an upstream call. */
#ifndef CURD_LIB_MEMORY_POOL_H
#define CURD_LIB_MEMORY_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/pool_config.h"

curd_status curdi_pool_lifecycle_create(const curdi_upstream *upstream,
                                        const curdi_pool_config *config,
                                        curdi_pool **out_pool);
/* Frees every cached block and every block still live, upstream. */
void curdi_pool_lifecycle_destroy(curdi_pool *pool);

curd_status curdi_pool_acquire(curdi_pool *pool, size_t byte_len,
                               uint64_t *out_address, size_t *out_class_bytes);
/* CURD_E_STALE_HANDLE, with nothing changed, for an address this pool does
 * not have live (released twice, another pool's, foreign). */
curd_status curdi_pool_release(curdi_pool *pool, uint64_t address);
/* The pair behind curd_block_acquire and curd_block_release, on the
 * public curd_block itself (a hit is some tens of nanoseconds, and a
 * layer that copied the block's fields in and out was a tenth of it). The
 * block is handed out with a token (curd_block.reserved), which names its
 * record so that the release finds it without a table, and a hit of a
 * class up to 64 KiB may come from (and go back to) the calling thread's
 * own front, with no lock (pool_fronts.c says how). The token is 0 for a
 * block the pool keeps in a live table instead (past 2^24 - 1 records).
 * The acquire fills *out_block only on success; pool, out_block and
 * byte_len != 0 are the caller's to check. The release (block not NULL,
 * of this pool's kind) is CURD_E_STALE_HANDLE, with nothing changed,
 * unless every field is what the pool handed out and the block is still
 * out; a block handed out this way is not released by curdi_pool_release,
 * nor one of curdi_pool_acquire's by this. */
curd_status curdi_pool_acquire_block(curdi_pool *pool, size_t byte_len,
                                     curd_block *out_block);
curd_status curdi_pool_release_block(curdi_pool *pool,
                                     const curd_block *block);
/* The release's refusal of a block that is not one curd hands out (its
 * kind names no pool, a pointer is where the other should be, its sizes
 * cannot be): CURD_E_STALE_HANDLE, the block's fields in the sentence. */
curd_status curdi_pool_fail_foreign_block(const curd_block *block);
/* Frees cached blocks upstream, largest class first, until at most
 * keep_bytes stay cached; sets *out_freed_bytes (may be NULL) to the bytes
 * freed. CURD_E_OVERFLOW, with nothing freed, when a cumulative counter
 * lacks headroom to count the trim (curdi_pool_report_stats_reset
 * restores the headroom). A NULL pool has nothing to trim: CURD_OK. */
curd_status curdi_pool_trim_checked(curdi_pool *pool, uint64_t keep_bytes,
                                    uint64_t *out_freed_bytes);
/* The same trim where freeing nothing is an answer, not an error (the
 * out-of-memory ladder's steps, which are best effort): returns the bytes
 * freed, 0 when the trim could not be counted. */
uint64_t curdi_pool_trim(curdi_pool *pool, uint64_t keep_bytes);

void curdi_pool_report_stats(curdi_pool *pool, curd_pool_stats *out);
void curdi_pool_report_stats_reset(curdi_pool *pool);

/* The calling thread's shard index, below CURDI_POOL_SHARD_COUNT and the
 * same in every pool: taken on the thread's first pool call (this one, if
 * none came before) and given back when the thread exits. For tests. */
unsigned curdi_pool_thread_shard(void);

#endif
