/* engine.h - the engine that runs a transfer's plan (pure: no driver).
 *
 * The engine moves a plan's bytes (lib/transfer/plan.h): the direct spans
 * one DMA each (copies of one width at one stride joined into rows, one
 * strided DMA), the staged stream chunk by chunk through a few staging
 * slots, the host copy of one chunk (shared with the copy team) under
 * the DMAs of another, or one gathered launch per chunk. It reaches the
 * device only through a small table of operations (copy, copy_rows,
 * gathered, mark, wait, finish), which lib/transfer/run.c fills with
 * driver calls and tests/test-transfer.c with a deferred-DMA stand-in. */
#ifndef CURD_LIB_TRANSFER_ENGINE_H
#define CURD_LIB_TRANSFER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "transfer/copy_team.h"
#include "transfer/plan.h"

/* One piece of a chunk: device bytes and where they sit in the chunk. */
typedef struct curdi_engine_piece {
    uint64_t device_ptr;
    uint64_t stage_offset; /* from the chunk's first byte */
    uint64_t byte_len;
} curdi_engine_piece;

typedef struct curdi_engine_ops {
    /* Enqueues one DMA: host -> device when upload, else device -> host. */
    curd_status (*copy)(void *context, bool upload, uint64_t device_ptr,
                        unsigned char *host, uint64_t byte_len);
    /* Enqueues one strided DMA of run's rows (at least two; its keys are
     * the engine's business). NULL, or max_pitch 0: the engine never
     * joins copies into rows. */
    curd_status (*copy_rows)(void *context, bool upload,
                             const curdi_plan_rows *run);
    uint64_t max_pitch;
    /* Gathering plans only (may be NULL otherwise): moves one chunk
     * between its page-locked host side host[0, byte_len) and its pieces'
     * device bytes in one kernel launch (scatter for an upload, gather
     * for a download). pieces come in stage_offset order, back to back
     * from 0 to byte_len. Ordered like a DMA: mark, wait and finish cover
     * it. */
    curd_status (*gathered)(void *context, bool upload, unsigned char *host,
                            uint64_t byte_len, const curdi_engine_piece *pieces,
                            size_t count);
    /* Marks the point after the DMAs enqueued so far that touch staging
     * slot `slot`, so a later wait(slot) returns once they are done. */
    curd_status (*mark)(void *context, unsigned slot);
    curd_status (*wait)(void *context, unsigned slot);
    /* The one fence: returns once every DMA enqueued is done. */
    curd_status (*finish)(void *context);
    void *context;
} curdi_engine_ops;

typedef struct curdi_engine_result {
    uint64_t dma_ops;   /* copy and copy_rows calls made, and one per
                           gathered chunk (its launch: one operation
                           across the bus) */
    uint64_t dma_bytes; /* bytes they moved */
    uint64_t fences;    /* finish calls made: 1, or 0 when nothing moved */
} curdi_engine_result;

/* The host side of a plan's stream. */
typedef struct curdi_engine_staging {
    /* slot_count pinned areas of at least chunk_bytes each (none when
     * stream_bytes is 0 or the plan gathers straight to gather_host). */
    unsigned char *const *slots;
    unsigned slot_count;
    uint64_t chunk_bytes;
    uint64_t piece_bytes;  /* host copies are cut into pieces this long */
    bool streaming;        /* host copies use curdi_copy_team_streaming */
    /* A download reads in the lines its last copy-out will write while
     * its last DMAs run (curdi_copy_team_touch). */
    bool touch;
} curdi_engine_staging;

/* Moves the plan's bytes. On success every byte has arrived and finish
 * was called once; on failure the caller must drain whatever was
 * enqueued before reusing the slots. team may be NULL. */
curd_status curdi_engine_run(const curdi_plan *plan,
                             const curdi_transfer_item *items, bool upload,
                             const curdi_engine_staging *staging,
                             const curdi_engine_ops *ops,
                             curdi_copy_team *team,
                             curdi_engine_result *out_result);

#endif
