/* copy.c - copies between resident buffers, within one device or between
 * two: the checks, the three routes and the pending that carries them.
 * See copy.h.
 *
 * Read top to bottom: the module (counters, peer answers), the checks, the
 * work in flight (a curd_pending), the routes, then the public calls. */
#include "transfer/copy.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "memory/memory.h"
#include "memory/staging.h"
#include "transfer/upload_marks.h"

/* ------------------------------------------------------------------------
 * The module's state
 * ---------------------------------------------------------------------- */

/* What the destination device learned about reaching a source context. */
typedef enum peer_route {
    PEER_UNKNOWN = 0,
    PEER_DIRECT = 1, /* peer access enabled: cuMemcpyPeerAsync */
    PEER_STAGED = 2  /* no peer access: through pinned memory */
} peer_route;

typedef struct peer_answer {
    curdi_cu_context source;
    peer_route route;
} peer_answer;

struct curdi_copy_state {
    /* CURD_PEER_ACCESS was not "0" when the device opened. */
    bool peer_allowed;
    pthread_mutex_t lock; /* guards answers */
    peer_answer *answers;
    size_t answer_count, answer_capacity;
    _Atomic uint64_t d2d_bytes;
    _Atomic uint64_t d2d_ops;
    _Atomic uint64_t peer_bytes;
    _Atomic uint64_t peer_ops;
};

curd_status curdi_copy_open(curd_device *device)
{
    struct curdi_copy_state *state = calloc(1, sizeof *state);
    if (state == NULL || pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's copy state."
                          " Fix: free host memory.");
    }
    const char *setting = getenv("CURD_PEER_ACCESS");
    state->peer_allowed = setting == NULL || strcmp(setting, "0") != 0;
    device->copy = state;
    return CURD_OK;
}

void curdi_copy_close(curd_device *device)
{
    if (device == NULL || device->copy == NULL)
        return;
    pthread_mutex_destroy(&device->copy->lock);
    free(device->copy->answers);
    free(device->copy);
    device->copy = NULL;
}

void curdi_copy_stats(curd_device *device, curd_stats *stats)
{
    struct curdi_copy_state *state = device->copy;
    stats->d2d_bytes = atomic_load(&state->d2d_bytes);
    stats->d2d_ops = atomic_load(&state->d2d_ops);
    stats->peer_bytes = atomic_load(&state->peer_bytes);
    stats->peer_ops = atomic_load(&state->peer_ops);
}

void curdi_copy_stats_reset(curd_device *device)
{
    struct curdi_copy_state *state = device->copy;
    atomic_store(&state->d2d_bytes, 0);
    atomic_store(&state->d2d_ops, 0);
    atomic_store(&state->peer_bytes, 0);
    atomic_store(&state->peer_ops, 0);
}

/* The state's counters and what counts adds to each. */
static void copy_steps(struct curdi_copy_state *state,
                       const curdi_copy_counts *counts,
                       curdi_counter_step steps[4])
{
    steps[0] = (curdi_counter_step){&state->d2d_bytes, counts->d2d_bytes,
                                    "d2d_bytes"};
    steps[1] =
        (curdi_counter_step){&state->d2d_ops, counts->d2d_ops, "d2d_ops"};
    steps[2] = (curdi_counter_step){&state->peer_bytes, counts->peer_bytes,
                                    "peer_bytes"};
    steps[3] =
        (curdi_counter_step){&state->peer_ops, counts->peer_ops, "peer_ops"};
}

curd_status curdi_copy_counts_check(curd_device *device,
                                    const curdi_copy_counts *counts,
                                    const char *what)
{
    curdi_counter_step steps[4];
    copy_steps(device->copy, counts, steps);
    return curdi_checked_counters_check(steps, 4, what);
}

void curdi_copy_counts_add(curd_device *device,
                           const curdi_copy_counts *counts)
{
    curdi_counter_step steps[4];
    copy_steps(device->copy, counts, steps);
    unsigned repairs = curdi_checked_counters_add(steps, 4);
    if (repairs != 0)
        atomic_fetch_add(&device->accounting_repairs, repairs);
}

/* ------------------------------------------------------------------------
 * The checks
 * ---------------------------------------------------------------------- */

/* "<what> copy <i> dst" and the like, formatted only on the way to an
 * error sentence. */
