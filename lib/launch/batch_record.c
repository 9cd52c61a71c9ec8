/* batch_record.c - recording into a batch: fills, clears, uploads,
 * downloads, copies, launches and the items of the modules above
 * (curdi_batch_record_external), each checked when recorded, its buffers
 * resolved and its staging laid out; and the set calls that change a
 * recorded launch. The batch's state is batch_state.h. */
#include "launch/batch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "launch/batch_state.h"
#include "launch/dispatch.h"
#include "launch/program.h"
#include "memory/resident.h"
#include "transfer/copy.h"
#include "transfer/transfer.h"

/* ------------------------------------------------------------------------
 * Recording
 * ---------------------------------------------------------------------- */

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
    if (status != CURD_OK)
        return status;
    if (out->cu_stream != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the launch names stream %p, but a batch's"
                          " launches run on the batch's stream. Fix: leave"
                          " curd_launch.cu_stream NULL and set"
                          " curd_batch_options.cu_stream when the batch is"
                          " made.",
                          what, out->cu_stream);
    if (out->timing != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the launch names a curd_timing, but a batch's"
                          " launches are timed with its run. Fix: leave"
                          " curd_launch.timing NULL and pass a curd_timing"
                          " to curd_batch_run.",
                          what);
    return CURD_OK;
}

/* A live buffer of the batch's device: its device pointer and size. */
static curd_status resolve_buffer(curd_batch *batch, curd_buffer buffer,
                                  const char *what, curdi_resident_use *out)
{
    curd_status status = curdi_resident_use_begin(batch->device, what,
                                                  &buffer.id, 1, out);
    if (status != CURD_OK)
        return status;
    curdi_resident_use_end(batch->device, out, 1);
    return CURD_OK;
}

/* Space for `more` buffer entries (and the run's arrays beside them), all
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
    return curdi_core_array_reserve((void **)&batch->use_ids, &ids_capacity,
                                    needed, sizeof *batch->use_ids)
           && curdi_core_array_reserve((void **)&batch->uses, &uses_capacity,
                                       needed, sizeof *batch->uses)
           && curdi_core_array_reserve((void **)&batch->buffers,
                                       &batch->buffer_capacity, needed,
                                       sizeof *batch->buffers);
}

/* The entry of a resolved buffer, shared by every item naming it; the
 * caller reserved space for one more. */
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
    if (!curdi_core_array_reserve((void **)&batch->items,
                                  &batch->item_capacity,
                                  batch->item_count + 1u, sizeof *batch->items)
        || !reserve_buffer_entries(batch, src_use != NULL ? 2u : 1u))
        return fail_memory(what);
    /* Nothing fails from here on: the item and its buffer entries have
     * their space. */
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
    curd_status status;
    CURDI_TRY(status, check_batch(batch, what), out);
    /* Every host range goes through the transfers' check (a NULL one
     * with byte_len 0 is refused below, as an empty item), then the
     * capacity, in curd_buffer_download_range's order. */
    if (kind != ITEM_FILL)
        CURDI_TRY(
            status,
            curdi_checked_host_range(host, byte_len, what,
                                     kind == ITEM_UPLOAD ? "src" : "dst"),
            out);
    if (byte_len > capacity)
        return curdi_fail(CURD_E_RANGE,
                          "%s: %zu bytes asked for, but dst_capacity is"
                          " only %zu; nothing was recorded. Fix: pass a"
                          " destination of at least byte_len bytes, or"
                          " ask for fewer.",
                          what, byte_len, capacity);
    if (!whole && byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: byte_len is 0, so the item would do"
                          " nothing. Fix: record only items that move or"
                          " set bytes.",
                          what);
    CURDI_TRY(status, resolve_buffer(batch, buffer, what, &use), out);
    if (whole)
        byte_len = use.byte_len;
    CURDI_TRY(status,
              curdi_checked_range(offset, byte_len, use.byte_len, what), out);
    batch_item item = {.kind = kind, .offset = offset, .byte_len = byte_len,
                       .value = value};
    if (kind == ITEM_UPLOAD)
        item.src = host;
    else if (kind == ITEM_DOWNLOAD)
        item.dst = (void *)(uintptr_t)host;
    return item_append(batch, item, &use, NULL, what);
out:
    return status;
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
    curd_status status;
    CURDI_TRY(status, curdi_dispatch_check_args(program, args, nargs, what),
              out);
    for (size_t index = 0; index < nargs; index++) {
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
        CURDI_TRY(status,
                  resolve_buffer(batch, arg->buffer, what, &uses[index]),
                  out);
        CURDI_TRY(status,
                  curdi_dispatch_check_binding(args, index,
                                               uses[index].byte_len, what),
                  out);
    }
out:
    return status;
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
    curd_status status;
    CURDI_TRY(status, check_batch(batch, what), out);
    CURDI_TRY(status, curdi_copy_check_one(batch->device, copy, what, uses),
              out);
    /* Both ranges lie inside their buffers, whose sizes are size_t. */
    batch_item item = {.kind = ITEM_COPY,
                       .offset = (size_t)copy->dst_offset,
                       .byte_len = (size_t)copy->byte_len,
                       .src_offset = (size_t)copy->src_offset};
    return item_append(batch, item, &uses[0], &uses[1], what);
