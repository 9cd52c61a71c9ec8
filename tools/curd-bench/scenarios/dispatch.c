/* dispatch.c - curd-bench scenarios for programs and dispatch.
 *
 * dispatch/borrowed-small  4 KiB of words in, add_one, 4 KiB out, one
 *                          fence: curd_dispatch on the caller's malloc
 *                          memory against the raw driver doing the same
 *                          work in the fewest calls (cuMemcpyHtoDAsync
 *                          from pinned memory into a device buffer
 *                          allocated once, cuLaunchKernel,
 *                          cuMemcpyDtoHAsync into pinned memory, one
 *                          cuStreamSynchronize).
 * dispatch/borrowed-large  the same over 256 KiB of words (reported: the
 *                          host copies in and out are curd's, on top of
 *                          the raw driver's work).
 * dispatch/empty-launch    a launch that does nothing (add_one over no
 *                          element, one thread) and its fence: curd_dispatch
 *                          against cuLaunchKernel + cuStreamSynchronize.
 * program/load-cached      curd_program_load + curd_program_free of an
 *                          image already loaded (a cache hit) against
 *                          cuModuleLoadDataEx + cuModuleGetFunction +
 *                          cuModuleUnload of the same image, which the
 *                          driver's own JIT cache serves.
 *
 * The kernel is add_one (tests/kernels/add_one.ptx, the committed PTX,
 * compiled into the tool: bench_kernel_ptx): the build needs no nvcc, and
 * the raw driver and curd load the same text. */
#include "harness/kernels.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 1024u /* 4 KiB */
#define WORDS_LARGE 65536u /* 256 KiB */
#define BLOCK 256u

#define ADD_ONE "curd_add_one"

/* What the timed operations of a scenario work on. */
typedef struct dispatch_state {
    const bench_env *env;
    curd_program_desc desc;
    curd_program *program;        /* add_one through curd */
    bench_cu_module module;       /* add_one through the raw driver */
    bench_cu_function function;
    bench_cu_stream stream;
    bool have_stream;
    bench_cu_deviceptr device_words;
    uint32_t *pinned_in;          /* cuMemHostAlloc */
    uint32_t *pinned_out;
    uint32_t *words;              /* the caller's memory (malloc) */
    uint32_t *expected;
    /* One launch's shape and arguments. */
    uint32_t count;
    curd_launch launch;
    curd_arg args[2];
    void *params[2];
    bench_cu_deviceptr param_ptr;
    unsigned grid;
} dispatch_state;

static void dispatch_free(dispatch_state *state)
{
    const bench_env *env = state->env;
    if (env == NULL)
        return;
    if (state->program != NULL)
        curd_program_free(state->program);
    if (bench_raw_enter(env) == 0) {
        if (state->module != NULL)
            env->cu->cuModuleUnload(state->module);
        if (state->device_words != 0)
            env->cu->cuMemFree(state->device_words);
        if (state->pinned_in != NULL)
            env->cu->cuMemFreeHost(state->pinned_in);
        if (state->pinned_out != NULL)
            env->cu->cuMemFreeHost(state->pinned_out);
        bench_raw_leave(env);
    }
    if (state->have_stream)
        bench_stream_release(env, state->stream);
    free(state->words);
    free(state->expected);
    memset(state, 0, sizeof *state);
}

/* add_one loaded both ways, a stream, and (words > 0) the memory of a
 * launch over that many words. */
