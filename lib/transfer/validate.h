/* validate.h - a transfer's validation: the checks every transfer entry
 * point makes before a byte moves, and what they leave a run.
 *
 * A synchronous transfer or batch is validated in one call
 * (curdi_validate_transfer, curdi_validate_uploads,
 * curdi_validate_downloads): the device, every item's arguments (NULL
 * host memory, capacity, address-space wrap, the batch total), download
 * destinations (no overlap), every handle resolved and marked in use (all
 * or none), every range inside its buffer, and the registered host
 * ranges looked up and marked used. What it returns is one prepared run
 * (curdi_prepared): the items as the run moves them, which a batch whose
 * items continue one another, or are rows at one pitch, is checked as
 * (one range, lib/transfer/plan.h), and everything the items hold. Any
 * failure returns a typed status with its sentence before anything moved
 * or was counted, holding nothing; on success curdi_validate_prepared_release (or
 * the run that takes the prepared items, lib/transfer/run.h) ends it.
 *
 * The steps one call takes are here too, for the asynchronous upload,
 * which holds its marks past the call: curdi_validate_begin,
 * curdi_validate_item for each item, curdi_validate_end (destinations,
 * handles, ranges), then always curdi_validate_prepared_release. */
#ifndef CURD_LIB_TRANSFER_VALIDATE_H
#define CURD_LIB_TRANSFER_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/checked.h"
#include "curd.h"
#include "memory/resident.h"
#include "transfer/plan.h"
#include "transfer/state.h"

struct curd_device;

/* The validated items of a call, their buffers marked in use. One item
 * lives inline so single transfers allocate nothing; a batch's three
 * arrays share one block. See above for the steps. */
typedef struct curdi_prepared {
    const char *what; /* the public call, for messages */
    bool upload;
    bool batch;       /* items are named "<what> item <i>" */
    size_t count;
    uint64_t total_bytes;
    curdi_transfer_item *items;
    curdi_resident_use *uses;
    uint64_t *ids;
    /* Downloads: whether the destinations seen so far come in address
     * order without overlapping, and where the last one ends. */
    bool ascending;
    uintptr_t previous_end;
    bool after_uploads; /* a buffer has asynchronous uploads pending */
    /* Marks held: uses[0, marked_count) (every item's, or the one range
     * of a batch of rows). */
    bool marked;
    size_t marked_count;
    /* Registered ranges marked used (curdi_host_register_use_items), or,
     * for rows, the one range rows_key that holds them all (0: none). */
    bool registrations_used;
    /* The items are rows moved as rows (row_device_pitch and
     * row_host_pitch; lib/transfer/plan.h, curdi_plan_build_rows). */
    bool moved_as_rows;
    uintptr_t rows_key;
    /* Whether the items so far continue one another: all non-empty, of
     * one buffer, each starting where the one before ends on the device
     * and in host memory; and where the last one ends on each side
     * (wrapping: see prepare_chain in validate.c). */
    bool chain;
    size_t chain_offset_end;
    uintptr_t chain_host_end;
    /* Whether the items so far are rows: all of one buffer and one
     * non-zero length, each one device pitch and one host pitch after the
     * one before (the second sets the pitches, each at least the length,
     * so rows never overlap; see prepare_rows in validate.c). */
    bool rows;
    uint64_t row_device_pitch;
    uint64_t row_host_pitch;
    curdi_transfer_item one_item;
    curdi_resident_use one_use;
    uint64_t one_id;
} curdi_prepared;

/* A single transfer in one call (see above): item buffer_id, offset,
 * byte_len, host, capacity (SIZE_MAX for an upload). whole: byte_len
 * must be the buffer's size (CURD_E_RANGE otherwise, before any other
 * range error). */
curd_status curdi_validate_transfer(struct curd_device *device,
                                    curdi_prepared *prepared,
                                    const char *what, bool upload, bool whole,
                                    uint64_t buffer_id, size_t offset,
                                    size_t byte_len, unsigned char *host,
                                    size_t capacity);
/* A batch in one call (see above); a batch of nothing succeeds at once,
 * holding nothing. */
curd_status curdi_validate_uploads(struct curd_device *device,
                                   curdi_prepared *prepared, const char *what,
                                   const curd_upload *items, size_t count);
