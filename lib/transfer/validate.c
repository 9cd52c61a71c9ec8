/* validate.c - a transfer's validated items (see validate.h). */
#include "transfer/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "transfer/host_register.h"
#include "transfer/spans.h"

void curdi_validate_prepared_release(curd_device *device,
                                     curdi_prepared *prepared)
{
    if (prepared->registrations_used) {
        if (prepared->moved_as_rows)
            curdi_host_register_unuse(device, prepared->rows_key);
        else
            curdi_host_register_unuse_items(device, prepared->items,
                                            prepared->count);
    }
    prepared->registrations_used = false;
    if (prepared->marked)
        curdi_resident_use_end(device, prepared->uses,
                               prepared->marked_count);
    prepared->marked = false;
    /* One block for all three arrays, starting with the items. */
    if (prepared->items != &prepared->one_item)
        free(prepared->items);
    prepared->items = NULL;
    prepared->uses = NULL;
    prepared->ids = NULL;
}

/* Formatted only on the way to an error message: a label per item would
 * cost a batch more than its bytes. */
const char *curdi_validate_item_what(const curdi_prepared *prepared,
                                     size_t index, char *scratch,
                                     size_t scratch_len)
{
    if (!prepared->batch)
        return prepared->what;
    snprintf(scratch, scratch_len, "%s item %zu", prepared->what, index);
    return scratch;
}

curd_status curdi_validate_begin(curdi_prepared *prepared,
                                       const char *what, bool upload,
                                       bool batch, size_t count)
{
    curd_status status;
    memset(prepared, 0, sizeof *prepared);
    prepared->what = what;
    prepared->upload = upload;
    prepared->batch = batch;
    prepared->count = count;
    prepared->ascending = true;
    if (count == 1) {
        prepared->items = &prepared->one_item;
        prepared->uses = &prepared->one_use;
        prepared->ids = &prepared->one_id;
        return CURD_OK;
    }
    /* One block: every field of all three is 64-bit aligned. */
    status = curdi_plan_alloc(count,
                              sizeof *prepared->items + sizeof *prepared->uses
                                  + sizeof *prepared->ids,
                              false, (void **)&prepared->items);
    if (status != CURD_OK)
        return status;
    prepared->uses = (curdi_resident_use *)(void *)(prepared->items + count);
    prepared->ids = (uint64_t *)(void *)(prepared->uses + count);
    return CURD_OK;
}

curd_status curdi_validate_item_fail(const curdi_prepared *prepared, size_t index,
                        size_t byte_len, const unsigned char *host,
                        size_t capacity)
{
    char scratch[160];
    const char *what =
        curdi_validate_item_what(prepared, index, scratch, sizeof scratch);
    /* In curd.h's order: a NULL host, the capacity, the wrap. */
    if (host != NULL && byte_len > capacity)
        return curdi_fail(CURD_E_RANGE,
                          "%s: %zu bytes asked for, but dst_capacity is"
                          " only %zu; nothing was moved. Fix: pass a"
                          " destination of at least byte_len bytes, or"
                          " ask for fewer.",
                          what, byte_len, capacity);
    curd_status status = curdi_checked_host_range(
        host, byte_len, what, prepared->upload ? "src" : "dst");
    if (status != CURD_OK)
        return status;
    return curdi_fail(CURD_E_OVERFLOW,
                      "%s: the batch's lengths add up past 2^64-1"
                      " bytes. Fix: split the batch.",
                      prepared->what);
}

/* Downloads into overlapping destinations would race (the copy team
 * writes them at once) and have no meaningful result: refused.
 * Destinations usually come in address order, each starting at or after
 * the end of the one before, which proves that none overlap without
 * sorting (curdi_validate_item watched for it); otherwise sort, which also
 * finds the pair to name. */
static curd_status check_destinations(const curdi_prepared *prepared)
{
    const curdi_transfer_item *items = prepared->items;
    curdi_order_entry *spans = NULL;
    size_t used = 0;
    curd_status status = CURD_OK;
    if (prepared->count < 2 || prepared->ascending)
        return CURD_OK;
    /* The entries and the sort's scratch: 2 * count entries of 24 bytes
     * take less than the items' own block (88 bytes each). */
    status = curdi_plan_alloc(2u * prepared->count, sizeof *spans, false,
                              (void **)&spans);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < prepared->count; index++) {
        if (items[index].byte_len == 0)
            continue;
        spans[used].major = (uint64_t)(uintptr_t)items[index].host;
        spans[used].minor = 0;
        spans[used].index = index;
        used++;
    }
    curdi_spans_order_sort(spans, spans + prepared->count, used);
    for (size_t index = 1; index < used; index++) {
        const curdi_transfer_item *before = &items[spans[index - 1].index];
        /* host + byte_len was checked not to wrap by curdi_validate_item. */
        if ((uintptr_t)items[spans[index].index].host
            < (uintptr_t)before->host + (uintptr_t)before->byte_len) {
            status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                                "%s: the destinations of items %zu and %zu"
                                " overlap in host memory; nothing was"
                                " moved. Fix: give every item its own"
                                " destination bytes.",
                                prepared->what, spans[index - 1].index,
                                spans[index].index);
            break;
        }
    }
    free(spans);
    return status;
}

