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
#include "copyplan.h"
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
    curdi_cu_event events[CURDI_XFER_SLOTS_MAX];
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
 * entered, registrations marked, a plan, a stream (the upload stream when
 * after_uploads: a buffer has asynchronous uploads pending), staging, the
 * engine, the counters. */
static curd_status curdi_transfer_run(curd_device *device, const char *what,
                                      bool upload, curdi_xfer_item *items,
                                      size_t count, bool after_uploads)
{
    const curdi_driver *driver;
    curdi_xfer_plan plan;
    curdi_gpu_ops gpu;
    curdi_counts counts;
    curdi_xfer_result result;
    curdi_xfer_ops ops = {curdi_gpu_copy, curdi_gpu_mark, curdi_gpu_wait,
                          curdi_gpu_finish, &gpu};
    unsigned char *slots[CURDI_XFER_SLOTS_MAX] = {NULL};
    curdi_staging staging[CURDI_XFER_SLOTS_MAX];
    uint64_t chunk_bytes = 0;
    uint64_t chunk_count = 0;
    unsigned slot_count = 0;
    unsigned slots_taken = 0;
    unsigned event_count = 0;
    bool pooled_stream = false;
    bool events_taken = false;
    curd_status status;

    memset(&plan, 0, sizeof plan);
    memset(&gpu, 0, sizeof gpu);

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

/* The validated items of a call, their buffers marked in use. One item
 * lives inline so single transfers allocate nothing; a batch's three
 * arrays share one block. Built in three steps: curdi_prepare_begin,
 * curdi_prepare_item for each item, curdi_prepare_end; always released
 * with curdi_prepared_release. */
typedef struct curdi_prepared {
    const char *what; /* the public call, for messages */
    bool upload;
    bool batch;       /* items are named "<what> item <i>" */
    size_t count;
    uint64_t total_bytes;
    curdi_xfer_item *items;
    curdi_resident_use *uses;
    uint64_t *ids;
    /* Downloads: whether the destinations seen so far come in address
     * order without overlapping, and where the last one ends. */
    bool ascending;
    uintptr_t previous_end;
    bool after_uploads; /* a buffer has asynchronous uploads pending */
    bool marked;
    /* Whether the items so far continue one another: all non-empty, of
     * one buffer, each starting where the one before ends on the device
     * and in host memory; and where the last one ends on each side
     * (wrapping: see curdi_transfer_chain). */
    bool chain;
    size_t chain_offset_end;
    uintptr_t chain_host_end;
    curdi_xfer_item one_item;
    curdi_resident_use one_use;
    uint64_t one_id;
} curdi_prepared;

static void curdi_prepared_release(curd_device *device,
                                   curdi_prepared *prepared)
{
    if (prepared->marked)
        curdi_resident_use_end(device, prepared->uses, prepared->count);
    prepared->marked = false;
    /* One block for all three arrays, starting with the items. */
    if (prepared->items != &prepared->one_item)
        free(prepared->items);
    prepared->items = NULL;
    prepared->uses = NULL;
    prepared->ids = NULL;
}

/* "<what>" for a single transfer, "<what> item <i>" in a batch. Formatted
 * only on the way to an error message: a label per item would cost a
 * batch more than its bytes. */
static const char *curdi_item_what(const curdi_prepared *prepared,
                                   size_t index, char *scratch,
                                   size_t scratch_len)
{
    if (!prepared->batch)
        return prepared->what;
    snprintf(scratch, scratch_len, "%s item %zu", prepared->what, index);
    return scratch;
}

static curd_status curdi_prepare_begin(curdi_prepared *prepared,
                                       const char *what, bool upload,
                                       bool batch, size_t count)
{
    curd_status status;
    memset(prepared, 0, sizeof *prepared);
    prepared->what = what;
    prepared->upload = upload;
    prepared->batch = batch;
    prepared->count = count;
    prepared->ascending = true;
    if (count == 1) {
        prepared->items = &prepared->one_item;
        prepared->uses = &prepared->one_use;
        prepared->ids = &prepared->one_id;
        return CURD_OK;
    }
    /* One block: every field of all three is 64-bit aligned. */
    status = curdi_xfer_alloc(count,
                              sizeof *prepared->items + sizeof *prepared->uses
                                  + sizeof *prepared->ids,
                              false, (void **)&prepared->items);
    if (status != CURD_OK)
        return status;
    prepared->uses = (curdi_resident_use *)(void *)(prepared->items + count);
    prepared->ids = (uint64_t *)(void *)(prepared->uses + count);
    return CURD_OK;
}

/* The sentence for item `index`, which curdi_prepare_item found bad. Out
 * of line: the checks themselves run for every item of every batch. */
static curd_status __attribute__((noinline, cold))
curdi_prepare_item_fail(const curdi_prepared *prepared, size_t index,
                        size_t byte_len, const unsigned char *host,
                        size_t capacity)
{
    char scratch[160];
    const char *what = curdi_item_what(prepared, index, scratch, sizeof scratch);
    uintptr_t end;
    if (byte_len != 0 && host == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s is NULL for %zu bytes; nothing was"
                          " moved. Fix: pass caller memory of at least"
                          " that many bytes.",
                          what, prepared->upload ? "src" : "dst", byte_len);
    if (byte_len > capacity)
        return curdi_fail(CURD_E_RANGE,
                          "%s: %zu bytes asked for, but dst_capacity is"
                          " only %zu; nothing was moved. Fix: pass a"
                          " destination of at least byte_len bytes, or"
                          " ask for fewer.",
                          what, byte_len, capacity);
    if (__builtin_add_overflow((uintptr_t)host, byte_len, &end))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: host address %p plus %zu bytes passes the"
                          " end of the address space; nothing was"
                          " moved. Fix: pass a valid host range.",
                          what, (const void *)host, byte_len);
    return curdi_fail(CURD_E_OVERFLOW,
                      "%s: the batch's lengths add up past 2^64-1"
                      " bytes. Fix: split the batch.",
                      prepared->what);
}

