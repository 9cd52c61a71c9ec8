/* transfer.c - curd-bench scenarios for resident-buffer transfers.
 *
 * transfer/fused-reads          64 adjacent 4 KiB range reads of one
 *                               resident buffer in one curd_download_batch,
 *                               against 64 raw cuMemcpyDtoHAsync with one
 *                               fence and one raw 256 KiB copy.
 * transfer/pageable-upload-256M curd_buffer_upload from malloc memory against
 *                               cuMemcpyHtoD (fenced) from the same memory,
 *                               cuMemcpyHtoDAsync from pinned memory and the
 *                               raw staged upload (raw/staged.h).
 * transfer/pinned-upload-256M   curd uploads from a registered source against
 *                               raw cuMemcpyHtoDAsync from pinned memory.
 * transfer/pageable-download-256M, transfer/pinned-download-256M likewise.
 * transfer/small-roundtrip      4 KiB up and 4 KiB down, one fence each.
 *
 * Raw copies run on one non-blocking stream and end with one
 * cuStreamSynchronize; raw pinned memory comes from cuMemHostAlloc. The raw
 * variants address the same resident buffer as curd (its device pointer),
 * so both sides move the same bytes between the same memory. */
#include "scenarios/transfer.h"
#include "harness/report.h"
#include "raw/staged.h"
#include "scenarios/scenarios.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUSED_PIECE_BYTES (4 * BENCH_KIB)
#define FUSED_PIECE_COUNT 64
#define LARGE_BYTES (256 * BENCH_MIB)
#define SMALL_BYTES (4 * BENCH_KIB)

/* ------------------------------------------------------------------------
 * curd operations
 * ---------------------------------------------------------------------- */
int bench_op_curd_upload(void *opaque, uint64_t iterations)
{
    bench_copy_op *op = opaque;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++)
        BENCH_CURD(curd_buffer_upload(op->env->device, op->buffer, op->host,
                                      op->byte_len));
    return 0;
}

static int op_curd_upload_async(void *opaque, uint64_t iterations)
{
    bench_copy_op *op = opaque;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CURD(curd_buffer_upload_async(op->env->device, op->buffer, 0,
                                            op->host, op->byte_len));
        BENCH_CURD(curd_device_sync_uploads(op->env->device));
    }
    return 0;
}

int bench_op_curd_download(void *opaque, uint64_t iterations)
{
    bench_copy_op *op = opaque;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++)
        BENCH_CURD(curd_buffer_download(op->env->device, op->buffer, op->host,
                                        op->byte_len));
    return 0;
}

static int curd_batch_loop(const bench_copy_op *op, uint64_t iterations,
                           bool upload)
{
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        curd_status status =
            upload ? curd_upload_batch(op->env->device, op->upload_items,
                                       op->item_count)
                   : curd_download_batch(op->env->device, op->items,
                                         op->item_count);
        if (status != CURD_OK)
            return bench_fail_curd(upload ? "curd_upload_batch"
                                          : "curd_download_batch",
                                   status);
    }
    return 0;
}

int bench_op_curd_download_batch(void *opaque, uint64_t iterations)
{
    return curd_batch_loop(opaque, iterations, false);
}

int bench_op_curd_upload_batch(void *opaque, uint64_t iterations)
{
    return curd_batch_loop(opaque, iterations, true);
}

static int op_curd_roundtrip(void *opaque, uint64_t iterations)
{
    bench_copy_op *op = opaque;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CURD(curd_buffer_upload(op->env->device, op->buffer, op->host,
                                      op->byte_len));
        BENCH_CURD(curd_buffer_download(op->env->device, op->buffer,
                                        op->host_out, op->byte_len));
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Raw driver operations: each enters the device's context for its batch.
 * ---------------------------------------------------------------------- */
typedef int (*raw_loop_fn)(const bench_copy_op *op, uint64_t iterations);

static int run_raw(void *opaque, uint64_t iterations, raw_loop_fn loop)
{
    bench_copy_op *op = opaque;
    int result;
    if (bench_raw_enter(op->env) != 0)
        return -1;
    result = loop(op, iterations);
    bench_raw_leave(op->env);
    return result;
}

/* cuMemcpyHtoD from pageable memory returns once the driver has staged
 * the bytes, before its DMA ends (the driver API's synchronization rules;
 * at 4 KiB the fence below adds 1.0 to 1.5 us on the H100 host), so each
 * one is fenced: the same work as a curd upload, which returns once the
 * bytes have arrived. */
static int raw_htod_sync_loop(const bench_copy_op *op, uint64_t iterations)
{
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(op->env->cu->cuMemcpyHtoD(op->device_ptr, op->host,
                                           op->byte_len));
        BENCH_CU(op->env->cu->cuCtxSynchronize());
    }
    return 0;
}

