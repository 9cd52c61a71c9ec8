/* upload_marks.c - marks held until a fence (see upload_marks.h). */
#include "transfer/upload_marks.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "memory/resident.h"
#include "transfer/host_register.h"

/* An asynchronous upload not yet completed by a wait on its stream. */
typedef struct curdi_upload_mark {
    uint64_t buffer_id;
    uintptr_t range_key; /* its source's registered range, or 0 */
    uint64_t serial;     /* enqueue order */
} curdi_upload_mark;

struct curdi_upload_marks_state {
    pthread_mutex_t lock;
    curdi_upload_mark *marks; /* in enqueue order */
    size_t mark_count;
    size_t mark_capacity;
    /* Marks promised to uploads between reserve and commit or cancel: the
     * space each reserve made stays theirs. */
    size_t marks_reserved;
    uint64_t next_serial;
};

curd_status curdi_upload_marks_open(curd_device *device)
{
    struct curdi_upload_marks_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's state state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the state state's lock."
                          " Fix: free system resources.");
    }
    state->next_serial = 1;
    device->upload_marks = state;
    return CURD_OK;
}

void curdi_upload_marks_close(curd_device *device)
{
    if (device == NULL || device->upload_marks == NULL)
        return;
    free(device->upload_marks->marks);
    pthread_mutex_destroy(&device->upload_marks->lock);
    free(device->upload_marks);
    device->upload_marks = NULL;
}

curd_status curdi_upload_marks_reserve(curd_device *device, const void *src,
                                       size_t byte_len, const char *what,
                                       uintptr_t *out_range_key)
{
    struct curdi_upload_marks_state *state = device->upload_marks;
    /* Space for the mark first, so nothing can fail after the copy is
     * enqueued. */
    pthread_mutex_lock(&state->lock);
    /* mark_count + marks_reserved marks exist or are promised, each a
     * byte of memory at least: the sum cannot wrap. */
    if (!curdi_core_array_reserve(
            (void **)&state->marks, &state->mark_capacity,
            state->mark_count + state->marks_reserved + 1u,
            sizeof *state->marks)) {
        pthread_mutex_unlock(&state->lock);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not grow the list of pending uploads."
                          " Fix: call curd_device_sync_uploads() or free"
                          " host memory.",
                          what);
    }
    state->marks_reserved++;
    pthread_mutex_unlock(&state->lock);
    *out_range_key = curdi_host_register_use(device, src, byte_len);
    return CURD_OK;
}

void curdi_upload_marks_cancel(curd_device *device, uintptr_t range_key)
{
    struct curdi_upload_marks_state *state = device->upload_marks;
    curdi_host_register_unuse(device, range_key);
    pthread_mutex_lock(&state->lock);
    state->marks_reserved--;
    pthread_mutex_unlock(&state->lock);
}

void curdi_upload_marks_commit(curd_device *device, uint64_t buffer_id,
                               uintptr_t range_key)
{
    struct curdi_upload_marks_state *state = device->upload_marks;
    pthread_mutex_lock(&state->lock);
    state->marks_reserved--;
    state->marks[state->mark_count++] =
        (curdi_upload_mark){buffer_id, range_key, state->next_serial++};
    pthread_mutex_unlock(&state->lock);
}

bool curdi_upload_marks_pending(curd_device *device,
                                uint64_t *out_serial_limit)
{
    struct curdi_upload_marks_state *state = device->upload_marks;
    size_t pending;
    pthread_mutex_lock(&state->lock);
    *out_serial_limit = state->next_serial;
    pending = state->mark_count;
    pthread_mutex_unlock(&state->lock);
    return pending != 0;
}

void curdi_upload_marks_complete(curd_device *device, uint64_t serial_limit)
{
    struct curdi_upload_marks_state *state = device->upload_marks;
    size_t kept = 0;
    /* Everything enqueued before serial_limit is done. Marks are in serial
     * order; a concurrent sync may have taken some. The modules below take
     * their own locks inside this one, never the other way round. */
    pthread_mutex_lock(&state->lock);
    for (size_t index = 0; index < state->mark_count; index++) {
        curdi_upload_mark *mark = &state->marks[index];
        if (mark->serial < serial_limit) {
            curdi_host_register_unuse(device, mark->range_key);
            curdi_resident_async_end(device, mark->buffer_id);
        } else {
            state->marks[kept++] = *mark;
        }
    }
    state->mark_count = kept;
    pthread_mutex_unlock(&state->lock);
}

curd_status curdi_upload_marks_wait_for(curd_device *device,
                                        const curdi_resident_use *uses,
                                        size_t count)
{
    size_t index = 0;
    while (index < count && !uses[index].async_pending)
        index++;
    if (index == count)
        return CURD_OK;
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuStreamSynchronize(device->upload_stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(device, rc, "cuStreamSynchronize");
    return CURD_OK;
}
