/* batch.c - batches: work on resident buffers recorded once, checked when
 * recorded, run many times on one stream with one fence, or captured as a
 * CUDA graph and replayed with launches updated in place.
 *
 * Read top to bottom: the room, a batch's state, recording, the run (the
 * pending it hands out, enqueueing, when the graph room captures, updates
 * or launches the graph), then the public calls.
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

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/clock.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/dispatch.h"
#include "launch/graph.h"
#include "launch/program.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "memory/staging.h"
#include "transfer/copy.h"
#include "transfer/gather.h"
#include "transfer/transfer.h"
#include "transfer/upload_marks.h"

/* ------------------------------------------------------------------------
 * The room
 * ---------------------------------------------------------------------- */

struct curdi_batch_room {
    pthread_mutex_t lock;     /* guards batches */
    curd_batch *batches;      /* the device's live batches */
    _Atomic uint64_t runs;
    _Atomic uint64_t graph_replays;
    _Atomic uint64_t graph_captures;
    _Atomic uint64_t graph_updates;
};

/* ------------------------------------------------------------------------
 * A batch's state
 * ---------------------------------------------------------------------- */

typedef enum item_kind {
    ITEM_FILL = 1,
    ITEM_UPLOAD = 2,
    ITEM_LAUNCH = 3,
    ITEM_DOWNLOAD = 4,
    ITEM_COPY = 5, /* within the batch's device (transfer/copy.h) */
    ITEM_EXTERNAL = 6 /* a room above's (batch.h: a collective) */
} item_kind;

/* A buffer the batch names, once however many items name it. */
typedef struct batch_buffer {
    uint64_t id;
    uint64_t device_ptr;
    size_t byte_len;
    uint32_t refs; /* items and launch arguments naming it; 0: a free entry */
} batch_buffer;

/* A recorded launch, its parameter list built. One allocation holds it
 * and its arrays. */
typedef struct batch_launch {
    const curd_program *program;
    curdi_launch_shape shape;
    size_t nargs;
    curd_arg *args;       /* as recorded; scalars' value points into values */
    uint32_t *buffer_of;  /* BUFFER arguments: their entry in buffers */
    uint64_t *ptrs;       /* what each pointer parameter passes */
    void **params;        /* the parameter list: &ptrs[i] or a scalar */
    unsigned char *values;
    /* Its OUTPUT and SCRATCH buffers, zeroed before it at each run: how
     * many, and their bytes (what they add to a run's fills). */
    uint64_t zero_ops, zero_bytes;
    /* What the graph room sees of it; kernel.nodes holds a captured
     * graph's node per iteration. */
    curdi_graph_kernel kernel;
    bool dirty;           /* changed since the graph was captured */
} batch_launch;

typedef struct batch_item {
    item_kind kind;
    uint32_t buffer;        /* its entry in buffers (not launches) */
    size_t offset;
    size_t byte_len;
    uint8_t value;          /* fills */
    const void *src;        /* uploads */
    void *dst;              /* downloads */
    size_t staging_offset;  /* uploads and downloads */
    batch_launch *launch;   /* launches */
    uint32_t src_buffer;    /* copies: the source's entry in buffers ... */
    size_t src_offset;      /* ... and offset (buffer, offset: the dst) */
    const curdi_batch_external_ops *external_ops; /* external items */
    void *external;         /* (buffer, and src_buffer when it has two) */
} batch_item;

/* A run in flight: the batch's curd_pending (lib/core/pending.h). */
typedef struct batch_run {
    curd_pending base;
    curd_batch *batch;
    size_t use_count;       /* buffers marked in use until the fence */
    bool replayed;          /* the run launched the graph */
    /* What the run did to the graph, counted with the run once it is
     * complete (curd.h: a batch's counters count completed runs; a run
     * that failed counts nothing). */
    bool captured;          /* captured and instantiated it */
    uint64_t updated;       /* kernel nodes it changed in place */
    bool took_up, took_down; /* the run took the batch's staging */
    const char *what;       /* the public call, for external items */
    bool external_enqueued; /* an external item's work is on the stream */
} batch_run;

struct curd_batch {
    curd_device *device;
    uint32_t flags;
    /* The caller's stream every run goes on (curd_batch_options), or
     * NULL for a pooled one. */
    void *cu_stream;
    batch_item *items;
    size_t item_count, item_capacity;
    batch_buffer *buffers;
    size_t buffer_count, buffer_capacity;
    uint64_t *use_ids;          /* a run's live buffer ids ... */
    curdi_resident_use *uses;   /* ... and their uses (buffer_capacity) */
    size_t upload_bytes;        /* staging laid out so far */
    size_t download_bytes;
    curdi_staging up, down;     /* kept between runs */
    curdi_transfer_counts counts; /* what one run adds */
    curdi_copy_counts copies;     /* ... to the copy counters too */
    uint64_t launches;          /* kernel launches one run enqueues */
    size_t externals;           /* external items (batch.h) */
    /* Downloads that a kernel reads back (READBACK_KERNEL_MAX), and the
     * device's transfer kernels once looked up (they stay loaded until
     * the device closes). */
    size_t kernel_readbacks;
    bool readback_known, readback_usable;
    curdi_gather_kernels readback;
    /* The graph as captured ends in a read-back launch that signals:
     * signal_count words at download_bytes in the download staging
     * (batch_signal_line). */
    bool graph_signals;
    unsigned signal_count;
    batch_run run;
    bool running;               /* run is enqueued and not yet released */
    /* CURD_BATCH_GRAPH */
    curdi_graph graph;
    bool recapture;             /* items or staging changed since capture */
    bool any_dirty;
    curd_batch *prev, *next;    /* the room's list */
};

