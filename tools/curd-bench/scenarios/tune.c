/* tune.c - libcurd's transfer tunables side by side, to choose their
 * defaults (run on request: --scenario tune).
 *
 * libcurd reads its tuning variables (man curd, ENVIRONMENT) when a device
 * opens; each variant here is one more curd_device of the same ordinal,
 * opened under its settings (harness/tuned.c), with a buffer of its own.
 * The run's own environment applies to every variant but where a
 * variant's setting overrides it, so a further dimension can be swept by
 * running the group again under other values.
 *
 * tune/pageable-upload    256 MiB from malloc memory: copy threads,
 *                         chunk sizes, staging slots, piece sizes, polling
 *                         threads, streaming stores; against the raw
 *                         driver from cuMemHostAlloc memory (the bus).
 * tune/pageable-download  the same, into malloc memory.
 * tune/small-download     256 KiB into malloc memory: smaller chunks (the
 *                         copy-out overlaps the DMAs), the copy threads
 *                         from smaller jobs; against one pinned copy.
 * tune/gather-reads       2 to 256 scattered pieces of 4 KiB, 64 KiB and
 *                         1 MiB, one DMA per piece against the kernels:
 *                         where the gather's crossover lies.
 * tune/gather-writes      the same, uploads.
 * With --quick the sizes shrink (a smoke test of the paths, not a
 * measurement). */
#include "harness/report.h"
#include "harness/tuned.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUNE_MAX_SETTINGS 6

typedef struct tune_setting {
    const char *label;
    const char *settings[TUNE_MAX_SETTINGS]; /* NULL ended */
} tune_setting;

/* ------------------------------------------------------------------------
 * Whole-buffer transfers under each setting
 * ---------------------------------------------------------------------- */

static const tune_setting large_settings[] = {
    {"as the run's environment sets", {NULL}},
    {"CURD_COPY_THREADS=4", {"CURD_COPY_THREADS=4", NULL}},
    {"CURD_COPY_THREADS=8", {"CURD_COPY_THREADS=8", NULL}},
    {"CURD_COPY_THREADS=12", {"CURD_COPY_THREADS=12", NULL}},
    {"CURD_COPY_THREADS=15", {"CURD_COPY_THREADS=15", NULL}},
    {"chunks of 2 MiB",
     {"CURD_CHUNK_MIN_BYTES=2m", "CURD_CHUNK_MAX_BYTES=2m", NULL}},
    {"chunks of 4 MiB",
     {"CURD_CHUNK_MIN_BYTES=4m", "CURD_CHUNK_MAX_BYTES=4m", NULL}},
    {"chunks of 16 MiB",
     {"CURD_CHUNK_MIN_BYTES=16m", "CURD_CHUNK_MAX_BYTES=16m", NULL}},
    {"chunks of 32 MiB",
     {"CURD_CHUNK_MIN_BYTES=32m", "CURD_CHUNK_MAX_BYTES=32m", NULL}},
    {"CURD_STAGING_SLOTS=2", {"CURD_STAGING_SLOTS=2", NULL}},
    {"CURD_STAGING_SLOTS=4", {"CURD_STAGING_SLOTS=4", NULL}},
    {"CURD_STAGING_SLOTS=6", {"CURD_STAGING_SLOTS=6", NULL}},
    {"CURD_COPY_PIECE_BYTES=64k", {"CURD_COPY_PIECE_BYTES=64k", NULL}},
    {"CURD_COPY_PIECE_BYTES=1m", {"CURD_COPY_PIECE_BYTES=1m", NULL}},
    {"CURD_COPY_SPIN_US=200", {"CURD_COPY_SPIN_US=200", NULL}},
    {"streaming stores on", {"CURD_STREAMING_UPLOAD_MIN=0",
                             "CURD_STREAMING_DOWNLOAD_MIN=0", NULL}},
    {"streaming stores off", {"CURD_STREAMING_UPLOAD_MIN=off",
                              "CURD_STREAMING_DOWNLOAD_MIN=off", NULL}},
    {"12 threads polling, chunks of 4 MiB, 6 slots",
     {"CURD_COPY_THREADS=12", "CURD_COPY_SPIN_US=200",
      "CURD_CHUNK_MIN_BYTES=4m", "CURD_CHUNK_MAX_BYTES=4m",
      "CURD_STAGING_SLOTS=6", NULL}},
};