static int raw_htod_async_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(driver->cuMemcpyHtoDAsync(op->device_ptr, op->host,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
    }
    return 0;
}

static int raw_dtoh_sync_loop(const bench_copy_op *op, uint64_t iterations)
{
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++)
        BENCH_CU(op->env->cu->cuMemcpyDtoH(op->host, op->device_ptr,
                                               op->byte_len));
    return 0;
}

static int raw_dtoh_async_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(driver->cuMemcpyDtoHAsync(op->host, op->device_ptr,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
    }
    return 0;
}

static int raw_htod_staged_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        memcpy(op->bounce, op->host, op->byte_len);
        BENCH_CU(driver->cuMemcpyHtoDAsync(op->device_ptr, op->bounce,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
    }
    return 0;
}

static int raw_dtoh_staged_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(driver->cuMemcpyDtoHAsync(op->bounce, op->device_ptr,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
        memcpy(op->host, op->bounce, op->byte_len);
    }
    return 0;
}

/* item_count copies of piece_bytes each, then one fence. */
static int raw_pieces_loop(const bench_copy_op *op, uint64_t iterations,
                           bool upload)
{
    const bench_cuda *driver = op->env->cu;
    unsigned char *host = op->host;
    size_t stride = op->stride != 0 ? op->stride : op->piece_bytes;
    uint64_t iteration;
    size_t piece;
    for (iteration = 0; iteration < iterations; iteration++) {
        for (piece = 0; piece < op->item_count; piece++) {
            unsigned char *at = host + piece * op->piece_bytes;
            bench_cu_deviceptr device =
                op->device_ptr
                + (bench_cu_deviceptr)(op->offsets != NULL ? op->offsets[piece]
                                                           : piece * stride);
            if (upload)
                BENCH_CU(driver->cuMemcpyHtoDAsync(device, at, op->piece_bytes,
                                                   op->stream));
            else
                BENCH_CU(driver->cuMemcpyDtoHAsync(at, device, op->piece_bytes,
                                                   op->stream));
        }
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
    }
    return 0;
}

static int raw_dtoh_pieces_loop(const bench_copy_op *op, uint64_t iterations)
{
    return raw_pieces_loop(op, iterations, false);
}

static int raw_htod_pieces_loop(const bench_copy_op *op, uint64_t iterations)
{
    return raw_pieces_loop(op, iterations, true);
}

static int raw_roundtrip_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(driver->cuMemcpyHtoDAsync(op->device_ptr, op->host,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
        BENCH_CU(driver->cuMemcpyDtoHAsync(op->host_out, op->device_ptr,
                                           op->byte_len, op->stream));
        BENCH_CU(driver->cuStreamSynchronize(op->stream));
    }
    return 0;
}

static int raw_roundtrip_sync_loop(const bench_copy_op *op, uint64_t iterations)
{
    const bench_cuda *driver = op->env->cu;
    uint64_t iteration;
    for (iteration = 0; iteration < iterations; iteration++) {
        BENCH_CU(driver->cuMemcpyHtoD(op->device_ptr, op->host, op->byte_len));
        BENCH_CU(driver->cuMemcpyDtoH(op->host_out, op->device_ptr,
                                      op->byte_len));
    }
    return 0;
}

int bench_op_raw_htod_sync(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_htod_sync_loop);
}

int bench_op_raw_htod_async(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_htod_async_loop);
}

int bench_op_raw_dtoh_sync(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_dtoh_sync_loop);
}

int bench_op_raw_dtoh_async(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_dtoh_async_loop);
}

int bench_op_raw_htod_staged(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_htod_staged_loop);
}