out:
    return status;
}

curd_status curdi_batch_record_check(curd_batch *batch, const char *what,
                                     curd_device **out_device)
{
    curd_status status = check_batch(batch, what);
    if (status != CURD_OK)
        return status;
    *out_device = batch->device;
    return CURD_OK;
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
    if (status != CURD_OK)
        return status;
    batch->externals++;
    return CURD_OK;
}

/* Takes the entries of a launch's BUFFER arguments (space for nargs more
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
    batch_launch *recorded = NULL;
    curdi_transfer_counts more;
    uint64_t zero_ops = 0, zero_bytes = 0;
    curd_status status;
    CURDI_TRY(status, check_batch(batch, what), out);
    CURDI_TRY(status, curdi_program_check(program, batch->device, what), out);
    CURDI_TRY(status,
              check_batch_shape(batch, program, launch, what, &shape), out);
    if (nargs != 0 && (uses = calloc(nargs, sizeof *uses)) == NULL)
        return fail_memory(what);
    CURDI_TRY(status,
              check_launch_args(batch, program, args, nargs, uses, what),
              free_uses);
    more = batch->counts;
    if (!zero_counts(&more, 0, 0, args, nargs, uses, &zero_ops, &zero_bytes))
        CURDI_TRY(status,
                  curdi_fail(CURD_E_OVERFLOW,
                             "%s: the batch's byte counts would pass 2^64."
                             " Fix: split the batch.",
                             what),
                  free_uses);
    recorded = launch_new(nargs, scalar_bytes(args, nargs), shape.iterations);
    if (recorded == NULL || !reserve_buffer_entries(batch, nargs)
        || !curdi_core_array_reserve(
            (void **)&batch->items, &batch->item_capacity,
            batch->item_count + 1u, sizeof *batch->items))
        CURDI_TRY(status, fail_memory(what), free_recorded);
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
free_recorded:
    free(recorded);
free_uses:
    free(uses);
out:
    return status;
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
    curdi_transfer_counts more;
    uint64_t zero_ops = 0, zero_bytes = 0;
    curd_status status;
    CURDI_TRY(status, check_batch(batch, what), out);
    CURDI_TRY(status, launch_item(batch, item, what, &recorded), out);
    if (nargs != recorded->nargs)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: launch %zu was recorded with %zu arguments,"
                          " not %zu. Fix: pass the same parameter list"
                          " with other values.",
                          what, item, recorded->nargs, nargs);
    for (size_t index = 0; index < nargs; index++) {
        const curd_arg *old = &recorded->args[index];
        if (args == NULL)
            CURDI_TRY(status,
                      curdi_dispatch_check_args(recorded->program, args,
                                                nargs, what),
                      out);
        else if (args[index].kind != old->kind
                 || (old->kind == CURD_ARG_SCALAR
                     && args[index].byte_len != old->byte_len))
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: argument %zu of launch %zu was recorded"
                              " as kind %" PRIu32 " of %zu bytes; it is"
                              " now kind %" PRIu32 " of %zu bytes. Fix:"
                              " keep each argument's kind and size;"
                              " record a new launch for another kernel"
                              " signature.",
                              what, index, item, old->kind, old->byte_len,
                              args[index].kind, args[index].byte_len);
    }
    if (nargs != 0 && (uses = calloc(nargs, sizeof *uses)) == NULL)
        return fail_memory(what);
    CURDI_TRY(status,
              check_launch_args(batch, recorded->program, args, nargs, uses,
                                what),
              free_uses);
    more = batch->counts;
    if (!zero_counts(&more, recorded->zero_ops, recorded->zero_bytes, args,
                     nargs, uses, &zero_ops, &zero_bytes))
        CURDI_TRY(status,
                  curdi_fail(CURD_E_OVERFLOW,
                             "%s: the batch's byte counts would pass 2^64."
                             " Fix: split the batch.",
                             what),
                  free_uses);
    if (!reserve_buffer_entries(batch, nargs))
        CURDI_TRY(status, fail_memory(what), free_uses);
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
free_uses:
    free(uses);
out:
    return status;
}

CURD_API curd_status curd_batch_set_launch(curd_batch *batch, size_t item,
                                           const curd_launch *launch)
{
    const char *what = "curd_batch_set_launch";
    batch_launch *recorded = NULL;
    curdi_launch_shape shape;
    curd_status status;
    CURDI_TRY(status, check_batch(batch, what), out);
    CURDI_TRY(status, launch_item(batch, item, what, &recorded), out);
    CURDI_TRY(status,
              check_batch_shape(batch, recorded->program, launch, what,
                                &shape),
              out);
    if (shape.cooperative != recorded->shape.cooperative
        || shape.iterations != recorded->shape.iterations)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
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
    recorded->shape = shape;
    recorded->dirty = true;
    batch->any_dirty = true;
out:
    return status;
}