static const tune_setting small_settings[] = {
    {"as the run's environment sets", {NULL}},
    {"chunks from 32 KiB", {"CURD_CHUNK_MIN_BYTES=32k", NULL}},
    {"chunks from 64 KiB", {"CURD_CHUNK_MIN_BYTES=64k", NULL}},
    {"chunks from 128 KiB", {"CURD_CHUNK_MIN_BYTES=128k", NULL}},
    {"chunks from 64 KiB, 6 slots",
     {"CURD_CHUNK_MIN_BYTES=64k", "CURD_STAGING_SLOTS=6", NULL}},
    {"threads from 64 KiB in 16 KiB pieces",
     {"CURD_COPY_PARALLEL_MIN=64k", "CURD_COPY_PIECE_BYTES=16k", NULL}},
    {"threads from 64 KiB in 16 KiB pieces, polling",
     {"CURD_COPY_PARALLEL_MIN=64k", "CURD_COPY_PIECE_BYTES=16k",
      "CURD_COPY_SPIN_US=200", NULL}},
    {"chunks from 64 KiB, threads from 32 KiB in 8 KiB pieces, polling",
     {"CURD_CHUNK_MIN_BYTES=64k", "CURD_COPY_PARALLEL_MIN=32k",
      "CURD_COPY_PIECE_BYTES=8k", "CURD_COPY_SPIN_US=200", NULL}},
    {"streaming stores on", {"CURD_STREAMING_DOWNLOAD_MIN=0", NULL}},
};

/* One variant: a device opened under its setting, a buffer on it. */
typedef struct tuned_variant {
    bench_tuned device;
    curd_buffer buffer;
    bench_copy_op op;
} tuned_variant;

static void tuned_variants_free(tuned_variant *variants, size_t count)
{
    for (size_t i = 0; variants != NULL && i < count; i++) {
        if (variants[i].buffer.id != 0)
            curd_buffer_free(variants[i].device.env.device, variants[i].buffer);
        bench_tuned_close(&variants[i].device);
    }
    free(variants);
}

/* Opens the variant's device, gives it a buffer of state's size holding
 * the reference bytes (for a download) and checks its transfer. */
static int tuned_variant_init(tuned_variant *variant,
                              const bench_transfer_state *state,
                              const tune_setting *setting, bool upload)
{
    const bench_env *env = state->env;
    bench_transfer_state view = *state;
    uint64_t device_ptr = 0;
    char what[160];
    if (bench_tuned_open(&variant->device, env, setting->settings) != 0)
        return -1;
    BENCH_CURD(curd_buffer_alloc(variant->device.env.device, state->byte_len,
                                 &variant->buffer));
    BENCH_CURD(curd_buffer_device_ptr(variant->device.env.device,
                                      variant->buffer, &device_ptr));
    variant->op = bench_make_op(state, state->host);
    variant->op.env = &variant->device.env;
    variant->op.buffer = variant->buffer;
    variant->op.device_ptr = (bench_cu_deviceptr)device_ptr;
    /* The checks address this variant's buffer. */
    view.buffer = variant->buffer;
    view.device_ptr = variant->op.device_ptr;
    snprintf(what, sizeof what, "curd %s under %s",
             upload ? "upload" : "download", setting->label);
    if (upload)
        return bench_check_upload(&view, bench_op_curd_upload, &variant->op,
                                  what);
    if (bench_raw_copy_in(env, view.device_ptr, state->reference,
                          state->byte_len) != 0)
        return -1;
    return bench_check_download(&view, bench_op_curd_download, &variant->op,
                                state->host, what);
}

