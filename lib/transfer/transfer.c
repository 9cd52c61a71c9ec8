/* transfer.c - transfers: the public entry points and what they share.
 *
 * Read top to bottom: opening and closing the room, the counters, the
 * engine's driver side (lib/transfer/plan.h runs plans through it), validation,
 * then the public synchronous transfers and batches, fills and
 * asynchronous uploads. Validation is lib/transfer/validate.c's, registrations
 * lib/transfer/host_register.c's, the marks of asynchronous uploads lib/transfer/upload_marks.c's, and
 * the copy team lib/transfer/copy_team.c's.
 *
 * How a synchronous transfer or batch runs:
 *  1. Validate every argument and every item; resolve every handle and
 *     mark it in use (lib/memory/resident.h), so no buffer can be freed while its
 *     bytes move; check every range with the checked layer. Any failure
 *     here returns before a driver call: nothing moved, nothing counted.
 *  2. Plan: fuse items into spans (lib/transfer/spans.c), decide per span
 *     between direct DMA (registered host memory) and staging (lib/transfer/plan.c).
 *  3. Take one pooled non-blocking stream (or the upload stream when a
 *     buffer has asynchronous uploads pending, so the new work is ordered
 *     after them), staging slots from the pinned pool and, for a stream
 *     longer than one chunk, one event per slot.
 *  4. Run the engine: host copies into (or out of) staging overlap the
 *     DMAs of neighbouring chunks; one cuStreamSynchronize ends it (the
 *     fence).
 *  5. Count, on success only; give back slots, events, stream, marks. */
#include "transfer/transfer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fence.h"
#include "base/checked.h"
#include "transfer/copy_team.h"
#include "core/core.h"
#include "driver/driver.h"
#include "transfer/upload_marks.h"
#include "transfer/gather.h"
#include "transfer/host_register.h"
#include "memory/landing.h"
#include "transfer/validate.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "memory/staging.h"
#include "base/status.h"
#include "transfer/tuning.h"
#include "transfer/plan.h"

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

/* The room's state, behind curd_device.transfer: its counters (checked
 * before the work, added after it succeeded), the engine's tuning (read
 * from the environment at open, lib/transfer/tuning.h) and the copy team that
 * splits large host copies, started on the first transfer that needs it. */
struct curdi_transfer_room {
    curdi_tuning tuning;
    _Atomic uint64_t h2d_bytes;
    _Atomic uint64_t d2h_bytes;
    _Atomic uint64_t copy_ops;
    _Atomic uint64_t fences;
    _Atomic uint64_t fill_ops;
    _Atomic uint64_t fill_bytes;
    pthread_mutex_t team_lock;
    curdi_copy_team *team;
    bool team_tried;
    /* Workers a long upload adds to the team (team_growth), fixed when
     * the team starts. */
    unsigned team_growth;
};

curd_status curdi_transfer_open(curd_device *device)
{
    struct curdi_transfer_room *room = calloc(1, sizeof *room);
    if (room == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's transfer state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&room->team_lock, NULL) != 0) {
        free(room);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the transfer state's lock."
                          " Fix: free system resources.");
    }
    curdi_tuning_from_env(&room->tuning);
    curdi_fence_set_spin(device, room->tuning.fence_spin_us * 1000u);
    curdi_landing_set_bytes(device, room->tuning.landing_bytes);
    device->transfer = room;
    return CURD_OK;
}

void curdi_transfer_close(curd_device *device)
{
    const curdi_driver *driver;
    if (device == NULL || device->transfer == NULL)
        return;
    driver = curdi_driver_get();
    /* device.c has synchronised the context already; this keeps the
     * room's own promise should it be called alone. Errors have nowhere
     * to go at close. */
    if (driver != NULL && curdi_driver_usable()
        && device->upload_stream != NULL)
        (void)curdi_driver_note(
            driver->cuStreamSynchronize(device->upload_stream));
    curdi_copy_team_destroy(device->transfer->team);
    pthread_mutex_destroy(&device->transfer->team_lock);
    free(device->transfer);
    device->transfer = NULL;
}

void curdi_transfer_stats(curd_device *device, curd_stats *stats)
{
    struct curdi_transfer_room *room = device->transfer;
    stats->h2d_bytes = atomic_load(&room->h2d_bytes);
    stats->d2h_bytes = atomic_load(&room->d2h_bytes);
    stats->copy_ops = atomic_load(&room->copy_ops);
    stats->fences = atomic_load(&room->fences);
    stats->fill_ops = atomic_load(&room->fill_ops);
    stats->fill_bytes = atomic_load(&room->fill_bytes);
}

