/* streams.c - a device's pools of streams and events: the non-blocking
 * streams and the two kinds of events (timed, untimed) curd enqueues on
 * and records, taken from an idle list or created, and kept for reuse when
 * given back. Declared in core.h. */
#include "core/core.h"

#include <stdlib.h>

#include "base/status.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * Streams
 * ---------------------------------------------------------------------- */
curd_status curdi_streams_take(curd_device *device, curdi_cu_stream *out)
{
    pthread_mutex_lock(&device->pool_lock);
    if (device->idle_stream_count > 0) {
        *out = device->idle_streams[--device->idle_stream_count];
        pthread_mutex_unlock(&device->pool_lock);
        return CURD_OK;
    }
    pthread_mutex_unlock(&device->pool_lock);

    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_stream stream = NULL;
    curdi_cu_result rc =
        driver->cuStreamCreate(&stream, CURDI_CU_STREAM_NON_BLOCKING);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuStreamCreate", NULL);
    *out = stream;
    return CURD_OK;
}

curd_status curdi_streams_acquire(curd_device *device, curdi_cu_stream *out)
{
    curdi_cu_stream stream = NULL;
    curd_status status = curdi_streams_take(device, &stream);
    if (status != CURD_OK)
        return status;
    status = curdi_waits_stream_order_after_waits(device, stream, true);
    if (status != CURD_OK) {
        curdi_streams_release(device, stream);
        return status;
    }
    *out = stream;
    return CURD_OK;
}

void curdi_streams_destroy(const curdi_driver *driver, curdi_cu_stream stream)
{
    if (!curdi_driver_usable())
        return;
    curdi_cu_result rc = curdi_driver_note(driver->cuStreamDestroy(stream));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuStreamDestroy failed with %u", rc);
}

void curdi_streams_discard(curd_device *device, curdi_cu_stream stream)
{
    if (stream == NULL)
        return;
    curdi_waits_forget_stream(device, stream);
    curdi_streams_destroy(curdi_driver_get(), stream);
}

void curdi_streams_release(curd_device *device, curdi_cu_stream stream)
{
    if (stream == NULL)
        return;
    pthread_mutex_lock(&device->pool_lock);
    if (device->idle_stream_count == device->idle_stream_capacity) {
        size_t capacity = device->idle_stream_capacity == 0
                              ? 4
                              : device->idle_stream_capacity * 2;
        curdi_cu_stream *grown =
            capacity > SIZE_MAX / sizeof *grown
                ? NULL
                : realloc(device->idle_streams, capacity * sizeof *grown);
        if (grown == NULL) {
            /* No space to cache it: destroy it instead (the caller holds the
             * context, as for every stream call). */
            pthread_mutex_unlock(&device->pool_lock);
            curdi_waits_forget_stream(device, stream);
            curdi_streams_destroy(curdi_driver_get(), stream);
            return;
        }
        device->idle_streams = grown;
        device->idle_stream_capacity = capacity;
    }
    device->idle_streams[device->idle_stream_count++] = stream;
    pthread_mutex_unlock(&device->pool_lock);
}

/* ------------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------- */
/* The idle list of events with timing (for curd_pending's timings) or
 * without (the cheaper kind, for everything else). */
typedef struct event_list {
    curdi_cu_event **events;
    size_t *count;
    size_t *capacity;
    unsigned flags;
} event_list;

static event_list events_of(curd_device *device, bool timed)
{
    if (timed)
        return (event_list){&device->idle_timed_events,
                            &device->idle_timed_event_count,
                            &device->idle_timed_event_capacity,
                            CURDI_CU_EVENT_DEFAULT};
    return (event_list){&device->idle_events, &device->idle_event_count,
                        &device->idle_event_capacity,
                        CURDI_CU_EVENT_DISABLE_TIMING};
}

static void events_release(curd_device *device, bool timed,
                           const curdi_cu_event *events, unsigned count);

static curd_status events_acquire(curd_device *device, bool timed,
                                  curdi_cu_event *events, unsigned count)
{
    const curdi_driver *driver = curdi_driver_get();
    event_list list = events_of(device, timed);
    unsigned taken = 0;
    pthread_mutex_lock(&device->pool_lock);
    while (taken < count && *list.count > 0)
        events[taken++] = (*list.events)[--*list.count];
    pthread_mutex_unlock(&device->pool_lock);
    for (; taken < count; taken++) {
        curdi_cu_result cu_result = curdi_driver_note(
            driver->cuEventCreate(&events[taken], list.flags));
        if (cu_result != CURDI_CUDA_SUCCESS) {
            curd_status status = curdi_driver_fail(
                (int)cu_result, "cuEventCreate",
                "check that the device is still usable (nvidia-smi)");
            events_release(device, timed, events, taken);
            return status;
        }
    }
    return CURD_OK;
}

curd_status curdi_streams_events_acquire(curd_device *device,
                                         curdi_cu_event *events,
                                         unsigned count)
{
    return events_acquire(device, false, events, count);
}

curd_status curdi_streams_events_acquire_timed(curd_device *device,
                                               curdi_cu_event *events,
                                               unsigned count)
{
    return events_acquire(device, true, events, count);
}

void curdi_streams_event_destroy(const curdi_driver *driver,
                                 curdi_cu_event event)
{
    if (curdi_driver_usable())
        (void)curdi_driver_note(driver->cuEventDestroy(event));
}

static void events_release(curd_device *device, bool timed,
                           const curdi_cu_event *events, unsigned count)
{
    event_list list = events_of(device, timed);
    unsigned kept = 0;
    pthread_mutex_lock(&device->pool_lock);
    if (curdi_core_array_reserve((void **)list.events, list.capacity,
                                 *list.count + count, sizeof *events)) {
        for (; kept < count; kept++)
            (*list.events)[(*list.count)++] = events[kept];
    }
    pthread_mutex_unlock(&device->pool_lock);
    /* No space to keep them: destroy them instead. */
    for (unsigned index = kept; index < count; index++)
        curdi_streams_event_destroy(curdi_driver_get(), events[index]);
}

void curdi_streams_events_release(curd_device *device,
                                  const curdi_cu_event *events, unsigned count)
{
    events_release(device, false, events, count);
}

void curdi_streams_events_release_timed(curd_device *device,
                                        const curdi_cu_event *events,
                                        unsigned count)
{
    events_release(device, true, events, count);
}
