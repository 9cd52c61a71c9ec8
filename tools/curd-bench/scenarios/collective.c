/* collective.c - curd-bench scenarios for NCCL collectives.
 *
 * collective/all-reduce-{4K,64K,1M,16M,64M,256M}
 *     a float32 sum all-reduce of that many bytes over every visible GPU
 *     (up to 8; one rank on a machine of one GPU, NCCL's one-rank path,
 *     where curd's own cost shows alone), the run's device first, driven
 *     from one thread: curd_collective_run of one operation per rank (all
 *     in one call, the communicators from curd_comm_open_all), against
 *     raw NCCL doing the same: ncclAllReduce on every rank in one
 *     ncclGroupStart/End on the same device buffers
 *     (curd_buffer_device_ptr), on raw streams, then a cuStreamSynchronize
 *     of each. The raw side runs on two sets of communicators: NCCL's
 *     default blocking ones (ncclCommInitRank), which the targets compare
 *     with (issue 35), and non-blocking ones (ncclCommInitRankConfig with
 *     blocking 0, the group's end polled through ncclCommGetAsyncError as
 *     NCCL asks), whose ratio is reported. Each set joined by one group
 *     of every rank. Out of place: each rank's send buffer holds random
 *     floats, its receive buffer is poisoned before each check.
 *
 * collective/graph-batch
 *     on each of the two GPUs one curd_batch of 8 dependent add_one
 *     launches on a 4 KiB resident buffer, one curd_batch_collective
 *     all-reduce (float32 sum) of that buffer into a second one, and a
 *     4 KiB curd_batch_download of the sums; each rank runs its batch
 *     from its own thread (a bench_team of two workers), as curd.h asks
 *     of batches with collectives. A sample releases both threads and ends
 *     when the slower one is done, so a replay's time is the slower
 *     rank's. Streamed (no flag) against CURD_BATCH_GRAPH, both curd's.
 *
 * The values are multiples of 1/512 small enough that a sum over every
 * rank is exact in float32, and every byte of every rank's result is
 * compared with the host's sums (in graph-batch, the words the launches
 * leave are such floats: each rank starts from their bits minus 8). The
 * graph batch skips on a machine with one GPU; all skip without libnccl.so.2
 * ($CURD_LIBNCCL names another, as for libcurd). */
#include "harness/kernels.h"
#include "harness/nccl.h"
#include "harness/pair.h"
#include "harness/report.h"
#include "harness/team.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANKS 2 /* the graph batch's */
#define MAX_RANKS 8 /* the all-reduces take every GPU, up to this */
/* The floor measured with PyTorch 2.11 (issue 26): 279 GB/s of bus
 * bandwidth for 256 MiB on two ranks. */
#define PYTORCH_ALL_REDUCE_BUS_GBPS 279.0
/* How long joining or a raw group may stay in progress: NCCL's set-up
 * takes seconds. */
#define NCCL_SETTLE_MS 120000u

/* The raw communicators of both ranks, made one of two ways. */
typedef struct raw_set {
    struct all_reduce_state *state;
    bench_nccl_comm comms[MAX_RANKS];
    bool nonblocking; /* curd's setting; else NCCL's default, blocking */
} raw_set;

typedef struct all_reduce_state {
    int ranks;
    const bench_env *envs[MAX_RANKS];
    const bench_nccl *nccl;
    size_t byte_len;
    curd_comm *comms[MAX_RANKS];
    raw_set raw[2]; /* [0] blocking, [1] non-blocking */
    bench_cu_stream streams[MAX_RANKS];
    curd_buffer send[MAX_RANKS];
    curd_buffer recv[MAX_RANKS];
    bench_cu_deviceptr send_ptr[MAX_RANKS];
    bench_cu_deviceptr recv_ptr[MAX_RANKS];
    float *inputs[MAX_RANKS];
    float *expected;
    unsigned char *scratch;
    curd_collective ops[MAX_RANKS];
} all_reduce_state;

