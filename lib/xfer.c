/* xfer.c - the plan and the engine of a transfer (pure, see xfer.h).
 *
 * Read top to bottom: the plan (fused spans from lib/copyplan.c, each
 * decided direct or staged, staged items laid out in one stream), the
 * chunk policy, then the engine that runs a plan through curdi_xfer_ops. */
#include "xfer.h"

#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "copyplan.h"
#include "status.h"

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
    free(plan->spans);
    free(plan->members);
    free(plan->item_stream_offset);
    free(plan->staged_items);
    memset(plan, 0, sizeof *plan);
}

/* The span (of the copy plan) holding staging offset `offset`: spans sit
 * back to back in staging in array order, so the last one starting at or
 * before it. */
static size_t curdi_span_at(const curdi_copy_plan *copy_plan, uint64_t offset)
{
    size_t low = 0;
    size_t high = copy_plan->span_count;
    while (high - low > 1) {
        size_t middle = low + (high - low) / 2;
        if (copy_plan->spans[middle].staging_offset <= offset)
            low = middle;
        else
            high = middle;
    }
    return low;
}

/* Staged items are put in (stream offset, item index) order through these
 * pairs, since qsort has no context argument. */
typedef struct curdi_staged_key {
    uint64_t stream_offset;
    size_t item;
} curdi_staged_key;

static int curdi_staged_compare(const void *left, const void *right)
{
    const curdi_staged_key *a = left;
    const curdi_staged_key *b = right;
    if (a->stream_offset != b->stream_offset)
        return a->stream_offset < b->stream_offset ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item ? 1 : 0;
}

