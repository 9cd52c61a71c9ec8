/* batch.c - batches: work on resident buffers recorded once, checked when
 * recorded, run many times on one stream with one fence, or captured as a
 * CUDA graph and replayed with launches updated in place.
 *
 * This file owns a batch's life: the module's state (the device's live
 * batches and the counters), curd_batch_new, _free and _reset. Recording
 * is batch_record.c, the run batch_run.c; what they share is
 * batch_state.h.
 *
 * What stays fixed between runs, and why a run is cheap:
 *  - every buffer is resolved when recorded, so a launch's parameter list
 *    (device pointers and scalar bytes) is built once, when recorded or
 *    changed, never per run; a run only checks that each buffer is still
 *    live (one resident lookup per distinct buffer) and marks it in use
 *    until the fence;
 *  - the pinned staging of the uploads and downloads is laid out when
 *    recorded and kept by the batch, so a run copies the caller's upload
 *    bytes in and enqueues one DMA per item;
 *  - a graph batch's executable graph points at that staging and those
 *    device pointers; a changed launch is one cuGraphExecKernelNodeSetParams
 *    per kernel node, found once after the capture;
 *  - a graph whose last item is a download read back by a kernel ends in
 *    that kernel's signal (lib/transfer/gather.h): words after the
 *    downloads in the staging, cleared before each replay, which the
 *    fence polls instead of asking the stream to write one. */
#include "launch/batch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "launch/batch_state.h"
#include "launch/graph.h"
#include "launch/program.h"
#include "memory/staging.h"

static void launch_free(batch_launch *launch)
{
    if (launch == NULL)
        return;
    curdi_program_unuse(launch->program);
    free(launch);
}

static void graph_drop(curd_batch *batch)
{
    curdi_graph_drop(&batch->graph);
    batch->recapture = true;
    batch->graph_signals = false;
}

/* Forgets every item; keeps the staging and the options. */
static void batch_empty(curd_batch *batch)
{
    for (size_t index = 0; index < batch->item_count; index++) {
        const batch_item *item = &batch->items[index];
        launch_free(item->launch);
        if (item->kind == ITEM_EXTERNAL)
            item->external_ops->free(item->external);
    }
    batch->item_count = 0;
    batch->externals = 0;
    batch->buffer_count = 0;
    batch->kernel_readbacks = 0;
    batch->upload_bytes = 0;
    batch->download_bytes = 0;
    memset(&batch->counts, 0, sizeof batch->counts);
    memset(&batch->copies, 0, sizeof batch->copies);
    batch->counts.fences = 1; /* every run, empty or not, is one fence */
    batch->launches = 0;
    batch->any_dirty = false;
    batch->recapture = true;
}

/* Frees the batch, its graph and staging; the caller holds the context
 * (or the driver is unusable) and has unlinked it. The graph goes first:
 * NCCL lets a communicator go only once no graph holds its work. */
static void batch_destroy(curd_batch *batch)
{
    graph_drop(batch);
    batch_empty(batch);
    (void)curdi_staging_release(&batch->up);
    (void)curdi_staging_release(&batch->down);
    free(batch->items);
    free(batch->buffers);
    free(batch->use_ids);
    free(batch->uses);
    free(batch);
}

curd_status curdi_batch_open(curd_device *device)
{
    struct curdi_batch_state *state = calloc(1, sizeof *state);
    if (state == NULL || pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's batch state."
                          " Fix: free host memory.");
    }
    device->batch = state;
    return CURD_OK;
}

void curdi_batch_close(curd_device *device)
{
    if (device == NULL || device->batch == NULL)
        return;
    struct curdi_batch_state *state = device->batch;
    curd_batch *next;
    for (curd_batch *batch = state->batches; batch != NULL; batch = next) {
        next = batch->next;
        if (batch->running) {
            curdi_pending_drain(&batch->run.base);
            curdi_pending_release(&batch->run.base);
        }
        batch_destroy(batch);
    }
    pthread_mutex_destroy(&state->lock);
    free(state);
    device->batch = NULL;
}

