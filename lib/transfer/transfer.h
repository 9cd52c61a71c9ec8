/* transfer.h - transfers between caller memory and resident buffers.
 *
 * The public transfers stand on these files, each owning one thing:
 *
 *  - lib/transfer/copy_team.c: a few worker threads that split a large host memcpy
 *    (into or out of pinned staging) between them. Pure.
 *  - lib/transfer/plan.c: the plan. A batch's items become fused spans
 *    (lib/transfer/spans.c), each moved directly or through pipelined
 *    staging chunks, gathered on the device when many are small; and the
 *    host side's policy: chunks, slots, streaming stores, the copy team.
 *  - lib/transfer/engine.c: runs a plan, reaching the device only through
 *    a small table of operations. Pure, as are the plan and
 *    lib/transfer/tuning.c, its tunables from the environment.
 *  - lib/transfer/state.h: the device's transfer state (tuning, counters,
 *    copy team), behind curd_device.transfer.
 *  - lib/transfer/validate.c: a call's validation, in one call: its
 *    items checked, their buffers marked in use, their registered ranges
 *    looked up.
 *  - lib/transfer/upload_marks.c: the marks asynchronous uploads hold until a sync.
 *  - lib/transfer/gather.c: the gather and scatter kernels on a device.
 *  - lib/transfer/run.c: a synchronous transfer's run: the plan, the
 *    resources taken in one call and given back in one, and the engine's
 *    driver side (one pooled non-blocking stream, staging from the pinned
 *    pool, exactly one fence).
 *  - lib/transfer/transfer.c: the public entry points and the counters;
 *    fills and asynchronous uploads. */
#ifndef CURD_LIB_TRANSFER_TRANSFER_H
#define CURD_LIB_TRANSFER_TRANSFER_H

#include <stdint.h>

#include "curd.h"

struct curd_device;

/* Creates dev->transfer with its counters at zero. Makes no driver call
 * (copy threads start on first use); on failure nothing is left. */
curd_status curdi_transfer_open(struct curd_device *device);
/* Waits for the upload stream (skipped when curdi_driver_usable() is
 * false), joins the copy threads and frees the state. NULL-safe. */
void curdi_transfer_close(struct curd_device *device);

/* curd_upload_batch for the modules above (sessions), with `what` naming
 * their public call in every sentence. */
curd_status curdi_transfer_upload_batch(struct curd_device *device,
                                        const char *what,
                                        const curd_upload *items,
                                        size_t count);

/* The transfer counters, for curd_device_stats and its reset. */
void curdi_transfer_stats(struct curd_device *device, curd_stats *stats);
void curdi_transfer_stats_reset(struct curd_device *device);

/* What one transfer, fill or batch run adds to the counters: checked
 * before the work (CURD_E_OVERFLOW, naming the counter and the call, when
 * one would pass 2^64 - 1), added after it succeeded. */
typedef struct curdi_transfer_counts {
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t copy_ops;
    uint64_t fences;
    uint64_t fill_ops;
    uint64_t fill_bytes;
} curdi_transfer_counts;

curd_status curdi_transfer_counts_check(struct curd_device *device,
                                        const curdi_transfer_counts *counts,
                                        const char *what);
void curdi_transfer_counts_add(struct curd_device *device,
                               const curdi_transfer_counts *counts);

#endif