static const char *side_what(char *scratch, size_t scratch_len,
                             const char *what, size_t index, const char *side)
{
    snprintf(scratch, scratch_len, "%s copy %zu %s", what, index, side);
    return scratch;
}

/* A handle that resolve refused: when it names a live buffer of the other
 * device, the sentence says so (CURD_E_INVALID_ARGUMENT); otherwise the
 * resident module's CURD_E_STALE_HANDLE stands. Cold: only on failure. */
static curd_status wrong_device(curd_device *device, curd_device *other,
                                const curd_copy *copies, size_t count,
                                bool dst_side, const char *what,
                                curd_status status)
{
    if (other == device)
        return status;
    for (size_t index = 0; index < count; index++) {
        uint64_t id = dst_side ? copies[index].dst.id : copies[index].src.id;
        if (curdi_resident_probe(device, id) == CURDI_RESIDENT_STALE
            && curdi_resident_probe(other, id) != CURDI_RESIDENT_STALE)
            return curdi_fail(
                CURD_E_INVALID_ARGUMENT,
                "%s: copy %zu's %s buffer belongs to the %s device (ordinal"
                " %d), not to the %s device (ordinal %d); nothing was copied."
                " Fix: pass buffers of dst_device as dst and buffers of"
                " src_device as src (swap the devices, or the buffers).",
                what, index, dst_side ? "dst" : "src",
                dst_side ? "source" : "destination", other->ordinal,
                dst_side ? "destination" : "source", device->ordinal);
    }
    return status;
}

/* Whether [a, a + a_len) and [b, b + b_len) share a byte. */
static bool ranges_meet(uint64_t a, uint64_t a_len, uint64_t b,
                        uint64_t b_len)
{
    return a_len != 0 && b_len != 0 && a < b + b_len && b < a + a_len;
}

/* The ranges of copy `index`, whose buffers are resolved: each inside its
 * buffer, and no overlap of the two within one buffer. */
static curd_status check_ranges(const curd_copy *copy, size_t index,
                                const curdi_resident_use *dst,
                                const curdi_resident_use *src,
                                const char *what)
{
    char scratch[160];
    curd_status status;
    CURDI_TRY(status,
              curdi_checked_range(
                  copy->dst_offset, copy->byte_len, dst->byte_len,
                  side_what(scratch, sizeof scratch, what, index, "dst")),
              out);
    CURDI_TRY(status,
              curdi_checked_range(
                  copy->src_offset, copy->byte_len, src->byte_len,
                  side_what(scratch, sizeof scratch, what, index, "src")),
              out);
    /* Both ranges lie inside their buffers (checked above), so the sums
     * below cannot wrap. */
    if (copy->dst.id == copy->src.id
        && ranges_meet(copy->dst_offset, copy->byte_len, copy->src_offset,
                       copy->byte_len))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: copy %zu reads [%" PRIu64 ", %" PRIu64
                          ") and writes [%" PRIu64 ", %" PRIu64
                          ") of the same buffer, which overlap; a DMA does"
                          " not define the order of its reads and writes,"
                          " so nothing was copied. Fix: copy through a"
                          " second buffer, or split the copy so that no"
                          " part reads bytes it writes.",
                          what, index, copy->src_offset,
                          copy->src_offset + copy->byte_len, copy->dst_offset,
                          copy->dst_offset + copy->byte_len);
    return CURD_OK;
out:
    return status;
}