static int tuned_run(const bench_env *env, const char *name, bool upload,
                     size_t byte_len, const tune_setting *settings,
                     size_t setting_count, double limit, const char *target)
{
    bench_transfer_state state;
    bench_scenario *scenario = malloc(sizeof *scenario);
    tuned_variant *variants = calloc(setting_count, sizeof *variants);
    char label[128];
    bench_copy_op raw;
    int raw_index, index[BENCH_MAX_VARIANTS];
    int result = -1;

    memset(&state, 0, sizeof state);
    if (scenario == NULL || variants == NULL) {
        bench_fail("out of host memory for %s", name);
        goto done;
    }
    if (bench_transfer_init(&state, env, byte_len, upload ? 0xa00au : 0xb00bu)
            != 0 ||
        bench_transfer_add_host(&state, false) != 0 ||
        bench_transfer_add_pinned(&state, &state.pinned, byte_len) != 0)
        goto done;
    memcpy(state.pinned, state.reference, byte_len);
    if (!upload && bench_raw_copy_in(env, state.device_ptr, state.reference,
                                     byte_len) != 0)
        goto done;
    raw = bench_make_op(&state, state.pinned);
    if ((upload ? bench_check_upload(&state, bench_op_raw_htod_async, &raw,
                                     "raw pinned upload")
                : bench_check_download(&state, bench_op_raw_dtoh_async, &raw,
                                       state.pinned, "raw pinned download")) !=
        0)
        goto done;
    for (size_t i = 0; i < setting_count; i++)
        if (tuned_variant_init(&variants[i], &state, &settings[i], upload) != 0)
            goto done;

    bench_scenario_init(scenario, env, name,
                        byte_len >= 64 * BENCH_MIB ? env->samples_large
                                                   : env->samples,
                        "%zu %s %s malloc memory under libcurd's tuning "
                        "variables", byte_len >= BENCH_MIB ? byte_len / BENCH_MIB
                                                          : byte_len / BENCH_KIB,
                        byte_len >= BENCH_MIB ? "MiB" : "KiB",
                        upload ? "uploads from" : "downloads into");
    for (size_t i = 0; i < setting_count; i++) {
        snprintf(label, sizeof label, "curd_buffer_%s, %s",
                 upload ? "upload" : "download", settings[i].label);
        index[i] = bench_add_variant(scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_CURD,
            .op = upload ? bench_op_curd_upload : bench_op_curd_download,
            .context = &variants[i].op, .bytes_per_op = byte_len});
        if (index[i] < 0)
            goto done;
    }
    raw_index = bench_add_variant(scenario, &(bench_variant_spec){
        .label = upload ? "cuMemcpyHtoDAsync, cuMemHostAlloc memory"
                        : "cuMemcpyDtoHAsync, cuMemHostAlloc memory",
        .role = BENCH_ROLE_RAW,
        .op = upload ? bench_op_raw_htod_async : bench_op_raw_dtoh_async,
        .context = &raw, .bytes_per_op = byte_len});
    if (raw_index < 0 || bench_measure(scenario) != 0)
        goto done;
    for (size_t i = 0; i < setting_count; i++)
        bench_check_ratio(scenario, index[i], raw_index, limit, target);
    bench_note(scenario, "each variant is a device of its own opened under "
                         "its setting; the run's environment applies too");
    bench_report_scenario(scenario);
    result = 0;

done:
    tuned_variants_free(variants, setting_count);
    bench_transfer_free(&state);
    free(scenario);
    return result;
}

int bench_tune_pageable_upload(const bench_env *env)
{
    return tuned_run(env, "tune/pageable-upload", true,
                     env->quick ? 8 * BENCH_MIB : 256 * BENCH_MIB,
                     large_settings,
                     sizeof large_settings / sizeof large_settings[0],
                     1.0 / 0.9, ">= 90% of pinned bandwidth");
}