/* Staging offsets are 16-byte aligned, so the host copies run aligned. */
#define STAGING_ALIGN 16u
/* A read-back launch's signal words: one line (gather.h). */
#define SIGNAL_LINE_BYTES ((size_t)CURDI_GATHER_SIGNAL_BLOCKS * 4u)

/* Downloads up to this many bytes are read back by the transfer room's
 * gather kernel (lib/transfer/gather.h), writing across the bus into the
 * pinned staging, instead of a DMA: a DMA behind kernels waits for the
 * copy engine to take over, which a kernel behind kernels does not. On
 * the H100 of doc/PERFORMANCE.md a graph of 8 launches and a 4 KiB
 * read-back replayed in 16.4 us with a DMA node and 15.2 us with the
 * kernel (raw driver, synchronised alike). Consecutive ones go in one
 * launch. */
#define READBACK_KERNEL_MAX ((size_t)64 * 1024)
/* Pieces gathered into one read-back launch. */
#define READBACK_PIECES 32u

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
    struct curdi_batch_room *room = calloc(1, sizeof *room);
    if (room == NULL || pthread_mutex_init(&room->lock, NULL) != 0) {
        free(room);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's batch state."
                          " Fix: free host memory.");
    }
    device->batch = room;
    return CURD_OK;
}

void curdi_batch_close(curd_device *device)
{
    if (device == NULL || device->batch == NULL)
        return;
    struct curdi_batch_room *room = device->batch;
    curd_batch *next;
    for (curd_batch *batch = room->batches; batch != NULL; batch = next) {
        next = batch->next;
        if (batch->running) {
            curdi_pending_drain(&batch->run.base);
            curdi_pending_release(&batch->run.base);
        }
        batch_destroy(batch);
    }
    pthread_mutex_destroy(&room->lock);
    free(room);
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
 * Recording
 * ---------------------------------------------------------------------- */

static curd_status fail_memory(const char *what)
{
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "%s: could not grow the batch. Fix: free host memory,"
                      " or record fewer items.",
                      what);
}

/* The checks every call that changes a batch starts with. */
/* curdi_dispatch_check_shape for a batch's launch, which runs on the
 * batch's stream and takes none of its own. */
static curd_status check_batch_shape(const curd_batch *batch,
                                     const curd_program *program,
                                     const curd_launch *launch,
                                     const char *what,
                                     curdi_launch_shape *out)
{
    curd_status status = curdi_dispatch_check_shape(batch->device, program,
                                                    launch, what, out);
    if (status == CURD_OK && out->cu_stream != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the launch names stream %p, but a batch's"
                          " launches run on the batch's stream. Fix: leave"
                          " curd_launch.cu_stream NULL and set"
                          " curd_batch_options.cu_stream when the batch is"
                          " made.",
                          what, out->cu_stream);
    if (status == CURD_OK && out->timing != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the launch names a curd_timing, but a batch's"
                          " launches are timed with its run. Fix: leave"
                          " curd_launch.timing NULL and pass a curd_timing"
                          " to curd_batch_run.",
                          what);
    return status;
}

static curd_status check_batch(const curd_batch *batch, const char *what)
{
    if (batch == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: batch is NULL. Fix: pass the curd_batch that"
                          " curd_batch_new made.",
                          what);
    curd_status status = curdi_device_check(batch->device, what);
    if (status == CURD_OK && batch->running)
        status = curdi_fail(CURD_E_BUSY,
                            "%s: a run of this batch is still pending; the"
                            " batch was not changed. Fix: curd_pending_wait"
                            " or curd_pending_free it first.",
                            what);
    return status;
}

/* A live buffer of the batch's device: its device pointer and size. */
static curd_status resolve_buffer(curd_batch *batch, curd_buffer buffer,
                                  const char *what, curdi_resident_use *out)
{
    curd_status status = curdi_resident_use_begin(batch->device, what,
                                                  &buffer.id, 1, out);
    if (status == CURD_OK)
        curdi_resident_use_end(batch->device, out, 1);
    return status;
}

/* Room for `more` buffer entries (and the run's arrays beside them), all
 * or none. */
static bool reserve_buffer_entries(curd_batch *batch, size_t more)
{
    size_t needed;
    if (!curdi_size_add(batch->buffer_count, more, &needed))
        return false;
    size_t capacity = batch->buffer_capacity;
    if (needed <= capacity)
        return true;
    size_t ids_capacity = capacity, uses_capacity = capacity;
    return curdi_array_reserve((void **)&batch->use_ids, &ids_capacity,
                               needed, sizeof *batch->use_ids)
           && curdi_array_reserve((void **)&batch->uses, &uses_capacity,
                                  needed, sizeof *batch->uses)
           && curdi_array_reserve((void **)&batch->buffers,
                                  &batch->buffer_capacity, needed,
                                  sizeof *batch->buffers);
}

/* The entry of a resolved buffer, shared by every item naming it; the
 * caller reserved room for one more. */
static uint32_t buffer_ref(curd_batch *batch, const curdi_resident_use *use)
{
    size_t free_entry = batch->buffer_count;
    for (size_t index = 0; index < batch->buffer_count; index++) {
        batch_buffer *entry = &batch->buffers[index];
        if (entry->refs != 0 && entry->id == use->id) {
            entry->refs++;
            return (uint32_t)index;
        }
        if (entry->refs == 0 && free_entry == batch->buffer_count)
            free_entry = index;
    }
    if (free_entry == batch->buffer_count)
        batch->buffer_count++;
    CURDI_ASSERT(free_entry < batch->buffer_capacity);
    batch->buffers[free_entry] = (batch_buffer){
        use->id, use->device_ptr, use->byte_len, 1u};
    return (uint32_t)free_entry;
}