curd_status curdi_copy_check_one(curd_device *device, const curd_copy *copy,
                                 const char *what, curdi_resident_use out[2])
{
    if (copy == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: copy is NULL. Fix: pass a curd_copy.", what);
    if (copy->byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: byte_len is 0, so the item would do nothing."
                          " Fix: record only copies that move bytes.",
                          what);
    const uint64_t ids[2] = {copy->dst.id, copy->src.id};
    curd_status status = curdi_resident_use_begin(device, what, ids, 2, out);
    if (status != CURD_OK)
        return status;
    status = check_ranges(copy, 0, &out[0], &out[1], what);
    curdi_resident_use_end(device, out, 2);
    return status;
}

/* ------------------------------------------------------------------------
 * The work in flight
 * ---------------------------------------------------------------------- */

/* One DMA: device pointers on each side. */
typedef struct copy_span {
    uint64_t dst_ptr;
    uint64_t src_ptr;
    uint64_t byte_len;
} copy_span;

/* The staged route's slots: up to 8 MiB each, two of them, so one chunk
 * goes down while the one before goes up. */
#define STAGED_SLOT_BYTES ((uint64_t)8 << 20)
#define STAGED_SLOTS 2u

/* A call's copies as a curd_pending of the destination device. One
 * allocation holds it, its uses and ids (dst side, then src side) and its
 * spans. */
typedef struct copy_work {
    curd_pending base; /* base.device: the destination device */
    curd_device *src_device;
    size_t count;
    curdi_resident_use *uses; /* [0, count): dst; [count, 2 count): src */
    uint64_t *ids;
    bool dst_marked, src_marked;
    copy_span *spans;
    size_t span_count;
    curdi_copy_counts counts;
    /* The staged route: a stream and two events of the source device, two
     * events of the destination device, and the slots. */
    curdi_cu_stream src_stream;
    curdi_cu_event src_events[STAGED_SLOTS]; /* chunk in its slot */
    curdi_cu_event dst_events[STAGED_SLOTS]; /* chunk out of its slot */
    bool src_events_taken, dst_events_taken;
    curdi_staging slots;
    uint64_t slot_bytes;
    unsigned slot_count; /* 1 when everything fits one chunk */
} copy_work;

/* The copies are in place: counted, and their buffers free to be freed
 * from now on (before the pending itself is). */
static void work_complete(curd_pending *pending, bool copy_out)
{
    (void)copy_out; /* a copy writes no host memory */
    copy_work *work = (copy_work *)(void *)pending;
    curdi_copy_counts_add(pending->device, &work->counts);
    curdi_resident_use_end(pending->device, work->uses, work->count);
    curdi_resident_use_end(work->src_device, work->uses + work->count,
                           work->count);
    work->dst_marked = work->src_marked = false;
}

/* Gives back the source side's stream and events (draining the stream
 * first when the work did not complete; curd.h has both devices stay open
 * until then). */
static void release_source_side(copy_work *work)
{
    curd_device *src = work->src_device;
    if (work->src_stream == NULL && !work->src_events_taken)
        return;
    bool entered = curdi_core_device_enter(src) == CURD_OK;
    if (entered && !work->base.completed && work->src_stream != NULL
        && curdi_driver_usable())
        (void)curdi_driver_note(
            curdi_driver_get()->cuStreamSynchronize(work->src_stream));
    if (work->src_events_taken)
        curdi_streams_events_release(src, work->src_events, STAGED_SLOTS);
    if (work->src_stream != NULL)
        curdi_streams_release(src, work->src_stream);
    if (entered)
        curdi_core_device_leave(src);
}

/* Everything the work holds, its work complete or drained (the pending
 * module drained the destination's stream; the source's is drained here
 * before the slots go back). */
static void work_release(curd_pending *pending)
{
    copy_work *work = (copy_work *)(void *)pending;
    curd_device *dst = pending->device;
    release_source_side(work);
    if (work->dst_events_taken)
        curdi_streams_events_release(dst, work->dst_events, STAGED_SLOTS);
    (void)curdi_staging_release(&work->slots);
    if (work->dst_marked)
        curdi_resident_use_end(dst, work->uses, work->count);
    if (work->src_marked)
        curdi_resident_use_end(work->src_device, work->uses + work->count,
                               work->count);
    free(work);
}

static const curdi_pending_ops work_ops = {.complete = work_complete,
                                           .release = work_release};

/* Allocates the work and its arrays for count copies. */
static curd_status work_new(curd_device *dst, curd_device *src, size_t count,
                            const char *what, copy_work **out)
{
    size_t per_copy = 2 * sizeof(curdi_resident_use) + 2 * sizeof(uint64_t)
                      + sizeof(copy_span);
    size_t bytes;
    if (!curdi_size_mul(count, per_copy, &bytes)
        || !curdi_size_add(bytes, sizeof(copy_work), &bytes))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: %zu copies need more than 2^64 bytes of"
                          " bookkeeping. Fix: copy in smaller calls.",
                          what, count);
    copy_work *work = calloc(1, bytes);
    if (work == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not allocate the bookkeeping of %zu"
                          " copies. Fix: free host memory, or copy in"
                          " smaller calls.",
                          what, count);
    curdi_pending_init(&work->base, dst, &work_ops);
    work->src_device = src;
    work->count = count;
    /* The arrays follow the struct: uses (8-byte fields), ids, spans. */
    work->uses = (curdi_resident_use *)(void *)(work + 1);
    work->ids = (uint64_t *)(void *)(work->uses + 2 * count);
    work->spans = (copy_span *)(void *)(work->ids + 2 * count);
    *out = work;
    return CURD_OK;
}

