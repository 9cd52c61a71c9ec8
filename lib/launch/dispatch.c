/* dispatch.c - launching a program's kernel against borrowed host memory
 * and resident buffers, synchronously or as a curd_pending.
 *
 * Read top to bottom: the launch shape, the arguments, then one dispatch
 * from start to end:
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
 * The room: the counters of completed dispatches
 * ---------------------------------------------------------------------- */

struct curdi_dispatch_room {
    _Atomic uint64_t dispatches;
    _Atomic uint64_t launches;
    _Atomic uint64_t device_ns;
    _Atomic uint64_t enqueue_ns;
    _Atomic uint64_t wait_ns;
};

curd_status curdi_dispatch_open(curd_device *device)
{
    struct curdi_dispatch_room *room = calloc(1, sizeof *room);
    if (room == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: %zu bytes for the dispatch room"
                          " could not be allocated. Fix: free host memory"
                          " and try again.",
                          sizeof *room);
    device->dispatch = room;
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
    struct curdi_dispatch_room *room = device->dispatch;
    stats->dispatches = atomic_load(&room->dispatches);
    stats->launches = atomic_load(&room->launches);
    stats->dispatch_device_ns = atomic_load(&room->device_ns);
    stats->dispatch_enqueue_ns = atomic_load(&room->enqueue_ns);
    stats->dispatch_wait_ns = atomic_load(&room->wait_ns);
}

void curdi_dispatch_stats_reset(curd_device *device)
{
    struct curdi_dispatch_room *room = device->dispatch;
    atomic_store(&room->dispatches, 0);
    atomic_store(&room->launches, 0);
    atomic_store(&room->device_ns, 0);
    atomic_store(&room->enqueue_ns, 0);
    atomic_store(&room->wait_ns, 0);
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
        curdi_device_mark_lost(device);
    return status;
}

/* ------------------------------------------------------------------------
 * The launch shape
 * ---------------------------------------------------------------------- */

CURD_API void curd_launch_init(curd_launch *launch)
{
    if (launch == NULL)
        return;
    memset(launch, 0, sizeof *launch);
    launch->struct_size = sizeof *launch;
    launch->block[0] = 256;
    launch->block[1] = 1;
    launch->block[2] = 1;
    launch->iterations = 1;
}

/* Each of a block's or a grid's three axes between 1 and the device's
 * limit; *out_product is their product. */
static curd_status check_axes(const uint32_t dims[3], const int limits[3],
                              const char *what, const char *name,
                              uint64_t *out_product)
{
    uint64_t product = 1;
    for (int axis = 0; axis < 3; axis++) {
        if (dims[axis] == 0 || dims[axis] > (uint32_t)limits[axis])
            return curdi_fail(CURD_E_RANGE,
                              "%s: %s[%d] is %" PRIu32 ", but this device"
                              " allows 1 to %d. Fix: pick a %s within the"
                              " device's limits (curd_device_info).",
                              what, name, axis, dims[axis], limits[axis],
                              name);
        product *= dims[axis];
    }
    *out_product = product;
    return CURD_OK;
}