static void buffer_unref(curd_batch *batch, uint32_t index)
{
    CURDI_ASSERT(index < batch->buffer_count && batch->buffers[index].refs > 0);
    batch->buffers[index].refs--;
}

/* Whether a download fits one read-back launch (READBACK_KERNEL_MAX),
 * its staging bytes within the 4 GiB the kernel addresses. */
static bool reads_back_by_kernel(const batch_item *item)
{
    return item->byte_len <= READBACK_KERNEL_MAX
           && item->staging_offset <= UINT32_MAX - item->byte_len;
}

/* The bytes after the downloads' staging that a graph batch ending in a
 * download read back by a kernel keeps for that launch's signal words
 * (at download_bytes, a multiple of STAGING_ALIGN, within the 4 GiB the
 * kernel addresses); 0 for any other batch. */
static size_t batch_signal_line(const curd_batch *batch)
{
    if ((batch->flags & CURD_BATCH_GRAPH) == 0 || batch->item_count == 0)
        return 0;
    const batch_item *last = &batch->items[batch->item_count - 1u];
    return last->kind == ITEM_DOWNLOAD && reads_back_by_kernel(last)
                   && batch->download_bytes
                          <= UINT32_MAX - SIGNAL_LINE_BYTES
               ? SIGNAL_LINE_BYTES
               : 0;
}

/* Appends an item naming use (and, for a copy, src_use as its source;
 * else NULL); grows the staging layout and the run's counts. */
static curd_status item_append(curd_batch *batch, batch_item item,
                               const curdi_resident_use *use,
                               const curdi_resident_use *src_use,
                               const char *what)
{
    size_t *layout = item.kind == ITEM_UPLOAD     ? &batch->upload_bytes
                     : item.kind == ITEM_DOWNLOAD ? &batch->download_bytes
                                                  : NULL;
    size_t end = 0;
    if (layout != NULL
        && (!curdi_size_add(*layout, item.byte_len, &end)
            || !curdi_size_add(end, STAGING_ALIGN - 1u, &end)))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: the batch's staging would pass 2^64 bytes."
                          " Fix: split the batch.",
                          what);
    curdi_transfer_counts more = batch->counts;
    bool fits = true;
    if (item.kind == ITEM_FILL)
        fits = curdi_u64_add(more.fill_ops, 1u, &more.fill_ops)
               && curdi_u64_add(more.fill_bytes, item.byte_len,
                                &more.fill_bytes);
    else if (item.kind == ITEM_UPLOAD)
        fits = curdi_u64_add(more.copy_ops, 1u, &more.copy_ops)
               && curdi_u64_add(more.h2d_bytes, item.byte_len,
                                &more.h2d_bytes);
    else if (item.kind == ITEM_DOWNLOAD)
        fits = curdi_u64_add(more.copy_ops, 1u, &more.copy_ops)
               && curdi_u64_add(more.d2h_bytes, item.byte_len,
                                &more.d2h_bytes);
    curdi_copy_counts more_copies = batch->copies;
    if (item.kind == ITEM_COPY)
        fits = curdi_u64_add(more_copies.d2d_ops, 1u, &more_copies.d2d_ops)
               && curdi_u64_add(more_copies.d2d_bytes, item.byte_len,
                                &more_copies.d2d_bytes);
    if (!fits)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: the batch's byte counts would pass 2^64."
                          " Fix: split the batch.",
                          what);
    if (!curdi_array_reserve((void **)&batch->items, &batch->item_capacity,
                             batch->item_count + 1u, sizeof *batch->items)
        || !reserve_buffer_entries(batch, src_use != NULL ? 2u : 1u))
        return fail_memory(what);
    /* Nothing fails from here on: the item and its buffer entries have
     * their room. */
    CURDI_ASSERT(batch->item_count < batch->item_capacity);
    if (layout != NULL) {
        item.staging_offset = *layout;
        *layout = end & ~(size_t)(STAGING_ALIGN - 1u);
    }
    if (item.kind == ITEM_DOWNLOAD && reads_back_by_kernel(&item))
        batch->kernel_readbacks++;
    item.buffer = buffer_ref(batch, use);
    if (src_use != NULL)
        item.src_buffer = buffer_ref(batch, src_use);
    batch->counts = more;
    batch->copies = more_copies;
    batch->items[batch->item_count++] = item;
    batch->recapture = true;
    return CURD_OK;
}

/* The common part of fill, clear, upload and download: the batch, the
 * buffer and the range; `whole` (a clear) takes the whole buffer, which
 * is known once the buffer is resolved. capacity: the bytes at host
 * (SIZE_MAX where the caller states none: fills, uploads and
 * curd_batch_download, which trusts its caller like memcpy). */
static curd_status record_range(curd_batch *batch, item_kind kind,
                                curd_buffer buffer, bool whole, size_t offset,
                                size_t byte_len, const void *host,
                                size_t capacity, uint8_t value,
                                const char *what)
{
    curdi_resident_use use;
    curd_status status = check_batch(batch, what);
    /* Every host range goes through the transfers' check (a NULL one
     * with byte_len 0 is refused below, as an empty item), then the
     * capacity, in curd_buffer_download_range's order. */
    if (status == CURD_OK && kind != ITEM_FILL)
        status = curdi_host_range_check(host, byte_len, what,
                                        kind == ITEM_UPLOAD ? "src" : "dst");
    if (status == CURD_OK && byte_len > capacity)
        status = curdi_fail(CURD_E_RANGE,
                            "%s: %zu bytes asked for, but dst_capacity is"
                            " only %zu; nothing was recorded. Fix: pass a"
                            " destination of at least byte_len bytes, or"
                            " ask for fewer.",
                            what, byte_len, capacity);
    if (status == CURD_OK && !whole && byte_len == 0)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: byte_len is 0, so the item would do"
                            " nothing. Fix: record only items that move or"
                            " set bytes.",
                            what);
    if (status == CURD_OK)
        status = resolve_buffer(batch, buffer, what, &use);
    if (status == CURD_OK && whole)
        byte_len = use.byte_len;
    if (status == CURD_OK)
        status = curdi_range_check(offset, byte_len, use.byte_len, what);
    if (status != CURD_OK)
        return status;
    batch_item item = {.kind = kind, .offset = offset, .byte_len = byte_len,
                       .value = value};
    if (kind == ITEM_UPLOAD)
        item.src = host;
    else if (kind == ITEM_DOWNLOAD)
        item.dst = (void *)(uintptr_t)host;
    return item_append(batch, item, &use, NULL, what);
}

