/* batch.c - curd-bench's batch scenarios: recorded launches on
 * resident data run with one fence, streamed and as a replayed CUDA graph,
 * against the raw driver doing the same work on its own stream and graph.
 *
 * The kernel is the harness's add_one (tests/kernels/add_one.ptx, the
 * committed PTX, compiled into the tool: bench_kernel_ptx), loaded once
 * by curd and once by the raw driver. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "harness/kernels.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#define WORDS 1024u /* 4 KiB of uint32 */
#define LAUNCHES 8u
#define COST_LAUNCHES 64u

/* What the scenarios share: add_one loaded both ways, a resident buffer
 * and a raw allocation of 4 KiB, pinned memory for the raw read-backs. */
typedef struct batch_bench {
    const bench_env *env;
    curd_program *program;
    bench_cu_module module;
    bench_cu_function function;
    bench_cu_stream stream;
    curd_buffer buffers[2];
    bench_cu_deviceptr raw_buffer;
    void *pinned;
    uint32_t *out;        /* curd's downloads (malloc memory) */
    uint32_t n;
    void *raw_params[2];
    bench_cu_graph raw_graph;
    bench_cu_graph_exec raw_exec;
} batch_bench;

static void bench_free(batch_bench *b)
{
    const bench_cuda *cu = b->env->cu;
    if (bench_raw_enter(b->env) == 0) {
        if (b->raw_exec != NULL)
            (void)cu->cuGraphExecDestroy(b->raw_exec);
        if (b->raw_graph != NULL)
            (void)cu->cuGraphDestroy(b->raw_graph);
        if (b->raw_buffer != 0)
            (void)cu->cuMemFree(b->raw_buffer);
        if (b->pinned != NULL)
            (void)cu->cuMemFreeHost(b->pinned);
        if (b->module != NULL)
            (void)cu->cuModuleUnload(b->module);
        bench_raw_leave(b->env);
    }
    if (b->stream != NULL)
        bench_stream_release(b->env, b->stream);
    for (int i = 0; i < 2; i++)
        if (b->buffers[i].id != 0)
            (void)curd_buffer_free(b->env->device, b->buffers[i]);
    if (b->program != NULL)
        (void)curd_program_free(b->program);
    free(b->out);
}

