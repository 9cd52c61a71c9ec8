/* transfer.c - host registrations and transfers.
 *
 * Read top to bottom: the copy team, the plan, the engine (all pure, see
 * transfer.h), then the room (registrations, asynchronous uploads, events,
 * counters), the driver side of the engine, and the public entry points.
 *
 * How a synchronous transfer or batch runs:
 *  1. Validate every argument and every item; resolve every handle and
 *     mark it in use (lib/resident.h), so no buffer can be freed while its
 *     bytes move; check every range with the checked layer. Any failure
 *     here returns before a driver call: nothing moved, nothing counted.
 *  2. Plan: fuse items into spans (lib/copyplan.c), decide per span
 *     between direct DMA (registered host memory) and staging.
 *  3. Take one pooled non-blocking stream (or the upload stream when a
 *     buffer has asynchronous uploads pending, so the new work is ordered
 *     after them), staging slots from the pinned pool and, for a stream
 *     longer than one chunk, one event per slot.
 *  4. Run the engine: host copies into (or out of) staging overlap the
 *     DMAs of neighbouring chunks; one cuStreamSynchronize ends it (the
 *     fence).
 *  5. Count, on success only; give back slots, events, stream, marks. */
#include "transfer.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked.h"
#include "copyplan.h"
#include "device.h"
#include "driver.h"
#include "resident.h"
#include "staging.h"
#include "status.h"

/* ------------------------------------------------------------------------
 * The copy team
 *
 * A memcpy from ordinary memory into pinned staging runs at what one core
 * can pull through its caches, well under what a PCIe gen5 DMA engine
 * takes; a few cores together keep up with it. The team is a handful of
 * threads that sleep on a condition variable between jobs. A job is an
 * array of pieces taken one at a time through an atomic index; the caller
 * takes pieces too, then waits until every worker has left the job. One
 * caller at a time owns the team; another finds it busy and copies alone
 * rather than wait.
 * ---------------------------------------------------------------------- */

#define CURDI_COPY_TEAM_MAX 6u
/* The engine splits host copies into pieces of this size for the team. */
#define CURDI_COPY_PIECE_BYTES ((uint64_t)256 * 1024)
/* Below this, waking the workers costs more than it saves. */
#define CURDI_COPY_PARALLEL_MIN ((size_t)1024 * 1024)

struct curdi_copy_team {
    pthread_mutex_t lock;
    pthread_cond_t start;
    pthread_cond_t done;
    pthread_mutex_t owner; /* held by the caller whose job runs */
    pthread_t threads[CURDI_COPY_TEAM_MAX];
    unsigned worker_count;
    bool stopping;
    uint64_t serial; /* one per job; a worker runs each serial once */
    const curdi_copy_piece *pieces;
    size_t piece_count;
    _Atomic size_t next_piece;
    unsigned busy_workers; /* workers not yet done with the current job */
};

static void curdi_copy_pieces(curdi_copy_team *team,
                              const curdi_copy_piece *pieces, size_t count)
{
    for (;;) {
        size_t index = atomic_fetch_add(&team->next_piece, 1u);
        if (index >= count)
            return;
        /* The engine built each piece inside a staging slot and a caller
         * range that validation checked; pieces of one job do not share
         * destination bytes. */
        memcpy(pieces[index].dst, pieces[index].src, pieces[index].byte_len);
    }
}

static void *curdi_copy_worker(void *argument)
{
    curdi_copy_team *team = argument;
    uint64_t seen = 0;
    pthread_mutex_lock(&team->lock);
    for (;;) {
        const curdi_copy_piece *pieces;
        size_t count;
        while (!team->stopping && team->serial == seen)
            pthread_cond_wait(&team->start, &team->lock);
        if (team->stopping)
            break;
        seen = team->serial;
        pieces = team->pieces;
        count = team->piece_count;
        pthread_mutex_unlock(&team->lock);
        curdi_copy_pieces(team, pieces, count);
        pthread_mutex_lock(&team->lock);
        if (--team->busy_workers == 0)
            pthread_cond_signal(&team->done);
    }
    pthread_mutex_unlock(&team->lock);
    return NULL;
}

curd_status curdi_copy_team_create(unsigned worker_count,
                                   curdi_copy_team **out_team)
{
    curdi_copy_team *team;
    sigset_t all_signals;
    sigset_t previous;
    if (worker_count == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        /* Leave one processor to the caller, who copies too. */
        worker_count = online > 1 ? (unsigned)(online - 1) : 0u;
    }
    if (worker_count > CURDI_COPY_TEAM_MAX)
        worker_count = CURDI_COPY_TEAM_MAX;
    team = calloc(1, sizeof *team);
    if (team == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate a copy team. Fix: free host"
                          " memory.");
    if (pthread_mutex_init(&team->lock, NULL) != 0
        || pthread_mutex_init(&team->owner, NULL) != 0
        || pthread_cond_init(&team->start, NULL) != 0
        || pthread_cond_init(&team->done, NULL) != 0) {
        /* Initialising these never fails on Linux with default attributes;
         * should it, a team of no workers still copies correctly. */
        free(team);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise a copy team's locks. Fix:"
                          " free system resources.");
    }
    /* The workers take no signals: those belong to the application's own
     * threads. */
    sigfillset(&all_signals);
    pthread_sigmask(SIG_SETMASK, &all_signals, &previous);
    for (unsigned index = 0; index < worker_count; index++) {
        if (pthread_create(&team->threads[index], NULL, curdi_copy_worker,
                           team)
            != 0)
            break;
        team->worker_count++;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    *out_team = team;
    return CURD_OK;
}

void curdi_copy_team_destroy(curdi_copy_team *team)
{
    if (team == NULL)
        return;
    pthread_mutex_lock(&team->lock);
    team->stopping = true;
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);
    for (unsigned index = 0; index < team->worker_count; index++)
        pthread_join(team->threads[index], NULL);
    pthread_cond_destroy(&team->done);
    pthread_cond_destroy(&team->start);
    pthread_mutex_destroy(&team->owner);
    pthread_mutex_destroy(&team->lock);
    free(team);
}

