/* plan.c - the plan and the engine of a transfer (pure, see plan.h).
 *
 * Read top to bottom: the plan (fused spans from lib/transfer/spans.c, each
 * decided direct or staged, staged items laid out in one stream), the
 * chunk policy, then the engine that runs a plan through curdi_xfer_ops. */
#include "transfer/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "transfer/spans.h"
#include "base/status.h"

/* ------------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------- */

curd_status curdi_xfer_alloc(size_t count, size_t element_bytes, bool zeroed,
                             void **out)
{
    size_t bytes;
    void *memory;
    if (count == 0) {
        *out = NULL;
        return CURD_OK;
    }
    if (!curdi_size_mul(count, element_bytes, &bytes))
        return curdi_fail(CURD_E_OVERFLOW,
                          "a transfer plan for %zu items needs more than"
                          " SIZE_MAX bytes. Fix: split the batch.",
                          count);
    memory = zeroed ? calloc(count, element_bytes) : malloc(bytes);
    if (memory == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate %zu bytes for a transfer plan"
                          " of %zu items. Fix: free host memory or split the"
                          " batch.",
                          bytes, count);
    *out = memory;
    return CURD_OK;
}

void curdi_xfer_plan_free(curdi_xfer_plan *plan)
{
    if (plan == NULL)
        return;
    /* One block, which starts with the spans (see plan_arrays), unless
     * they are inline. */
    if (plan->spans != &plan->one_span)
        free(plan->spans);
    memset(plan, 0, sizeof *plan);
}

