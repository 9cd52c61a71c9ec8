/* hostreg.h - the transfer room's shared host-side state.
 *
 * Behind curd_device.host_registry, under one lock that is never held
 * across a driver call:
 *  - the host ranges page-locked with curd_host_register (defined in
 *    hostreg.c with curd_host_unregister), which transfers use to skip
 *    staging and which cannot be unregistered while a transfer or a
 *    pending asynchronous upload uses them;
 *  - the asynchronous uploads not yet completed by
 *    curd_device_sync_uploads;
 *  - what transfers reuse from one call to the next: idle events and the
 *    device's copy team. */
#ifndef CURD_LIB_HOSTREG_H
#define CURD_LIB_HOSTREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copyteam.h"
#include "cuda_abi.h"
#include "curd.h"
#include "xfer.h"

struct curd_device;

/* Creates dev->host_registry; no driver call. */
curd_status curdi_hostreg_open(struct curd_device *device);
/* Unregisters what is still registered and destroys the idle events (both
 * skipped when curdi_driver_usable() is false), joins the copy team and
 * frees the state. The caller has waited for the upload stream. NULL-safe. */
void curdi_hostreg_close(struct curd_device *device);

/* Sets each item's registered_key to the start of the registered range
 * that holds its host bytes, marking that range used, or to 0. */
void curdi_hostreg_use_items(struct curd_device *device,
                             curdi_xfer_item *items, size_t count);
/* Undoes curdi_hostreg_use_items. */
void curdi_hostreg_unuse_items(struct curd_device *device,
                               const curdi_xfer_item *items, size_t count);

/* The device's copy team, started on first use; NULL if it could not be
 * (the engine then copies on the calling thread). */
curdi_copy_team *curdi_hostreg_team(struct curd_device *device);
/* count events for one transfer, from the idle list or new. Context
 * current. */
curd_status curdi_hostreg_events_acquire(struct curd_device *device,
                                         curdi_cu_event *events,
                                         unsigned count);
/* Keeps the events for later transfers (destroys them if it cannot). */
void curdi_hostreg_events_release(struct curd_device *device,
                                  const curdi_cu_event *events,
                                  unsigned count);

/* An asynchronous upload of byte_len bytes from src, in three steps around
 * its enqueue. reserve: makes room for its entry (CURD_E_OUT_OF_MEMORY
 * naming `what` otherwise) and marks src's registered range used;
 * *out_range_key is that range's start, or 0. Then either cancel (the
 * enqueue failed) or commit (it is enqueued and buffer_id's use is
 * asynchronous now). */
curd_status curdi_hostreg_async_reserve(struct curd_device *device,
                                        const void *src, size_t byte_len,
                                        const char *what,
                                        uintptr_t *out_range_key);
void curdi_hostreg_async_cancel(struct curd_device *device,
                                uintptr_t range_key);
void curdi_hostreg_async_commit(struct curd_device *device,
                                uint64_t buffer_id, uintptr_t range_key);
/* Whether any asynchronous upload is pending; *out_serial_limit marks
 * those enqueued so far, for curdi_hostreg_async_complete once a sync of
 * the upload stream has returned. */
bool curdi_hostreg_async_pending(struct curd_device *device,
                                 uint64_t *out_serial_limit);
/* Ends every pending upload enqueued before serial_limit: its range use
 * and its buffer's asynchronous mark (lib/resident.h). */
void curdi_hostreg_async_complete(struct curd_device *device,
                                  uint64_t serial_limit);

#endif