int bench_tune_pageable_download(const bench_env *env)
{
    return tuned_run(env, "tune/pageable-download", false,
                     env->quick ? 8 * BENCH_MIB : 256 * BENCH_MIB,
                     large_settings,
                     sizeof large_settings / sizeof large_settings[0],
                     1.0 / 0.9, ">= 90% of pinned bandwidth");
}

int bench_tune_small_download(const bench_env *env)
{
    return tuned_run(env, "tune/small-download", false, 256 * BENCH_KIB,
                     small_settings,
                     sizeof small_settings / sizeof small_settings[0], 1.5,
                     "within 1.5x of one pinned copy");
}

/* ------------------------------------------------------------------------
 * The gather crossover
 * ---------------------------------------------------------------------- */

#define CROSSOVER_COUNTS 6
#define CROSSOVER_SIZES 3
#define CROSSOVER_MAX_COUNT 256
static const size_t crossover_counts[CROSSOVER_COUNTS] = {2, 4, 8, 16, 64, 256};
static const size_t crossover_sizes[CROSSOVER_SIZES] = {
    4 * BENCH_KIB, 64 * BENCH_KIB, BENCH_MIB};

enum { PATH_DMA, PATH_GATHER, PATHS };

/* One piece size: on each path's device a buffer of 256 pieces, 2 piece
 * sizes apart; the host side of the batches; their reference bytes. */
typedef struct crossover_size {
    size_t piece_bytes;
    curd_buffer buffers[PATHS];
    bench_cu_deviceptr device_ptrs[PATHS];
    unsigned char *host;     /* 256 pieces back to back */
    unsigned char *pieces;   /* what a read gives, a write sends */
    unsigned char *expected; /* a buffer after a write: pieces and poison */
    unsigned char *scratch;
    curd_download *downs[PATHS][CROSSOVER_COUNTS];
    curd_upload *ups[PATHS][CROSSOVER_COUNTS];
    bench_copy_op ops[PATHS][CROSSOVER_COUNTS];
} crossover_size;

typedef struct crossover {
    const bench_env *env;
    bench_tuned devices[PATHS];
    crossover_size sizes[CROSSOVER_SIZES];
    unsigned size_count;
} crossover;

static void crossover_free(crossover *c)
{
    for (unsigned s = 0; s < CROSSOVER_SIZES; s++) {
        crossover_size *size = &c->sizes[s];
        for (unsigned path = 0; path < PATHS; path++) {
            if (size->buffers[path].id != 0)
                curd_buffer_free(c->devices[path].env.device,
                                 size->buffers[path]);
            for (unsigned k = 0; k < CROSSOVER_COUNTS; k++) {
                free(size->downs[path][k]);
                free(size->ups[path][k]);
            }
        }
        free(size->host);
        free(size->pieces);
        free(size->expected);
        free(size->scratch);
    }
    for (unsigned path = 0; path < PATHS; path++)
        bench_tuned_close(&c->devices[path]);
}

