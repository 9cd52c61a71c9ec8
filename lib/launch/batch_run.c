/* batch_run.c - a batch's run: the curd_pending it hands out, marking
 * its buffers, its staging, enqueueing its items (or capturing, updating
 * and launching its CUDA graph through launch/graph.c), the wait that
 * polls external items, and curd_batch_run / curd_batch_run_async. The
 * batch's state is batch_state.h. */
#include "launch/batch.h"

#include <stdatomic.h>
#include <string.h>

#include "base/clock.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/batch_state.h"
#include "launch/dispatch.h"
#include "launch/graph.h"
#include "memory/memory.h"
#include "memory/staging.h"
#include "transfer/copy.h"
#include "transfer/gather.h"
#include "transfer/transfer.h"
#include "transfer/upload_marks.h"

/* ------------------------------------------------------------------------
 * A run
 * ---------------------------------------------------------------------- */

static void batch_run_complete(curd_pending *pending, bool copy_out)
{
    batch_run *run = (batch_run *)(void *)pending;
    curd_batch *batch = run->batch;
    struct curdi_batch_state *state = batch->device->batch;
    for (size_t index = 0; copy_out && index < batch->item_count; index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind == ITEM_DOWNLOAD)
            memcpy(item->dst, batch->down.host + item->staging_offset,
                   item->byte_len);
    }
    curdi_transfer_counts_add(batch->device, &batch->counts);
    curdi_copy_counts_add(batch->device, &batch->copies);
    curdi_dispatch_count_launches(batch->device, batch->launches);
    for (size_t index = 0; batch->externals != 0 && index < batch->item_count;
         index++)
        if (batch->items[index].kind == ITEM_EXTERNAL)
            batch->items[index].external_ops->complete(
                batch->items[index].external);
    atomic_fetch_add(&state->runs, 1u);
    if (run->replayed)
        atomic_fetch_add(&state->graph_replays, 1u);
    if (run->captured)
        atomic_fetch_add(&state->graph_captures, 1u);
    atomic_fetch_add(&state->graph_updates, run->updated);
}

/* The run is the batch's own: nothing to free but the marks to end and,
 * after a failed run (drained by the pending module), the staging it took,
 * so the pools are as they were before it. */
static void batch_run_release(curd_pending *pending)
{
    batch_run *run = (batch_run *)(void *)pending;
    curd_batch *batch = run->batch;
    if (!pending->completed && (run->took_up || run->took_down)) {
        if (run->took_up)
            (void)curdi_staging_release(&batch->up);
        if (run->took_down)
            (void)curdi_staging_release(&batch->down);
        batch->recapture = true;
    }
    if (run->use_count != 0)
        curdi_resident_use_end(batch->device, batch->uses, run->use_count);
    run->use_count = 0;
    batch->running = false;
}

static const curdi_pending_ops run_ops = {.complete = batch_run_complete,
                                          .release = batch_run_release};

/* ------------------------------------------------------------------------
 * A run with external items: its wait polls them beside the stream, so a
 * peer that fails or stops answering is their error within their
 * timeout, never a hang (pending.h's optional wait and ready).
 * ---------------------------------------------------------------------- */

/* After a failure: nothing on the stream may wait on a peer for ever, or
 * the release's drain would. */
static void run_abort_externals(curd_batch *batch)
{
    for (size_t index = 0; batch->externals != 0 && index < batch->item_count;
         index++)
        if (batch->items[index].kind == ITEM_EXTERNAL)
            batch->items[index].external_ops->abort(
                batch->items[index].external);
}

/* One poll: *out_done once every external item is quiet and the stream
 * drained, or a failure (an item's, or the driver's). */
static curd_status run_poll(curd_batch *batch, uint64_t waited_ns,
                            int *out_done)
{
    const char *what = batch->run.what;
    bool in_progress = false;
    curd_status status = CURD_OK;
    *out_done = 0;
    for (size_t index = 0; index < batch->item_count; index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind == ITEM_EXTERNAL)
            CURDI_TRY(status,
                      item->external_ops->poll(item->external, waited_ns,
                                               &in_progress, what),
                      out);
    }
    if (in_progress)
        return CURD_OK;
    CURDI_TRY(status, curdi_core_device_enter(batch->device), out);
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuStreamQuery(batch->run.base.stream));
    curdi_core_device_leave(batch->device);
    if (rc == CURDI_CUDA_SUCCESS)
        *out_done = 1;
    else if (rc != CURDI_CUDA_ERROR_NOT_READY)
        status = curdi_pending_fail_driver(batch->device, rc,
                                           "cuStreamQuery");