/* Decides how a span moves (see transfer.h). */
static void curdi_span_decide(curdi_xfer_span *span,
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

curd_status curdi_xfer_plan_build(const curdi_xfer_item *items, size_t count,
                                  curdi_xfer_plan *out_plan)
{
    curdi_xfer_plan plan;
    curdi_copy_plan copy_plan;
    curdi_copy_item *copy_items = NULL;
    size_t *item_span = NULL;
    uint64_t *member_bytes = NULL;
    curdi_staged_key *keys = NULL;
    size_t member_total = 0;
    uint64_t stream = 0;
    curd_status status;

    memset(&plan, 0, sizeof plan);
    memset(&copy_plan, 0, sizeof copy_plan);
    status = curdi_xfer_alloc(count, sizeof *copy_items, false,
                              (void **)&copy_items);
    if (status != CURD_OK)
        goto fail;
    for (size_t index = 0; index < count; index++) {
        copy_items[index].buffer_key = items[index].buffer_key;
        copy_items[index].offset = items[index].offset;
        copy_items[index].byte_len = items[index].byte_len;
        if (items[index].byte_len != 0)
            member_total++;
    }
    status = curdi_copyplan_build(copy_items, count, &copy_plan);
    if (status != CURD_OK)
        goto fail;
    status = curdi_xfer_alloc(copy_plan.span_count, sizeof *plan.spans, true,
                              (void **)&plan.spans);
    if (status == CURD_OK)
        status = curdi_xfer_alloc(member_total, sizeof *plan.members, false,
                                  (void **)&plan.members);
    if (status == CURD_OK)
        status = curdi_xfer_alloc(count, sizeof *plan.item_stream_offset,
                                  true, (void **)&plan.item_stream_offset);
    if (status == CURD_OK)
        status = curdi_xfer_alloc(count, sizeof *item_span, false,
                                  (void **)&item_span);
    if (status == CURD_OK)
        status = curdi_xfer_alloc(copy_plan.span_count, sizeof *member_bytes,
                                  true, (void **)&member_bytes);
    if (status != CURD_OK)
        goto fail;
    plan.span_count = copy_plan.span_count;

    /* Membership: count per span, prefix sums, then fill in item order. */
    for (size_t index = 0; index < count; index++) {
        size_t span;
        if (items[index].byte_len == 0)
            continue;
        span = curdi_span_at(&copy_plan,
                             copy_plan.item_staging_offset[index]);
        item_span[index] = span;
        plan.spans[span].member_count++;
        /* member_bytes <= count * max item, each range already checked
         * against a buffer size; summing in u64 cannot wrap for real
         * batches, and a wrap would only pick staging over direct. */
        member_bytes[span] += items[index].byte_len;
    }
    for (size_t span = 0, next = 0; span < plan.span_count; span++) {
        plan.spans[span].first_member = next;
        next += plan.spans[span].member_count;
        plan.spans[span].member_count = 0;
    }
    for (size_t index = 0; index < count; index++) {
        curdi_xfer_span *span;
        if (items[index].byte_len == 0)
            continue;
        span = &plan.spans[item_span[index]];
        plan.members[span->first_member + span->member_count++] = index;
    }

    for (size_t index = 0; index < plan.span_count; index++) {
        curdi_xfer_span *span = &plan.spans[index];
        const curdi_copy_span *source = &copy_plan.spans[index];
        const curdi_xfer_item *first = &items[plan.members[span->first_member]];
        status = curdi_device_ptr_offset(first->device_base, source->offset,
                                         &span->device_ptr);
        if (status != CURD_OK)
            goto fail;
        span->byte_len = source->byte_len;
        curdi_span_decide(span, items, plan.members, source->offset,
                          member_bytes[index]);
        if (span->mode == CURDI_SPAN_DIRECT_ITEMS)
            plan.dma_bytes += member_bytes[index];
        else
            plan.dma_bytes += span->byte_len;
        if (span->mode != CURDI_SPAN_STAGED)
            continue;
        span->stream_offset = stream;
        /* stream <= copy_plan.staging_bytes, which the planner checked. */
        stream += span->byte_len;
        plan.staged_item_count += span->member_count;
        if (member_bytes[index] != span->byte_len)
            plan.overlapping = true;
        for (size_t member = 0; member < span->member_count; member++) {
            size_t item = plan.members[span->first_member + member];
            plan.item_stream_offset[item] =
                span->stream_offset + (items[item].offset - source->offset);
        }
    }
    plan.stream_bytes = stream;

    status = curdi_xfer_alloc(plan.staged_item_count,
                              sizeof *plan.staged_items, false,
                              (void **)&plan.staged_items);
    if (status == CURD_OK)
        status = curdi_xfer_alloc(plan.staged_item_count, sizeof *keys, false,
                                  (void **)&keys);
    if (status != CURD_OK)
        goto fail;
    for (size_t index = 0, next = 0; index < plan.span_count; index++) {
        const curdi_xfer_span *span = &plan.spans[index];
        if (span->mode != CURDI_SPAN_STAGED)
            continue;
        for (size_t member = 0; member < span->member_count; member++) {
            size_t item = plan.members[span->first_member + member];
            keys[next].stream_offset = plan.item_stream_offset[item];
            keys[next].item = item;
            next++;
        }
    }
    if (plan.staged_item_count > 1)
        qsort(keys, plan.staged_item_count, sizeof *keys,
              curdi_staged_compare);
    for (size_t index = 0; index < plan.staged_item_count; index++)
        plan.staged_items[index] = keys[index].item;

    free(copy_items);
    free(item_span);
    free(member_bytes);
    free(keys);
    curdi_copyplan_free(&copy_plan);
    *out_plan = plan;
    return CURD_OK;

fail:
    free(copy_items);
    free(item_span);
    free(member_bytes);
    free(keys);
    curdi_copyplan_free(&copy_plan);
    curdi_xfer_plan_free(&plan);
    return status;
}

uint64_t curdi_xfer_chunk_bytes(uint64_t stream_bytes)
{
    const uint64_t min_chunk = (uint64_t)1 << 20;
    const uint64_t max_chunk = (uint64_t)8 << 20;
    const uint64_t granule = (uint64_t)64 << 10;
    uint64_t chunk;
    if (stream_bytes <= min_chunk)
        return stream_bytes;
    /* stream_bytes / 4 + granule cannot wrap. */
    chunk = (stream_bytes / 4u + granule - 1u) / granule * granule;
    if (chunk < min_chunk)
        chunk = min_chunk;
    if (chunk > max_chunk)
        chunk = max_chunk;
    return chunk;
}

unsigned curdi_xfer_slot_count(uint64_t chunk_count)
{
    return chunk_count >= 3u ? 3u : (unsigned)chunk_count;
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
    const curdi_xfer_ops *ops;
    curdi_copy_team *team;
    curdi_xfer_result result;
    curdi_copy_piece *pieces; /* scratch for one chunk's host copies */
    size_t piece_capacity;
} curdi_engine;

/* A cursor over the staged items in stream order. With no overlaps the
 * items' ends grow with their starts, so skipping those that end before
 * a chunk is exact; with overlaps it is still correct (each item is
 * checked against the chunk), just not minimal. */
typedef struct curdi_item_cursor {
    size_t first;
} curdi_item_cursor;

static uint64_t curdi_item_stream_end(const curdi_engine *engine, size_t item)
{
    return engine->plan->item_stream_offset[item]
           + engine->items[item].byte_len;
}

static curd_status curdi_engine_copy(curdi_engine *engine,
                                     uint64_t device_ptr, unsigned char *host,
                                     uint64_t byte_len)
{
    curd_status status = engine->ops->copy(engine->ops->context,
                                           engine->upload, device_ptr, host,
                                           byte_len);
    if (status == CURD_OK) {
        engine->result.dma_ops++;
        engine->result.dma_bytes += byte_len;
    }
    return status;
}

/* Adds host copies of byte_len bytes, cut into team-sized pieces unless
 * `whole`. */
static void curdi_engine_piece(curdi_engine *engine, unsigned char *dst,
                               const unsigned char *src, uint64_t byte_len,
                               size_t *count, bool whole)
{
    while (byte_len > 0) {
        uint64_t part = whole || byte_len <= CURDI_COPY_PIECE_BYTES
                            ? byte_len
                            : CURDI_COPY_PIECE_BYTES;
        curdi_copy_piece *piece = &engine->pieces[(*count)++];
        piece->dst = dst;
        piece->src = src;
        piece->byte_len = (size_t)part;
        dst += part;
        src += part;
        byte_len -= part;
    }
}

/* Host copies between chunk `chunk` (in slot `slot`) and the caller's
 * memory: into the slot for an upload, out of it for a download. */
static void curdi_engine_host_copy(curdi_engine *engine,
                                   curdi_item_cursor *cursor, uint64_t chunk,
                                   unsigned slot)
{
    const curdi_xfer_plan *plan = engine->plan;
    uint64_t chunk_start = chunk * engine->chunk_bytes;
    uint64_t chunk_end = chunk_start + engine->chunk_bytes;
    unsigned char *base = engine->slots[slot];
    size_t count = 0;
    if (chunk_end > plan->stream_bytes)
        chunk_end = plan->stream_bytes;

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
                uint64_t end = curdi_item_stream_end(engine, item);
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
           && curdi_item_stream_end(engine,
                                    plan->staged_items[cursor->first])
                  <= chunk_start)
        cursor->first++;
    for (size_t index = cursor->first; index < plan->staged_item_count;
         index++) {
        size_t item = plan->staged_items[index];
        uint64_t start = plan->item_stream_offset[item];
        uint64_t end = curdi_item_stream_end(engine, item);
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
            curdi_engine_piece(engine, base + (from - chunk_start),
                               engine->items[item].host + (from - start),
                               to - from, &count, plan->overlapping);
        else
            curdi_engine_piece(engine, engine->items[item].host + (from - start),
                               base + (from - chunk_start), to - from, &count,
                               plan->overlapping);
    }
    curdi_copy_team_run(engine->team, engine->pieces, count);
}

