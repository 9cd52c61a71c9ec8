/* landing.c - places for downloads' staging, taken in turn (see
 * landing.h). */
#include "memory/landing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"

/* Granules are whole pages: a DMA into a landing starts page-aligned. */
#define LANDING_GRANULE_ALIGN ((uint64_t)4096)

struct curdi_landing_state {
    uint64_t granule_bytes; /* fixed once the device is open; 0: off */
    /* Made by the first landing (make_area), under area_lock; area_ready
     * says, with release and acquire, that area is set. */
    pthread_mutex_t area_lock;
    atomic_bool area_ready;
    unsigned char *area;
    /* Bit i set: granule i is free. */
    _Atomic uint64_t free_granules;
    /* The granule the next landing starts at. */
    _Atomic unsigned cursor;
    _Atomic uint64_t landed;
    _Atomic uint64_t declined;
};

curd_status curdi_landing_open(curd_device *device)
{
    struct curdi_landing_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's landing state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&state->area_lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the landing state's lock."
                          " Fix: free system resources.");
    }
    atomic_store(&state->free_granules, UINT64_MAX);
    device->landing = state;
    return CURD_OK;
}

void curdi_landing_close(curd_device *device)
{
    struct curdi_landing_state *state;
    if (device == NULL || device->landing == NULL)
        return;
    state = device->landing;
    /* Errors have nowhere to go at close. */
    if (state->area != NULL && curdi_driver_usable())
        (void)curdi_driver_note(
            curdi_driver_get()->cuMemFreeHost(state->area));
    pthread_mutex_destroy(&state->area_lock);
    free(state);
    device->landing = NULL;
}

void curdi_landing_set_bytes(curd_device *device, uint64_t area_bytes)
{
    uint64_t granule = area_bytes / CURDI_LANDING_GRANULES;
    device->landing->granule_bytes =
        granule - granule % LANDING_GRANULE_ALIGN;
}

/* The area, made on the first call (context current): false when the
 * driver could not make it, this time. Mapped like the pinned pool's
 * blocks, so the transfer kernels reach it as they reach staging. */
static bool make_area(struct curdi_landing_state *state)
{
    curdi_cu_result cu_result;
    void *area = NULL;
    if (atomic_load_explicit(&state->area_ready, memory_order_acquire))
        return true;
    pthread_mutex_lock(&state->area_lock);
    if (atomic_load_explicit(&state->area_ready, memory_order_relaxed)) {
        pthread_mutex_unlock(&state->area_lock);
        return true;
    }
    cu_result = curdi_driver_note(curdi_driver_get()->cuMemHostAlloc(
        &area, (size_t)(state->granule_bytes * CURDI_LANDING_GRANULES),
        CURDI_CU_MEMHOSTALLOC_PORTABLE | CURDI_CU_MEMHOSTALLOC_DEVICEMAP));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        pthread_mutex_unlock(&state->area_lock);
        curdi_trace("the landing area could not be made (%u): this download"
                    " stages through the pinned pool",
                    cu_result);
        return false;
    }
    state->area = area;
    atomic_store_explicit(&state->area_ready, true, memory_order_release);
    pthread_mutex_unlock(&state->area_lock);
    return true;
}

/* The first of `count` granules for the next landing: the cursor's, or 0
 * when they would run past the area's end; the cursor moves past them. */
static unsigned advance_cursor(struct curdi_landing_state *state,
                               unsigned count)
{
    unsigned cursor =
        atomic_load_explicit(&state->cursor, memory_order_relaxed);
    unsigned start;
    do {
        start = cursor + count > CURDI_LANDING_GRANULES ? 0u : cursor;
    } while (!atomic_compare_exchange_weak_explicit(
        &state->cursor, &cursor, (start + count) % CURDI_LANDING_GRANULES,
        memory_order_relaxed, memory_order_relaxed));
    return start;
}

/* Takes the granules of `bits` if every one is free. */
static bool take_granules(struct curdi_landing_state *state, uint64_t bits)
{
    uint64_t free_granules =
        atomic_load_explicit(&state->free_granules, memory_order_relaxed);
    while ((free_granules & bits) == bits)
        if (atomic_compare_exchange_weak_explicit(
                &state->free_granules, &free_granules, free_granules & ~bits,
                memory_order_acquire, memory_order_relaxed))
            return true;
    return false;
}

bool curdi_landing_take(curd_device *device, size_t byte_len,
                        curdi_landing *out)
{
    struct curdi_landing_state *state = device->landing;
    uint64_t granule = state->granule_bytes;
    memset(out, 0, sizeof *out);
    /* At most a quarter of the area: four landings in a row never come
     * back to the same lines. */
    if (granule != 0 && byte_len > 0
        && byte_len <= granule * (CURDI_LANDING_GRANULES / 4u)
        && make_area(state)) {
        unsigned count = (unsigned)((byte_len + granule - 1u) / granule);
        unsigned start = advance_cursor(state, count);
        /* count <= 16: the shift stays inside the word. */
        uint64_t bits = (((uint64_t)1 << count) - 1u) << start;
        if (take_granules(state, bits)) {
            out->host = state->area + (size_t)(start * granule);
            out->granules = bits;
            atomic_fetch_add_explicit(&state->landed, 1u,
                                      memory_order_relaxed);
            return true;
        }
    }
    atomic_fetch_add_explicit(&state->declined, 1u, memory_order_relaxed);
    return false;
}

void curdi_landing_give(curd_device *device, curdi_landing *landing)
{
    if (landing->host == NULL)
        return;
    atomic_fetch_or_explicit(&device->landing->free_granules,
                             landing->granules, memory_order_release);
    memset(landing, 0, sizeof *landing);
}

curd_status curdi_landing_or_staging(curd_device *device, size_t byte_len,
                                     curdi_landing *landing,
                                     curdi_staging *staging)
{
    if (curdi_landing_take(device, byte_len, landing)) {
        *staging = (curdi_staging){.host = landing->host,
                                   .byte_len = byte_len,
                                   .class_bytes = byte_len};
        return CURD_OK;
    }
    return curdi_staging_acquire(device->pinned_pool, byte_len, staging);
}

void curdi_landing_put_back(curd_device *device, curdi_landing *landing,
                            curdi_staging *staging)
{
    if (landing->host != NULL) {
        curdi_landing_give(device, landing);
        memset(staging, 0, sizeof *staging);
        return;
    }
    (void)curdi_staging_release(staging);
}

void curdi_landing_counts(const curd_device *device, uint64_t *out_landed,
                          uint64_t *out_declined)
{
    struct curdi_landing_state *state = device->landing;
    *out_landed = atomic_load(&state->landed);
    *out_declined = atomic_load(&state->declined);
}
