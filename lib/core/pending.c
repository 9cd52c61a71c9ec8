/* pending.c - the shared part of work in flight: one pooled stream, a
 * start and an end event, waiting on the end event, timing, and the
 * public curd_pending_ready / _wait / _free. See pending.h. */
#include "core/pending.h"

#include <string.h>

#include "core/fence.h"
#include "base/clock.h"
#include "core/core.h"
#include "driver/driver.h"
#include "base/status.h"

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
    curd_status status = curdi_fail_driver(
        (int)rc, call,
        curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST
            ? "a kernel or a copy faulted and the device's context is"
              " lost: close the device and open it again; run the work"
              " under compute-sanitizer to find the fault"
            : CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_device_mark_lost(device);
    return status;
}

curd_status curdi_pending_acquire(curd_pending *pending)
{
    curd_status status =
        curdi_stream_acquire(pending->device, &pending->stream);
    if (status != CURD_OK || !pending->timed)
        return status;
    status = curdi_events_acquire_timed(pending->device, pending->events, 2);
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

curd_status curdi_pending_end(curd_pending *pending)
{
    curd_status status = pending->timed ? record(pending, 1) : CURD_OK;
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
    curdi_cu_event events[2] = {pending->events[0], pending->events[1]};
    bool events_taken = pending->events_taken;
    if (!pending->completed && stream != NULL
        && curdi_device_enter(device) == CURD_OK) {
        curdi_pending_drain(pending);
        curdi_device_leave(device);
    }
    pending->ops->release(pending); /* may free it */
    if (events_taken)
        curdi_events_release_timed(device, events, 2);
    if (stream != NULL)
        curdi_stream_release(device, stream);
}

/* The work completed: the times, then the owner's completion. */
static void finish_complete(curd_pending *pending, uint64_t wait_start,
                            uint64_t device_ns, bool copy_out)
{
    pending->completed = true;
    pending->device_ns = device_ns;
    pending->wait_ns = curdi_clock_ns() - wait_start;
    pending->ops->complete(pending, copy_out);
    pending->wall_ns = curdi_clock_ns() - pending->start_ns;
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
        finish_complete(pending, wait_start, 0, copy_out);
        return CURD_OK;
    }
    curd_status status = curdi_device_enter(device);
    if (status != CURD_OK) {
        /* Entering reported a context the device did not survive. */
        if (status == CURD_E_DEVICE_LOST)
            curdi_device_mark_lost(device);
        return status;
    }
    const curdi_driver *driver = curdi_driver_get();
    /* Untimed work is a synchronous call's, waited for as soon as it is
     * enqueued: the stream writes a word behind it (lib/core/fence.h). */
    const char *call = "cuEventSynchronize";
    curdi_cu_result rc =
        pending->timed
            ? curdi_driver_note(driver->cuEventSynchronize(pending->events[1]))
            : curdi_fence_wait(device, pending->stream, &call);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_pending_fail_driver(device, rc, call);
        curdi_device_leave(device);
        return status;
    }
    float device_ms = 0.0f;
    if (pending->timed)
        rc = curdi_driver_note(driver->cuEventElapsedTime(
            &device_ms, pending->events[0], pending->events[1]));
    curdi_device_leave(device);
    finish_complete(pending, wait_start,
                    rc == CURDI_CUDA_SUCCESS
                        ? (uint64_t)((double)device_ms * 1e6)
                        : 0,
                    copy_out);
    return CURD_OK;
}

void curdi_pending_timing(const curd_pending *pending, curd_timing *timing)
{
    curd_timing result = {.struct_size = timing->struct_size};
    result.wall_ns = pending->wall_ns;
    result.device_ns = pending->device_ns;
    result.enqueue_ns = pending->enqueue_ns;
    result.wait_ns = pending->wait_ns;
    memcpy(timing, &result, sizeof result);
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */

static curd_status check_pending(const curd_pending *pending, const char *what)
{
    if (pending == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: pending is NULL. Fix: pass the curd_pending"
                          " that curd_dispatch_async, curd_batch_run_async or"
                          " curd_collective_run_async returned.",
                          what);
    return curdi_device_check(pending->device, what);
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
    status = curdi_device_enter(pending->device);
    if (status != CURD_OK)
        return status;
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuEventQuery(pending->events[1]));
    curdi_device_leave(pending->device);
    if (rc == CURDI_CUDA_SUCCESS || rc == CURDI_CUDA_ERROR_NOT_READY) {
        *out_ready = rc == CURDI_CUDA_SUCCESS;
        return CURD_OK;
    }
    return curdi_pending_fail_driver(pending->device, rc, "cuEventQuery");
}

CURD_API curd_status curd_pending_wait(curd_pending *pending,
                                       curd_timing *timing)
{
    const char *what = "curd_pending_wait";
    curd_status status = check_pending(pending, what);
    if (status == CURD_OK && timing != NULL)
        status = curdi_result_struct_check(timing, sizeof *timing, what,
                                           "timing", "curd_timing");
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