static int index_compare(const void *left, const void *right)
{
    size_t a = *(const size_t *)left;
    size_t b = *(const size_t *)right;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Decides how a span moves (see plan.h); member_bytes is the sum of its
 * members' lengths. */
static void span_decide(curdi_xfer_span *span,
                              const curdi_xfer_item *items,
                              const size_t *members, uint64_t span_offset,
                              uint64_t member_bytes)
{
    const curdi_xfer_item *first = &items[members[span->first_member]];
    uintptr_t key = first->registered_key;
    /* host - offset, wrapping: equal for every member exactly when each
     * member's host bytes sit where the span's layout puts them. */
    uintptr_t delta = (uintptr_t)first->host - (uintptr_t)first->offset;
    bool contiguous = key != 0;
    bool all_registered = key != 0;
    for (size_t index = 0; index < span->member_count; index++) {
        const curdi_xfer_item *item =
            &items[members[span->first_member + index]];
        if (item->registered_key == 0)
            all_registered = false;
        if (item->registered_key != key
            || (uintptr_t)item->host - (uintptr_t)item->offset != delta)
            contiguous = false;
    }
    span->mode = CURDI_SPAN_STAGED;
    span->host = NULL;
    if (contiguous) {
        /* Every member lies inside the one registered range `key`, and
         * their union is [delta + span_offset, + byte_len): the span's
         * host side is that run, inside the range. */
        span->mode = CURDI_SPAN_DIRECT;
        span->host = (unsigned char *)(delta + (uintptr_t)span_offset);
    } else if (all_registered
               && member_bytes / span->member_count
                      >= CURDI_DIRECT_ITEM_MIN_BYTES) {
        span->mode = CURDI_SPAN_DIRECT_ITEMS;
    }
}

/* Makes run the one row [device_ptr, + byte_len) <-> [host, + byte_len). */
static void run_start(curdi_xfer_run *run, uint64_t device_key,
                      uintptr_t host_key, uint64_t device_ptr, uintptr_t host,
                      uint64_t byte_len)
{
    run->device_ptr = device_ptr;
    run->host = host;
    run->width = byte_len;
    run->count = 1;
    run->device_pitch = 0;
    run->host_pitch = 0;
    run->device_key = device_key;
    run->host_key = host_key;
}

/* Adds that copy to run as its next row and returns true when it is one
 * (see curdi_xfer_run; max_pitch 0: nothing joins); otherwise returns
 * false and leaves run as it was. Called for every copy of a plan, twice
 * (the planner and the engine), so the common case is two compares. */
static bool run_join(curdi_xfer_run *run, uint64_t device_key,
                     uintptr_t host_key, uint64_t device_ptr, uintptr_t host,
                     uint64_t byte_len, uint64_t max_pitch)
{
    if (run->count == 0 || byte_len != run->width
        || device_key != run->device_key || host_key != run->host_key
        || host_key == 0)
        return false;
    if (run->count >= 2) {
        if (device_ptr != run->next_device || host != run->next_host)
            return false;
    } else {
        /* The second row sets the pitches. */
        if (device_ptr <= run->device_ptr || host <= run->host
            || device_ptr - run->device_ptr < byte_len
            || device_ptr - run->device_ptr > max_pitch
            || host - run->host < byte_len || host - run->host > max_pitch)
            return false;
        run->device_pitch = device_ptr - run->device_ptr;
        run->host_pitch = host - run->host;
    }
    run->count++;
    /* Past the end of memory the sums wrap to an address no next row can
     * have. */
    run->next_device = device_ptr + run->device_pitch;
    run->next_host = host + (uintptr_t)run->host_pitch;
    return true;
}

bool curdi_xfer_wants_gather(const curdi_gather_policy *policy,
                             size_t dma_count, uint64_t span_bytes)
{
    if (policy == NULL || dma_count == 0
        || policy->path == CURDI_PATH_DMA)
        return false;
    if (policy->path == CURDI_PATH_GATHER)
        return true;
    return dma_count >= policy->min_spans
           && span_bytes / dma_count <= policy->max_span_bytes;
}

/* Whether a span would move through the gathered stream: the staged ones,
 * and direct ones small enough that one DMA each costs more than their
 * share of a kernel (every direct one when gathering is forced). Spans
 * moved item by item are large by definition and stay so. */
static bool span_gatherable(const curdi_xfer_span *span,
                            const curdi_gather_policy *policy)
{
    if (span->mode == CURDI_SPAN_STAGED)
        return true;
    return span->mode == CURDI_SPAN_DIRECT
           && (policy->path == CURDI_PATH_GATHER
               || span->byte_len <= policy->max_span_bytes);
}

/* The stand-in host key of the staging stream while planning: staged
 * spans sit back to back in it, so they join into rows wherever their
 * device sides do. */
#define PLAN_STREAM_KEY ((uintptr_t)1)

/* Counts one more DMA unless the copy joins run, as the engine will move
 * it. */
static void plan_count_dma(curdi_xfer_run *run, size_t *dmas,
                           uint64_t device_key, uintptr_t host_key,
                           uint64_t device_ptr, uintptr_t host,
                           uint64_t byte_len, uint64_t max_pitch)
{
    if (run_join(run, device_key, host_key, device_ptr, host, byte_len,
                 max_pitch))
        return;
    run_start(run, device_key, host_key, device_ptr, host, byte_len);
    (*dmas)++;
}

/* Gathers the plan when the policy says so of the DMAs its gatherable
 * spans would take without the kernels: the direct ones one after another
 * and the staged ones through the stream, rows joined. Its gatherable
 * spans then become staged ones, moved by the kernels. */
static void plan_gather_decide(curdi_xfer_plan *plan,
                               const curdi_xfer_item *items,
                               const curdi_gather_policy *policy,
                               uint64_t max_pitch)
{
    size_t dmas = 0;
    uint64_t candidate_bytes = 0;
    uint64_t stream = 0;
    curdi_xfer_run direct_run;
    curdi_xfer_run staged_run;
    if (policy == NULL)
        return;
    memset(&direct_run, 0, sizeof direct_run);
    memset(&staged_run, 0, sizeof staged_run);
    for (size_t index = 0; index < plan->span_count; index++) {
        const curdi_xfer_span *span = &plan->spans[index];
        const curdi_xfer_item *first;
        if (!span_gatherable(span, policy))
            continue;
        first = &items[plan->members[span->first_member]];
        if (span->mode == CURDI_SPAN_STAGED) {
            plan_count_dma(&staged_run, &dmas, first->buffer_key,
                           PLAN_STREAM_KEY, span->device_ptr,
                           (uintptr_t)stream, span->byte_len, max_pitch);
            stream += span->byte_len;
        } else {
            plan_count_dma(&direct_run, &dmas, first->buffer_key,
                           first->registered_key, span->device_ptr,
                           (uintptr_t)span->host, span->byte_len, max_pitch);
        }
        /* Each span lies in a checked buffer range; a wrap would only
         * make the average look small, on a plan the stream layout then
         * refuses as too long. */
        candidate_bytes += span->byte_len;
    }
    if (!curdi_xfer_wants_gather(policy, dmas, candidate_bytes))
        return;
    for (size_t index = 0; index < plan->span_count; index++) {
        curdi_xfer_span *span = &plan->spans[index];
        if (!span_gatherable(span, policy))
            continue;
        span->mode = CURDI_SPAN_STAGED;
        span->host = NULL;
    }
    plan->gather = true;
}

/* The host address of stream byte 0 when every staged item lies in one
 * registered range where the stream's layout puts it (see plan.h), else
 * NULL. Every stream byte belongs to some item, so the run [result,
 * result + stream_bytes) is the union of the items' host ranges, all
 * inside that one range. */
static unsigned char *plan_gather_host(const curdi_xfer_plan *plan,
                                       const curdi_xfer_item *items)
{
    const curdi_xfer_item *first;
    uintptr_t delta;
    if (plan->staged_item_count == 0)
        return NULL;
    first = &items[plan->staged_items[0]];
    /* host - stream offset, wrapping: the same for every item exactly
     * when the stream maps onto the host by one shift. */
    delta = (uintptr_t)first->host
            - (uintptr_t)plan->item_stream_offset[plan->staged_items[0]];
    if (first->registered_key == 0)
        return NULL;
    for (size_t index = 0; index < plan->staged_item_count; index++) {
        size_t item = plan->staged_items[index];
        if (items[item].registered_key != first->registered_key
            || (uintptr_t)items[item].host
                       - (uintptr_t)plan->item_stream_offset[item]
                   != delta)
            return NULL;
    }
    return (unsigned char *)delta;
}

/* Fills the plan's arrays from the fused spans (lib/transfer/spans.c): first
 * each span's device side, member order and mode; then whether the plan
 * gathers; then the stream that the staged spans make, back to back. */
static curd_status plan_spans(curdi_xfer_plan *plan,
                              const curdi_xfer_item *items,
                              const curdi_span_list *fused,
                              const curdi_gather_policy *gather,
                              uint64_t max_pitch)
{
    uint64_t stream = 0;
    for (size_t index = 0; index < plan->span_count; index++) {
        curdi_xfer_span *span = &plan->spans[index];
        const curdi_copy_span *source = &fused->spans[index];
        const size_t *members = &fused->members[source->first_member];
        const curdi_xfer_item *first = &items[members[0]];
        curd_status status;
        span->first_member = source->first_member;
        span->member_count = source->member_count;
        span->byte_len = source->byte_len;
        span->stream_offset = 0;
        span->member_bytes = 0;
        /* Members share the buffer, so its base: first's. */
        status = curdi_device_ptr_offset(first->device_base, source->offset,
                                         &span->device_ptr);
        if (status != CURD_OK)
            return status;
        /* member_bytes <= count * max item, each range already checked
         * against a buffer size; summing in u64 cannot wrap for real
         * batches, and a wrap would only pick staging over direct. */
        for (size_t member = 0; member < span->member_count; member++)
            span->member_bytes += items[members[member]].byte_len;
        if (span->member_bytes != span->byte_len && span->member_count > 1)
            /* Members overlap (their union is the span): where uploads
             * overlap the later item wins, so they go in item order. */
            qsort(&plan->members[span->first_member], span->member_count,
                  sizeof *plan->members, index_compare);
        span_decide(span, items, plan->members, source->offset,
                    span->member_bytes);
    }
    plan_gather_decide(plan, items, gather, max_pitch);

    for (size_t index = 0; index < plan->span_count; index++) {
        curdi_xfer_span *span = &plan->spans[index];
        const curdi_copy_span *source = &fused->spans[index];
        const size_t *members = &fused->members[source->first_member];
        if (span->mode == CURDI_SPAN_DIRECT_ITEMS)
            plan->dma_bytes += span->member_bytes;
        else
            plan->dma_bytes += span->byte_len;
        if (span->mode != CURDI_SPAN_STAGED)
            continue;
        span->stream_offset = stream;
        /* stream <= fused->staging_bytes, which the planner checked. */
        stream += span->byte_len;
        plan->staged_span_count++;
        if (span->member_bytes != span->byte_len)
            plan->overlapping = true;
        /* In the fused order, so in (stream offset, item index) order. */
        for (size_t member = 0; member < span->member_count; member++) {
            size_t item = members[member];
            plan->item_stream_offset[item] =
                span->stream_offset + (items[item].offset - source->offset);
            plan->staged_items[plan->staged_item_count++] = item;
        }
    }
    plan->stream_bytes = stream;
    if (stream == 0)
        plan->gather = false;
    if (plan->gather)
        plan->gather_host = plan_gather_host(plan, items);
    return CURD_OK;
}

/* The fused plan of one item, which needs neither a sort nor a block:
 * one span when the item has bytes, none otherwise. */
static void fuse_one(const curdi_xfer_item *item, curdi_copy_span *span,
                     size_t *member, curdi_span_list *out)
{
    memset(out, 0, sizeof *out);
    *member = 0;
    out->spans = span;
    out->members = member;
    out->item_count = 1;
    if (item->byte_len == 0)
        return;
    span->buffer_key = item->buffer_key;
    span->offset = item->offset;
    span->byte_len = item->byte_len;
    span->staging_offset = 0;
    span->first_member = 0;
    span->member_count = 1;
    out->span_count = 1;
    out->member_count = 1;
    out->staging_bytes = item->byte_len;
}

/* The fused plan of a batch (lib/transfer/spans.c), which it allocates. */
static curd_status fuse_batch(const curdi_xfer_item *items, size_t count,
                              curdi_span_list *out)
{
    curdi_copy_item *copy_items = NULL;
    curd_status status = curdi_xfer_alloc(count, sizeof *copy_items, false,
                                          (void **)&copy_items);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        copy_items[index].buffer_key = items[index].buffer_key;
        copy_items[index].offset = items[index].offset;
        copy_items[index].byte_len = items[index].byte_len;
    }
    status = curdi_spans_build(copy_items, count, out);
    free(copy_items);
    return status;
}