static int op_curd_all_reduce(void *context, uint64_t iterations)
{
    all_reduce_state *state = context;
    for (uint64_t index = 0; index < iterations; index++)
        BENCH_CURD(curd_collective_run(state->ops, (size_t)state->ranks));
    return 0;
}

/* One group of both ranks' ncclAllReduce, then each stream's sync. */
static int raw_all_reduce_once(const raw_set *set)
{
    const all_reduce_state *state = set->state;
    const bench_nccl *nccl = state->nccl;
    bench_nccl_result result = nccl->ncclGroupStart();
    if (result != BENCH_NCCL_SUCCESS)
        return bench_fail_nccl("ncclGroupStart", result);
    for (int rank = 0; rank < state->ranks; rank++) {
        result = nccl->ncclAllReduce(
            (const void *)(uintptr_t)state->send_ptr[rank],
            (void *)(uintptr_t)state->recv_ptr[rank],
            state->byte_len / sizeof(float), BENCH_NCCL_FLOAT32,
            BENCH_NCCL_SUM, set->comms[rank], state->streams[rank]);
        if (result != BENCH_NCCL_SUCCESS) {
            nccl->ncclGroupEnd();
            return bench_fail_nccl("ncclAllReduce", result);
        }
    }
    result = nccl->ncclGroupEnd();
    if (result == BENCH_NCCL_IN_PROGRESS &&
        bench_nccl_settle(nccl, set->comms, state->ranks, NCCL_SETTLE_MS,
                          "ncclGroupEnd") != 0)
        return -1;
    if (result != BENCH_NCCL_SUCCESS && result != BENCH_NCCL_IN_PROGRESS)
        return bench_fail_nccl("ncclGroupEnd", result);
    for (int rank = 0; rank < state->ranks; rank++)
        BENCH_CU(state->envs[rank]->cu->cuStreamSynchronize(
            state->streams[rank]));
    return 0;
}

static int op_raw_all_reduce(void *context, uint64_t iterations)
{
    const raw_set *set = context;
    int result = 0;
    if (bench_raw_enter(set->state->envs[0]) != 0)
        return -1;
    for (uint64_t index = 0; index < iterations && result == 0; index++)
        result = raw_all_reduce_once(set);
    bench_raw_leave(set->state->envs[0]);
    return result;
}

/* Poisons both ranks' results, runs one all-reduce and compares every
 * byte of both with the host's sums. */
static int check_all_reduce(all_reduce_state *state, bench_op_fn op,
                            void *context, const char *what)
{
    for (int rank = 0; rank < state->ranks; rank++) {
        bench_poison(state->scratch, state->byte_len);
        if (bench_raw_copy_in(state->envs[rank], state->recv_ptr[rank],
                              state->scratch, state->byte_len) != 0)
            return -1;
    }
    if (op(context, 1) != 0)
        return -1;
    for (int rank = 0; rank < state->ranks; rank++) {
        char label[160];
        bench_poison(state->scratch, state->byte_len);
        if (bench_raw_copy_out(state->envs[rank], state->scratch,
                               state->recv_ptr[rank], state->byte_len) != 0)
            return -1;
        snprintf(label, sizeof label, "%s, rank %d", what, rank);
        if (bench_compare(label, state->expected, state->scratch,
                          state->byte_len) != 0)
            return -1;
    }
    return 0;
}

/* Random multiples of 1/512 small enough that a sum of `ranks` of them
 * needs at most 24 significant bits (below 2^14 for two ranks, 2^12 for
 * eight), so float32 holds every partial sum exactly on GPU and host, in
 * whatever order NCCL adds. */
static void fill_floats(uint64_t *seed, float *values, size_t count,
                        int ranks)
{
    int shift = 8;
    while ((1 << (shift - 8)) < ranks)
        shift++;
    bench_fill_random(seed, values, count * sizeof *values);
    for (size_t index = 0; index < count; index++) {
        uint32_t bits;
        memcpy(&bits, &values[index], sizeof bits);
        values[index] = (float)((int32_t)bits >> shift) / 512.0f;
    }
}

