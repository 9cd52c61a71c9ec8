/* waits.c - others' work that curd's next work waits for: the events a
 * caller hands curd_device_wait_event and curd_device_wait_stream, which
 * every stream curd enqueues on is ordered after
 * (curdi_waits_stream_order_after_waits) until curd sees them pass, and
 * the check that a caller's stream belongs to the device. Declared in
 * core.h. */
#include "core/core.h"

#include <stdatomic.h>

#include "base/status.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * Others' work: what curd's next work waits for, and the caller's streams
 * ---------------------------------------------------------------------- */
/* A driver failure on a device that was usable; a lost context marks it
 * lost. */
static curd_status fail_on_device(curd_device *device, curdi_cu_result rc,
                                  const char *call)
{
    curd_status status = curdi_driver_fail((int)rc, call, CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_core_device_mark_lost(device);
    return status;
}

/* Others' work that curd's next work waits for: an event of curd's own,
 * recorded behind it, and a stream of curd's that is behind it: the pooled
 * stream that waited on a caller's event and recorded it, or the first
 * of curd's streams that waited on an event recorded on a caller's
 * stream; NULL until then, when every stream must wait on it.
 *
 * Why not a query first: cuEventQuery of an event no one has
 * synchronised with costs about 1.35 us on the H100 of
 * doc/PERFORMANCE.md (the driver reads the GPU's progress), more than the
 * cuStreamWaitEvent (about 0.1 us, and nothing on the GPU for work that
 * completed) it would save. So a stream waits on every entry but those
 * recorded on itself, which its order already puts behind it (the pool
 * hands out the stream released last first, so the work right after a
 * wait on an event goes on the stream that took it). An entry is dropped
 * when curd sees that stream's later work complete (curdi_waits_stream_passed,
 * from the fences and end events), or, once the list is longer than
 * WAITS_QUERIED, when a query finds it complete. */
typedef struct curdi_wait {
    curdi_cu_event event;
    curdi_cu_stream stream; /* curd's, behind it; NULL: none yet */
} curdi_wait;

#define WAITS_QUERIED 8u

/* Drops entry index (under waits_lock): its event goes back to the pool. */
static size_t waits_drop(curd_device *device, size_t index, size_t count)
{
    curdi_streams_events_release(device, &device->waits[index].event, 1);
    device->waits[index] = device->waits[count - 1u];
    return count - 1u;
}

curd_status curdi_waits_stream_order_after_waits(curd_device *device,
                                                 curdi_cu_stream stream,
                                                 bool owned)
{
    if (atomic_load_explicit(&device->wait_count, memory_order_acquire) == 0)
        return CURD_OK;
    const curdi_driver *driver = curdi_driver_get();
    curd_status status = CURD_OK;
    /* The lock is held across the queries and the waits (neither blocks)
     * so that no other thread drops and reuses an event this stream is
     * about to wait on. */
    pthread_mutex_lock(&device->waits_lock);
    size_t count = atomic_load_explicit(&device->wait_count,
                                        memory_order_relaxed);
    bool query = count > WAITS_QUERIED;
    for (size_t index = 0; status == CURD_OK && index < count;) {
        const curdi_wait *wait = &device->waits[index];
        if (wait->stream == stream) {
            index++;
            continue;
        }
        curdi_cu_result rc = CURDI_CUDA_ERROR_NOT_READY;
        if (query)
            rc = curdi_driver_note(driver->cuEventQuery(wait->event));
        if (rc == CURDI_CUDA_SUCCESS) {
            count = waits_drop(device, index, count);
            continue;
        }
        if (rc == CURDI_CUDA_ERROR_NOT_READY) {
            rc = curdi_driver_note(
                driver->cuStreamWaitEvent(stream, wait->event, 0));
            if (rc != CURDI_CUDA_SUCCESS)
                status = fail_on_device(device, rc, "cuStreamWaitEvent");
            else if (owned && wait->stream == NULL)
                /* Behind it now: this stream's later work ends it. */
                device->waits[index].stream = stream;
        } else {
            status = fail_on_device(device, rc, "cuEventQuery");
        }
        index++;
    }
    atomic_store_explicit(&device->wait_count, count, memory_order_release);
    pthread_mutex_unlock(&device->waits_lock);
    return status;
}

void curdi_waits_stream_passed(curd_device *device, curdi_cu_stream stream)
{
    if (atomic_load_explicit(&device->wait_count, memory_order_acquire) == 0)
        return;
    pthread_mutex_lock(&device->waits_lock);
    size_t count = atomic_load_explicit(&device->wait_count,
                                        memory_order_relaxed);
    for (size_t index = 0; index < count;)
        if (device->waits[index].stream == stream)
            count = waits_drop(device, index, count);
        else
            index++;
    atomic_store_explicit(&device->wait_count, count, memory_order_release);
    pthread_mutex_unlock(&device->waits_lock);
}

/* A pooled stream about to be destroyed: its entries stay, for every
 * stream to wait on, since a new stream may come back with its handle. */
void curdi_waits_destroy(const curdi_driver *driver, curd_device *device)
{
    size_t waits = atomic_load(&device->wait_count);
    for (size_t i = 0; i < waits; i++)
        curdi_streams_event_destroy(driver, device->waits[i].event);
    atomic_store(&device->wait_count, 0);
}

void curdi_waits_forget_stream(curd_device *device, curdi_cu_stream stream)
{
    pthread_mutex_lock(&device->waits_lock);
    size_t count = atomic_load_explicit(&device->wait_count,
                                        memory_order_relaxed);
    for (size_t index = 0; index < count; index++)
        if (device->waits[index].stream == stream)
            device->waits[index].stream = NULL;
    pthread_mutex_unlock(&device->waits_lock);
}

/* Adds an event recorded behind others' work (on `stream`, see
 * curdi_wait) to the device's waits; on a failure (no host memory) the
 * event goes back to the pool and nothing is waited for. */
static curd_status waits_add(curd_device *device, curdi_cu_event event,
                             curdi_cu_stream stream, const char *what)
{
    pthread_mutex_lock(&device->waits_lock);
    size_t count = atomic_load_explicit(&device->wait_count,
                                        memory_order_relaxed);
    bool reserved = curdi_core_array_reserve(
        (void **)&device->waits, &device->wait_capacity, count + 1u,
        sizeof *device->waits);
    if (reserved) {
        device->waits[count] = (curdi_wait){.event = event, .stream = stream};
        atomic_store_explicit(&device->wait_count, count + 1u,
                              memory_order_release);
    }
    pthread_mutex_unlock(&device->waits_lock);
    if (reserved)
        return CURD_OK;
    curdi_streams_events_release(device, &event, 1);
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "%s: no host memory for one more entry in the list of"
                      " work to wait for; nothing will wait. Fix: free host"
                      " memory and call it again.",
                      what);
}