/* Checks item `index`'s arguments (everything but its handle and range,
 * which need the resident table) and records it. */
static inline curd_status curdi_prepare_item(curdi_prepared *prepared,
                                             size_t index, uint64_t buffer_id,
                                             size_t offset, size_t byte_len,
                                             unsigned char *host,
                                             size_t capacity)
{
    curdi_xfer_item *item = &prepared->items[index];
    uintptr_t end;
    if ((byte_len != 0 && host == NULL) || byte_len > capacity
        || __builtin_add_overflow((uintptr_t)host, byte_len, &end)
        || byte_len > UINT64_MAX - prepared->total_bytes)
        return curdi_prepare_item_fail(prepared, index, byte_len, host,
                                       capacity);
    prepared->total_bytes += byte_len;
    if (byte_len != 0) {
        prepared->ascending = prepared->ascending
                              && (uintptr_t)host >= prepared->previous_end;
        prepared->previous_end = end;
    }
    prepared->chain = byte_len != 0
                      && (index == 0
                          || (prepared->chain && buffer_id == prepared->ids[0]
                              && offset == prepared->chain_offset_end
                              && (uintptr_t)host == prepared->chain_host_end));
    prepared->chain_offset_end = offset + byte_len;
    prepared->chain_host_end = end;
    prepared->ids[index] = buffer_id;
    item->buffer_key = buffer_id;
    item->offset = offset;
    item->byte_len = byte_len;
    item->host = host;
    item->registered_key = 0;
    return CURD_OK;
}

/* Downloads into overlapping destinations would race (the copy team
 * writes them at once) and have no meaningful result: refused.
 * Destinations usually come in address order, each starting at or after
 * the end of the one before, which proves that none overlap without
 * sorting (curdi_prepare_item watched for it); otherwise sort, which also
 * finds the pair to name. */
static curd_status curdi_check_destinations(const curdi_prepared *prepared)
{
    const curdi_xfer_item *items = prepared->items;
    curdi_order_entry *spans = NULL;
    size_t used = 0;
    curd_status status = CURD_OK;
    if (prepared->count < 2 || prepared->ascending)
        return CURD_OK;
    /* The entries and the sort's scratch: 2 * count entries of 24 bytes
     * take less than the items' own block (88 bytes each). */
    status = curdi_xfer_alloc(2u * prepared->count, sizeof *spans, false,
                              (void **)&spans);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < prepared->count; index++) {
        if (items[index].byte_len == 0)
            continue;
        spans[used].major = (uint64_t)(uintptr_t)items[index].host;
        spans[used].minor = 0;
        spans[used].index = index;
        used++;
    }
    curdi_order_sort(spans, spans + prepared->count, used);
    for (size_t index = 1; index < used; index++) {
        const curdi_xfer_item *before = &items[spans[index - 1].index];
        /* host + byte_len was checked not to wrap by curdi_prepare_item. */
        if ((uintptr_t)items[spans[index].index].host
            < (uintptr_t)before->host + (uintptr_t)before->byte_len) {
            status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                                "%s: the destinations of items %zu and %zu"
                                " overlap in host memory; nothing was"
                                " moved. Fix: give every item its own"
                                " destination bytes.",
                                prepared->what, spans[index - 1].index,
                                spans[index].index);
            break;
        }
    }
    free(spans);
    return status;
}