curd_status curdi_dispatch_check_shape(curd_device *device,
                                       const curd_program *program,
                                       const curd_launch *launch,
                                       const char *what,
                                       curdi_launch_shape *out)
{
    curd_launch given;
    curd_status status = curdi_options_check(
        launch, sizeof given, offsetof(curd_launch, cu_stream), "curd_launch");
    if (status != CURD_OK)
        return status;
    /* A curd 1.0 caller's struct ends before cu_stream: NULL for it. */
    memset(&given, 0, sizeof given);
    memcpy(&given, launch,
           launch->struct_size < sizeof given ? launch->struct_size
                                              : sizeof given);
    const curd_device_props *props = &device->props;
    const curdi_program_attrs *attrs = curdi_program_attrs_of(program);
    if ((given.flags & ~CURD_LAUNCH_FLAGS_KNOWN) != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: launch flags 0x%x set bits this version of"
                          " curd does not define (known: 0x%x). Fix: pass"
                          " CURD_LAUNCH_* flags only.",
                          what, given.flags, CURD_LAUNCH_FLAGS_KNOWN);
    if (given.iterations == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: iterations is 0, so nothing would run. Fix:"
                          " pass 1 for one launch (curd_launch_init sets"
                          " it), or the fixpoint's number of launches.",
                          what);
    uint64_t threads;
    status = check_axes(given.block, props->max_block_dim, what, "block",
                        &threads);
    if (status != CURD_OK)
        return status;
    uint64_t thread_limit = (uint64_t)props->max_threads_per_block;
    if (attrs->max_threads_per_block > 0
        && (uint64_t)attrs->max_threads_per_block < thread_limit)
        thread_limit = (uint64_t)attrs->max_threads_per_block;
    if (threads > thread_limit)
        return curdi_fail(CURD_E_RANGE,
                          "%s: a block of %" PRIu64 " threads, but kernel %s"
                          " allows at most %" PRIu64 " on this device (its"
                          " registers: %d per thread). Fix: use smaller"
                          " blocks.",
                          what, threads, curdi_program_entry(program),
                          thread_limit, attrs->registers_per_thread);
    if (given.grid[0] == 0 && given.grid[1] == 0 && given.grid[2] == 0) {
        if (given.elements == 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: the grid is 0 x 0 x 0 and elements is 0,"
                              " so no block would run. Fix: set grid, or"
                              " elements to derive grid[0] from.",
                              what);
        uint64_t blocks = given.elements / given.block[0]
                          + (given.elements % given.block[0] != 0);
        if (blocks > (uint64_t)props->max_grid_dim[0])
            return curdi_fail(CURD_E_RANGE,
                              "%s: %" PRIu64 " elements in blocks of %" PRIu32
                              " need a grid of %" PRIu64 ", past the"
                              " device's %d. Fix: use larger blocks, or"
                              " loop inside the kernel.",
                              what, given.elements, given.block[0], blocks,
                              props->max_grid_dim[0]);
        given.grid[0] = (uint32_t)blocks;
        given.grid[1] = 1;
        given.grid[2] = 1;
    }
    uint64_t blocks;
    status = check_axes(given.grid, props->max_grid_dim, what, "grid",
                        &blocks);
    if (status != CURD_OK)
        return status;
    if (given.dynamic_shared_bytes > attrs->max_dynamic_shared_bytes)
        return curdi_fail(CURD_E_RANGE,
                          "%s: %" PRIu32 " bytes of dynamic shared memory,"
                          " but kernel %s may use at most %zu on this device"
                          " (it has %zu static). Fix: ask for less.",
                          what, given.dynamic_shared_bytes,
                          curdi_program_entry(program),
                          attrs->max_dynamic_shared_bytes,
                          attrs->static_shared_bytes);
    out->cooperative = (given.flags & CURD_LAUNCH_COOPERATIVE) != 0;
    if (out->cooperative
        && (props->capabilities & CURD_CAP_COOPERATIVE_LAUNCH) == 0)
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: a cooperative launch, but device %d (%s)"
                          " cannot run one. Fix: launch without"
                          " CURD_LAUNCH_COOPERATIVE and synchronise through"
                          " separate launches.",
                          what, device->ordinal, props->name);
    if (out->cooperative) {
        int per_sm = 0;
        status = curdi_device_enter(device);
        if (status != CURD_OK)
            return status;
        /* The driver counts blocks against the kernel's dynamic shared
         * memory limit as it is set now: above 48 KiB it must be raised
         * first, or no block would seem to fit. */
        if (given.dynamic_shared_bytes > 48u * 1024u)
            status = curdi_program_reserve_dynamic_shared(
                program, given.dynamic_shared_bytes);
        if (status != CURD_OK) {
            curdi_device_leave(device);
            return status;
        }
        const curdi_driver *driver = curdi_driver_get();
        curdi_cu_result rc = curdi_driver_note(
            driver->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, curdi_program_function(program), (int)threads,
                given.dynamic_shared_bytes));
        curdi_device_leave(device);
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_fail_driver(
                (int)rc, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                CURDI_DRIVER_FIX);
        uint64_t resident_blocks =
            (uint64_t)per_sm * (uint64_t)props->multiprocessor_count;
        if (blocks > resident_blocks)
            return curdi_fail(CURD_E_RANGE,
                              "%s: a cooperative grid of %" PRIu64 " blocks,"
                              " but only %d blocks of %" PRIu64 " threads fit"
                              " on each of the %d multiprocessors at once"
                              " (%" PRIu64 " in all), and every block must"
                              " be resident. Fix: launch at most %" PRIu64
                              " blocks and loop inside the kernel.",
                              what, blocks, per_sm, threads,
                              props->multiprocessor_count, resident_blocks,
                              resident_blocks);
    }
    memcpy(out->grid, given.grid, sizeof out->grid);
    memcpy(out->block, given.block, sizeof out->block);
    out->dynamic_shared_bytes = given.dynamic_shared_bytes;
    out->iterations = given.iterations;
    out->cu_stream = given.cu_stream;
    out->timing = given.timing;
    if (given.timing != NULL)
        return curdi_result_struct_check(given.timing, CURDI_TIMING_SIZE_1_0,
                                         what, "launch->timing",
                                         "curd_timing");
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The arguments
 * ---------------------------------------------------------------------- */

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