static int dispatch_init(dispatch_state *state, const bench_env *env,
                         uint32_t words)
{
    memset(state, 0, sizeof *state);
    state->env = env;
    bench_kernel_desc(&state->desc, "add_one.ptx", ADD_ONE);
    if (bench_kernel_load(env, &state->desc, &state->program, &state->module,
                          &state->function)
        != 0)
        return -1;
    if (bench_stream_acquire(env, &state->stream) != 0)
        return -1;
    state->have_stream = true;
    if (bench_raw_enter(env) != 0)
        return -1;
    bench_cu_result cu_result = BENCH_CUDA_SUCCESS;
    if (words != 0)
        cu_result = env->cu->cuMemAlloc(&state->device_words,
                                        words * sizeof(uint32_t));
    if (cu_result == BENCH_CUDA_SUCCESS && words != 0)
        cu_result = env->cu->cuMemHostAlloc((void **)&state->pinned_in,
                                            words * sizeof(uint32_t),
                                            BENCH_CU_MEMHOSTALLOC_PORTABLE);
    if (cu_result == BENCH_CUDA_SUCCESS && words != 0)
        cu_result = env->cu->cuMemHostAlloc((void **)&state->pinned_out,
                                            words * sizeof(uint32_t),
                                            BENCH_CU_MEMHOSTALLOC_PORTABLE);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("the raw launch's memory", cu_result);
    /* One launch over count words: borrowed words for curd, the device
     * buffer for the raw driver; no words: one thread, no element. */
    state->count = words;
    state->grid = words == 0 ? 1u : (words + BLOCK - 1u) / BLOCK;
    curd_launch_init(&state->launch);
    state->launch.grid[0] = state->grid;
    state->launch.grid[1] = state->launch.grid[2] = 1;
    state->launch.block[0] = words == 0 ? 1u : BLOCK;
    state->args[1] = curd_arg_scalar(&state->count, sizeof state->count);
    state->param_ptr = state->device_words;
    state->params[0] = &state->param_ptr;
    state->params[1] = &state->count;
    if (words == 0) {
        state->args[0] = curd_arg_null();
        return 0;
    }
    state->words = bench_host_alloc(words * sizeof(uint32_t), "the words");
    state->expected = bench_host_alloc(words * sizeof(uint32_t),
                                       "the expected words");
    if (state->words == NULL || state->expected == NULL)
        return -1;
    state->args[0] = curd_arg_host(CURD_ROLE_INOUT, state->words,
                                   words * sizeof(uint32_t));
    return 0;
}

/* ------------------------------------------------------------------------
 * Timed operations
 * ---------------------------------------------------------------------- */
static int op_curd_dispatch(void *opaque, uint64_t iterations)
{
    dispatch_state *state = opaque;
    for (uint64_t i = 0; i < iterations; i++)
        BENCH_CURD(curd_dispatch(state->env->device, state->program,
                                 &state->launch, state->args, 2));
    return 0;
}

/* Copies in (when there are words), the launch, copies out, one fence. */
static int op_raw_dispatch(void *opaque, uint64_t iterations)
{
    dispatch_state *state = opaque;
    const bench_cuda *cu = state->env->cu;
    size_t byte_len = state->count * sizeof(uint32_t);
    unsigned block = state->count == 0 ? 1u : BLOCK;
    if (bench_raw_enter(state->env) != 0)
        return -1;
    int result = 0;
    for (uint64_t i = 0; i < iterations && result == 0; i++) {
        bench_cu_result cu_result = BENCH_CUDA_SUCCESS;
        if (byte_len != 0)
            cu_result = cu->cuMemcpyHtoDAsync(state->device_words,
                                              state->pinned_in, byte_len,
                                              state->stream);
        if (cu_result == BENCH_CUDA_SUCCESS)
            cu_result = cu->cuLaunchKernel(state->function, state->grid, 1,
                                           1, block, 1, 1, 0, state->stream,
                                           state->params, NULL);
        if (cu_result == BENCH_CUDA_SUCCESS && byte_len != 0)
            cu_result = cu->cuMemcpyDtoHAsync(state->pinned_out,
                                              state->device_words, byte_len,
                                              state->stream);
        if (cu_result == BENCH_CUDA_SUCCESS)
            cu_result = cu->cuStreamSynchronize(state->stream);
        if (cu_result != BENCH_CUDA_SUCCESS)
            result = bench_fail_cu("a raw dispatch", cu_result);
    }
    bench_raw_leave(state->env);
    return result;
}

static int op_curd_load_cached(void *opaque, uint64_t iterations)
{
    dispatch_state *state = opaque;
    for (uint64_t i = 0; i < iterations; i++) {
        curd_program *program;
        BENCH_CURD(curd_program_load(state->env->device, &state->desc,
                                     &program));
        BENCH_CURD(curd_program_free(program));
    }
    return 0;
}

static int op_raw_load(void *opaque, uint64_t iterations)
{
    dispatch_state *state = opaque;
    const bench_cuda *cu = state->env->cu;
    if (bench_raw_enter(state->env) != 0)
        return -1;
    int result = 0;
    for (uint64_t i = 0; i < iterations && result == 0; i++) {
        bench_cu_module module = NULL;
        bench_cu_function function = NULL;
        bench_cu_result cu_result =
            cu->cuModuleLoadDataEx(&module, state->desc.image, 0, NULL,
                                   NULL);
        if (cu_result == BENCH_CUDA_SUCCESS) {
            cu_result = cu->cuModuleGetFunction(&function, module, ADD_ONE);
            bench_cu_result unloaded = cu->cuModuleUnload(module);
            if (cu_result == BENCH_CUDA_SUCCESS)
                cu_result = unloaded;
        }
        if (cu_result != BENCH_CUDA_SUCCESS)
            result = bench_fail_cu("a raw module load", cu_result);
    }
    bench_raw_leave(state->env);
    return result;
}

