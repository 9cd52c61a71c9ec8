/* batch.h - the batch room: recorded fills, uploads, launches and
 * downloads on resident buffers, run on one stream with one fence, or
 * captured once as a CUDA graph and replayed (curd.h, "Batches").
 *
 * The room (struct curdi_batch_room behind curd_device.batch) holds the
 * device's live batches, so closing the device frees those the caller did
 * not, and its counters. A batch itself belongs to one thread at a time
 * and takes no lock; the room's mutex guards only the list. */
#ifndef CURD_LIB_BATCH_H
#define CURD_LIB_BATCH_H

#include <stdint.h>

#include "curd.h"

struct curd_device;

/* The room's cumulative counters (since open, or the last reset). */
typedef struct curdi_batch_counts {
    uint64_t runs;           /* batch runs completed */
    uint64_t graph_replays;  /* of those, runs of a captured graph */
    uint64_t graph_captures; /* graphs captured and instantiated */
    uint64_t graph_updates;  /* kernel nodes updated in place */
} curdi_batch_counts;

/* Opens the device's room (no driver call). */
curd_status curdi_batch_open(struct curd_device *device);
/* Frees every batch the device still has (their pending runs, staging and
 * graphs) with the context current. NULL-safe. */
void curdi_batch_close(struct curd_device *device);

void curdi_batch_counts_read(struct curd_device *device,
                             curdi_batch_counts *counts);
void curdi_batch_counts_reset(struct curd_device *device);

#endif
