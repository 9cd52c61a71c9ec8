/* spans.c - coalescing of copies into fused DMA spans (pure).
 *
 * The plan is a sort and one sweep: the non-empty items, ordered by
 * (buffer_key, offset) (a batch often comes in that order, and is then not
 * sorted at all), are walked once; an item that starts at or before
 * the end of the open span of the same buffer extends it, any other item
 * opens a new span. Spans sit back to back in the staging area in the order
 * they are opened, so each item's bytes start at its span's staging offset
 * plus the item's distance from the span's start. O(n log n) time, O(n)
 * memory. */
#include "transfer/spans.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"

/* ------------------------------------------------------------------------
 * The sort
 * ---------------------------------------------------------------------- */

static inline bool order_before(const curdi_order_entry *a,
                                      const curdi_order_entry *b)
{
    if (a->major != b->major)
        return a->major < b->major;
    if (a->minor != b->minor)
        return a->minor < b->minor;
    return a->index < b->index;
}

/* Runs of this many are put in order by insertion first. */
#define CURDI_ORDER_RUN 8u

void curdi_spans_order_sort(curdi_order_entry *entries,
                            curdi_order_entry *scratch, size_t count)
{
    curdi_order_entry *from = entries;
    curdi_order_entry *to = scratch;
    for (size_t start = 0; start < count; start += CURDI_ORDER_RUN) {
        size_t end = count - start < CURDI_ORDER_RUN ? count
                                                     : start + CURDI_ORDER_RUN;
        for (size_t i = start + 1; i < end; i++) {
            curdi_order_entry entry = entries[i];
            size_t j = i;
            for (; j > start && order_before(&entry, &entries[j - 1]); j--)
                entries[j] = entries[j - 1];
            entries[j] = entry;
        }
    }
    /* Bottom-up merges of neighbouring runs, from one array to the other.
     * count entries of 24 bytes fit in memory, so 2 * width and left plus
     * it stay below 2 * count, which cannot wrap. */
    for (size_t width = CURDI_ORDER_RUN; width < count; width *= 2u) {
        for (size_t left = 0; left < count; left += 2u * width) {
            size_t middle = count - left < width ? count : left + width;
            size_t right = count - middle < width ? count : middle + width;
            size_t i = left, j = middle, k = left;
            while (i < middle && j < right)
                to[k++] = order_before(&from[j], &from[i]) ? from[j++]
                                                                 : from[i++];
            while (i < middle)
                to[k++] = from[i++];
            while (j < right)
                to[k++] = from[j++];
        }
        curdi_order_entry *swap = from;
        from = to;
        to = swap;
    }
    if (from != entries)
        memcpy(entries, from, count * sizeof *entries);
}

/* ------------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------- */

/* count * element_bytes added to *total, checked. */
static bool plan_size_add(size_t *total, size_t count,
                                size_t element_bytes)
{
    size_t bytes;
    return curdi_size_mul(count, element_bytes, &bytes)
           && curdi_size_add(*total, bytes, total);
}

static curd_status plan_alloc_failed(curd_status status, size_t bytes,
                                           size_t count)
{
    if (status == CURD_E_OVERFLOW)
        return curdi_fail(CURD_E_OVERFLOW,
                          "a copy plan for %zu items needs more than SIZE_MAX"
                          " bytes. Fix: split the batch.",
                          count);
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "could not allocate %zu bytes for a copy plan of %zu"
                      " items. Fix: free host memory or split the batch.",
                      bytes, count);
}

static curd_status staging_overflow(void)
{
    return curdi_fail(CURD_E_OVERFLOW,
                      "the fused spans of a batch need more than 2^64-1 bytes"
                      " of staging. Fix: split the batch into smaller ones.");
}

/* Sorts members, the indices of the entry_count non-empty items, into
 * (buffer_key, offset, item index) order. */
static curd_status plan_sort(const curdi_copy_item *items, size_t count,
                                   size_t entry_count, size_t *members)
{
    /* 2 * entry_count <= 2 * count entries of 24 bytes: the per-item
     * arrays sized already hold more. */
    curdi_order_entry *entries = malloc(2u * entry_count * sizeof *entries);
    if (entries == NULL)
        return plan_alloc_failed(CURD_E_OUT_OF_MEMORY,
                                       2u * entry_count * sizeof *entries,
                                       count);
    for (size_t e = 0; e < entry_count; e++) {
        entries[e].major = items[members[e]].buffer_key;
        entries[e].minor = items[members[e]].offset;
        entries[e].index = members[e];
    }
    curdi_spans_order_sort(entries, entries + entry_count, entry_count);
    for (size_t e = 0; e < entry_count; e++)
        members[e] = entries[e].index;
    free(entries);
    return CURD_OK;
}