unsigned curdi_copy_team_workers(const curdi_copy_team *team)
{
    return team != NULL ? team->worker_count : 0u;
}

void curdi_copy_team_run(curdi_copy_team *team, const curdi_copy_piece *pieces,
                         size_t count)
{
    size_t total = 0;
    for (size_t index = 0; index < count && total < CURDI_COPY_PARALLEL_MIN;
         index++)
        total += pieces[index].byte_len;
    if (team == NULL || team->worker_count == 0 || count < 2
        || total < CURDI_COPY_PARALLEL_MIN
        || pthread_mutex_trylock(&team->owner) != 0) {
        for (size_t index = 0; index < count; index++)
            memcpy(pieces[index].dst, pieces[index].src,
                   pieces[index].byte_len);
        return;
    }
    pthread_mutex_lock(&team->lock);
    team->pieces = pieces;
    team->piece_count = count;
    atomic_store(&team->next_piece, 0u);
    team->busy_workers = team->worker_count;
    team->serial++;
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);

    curdi_copy_pieces(team, pieces, count);

    /* Every worker must leave this job before the pieces (the caller's
     * memory) go out of scope and before the next job is published. */
    pthread_mutex_lock(&team->lock);
    while (team->busy_workers != 0)
        pthread_cond_wait(&team->done, &team->lock);
    team->pieces = NULL;
    team->piece_count = 0;
    pthread_mutex_unlock(&team->lock);
    pthread_mutex_unlock(&team->owner);
}

/* ------------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------- */

static curd_status curdi_xfer_alloc(size_t count, size_t element_bytes,
                                    bool zeroed, void **out)
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

/* ------------------------------------------------------------------------
 * The room: registrations, asynchronous uploads, events, the copy team
 * ---------------------------------------------------------------------- */

/* A host range page-locked with curd_host_register. */
typedef struct curdi_host_range {
    uintptr_t start;
    size_t byte_len;
    /* Transfers using it now plus asynchronous uploads from it pending:
     * it cannot be unregistered while any are. */
    uint32_t use_count;
    bool ready; /* false while being registered or unregistered */
} curdi_host_range;

/* An asynchronous upload not yet completed by curd_device_sync_uploads. */
typedef struct curdi_async_entry {
    uint64_t buffer_id;
    uintptr_t range_key; /* its source's registered range, or 0 */
    uint64_t serial;     /* enqueue order */
} curdi_async_entry;

/* The transfer room's state, behind curd_device.host_registry. One lock
 * guards it; it is never held across a driver call. */
struct curdi_host_registry {
    pthread_mutex_t lock;
    curdi_host_range *ranges; /* sorted by start, never overlapping */
    size_t range_count;
    size_t range_capacity;
    curdi_async_entry *pending; /* in enqueue order */
    size_t pending_count;
    size_t pending_capacity;
    uint64_t next_serial;
    curdi_cu_event *idle_events;
    size_t idle_event_count;
    size_t idle_event_capacity;
    curdi_copy_team *team; /* created on the first staged transfer */
    bool team_tried;
};

/* Grows *array to hold at least `needed` elements; false when it cannot
 * (the array is unchanged then). */
static bool curdi_grow(void **array, size_t *capacity, size_t needed,
                       size_t element_bytes)
{
    size_t new_capacity;
    size_t bytes;
    void *grown;
    if (needed <= *capacity)
        return true;
    new_capacity = *capacity < 8u ? 8u : *capacity;
    while (new_capacity < needed) {
        if (!curdi_size_mul(new_capacity, 2u, &new_capacity))
            return false;
    }
    if (!curdi_size_mul(new_capacity, element_bytes, &bytes))
        return false;
    grown = realloc(*array, bytes);
    if (grown == NULL)
        return false;
    *array = grown;
    *capacity = new_capacity;
    return true;
}

/* Index of the last range starting at or before address; range_count when
 * none does. Lock held. */
static size_t curdi_range_before(const struct curdi_host_registry *registry,
                                 uintptr_t address)
{
    size_t low = 0;
    size_t high = registry->range_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (registry->ranges[middle].start <= address)
            low = middle + 1;
        else
            high = middle;
    }
    return low == 0 ? registry->range_count : low - 1;
}

/* Marks the registered range that holds [host, host + byte_len) as used
 * and returns its start, or 0 when that memory is not (wholly) registered.
 * Lock held. */
static uintptr_t curdi_registry_use(struct curdi_host_registry *registry,
                                    const void *host, size_t byte_len)
{
    uintptr_t start = (uintptr_t)host;
    size_t index;
    curdi_host_range *range;
    if (byte_len == 0 || registry->range_count == 0)
        return 0;
    index = curdi_range_before(registry, start);
    if (index == registry->range_count)
        return 0;
    range = &registry->ranges[index];
    /* start >= range->start; the subtraction cannot wrap. */
    if (!range->ready || range->use_count == UINT32_MAX
        || start - range->start > range->byte_len
        || byte_len > range->byte_len - (start - range->start))
        return 0;
    range->use_count++;
    return range->start;
}

/* Undoes curdi_registry_use. Lock held. */
static void curdi_registry_unuse(struct curdi_host_registry *registry,
                                 uintptr_t key)
{
    size_t index;
    if (key == 0)
        return;
    index = curdi_range_before(registry, key);
    if (index != registry->range_count && registry->ranges[index].start == key
        && registry->ranges[index].use_count > 0)
        registry->ranges[index].use_count--;
}

static void curdi_registry_unuse_items(curd_device *device,
                                       const curdi_xfer_item *items,
                                       size_t count)
{
    struct curdi_host_registry *registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < count; index++)
        curdi_registry_unuse(registry, items[index].registered_key);
    pthread_mutex_unlock(&registry->lock);
}

static void curdi_registry_use_items(curd_device *device,
                                     curdi_xfer_item *items, size_t count)
{
    struct curdi_host_registry *registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < count; index++)
        items[index].registered_key = curdi_registry_use(
            registry, items[index].host, (size_t)items[index].byte_len);
    pthread_mutex_unlock(&registry->lock);
}

/* The device's copy team, started on first use; NULL if it could not be
 * (the engine then copies on the calling thread). */
