/* transfer.h - host registrations and transfers. Placeholder with the
 * open/close contract that device.c calls; the transfer room completes
 * this header. */
#ifndef CURD_LIB_TRANSFER_H
#define CURD_LIB_TRANSFER_H

#include "curd.h"

struct curd_device;

/* Creates dev->host_registry and zeroes the transfer counters. Called by
 * curd_device_open after curdi_resident_open, with the context current;
 * on failure nothing is left to close. */
curd_status curdi_transfer_open(struct curd_device *device);
/* Drains outstanding transfers and unregisters host memory. Called first
 * by curd_device_close, with the context current when the driver is
 * usable; skips driver calls when curdi_driver_usable() is false.
 * NULL-safe. */
void curdi_transfer_close(struct curd_device *device);

#endif
