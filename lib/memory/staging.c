/* staging.c - bounds-checked copies through page-locked staging blocks
 * (see staging.h). */
#include "memory/staging.h"

#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "memory/pool.h"

curd_status curdi_staging_acquire(curdi_pool *pool, size_t byte_len,
                                  curdi_staging *out_staging)
{
    if (out_staging == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_staging_acquire: out_staging is NULL. Fix: "
                          "pass the address of a curdi_staging.");
    if (byte_len == 0) {
        /* Nothing to stage: no block, no pool call. */
        memset(out_staging, 0, sizeof *out_staging);
        return CURD_OK;
    }
    if (pool == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_staging_acquire: pool is NULL for %zu bytes. "
                          "Fix: stage through the device's pinned pool.",
                          byte_len);
    uint64_t address = 0;
    size_t class_bytes = 0;
    curd_status status =
        curdi_pool_acquire(pool, byte_len, &address, &class_bytes);
    if (status != CURD_OK)
        return status;
    /* The pool's addresses are host pointers (pinned or host memory). */
    curdi_staging staging = {
        .pool = pool,
        .host = (unsigned char *)(uintptr_t)address,
        .byte_len = byte_len,
        .class_bytes = class_bytes,
    };
    *out_staging = staging;
    return CURD_OK;
}

curd_status curdi_staging_release(curdi_staging *staging)
{
    if (staging == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_staging_release: staging is NULL. Fix: pass "
                          "the area curdi_staging_acquire() filled in.");
    if (staging->host == NULL && staging->byte_len == 0)
        return CURD_OK; /* empty: nothing was acquired */
    if (staging->pool == NULL || staging->host == NULL)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "curdi_staging_release: the staging area (pool %p, "
                          "host %p, %zu bytes) was not filled in by "
                          "curdi_staging_acquire(). Fix: release the area "
                          "that acquire gave, once.",
                          (void *)staging->pool, (void *)staging->host,
                          staging->byte_len);
    curd_status status =
        curdi_pool_release(staging->pool, (uint64_t)(uintptr_t)staging->host);
    if (status != CURD_OK)
        return status;
    memset(staging, 0, sizeof *staging);
    return CURD_OK;
}

/* The area itself must be well formed: bytes behind any non-zero length. */
static curd_status check_area(const curdi_staging *staging, const char *call)
{
    if (staging == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: staging is NULL. Fix: pass an area from "
                          "curdi_staging_acquire().",
                          call);
    if (staging->host == NULL && staging->byte_len != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the staging area claims %zu bytes but has no "
                          "memory. Fix: pass an area from "
                          "curdi_staging_acquire().",
                          call, staging->byte_len);
    return CURD_OK;
}

curd_status curdi_staging_write(const curdi_staging *staging, size_t offset,
                                size_t transfer_len, const void *src,
                                size_t src_len)
{
    curd_status status = check_area(staging, "curdi_staging_write");
    if (status != CURD_OK)
        return status;
    if (src == NULL && src_len != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_staging_write: src is NULL for %zu bytes. "
                          "Fix: pass the source bytes.",
                          src_len);
    if (src_len > transfer_len)
        return curdi_fail(CURD_E_RANGE,
                          "curdi_staging_write: %zu source bytes do not fit "
                          "a transfer of %zu bytes. Fix: make the transfer "
                          "at least as long as its source.",
                          src_len, transfer_len);
    status = curdi_checked_range(offset, transfer_len, staging->byte_len,
                                 "staging write range");
    if (status != CURD_OK)
        return status;
    if (transfer_len == 0)
        return CURD_OK;
    /* Safe: [offset, offset + transfer_len) lies within the block's
     * byte_len (checked above) and src_len <= transfer_len. memmove, since
     * a caller may stage bytes that already sit in the area. */
    if (src_len != 0)
        memmove(staging->host + offset, src, src_len);
    memset(staging->host + offset + src_len, 0, transfer_len - src_len);
    return CURD_OK;
}

curd_status curdi_staging_read(const curdi_staging *staging, size_t offset,
                               size_t byte_len, void *dst, size_t dst_capacity)
{
    curd_status status = check_area(staging, "curdi_staging_read");
    if (status != CURD_OK)
        return status;
    if (dst == NULL && byte_len != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curdi_staging_read: dst is NULL for %zu bytes. "
                          "Fix: pass caller memory for the result.",
                          byte_len);
    status = curdi_checked_range(offset, byte_len, staging->byte_len,
                                 "staging read range");
    if (status != CURD_OK)
        return status;
    if (byte_len > dst_capacity)
        return curdi_fail(CURD_E_RANGE,
                          "curdi_staging_read: %zu bytes do not fit a "
                          "destination of %zu bytes. Fix: pass a destination "
                          "with space for the whole range, or read less.",
                          byte_len, dst_capacity);
    /* Safe: the range lies within the block and within dst_capacity. */
    if (byte_len != 0)
        memmove(dst, staging->host + offset, byte_len);
    return CURD_OK;
}