/* After the communicators: each rank's operation names its own. */
static int buffers_init(all_reduce_state *state, uint64_t seed)
{
    size_t count = state->byte_len / sizeof(float);
    state->expected = bench_host_alloc(state->byte_len, "the host's sums");
    state->scratch = bench_host_alloc(state->byte_len, "the read-back");
    if (state->expected == NULL || state->scratch == NULL)
        return -1;
    for (int rank = 0; rank < state->ranks; rank++) {
        const bench_env *env = state->envs[rank];
        uint64_t device_ptr = 0;
        BENCH_CURD(curd_buffer_alloc(env->device, state->byte_len,
                                     &state->send[rank]));
        BENCH_CURD(curd_buffer_device_ptr(env->device, state->send[rank],
                                          &device_ptr));
        state->send_ptr[rank] = (bench_cu_deviceptr)device_ptr;
        BENCH_CURD(curd_buffer_alloc(env->device, state->byte_len,
                                     &state->recv[rank]));
        BENCH_CURD(curd_buffer_device_ptr(env->device, state->recv[rank],
                                          &device_ptr));
        state->recv_ptr[rank] = (bench_cu_deviceptr)device_ptr;
        if (bench_stream_acquire(env, &state->streams[rank]) != 0)
            return -1;
        state->inputs[rank] = bench_host_alloc(state->byte_len, "a rank's "
                                                                "input");
        if (state->inputs[rank] == NULL)
            return -1;
        fill_floats(&seed, state->inputs[rank], count, state->ranks);
        if (bench_raw_copy_in(env, state->send_ptr[rank],
                              state->inputs[rank], state->byte_len) != 0)
            return -1;
        state->ops[rank] = (curd_collective){
            .comm = state->comms[rank], .kind = CURD_COLLECTIVE_ALL_REDUCE,
            .dtype = CURD_DTYPE_FLOAT32, .op = CURD_REDUCE_SUM,
            .send = state->send[rank], .recv = state->recv[rank],
            .count = count};
    }
    for (size_t index = 0; index < count; index++) {
        float sum = 0.0f;
        for (int rank = 0; rank < state->ranks; rank++)
            sum += state->inputs[rank][index];
        state->expected[index] = sum;
    }
    return 0;
}

/* A set of raw communicators: both ranks joined in one group, each with
 * its device's context current (NCCL takes the rank's device from it),
 * by ncclCommInitRank (NCCL's defaults) or, non-blocking as curd's are,
 * by ncclCommInitRankConfig. */