static int crossover_size_init(crossover *c, crossover_size *size,
                               size_t piece_bytes, uint64_t *seed)
{
    size_t stride = 2 * piece_bytes;
    size_t span = CROSSOVER_MAX_COUNT * stride;
    size_t total = CROSSOVER_MAX_COUNT * piece_bytes;
    unsigned char *source = bench_host_alloc(span, "the source bytes");
    int result = -1;
    size->piece_bytes = piece_bytes;
    size->host = bench_host_alloc(total, "the caller's memory");
    size->pieces = bench_host_alloc(total, "the pieces");
    size->expected = bench_host_alloc(span, "the expected bytes");
    size->scratch = bench_host_alloc(span, "the read-back buffer");
    if (source == NULL || size->host == NULL || size->pieces == NULL ||
        size->expected == NULL || size->scratch == NULL)
        goto done;
    bench_fill_random(seed, source, span);
    bench_poison(size->expected, span);
    for (size_t i = 0; i < CROSSOVER_MAX_COUNT; i++) {
        memcpy(size->pieces + i * piece_bytes, source + i * stride, piece_bytes);
        memcpy(size->expected + i * stride, source + i * stride, piece_bytes);
    }
    memcpy(size->host, size->pieces, total);
    for (unsigned path = 0; path < PATHS; path++) {
        const bench_env *env = &c->devices[path].env;
        uint64_t device_ptr = 0;
        curd_status status =
            curd_buffer_alloc(env->device, span, &size->buffers[path]);
        if (status == CURD_OK)
            status = curd_buffer_device_ptr(env->device, size->buffers[path],
                                            &device_ptr);
        if (status != CURD_OK) {
            bench_fail_curd("curd_buffer_alloc (crossover)", status);
            goto done;
        }
        size->device_ptrs[path] = (bench_cu_deviceptr)device_ptr;
        if (bench_raw_copy_in(env, size->device_ptrs[path], source, span) != 0)
            goto done;
        for (unsigned k = 0; k < CROSSOVER_COUNTS; k++) {
            size_t count = crossover_counts[k];
            bench_copy_op *op = &size->ops[path][k];
            size->downs[path][k] = calloc(count, sizeof(curd_download));
            size->ups[path][k] = calloc(count, sizeof(curd_upload));
            if (size->downs[path][k] == NULL || size->ups[path][k] == NULL) {
                bench_fail("out of host memory for a crossover batch");
                goto done;
            }
            for (size_t i = 0; i < count; i++) {
                size->downs[path][k][i] = (curd_download){
                    size->buffers[path], i * stride, piece_bytes,
                    size->host + i * piece_bytes, piece_bytes};
                size->ups[path][k][i] = (curd_upload){
                    size->buffers[path], i * stride,
                    size->host + i * piece_bytes, piece_bytes};
            }
            memset(op, 0, sizeof *op);
            op->env = env;
            op->host = size->host;
            op->items = size->downs[path][k];
            op->upload_items = size->ups[path][k];
            op->item_count = count;
        }
    }
    result = 0;
done:
    free(source);
    return result;
}

/* Every batch of the size moves the right bytes, and nothing else. */
static int crossover_size_check(crossover *c, crossover_size *size,
                                bool upload)
{
    static const char *const path_names[PATHS] = {"one DMA per piece",
                                                  "gathered"};
    char what[128];
    for (unsigned path = 0; path < PATHS; path++)
        for (unsigned k = 0; k < CROSSOVER_COUNTS; k++) {
            size_t count = crossover_counts[k];
            bench_copy_op *op = &size->ops[path][k];
            int checked;
            snprintf(what, sizeof what, "%zu scattered %zu-byte %s, %s", count,
                     size->piece_bytes, upload ? "writes" : "reads",
                     path_names[path]);
            if (upload)
                /* The pieces land 2 piece sizes apart; the gaps keep the
                 * poison. */
                checked = bench_check_write_to(
                    &c->devices[path].env, bench_op_curd_upload_batch, op,
                    size->device_ptrs[path], size->scratch, size->expected,
                    count * 2 * size->piece_bytes - size->piece_bytes, what);
            else
                checked = bench_check_read_into(
                    bench_op_curd_download_batch, op, size->host, size->pieces,
                    count * size->piece_bytes, what);
            if (checked != 0)
                return -1;
        }
    /* Reads poisoned the host memory past the pieces; writes send it. */
    memcpy(size->host, size->pieces, CROSSOVER_MAX_COUNT * size->piece_bytes);
    return 0;
}

