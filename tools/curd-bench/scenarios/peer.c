/* peer.c - curd-bench scenarios for copies between two GPUs.
 *
 * peer/copy-256M     curd_buffer_copy of 256 MiB from a resident buffer of
 *                    the run's device (GPU0) into one of the next device
 *                    (GPU1), against cuMemcpyPeerAsync of the same bytes
 *                    on a raw stream of GPU1 and its cuStreamSynchronize.
 * peer/copy-4K-sync  the same for 4 KiB: what one synchronised small copy
 *                    costs.
 *
 * Both sides address the same two buffers (curd_buffer_device_ptr), so
 * the raw copy moves exactly the bytes curd does. Peer access is enabled
 * for GPU1's context on GPU0's memory before anything is timed, by curd's
 * first copy and by the raw driver (which then finds it enabled): the raw
 * copy goes over the same link. Without peer access (cuDeviceCanAccessPeer
 * says 0) both run, curd staged through pinned memory and the driver
 * staging on its own, and a note says so. Both scenarios skip, saying
 * why, on a machine with one GPU. */
#include "harness/pair.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdio.h>
#include <stdlib.h>

#define PEER_LARGE_BYTES (256 * BENCH_MIB)
#define PEER_SMALL_BYTES (4 * BENCH_KIB)
/* The floors measured with PyTorch 2.11 on the 2 x H100 NVLink machine
 * (issue 26): 383 GB/s for 256 MiB, 19.3 us for 4 KiB synchronised. */
#define PYTORCH_PEER_GBPS 383.0
#define PYTORCH_PEER_SMALL_NS 19300.0

/* What the timed copies work on: GPU0's source and GPU1's destination. */
typedef struct peer_state {
    const bench_env *src_env; /* GPU0, the run's device */
    const bench_env *dst_env; /* GPU1 */
    size_t byte_len;
    curd_buffer src;
    curd_buffer dst;
    bench_cu_deviceptr src_ptr;
    bench_cu_deviceptr dst_ptr;
    bench_cu_stream stream; /* a raw stream of GPU1 */
    unsigned char *reference;
    unsigned char *scratch;
    bool peer_access;
} peer_state;

static int op_curd_copy(void *context, uint64_t iterations)
{
    peer_state *state = context;
    curd_copy copy = {state->dst, 0, state->src, 0, state->byte_len};
    for (uint64_t index = 0; index < iterations; index++)
        BENCH_CURD(curd_buffer_copy(state->dst_env->device,
                                    state->src_env->device, &copy, 1));
    return 0;
}

static int op_raw_peer(void *context, uint64_t iterations)
{
    peer_state *state = context;
    const bench_cuda *cu = state->dst_env->cu;
    bench_cu_result cu_result = BENCH_CUDA_SUCCESS;
    if (bench_raw_enter(state->dst_env) != 0)
        return -1;
    for (uint64_t index = 0;
         index < iterations && cu_result == BENCH_CUDA_SUCCESS; index++) {
        cu_result = cu->cuMemcpyPeerAsync(
            state->dst_ptr, state->dst_env->context, state->src_ptr,
            state->src_env->context, state->byte_len, state->stream);
        if (cu_result == BENCH_CUDA_SUCCESS)
            cu_result = cu->cuStreamSynchronize(state->stream);
    }
    bench_raw_leave(state->dst_env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemcpyPeerAsync + cuStreamSynchronize",
                             cu_result);
    return 0;
}

/* Poisons GPU1's buffer, runs one copy, reads it back with a raw copy
 * and compares every byte with what GPU0's buffer holds. */
static int check_copy(peer_state *state, bench_op_fn op, const char *what)
{
    bench_poison(state->scratch, state->byte_len);
    if (bench_raw_copy_in(state->dst_env, state->dst_ptr, state->scratch,
                          state->byte_len) != 0 ||
        op(state, 1) != 0 ||
        bench_raw_copy_out(state->dst_env, state->scratch, state->dst_ptr,
                           state->byte_len) != 0)
        return -1;
    return bench_compare(what, state->reference, state->scratch,
                         state->byte_len);
}

/* Lets GPU1's context reach GPU0's memory, as curd's first copy did:
 * already enabled is what is expected. */
