/* dispatch.c - launching a program's kernel against borrowed host memory
 * and resident buffers, synchronously or as a curd_pending.
 *
 * Read top to bottom: the launch shape, the arguments, then one dispatch
 * from start to end:
 *  1. Check the launch and every argument; resolve every resident buffer
 *     and mark it in use (lib/resident.h), all or none; check every length.
 *     Nothing is allocated or enqueued before all of it passed.
 *  2. Enter the device; take a pooled stream and two timing events (core),
 *     a device block for each borrowed argument (the device pool) and a
 *     pinned staging block for each one that moves bytes (the pinned pool).
 *  3. Enqueue: inputs up, outputs and scratch zeroed, the launches, the
 *     read-backs into staging, the end event. The caller's input memory is
 *     no longer needed once this returns.
 *  4. Wait on the end event (not on the stream), copy the read-backs into
 *     the caller's memory, give everything back and end the marks.
 * A fault that loses the context marks the device lost (core.h). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked.h"
#include "core.h"
#include "driver.h"
#include "program.h"
#include "resident.h"
#include "staging.h"
#include "status.h"

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

/* The grid and block a launch runs, once checked. */
typedef struct shape {
    unsigned grid[3];
    unsigned block[3];
    unsigned dynamic_shared_bytes;
    bool cooperative;
    uint32_t iterations;
} shape;

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

