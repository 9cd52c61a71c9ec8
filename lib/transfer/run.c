/* run.c - a synchronous transfer's run (see run.h).
 *
 * Read top to bottom: the engine's driver side (the ops a run gives the
 * engine, lib/transfer/engine.h), the stream and the fence that fills
 * share, the copy team, then the run: plan, take, give back. */
#include "transfer/run.h"

#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "core/core.h"
#include "core/fence.h"
#include "driver/driver.h"
#include "memory/memory.h"

/* ------------------------------------------------------------------------
 * The engine's driver side
 * ---------------------------------------------------------------------- */

static curd_status run_copy(void *context, bool upload, uint64_t device_ptr,
                            unsigned char *host, uint64_t byte_len)
{
    curdi_run *run = context;
    curdi_cu_result cu_result;
    /* byte_len lies within a buffer whose size is a size_t. */
    if (upload)
        cu_result = run->driver->cuMemcpyHtoDAsync(
            (curdi_cu_deviceptr)device_ptr, host, (size_t)byte_len,
            run->stream);
    else
        cu_result = run->driver->cuMemcpyDtoHAsync(
            host, (curdi_cu_deviceptr)device_ptr, (size_t)byte_len,
            run->stream);
    if (curdi_driver_note(cu_result) != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail(
            (int)cu_result, upload ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync",
            CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status run_copy_rows(void *context, bool upload,
                                 const curdi_plan_rows *rows)
{
    curdi_run *run = context;
    curdi_cu_memcpy2d copy;
    curdi_cu_result cu_result;
    memset(&copy, 0, sizeof copy);
    /* The pitches are at most the device's maximum pitch and the width a
     * buffer range's length: each fits a size_t. */
    copy.width = (size_t)rows->width;
    copy.height = (size_t)rows->count;
    if (upload) {
        copy.src_memory_type = CURDI_CU_MEMORYTYPE_HOST;
        copy.src_host = (const void *)rows->host;
        copy.src_pitch = (size_t)rows->host_pitch;
        copy.dst_memory_type = CURDI_CU_MEMORYTYPE_DEVICE;
        copy.dst_device = (curdi_cu_deviceptr)rows->device_ptr;
        copy.dst_pitch = (size_t)rows->device_pitch;
    } else {
        copy.src_memory_type = CURDI_CU_MEMORYTYPE_DEVICE;
        copy.src_device = (curdi_cu_deviceptr)rows->device_ptr;
        copy.src_pitch = (size_t)rows->device_pitch;
        copy.dst_memory_type = CURDI_CU_MEMORYTYPE_HOST;
        copy.dst_host = (void *)rows->host;
        copy.dst_pitch = (size_t)rows->host_pitch;
    }
    cu_result = curdi_driver_note(run->driver->cuMemcpy2DAsync(
        curdi_cu_memcpy2d_abi(&copy), run->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result, "cuMemcpy2DAsync",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status run_gathered(void *context, bool upload,
                                unsigned char *host, uint64_t byte_len,
                                const curdi_engine_piece *pieces, size_t count)
{
    curdi_run *run = context;
    (void)byte_len;
    /* The kernels reach the chunk's host side (a pinned staging slot or
     * registered memory) where the CPU sees it (lib/transfer/gather.h): one launch
     * moves the pieces across the bus, no DMA. The stream orders it after
     * the chunk before, and the slot's event after it. */
    return curdi_gather_enqueue(&run->kernels, run->stream, !upload, host,
                                pieces, count);
}

static curd_status run_mark(void *context, unsigned slot)
{
    curdi_run *run = context;
    curdi_cu_result cu_result = curdi_driver_note(
        run->driver->cuEventRecord(run->events[slot], run->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result, "cuEventRecord",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

/* Before a download first blocks on the device: its team's wake-up then
 * overlaps the DMAs instead of delaying them. */
static void run_warm_team(curdi_run *run)
{
    if (run->warm_workers == 0)
        return;
    run->warmth = curdi_copy_team_warm(run->team, run->warm_workers,
                                       run->warm_window_ns);
    run->warm_workers = 0;
}

static curd_status run_wait(void *context, unsigned slot)
{
    curdi_run *run = context;
    curdi_cu_result cu_result;
    run_warm_team(run);
    cu_result =
        curdi_driver_note(run->driver->cuEventSynchronize(run->events[slot]));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result, "cuEventSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

curd_status curdi_run_fence(curd_device *device, curdi_cu_stream stream,
                            const char *fix)
{
    const char *call;
    curdi_cu_result cu_result = curdi_fence_wait(device, stream, &call);
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result, call, fix);
    return CURD_OK;
}

static curd_status run_finish(void *context)
{
    curdi_run *run = context;
    run_warm_team(run);
    return curdi_run_fence(run->device, run->stream, CURDI_DRIVER_FIX);
}

curd_status curdi_run_stream_for(curd_device *device, bool after_uploads,
                                 curdi_cu_stream *out, bool *out_pooled)
{
    if (after_uploads) {
        *out = device->upload_stream;
        *out_pooled = false;
        return curdi_waits_stream_order_after_waits(
            device, device->upload_stream, true);
    }
    *out_pooled = true;
    return curdi_streams_acquire(device, out);
}

void curdi_run_stream_drain(const curdi_driver *driver,
                            curdi_cu_stream stream)
{
    if (stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(driver->cuStreamSynchronize(stream));
}

/* ------------------------------------------------------------------------
 * The copy team
 * ---------------------------------------------------------------------- */

/* The device's copy team (run.h). */
curdi_copy_team *curdi_run_team(curd_device *device)
{
    struct curdi_transfer_state *state = device->transfer;
    curdi_copy_team *team;
    pthread_mutex_lock(&state->team_lock);
    if (!state->team_tried) {
        state->team_tried = true;
        curdi_copy_team_config config = {
            (unsigned)state->tuning.copy_threads,
            (size_t)state->tuning.copy_parallel_min,
            state->tuning.copy_spin_us * 1000u};
        if (curdi_copy_team_create(&config, &state->team) != CURD_OK)
            state->team = NULL;
        state->team_growth = curdi_plan_team_growth(
            &state->tuning, sysconf(_SC_NPROCESSORS_ONLN),
            curdi_copy_team_workers(state->team));
    }
    team = state->team;
    pthread_mutex_unlock(&state->team_lock);
    return team;
}

/* The device's team for a comparison of byte_len bytes (run.h). */
curdi_copy_team *curdi_run_compare_team(curd_device *device,
                                        uint64_t byte_len)
{
    if (byte_len < device->transfer->tuning.compare_parallel_min)
        return NULL;
    return curdi_run_team(device);
}

/* The run's team, when its host side wants one: its pieces, warmed at
 * once for an upload (its first job comes at once: the workers join as
 * they wake, and the warming keeps them between chunks), grown for a
 * long upload after the warming, so the added workers poll from their
 * start. */
static void run_team_take(curdi_run *run)
{
    struct curdi_transfer_state *state = run->device->transfer;
    curdi_plan_team share;
    run->staging.piece_bytes = state->tuning.copy_piece_bytes;
    if (!run->host.wants_team)
        return;
    run->team = curdi_run_team(run->device);
    if (run->team == NULL)
        return;
    curdi_plan_team_share(&state->tuning, curdi_copy_team_workers(run->team),
                          run->host.chunk_bytes, run->plan.stream_bytes,
                          &share);
    run->staging.piece_bytes = share.piece_bytes;
    run->warm_workers = share.warm_workers;
    run->warm_window_ns = share.warm_window_ns;
    if (run->prepared->upload)
        run_warm_team(run);
    if (run->host.grows_team)
        run->added_workers =
            curdi_copy_team_grow(run->team, state->team_growth);
}

/* ------------------------------------------------------------------------
 * The run
 * ---------------------------------------------------------------------- */

/* The prepared items' plan (see curdi_run_plan). Context current. */
static curd_status run_make_plan(curdi_run *run)
{
    curd_device *device = run->device;
    const curdi_prepared *prepared = run->prepared;
    const curdi_gather_policy *policy = &device->transfer->tuning.gather;
    curd_status status;
    if (prepared->moved_as_rows)
        return curdi_plan_build_rows(prepared->items, prepared->count,
                                     prepared->row_device_pitch,
                                     prepared->row_host_pitch, &run->plan);
    if (policy->path == CURDI_PATH_DMA)
        policy = NULL;
    status = curdi_plan_build(prepared->items, prepared->count, policy,
                              device->max_copy_pitch, &run->plan);
    if (status != CURD_OK || !run->plan.gather)
        return status;
    /* Asked only of plans that would gather: it takes a lock. */
    bool usable = false;
    status = curdi_gather_kernels_if_usable(device, &run->kernels, &usable);
    if (status == CURD_OK && usable)
        return CURD_OK;
    curdi_plan_free(&run->plan);
    if (status != CURD_OK)
        return status;
    return curdi_plan_build(prepared->items, prepared->count, NULL,
                            device->max_copy_pitch, &run->plan);
}

curd_status curdi_run_plan(curd_device *device, curdi_prepared *prepared,
                           curdi_run *run)
{
    curd_status status;
    memset(run, 0, sizeof *run);
    run->device = device;
    run->prepared = prepared;
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    run->entered = true;
    run->driver = curdi_driver_get();
    status = run_make_plan(run);
    if (status == CURD_OK)
        curdi_plan_decide_host(&run->plan, prepared->items, prepared->count,
                               prepared->upload, &device->transfer->tuning,
                               &run->host);
    return status;
}

curd_status curdi_run_resources_take(curdi_run *run)
{
    curd_device *device = run->device;
    bool upload = run->prepared->upload;
    curd_status status;
    run->ops = (curdi_engine_ops){.copy = run_copy,
                                  .copy_rows = run_copy_rows,
                                  .max_pitch = device->max_copy_pitch,
                                  .gathered = run_gathered,
                                  .mark = run_mark,
                                  .wait = run_wait,
                                  .finish = run_finish,
                                  .context = run};
    run->staging.slots = run->slots;
    run->staging.slot_count = run->host.slot_count;
    run->staging.chunk_bytes = run->host.chunk_bytes;
    run->staging.streaming = run->host.streaming;
    run->staging.touch = run->host.touches;
    run_team_take(run);
    status = curdi_run_stream_for(device, run->prepared->after_uploads,
                                  &run->stream, &run->pooled_stream);
    if (status != CURD_OK)
        return status;
    /* The staging areas come through lib/memory/staging.h like every
     * staged transfer's; the engine does its own copies into them, since
     * they go piece by piece and in parallel. A download's slot lands in
     * the landing area instead, at a place the CPU has not read lately,
     * when it can (lib/memory/landing.h). */
    for (; run->slots_taken < run->host.slot_count; run->slots_taken++) {
        unsigned slot = run->slots_taken;
        size_t chunk = (size_t)run->host.chunk_bytes;
        status = upload ? curdi_memory_staging_acquire(device, chunk,
                                                       &run->slot_blocks[slot])
                        : curdi_landing_or_staging(device, chunk,
                                                   &run->landings[slot],
                                                   &run->slot_blocks[slot]);
        if (status != CURD_OK)
            return status;
        run->slots[slot] = run->slot_blocks[slot].host;
    }
    if (run->host.event_count > 0) {
        status = curdi_streams_events_acquire(device, run->events,
                                              run->host.event_count);
        if (status != CURD_OK)
            return status;
        run->events_taken = true;
    }
    run->taken = true;
    return CURD_OK;
}

void curdi_run_resources_give_back(curdi_run *run, curd_status status)
{
    curd_device *device = run->device;
    if (status != CURD_OK && run->taken)
        curdi_run_stream_drain(run->driver, run->stream);
    curdi_copy_team_cool(run->team, run->warmth);
    curdi_copy_team_shrink(run->team, run->added_workers);
    if (run->events_taken)
        curdi_streams_events_release(device, run->events,
                                     run->host.event_count);
    for (unsigned slot = 0; slot < run->slots_taken; slot++)
        curdi_landing_put_back(device, &run->landings[slot],
                               &run->slot_blocks[slot]);
    if (run->pooled_stream && run->stream != NULL)
        curdi_streams_release(device, run->stream);
    curdi_plan_free(&run->plan);
    if (run->entered)
        curdi_core_device_leave(device);
    curdi_validate_prepared_release(device, run->prepared);
}