static curdi_copy_team *curdi_transfer_team(curd_device *device)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_copy_team *team;
    pthread_mutex_lock(&registry->lock);
    if (!registry->team_tried) {
        registry->team_tried = true;
        if (curdi_copy_team_create(0, &registry->team) != CURD_OK)
            registry->team = NULL;
    }
    team = registry->team;
    pthread_mutex_unlock(&registry->lock);
    return team;
}

/* count events for one transfer, from the idle list or new. Context
 * current. */
static curd_status curdi_events_acquire(curd_device *device,
                                        curdi_cu_event *events, unsigned count)
{
    struct curdi_host_registry *registry = device->host_registry;
    const curdi_driver *driver = curdi_driver_get();
    unsigned taken = 0;
    pthread_mutex_lock(&registry->lock);
    while (taken < count && registry->idle_event_count > 0)
        events[taken++] = registry->idle_events[--registry->idle_event_count];
    pthread_mutex_unlock(&registry->lock);
    for (; taken < count; taken++) {
        curdi_cu_result cu_result = curdi_driver_note(
            driver->cuEventCreate(&events[taken],
                                  CURDI_CU_EVENT_DISABLE_TIMING));
        if (cu_result != CURDI_CUDA_SUCCESS) {
            curd_status status = curdi_fail_driver(
                (int)cu_result, "cuEventCreate",
                "check that the device is still usable (nvidia-smi)");
            for (unsigned index = 0; index < taken; index++)
                (void)curdi_driver_note(driver->cuEventDestroy(events[index]));
            return status;
        }
    }
    return CURD_OK;
}

static void curdi_events_release(curd_device *device,
                                 const curdi_cu_event *events, unsigned count)
{
    struct curdi_host_registry *registry = device->host_registry;
    const curdi_driver *driver = curdi_driver_get();
    unsigned kept = 0;
    pthread_mutex_lock(&registry->lock);
    if (curdi_grow((void **)&registry->idle_events,
                   &registry->idle_event_capacity,
                   registry->idle_event_count + count, sizeof *events)) {
        for (; kept < count; kept++)
            registry->idle_events[registry->idle_event_count++] = events[kept];
    }
    pthread_mutex_unlock(&registry->lock);
    /* No room to keep them: destroy them instead. */
    for (unsigned index = kept; index < count; index++)
        if (curdi_driver_usable())
            (void)curdi_driver_note(driver->cuEventDestroy(events[index]));
}

curd_status curdi_transfer_open(curd_device *device)
{
    struct curdi_host_registry *registry = calloc(1, sizeof *registry);
    if (registry == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's transfer state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&registry->lock, NULL) != 0) {
        free(registry);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the transfer state's lock."
                          " Fix: free system resources.");
    }
    registry->next_serial = 1;
    atomic_store(&device->h2d_bytes, 0u);
    atomic_store(&device->d2h_bytes, 0u);
    atomic_store(&device->copy_ops, 0u);
    atomic_store(&device->fences, 0u);
    atomic_store(&device->fill_ops, 0u);
    atomic_store(&device->fill_bytes, 0u);
    atomic_store(&device->accounting_repairs, 0u);
    device->host_registry = registry;
    return CURD_OK;
}

void curdi_transfer_close(curd_device *device)
{
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    if (device == NULL || device->host_registry == NULL)
        return;
    registry = device->host_registry;
    driver = curdi_driver_get();
    if (driver != NULL && curdi_driver_usable()) {
        /* device.c has synchronised the context already; this keeps the
         * room's own promise should it be called alone. Errors have
         * nowhere to go at close. */
        if (device->upload_stream != NULL)
            (void)curdi_driver_note(
                driver->cuStreamSynchronize(device->upload_stream));
        for (size_t index = 0; index < registry->range_count; index++)
            if (registry->ranges[index].ready && curdi_driver_usable())
                (void)curdi_driver_note(driver->cuMemHostUnregister(
                    (void *)registry->ranges[index].start));
        for (size_t index = 0; index < registry->idle_event_count; index++)
            if (curdi_driver_usable())
                (void)curdi_driver_note(
                    driver->cuEventDestroy(registry->idle_events[index]));
    }
    /* The asynchronous marks die with the resident table, which
     * curdi_resident_close frees next whatever its marks. */
    curdi_copy_team_destroy(registry->team);
    free(registry->ranges);
    free(registry->pending);
    free(registry->idle_events);
    pthread_mutex_destroy(&registry->lock);
    free(registry);
    device->host_registry = NULL;
}

/* ------------------------------------------------------------------------
 * Counters: checked before the work, added after it succeeded.
 * ---------------------------------------------------------------------- */

typedef struct curdi_counts {
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t copy_ops;
    uint64_t fences;
    uint64_t fill_ops;
    uint64_t fill_bytes;
} curdi_counts;

static curd_status curdi_counts_check(curd_device *device,
                                      const curdi_counts *counts,
                                      const char *what)
{
    struct {
        _Atomic uint64_t *counter;
        uint64_t amount;
        const char *name;
    } checks[] = {
        {&device->h2d_bytes, counts->h2d_bytes, "h2d_bytes"},
        {&device->d2h_bytes, counts->d2h_bytes, "d2h_bytes"},
        {&device->copy_ops, counts->copy_ops, "copy_ops"},
        {&device->fences, counts->fences, "fences"},
        {&device->fill_ops, counts->fill_ops, "fill_ops"},
        {&device->fill_bytes, counts->fill_bytes, "fill_bytes"},
    };
    for (size_t index = 0; index < sizeof checks / sizeof checks[0]; index++) {
        uint64_t sum;
        uint64_t current = atomic_load(checks[index].counter);
        if (!curdi_u64_add(current, checks[index].amount, &sum))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the statistics counter %s (%" PRIu64
                              ") would pass 2^64-1 by %" PRIu64
                              "; nothing was moved. Fix: call"
                              " curd_device_stats_reset().",
                              what, checks[index].name, current,
                              checks[index].amount);
    }
    return CURD_OK;
}

