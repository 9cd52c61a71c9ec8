/* transfer.c - transfers: the public entry points and what they share.
 *
 * Read top to bottom: opening and closing the room, the counters, the
 * engine's driver side (lib/xfer.h runs plans through it), validation,
 * then the public synchronous transfers and batches, fills and
 * asynchronous uploads. Registrations and the room's shared state are in
 * lib/hostreg.c, the copy team in lib/copyteam.c.
 *
 * How a synchronous transfer or batch runs:
 *  1. Validate every argument and every item; resolve every handle and
 *     mark it in use (lib/resident.h), so no buffer can be freed while its
 *     bytes move; check every range with the checked layer. Any failure
 *     here returns before a driver call: nothing moved, nothing counted.
 *  2. Plan: fuse items into spans (lib/copyplan.c), decide per span
 *     between direct DMA (registered host memory) and staging (lib/xfer.c).
 *  3. Take one pooled non-blocking stream (or the upload stream when a
 *     buffer has asynchronous uploads pending, so the new work is ordered
 *     after them), staging slots from the pinned pool and, for a stream
 *     longer than one chunk, one event per slot.
 *  4. Run the engine: host copies into (or out of) staging overlap the
 *     DMAs of neighbouring chunks; one cuStreamSynchronize ends it (the
 *     fence).
 *  5. Count, on success only; give back slots, events, stream, marks. */
#include "transfer.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "copyteam.h"
#include "device.h"
#include "driver.h"
#include "hostreg.h"
#include "resident.h"
#include "staging.h"
#include "status.h"
#include "xfer.h"

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

curd_status curdi_transfer_open(curd_device *device)
{
    curd_status status = curdi_hostreg_open(device);
    if (status != CURD_OK)
        return status;
    atomic_store(&device->h2d_bytes, 0u);
    atomic_store(&device->d2h_bytes, 0u);
    atomic_store(&device->copy_ops, 0u);
    atomic_store(&device->fences, 0u);
    atomic_store(&device->fill_ops, 0u);
    atomic_store(&device->fill_bytes, 0u);
    atomic_store(&device->accounting_repairs, 0u);
    return CURD_OK;
}

void curdi_transfer_close(curd_device *device)
{
    const curdi_driver *driver;
    if (device == NULL || device->host_registry == NULL)
        return;
    driver = curdi_driver_get();
    /* device.c has synchronised the context already; this keeps the
     * room's own promise should it be called alone. Errors have nowhere
     * to go at close. */
    if (driver != NULL && curdi_driver_usable()
        && device->upload_stream != NULL)
        (void)curdi_driver_note(
            driver->cuStreamSynchronize(device->upload_stream));
    curdi_hostreg_close(device);
}

/* ------------------------------------------------------------------------
 * Counters: checked before the work, added after it succeeded.
 * ---------------------------------------------------------------------- */

typedef struct curdi_counts {
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t copy_ops;
    uint64_t fences;
    uint64_t fill_ops;
    uint64_t fill_bytes;
} curdi_counts;