/* An unsigned integer scalar's value, for a binding's length_arg. The
 * scalar may not have been checked yet (it can come after the binding):
 * a NULL value is not one. */
static bool scalar_count(const curd_arg *arg, uint64_t *out)
{
    if (arg->kind != CURD_ARG_SCALAR || arg->value == NULL)
        return false;
    switch (arg->byte_len) {
    case 1: *out = *(const uint8_t *)arg->value; return true;
    case 2: { uint16_t v; memcpy(&v, arg->value, 2); *out = v; return true; }
    case 4: { uint32_t v; memcpy(&v, arg->value, 4); *out = v; return true; }
    case 8: { uint64_t v; memcpy(&v, arg->value, 8); *out = v; return true; }
    default: return false;
    }
}

/* The checks of one argument that need no device: kind, role, pointers,
 * sizes, alignments and its length argument. */
static curd_status check_arg(const curd_arg *args, size_t nargs, size_t index,
                             const char *what)
{
    const curd_arg *arg = &args[index];
    if (arg->reserved != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: argument %zu sets reserved (%" PRIu32 "). Fix:"
                          " leave it 0 (the curd_arg_* constructors do).",
                          what, index, arg->reserved);
    switch (arg->kind) {
    case CURD_ARG_NULL:
        return CURD_OK;
    case CURD_ARG_SCALAR: {
        size_t natural = arg->byte_len >= 8 ? 8 : arg->byte_len;
        size_t align = arg->align != 0 ? arg->align : natural;
        if (arg->value == NULL || arg->byte_len == 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: scalar argument %zu has %s. Fix: pass the"
                              " value's address and its size in bytes.",
                              what, index,
                              arg->value == NULL ? "a NULL value"
                                                 : "byte_len 0");
        if (arg->byte_len > 4096 || (align & (align - 1)) != 0
            || align > 256 || arg->byte_len % align != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: scalar argument %zu is %zu bytes aligned"
                              " to %zu; a parameter is 1, 2, 4 or 8 bytes, or"
                              " a struct of at most 4096 bytes whose size is"
                              " a multiple of its power-of-two alignment."
                              " Fix: pass the kernel parameter's exact size"
                              " and alignment.",
                              what, index, arg->byte_len, align);
        return CURD_OK;
    }
    case CURD_ARG_HOST:
    case CURD_ARG_BUFFER:
        break;
    default:
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: argument %zu has kind %" PRIu32 ", not a"
                          " curd_arg_kind. Fix: build arguments with the"
                          " curd_arg_* constructors.",
                          what, index, arg->kind);
    }
    if (arg->role < CURD_ROLE_INPUT || arg->role > CURD_ROLE_SCRATCH)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: argument %zu has role %" PRIu32 ", not a"
                          " curd_arg_role. Fix: pass CURD_ROLE_INPUT,"
                          " _OUTPUT, _INOUT or _SCRATCH.",
                          what, index, arg->role);
    if (arg->byte_len != 0 && arg->host == NULL
        && !(arg->kind == CURD_ARG_HOST && arg->role == CURD_ROLE_SCRATCH))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: argument %zu has host NULL for %zu bytes;"
                          " nothing was enqueued. Fix: pass caller memory of"
                          " byte_len bytes.",
                          what, index, arg->byte_len);
    size_t host_bytes = arg->host == NULL ? 0 : arg->byte_len;
    if (curdi_host_range_bad(arg->host, host_bytes)) {
        char name[48];
        snprintf(name, sizeof name, "argument %zu's host address", index);
        return curdi_host_range_check(arg->host, host_bytes, what, name);
    }
    if (arg->kind == CURD_ARG_HOST && arg->byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: borrowed argument %zu has byte_len 0. Fix:"
                          " pass its size, or CURD_ARG_NULL for a null"
                          " pointer.",
                          what, index);
    if (arg->length_arg >= 0) {
        uint64_t count;
        if ((size_t)arg->length_arg >= nargs
            || !scalar_count(&args[arg->length_arg], &count))
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: argument %zu takes its length from"
                              " argument %" PRId32 ", which is not an"
                              " unsigned integer scalar of this call. Fix:"
                              " name the index of the element-count scalar,"
                              " or -1.",
                              what, index, arg->length_arg);
    } else if (arg->length_arg != -1) {
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: argument %zu has length_arg %" PRId32 ". Fix:"
                          " pass an argument index, or -1 for none.",
                          what, index, arg->length_arg);
    }
    return CURD_OK;
}