static int bench_open(batch_bench *b, const bench_env *env)
{
    memset(b, 0, sizeof *b);
    b->env = env;
    b->n = WORDS;
    curd_program_desc desc;
    bench_kernel_desc(&desc, "add_one.ptx", "curd_add_one");
    if (bench_kernel_load(env, &desc, &b->program, &b->module, &b->function)
        != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        curd_status status =
            curd_buffer_alloc(env->device, WORDS * 4u, &b->buffers[i]);
        if (status != CURD_OK)
            return bench_fail_curd("curd_buffer_alloc", status);
    }
    b->out = bench_host_alloc(WORDS * 4u, "the batch read-back");
    if (b->out == NULL || bench_stream_acquire(env, &b->stream) != 0
        || bench_raw_enter(env) != 0)
        return -1;
    const bench_cuda *cu = env->cu;
    bench_cu_result rc = cu->cuMemAlloc(&b->raw_buffer, WORDS * 4u);
    if (rc == BENCH_CUDA_SUCCESS)
        rc = cu->cuMemHostAlloc(&b->pinned, WORDS * 4u,
                                BENCH_CU_MEMHOSTALLOC_PORTABLE);
    bench_raw_leave(env);
    if (rc != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("the raw launch's memory", rc);
    b->raw_params[0] = &b->raw_buffer;
    b->raw_params[1] = &b->n;
    return 0;
}

/* ------------------------------------------------------------------------
 * The raw driver
 * ---------------------------------------------------------------------- */

/* `launches` add_one launches of n elements (blocks of 256) and, with
 * read_back, a 4 KiB copy into pinned memory, on `stream` (the raw
 * stream but for launch_on_a_second_stream). */
static int raw_enqueue(batch_bench *b, bench_cu_stream stream,
                       unsigned launches, bool read_back)
{
    const bench_cuda *cu = b->env->cu;
    unsigned grid = (WORDS + 255u) / 256u;
    for (unsigned i = 0; i < launches; i++)
        BENCH_CU(cu->cuLaunchKernel(b->function, grid, 1, 1, 256, 1, 1, 0,
                                    stream, b->raw_params, NULL));
    if (read_back)
        BENCH_CU(cu->cuMemcpyDtoHAsync(b->pinned, b->raw_buffer, WORDS * 4u,
                                       stream));
    return 0;
}

static int op_raw_streamed(void *context, uint64_t iterations)
{
    batch_bench *b = context;
    const bench_cuda *cu = b->env->cu;
    if (bench_raw_enter(b->env) != 0)
        return -1;
    int result = 0;
    for (uint64_t i = 0; result == 0 && i < iterations; i++) {
        result = raw_enqueue(b, b->stream, LAUNCHES, true);
        if (result == 0 && cu->cuStreamSynchronize(b->stream) != 0)
            result = bench_fail("cuStreamSynchronize failed");
    }
    bench_raw_leave(b->env);
    return result;
}

static int raw_capture(batch_bench *b)
{
    const bench_cuda *cu = b->env->cu;
    BENCH_CU(cu->cuStreamBeginCapture(b->stream,
                                      BENCH_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    int result = raw_enqueue(b, b->stream, LAUNCHES, true);
    bench_cu_result rc = cu->cuStreamEndCapture(b->stream, &b->raw_graph);
    if (result != 0)
        return result;
    BENCH_CU(rc);
    BENCH_CU(cu->cuGraphInstantiateWithFlags(&b->raw_exec, b->raw_graph, 0));
    return 0;
}

static int op_raw_graph(void *context, uint64_t iterations)
{
    batch_bench *b = context;
    const bench_cuda *cu = b->env->cu;
    if (bench_raw_enter(b->env) != 0)
        return -1;
    int result = 0;
    for (uint64_t i = 0; result == 0 && i < iterations; i++) {
        if (cu->cuGraphLaunch(b->raw_exec, b->stream) != 0
            || cu->cuStreamSynchronize(b->stream) != 0)
            result = bench_fail("cuGraphLaunch or its synchronisation failed");
    }
    bench_raw_leave(b->env);
    return result;
}

/* ------------------------------------------------------------------------
 * curd
 * ---------------------------------------------------------------------- */

/* A batch of `launches` add_ones on buffer 0 and, with read_back, its
 * download into out. */
static int batch_record(batch_bench *b, uint32_t flags, unsigned launches,
                        bool read_back, uint32_t n, curd_batch **out)
{
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    curd_status status = curd_batch_new(b->env->device, &options, out);
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = WORDS;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, b->buffers[0]),
                       curd_arg_scalar(&n, sizeof n)};
    for (unsigned i = 0; status == CURD_OK && i < launches; i++)
        status = curd_batch_launch(*out, b->program, &launch, args, 2, NULL);
    if (status == CURD_OK && read_back)
        status = curd_batch_download_range(*out, b->buffers[0], 0,
                                           WORDS * 4u, b->out, WORDS * 4u);
    return status == CURD_OK ? 0 : bench_fail_curd("recording a batch", status);
}

static int op_curd_batch(void *context, uint64_t iterations)
{
    curd_batch *batch = context;
    for (uint64_t i = 0; i < iterations; i++) {
        curd_status status = curd_batch_run(batch, NULL);
        if (status != CURD_OK)
            return bench_fail_curd("curd_batch_run", status);
    }
    return 0;
}

/* A graph batch whose first launch changes before every replay: its n
 * scalar (n, then n - 1, ...) or its buffer (the two in turn). */
typedef struct update_op {
    batch_bench *bench;
    curd_batch *batch;
    bool change_buffer;
} update_op;

static int op_curd_update(void *context, uint64_t iterations)
{
    update_op *op = context;
    batch_bench *b = op->bench;
    for (uint64_t i = 0; i < iterations; i++) {
        uint32_t n = b->n - (op->change_buffer ? 0u : (uint32_t)(i & 1u));
        curd_arg args[] = {
            curd_arg_buffer(CURD_ROLE_INOUT,
                            b->buffers[op->change_buffer ? (i & 1u) : 0u]),
            curd_arg_scalar(&n, sizeof n)};
        curd_status status = curd_batch_set_args(op->batch, 0, args, 2);
        if (status == CURD_OK)
            status = curd_batch_run(op->batch, NULL);
        if (status != CURD_OK)
            return bench_fail_curd("curd_batch_set_args + run", status);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Checks: every path adds LAUNCHES to every element and reads them back.
 * ---------------------------------------------------------------------- */

static int check_curd(batch_bench *b, curd_batch *batch, uint64_t *seed,
                      const char *what)
{
    uint32_t start[WORDS], want[WORDS];
    bench_fill_random(seed, start, sizeof start);
    curd_status status = curd_buffer_upload(b->env->device, b->buffers[0],
                                            start, sizeof start);
    if (status != CURD_OK)
        return bench_fail_curd("curd_buffer_upload", status);
    bench_poison(b->out, sizeof start);
    if (op_curd_batch(batch, 1) != 0)
        return -1;
    for (unsigned i = 0; i < WORDS; i++)
        want[i] = start[i] + LAUNCHES;
    return bench_compare(what, want, b->out, sizeof want);
}

static int check_raw(batch_bench *b, bench_op_fn op, uint64_t *seed,
                     const char *what)
{
    uint32_t start[WORDS], want[WORDS];
    bench_fill_random(seed, start, sizeof start);
    /* Landed before the raw stream's kernels read it. */
    if (bench_raw_copy_in(b->env, b->raw_buffer, start, sizeof start) != 0)
        return -1;
    bench_poison(b->pinned, sizeof start);
    if (op(b, 1) != 0)
        return -1;
    for (unsigned i = 0; i < WORDS; i++)
        want[i] = start[i] + LAUNCHES;
    return bench_compare(what, want, b->pinned, sizeof want);
}

/* ------------------------------------------------------------------------
 * The scenarios
 * ---------------------------------------------------------------------- */

/* The streamed and the graph batch of one scenario, and their variants. */
typedef struct batch_pair {
    curd_batch *streamed, *graph;
    int streamed_variant, graph_variant;
} batch_pair;

static int pair_open(batch_bench *b, const bench_env *env, batch_pair *pair)
{
    memset(pair, 0, sizeof *pair);
    if (bench_open(b, env) != 0
        || batch_record(b, 0, LAUNCHES, true, b->n, &pair->streamed) != 0
        || batch_record(b, CURD_BATCH_GRAPH, LAUNCHES, true, b->n,
                        &pair->graph) != 0)
        return -1;
    return 0;
}

static int pair_check(batch_bench *b, const batch_pair *pair, uint64_t *seed)
{
    if (check_curd(b, pair->streamed, seed, "curd streamed batch") != 0
        || check_curd(b, pair->graph, seed, "curd graph batch") != 0)
        return -1;
    return 0;
}

static int pair_add_variants(bench_scenario *scenario, batch_pair *pair)
{
    pair->streamed_variant = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "curd_batch_run, streamed", .role = BENCH_ROLE_CURD,
        .op = op_curd_batch, .context = pair->streamed});
    pair->graph_variant = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "curd_batch_run, CURD_BATCH_GRAPH", .role = BENCH_ROLE_CURD,
        .op = op_curd_batch, .context = pair->graph});
    return pair->streamed_variant < 0 || pair->graph_variant < 0 ? -1 : 0;
}

