/* dispatch_check.c - the checks of a launch before anything is taken:
 * its shape (grid, block, iterations, dynamic shared memory, stream and
 * timing) against the device and the kernel, and its arguments (kinds,
 * roles, sizes, alignments, length arguments) against the kernel's
 * parameter list. curd_dispatch and the batches' launches share them
 * (dispatch.h). */
#include "launch/dispatch.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/program.h"

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
        status = curdi_core_device_enter(device);
        if (status != CURD_OK)
            return status;
        /* The driver counts blocks against the kernel's dynamic shared
         * memory limit as it is set now: above 48 KiB it must be raised
         * first, or no block would seem to fit. */
        if (given.dynamic_shared_bytes > 48u * 1024u)
            status = curdi_program_reserve_dynamic_shared(
                program, given.dynamic_shared_bytes);
        if (status != CURD_OK) {
            curdi_core_device_leave(device);
            return status;
        }
        const curdi_driver *driver = curdi_driver_get();
        curdi_cu_result rc = curdi_driver_note(
            driver->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, curdi_program_function(program), (int)threads,
                given.dynamic_shared_bytes));
        curdi_core_device_leave(device);
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_driver_fail(
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
        return curdi_options_result_struct_check(
            given.timing, CURDI_TIMING_SIZE_1_0, what, "launch->timing",
            "curd_timing");
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The arguments
 * ---------------------------------------------------------------------- */

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
    if (curdi_checked_host_range_bad(arg->host, host_bytes)) {
        char name[48];
        snprintf(name, sizeof name, "argument %zu's host address", index);
        return curdi_checked_host_range(arg->host, host_bytes, what, name);
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
    if (status != CURD_OK)
        return status;
    if (needed > device_bytes)
        return curdi_fail(CURD_E_RANGE,
                          "%s: argument %zu holds %zu bytes, but the"
                          " kernel's length for it is %" PRIu64
                          " bytes; nothing was enqueued. Fix: pass a"
                          " %s of at least that size.",
                          what, index, device_bytes, needed,
                          args[index].kind == CURD_ARG_BUFFER
                              ? "buffer"
                              : "host range");
    return CURD_OK;
}