static curd_status check_shape(curd_device *device,
                               const curd_program *program,
                               const curd_launch *launch, const char *what,
                               shape *out)
{
    curd_launch given;
    curd_status status = curdi_options_check(launch, sizeof given,
                                             sizeof given, "curd_launch");
    if (status != CURD_OK)
        return status;
    memcpy(&given, launch, sizeof given);
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

/* An unsigned integer scalar's value, for a binding's length_arg. */
static bool scalar_count(const curd_arg *arg, uint64_t *out)
{
    if (arg->kind != CURD_ARG_SCALAR)
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

/* ------------------------------------------------------------------------
 * A dispatch in flight
 * ---------------------------------------------------------------------- */

struct curd_pending {
    curd_device *device;
    size_t nargs;
    bound *bounds;
    curdi_resident_use *uses; /* the resident buffers, marked in use */
    uint64_t *ids;
    void **params;            /* the launch's parameter list */
    size_t use_count;
    curdi_cu_stream stream;
    curdi_cu_event events[2]; /* start, end (timing enabled) */
    bool events_taken;
    bool enqueued;            /* the end event is recorded */
    bool waited;
    uint64_t start_ns;
    uint64_t enqueue_ns;
};

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Gives back everything the pending holds (its work complete or never
 * enqueued, or the context lost) and frees it. */
static void pending_release(curd_pending *pending)
{
    curd_device *device = pending->device;
    for (size_t index = 0; index < pending->nargs; index++) {
        bound *b = &pending->bounds[index];
        (void)curdi_staging_release(&b->staging);
        if (b->block != 0)
            (void)curdi_pool_release(device->device_pool, b->block);
    }
    if (pending->events_taken)
        curdi_events_release_timed(device, pending->events, 2);
    if (pending->stream != NULL)
        curdi_stream_release(device, pending->stream);
    if (pending->use_count != 0)
        curdi_resident_use_end(device, pending->uses, pending->use_count);
    free(pending->bounds);
    free(pending);
}

/* A driver failure during a dispatch: its status, the device marked lost
 * when the context is. */
static curd_status dispatch_fail_driver(curd_device *device,
                                        curdi_cu_result rc, const char *call)
{
    curd_status status = curdi_fail_driver(
        (int)rc, call,
        curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST
            ? "the kernel faulted and the device's context is lost: close"
              " the device and open it again; run the kernel under"
              " compute-sanitizer to find the fault"
            : CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_device_mark_lost(device);
    return status;
}

/* Allocates the pending and resolves every argument: all checks before
 * anything is taken from a pool. */
static curd_status pending_prepare(curd_device *device,
                                   const curd_program *program,
                                   const curd_arg *args, size_t nargs,
                                   const char *what, curd_pending **out)
{
    curd_status status;
    uint64_t transient = 0;
    size_t buffers = 0;
    if (nargs != 0 && args == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: args is NULL but nargs is %zu. Fix: pass an"
                          " array of nargs arguments.",
                          what, nargs);
    for (size_t index = 0; index < nargs; index++) {
        status = check_arg(args, nargs, index, what);
        if (status != CURD_OK)
            return status;
        if (args[index].kind == CURD_ARG_BUFFER)
            buffers++;
        if (args[index].kind == CURD_ARG_HOST
            && !curdi_u64_add(transient, args[index].byte_len, &transient))
            transient = UINT64_MAX;
    }
    status = check_params(program, args, nargs, what);
    if (status != CURD_OK)
        return status;
    if (transient > device->props.total_memory_bytes)
        return curdi_fail(CURD_E_BUDGET,
                          "%s: the borrowed arguments need %" PRIu64 " bytes"
                          " of device memory at once, more than device %d"
                          " has (%" PRIu64 "); nothing was allocated. Fix:"
                          " keep large data resident (curd_buffer_alloc)"
                          " and dispatch on it in parts.",
                          what, transient, device->ordinal,
                          device->props.total_memory_bytes);

    curd_pending *pending = calloc(1, sizeof *pending);
    size_t bytes;
    if (pending == NULL
        || !curdi_size_mul(nargs + 1u,
                           sizeof(bound) + sizeof(curdi_resident_use)
                               + sizeof(uint64_t) + sizeof(void *),
                           &bytes)
        || (pending->bounds = calloc(1, bytes)) == NULL) {
        free(pending);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not allocate the state of a dispatch of"
                          " %zu arguments. Fix: free host memory.",
                          what, nargs);
    }
    /* One block: bounds, uses, ids, then params (all 8-byte aligned). */
    pending->device = device;
    pending->nargs = nargs;
    pending->uses = (curdi_resident_use *)(void *)(pending->bounds + nargs + 1u);
    pending->ids = (uint64_t *)(void *)(pending->uses + nargs + 1u);
    pending->params = (void **)(void *)(pending->ids + nargs + 1u);
    for (size_t index = 0, next = 0; index < nargs; index++)
        if (args[index].kind == CURD_ARG_BUFFER)
            pending->ids[next++] = args[index].buffer.id;
    if (buffers != 0) {
        status = curdi_resident_use_begin(device, what, pending->ids, buffers,
                                          pending->uses);
        if (status != CURD_OK) {
            pending_release(pending);
            return status;
        }
        pending->use_count = buffers;
    }
    for (size_t index = 0, next = 0; index < nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &pending->bounds[index];
        uint64_t needed;
        if (!is_binding(arg))
            continue;
        if (arg->kind == CURD_ARG_BUFFER) {
            const curdi_resident_use *use = &pending->uses[next++];
            b->device_ptr = use->device_ptr;
            b->device_bytes = use->byte_len;
        } else {
            b->device_bytes = arg->byte_len;
        }
        status = kernel_bytes(args, index, what, &needed);
        if (status == CURD_OK && needed > b->device_bytes)
            status = curdi_fail(CURD_E_RANGE,
                                "%s: argument %zu holds %zu bytes, but the"
                                " kernel's length for it is %" PRIu64
                                " bytes; nothing was enqueued. Fix: pass a"
                                " %s of at least that size.",
                                what, index, b->device_bytes, needed,
                                arg->kind == CURD_ARG_BUFFER ? "buffer"
                                                             : "host range");
        if (status == CURD_OK)
            status = read_range(arg, index, b->device_bytes, what, b);
        if (status != CURD_OK) {
            pending_release(pending);
            return status;
        }
    }
    *out = pending;
    return CURD_OK;
}

/* Takes the blocks, the stream and the events; stages the inputs. Context
 * current. */
static curd_status pending_acquire(curd_pending *pending, const curd_arg *args)
{
    curd_device *device = pending->device;
    curd_status status;
    for (size_t index = 0; index < pending->nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &pending->bounds[index];
        if (arg->kind != CURD_ARG_HOST)
            continue;
        size_t class_bytes;
        status = curdi_pool_acquire(device->device_pool, arg->byte_len,
                                    &b->block, &class_bytes);
        if (status != CURD_OK)
            return status;
        b->device_ptr = b->block;
        size_t staged = reads_input(arg) ? arg->byte_len : b->read_len;
        if (staged == 0)
            continue;
        status = curdi_staging_acquire(device->pinned_pool, staged,
                                       &b->staging);
        if (status == CURD_OK && reads_input(arg))
            status = curdi_staging_write(&b->staging, 0, arg->byte_len,
                                         arg->host, arg->byte_len);
        if (status != CURD_OK)
            return status;
    }
    for (size_t index = 0; index < pending->nargs; index++) {
        bound *b = &pending->bounds[index];
        if (args[index].kind == CURD_ARG_BUFFER && b->read_len != 0) {
            status = curdi_staging_acquire(device->pinned_pool, b->read_len,
                                           &b->staging);
            if (status != CURD_OK)
                return status;
        }
    }
    status = curdi_stream_acquire(device, &pending->stream);
    if (status != CURD_OK)
        return status;
    status = curdi_events_acquire_timed(device, pending->events, 2);
    if (status == CURD_OK)
        pending->events_taken = true;
    return status;
}

/* Enqueues the whole dispatch on the pending's stream. Context current. */
static curd_status pending_enqueue(curd_pending *pending,
                                   const curd_program *program,
                                   const shape *run, const curd_arg *args)
{
    curd_device *device = pending->device;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_stream stream = pending->stream;
    curdi_cu_result rc;
    curd_status status = CURD_OK;

    rc = curdi_driver_note(driver->cuEventRecord(pending->events[0], stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return dispatch_fail_driver(device, rc, "cuEventRecord");
    for (size_t index = 0; index < pending->nargs; index++) {
        const curd_arg *arg = &args[index];
        bound *b = &pending->bounds[index];
        if (!is_binding(arg))
            continue;
        if (arg->kind == CURD_ARG_HOST && reads_input(arg)) {
            rc = curdi_driver_note(driver->cuMemcpyHtoDAsync(
                (curdi_cu_deviceptr)b->device_ptr, b->staging.host,
                arg->byte_len, stream));
            if (rc != CURDI_CUDA_SUCCESS)
                return dispatch_fail_driver(device, rc, "cuMemcpyHtoDAsync");
        } else if (!reads_input(arg) && b->device_bytes != 0) {
            rc = curdi_driver_note(driver->cuMemsetD8Async(
                (curdi_cu_deviceptr)b->device_ptr, 0, b->device_bytes,
                stream));
            if (rc != CURDI_CUDA_SUCCESS)
                return dispatch_fail_driver(device, rc, "cuMemsetD8Async");
        }
    }
    if (run->dynamic_shared_bytes > 48u * 1024u) {
        status = curdi_program_reserve_dynamic_shared(
            program, run->dynamic_shared_bytes);
        if (status != CURD_OK)
            return status;
    }
    /* The driver copies every parameter's bytes when the launch is
     * enqueued, so pointing at the caller's scalars and at the bounds'
     * device pointers is enough. */
    void **params = pending->params;
    for (size_t index = 0; index < pending->nargs; index++)
        params[index] = args[index].kind == CURD_ARG_SCALAR
                            ? (void *)(uintptr_t)args[index].value
                            : &pending->bounds[index].device_ptr;
    curdi_cu_function function = curdi_program_function(program);
    for (uint32_t launch = 0; launch < run->iterations; launch++) {
        rc = run->cooperative
                 ? driver->cuLaunchCooperativeKernel(
                       function, run->grid[0], run->grid[1], run->grid[2],
                       run->block[0], run->block[1], run->block[2],
                       run->dynamic_shared_bytes, stream, params)
                 : driver->cuLaunchKernel(
                       function, run->grid[0], run->grid[1], run->grid[2],
                       run->block[0], run->block[1], run->block[2],
                       run->dynamic_shared_bytes, stream, params, NULL);
        if (curdi_driver_note(rc) != CURDI_CUDA_SUCCESS) {
            status = dispatch_fail_driver(device, rc,
                                          run->cooperative
                                              ? "cuLaunchCooperativeKernel"
                                              : "cuLaunchKernel");
            break;
        }
    }
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < pending->nargs; index++) {
        bound *b = &pending->bounds[index];
        if (b->read_len == 0)
            continue;
        rc = curdi_driver_note(driver->cuMemcpyDtoHAsync(
            b->staging.host, (curdi_cu_deviceptr)(b->device_ptr + b->read_offset),
            b->read_len, stream));
        if (rc != CURDI_CUDA_SUCCESS)
            return dispatch_fail_driver(device, rc, "cuMemcpyDtoHAsync");
    }
    rc = curdi_driver_note(driver->cuEventRecord(pending->events[1], stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return dispatch_fail_driver(device, rc, "cuEventRecord");
    pending->enqueued = true;
    return CURD_OK;
}

/* After a failure part way: whatever was enqueued finishes before the
 * blocks and staging go back to their pools. */
static void pending_drain(curd_pending *pending)
{
    const curdi_driver *driver = curdi_driver_get();
    if (pending->stream != NULL && curdi_driver_usable())
        (void)curdi_driver_note(driver->cuStreamSynchronize(pending->stream));
}

CURD_API curd_status curd_dispatch_async(curd_device *device,
                                         const curd_program *program,
                                         const curd_launch *launch,
                                         const curd_arg *args, size_t nargs,
                                         curd_pending **out_pending)
{
    const char *what = "curd_dispatch_async";
    uint64_t start_ns = now_ns();
    curd_pending *pending = NULL;
    shape run;
    memset(&run, 0, sizeof run);
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK)
        status = curdi_program_check(program, device, what);
    if (status == CURD_OK && out_pending == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: out_pending is NULL. Fix: pass the address"
                            " of a curd_pending pointer.",
                            what);
    if (status == CURD_OK)
        status = check_shape(device, program, launch, what, &run);
    if (status == CURD_OK)
        status = pending_prepare(device, program, args, nargs, what,
                                 &pending);
    if (status != CURD_OK)
        return status;
    pending->start_ns = start_ns;
    status = curdi_device_enter(device);
    if (status != CURD_OK) {
        pending_release(pending);
        return status;
    }
    status = pending_acquire(pending, args);
    if (status == CURD_OK)
        status = pending_enqueue(pending, program, &run, args);
    if (status != CURD_OK) {
        pending_drain(pending);
        curdi_device_leave(device);
        pending_release(pending);
        return status;
    }
    curdi_device_leave(device);
    pending->enqueue_ns = now_ns() - start_ns;
    *out_pending = pending;
    return CURD_OK;
}

static curd_status check_pending(const curd_pending *pending, const char *what)
{
    if (pending == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: pending is NULL. Fix: pass the curd_pending"
                          " that curd_dispatch_async returned.",
                          what);
    return curdi_device_check(pending->device, what);
}

CURD_API curd_status curd_pending_ready(curd_pending *pending, int *out_ready)
{
    const char *what = "curd_pending_ready";
    curd_status status = check_pending(pending, what);
    if (status != CURD_OK)
        return status;
    if (out_ready == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_ready is NULL. Fix: pass the address of an"
                          " int.",
                          what);
    if (pending->waited) {
        *out_ready = 1;
        return CURD_OK;
    }
    status = curdi_device_enter(pending->device);
    if (status != CURD_OK)
        return status;
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuEventQuery(pending->events[1]));
    curdi_device_leave(pending->device);
    if (rc == CURDI_CUDA_SUCCESS || rc == CURDI_CUDA_ERROR_NOT_READY) {
        *out_ready = rc == CURDI_CUDA_SUCCESS;
        return CURD_OK;
    }
    return dispatch_fail_driver(pending->device, rc, "cuEventQuery");
}

/* Waits for the end event; on success copies the read-backs out and fills
 * timing. The pending stays allocated. */
static curd_status pending_finish(curd_pending *pending, curd_timing *timing,
                                  bool copy_out)
{
    curd_device *device = pending->device;
    const curdi_driver *driver;
    uint64_t wait_start = now_ns();
    curd_status status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    curdi_cu_result rc =
        curdi_driver_note(driver->cuEventSynchronize(pending->events[1]));
    if (rc != CURDI_CUDA_SUCCESS) {
        status = dispatch_fail_driver(device, rc, "cuEventSynchronize");
        curdi_device_leave(device);
        return status;
    }
    pending->waited = true;
    float device_ms = 0.0f;
    if (timing != NULL) {
        rc = curdi_driver_note(driver->cuEventElapsedTime(
            &device_ms, pending->events[0], pending->events[1]));
        if (rc != CURDI_CUDA_SUCCESS)
            device_ms = 0.0f;
    }
    curdi_device_leave(device);
    uint64_t waited_ns = now_ns() - wait_start;
    for (size_t index = 0; copy_out && index < pending->nargs; index++) {
        bound *b = &pending->bounds[index];
        if (b->read_len != 0)
            (void)curdi_staging_read(&b->staging, 0, b->read_len, b->host,
                                     b->read_len);
    }
    if (timing != NULL) {
        curd_timing result = {.struct_size = timing->struct_size};
        result.enqueue_ns = pending->enqueue_ns;
        result.wait_ns = waited_ns;
        result.device_ns = (uint64_t)((double)device_ms * 1e6);
        result.wall_ns = now_ns() - pending->start_ns;
        memcpy(timing, &result, sizeof result);
    }
    return CURD_OK;
}

CURD_API curd_status curd_pending_wait(curd_pending *pending,
                                       curd_timing *timing)
{
    const char *what = "curd_pending_wait";
    curd_status status = check_pending(pending, what);
    if (status == CURD_OK && timing != NULL)
        status = curdi_result_struct_check(timing, sizeof *timing, what,
                                           "timing", "curd_timing");
    if (status != CURD_OK)
        return status;
    if (pending->waited)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: this dispatch was waited for already; its"
                          " outputs are in place. Fix: wait once, then"
                          " curd_pending_free().",
                          what);
    return pending_finish(pending, timing, true);
}

CURD_API curd_status curd_pending_free(curd_pending *pending)
{
    if (pending == NULL)
        return CURD_OK;
    curd_status status = check_pending(pending, "curd_pending_free");
    /* On a lost device nothing is waited for: the work is gone with the
     * context, and what the pending holds is host-side bookkeeping. */
    if (status == CURD_E_DEVICE_LOST) {
        pending_release(pending);
        return CURD_OK;
    }
    if (status != CURD_OK)
        return status;
    /* Work that could not be waited for may still use the blocks: they
     * go back to their pools only once it is done (or the device lost). */
    if (!pending->waited)
        status = pending_finish(pending, NULL, false);
    if (status != CURD_OK && status != CURD_E_DEVICE_LOST)
        return status;
    pending_release(pending);
    return status;
}

CURD_API curd_status curd_dispatch(curd_device *device,
                                   const curd_program *program,
                                   const curd_launch *launch,
                                   const curd_arg *args, size_t nargs)
{
    curd_pending *pending;
    curd_status status =
        curd_dispatch_async(device, program, launch, args, nargs, &pending);
    if (status != CURD_OK)
        return status;
    status = pending_finish(pending, NULL, true);
    pending_release(pending);
    return status;
}
