/* transfer.c - transfers: the public entry points and the counters.
 *
 * Read top to bottom: opening and closing the module, the counters, the
 * run of a synchronous transfer, then the public synchronous transfers
 * and batches, fills and asynchronous uploads.
 *
 * How a synchronous transfer or batch runs, one call each:
 *  1. Validate (lib/transfer/validate.h): every argument and every item;
 *     every handle resolved and marked in use (lib/memory/resident.h), so
 *     no buffer can be freed while its bytes move; every range checked;
 *     the registered host ranges looked up. Any failure here returns
 *     before a driver call: nothing moved, nothing counted.
 *  2. Plan (lib/transfer/run.h, curdi_run_plan): fuse items into spans,
 *     decide per span between direct DMA and staging, whether to gather,
 *     and the host side: chunks, slots, the copy team, streaming stores
 *     (lib/transfer/plan.h). Then check the counters.
 *  3. Take the run's resources (curdi_run_resources_take): the copy team,
 *     one pooled non-blocking stream (or the upload stream when a buffer
 *     has asynchronous uploads pending, so the new work is ordered after
 *     them), staging slots and, for a stream longer than one chunk, one
 *     event per slot.
 *  4. Run the engine (lib/transfer/engine.h): host copies into (or out
 *     of) staging overlap the DMAs of neighbouring chunks; one fence ends
 *     it.
 *  5. Give everything back (curdi_run_resources_give_back), marks and
 *     registrations included; count, on success only. */
#include "transfer/transfer.h"

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
#include "core/fence.h"
#include "driver/driver.h"
#include "memory/landing.h"
#include "memory/resident.h"
#include "transfer/copy_team.h"
#include "transfer/engine.h"
#include "transfer/run.h"
#include "transfer/tuning.h"
#include "transfer/upload_marks.h"
#include "transfer/validate.h"

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

curd_status curdi_transfer_open(curd_device *device)
{
    struct curdi_transfer_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's transfer state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&state->team_lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the transfer state's lock."
                          " Fix: free system resources.");
    }
    curdi_tuning_from_env(&state->tuning);
    curdi_fence_set_spin(device, state->tuning.fence_spin_us * 1000u);
    curdi_landing_set_bytes(device, state->tuning.landing_bytes);
    device->transfer = state;
    return CURD_OK;
}