/* After every item's arguments: destinations, then handles (all marked
 * in use, or none), then ranges. On an error, curdi_validate_prepared_release
 * (which the caller calls either way) ends whatever marks were taken. */
curd_status curdi_validate_end(curd_device *device,
                                     curdi_prepared *prepared)
{
    char scratch[160];
    curd_status status;
    if (!prepared->upload) {
        status = check_destinations(prepared);
        if (status != CURD_OK)
            return status;
    }
    status = curdi_resident_use_begin(device, prepared->what, prepared->ids,
                                      prepared->count, prepared->uses);
    if (status != CURD_OK)
        return status;
    prepared->marked = true;
    prepared->marked_count = prepared->count;

    for (size_t index = 0; index < prepared->count; index++) {
        curdi_transfer_item *item = &prepared->items[index];
        const curdi_resident_use *use = &prepared->uses[index];
        /* offset + byte_len <= byte_len of the buffer without overflow:
         * exactly when curdi_checked_range passes, which words the error
         * otherwise. */
        if (item->offset > use->byte_len
            || item->byte_len > use->byte_len - item->offset) {
            return curdi_checked_range(
                item->offset, item->byte_len, use->byte_len,
                curdi_validate_item_what(prepared, index, scratch,
                                         sizeof scratch));
        }
        item->device_base = use->device_ptr;
        prepared->after_uploads = prepared->after_uploads || use->async_pending;
    }
    return CURD_OK;
}


/* ------------------------------------------------------------------------
 * A synchronous transfer's validation in one call
 * ---------------------------------------------------------------------- */

/* The one item from the batch's first item's offset and host address,
 * byte_len long, checked and its buffer marked into *one (allocates
 * nothing); false, with nothing held, when a check fails (its sentence
 * would not name the batch's item: the caller then goes item by item). */
static bool prepare_first_range(curd_device *device,
                                const curdi_prepared *prepared,
                                size_t byte_len, curdi_prepared *one)
{
    const curdi_transfer_item *first = &prepared->items[0];
    /* One item: cannot fail (begin allocates only for more than one). */
    curd_status status = curdi_validate_begin(one, prepared->what,
                                              prepared->upload, false, 1);
    CURDI_ASSERT(status == CURD_OK);
    status = curdi_validate_item(one, 0, first->buffer_key,
                                 (size_t)first->offset, byte_len, first->host,
                                 SIZE_MAX);
    if (status == CURD_OK)
        status = curdi_validate_end(device, one);
    if (status != CURD_OK) {
        curdi_validate_prepared_release(device, one);
        return false;
    }
    return true;
}

/* A batch whose items continue one another (prepared->chain) asks for
 * exactly the bytes of one item: from the first one's offset and host
 * address, the batch's total length. Checked as that item, it costs one
 * handle lookup, one range check and a plan of one instead of as many as
 * it has items; the planner would have fused it into the same one span
 * (one DMA, the same counts). Every item's own arguments were checked
 * already, and the one range holds all of theirs: item i starts at the
 * first's offset plus the lengths before it, which cannot wrap when the
 * total's end does not. Items that average CURDI_DIRECT_ITEM_MIN_BYTES
 * or more are left to the planner, which may move them straight from
 * registered memory one DMA each (lib/transfer/plan.h); below that it
 * would stage the span, or move it in one DMA exactly when its host side
 * lies in one registered range, as it does the one item. Returns false,
 * having done nothing, when it leaves the batch, or when the one item
 * fails a check (its sentence would not name the item): the caller then
 * checks item by item, which words the error. Else the prepared items
 * are that one item, marked. */