/* Points the plan's arrays at its storage for one span and one item. */
static void plan_inline(curdi_xfer_plan *plan)
{
    plan->spans = &plan->one_span;
    plan->item_stream_offset = &plan->one_stream_offset;
    plan->members = &plan->one_member[0];
    plan->staged_items = &plan->one_member[1];
}

/* Points the plan's arrays at its inline storage (one item) or at one new
 * block for span_count spans and member_count members: the spans, the
 * per-item stream offsets (zeroed), the members and the staged items;
 * 64-bit fields first keep every array aligned. */
static curd_status plan_arrays(curdi_xfer_plan *plan, size_t count,
                               size_t span_count, size_t member_count)
{
    size_t block_bytes = 0;
    size_t bytes;
    unsigned char *block;
    if (count == 1) {
        plan_inline(plan);
    } else {
        if (!curdi_size_mul(span_count, sizeof *plan->spans, &block_bytes)
            || !curdi_size_mul(count, sizeof *plan->item_stream_offset,
                               &bytes)
            || !curdi_size_add(block_bytes, bytes, &block_bytes)
            || !curdi_size_mul(member_count, 2u * sizeof *plan->members,
                               &bytes)
            || !curdi_size_add(block_bytes, bytes, &block_bytes))
            return curdi_fail(CURD_E_OVERFLOW,
                              "a transfer plan for %zu items needs more than"
                              " SIZE_MAX bytes. Fix: split the batch.",
                              count);
        if (block_bytes == 0)
            return CURD_OK;
        block = malloc(block_bytes);
        if (block == NULL)
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "could not allocate %zu bytes for a transfer"
                              " plan of %zu items. Fix: free host memory or"
                              " split the batch.",
                              block_bytes, count);
        plan->spans = (curdi_xfer_span *)(void *)block;
        plan->item_stream_offset =
            (uint64_t *)(void *)(plan->spans + span_count);
        plan->members = (size_t *)(void *)(plan->item_stream_offset + count);
        plan->staged_items = plan->members + member_count;
    }
    memset(plan->item_stream_offset, 0,
           count * sizeof *plan->item_stream_offset);
    return CURD_OK;
}

