/* staging.h - page-locked staging areas for transfers.
 *
 * A transfer from or to pageable caller memory goes through a block of a
 * host pool (the device's pinned pool): the caller's bytes are copied in
 * (bounds-checked, the rest of the transfer length zeroed so that no stale
 * bytes of an earlier user of the block reach the device), the DMA runs
 * from the block, and results are copied out into caller memory of a
 * stated capacity.
 *
 * A zero-byte transfer acquires nothing: curdi_staging_acquire of 0 bytes
 * gives an empty staging area (host NULL) without touching the pool, and
 * releasing it is a no-op. Every function validates all of its arguments
 * before it writes a byte. */
#ifndef CURD_LIB_MEMORY_STAGING_H
#define CURD_LIB_MEMORY_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"

typedef struct curdi_pool curdi_pool; /* memory/pool.h */

typedef struct curdi_staging {
    curdi_pool *pool;    /* NULL when empty */
    unsigned char *host; /* the block's host address; NULL when empty */
    size_t byte_len;     /* the transfer length it was acquired for */
    size_t class_bytes;  /* what the block holds (>= byte_len) */
} curdi_staging;

/* Acquires a block of byte_len bytes from a pool whose addresses are host
 * pointers (the pinned pool, or a host pool in the tests). byte_len 0
 * gives an empty area and leaves the pool alone (pool may then be NULL). */
curd_status curdi_staging_acquire(curdi_pool *pool, size_t byte_len,
                                  curdi_staging *out_staging);
/* Gives the block back to its pool and empties *staging; an empty area is
 * a no-op. */
curd_status curdi_staging_release(curdi_staging *staging);

/* Copies src_len bytes of src to [offset, offset + src_len) and zeroes
 * [offset + src_len, offset + transfer_len). [offset, offset +
 * transfer_len) must lie within the area's byte_len, and src_len may not
 * exceed transfer_len (CURD_E_RANGE; CURD_E_OVERFLOW when the end passes
 * 2^64). src may overlap the area. */
curd_status curdi_staging_write(const curdi_staging *staging, size_t offset,
                                size_t transfer_len, const void *src,
                                size_t src_len);
/* Copies [offset, offset + byte_len) of the area into dst, which holds
 * dst_capacity bytes (CURD_E_RANGE when byte_len is larger). */
curd_status curdi_staging_read(const curdi_staging *staging, size_t offset,
                               size_t byte_len, void *dst,
                               size_t dst_capacity);

#endif