static bool prepare_chain(curd_device *device, curdi_prepared *prepared)
{
    curdi_prepared one;
    if (prepared->total_bytes > SIZE_MAX
        || prepared->total_bytes / prepared->count
               >= CURDI_DIRECT_ITEM_MIN_BYTES
        || !prepare_first_range(device, prepared,
                                (size_t)prepared->total_bytes, &one))
        return false;
    /* The batch's block held no marks; the one item lives inline, so its
     * arrays point into *prepared once it moves there. */
    curdi_validate_prepared_release(device, prepared);
    *prepared = one;
    prepared->items = &prepared->one_item;
    prepared->uses = &prepared->one_use;
    prepared->ids = &prepared->one_id;
    return true;
}

/* A batch of rows (prepared->rows: one buffer, one length, one pitch on
 * each side) is checked as one range on each side, from the first row's
 * start to the last row's end: one handle lookup, one range check and one
 * registration lookup instead of as many as it has items, and a plan
 * without the fusing (lib/transfer/plan.h, curdi_plan_build_rows). Every
 * item's own arguments were checked already, and the rows move forward on
 * both sides, so the two ranges hold all of them. Where the host side
 * lies in one registered range the rows cross in one strided DMA straight
 * between the two; otherwise they are staged (a host side partly
 * registered too: registering all of it, or none, is what pays), and
 * their DMAs join into rows at the staging side. Either way the planner
 * would have come to the same DMAs. Contiguous rows are left to the chain
 * or the planner, which move them in one plain DMA. Returns false, having
 * done nothing, when it leaves the batch (a pitch past the device's
 * largest, a tuning that gathers one DMA) or when the device range
 * fails a check (its sentence would not name the item): the caller then
 * checks item by item, which words the error. Else the prepared items
 * are the rows, the one range's mark and registration held. */
static bool prepare_rows(curd_device *device, curdi_prepared *prepared)
{
    curdi_transfer_item *items = prepared->items;
    const curdi_transfer_item *first = &items[0];
    const curdi_transfer_item *last = &items[prepared->count - 1];
    curdi_prepared one;
    size_t device_end;
    uintptr_t host_key;
    /* Rows are one DMA; where the tuning gathers even one DMA of their
     * bytes (CURD_TRANSFER_PATH=gather, CURD_GATHER_MIN_SPANS=1), they go
     * through the kernels like any ranges: the planner's business. */
    if (curdi_plan_wants_gather(&device->transfer->tuning.gather, 1,
                                prepared->total_bytes)
        || prepared->row_device_pitch > device->max_copy_pitch
        || prepared->row_host_pitch > device->max_copy_pitch
        || (prepared->row_device_pitch == first->byte_len
            && prepared->row_host_pitch == first->byte_len)
        || !curdi_size_add((size_t)last->offset, (size_t)last->byte_len,
                           &device_end)
        || !prepare_first_range(device, prepared,
                                device_end - (size_t)first->offset, &one))
        return false;
    /* The last row's host end did not wrap (curdi_validate_item). */
    host_key = curdi_host_register_use(
        device, first->host,
        (size_t)((uintptr_t)last->host + (uintptr_t)last->byte_len
                 - (uintptr_t)first->host));
    for (size_t row = 0; row < prepared->count; row++) {
        items[row].device_base = one.items[0].device_base;
        items[row].registered_key = host_key;
    }
    /* The one range's mark moves to the batch, which held none. */
    prepared->uses[0] = one.uses[0];
    prepared->marked = true;
    prepared->marked_count = 1;
    prepared->after_uploads = one.after_uploads;
    prepared->moved_as_rows = true;
    prepared->rows_key = host_key;
    prepared->registrations_used = true;
    return true;
}

/* A whole-buffer transfer whose byte_len is not the buffer's size. */
static curd_status fail_whole_length(const char *what, size_t byte_len,
                                     size_t buffer_len)
{
    return curdi_fail(CURD_E_RANGE,
                      "%s: byte_len is %zu but the buffer holds %zu bytes;"
                      " nothing was moved. Fix: pass exactly the buffer's"
                      " size, or use the _at/_range form for part of it.",
                      what, byte_len, buffer_len);
}

/* A call whose items are recorded, from there to a prepared run: the
 * shortcuts of chains and rows, else the handles and ranges, then the
 * registered ranges of what moves. whole: the one item's byte_len must
 * equal the buffer's size. On failure nothing is held. */
