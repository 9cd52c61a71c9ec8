/* transfer.h - transfers between caller memory and resident buffers.
 *
 * The room is four files, each owning one thing:
 *
 *  - lib/copyteam.c: a few worker threads per device that split a large
 *    host memcpy (into or out of pinned staging) between them. Pure.
 *  - lib/xfer.c: the plan and the engine. A batch's items become fused
 *    spans (lib/copyplan.c), each moved directly or through pipelined
 *    staging chunks; the engine reaches the device only through a small
 *    table of operations. Pure.
 *  - lib/hostreg.c: the state the room shares behind
 *    curd_device.host_registry: registered host ranges
 *    (curd_host_register), pending asynchronous uploads, idle events and
 *    the copy team.
 *  - lib/transfer.c: the public entry points: validation, handle
 *    resolution and in-flight marks (lib/resident.h), staging from the
 *    pinned pool, one pooled non-blocking stream, exactly one fence,
 *    telemetry; fills and asynchronous uploads. */
#ifndef CURD_LIB_TRANSFER_H
#define CURD_LIB_TRANSFER_H

#include "curd.h"

struct curd_device;

/* Creates dev->host_registry (the transfer room's state) and zeroes the
 * transfer counters. Called by curd_device_open after curdi_resident_open,
 * with the context current; on failure nothing is left to close. Makes no
 * driver call (events and copy threads are created on first use). */
curd_status curdi_transfer_open(struct curd_device *device);
/* Waits for the upload stream, drops the asynchronous marks, unregisters
 * host memory, destroys the room's events and joins its copy threads.
 * Called first by curd_device_close (before curdi_resident_close), with
 * the context current when the driver is usable; skips driver calls when
 * curdi_driver_usable() is false. NULL-safe. */
void curdi_transfer_close(struct curd_device *device);

/* The checks every entry point of the room makes first: a device
 * (CURD_E_INVALID_ARGUMENT naming `what`), not a child after fork
 * (CURD_E_UNSUPPORTED). */
curd_status curdi_transfer_check_device(struct curd_device *device,
                                        const char *what);

/* The "Fix: ..." of a failed driver call during a transfer. */
#define CURDI_DRIVER_FIX                                                      \
    "check that the device is still usable (nvidia-smi); after a sticky"     \
    " error, close and reopen it"

#endif
