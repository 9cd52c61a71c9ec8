/* plan.h - the plan of a transfer (pure: no driver).
 *
 * A batch's validated items become fused spans (lib/transfer/spans.c); each
 * span is moved either directly (its host side is one registered range)
 * or through a staging stream that is cut into chunks and pipelined: the
 * host copy of one chunk overlaps the DMA of another. Many small spans
 * are gathered: a kernel packs them into a chunk's host side, or unpacks
 * them from it, across the bus (lib/transfer/gather.h), so each chunk is
 * one launch however many spans it holds. Equal copies at equal strides
 * (every other 4 KiB of a buffer, the rows of a matrix) join into rows
 * that cross the bus in one strided DMA. lib/transfer/engine.h runs a
 * plan. */
#ifndef CURD_LIB_TRANSFER_PLAN_H
#define CURD_LIB_TRANSFER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "transfer/copy_team.h"
#include "transfer/tuning.h"

/* malloc (or calloc when zeroed) of count elements, the product checked;
 * NULL for count 0. CURD_E_OVERFLOW or CURD_E_OUT_OF_MEMORY, with a
 * sentence, for a transfer's per-item arrays. */
curd_status curdi_plan_alloc(size_t count, size_t element_bytes, bool zeroed,
                             void **out);

/* ------------------------------------------------------------------------
 * The plan (pure).
 * ---------------------------------------------------------------------- */

/* One item of a batch after validation: a range of a resident buffer and
 * the caller memory it comes from (upload) or goes to (download). */
typedef struct curdi_transfer_item {
    uint64_t buffer_key;   /* the buffer's handle id */
    uint64_t device_base;  /* the buffer's device pointer */
    uint64_t offset;       /* within the buffer; range already checked */
    uint64_t byte_len;
    unsigned char *host;   /* src or dst; NULL only when byte_len is 0 */
    /* Start of the registered host range that holds [host, host +
     * byte_len), or 0 when that memory is not registered. */
    uintptr_t registered_key;
} curdi_transfer_item;

typedef enum curdi_span_mode {
    /* Through the staging stream: host copy plus one DMA per chunk piece. */
    CURDI_SPAN_STAGED = 0,
    /* One DMA between the device and the span's host side, which is one
     * contiguous run inside one registered range (or one small pageable
     * upload the driver takes at the call,
     * curdi_plan_pageable_direct). */
    CURDI_SPAN_DIRECT = 1,
    /* One DMA per item, straight from or to registered memory (items
     * large enough that a DMA each costs less than staging them). */
    CURDI_SPAN_DIRECT_ITEMS = 2
} curdi_span_mode;

/* ------------------------------------------------------------------------
 * Rows: copies of one width at one stride on each side, which one strided
 * DMA moves as fast as one contiguous copy of the same bytes (measured on
 * the H100: doc/PERFORMANCE.md).
 * ---------------------------------------------------------------------- */

/* count rows of width bytes, row r at device_ptr + r * device_pitch and
 * host + r * host_pitch (the pitches are 0 while there is one row). The
 * device side lies in the buffer device_key names, the host side in the
 * one page-locked area host_key names (a registered range or a staging
 * slot), so the rows' whole extent is one allocation on each side. The
 * engine collects them (a copy joins when it is the next row: the same
 * keys and width, one pitch on from the last on each side, the second row
 * setting each pitch at least the width, so rows never overlap, and at
 * most the device's largest) and hands them to ops.copy_rows. */
typedef struct curdi_plan_rows {
    uint64_t device_ptr;
    uintptr_t host;
    uint64_t width;
    uint64_t count; /* 0: no rows yet */
    uint64_t device_pitch;
    uint64_t host_pitch;
    uint64_t device_key;
    uintptr_t host_key; /* 0: pageable memory, which never joins */
    /* Where the next row would start (count at least 2). */
    uint64_t next_device;
    uintptr_t next_host;
} curdi_plan_rows;

/* Makes run the one row [device_ptr, + byte_len) <-> [host, + byte_len). */
static inline void curdi_plan_rows_start(curdi_plan_rows *run,
                                         uint64_t device_key,
                                         uintptr_t host_key,
                                         uint64_t device_ptr, uintptr_t host,
                                         uint64_t byte_len)
{
    run->device_ptr = device_ptr;
    run->host = host;
    run->width = byte_len;
    run->count = 1;
    run->device_pitch = 0;
    run->host_pitch = 0;
    run->device_key = device_key;
    run->host_key = host_key;
}

/* Adds that copy to run as its next row and returns true when it is one
 * (see above; max_pitch 0: nothing joins); otherwise returns false and
 * leaves run as it was. Called for every copy of a plan, twice (the
 * planner and the engine), so the common case is two compares, inline in
 * both. */