/* ------------------------------------------------------------------------
 * Checks: every word, both ways, before anything is timed.
 * ---------------------------------------------------------------------- */
static int check_add_one(dispatch_state *state, uint64_t *seed)
{
    size_t byte_len = state->count * sizeof(uint32_t);
    bench_fill_random(seed, state->words, byte_len);
    for (uint32_t i = 0; i < state->count; i++)
        state->expected[i] = state->words[i] + 1u;
    if (op_curd_dispatch(state, 1) != 0 ||
        bench_compare("curd_dispatch of add_one on borrowed memory",
                      state->expected, state->words, byte_len) != 0)
        return -1;
    bench_fill_random(seed, state->pinned_in, byte_len);
    bench_poison(state->pinned_out, byte_len);
    for (uint32_t i = 0; i < state->count; i++)
        state->expected[i] = state->pinned_in[i] + 1u;
    if (op_raw_dispatch(state, 1) != 0)
        return -1;
    return bench_compare("the raw driver's add_one", state->expected,
                         state->pinned_out, byte_len);
}

/* ------------------------------------------------------------------------
 * The scenarios
 * ---------------------------------------------------------------------- */
/* Measures curd's way and the raw driver's way of the same work (index 0
 * and 1 of the scenario's variants); 0, or -1 after bench_fail(). */
enum { CURD_VARIANT, RAW_VARIANT };
static int measure_pair(bench_scenario *scenario, dispatch_state *state,
                        const char *curd_label, bench_op_fn curd_op,
                        const char *raw_label, bench_op_fn raw_op)
{
    if (bench_add_variant(scenario, &(bench_variant_spec){
            .label = curd_label, .role = BENCH_ROLE_CURD, .op = curd_op,
            .context = state}) != CURD_VARIANT ||
        bench_add_variant(scenario, &(bench_variant_spec){
            .label = raw_label, .role = BENCH_ROLE_RAW, .op = raw_op,
            .context = state}) != RAW_VARIANT)
        return -1;
    return bench_measure(scenario);
}

/* The device's counters as the timed samples start (sampling_start). */
typedef struct traffic_counters {
    const bench_env *env;
    curd_stats start;
    bool read;
} traffic_counters;

static void traffic_at_sampling_start(void *opaque)
{
    traffic_counters *counters = opaque;
    counters->start.struct_size = sizeof counters->start;
    counters->read =
        curd_device_stats(counters->env->device, &counters->start) == CURD_OK;
}

/* What the library counted per dispatch over the timed samples (issue
 * 27: a dispatch's staging, zeroing and read-backs count like any
 * transfer). The raw variant counts nothing there, so this is curd's
 * alone; all zero from a libcurd that does not count them, which tells
 * two builds apart when their times are compared. */
static void note_traffic(bench_scenario *scenario,
                         const traffic_counters *counters)
{
    curd_stats end = {.struct_size = sizeof end};
    if (!counters->read
        || curd_device_stats(counters->env->device, &end) != CURD_OK)
        return;
    uint64_t dispatches = end.dispatches - counters->start.dispatches;
    if (dispatches == 0)
        return;
    double n = (double)dispatches;
    bench_note(scenario,
               "counted per dispatch (curd_device_stats, timed samples): "
               "h2d %.0f B, d2h %.0f B, %.2f copy ops, %.2f fills, "
               "%.2f fences",
               (double)(end.h2d_bytes - counters->start.h2d_bytes) / n,
               (double)(end.d2h_bytes - counters->start.d2h_bytes) / n,
               (double)(end.copy_ops - counters->start.copy_ops) / n,
               (double)(end.fill_ops - counters->start.fill_ops) / n,
               (double)(end.fences - counters->start.fences) / n);
}

/* add_one over `words` words of malloc memory, inout, against the raw
 * driver's fewest calls on pinned memory; target 0: reported. */