void curdi_transfer_stats_reset(curd_device *device)
{
    struct curdi_transfer_room *room = device->transfer;
    atomic_store(&room->h2d_bytes, 0);
    atomic_store(&room->d2h_bytes, 0);
    atomic_store(&room->copy_ops, 0);
    atomic_store(&room->fences, 0);
    atomic_store(&room->fill_ops, 0);
    atomic_store(&room->fill_bytes, 0);
}

/* The workers a long upload adds to its team: the tuning's, but never so
 * many that the team, the caller and the rest of the system (one
 * processor) share a processor. */
static unsigned team_growth(const curdi_tuning *tuning,
                            const curdi_copy_team *team)
{
    long spare = sysconf(_SC_NPROCESSORS_ONLN) - 2
                 - (long)curdi_copy_team_workers(team);
    if (spare <= 0)
        return 0;
    /* The tuning's bound is CURDI_COPY_THREADS_MAX. */
    return (uint64_t)spare < tuning->upload_growth_threads
               ? (unsigned)spare
               : (unsigned)tuning->upload_growth_threads;
}

/* The device's copy team, started on first use; NULL if it could not be
 * (the engine then copies on the calling thread). */
static curdi_copy_team *transfer_team(curd_device *device)
{
    struct curdi_transfer_room *room = device->transfer;
    curdi_copy_team *team;
    pthread_mutex_lock(&room->team_lock);
    if (!room->team_tried) {
        room->team_tried = true;
        curdi_copy_team_config config = {
            (unsigned)room->tuning.copy_threads,
            (size_t)room->tuning.copy_parallel_min,
            room->tuning.copy_spin_us * 1000u};
        if (curdi_copy_team_create(&config, &room->team) != CURD_OK)
            room->team = NULL;
        room->team_growth = team_growth(&room->tuning, room->team);
    }
    team = room->team;
    pthread_mutex_unlock(&room->team_lock);
    return team;
}

/* How long a transfer keeps its team warm (lib/transfer/copy_team.h): its first
 * DMA's latency and a pessimistic 4 GB/s for the rest; it cools the team
 * when it ends. */
#define TEAM_WARM_BASE_NS 50000u
#define TEAM_WARM_BYTES_PER_NS 4u

/* The size the engine cuts a chunk's host copies into for the team: the
 * tuning's, or smaller, so that each worker and the caller get a piece of
 * a small chunk. */
static uint64_t team_piece_bytes(const curdi_tuning *tuning,
                                 const curdi_copy_team *team,
                                 uint64_t chunk_bytes)
{
    uint64_t share = chunk_bytes / (curdi_copy_team_workers(team) + 1u);
    if (share < CURDI_COPY_PIECE_MIN_BYTES)
        share = CURDI_COPY_PIECE_MIN_BYTES;
    return share < tuning->copy_piece_bytes ? share : tuning->copy_piece_bytes;
}

/* The workers a transfer of stream_bytes in chunks of chunk_bytes gives
 * pieces to (one piece of a chunk is the caller's), and how long to keep
 * them warm. */
static unsigned team_helpers(uint64_t chunk_bytes, uint64_t piece_bytes)
{
    uint64_t pieces = (chunk_bytes + piece_bytes - 1u) / piece_bytes;
    return pieces - 1u > UINT32_MAX ? UINT32_MAX : (unsigned)(pieces - 1u);
}

static uint64_t team_window_ns(uint64_t stream_bytes)
{
    return TEAM_WARM_BASE_NS + stream_bytes / TEAM_WARM_BYTES_PER_NS;
}

/* ------------------------------------------------------------------------
 * Counters: checked before the work, added after it succeeded.
 * ---------------------------------------------------------------------- */

