/* plan.c - the plan of a transfer (pure, see plan.h).
 *
 * Read top to bottom: the plan (fused spans from lib/transfer/spans.c, each
 * decided direct or staged, staged items laid out in one stream), then
 * the chunk policy. lib/transfer/engine.c runs the plans. */
#include "transfer/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "transfer/spans.h"

/* ------------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------- */

curd_status curdi_plan_alloc(size_t count, size_t element_bytes, bool zeroed,
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

void curdi_plan_free(curdi_plan *plan)
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
static void span_decide(curdi_plan_span *span,
                              const curdi_transfer_item *items,
                              const size_t *members, uint64_t span_offset,
                              uint64_t member_bytes)
{
    const curdi_transfer_item *first = &items[members[span->first_member]];
    uintptr_t key = first->registered_key;
    /* host - offset, wrapping: equal for every member exactly when each
     * member's host bytes sit where the span's layout puts them. */
    uintptr_t delta = (uintptr_t)first->host - (uintptr_t)first->offset;
    bool contiguous = key != 0;
    bool all_registered = key != 0;
    for (size_t index = 0; index < span->member_count; index++) {
        const curdi_transfer_item *item =
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

bool curdi_plan_wants_gather(const curdi_gather_policy *policy,
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
static bool span_gatherable(const curdi_plan_span *span,
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
static void plan_count_dma(curdi_plan_rows *run, size_t *dmas,
                           uint64_t device_key, uintptr_t host_key,
                           uint64_t device_ptr, uintptr_t host,
                           uint64_t byte_len, uint64_t max_pitch)
{
    if (curdi_plan_rows_join(run, device_key, host_key, device_ptr, host, byte_len,
                 max_pitch))
        return;
    curdi_plan_rows_start(run, device_key, host_key, device_ptr, host, byte_len);
    (*dmas)++;
}

/* Gathers the plan when the policy says so of the DMAs its gatherable
 * spans would take without the kernels: the direct ones one after another
 * and the staged ones through the stream, rows joined. Its gatherable
 * spans then become staged ones, moved by the kernels. */
static void plan_gather_decide(curdi_plan *plan,
                               const curdi_transfer_item *items,
                               const curdi_gather_policy *policy,
                               uint64_t max_pitch)
{
    size_t dmas = 0;
    uint64_t candidate_bytes = 0;
    uint64_t stream = 0;
    curdi_plan_rows direct_run;
    curdi_plan_rows staged_run;
    if (policy == NULL)
        return;
    memset(&direct_run, 0, sizeof direct_run);
    memset(&staged_run, 0, sizeof staged_run);
    for (size_t index = 0; index < plan->span_count; index++) {
        const curdi_plan_span *span = &plan->spans[index];
        const curdi_transfer_item *first;
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
    if (!curdi_plan_wants_gather(policy, dmas, candidate_bytes))
        return;
    for (size_t index = 0; index < plan->span_count; index++) {
        curdi_plan_span *span = &plan->spans[index];
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
static unsigned char *plan_gather_host(const curdi_plan *plan,
                                       const curdi_transfer_item *items)
{
    const curdi_transfer_item *first;
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
static curd_status plan_spans(curdi_plan *plan,
                              const curdi_transfer_item *items,
                              const curdi_span_list *fused,
                              const curdi_gather_policy *gather,
                              uint64_t max_pitch)
{
    uint64_t stream = 0;
    for (size_t index = 0; index < plan->span_count; index++) {
        curdi_plan_span *span = &plan->spans[index];
        const curdi_copy_span *source = &fused->spans[index];
        const size_t *members = &fused->members[source->first_member];
        const curdi_transfer_item *first = &items[members[0]];
        curd_status status;
        span->first_member = source->first_member;
        span->member_count = source->member_count;
        span->byte_len = source->byte_len;
        span->stream_offset = 0;
        span->member_bytes = 0;
        /* Members share the buffer, so its base: first's. */
        status = curdi_checked_device_ptr_offset(
            first->device_base, source->offset, &span->device_ptr);
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
        curdi_plan_span *span = &plan->spans[index];
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
static void fuse_one(const curdi_transfer_item *item, curdi_copy_span *span,
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
static curd_status fuse_batch(const curdi_transfer_item *items, size_t count,
                              curdi_span_list *out)
{
    curdi_copy_item *copy_items = NULL;
    curd_status status = curdi_plan_alloc(count, sizeof *copy_items, false,
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
static void plan_inline(curdi_plan *plan)
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
static curd_status plan_arrays(curdi_plan *plan, size_t count,
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
        plan->spans = (curdi_plan_span *)(void *)block;
        plan->item_stream_offset =
            (uint64_t *)(void *)(plan->spans + span_count);
        plan->members = (size_t *)(void *)(plan->item_stream_offset + count);
        plan->staged_items = plan->members + member_count;
    }
    memset(plan->item_stream_offset, 0,
           count * sizeof *plan->item_stream_offset);
    return CURD_OK;
}

curd_status curdi_plan_build(const curdi_transfer_item *items, size_t count,
                             const curdi_gather_policy *gather,
                             uint64_t max_pitch,
                             curdi_plan *out_plan)
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
        curdi_plan_free(out_plan);
    return status;
}

/* Rows in registered memory: one direct span, the rows' whole extent. */
static void plan_direct_rows(const curdi_transfer_item *first, uint64_t row_count,
                             uint64_t device_pitch, uint64_t host_pitch,
                             curdi_plan *plan)
{
    curdi_plan_span *span = &plan->one_span;
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
    curdi_plan_rows_start(&plan->rows, first->buffer_key, first->registered_key,
                          span->device_ptr, (uintptr_t)first->host, first->byte_len);
    plan->rows.count = row_count;
    plan->rows.device_pitch = device_pitch;
    plan->rows.host_pitch = host_pitch;
}

curd_status curdi_plan_build_rows(const curdi_transfer_item *items, size_t count,
                                  uint64_t device_pitch, uint64_t host_pitch,
                                  curdi_plan *plan)
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
        curdi_plan_span *span = &plan->spans[row];
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

bool curdi_plan_pageable_direct(curdi_plan *plan,
                                const curdi_transfer_item *items,
                                size_t count, uint64_t max_bytes)
{
    curdi_plan_span *span = plan->spans;
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

uint64_t curdi_plan_chunk_bytes(uint64_t stream_bytes, uint64_t min_bytes,
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

unsigned curdi_plan_slot_count(uint64_t chunk_count, uint64_t max_slots)
{
    if (max_slots > CURDI_PLAN_SLOTS_MAX)
        max_slots = CURDI_PLAN_SLOTS_MAX;
    return (unsigned)(chunk_count < max_slots ? chunk_count : max_slots);
}

/* ------------------------------------------------------------------------
 * The host side's policy
 * ---------------------------------------------------------------------- */

void curdi_plan_decide_host(curdi_plan *plan, const curdi_transfer_item *items,
                            size_t count, bool upload,
                            const curdi_tuning *tuning,
                            curdi_plan_host *out_host)
{
    memset(out_host, 0, sizeof *out_host);
    if (upload)
        (void)curdi_plan_pageable_direct(plan, items, count,
                                         tuning->pageable_direct_max);
    out_host->grows_team =
        upload && plan->stream_bytes >= tuning->upload_growth_min;
    if (plan->stream_bytes > 0) {
        out_host->chunk_bytes =
            curdi_plan_chunk_bytes(plan->stream_bytes,
                                   tuning->chunk_min_bytes,
                                   tuning->chunk_max_bytes);
        out_host->chunk_count =
            (plan->stream_bytes + out_host->chunk_bytes - 1u)
            / out_host->chunk_bytes;
        /* Straight to registered memory there is nothing to stage, and
         * no host copy to share. */
        if (plan->gather_host == NULL) {
            out_host->slot_count =
                curdi_plan_slot_count(out_host->chunk_count, tuning->slots);
            out_host->wants_team =
                plan->stream_bytes >= tuning->copy_parallel_min;
        }
        out_host->event_count =
            out_host->chunk_count > 1u ? out_host->slot_count : 0u;
        /* A long upload copies through the cache: streaming stores made
         * the 256 MiB one slower, grown or not (doc/PERFORMANCE.md, the
         * fifth and ninth runs). */
        out_host->streaming =
            upload ? plan->stream_bytes >= tuning->streaming_upload_min
                         && !out_host->grows_team
                   : plan->stream_bytes >= tuning->streaming_download_min;
        out_host->touches = !upload && plan->gather_host == NULL
                            && !out_host->streaming
                            && plan->stream_bytes <= tuning->touch_download_max;
    }
    out_host->copy_ops_bound =
        (uint64_t)plan->span_count + count + out_host->chunk_count;
}

/* How long a run keeps its team warm (lib/transfer/copy_team.h). */
#define TEAM_WARM_BASE_NS 50000u
#define TEAM_WARM_BYTES_PER_NS 4u

void curdi_plan_team_share(const curdi_tuning *tuning, unsigned team_workers,
                           uint64_t chunk_bytes, uint64_t stream_bytes,
                           curdi_plan_team *out_team)
{
    uint64_t share = chunk_bytes / ((uint64_t)team_workers + 1u);
    uint64_t pieces;
    if (share < CURDI_COPY_PIECE_MIN_BYTES)
        share = CURDI_COPY_PIECE_MIN_BYTES;
    out_team->piece_bytes = share < tuning->copy_piece_bytes
                                ? share
                                : tuning->copy_piece_bytes;
    pieces = (chunk_bytes + out_team->piece_bytes - 1u)
             / out_team->piece_bytes;
    out_team->warm_workers =
        pieces - 1u > UINT32_MAX ? UINT32_MAX : (unsigned)(pieces - 1u);
    out_team->warm_window_ns =
        TEAM_WARM_BASE_NS + stream_bytes / TEAM_WARM_BYTES_PER_NS;
}

unsigned curdi_plan_team_growth(const curdi_tuning *tuning, long processors,
                                unsigned team_workers)
{
    long spare = processors - 2 - (long)team_workers;
    if (spare <= 0)
        return 0;
    /* The tuning's bound is CURDI_COPY_THREADS_MAX. */
    return (uint64_t)spare < tuning->upload_growth_threads
               ? (unsigned)spare
               : (unsigned)tuning->upload_growth_threads;
}
