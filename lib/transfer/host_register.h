/* host_register.h - host registrations: ranges of caller memory page-locked
 * with curd_host_register (defined in host_register.c with
 * curd_host_unregister), which transfers move straight from or into
 * without staging.
 *
 * Behind curd_device.host_registry, under one lock that is never held
 * across a driver call. A range is "in use" while a transfer moves bytes
 * through it or an asynchronous upload from it is in flight (the fence
 * module holds that use until its fence); a range in use cannot be
 * unregistered (CURD_E_BUSY). */
#ifndef CURD_LIB_TRANSFER_HOST_REGISTER_H
#define CURD_LIB_TRANSFER_HOST_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "transfer/plan.h"

struct curd_device;

/* Creates dev->host_registry; no driver call. */
curd_status curdi_host_register_open(struct curd_device *device);
/* Unregisters what is still registered (skipped when
 * curdi_driver_usable() is false) and frees the registry. The caller has
 * waited for the device's work. NULL-safe. */
void curdi_host_register_close(struct curd_device *device);

/* Sets each item's registered_key to the start of the registered range
 * that holds its host bytes, marking that range used, or to 0. */
void curdi_host_register_use_items(struct curd_device *device,
                             curdi_transfer_item *items, size_t count);
/* Undoes curdi_host_register_use_items. */
void curdi_host_register_unuse_items(struct curd_device *device,
                               const curdi_transfer_item *items, size_t count);
/* The same for one host range: the start of the registered range that
 * holds it, now marked used, or 0 (not registered: nothing marked). */
uintptr_t curdi_host_register_use(struct curd_device *device, const void *host,
                            size_t byte_len);
/* Undoes curdi_host_register_use; key 0 is a no-op. */
void curdi_host_register_unuse(struct curd_device *device, uintptr_t key);

#endif