static inline bool curdi_plan_rows_join(curdi_plan_rows *run,
                                        uint64_t device_key,
                                        uintptr_t host_key,
                                        uint64_t device_ptr, uintptr_t host,
                                        uint64_t byte_len, uint64_t max_pitch)
{
    if (run->count == 0 || byte_len != run->width
        || device_key != run->device_key || host_key != run->host_key
        || host_key == 0)
        return false;
    if (run->count >= 2) {
        if (device_ptr != run->next_device || host != run->next_host)
            return false;
    } else {
        /* The second row sets the pitches. */
        if (device_ptr <= run->device_ptr || host <= run->host
            || device_ptr - run->device_ptr < byte_len
            || device_ptr - run->device_ptr > max_pitch
            || host - run->host < byte_len || host - run->host > max_pitch)
            return false;
        run->device_pitch = device_ptr - run->device_ptr;
        run->host_pitch = host - run->host;
    }
    run->count++;
    /* Past the end of memory the sums wrap to an address no next row can
     * have. */
    run->next_device = device_ptr + run->device_pitch;
    run->next_host = host + (uintptr_t)run->host_pitch;
    return true;
}

typedef struct curdi_plan_span {
    uint64_t device_ptr;    /* device address of the span's first byte */
    uint64_t byte_len;
    uint64_t stream_offset; /* CURDI_SPAN_STAGED: where it starts */
    unsigned char *host;    /* CURDI_SPAN_DIRECT: host side's first byte */
    uint64_t member_bytes;  /* its items' lengths summed */
    uint32_t mode;          /* curdi_span_mode */
    size_t first_member;    /* into plan.members */
    size_t member_count;
} curdi_plan_span;

typedef struct curdi_plan {
    /* spans, members, item_stream_offset and staged_items share one
     * allocation; curdi_plan_free frees it. */
    curdi_plan_span *spans;
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
    size_t staged_span_count;
    uint64_t stream_bytes; /* bytes through staging */
    uint64_t dma_bytes;    /* bytes that cross the bus (spans' total) */
    /* Two staged items share bytes: an upload then copies its items into
     * staging one after another in item order, so the later item wins. */
    bool overlapping;
    /* Each chunk of the staged stream crosses the bus in one kernel
     * launch instead of one DMA per span: a kernel packs the chunk's
     * spans into its page-locked host side (gather), or places them from
     * it (scatter), reaching that memory across the bus (lib/transfer/gather.h). Spans
     * never share device bytes (overlapping items fuse into one span), so
     * the kernel's writes never race; where uploads overlap, the host
     * copies into the stream already let the later item win. */
    bool gather;
    /* When gathering and every staged item lies in one registered range
     * laid out exactly as the stream (host - stream offset the same for
     * all): the host address of stream byte 0. The kernels then move the
     * chunks straight between it and the spans, with no pinned staging
     * and no host copy. NULL otherwise. */
    unsigned char *gather_host;
    /* A rows plan (curdi_plan_build_rows): its one direct span crosses as
     * these rows, one strided DMA. count 0 in any other plan. */
    curdi_plan_rows rows;
    /* A plan of one span (one item, or rows) keeps its arrays here and
     * allocates nothing; a plan therefore points into itself, and is
     * built where it stays. */
    curdi_plan_span one_span;
    size_t one_member[2]; /* members[0] and staged_items[0] */
    uint64_t one_stream_offset;
} curdi_plan;

/* Builds the plan of count validated items. A span is direct when its
 * host side is registered and either is one contiguous run (items adjacent
 * on both sides, in the same order) or its items average at least
 * CURDI_DIRECT_ITEM_MIN_BYTES. With gather (NULL: never, as when the
 * device cannot run the kernels), the staged stream is gathered when the
 * policy says so (curdi_plan_wants_gather) of the DMAs its candidate spans
 * would take, spans that join into rows (pitches up to max_pitch, 0: none)
 * counting once; small direct spans then join the stream, since one
 * launch for all of them beats a DMA each.
 * CURD_E_OUT_OF_MEMORY or CURD_E_OVERFLOW. */
#define CURDI_DIRECT_ITEM_MIN_BYTES ((uint64_t)256 * 1024)
curd_status curdi_plan_build(const curdi_transfer_item *items, size_t count,
                             const curdi_gather_policy *gather,
                             uint64_t max_pitch,
                             curdi_plan *out_plan);
void curdi_plan_free(curdi_plan *plan);

/* The plan of count rows (at least 2), items[r] being row r: one buffer,
 * one length, device_pitch and host_pitch apart (each at least the
 * length and at most the device's largest, as curdi_plan_rows says), the
 * rows moving forward on both sides. When items[0].registered_key is not
 * 0 the rows' whole host extent lies in that registered range: one direct
 * span, one strided DMA, no allocation. Otherwise the rows are staged,
 * one span each, back to back in the stream (the engine joins their DMAs
 * into rows again). The caller checked the device extent against the
 * buffer, so count * length cannot wrap. CURD_E_OUT_OF_MEMORY or
 * CURD_E_OVERFLOW for a staged plan's arrays. */
