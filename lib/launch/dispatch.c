/* dispatch.c - launching a program's kernel against borrowed host memory
 * and resident buffers, synchronously or as a curd_pending: the module's
 * counters, how an argument is moved, the launch itself, and one dispatch
 * from start to end. The checks of the launch shape and the arguments,
 * which batches share, are dispatch_check.c.
 *
 * A dispatch from start to end:
 *  1. Check the launch and every argument; resolve every resident buffer
 *     and mark it in use (lib/memory/resident.h), all or none; check every length.
 *     Nothing is allocated or enqueued before all of it passed.
 *  2. Enter the device; take a pooled stream and two timing events (core),
 *     a device block for each borrowed argument (the device pool) and a
 *     pinned staging block for each one that moves bytes (the pinned pool;
 *     a read-back alone lands in the landing area when it can, at a place
 *     the CPU has not read lately: lib/memory/landing.h).
 *  3. Enqueue: inputs up, outputs and scratch zeroed, the launches, the
 *     read-backs into staging, the end event. The caller's input memory is
 *     no longer needed once this returns.
 *  4. Wait on the end event (not on the stream), copy the read-backs into
 *     the caller's memory, give everything back and end the marks.
 * A fault that loses the context marks the device lost (core.h). A
 * dispatch is counted (curd_stats) once its work is complete, and with
 * CURD_TRACE set it writes its stage times as one line. */
#include "launch/dispatch.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/clock.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/program.h"
#include "memory/landing.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "memory/staging.h"
#include "transfer/transfer.h"
#include "transfer/upload_marks.h"

/* ------------------------------------------------------------------------
 * The module: the counters of completed dispatches
 * ---------------------------------------------------------------------- */

struct curdi_dispatch_state {
    _Atomic uint64_t dispatches;
    _Atomic uint64_t launches;
    _Atomic uint64_t device_ns;
    _Atomic uint64_t enqueue_ns;
    _Atomic uint64_t wait_ns;
};

curd_status curdi_dispatch_open(curd_device *device)
{
    struct curdi_dispatch_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: %zu bytes for the dispatch state"
                          " could not be allocated. Fix: free host memory"
                          " and try again.",
                          sizeof *state);
    device->dispatch = state;
    return CURD_OK;
}

void curdi_dispatch_close(curd_device *device)
{
    if (device == NULL)
        return;
    free(device->dispatch);
    device->dispatch = NULL;
}

void curdi_dispatch_stats(curd_device *device, curd_stats *stats)
{
    struct curdi_dispatch_state *state = device->dispatch;
    stats->dispatches = atomic_load(&state->dispatches);
    stats->launches = atomic_load(&state->launches);
    stats->dispatch_device_ns = atomic_load(&state->device_ns);
    stats->dispatch_enqueue_ns = atomic_load(&state->enqueue_ns);
    stats->dispatch_wait_ns = atomic_load(&state->wait_ns);
}

void curdi_dispatch_stats_reset(curd_device *device)
{
    struct curdi_dispatch_state *state = device->dispatch;
    atomic_store(&state->dispatches, 0);
    atomic_store(&state->launches, 0);
    atomic_store(&state->device_ns, 0);
    atomic_store(&state->enqueue_ns, 0);
    atomic_store(&state->wait_ns, 0);
}

void curdi_dispatch_count_launches(curd_device *device, uint64_t launches)
{
    atomic_fetch_add(&device->dispatch->launches, launches);
}

/* A failure the context did not survive (entering it, or a pool's driver
 * call, reported it) marks the device lost, as a failed enqueue does. */
static curd_status lost_if(curd_device *device, curd_status status)
{
    if (status == CURD_E_DEVICE_LOST)
        curdi_core_device_mark_lost(device);
    return status;
}

/* One argument as the dispatch moves it. */
typedef struct bound {
    uint64_t device_ptr;  /* what a pointer parameter passes (0 for NULL) */
    size_t device_bytes;  /* HOST: the block's bytes; BUFFER: the buffer's */
    uint64_t block;       /* HOST: the device block, 0 before it is taken */
    curdi_staging staging; /* HOST inputs and read-backs */
    /* A read-back's place in the landing area, if it took one (staging
     * then names it: lib/memory/landing.h, curdi_landing_or_staging). */
    curdi_landing landing;
    size_t read_offset;   /* read-back: from the device bytes ... */
    size_t read_len;      /* ... this many, into host (0: none) */
    unsigned char *host;  /* read-back destination */
} bound;