curd_status curdi_waits_stream_check_foreign(curd_device *device,
                                             curdi_cu_stream cu_stream,
                                             const char *what)
{
    curdi_cu_context context = NULL;
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuStreamGetCtx(cu_stream, &context));
    if (rc == CURDI_CUDA_SUCCESS && context == device->context)
        return CURD_OK;
    if (rc == CURDI_CUDA_SUCCESS)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: stream %p belongs to another CUDA context than"
                          " device %d's primary context; nothing was"
                          " enqueued. Fix: pass a stream created in the"
                          " device's primary context (cudaSetDevice(%d), or"
                          " cuDevicePrimaryCtxRetain), or record an event on"
                          " it and pass that to curd_device_wait_event.",
                          what, (void *)cu_stream, device->ordinal,
                          device->ordinal);
    if (curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST)
        return fail_on_device(device, rc, "cuStreamGetCtx");
    return curdi_driver_fail((int)rc, "cuStreamGetCtx",
                             "pass a live CUstream (a cudaStream_t is one)"
                             " of the device's primary context, not a"
                             " destroyed one or another handle");
}

CURD_API curd_status curd_device_wait_stream(curd_device *device,
                                             void *cu_stream)
{
    const char *what = "curd_device_wait_stream";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    curdi_cu_stream stream = (curdi_cu_stream)cu_stream;
    curdi_cu_event event = NULL;
    status = curdi_waits_stream_check_foreign(device, stream, what);
    if (status == CURD_OK)
        status = curdi_streams_events_acquire(device, &event, 1);
    if (status == CURD_OK) {
        /* An event of curd's own, since the caller's stream goes on: it
         * marks the stream's work so far and nothing after. */
        curdi_cu_result rc = curdi_driver_note(
            curdi_driver_get()->cuEventRecord(event, stream));
        if (rc == CURDI_CUDA_SUCCESS) {
            status = waits_add(device, event, NULL, what);
        } else {
            curdi_streams_events_release(device, &event, 1);
            status = fail_on_device(device, rc, "cuEventRecord");
        }
    }
    curdi_core_device_leave(device);
    return status;
}

/* A call on the caller's event that failed: a lost context marks the
 * device lost; anything else is the handle's fault. */
static curd_status event_failure(curd_device *device, curdi_cu_result rc,
                                 const char *call)
{
    if (curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST)
        return fail_on_device(device, rc, call);
    return curdi_driver_fail((int)rc, call,
                             "pass a live CUevent (a cudaEvent_t is one),"
                             " not a destroyed one or another handle");
}

CURD_API curd_status curd_device_wait_event(curd_device *device,
                                            void *cu_event)
{
    const char *what = "curd_device_wait_event";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (cu_event == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: cu_event is NULL. Fix: pass a CUevent (a"
                          " cudaEvent_t is one) that has been recorded.",
                          what);
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_event theirs = (curdi_cu_event)cu_event;
    /* Its owner may record the event again at any time, so curd keeps
     * the state it has now: a pooled stream waits on it and records an
     * event of curd's own. The stream goes back to the pool with that
     * wait in it, which orders nothing that curd would not order anyway. */
    curdi_cu_stream stream = NULL;
    curdi_cu_event ours = NULL;
    status = curdi_streams_take(device, &stream);
    if (status == CURD_OK)
        status = curdi_streams_events_acquire(device, &ours, 1);
    if (status == CURD_OK) {
        curdi_cu_result rc =
            curdi_driver_note(driver->cuStreamWaitEvent(stream, theirs, 0));
        if (rc != CURDI_CUDA_SUCCESS) {
            status = event_failure(device, rc, "cuStreamWaitEvent");
        } else {
            rc = curdi_driver_note(driver->cuEventRecord(ours, stream));
            if (rc != CURDI_CUDA_SUCCESS)
                status = fail_on_device(device, rc, "cuEventRecord");
        }
        if (status == CURD_OK)
            status = waits_add(device, ours, stream, what);
        else
            curdi_streams_events_release(device, &ours, 1);
    }
    if (stream != NULL)
        curdi_streams_release(device, stream);
    curdi_core_device_leave(device);
    return status;
}