int bench_op_raw_dtoh_staged(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_dtoh_staged_loop);
}

int bench_op_raw_dtoh_pieces(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_dtoh_pieces_loop);
}

int bench_op_raw_htod_pieces(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_htod_pieces_loop);
}

static int op_raw_roundtrip(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_roundtrip_loop);
}

static int op_raw_roundtrip_sync(void *opaque, uint64_t iterations)
{
    return run_raw(opaque, iterations, raw_roundtrip_sync_loop);
}

/* ------------------------------------------------------------------------
 * Set-up helpers and checks.
 * ---------------------------------------------------------------------- */

void bench_transfer_free(bench_transfer_state *state)
{
    const bench_env *env = state->env;
    if (env == NULL)
        return; /* never initialised (zeroed) */
    if (state->host_registered)
        curd_host_unregister(env->device, state->host);
    if (state->pinned != NULL || state->pinned_out != NULL) {
        if (bench_raw_enter(env) == 0) {
            if (state->pinned != NULL)
                env->cu->cuMemFreeHost(state->pinned);
            if (state->pinned_out != NULL)
                env->cu->cuMemFreeHost(state->pinned_out);
            bench_raw_leave(env);
        }
    }
    if (state->have_stream)
        bench_stream_release(env, state->stream);
    if (state->buffer.id != 0)
        curd_buffer_free(env->device, state->buffer);
    free(state->reference);
    free(state->scratch);
    free(state->host);
    free(state->host_out);
    memset(state, 0, sizeof *state);
}

int bench_transfer_init(bench_transfer_state *state, const bench_env *env,
                         size_t byte_len, uint64_t seed_salt)
{
    uint64_t seed = env->seed ^ seed_salt;
    uint64_t device_ptr = 0;
    memset(state, 0, sizeof *state);
    state->env = env;
    state->byte_len = byte_len;
    BENCH_CURD(curd_buffer_alloc(env->device, byte_len, &state->buffer));
    BENCH_CURD(curd_buffer_device_ptr(env->device, state->buffer,
                                      &device_ptr));
    state->device_ptr = (bench_cu_deviceptr)device_ptr;
    if (bench_stream_acquire(env, &state->stream) != 0)
        return -1;
    state->have_stream = true;
    state->reference = bench_host_alloc(byte_len, "the reference bytes");
    state->scratch = bench_host_alloc(byte_len, "the read-back buffer");
    if (state->reference == NULL || state->scratch == NULL)
        return -1;
    bench_fill_random(&seed, state->reference, byte_len);
    return 0;
}

int bench_transfer_add_host(bench_transfer_state *state, bool registered)
{
    state->host = bench_host_alloc(state->byte_len, "the caller's memory");
    if (state->host == NULL)
        return -1;
    /* Touch every page now, so that no variant pays the first faults. */
    memcpy(state->host, state->reference, state->byte_len);
    if (registered) {
        BENCH_CURD(curd_host_register(state->env->device, state->host,
                                      state->byte_len));
        state->host_registered = true;
    }
    return 0;
}

int bench_transfer_add_pinned(bench_transfer_state *state, void **out,
                               size_t byte_len)
{
    const bench_env *env = state->env;
    bench_cu_result cu_result;
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemHostAlloc(out, byte_len,
                                            BENCH_CU_MEMHOSTALLOC_PORTABLE);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemHostAlloc", cu_result);
    memset(*out, 0, byte_len);
    return 0;
}

int bench_raw_copy_in(const bench_env *env, bench_cu_deviceptr device_ptr,
                       const void *host, size_t byte_len)
{
    bench_cu_result cu_result;
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemcpyHtoD(device_ptr, host, byte_len);
    /* From pageable memory cuMemcpyHtoD may return before its DMA has
     * landed, and the legacy stream it uses does not order curd's
     * non-blocking streams: without this, the poison written here could
     * land over the bytes of the curd path checked next (the H100 showed
     * it once, in the tail of a 64 KiB registered upload). */
    if (cu_result == BENCH_CUDA_SUCCESS)
        cu_result = env->cu->cuCtxSynchronize();
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemcpyHtoD (set-up)", cu_result);
    return 0;
}

