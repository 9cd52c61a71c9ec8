/* xfer.h - the plan and the engine of a transfer (pure: no driver).
 *
 * A batch's validated items become fused spans (lib/copyplan.c); each span
 * is moved either directly (its host side is one registered range) or
 * through a staging stream that is cut into chunks and pipelined: the host
 * copy of one chunk overlaps the DMA of another. The engine reaches the
 * device only through a small table of operations (copy, mark, wait,
 * finish), which lib/transfer.c fills with driver calls and
 * tests/test-transfer.c with a deferred-DMA stand-in. */
#ifndef CURD_LIB_XFER_H
#define CURD_LIB_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copyteam.h"
#include "curd.h"

/* malloc (or calloc when zeroed) of count elements, the product checked;
 * NULL for count 0. CURD_E_OVERFLOW or CURD_E_OUT_OF_MEMORY, with a
 * sentence, for a transfer's per-item arrays. */
curd_status curdi_xfer_alloc(size_t count, size_t element_bytes, bool zeroed,
                             void **out);

/* ------------------------------------------------------------------------
 * The plan (pure).
 * ---------------------------------------------------------------------- */

/* One item of a batch after validation: a range of a resident buffer and
 * the caller memory it comes from (upload) or goes to (download). */
typedef struct curdi_xfer_item {
    uint64_t buffer_key;   /* the buffer's handle id */
    uint64_t device_base;  /* the buffer's device pointer */
    uint64_t offset;       /* within the buffer; range already checked */
    uint64_t byte_len;
    unsigned char *host;   /* src or dst; NULL only when byte_len is 0 */
    /* Start of the registered host range that holds [host, host +
     * byte_len), or 0 when that memory is not registered. */
    uintptr_t registered_key;
} curdi_xfer_item;

typedef enum curdi_span_mode {
    /* Through the staging stream: host copy plus one DMA per chunk piece. */
    CURDI_SPAN_STAGED = 0,
    /* One DMA between the device and the span's host side, which is one
     * contiguous run inside one registered range. */
    CURDI_SPAN_DIRECT = 1,
    /* One DMA per item, straight from or to registered memory (items
     * large enough that a DMA each costs less than staging them). */
    CURDI_SPAN_DIRECT_ITEMS = 2
} curdi_span_mode;

typedef struct curdi_xfer_span {
    uint64_t device_ptr;    /* device address of the span's first byte */
    uint64_t byte_len;
    uint64_t stream_offset; /* CURDI_SPAN_STAGED: where it starts */
    unsigned char *host;    /* CURDI_SPAN_DIRECT: host side's first byte */
    uint32_t mode;          /* curdi_span_mode */
    size_t first_member;    /* into plan.members */
    size_t member_count;
} curdi_xfer_span;

typedef struct curdi_xfer_plan {
    /* spans, members, item_stream_offset and staged_items share one
     * allocation; curdi_xfer_plan_free frees it. */
    curdi_xfer_span *spans;
    size_t span_count;
    /* Non-empty item indices grouped by span; within a span in device
     * order (offset, then item index), or in item order when the span's
     * members overlap (the later of overlapping uploads must land last). */
    size_t *members;
    /* Per item: its first byte's offset in the staging stream (items of
     * staged spans only; others 0). */
    uint64_t *item_stream_offset;
    /* Items of staged spans, ordered by (stream offset, item index). */
    size_t *staged_items;
    size_t staged_item_count;
    uint64_t stream_bytes; /* bytes through staging */
    uint64_t dma_bytes;    /* bytes that cross the bus (spans' total) */
    /* Two staged items share bytes: an upload then copies its items into
     * staging one after another in item order, so the later item wins. */
    bool overlapping;
} curdi_xfer_plan;

/* Builds the plan of count validated items. A span is direct when its
 * host side is registered and either is one contiguous run (items adjacent
 * on both sides, in the same order) or its items average at least
 * CURDI_DIRECT_ITEM_MIN_BYTES. CURD_E_OUT_OF_MEMORY or CURD_E_OVERFLOW. */
#define CURDI_DIRECT_ITEM_MIN_BYTES ((uint64_t)256 * 1024)
curd_status curdi_xfer_plan_build(const curdi_xfer_item *items, size_t count,
                                  curdi_xfer_plan *out_plan);
void curdi_xfer_plan_free(curdi_xfer_plan *plan);

/* The chunk size the engine pipelines stream_bytes in: the whole stream
 * up to 1 MiB, else a quarter of it rounded up to 64 KiB, between 1 MiB
 * and 8 MiB. */
uint64_t curdi_xfer_chunk_bytes(uint64_t stream_bytes);
/* A download that stages at least this many bytes writes caller memory
 * with curdi_copy_streaming (lib/copyteam.h): measured on an H100 host,
 * a 256 MiB download into malloc memory went from ~8 ms to ~5.2 ms (the
 * 6 copy threads' plain memcpy out of staging was the bottleneck, at
 * ~32 GB/s against the DMA's 55 GB/s). Smaller downloads keep memcpy,
 * which leaves the bytes in cache for the caller. Uploads keep memcpy
 * too: staging that a DMA reads next is better written through the
 * cache (streaming stores made the 256 MiB upload slower there). */
#define CURDI_XFER_STREAMING_MIN ((uint64_t)16 << 20)
/* Staging slots the engine cycles through for chunk_count chunks (1 to
 * CURDI_XFER_SLOTS_MAX). */
#define CURDI_XFER_SLOTS_MAX 3u
unsigned curdi_xfer_slot_count(uint64_t chunk_count);

/* ------------------------------------------------------------------------
 * The engine (pure: reaches the device through ops).
 * ---------------------------------------------------------------------- */

typedef struct curdi_xfer_ops {
    /* Enqueues one DMA: host -> device when upload, else device -> host. */
    curd_status (*copy)(void *context, bool upload, uint64_t device_ptr,
                        unsigned char *host, uint64_t byte_len);
    /* Marks the point after the DMAs enqueued so far that touch staging
     * slot `slot`, so a later wait(slot) returns once they are done. */
    curd_status (*mark)(void *context, unsigned slot);
    curd_status (*wait)(void *context, unsigned slot);
    /* The one fence: returns once every DMA enqueued is done. */
    curd_status (*finish)(void *context);
    void *context;
} curdi_xfer_ops;

typedef struct curdi_xfer_result {
    uint64_t dma_ops;   /* copy calls made */
    uint64_t dma_bytes; /* bytes they moved */
    uint64_t fences;    /* finish calls made: 1, or 0 when nothing moved */
} curdi_xfer_result;

/* Moves the plan's bytes. slots are slot_count staging areas of at least
 * chunk_bytes each (only needed when plan->stream_bytes > 0). On success
 * every byte has arrived and finish was called once; on failure the
 * caller must drain whatever was enqueued before reusing the slots.
 * team may be NULL. */
curd_status curdi_xfer_execute(const curdi_xfer_plan *plan,
                               const curdi_xfer_item *items, bool upload,
                               unsigned char *const *slots,
                               unsigned slot_count, uint64_t chunk_bytes,
                               const curdi_xfer_ops *ops,
                               curdi_copy_team *team,
                               curdi_xfer_result *out_result);

#endif
