/* validate.c - a transfer's validated items (see validate.h). */
#include "transfer/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "transfer/spans.h"
#include "base/status.h"

void curdi_prepared_release(curd_device *device,
                                   curdi_prepared *prepared)
{
    if (prepared->marked)
        curdi_resident_use_end(device, prepared->uses, prepared->count);
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
const char *curdi_item_what(const curdi_prepared *prepared,
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
    status = curdi_xfer_alloc(count,
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
    const char *what = curdi_item_what(prepared, index, scratch, sizeof scratch);
    /* In curd.h's order: a NULL host, the capacity, the wrap. */
    if (host != NULL && byte_len > capacity)
        return curdi_fail(CURD_E_RANGE,
                          "%s: %zu bytes asked for, but dst_capacity is"
                          " only %zu; nothing was moved. Fix: pass a"
                          " destination of at least byte_len bytes, or"
                          " ask for fewer.",
                          what, byte_len, capacity);
    curd_status status = curdi_host_range_check(
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
    const curdi_xfer_item *items = prepared->items;
    curdi_order_entry *spans = NULL;
    size_t used = 0;
    curd_status status = CURD_OK;
    if (prepared->count < 2 || prepared->ascending)
        return CURD_OK;
    /* The entries and the sort's scratch: 2 * count entries of 24 bytes
     * take less than the items' own block (88 bytes each). */
    status = curdi_xfer_alloc(2u * prepared->count, sizeof *spans, false,
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
    curdi_order_sort(spans, spans + prepared->count, used);
    for (size_t index = 1; index < used; index++) {
        const curdi_xfer_item *before = &items[spans[index - 1].index];
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
 * in use, or none), then ranges. On an error, curdi_prepared_release
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

    for (size_t index = 0; index < prepared->count; index++) {
        curdi_xfer_item *item = &prepared->items[index];
        const curdi_resident_use *use = &prepared->uses[index];
        /* offset + byte_len <= byte_len of the buffer without overflow:
         * exactly when curdi_range_check passes, which words the error
         * otherwise. */
        if (item->offset > use->byte_len
            || item->byte_len > use->byte_len - item->offset) {
            return curdi_range_check(
                item->offset, item->byte_len, use->byte_len,
                curdi_item_what(prepared, index, scratch, sizeof scratch));
        }
        item->device_base = use->device_ptr;
        prepared->after_uploads = prepared->after_uploads || use->async_pending;
    }
    return CURD_OK;
}