int bench_raw_copy_out(const bench_env *env, void *host,
                        bench_cu_deviceptr device_ptr, size_t byte_len)
{
    bench_cu_result cu_result;
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemcpyDtoH(host, device_ptr, byte_len);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemcpyDtoH (check)", cu_result);
    return 0;
}

int bench_check_read_into(bench_op_fn op, void *context, void *destination,
                          const void *expected, size_t byte_len,
                          const char *what)
{
    bench_poison(destination, byte_len);
    if (op(context, 1) != 0)
        return -1;
    return bench_compare(what, expected, destination, byte_len);
}

int bench_check_write_to(const bench_env *env, bench_op_fn op, void *context,
                         bench_cu_deviceptr device_ptr, unsigned char *scratch,
                         const void *expected, size_t byte_len,
                         const char *what)
{
    bench_poison(scratch, byte_len);
    if (bench_raw_copy_in(env, device_ptr, scratch, byte_len) != 0)
        return -1;
    if (op(context, 1) != 0)
        return -1;
    bench_poison(scratch, byte_len);
    if (bench_raw_copy_out(env, scratch, device_ptr, byte_len) != 0)
        return -1;
    return bench_compare(what, expected, scratch, byte_len);
}

int bench_check_upload(bench_transfer_state *state, bench_op_fn op, void *context,
                        const char *what)
{
    return bench_check_write_to(state->env, op, context, state->device_ptr,
                                state->scratch, state->reference,
                                state->byte_len, what);
}

int bench_check_download(bench_transfer_state *state, bench_op_fn op,
                          void *context, void *destination, const char *what)
{
    return bench_check_read_into(op, context, destination, state->reference,
                                 state->byte_len, what);
}

bool bench_has_host_register(const bench_env *env)
{
    return (env->props.capabilities & CURD_CAP_HOST_REGISTER) != 0;
}

bench_copy_op bench_make_op(const bench_transfer_state *state, void *host)
{
    bench_copy_op op;
    memset(&op, 0, sizeof op);
    op.env = state->env;
    op.buffer = state->buffer;
    op.device_ptr = state->device_ptr;
    op.stream = state->stream;
    op.host = host;
    op.byte_len = state->byte_len;
    return op;
}

static int stats_read(const bench_env *env, curd_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
    BENCH_CURD(curd_device_stats(env->device, stats));
    return 0;
}

/* ------------------------------------------------------------------------
 * transfer/fused-reads
 * ---------------------------------------------------------------------- */
static void fill_items(curd_download *items, curd_buffer buffer,
                       unsigned char *destination)
{
    size_t piece;
    for (piece = 0; piece < FUSED_PIECE_COUNT; piece++) {
        items[piece].buffer = buffer;
        items[piece].offset = piece * FUSED_PIECE_BYTES;
        items[piece].byte_len = FUSED_PIECE_BYTES;
        items[piece].dst = destination + piece * FUSED_PIECE_BYTES;
        items[piece].dst_capacity = FUSED_PIECE_BYTES;
    }
}

int bench_note_batch_cost(bench_scenario *scenario, bench_copy_op *op,
                          bool upload, const char *what)
{
    curd_stats before, after;
    if (stats_read(op->env, &before) != 0)
        return -1;
    if ((upload ? bench_op_curd_upload_batch : bench_op_curd_download_batch)(
            op, 1) != 0)
        return -1;
    if (stats_read(op->env, &after) != 0)
        return -1;
    bench_note(scenario, "one batch (%s): %llu DMA ops, %llu fences, %llu "
                         "bytes %s",
               what, (unsigned long long)(after.copy_ops - before.copy_ops),
               (unsigned long long)(after.fences - before.fences),
               (unsigned long long)(upload ? after.h2d_bytes - before.h2d_bytes
                                           : after.d2h_bytes - before.d2h_bytes),
               upload ? "H2D" : "D2H");
    return 0;
}