out:
    return status;
}

static curd_status run_wait_polled(curd_pending *pending)
{
    curd_batch *batch = ((batch_run *)(void *)pending)->batch;
    uint64_t start_ns = curdi_clock_ns();
    for (;;) {
        uint64_t waited_ns = curdi_clock_ns() - start_ns;
        int done = 0;
        curd_status status = run_poll(batch, waited_ns, &done);
        if (status != CURD_OK)
            run_abort_externals(batch);
        if (status != CURD_OK || done)
            return status;
        curdi_clock_poll_pause(waited_ns);
    }
}

/* Ready also when the wait would fail at once (pending.h); the wait then
 * reports the failure and aborts. */
static curd_status run_ready_polled(curd_pending *pending, int *out_ready)
{
    curd_status status =
        run_poll(((batch_run *)(void *)pending)->batch, 0, out_ready);
    if (status != CURD_OK)
        *out_ready = 1;
    return CURD_OK;
}

static const curdi_pending_ops run_ops_polled = {.complete =
                                                     batch_run_complete,
                                                 .release = batch_run_release,
                                                 .wait = run_wait_polled,
                                                 .ready = run_ready_polled};

/* Marks every buffer the batch names in use; CURD_E_STALE_HANDLE, naming
 * the buffer, when one was freed since it was recorded. */
static curd_status run_mark_buffers(curd_batch *batch, const char *what)
{
    size_t count = 0;
    for (size_t index = 0; index < batch->buffer_count; index++)
        if (batch->buffers[index].refs != 0)
            batch->use_ids[count++] = batch->buffers[index].id;
    if (count == 0)
        return CURD_OK;
    curd_status status = curdi_resident_use_begin(batch->device, what,
                                                  batch->use_ids, count,
                                                  batch->uses);
    if (status != CURD_OK)
        return status;
    batch->run.use_count = count;
    return CURD_OK;
}

/* The pinned staging the layout needs, kept between runs; a graph that
 * points at staging given back must be captured again. *taken says
 * whether this run took it (a failed run gives it back). */
static curd_status run_staging(curd_batch *batch, curdi_staging *staging,
                               size_t bytes, bool *taken)
{
    if (staging->byte_len >= bytes)
        return CURD_OK;
    (void)curdi_staging_release(staging);
    batch->recapture = true;
    curd_status status =
        curdi_memory_staging_acquire(batch->device, bytes, staging);
    *taken = status == CURD_OK && staging->byte_len != 0;
    return status;
}

/* Looks the read-back kernel up once per batch, before anything is
 * enqueued (a module load has no place in a capture). Context current. */
static curd_status run_readback_kernels(curd_batch *batch)
{
    curd_status status = curdi_gather_kernels_if_usable(
        batch->device, &batch->readback, &batch->readback_usable);
    batch->readback_known = status == CURD_OK;
    return status;
}

/* Enqueues the read-back launch of the downloads from items[first] on
 * that a kernel reads back (up to READBACK_PIECES of them in a row);
 * *out_count receives how many it took. When `capturing` and they end the
 * batch, the launch signals where the batch keeps space for it
 * (batch_signal_line), and the batch's graph_signals says so. */