/* The bytes the kernel will touch through binding index: elem_bytes times
 * static_elems or its length argument's value (0: it says nothing). */
static curd_status kernel_bytes(const curd_arg *args, size_t index,
                                const char *what, uint64_t *out)
{
    const curd_arg *arg = &args[index];
    uint64_t elems = arg->static_elems;
    uint64_t elem_bytes = arg->elem_bytes != 0 ? arg->elem_bytes : 1;
    if (arg->length_arg >= 0)
        (void)scalar_count(&args[arg->length_arg], &elems);
    if (!curdi_u64_mul(elems, elem_bytes, out))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: argument %zu's length, %" PRIu64 " elements of"
                          " %" PRIu64 " bytes, passes 2^64. Fix: pass the"
                          " kernel's real length.",
                          what, index, elems, elem_bytes);
    return CURD_OK;
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
        curdi_range_check(arg->read_offset, len, device_bytes, label);
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

/* The arguments against the kernel's parameter list, when the driver can
 * tell it. */
static curd_status check_params(const curd_program *program,
                                const curd_arg *args, size_t nargs,
                                const char *what)
{
    const curdi_param_layout *layout = curdi_program_params(program);
    if (!layout->known)
        return CURD_OK;
    if (nargs != layout->count)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: kernel %s takes %" PRIu32 " parameters, but"
                          " %zu arguments were given. Fix: pass one argument"
                          " per parameter, in the kernel's order.",
                          what, curdi_program_entry(program), layout->count,
                          nargs);
    for (size_t index = 0; index < nargs; index++) {
        size_t given = args[index].kind == CURD_ARG_SCALAR
                           ? args[index].byte_len
                           : sizeof(uint64_t);
        if (given != layout->sizes[index])
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: parameter %zu of kernel %s is %" PRIu32
                              " bytes, but argument %zu is %zu (%s). Fix:"
                              " match the kernel's parameter list: a pointer"
                              " is a binding or CURD_ARG_NULL, a value a"
                              " scalar of its exact size.",
                              what, index, curdi_program_entry(program),
                              layout->sizes[index], index, given,
                              args[index].kind == CURD_ARG_SCALAR
                                  ? "a scalar"
                                  : "a pointer");
    }
    return CURD_OK;
}