static void curdi_counts_add(curd_device *device, const curdi_counts *counts)
{
    _Atomic uint64_t *counters[] = {&device->h2d_bytes, &device->d2h_bytes,
                                    &device->copy_ops,  &device->fences,
                                    &device->fill_ops,  &device->fill_bytes};
    const uint64_t amounts[] = {counts->h2d_bytes, counts->d2h_bytes,
                                counts->copy_ops,  counts->fences,
                                counts->fill_ops,  counts->fill_bytes};
    for (size_t index = 0; index < sizeof amounts / sizeof amounts[0]; index++) {
        /* Checked before the work; only a concurrent caller between the
         * check and here could push one past 2^64, which the repairs
         * counter then shows. */
        if (amounts[index] != 0
            && curdi_counter_add(counters[index], amounts[index]) != CURD_OK)
            atomic_fetch_add(&device->accounting_repairs, 1u);
    }
}

/* ------------------------------------------------------------------------
 * The engine's driver side
 * ---------------------------------------------------------------------- */

#define CURDI_DRIVER_FIX                                                      \
    "check that the device is still usable (nvidia-smi); after a sticky"     \
    " error, close and reopen it"

typedef struct curdi_gpu_ops {
    const curdi_driver *driver;
    curdi_cu_stream stream;
    curdi_cu_event events[3];
} curdi_gpu_ops;

