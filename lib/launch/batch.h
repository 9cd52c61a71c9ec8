/* batch.h - the batch module: recorded fills, uploads, launches and
 * downloads on resident buffers, run on one stream with one fence, or
 * captured once as a CUDA graph and replayed (curd.h, "Batches").
 *
 * The state (struct curdi_batch_state behind curd_device.batch) holds the
 * device's live batches, so closing the device frees those the caller did
 * not, and its counters. A batch itself belongs to one thread at a time
 * and takes no lock; the module's mutex guards only the list.
 *
 * Its files: batch.c (a batch's life), batch_record.c (recording),
 * batch_run.c (the run and the graph), batch_state.h (what they share). */
#ifndef CURD_LIB_LAUNCH_BATCH_H
#define CURD_LIB_LAUNCH_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"
#include "memory/resident.h"

struct curd_device;

/* The module's cumulative counters (since open, or the last reset). */
typedef struct curdi_batch_counts {
    uint64_t runs;           /* batch runs completed */
    uint64_t graph_replays;  /* of those, runs of a captured graph */
    uint64_t graph_captures; /* graphs captured and instantiated */
    uint64_t graph_updates;  /* kernel nodes updated in place */
} curdi_batch_counts;

/* Opens the device's batch state (no driver call). */
curd_status curdi_batch_open(struct curd_device *device);
/* Frees every batch the device still has (their pending runs, staging and
 * graphs) with the context current. NULL-safe. */
void curdi_batch_close(struct curd_device *device);

void curdi_batch_counts_read(struct curd_device *device,
                             curdi_batch_counts *counts);
void curdi_batch_counts_reset(struct curd_device *device);

/* An item of a module above this one (a collective: lib/comm/collective.c),
 * which the batch cannot name: the module records it through
 * curdi_batch_record_external with a table of what the batch needs of it.
 * The batch keeps its buffers with its own (checked live and marked in use
 * at every run, ordered after the device's pending uploads), and calls: */
typedef struct curdi_batch_external_ops {
    /* At every run, before anything is enqueued: whether the item can
     * still run (its communicator open, not aborted). */
    curd_status (*check)(void *item, const char *what);
    /* Enqueues the item on stream (which may be capturing) and returns
     * once its work is on the stream, in order with the items before and
     * after it. Context current. */
    curd_status (*enqueue)(void *item, curdi_cu_stream stream,
                           const char *what);
    /* While the run's wait is waited_ns old: CURD_OK with *in_progress
     * when the item's side still works, CURD_OK when it is quiet, and a
     * failure (its sentence set, what it depends on aborted) on an error
     * or past its timeout. */
    curd_status (*poll)(void *item, uint64_t waited_ns, bool *in_progress,
                        const char *what);
    /* After a failed run: stops what the item's work may wait on (a
     * peer), so the run's drain cannot hang. */
    void (*abort)(void *item);
    /* The run completed: counts the item. */
    void (*complete)(void *item);
    /* The batch forgets the item (reset, free, device close); its graph,
     * which may hold the item's work, is gone before. */
    void (*free)(void *item);
} curdi_batch_external_ops;

/* The checks a call recording into the batch starts with (the batch, its
 * device usable, no run pending); *out_device is the batch's device. */
curd_status curdi_batch_record_check(curd_batch *batch, const char *what,
                                     struct curd_device **out_device);
/* Appends an external item naming the buffers of uses (use_count 1 or 2,
 * resolved by the caller on the batch's device). On success the batch
 * owns item (ops->free lets it go); on failure the caller keeps it. */
curd_status curdi_batch_record_external(curd_batch *batch,
                                        const curdi_batch_external_ops *ops,
                                        void *item,
                                        const curdi_resident_use *uses,
                                        size_t use_count, const char *what);

#endif
