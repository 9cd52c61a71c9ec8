/* sweep.c - bandwidth against transfer size, curd against the raw
 * driver at every size.
 *
 * transfer/upload-sweep    host to device at 4 KiB, 64 KiB, 1 MiB, 16 MiB,
 *                          64 MiB, 256 MiB and 1 GiB (not with --quick):
 *                          cuMemcpyHtoD from malloc memory, each fenced
 *                          by cuCtxSynchronize (raw pageable: alone it
 *                          returns before its DMA ends),
 *                          cuMemcpyHtoDAsync + sync from cuMemHostAlloc
 *                          memory (raw pinned) and from malloc memory that
 *                          cuMemHostRegister page-locked (raw registered),
 *                          curd_buffer_upload from malloc memory (curd
 *                          pageable) and from curd_host_register'ed memory
 *                          (curd registered).
 * transfer/download-sweep  the same, device to host.
 *
 * Each size has its own resident buffer, so every variant moves a whole
 * buffer; the variants of one size address the same buffer. The targets:
 * at every size curd is not slower than the raw driver with the same kind
 * of memory (within noise: 1.05x). The CSV names the variants by the five
 * series (the label adds the size), which `make bench-plot` draws as
 * lines. */
#include "harness/report.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_SIZES 7
/* The last size is left out with --quick. 64 MiB is where a pageable
 * upload starts adding copy threads (lib/transfer/tuning.h). */
static const size_t sweep_bytes[SWEEP_SIZES] = {
    4 * BENCH_KIB,  64 * BENCH_KIB,  BENCH_MIB,       16 * BENCH_MIB,
    64 * BENCH_MIB, 256 * BENCH_MIB, 1024 * BENCH_MIB};

enum sweep_series {
    RAW_PAGEABLE,
    RAW_PINNED,
    RAW_REGISTERED,
    CURD_PAGEABLE,
    CURD_REGISTERED,
    SERIES_COUNT
};
static const char *const series_names[SERIES_COUNT] = {
    "raw pageable", "raw pinned", "raw registered", "curd pageable",
    "curd registered"};

/* What one size holds: the buffer, malloc memory (state.host), pinned
 * memory (state.pinned), memory the raw driver registered and memory
 * curd registered (one range cannot be registered twice). */
typedef struct sweep_size {
    bench_transfer_state state;
    unsigned char *registered;
    bool registered_done;
    unsigned char *raw_registered;
    bool raw_registered_done;
    bench_copy_op ops[SERIES_COUNT];
} sweep_size;

static void sweep_size_free(sweep_size *size)
{
    const bench_env *env = size->state.env;
    if (size->registered_done)
        curd_host_unregister(env->device, size->registered);
    if (size->raw_registered_done && bench_raw_enter(env) == 0) {
        env->cu->cuMemHostUnregister(size->raw_registered);
        bench_raw_leave(env);
    }
    free(size->registered);
    free(size->raw_registered);
    bench_transfer_free(&size->state);
}

/* byte_len of malloc memory page-locked by the raw driver, holding the
 * reference bytes. */
static int add_raw_registered(sweep_size *size, size_t byte_len)
{
    const bench_env *env = size->state.env;
    bench_cu_result cu_result;
    size->raw_registered = bench_host_alloc(byte_len, "raw registered memory");
    if (size->raw_registered == NULL)
        return -1;
    memcpy(size->raw_registered, size->state.reference, byte_len);
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemHostRegister(size->raw_registered, byte_len,
                                           BENCH_CU_MEMHOSTREGISTER_PORTABLE);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemHostRegister", cu_result);
    size->raw_registered_done = true;
    return 0;
}

static int sweep_size_init(sweep_size *size, const bench_env *env,
                           size_t byte_len, bool upload, bool registered)
{
    bench_transfer_state *state = &size->state;
    if (bench_transfer_init(state, env, byte_len, 0x8008u ^ byte_len) != 0 ||
        bench_transfer_add_host(state, false) != 0 ||
        bench_transfer_add_pinned(state, &state->pinned, byte_len) != 0)
        return -1;
    if (registered) {
        size->registered = bench_host_alloc(byte_len, "registered memory");
        if (size->registered == NULL)
            return -1;
        memcpy(size->registered, state->reference, byte_len);
        BENCH_CURD(curd_host_register(env->device, size->registered,
                                      byte_len));
        size->registered_done = true;
        if (add_raw_registered(size, byte_len) != 0)
            return -1;
    }
    if (upload)
        memcpy(state->pinned, state->reference, byte_len);
    else
        BENCH_CURD(curd_buffer_upload(env->device, state->buffer,
                                      state->reference, byte_len));
    size->ops[RAW_PAGEABLE] = bench_make_op(state, state->host);
    size->ops[RAW_PINNED] = bench_make_op(state, state->pinned);
    size->ops[RAW_REGISTERED] = bench_make_op(state, size->raw_registered);
    size->ops[CURD_PAGEABLE] = bench_make_op(state, state->host);
    size->ops[CURD_REGISTERED] = bench_make_op(state, size->registered);
    return 0;
}