/* The checks of a launch's arguments that batches add to dispatch's: only
 * resident buffers, scalars and nulls; each buffer live and long enough.
 * uses receives each BUFFER argument's buffer. */
static curd_status check_launch_args(curd_batch *batch,
                                     const curd_program *program,
                                     const curd_arg *args, size_t nargs,
                                     curdi_resident_use *uses,
                                     const char *what)
{
    curd_status status =
        curdi_dispatch_check_args(program, args, nargs, what);
    for (size_t index = 0; status == CURD_OK && index < nargs; index++) {
        const curd_arg *arg = &args[index];
        if (arg->kind == CURD_ARG_HOST)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: argument %zu is borrowed host memory,"
                              " which a batch cannot keep between runs."
                              " Fix: allocate a resident buffer and record"
                              " curd_batch_upload / curd_batch_download"
                              " around the launch.",
                              what, index);
        if (arg->kind != CURD_ARG_BUFFER)
            continue;
        if (arg->host != NULL)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: argument %zu asks for a read-back into"
                              " host memory, which batch launches do not do."
                              " Fix: leave host NULL and record a"
                              " curd_batch_download after the launch.",
                              what, index);
        status = resolve_buffer(batch, arg->buffer, what, &uses[index]);
        if (status == CURD_OK)
            status = curdi_dispatch_check_binding(args, index,
                                                  uses[index].byte_len, what);
    }
    return status;
}

/* Whether a launch zeroes the argument's buffer before it runs: OUTPUT and
 * SCRATCH bindings, as curd_dispatch zeroes them, so that a role means
 * one thing everywhere (curd 1.2; a batch zeroed nothing before). */
static bool zeroes(const curd_arg *arg)
{
    return arg->kind == CURD_ARG_BUFFER
           && (arg->role == CURD_ROLE_OUTPUT
               || arg->role == CURD_ROLE_SCRATCH);
}

/* The run's fills with a launch's zeroing: counts with the old one's
 * (old_ops, old_bytes) taken out and that of args (uses their buffers)
 * put in; false when a sum would pass 2^64. */
static bool zero_counts(curdi_transfer_counts *counts, uint64_t old_ops,
                        uint64_t old_bytes, const curd_arg *args,
                        size_t nargs, const curdi_resident_use *uses,
                        uint64_t *out_ops, uint64_t *out_bytes)
{
    uint64_t ops = 0, bytes = 0;
    for (size_t index = 0; index < nargs; index++)
        if (zeroes(&args[index])) {
            ops++;
            if (!curdi_u64_add(bytes, uses[index].byte_len, &bytes))
                return false;
        }
    /* The old launch's were added to counts: they come out whole. */
    counts->fill_ops -= old_ops;
    counts->fill_bytes -= old_bytes;
    *out_ops = ops;
    *out_bytes = bytes;
    return curdi_u64_add(counts->fill_ops, ops, &counts->fill_ops)
           && curdi_u64_add(counts->fill_bytes, bytes, &counts->fill_bytes);
}

/* Copies the arguments into the launch and points its parameter list at
 * them: scalars into values (each at a 16-byte aligned offset), device
 * pointers into ptrs. Buffer entries are taken by the caller. */
static void launch_set_args(batch_launch *launch, const curd_arg *args,
                            const curdi_resident_use *uses)
{
    size_t offset = 0;
    for (size_t index = 0; index < launch->nargs; index++) {
        curd_arg *arg = &launch->args[index];
        *arg = args[index];
        arg->host = NULL;
        launch->ptrs[index] = 0;
        launch->params[index] = &launch->ptrs[index];
        if (arg->kind == CURD_ARG_SCALAR) {
            memcpy(launch->values + offset, args[index].value,
                   args[index].byte_len);
            arg->value = launch->values + offset;
            launch->params[index] = launch->values + offset;
            offset += (args[index].byte_len + 15u) & ~(size_t)15u;
        } else if (arg->kind == CURD_ARG_BUFFER) {
            launch->ptrs[index] = uses[index].device_ptr;
        }
    }
}

/* Bytes of a launch's scalar values, each rounded up to 16. */
static size_t scalar_bytes(const curd_arg *args, size_t nargs)
{
    size_t bytes = 0;
    for (size_t index = 0; index < nargs; index++)
        if (args[index].kind == CURD_ARG_SCALAR)
            bytes += (args[index].byte_len + 15u) & ~(size_t)15u;
    return bytes; /* each at most 4096 (checked): no overflow */
}