static int enable_peer_access(peer_state *state)
{
    const bench_cuda *cu = state->dst_env->cu;
    int can_access = 0;
    bench_cu_result cu_result;
    BENCH_CU(cu->cuDeviceCanAccessPeer(&can_access, state->dst_env->cu_device,
                                       state->src_env->cu_device));
    state->peer_access = can_access != 0;
    if (!state->peer_access)
        return 0;
    if (bench_raw_enter(state->dst_env) != 0)
        return -1;
    cu_result = cu->cuCtxEnablePeerAccess(state->src_env->context, 0);
    bench_raw_leave(state->dst_env);
    if (cu_result != BENCH_CUDA_SUCCESS &&
        cu_result != BENCH_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return bench_fail_cu("cuCtxEnablePeerAccess", cu_result);
    return 0;
}

static int state_init(peer_state *state, const bench_env *src_env,
                      const bench_env *dst_env, size_t byte_len)
{
    uint64_t seed = src_env->seed ^ 0x9009u ^ byte_len;
    uint64_t device_ptr = 0;
    state->src_env = src_env;
    state->dst_env = dst_env;
    state->byte_len = byte_len;
    BENCH_CURD(curd_buffer_alloc(src_env->device, byte_len, &state->src));
    BENCH_CURD(curd_buffer_device_ptr(src_env->device, state->src,
                                      &device_ptr));
    state->src_ptr = (bench_cu_deviceptr)device_ptr;
    BENCH_CURD(curd_buffer_alloc(dst_env->device, byte_len, &state->dst));
    BENCH_CURD(curd_buffer_device_ptr(dst_env->device, state->dst,
                                      &device_ptr));
    state->dst_ptr = (bench_cu_deviceptr)device_ptr;
    if (bench_stream_acquire(dst_env, &state->stream) != 0)
        return -1;
    state->reference = bench_host_alloc(byte_len, "the reference bytes");
    state->scratch = bench_host_alloc(byte_len, "the read-back buffer");
    if (state->reference == NULL || state->scratch == NULL)
        return -1;
    bench_fill_random(&seed, state->reference, byte_len);
    return bench_raw_copy_in(src_env, state->src_ptr, state->reference,
                             byte_len);
}

static void state_free(peer_state *state)
{
    if (state->dst_env == NULL)
        return;
    bench_stream_release(state->dst_env, state->stream);
    if (state->dst.id != 0)
        curd_buffer_free(state->dst_env->device, state->dst);
    if (state->src.id != 0)
        curd_buffer_free(state->src_env->device, state->src);
    free(state->reference);
    free(state->scratch);
}

static int peer_copy(const bench_env *env, const char *name, size_t byte_len)
{
    bench_env second;
    peer_state state = {0};
    bench_scenario scenario;
    int curd_index, raw_index, result = -1;
    int opened = bench_pair_open(env, name, &second);

    if (opened != 0)
        return opened > 0 ? 0 : -1; /* skipped, or failed */
    if (state_init(&state, env, &second, byte_len) != 0)
        goto done;
    /* curd first: its first copy enables peer access its own way. */
    if (check_copy(&state, op_curd_copy, "curd_buffer_copy GPU0 -> GPU1") !=
            0 ||
        enable_peer_access(&state) != 0 ||
        check_copy(&state, op_raw_peer, "cuMemcpyPeerAsync GPU0 -> GPU1") !=
            0)
        goto done;

    bench_scenario_init(&scenario, env, name,
                        byte_len >= PEER_LARGE_BYTES ? env->samples_large
                                                     : env->samples,
                        "%zu KiB from a resident buffer of GPU %d into one "
                        "of GPU %d, synchronised",
                        byte_len / BENCH_KIB, env->props.ordinal,
                        second.props.ordinal);
    curd_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_buffer_copy GPU0 -> GPU1", .role = BENCH_ROLE_CURD,
        .op = op_curd_copy, .context = &state, .bytes_per_op = byte_len});
    raw_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "cuMemcpyPeerAsync + cuStreamSynchronize",
        .role = BENCH_ROLE_RAW, .op = op_raw_peer, .context = &state,
        .bytes_per_op = byte_len});
    if (curd_index < 0 || raw_index < 0 || bench_measure(&scenario) != 0)
        goto done;

    if (byte_len >= PEER_LARGE_BYTES) {
        bench_check_ratio(&scenario, curd_index, raw_index, 1.0 / 0.98,
                          ">= 98% of raw bandwidth");
        bench_check_median_ns(&scenario, curd_index,
                              (double)byte_len / PYTORCH_PEER_GBPS,
                              ">= 383 GB/s (PyTorch 2.11)");
    } else {
        bench_check_ratio(&scenario, curd_index, raw_index, 1.1,
                          "within 1.1x");
        bench_check_median_ns(&scenario, curd_index, PYTORCH_PEER_SMALL_NS,
                              "< 19.3 us (PyTorch 2.11)");
    }
    bench_note(&scenario, "%s",
               state.peer_access
                   ? "peer access enabled: both copies go GPU to GPU"
                   : "no peer access between these GPUs: curd stages "
                     "through pinned memory, the driver on its own");
    bench_report_scenario(&scenario);
    result = 0;

done:
    state_free(&state);
    bench_pair_close(&second);
    return result;
}

int bench_peer_copy_large(const bench_env *env)
{
    return peer_copy(env, "peer/copy-256M", PEER_LARGE_BYTES);
}

int bench_peer_copy_small(const bench_env *env)
{
    return peer_copy(env, "peer/copy-4K-sync", PEER_SMALL_BYTES);
}