static bool is_binding(const curd_arg *arg)
{
    return arg->kind == CURD_ARG_HOST || arg->kind == CURD_ARG_BUFFER;
}

static bool reads_input(const curd_arg *arg)
{
    return arg->role == CURD_ROLE_INPUT || arg->role == CURD_ROLE_INOUT;
}

static bool writes_output(const curd_arg *arg)
{
    return arg->role == CURD_ROLE_OUTPUT || arg->role == CURD_ROLE_INOUT;
}

/* The part of a binding read back: [offset, offset + len) of device_bytes,
 * into host of byte_len; len 0 for none. */
static curd_status read_range(const curd_arg *arg, size_t index,
                              size_t device_bytes, const char *what,
                              bound *out)
{
    out->read_len = 0;
    if (!writes_output(arg) || arg->host == NULL)
        return CURD_OK;
    /* read_len 0: to the end (an offset past the end fails the check). */
    uint64_t len = arg->read_len;
    if (len == 0 && arg->read_offset <= device_bytes)
        len = device_bytes - arg->read_offset;
    char label[96];
    snprintf(label, sizeof label, "%s argument %zu's read-back", what, index);
    curd_status status =
        curdi_checked_range(arg->read_offset, len, device_bytes, label);
    if (status != CURD_OK)
        return status;
    if (len > arg->byte_len)
        return curdi_fail(CURD_E_RANGE,
                          "%s: argument %zu reads back %" PRIu64 " bytes into"
                          " host memory of %zu; nothing was enqueued. Fix:"
                          " pass a destination of at least the read-back's"
                          " length, or read less.",
                          what, index, len, arg->byte_len);
    out->read_offset = (size_t)arg->read_offset;
    out->read_len = (size_t)len;
    out->host = arg->host;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Enqueueing
 * ---------------------------------------------------------------------- */

curd_status curdi_dispatch_enqueue_launch(curd_device *device,
                                          const curd_program *program,
                                          const curdi_launch_shape *shape,
                                          void **params,
                                          curdi_cu_stream stream)
{
    CURDI_RANGE_NAMED(curdi_program_entry(program));
    const curdi_driver *driver = curdi_driver_get();
    if (shape->dynamic_shared_bytes > 48u * 1024u) {
        curd_status status = curdi_program_reserve_dynamic_shared(
            program, shape->dynamic_shared_bytes);
        if (status != CURD_OK)
            return status;
    }
    curdi_cu_function function = curdi_program_function(program);
    for (uint32_t launch = 0; launch < shape->iterations; launch++) {
        curdi_cu_result rc =
            shape->cooperative
                ? driver->cuLaunchCooperativeKernel(
                      function, shape->grid[0], shape->grid[1],
                      shape->grid[2], shape->block[0], shape->block[1],
                      shape->block[2], shape->dynamic_shared_bytes, stream,
                      params)
                : driver->cuLaunchKernel(
                      function, shape->grid[0], shape->grid[1],
                      shape->grid[2], shape->block[0], shape->block[1],
                      shape->block[2], shape->dynamic_shared_bytes, stream,
                      params, NULL);
        if (curdi_driver_note(rc) != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(
                device, rc,
                shape->cooperative ? "cuLaunchCooperativeKernel"
                                   : "cuLaunchKernel");
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * A dispatch in flight
 * ---------------------------------------------------------------------- */

/* A dispatch's curd_pending (lib/core/pending.h) and what it holds. */
typedef struct dispatch_run {
    curd_pending base;
    size_t nargs;
    bound *bounds;
    curdi_resident_use *uses; /* the resident buffers, marked in use */
    uint64_t *ids;
    void **params;            /* the launch's parameter list */
    size_t use_count;
    uint32_t launches;        /* the launch's iterations */
    /* What its copies, zeroing and wait add to the transfer counters,
     * checked before it is enqueued and added once it completed. */
    curdi_transfer_counts counts;
    curd_timing *timing;      /* curd_launch.timing, or NULL */
    /* CURD_TRACE: what ran, and when validation and staging ended (ns
     * since start_ns); set only when tracing. */
    bool trace;
    uint64_t prepared_ns;
    uint64_t staged_ns;
    char trace_label[160];
} dispatch_run;

/* The work completed: the read-backs into the caller's memory, then the
 * dispatch counted (and traced when CURD_TRACE is set). A dispatch whose
 * wait failed never gets here, so it counts nothing. */
static void dispatch_run_complete(curd_pending *pending, bool copy_out)
{
    dispatch_run *run = (dispatch_run *)(void *)pending;
    /* The copy-out's own time is read for the trace alone. */
    uint64_t copy_start = run->trace ? curdi_clock_ns() : 0u;
    for (size_t index = 0; copy_out && index < run->nargs; index++) {
        bound *b = &run->bounds[index];
        if (b->read_len != 0)
            (void)curdi_staging_read(&b->staging, 0, b->read_len, b->host,
                                     b->read_len);
    }
    uint64_t end = run->trace ? curdi_clock_ns() : 0u;
    struct curdi_dispatch_state *state = pending->device->dispatch;
    curdi_transfer_counts_add(pending->device, &run->counts);
    atomic_fetch_add(&state->dispatches, 1);
    atomic_fetch_add(&state->launches, run->launches);
    atomic_fetch_add(&state->device_ns, pending->device_ns);
    atomic_fetch_add(&state->enqueue_ns, pending->enqueue_ns);
    atomic_fetch_add(&state->wait_ns, pending->wait_ns);
    if (!run->trace)
        return;
    curdi_trace("dispatch %s: validate %" PRIu64 " ns, stage %" PRIu64
                " ns, enqueue %" PRIu64 " ns, wait %" PRIu64
                " ns, copy-out %" PRIu64 " ns, total %" PRIu64
                " ns (device %" PRIu64 " ns)",
                run->trace_label, run->prepared_ns,
                run->staged_ns - run->prepared_ns,
                pending->enqueue_ns - run->staged_ns, pending->wait_ns,
                end - copy_start, end - pending->start_ns,
                pending->device_ns);
}

static void dispatch_run_release(curd_pending *pending)
{
    dispatch_run *run = (dispatch_run *)(void *)pending;
    curd_device *device = pending->device;
    for (size_t index = 0; index < run->nargs; index++) {
        bound *b = &run->bounds[index];
        curdi_landing_put_back(device, &b->landing, &b->staging);
        if (b->block != 0)
            (void)curdi_memory_device_release(device, b->block);
    }
    if (run->use_count != 0)
        curdi_resident_use_end(device, run->uses, run->use_count);
    free(run);
}

/* The run's struct, rounded up so that the bounds after it are aligned. */
#define RUN_HEAD_BYTES                                                        \
    ((sizeof(dispatch_run) + _Alignof(max_align_t) - 1u)                      \
     & ~(_Alignof(max_align_t) - 1u))

static const curdi_pending_ops run_ops = {.complete = dispatch_run_complete,
                                          .release = dispatch_run_release};

/* Allocates the run and resolves every argument: all checks before
 * anything is taken from a pool. */
static curd_status run_prepare(curd_device *device,
                               const curd_program *program,
                               const curd_arg *args, size_t nargs,
                               const char *what, dispatch_run **out)
{
    curd_status status;
    uint64_t transient = 0;
    size_t buffers = 0;
    status = curdi_dispatch_check_args(program, args, nargs, what);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < nargs; index++) {
        if (args[index].kind == CURD_ARG_BUFFER)
            buffers++;
        if (args[index].kind == CURD_ARG_HOST
            && !curdi_u64_add(transient, args[index].byte_len, &transient))
            transient = UINT64_MAX;
    }
    if (transient > device->props.total_memory_bytes)
        return curdi_fail(CURD_E_BUDGET,
                          "%s: the borrowed arguments need %" PRIu64 " bytes"
                          " of device memory at once, more than device %d"
                          " has (%" PRIu64 "); nothing was allocated. Fix:"
                          " keep large data resident (curd_buffer_alloc)"
                          " and dispatch on it in parts.",
                          what, transient, device->ordinal,
                          device->props.total_memory_bytes);

    /* One block: the run, then bounds, uses, ids and params (all 8-byte
     * aligned): one allocation a dispatch. */
    size_t bytes;
    dispatch_run *run = NULL;
    if (curdi_size_mul(nargs + 1u,
                       sizeof(bound) + sizeof(curdi_resident_use)
                           + sizeof(uint64_t) + sizeof(void *),
                       &bytes)
        && curdi_size_add(bytes, RUN_HEAD_BYTES, &bytes))
        run = calloc(1, bytes);
    if (run == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not allocate the state of a dispatch of"
                          " %zu arguments. Fix: free host memory.",
                          what, nargs);
    curdi_pending_init(&run->base, device, &run_ops);
    run->bounds = (bound *)(void *)((unsigned char *)run + RUN_HEAD_BYTES);
    run->nargs = nargs;
    run->uses = (curdi_resident_use *)(void *)(run->bounds + nargs + 1u);
    run->ids = (uint64_t *)(void *)(run->uses + nargs + 1u);
    run->params = (void **)(void *)(run->ids + nargs + 1u);
    for (size_t index = 0, next = 0; index < nargs; index++)
        if (args[index].kind == CURD_ARG_BUFFER)
            run->ids[next++] = args[index].buffer.id;
    if (buffers != 0) {
        CURDI_TRY(status,
                  curdi_resident_use_begin(device, what, run->ids, buffers,
                                           run->uses),
                  release);
        run->use_count = buffers;
    }
    for (size_t index = 0, next = 0; index < nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &run->bounds[index];
        if (!is_binding(arg))
            continue;
        if (arg->kind == CURD_ARG_BUFFER) {
            const curdi_resident_use *use = &run->uses[next++];
            b->device_ptr = use->device_ptr;
            b->device_bytes = use->byte_len;
        } else {
            b->device_bytes = arg->byte_len;
        }
        CURDI_TRY(status,
                  curdi_dispatch_check_binding(args, index, b->device_bytes,
                                               what),
                  release);
        CURDI_TRY(status, read_range(arg, index, b->device_bytes, what, b),
                  release);
    }
    *out = run;
    return CURD_OK;
release:
    curdi_pending_release(&run->base);
    return status;
}

/* What run_enqueue will move, set and wait for, as a transfer counts it:
 * an input's upload and a read-back are a copy each (h2d_bytes,
 * d2h_bytes), an output's zeroing a fill, the wait one fence. Checked
 * against the counters before anything is taken. */
static curd_status run_count(dispatch_run *run, const curd_arg *args,
                             const char *what)
{
    curdi_transfer_counts counts = {.fences = 1};
    bool fits = true;
    for (size_t index = 0; index < run->nargs; index++) {
        const curd_arg *arg = &args[index];
        const bound *b = &run->bounds[index];
        if (!is_binding(arg))
            continue;
        if (arg->kind == CURD_ARG_HOST && reads_input(arg)) {
            fits = fits && curdi_u64_add(counts.h2d_bytes, arg->byte_len,
                                         &counts.h2d_bytes);
            counts.copy_ops++;
        } else if (!reads_input(arg) && b->device_bytes != 0) {
            fits = fits && curdi_u64_add(counts.fill_bytes, b->device_bytes,
                                         &counts.fill_bytes);
            counts.fill_ops++;
        }
        if (b->read_len != 0) {
            fits = fits && curdi_u64_add(counts.d2h_bytes, b->read_len,
                                         &counts.d2h_bytes);
            counts.copy_ops++;
        }
    }
    if (!fits)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: the dispatch's bytes add up past 2^64-1."
                          " Fix: dispatch on fewer or shorter bindings.",
                          what);
    run->counts = counts;
    return curdi_transfer_counts_check(run->base.device, &counts, what);
}

/* Takes the blocks, the stream and the events; stages the inputs. Context
 * current. */
static curd_status run_acquire(dispatch_run *run, const curd_arg *args)
{
    curd_device *device = run->base.device;
    curd_status status;
    for (size_t index = 0; index < run->nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &run->bounds[index];
        if (arg->kind != CURD_ARG_HOST)
            continue;
        size_t class_bytes;
        CURDI_TRY(status,
                  curdi_memory_device_acquire(device, arg->byte_len,
                                              &b->block, &class_bytes),
                  out);
        b->device_ptr = b->block;
        if (!reads_input(arg) || arg->byte_len == 0)
            continue;
        CURDI_TRY(status,
                  curdi_memory_staging_acquire(device, arg->byte_len,
                                               &b->staging),
                  out);
        CURDI_TRY(status,
                  curdi_staging_write(&b->staging, 0, arg->byte_len,
                                      arg->host, arg->byte_len),
                  out);
    }
    /* A read-back with no input lands where it can: a DMA into lines the
     * CPU has just read waits on their snoops, and the pinned pool hands
     * out first the block the last dispatch's read-back was copied out of
     * (doc/PERFORMANCE.md, seventh run). An INOUT argument's read-back
     * comes back into its input block, which the CPU has just written:
     * landing it elsewhere made a 256 KiB dispatch slower (tenth run). */
    for (size_t index = 0; index < run->nargs; index++) {
        bound *b = &run->bounds[index];
        if (b->read_len != 0 && !(args[index].kind == CURD_ARG_HOST
                                  && reads_input(&args[index])))
            CURDI_TRY(status,
                      curdi_landing_or_staging(device, b->read_len,
                                               &b->landing, &b->staging),
                      out);
    }
    return curdi_pending_acquire(&run->base);
out:
    return status;
}

/* Enqueues the whole dispatch on the run's stream. Context current. */
static curd_status run_enqueue(dispatch_run *run, const curd_program *program,
                               const curdi_launch_shape *shape,
                               const curd_arg *args)
{
    curd_device *device = run->base.device;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_stream stream = run->base.stream;
    curdi_cu_result rc;
    curd_status status;
    CURDI_TRY(status, curdi_pending_begin(&run->base), out);
    for (size_t index = 0; index < run->nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &run->bounds[index];
        if (!is_binding(arg))
            continue;
        if (arg->kind == CURD_ARG_HOST && reads_input(arg)) {
            rc = curdi_driver_note(driver->cuMemcpyHtoDAsync(
                (curdi_cu_deviceptr)b->device_ptr, b->staging.host,
                arg->byte_len, stream));
            if (rc != CURDI_CUDA_SUCCESS)
                return curdi_pending_fail_driver(device, rc,
                                                 "cuMemcpyHtoDAsync");
        } else if (!reads_input(arg) && b->device_bytes != 0) {
            rc = curdi_driver_note(driver->cuMemsetD8Async(
                (curdi_cu_deviceptr)b->device_ptr, 0, b->device_bytes,
                stream));
            if (rc != CURDI_CUDA_SUCCESS)
                return curdi_pending_fail_driver(device, rc,
                                                 "cuMemsetD8Async");
        }
    }
    /* The driver copies every parameter's bytes when the launch is
     * enqueued, so pointing at the caller's scalars and at the bounds'
     * device pointers is enough. */
    for (size_t index = 0; index < run->nargs; index++)
        run->params[index] = args[index].kind == CURD_ARG_SCALAR
                                 ? (void *)(uintptr_t)args[index].value
                                 : &run->bounds[index].device_ptr;
    CURDI_TRY(status, curdi_pending_mark(&run->base, false), out);
    CURDI_TRY(status,
              curdi_dispatch_enqueue_launch(device, program, shape,
                                            run->params, stream),
              out);
    CURDI_TRY(status, curdi_pending_mark(&run->base, true), out);
    for (size_t index = 0; index < run->nargs; index++) {
        bound *b = &run->bounds[index];
        if (b->read_len == 0)
            continue;
        rc = curdi_driver_note(driver->cuMemcpyDtoHAsync(
            b->staging.host, (curdi_cu_deviceptr)(b->device_ptr + b->read_offset),
            b->read_len, stream));
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(device, rc, "cuMemcpyDtoHAsync");
    }
    return curdi_pending_end(&run->base);
out:
    return status;
}

/* Checks and enqueues a dispatch; *out_pending receives it. async: the
 * caller will receive the pending (curd_dispatch_async), so it takes its
 * slot in the registry of live pendings before anything is enqueued, and
 * is timed unless on the caller's stream. A synchronous dispatch that is
 * not traced runs untimed (lib/core/pending.h). */
static curd_status dispatch_start(curd_device *device,
                                  const curd_program *program,
                                  const curd_launch *launch,
                                  const curd_arg *args, size_t nargs,
                                  bool async, const char *what,
                                  curd_pending **out_pending)
{
    dispatch_run *run = NULL;
    curdi_launch_shape shape;
    curd_status status;
    CURDI_TRY(status, curdi_core_device_check(device, what), out);
    CURDI_TRY(status, curdi_program_check(program, device, what), out);
    CURDI_TRY(status, curdi_pending_check_out(out_pending, what), out);
    CURDI_TRY(status,
              curdi_dispatch_check_shape(device, program, launch, what,
                                         &shape),
              out);
    if (async && shape.timing != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: launch->timing is set, but an asynchronous"
                          " dispatch's timing comes from curd_pending_wait."
                          " Fix: leave launch->timing NULL and pass a"
                          " curd_timing to curd_pending_wait.",
                          what);
    CURDI_TRY(status, run_prepare(device, program, args, nargs, what, &run),
              out);
    CURDI_TRY(status, run_count(run, args, what), release);
    run->launches = shape.iterations;
    run->timing = shape.timing;
    run->trace = curdi_trace_enabled();
    /* Timed work is split: device_ns is the kernels alone. */
    /* On the caller's stream the caller times its own work: an
     * asynchronous dispatch there records no timed event. */
    run->base.timed = (async && shape.cu_stream == NULL) || run->trace
                      || shape.timing != NULL;
    run->base.split = true;
    if (run->trace) {
        run->prepared_ns = curdi_clock_ns() - run->base.start_ns;
        snprintf(run->trace_label, sizeof run->trace_label,
                 "%s grid %ux%ux%u block %ux%ux%u x%" PRIu32,
                 curdi_program_entry(program), shape.grid[0], shape.grid[1],
                 shape.grid[2], shape.block[0], shape.block[1],
                 shape.block[2], shape.iterations);
    }
    if (async)
        CURDI_TRY(status, curdi_pending_take_slot(&run->base, what), release);
    CURDI_TRY(status, curdi_core_device_enter(device), release);
    CURDI_TRY(status,
              curdi_pending_use_stream(&run->base, shape.cu_stream, what),
              drain);
    CURDI_TRY(status,
              curdi_upload_marks_wait_for(device, run->uses, run->use_count),
              drain);
    CURDI_TRY(status, run_acquire(run, args), drain);
    if (run->trace)
        run->staged_ns = curdi_clock_ns() - run->base.start_ns;
    CURDI_TRY(status, run_enqueue(run, program, &shape, args), drain);
    curdi_core_device_leave(device);
    *out_pending = &run->base;
    return CURD_OK;
drain:
    curdi_pending_drain(&run->base);
    curdi_core_device_leave(device);
release:
    /* From the run on, a failure may be the context's (run_count's
     * never is: it only adds). */
    curdi_pending_release(&run->base);
    return lost_if(device, status);
out:
    return status;
}

CURD_API curd_status curd_dispatch_async(curd_device *device,
                                         const curd_program *program,
                                         const curd_launch *launch,
                                         const curd_arg *args, size_t nargs,
                                         curd_pending **out_pending)
{
    CURDI_RANGE("curd_dispatch_async");
    curd_status status = dispatch_start(device, program, launch, args, nargs,
                                        true, "curd_dispatch_async",
                                        out_pending);
    if (status != CURD_OK)
        return status;
    curdi_pending_publish(*out_pending);
    return CURD_OK;
}

CURD_API curd_status curd_dispatch(curd_device *device,
                                   const curd_program *program,
                                   const curd_launch *launch,
                                   const curd_arg *args, size_t nargs)
{
    CURDI_RANGE("curd_dispatch");
    curd_pending *pending = NULL;
    curd_status status;
    CURDI_TRY(status,
              dispatch_start(device, program, launch, args, nargs, false,
                             "curd_dispatch", &pending),
              out);
    CURDI_TRY(status, curdi_pending_finish(pending, true), release);
    curd_timing *timing = ((dispatch_run *)(void *)pending)->timing;
    if (timing != NULL)
        curdi_pending_timing(pending, timing);
release:
    curdi_pending_release(pending);
out:
    return status;
}