static curd_status curdi_gpu_copy(void *context, bool upload,
                                  uint64_t device_ptr, unsigned char *host,
                                  uint64_t byte_len)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result;
    /* byte_len lies within a buffer whose size is a size_t. */
    if (upload)
        cu_result = gpu->driver->cuMemcpyHtoDAsync(
            (curdi_cu_deviceptr)device_ptr, host, (size_t)byte_len,
            gpu->stream);
    else
        cu_result = gpu->driver->cuMemcpyDtoHAsync(
            host, (curdi_cu_deviceptr)device_ptr, (size_t)byte_len,
            gpu->stream);
    if (curdi_driver_note(cu_result) != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result,
                                 upload ? "cuMemcpyHtoDAsync"
                                        : "cuMemcpyDtoHAsync",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status curdi_gpu_mark(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result = curdi_driver_note(
        gpu->driver->cuEventRecord(gpu->events[slot], gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventRecord",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status curdi_gpu_wait(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result =
        curdi_driver_note(gpu->driver->cuEventSynchronize(gpu->events[slot]));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status curdi_gpu_finish(void *context)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result =
        curdi_driver_note(gpu->driver->cuStreamSynchronize(gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuStreamSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

/* The stream a transfer runs on: the upload stream when one of its buffers
 * has asynchronous uploads pending (so the new work is ordered after
 * them), else a pooled non-blocking stream. */
static curd_status curdi_stream_for(curd_device *device, bool after_uploads,
                                    curdi_cu_stream *out, bool *out_pooled)
{
    if (after_uploads) {
        *out = device->upload_stream;
        *out_pooled = false;
        return CURD_OK;
    }
    *out_pooled = true;
    return curdi_stream_acquire(device, out);
}

/* After a failure: waits for whatever was enqueued on the stream before
 * its staging goes back to the pool. Not a fence of the transfer (nothing
 * is counted on failure). */
static void curdi_stream_drain(const curdi_driver *driver,
                               curdi_cu_stream stream)
{
    if (stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(driver->cuStreamSynchronize(stream));
}

/* Runs validated items whose buffers the caller holds marked: the device
 * entered, registrations marked, a plan, a stream, staging, the engine,
 * the counters. */
static curd_status curdi_transfer_run(curd_device *device, const char *what,
                                      bool upload, curdi_xfer_item *items,
                                      size_t count,
                                      const curdi_resident_use *uses)
{
    const curdi_driver *driver;
    curdi_xfer_plan plan;
    curdi_gpu_ops gpu;
    curdi_counts counts;
    curdi_xfer_result result;
    curdi_xfer_ops ops = {curdi_gpu_copy, curdi_gpu_mark, curdi_gpu_wait,
                          curdi_gpu_finish, &gpu};
    unsigned char *slots[3] = {NULL, NULL, NULL};
    curdi_staging staging[3];
    uint64_t chunk_bytes = 0;
    uint64_t chunk_count = 0;
    unsigned slot_count = 0;
    unsigned slots_taken = 0;
    unsigned event_count = 0;
    bool after_uploads = false;
    bool pooled_stream = false;
    bool events_taken = false;
    curd_status status;

    memset(&plan, 0, sizeof plan);
    memset(&gpu, 0, sizeof gpu);
    for (size_t index = 0; index < count; index++)
        after_uploads = after_uploads || uses[index].async_pending;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    gpu.driver = driver;
    curdi_registry_use_items(device, items, count);

    status = curdi_xfer_plan_build(items, count, &plan);
    if (status != CURD_OK)
        goto done;
    if (plan.stream_bytes > 0) {
        chunk_bytes = curdi_xfer_chunk_bytes(plan.stream_bytes);
        chunk_count = (plan.stream_bytes + chunk_bytes - 1u) / chunk_bytes;
        slot_count = curdi_xfer_slot_count(chunk_count);
        event_count = chunk_count > 1u ? slot_count : 0u;
    }
    memset(&counts, 0, sizeof counts);
    if (upload)
        counts.h2d_bytes = plan.dma_bytes;
    else
        counts.d2h_bytes = plan.dma_bytes;
    /* An upper bound on the DMAs: one per span or item, plus one per chunk
     * boundary a span crosses. */
    counts.copy_ops = (uint64_t)plan.span_count + count + chunk_count;
    counts.fences = 1;
    status = curdi_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto done;

    status = curdi_stream_for(device, after_uploads, &gpu.stream,
                              &pooled_stream);
    if (status != CURD_OK)
        goto done;
    /* The staging areas come through lib/staging.h like every staged
     * transfer's; the engine does its own copies into them, since they go
     * piece by piece and in parallel. */
    for (; slots_taken < slot_count; slots_taken++) {
        status = curdi_staging_acquire(device->pinned_pool, (size_t)chunk_bytes,
                                       &staging[slots_taken]);
        if (status != CURD_OK)
            goto done;
        slots[slots_taken] = staging[slots_taken].host;
    }
    if (event_count > 0) {
        status = curdi_events_acquire(device, gpu.events, event_count);
        if (status != CURD_OK)
            goto done;
        events_taken = true;
    }

    status = curdi_xfer_execute(
        &plan, items, upload, slots, slot_count, chunk_bytes, &ops,
        plan.stream_bytes >= CURDI_COPY_PARALLEL_MIN
            ? curdi_transfer_team(device)
            : NULL,
        &result);
    if (status != CURD_OK)
        curdi_stream_drain(driver, gpu.stream);

done:
    if (events_taken)
        curdi_events_release(device, gpu.events, event_count);
    for (unsigned index = 0; index < slots_taken; index++)
        (void)curdi_staging_release(&staging[index]);
    if (pooled_stream && gpu.stream != NULL)
        curdi_stream_release(device, gpu.stream);
    curdi_registry_unuse_items(device, items, count);
    curdi_xfer_plan_free(&plan);
    if (status == CURD_OK) {
        memset(&counts, 0, sizeof counts);
        if (upload)
            counts.h2d_bytes = result.dma_bytes;
        else
            counts.d2h_bytes = result.dma_bytes;
        counts.copy_ops = result.dma_ops;
        counts.fences = result.fences;
        curdi_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}

/* ------------------------------------------------------------------------
 * Validation shared by every transfer entry point
 * ---------------------------------------------------------------------- */

/* A call's items as the caller gave them, in one shape for both
 * directions (uploads have no capacity: SIZE_MAX). */
typedef struct curdi_call_item {
    uint64_t buffer_id;
    size_t offset;
    size_t byte_len;
    unsigned char *host;
    size_t capacity;
} curdi_call_item;

/* The validated items of a call, their buffers marked in use. One item
 * lives inline so single transfers allocate nothing. */
typedef struct curdi_prepared {
    size_t count;
    uint64_t total_bytes;
    curdi_xfer_item *items;
    curdi_resident_use *uses;
    uint64_t *ids;
    curdi_xfer_item one_item;
    curdi_resident_use one_use;
    uint64_t one_id;
    bool marked;
} curdi_prepared;

static void curdi_prepared_release(curd_device *device,
                                   curdi_prepared *prepared)
{
    if (prepared->marked)
        curdi_resident_use_end(device, prepared->uses, prepared->count);
    prepared->marked = false;
    if (prepared->items != &prepared->one_item) {
        free(prepared->items);
        free(prepared->uses);
        free(prepared->ids);
    }
    prepared->items = NULL;
    prepared->uses = NULL;
    prepared->ids = NULL;
}

/* "<what>" for a single transfer, "<what> item <i>" in a batch. */
static const char *curdi_item_what(const char *what, bool batch, size_t index,
                                   char *scratch, size_t scratch_len)
{
    if (!batch)
        return what;
    snprintf(scratch, scratch_len, "%s item %zu", what, index);
    return scratch;
}

typedef struct curdi_host_span {
    uintptr_t start;
    uintptr_t end;
    size_t item;
} curdi_host_span;

static int curdi_host_span_compare(const void *left, const void *right)
{
    const curdi_host_span *a = left;
    const curdi_host_span *b = right;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item ? 1 : 0;
}

/* Downloads into overlapping destinations would race (the copy team
 * writes them at once) and have no meaningful result: refused. */
static curd_status curdi_check_destinations(const curdi_call_item *calls,
                                            size_t count, const char *what)
{
    curdi_host_span *spans = NULL;
    size_t used = 0;
    curd_status status = CURD_OK;
    if (count < 2)
        return CURD_OK;
    status = curdi_xfer_alloc(count, sizeof *spans, false, (void **)&spans);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        if (calls[index].byte_len == 0)
            continue;
        spans[used].start = (uintptr_t)calls[index].host;
        /* Checked not to wrap by the caller. */
        spans[used].end = (uintptr_t)calls[index].host + calls[index].byte_len;
        spans[used].item = index;
        used++;
    }
    qsort(spans, used, sizeof *spans, curdi_host_span_compare);
    for (size_t index = 1; index < used; index++) {
        if (spans[index].start < spans[index - 1].end) {
            status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                                "%s: the destinations of items %zu and %zu"
                                " overlap in host memory; nothing was"
                                " moved. Fix: give every item its own"
                                " destination bytes.",
                                what, spans[index - 1].item,
                                spans[index].item);
            break;
        }
    }
    free(spans);
    return status;
}

/* Validates a call's items and marks their buffers in use: argument
 * checks, then handles (all or none), then ranges. On an error nothing
 * is left marked. */
static curd_status curdi_prepare(curd_device *device, const char *what,
                                 bool upload, bool batch,
                                 const curdi_call_item *calls, size_t count,
                                 curdi_prepared *prepared)
{
    char scratch[160];
    curd_status status;
    memset(prepared, 0, sizeof *prepared);
    prepared->count = count;

    for (size_t index = 0; index < count; index++) {
        const curdi_call_item *call = &calls[index];
        const char *item_what =
            curdi_item_what(what, batch, index, scratch, sizeof scratch);
        uintptr_t end;
        if (call->byte_len != 0 && call->host == NULL)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: %s is NULL for %zu bytes; nothing was"
                              " moved. Fix: pass caller memory of at least"
                              " that many bytes.",
                              item_what, upload ? "src" : "dst",
                              call->byte_len);
        if (call->byte_len > call->capacity)
            return curdi_fail(CURD_E_RANGE,
                              "%s: %zu bytes asked for, but dst_capacity is"
                              " only %zu; nothing was moved. Fix: pass a"
                              " destination of at least byte_len bytes, or"
                              " ask for fewer.",
                              item_what, call->byte_len, call->capacity);
        if (__builtin_add_overflow((uintptr_t)call->host, call->byte_len,
                                   &end))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: host address %p plus %zu bytes passes the"
                              " end of the address space; nothing was"
                              " moved. Fix: pass a valid host range.",
                              item_what, (void *)call->host, call->byte_len);
        if (!curdi_u64_add(prepared->total_bytes, call->byte_len,
                           &prepared->total_bytes))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the batch's lengths add up past 2^64-1"
                              " bytes. Fix: split the batch.",
                              what);
    }
    if (!upload) {
        status = curdi_check_destinations(calls, count, what);
        if (status != CURD_OK)
            return status;
    }

    if (count == 1) {
        prepared->items = &prepared->one_item;
        prepared->uses = &prepared->one_use;
        prepared->ids = &prepared->one_id;
    } else {
        status = curdi_xfer_alloc(count, sizeof *prepared->items, true,
                                  (void **)&prepared->items);
        if (status == CURD_OK)
            status = curdi_xfer_alloc(count, sizeof *prepared->uses, false,
                                      (void **)&prepared->uses);
        if (status == CURD_OK)
            status = curdi_xfer_alloc(count, sizeof *prepared->ids, false,
                                      (void **)&prepared->ids);
        if (status != CURD_OK) {
            curdi_prepared_release(device, prepared);
            return status;
        }
    }
    for (size_t index = 0; index < count; index++)
        prepared->ids[index] = calls[index].buffer_id;
    status = curdi_resident_use_begin(device, what, prepared->ids, count,
                                      prepared->uses);
    if (status != CURD_OK) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    prepared->marked = true;

    for (size_t index = 0; index < count; index++) {
        const curdi_call_item *call = &calls[index];
        curdi_xfer_item *item = &prepared->items[index];
        status = curdi_range_check(
            call->offset, call->byte_len, prepared->uses[index].byte_len,
            curdi_item_what(what, batch, index, scratch, sizeof scratch));
        if (status != CURD_OK) {
            curdi_prepared_release(device, prepared);
            return status;
        }
        item->buffer_key = call->buffer_id;
        item->device_base = prepared->uses[index].device_ptr;
        item->offset = call->offset;
        item->byte_len = call->byte_len;
        item->host = call->host;
        item->registered_key = 0;
    }
    return CURD_OK;
}

/* The checks before anything else: a device, not a fork child. */
static curd_status curdi_transfer_check_device(curd_device *device,
                                               const char *what)
{
    if (device == NULL || device->host_registry == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device is NULL. Fix: pass a device from"
                          " curd_device_open().",
                          what);
    if (curdi_driver_forked())
        return curdi_fail(CURD_E_UNSUPPORTED, "%s: %s.", what,
                          curdi_fork_message);
    return CURD_OK;
}

/* One call from start to end: validate, run (unless nothing moves),
 * release. whole: byte_len must equal the buffer's size. */
static curd_status curdi_transfer_call(curd_device *device, const char *what,
                                       bool upload, bool batch, bool whole,
                                       const curdi_call_item *calls,
                                       size_t count)
{
    curdi_prepared prepared;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare(device, what, upload, batch, calls, count,
                           &prepared);
    if (status != CURD_OK)
        return status;
    if (whole && prepared.uses[0].byte_len != calls[0].byte_len) {
        status = curdi_fail(CURD_E_RANGE,
                            "%s: byte_len is %zu but the buffer holds %zu"
                            " bytes; nothing was moved. Fix: pass exactly"
                            " the buffer's size, or use the _at/_range form"
                            " for part of it.",
                            what, calls[0].byte_len,
                            prepared.uses[0].byte_len);
    } else if (prepared.total_bytes > 0) {
        status = curdi_transfer_run(device, what, upload, prepared.items,
                                    count, prepared.uses);
    }
    curdi_prepared_release(device, &prepared);
    return status;
}

/* ------------------------------------------------------------------------
 * Public entry points: synchronous transfers and batches
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len)
{
    /* The library never writes through src; the item type is shared with
     * downloads, hence the cast. */
    curdi_call_item call = {buffer.id, 0, byte_len, (unsigned char *)src,
                            SIZE_MAX};
    return curdi_transfer_call(device, "curd_buffer_upload", true, false, true,
                               &call, 1);
}

CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len)
{
    curdi_call_item call = {buffer.id, offset, byte_len, (unsigned char *)src,
                            SIZE_MAX};
    return curdi_transfer_call(device, "curd_buffer_upload_at", true, false,
                               false, &call, 1);
}

CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len)
{
    curdi_call_item call = {buffer.id, 0, byte_len, dst, byte_len};
    return curdi_transfer_call(device, "curd_buffer_download", false, false,
                               true, &call, 1);
}

CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity)
{
    curdi_call_item call = {buffer.id, offset, byte_len, dst, dst_capacity};
    return curdi_transfer_call(device, "curd_buffer_download_range", false,
                               false, false, &call, 1);
}

/* Batches copy the caller's items into the shared shape first. */
static curd_status curdi_batch_calls(const char *what, const void *items,
                                     size_t count, curdi_call_item **out)
{
    if (items == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: items is NULL but count is %zu. Fix: pass an"
                          " array of count items, or count 0.",
                          what, count);
    return curdi_xfer_alloc(count, sizeof **out, false, (void **)out);
}

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count)
{
    const char *what = "curd_upload_batch";
    curdi_call_item *calls = NULL;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_batch_calls(what, items, count, &calls);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        calls[index].buffer_id = items[index].buffer.id;
        calls[index].offset = items[index].offset;
        calls[index].byte_len = items[index].byte_len;
        calls[index].host = (unsigned char *)items[index].src;
        calls[index].capacity = SIZE_MAX;
    }
    status = curdi_transfer_call(device, what, true, true, false, calls, count);
    free(calls);
    return status;
}

CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count)
{
    const char *what = "curd_download_batch";
    curdi_call_item *calls = NULL;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_batch_calls(what, items, count, &calls);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        calls[index].buffer_id = items[index].buffer.id;
        calls[index].offset = items[index].offset;
        calls[index].byte_len = items[index].byte_len;
        calls[index].host = items[index].dst;
        calls[index].capacity = items[index].dst_capacity;
    }
    status =
        curdi_transfer_call(device, what, false, true, false, calls, count);
    free(calls);
    return status;
}

/* ------------------------------------------------------------------------
 * Public entry points: device-side fills
 * ---------------------------------------------------------------------- */