static curd_status curdi_counts_check(curd_device *device,
                                      const curdi_counts *counts,
                                      const char *what)
{
    struct {
        _Atomic uint64_t *counter;
        uint64_t amount;
        const char *name;
    } checks[] = {
        {&device->h2d_bytes, counts->h2d_bytes, "h2d_bytes"},
        {&device->d2h_bytes, counts->d2h_bytes, "d2h_bytes"},
        {&device->copy_ops, counts->copy_ops, "copy_ops"},
        {&device->fences, counts->fences, "fences"},
        {&device->fill_ops, counts->fill_ops, "fill_ops"},
        {&device->fill_bytes, counts->fill_bytes, "fill_bytes"},
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

static void curdi_counts_add(curd_device *device, const curdi_counts *counts)
{
    _Atomic uint64_t *counters[] = {&device->h2d_bytes, &device->d2h_bytes,
                                    &device->copy_ops,  &device->fences,
                                    &device->fill_ops,  &device->fill_bytes};
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
    curdi_cu_stream stream;
    curdi_cu_event events[3];
} curdi_gpu_ops;

static curd_status curdi_gpu_copy(void *context, bool upload,
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

static curd_status curdi_gpu_mark(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result = curdi_driver_note(
        gpu->driver->cuEventRecord(gpu->events[slot], gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventRecord",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status curdi_gpu_wait(void *context, unsigned slot)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result =
        curdi_driver_note(gpu->driver->cuEventSynchronize(gpu->events[slot]));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuEventSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

static curd_status curdi_gpu_finish(void *context)
{
    curdi_gpu_ops *gpu = context;
    curdi_cu_result cu_result =
        curdi_driver_note(gpu->driver->cuStreamSynchronize(gpu->stream));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)cu_result, "cuStreamSynchronize",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

/* The stream a transfer runs on: the upload stream when one of its buffers
 * has asynchronous uploads pending (so the new work is ordered after
 * them), else a pooled non-blocking stream. */
static curd_status curdi_stream_for(curd_device *device, bool after_uploads,
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
static void curdi_stream_drain(const curdi_driver *driver,
                               curdi_cu_stream stream)
{
    if (stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(driver->cuStreamSynchronize(stream));
}

/* Runs validated items whose buffers the caller holds marked: the device
 * entered, registrations marked, a plan, a stream, staging, the engine,
 * the counters. */
static curd_status curdi_transfer_run(curd_device *device, const char *what,
                                      bool upload, curdi_xfer_item *items,
                                      size_t count,
                                      const curdi_resident_use *uses)
{
    const curdi_driver *driver;
    curdi_xfer_plan plan;
    curdi_gpu_ops gpu;
    curdi_counts counts;
    curdi_xfer_result result;
    curdi_xfer_ops ops = {curdi_gpu_copy, curdi_gpu_mark, curdi_gpu_wait,
                          curdi_gpu_finish, &gpu};
    unsigned char *slots[3] = {NULL, NULL, NULL};
    curdi_staging staging[3];
    uint64_t chunk_bytes = 0;
    uint64_t chunk_count = 0;
    unsigned slot_count = 0;
    unsigned slots_taken = 0;
    unsigned event_count = 0;
    bool after_uploads = false;
    bool pooled_stream = false;
    bool events_taken = false;
    curd_status status;

    memset(&plan, 0, sizeof plan);
    memset(&gpu, 0, sizeof gpu);
    for (size_t index = 0; index < count; index++)
        after_uploads = after_uploads || uses[index].async_pending;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    gpu.driver = driver;
    curdi_hostreg_use_items(device, items, count);

    status = curdi_xfer_plan_build(items, count, &plan);
    if (status != CURD_OK)
        goto done;
    if (plan.stream_bytes > 0) {
        chunk_bytes = curdi_xfer_chunk_bytes(plan.stream_bytes);
        chunk_count = (plan.stream_bytes + chunk_bytes - 1u) / chunk_bytes;
        slot_count = curdi_xfer_slot_count(chunk_count);
        event_count = chunk_count > 1u ? slot_count : 0u;
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
    status = curdi_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto done;

    status = curdi_stream_for(device, after_uploads, &gpu.stream,
                              &pooled_stream);
    if (status != CURD_OK)
        goto done;
    /* The staging areas come through lib/staging.h like every staged
     * transfer's; the engine does its own copies into them, since they go
     * piece by piece and in parallel. */
    for (; slots_taken < slot_count; slots_taken++) {
        status = curdi_staging_acquire(device->pinned_pool, (size_t)chunk_bytes,
                                       &staging[slots_taken]);
        if (status != CURD_OK)
            goto done;
        slots[slots_taken] = staging[slots_taken].host;
    }
    if (event_count > 0) {
        status = curdi_hostreg_events_acquire(device, gpu.events, event_count);
        if (status != CURD_OK)
            goto done;
        events_taken = true;
    }

    status = curdi_xfer_execute(
        &plan, items, upload, slots, slot_count, chunk_bytes, &ops,
        plan.stream_bytes >= CURDI_COPY_PARALLEL_MIN
            ? curdi_hostreg_team(device)
            : NULL,
        &result);
    if (status != CURD_OK)
        curdi_stream_drain(driver, gpu.stream);

done:
    if (events_taken)
        curdi_hostreg_events_release(device, gpu.events, event_count);
    for (unsigned index = 0; index < slots_taken; index++)
        (void)curdi_staging_release(&staging[index]);
    if (pooled_stream && gpu.stream != NULL)
        curdi_stream_release(device, gpu.stream);
    curdi_hostreg_unuse_items(device, items, count);
    curdi_xfer_plan_free(&plan);
    if (status == CURD_OK) {
        memset(&counts, 0, sizeof counts);
        if (upload)
            counts.h2d_bytes = result.dma_bytes;
        else
            counts.d2h_bytes = result.dma_bytes;
        counts.copy_ops = result.dma_ops;
        counts.fences = result.fences;
        curdi_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}

/* ------------------------------------------------------------------------
 * Validation shared by every transfer entry point
 * ---------------------------------------------------------------------- */

/* A call's items as the caller gave them, in one shape for both
 * directions (uploads have no capacity: SIZE_MAX). */
typedef struct curdi_call_item {
    uint64_t buffer_id;
    size_t offset;
    size_t byte_len;
    unsigned char *host;
    size_t capacity;
} curdi_call_item;

/* The validated items of a call, their buffers marked in use. One item
 * lives inline so single transfers allocate nothing. */
typedef struct curdi_prepared {
    size_t count;
    uint64_t total_bytes;
    curdi_xfer_item *items;
    curdi_resident_use *uses;
    uint64_t *ids;
    curdi_xfer_item one_item;
    curdi_resident_use one_use;
    uint64_t one_id;
    bool marked;
} curdi_prepared;

static void curdi_prepared_release(curd_device *device,
                                   curdi_prepared *prepared)
{
    if (prepared->marked)
        curdi_resident_use_end(device, prepared->uses, prepared->count);
    prepared->marked = false;
    if (prepared->items != &prepared->one_item) {
        free(prepared->items);
        free(prepared->uses);
        free(prepared->ids);
    }
    prepared->items = NULL;
    prepared->uses = NULL;
    prepared->ids = NULL;
}

/* "<what>" for a single transfer, "<what> item <i>" in a batch. Formatted
 * only on the way to an error message: a label per item would cost a
 * batch more than its bytes. */
static const char *curdi_item_what(const char *what, bool batch, size_t index,
                                   char *scratch, size_t scratch_len)
{
    if (!batch)
        return what;
    snprintf(scratch, scratch_len, "%s item %zu", what, index);
    return scratch;
}

typedef struct curdi_host_span {
    uintptr_t start;
    uintptr_t end;
    size_t item;
} curdi_host_span;

static int curdi_host_span_compare(const void *left, const void *right)
{
    const curdi_host_span *a = left;
    const curdi_host_span *b = right;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item ? 1 : 0;
}

/* Downloads into overlapping destinations would race (the copy team
 * writes them at once) and have no meaningful result: refused. */
static curd_status curdi_check_destinations(const curdi_call_item *calls,
                                            size_t count, const char *what)
{
    curdi_host_span *spans = NULL;
    size_t used = 0;
    curd_status status = CURD_OK;
    if (count < 2)
        return CURD_OK;
    status = curdi_xfer_alloc(count, sizeof *spans, false, (void **)&spans);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        if (calls[index].byte_len == 0)
            continue;
        spans[used].start = (uintptr_t)calls[index].host;
        /* Checked not to wrap by the caller. */
        spans[used].end = (uintptr_t)calls[index].host + calls[index].byte_len;
        spans[used].item = index;
        used++;
    }
    qsort(spans, used, sizeof *spans, curdi_host_span_compare);
    for (size_t index = 1; index < used; index++) {
        if (spans[index].start < spans[index - 1].end) {
            status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                                "%s: the destinations of items %zu and %zu"
                                " overlap in host memory; nothing was"
                                " moved. Fix: give every item its own"
                                " destination bytes.",
                                what, spans[index - 1].item,
                                spans[index].item);
            break;
        }
    }
    free(spans);
    return status;
}

/* Validates a call's items and marks their buffers in use: argument
 * checks, then handles (all or none), then ranges. On an error nothing
 * is left marked. */
static curd_status curdi_prepare(curd_device *device, const char *what,
                                 bool upload, bool batch,
                                 const curdi_call_item *calls, size_t count,
                                 curdi_prepared *prepared)
{
    char scratch[160];
    curd_status status;
    memset(prepared, 0, sizeof *prepared);
    prepared->count = count;

    for (size_t index = 0; index < count; index++) {
        const curdi_call_item *call = &calls[index];
        uintptr_t end;
        if (call->byte_len != 0 && call->host == NULL)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: %s is NULL for %zu bytes; nothing was"
                              " moved. Fix: pass caller memory of at least"
                              " that many bytes.",
                              curdi_item_what(what, batch, index, scratch,
                                              sizeof scratch),
                              upload ? "src" : "dst", call->byte_len);
        if (call->byte_len > call->capacity)
            return curdi_fail(CURD_E_RANGE,
                              "%s: %zu bytes asked for, but dst_capacity is"
                              " only %zu; nothing was moved. Fix: pass a"
                              " destination of at least byte_len bytes, or"
                              " ask for fewer.",
                              curdi_item_what(what, batch, index, scratch,
                                              sizeof scratch),
                              call->byte_len, call->capacity);
        if (__builtin_add_overflow((uintptr_t)call->host, call->byte_len,
                                   &end))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: host address %p plus %zu bytes passes the"
                              " end of the address space; nothing was"
                              " moved. Fix: pass a valid host range.",
                              curdi_item_what(what, batch, index, scratch,
                                              sizeof scratch),
                              (void *)call->host, call->byte_len);
        if (!curdi_u64_add(prepared->total_bytes, call->byte_len,
                           &prepared->total_bytes))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the batch's lengths add up past 2^64-1"
                              " bytes. Fix: split the batch.",
                              what);
    }
    if (!upload) {
        status = curdi_check_destinations(calls, count, what);
        if (status != CURD_OK)
            return status;
    }

    if (count == 1) {
        prepared->items = &prepared->one_item;
        prepared->uses = &prepared->one_use;
        prepared->ids = &prepared->one_id;
    } else {
        status = curdi_xfer_alloc(count, sizeof *prepared->items, true,
                                  (void **)&prepared->items);
        if (status == CURD_OK)
            status = curdi_xfer_alloc(count, sizeof *prepared->uses, false,
                                      (void **)&prepared->uses);
        if (status == CURD_OK)
            status = curdi_xfer_alloc(count, sizeof *prepared->ids, false,
                                      (void **)&prepared->ids);
        if (status != CURD_OK) {
            curdi_prepared_release(device, prepared);
            return status;
        }
    }
    for (size_t index = 0; index < count; index++)
        prepared->ids[index] = calls[index].buffer_id;
    status = curdi_resident_use_begin(device, what, prepared->ids, count,
                                      prepared->uses);
    if (status != CURD_OK) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    prepared->marked = true;

    for (size_t index = 0; index < count; index++) {
        const curdi_call_item *call = &calls[index];
        curdi_xfer_item *item = &prepared->items[index];
        size_t buffer_len = prepared->uses[index].byte_len;
        /* offset + byte_len <= buffer_len without overflow: exactly when
         * curdi_range_check passes, which words the error otherwise. */
        if (call->offset > buffer_len
            || call->byte_len > buffer_len - call->offset) {
            status = curdi_range_check(call->offset, call->byte_len,
                                       buffer_len,
                                       curdi_item_what(what, batch, index,
                                                       scratch,
                                                       sizeof scratch));
            curdi_prepared_release(device, prepared);
            return status;
        }
        item->buffer_key = call->buffer_id;
        item->device_base = prepared->uses[index].device_ptr;
        item->offset = call->offset;
        item->byte_len = call->byte_len;
        item->host = call->host;
        item->registered_key = 0;
    }
    return CURD_OK;
}

curd_status curdi_transfer_check_device(curd_device *device,
                                        const char *what)
{
    if (device == NULL || device->host_registry == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device is NULL. Fix: pass a device from"
                          " curd_device_open().",
                          what);
    if (curdi_driver_forked())
        return curdi_fail(CURD_E_UNSUPPORTED, "%s: %s.", what,
                          curdi_fork_message);
    return CURD_OK;
}

/* One call from start to end: validate, run (unless nothing moves),
 * release. whole: byte_len must equal the buffer's size. */
static curd_status curdi_transfer_call(curd_device *device, const char *what,
                                       bool upload, bool batch, bool whole,
                                       const curdi_call_item *calls,
                                       size_t count)
{
    curdi_prepared prepared;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare(device, what, upload, batch, calls, count,
                           &prepared);
    if (status != CURD_OK)
        return status;
    if (whole && prepared.uses[0].byte_len != calls[0].byte_len) {
        status = curdi_fail(CURD_E_RANGE,
                            "%s: byte_len is %zu but the buffer holds %zu"
                            " bytes; nothing was moved. Fix: pass exactly"
                            " the buffer's size, or use the _at/_range form"
                            " for part of it.",
                            what, calls[0].byte_len,
                            prepared.uses[0].byte_len);
    } else if (prepared.total_bytes > 0) {
        status = curdi_transfer_run(device, what, upload, prepared.items,
                                    count, prepared.uses);
    }
    curdi_prepared_release(device, &prepared);
    return status;
}

/* ------------------------------------------------------------------------
 * Public entry points: synchronous transfers and batches
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len)
{
    /* The library never writes through src; the item type is shared with
     * downloads, hence the cast. */
    curdi_call_item call = {buffer.id, 0, byte_len, (unsigned char *)src,
                            SIZE_MAX};
    return curdi_transfer_call(device, "curd_buffer_upload", true, false, true,
                               &call, 1);
}

CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len)
{
    curdi_call_item call = {buffer.id, offset, byte_len, (unsigned char *)src,
                            SIZE_MAX};
    return curdi_transfer_call(device, "curd_buffer_upload_at", true, false,
                               false, &call, 1);
}

CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len)
{
    curdi_call_item call = {buffer.id, 0, byte_len, dst, byte_len};
    return curdi_transfer_call(device, "curd_buffer_download", false, false,
                               true, &call, 1);
}

CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity)
{
    curdi_call_item call = {buffer.id, offset, byte_len, dst, dst_capacity};
    return curdi_transfer_call(device, "curd_buffer_download_range", false,
                               false, false, &call, 1);
}

/* Batches copy the caller's items into the shared shape first. */
static curd_status curdi_batch_calls(const char *what, const void *items,
                                     size_t count, curdi_call_item **out)
{
    if (items == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: items is NULL but count is %zu. Fix: pass an"
                          " array of count items, or count 0.",
                          what, count);
    return curdi_xfer_alloc(count, sizeof **out, false, (void **)out);
}

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count)
{
    const char *what = "curd_upload_batch";
    curdi_call_item *calls = NULL;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_batch_calls(what, items, count, &calls);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        calls[index].buffer_id = items[index].buffer.id;
        calls[index].offset = items[index].offset;
        calls[index].byte_len = items[index].byte_len;
        calls[index].host = (unsigned char *)items[index].src;
        calls[index].capacity = SIZE_MAX;
    }
    status = curdi_transfer_call(device, what, true, true, false, calls, count);
    free(calls);
    return status;
}

CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count)
{
    const char *what = "curd_download_batch";
    curdi_call_item *calls = NULL;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_batch_calls(what, items, count, &calls);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < count; index++) {
        calls[index].buffer_id = items[index].buffer.id;
        calls[index].offset = items[index].offset;
        calls[index].byte_len = items[index].byte_len;
        calls[index].host = items[index].dst;
        calls[index].capacity = items[index].dst_capacity;
    }
    status =
        curdi_transfer_call(device, what, false, true, false, calls, count);
    free(calls);
    return status;
}

/* ------------------------------------------------------------------------
 * Public entry points: device-side fills
 * ---------------------------------------------------------------------- */

static curd_status curdi_fill(curd_device *device, const char *what,
                              curd_buffer buffer, size_t offset,
                              size_t byte_len, bool whole, uint8_t value)
{
    const curdi_driver *driver;
    curdi_resident_use use;
    curdi_counts counts;
    curdi_cu_stream stream = NULL;
    curdi_cu_result cu_result;
    bool pooled = false;
    curd_status status = curdi_transfer_check_device(device, what);
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
    status = curdi_counts_check(device, &counts, what);
    if (status == CURD_OK)
        status = curdi_stream_for(device, use.async_pending, &stream, &pooled);
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
        cu_result = curdi_driver_note(driver->cuStreamSynchronize(stream));
        if (cu_result != CURDI_CUDA_SUCCESS) {
            status = curdi_fail_driver((int)cu_result, "cuStreamSynchronize",
                                       CURDI_DRIVER_FIX);
            curdi_stream_drain(driver, stream);
        }
    }
    if (pooled && stream != NULL)
        curdi_stream_release(device, stream);
    if (status == CURD_OK)
        curdi_counts_add(device, &counts);
    curdi_device_leave(device);
    curdi_resident_use_end(device, &use, 1);
    return status;
}