static void pair_free(batch_bench *b, batch_pair *pair)
{
    (void)curd_batch_free(pair->streamed);
    (void)curd_batch_free(pair->graph);
    bench_free(b);
}

/* The graph replay and the streamed batch against the raw driver's graph.
 * The raw streamed launches are a scenario of their own, after this one:
 * once a process has launched kernels on a second stream, every graph
 * replay in it is slower from then on, curd's and the raw driver's alike.
 * On the H100 hosts of doc/PERFORMANCE.md (fourteenth run, raw driver and
 * curd in one process, medians) 100 launches on another stream made a
 * replay of this shape 1.3 to 1.8 us slower for the rest of the process,
 * on a stream of high priority too; taking turns with the raw streamed
 * launches, curd's replay went from 13.8 to 15.3 us and the raw one (a DMA
 * node) from 16.4 to 23.5 us. curd's streamed batch, on curd's stream,
 * slows neither. Run alone or first, this scenario measures a process
 * whose kernels all go to curd's stream; in the default run it comes after
 * other scenarios' raw launches and measures the slower state, which
 * batch/eight-launches-second-stream always measures. */
int bench_batch_eight_launches(const bench_env *env)
{
    batch_bench b;
    batch_pair pair;
    uint64_t seed = env->seed ^ 0xba7c4u;
    int result = -1;
    if (pair_open(&b, env, &pair) != 0 || bench_raw_enter(env) != 0)
        goto done;
    int captured = raw_capture(&b);
    bench_raw_leave(env);
    if (captured != 0 || pair_check(&b, &pair, &seed) != 0
        || check_raw(&b, op_raw_graph, &seed, "raw graph replay") != 0)
        goto done;

    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "batch/eight-launches",
                        env->samples,
                        "8 dependent add_one launches on 4 KiB of resident "
                        "data + a 4 KiB read-back, one fence");
    int raw_graph = -1;
    if (pair_add_variants(&scenario, &pair) == 0)
        raw_graph = bench_add_variant(&scenario, &(bench_variant_spec){
            .label = "cuGraphLaunch + sync", .role = BENCH_ROLE_RAW,
            .op = op_raw_graph, .context = &b});
    if (raw_graph < 0 || bench_measure(&scenario) != 0)
        goto done;
    bench_check_ratio(&scenario, pair.graph_variant, raw_graph, 1.10,
                      "graph replay <= 1.1x raw graph replay");
    bench_check_speedup(&scenario, pair.graph_variant, pair.streamed_variant,
                        2.0, "graph replay > 2x faster than streaming");
    bench_check_median_ns(&scenario, pair.graph_variant, 22300.0,
                          "faster than PyTorch's graph replay (22.3 us)");
    bench_report_scenario(&scenario);
    result = 0;
