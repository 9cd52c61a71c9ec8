/* dispatch.h - the dispatch room: launches of a program's kernel
 * (curd_dispatch, curd_dispatch_async, curd_pending_*), and what
 * lib/device.c needs of it.
 *
 * The room's state (struct curdi_dispatch_room behind
 * curd_device.dispatch) is its counters, atomics that a dispatch adds to
 * once its work is complete, so dispatching threads share no lock. */
#ifndef CURD_LIB_DISPATCH_H
#define CURD_LIB_DISPATCH_H

#include "curd.h"

struct curd_device;

/* Creates device->dispatch with its counters at zero; no driver call. On
 * failure nothing is left. */
curd_status curdi_dispatch_open(struct curd_device *device);
/* Frees the state. NULL-safe. */
void curdi_dispatch_close(struct curd_device *device);

/* The dispatch counters, for curd_device_stats and its reset. */
void curdi_dispatch_stats(struct curd_device *device, curd_stats *stats);
void curdi_dispatch_stats_reset(struct curd_device *device);

#endif