static batch_launch *launch_new(size_t nargs, size_t values_bytes,
                                uint32_t iterations)
{
    /* One block: the struct, then arrays of 8-byte and then 4-byte
     * elements, then the values. */
    size_t per_arg = sizeof(curd_arg) + sizeof(uint64_t) + sizeof(void *)
                     + sizeof(uint32_t);
    size_t bytes;
    if (!curdi_size_mul(nargs, per_arg, &bytes)
        || !curdi_size_add(bytes, sizeof(batch_launch) + 16u, &bytes)
        || !curdi_size_add(bytes, values_bytes, &bytes)
        || !curdi_size_add(bytes,
                           (size_t)iterations * sizeof(curdi_cu_graph_node),
                           &bytes))
        return NULL;
    batch_launch *launch = calloc(1, bytes);
    if (launch == NULL)
        return NULL;
    unsigned char *next = (unsigned char *)(launch + 1);
    launch->nargs = nargs;
    launch->args = (curd_arg *)(void *)next;
    next += nargs * sizeof(curd_arg);
    launch->ptrs = (uint64_t *)(void *)next;
    next += nargs * sizeof(uint64_t);
    launch->params = (void **)(void *)next;
    next += nargs * sizeof(void *);
    launch->kernel.nodes = (curdi_cu_graph_node *)(void *)next;
    next += (size_t)iterations * sizeof(curdi_cu_graph_node);
    launch->buffer_of = (uint32_t *)(void *)next;
    next += nargs * sizeof(uint32_t);
    next += (16u - (uintptr_t)next % 16u) % 16u;
    launch->values = next;
    return launch;
}

/* ------------------------------------------------------------------------
 * A run
 * ---------------------------------------------------------------------- */

static void run_complete(curd_pending *pending, bool copy_out)
{
    batch_run *run = (batch_run *)(void *)pending;
    curd_batch *batch = run->batch;
    struct curdi_batch_room *room = batch->device->batch;
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
    atomic_fetch_add(&room->runs, 1u);
    if (run->replayed)
        atomic_fetch_add(&room->graph_replays, 1u);
    if (run->captured)
        atomic_fetch_add(&room->graph_captures, 1u);
    atomic_fetch_add(&room->graph_updates, run->updated);
}

/* The run is the batch's own: nothing to free but the marks to end and,
 * after a failed run (drained by the pending room), the staging it took,
 * so the pools are as they were before it. */
static void run_release(curd_pending *pending)
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

static const curdi_pending_ops run_ops = {.complete = run_complete,
                                          .release = run_release};

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
    for (size_t index = 0; status == CURD_OK && index < batch->item_count;
         index++) {
        const batch_item *item = &batch->items[index];
        if (item->kind == ITEM_EXTERNAL)
            status = item->external_ops->poll(item->external, waited_ns,
                                              &in_progress, what);
    }
    *out_done = 0;
    if (status == CURD_OK && !in_progress) {
        status = curdi_device_enter(batch->device);
        if (status == CURD_OK) {
            curdi_cu_result rc = curdi_driver_note(
                curdi_driver_get()->cuStreamQuery(batch->run.base.stream));
            curdi_device_leave(batch->device);
            if (rc == CURDI_CUDA_SUCCESS)
                *out_done = 1;
            else if (rc != CURDI_CUDA_ERROR_NOT_READY)
                status = curdi_pending_fail_driver(batch->device, rc,
                                                   "cuStreamQuery");
        }
    }
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

static const curdi_pending_ops run_ops_polled = {.complete = run_complete,
                                                 .release = run_release,
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
    if (status == CURD_OK)
        batch->run.use_count = count;
    return status;
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
 * batch, the launch signals where the batch keeps room for it
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

/* The launches in item order, as the graph room's list of kernels. */
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
    curd_status status = CURD_OK;
    if (batch->any_dirty && !batch->recapture && batch->graph.nodes_known)
        status = graph_update(batch);
    if (status == CURD_OK
        && (batch->graph.exec == NULL || batch->recapture || batch->any_dirty))
        status = graph_capture(batch);
    if (status != CURD_OK)
        return status;
    status = curdi_pending_begin(&batch->run.base);
    if (status != CURD_OK)
        return status;
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
    status = curdi_graph_launch(&batch->graph, batch->device,
                                batch->run.base.stream);
    if (status != CURD_OK)
        return status;
    batch->run.replayed = true;
    return CURD_OK;
}

/* Starts a run: everything checked and marked, the uploads staged, the
 * work and the end event enqueued. On failure nothing stays marked,
 * counted or enqueued. */