curd_status curdi_xfer_plan_build(const curdi_xfer_item *items, size_t count,
                                  const curdi_gather_policy *gather,
                                  uint64_t max_pitch,
                                  curdi_xfer_plan *out_plan)
{
    curdi_span_list fused;
    curdi_copy_span one_span;
    size_t one_member;
    curd_status status;

    memset(out_plan, 0, sizeof *out_plan);
    if (count == 1)
        fuse_one(&items[0], &one_span, &one_member, &fused);
    else if ((status = fuse_batch(items, count, &fused)) != CURD_OK)
        return status;
    status = plan_arrays(out_plan, count, fused.span_count,
                         fused.member_count);
    if (status == CURD_OK) {
        memcpy(out_plan->members, fused.members,
               fused.member_count * sizeof *out_plan->members);
        out_plan->span_count = fused.span_count;
        status = plan_spans(out_plan, items, &fused, gather, max_pitch);
    }
    if (count != 1)
        curdi_spans_free(&fused);
    if (status != CURD_OK)
        curdi_xfer_plan_free(out_plan);
    return status;
}

/* Rows in registered memory: one direct span, the rows' whole extent. */
static void plan_direct_rows(const curdi_xfer_item *first, uint64_t row_count,
                             uint64_t device_pitch, uint64_t host_pitch,
                             curdi_xfer_plan *plan)
{
    curdi_xfer_span *span = &plan->one_span;
    plan_inline(plan);
    plan->span_count = 1;
    span->device_ptr = first->device_base + first->offset;
    span->host = first->host;
    span->byte_len = first->byte_len * row_count;
    span->member_bytes = span->byte_len;
    span->mode = CURDI_SPAN_DIRECT;
    span->first_member = 0;
    span->member_count = 1;
    plan->dma_bytes = span->byte_len;
    run_start(&plan->rows, first->buffer_key, first->registered_key,
              span->device_ptr, (uintptr_t)first->host, first->byte_len);
    plan->rows.count = row_count;
    plan->rows.device_pitch = device_pitch;
    plan->rows.host_pitch = host_pitch;
}

curd_status curdi_xfer_plan_rows(const curdi_xfer_item *items, size_t count,
                                 uint64_t device_pitch, uint64_t host_pitch,
                                 curdi_xfer_plan *plan)
{
    uint64_t width = items[0].byte_len;
    curd_status status;
    memset(plan, 0, sizeof *plan);
    if (items[0].registered_key != 0) {
        plan_direct_rows(&items[0], count, device_pitch, host_pitch, plan);
        return CURD_OK;
    }
    /* Each row a staged span, back to back in the stream in row order
     * (which is device order: the rows move forward), as the planner
     * would lay them out; the engine joins their DMAs into rows again,
     * at the width's pitch on the staging side. */
    status = plan_arrays(plan, count, count, count);
    if (status != CURD_OK)
        return status;
    plan->span_count = count;
    for (size_t row = 0; row < count; row++) {
        curdi_xfer_span *span = &plan->spans[row];
        /* row * width < the rows' total, which lies in one buffer. */
        uint64_t stream_offset = (uint64_t)row * width;
        span->device_ptr = items[row].device_base + items[row].offset;
        span->byte_len = width;
        span->stream_offset = stream_offset;
        span->host = NULL;
        span->member_bytes = width;
        span->mode = CURDI_SPAN_STAGED;
        span->first_member = row;
        span->member_count = 1;
        plan->members[row] = row;
        plan->staged_items[row] = row;
        plan->item_stream_offset[row] = stream_offset;
    }
    plan->staged_item_count = count;
    plan->staged_span_count = count;
    plan->stream_bytes = (uint64_t)count * width;
    plan->dma_bytes = plan->stream_bytes;
    return CURD_OK;
}