static int raw_set_open(all_reduce_state *state, raw_set *set,
                        bool nonblocking)
{
    const bench_nccl *nccl = state->nccl;
    bench_nccl_config config = {
        .size = sizeof config, .magic = BENCH_NCCL_CONFIG_MAGIC,
        .version = BENCH_NCCL_CONFIG_VERSION, .blocking = 0,
        .cga_cluster_size = BENCH_NCCL_CONFIG_UNDEF_INT,
        .min_ctas = BENCH_NCCL_CONFIG_UNDEF_INT,
        .max_ctas = BENCH_NCCL_CONFIG_UNDEF_INT, .net_name = NULL};
    bench_nccl_unique_id id;
    set->state = state;
    set->nonblocking = nonblocking;
    bench_nccl_result result = nccl->ncclGetUniqueId(&id);
    if (result != BENCH_NCCL_SUCCESS)
        return bench_fail_nccl("ncclGetUniqueId", result);
    result = nccl->ncclGroupStart();
    if (result != BENCH_NCCL_SUCCESS)
        return bench_fail_nccl("ncclGroupStart", result);
    for (int rank = 0; rank < state->ranks && result == BENCH_NCCL_SUCCESS;
         rank++) {
        if (bench_raw_enter(state->envs[rank]) != 0) {
            nccl->ncclGroupEnd();
            return -1;
        }
        result = nonblocking
                     ? nccl->ncclCommInitRankConfig(&set->comms[rank],
                                                    state->ranks,
                                                    id, rank, &config)
                     : nccl->ncclCommInitRank(&set->comms[rank],
                                              state->ranks, id, rank);
        bench_raw_leave(state->envs[rank]);
        if (result == BENCH_NCCL_IN_PROGRESS)
            result = BENCH_NCCL_SUCCESS;
    }
    /* NCCL sets each rank's device while it works and then restores the
     * one it found current: GPU0's context, pushed here and popped. */
    if (bench_raw_enter(state->envs[0]) != 0) {
        nccl->ncclGroupEnd();
        return -1;
    }
    bench_nccl_result end = nccl->ncclGroupEnd();
    bench_raw_leave(state->envs[0]);
    const char *call =
        nonblocking ? "ncclCommInitRankConfig" : "ncclCommInitRank";
    if (result != BENCH_NCCL_SUCCESS)
        return bench_fail_nccl(call, result);
    if (end != BENCH_NCCL_SUCCESS && end != BENCH_NCCL_IN_PROGRESS)
        return bench_fail_nccl("ncclGroupEnd (joining)", end);
    return bench_nccl_settle(nccl, set->comms, state->ranks, NCCL_SETTLE_MS,
                             call);
}

/* Finalizes (its work flushed; a non-blocking one in NCCL's thread,
 * waited for), then destroys each communicator of the set, with GPU0's
 * context current as in raw_set_open. */
static void raw_set_close(raw_set *set)
{
    const all_reduce_state *state = set->state;
    if (state == NULL || bench_raw_enter(state->envs[0]) != 0)
        return;
    for (int rank = 0; rank < state->ranks; rank++) {
        bench_nccl_comm comm = set->comms[rank];
        if (comm == NULL)
            continue;
        if (state->nccl->ncclCommFinalize(comm) == BENCH_NCCL_IN_PROGRESS)
            (void)bench_nccl_settle(state->nccl, &comm, 1, NCCL_SETTLE_MS,
                                    "ncclCommFinalize");
        state->nccl->ncclCommDestroy(comm);
        set->comms[rank] = NULL;
    }
    bench_raw_leave(state->envs[0]);
}

static void state_free(all_reduce_state *state)
{
    raw_set_close(&state->raw[0]);
    raw_set_close(&state->raw[1]);
    for (int rank = 0; rank < state->ranks; rank++) {
        const bench_env *env = state->envs[rank];
        if (state->comms[rank] != NULL)
            curd_comm_close(state->comms[rank]);
        if (env == NULL)
            continue;
        bench_stream_release(env, state->streams[rank]);
        if (state->send[rank].id != 0)
            curd_buffer_free(env->device, state->send[rank]);
        if (state->recv[rank].id != 0)
            curd_buffer_free(env->device, state->recv[rank]);
        free(state->inputs[rank]);
    }
    free(state->expected);
    free(state->scratch);
}

/* Every rank's communicator into comms. 1 (skipped, reported) when curd
 * has no NCCL; 0 opened; -1 failed. */
static int curd_comms_open(const bench_env *const *envs, int ranks,
                           curd_comm **comms, const char *name)
{
    curd_device *devices[MAX_RANKS];
    for (int rank = 0; rank < ranks; rank++)
        devices[rank] = envs[rank]->device;
    curd_status status = curd_comm_open_all(devices, ranks, NULL, comms);
    if (status == CURD_E_UNSUPPORTED) {
        char why[200];
        snprintf(why, sizeof why, "needs libnccl.so.2 (libcurd: %s)",
                 curd_last_error());
        bench_report_skip(name, why);
        return 1;
    }
    if (status != CURD_OK)
        return bench_fail_curd("curd_comm_open_all", status);
    return 0;
}