static curd_status run_start(curd_batch *batch, bool timed, const char *what)
{
    curd_status status = check_batch(batch, what);
    if (status != CURD_OK)
        return status;
    curd_device *device = batch->device;
    status = curdi_transfer_counts_check(device, &batch->counts, what);
    if (status == CURD_OK)
        status = curdi_copy_counts_check(device, &batch->copies, what);
    for (size_t index = 0; status == CURD_OK && batch->externals != 0
                           && index < batch->item_count;
         index++)
        if (batch->items[index].kind == ITEM_EXTERNAL)
            status = batch->items[index].external_ops->check(
                batch->items[index].external, what);
    if (status != CURD_OK)
        return status;
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
    status = run_mark_buffers(batch, what);
    if (status != CURD_OK) {
        curdi_pending_release(&batch->run.base);
        return status;
    }
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        curdi_pending_release(&batch->run.base);
        return status;
    }
    status = curdi_pending_use_stream(&batch->run.base, batch->cu_stream,
                                      what);
    if (status == CURD_OK)
        status = curdi_upload_marks_wait_for(device, batch->uses,
                                              batch->run.use_count);
    if (status == CURD_OK)
        status = run_staging(batch, &batch->up, batch->upload_bytes,
                             &batch->run.took_up);
    if (status == CURD_OK)
        status = run_staging(batch, &batch->down,
                             batch->download_bytes + batch_signal_line(batch),
                             &batch->run.took_down);
    if (status == CURD_OK)
        status = curdi_pending_acquire(&batch->run.base);
    if (status == CURD_OK && batch->kernel_readbacks != 0
        && !batch->readback_known)
        status = run_readback_kernels(batch);
    if (status == CURD_OK) {
        for (size_t index = 0; index < batch->item_count; index++) {
            const batch_item *item = &batch->items[index];
            if (item->kind == ITEM_UPLOAD)
                memcpy(batch->up.host + item->staging_offset, item->src,
                       item->byte_len);
        }
        if ((batch->flags & CURD_BATCH_GRAPH) != 0) {
            status = enqueue_graph(batch);
        } else {
            status = curdi_pending_begin(&batch->run.base);
            if (status == CURD_OK)
                status = enqueue_items(batch, batch->run.base.stream, false);
        }
    }
    if (status == CURD_OK)
        status = curdi_pending_end(&batch->run.base);
    if (status != CURD_OK) {
        if (batch->run.external_enqueued || batch->run.replayed)
            run_abort_externals(batch);
        curdi_pending_drain(&batch->run.base);
        curdi_device_leave(device);
        curdi_pending_release(&batch->run.base);
        return status;
    }
    curdi_device_leave(device);
    return CURD_OK;
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
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK && out_batch == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: out_batch is NULL. Fix: pass the address of"
                            " a curd_batch pointer.",
                            what);
    if (status == CURD_OK && options != NULL) {
        status = curdi_options_check(options, sizeof given,
                                     offsetof(curd_batch_options, flags)
                                         + sizeof given.flags,
                                     "curd_batch_options");
        if (status == CURD_OK)
            memcpy(&given, options,
                   options->struct_size < sizeof given ? options->struct_size
                                                       : sizeof given);
    }
    if (status == CURD_OK && (given.flags & ~CURD_BATCH_FLAGS_KNOWN) != 0)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: flags 0x%x set bits this version of curd"
                            " does not define (known: 0x%x). Fix: pass"
                            " CURD_BATCH_* flags only.",
                            what, given.flags, CURD_BATCH_FLAGS_KNOWN);
    if (status != CURD_OK)
        return status;
    curd_batch *batch = calloc(1, sizeof *batch);
    if (batch == NULL)
        return fail_memory(what);
    batch->device = device;
    batch->flags = given.flags;
    batch->cu_stream = given.cu_stream;
    batch_empty(batch);
    struct curdi_batch_room *room = device->batch;
    pthread_mutex_lock(&room->lock);
    batch->next = room->batches;
    if (room->batches != NULL)
        room->batches->prev = batch;
    room->batches = batch;
    pthread_mutex_unlock(&room->lock);
    *out_batch = batch;
    return CURD_OK;
}

CURD_API curd_status curd_batch_free(curd_batch *batch)
{
    if (batch == NULL)
        return CURD_OK;
    const char *what = "curd_batch_free";
    curd_status status = curdi_device_check(batch->device, what);
    if (status != CURD_OK && status != CURD_E_DEVICE_LOST)
        return status;
    if (batch->running)
        return curdi_fail(CURD_E_BUSY,
                          "%s: a run of this batch is still pending; nothing"
                          " was freed. Fix: curd_pending_wait or"
                          " curd_pending_free it first.",
                          what);
    struct curdi_batch_room *room = batch->device->batch;
    pthread_mutex_lock(&room->lock);
    if (batch->prev != NULL)
        batch->prev->next = batch->next;
    else
        room->batches = batch->next;
    if (batch->next != NULL)
        batch->next->prev = batch->prev;
    pthread_mutex_unlock(&room->lock);
    /* The graph's destruction needs the context; on a lost device the
     * driver objects went with it. */
    curd_device *device = batch->device;
    bool entered = status == CURD_OK && curdi_device_enter(device) == CURD_OK;
    if (!entered)
        curdi_graph_forget(&batch->graph);
    batch_destroy(batch);
    if (entered)
        curdi_device_leave(device);
    return CURD_OK;
}

CURD_API curd_status curd_batch_reset(curd_batch *batch)
{
    curd_status status = check_batch(batch, "curd_batch_reset");
    /* A graph holding external items' work (NCCL's) goes before they
     * do: their communicators wait for it. */
    bool drop = status == CURD_OK && batch->externals != 0
                && batch->graph.graph != NULL;
    if (drop)
        status = curdi_device_enter(batch->device);
    if (status != CURD_OK)
        return status;
    if (drop) {
        graph_drop(batch);
        curdi_device_leave(batch->device);
    }
    batch_empty(batch);
    return CURD_OK;
}

CURD_API curd_status curd_batch_fill(curd_batch *batch, curd_buffer buffer,
                                     size_t offset, size_t byte_len,
                                     uint8_t value)
{
    return record_range(batch, ITEM_FILL, buffer, false, offset, byte_len,
                        NULL, SIZE_MAX, value, "curd_batch_fill");
}

CURD_API curd_status curd_batch_clear(curd_batch *batch, curd_buffer buffer)
{
    return record_range(batch, ITEM_FILL, buffer, true, 0, 0, NULL, SIZE_MAX,
                        0, "curd_batch_clear");
}

CURD_API curd_status curd_batch_upload(curd_batch *batch, curd_buffer buffer,
                                       size_t offset, const void *src,
                                       size_t byte_len)
{
    return record_range(batch, ITEM_UPLOAD, buffer, false, offset, byte_len,
                        src, SIZE_MAX, 0, "curd_batch_upload");
}

CURD_API curd_status curd_batch_download(curd_batch *batch,
                                         curd_buffer buffer, size_t offset,
                                         size_t byte_len, void *dst)
{
    return record_range(batch, ITEM_DOWNLOAD, buffer, false, offset,
                        byte_len, dst, SIZE_MAX, 0, "curd_batch_download");
}

