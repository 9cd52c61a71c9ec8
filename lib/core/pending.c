/* pending.c - the shared part of work in flight: one pooled stream, a
 * start and an end event, waiting on the end event, timing, and the
 * public curd_pending_ready / _wait / _free. See pending.h. */
#include "core/pending.h"

#include <pthread.h>
#include <string.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/hash_map.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/fence.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * The registry of live pendings
 * ---------------------------------------------------------------------- */
/* Every pending handed to a caller, by address (base/hash_map), so a
 * lookup reads only the map, never the pointer it was asked about. Its
 * owner takes the pending's slot before the work is enqueued
 * (curdi_pending_take_slot), when the map may have to grow and a failure
 * is still the owner's to report; publishing the pending, once the work
 * is enqueued, fills that slot and cannot fail. live_reserved counts the
 * slots taken and not yet filled or given back: the map always has space
 * for that many inserts without growing (curdi_hash_map_reserve), and
 * nothing shrinks it. One short lock: a dispatch or a batch run handed
 * out takes it three times (take, publish, release). */
#define LIVE_FIRST_SLOTS 64u
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static curdi_hash_map live_map; /* capacity 0 until the first slot */
static size_t live_reserved;

/* Lock held: one more slot that an insert will find without growing. */
static bool take_slot_locked(void)
{
    if (live_map.capacity == 0
        && !curdi_hash_map_init(&live_map, 0, LIVE_FIRST_SLOTS))
        return false;
    if (!curdi_hash_map_reserve(&live_map, live_reserved + 1u))
        return false;
    live_reserved++;
    return true;
}

curd_status curdi_pending_take_slot(curd_pending *pending, const char *what)
{
    if (pending->slot_taken || pending->published)
        return CURD_OK;
    pthread_mutex_lock(&live_lock);
    bool taken = take_slot_locked();
    pthread_mutex_unlock(&live_lock);
    if (!taken)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: the registry of live pendings could not grow;"
                          " nothing was enqueued. Fix: free host memory (or"
                          " free the pendings you are done with) and try"
                          " again.",
                          what);
    pending->slot_taken = true;
    return CURD_OK;
}

curd_status curdi_pending_check_out(curd_pending **out_pending,
                                    const char *what)
{
    if (out_pending == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_pending is NULL. Fix: pass the address of"
                          " a curd_pending pointer.",
                          what);
    return CURD_OK;
}

void curdi_pending_publish(curd_pending *pending)
{
    /* Its owner took the slot before enqueueing the work. */
    CURDI_ASSERT(pending->slot_taken);
    uint64_t key = curdi_hash_map_address_key(pending);
    pthread_mutex_lock(&live_lock);
    bool entered = curdi_hash_map_insert(&live_map, &key, pending);
    /* The slot was reserved: filling it cannot fail. */
    CURDI_ASSERT(entered);
    live_reserved--;
    pending->slot_taken = false;
    pending->published = entered;
    pthread_mutex_unlock(&live_lock);
}

/* Takes the pending out of the registry, or gives back the slot it took
 * and never filled. */
static void unpublish(curd_pending *pending)
{
    if (!pending->published && !pending->slot_taken)
        return;
    pthread_mutex_lock(&live_lock);
    if (pending->published) {
        uint64_t key = curdi_hash_map_address_key(pending);
        bool removed = curdi_hash_map_remove(&live_map, &key, pending);
        CURDI_ASSERT(removed);
    } else {
        CURDI_ASSERT(live_reserved > 0);
        live_reserved--;
    }
    pending->published = false;
    pending->slot_taken = false;
    pthread_mutex_unlock(&live_lock);
}

static bool live(const curd_pending *pending)
{
    uint64_t key = curdi_hash_map_address_key(pending);
    pthread_mutex_lock(&live_lock);
    bool found = live_map.capacity != 0
                 && curdi_hash_map_find(&live_map, &key, NULL) == pending;
    pthread_mutex_unlock(&live_lock);
    return found;
}

/* ------------------------------------------------------------------------
 * The shared part of work in flight
 * ---------------------------------------------------------------------- */
void curdi_pending_init(curd_pending *pending, curd_device *device,
                        const curdi_pending_ops *ops)
{
    memset(pending, 0, sizeof *pending);
    pending->ops = ops;
    pending->device = device;
    pending->timed = true;
    pending->start_ns = curdi_clock_ns();
}