curd_status curdi_plan_build_rows(const curdi_transfer_item *items, size_t count,
                                  uint64_t device_pitch, uint64_t host_pitch,
                                  curdi_plan *plan);

/* The crossover (pure, for the planner and its tests): whether spans of
 * span_bytes in total, which would take dma_count DMAs, are gathered under
 * policy. CURDI_PATH_GATHER: whenever there is one; CURDI_PATH_DMA: never;
 * auto: at least min_spans DMAs averaging at most max_span_bytes. */
bool curdi_plan_wants_gather(const curdi_gather_policy *policy,
                             size_t dma_count, uint64_t span_bytes);

/* Where an upload plan is one small item from pageable memory
 * (byte_len at most max_bytes, nothing gathered), makes its one span
 * direct from the caller's memory and empties the stream: the driver
 * copies a small pageable upload into its own command stream at the call,
 * sooner than a copy into staging and a DMA from it. Returns whether it
 * did; any other plan is left as it was. */
bool curdi_plan_pageable_direct(curdi_plan *plan,
                                const curdi_transfer_item *items,
                                size_t count, uint64_t max_bytes);

/* The chunk size the engine pipelines stream_bytes in: the whole stream
 * up to min_bytes, else a quarter of it rounded up to 4 KiB, kept between
 * min_bytes and max_bytes. */
uint64_t curdi_plan_chunk_bytes(uint64_t stream_bytes, uint64_t min_bytes,
                                uint64_t max_bytes);
/* Staging slots the engine cycles through for chunk_count chunks: at most
 * max_slots (itself at most CURDI_PLAN_SLOTS_MAX). */
#define CURDI_PLAN_SLOTS_MAX CURDI_STAGING_SLOTS_MAX
unsigned curdi_plan_slot_count(uint64_t chunk_count, uint64_t max_slots);

/* ------------------------------------------------------------------------
 * The host side's policy: how a plan's stream is cut and copied, decided
 * here so the CPU tests cover it (tests/test-plan.c) and the run only
 * takes what it says.
 * ---------------------------------------------------------------------- */

/* What a plan's host side needs under a device's tuning. */
typedef struct curdi_plan_host {
    /* The stream in chunks of chunk_bytes (curdi_plan_chunk_bytes),
     * chunk_count of them (0: nothing staged), cycling through slot_count
     * staging slots (0 when the plan gathers straight to its registered
     * memory: nothing to stage), with an event per slot when there is
     * more than one chunk. */
    uint64_t chunk_bytes;
    uint64_t chunk_count;
    unsigned slot_count;
    unsigned event_count;
    /* Host copies use curdi_copy_team_streaming: a download of at least
     * streaming_download_min, an upload of at least streaming_upload_min
     * that is not a long one. */
    bool streaming;
    /* A download staged for pageable memory, of at most
     * touch_download_max bytes and without streaming stores: the caller
     * reads in the lines of its last copy-out while the DMAs run. */
    bool touches;
    /* The stream is at least copy_parallel_min and has host copies: the
     * device's copy team shares them. */
    bool wants_team;
    /* A long upload (at least upload_growth_min staged): it grows the
     * team for its own time and copies through the cache. */
    bool grows_team;
    /* An upper bound on the DMAs, for the counters' check before the
     * work: one per span or item, plus one per chunk boundary a span
     * crosses. */
    uint64_t copy_ops_bound;
} curdi_plan_host;

/* Decides the host side of plan, of count items, for an upload or a
 * download under tuning. An upload's plan of one small item from
 * pageable memory first becomes direct (curdi_plan_pageable_direct, up
 * to tuning's pageable_direct_max), so the plan may change. */
void curdi_plan_decide_host(curdi_plan *plan, const curdi_transfer_item *items,
                            size_t count, bool upload,
                            const curdi_tuning *tuning,
                            curdi_plan_host *out_host);

/* How a run shares its host copies with a copy team of team_workers
 * threads (the caller copies too). */
typedef struct curdi_plan_team {
    /* The size host copies are cut into: the tuning's, or smaller, so
     * that each worker and the caller get a piece of a small chunk. */
    uint64_t piece_bytes;
    /* The workers given pieces (one piece of a chunk is the caller's),
     * warmed for warm_window_ns: the first DMA's latency and a
     * pessimistic 4 GB/s for the rest of the stream. */
    unsigned warm_workers;
    uint64_t warm_window_ns;
} curdi_plan_team;

void curdi_plan_team_share(const curdi_tuning *tuning, unsigned team_workers,
                           uint64_t chunk_bytes, uint64_t stream_bytes,
                           curdi_plan_team *out_team);

/* The workers a long upload adds to a team of team_workers threads on a
 * host of processors online: the tuning's, but never so many that the
 * team, the caller and the rest of the system (one processor) share a
 * processor. */
unsigned curdi_plan_team_growth(const curdi_tuning *tuning, long processors,
                                unsigned team_workers);

#endif