static bench_op_fn series_op(enum sweep_series series, bool upload)
{
    switch (series) {
    case RAW_PAGEABLE:
        return upload ? bench_op_raw_htod_sync : bench_op_raw_dtoh_sync;
    case RAW_PINNED:
    case RAW_REGISTERED:
        return upload ? bench_op_raw_htod_async : bench_op_raw_dtoh_async;
    default:
        return upload ? bench_op_curd_upload : bench_op_curd_download;
    }
}

/* Every path at this size moves the right bytes. */
static int sweep_size_check(sweep_size *size, bool upload, unsigned series)
{
    bench_copy_op *op = &size->ops[series];
    char what[96];
    snprintf(what, sizeof what, "%s %s of %zu bytes", series_names[series],
             upload ? "upload" : "download", size->state.byte_len);
    if (upload)
        return bench_check_upload(&size->state, series_op(series, true), op,
                                  what);
    return bench_check_download(&size->state, series_op(series, false), op,
                                op->host, what);
}

/* The series a run has: without registration, neither registered one. */
static bool series_runs(unsigned series, bool registered)
{
    return registered || (series != RAW_REGISTERED && series != CURD_REGISTERED);
}

static int sweep(const bench_env *env, const char *name, bool upload)
{
    sweep_size *sizes = calloc(SWEEP_SIZES, sizeof *sizes);
    bool registered = bench_has_host_register(env) &&
                      env->cu->cuMemHostRegister != NULL &&
                      env->cu->cuMemHostUnregister != NULL;
    unsigned size_count = env->quick ? SWEEP_SIZES - 1 : SWEEP_SIZES;
    bench_scenario *scenario = malloc(sizeof *scenario);
    int index[SWEEP_SIZES][SERIES_COUNT];
    unsigned size_index, series;
    int result = -1;

    if (sizes == NULL || scenario == NULL) {
        bench_fail("out of host memory for %s", name);
        goto done;
    }
    bench_scenario_init(scenario, env, name, env->samples_large,
                        "%s of 4 KiB to %s: raw and curd, pageable and "
                        "page-locked", upload ? "uploads" : "downloads",
                        env->quick ? "256 MiB" : "1 GiB");
    for (size_index = 0; size_index < size_count; size_index++) {
        sweep_size *size = &sizes[size_index];
        size_t byte_len = sweep_bytes[size_index];
        if (sweep_size_init(size, env, byte_len, upload, registered) != 0)
            goto done;
        for (series = 0; series < SERIES_COUNT; series++) {
            index[size_index][series] = -1;
            if (!series_runs(series, registered))
                continue;
            if (sweep_size_check(size, upload, series) != 0)
                goto done;
            char label[80];
            snprintf(label, sizeof label,
                     "%s, %zu %s", series_names[series],
                     byte_len >= BENCH_MIB ? byte_len / BENCH_MIB
                                           : byte_len / BENCH_KIB,
                     byte_len >= BENCH_MIB ? "MiB" : "KiB");
            index[size_index][series] = bench_add_variant(
                scenario, &(bench_variant_spec){
                    .label = label,
                    .series = series_names[series],
                    .role = series < CURD_PAGEABLE ? BENCH_ROLE_RAW
                                                   : BENCH_ROLE_CURD,
                    .op = series_op(series, upload),
                    .context = &size->ops[series],
                    .bytes_per_op = byte_len});
            if (index[size_index][series] < 0)
                goto done;
        }
    }
    if (bench_measure(scenario) != 0)
        goto done;
    for (size_index = 0; size_index < size_count; size_index++) {
        bench_check_ratio(scenario, index[size_index][CURD_PAGEABLE],
                          index[size_index][RAW_PAGEABLE], 1.05,
                          "not slower than raw (1.05x)");
        if (registered)
            bench_check_ratio(scenario, index[size_index][CURD_REGISTERED],
                              index[size_index][RAW_REGISTERED], 1.05,
                              "not slower than raw (1.05x)");
    }
    bench_note(scenario, "raw async copies: one cuStreamSynchronize per "
                         "copy; GB/s = 1e9 bytes/s; make bench-plot draws it");
    bench_note(scenario, "libcurd defaults: one staging chunk up to 1 MiB, "
                         "then 4 pipelined chunks of 1 to 8 MiB; copy threads "
                         "from 1 MiB, 6 more for pageable uploads from "
                         "64 MiB; see man curd, ENVIRONMENT");
    bench_report_scenario(scenario);
    if (!registered)
        bench_report_skip(name, "the registered series: no "
                                "cuMemHostRegister in this driver");
    if (env->quick)
        bench_report_skip(name, "1 GiB: left out with --quick");
    result = 0;

done:
    for (size_index = 0; sizes != NULL && size_index < SWEEP_SIZES;
         size_index++)
        sweep_size_free(&sizes[size_index]);
    free(sizes);
    free(scenario);
    return result;
}

int bench_transfer_upload_sweep(const bench_env *env)
{
    return sweep(env, "transfer/upload-sweep", true);
}

int bench_transfer_download_sweep(const bench_env *env)
{
    return sweep(env, "transfer/download-sweep", false);
}
