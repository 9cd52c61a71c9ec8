/* copyplan.c - coalescing of copies into fused DMA spans (pure).
 *
 * The plan is a sort and one sweep: the non-empty items, ordered by
 * (buffer_key, offset), are walked once; an item that starts at or before
 * the end of the open span of the same buffer extends it, any other item
 * opens a new span. Spans sit back to back in the staging area in the order
 * they are opened, so each item's bytes start at its span's staging offset
 * plus the item's distance from the span's start. O(n log n) time, O(n)
 * memory. */
#include "copyplan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "status.h"

/* One non-empty item as the sort sees it. The item index breaks ties so the
 * order (and so the plan) does not depend on the qsort implementation. */
typedef struct curdi_plan_entry {
    uint64_t buffer_key;
    uint64_t offset;
    uint64_t end;
    size_t item_index;
} curdi_plan_entry;

static int curdi_plan_entry_compare(const void *left, const void *right)
{
    const curdi_plan_entry *a = left;
    const curdi_plan_entry *b = right;
    if (a->buffer_key != b->buffer_key)
        return a->buffer_key < b->buffer_key ? -1 : 1;
    if (a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    if (a->item_index != b->item_index)
        return a->item_index < b->item_index ? -1 : 1;
    return 0;
}

/* malloc(count * element_bytes) with the product checked; NULL for 0. */
static curd_status curdi_plan_alloc(size_t count, size_t element_bytes,
                                    const char *what, void **out)
{
    size_t bytes;
    void *memory;
    if (count == 0) {
        *out = NULL;
        return CURD_OK;
    }
    if (!curdi_size_mul(count, element_bytes, &bytes))
        return curdi_fail(CURD_E_OVERFLOW,
                          "a copy plan for %zu items needs more than SIZE_MAX"
                          " bytes of %s. Fix: split the batch.",
                          count, what);
    memory = malloc(bytes);
    if (memory == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate %zu bytes of %s for a copy plan"
                          " of %zu items. Fix: free host memory or split the"
                          " batch.",
                          bytes, what, count);
    *out = memory;
    return CURD_OK;
}

static curd_status curdi_staging_overflow(void)
{
    return curdi_fail(CURD_E_OVERFLOW,
                      "the fused spans of a batch need more than 2^64-1 bytes"
                      " of staging. Fix: split the batch into smaller ones.");
}

curd_status curdi_copyplan_build(const curdi_copy_item *items, size_t count,
                                 curdi_copy_plan *out_plan)
{
    curdi_plan_entry *entries = NULL;
    curdi_copy_span *spans = NULL;
    uint64_t *item_staging_offset = NULL;
    size_t entry_count = 0;
    size_t span_count = 0;
    uint64_t staging_bytes = 0;
    curd_status status;

    if (out_plan == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "copy plan output is NULL. Fix: pass a"
                          " curdi_copy_plan to fill.");
    if (items == NULL && count != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "copy plan items are NULL with a count of %zu."
                          " Fix: pass the item array or a count of 0.",
                          count);

    /* Validate every item before allocating anything. */
    for (size_t i = 0; i < count; i++) {
        uint64_t end;
        if (!curdi_u64_add(items[i].offset, items[i].byte_len, &end))
            return curdi_fail(CURD_E_OVERFLOW,
                              "copy item %zu (buffer key %" PRIu64
                              ") at offset %" PRIu64 " with length %" PRIu64
                              " ends past 2^64-1. Fix: range-check each item"
                              " against its buffer before planning.",
                              i, items[i].buffer_key, items[i].offset,
                              items[i].byte_len);
        if (items[i].byte_len != 0)
            entry_count++;
    }

    status = curdi_plan_alloc(count, sizeof *item_staging_offset,
                              "item staging offsets",
                              (void **)&item_staging_offset);
    if (status == CURD_OK)
        status = curdi_plan_alloc(entry_count, sizeof *entries, "sort entries",
                                  (void **)&entries);
    /* At most one span per non-empty item; the array is not shrunk. */
    if (status == CURD_OK)
        status = curdi_plan_alloc(entry_count, sizeof *spans, "spans",
                                  (void **)&spans);
    if (status != CURD_OK)
        goto fail;

    for (size_t i = 0, e = 0; i < count; i++) {
        item_staging_offset[i] = 0;
        if (items[i].byte_len == 0)
            continue;
        entries[e].buffer_key = items[i].buffer_key;
        entries[e].offset = items[i].offset;
        entries[e].end = items[i].offset + items[i].byte_len; /* checked above */
        entries[e].item_index = i;
        e++;
    }
    if (entry_count > 1)
        qsort(entries, entry_count, sizeof *entries, curdi_plan_entry_compare);

    for (size_t e = 0; e < entry_count; e++) {
        const curdi_plan_entry *entry = &entries[e];
        curdi_copy_span *span = span_count > 0 ? &spans[span_count - 1] : NULL;
        uint64_t span_end = span != NULL ? span->offset + span->byte_len : 0;
        if (span == NULL || span->buffer_key != entry->buffer_key
            || entry->offset > span_end) {
            /* Close the open span: its bytes now count towards staging. */
            if (span != NULL
                && !curdi_u64_add(staging_bytes, span->byte_len, &staging_bytes)) {
                status = curdi_staging_overflow();
                goto fail;
            }
            span = &spans[span_count++];
            span->buffer_key = entry->buffer_key;
            span->offset = entry->offset;
            span->byte_len = entry->end - entry->offset;
            span->staging_offset = staging_bytes;
        } else if (entry->end > span_end) {
            /* Sorted by offset, so entry->offset >= span->offset. */
            span->byte_len = entry->end - span->offset;
        }
        if (!curdi_u64_add(span->staging_offset, entry->offset - span->offset,
                           &item_staging_offset[entry->item_index])) {
            status = curdi_staging_overflow();
            goto fail;
        }
    }
    if (span_count > 0
        && !curdi_u64_add(staging_bytes, spans[span_count - 1].byte_len,
                          &staging_bytes)) {
        status = curdi_staging_overflow();
        goto fail;
    }

    free(entries);
    out_plan->spans = spans;
    out_plan->span_count = span_count;
    out_plan->item_staging_offset = item_staging_offset;
    out_plan->item_count = count;
    out_plan->staging_bytes = staging_bytes;
    return CURD_OK;

fail:
    free(entries);
    free(spans);
    free(item_staging_offset);
    return status;
}

void curdi_copyplan_free(curdi_copy_plan *plan)
{
    if (plan == NULL)
        return;
    free(plan->spans);
    free(plan->item_staging_offset);
    memset(plan, 0, sizeof *plan);
}