void curdi_batch_counts_read(curd_device *device, curdi_batch_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    if (device == NULL || device->batch == NULL)
        return;
    counts->runs = atomic_load(&device->batch->runs);
    counts->graph_replays = atomic_load(&device->batch->graph_replays);
    counts->graph_captures = atomic_load(&device->batch->graph_captures);
    counts->graph_updates = atomic_load(&device->batch->graph_updates);
}

void curdi_batch_counts_reset(curd_device *device)
{
    atomic_store(&device->batch->runs, 0);
    atomic_store(&device->batch->graph_replays, 0);
    atomic_store(&device->batch->graph_captures, 0);
    atomic_store(&device->batch->graph_updates, 0);
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */

CURD_API void curd_batch_options_init(curd_batch_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

CURD_API curd_status curd_batch_new(curd_device *device,
                                    const curd_batch_options *options,
                                    curd_batch **out_batch)
{
    const char *what = "curd_batch_new";
    curd_batch_options given;
    curd_batch_options_init(&given);
    curd_status status;
    CURDI_TRY(status, curdi_core_device_check(device, what), out);
    if (out_batch == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_batch is NULL. Fix: pass the address of"
                          " a curd_batch pointer.",
                          what);
    if (options != NULL) {
        CURDI_TRY(status,
                  curdi_options_check(options, sizeof given,
                                      offsetof(curd_batch_options, flags)
                                          + sizeof given.flags,
                                      "curd_batch_options"),
                  out);
        memcpy(&given, options,
               options->struct_size < sizeof given ? options->struct_size
                                                   : sizeof given);
    }
    if ((given.flags & ~CURD_BATCH_FLAGS_KNOWN) != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: flags 0x%x set bits this version of curd"
                          " does not define (known: 0x%x). Fix: pass"
                          " CURD_BATCH_* flags only.",
                          what, given.flags, CURD_BATCH_FLAGS_KNOWN);
    curd_batch *batch = calloc(1, sizeof *batch);
    if (batch == NULL)
        return fail_memory(what);
    batch->device = device;
    batch->flags = given.flags;
    batch->cu_stream = given.cu_stream;
    batch_empty(batch);
    struct curdi_batch_state *state = device->batch;
    pthread_mutex_lock(&state->lock);
    batch->next = state->batches;
    if (state->batches != NULL)
        state->batches->prev = batch;
    state->batches = batch;
    pthread_mutex_unlock(&state->lock);
    *out_batch = batch;
    return CURD_OK;
out:
    return status;
}

CURD_API curd_status curd_batch_free(curd_batch *batch)
{
    if (batch == NULL)
        return CURD_OK;
    const char *what = "curd_batch_free";
    curd_status status = curdi_core_device_check(batch->device, what);
    if (status != CURD_OK && status != CURD_E_DEVICE_LOST)
        return status;
    if (batch->running)
        return curdi_fail(CURD_E_BUSY,
                          "%s: a run of this batch is still pending; nothing"
                          " was freed. Fix: curd_pending_wait or"
                          " curd_pending_free it first.",
                          what);
    struct curdi_batch_state *state = batch->device->batch;
    pthread_mutex_lock(&state->lock);
    if (batch->prev != NULL)
        batch->prev->next = batch->next;
    else
        state->batches = batch->next;
    if (batch->next != NULL)
        batch->next->prev = batch->prev;
    pthread_mutex_unlock(&state->lock);
    /* The graph's destruction needs the context; on a lost device the
     * driver objects went with it. */
    curd_device *device = batch->device;
    bool entered =
        status == CURD_OK && curdi_core_device_enter(device) == CURD_OK;
    if (!entered)
        curdi_graph_forget(&batch->graph);
    batch_destroy(batch);
    if (entered)
        curdi_core_device_leave(device);
    return CURD_OK;
}

CURD_API curd_status curd_batch_reset(curd_batch *batch)
{
    curd_status status;
    CURDI_TRY(status, check_batch(batch, "curd_batch_reset"), out);
    /* A graph holding external items' work (NCCL's) goes before they
     * do: their communicators wait for it. */
    if (batch->externals != 0 && batch->graph.graph != NULL) {
        CURDI_TRY(status, curdi_core_device_enter(batch->device), out);
        graph_drop(batch);
        curdi_core_device_leave(batch->device);
    }
    batch_empty(batch);
out:
    return status;
}
