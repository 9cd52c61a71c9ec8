/* upload_marks.h - the upload marks module: marks that keep buffers and host ranges in
 * use until the device work that uses them is known complete.
 *
 * A synchronous call needs no list: it marks what it uses, waits for its
 * own fence and unmarks. Work that outlives its call needs the marks kept
 * until a later fence, and that is this module: today the asynchronous
 * uploads (curd_buffer_upload_async), each holding its buffer (an
 * asynchronous mark in the resident module, so it cannot be freed) and its
 * source's registered range (so it cannot be unregistered) until
 * curd_device_sync_uploads has waited for the upload stream.
 *
 * Marks are listed in enqueue order, each with a serial; a wait on the
 * stream completes every mark enqueued before it, so completion names a
 * serial limit rather than marks. Behind curd_device.upload_marks, under one
 * lock never held across a driver call. */
#ifndef CURD_LIB_TRANSFER_UPLOAD_MARKS_H
#define CURD_LIB_TRANSFER_UPLOAD_MARKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/resident.h"

struct curd_device;

/* Creates dev->upload_marks; no driver call. */
curd_status curdi_upload_marks_open(struct curd_device *device);
/* Frees the list. The marks it still holds die with their modules (the
 * resident table and the host registry close after it, whatever their
 * marks), and curd_device_close waited for the device first. NULL-safe. */
void curdi_upload_marks_close(struct curd_device *device);

/* An asynchronous upload of byte_len bytes from src, in three steps around
 * its enqueue. reserve: makes space for its mark (CURD_E_OUT_OF_MEMORY
 * naming `what` otherwise) and marks src's registered range used;
 * *out_range_key is that range's start, or 0. Then either cancel (the
 * enqueue failed) or commit (it is enqueued: the mark now holds the
 * buffer's asynchronous use and the range until completion). */
curd_status curdi_upload_marks_reserve(struct curd_device *device,
                                       const void *src, size_t byte_len,
                                       const char *what,
                                       uintptr_t *out_range_key);
void curdi_upload_marks_cancel(struct curd_device *device,
                               uintptr_t range_key);
void curdi_upload_marks_commit(struct curd_device *device, uint64_t buffer_id,
                               uintptr_t range_key);
/* Whether any upload is in flight; *out_serial_limit marks those enqueued
 * so far, for curdi_upload_marks_complete once a wait on the upload
 * stream has returned. */
bool curdi_upload_marks_pending(struct curd_device *device,
                                uint64_t *out_serial_limit);
/* Releases the marks of every upload enqueued before serial_limit: its
 * range's use and its buffer's asynchronous mark. */
void curdi_upload_marks_complete(struct curd_device *device,
                                 uint64_t serial_limit);

/* Work on buffers with asynchronous uploads pending runs after them
 * (dispatches, batch runs, copies, asynchronous downloads): when any of
 * the uses says so, one wait for the device's upload stream covers every
 * buffer's. Context current. */
curd_status curdi_upload_marks_wait_for(struct curd_device *device,
                                        const curdi_resident_use *uses,
                                        size_t count);

#endif