int bench_transfer_fused_reads(const bench_env *env)
{
    const size_t total_bytes = FUSED_PIECE_BYTES * FUSED_PIECE_COUNT;
    bench_transfer_state state;
    bench_scenario scenario;
    curd_download items_pageable[FUSED_PIECE_COUNT];
    curd_download items_registered[FUSED_PIECE_COUNT];
    unsigned char *registered = NULL;
    bool with_registered = bench_has_host_register(env);
    bool registered_done = false;
    bench_copy_op curd_pageable, curd_registered, raw_pieces, raw_one;
    int curd_p = -1, curd_r = -1, raw_64, raw_1;
    int result = -1;

    if (bench_transfer_init(&state, env, total_bytes, 0x3003u) != 0)
        goto done;
    if (bench_transfer_add_host(&state, false) != 0)
        goto done;
    if (bench_transfer_add_pinned(&state, &state.pinned, total_bytes) != 0)
        goto done;
    if (bench_raw_copy_in(env, state.device_ptr, state.reference, total_bytes) != 0)
        goto done;
    if (with_registered) {
        registered = bench_host_alloc(total_bytes, "the registered reads");
        if (registered == NULL)
            goto done;
        memset(registered, 0, total_bytes);
        if (curd_host_register(env->device, registered, total_bytes) !=
            CURD_OK) {
            bench_fail("curd_host_register of %zu bytes failed: %s",
                       total_bytes, curd_last_error());
            goto done;
        }
        registered_done = true;
    }

    fill_items(items_pageable, state.buffer, state.host);
    fill_items(items_registered, state.buffer, registered);
    curd_pageable = bench_make_op(&state, state.host);
    curd_pageable.items = items_pageable;
    curd_pageable.item_count = FUSED_PIECE_COUNT;
    curd_registered = curd_pageable;
    curd_registered.items = items_registered;
    raw_pieces = bench_make_op(&state, state.pinned);
    raw_pieces.item_count = FUSED_PIECE_COUNT;
    raw_pieces.piece_bytes = FUSED_PIECE_BYTES;
    raw_one = bench_make_op(&state, state.pinned);

    if (bench_check_download(&state, bench_op_curd_download_batch, &curd_pageable,
                       state.host, "curd_download_batch, 64 x 4 KiB") != 0)
        goto done;
    if (with_registered &&
        bench_check_download(&state, bench_op_curd_download_batch, &curd_registered,
                       registered,
                       "curd_download_batch into registered memory") != 0)
        goto done;
    if (bench_check_download(&state, bench_op_raw_dtoh_pieces, &raw_pieces, state.pinned,
                       "64 x cuMemcpyDtoHAsync 4 KiB") != 0)
        goto done;
    if (bench_check_download(&state, bench_op_raw_dtoh_async, &raw_one, state.pinned,
                       "cuMemcpyDtoHAsync 256 KiB") != 0)
        goto done;

    bench_scenario_init(&scenario, env, "transfer/fused-reads", env->samples,
                        "64 adjacent 4 KiB reads of one resident 256 KiB "
                        "buffer, one fence");
    curd_p = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_download_batch 64 x 4 KiB, malloc dst",
        .role = BENCH_ROLE_CURD, .op = bench_op_curd_download_batch,
        .context = &curd_pageable, .bytes_per_op = total_bytes});
    if (with_registered)
        curd_r = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = "curd_download_batch 64 x 4 KiB, registered dst",
            .role = BENCH_ROLE_CURD, .op = bench_op_curd_download_batch,
            .context = &curd_registered, .bytes_per_op = total_bytes});
    raw_64 = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "64 x cuMemcpyDtoHAsync 4 KiB, pinned dst",
        .role = BENCH_ROLE_RAW, .op = bench_op_raw_dtoh_pieces,
        .context = &raw_pieces, .bytes_per_op = total_bytes});
    raw_1 = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "1 x cuMemcpyDtoHAsync 256 KiB, pinned dst",
        .role = BENCH_ROLE_RAW, .op = bench_op_raw_dtoh_async, .context = &raw_one,
        .bytes_per_op = total_bytes});
    if (curd_p < 0 || raw_64 < 0 || raw_1 < 0 || (with_registered && curd_r < 0))
        goto done;
    if (bench_measure(&scenario) != 0)
        goto done;

    bench_check_ratio(&scenario, curd_p, raw_1, 1.2, "within 1.2x");
    bench_check_ratio(&scenario, curd_p, raw_64, 1.0 / 8.0, ">= 8x faster");
    if (curd_r >= 0) {
        bench_check_ratio(&scenario, curd_r, raw_1, 1.2, "within 1.2x");
        bench_check_ratio(&scenario, curd_r, raw_64, 1.0 / 8.0,
                          ">= 8x faster");
    }
    if (bench_note_batch_cost(&scenario, &curd_pageable, false, "malloc dst") !=
        0)
        goto done;
    if (curd_r >= 0 && bench_note_batch_cost(&scenario, &curd_registered, false,
                                             "registered dst") != 0)
        goto done;
    bench_report_scenario(&scenario);
    if (!with_registered)
        bench_report_skip("transfer/fused-reads",
                          "registered-destination variant: no "
                          "cuMemHostRegister in this driver");
    result = 0;