/* DMAs of chunk `chunk` between slot `slot` and the spans' device bytes. */
static curd_status curdi_engine_chunk_dmas(curdi_engine *engine,
                                           size_t *span_cursor, uint64_t chunk,
                                           unsigned slot)
{
    const curdi_xfer_plan *plan = engine->plan;
    uint64_t chunk_start = chunk * engine->chunk_bytes;
    uint64_t chunk_end = chunk_start + engine->chunk_bytes;
    if (chunk_end > plan->stream_bytes)
        chunk_end = plan->stream_bytes;
    for (size_t index = *span_cursor; index < plan->span_count; index++) {
        const curdi_xfer_span *span = &plan->spans[index];
        uint64_t span_end;
        uint64_t from;
        uint64_t to;
        curd_status status;
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
        status = curdi_engine_copy(engine,
                                   span->device_ptr
                                       + (from - span->stream_offset),
                                   engine->slots[slot] + (from - chunk_start),
                                   to - from);
        if (status != CURD_OK)
            return status;
    }
    return CURD_OK;
}

static curd_status curdi_engine_direct(curdi_engine *engine)
{
    const curdi_xfer_plan *plan = engine->plan;
    for (size_t index = 0; index < plan->span_count; index++) {
        const curdi_xfer_span *span = &plan->spans[index];
        curd_status status = CURD_OK;
        if (span->mode == CURDI_SPAN_DIRECT) {
            status = curdi_engine_copy(engine, span->device_ptr, span->host,
                                       span->byte_len);
        } else if (span->mode == CURDI_SPAN_DIRECT_ITEMS) {
            /* In item order: where uploads overlap, the later one lands
             * last (one stream runs its copies in order). */
            for (size_t member = 0;
                 member < span->member_count && status == CURD_OK; member++) {
                const curdi_xfer_item *item =
                    &engine->items[plan->members[span->first_member + member]];
                status = curdi_engine_copy(engine,
                                           item->device_base + item->offset,
                                           item->host, item->byte_len);
            }
        }
        if (status != CURD_OK)
            return status;
    }
    return CURD_OK;
}