CURD_API curd_status curd_batch_download_range(curd_batch *batch,
                                               curd_buffer buffer,
                                               size_t offset, size_t byte_len,
                                               void *dst, size_t dst_capacity)
{
    return record_range(batch, ITEM_DOWNLOAD, buffer, false, offset,
                        byte_len, dst, dst_capacity, 0,
                        "curd_batch_download_range");
}

CURD_API curd_status curd_batch_copy(curd_batch *batch, const curd_copy *copy)
{
    const char *what = "curd_batch_copy";
    curdi_resident_use uses[2];
    curd_status status = check_batch(batch, what);
    if (status == CURD_OK)
        status = curdi_copy_check_one(batch->device, copy, what, uses);
    if (status != CURD_OK)
        return status;
    /* Both ranges lie inside their buffers, whose sizes are size_t. */
    batch_item item = {.kind = ITEM_COPY,
                       .offset = (size_t)copy->dst_offset,
                       .byte_len = (size_t)copy->byte_len,
                       .src_offset = (size_t)copy->src_offset};
    return item_append(batch, item, &uses[0], &uses[1], what);
}

curd_status curdi_batch_check(curd_batch *batch, const char *what,
                              curd_device **out_device)
{
    curd_status status = check_batch(batch, what);
    if (status == CURD_OK)
        *out_device = batch->device;
    return status;
}

curd_status curdi_batch_record_external(curd_batch *batch,
                                        const curdi_batch_external_ops *ops,
                                        void *external,
                                        const curdi_resident_use *uses,
                                        size_t use_count, const char *what)
{
    batch_item item = {.kind = ITEM_EXTERNAL,
                       .external_ops = ops,
                       .external = external};
    curd_status status = item_append(batch, item, &uses[0],
                                     use_count > 1 ? &uses[1] : NULL, what);
    if (status == CURD_OK)
        batch->externals++;
    return status;
}

/* Takes the entries of a launch's BUFFER arguments (room for nargs more
 * entries is reserved by the caller). */
static void launch_take_buffers(curd_batch *batch, batch_launch *launch,
                                const curdi_resident_use *uses)
{
    for (size_t index = 0; index < launch->nargs; index++)
        if (launch->args[index].kind == CURD_ARG_BUFFER)
            launch->buffer_of[index] = buffer_ref(batch, &uses[index]);
}

static void launch_drop_buffers(curd_batch *batch, batch_launch *launch)
{
    for (size_t index = 0; index < launch->nargs; index++)
        if (launch->args[index].kind == CURD_ARG_BUFFER)
            buffer_unref(batch, launch->buffer_of[index]);
}

CURD_API curd_status curd_batch_launch(curd_batch *batch,
                                       const curd_program *program,
                                       const curd_launch *launch,
                                       const curd_arg *args, size_t nargs,
                                       size_t *out_item)
{
    const char *what = "curd_batch_launch";
    curdi_launch_shape shape;
    curdi_resident_use *uses = NULL;
    curd_status status = check_batch(batch, what);
    if (status == CURD_OK)
        status = curdi_program_check(program, batch->device, what);
    if (status == CURD_OK)
        status = check_batch_shape(batch, program, launch, what, &shape);
    if (status == CURD_OK && nargs != 0
        && (uses = calloc(nargs, sizeof *uses)) == NULL)
        status = fail_memory(what);
    if (status == CURD_OK)
        status = check_launch_args(batch, program, args, nargs, uses, what);
    curdi_transfer_counts more = batch->counts;
    uint64_t zero_ops = 0, zero_bytes = 0;
    if (status == CURD_OK
        && !zero_counts(&more, 0, 0, args, nargs, uses, &zero_ops,
                        &zero_bytes))
        status = curdi_fail(CURD_E_OVERFLOW,
                            "%s: the batch's byte counts would pass 2^64."
                            " Fix: split the batch.",
                            what);
    batch_launch *recorded = NULL;
    if (status == CURD_OK
        && ((recorded = launch_new(nargs, scalar_bytes(args, nargs),
                                   shape.iterations))
                == NULL
            || !reserve_buffer_entries(batch, nargs)
            || !curdi_array_reserve((void **)&batch->items,
                                    &batch->item_capacity,
                                    batch->item_count + 1u,
                                    sizeof *batch->items)))
        status = fail_memory(what);
    if (status != CURD_OK) {
        free(recorded);
        free(uses);
        return status;
    }
    recorded->program = program;
    recorded->shape = shape;
    recorded->zero_ops = zero_ops;
    recorded->zero_bytes = zero_bytes;
    batch->counts = more;
    launch_set_args(recorded, args, uses);
    launch_take_buffers(batch, recorded, uses);
    free(uses);
    curdi_program_use(program);
    batch->launches += shape.iterations;
    batch_item item = {.kind = ITEM_LAUNCH, .launch = recorded};
    batch->items[batch->item_count] = item;
    if (out_item != NULL)
        *out_item = batch->item_count;
    batch->item_count++;
    batch->recapture = true;
    return CURD_OK;
}