curd_status curdi_dispatch_check_args(const curd_program *program,
                                      const curd_arg *args, size_t nargs,
                                      const char *what)
{
    if (nargs != 0 && args == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: args is NULL but nargs is %zu. Fix: pass an"
                          " array of nargs arguments.",
                          what, nargs);
    for (size_t index = 0; index < nargs; index++) {
        curd_status status = check_arg(args, nargs, index, what);
        if (status != CURD_OK)
            return status;
    }
    return check_params(program, args, nargs, what);
}

curd_status curdi_dispatch_check_binding(const curd_arg *args, size_t index,
                                         size_t device_bytes,
                                         const char *what)
{
    uint64_t needed = 0; /* set by kernel_bytes on CURD_OK */
    curd_status status = kernel_bytes(args, index, what, &needed);
    if (status == CURD_OK && needed > device_bytes)
        status = curdi_fail(CURD_E_RANGE,
                            "%s: argument %zu holds %zu bytes, but the"
                            " kernel's length for it is %" PRIu64
                            " bytes; nothing was enqueued. Fix: pass a"
                            " %s of at least that size.",
                            what, index, device_bytes, needed,
                            args[index].kind == CURD_ARG_BUFFER
                                ? "buffer"
                                : "host range");
    return status;
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
static void run_complete(curd_pending *pending, bool copy_out)
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
    struct curdi_dispatch_room *room = pending->device->dispatch;
    curdi_transfer_counts_add(pending->device, &run->counts);
    atomic_fetch_add(&room->dispatches, 1);
    atomic_fetch_add(&room->launches, run->launches);
    atomic_fetch_add(&room->device_ns, pending->device_ns);
    atomic_fetch_add(&room->enqueue_ns, pending->enqueue_ns);
    atomic_fetch_add(&room->wait_ns, pending->wait_ns);
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

static void run_release(curd_pending *pending)
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

static const curdi_pending_ops run_ops = {.complete = run_complete,
                                          .release = run_release};

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
        status = curdi_resident_use_begin(device, what, run->ids, buffers,
                                          run->uses);
        if (status != CURD_OK) {
            curdi_pending_release(&run->base);
            return status;
        }
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
        status = curdi_dispatch_check_binding(args, index, b->device_bytes,
                                              what);
        if (status == CURD_OK)
            status = read_range(arg, index, b->device_bytes, what, b);
        if (status != CURD_OK) {
            curdi_pending_release(&run->base);
            return status;
        }
    }
    *out = run;
    return CURD_OK;
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
        status = curdi_memory_device_acquire(device, arg->byte_len, &b->block,
                                             &class_bytes);
        if (status != CURD_OK)
            return status;
        b->device_ptr = b->block;
        if (!reads_input(arg) || arg->byte_len == 0)
            continue;
        status = curdi_memory_staging_acquire(device, arg->byte_len,
                                              &b->staging);
        if (status == CURD_OK)
            status = curdi_staging_write(&b->staging, 0, arg->byte_len,
                                         arg->host, arg->byte_len);
        if (status != CURD_OK)
            return status;
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
                                  && reads_input(&args[index]))) {
            status = curdi_landing_or_staging(device, b->read_len,
                                              &b->landing, &b->staging);
            if (status != CURD_OK)
                return status;
        }
    }
    return curdi_pending_acquire(&run->base);
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
    curd_status status = curdi_pending_begin(&run->base);
    if (status != CURD_OK)
        return status;
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
    status = curdi_pending_mark(&run->base, false);
    if (status == CURD_OK)
        status = curdi_dispatch_enqueue_launch(device, program, shape,
                                               run->params, stream);
    if (status == CURD_OK)
        status = curdi_pending_mark(&run->base, true);
    if (status != CURD_OK)
        return status;
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
}