static int all_reduce(const bench_env *env, const char *name,
                      size_t byte_len)
{
    bench_env others[MAX_RANKS - 1];
    all_reduce_state state = {0};
    bench_scenario scenario;
    char why[300];
    int curd_index, raw_index, raw_blocking_index, result = -1;

    if (bench_gang_open(env, MAX_RANKS, others, &state.ranks) != 0)
        return -1;
    state.nccl = bench_nccl_load(why, sizeof why);
    if (state.nccl == NULL) {
        bench_report_skip(name, why);
        result = 0;
        goto done;
    }
    state.envs[0] = env;
    for (int rank = 1; rank < state.ranks; rank++)
        state.envs[rank] = &others[rank - 1];
    state.byte_len = byte_len;
    int opened = curd_comms_open(state.envs, state.ranks, state.comms, name);
    if (opened != 0) {
        result = opened > 0 ? 0 : -1;
        goto done;
    }
    if (buffers_init(&state, env->seed ^ 0xa00au ^ byte_len) != 0 ||
        raw_set_open(&state, &state.raw[0], false) != 0 ||
        raw_set_open(&state, &state.raw[1], true) != 0)
        goto done;
    if (check_all_reduce(&state, op_curd_all_reduce, &state,
                         "curd_collective_run all-reduce") != 0 ||
        check_all_reduce(&state, op_raw_all_reduce, &state.raw[1],
                         "ncclAllReduce in a group, non-blocking") != 0 ||
        check_all_reduce(&state, op_raw_all_reduce, &state.raw[0],
                         "ncclAllReduce in a group, blocking") != 0)
        goto done;

    char gpus[64];
    int at = snprintf(gpus, sizeof gpus, "GPU %d", env->props.ordinal);
    for (int rank = 1; rank < state.ranks && at < (int)sizeof gpus; rank++)
        at += snprintf(gpus + at, sizeof gpus - (size_t)at, ",%d",
                       others[rank - 1].props.ordinal);
    bench_scenario_init(&scenario, env, name,
                        byte_len >= 256 * BENCH_MIB ? env->samples_large
                                                    : env->samples,
                        "float32 sum all-reduce of %zu KiB over %d rank%s "
                        "(%s), one thread",
                        byte_len / BENCH_KIB, state.ranks,
                        state.ranks == 1 ? "" : "s", gpus);
    char curd_label[64], raw_label[96], raw_blocking_label[96];
    snprintf(curd_label, sizeof curd_label, "curd_collective_run, %d ranks",
             state.ranks);
    snprintf(raw_label, sizeof raw_label,
             "ncclAllReduce x %d in a group + syncs, non-blocking",
             state.ranks);
    snprintf(raw_blocking_label, sizeof raw_blocking_label,
             "ncclAllReduce x %d in a group + syncs, blocking", state.ranks);
    curd_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = curd_label, .role = BENCH_ROLE_CURD,
        .op = op_curd_all_reduce, .context = &state,
        .bytes_per_op = byte_len});
    raw_blocking_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = raw_blocking_label, .role = BENCH_ROLE_RAW,
        .op = op_raw_all_reduce, .context = &state.raw[0],
        .bytes_per_op = byte_len});
    raw_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = raw_label, .role = BENCH_ROLE_RAW, .op = op_raw_all_reduce,
        .context = &state.raw[1], .bytes_per_op = byte_len});
    if (curd_index < 0 || raw_index < 0 || raw_blocking_index < 0 ||
        bench_measure(&scenario) != 0)
        goto done;

    /* The targets compare with NCCL's default, blocking communicators
     * (issue 35); the non-blocking ones are reported beside them. */
    if (byte_len >= BENCH_MIB)
        bench_check_ratio(&scenario, curd_index, raw_blocking_index, 1.03,
                          "within 1.03x");
    else
        bench_check_extra_ns(&scenario, curd_index, raw_blocking_index,
                             2000.0, "within 2 us");
    if (byte_len >= 256 * BENCH_MIB && state.ranks == 2)
        /* Two ranks: bus bandwidth = size / time * 2 (n - 1) / n, the
         * GB/s column itself. */
        bench_check_median_ns(&scenario, curd_index,
                              (double)byte_len / PYTORCH_ALL_REDUCE_BUS_GBPS,
                              "bus bw >= 279 GB/s (PyTorch 2.11)");
    bench_check_ratio(&scenario, curd_index, raw_index, 0.0,
                      "vs non-blocking NCCL");
    bench_note(&scenario,
               "NCCL %d, %d rank%s; bus bandwidth = GB/s x 2(n-1)/n; the "
               "targets compare with raw blocking communicators (NCCL's "
               "default)",
               state.nccl->version, state.ranks, state.ranks == 1 ? "" : "s");
    bench_report_scenario(&scenario);
    result = 0;