static curd_status enqueue_readback(curd_batch *batch, size_t first,
                                    curdi_cu_stream stream, bool capturing,
                                    size_t *out_count)
{
    curdi_engine_piece pieces[READBACK_PIECES];
    size_t count = 0;
    for (size_t index = first;
         index < batch->item_count && count < READBACK_PIECES; index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind != ITEM_DOWNLOAD || !reads_back_by_kernel(item))
            break;
        pieces[count++] = (curdi_engine_piece){
            .device_ptr = batch->buffers[item->buffer].device_ptr
                          + item->offset,
            .stage_offset = item->staging_offset,
            .byte_len = item->byte_len};
    }
    *out_count = count;
    if (!capturing || first + count != batch->item_count
        || batch_signal_line(batch) == 0)
        return curdi_gather_enqueue(&batch->readback, stream, true,
                                    batch->down.host, pieces, count);
    unsigned words = 0;
    curd_status status = curdi_gather_enqueue_signalled(
        &batch->readback, stream, batch->down.host, pieces, count,
        batch->download_bytes, &words);
    batch->graph_signals = status == CURD_OK && words != 0;
    batch->signal_count = words;
    return status;
}

/* Enqueues every item on stream, which is capturing the batch's graph
 * when `capturing`. Context current. */
static curd_status enqueue_items(curd_batch *batch, curdi_cu_stream stream,
                                 bool capturing)
{
    const curdi_driver *driver = curdi_driver_get();
    curd_device *device = batch->device;
    for (size_t index = 0; index < batch->item_count; index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind == ITEM_DOWNLOAD && batch->readback_usable
            && reads_back_by_kernel(item)) {
            size_t taken = 0;
            curd_status status = enqueue_readback(batch, index, stream,
                                                  capturing, &taken);
            if (status != CURD_OK)
                return status;
            index += taken - 1u;
            continue;
        }
        curdi_cu_result rc = CURDI_CUDA_SUCCESS;
        const char *call = NULL;
        curdi_cu_deviceptr at = 0;
        if (item->kind != ITEM_LAUNCH)
            at = (curdi_cu_deviceptr)(batch->buffers[item->buffer].device_ptr
                                      + item->offset);
        switch (item->kind) {
        case ITEM_FILL:
            call = "cuMemsetD8Async";
            rc = driver->cuMemsetD8Async(at, item->value, item->byte_len,
                                         stream);
            break;
        case ITEM_UPLOAD:
            call = "cuMemcpyHtoDAsync";
            rc = driver->cuMemcpyHtoDAsync(
                at, batch->up.host + item->staging_offset, item->byte_len,
                stream);
            break;
        case ITEM_DOWNLOAD:
            call = "cuMemcpyDtoHAsync";
            rc = driver->cuMemcpyDtoHAsync(
                batch->down.host + item->staging_offset, at, item->byte_len,
                stream);
            break;
        case ITEM_COPY:
            call = "cuMemcpyDtoDAsync";
            rc = driver->cuMemcpyDtoDAsync(
                at,
                (curdi_cu_deviceptr)(batch->buffers[item->src_buffer].device_ptr
                                     + item->src_offset),
                item->byte_len, stream);
            break;
        case ITEM_EXTERNAL: {
            batch->run.external_enqueued = true;
            curd_status status = item->external_ops->enqueue(
                item->external, stream, batch->run.what);
            if (status != CURD_OK)
                return status;
            break;
        }
        case ITEM_LAUNCH: {
            const batch_launch *launch = item->launch;
            /* Its outputs and scratch zeroed first, one memset each
             * (captured with the rest in a graph batch). */
            for (size_t arg = 0; arg < launch->nargs; arg++) {
                if (!zeroes(&launch->args[arg]))
                    continue;
                const batch_buffer *zeroed =
                    &batch->buffers[launch->buffer_of[arg]];
                rc = driver->cuMemsetD8Async(
                    (curdi_cu_deviceptr)zeroed->device_ptr, 0,
                    zeroed->byte_len, stream);
                if (curdi_driver_note(rc) != CURDI_CUDA_SUCCESS)
                    return curdi_pending_fail_driver(device, rc,
                                                     "cuMemsetD8Async");
            }
            curd_status status = curdi_dispatch_enqueue_launch(
                device, launch->program, &launch->shape, launch->params,
                stream);
            if (status != CURD_OK)
                return status;
            break;
        }
        }
        if (curdi_driver_note(rc) != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(device, rc, call);
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The graph (launch/graph.c captures, updates and launches it)
 * ---------------------------------------------------------------------- */

/* The launches in item order, as the graph module's list of kernels. */
static curdi_graph_kernel *graph_kernels(curd_batch *batch)
{
    curdi_graph_kernel *first = NULL, **link = &first;
    for (size_t index = 0; index < batch->item_count; index++) {
        batch_launch *launch = batch->items[index].launch;
        if (launch == NULL)
            continue;
        launch->kernel.program = launch->program;
        launch->kernel.shape = &launch->shape;
        launch->kernel.args = launch->args;
        launch->kernel.nargs = launch->nargs;
        launch->kernel.params = launch->params;
        launch->kernel.next = NULL;
        *link = &launch->kernel;
        link = &launch->kernel.next;
    }
    return first;
}

static curd_status enqueue_captured(void *context, curdi_cu_stream stream)
{
    curd_batch *batch = context;
    batch->graph_signals = false;
    return enqueue_items(batch, stream, true);
}

/* Captures the items into a graph and instantiates it. Context current;
 * the old graph is gone. */
static curd_status graph_capture(curd_batch *batch)
{
    batch->recapture = true;
    curd_status status = curdi_graph_capture(
        &batch->graph, batch->device, &batch->run.base.stream,
        enqueue_captured, batch, graph_kernels(batch));
    if (status != CURD_OK)
        return status;
    batch->recapture = false;
    for (size_t index = 0; index < batch->item_count; index++)
        if (batch->items[index].launch != NULL)
            batch->items[index].launch->dirty = false;
    batch->any_dirty = false;
    batch->run.captured = true;
    return CURD_OK;
}

/* Brings the changed launches into the executable graph, node by node. A
 * failure part way leaves the graph to be captured again. */
static curd_status graph_update(curd_batch *batch)
{
    uint64_t updated = 0;
    (void)graph_kernels(batch);
    for (size_t index = 0; index < batch->item_count; index++) {
        batch_launch *launch = batch->items[index].launch;
        if (launch == NULL || !launch->dirty)
            continue;
        curd_status status = curdi_graph_update(&batch->graph, batch->device,
                                                &launch->kernel, &updated);
        if (status != CURD_OK)
            return status;
        launch->dirty = false;
    }
    batch->any_dirty = false;
    batch->run.updated += updated;
    return CURD_OK;
}

/* Enqueues a graph batch: captured when new or changed in shape, updated
 * in place when only launches changed, then launched. */
static curd_status enqueue_graph(curd_batch *batch)
{
    curd_status status;
    if (batch->any_dirty && !batch->recapture && batch->graph.nodes_known)
        CURDI_TRY(status, graph_update(batch), out);
    if (batch->graph.exec == NULL || batch->recapture || batch->any_dirty)
        CURDI_TRY(status, graph_capture(batch), out);
    CURDI_TRY(status, curdi_pending_begin(&batch->run.base), out);
    if (batch->graph_signals) {
        uint32_t *words =
            (uint32_t *)(void *)(batch->down.host + batch->download_bytes);
        memset(words, 0, batch->signal_count * sizeof *words);
        /* A wait that polls: synchronous, untimed, on a pooled stream. */
        if (!batch->run.base.timed && batch->run.base.caller_stream == NULL) {
            batch->run.base.signal_words = words;
            batch->run.base.signal_count = batch->signal_count;
        }
    }
    CURDI_TRY(status,
              curdi_graph_launch(&batch->graph, batch->device,
                                 batch->run.base.stream),
              out);
    batch->run.replayed = true;
out:
    return status;
}

/* Starts a run: everything checked and marked, the uploads staged, the
 * work and the end event enqueued. async: the caller will receive the
 * pending (curd_batch_run_async), so it takes its slot in the registry
 * of live pendings before anything is enqueued. On failure nothing stays
 * marked, counted, enqueued or taken. */
static curd_status run_start(curd_batch *batch, bool timed, bool async,
                             const char *what)
{
    curd_status status = check_batch(batch, what);
    if (status != CURD_OK)
        return status;
    curd_device *device = batch->device;
    CURDI_TRY(status, curdi_transfer_counts_check(device, &batch->counts, what),
              out);
    CURDI_TRY(status, curdi_copy_counts_check(device, &batch->copies, what),
              out);
    for (size_t index = 0; batch->externals != 0 && index < batch->item_count;
         index++)
        if (batch->items[index].kind == ITEM_EXTERNAL)
            CURDI_TRY(status,
                      batch->items[index].external_ops->check(
                          batch->items[index].external, what),
                      out);
    curdi_pending_init(&batch->run.base, device,
                       batch->externals != 0 ? &run_ops_polled : &run_ops);
    batch->run.what = what;
    batch->run.base.timed = timed;
    batch->run.batch = batch;
    batch->run.use_count = 0;
    batch->run.replayed = false;
    batch->run.captured = false;
    batch->run.updated = 0;
    batch->run.took_up = batch->run.took_down = false;
    batch->run.external_enqueued = false;
    batch->running = true;
    CURDI_TRY(status, run_mark_buffers(batch, what), release);
    if (async)
        CURDI_TRY(status, curdi_pending_take_slot(&batch->run.base, what),
                  release);
    CURDI_TRY(status, curdi_core_device_enter(device), release);
    CURDI_TRY(status,
              curdi_pending_use_stream(&batch->run.base, batch->cu_stream,
                                       what),
              drain);
    CURDI_TRY(status,
              curdi_upload_marks_wait_for(device, batch->uses,
                                          batch->run.use_count),
              drain);
    CURDI_TRY(status,
              run_staging(batch, &batch->up, batch->upload_bytes,
                          &batch->run.took_up),
              drain);
    CURDI_TRY(status,
              run_staging(batch, &batch->down,
                          batch->download_bytes + batch_signal_line(batch),
                          &batch->run.took_down),
              drain);
    CURDI_TRY(status, curdi_pending_acquire(&batch->run.base), drain);
    if (batch->kernel_readbacks != 0 && !batch->readback_known)
        CURDI_TRY(status, run_readback_kernels(batch), drain);
    for (size_t index = 0; index < batch->item_count; index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind == ITEM_UPLOAD)
            memcpy(batch->up.host + item->staging_offset, item->src,
                   item->byte_len);
    }
    if ((batch->flags & CURD_BATCH_GRAPH) != 0) {
        CURDI_TRY(status, enqueue_graph(batch), drain);
    } else {
        CURDI_TRY(status, curdi_pending_begin(&batch->run.base), drain);
        CURDI_TRY(status,
                  enqueue_items(batch, batch->run.base.stream, false),
                  drain);
    }
    CURDI_TRY(status, curdi_pending_end(&batch->run.base), drain);
    curdi_core_device_leave(device);
    return CURD_OK;
drain:
    if (batch->run.external_enqueued || batch->run.replayed)
        run_abort_externals(batch);
    curdi_pending_drain(&batch->run.base);
    curdi_core_device_leave(device);
release:
    curdi_pending_release(&batch->run.base);
out:
    return status;
}

CURD_API curd_status curd_batch_run_async(curd_batch *batch,
                                          curd_pending **out_pending)
{
    CURDI_RANGE("curd_batch_run_async");
    const char *what = "curd_batch_run_async";
    curd_status status = curdi_pending_check_out(out_pending, what);
    if (status != CURD_OK)
        return status;
    /* Timed for curd_pending_wait's timing, but on the caller's stream,
     * whose work the caller times itself (lib/core/pending.h). */
    status = run_start(batch, batch->cu_stream == NULL, true, what);
    if (status != CURD_OK)
        return status;
    curdi_pending_publish(&batch->run.base);
    *out_pending = &batch->run.base;
    return CURD_OK;
}

CURD_API curd_status curd_batch_run(curd_batch *batch, curd_timing *timing)
{
    CURDI_RANGE("curd_batch_run");
    const char *what = "curd_batch_run";
    curd_status status;
    if (timing != NULL)
        CURDI_TRY(
            status,
            curdi_options_result_struct_check(timing, CURDI_TIMING_SIZE_1_0,
                                              what, "timing", "curd_timing"),
            out);
    /* Untimed unless asked: one stream synchronisation is the fence. */
    CURDI_TRY(status, run_start(batch, timing != NULL, false, what), out);
    CURDI_TRY(status, curdi_pending_finish(&batch->run.base, true), release);
    if (timing != NULL)
        curdi_pending_timing(&batch->run.base, timing);
release:
    curdi_pending_release(&batch->run.base);
out:
    return status;
}