done:
    pair_free(&b, &pair);
    return result;
}

/* Launches on a second stream of the process, the raw driver's: from
 * then on every graph replay in the process is slower (see above). */
static int launch_on_a_second_stream(batch_bench *b)
{
    enum { SECOND_STREAM_LAUNCHES = 100 };
    bench_cu_stream second = NULL;
    if (bench_stream_acquire(b->env, &second) != 0)
        return -1;
    int result = bench_raw_enter(b->env);
    if (result == 0) {
        result = raw_enqueue(b, second, SECOND_STREAM_LAUNCHES, false);
        if (result == 0 && b->env->cu->cuStreamSynchronize(second) != 0)
            result = bench_fail("cuStreamSynchronize failed");
        bench_raw_leave(b->env);
    }
    bench_stream_release(b->env, second);
    return result;
}

/* The same two batches once the process has launched kernels on a second
 * stream, the state of any process that also runs CUDA work of its own:
 * the speedup is reported, the driver's cost of that state included. */
int bench_batch_eight_launches_second_stream(const bench_env *env)
{
    batch_bench b;
    batch_pair pair;
    uint64_t seed = env->seed ^ 0x2ec0u;
    int result = -1;
    if (pair_open(&b, env, &pair) != 0 || launch_on_a_second_stream(&b) != 0
        || pair_check(&b, &pair, &seed) != 0)
        goto done;

    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "batch/eight-launches-second-stream",
                        env->samples,
                        "batch/eight-launches' two batches after 100 kernel "
                        "launches on a second stream of the process");
    if (pair_add_variants(&scenario, &pair) != 0
        || bench_measure(&scenario) != 0)
        goto done;
    bench_check_speedup(&scenario, pair.graph_variant, pair.streamed_variant,
                        0.0, NULL);
    bench_note(&scenario,
               "every graph replay of a process that has launched kernels "
               "on a second stream is slower, the raw driver's too "
               "(doc/PERFORMANCE.md, fourteenth run)");
    bench_report_scenario(&scenario);
    result = 0;
done:
    pair_free(&b, &pair);
    return result;
}

/* The streamed batch against the same launches and read-back on a raw
 * stream (apart from the graphs: see above). */
int bench_batch_eight_launches_streamed(const bench_env *env)
{
    batch_bench b;
    curd_batch *streamed = NULL;
    uint64_t seed = env->seed ^ 0x57e4u;
    int result = -1;
    if (bench_open(&b, env) != 0
        || batch_record(&b, 0, LAUNCHES, true, b.n, &streamed) != 0
        || check_curd(&b, streamed, &seed, "curd streamed batch") != 0
        || check_raw(&b, op_raw_streamed, &seed, "raw streamed") != 0)
        goto done;

    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "batch/eight-launches-streamed",
                        env->samples,
                        "8 dependent add_one launches on 4 KiB of resident "
                        "data + a 4 KiB read-back, streamed, one fence");
    int curd_streamed = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_batch_run, streamed", .role = BENCH_ROLE_CURD,
        .op = op_curd_batch, .context = streamed});
    int raw_streamed = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "8 cuLaunchKernel + cuMemcpyDtoHAsync + sync",
        .role = BENCH_ROLE_RAW, .op = op_raw_streamed, .context = &b});
    if (curd_streamed < 0 || raw_streamed < 0
        || bench_measure(&scenario) != 0)
        goto done;
    bench_check_ratio(&scenario, curd_streamed, raw_streamed, 1.15,
                      "streamed batch <= 1.15x raw streamed");
    bench_report_scenario(&scenario);
    result = 0;
done:
    (void)curd_batch_free(streamed);
    bench_free(&b);
    return result;
}