done:
    state_free(&state);
    bench_gang_close(others, state.ranks);
    return result;
}

#define ALL_REDUCE_SCENARIO(suffix, bytes)                                    \
    int bench_collective_all_reduce_##suffix(const bench_env *env)            \
    {                                                                         \
        return all_reduce(env, "collective/all-reduce-" #suffix, bytes);     \
    }
ALL_REDUCE_SCENARIO(4K, 4 * BENCH_KIB)
ALL_REDUCE_SCENARIO(64K, 64 * BENCH_KIB)
ALL_REDUCE_SCENARIO(1M, BENCH_MIB)
ALL_REDUCE_SCENARIO(16M, 16 * BENCH_MIB)
ALL_REDUCE_SCENARIO(64M, 64 * BENCH_MIB)
ALL_REDUCE_SCENARIO(256M, 256 * BENCH_MIB)

/* ------------------------------------------------------------------------
 * collective/graph-batch
 * ---------------------------------------------------------------------- */

#define BATCH_WORDS 1024u /* 4 KiB of uint32, and of float32 */
#define BATCH_LAUNCHES 8u
/* Issue 26: the graph batch replays at least this much faster. */
#define GRAPH_BATCH_SPEEDUP 1.5

enum { STREAMED = 0, GRAPH = 1, BATCH_KINDS = 2 };

/* What one rank holds: add_one loaded on its device, the words the
 * launches add to, the all-reduce's sums, and its two batches. */
typedef struct graph_batch_rank {
    const bench_env *env;
    curd_program *add_one;
    curd_buffer words;
    curd_buffer sums;
    bench_cu_deviceptr sums_ptr;
    float *values;   /* the words the launches leave, as floats */
    uint32_t *start; /* the words before the launches */
    float *out;      /* the batches' download, malloc memory */
    curd_batch *batches[BATCH_KINDS];
} graph_batch_rank;

typedef struct graph_batch_state {
    const bench_env *envs[RANKS];
    curd_comm *comms[RANKS];
    graph_batch_rank ranks[RANKS];
    float *expected;
    bench_team *team;
    bench_team_work work[BATCH_KINDS];
} graph_batch_state;

/* A worker's operation: its rank's batch run `iterations` times. */
static int op_batch_runs(void *context, uint64_t iterations)
{
    curd_batch *batch = context;
    for (uint64_t index = 0; index < iterations; index++)
        BENCH_CURD(curd_batch_run(batch, NULL));
    return 0;
}

static int graph_batch_record(graph_batch_rank *rank, curd_comm *comm,
                              uint32_t flags, curd_batch **out)
{
    static const uint32_t words = BATCH_WORDS;
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    BENCH_CURD(curd_batch_new(rank->env->device, &options, out));
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = BATCH_WORDS;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, rank->words),
                       curd_arg_scalar(&words, sizeof words)};
    for (unsigned index = 0; index < BATCH_LAUNCHES; index++)
        BENCH_CURD(curd_batch_launch(*out, rank->add_one, &launch, args, 2,
                                     NULL));
    curd_collective op = {
        .comm = comm, .kind = CURD_COLLECTIVE_ALL_REDUCE,
        .dtype = CURD_DTYPE_FLOAT32, .op = CURD_REDUCE_SUM,
        .send = rank->words, .recv = rank->sums, .count = BATCH_WORDS};
    BENCH_CURD(curd_batch_collective(*out, &op));
    BENCH_CURD(curd_batch_download_range(*out, rank->sums, 0,
                                         BATCH_WORDS * 4u, rank->out,
                                         BATCH_WORDS * 4u));
    return 0;
}