bool curdi_xfer_plan_pageable_direct(curdi_xfer_plan *plan,
                                     const curdi_xfer_item *items,
                                     size_t count, uint64_t max_bytes)
{
    curdi_xfer_span *span = plan->spans;
    if (count != 1 || plan->span_count != 1 || plan->gather
        || span->mode != CURDI_SPAN_STAGED || items[0].registered_key != 0
        || items[0].byte_len == 0 || items[0].byte_len > max_bytes)
        return false;
    /* One item, one span: the span is the item. */
    span->mode = CURDI_SPAN_DIRECT;
    span->host = items[0].host;
    span->stream_offset = 0;
    plan->stream_bytes = 0;
    plan->staged_span_count = 0;
    plan->staged_item_count = 0;
    return true;
}

uint64_t curdi_xfer_chunk_bytes(uint64_t stream_bytes, uint64_t min_bytes,
                                uint64_t max_bytes)
{
    const uint64_t granule = 4096u;
    uint64_t chunk;
    if (stream_bytes <= min_bytes)
        return stream_bytes;
    /* A quarter, rounded up (so four chunks, not five, carry it); the sum
     * cannot wrap. */
    chunk = stream_bytes / 4u + (stream_bytes % 4u != 0);
    chunk = (chunk + granule - 1u) / granule * granule;
    if (chunk < min_bytes)
        chunk = min_bytes;
    if (chunk > max_bytes)
        chunk = max_bytes;
    return chunk;
}

unsigned curdi_xfer_slot_count(uint64_t chunk_count, uint64_t max_slots)
{
    if (max_slots > CURDI_XFER_SLOTS_MAX)
        max_slots = CURDI_XFER_SLOTS_MAX;
    return (unsigned)(chunk_count < max_slots ? chunk_count : max_slots);
}

/* ------------------------------------------------------------------------
 * The engine
 * ---------------------------------------------------------------------- */

typedef struct curdi_engine {
    const curdi_xfer_plan *plan;
    const curdi_xfer_item *items;
    bool upload;
    unsigned char *const *slots;
    unsigned slot_count;
    uint64_t chunk_bytes;
    uint64_t piece_bytes;
    bool streaming;
    const curdi_xfer_ops *ops;
    curdi_copy_team *team;
    /* The DMAs not yet enqueued: rows that the next copy may join
     * (engine_copy), enqueued before anything else reaches the device. */
    curdi_xfer_run run;
    uint64_t max_pitch; /* 0: copies never join */
    curdi_xfer_result result;
    curdi_copy_piece *pieces; /* scratch for one chunk's host copies */
    /* Gathering plans: scratch for one chunk's device pieces. */
    curdi_xfer_piece *chunk_pieces;
} curdi_engine;

/* A cursor over the staged items in stream order. With no overlaps the
 * items' ends grow with their starts, so skipping those that end before
 * a chunk is exact; with overlaps it is still correct (each item is
 * checked against the chunk), just not minimal. */
typedef struct curdi_item_cursor {
    size_t first;
} curdi_item_cursor;

static uint64_t item_stream_end(const curdi_engine *engine, size_t item)
{
    return engine->plan->item_stream_offset[item]
           + engine->items[item].byte_len;
}

/* Enqueues the rows held back, if any: one DMA, strided when there are
 * several rows. */
static curd_status engine_flush(curdi_engine *engine)
{
    curdi_xfer_run *run = &engine->run;
    const curdi_xfer_ops *ops = engine->ops;
    curd_status status;
    if (run->count == 0)
        return CURD_OK;
    if (run->count == 1)
        status = ops->copy(ops->context, engine->upload, run->device_ptr,
                           (unsigned char *)run->host, run->width);
    else
        status = ops->copy_rows(ops->context, engine->upload, run);
    if (status == CURD_OK) {
        engine->result.dma_ops++;
        /* The rows lie in one buffer: their bytes fit in 64 bits. */
        engine->result.dma_bytes += run->width * run->count;
    }
    run->count = 0;
    return status;
}

/* One DMA between [device_ptr, + byte_len) in the buffer device_key and
 * host memory in the area host_key (0: pageable): held back while the
 * next copies may join it into rows (run_join). */
static curd_status engine_copy(curdi_engine *engine, uint64_t device_key,
                               uintptr_t host_key, uint64_t device_ptr,
                               unsigned char *host, uint64_t byte_len)
{
    curd_status status;
    if (run_join(&engine->run, device_key, host_key, device_ptr,
                 (uintptr_t)host, byte_len, engine->max_pitch))
        return CURD_OK;
    status = engine_flush(engine);
    if (status != CURD_OK)
        return status;
    run_start(&engine->run, device_key, host_key, device_ptr,
              (uintptr_t)host, byte_len);
    return CURD_OK;
}