curd_status curdi_pending_fail_driver(curd_device *device, curdi_cu_result rc,
                                      const char *call)
{
    curd_status status = curdi_driver_fail(
        (int)rc, call,
        curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST
            ? "a kernel or a copy faulted and the device's context is"
              " lost: close the device and open it again; run the work"
              " under compute-sanitizer to find the fault"
            : CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_core_device_mark_lost(device);
    return status;
}

curd_status curdi_pending_use_stream(curd_pending *pending, void *cu_stream,
                                     const char *what)
{
    if (cu_stream == NULL)
        return CURD_OK;
    curd_status status = curdi_waits_stream_check_foreign(
        pending->device, (curdi_cu_stream)cu_stream, what);
    if (status != CURD_OK)
        return status;
    pending->caller_stream = (curdi_cu_stream)cu_stream;
    return CURD_OK;
}

/* Whether the work ends in an event: timed work, and work on the
 * caller's stream, whose wait and release go by it. */
static bool has_end_event(const curd_pending *pending)
{
    return pending->timed || pending->caller_stream != NULL;
}

/* The events the work takes: timed ones, or the end event alone
 * (events[1], timing disabled) for untimed work on the caller's stream. */
static unsigned event_count(const curd_pending *pending)
{
    if (!pending->timed)
        return 1u;
    return pending->split ? 4u : 2u;
}

curd_status curdi_pending_acquire(curd_pending *pending)
{
    curd_status status;
    if (pending->caller_stream != NULL) {
        status = curdi_waits_stream_order_after_waits(
            pending->device, pending->caller_stream, false);
        if (status == CURD_OK)
            pending->stream = pending->caller_stream;
    } else {
        status = curdi_streams_acquire(pending->device, &pending->stream);
    }
    if (status != CURD_OK || !has_end_event(pending))
        return status;
    status = pending->timed ? curdi_streams_events_acquire_timed(
                 pending->device, pending->events, event_count(pending))
                            : curdi_streams_events_acquire(
                                pending->device, &pending->events[1], 1);
    if (status == CURD_OK)
        pending->events_taken = true;
    return status;
}

static curd_status record(curd_pending *pending, unsigned which)
{
    curdi_cu_result rc = curdi_driver_note(curdi_driver_get()->cuEventRecord(
        pending->events[which], pending->stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(pending->device, rc, "cuEventRecord");
    return CURD_OK;
}

curd_status curdi_pending_begin(curd_pending *pending)
{
    return pending->timed ? record(pending, 0) : CURD_OK;
}

curd_status curdi_pending_mark(curd_pending *pending, bool kernels_end)
{
    if (!pending->timed || !pending->split)
        return CURD_OK;
    return record(pending, kernels_end ? 3u : 2u);
}

curd_status curdi_pending_end(curd_pending *pending)
{
    curd_status status =
        has_end_event(pending) ? record(pending, 1) : CURD_OK;
    if (status == CURD_OK)
        pending->enqueue_ns = curdi_clock_ns() - pending->start_ns;
    return status;
}

void curdi_pending_drain(curd_pending *pending)
{
    if (pending->stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(
            curdi_driver_get()->cuStreamSynchronize(pending->stream));
}

void curdi_pending_release(curd_pending *pending)
{
    curd_device *device = pending->device;
    curdi_cu_stream stream = pending->stream;
    curdi_cu_event events[4];
    memcpy(events, pending->events, sizeof events);
    unsigned taken = pending->events_taken ? event_count(pending) : 0u;
    bool timed = pending->timed;
    unpublish(pending);
    if (!pending->completed && stream != NULL
        && curdi_core_device_enter(device) == CURD_OK) {
        curdi_pending_drain(pending);
        curdi_core_device_leave(device);
    }
    bool pooled = pending->caller_stream == NULL;
    pending->ops->release(pending); /* may free it */
    if (taken != 0 && timed)
        curdi_streams_events_release_timed(device, events, taken);
    else if (taken != 0)
        curdi_streams_events_release(device, &events[1], 1);
    /* The caller's stream stays the caller's. */
    if (stream != NULL && pooled)
        curdi_streams_release(device, stream);
}

/* The work completed: the times, then the owner's completion. */
static void finish_complete(curd_pending *pending, uint64_t wait_start,
                            bool copy_out)
{
    pending->completed = true;
    pending->wait_ns = curdi_clock_ns() - wait_start;
    pending->ops->complete(pending, copy_out);
    pending->wall_ns = curdi_clock_ns() - pending->start_ns;
}

/* Nanoseconds from one completed event to another; 0 where the driver
 * cannot tell (a statistic, not worth failing a wait for). */
static uint64_t elapsed_ns(const curdi_driver *driver, curdi_cu_event from,
                           curdi_cu_event to)
{
    float ms = 0.0f;
    curdi_cu_result rc =
        curdi_driver_note(driver->cuEventElapsedTime(&ms, from, to));
    return rc == CURDI_CUDA_SUCCESS && ms > 0.0f ? (uint64_t)((double)ms * 1e6)
                                                 : 0u;
}

curd_status curdi_pending_finish(curd_pending *pending, bool copy_out)
{
    curd_device *device = pending->device;
    uint64_t wait_start = curdi_clock_ns();
    /* Once only, even when this wait fails: a failed wait counts nothing,
     * and freeing the pending then drains the work without completing
     * it. */
    pending->waited = true;
    if (pending->ops->wait != NULL) {
        curd_status status = pending->ops->wait(pending);
        if (status != CURD_OK)
            return status;
        finish_complete(pending, wait_start, copy_out);
        return CURD_OK;
    }
    /* Work whose last kernel signals is seen done with no driver call. */
    if (pending->signal_words != NULL && !has_end_event(pending)
        && curdi_fence_signal_seen(device, pending->stream,
                                   pending->signal_words,
                                   pending->signal_count)) {
        finish_complete(pending, wait_start, copy_out);
        return CURD_OK;
    }
    curd_status status = curdi_core_device_enter(device);
    if (status != CURD_OK) {
        /* Entering reported a context the device did not survive. */
        if (status == CURD_E_DEVICE_LOST)
            curdi_core_device_mark_lost(device);
        return status;
    }
    const curdi_driver *driver = curdi_driver_get();
    /* Untimed work is a synchronous call's, waited for as soon as it is
     * enqueued: the stream writes a word behind it (lib/core/fence.h), or
     * its last kernel signalled and was not seen in time. */
    const char *call = "cuEventSynchronize";
    curdi_cu_result rc;
    if (has_end_event(pending))
        rc = curdi_driver_note(driver->cuEventSynchronize(pending->events[1]));
    else if (pending->signal_words != NULL)
        rc = curdi_fence_sync(device, pending->stream, &call);
    else
        rc = curdi_fence_wait(device, pending->stream, &call);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_pending_fail_driver(device, rc, call);
        curdi_core_device_leave(device);
        return status;
    }
    /* The fence says so itself. */
    if (has_end_event(pending))
        curdi_waits_stream_passed(device, pending->stream);
    if (pending->timed && pending->split) {
        pending->staging_ns = elapsed_ns(driver, pending->events[0],
                                         pending->events[2]);
        pending->device_ns = elapsed_ns(driver, pending->events[2],
                                        pending->events[3]);
        pending->readback_ns = elapsed_ns(driver, pending->events[3],
                                          pending->events[1]);
    } else if (pending->timed) {
        pending->device_ns = elapsed_ns(driver, pending->events[0],
                                        pending->events[1]);
    }
    curdi_core_device_leave(device);
    finish_complete(pending, wait_start, copy_out);
    return CURD_OK;
}

void curdi_pending_timing(const curd_pending *pending, curd_timing *timing)
{
    curd_timing result = {.struct_size = timing->struct_size};
    result.wall_ns = pending->wall_ns;
    result.device_ns = pending->device_ns;
    result.enqueue_ns = pending->enqueue_ns;
    result.wait_ns = pending->wait_ns;
    result.staging_ns = pending->staging_ns;
    result.readback_ns = pending->readback_ns;
    /* An older caller's struct gets the fields it has; a newer caller's
     * extra fields are left as they were. */
    memcpy(timing, &result,
           timing->struct_size < sizeof result ? timing->struct_size
                                               : sizeof result);
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */

static curd_status check_pending(const curd_pending *pending, const char *what)
{
    if (pending == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: pending is NULL. Fix: pass the curd_pending"
                          " that curd_dispatch_async, curd_batch_run_async,"
                          " curd_collective_run_async, curd_buffer_copy_async"
                          " or curd_buffer_download_async returned.",
                          what);
    if (!live(pending))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: pending %p is not live (freed already, or"
                          " never returned by curd); nothing was read from"
                          " it. Fix: use a curd_pending between the call that"
                          " returned it and its curd_pending_free().",
                          what, (const void *)pending);
    return curdi_core_device_check(pending->device, what);
}

CURD_API curd_status curd_pending_ready(curd_pending *pending, int *out_ready)
{
    const char *what = "curd_pending_ready";
    curd_status status = check_pending(pending, what);
    if (status != CURD_OK)
        return status;
    if (out_ready == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_ready is NULL. Fix: pass the address of an"
                          " int.",
                          what);
    if (pending->waited) {
        *out_ready = 1;
        return CURD_OK;
    }
    if (pending->ops->ready != NULL)
        return pending->ops->ready(pending, out_ready);
    status = curdi_core_device_enter(pending->device);
    if (status != CURD_OK)
        return status;
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuEventQuery(pending->events[1]));
    curdi_core_device_leave(pending->device);
    if (rc == CURDI_CUDA_SUCCESS || rc == CURDI_CUDA_ERROR_NOT_READY) {
        *out_ready = rc == CURDI_CUDA_SUCCESS;
        return CURD_OK;
    }
    return curdi_pending_fail_driver(pending->device, rc, "cuEventQuery");
}

CURD_API curd_status curd_pending_wait(curd_pending *pending,
                                       curd_timing *timing)
{
    CURDI_RANGE("curd_pending_wait");
    const char *what = "curd_pending_wait";
    curd_status status = check_pending(pending, what);
    if (status == CURD_OK && timing != NULL)
        status = curdi_options_result_struct_check(
            timing, CURDI_TIMING_SIZE_1_0, what, "timing", "curd_timing");
    if (status != CURD_OK)
        return status;
    if (pending->waited)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: this work was waited for already; its outputs"
                          " are in place. Fix: wait once, then"
                          " curd_pending_free().",
                          what);
    status = curdi_pending_finish(pending, true);
    if (status == CURD_OK && timing != NULL)
        curdi_pending_timing(pending, timing);
    return status;
}

CURD_API curd_status curd_pending_free(curd_pending *pending)
{
    if (pending == NULL)
        return CURD_OK;
    curd_status status = check_pending(pending, "curd_pending_free");
    /* On a lost device nothing is waited for: the work is gone with the
     * context, and what the pending holds is host-side bookkeeping. */
    if (status == CURD_E_DEVICE_LOST) {
        curdi_pending_release(pending);
        return CURD_OK;
    }
    if (status != CURD_OK)
        return status;
    if (!pending->waited)
        status = curdi_pending_finish(pending, false);
    curdi_pending_release(pending);
    return status;
}

/* ------------------------------------------------------------------------
 * Ordering a caller's stream after the work
 * ---------------------------------------------------------------------- */
CURD_API curd_status curd_pending_stream_wait(curd_pending *pending,
                                              void *cu_stream)
{
    const char *what = "curd_pending_stream_wait";
    curd_status status = check_pending(pending, what);
    if (status != CURD_OK)
        return status;
    curd_device *device = pending->device;
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    curdi_cu_stream stream = (curdi_cu_stream)cu_stream;
    status = curdi_waits_stream_check_foreign(device, stream, what);
    if (status == CURD_OK) {
        curdi_cu_result rc = curdi_driver_note(
            curdi_driver_get()->cuStreamWaitEvent(stream, pending->events[1],
                                                  0));
        if (rc != CURDI_CUDA_SUCCESS)
            status = curdi_pending_fail_driver(device, rc,
                                               "cuStreamWaitEvent");
    }
    curdi_core_device_leave(device);
    return status;
}

CURD_API curd_status curd_pending_event(curd_pending *pending,
                                        void **out_cu_event)
{
    const char *what = "curd_pending_event";
    curd_status status = check_pending(pending, what);
    if (status != CURD_OK)
        return status;
    if (out_cu_event == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_cu_event is NULL. Fix: pass the address of"
                          " a void * (a CUevent).",
                          what);
    *out_cu_event = pending->events[1];
    return CURD_OK;
}