static int crossover_run(const bench_env *env, const char *name, bool upload)
{
    static const char *const dma_path[] = {"CURD_TRANSFER_PATH=dma", NULL};
    static const char *const gather_path[] = {"CURD_TRANSFER_PATH=gather",
                                              NULL};
    char label[96];
    crossover *c = calloc(1, sizeof *c);
    bench_scenario *scenario = malloc(sizeof *scenario);
    uint64_t seed = env->seed ^ (upload ? 0xc00cu : 0xd00du);
    int index[CROSSOVER_SIZES][CROSSOVER_COUNTS][PATHS];
    int result = -1;

    if (c == NULL || scenario == NULL) {
        bench_fail("out of host memory for %s", name);
        goto done;
    }
    c->env = env;
    /* --quick leaves out the 1 MiB pieces (512 MiB of buffers a path). */
    c->size_count = env->quick ? CROSSOVER_SIZES - 1 : CROSSOVER_SIZES;
    if (bench_tuned_open(&c->devices[PATH_DMA], env, dma_path) != 0 ||
        bench_tuned_open(&c->devices[PATH_GATHER], env, gather_path) != 0)
        goto done;
    for (unsigned s = 0; s < c->size_count; s++)
        if (crossover_size_init(c, &c->sizes[s], crossover_sizes[s], &seed) !=
                0 ||
            crossover_size_check(c, &c->sizes[s], upload) != 0)
            goto done;

    bench_scenario_init(scenario, env, name, env->samples,
                        "2 to 256 scattered %s of 4 KiB to %s, one batch: "
                        "one DMA per piece against the gather kernels",
                        upload ? "writes" : "reads",
                        env->quick ? "64 KiB" : "1 MiB");
    for (unsigned s = 0; s < c->size_count; s++)
        for (unsigned k = 0; k < CROSSOVER_COUNTS; k++)
            for (unsigned path = 0; path < PATHS; path++) {
                size_t piece = crossover_sizes[s];
                snprintf(label, sizeof label,
                         "%zu x %zu %s, %s", crossover_counts[k],
                         piece >= BENCH_MIB ? piece / BENCH_MIB
                                            : piece / BENCH_KIB,
                         piece >= BENCH_MIB ? "MiB" : "KiB",
                         path == PATH_DMA ? "DMA per piece" : "gathered");
                index[s][k][path] = bench_add_variant(
                    scenario, &(bench_variant_spec){
                        .label = label,
                        .role = BENCH_ROLE_CURD,
                        .op = upload ? bench_op_curd_upload_batch
                                     : bench_op_curd_download_batch,
                        .context = &c->sizes[s].ops[path][k],
                        .bytes_per_op = crossover_counts[k] * piece});
                if (index[s][k][path] < 0)
                    goto done;
            }
    if (bench_measure(scenario) != 0)
        goto done;
    for (unsigned s = 0; s < c->size_count; s++)
        for (unsigned k = 0; k < CROSSOVER_COUNTS; k++)
            bench_check_ratio(scenario, index[s][k][PATH_GATHER],
                              index[s][k][PATH_DMA], 0.0, NULL);
    bench_note(scenario, "ratios: gathered over one DMA per piece (devices "
                         "opened with CURD_TRANSFER_PATH=gather and =dma); "
                         "below 1, gathering wins");
    bench_note(scenario, "the crossover sets CURD_GATHER_MIN_SPANS and "
                         "CURD_GATHER_MAX_SPAN_BYTES (lib/transfer/tuning.h)");
    bench_report_scenario(scenario);
    if (env->quick)
        bench_report_skip(name, "1 MiB pieces: left out with --quick");
    result = 0;

done:
    if (c != NULL)
        crossover_free(c);
    free(c);
    free(scenario);
    return result;
}

int bench_tune_gather_reads(const bench_env *env)
{
    return crossover_run(env, "tune/gather-reads", false);
}

int bench_tune_gather_writes(const bench_env *env)
{
    return crossover_run(env, "tune/gather-writes", true);
}