/* After every item's arguments: destinations, then handles (all marked
 * in use, or none), then ranges. On an error, curdi_prepared_release
 * (which the caller calls either way) ends whatever marks were taken. */
static curd_status curdi_prepare_end(curd_device *device,
                                     curdi_prepared *prepared)
{
    char scratch[160];
    curd_status status;
    if (!prepared->upload) {
        status = curdi_check_destinations(prepared);
        if (status != CURD_OK)
            return status;
    }
    status = curdi_resident_use_begin(device, prepared->what, prepared->ids,
                                      prepared->count, prepared->uses);
    if (status != CURD_OK)
        return status;
    prepared->marked = true;

    for (size_t index = 0; index < prepared->count; index++) {
        curdi_xfer_item *item = &prepared->items[index];
        const curdi_resident_use *use = &prepared->uses[index];
        /* offset + byte_len <= byte_len of the buffer without overflow:
         * exactly when curdi_range_check passes, which words the error
         * otherwise. */
        if (item->offset > use->byte_len
            || item->byte_len > use->byte_len - item->offset) {
            return curdi_range_check(
                item->offset, item->byte_len, use->byte_len,
                curdi_item_what(prepared, index, scratch, sizeof scratch));
        }
        item->device_base = use->device_ptr;
        prepared->after_uploads = prepared->after_uploads || use->async_pending;
    }
    return CURD_OK;
}

curd_status curdi_transfer_check_device(curd_device *device,
                                        const char *what)
{
    return curdi_device_check_room(
        device == NULL ? NULL : device->host_registry, what);
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
 * registered memory one DMA each (lib/xfer.h); below that it would stage
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
    const curdi_xfer_item *first = &prepared->items[0];
    curd_status status;
    if (prepared->total_bytes > SIZE_MAX
        || prepared->total_bytes / prepared->count
               >= CURDI_DIRECT_ITEM_MIN_BYTES)
        return false;
    /* One item: allocates nothing, cannot fail. */
    (void)curdi_prepare_begin(&one, prepared->what, prepared->upload, false,
                              1);
    status = curdi_prepare_item(&one, 0, first->buffer_key,
                                (size_t)first->offset,
                                (size_t)prepared->total_bytes, first->host,
                                SIZE_MAX);
    if (status == CURD_OK)
        status = curdi_prepare_end(device, &one);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &one);
        return false;
    }
    *out_status = curdi_transfer_run(device, one.what, one.upload, one.items,
                                     1, one.after_uploads);
    curdi_prepared_release(device, &one);
    return true;
}

/* A call whose items are recorded, from there to its end: the handles and
 * ranges, the run (unless nothing moves), the release. whole: the one
 * item's byte_len must equal the buffer's size. */
static curd_status curdi_transfer_prepared(curd_device *device,
                                           curdi_prepared *prepared,
                                           bool whole)
{
    curd_status status;
    if (prepared->chain && prepared->count > 1
        && curdi_transfer_chain(device, prepared, &status)) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    status = curdi_prepare_end(device, prepared);
    if (status != CURD_OK) {
        curdi_prepared_release(device, prepared);
        return status;
    }
    if (whole && prepared->uses[0].byte_len != prepared->items[0].byte_len) {
        status = curdi_fail(CURD_E_RANGE,
                            "%s: byte_len is %zu but the buffer holds %zu"
                            " bytes; nothing was moved. Fix: pass exactly"
                            " the buffer's size, or use the _at/_range form"
                            " for part of it.",
                            prepared->what, (size_t)prepared->items[0].byte_len,
                            prepared->uses[0].byte_len);
    } else if (prepared->total_bytes > 0) {
        status = curdi_transfer_run(device, prepared->what, prepared->upload,
                                    prepared->items, prepared->count,
                                    prepared->after_uploads);
    }
    curdi_prepared_release(device, prepared);
    return status;
}