/* Resolves and marks both sides, all or none, then checks every range. */
static curd_status work_resolve(copy_work *work, const curd_copy *copies,
                                const char *what)
{
    curd_device *dst = work->base.device, *src = work->src_device;
    size_t count = work->count;
    for (size_t index = 0; index < count; index++) {
        work->ids[index] = copies[index].dst.id;
        work->ids[count + index] = copies[index].src.id;
    }
    curd_status status =
        curdi_resident_use_begin(dst, what, work->ids, count, work->uses);
    if (status != CURD_OK)
        return wrong_device(dst, src, copies, count, true, what, status);
    work->dst_marked = true;
    status = curdi_resident_use_begin(src, what, work->ids + count, count,
                                      work->uses + count);
    if (status != CURD_OK)
        return wrong_device(src, dst, copies, count, false, what, status);
    work->src_marked = true;
    for (size_t index = 0; index < count; index++)
        CURDI_TRY(status,
                  check_ranges(&copies[index], index, &work->uses[index],
                               &work->uses[count + index], what),
                  out);
out:
    return status;
}

/* The spans: one per copy that moves bytes, a copy that continues the
 * span before it on both sides joining it, unless the joined span would
 * read bytes it writes (copies of one buffer chained along it). Byte and
 * op counts for the device that counts them; CURD_E_OVERFLOW when the
 * bytes of all copies (one buffer may be named again and again) pass
 * 2^64 - 1. */