done:
    if (registered_done)
        curd_host_unregister(env->device, registered);
    free(registered);
    bench_transfer_free(&state);
    return result;
}

/* ------------------------------------------------------------------------
 * 256 MiB uploads and downloads
 * ---------------------------------------------------------------------- */
static int large_transfer(const bench_env *env, const char *name,
                          bool upload, bool pinned_source)
{
    bench_transfer_state state;
    bench_scenario scenario;
    bench_copy_op curd_sync, curd_async, raw_same, raw_pinned;
    bench_staged *staged = NULL;
    int curd_main = -1, curd_second = -1, raw_same_index = -1,
        raw_pinned_index = -1, staged_index = -1;
    const char *direction = upload ? "upload" : "download";
    int result = -1;

    if (pinned_source && !bench_has_host_register(env)) {
        bench_report_skip(name, "no cuMemHostRegister in this driver, so no "
                                "registered caller memory to time");
        return 0;
    }
    if (bench_transfer_init(&state, env, LARGE_BYTES,
                      (upload ? 0x4004u : 0x5005u) ^
                          (pinned_source ? 0x100u : 0u)) != 0)
        goto done;
    if (bench_transfer_add_host(&state, pinned_source) != 0)
        goto done;
    if (bench_transfer_add_pinned(&state, &state.pinned, LARGE_BYTES) != 0)
        goto done;
    if (upload)
        memcpy(state.pinned, state.reference, LARGE_BYTES);
    else if (bench_raw_copy_in(env, state.device_ptr, state.reference,
                         LARGE_BYTES) != 0)
        goto done;

    curd_sync = bench_make_op(&state, state.host);
    curd_async = bench_make_op(&state, state.host);
    raw_same = bench_make_op(&state, state.host);
    raw_pinned = bench_make_op(&state, state.pinned);

    if (upload) {
        if (bench_check_upload(&state, bench_op_curd_upload, &curd_sync,
                         "curd_buffer_upload 256 MiB") != 0)
            goto done;
        if (pinned_source &&
            bench_check_upload(&state, op_curd_upload_async, &curd_async,
                         "curd_buffer_upload_async 256 MiB") != 0)
            goto done;
        if (bench_check_upload(&state,
                         pinned_source ? bench_op_raw_htod_async : bench_op_raw_htod_sync,
                         &raw_same, "raw upload from the caller's memory") !=
            0)
            goto done;
        if (bench_check_upload(&state, bench_op_raw_htod_async, &raw_pinned,
                         "cuMemcpyHtoDAsync from pinned memory") != 0)
            goto done;
        if (!pinned_source &&
            (bench_staged_create(env, state.device_ptr, state.host,
                                 LARGE_BYTES, &staged) != 0 ||
             bench_check_upload(&state, bench_op_staged_upload, staged,
                                "the raw staged upload") != 0))
            goto done;
    } else {
        if (bench_check_download(&state, bench_op_curd_download, &curd_sync, state.host,
                           "curd_buffer_download 256 MiB") != 0)
            goto done;
        if (bench_check_download(&state,
                           pinned_source ? bench_op_raw_dtoh_async
                                         : bench_op_raw_dtoh_sync,
                           &raw_same, state.host,
                           "raw download into the caller's memory") != 0)
            goto done;
        if (bench_check_download(&state, bench_op_raw_dtoh_async, &raw_pinned,
                           state.pinned,
                           "cuMemcpyDtoHAsync into pinned memory") != 0)
            goto done;
    }

    bench_scenario_init(&scenario, env, name, env->samples_large,
                        "256 MiB %s %s %s caller memory, curd vs raw driver",
                        direction, upload ? "from" : "into",
                        pinned_source ? "registered (page-locked)"
                                      : "malloc (pageable)");
    {
        char label[96];
        snprintf(label, sizeof label, "curd_buffer_%s, %s", direction,
                 pinned_source ? "registered" : "malloc");
        curd_main = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_CURD,
            .op = upload ? bench_op_curd_upload : bench_op_curd_download,
            .context = &curd_sync, .bytes_per_op = LARGE_BYTES});
        if (upload && pinned_source)
            curd_second = bench_add_variant(&scenario, &(bench_variant_spec){
                .label = "curd_buffer_upload_async+sync_uploads, registered",
                .role = BENCH_ROLE_CURD, .op = op_curd_upload_async,
                .context = &curd_async, .bytes_per_op = LARGE_BYTES});
        if (pinned_source)
            snprintf(label, sizeof label, "%s, same registered memory",
                     upload ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
        else
            snprintf(label, sizeof label, "%s, same malloc memory",
                     upload ? "cuMemcpyHtoD+cuCtxSynchronize"
                            : "cuMemcpyDtoH");
        raw_same_index = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_RAW,
            .op = upload ? (pinned_source ? bench_op_raw_htod_async
                                          : bench_op_raw_htod_sync)
                         : (pinned_source ? bench_op_raw_dtoh_async
                                          : bench_op_raw_dtoh_sync),
            .context = &raw_same, .bytes_per_op = LARGE_BYTES});
        snprintf(label, sizeof label, "%s, cuMemHostAlloc memory",
                 upload ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
        raw_pinned_index = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_RAW,
            .op = upload ? bench_op_raw_htod_async : bench_op_raw_dtoh_async,
            .context = &raw_pinned, .bytes_per_op = LARGE_BYTES});
        if (staged != NULL) {
            unsigned threads = bench_staged_threads(staged);
            snprintf(label, sizeof label,
                     "raw staged: %u copy thread%s, %u x %u MiB pinned slots",
                     threads, threads == 1 ? "" : "s", BENCH_STAGED_SLOTS,
                     BENCH_STAGED_CHUNK_MIB);
            staged_index = bench_add_variant(&scenario, &(bench_variant_spec){
                .label = label, .role = BENCH_ROLE_RAW,
                .op = bench_op_staged_upload, .context = staged,
                .bytes_per_op = LARGE_BYTES});
        }
    }
    if (curd_main < 0 || raw_same_index < 0 || raw_pinned_index < 0 ||
        (upload && pinned_source && curd_second < 0) ||
        (staged != NULL && staged_index < 0))
        goto done;
    if (bench_measure(&scenario) != 0)
        goto done;

    if (pinned_source) {
        bench_check_ratio(&scenario, curd_main, raw_pinned_index, 1.0 / 0.95,
                          ">= 95% of raw pinned bandwidth");
        if (curd_second >= 0)
            bench_check_ratio(&scenario, curd_second, raw_pinned_index,
                              1.0 / 0.95, ">= 95% of raw pinned bandwidth");
        bench_check_ratio(&scenario, curd_main, raw_same_index, 0.0, NULL);
    } else {
        bench_check_ratio(&scenario, curd_main, raw_same_index, 1.0 / 3.0,
                          ">= 3x faster");
        bench_check_ratio(&scenario, curd_main, raw_pinned_index, 0.0, NULL);
        if (staged_index >= 0)
            bench_check_ratio(&scenario, curd_main, staged_index, 1.05,
                              "within 1.05x of the raw staged upload");
    }
    bench_note(&scenario, "raw async copies: one pooled stream, one "
                          "cuStreamSynchronize per copy; GB/s = 1e9 bytes/s");
    bench_report_scenario(&scenario);
    result = 0;