/* One single transfer from start to end. The library never writes through
 * an upload's source; the item type is shared with downloads, hence the
 * casts at the callers. Uploads have no capacity: SIZE_MAX. */
static curd_status curdi_transfer_one(curd_device *device, const char *what,
                                      bool upload, bool whole,
                                      uint64_t buffer_id, size_t offset,
                                      size_t byte_len, unsigned char *host,
                                      size_t capacity)
{
    curdi_prepared prepared;
    curd_status status = curdi_transfer_check_device(device, what);
    if (status == CURD_OK)
        status = curdi_prepare_begin(&prepared, what, upload, false, 1);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare_item(&prepared, 0, buffer_id, offset, byte_len,
                                host, capacity);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    return curdi_transfer_prepared(device, &prepared, whole);
}

/* ------------------------------------------------------------------------
 * Public entry points: synchronous transfers and batches
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len)
{
    return curdi_transfer_one(device, "curd_buffer_upload", true, true,
                              buffer.id, 0, byte_len, (unsigned char *)src,
                              SIZE_MAX);
}

CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len)
{
    return curdi_transfer_one(device, "curd_buffer_upload_at", true, false,
                              buffer.id, offset, byte_len,
                              (unsigned char *)src, SIZE_MAX);
}

CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len)
{
    return curdi_transfer_one(device, "curd_buffer_download", false, true,
                              buffer.id, 0, byte_len, dst, byte_len);
}

CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity)
{
    return curdi_transfer_one(device, "curd_buffer_download_range", false,
                              false, buffer.id, offset, byte_len, dst,
                              dst_capacity);
}

/* The checks before a batch's items: a device, and items unless there are
 * none (a batch of nothing succeeds at once). */
static curd_status curdi_batch_check(curd_device *device, const char *what,
                                     const void *items, size_t count)
{
    curd_status status = curdi_transfer_check_device(device, what);
    if (status == CURD_OK && count != 0 && items == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: items is NULL but count is %zu. Fix: pass an"
                            " array of count items, or count 0.",
                            what, count);
    return status;
}

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count)
{
    curdi_prepared prepared;
    curd_status status =
        curdi_batch_check(device, "curd_upload_batch", items, count);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_prepare_begin(&prepared, "curd_upload_batch", true, true,
                                 count);
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_prepare_item(&prepared, index, items[index].buffer.id,
                                    items[index].offset, items[index].byte_len,
                                    (unsigned char *)items[index].src,
                                    SIZE_MAX);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    return curdi_transfer_prepared(device, &prepared, false);
}

CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count)
{
    curdi_prepared prepared;
    curd_status status =
        curdi_batch_check(device, "curd_download_batch", items, count);
    if (status != CURD_OK || count == 0)
        return status;
    status = curdi_prepare_begin(&prepared, "curd_download_batch", false, true,
                                 count);
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        status = curdi_prepare_item(&prepared, index, items[index].buffer.id,
                                    items[index].offset, items[index].byte_len,
                                    items[index].dst,
                                    items[index].dst_capacity);
    if (status != CURD_OK) {
        curdi_prepared_release(device, &prepared);
        return status;
    }
    return curdi_transfer_prepared(device, &prepared, false);
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
    curd_status status = curdi_transfer_check_device(device, what);
    if (status == CURD_OK)
        status = curdi_prepare_begin(&prepared, what, true, false, 1);
    if (status != CURD_OK)
        return status;
    status = curdi_prepare_item(&prepared, 0, buffer.id, offset, byte_len,
                                (unsigned char *)pinned_src, SIZE_MAX);
    if (status == CURD_OK)
        status = curdi_prepare_end(device, &prepared);
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
    status = curdi_counts_check(device, &counts, what);
    if (status != CURD_OK)
        goto fail;

    /* Room for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    status = curdi_hostreg_async_reserve(device, pinned_src, byte_len, what,
                                         &range_key);
    if (status != CURD_OK)
        goto fail;

    /* offset + byte_len <= the buffer's size: checked in curdi_prepare_end. */
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