/* Checks and enqueues a dispatch; *out_pending receives it. A synchronous
 * dispatch that is not traced runs untimed (lib/core/pending.h). */
static curd_status dispatch_start(curd_device *device,
                                  const curd_program *program,
                                  const curd_launch *launch,
                                  const curd_arg *args, size_t nargs,
                                  bool timed, const char *what,
                                  curd_pending **out_pending)
{
    dispatch_run *run = NULL;
    curdi_launch_shape shape;
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK)
        status = curdi_program_check(program, device, what);
    if (status == CURD_OK && out_pending == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: out_pending is NULL. Fix: pass the address"
                            " of a curd_pending pointer.",
                            what);
    if (status == CURD_OK)
        status = curdi_dispatch_check_shape(device, program, launch, what,
                                            &shape);
    if (status == CURD_OK && timed && shape.timing != NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: launch->timing is set, but an asynchronous"
                            " dispatch's timing comes from curd_pending_wait."
                            " Fix: leave launch->timing NULL and pass a"
                            " curd_timing to curd_pending_wait.",
                            what);
    if (status == CURD_OK)
        status = run_prepare(device, program, args, nargs, what, &run);
    if (status == CURD_OK) {
        status = run_count(run, args, what);
        if (status != CURD_OK)
            curdi_pending_release(&run->base);
    }
    if (status != CURD_OK)
        return status;
    run->launches = shape.iterations;
    run->timing = shape.timing;
    run->trace = curdi_trace_enabled();
    /* Timed work is split: device_ns is the kernels alone. */
    /* On the caller's stream the caller times its own work: an
     * asynchronous dispatch there records no timed event. */
    run->base.timed = (timed && shape.cu_stream == NULL) || run->trace
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
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        curdi_pending_release(&run->base);
        return lost_if(device, status);
    }
    status = curdi_pending_use_stream(&run->base, shape.cu_stream, what);
    if (status == CURD_OK)
        status = curdi_upload_marks_wait_for(device, run->uses,
                                              run->use_count);
    if (status == CURD_OK)
        status = run_acquire(run, args);
    if (status == CURD_OK && run->trace)
        run->staged_ns = curdi_clock_ns() - run->base.start_ns;
    if (status == CURD_OK)
        status = run_enqueue(run, program, &shape, args);
    if (status != CURD_OK) {
        curdi_pending_drain(&run->base);
        curdi_device_leave(device);
        curdi_pending_release(&run->base);
        return lost_if(device, status);
    }
    curdi_device_leave(device);
    *out_pending = &run->base;
    return CURD_OK;
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
    if (status == CURD_OK)
        curdi_pending_publish(*out_pending);
    return status;
}

CURD_API curd_status curd_dispatch(curd_device *device,
                                   const curd_program *program,
                                   const curd_launch *launch,
                                   const curd_arg *args, size_t nargs)
{
    CURDI_RANGE("curd_dispatch");
    curd_pending *pending = NULL;
    curd_status status = dispatch_start(device, program, launch, args, nargs,
                                        false, "curd_dispatch", &pending);
    if (status != CURD_OK)
        return status;
    status = curdi_pending_finish(pending, true);
    curd_timing *timing = ((dispatch_run *)(void *)pending)->timing;
    if (status == CURD_OK && timing != NULL)
        curdi_pending_timing(pending, timing);
    curdi_pending_release(pending);
    return status;
}
