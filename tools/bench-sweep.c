/* bench-sweep.c - bandwidth against transfer size, for the charts.
 *
 * transfer/upload-sweep    host to device at 4 KiB, 64 KiB, 1 MiB, 16 MiB
 *                          and 256 MiB: cuMemcpyHtoD from malloc memory
 *                          (raw pageable), cuMemcpyHtoDAsync + sync from
 *                          cuMemHostAlloc memory (raw pinned),
 *                          curd_buffer_upload from malloc memory (curd
 *                          pageable) and from curd_host_register'ed memory
 *                          (curd registered).
 * transfer/download-sweep  the same, device to host.
 *
 * Each size has its own resident buffer, so every variant moves a whole
 * buffer; the variants of one size address the same buffer. The CSV names
 * the variants by those four series (the label adds the size), which
 * `make bench-plot` draws as lines. */
#include "bench-scenarios.h"
#include "bench-transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_SIZES 5
static const size_t sweep_bytes[SWEEP_SIZES] = {
    4 * BENCH_KIB, 64 * BENCH_KIB, BENCH_MIB, 16 * BENCH_MIB,
    256 * BENCH_MIB};

enum sweep_series {
    RAW_PAGEABLE,
    RAW_PINNED,
    CURD_PAGEABLE,
    CURD_REGISTERED,
    SERIES_COUNT
};
static const char *const series_names[SERIES_COUNT] = {
    "raw pageable", "raw pinned", "curd pageable", "curd registered"};

/* What one size holds: the buffer, malloc memory (state.host), pinned
 * memory (state.pinned) and registered memory. */
typedef struct sweep_size {
    bench_transfer_state state;
    unsigned char *registered;
    bool registered_done;
    bench_copy_op ops[SERIES_COUNT];
} sweep_size;

/* The labels outlive the scenario's run: the report keeps pointers to
 * them until the run ends. [upload][size][series] */
static char sweep_labels[2][SWEEP_SIZES][SERIES_COUNT][80];

static void sweep_size_free(sweep_size *size)
{
    if (size->registered_done)
        curd_host_unregister(size->state.env->device, size->registered);
    free(size->registered);
    bench_transfer_free(&size->state);
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
    }
    if (upload)
        memcpy(state->pinned, state->reference, byte_len);
    else
        BENCH_CURD(curd_buffer_upload(env->device, state->buffer,
                                      state->reference, byte_len));
    size->ops[RAW_PAGEABLE] = bench_make_op(state, state->host);
    size->ops[RAW_PINNED] = bench_make_op(state, state->pinned);
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

static int sweep(const bench_env *env, const char *name, bool upload)
{
    sweep_size *sizes = calloc(SWEEP_SIZES, sizeof *sizes);
    bool registered = bench_has_host_register(env);
    unsigned series_count = registered ? SERIES_COUNT : CURD_REGISTERED;
    bench_scenario *scenario = malloc(sizeof *scenario);
    unsigned size_index, series;
    int result = -1;

    if (sizes == NULL || scenario == NULL) {
        bench_fail("out of host memory for %s", name);
        goto done;
    }
    bench_scenario_init(scenario, env, name, env->samples_large,
                        "%s of 4 KiB to 256 MiB: raw pageable, raw pinned, "
                        "curd pageable, curd registered",
                        upload ? "uploads" : "downloads");
    for (size_index = 0; size_index < SWEEP_SIZES; size_index++) {
        sweep_size *size = &sizes[size_index];
        size_t byte_len = sweep_bytes[size_index];
        if (sweep_size_init(size, env, byte_len, upload, registered) != 0)
            goto done;
        for (series = 0; series < series_count; series++) {
            if (sweep_size_check(size, upload, series) != 0)
                goto done;
            char *label = sweep_labels[upload][size_index][series];
            snprintf(label, sizeof sweep_labels[0][0][0],
                     "%s, %zu %s", series_names[series],
                     byte_len >= BENCH_MIB ? byte_len / BENCH_MIB
                                           : byte_len / BENCH_KIB,
                     byte_len >= BENCH_MIB ? "MiB" : "KiB");
            if (bench_add_variant(scenario, &(bench_variant_spec){
                    .label = label,
                    .series = series_names[series],
                    .role = series < CURD_PAGEABLE ? BENCH_ROLE_RAW
                                                   : BENCH_ROLE_CURD,
                    .op = series_op(series, upload),
                    .context = &size->ops[series],
                    .bytes_per_op = byte_len}) < 0)
                goto done;
        }
    }
    if (bench_measure(scenario) != 0)
        goto done;
    bench_note(scenario, "raw pinned: one cuStreamSynchronize per copy; "
                         "GB/s = 1e9 bytes/s; make bench-plot draws it");
    bench_report_scenario(scenario);
    if (!registered)
        bench_report_skip(name, "curd registered: no cuMemHostRegister in "
                                "this driver");
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