/* ops->mark and ops->wait after the DMAs held back. */
static curd_status engine_mark(curdi_engine *engine, unsigned slot)
{
    curd_status status = engine_flush(engine);
    if (status != CURD_OK)
        return status;
    return engine->ops->mark(engine->ops->context, slot);
}

static curd_status engine_wait(curdi_engine *engine, unsigned slot)
{
    curd_status status = engine_flush(engine);
    if (status != CURD_OK)
        return status;
    return engine->ops->wait(engine->ops->context, slot);
}

/* The buffer key of a span: its members share the buffer. */
static uint64_t span_buffer_key(const curdi_engine *engine,
                                const curdi_xfer_span *span)
{
    return engine->items[engine->plan->members[span->first_member]]
        .buffer_key;
}

/* Adds host copies of byte_len bytes, cut into team-sized pieces unless
 * `whole`. */
static void engine_piece(curdi_engine *engine, unsigned char *dst,
                               const unsigned char *src, uint64_t byte_len,
                               size_t *count, bool whole)
{
    while (byte_len > 0) {
        uint64_t part = whole || byte_len <= engine->piece_bytes
                            ? byte_len
                            : engine->piece_bytes;
        curdi_copy_piece *piece = &engine->pieces[(*count)++];
        piece->dst = dst;
        piece->src = src;
        piece->byte_len = (size_t)part;
        dst += part;
        src += part;
        byte_len -= part;
    }
}

/* The stream bytes of chunk `chunk`: [*out_start, *out_end), the last
 * chunk cut at the stream's end. chunk is below the chunk count, so its
 * start lies below stream_bytes and neither sum can wrap. */
static void engine_chunk_range(const curdi_engine *engine,
                                     uint64_t chunk, uint64_t *out_start,
                                     uint64_t *out_end)
{
    uint64_t start = chunk * engine->chunk_bytes;
    uint64_t end = start + engine->chunk_bytes;
    *out_start = start;
    *out_end = end < engine->plan->stream_bytes ? end
                                                : engine->plan->stream_bytes;
}

/* Host copies between chunk `chunk` (in slot `slot`) and the caller's
 * memory: into the slot for an upload, out of it for a download. */
static void engine_host_copy(curdi_engine *engine,
                                   curdi_item_cursor *cursor, uint64_t chunk,
                                   unsigned slot)
{
    const curdi_xfer_plan *plan = engine->plan;
    uint64_t chunk_start, chunk_end;
    engine_chunk_range(engine, chunk, &chunk_start, &chunk_end);
    unsigned char *base = engine->slots[slot];
    size_t count = 0;

    if (engine->upload && plan->overlapping) {
        /* Later items win where uploads overlap: copy in item order, one
         * after another. Rare, so a plain scan of every staged item. */
        for (size_t index = 0; index < engine->plan->span_count; index++) {
            const curdi_xfer_span *span = &plan->spans[index];
            if (span->mode != CURDI_SPAN_STAGED
                || span->stream_offset >= chunk_end
                || span->stream_offset + span->byte_len <= chunk_start)
                continue;
            for (size_t member = 0; member < span->member_count; member++) {
                size_t item = plan->members[span->first_member + member];
                uint64_t start = plan->item_stream_offset[item];
                uint64_t end = item_stream_end(engine, item);
                uint64_t from = start > chunk_start ? start : chunk_start;
                uint64_t to = end < chunk_end ? end : chunk_end;
                if (from >= to)
                    continue;
                /* from - chunk_start < chunk_bytes (the slot's size) and
                 * from - start < the item's byte_len (its src range). */
                memcpy(base + (from - chunk_start),
                       engine->items[item].host + (from - start),
                       (size_t)(to - from));
            }
        }
        return;
    }

    while (cursor->first < plan->staged_item_count
           && item_stream_end(engine,
                                    plan->staged_items[cursor->first])
                  <= chunk_start)
        cursor->first++;
    for (size_t index = cursor->first; index < plan->staged_item_count;
         index++) {
        size_t item = plan->staged_items[index];
        uint64_t start = plan->item_stream_offset[item];
        uint64_t end = item_stream_end(engine, item);
        uint64_t from;
        uint64_t to;
        if (start >= chunk_end)
            break;
        from = start > chunk_start ? start : chunk_start;
        to = end < chunk_end ? end : chunk_end;
        if (from >= to)
            continue;
        /* Both sides in bounds as above. Pieces of overlapping downloads
         * stay whole so the scratch (sized for one piece per item plus the
         * cuts of one chunk) suffices. */
        if (engine->upload)
            engine_piece(engine, base + (from - chunk_start),
                               engine->items[item].host + (from - start),
                               to - from, &count, plan->overlapping);
        else
            engine_piece(engine, engine->items[item].host + (from - start),
                               base + (from - chunk_start), to - from, &count,
                               plan->overlapping);
    }
    curdi_copy_team_run(engine->team, engine->pieces, count,
                        engine->streaming);
}

/* Moves chunk `chunk` between its host side (slot `slot`, or the
 * registered memory of a plan that gathers straight there) and the
 * spans' device bytes: one DMA per span piece, or, for a gathering plan,
 * one gathered move of the whole chunk. */