/* The launch item `item` names, for the set calls. */
static curd_status launch_item(curd_batch *batch, size_t item,
                               const char *what, batch_launch **out)
{
    if (item >= batch->item_count || batch->items[item].launch == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: item %zu is not a launch of this batch (it"
                          " has %zu items). Fix: pass the index that"
                          " curd_batch_launch returned in out_item.",
                          what, item, batch->item_count);
    *out = batch->items[item].launch;
    return CURD_OK;
}

CURD_API curd_status curd_batch_set_args(curd_batch *batch, size_t item,
                                         const curd_arg *args, size_t nargs)
{
    const char *what = "curd_batch_set_args";
    batch_launch *recorded = NULL;
    curdi_resident_use *uses = NULL;
    curd_status status = check_batch(batch, what);
    if (status == CURD_OK)
        status = launch_item(batch, item, what, &recorded);
    if (status == CURD_OK && nargs != recorded->nargs)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: launch %zu was recorded with %zu arguments,"
                            " not %zu. Fix: pass the same parameter list"
                            " with other values.",
                            what, item, recorded->nargs, nargs);
    for (size_t index = 0; status == CURD_OK && index < nargs; index++) {
        const curd_arg *old = &recorded->args[index];
        if (args == NULL)
            status = curdi_dispatch_check_args(recorded->program, args,
                                               nargs, what);
        else if (args[index].kind != old->kind
                 || (old->kind == CURD_ARG_SCALAR
                     && args[index].byte_len != old->byte_len))
            status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                                "%s: argument %zu of launch %zu was recorded"
                                " as kind %" PRIu32 " of %zu bytes; it is"
                                " now kind %" PRIu32 " of %zu bytes. Fix:"
                                " keep each argument's kind and size;"
                                " record a new launch for another kernel"
                                " signature.",
                                what, index, item, old->kind, old->byte_len,
                                args[index].kind, args[index].byte_len);
    }
    if (status == CURD_OK && nargs != 0
        && (uses = calloc(nargs, sizeof *uses)) == NULL)
        status = fail_memory(what);
    if (status == CURD_OK)
        status = check_launch_args(batch, recorded->program, args, nargs,
                                   uses, what);
    curdi_transfer_counts more = batch->counts;
    uint64_t zero_ops = 0, zero_bytes = 0;
    if (status == CURD_OK
        && !zero_counts(&more, recorded->zero_ops, recorded->zero_bytes,
                        args, nargs, uses, &zero_ops, &zero_bytes))
        status = curdi_fail(CURD_E_OVERFLOW,
                            "%s: the batch's byte counts would pass 2^64."
                            " Fix: split the batch.",
                            what);
    if (status == CURD_OK && !reserve_buffer_entries(batch, nargs))
        status = fail_memory(what);
    if (status != CURD_OK) {
        free(uses);
        return status;
    }
    /* A graph updates kernel nodes in place, not the memsets before them:
     * other buffers zeroed (or zeroed no more) capture the graph anew. */
    for (size_t index = 0; index < nargs; index++) {
        bool was = zeroes(&recorded->args[index]);
        bool now = zeroes(&args[index]);
        if (was != now
            || (now
                && (recorded->ptrs[index] != uses[index].device_ptr
                    || batch->buffers[recorded->buffer_of[index]].byte_len
                           != uses[index].byte_len)))
            batch->recapture = true;
    }
    batch->counts = more;
    recorded->zero_ops = zero_ops;
    recorded->zero_bytes = zero_bytes;
    /* An entry dropped to no references is free to be taken again, by
     * the same buffer or another. */
    launch_drop_buffers(batch, recorded);
    launch_set_args(recorded, args, uses);
    launch_take_buffers(batch, recorded, uses);
    free(uses);
    recorded->dirty = true;
    batch->any_dirty = true;
    return CURD_OK;
}

CURD_API curd_status curd_batch_set_launch(curd_batch *batch, size_t item,
                                           const curd_launch *launch)
{
    const char *what = "curd_batch_set_launch";
    batch_launch *recorded = NULL;
    curdi_launch_shape shape;
    curd_status status = check_batch(batch, what);
    if (status == CURD_OK)
        status = launch_item(batch, item, what, &recorded);
    if (status == CURD_OK)
        status = check_batch_shape(batch, recorded->program, launch, what,
                                   &shape);
    if (status == CURD_OK
        && (shape.cooperative != recorded->shape.cooperative
            || shape.iterations != recorded->shape.iterations))
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: launch %zu was recorded %s with %" PRIu32
                            " iterations; the new launch is %s with %" PRIu32
                            ". Fix: change only the grid, block and dynamic"
                            " shared memory; record a new launch for the"
                            " rest.",
                            what, item,
                            recorded->shape.cooperative ? "cooperative"
                                                        : "plain",
                            recorded->shape.iterations,
                            shape.cooperative ? "cooperative" : "plain",
                            shape.iterations);
    if (status != CURD_OK)
        return status;
    recorded->shape = shape;
    recorded->dirty = true;
    batch->any_dirty = true;
    return CURD_OK;
}

CURD_API curd_status curd_batch_run_async(curd_batch *batch,
                                          curd_pending **out_pending)
{
    CURDI_RANGE("curd_batch_run_async");
    const char *what = "curd_batch_run_async";
    if (out_pending == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_pending is NULL. Fix: pass the address of"
                          " a curd_pending pointer.",
                          what);
    /* Timed for curd_pending_wait's timing, but on the caller's stream,
     * whose work the caller times itself (lib/core/pending.h). */
    curd_status status = run_start(batch, batch->cu_stream == NULL, what);
    if (status == CURD_OK) {
        curdi_pending_publish(&batch->run.base);
        *out_pending = &batch->run.base;
    }
    return status;
}

CURD_API curd_status curd_batch_run(curd_batch *batch, curd_timing *timing)
{
    CURDI_RANGE("curd_batch_run");
    const char *what = "curd_batch_run";
    curd_status status = CURD_OK;
    if (timing != NULL)
        status = curdi_result_struct_check(timing, CURDI_TIMING_SIZE_1_0,
                                           what, "timing", "curd_timing");
    /* Untimed unless asked: one stream synchronisation is the fence. */
    if (status == CURD_OK)
        status = run_start(batch, timing != NULL, what);
    if (status != CURD_OK)
        return status;
    status = curdi_pending_finish(&batch->run.base, true);
    if (status == CURD_OK && timing != NULL)
        curdi_pending_timing(&batch->run.base, timing);
    curdi_pending_release(&batch->run.base);
    return status;
}