/* Each rank's memory and batches, and the host's sums: the floats the
 * launches leave are fill_floats's, so each rank's words start at their
 * bits minus BATCH_LAUNCHES (add_one wraps as the subtraction does). */
static int graph_batch_init(graph_batch_state *state, uint64_t seed)
{
    state->expected = bench_host_alloc(BATCH_WORDS * 4u, "the host's sums");
    if (state->expected == NULL)
        return -1;
    for (int index = 0; index < RANKS; index++) {
        graph_batch_rank *rank = &state->ranks[index];
        const bench_env *env = state->envs[index];
        curd_program_desc desc;
        uint64_t device_ptr = 0;
        rank->env = env;
        bench_kernel_desc(&desc, "add_one.ptx", "curd_add_one");
        if (bench_kernel_load(env, &desc, &rank->add_one, NULL, NULL) != 0)
            return -1;
        BENCH_CURD(curd_buffer_alloc(env->device, BATCH_WORDS * 4u,
                                     &rank->words));
        BENCH_CURD(curd_buffer_alloc(env->device, BATCH_WORDS * 4u,
                                     &rank->sums));
        BENCH_CURD(curd_buffer_device_ptr(env->device, rank->sums,
                                          &device_ptr));
        rank->sums_ptr = (bench_cu_deviceptr)device_ptr;
        rank->values = bench_host_alloc(BATCH_WORDS * 4u, "a rank's floats");
        rank->start = bench_host_alloc(BATCH_WORDS * 4u, "a rank's words");
        rank->out = bench_host_alloc(BATCH_WORDS * 4u, "a rank's sums");
        if (rank->values == NULL || rank->start == NULL || rank->out == NULL)
            return -1;
        fill_floats(&seed, rank->values, BATCH_WORDS, RANKS);
        memcpy(rank->start, rank->values, BATCH_WORDS * 4u);
        for (unsigned word = 0; word < BATCH_WORDS; word++)
            rank->start[word] -= BATCH_LAUNCHES;
        if (graph_batch_record(rank, state->comms[index], 0,
                               &rank->batches[STREAMED]) != 0 ||
            graph_batch_record(rank, state->comms[index], CURD_BATCH_GRAPH,
                               &rank->batches[GRAPH]) != 0)
            return -1;
    }
    for (unsigned word = 0; word < BATCH_WORDS; word++)
        state->expected[word] = state->ranks[0].values[word] +
                                state->ranks[1].values[word];
    if (bench_team_start(&state->team, RANKS, NULL, NULL) != 0)
        return -1;
    for (int kind = 0; kind < BATCH_KINDS; kind++) {
        state->work[kind].team = state->team;
        state->work[kind].op = op_batch_runs;
        for (int index = 0; index < RANKS; index++)
            state->work[kind].contexts[index] =
                state->ranks[index].batches[kind];
    }
    return 0;
}

/* The workers joined first, then the batches freed (each holds its
 * communicator), the communicators closed, and the rest. */