static int measure_borrowed(const bench_env *env, uint32_t words,
                            const char *name, const char *description,
                            double target, const char *target_label)
{
    dispatch_state state;
    bench_scenario scenario;
    uint64_t seed = env->seed ^ 0xd15au ^ words;
    int result = -1;
    if (dispatch_init(&state, env, words) != 0 ||
        check_add_one(&state, &seed) != 0)
        goto done;
    bench_scenario_init(&scenario, env, name, env->samples, "%s",
                        description);
    traffic_counters counters = {.env = env};
    scenario.sampling_start = traffic_at_sampling_start;
    scenario.sampling_context = &counters;
    if (measure_pair(&scenario, &state, "curd_dispatch, malloc memory",
                     op_curd_dispatch,
                     "HtoDAsync+cuLaunchKernel+DtoHAsync+sync, pinned",
                     op_raw_dispatch) != 0)
        goto done;
    bench_check_ratio(&scenario, CURD_VARIANT, RAW_VARIANT, target,
                      target_label);
    note_traffic(&scenario, &counters);
    bench_report_scenario(&scenario);
    result = 0;
done:
    dispatch_free(&state);
    return result;
}

int bench_dispatch_borrowed_small(const bench_env *env)
{
    return measure_borrowed(env, WORDS, "dispatch/borrowed-small",
                            "4 KiB of words in, add_one, 4 KiB out, one fence",
                            1.15, "within 1.15x of raw");
}

/* Where the host copies in and out show; the read-back comes into the
 * input's block (lib/launch/dispatch.c says why). */
int bench_dispatch_borrowed_large(const bench_env *env)
{
    return measure_borrowed(env, WORDS_LARGE, "dispatch/borrowed-large",
                            "256 KiB of words in, add_one, 256 KiB out, one"
                            " fence",
                            0.0, NULL);
}

int bench_dispatch_empty_launch(const bench_env *env)
{
    dispatch_state state;
    bench_scenario scenario;
    int result = -1;
    if (dispatch_init(&state, env, 0) != 0 || op_curd_dispatch(&state, 1) != 0
        || op_raw_dispatch(&state, 1) != 0)
        goto done;
    bench_scenario_init(&scenario, env, "dispatch/empty-launch",
                        env->samples,
                        "a launch of one thread that does nothing, and its "
                        "fence");
    if (measure_pair(&scenario, &state, "curd_dispatch", op_curd_dispatch,
                     "cuLaunchKernel+cuStreamSynchronize",
                     op_raw_dispatch) != 0)
        goto done;
    bench_check_ratio(&scenario, CURD_VARIANT, RAW_VARIANT, 0.0, NULL);
    bench_report_scenario(&scenario);
    result = 0;
done:
    dispatch_free(&state);
    return result;
}

int bench_program_load_cached(const bench_env *env)
{
    dispatch_state state;
    bench_scenario scenario;
    curd_stats before = {.struct_size = sizeof before};
    curd_stats after = {.struct_size = sizeof after};
    int result = -1;
    if (dispatch_init(&state, env, 0) != 0)
        goto done;
    /* A load of the loaded image is a hit: no JIT, no driver call. */
    if (curd_device_stats(env->device, &before) != CURD_OK ||
        op_curd_load_cached(&state, 1) != 0 ||
        curd_device_stats(env->device, &after) != CURD_OK)
        goto done;
    if (after.module_cache_hits != before.module_cache_hits + 1u ||
        after.module_cache_misses != before.module_cache_misses) {
        bench_fail("a load of a loaded image was not a cache hit (hits %llu "
                   "-> %llu, misses %llu -> %llu)",
                   (unsigned long long)before.module_cache_hits,
                   (unsigned long long)after.module_cache_hits,
                   (unsigned long long)before.module_cache_misses,
                   (unsigned long long)after.module_cache_misses);
        goto done;
    }
    if (op_raw_load(&state, 1) != 0)
        goto done;
    bench_scenario_init(&scenario, env, "program/load-cached", env->samples,
                        "a program load of an image already loaded, and "
                        "its free");
    if (measure_pair(&scenario, &state, "curd_program_load+free, cache hit",
                     op_curd_load_cached,
                     "cuModuleLoadDataEx+GetFunction+Unload, driver's cache",
                     op_raw_load) != 0)
        goto done;
    bench_check_median_ns(&scenario, CURD_VARIANT, 1000.0, "< 1 us");
    bench_check_ratio(&scenario, CURD_VARIANT, RAW_VARIANT, 0.0, NULL);
    bench_report_scenario(&scenario);
    result = 0;
done:
    dispatch_free(&state);
    return result;
}