static curd_status curdi_engine_staged(curdi_engine *engine)
{
    const curdi_xfer_plan *plan = engine->plan;
    const curdi_xfer_ops *ops = engine->ops;
    uint64_t chunk_count =
        (plan->stream_bytes + engine->chunk_bytes - 1u) / engine->chunk_bytes;
    unsigned slot_count = engine->slot_count;
    curdi_item_cursor fill_cursor = {0};
    size_t span_cursor = 0;
    curd_status status;

    if (engine->upload) {
        for (uint64_t chunk = 0; chunk < chunk_count; chunk++) {
            unsigned slot = (unsigned)(chunk % slot_count);
            if (chunk >= slot_count) {
                /* The DMAs of chunk - slot_count read this slot. */
                status = ops->wait(ops->context, slot);
                if (status != CURD_OK)
                    return status;
            }
            curdi_engine_host_copy(engine, &fill_cursor, chunk, slot);
            status = curdi_engine_chunk_dmas(engine, &span_cursor, chunk, slot);
            if (status != CURD_OK)
                return status;
            if (chunk + slot_count < chunk_count) {
                status = ops->mark(ops->context, slot);
                if (status != CURD_OK)
                    return status;
            }
        }
        return CURD_OK;
    }

    /* Download: the DMA of chunk k runs while chunk k - 1 is copied out;
     * the last chunk is copied out after the fence (by the caller of this
     * function, see curdi_xfer_execute). */
    for (uint64_t chunk = 0; chunk < chunk_count; chunk++) {
        unsigned slot = (unsigned)(chunk % slot_count);
        status = curdi_engine_chunk_dmas(engine, &span_cursor, chunk, slot);
        if (status != CURD_OK)
            return status;
        if (chunk + 1u < chunk_count) {
            status = ops->mark(ops->context, slot);
            if (status != CURD_OK)
                return status;
        }
        if (chunk >= 1u) {
            unsigned previous = (unsigned)((chunk - 1u) % slot_count);
            status = ops->wait(ops->context, previous);
            if (status != CURD_OK)
                return status;
            curdi_engine_host_copy(engine, &fill_cursor, chunk - 1u, previous);
        }
    }
    return CURD_OK;
}

curd_status curdi_xfer_execute(const curdi_xfer_plan *plan,
                               const curdi_xfer_item *items, bool upload,
                               unsigned char *const *slots,
                               unsigned slot_count, uint64_t chunk_bytes,
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
    engine.slots = slots;
    engine.slot_count = slot_count;
    engine.chunk_bytes = chunk_bytes;
    engine.ops = ops;
    engine.team = team;

    if (plan->stream_bytes > 0) {
        size_t capacity;
        if (slot_count == 0 || chunk_bytes == 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "a staged transfer was started without staging"
                              " slots. Fix: pass slots of chunk_bytes each.");
        /* One piece per staged item, plus the cuts of one chunk. */
        capacity = plan->staged_item_count + 1u;
        if (!plan->overlapping
            && !curdi_size_add(capacity,
                               (size_t)(chunk_bytes / CURDI_COPY_PIECE_BYTES)
                                   + 1u,
                               &capacity))
            return curdi_fail(CURD_E_OVERFLOW,
                              "a transfer's copy pieces overflow. Fix: split"
                              " the batch.");
        status = curdi_xfer_alloc(capacity, sizeof *engine.pieces, false,
                                  (void **)&engine.pieces);
        if (status != CURD_OK)
            return status;
        engine.piece_capacity = capacity;
    }

    status = curdi_engine_direct(&engine);
    if (status == CURD_OK && plan->stream_bytes > 0)
        status = curdi_engine_staged(&engine);
    if (status == CURD_OK && engine.result.dma_ops > 0) {
        status = ops->finish(ops->context);
        if (status == CURD_OK)
            engine.result.fences++;
    }
    if (status == CURD_OK && !upload && plan->stream_bytes > 0) {
        uint64_t chunk_count =
            (plan->stream_bytes + chunk_bytes - 1u) / chunk_bytes;
        curdi_item_cursor cursor = {0};
        curdi_engine_host_copy(&engine, &cursor, chunk_count - 1u,
                               (unsigned)((chunk_count - 1u) % slot_count));
    }
    free(engine.pieces);
    if (status == CURD_OK && out_result != NULL)
        *out_result = engine.result;
    return status;
}
