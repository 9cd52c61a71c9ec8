/* copy.h - copies between resident buffers: within one device, or between
 * two devices of this process (curd_buffer_copy, curd_buffer_copy_async;
 * curd_batch_copy records one in a batch through the checks below).
 *
 * A call's copies are checked whole before anything is enqueued: both
 * devices open, every handle live on its own side (a handle of the other
 * device is named as such), every range inside its buffer with checked
 * arithmetic, no copy overlapping itself in one buffer. Both sides'
 * buffers are marked in use (all or none) until the work completes. The
 * copies become DMA spans (copies that continue one another on both sides
 * fused, unless the fused span would overlap itself) and run on the
 * destination device's pooled stream as a curd_pending (core/pending.h):
 * the synchronous call is an untimed pending, waited for at once (one
 * fence), the asynchronous one a timed pending handed to the caller.
 *
 * Three routes, chosen per call:
 *  - one context (the same device, or two curd_devices of one GPU):
 *    cuMemcpyDtoDAsync per span;
 *  - two GPUs with peer access: cuMemcpyPeerAsync per span on the
 *    destination's stream. Peer access is asked for
 *    (cuDeviceCanAccessPeer) and enabled (cuCtxEnablePeerAccess, the
 *    destination's context reaching the source's memory) on the first copy
 *    between an ordered pair; the destination device's copy state
 *    remembers the answer per source context. An answer of "no", or a
 *    driver that refuses with CUDA_ERROR_PEER_ACCESS_UNSUPPORTED or
 *    _TOO_MANY_PEERS,
 *    is remembered as "staged"; any other failure fails the call and is
 *    asked again next time. (Should the source's context be reset after
 *    a fault and made again at the same address, the answer outlives the
 *    access it stood for; cuMemcpyPeerAsync is still correct without
 *    peer access, the driver then stages it itself);
 *  - two GPUs without it (or CURD_PEER_ACCESS=0 at either device's open):
 *    staged through one pinned block of the destination device's pool, in
 *    two slots of up to 8 MiB. Chunk i goes down on a pooled stream of the
 *    source device (after that stream waits for the event that says the
 *    chunk two before left its slot) and up on the destination's stream
 *    (after it waits for the event that says chunk i arrived): the whole
 *    pipeline is enqueued without a host wait, so the asynchronous call
 *    returns at once here too, and the destination's fence covers all.
 *
 * Ordering with asynchronous uploads: a buffer with uploads pending has
 * its device's upload stream synchronised first, as dispatches and batch
 * runs do. Why not an event: every other piece of curd work that may
 * still be in flight on a buffer is the caller's to order (curd.h), and
 * synchronous work of either device has completed before its call
 * returned, so the upload stream is the only source-side work a copy can
 * find in flight; it is rare, and the host wait keeps the copy from
 * holding an event of another device for it.
 *
 * Behind curd_device.copy: the four counters and the peer answers. */
#ifndef CURD_LIB_TRANSFER_COPY_H
#define CURD_LIB_TRANSFER_COPY_H

#include <stdint.h>

#include "curd.h"
#include "memory/resident.h"

struct curd_device;

/* Creates device->copy, reading CURD_PEER_ACCESS; no driver call. */
curd_status curdi_copy_open(struct curd_device *device);
/* Frees it (peer access stays enabled in the contexts). NULL-safe. */
void curdi_copy_close(struct curd_device *device);

/* The d2d_* and peer_* fields, for curd_device_stats and its reset. */
void curdi_copy_stats(struct curd_device *device, curd_stats *stats);
void curdi_copy_stats_reset(struct curd_device *device);

/* What a copy adds to the counters of the device that counts it: checked
 * before the work (CURD_E_OVERFLOW naming the counter and `what`), added
 * once it completed. */
typedef struct curdi_copy_counts {
    uint64_t d2d_bytes, d2d_ops;
    uint64_t peer_bytes, peer_ops;
} curdi_copy_counts;

curd_status curdi_copy_counts_check(struct curd_device *device,
                                    const curdi_copy_counts *counts,
                                    const char *what);
void curdi_copy_counts_add(struct curd_device *device,
                           const curdi_copy_counts *counts);

/* One copy within `device`, checked as a call's copies are (handles live,
 * ranges, overlap; byte_len 0 is CURD_E_INVALID_ARGUMENT here, since a
 * recorded copy that moves nothing is a mistake); out[0] receives the
 * destination buffer, out[1] the source, their marks already ended. For
 * curd_batch_copy, which records it. */
curd_status curdi_copy_check_one(struct curd_device *device,
                                 const curd_copy *copy, const char *what,
                                 curdi_resident_use out[2]);

#endif