curd_status curdi_spans_build(const curdi_copy_item *items, size_t count,
                                 curdi_span_list *out_plan)
{
    curdi_copy_span *spans = NULL;
    uint64_t *item_staging_offset = NULL;
    size_t *members = NULL;
    unsigned char *block = NULL;
    size_t block_bytes = 0;
    size_t entry_count = 0;
    size_t span_count = 0;
    uint64_t staging_bytes = 0;
    bool sorted = true;
    curd_status status;

    if (out_plan == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "copy plan output is NULL. Fix: pass a"
                          " curdi_span_list to fill.");
    if (items == NULL && count != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "copy plan items are NULL with a count of %zu."
                          " Fix: pass the item array or a count of 0.",
                          count);

    /* One block: at most one span and one member per item, the per-item
     * offsets. Spans and offsets first keep every array aligned;
     * plan.spans is the block even when it holds no span. */
    if (!plan_size_add(&block_bytes, count, sizeof *spans)
        || !plan_size_add(&block_bytes, count,
                                sizeof *item_staging_offset)
        || !plan_size_add(&block_bytes, count, sizeof *members))
        return plan_alloc_failed(CURD_E_OVERFLOW, 0, count);
    if (block_bytes != 0) {
        block = malloc(block_bytes);
        if (block == NULL)
            return plan_alloc_failed(CURD_E_OUT_OF_MEMORY, block_bytes,
                                           count);
        spans = (curdi_copy_span *)(void *)block;
        item_staging_offset = (uint64_t *)(void *)(spans + count);
        members = (size_t *)(void *)(item_staging_offset + count);
    }

    /* One pass: check every item, list the non-empty ones, and note
     * whether they come in (buffer_key, offset) order already. */
    for (size_t i = 0; i < count; i++) {
        const curdi_copy_item *item = &items[i];
        /* offset + byte_len past 2^64 - 1 (the check of curdi_u64_add,
         * written out: this loop runs once per item of every batch). */
        if (item->byte_len > UINT64_MAX - item->offset) {
            free(block);
            return curdi_fail(CURD_E_OVERFLOW,
                              "copy item %zu (buffer key %" PRIu64
                              ") at offset %" PRIu64 " with length %" PRIu64
                              " ends past 2^64-1. Fix: range-check each item"
                              " against its buffer before planning.",
                              i, item->buffer_key, item->offset,
                              item->byte_len);
        }
        item_staging_offset[i] = 0;
        if (item->byte_len == 0)
            continue;
        if (entry_count > 0) {
            const curdi_copy_item *previous = &items[members[entry_count - 1]];
            if (item->buffer_key < previous->buffer_key
                || (item->buffer_key == previous->buffer_key
                    && item->offset < previous->offset))
                sorted = false;
        }
        members[entry_count++] = i;
    }
    if (!sorted) {
        status = plan_sort(items, count, entry_count, members);
        if (status != CURD_OK)
            goto fail;
    }

    /* The sweep: a span takes the items that follow it in order while
     * they are in its buffer and start at or before its end. */
    for (size_t e = 0; e < entry_count;) {
        const curdi_copy_item *item = &items[members[e]];
        curdi_copy_span *span = &spans[span_count++];
        uint64_t key = item->buffer_key;
        uint64_t end = item->offset + item->byte_len; /* checked above */
        size_t first = e;
        for (e++; e < entry_count; e++) {
            const curdi_copy_item *next = &items[members[e]];
            if (next->buffer_key != key || next->offset > end)
                break;
            /* In order by offset, so next->offset >= the span's start. */
            if (next->offset + next->byte_len > end)
                end = next->offset + next->byte_len;
        }
        span->buffer_key = key;
        span->offset = item->offset;
        span->byte_len = end - item->offset;
        span->staging_offset = staging_bytes;
        span->first_member = first;
        span->member_count = e - first;
        if (!curdi_u64_add(staging_bytes, span->byte_len, &staging_bytes)) {
            status = staging_overflow();
            goto fail;
        }
    }
    /* Every span ends within the staging total, which fits, so neither
     * sum can wrap. */
    for (size_t index = 0; index < span_count; index++) {
        const curdi_copy_span *span = &spans[index];
        for (size_t e = span->first_member;
             e < span->first_member + span->member_count; e++)
            item_staging_offset[members[e]] =
                span->staging_offset + (items[members[e]].offset - span->offset);
    }

    out_plan->spans = spans;
    out_plan->span_count = span_count;
    out_plan->item_staging_offset = item_staging_offset;
    out_plan->item_count = count;
    out_plan->members = members;
    out_plan->member_count = entry_count;
    out_plan->staging_bytes = staging_bytes;
    return CURD_OK;

fail:
    free(block);
    return status;
}

void curdi_spans_free(curdi_span_list *plan)
{
    if (plan == NULL)
        return;
    /* The one block starts with the spans (NULL for an empty batch). */
    free(plan->spans);
    memset(plan, 0, sizeof *plan);
}