static curd_status engine_chunk_move(curdi_engine *engine,
                                     size_t *span_cursor, uint64_t chunk,
                                     unsigned slot)
{
    const curdi_xfer_plan *plan = engine->plan;
    uint64_t chunk_start, chunk_end;
    unsigned char *host;
    size_t count = 0;
    curd_status status;
    engine_chunk_range(engine, chunk, &chunk_start, &chunk_end);
    /* gather_host + chunk_start lies inside the registered run of
     * stream_bytes (plan.h). */
    host = plan->gather_host != NULL ? plan->gather_host + chunk_start
                                     : engine->slots[slot];
    for (size_t index = *span_cursor; index < plan->span_count; index++) {
        const curdi_xfer_span *span = &plan->spans[index];
        curdi_xfer_piece piece;
        uint64_t span_end;
        uint64_t from;
        uint64_t to;
        if (span->mode != CURDI_SPAN_STAGED)
            continue;
        if (span->stream_offset >= chunk_end)
            break;
        span_end = span->stream_offset + span->byte_len;
        if (span_end <= chunk_start) {
            *span_cursor = index + 1;
            continue;
        }
        from = span->stream_offset > chunk_start ? span->stream_offset
                                                 : chunk_start;
        to = span_end < chunk_end ? span_end : chunk_end;
        /* device_ptr + (from - stream_offset) stays inside the span, which
         * lies inside a buffer whose range was checked. */
        piece.device_ptr = span->device_ptr + (from - span->stream_offset);
        piece.stage_offset = from - chunk_start;
        piece.byte_len = to - from;
        if (plan->gather) {
            /* At most one piece per staged span in a chunk: the scratch
             * holds staged_span_count of them. */
            engine->chunk_pieces[count++] = piece;
            continue;
        }
        /* The chunk's host side is one staging slot. */
        status = engine_copy(engine, span_buffer_key(engine, span),
                             (uintptr_t)host, piece.device_ptr,
                             host + piece.stage_offset, piece.byte_len);
        if (status != CURD_OK)
            return status;
    }
    if (!plan->gather)
        return CURD_OK;
    status = engine_flush(engine);
    if (status != CURD_OK)
        return status;
    status = engine->ops->gathered(engine->ops->context, engine->upload, host,
                                   chunk_end - chunk_start,
                                   engine->chunk_pieces, count);
    if (status == CURD_OK) {
        engine->result.dma_ops++;
        engine->result.dma_bytes += chunk_end - chunk_start;
    }
    return status;
}

static curd_status engine_direct(curdi_engine *engine)
{
    const curdi_xfer_plan *plan = engine->plan;
    if (plan->rows.count > 0) {
        /* Held back like any rows; the final flush sends them. Nothing
         * was held before the first span. */
        engine->run = plan->rows;
        return CURD_OK;
    }
    for (size_t index = 0; index < plan->span_count; index++) {
        const curdi_xfer_span *span = &plan->spans[index];
        const curdi_xfer_item *first =
            &engine->items[plan->members[span->first_member]];
        curd_status status = CURD_OK;
        if (span->mode == CURDI_SPAN_DIRECT) {
            /* The span's host side lies in its members' one registered
             * range (0 for a small pageable upload: never joined). */
            status = engine_copy(engine, first->buffer_key,
                                 first->registered_key, span->device_ptr,
                                 span->host, span->byte_len);
        } else if (span->mode == CURDI_SPAN_DIRECT_ITEMS) {
            /* In item order: where uploads overlap, the later one lands
             * last (one stream runs its copies in order; rows never
             * overlap one another). */
            for (size_t member = 0;
                 member < span->member_count && status == CURD_OK; member++) {
                const curdi_xfer_item *item =
                    &engine->items[plan->members[span->first_member + member]];
                status = engine_copy(engine, item->buffer_key,
                                     item->registered_key,
                                     item->device_base + item->offset,
                                     item->host, item->byte_len);
            }
        }
        if (status != CURD_OK)
            return status;
    }
    return CURD_OK;
}