static curd_status curdi_fill(curd_device *device, const char *what,
                              curd_buffer buffer, size_t offset,
                              size_t byte_len, bool whole, uint8_t value)
{
    const curdi_driver *driver;
    curdi_resident_use use;
    curdi_counts counts;
    curdi_cu_stream stream = NULL;
    curdi_cu_result cu_result;
    bool pooled = false;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_resident_use_begin(device, what, &buffer.id, 1, &use);
    if (status != CURD_OK)
        return status;
    if (whole) {
        offset = 0;
        byte_len = use.byte_len;
    }
    status = curdi_range_check(offset, byte_len, use.byte_len, what);
    if (status != CURD_OK || byte_len == 0) {
        curdi_resident_use_end(device, &use, 1);
        return status;
    }
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        curdi_resident_use_end(device, &use, 1);
        return status;
    }
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.fill_ops = 1;
    counts.fill_bytes = byte_len;
    counts.fences = 1;
    status = curdi_counts_check(device, &counts, what);
    if (status == CURD_OK)
        status = curdi_stream_for(device, use.async_pending, &stream, &pooled);
    if (status == CURD_OK) {
        /* offset + byte_len <= the buffer's size: checked above. */
        cu_result = curdi_driver_note(driver->cuMemsetD8Async(
            (curdi_cu_deviceptr)(use.device_ptr + offset), value, byte_len,
            stream));
        if (cu_result != CURDI_CUDA_SUCCESS)
            status = curdi_fail_driver((int)cu_result, "cuMemsetD8Async",
                                       CURDI_DRIVER_FIX);
    }
    if (status == CURD_OK) {
        cu_result = curdi_driver_note(driver->cuStreamSynchronize(stream));
        if (cu_result != CURDI_CUDA_SUCCESS) {
            status = curdi_fail_driver((int)cu_result, "cuStreamSynchronize",
                                       CURDI_DRIVER_FIX);
            curdi_stream_drain(driver, stream);
        }
    }
    if (pooled && stream != NULL)
        curdi_stream_release(device, stream);
    if (status == CURD_OK)
        curdi_counts_add(device, &counts);
    curdi_device_leave(device);
    curdi_resident_use_end(device, &use, 1);
    return status;
}

CURD_API curd_status curd_buffer_fill(curd_device *device, curd_buffer buffer,
                                      size_t offset, size_t byte_len,
                                      uint8_t value)
{
    return curdi_fill(device, "curd_buffer_fill", buffer, offset, byte_len,
                      false, value);
}

CURD_API curd_status curd_buffer_clear(curd_device *device, curd_buffer buffer)
{
    return curdi_fill(device, "curd_buffer_clear", buffer, 0, 0, true, 0);
}

/* ------------------------------------------------------------------------
 * Public entry points: host registration
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_host_register(curd_device *device, void *ptr,
                                        size_t byte_len)
{
    const char *what = "curd_host_register";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    uintptr_t start = (uintptr_t)ptr;
    uintptr_t end;
    size_t index;
    curdi_cu_result cu_result;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL || byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s. Fix: pass the start and length of host"
                          " memory you own.",
                          what, ptr == NULL ? "ptr is NULL" : "byte_len is 0");
    if (__builtin_add_overflow(start, byte_len, &end))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: %p plus %zu bytes passes the end of the"
                          " address space. Fix: pass a valid host range.",
                          what, ptr, byte_len);
    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    if (driver->cuMemHostRegister == NULL || driver->cuMemHostUnregister == NULL) {
        curdi_device_leave(device);
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: this driver has no cuMemHostRegister. Fix:"
                          " copy through curd's staging (plain"
                          " transfers), or update the NVIDIA driver.",
                          what);
    }
    registry = device->host_registry;

    /* Claim the range first (not ready), so a concurrent registration of
     * overlapping memory fails here rather than in the driver. */
    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, end - 1u);
    if (index != registry->range_count) {
        const curdi_host_range *range = &registry->ranges[index];
        /* range->start < end; it overlaps unless it ends before start. */
        if (range->start + range->byte_len > start) {
            pthread_mutex_unlock(&registry->lock);
            curdi_device_leave(device);
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: [%p, +%zu) overlaps [%p, +%zu), which is"
                              " registered already. Fix: register each"
                              " range once, or unregister the old one"
                              " first.",
                              what, ptr, byte_len, (void *)range->start,
                              range->byte_len);
        }
    }
    if (!curdi_grow((void **)&registry->ranges, &registry->range_capacity,
                    registry->range_count + 1u, sizeof *registry->ranges)) {
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not grow the registry. Fix: free host"
                          " memory.",
                          what);
    }
    index = index == registry->range_count ? 0 : index + 1u;
    memmove(&registry->ranges[index + 1u], &registry->ranges[index],
            (registry->range_count - index) * sizeof *registry->ranges);
    registry->ranges[index] = (curdi_host_range){start, byte_len, 0, false};
    registry->range_count++;
    pthread_mutex_unlock(&registry->lock);

    cu_result = curdi_driver_note(driver->cuMemHostRegister(
        ptr, byte_len, CURDI_CU_MEMHOSTREGISTER_PORTABLE));

    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, start);
    /* The claim is still there: only this call removes or readies it. */
    if (cu_result == CURDI_CUDA_SUCCESS) {
        registry->ranges[index].ready = true;
    } else {
        memmove(&registry->ranges[index], &registry->ranges[index + 1u],
                (registry->range_count - index - 1u)
                    * sizeof *registry->ranges);
        registry->range_count--;
    }
    pthread_mutex_unlock(&registry->lock);
    if (cu_result != CURDI_CUDA_SUCCESS)
        status = curdi_fail_driver(
            (int)cu_result, "cuMemHostRegister",
            cu_result == CURDI_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                ? "register a range once per process (another device or"
                  " library may have registered it)"
                : "register memory you own that is mapped read-write, or"
                  " lower the locked-memory use (ulimit -l)");
    curdi_device_leave(device);
    return status;
}