done:
    bench_staged_destroy(staged);
    bench_transfer_free(&state);
    return result;
}

int bench_transfer_pageable_upload(const bench_env *env)
{
    return large_transfer(env, "transfer/pageable-upload-256M", true, false);
}

int bench_transfer_pinned_upload(const bench_env *env)
{
    return large_transfer(env, "transfer/pinned-upload-256M", true, true);
}

int bench_transfer_pageable_download(const bench_env *env)
{
    return large_transfer(env, "transfer/pageable-download-256M", false,
                          false);
}

int bench_transfer_pinned_download(const bench_env *env)
{
    return large_transfer(env, "transfer/pinned-download-256M", false, true);
}

/* ------------------------------------------------------------------------
 * transfer/small-roundtrip
 * ---------------------------------------------------------------------- */

/* Poisons the device buffer and the destination, draws fresh source bytes,
 * runs one round trip and compares. */
static int check_roundtrip(bench_transfer_state *state, bench_copy_op *op,
                           bench_op_fn run, uint64_t *seed, const char *what)
{
    bench_poison(state->scratch, state->byte_len);
    if (bench_raw_copy_in(state->env, state->device_ptr, state->scratch,
                    state->byte_len) != 0)
        return -1;
    bench_fill_random(seed, state->reference, state->byte_len);
    memcpy(op->host, state->reference, state->byte_len);
    bench_poison(op->host_out, state->byte_len);
    if (run(op, 1) != 0)
        return -1;
    return bench_compare(what, state->reference, op->host_out,
                         state->byte_len);
}