static void graph_batch_free(graph_batch_state *state)
{
    bench_team_stop(state->team);
    for (int index = 0; index < RANKS; index++) {
        graph_batch_rank *rank = &state->ranks[index];
        for (int kind = 0; kind < BATCH_KINDS; kind++)
            (void)curd_batch_free(rank->batches[kind]);
        if (state->comms[index] != NULL)
            curd_comm_close(state->comms[index]);
        if (rank->env != NULL) {
            if (rank->words.id != 0)
                (void)curd_buffer_free(rank->env->device, rank->words);
            if (rank->sums.id != 0)
                (void)curd_buffer_free(rank->env->device, rank->sums);
        }
        if (rank->add_one != NULL)
            (void)curd_program_free(rank->add_one);
        free(rank->values);
        free(rank->start);
        free(rank->out);
    }
    free(state->expected);
}

/* Both ranks' words set to their start and their sums poisoned (on the
 * device and in the download's memory), one replay of each rank's batch
 * of that kind on its thread, and every byte of both downloads compared
 * with the host's sums. */
static int graph_batch_check(graph_batch_state *state, int kind,
                             const char *what)
{
    for (int index = 0; index < RANKS; index++) {
        graph_batch_rank *rank = &state->ranks[index];
        BENCH_CURD(curd_buffer_upload(rank->env->device, rank->words,
                                      rank->start, BATCH_WORDS * 4u));
        bench_poison(rank->out, BATCH_WORDS * 4u);
        if (bench_raw_copy_in(rank->env, rank->sums_ptr, rank->out,
                              BATCH_WORDS * 4u) != 0)
            return -1;
    }
    if (bench_team_run(&state->work[kind], 1) != 0)
        return -1;
    for (int index = 0; index < RANKS; index++) {
        char label[160];
        snprintf(label, sizeof label, "%s, rank %d", what, index);
        if (bench_compare(label, state->expected, state->ranks[index].out,
                          BATCH_WORDS * 4u) != 0)
            return -1;
    }
    return 0;
}

int bench_collective_graph_batch(const bench_env *env)
{
    static const char name[] = "collective/graph-batch";
    bench_env second;
    graph_batch_state state = {0};
    bench_scenario scenario;
    int streamed, graph, result = -1;
    int opened = bench_pair_open(env, name, &second);

    if (opened != 0)
        return opened > 0 ? 0 : -1; /* skipped, or failed */
    state.envs[0] = env;
    state.envs[1] = &second;
    opened = curd_comms_open(state.envs, RANKS, state.comms, name);
    if (opened != 0) {
        result = opened > 0 ? 0 : -1;
        goto done;
    }
    if (graph_batch_init(&state, env->seed ^ 0x9ba7c4u) != 0 ||
        graph_batch_check(&state, STREAMED, "curd streamed batch") != 0 ||
        graph_batch_check(&state, GRAPH, "curd graph batch") != 0)
        goto done;

    bench_scenario_init(&scenario, env, name, env->samples,
                        "per rank (GPU %d and %d, a thread each): 8 add_one "
                        "launches, a 4 KiB float32 all-reduce, a 4 KiB "
                        "read-back",
                        env->props.ordinal, second.props.ordinal);
    streamed = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_batch_run x 2 ranks, streamed",
        .role = BENCH_ROLE_CURD, .op = bench_team_run,
        .context = &state.work[STREAMED]});
    graph = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_batch_run x 2 ranks, CURD_BATCH_GRAPH",
        .role = BENCH_ROLE_CURD, .op = bench_team_run,
        .context = &state.work[GRAPH]});
    if (streamed < 0 || graph < 0 || bench_measure(&scenario) != 0)
        goto done;
    bench_check_speedup(&scenario, graph, streamed, GRAPH_BATCH_SPEEDUP,
                        "graph replay >= 1.5x faster than streamed");
    bench_note(&scenario, "a replay's time is the slower rank's: both "
                          "threads released together, the sample ends "
                          "when both are done");
    bench_report_scenario(&scenario);
    result = 0;

done:
    graph_batch_free(&state);
    bench_pair_close(&second);
    return result;
}