CURD_API curd_status curd_host_unregister(curd_device *device, void *ptr)
{
    const char *what = "curd_host_unregister";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    uintptr_t start = (uintptr_t)ptr;
    size_t index;
    curdi_cu_result cu_result;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: ptr is NULL. Fix: pass the pointer given to"
                          " curd_host_register().",
                          what);
    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, start);
    if (index == registry->range_count || registry->ranges[index].start != start
        || !registry->ranges[index].ready) {
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %p is not the start of a range registered"
                          " with this device. Fix: pass the exact pointer"
                          " given to curd_host_register(), once.",
                          what, ptr);
    }
    if (registry->ranges[index].use_count != 0) {
        uint32_t uses = registry->ranges[index].use_count;
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
        return curdi_fail(CURD_E_BUSY,
                          "%s: %p is in use by %" PRIu32 " transfer(s) or"
                          " asynchronous upload(s); nothing was"
                          " unregistered. Fix: call"
                          " curd_device_sync_uploads() or wait for the"
                          " transfers, then unregister.",
                          what, ptr, uses);
    }
    registry->ranges[index].ready = false;
    pthread_mutex_unlock(&registry->lock);

    cu_result = curdi_driver_note(driver->cuMemHostUnregister(ptr));

    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, start);
    if (cu_result == CURDI_CUDA_SUCCESS) {
        memmove(&registry->ranges[index], &registry->ranges[index + 1u],
                (registry->range_count - index - 1u)
                    * sizeof *registry->ranges);
        registry->range_count--;
    } else {
        /* Still registered as far as anyone can tell: keep it usable. */
        registry->ranges[index].ready = true;
    }
    pthread_mutex_unlock(&registry->lock);
    if (cu_result != CURDI_CUDA_SUCCESS)
        status = curdi_fail_driver((int)cu_result, "cuMemHostUnregister",
                                   CURDI_DRIVER_FIX);
    curdi_device_leave(device);
    return status;
}

/* ------------------------------------------------------------------------
 * Public entry points: asynchronous uploads
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload_async(curd_device *device,
                                              curd_buffer buffer, size_t offset,
                                              const void *pinned_src,
                                              size_t byte_len)
{
    const char *what = "curd_buffer_upload_async";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    curdi_prepared prepared;
    curdi_counts counts;
    curdi_cu_result cu_result;
    uintptr_t range_key;
    curdi_call_item call = {buffer.id, offset, byte_len,
                            (unsigned char *)pinned_src, SIZE_MAX};
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare(device, what, true, false, &call, 1, &prepared);
    if (status != CURD_OK)
        return status;
    if (byte_len == 0) {
        curdi_prepared_release(device, &prepared);
        return CURD_OK;
    }
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    driver = curdi_driver_get();
    registry = device->host_registry;
    memset(&counts, 0, sizeof counts);
    counts.h2d_bytes = byte_len;
    counts.copy_ops = 1;
    status = curdi_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto fail;

    /* Room for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    pthread_mutex_lock(&registry->lock);
    if (!curdi_grow((void **)&registry->pending, &registry->pending_capacity,
                    registry->pending_count + 1u, sizeof *registry->pending)) {
        pthread_mutex_unlock(&registry->lock);
        status = curdi_fail(CURD_E_OUT_OF_MEMORY,
                            "%s: could not grow the list of pending uploads."
                            " Fix: call curd_device_sync_uploads() or free"
                            " host memory.",
                            what);
        goto fail;
    }
    range_key = curdi_registry_use(registry, pinned_src, byte_len);
    pthread_mutex_unlock(&registry->lock);

    /* offset + byte_len <= the buffer's size: checked in curdi_prepare. */
    cu_result = curdi_driver_note(driver->cuMemcpyHtoDAsync(
        (curdi_cu_deviceptr)(prepared.uses[0].device_ptr + offset), pinned_src,
        byte_len, device->upload_stream));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)cu_result, "cuMemcpyHtoDAsync",
                                   CURDI_DRIVER_FIX);
        pthread_mutex_lock(&registry->lock);
        curdi_registry_unuse(registry, range_key);
        pthread_mutex_unlock(&registry->lock);
        goto fail;
    }
    /* The use becomes asynchronous before it is listed, so a concurrent
     * curd_device_sync_uploads that ends it finds it so. */
    curdi_resident_async_begin(device, buffer.id);
    prepared.marked = false; /* now ended by curd_device_sync_uploads */
    pthread_mutex_lock(&registry->lock);
    registry->pending[registry->pending_count++] =
        (curdi_async_entry){buffer.id, range_key, registry->next_serial++};
    pthread_mutex_unlock(&registry->lock);
    curdi_counts_add(device, &counts);
    curdi_device_leave(device);
    curdi_prepared_release(device, &prepared);
    return CURD_OK;

fail:
    curdi_device_leave(device);
    curdi_prepared_release(device, &prepared);
    return status;
}

CURD_API curd_status curd_device_sync_uploads(curd_device *device)
{
    const char *what = "curd_device_sync_uploads";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    curdi_counts counts;
    curdi_cu_result cu_result;
    uint64_t serial_limit;
    size_t kept = 0;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    serial_limit = registry->next_serial;
    kept = registry->pending_count;
    pthread_mutex_unlock(&registry->lock);
    /* Nothing enqueued: nothing to wait for, no fence. */
    if (kept == 0)
        return CURD_OK;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.fences = 1;
    status = curdi_counts_check(device, &counts, what);
    if (status == CURD_OK) {
        cu_result = curdi_driver_note(
            driver->cuStreamSynchronize(device->upload_stream));
        if (cu_result != CURDI_CUDA_SUCCESS)
            status = curdi_fail_driver(
                (int)cu_result, "cuStreamSynchronize",
                "the uploads stay pending (their buffers cannot be freed"
                " until a later sync succeeds); check the device with"
                " nvidia-smi");
    }
    if (status == CURD_OK) {
        /* Everything enqueued before serial_limit is done. Entries are
         * in serial order; a concurrent sync may have taken some. */
        pthread_mutex_lock(&registry->lock);
        kept = 0;
        for (size_t index = 0; index < registry->pending_count; index++) {
            curdi_async_entry *entry = &registry->pending[index];
            if (entry->serial < serial_limit) {
                curdi_registry_unuse(registry, entry->range_key);
                curdi_resident_async_end(device, entry->buffer_id);
            } else {
                registry->pending[kept++] = *entry;
            }
        }
        registry->pending_count = kept;
        pthread_mutex_unlock(&registry->lock);
        curdi_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}