int bench_transfer_small_roundtrip(const bench_env *env)
{
    bench_transfer_state state;
    bench_scenario scenario;
    bench_copy_op curd_op, raw_op, raw_sync_op;
    uint64_t seed = env->seed ^ 0x6006u;
    int curd_index, raw_index, raw_sync_index;
    int result = -1;

    if (bench_transfer_init(&state, env, SMALL_BYTES, 0x7007u) != 0)
        goto done;
    if (bench_transfer_add_host(&state, false) != 0)
        goto done;
    state.host_out = bench_host_alloc(SMALL_BYTES, "the round-trip output");
    if (state.host_out == NULL)
        goto done;
    memset(state.host_out, 0, SMALL_BYTES);
    if (bench_transfer_add_pinned(&state, &state.pinned, SMALL_BYTES) != 0 ||
        bench_transfer_add_pinned(&state, &state.pinned_out, SMALL_BYTES) != 0)
        goto done;

    curd_op = bench_make_op(&state, state.host);
    curd_op.host_out = state.host_out;
    raw_op = bench_make_op(&state, state.pinned);
    raw_op.host_out = state.pinned_out;
    raw_sync_op = bench_make_op(&state, state.host);
    raw_sync_op.host_out = state.host_out;

    if (check_roundtrip(&state, &curd_op, op_curd_roundtrip, &seed,
                        "curd 4 KiB round trip") != 0 ||
        check_roundtrip(&state, &raw_op, op_raw_roundtrip, &seed,
                        "raw pinned 4 KiB round trip") != 0 ||
        check_roundtrip(&state, &raw_sync_op, op_raw_roundtrip_sync, &seed,
                        "raw pageable 4 KiB round trip") != 0)
        goto done;

    bench_scenario_init(&scenario, env, "transfer/small-roundtrip",
                        env->samples,
                        "4 KiB upload then 4 KiB download of a resident "
                        "buffer, one fence each");
    curd_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_buffer_upload+download, malloc memory",
        .role = BENCH_ROLE_CURD, .op = op_curd_roundtrip,
        .context = &curd_op});
    raw_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "cuMemcpyHtoDAsync+sync+DtoHAsync+sync, pinned",
        .role = BENCH_ROLE_RAW, .op = op_raw_roundtrip, .context = &raw_op});
    raw_sync_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "cuMemcpyHtoD+cuMemcpyDtoH, malloc memory",
        .role = BENCH_ROLE_RAW, .op = op_raw_roundtrip_sync,
        .context = &raw_sync_op});
    if (curd_index < 0 || raw_index < 0 || raw_sync_index < 0)
        goto done;
    if (bench_measure(&scenario) != 0)
        goto done;
    bench_check_ratio(&scenario, curd_index, raw_index, 0.0, NULL);
    bench_check_ratio(&scenario, curd_index, raw_sync_index, 0.0, NULL);
    bench_report_scenario(&scenario);
    result = 0;

done:
    bench_transfer_free(&state);
    return result;
}