void curdi_transfer_close(curd_device *device)
{
    const curdi_driver *driver;
    if (device == NULL || device->transfer == NULL)
        return;
    driver = curdi_driver_get();
    /* device.c has synchronised the context already; this keeps the
     * module's own promise should it be called alone. Errors have nowhere
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
    struct curdi_transfer_state *state = device->transfer;
    stats->h2d_bytes = atomic_load(&state->h2d_bytes);
    stats->d2h_bytes = atomic_load(&state->d2h_bytes);
    stats->copy_ops = atomic_load(&state->copy_ops);
    stats->fences = atomic_load(&state->fences);
    stats->fill_ops = atomic_load(&state->fill_ops);
    stats->fill_bytes = atomic_load(&state->fill_bytes);
}

void curdi_transfer_stats_reset(curd_device *device)
{
    struct curdi_transfer_state *state = device->transfer;
    atomic_store(&state->h2d_bytes, 0);
    atomic_store(&state->d2h_bytes, 0);
    atomic_store(&state->copy_ops, 0);
    atomic_store(&state->fences, 0);
    atomic_store(&state->fill_ops, 0);
    atomic_store(&state->fill_bytes, 0);
}

/* ------------------------------------------------------------------------
 * Counters: checked before the work, added after it succeeded.
 * ---------------------------------------------------------------------- */

/* The state's counters and what counts adds to each. */
static void transfer_steps(struct curdi_transfer_state *state,
                           const curdi_transfer_counts *counts,
                           curdi_counter_step steps[6])
{
    steps[0] = (curdi_counter_step){&state->h2d_bytes, counts->h2d_bytes,
                                    "h2d_bytes"};
    steps[1] = (curdi_counter_step){&state->d2h_bytes, counts->d2h_bytes,
                                    "d2h_bytes"};
    steps[2] =
        (curdi_counter_step){&state->copy_ops, counts->copy_ops, "copy_ops"};
    steps[3] = (curdi_counter_step){&state->fences, counts->fences, "fences"};
    steps[4] =
        (curdi_counter_step){&state->fill_ops, counts->fill_ops, "fill_ops"};
    steps[5] = (curdi_counter_step){&state->fill_bytes, counts->fill_bytes,
                                    "fill_bytes"};
}

curd_status curdi_transfer_counts_check(curd_device *device,
                                        const curdi_transfer_counts *counts,
                                        const char *what)
{
    curdi_counter_step steps[6];
    transfer_steps(device->transfer, counts, steps);
    return curdi_checked_counters_check(steps, 6, what);
}

void curdi_transfer_counts_add(curd_device *device,
                               const curdi_transfer_counts *counts)
{
    curdi_counter_step steps[6];
    transfer_steps(device->transfer, counts, steps);
    unsigned repairs = curdi_checked_counters_add(steps, 6);
    if (repairs != 0)
        atomic_fetch_add(&device->accounting_repairs, repairs);
}

/* ------------------------------------------------------------------------
 * The run of a synchronous transfer
 * ---------------------------------------------------------------------- */

/* What a run of bytes in copy_ops DMAs and fences adds to the counters,
 * in the direction it moves. */
static void run_counts(bool upload, uint64_t bytes, uint64_t copy_ops,
                       uint64_t fences, curdi_transfer_counts *out)
{
    memset(out, 0, sizeof *out);
    if (upload)
        out->h2d_bytes = bytes;
    else
        out->d2h_bytes = bytes;
    out->copy_ops = copy_ops;
    out->fences = fences;
}

/* Moves validated items and ends them (curdi_run_resources_give_back
 * releases the prepared items too): plan, the counters' check, the
 * resources, the engine, the counters. */
static curd_status transfer_run(curd_device *device, curdi_prepared *prepared)
{
    curdi_run run;
    curdi_transfer_counts counts;
    curdi_engine_result result;
    curd_status status;
    if (prepared->total_bytes == 0) {
        curdi_validate_prepared_release(device, prepared);
        return CURD_OK;
    }
    CURDI_TRY(status, curdi_run_plan(device, prepared, &run), give_back);
    run_counts(prepared->upload, run.plan.dma_bytes, run.host.copy_ops_bound,
               1, &counts);
    CURDI_TRY(status,
              curdi_transfer_counts_check(device, &counts, prepared->what),
              give_back);
    CURDI_TRY(status, curdi_run_resources_take(&run), give_back);
    CURDI_TRY(status,
              curdi_engine_run(&run.plan, prepared->items, prepared->upload,
                               &run.staging, &run.ops, run.team, &result),
              give_back);
    run_counts(prepared->upload, result.dma_bytes, result.dma_ops,
               result.fences, &counts);
    curdi_transfer_counts_add(device, &counts);
give_back:
    curdi_run_resources_give_back(&run, status);
    return status;
}

/* One single transfer from start to end. The library never writes through
 * an upload's source; the item type is shared with downloads, hence the
 * casts at the callers. Uploads have no capacity: SIZE_MAX. whole: the
 * byte_len must be the buffer's size. */
static curd_status transfer_one(curd_device *device, const char *what,
                                bool upload, bool whole, uint64_t buffer_id,
                                size_t offset, size_t byte_len,
                                unsigned char *host, size_t capacity)
{
    curdi_prepared prepared;
    curd_status status =
        curdi_validate_transfer(device, &prepared, what, upload, whole,
                                buffer_id, offset, byte_len, host, capacity);
    if (status != CURD_OK)
        return status;
    return transfer_run(device, &prepared);
}

/* ------------------------------------------------------------------------
 * Public entry points: synchronous transfers and batches
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len)
{
    CURDI_RANGE("curd_buffer_upload");
    return transfer_one(device, "curd_buffer_upload", true, true,
                              buffer.id, 0, byte_len, (unsigned char *)src,
                              SIZE_MAX);
}

CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len)
{
    CURDI_RANGE("curd_buffer_upload_at");
    return transfer_one(device, "curd_buffer_upload_at", true, false,
                              buffer.id, offset, byte_len,
                              (unsigned char *)src, SIZE_MAX);
}

CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len)
{
    CURDI_RANGE("curd_buffer_download");
    return transfer_one(device, "curd_buffer_download", false, true,
                              buffer.id, 0, byte_len, dst, byte_len);
}

CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity)
{
    CURDI_RANGE("curd_buffer_download_range");
    return transfer_one(device, "curd_buffer_download_range", false,
                              false, buffer.id, offset, byte_len, dst,
                              dst_capacity);
}

curd_status curdi_transfer_upload_batch(curd_device *device, const char *what,
                                        const curd_upload *items, size_t count)
{
    curdi_prepared prepared;
    curd_status status =
        curdi_validate_uploads(device, &prepared, what, items, count);
    if (status != CURD_OK)
        return status;
    return transfer_run(device, &prepared);
}

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count)
{
    CURDI_RANGE("curd_upload_batch");
    return curdi_transfer_upload_batch(device, "curd_upload_batch", items,
                                       count);
}

CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count)
{
    CURDI_RANGE("curd_download_batch");
    curdi_prepared prepared;
    curd_status status = curdi_validate_downloads(
        device, &prepared, "curd_download_batch", items, count);
    if (status != CURD_OK)
        return status;
    return transfer_run(device, &prepared);
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
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_resident_use_begin(device, what, &buffer.id, 1, &use);
    if (status != CURD_OK)
        return status;
    if (whole) {
        offset = 0;
        byte_len = use.byte_len;
    }
    CURDI_TRY(status,
              curdi_checked_range(offset, byte_len, use.byte_len, what),
              unmark);
    if (byte_len == 0)
        goto unmark;
    CURDI_TRY(status, curdi_core_device_enter(device), unmark);
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.fill_ops = 1;
    counts.fill_bytes = byte_len;
    counts.fences = 1;
    CURDI_TRY(status, curdi_transfer_counts_check(device, &counts, what),
              leave);
    CURDI_TRY(status,
              curdi_run_stream_for(device, use.async_pending, &stream,
                                   &pooled),
              release_stream);
    /* offset + byte_len <= the buffer's size: checked above. */
    cu_result = curdi_driver_note(driver->cuMemsetD8Async(
        (curdi_cu_deviceptr)(use.device_ptr + offset), value, byte_len,
        stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        CURDI_TRY(status,
                  curdi_driver_fail((int)cu_result, "cuMemsetD8Async",
                                    CURDI_DRIVER_FIX),
                  release_stream);
    status = curdi_run_fence(device, stream, CURDI_DRIVER_FIX);
    if (status != CURD_OK)
        curdi_run_stream_drain(driver, stream);
    else
        curdi_transfer_counts_add(device, &counts);
release_stream:
    if (pooled && stream != NULL)
        curdi_streams_release(device, stream);
leave:
    curdi_core_device_leave(device);
unmark:
    curdi_resident_use_end(device, &use, 1);
    return status;
}

CURD_API curd_status curd_buffer_fill(curd_device *device, curd_buffer buffer,
                                      size_t offset, size_t byte_len,
                                      uint8_t value)
{
    CURDI_RANGE("curd_buffer_fill");
    return fill(device, "curd_buffer_fill", buffer, offset, byte_len,
                      false, value);
}

CURD_API curd_status curd_buffer_clear(curd_device *device, curd_buffer buffer)
{
    CURDI_RANGE("curd_buffer_clear");
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
    CURDI_RANGE("curd_buffer_upload_async");
    const char *what = "curd_buffer_upload_async";
    const curdi_driver *driver;
    curdi_prepared prepared;
    curdi_transfer_counts counts;
    curdi_cu_result cu_result;
    uintptr_t range_key;
    curd_status status;
    CURDI_TRY(status, curdi_core_device_check(device, what), out);
    CURDI_TRY(status, curdi_validate_begin(&prepared, what, true, false, 1),
              out);
    CURDI_TRY(status,
              curdi_validate_item(&prepared, 0, buffer.id, offset, byte_len,
                                  (unsigned char *)pinned_src, SIZE_MAX),
              release);
    CURDI_TRY(status, curdi_validate_end(device, &prepared), release);
    if (byte_len == 0)
        goto release;
    CURDI_TRY(status, curdi_core_device_enter(device), release);
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.h2d_bytes = byte_len;
    counts.copy_ops = 1;
    CURDI_TRY(status, curdi_transfer_counts_check(device, &counts, what),
              leave);
    /* Space for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    CURDI_TRY(status,
              curdi_upload_marks_reserve(device, pinned_src, byte_len, what,
                                         &range_key),
              leave);
    CURDI_TRY(status,
              curdi_waits_stream_order_after_waits(
                  device, device->upload_stream, true),
              cancel);
    /* offset + byte_len <= the buffer's size: checked in curdi_validate_end. */
    cu_result = curdi_driver_note(driver->cuMemcpyHtoDAsync(
        (curdi_cu_deviceptr)(prepared.uses[0].device_ptr + offset), pinned_src,
        byte_len, device->upload_stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        CURDI_TRY(status,
                  curdi_driver_fail((int)cu_result, "cuMemcpyHtoDAsync",
                                    CURDI_DRIVER_FIX),
                  cancel);
    /* The use becomes asynchronous before it is listed, so a concurrent
     * curd_device_sync_uploads that ends it finds it so. */
    curdi_resident_async_begin(device, buffer.id);
    prepared.marked = false; /* now ended by curd_device_sync_uploads */
    curdi_upload_marks_commit(device, buffer.id, range_key);
    curdi_transfer_counts_add(device, &counts);
    curdi_core_device_leave(device);
    curdi_validate_prepared_release(device, &prepared);
    return CURD_OK;
cancel:
    curdi_upload_marks_cancel(device, range_key);
leave:
    curdi_core_device_leave(device);
release:
    curdi_validate_prepared_release(device, &prepared);
out:
    return status;
}

CURD_API curd_status curd_device_sync_uploads(curd_device *device)
{
    CURDI_RANGE("curd_device_sync_uploads");
    const char *what = "curd_device_sync_uploads";
    curdi_transfer_counts counts;
    uint64_t serial_limit;
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    /* Nothing enqueued: nothing to wait for, no fence. */
    if (!curdi_upload_marks_pending(device, &serial_limit))
        return CURD_OK;

    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    memset(&counts, 0, sizeof counts);
    counts.fences = 1;
    CURDI_TRY(status, curdi_transfer_counts_check(device, &counts, what),
              leave);
    CURDI_TRY(status,
              curdi_run_fence(device, device->upload_stream,
                              "the uploads stay pending (their buffers"
                              " cannot be freed until a later sync"
                              " succeeds); check the device with"
                              " nvidia-smi"),
              leave);
    curdi_upload_marks_complete(device, serial_limit);
    curdi_transfer_counts_add(device, &counts);
leave:
    curdi_core_device_leave(device);
    return status;
}