curd_status curdi_validate_downloads(struct curd_device *device,
                                     curdi_prepared *prepared,
                                     const char *what,
                                     const curd_download *items, size_t count);

/* The steps. count items (one lives inline: a single transfer allocates
 * nothing).
 * batch: messages name items "<what> item <i>". */
curd_status curdi_validate_begin(curdi_prepared *prepared, const char *what,
                                bool upload, bool batch, size_t count);
/* Ends the marks and registered-range uses the prepared items hold and
 * frees them. */
void curdi_validate_prepared_release(struct curd_device *device,
                                     curdi_prepared *prepared);
/* Destinations, handles, ranges: see above. */
curd_status curdi_validate_end(struct curd_device *device,
                              curdi_prepared *prepared);
/* "<what>" for a single transfer, "<what> item <i>" in a batch, formatted
 * into scratch only on the way to an error message. */
const char *curdi_validate_item_what(const curdi_prepared *prepared,
                                     size_t index, char *scratch,
                                     size_t scratch_len);
/* The sentence for item `index`, which curdi_validate_item found bad. Out
 * of line and cold: the checks themselves run for every item of every
 * batch. */
curd_status curdi_validate_item_fail(const curdi_prepared *prepared,
                                    size_t index, size_t byte_len,
                                    const unsigned char *host, size_t capacity)
    __attribute__((noinline, cold));

/* Whether an item at offset and host, index >= 1, is the next row after
 * item index - 1 (the caller checked its buffer and length); the second
 * sets the pitches. Either side must move forward, so a row never wraps
 * back over an earlier one. */
static inline bool curdi_validate_next_row(curdi_prepared *prepared,
                                          size_t index, size_t offset,
                                          uintptr_t host, size_t byte_len)
{
    const curdi_transfer_item *before = &prepared->items[index - 1];
    uint64_t device_pitch = (uint64_t)offset - before->offset;
    uint64_t host_pitch = (uint64_t)(host - (uintptr_t)before->host);
    if (offset <= before->offset || host <= (uintptr_t)before->host)
        return false;
    if (index > 1)
        return device_pitch == prepared->row_device_pitch
               && host_pitch == prepared->row_host_pitch;
    prepared->row_device_pitch = device_pitch;
    prepared->row_host_pitch = host_pitch;
    return device_pitch >= byte_len && host_pitch >= byte_len;
}

/* Checks item `index`'s arguments (everything but its handle and range,
 * which need the resident table) and records it. */
static inline curd_status curdi_validate_item(curdi_prepared *prepared,
                                             size_t index, uint64_t buffer_id,
                                             size_t offset, size_t byte_len,
                                             unsigned char *host,
                                             size_t capacity)
{
    curdi_transfer_item *item = &prepared->items[index];
    if (curdi_checked_host_range_bad(host, byte_len) || byte_len > capacity
        || byte_len > UINT64_MAX - prepared->total_bytes)
        return curdi_validate_item_fail(prepared, index, byte_len, host,
                                       capacity);
    uintptr_t end = (uintptr_t)host + byte_len; /* checked just above */
    prepared->total_bytes += byte_len;
    if (byte_len != 0) {
        prepared->ascending = prepared->ascending
                              && (uintptr_t)host >= prepared->previous_end;
        prepared->previous_end = end;
    }
    prepared->chain = byte_len != 0
                      && (index == 0
                          || (prepared->chain && buffer_id == prepared->ids[0]
                              && offset == prepared->chain_offset_end
                              && (uintptr_t)host == prepared->chain_host_end));
    prepared->chain_offset_end = offset + byte_len;
    prepared->chain_host_end = end;
    prepared->rows = byte_len != 0
                     && (index == 0
                         || (prepared->rows && buffer_id == prepared->ids[0]
                             && byte_len == prepared->items[0].byte_len
                             && curdi_validate_next_row(prepared, index, offset,
                                                       (uintptr_t)host,
                                                       byte_len)));
    prepared->ids[index] = buffer_id;
    item->buffer_key = buffer_id;
    item->offset = offset;
    item->byte_len = byte_len;
    item->host = host;
    item->registered_key = 0;
    return CURD_OK;
}

#endif