static curd_status work_plan(copy_work *work, const curd_copy *copies,
                             bool one_context, const char *what)
{
    size_t count = work->count;
    uint64_t bytes = 0;
    for (size_t index = 0; index < count; index++) {
        const curd_copy *copy = &copies[index];
        if (copy->byte_len == 0)
            continue;
        /* Inside their buffers (checked), so no sum here wraps. */
        uint64_t dst_ptr = work->uses[index].device_ptr + copy->dst_offset;
        uint64_t src_ptr =
            work->uses[count + index].device_ptr + copy->src_offset;
        if (!curdi_u64_add(bytes, copy->byte_len, &bytes))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the copies' lengths add up past 2^64-1"
                              " bytes at copy %zu; nothing was copied. Fix:"
                              " copy in smaller calls.",
                              what, index);
        copy_span *last =
            work->span_count != 0 ? &work->spans[work->span_count - 1] : NULL;
        if (last != NULL && last->dst_ptr + last->byte_len == dst_ptr
            && last->src_ptr + last->byte_len == src_ptr
            && !(one_context
                 && ranges_meet(last->dst_ptr, last->byte_len + copy->byte_len,
                                last->src_ptr,
                                last->byte_len + copy->byte_len))) {
            last->byte_len += copy->byte_len;
            continue;
        }
        work->spans[work->span_count++] =
            (copy_span){dst_ptr, src_ptr, copy->byte_len};
    }
    if (one_context) {
        work->counts.d2d_bytes = bytes;
        work->counts.d2d_ops = work->span_count;
    } else {
        work->counts.peer_bytes = bytes;
        work->counts.peer_ops = work->span_count;
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The routes
 * ---------------------------------------------------------------------- */

/* The same for a source device other than the destination, whose
 * context is pushed for it. */
static curd_status source_after_uploads(copy_work *work)
{
    curd_device *src = work->src_device;
    if (src == work->base.device)
        return CURD_OK;
    curd_status status = curdi_core_device_enter(src);
    if (status != CURD_OK)
        return status;
    status = curdi_upload_marks_wait_for(src, work->uses + work->count,
                                         work->count);
    curdi_core_device_leave(src);
    return status;
}

/* Whether the destination device reaches the source's memory: the
 * remembered answer, or asked and enabled now (copy.h). Destination's
 * context current. */
static curd_status peer_route_of(curd_device *dst, curd_device *src,
                                 peer_route *out)
{
    struct curdi_copy_state *state = dst->copy;
    if (!state->peer_allowed || !src->copy->peer_allowed) {
        *out = PEER_STAGED;
        return CURD_OK;
    }
    *out = PEER_UNKNOWN;
    pthread_mutex_lock(&state->lock);
    for (size_t index = 0; index < state->answer_count; index++)
        if (state->answers[index].source == src->context)
            *out = state->answers[index].route;
    pthread_mutex_unlock(&state->lock);
    if (*out != PEER_UNKNOWN)
        return CURD_OK;

    const curdi_driver *driver = curdi_driver_get();
    int can_access = 0;
    curdi_cu_result rc = curdi_driver_note(driver->cuDeviceCanAccessPeer(
        &can_access, dst->cu_device, src->cu_device));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(dst, rc, "cuDeviceCanAccessPeer");
    peer_route route = PEER_STAGED;
    if (can_access) {
        rc = driver->cuCtxEnablePeerAccess(src->context, 0);
        if (rc == CURDI_CUDA_SUCCESS
            || rc == CURDI_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
            route = PEER_DIRECT;
        else if (rc != CURDI_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
                 && rc != CURDI_CUDA_ERROR_TOO_MANY_PEERS)
            return curdi_pending_fail_driver(dst, curdi_driver_note(rc),
                             "cuCtxEnablePeerAccess");
    }
    /* Remembered when there is state; without it the next copy asks again
     * (and finds access enabled already). */
    pthread_mutex_lock(&state->lock);
    if (curdi_core_array_reserve(
            (void **)&state->answers, &state->answer_capacity,
            state->answer_count + 1u, sizeof *state->answers))
        state->answers[state->answer_count++] =
            (peer_answer){src->context, route};
    pthread_mutex_unlock(&state->lock);
    *out = route;
    return CURD_OK;
}

/* Within one context: a device-to-device DMA per span. */
static curd_status enqueue_device_to_device(copy_work *work)
{
    const curdi_driver *driver = curdi_driver_get();
    for (size_t index = 0; index < work->span_count; index++) {
        const copy_span *span = &work->spans[index];
        curdi_cu_result rc = curdi_driver_note(driver->cuMemcpyDtoDAsync(
            (curdi_cu_deviceptr)span->dst_ptr,
            (curdi_cu_deviceptr)span->src_ptr, (size_t)span->byte_len,
            work->base.stream));
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(work->base.device, rc, "cuMemcpyDtoDAsync");
    }
    return CURD_OK;
}

/* Between two contexts with peer access: a peer DMA per span, on the
 * destination's stream. */
static curd_status enqueue_peer(copy_work *work)
{
    const curdi_driver *driver = curdi_driver_get();
    curd_device *dst = work->base.device, *src = work->src_device;
    for (size_t index = 0; index < work->span_count; index++) {
        const copy_span *span = &work->spans[index];
        curdi_cu_result rc = curdi_driver_note(driver->cuMemcpyPeerAsync(
            (curdi_cu_deviceptr)span->dst_ptr, dst->context,
            (curdi_cu_deviceptr)span->src_ptr, src->context,
            (size_t)span->byte_len, work->base.stream));
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(dst, rc, "cuMemcpyPeerAsync");
    }
    return CURD_OK;
}

/* The staged route's resources: the slots (destination's pinned pool),
 * two events of each device, a stream of the source. Destination's
 * context current. */
static curd_status staged_acquire(copy_work *work)
{
    curd_device *dst = work->base.device, *src = work->src_device;
    uint64_t largest = 0;
    uint64_t chunks = 0;
    for (size_t index = 0; index < work->span_count; index++) {
        uint64_t len = work->spans[index].byte_len;
        largest = len > largest ? len : largest;
        chunks += (len + STAGED_SLOT_BYTES - 1u) / STAGED_SLOT_BYTES;
    }
    work->slot_bytes = largest < STAGED_SLOT_BYTES ? largest
                                                   : STAGED_SLOT_BYTES;
    /* One chunk needs one slot; more take both. At most 16 MiB: fits a
     * size_t. */
    work->slot_count = chunks > 1u ? STAGED_SLOTS : 1u;
    size_t block_bytes = (size_t)work->slot_bytes * work->slot_count;
    curd_status status;
    CURDI_TRY(status,
              curdi_memory_staging_acquire(dst, block_bytes, &work->slots),
              out);
    CURDI_TRY(
        status,
        curdi_streams_events_acquire(dst, work->dst_events, STAGED_SLOTS),
        out);
    work->dst_events_taken = true;
    CURDI_TRY(status, curdi_core_device_enter(src), out);
    CURDI_TRY(status, curdi_streams_acquire(src, &work->src_stream), leave);
    CURDI_TRY(
        status,
        curdi_streams_events_acquire(src, work->src_events, STAGED_SLOTS),
        leave);
    work->src_events_taken = true;
leave:
    curdi_core_device_leave(src);
out:
    return status;
}

/* Chunk `chunk` down on the source: after the chunk two before left the
 * slot (its event on the destination), into the slot, then its event. */
static curd_status staged_down(copy_work *work, uint64_t chunk,
                               unsigned char *slot, uint64_t src_ptr,
                               size_t len)
{
    const curdi_driver *driver = curdi_driver_get();
    curd_device *src = work->src_device;
    unsigned index = (unsigned)(chunk % STAGED_SLOTS);
    curd_status status = curdi_core_device_enter(src);
    if (status != CURD_OK)
        return status;
    curdi_cu_result rc = CURDI_CUDA_SUCCESS;
    const char *call = "cuStreamWaitEvent";
    if (chunk >= STAGED_SLOTS)
        rc = curdi_driver_note(driver->cuStreamWaitEvent(
            work->src_stream, work->dst_events[index], 0));
    if (rc == CURDI_CUDA_SUCCESS) {
        call = "cuMemcpyDtoHAsync";
        rc = curdi_driver_note(driver->cuMemcpyDtoHAsync(
            slot, (curdi_cu_deviceptr)src_ptr, len, work->src_stream));
    }
    if (rc == CURDI_CUDA_SUCCESS) {
        call = "cuEventRecord";
        rc = curdi_driver_note(driver->cuEventRecord(work->src_events[index],
                                                     work->src_stream));
    }
    if (rc != CURDI_CUDA_SUCCESS)
        status = curdi_pending_fail_driver(src, rc, call);
    curdi_core_device_leave(src);
    return status;
}

/* Chunk `chunk` up on the destination: after it arrived in the slot,
 * then the event that frees the slot. Destination's context current. */
static curd_status staged_up(copy_work *work, uint64_t chunk,
                             const unsigned char *slot, uint64_t dst_ptr,
                             size_t len)
{
    const curdi_driver *driver = curdi_driver_get();
    unsigned index = (unsigned)(chunk % STAGED_SLOTS);
    curdi_cu_stream stream = work->base.stream;
    const char *call = "cuStreamWaitEvent";
    curdi_cu_result rc = curdi_driver_note(
        driver->cuStreamWaitEvent(stream, work->src_events[index], 0));
    if (rc == CURDI_CUDA_SUCCESS) {
        call = "cuMemcpyHtoDAsync";
        rc = curdi_driver_note(driver->cuMemcpyHtoDAsync(
            (curdi_cu_deviceptr)dst_ptr, slot, len, stream));
    }
    if (rc == CURDI_CUDA_SUCCESS) {
        call = "cuEventRecord";
        rc = curdi_driver_note(
            driver->cuEventRecord(work->dst_events[index], stream));
    }
    return rc == CURDI_CUDA_SUCCESS
               ? CURD_OK
               : curdi_pending_fail_driver(work->base.device, rc, call);
}

/* Between two contexts without peer access: every span in chunks through
 * the two slots, all enqueued before anything is waited for. */
static curd_status enqueue_staged(copy_work *work)
{
    uint64_t chunk = 0;
    curd_status status;
    CURDI_TRY(status, staged_acquire(work), out);
    for (size_t index = 0; index < work->span_count; index++) {
        const copy_span *span = &work->spans[index];
        for (uint64_t done = 0; done < span->byte_len;
             done += work->slot_bytes, chunk++) {
            uint64_t left = span->byte_len - done;
            size_t len = (size_t)(left < work->slot_bytes ? left
                                                          : work->slot_bytes);
            unsigned char *slot =
                work->slots.host
                + (size_t)(chunk % work->slot_count) * (size_t)work->slot_bytes;
            CURDI_TRY(status,
                      staged_down(work, chunk, slot, span->src_ptr + done,
                                  len),
                      out);
            CURDI_TRY(status,
                      staged_up(work, chunk, slot, span->dst_ptr + done, len),
                      out);
        }
    }
out:
    return status;
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */

/* Checks, marks and enqueues a call's copies; *out receives the work
 * (NULL when the synchronous call has nothing to move: no stream, no
 * fence). async: the caller will receive the pending
 * (curd_buffer_copy_async), so it is timed and takes its slot in the
 * registry of live pendings before anything is enqueued. */
static curd_status copy_start(curd_device *dst, curd_device *src,
                              const curd_copy *copies, size_t count,
                              bool async, const char *what, copy_work **out)
{
    *out = NULL;
    copy_work *work = NULL;
    peer_route route = PEER_DIRECT;
    curd_status status;
    CURDI_TRY(status, curdi_core_device_check(dst, what), out);
    CURDI_TRY(status, curdi_core_device_check(src, what), out);
    if (copies == NULL && count != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: copies is NULL with count %zu. Fix: pass an"
                          " array of count curd_copy.",
                          what, count);
    CURDI_TRY(status, work_new(dst, src, count, what, &work), out);
    work->base.timed = async;
    CURDI_TRY(status, work_resolve(work, copies, what), release);
    bool one_context = dst == src || dst->context == src->context;
    CURDI_TRY(status, work_plan(work, copies, one_context, what), release);
    CURDI_TRY(status, curdi_copy_counts_check(dst, &work->counts, what),
              release);
    /* Nothing to move, synchronously: no stream, no fence. */
    if (!async && work->span_count == 0)
        goto release;
    if (async)
        CURDI_TRY(status, curdi_pending_take_slot(&work->base, what), release);
    CURDI_TRY(status, curdi_core_device_enter(dst), release);
    if (!one_context && work->span_count != 0)
        CURDI_TRY(status, peer_route_of(dst, src, &route), drain);
    /* One device: both sides' uses are its own. */
    CURDI_TRY(status,
              curdi_upload_marks_wait_for(dst, work->uses,
                                          dst == src ? 2 * count : count),
              drain);
    CURDI_TRY(status, source_after_uploads(work), drain);
    CURDI_TRY(status, curdi_pending_acquire(&work->base), drain);
    CURDI_TRY(status, curdi_pending_begin(&work->base), drain);
    CURDI_TRY(status,
              one_context            ? enqueue_device_to_device(work)
              : route == PEER_DIRECT ? enqueue_peer(work)
                                     : enqueue_staged(work),
              drain);
    CURDI_TRY(status, curdi_pending_end(&work->base), drain);
    curdi_core_device_leave(dst);
    *out = work;
    return CURD_OK;
drain:
    curdi_pending_drain(&work->base);
    curdi_core_device_leave(dst);
release:
    curdi_pending_release(&work->base);
out:
    return status;
}

CURD_API curd_status curd_buffer_copy(curd_device *dst_device,
                                      curd_device *src_device,
                                      const curd_copy *copies, size_t count)
{
    CURDI_RANGE("curd_buffer_copy");
    copy_work *work = NULL;
    curd_status status = copy_start(dst_device, src_device, copies, count,
                                    false, "curd_buffer_copy", &work);
    if (status != CURD_OK || work == NULL)
        return status;
    status = curdi_pending_finish(&work->base, true);
    curdi_pending_release(&work->base);
    return status;
}

CURD_API curd_status curd_buffer_copy_async(curd_device *dst_device,
                                            curd_device *src_device,
                                            const curd_copy *copies,
                                            size_t count,
                                            curd_pending **out_pending)
{
    CURDI_RANGE("curd_buffer_copy_async");
    const char *what = "curd_buffer_copy_async";
    curd_status status = curdi_pending_check_out(out_pending, what);
    if (status != CURD_OK)
        return status;
    copy_work *work = NULL;
    status = copy_start(dst_device, src_device, copies, count, true, what,
                        &work);
    if (status != CURD_OK)
        return status;
    curdi_pending_publish(&work->base);
    *out_pending = &work->base;
    return CURD_OK;
}
