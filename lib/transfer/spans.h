/* spans.h - coalescing of copies into fused DMA spans (pure).
 *
 * Given the items of a batch (each a byte range of one buffer), the planner
 * merges ranges of the same buffer that are adjacent or overlapping into one
 * span, lays the spans out back to back in a staging area, and says where
 * each item's bytes sit in it. Nothing here touches the driver. */
#ifndef CURD_LIB_TRANSFER_SPANS_H
#define CURD_LIB_TRANSFER_SPANS_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"

typedef struct curdi_copy_item {
    uint64_t buffer_key; /* identifies the buffer (e.g. its handle id) */
    uint64_t offset;     /* range start within the buffer */
    uint64_t byte_len;   /* zero-length items get no span */
} curdi_copy_item;

typedef struct curdi_copy_span {
    uint64_t buffer_key;
    uint64_t offset;         /* span start within the buffer */
    uint64_t byte_len;
    uint64_t staging_offset; /* where the span sits in the staging area */
    /* The span's items: plan.members[first_member, + member_count). */
    size_t first_member;
    size_t member_count;
} curdi_copy_span;

typedef struct curdi_span_list {
    curdi_copy_span *spans; /* ordered by (buffer_key, offset) */
    size_t span_count;
    /* Per item, in item order: the offset of its first byte in the staging
     * area (0 for zero-length items). */
    uint64_t *item_staging_offset;
    size_t item_count;
    /* The indices of the non-empty items ordered by (buffer_key, offset,
     * item index): span by span, so also by staging offset. */
    size_t *members;
    size_t member_count;
    uint64_t staging_bytes; /* sum of span lengths */
} curdi_span_list;

/* Builds the plan; CURD_E_OVERFLOW if any offset + byte_len or the staging
 * total overflows, CURD_E_OUT_OF_MEMORY if the host allocation fails. The
 * ranges are not checked against buffer sizes here: callers do that first.
 * Items that come in (buffer_key, offset) order already are planned in
 * one pass without sorting. */
curd_status curdi_spans_build(const curdi_copy_item *items, size_t count,
                                 curdi_span_list *out_plan);
void curdi_spans_free(curdi_span_list *plan);

/* The planner's sort, which transfer.c also orders download destinations
 * with: entries by (major, minor, index). A merge sort with the
 * comparison inline: a batch's unsorted items cost a few instructions
 * each per level, where qsort's indirect calls cost several times that. */
typedef struct curdi_order_entry {
    uint64_t major;
    uint64_t minor;
    size_t index;
} curdi_order_entry;

/* scratch holds at least count entries; the result is in entries. */
void curdi_spans_order_sort(curdi_order_entry *entries,
                            curdi_order_entry *scratch, size_t count);

#endif