curd_status curdi_transfer_counts_check(curd_device *device,
                                        const curdi_transfer_counts *counts,
                                        const char *what)
{
    struct curdi_transfer_room *room = device->transfer;
    struct {
        _Atomic uint64_t *counter;
        uint64_t amount;
        const char *name;
    } checks[] = {
        {&room->h2d_bytes, counts->h2d_bytes, "h2d_bytes"},
        {&room->d2h_bytes, counts->d2h_bytes, "d2h_bytes"},
        {&room->copy_ops, counts->copy_ops, "copy_ops"},
        {&room->fences, counts->fences, "fences"},
        {&room->fill_ops, counts->fill_ops, "fill_ops"},
        {&room->fill_bytes, counts->fill_bytes, "fill_bytes"},
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

void curdi_transfer_counts_add(curd_device *device,
                               const curdi_transfer_counts *counts)
{
    struct curdi_transfer_room *room = device->transfer;
    _Atomic uint64_t *counters[] = {&room->h2d_bytes, &room->d2h_bytes,
                                    &room->copy_ops,  &room->fences,
                                    &room->fill_ops,  &room->fill_bytes};
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

typedef struct curdi_gpu_ops {
    const curdi_driver *driver;
    curd_device *device;
    curdi_cu_stream stream;
    curdi_cu_event events[CURDI_XFER_SLOTS_MAX];
    /* Gathering plans: the kernels. */
    curdi_gather_kernels kernels;
    /* The copy team sharing the host copies (NULL: the caller copies
     * alone), warmed at once for an upload and on a download's first wait
     * for the device (the DMAs are on their way by then;
     * lib/transfer/copy_team.h): the workers and window still to warm (0 workers
     * once warmed), and the warmth to cool. */
    curdi_copy_team *team;
    unsigned warm_workers;
    uint64_t warm_window_ns;
    uint64_t warmth;
    /* Workers a long upload added to the team (curdi_copy_team_grow). */
    unsigned added_workers;
} curdi_gpu_ops;

static curd_status gpu_copy(void *context, bool upload,
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

static curd_status gpu_copy_rows(void *context, bool upload,
                                 const curdi_xfer_run *run)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_memcpy2d copy;
    curdi_cu_result cu_result;
    memset(&copy, 0, sizeof copy);
    /* The pitches are at most the device's maximum pitch and the width a
     * buffer range's length: each fits a size_t. */
    copy.width = (size_t)run->width;
    copy.height = (size_t)run->count;
    if (upload) {
        copy.src_memory_type = CURDI_CU_MEMORYTYPE_HOST;
        copy.src_host = (const void *)run->host;
        copy.src_pitch = (size_t)run->host_pitch;
        copy.dst_memory_type = CURDI_CU_MEMORYTYPE_DEVICE;
        copy.dst_device = (curdi_cu_deviceptr)run->device_ptr;
        copy.dst_pitch = (size_t)run->device_pitch;
    } else {
        copy.src_memory_type = CURDI_CU_MEMORYTYPE_DEVICE;
        copy.src_device = (curdi_cu_deviceptr)run->device_ptr;
        copy.src_pitch = (size_t)run->device_pitch;
        copy.dst_memory_type = CURDI_CU_MEMORYTYPE_HOST;
        copy.dst_host = (void *)run->host;
        copy.dst_pitch = (size_t)run->host_pitch;
    }
    cu_result = curdi_driver_note(gpu->driver->cuMemcpy2DAsync(
        curdi_cu_memcpy2d_abi(&copy), gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuMemcpy2DAsync",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status gpu_gathered(void *context, bool upload,
                                unsigned char *host, uint64_t byte_len,
                                const curdi_xfer_piece *pieces, size_t count)
{
    curdi_gpu_ops *gpu = context;
    (void)byte_len;
    /* The kernels reach the chunk's host side (a pinned staging slot or
     * registered memory) where the CPU sees it (lib/transfer/gather.h): one launch
     * moves the pieces across the bus, no DMA. The stream orders it after
     * the chunk before, and the slot's event after it. */
    return curdi_gather_enqueue(&gpu->kernels, gpu->stream, !upload, host,
                                pieces, count);
}

static curd_status gpu_mark(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result = curdi_driver_note(
        gpu->driver->cuEventRecord(gpu->events[slot], gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventRecord",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

/* Before a download first blocks on the device: its team's wake-up then
 * overlaps the DMAs instead of delaying them. */
static void gpu_warm_team(curdi_gpu_ops *gpu)
{
    if (gpu->warm_workers == 0)
        return;
    gpu->warmth = curdi_copy_team_warm(gpu->team, gpu->warm_workers,
                                       gpu->warm_window_ns);
    gpu->warm_workers = 0;
}

static curd_status gpu_wait(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result;
    gpu_warm_team(gpu);
    cu_result =
        curdi_driver_note(gpu->driver->cuEventSynchronize(gpu->events[slot]));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

/* The fence of a transfer: waits for what `stream` holds so far, polling
 * the word it writes for as long as the tuning says (lib/core/fence.h). fix:
 * the failure's Fix sentence. */
static curd_status transfer_fence(curd_device *device, curdi_cu_stream stream,
                                  const char *fix)
{
    const char *call;
    curdi_cu_result cu_result = curdi_fence_wait(device, stream, &call);
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, call, fix);
    return CURD_OK;
}

static curd_status gpu_finish(void *context)
{
    curdi_gpu_ops *gpu = context;
    gpu_warm_team(gpu);
    return transfer_fence(gpu->device, gpu->stream, CURDI_DRIVER_FIX);
}

/* The stream a transfer runs on: the upload stream when one of its buffers
 * has asynchronous uploads pending (so the new work is ordered after
 * them), else a pooled non-blocking stream. */
static curd_status stream_for(curd_device *device, bool after_uploads,
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
static void stream_drain(const curdi_driver *driver,
                               curdi_cu_stream stream)
{
    if (stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(driver->cuStreamSynchronize(stream));
}

/* The chunk size a plan's stream is moved in, under the device's tuning. */
static uint64_t transfer_chunk_bytes(const curd_device *device,
                                     const curdi_xfer_plan *plan)
{
    const curdi_tuning *tuning = &device->transfer->tuning;
    return curdi_xfer_chunk_bytes(plan->stream_bytes, tuning->chunk_min_bytes,
                                  tuning->chunk_max_bytes);
}

/* The pitches of a batch whose items are rows (curdi_transfer_rows). */
typedef struct row_shape {
    uint64_t device_pitch;
    uint64_t host_pitch;
} row_shape;

/* The items' plan, gathering where the tuning says so and the device can
 * (the kernels' module loads on the first plan that gathers). A driver
 * that cannot JIT the kernels, or a device whose kernels cannot reach
 * host memory, leaves one DMA per span. rows: see transfer_run. Context
 * current. */
static curd_status transfer_plan(curd_device *device,
                                 const curdi_xfer_item *items, size_t count,
                                 const row_shape *rows,
                                 curdi_xfer_plan *plan,
                                 curdi_gather_kernels *kernels)
{
    const curdi_gather_policy *policy = &device->transfer->tuning.gather;
    curd_status status;
    if (rows != NULL)
        return curdi_xfer_plan_rows(items, count, rows->device_pitch,
                                    rows->host_pitch, plan);
    if (policy->path == CURDI_PATH_DMA)
        policy = NULL;
    status = curdi_xfer_plan_build(items, count, policy,
                                   device->max_copy_pitch, plan);
    if (status != CURD_OK || !plan->gather)
        return status;
    /* Asked only of plans that would gather: it takes a lock. */
    status = curdi_gather_unavailable(device)
                 ? CURD_E_PROGRAM
                 : curdi_gather_kernels_get(device, kernels);
    if (status == CURD_OK)
        return CURD_OK;
    curdi_xfer_plan_free(plan);
    if (status != CURD_E_PROGRAM)
        return status;
    return curdi_xfer_plan_build(items, count, NULL, device->max_copy_pitch,
                                 plan);
}

/* Runs validated items whose buffers the caller holds marked: the device
 * entered, registrations marked, a plan, a stream (the upload stream when
 * after_uploads: a buffer has asynchronous uploads pending), staging, the
 * engine, the counters. rows: NULL, or the pitches of items that are rows
 * (curdi_transfer_rows), whose host extent the caller marked registered
 * (items[0].registered_key) or found not to be (0: staged). */
static curd_status transfer_run(curd_device *device, const char *what,
                                bool upload, curdi_xfer_item *items,
                                size_t count, bool after_uploads,
                                const row_shape *rows)
{
    const curdi_tuning *tuning = &device->transfer->tuning;
    const curdi_driver *driver;
    curdi_xfer_plan plan;
    curdi_gpu_ops gpu;
    curdi_transfer_counts counts;
    curdi_xfer_result result;
    curdi_xfer_ops ops = {.copy = gpu_copy,
                          .copy_rows = gpu_copy_rows,
                          .max_pitch = device->max_copy_pitch,
                          .gathered = gpu_gathered,
                          .mark = gpu_mark,
                          .wait = gpu_wait,
                          .finish = gpu_finish,
                          .context = &gpu};
    unsigned char *slots[CURDI_XFER_SLOTS_MAX] = {NULL};
    curdi_staging staging[CURDI_XFER_SLOTS_MAX];
    curdi_landing landings[CURDI_XFER_SLOTS_MAX];
    curdi_xfer_staging host_side;
    uint64_t chunk_count = 0;
    unsigned slots_taken = 0;
    unsigned event_count = 0;
    bool pooled_stream = false;
    bool events_taken = false;
    /* An upload that stages CURD_UPLOAD_GROWTH_MIN or more: it grows the
     * team and copies through the cache. */
    bool long_upload;
    curd_status status;

    memset(&plan, 0, sizeof plan);
    memset(landings, 0, sizeof landings);
    memset(&gpu, 0, sizeof gpu);
    memset(&host_side, 0, sizeof host_side);

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    gpu.driver = driver;
    gpu.device = device;
    if (rows == NULL)
        curdi_host_register_use_items(device, items, count);

    status = transfer_plan(device, items, count, rows, &plan, &gpu.kernels);
    if (status != CURD_OK)
        goto done;
    if (upload)
        (void)curdi_xfer_plan_pageable_direct(&plan, items, count,
                                              tuning->pageable_direct_max);
    host_side.slots = slots;
    host_side.piece_bytes = tuning->copy_piece_bytes;
    long_upload = upload && plan.stream_bytes >= tuning->upload_growth_min;
    if (plan.stream_bytes > 0) {
        host_side.chunk_bytes = transfer_chunk_bytes(device, &plan);
        chunk_count = (plan.stream_bytes + host_side.chunk_bytes - 1u)
                      / host_side.chunk_bytes;
        /* Straight to registered memory there is nothing to stage. */
        if (plan.gather_host == NULL)
            host_side.slot_count =
                curdi_xfer_slot_count(chunk_count, tuning->slots);
        event_count = chunk_count > 1u ? host_side.slot_count : 0u;
        /* A long upload copies through the cache: streaming stores made
         * the 256 MiB one slower, grown or not (doc/PERFORMANCE.md, the
         * fifth and ninth runs). */
        host_side.streaming =
            upload ? plan.stream_bytes >= tuning->streaming_upload_min
                         && !long_upload
                   : plan.stream_bytes >= tuning->streaming_download_min;
        /* Straight to registered memory there is no host copy to share. */
        if (plan.gather_host == NULL
            && plan.stream_bytes >= tuning->copy_parallel_min)
            gpu.team = transfer_team(device);
    }
    if (gpu.team != NULL) {
        host_side.piece_bytes =
            team_piece_bytes(tuning, gpu.team, host_side.chunk_bytes);
        gpu.warm_workers =
            team_helpers(host_side.chunk_bytes, host_side.piece_bytes);
        gpu.warm_window_ns = team_window_ns(plan.stream_bytes);
        /* An upload's first job comes at once: its workers join as they
         * wake, and the warming keeps them between chunks. */
        if (upload)
            gpu_warm_team(&gpu);
        /* After the warming, so the added workers poll from their start. */
        if (long_upload)
            gpu.added_workers = curdi_copy_team_grow(
                gpu.team, device->transfer->team_growth);
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
    status = curdi_transfer_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto done;

    status = stream_for(device, after_uploads, &gpu.stream,
                              &pooled_stream);
    if (status != CURD_OK)
        goto done;
    /* The staging areas come through lib/memory/staging.h like every staged
     * transfer's; the engine does its own copies into them, since they go
     * piece by piece and in parallel. A download's slot lands in the
     * landing area instead, at a place the CPU has not read lately, when
     * it can (lib/memory/landing.h). */
    for (; slots_taken < host_side.slot_count; slots_taken++) {
        size_t chunk = (size_t)host_side.chunk_bytes;
        status = upload ? curdi_memory_staging_acquire(device, chunk,
                                                       &staging[slots_taken])
                        : curdi_landing_or_staging(device, chunk,
                                                   &landings[slots_taken],
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

    status = curdi_xfer_execute(&plan, items, upload, &host_side, &ops,
                                gpu.team, &result);
    if (status != CURD_OK)
        stream_drain(driver, gpu.stream);

done:
    curdi_copy_team_cool(gpu.team, gpu.warmth);
    curdi_copy_team_shrink(gpu.team, gpu.added_workers);
    if (events_taken)
        curdi_events_release(device, gpu.events, event_count);
    for (unsigned index = 0; index < slots_taken; index++)
        curdi_landing_put_back(device, &landings[index], &staging[index]);
    if (pooled_stream && gpu.stream != NULL)
        curdi_stream_release(device, gpu.stream);
    if (rows == NULL)
        curdi_host_register_unuse_items(device, items, count);
    curdi_xfer_plan_free(&plan);
    if (status == CURD_OK) {
        memset(&counts, 0, sizeof counts);
        if (upload)
            counts.h2d_bytes = result.dma_bytes;
        else
            counts.d2h_bytes = result.dma_bytes;
        counts.copy_ops = result.dma_ops;
        counts.fences = result.fences;
        curdi_transfer_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}

/* The one item from the batch's first item's offset and host address,
 * byte_len long, checked and its buffer marked into *one (allocates
 * nothing); false, with nothing held, when a check fails (its sentence
 * would not name the batch's item: the caller then goes item by item). */
static bool prepare_first_range(curd_device *device,
                                const curdi_prepared *prepared,
                                size_t byte_len, curdi_prepared *one)
{
    const curdi_xfer_item *first = &prepared->items[0];
    curd_status status;
    /* One item: cannot fail. */
    (void)curdi_validate_begin(one, prepared->what, prepared->upload, false,
                              1);
    status = curdi_validate_item(one, 0, first->buffer_key,
                                (size_t)first->offset, byte_len, first->host,
                                SIZE_MAX);
    if (status == CURD_OK)
        status = curdi_validate_end(device, one);
    if (status != CURD_OK) {
        curdi_prepared_release(device, one);
        return false;
    }
    return true;
}

/* A batch whose items continue one another (prepared->chain) asks for
 * exactly the bytes of one item: from the first one's offset and host
 * address, the batch's total length. Moved as that item, it costs one
 * handle lookup, one range check and a plan of one instead of as many as
 * it has items; the planner would have fused it into the same one span
 * (one DMA, the same counts). Every item's own arguments were checked
 * already, and the one range holds all of theirs: item i starts at the
 * first's offset plus the lengths before it, which cannot wrap when the
 * total's end does not. Items that average CURDI_DIRECT_ITEM_MIN_BYTES
 * or more are left to the planner, which may move them straight from
 * registered memory one DMA each (lib/transfer/plan.h); below that it would stage
 * the span, or move it in one DMA exactly when its host side lies in one
 * registered range, as it does the one item. Returns false, having done
 * nothing, when it leaves the batch, or when the one item fails a check
 * (its sentence would not name the item): the caller then checks item by
 * item, which words the error. Else *out_status is the run's. */
static bool curdi_transfer_chain(curd_device *device,
                                 const curdi_prepared *prepared,
                                 curd_status *out_status)
{
    curdi_prepared one;
    if (prepared->total_bytes > SIZE_MAX
        || prepared->total_bytes / prepared->count
               >= CURDI_DIRECT_ITEM_MIN_BYTES
        || !prepare_first_range(device, prepared,
                                (size_t)prepared->total_bytes, &one))
        return false;
    *out_status = transfer_run(device, one.what, one.upload, one.items, 1,
                               one.after_uploads, NULL);
    curdi_prepared_release(device, &one);
    return true;
}

/* A batch of rows (prepared->rows: one buffer, one length, one pitch on
 * each side) is checked as one range on each side, from the first row's
 * start to the last row's end: one handle lookup, one range check and one
 * registration lookup instead of as many as it has items, and a plan
 * without the fusing (lib/transfer/plan.h, curdi_xfer_plan_rows). Every item's own
 * arguments were checked already, and the rows move forward on both
 * sides, so the two ranges hold all of them. Where the host side lies in
 * one registered range the rows cross in one strided DMA straight between
 * the two; otherwise they are staged (a host side partly registered too:
 * registering all of it, or none, is what pays), and their DMAs join into
 * rows at the staging side. Either way the planner would have come to the
 * same DMAs. Contiguous rows are left to the chain or the planner, which
 * move them in one plain DMA. Returns false, having done nothing, when it
 * leaves the batch (a pitch past the device's largest, a tuning that
 * gathers one DMA) or when the device range fails a check (its sentence
 * would not name the item): the caller then checks item by item, which
 * words the error. Else *out_status is the run's. */
static bool curdi_transfer_rows(curd_device *device,
                                const curdi_prepared *prepared,
                                curd_status *out_status)
{
    curdi_xfer_item *items = prepared->items;
    const curdi_xfer_item *first = &items[0];
    const curdi_xfer_item *last = &items[prepared->count - 1];
    row_shape shape = {prepared->row_device_pitch, prepared->row_host_pitch};
    curdi_prepared one;
    size_t device_end;
    uintptr_t host_key;
    /* Rows are one DMA; where the tuning gathers even one DMA of their
     * bytes (CURD_TRANSFER_PATH=gather, CURD_GATHER_MIN_SPANS=1), they go
     * through the kernels like any ranges: the planner's business. */
    if (curdi_xfer_wants_gather(&device->transfer->tuning.gather, 1,
                                prepared->total_bytes)
        || shape.device_pitch > device->max_copy_pitch
        || shape.host_pitch > device->max_copy_pitch
        || (shape.device_pitch == first->byte_len
            && shape.host_pitch == first->byte_len)
        || !curdi_size_add((size_t)last->offset, (size_t)last->byte_len,
                           &device_end)
        || !prepare_first_range(device, prepared,
                                device_end - (size_t)first->offset, &one))
        return false;
    /* The last row's host end did not wrap (curdi_validate_item). */
    host_key = curdi_host_register_use(
        device, first->host,
        (size_t)((uintptr_t)last->host + (uintptr_t)last->byte_len
                 - (uintptr_t)first->host));
    for (size_t row = 0; row < prepared->count; row++) {
        items[row].device_base = one.items[0].device_base;
        items[row].registered_key = host_key;
    }
    *out_status = transfer_run(device, one.what, one.upload, items,
                               prepared->count, one.after_uploads, &shape);
    curdi_host_register_unuse(device, host_key);
    curdi_prepared_release(device, &one);
    return true;
}

/* A whole-buffer transfer whose byte_len is not the buffer's size. */
static curd_status fail_whole_length(const char *what, size_t byte_len,
                                     size_t buffer_len)
{
    return curdi_fail(CURD_E_RANGE,
                      "%s: byte_len is %zu but the buffer holds %zu bytes;"
                      " nothing was moved. Fix: pass exactly the buffer's"
                      " size, or use the _at/_range form for part of it.",
                      what, byte_len, buffer_len);
}

/* A call whose items are recorded, from there to its end: the handles and
 * ranges, the run (unless nothing moves), the release. whole: the one
 * item's byte_len must equal the buffer's size. */
static curd_status transfer_prepared(curd_device *device,
                                           curdi_prepared *prepared,
                                           bool whole)
{
    curd_status status;
    if (prepared->chain && prepared->count > 1
        && curdi_transfer_chain(device, prepared, &status)) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    if (prepared->rows && prepared->count > 1
        && curdi_transfer_rows(device, prepared, &status)) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    status = curdi_validate_end(device, prepared);
    if (status != CURD_OK) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    if (whole && prepared->uses[0].byte_len != prepared->items[0].byte_len) {
        status = fail_whole_length(prepared->what,
                                   (size_t)prepared->items[0].byte_len,
                                   prepared->uses[0].byte_len);
    } else if (prepared->total_bytes > 0) {
        status = transfer_run(device, prepared->what, prepared->upload,
                              prepared->items, prepared->count,
                              prepared->after_uploads, NULL);
    }
    curdi_prepared_release(device, prepared);
    return status;
}

/* A whole-buffer transfer promises CURD_E_RANGE for any byte_len but the
 * buffer's size, even one so large that the host range would wrap, which
 * curdi_validate_item reported first (status). Looked up on that failure
 * path only; a stale handle leaves status as it was. */
static curd_status whole_length_first(curd_device *device, const char *what,
                                      uint64_t buffer_id, size_t byte_len,
                                      curd_status status)
{
    size_t buffer_len = 0;
    if (status == CURD_E_OVERFLOW
        && curdi_resident_length(device, buffer_id, &buffer_len)
        && buffer_len != byte_len)
        return fail_whole_length(what, byte_len, buffer_len);
    return status;
}

/* One single transfer from start to end. The library never writes through
 * an upload's source; the item type is shared with downloads, hence the
 * casts at the callers. Uploads have no capacity: SIZE_MAX. */
static curd_status transfer_one(curd_device *device, const char *what,
                                      bool upload, bool whole,
                                      uint64_t buffer_id, size_t offset,
                                      size_t byte_len, unsigned char *host,
                                      size_t capacity)
{
    curdi_prepared prepared;
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK)
        status = curdi_validate_begin(&prepared, what, upload, false, 1);
    if (status != CURD_OK)
        return status;
    status = curdi_validate_item(&prepared, 0, buffer_id, offset, byte_len,
                                host, capacity);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return whole ? whole_length_first(device, what, buffer_id, byte_len,
                                          status)
                     : status;
    }
    return transfer_prepared(device, &prepared, whole);
}

/* ------------------------------------------------------------------------
 * Public entry points: synchronous transfers and batches
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len)
{
    return transfer_one(device, "curd_buffer_upload", true, true,
                              buffer.id, 0, byte_len, (unsigned char *)src,
                              SIZE_MAX);
}

CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len)
{
    return transfer_one(device, "curd_buffer_upload_at", true, false,
                              buffer.id, offset, byte_len,
                              (unsigned char *)src, SIZE_MAX);
}

CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len)
{
    return transfer_one(device, "curd_buffer_download", false, true,
                              buffer.id, 0, byte_len, dst, byte_len);
}

CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity)
{
    return transfer_one(device, "curd_buffer_download_range", false,
                              false, buffer.id, offset, byte_len, dst,
                              dst_capacity);
}

/* The checks before a batch's items: a device, and items unless there are
 * none (a batch of nothing succeeds at once). */
static curd_status batch_check(curd_device *device, const char *what,
                                     const void *items, size_t count)
{
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK && count != 0 && items == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: items is NULL but count is %zu. Fix: pass an"
                            " array of count items, or count 0.",
                            what, count);
    return status;
}

curd_status curdi_transfer_upload_batch(curd_device *device, const char *what,
                                        const curd_upload *items, size_t count)
{
    curdi_prepared prepared;
    curd_status status = batch_check(device, what, items, count);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_validate_begin(&prepared, what, true, true, count);
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_validate_item(&prepared, index, items[index].buffer.id,
                                    items[index].offset, items[index].byte_len,
                                    (unsigned char *)items[index].src,
                                    SIZE_MAX);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    return transfer_prepared(device, &prepared, false);
}

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count)
{
    return curdi_transfer_upload_batch(device, "curd_upload_batch", items,
                                       count);
}

CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count)
{
    curdi_prepared prepared;
    curd_status status =
        batch_check(device, "curd_download_batch", items, count);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_validate_begin(&prepared, "curd_download_batch", false, true,
                                 count);
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_validate_item(&prepared, index, items[index].buffer.id,
                                    items[index].offset, items[index].byte_len,
                                    items[index].dst,
                                    items[index].dst_capacity);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    return transfer_prepared(device, &prepared, false);
}

/* ------------------------------------------------------------------------
 * Public entry points: device-side fills
 * ---------------------------------------------------------------------- */

static curd_status fill(curd_device *device, const char *what,
                              curd_buffer buffer, size_t offset,
                              size_t byte_len, bool whole, uint8_t value)
{
    const curdi_driver *driver;
    curdi_resident_use use;
    curdi_transfer_counts counts;
    curdi_cu_stream stream = NULL;
    curdi_cu_result cu_result;
    bool pooled = false;
    curd_status status = curdi_device_check(device, what);
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
    status = curdi_transfer_counts_check(device, &counts, what);
    if (status == CURD_OK)
        status = stream_for(device, use.async_pending, &stream, &pooled);
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
        status = transfer_fence(device, stream, CURDI_DRIVER_FIX);
        if (status != CURD_OK)
            stream_drain(driver, stream);
    }
    if (pooled && stream != NULL)
        curdi_stream_release(device, stream);
    if (status == CURD_OK)
        curdi_transfer_counts_add(device, &counts);
    curdi_device_leave(device);
    curdi_resident_use_end(device, &use, 1);
    return status;
}

CURD_API curd_status curd_buffer_fill(curd_device *device, curd_buffer buffer,
                                      size_t offset, size_t byte_len,
                                      uint8_t value)
{
    return fill(device, "curd_buffer_fill", buffer, offset, byte_len,
                      false, value);
}

CURD_API curd_status curd_buffer_clear(curd_device *device, curd_buffer buffer)
{
    return fill(device, "curd_buffer_clear", buffer, 0, 0, true, 0);
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
    const curdi_driver *driver;
    curdi_prepared prepared;
    curdi_transfer_counts counts;
    curdi_cu_result cu_result;
    uintptr_t range_key;
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK)
        status = curdi_validate_begin(&prepared, what, true, false, 1);
    if (status != CURD_OK)
        return status;
    status = curdi_validate_item(&prepared, 0, buffer.id, offset, byte_len,
                                (unsigned char *)pinned_src, SIZE_MAX);
    if (status == CURD_OK)
        status = curdi_validate_end(device, &prepared);
    if (status != CURD_OK || byte_len == 0) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.h2d_bytes = byte_len;
    counts.copy_ops = 1;
    status = curdi_transfer_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto fail;

    /* Room for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    status = curdi_upload_marks_reserve(device, pinned_src, byte_len, what,
                                         &range_key);
    if (status != CURD_OK)
        goto fail;

    /* offset + byte_len <= the buffer's size: checked in curdi_validate_end. */
    cu_result = curdi_driver_note(driver->cuMemcpyHtoDAsync(
        (curdi_cu_deviceptr)(prepared.uses[0].device_ptr + offset), pinned_src,
        byte_len, device->upload_stream));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)cu_result, "cuMemcpyHtoDAsync",
                                   CURDI_DRIVER_FIX);
        curdi_upload_marks_cancel(device, range_key);
        goto fail;
    }
    /* The use becomes asynchronous before it is listed, so a concurrent
     * curd_device_sync_uploads that ends it finds it so. */
    curdi_resident_async_begin(device, buffer.id);
    prepared.marked = false; /* now ended by curd_device_sync_uploads */
    curdi_upload_marks_commit(device, buffer.id, range_key);
    curdi_transfer_counts_add(device, &counts);
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
    curdi_transfer_counts counts;
    uint64_t serial_limit;
    curd_status status = curdi_device_check(device, what);
    if (status != CURD_OK)
        return status;
    /* Nothing enqueued: nothing to wait for, no fence. */
    if (!curdi_upload_marks_pending(device, &serial_limit))
        return CURD_OK;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    memset(&counts, 0, sizeof counts);
    counts.fences = 1;
    status = curdi_transfer_counts_check(device, &counts, what);
    if (status == CURD_OK)
        status = transfer_fence(
            device, device->upload_stream,
            "the uploads stay pending (their buffers cannot be freed"
            " until a later sync succeeds); check the device with"
            " nvidia-smi");
    if (status == CURD_OK) {
        curdi_upload_marks_complete(device, serial_limit);
        curdi_transfer_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}