int bench_batch_graph_update(const bench_env *env)
{
    batch_bench b;
    curd_batch *unchanged = NULL, *scalar = NULL, *buffer = NULL;
    uint64_t seed = env->seed ^ 0x9a7bu;
    int result = -1;
    if (bench_open(&b, env) != 0
        || batch_record(&b, CURD_BATCH_GRAPH, LAUNCHES, true, b.n,
                        &unchanged) != 0
        || batch_record(&b, CURD_BATCH_GRAPH, LAUNCHES, true, b.n, &scalar)
               != 0
        || batch_record(&b, CURD_BATCH_GRAPH, LAUNCHES, true, b.n, &buffer)
               != 0
        || check_curd(&b, unchanged, &seed, "curd graph batch") != 0)
        goto done;
    update_op scalar_op = {&b, scalar, false};
    update_op buffer_op = {&b, buffer, true};
    /* Each is captured on its first run, then only updated. */
    if (op_curd_update(&scalar_op, 2) != 0
        || op_curd_update(&buffer_op, 2) != 0)
        goto done;
    curd_stats before = {.struct_size = sizeof before};
    curd_status status = curd_device_stats(env->device, &before);
    if (status != CURD_OK) {
        bench_fail_curd("curd_device_stats", status);
        goto done;
    }

    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "batch/graph-update",
                        env->samples,
                        "replaying a graph batch of 8 launches + a 4 KiB "
                        "read-back after changing its first launch");
    int plain = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "replay unchanged", .role = BENCH_ROLE_CURD,
        .op = op_curd_batch, .context = unchanged});
    int scalars = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "set_args(other scalar) + replay", .role = BENCH_ROLE_CURD,
        .op = op_curd_update, .context = &scalar_op});
    int buffers = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "set_args(other buffer) + replay", .role = BENCH_ROLE_CURD,
        .op = op_curd_update, .context = &buffer_op});
    if (plain < 0 || scalars < 0 || buffers < 0
        || bench_measure(&scenario) != 0)
        goto done;
    curd_stats after = {.struct_size = sizeof after};
    status = curd_device_stats(env->device, &after);
    if (status != CURD_OK) {
        bench_fail_curd("curd_device_stats", status);
        goto done;
    }
    bench_check_ratio(&scenario, scalars, plain, 1.2,
                      "changed scalar <= 1.2x unchanged replay");
    bench_check_ratio(&scenario, buffers, plain, 1.2,
                      "changed buffer <= 1.2x unchanged replay");
    bench_note(&scenario,
               "graphs captured while timed: %" PRIu64 "; kernel nodes"
               " updated in place: %" PRIu64,
               after.graph_captures - before.graph_captures,
               after.graph_updates - before.graph_updates);
    bench_report_scenario(&scenario);
    result = 0;
done:
    (void)curd_batch_free(unchanged);
    (void)curd_batch_free(scalar);
    (void)curd_batch_free(buffer);
    bench_free(&b);
    return result;
}

/* 64 launches that do no work (n = 0), then one fence: what each launch
 * recorded in a batch costs beyond the cuLaunchKernel it enqueues. */
static int op_raw_launches(void *context, uint64_t iterations)
{
    batch_bench *b = context;
    if (bench_raw_enter(b->env) != 0)
        return -1;
    int result = 0;
    for (uint64_t i = 0; result == 0 && i < iterations; i++) {
        result = raw_enqueue(b, b->stream, COST_LAUNCHES, false);
        if (result == 0 && b->env->cu->cuStreamSynchronize(b->stream) != 0)
            result = bench_fail("cuStreamSynchronize failed");
    }
    bench_raw_leave(b->env);
    return result;
}

int bench_batch_launch_cost(const bench_env *env)
{
    batch_bench b;
    curd_batch *batch = NULL;
    int result = -1;
    if (bench_open(&b, env) != 0)
        goto done;
    b.n = 0;
    if (batch_record(&b, 0, COST_LAUNCHES, false, 0, &batch) != 0
        || op_curd_batch(batch, 1) != 0 || op_raw_launches(&b, 1) != 0)
        goto done;
    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "batch/launch-cost", env->samples,
                        "64 empty launches and one fence, per launch");
    int curd_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_batch_run of 64 launches", .role = BENCH_ROLE_CURD,
        .op = op_curd_batch, .context = batch,
        .ops_per_iteration = COST_LAUNCHES});
    int raw_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "64 cuLaunchKernel + sync", .role = BENCH_ROLE_RAW,
        .op = op_raw_launches, .context = &b,
        .ops_per_iteration = COST_LAUNCHES});
    if (curd_index < 0 || raw_index < 0 || bench_measure(&scenario) != 0)
        goto done;
    bench_check_extra_ns(&scenario, curd_index, raw_index, 150.0,
                         "<= 150 ns more per launch than cuLaunchKernel");
    bench_report_scenario(&scenario);
    result = 0;
done:
    (void)curd_batch_free(batch);
    bench_free(&b);
    return result;
}
