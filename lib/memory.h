/* memory.h - the device's two pools (device memory, pinned host memory)
 * and its reclaim callback. Placeholder with the open/close contract that
 * device.c calls; the pool room completes this header. */
#ifndef CURD_LIB_MEMORY_H
#define CURD_LIB_MEMORY_H

#include "curd.h"

struct curd_device;

/* Creates dev->device_pool and dev->pinned_pool from dev->options and
 * initialises the reclaim lock. Called by curd_device_open with the
 * device's context current; on failure nothing is left to close. */
curd_status curdi_memory_open(struct curd_device *device);
/* Destroys both pools (every block, cached or live). Called by
 * curd_device_close with the context current when the driver is usable;
 * skips driver calls when curdi_driver_usable() is false. NULL-safe. */
void curdi_memory_close(struct curd_device *device);

#endif