static curd_status engine_staged(curdi_engine *engine)
{
    const curdi_xfer_plan *plan = engine->plan;
    uint64_t chunk_count =
        (plan->stream_bytes + engine->chunk_bytes - 1u) / engine->chunk_bytes;
    unsigned slot_count = engine->slot_count;
    curdi_item_cursor fill_cursor = {0};
    size_t span_cursor = 0;
    curd_status status;

    if (plan->gather_host != NULL) {
        /* No pinned staging and no host copies: the kernels move the
         * chunks straight between the registered memory and the spans, one
         * after another on the device's queue. */
        for (uint64_t chunk = 0; chunk < chunk_count; chunk++) {
            status = engine_chunk_move(engine, &span_cursor, chunk, 0);
            if (status != CURD_OK)
                return status;
        }
        return CURD_OK;
    }
    if (engine->upload) {
        for (uint64_t chunk = 0; chunk < chunk_count; chunk++) {
            unsigned slot = (unsigned)(chunk % slot_count);
            if (chunk >= slot_count) {
                /* The DMAs of chunk - slot_count read this slot. */
                status = engine_wait(engine, slot);
                if (status != CURD_OK)
                    return status;
            }
            engine_host_copy(engine, &fill_cursor, chunk, slot);
            status = engine_chunk_move(engine, &span_cursor, chunk, slot);
            if (status != CURD_OK)
                return status;
            if (chunk + slot_count < chunk_count) {
                status = engine_mark(engine, slot);
                if (status != CURD_OK)
                    return status;
            }
        }
        return CURD_OK;
    }

    /* Download: up to slot_count chunks in flight. Chunk k's DMAs go into
     * slot k % slot_count as soon as the chunk before it in that slot has
     * been copied out, so while the host copies chunk k out, the DMAs of
     * the next slot_count - 1 chunks are queued. Every chunk but the last
     * is marked and waited for; the last one is copied out after the
     * fence (by the caller of this function, see curdi_xfer_execute). */
    for (uint64_t chunk = 0, issued = 0; chunk < chunk_count; chunk++) {
        unsigned slot = (unsigned)(chunk % slot_count);
        while (issued < chunk_count && issued < chunk + slot_count) {
            unsigned issue_slot = (unsigned)(issued % slot_count);
            status = engine_chunk_move(engine, &span_cursor, issued,
                                             issue_slot);
            if (status != CURD_OK)
                return status;
            if (issued + 1u < chunk_count) {
                status = engine_mark(engine, issue_slot);
                if (status != CURD_OK)
                    return status;
            }
            issued++;
        }
        if (chunk + 1u == chunk_count)
            break;
        status = engine_wait(engine, slot);
        if (status != CURD_OK)
            return status;
        engine_host_copy(engine, &fill_cursor, chunk, slot);
    }
    return CURD_OK;
}

/* Checks that staging fits the plan and allocates the engine's scratch. */
static curd_status engine_prepare(curdi_engine *engine)
{
    const curdi_xfer_plan *plan = engine->plan;
    size_t capacity;
    curd_status status;
    if (plan->stream_bytes == 0)
        return CURD_OK;
    if (engine->chunk_bytes == 0
        || (plan->gather_host == NULL
            && (engine->slot_count == 0 || engine->piece_bytes == 0))
        || (plan->gather && engine->ops->gathered == NULL))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "a staged transfer was started without staging"
                          " slots, chunks or a gather operation. Fix: pass"
                          " what the plan needs.");
    if (plan->gather) {
        status = curdi_xfer_alloc(plan->staged_span_count,
                                  sizeof *engine->chunk_pieces, false,
                                  (void **)&engine->chunk_pieces);
        if (status != CURD_OK)
            return status;
    }
    if (plan->gather_host != NULL)
        return CURD_OK;
    /* One piece per staged item, plus the cuts of one chunk. */
    capacity = plan->staged_item_count + 1u;
    if (!plan->overlapping
        && !curdi_size_add(capacity,
                           (size_t)(engine->chunk_bytes / engine->piece_bytes)
                               + 1u,
                           &capacity))
        return curdi_fail(CURD_E_OVERFLOW,
                          "a transfer's copy pieces overflow. Fix: split"
                          " the batch.");
    return curdi_xfer_alloc(capacity, sizeof *engine->pieces, false,
                            (void **)&engine->pieces);
}

curd_status curdi_xfer_execute(const curdi_xfer_plan *plan,
                               const curdi_xfer_item *items, bool upload,
                               const curdi_xfer_staging *staging,
                               const curdi_xfer_ops *ops,
                               curdi_copy_team *team,
                               curdi_xfer_result *out_result)
{
    curdi_engine engine;
    curd_status status;
    memset(&engine, 0, sizeof engine);
    engine.plan = plan;
    engine.items = items;
    engine.upload = upload;
    engine.slots = staging->slots;
    engine.slot_count = staging->slot_count;
    engine.chunk_bytes = staging->chunk_bytes;
    engine.piece_bytes = staging->piece_bytes;
    engine.streaming = staging->streaming;
    engine.ops = ops;
    engine.team = team;

    engine.max_pitch = ops->copy_rows != NULL ? ops->max_pitch : 0u;

    status = engine_prepare(&engine);
    if (status == CURD_OK)
        status = engine_direct(&engine);
    if (status == CURD_OK && plan->stream_bytes > 0)
        status = engine_staged(&engine);
    if (status == CURD_OK)
        status = engine_flush(&engine);
    if (status == CURD_OK && engine.result.dma_ops > 0) {
        status = ops->finish(ops->context);
        if (status == CURD_OK)
            engine.result.fences++;
    }
    if (status == CURD_OK && !upload && plan->stream_bytes > 0
        && plan->gather_host == NULL) {
        uint64_t chunk_count =
            (plan->stream_bytes + engine.chunk_bytes - 1u) / engine.chunk_bytes;
        curdi_item_cursor cursor = {0};
        engine_host_copy(&engine, &cursor, chunk_count - 1u,
                         (unsigned)((chunk_count - 1u) % engine.slot_count));
    }
    free(engine.pieces);
    free(engine.chunk_pieces);
    if (status == CURD_OK && out_result != NULL)
        *out_result = engine.result;
    return status;
}
