/* batch_state.h - a batch's state, shared by the files of the batch
 * module: the module's state behind curd_device.batch, a batch's items,
 * buffers and launches, its run, and the small checks that recording
 * (batch_record.c) and running (batch_run.c) both make. Private to
 * lib/launch/batch*.c; the rest of the library sees batch.h. */
#ifndef CURD_LIB_LAUNCH_BATCH_STATE_H
#define CURD_LIB_LAUNCH_BATCH_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "launch/dispatch.h"
#include "launch/graph.h"
#include "memory/resident.h"
#include "memory/staging.h"
#include "transfer/copy.h"
#include "transfer/gather.h"
#include "transfer/transfer.h"

struct curdi_batch_external_ops;

/* ------------------------------------------------------------------------
 * The module's state
 * ---------------------------------------------------------------------- */

struct curdi_batch_state {
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
    ITEM_COPY = 5,    /* within the batch's device (transfer/copy.h) */
    ITEM_EXTERNAL = 6 /* a module above's (batch.h: a collective) */
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
    /* What the graph module sees of it; kernel.nodes holds a captured
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
    const struct curdi_batch_external_ops *external_ops; /* external items */
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
    curd_batch *prev, *next; /* the module's list */
};

/* Staging offsets are 16-byte aligned, so the host copies run aligned. */
#define STAGING_ALIGN 16u
/* A read-back launch's signal words: one line (gather.h). */
#define SIGNAL_LINE_BYTES ((size_t)CURDI_GATHER_SIGNAL_BLOCKS * 4u)

/* Downloads up to this many bytes are read back by the transfer module's
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

static inline curd_status fail_memory(const char *what)
{
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "%s: could not grow the batch. Fix: free host memory,"
                      " or record fewer items.",
                      what);
}

static inline curd_status check_batch(const curd_batch *batch,
                                      const char *what)
{
    if (batch == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: batch is NULL. Fix: pass the curd_batch that"
                          " curd_batch_new made.",
                          what);
    curd_status status = curdi_core_device_check(batch->device, what);
    if (status != CURD_OK)
        return status;
    if (batch->running)
        return curdi_fail(CURD_E_BUSY,
                          "%s: a run of this batch is still pending; the"
                          " batch was not changed. Fix: curd_pending_wait"
                          " or curd_pending_free it first.",
                          what);
    return CURD_OK;
}

/* Whether a download fits one read-back launch (READBACK_KERNEL_MAX),
 * its staging bytes within the 4 GiB the kernel addresses. */
static inline bool reads_back_by_kernel(const batch_item *item)
{
    return item->byte_len <= READBACK_KERNEL_MAX
           && item->staging_offset <= UINT32_MAX - item->byte_len;
}

/* The bytes after the downloads' staging that a graph batch ending in a
 * download read back by a kernel keeps for that launch's signal words
 * (at download_bytes, a multiple of STAGING_ALIGN, within the 4 GiB the
 * kernel addresses); 0 for any other batch. */
static inline size_t batch_signal_line(const curd_batch *batch)
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

/* Whether a launch zeroes the argument's buffer before it runs: OUTPUT and
 * SCRATCH bindings, as curd_dispatch zeroes them, so that a role means
 * one thing everywhere (curd 1.2; a batch zeroed nothing before). */
static inline bool zeroes(const curd_arg *arg)
{
    return arg->kind == CURD_ARG_BUFFER
           && (arg->role == CURD_ROLE_OUTPUT
               || arg->role == CURD_ROLE_SCRATCH);
}

#endif