CURD_API curd_status curd_buffer_fill(curd_device *device, curd_buffer buffer,
                                      size_t offset, size_t byte_len,
                                      uint8_t value)
{
    return curdi_fill(device, "curd_buffer_fill", buffer, offset, byte_len,
                      false, value);
}

CURD_API curd_status curd_buffer_clear(curd_device *device, curd_buffer buffer)
{
    return curdi_fill(device, "curd_buffer_clear", buffer, 0, 0, true, 0);
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
    curdi_counts counts;
    curdi_cu_result cu_result;
    uintptr_t range_key;
    curdi_call_item call = {buffer.id, offset, byte_len,
                            (unsigned char *)pinned_src, SIZE_MAX};
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare(device, what, true, false, &call, 1, &prepared);
    if (status != CURD_OK)
        return status;
    if (byte_len == 0) {
        curdi_prepared_release(device, &prepared);
        return CURD_OK;
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
    status = curdi_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto fail;

    /* Room for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    status = curdi_hostreg_async_reserve(device, pinned_src, byte_len, what,
                                         &range_key);
    if (status != CURD_OK)
        goto fail;

    /* offset + byte_len <= the buffer's size: checked in curdi_prepare. */
    cu_result = curdi_driver_note(driver->cuMemcpyHtoDAsync(
        (curdi_cu_deviceptr)(prepared.uses[0].device_ptr + offset), pinned_src,
        byte_len, device->upload_stream));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)cu_result, "cuMemcpyHtoDAsync",
                                   CURDI_DRIVER_FIX);
        curdi_hostreg_async_cancel(device, range_key);
        goto fail;
    }
    /* The use becomes asynchronous before it is listed, so a concurrent
     * curd_device_sync_uploads that ends it finds it so. */
    curdi_resident_async_begin(device, buffer.id);
    prepared.marked = false; /* now ended by curd_device_sync_uploads */
    curdi_hostreg_async_commit(device, buffer.id, range_key);
    curdi_counts_add(device, &counts);
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
    const curdi_driver *driver;
    curdi_counts counts;
    curdi_cu_result cu_result;
    uint64_t serial_limit;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    /* Nothing enqueued: nothing to wait for, no fence. */
    if (!curdi_hostreg_async_pending(device, &serial_limit))
        return CURD_OK;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    memset(&counts, 0, sizeof counts);
    counts.fences = 1;
    status = curdi_counts_check(device, &counts, what);
    if (status == CURD_OK) {
        cu_result = curdi_driver_note(
            driver->cuStreamSynchronize(device->upload_stream));
        if (cu_result != CURDI_CUDA_SUCCESS)
            status = curdi_fail_driver(
                (int)cu_result, "cuStreamSynchronize",
                "the uploads stay pending (their buffers cannot be freed"
                " until a later sync succeeds); check the device with"
                " nvidia-smi");
    }
    if (status == CURD_OK) {
        curdi_hostreg_async_complete(device, serial_limit);
        curdi_counts_add(device, &counts);
    }
    curdi_device_leave(device);
    return status;
}
