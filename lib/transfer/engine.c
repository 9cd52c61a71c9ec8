/* engine.c - the engine of a transfer (pure, see engine.h).
 *
 * Read top to bottom: the engine's state, the rows it holds back, the
 * host copies and chunk moves, then the direct spans, the staged stream
 * and curdi_engine_run, which runs a plan through curdi_engine_ops. */
#include "transfer/engine.h"

#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"

/* ------------------------------------------------------------------------
 * The engine
 * ---------------------------------------------------------------------- */

typedef struct curdi_engine {
    const curdi_plan *plan;
    const curdi_transfer_item *items;
    bool upload;
    unsigned char *const *slots;
    unsigned slot_count;
    uint64_t chunk_bytes;
    uint64_t piece_bytes;
    bool streaming;
    bool touch;
    const curdi_engine_ops *ops;
    curdi_copy_team *team;
    /* The DMAs not yet enqueued: rows that the next copy may join
     * (engine_copy), enqueued before anything else reaches the device. */
    curdi_plan_rows run;
    uint64_t max_pitch; /* 0: copies never join */
    curdi_engine_result result;
    curdi_copy_piece *pieces; /* scratch for one chunk's host copies */
    /* Gathering plans: scratch for one chunk's device pieces. */
    curdi_engine_piece *chunk_pieces;
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
    curdi_plan_rows *run = &engine->run;
    const curdi_engine_ops *ops = engine->ops;
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
 * next copies may join it into rows (curdi_plan_rows_join). */
static curd_status engine_copy(curdi_engine *engine, uint64_t device_key,
                               uintptr_t host_key, uint64_t device_ptr,
                               unsigned char *host, uint64_t byte_len)
{
    curd_status status;
    if (curdi_plan_rows_join(&engine->run, device_key, host_key, device_ptr,
                 (uintptr_t)host, byte_len, engine->max_pitch))
        return CURD_OK;
    status = engine_flush(engine);
    if (status != CURD_OK)
        return status;
    curdi_plan_rows_start(&engine->run, device_key, host_key, device_ptr,
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
                                const curdi_plan_span *span)
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

/* The chunks the stream is cut into (the last one may be shorter). */
static uint64_t engine_chunk_count(const curdi_engine *engine)
{
    return (engine->plan->stream_bytes + engine->chunk_bytes - 1u)
           / engine->chunk_bytes;
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

/* The host copies between chunk `chunk` (in slot `slot`) and the
 * caller's memory, into engine->pieces: into the slot for an upload, out
 * of it for a download. Returns how many; an upload whose items overlap
 * is copied here, in item order, and leaves none. */
static size_t engine_host_pieces(curdi_engine *engine,
                                 curdi_item_cursor *cursor, uint64_t chunk,
                                 unsigned slot)
{
    const curdi_plan *plan = engine->plan;
    uint64_t chunk_start, chunk_end;
    engine_chunk_range(engine, chunk, &chunk_start, &chunk_end);
    unsigned char *base = engine->slots[slot];
    size_t count = 0;

    if (engine->upload && plan->overlapping) {
        /* Later items win where uploads overlap: copy in item order, one
         * after another. Rare, so a plain scan of every staged item. */
        for (size_t index = 0; index < engine->plan->span_count; index++) {
            const curdi_plan_span *span = &plan->spans[index];
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
        return 0;
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
    return count;
}

/* The host copies of chunk `chunk`, made (by the team, where it has one). */
static void engine_host_copy(curdi_engine *engine,
                             curdi_item_cursor *cursor, uint64_t chunk,
                             unsigned slot)
{
    size_t count = engine_host_pieces(engine, cursor, chunk, slot);
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
    const curdi_plan *plan = engine->plan;
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
        const curdi_plan_span *span = &plan->spans[index];
        curdi_engine_piece piece;
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
    const curdi_plan *plan = engine->plan;
    if (plan->rows.count > 0) {
        /* Held back like any rows; the final flush sends them. Nothing
         * was held before the first span. */
        engine->run = plan->rows;
        return CURD_OK;
    }
    for (size_t index = 0; index < plan->span_count; index++) {
        const curdi_plan_span *span = &plan->spans[index];
        const curdi_transfer_item *first =
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
                const curdi_transfer_item *item =
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
    const curdi_plan *plan = engine->plan;
    uint64_t chunk_count = engine_chunk_count(engine);
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
     * fence (by the caller of this function, see curdi_engine_run). */
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
    const curdi_plan *plan = engine->plan;
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
        status = curdi_plan_alloc(plan->staged_span_count,
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
    return curdi_plan_alloc(capacity, sizeof *engine->pieces, false,
                            (void **)&engine->pieces);
}

curd_status curdi_engine_run(const curdi_plan *plan,
                             const curdi_transfer_item *items, bool upload,
                             const curdi_engine_staging *staging,
                             const curdi_engine_ops *ops,
                             curdi_copy_team *team,
                             curdi_engine_result *out_result)
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
    engine.touch = staging->touch;
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
    /* A download's last chunk is copied out after the fence; its pieces
     * are known now, so a touching run reads their lines in while the
     * last DMAs still run (curdi_copy_team_touch). */
    bool copy_out = status == CURD_OK && !upload && plan->stream_bytes > 0
                    && plan->gather_host == NULL;
    size_t last_pieces = 0;
    if (copy_out) {
        uint64_t chunk_count = engine_chunk_count(&engine);
        curdi_item_cursor cursor = {0};
        last_pieces = engine_host_pieces(
            &engine, &cursor, chunk_count - 1u,
            (unsigned)((chunk_count - 1u) % engine.slot_count));
        if (engine.touch)
            curdi_copy_team_touch(engine.pieces, last_pieces);
    }
    if (status == CURD_OK && engine.result.dma_ops > 0) {
        status = ops->finish(ops->context);
        if (status == CURD_OK)
            engine.result.fences++;
    }
    if (status == CURD_OK && copy_out)
        curdi_copy_team_run(engine.team, engine.pieces, last_pieces,
                            engine.streaming);
    free(engine.pieces);
    free(engine.chunk_pieces);
    if (status == CURD_OK && out_result != NULL)
        *out_result = engine.result;
    return status;
}