static curd_status prepare_run(curd_device *device, curdi_prepared *prepared,
                               bool whole)
{
    curd_status status = CURD_OK;
    /* A chain becomes its one item, marked; its registration below. */
    bool chained = prepared->chain && prepared->count > 1
                   && prepare_chain(device, prepared);
    if (!chained && prepared->rows && prepared->count > 1
        && prepare_rows(device, prepared))
        return CURD_OK;
    if (!chained)
        status = curdi_validate_end(device, prepared);
    if (status == CURD_OK && whole
        && prepared->uses[0].byte_len != prepared->items[0].byte_len)
        status = fail_whole_length(prepared->what,
                                   (size_t)prepared->items[0].byte_len,
                                   prepared->uses[0].byte_len);
    if (status != CURD_OK) {
        curdi_validate_prepared_release(device, prepared);
        return status;
    }
    if (prepared->total_bytes > 0) {
        curdi_host_register_use_items(device, prepared->items,
                                      prepared->count);
        prepared->registrations_used = true;
    }
    return CURD_OK;
}

/* A whole-buffer transfer promises CURD_E_RANGE for any byte_len but the
 * buffer's size, even one so large that the host range would wrap, which
 * curdi_validate_item reported first (status). Looked up on that failure
 * path only; a stale handle leaves status as it was. */
static curd_status whole_length_first(curd_device *device, const char *what,
                                      uint64_t buffer_id, size_t byte_len,
                                      curd_status status)
{
    size_t buffer_len = 0;
    if (status == CURD_E_OVERFLOW
        && curdi_resident_length(device, buffer_id, &buffer_len)
        && buffer_len != byte_len)
        return fail_whole_length(what, byte_len, buffer_len);
    return status;
}

curd_status curdi_validate_transfer(curd_device *device,
                                    curdi_prepared *prepared,
                                    const char *what, bool upload, bool whole,
                                    uint64_t buffer_id, size_t offset,
                                    size_t byte_len, unsigned char *host,
                                    size_t capacity)
{
    curd_status status = curdi_core_device_check(device, what);
    if (status == CURD_OK)
        status = curdi_validate_begin(prepared, what, upload, false, 1);
    if (status != CURD_OK)
        return status;
    status = curdi_validate_item(prepared, 0, buffer_id, offset, byte_len,
                                 host, capacity);
    if (status != CURD_OK) {
        curdi_validate_prepared_release(device, prepared);
        return whole ? whole_length_first(device, what, buffer_id, byte_len,
                                          status)
                     : status;
    }
    return prepare_run(device, prepared, whole);
}

/* The checks before a batch's items: a device, and items unless there are
 * none (a batch of nothing succeeds at once, holding nothing); then space
 * for count items. */
static curd_status batch_begin(curd_device *device, curdi_prepared *prepared,
                               const char *what, bool upload,
                               const void *items, size_t count)
{
    curd_status status = curdi_core_device_check(device, what);
    memset(prepared, 0, sizeof *prepared);
    if (status == CURD_OK && count != 0 && items == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: items is NULL but count is %zu. Fix: pass an"
                            " array of count items, or count 0.",
                            what, count);
    if (status == CURD_OK && count != 0)
        status = curdi_validate_begin(prepared, what, upload, true, count);
    return status;
}

/* After a batch's items were checked one by one (status): the prepared
 * run, or on failure nothing held. */
static curd_status batch_end(curd_device *device, curdi_prepared *prepared,
                             curd_status status)
{
    if (status != CURD_OK) {
        curdi_validate_prepared_release(device, prepared);
        return status;
    }
    return prepare_run(device, prepared, false);
}

curd_status curdi_validate_uploads(curd_device *device,
                                   curdi_prepared *prepared, const char *what,
                                   const curd_upload *items, size_t count)
{
    curd_status status =
        batch_begin(device, prepared, what, true, items, count);
    if (status != CURD_OK || count == 0)
        return status;
    /* The library never writes through an upload's source; the item type
     * is shared with downloads, hence the cast. Uploads have no
     * capacity: SIZE_MAX. */
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_validate_item(prepared, index, items[index].buffer.id,
                                     items[index].offset,
                                     items[index].byte_len,
                                     (unsigned char *)items[index].src,
                                     SIZE_MAX);
    return batch_end(device, prepared, status);
}

curd_status curdi_validate_downloads(curd_device *device,
                                     curdi_prepared *prepared,
                                     const char *what,
                                     const curd_download *items, size_t count)
{
    curd_status status =
        batch_begin(device, prepared, what, false, items, count);
    if (status != CURD_OK || count == 0)
        return status;
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_validate_item(prepared, index, items[index].buffer.id,
                                     items[index].offset,
                                     items[index].byte_len, items[index].dst,
                                     items[index].dst_capacity);
    return batch_end(device, prepared, status);
}
