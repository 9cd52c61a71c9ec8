/* scattered.c - 64 scattered 4 KiB pieces (one in each 8 KiB of
 * one resident buffer) read into, or written from, one contiguous 256 KiB
 * of host memory in one batch.
 *
 * transfer/scattered-reads   the pieces at one stride (every other 4 KiB):
 *                            curd_download_batch as the planner moves them
 *                            (rows: one strided DMA), and on a device
 *                            opened with CURD_TRANSFER_PATH=gather (the
 *                            kernels); against one contiguous 256 KiB read
 *                            of the same bytes into the same kind of memory
 *                            (curd, and the raw driver into pinned and
 *                            malloc memory, and into malloc memory staged by
 *                            hand: one DMA into pinned memory, then memcpy)
 *                            and 64 raw cuMemcpyDtoHAsync. Into malloc and
 *                            into registered memory.
 * transfer/scattered-writes  the same with curd_upload_batch and raw
 *                            cuMemcpyHtoD*.
 * transfer/scattered-reads-irregular, transfer/scattered-writes-irregular
 *                            each piece at a random point of its 8 KiB, so
 *                            no two join into rows: the planner gathers
 *                            them with the kernels; the other device is
 *                            opened with CURD_TRANSFER_PATH=dma (a DMA per
 *                            piece); against the same kernels launched by
 *                            hand with the raw driver, staged through
 *                            page-locked memory by memcpy (raw/gather.h),
 *                            the floor of the path curd takes.
 *
 * transfer/scattered-*-cold  each of the four with the caller's malloc
 *                            memory out of the caches (issue 38): the
 *                            first 256 KiB of a 256 MiB malloc region that
 *                            a pageable curd_buffer_download of 256 MiB
 *                            fills again, untimed, before every timed
 *                            operation (one per sample), as a real
 *                            program's memory often is; every variant,
 *                            raw ones included, starts from that state.
 *                            With CURD_BENCH_STAGES=1 the stages are timed
 *                            one by one too (scenarios/scattered-stages.h).
 *
 * Targets (issue 11): the batch within 1.2x of one contiguous copy into
 * the same kind of memory, and at least 2x faster than PyTorch doing the
 * same (reads: a gather kernel and one copy, 53.7 us; writes: one copy
 * and index_copy_, 49.8 us; on the H100 of doc/PERFORMANCE.md,
 * bench/peers/measure.py); a read of 256 KiB into malloc memory within
 * 1.5x of one pinned copy. Issue 38: at least 1.5x faster than PyTorch's
 * gather + copy, cold and warm, reads and writes, strided and irregular;
 * PyTorch's figure comes from bench/peers/measure.py's CSV when the run
 * is given it (CURD_BENCH_PEERS_CSV, harness/peers.h), else from the
 * figures below, and is printed as the scenario's reference line. */
#include "harness/peers.h"
#include "harness/report.h"
#include "harness/tuned.h"
#include "raw/gather.h"
#include "scenarios/scattered-stages.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIECES 64
#define PIECE_BYTES (4 * BENCH_KIB)
#define STRIDE_BYTES (8 * BENCH_KIB)
#define SOURCE_BYTES (PIECES * STRIDE_BYTES)
#define TOTAL_BYTES (PIECES * PIECE_BYTES)
/* Half of PyTorch's 64 strided 4 KiB reads and writes,
 * doc/PERFORMANCE.md. */
#define PYTORCH_READS_HALF_NS 26850.0
#define PYTORCH_WRITES_HALF_NS 24900.0
/* The cold scenarios' region, which a pageable download fills again
 * before each timed operation; smaller with --quick, where the refills
 * would take most of a run on the stand-in driver (make bench-smoke). */
#define REGION_BYTES (256 * BENCH_MIB)
#define QUICK_REGION_BYTES (16 * BENCH_MIB)
/* PyTorch's index_select + one copy of the 64 strided reads into the
 * first 256 KiB of a 256 MiB pageable region a pageable download had just
 * filled, best of 9, on the H200 (issue 38; 71.8 us on a second start of
 * the same kind). The other cold cases have no figure of their own until
 * bench/peers/measure.py measures them (CURD_BENCH_PEERS_CSV). */
#define PYTORCH_COLD_READS_NS 55400.0
#define PYTORCH_SPEEDUP 1.5

enum memory_kind { MALLOC_MEMORY, REGISTERED_MEMORY, KINDS };

/* One device's share: the scattered buffer, registered host memory of its
 * own (a range is registered once per process), the batches. */
typedef struct device_side {
    const bench_env *env;
    curd_buffer buffer;
    bench_cu_deviceptr device_ptr;
    unsigned char *registered;
    bool registered_done;
    curd_download downs[KINDS][PIECES];
    curd_upload ups[KINDS][PIECES];
    bench_copy_op ops[KINDS];
} device_side;

enum stage_kind { STAGE_COPY, STAGE_STREAMING, STAGE_TOUCH, STAGES };

/* The cold scenarios' candidate settings (with the stages,
 * CURD_BENCH_STAGES): the changes that would take the host copy of a
 * cold 256 KiB off the critical path (the copy team, chunks pipelining
 * the DMA with the copy, streaming stores, the destination's lines read
 * in under the DMA), each on a device of its own,
 * so that one run compares them with the defaults. */
enum { TUNINGS = 6 };
typedef struct tuning {
    const char *label;
    const char *const settings[4];
} tuning;
static const tuning read_tunings[TUNINGS] = {
    {"copy team from 64 KiB", {"CURD_COPY_PARALLEL_MIN=65536", NULL}},
    {"copy team from 64 KiB, polling 200 us",
     {"CURD_COPY_PARALLEL_MIN=65536", "CURD_COPY_SPIN_US=200", NULL}},
    {"64 KiB chunks (DMA under the copy-out)",
     {"CURD_CHUNK_MIN_BYTES=65536", NULL}},
    {"streaming stores from 64 KiB",
     {"CURD_STREAMING_DOWNLOAD_MIN=65536", NULL}},
    /* The default reads the copy-out's lines in while the DMA runs
     * (1.09x to 1.17x faster cold on the H200 on 2026-11-29, and keeps
     * the bytes in the cache for the caller, as memcpy does); this is
     * the copy-out without it. */
    {"destination not touched under the DMA",
     {"CURD_TOUCH_DOWNLOAD_MAX=0", NULL}},
    /* The refill cycled the landing area through the copy team's
     * caches: does the slot's DMA wait on their snoops? */
    {"no landing area (pinned pool slots)", {"CURD_LANDING_BYTES=0", NULL}},
};
static const tuning write_tunings[TUNINGS] = {
    {"copy team from 64 KiB", {"CURD_COPY_PARALLEL_MIN=65536", NULL}},
    {"copy team from 64 KiB, polling 200 us",
     {"CURD_COPY_PARALLEL_MIN=65536", "CURD_COPY_SPIN_US=200", NULL}},
    {"64 KiB chunks (copy-in under the DMA)",
     {"CURD_CHUNK_MIN_BYTES=65536", NULL}},
    {"no streaming stores", {"CURD_STREAMING_UPLOAD_MIN=off", NULL}},
    {"copy team from 64 KiB + 64 KiB chunks",
     {"CURD_COPY_PARALLEL_MIN=65536", "CURD_CHUNK_MIN_BYTES=65536", NULL}},
    {"copy team from 64 KiB polling + 64 KiB chunks",
     {"CURD_COPY_PARALLEL_MIN=65536", "CURD_COPY_SPIN_US=200",
      "CURD_CHUNK_MIN_BYTES=65536", NULL}},
};

typedef struct scattered {
    const bench_env *env;
    bool upload;
    bool irregular;
    /* host is the start of region, which refill fills again from filler
     * (a resident buffer of region_bytes whose first TOTAL_BYTES are the
     * pieces, so that a write finds them there). */
    bool cold;
    size_t region_bytes;
    unsigned char *region;
    curd_buffer filler;
    bench_stage_op stage;
    size_t offsets[PIECES]; /* each piece's place in the buffer */
    bool with_registered;
    bench_tuned other_device; /* opened for sides[1] */
    /* 0: the planner's choice; 1: the other path (the kernels for pieces
     * at one stride, a DMA per piece for irregular ones). */
    device_side sides[2];
    /* Cold, with the stages: the planner under each candidate setting. */
    bench_tuned tuned_devices[TUNINGS];
    device_side tuned_sides[TUNINGS];
    /* On the main device: TOTAL_BYTES in one buffer, for the one copy. */
    curd_buffer contiguous;
    bench_cu_deviceptr contiguous_ptr;
    bench_cu_stream stream;
    bool have_stream;
    unsigned char *source;   /* the buffers' bytes (reads) */
    unsigned char *pieces;   /* the pieces of source, back to back */
    unsigned char *host;     /* malloc memory of TOTAL_BYTES */
    unsigned char *scratch;  /* SOURCE_BYTES for checks */
    unsigned char *expected; /* SOURCE_BYTES: what a write leaves */
    void *pinned;            /* TOTAL_BYTES of cuMemHostAlloc memory */
    bench_copy_op contiguous_ops[KINDS];
    bench_copy_op raw_pieces;
    bench_copy_op raw_pinned;
    bench_copy_op raw_pageable;
    bench_copy_op raw_staged;
    /* Irregular: the transfer kernels launched by hand, malloc memory. */
    bench_raw_gather *raw_kernels;
} scattered;

static void side_free(device_side *side)
{
    if (side->env == NULL)
        return;
    if (side->registered_done)
        curd_host_unregister(side->env->device, side->registered);
    if (side->buffer.id != 0)
        curd_buffer_free(side->env->device, side->buffer);
    free(side->registered);
}

static void scattered_free(scattered *s)
{
    const bench_env *env = s->env;
    side_free(&s->sides[0]);
    side_free(&s->sides[1]);
    bench_tuned_close(&s->other_device);
    for (unsigned i = 0; i < TUNINGS; i++) {
        side_free(&s->tuned_sides[i]);
        bench_tuned_close(&s->tuned_devices[i]);
    }
    if (s->contiguous.id != 0)
        curd_buffer_free(env->device, s->contiguous);
    if (s->pinned != NULL && bench_raw_enter(env) == 0) {
        env->cu->cuMemFreeHost(s->pinned);
        bench_raw_leave(env);
    }
    bench_raw_gather_destroy(s->raw_kernels);
    if (s->have_stream)
        bench_stream_release(env, s->stream);
    if (s->filler.id != 0)
        curd_buffer_free(env->device, s->filler);
    free(s->source);
    free(s->pieces);
    free(s->region != NULL ? s->region : s->host);
    free(s->scratch);
    free(s->expected);
}

/* registered: the side's own registered memory and batches into it too
 * (where the device can register memory), else batches into malloc
 * memory only. */
static int side_init(scattered *s, device_side *side, const bench_env *env,
                     bool registered)
{
    uint64_t device_ptr = 0;
    side->env = env;
    BENCH_CURD(curd_buffer_alloc(env->device, SOURCE_BYTES, &side->buffer));
    BENCH_CURD(curd_buffer_device_ptr(env->device, side->buffer, &device_ptr));
    side->device_ptr = (bench_cu_deviceptr)device_ptr;
    if (bench_raw_copy_in(env, side->device_ptr, s->source, SOURCE_BYTES) != 0)
        return -1;
    if (registered && s->with_registered) {
        side->registered = bench_host_alloc(TOTAL_BYTES, "registered memory");
        if (side->registered == NULL)
            return -1;
        memcpy(side->registered, s->pieces, TOTAL_BYTES);
        BENCH_CURD(curd_host_register(env->device, side->registered,
                                      TOTAL_BYTES));
        side->registered_done = true;
    }
    for (unsigned kind = 0; kind < (registered ? KINDS : 1u); kind++) {
        unsigned char *host = kind == MALLOC_MEMORY ? s->host : side->registered;
        for (size_t i = 0; i < PIECES; i++) {
            side->downs[kind][i] = (curd_download){
                side->buffer, s->offsets[i], PIECE_BYTES,
                host + i * PIECE_BYTES, PIECE_BYTES};
            side->ups[kind][i] = (curd_upload){
                side->buffer, s->offsets[i], host + i * PIECE_BYTES,
                PIECE_BYTES};
        }
        memset(&side->ops[kind], 0, sizeof side->ops[kind]);
        side->ops[kind].env = env;
        side->ops[kind].items = side->downs[kind];
        side->ops[kind].upload_items = side->ups[kind];
        side->ops[kind].item_count = PIECES;
        side->ops[kind].host = host;
    }
    return 0;
}

static bench_copy_op raw_op(const scattered *s, bench_cu_deviceptr device_ptr,
                            void *host, size_t byte_len)
{
    bench_copy_op op;
    memset(&op, 0, sizeof op);
    op.env = s->env;
    op.device_ptr = device_ptr;
    op.stream = s->stream;
    op.host = host;
    op.byte_len = byte_len;
    return op;
}

/* Puts the cold region out of the caches (bench_variant_spec.prepare):
 * a pageable download of region_bytes into it, which libcurd copies out
 * with streaming stores, as a program's download of its data would. */
static int refill(void *context, uint64_t iterations)
{
    scattered *s = context;
    (void)iterations;
    BENCH_CURD(curd_buffer_download(s->env->device, s->filler, s->region,
                                    s->region_bytes));
    return 0;
}

/* The copy-out stage's start (reads): the region refilled, then the
 * pinned area written by a DMA, as curd's staging slot is before its copy
 * out. */
static int refill_and_land(void *context, uint64_t iterations)
{
    scattered *s = context;
    if (refill(context, iterations) != 0)
        return -1;
    return bench_op_raw_dtoh_async(&s->raw_pinned, 1);
}

/* The filler's bytes: the pieces first, then random ones; uploaded
 * through a bounce of TOTAL_BYTES.. */
static int cold_init(scattered *s, uint64_t *seed)
{
    const bench_env *env = s->env;
    uint64_t device_ptr = 0;
    s->region_bytes = env->quick ? QUICK_REGION_BYTES : REGION_BYTES;
    s->region = bench_host_alloc(s->region_bytes, "the cold region");
    if (s->region == NULL)
        return -1;
    s->host = s->region;
    BENCH_CURD(curd_buffer_alloc(env->device, s->region_bytes, &s->filler));
    BENCH_CURD(curd_buffer_device_ptr(env->device, s->filler, &device_ptr));
    /* The region holds the filler's bytes after each refill: fill it
     * once here and upload it whole. */
    memcpy(s->region, s->pieces, TOTAL_BYTES);
    bench_fill_random(seed, s->region + TOTAL_BYTES,
                      s->region_bytes - TOTAL_BYTES);
    BENCH_CURD(curd_buffer_upload(env->device, s->filler, s->region,
                                  s->region_bytes));
    return 0;
}

static int scattered_init(scattered *s, const bench_env *env, bool upload,
                          bool irregular, bool cold)
{
    static const char *const dma_path[] = {"CURD_TRANSFER_PATH=dma", NULL};
    static const char *const gather_path[] = {"CURD_TRANSFER_PATH=gather",
                                              NULL};
    uint64_t seed = env->seed ^ (upload ? 0x9119u : 0x8118u);
    uint64_t device_ptr = 0;
    memset(s, 0, sizeof *s);
    s->env = env;
    s->upload = upload;
    s->irregular = irregular;
    s->cold = cold;
    for (size_t i = 0; i < PIECES; i++) {
        /* Irregular: a random 64-byte step into the slot's free half. */
        uint64_t step = 0;
        if (irregular)
            bench_fill_random(&seed, (unsigned char *)&step, sizeof step);
        s->offsets[i] = i * STRIDE_BYTES
                        + (size_t)(step % ((STRIDE_BYTES - PIECE_BYTES) / 64
                                           + 1)) * 64u;
    }
    s->with_registered = bench_has_host_register(env);
    s->source = bench_host_alloc(SOURCE_BYTES, "the source bytes");
    s->pieces = bench_host_alloc(TOTAL_BYTES, "the pieces");
    if (!cold)
        s->host = bench_host_alloc(TOTAL_BYTES, "the caller's memory");
    s->scratch = bench_host_alloc(SOURCE_BYTES, "the read-back buffer");
    s->expected = bench_host_alloc(SOURCE_BYTES, "the expected bytes");
    if (s->source == NULL || s->pieces == NULL || (!cold && s->host == NULL) ||
        s->scratch == NULL || s->expected == NULL)
        return -1;
    bench_fill_random(&seed, s->source, SOURCE_BYTES);
    for (size_t i = 0; i < PIECES; i++)
        memcpy(s->pieces + i * PIECE_BYTES, s->source + s->offsets[i],
               PIECE_BYTES);
    /* Writes leave the pieces in poisoned buffers. */
    bench_poison(s->expected, SOURCE_BYTES);
    for (size_t i = 0; i < PIECES; i++)
        memcpy(s->expected + s->offsets[i], s->pieces + i * PIECE_BYTES,
               PIECE_BYTES);
    if (cold && cold_init(s, &seed) != 0)
        return -1;
    memcpy(s->host, s->pieces, TOTAL_BYTES);
    if (bench_stream_acquire(env, &s->stream) != 0)
        return -1;
    s->have_stream = true;
    if (bench_raw_enter(env) != 0)
        return -1;
    bench_cu_result cu_result = env->cu->cuMemHostAlloc(
        &s->pinned, TOTAL_BYTES, BENCH_CU_MEMHOSTALLOC_PORTABLE);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS) {
        s->pinned = NULL;
        return bench_fail_cu("cuMemHostAlloc", cu_result);
    }
    memcpy(s->pinned, s->pieces, TOTAL_BYTES);
    if (bench_tuned_open(&s->other_device, env,
                         irregular ? dma_path : gather_path) != 0)
        return -1;
    if (side_init(s, &s->sides[0], env, true) != 0 ||
        side_init(s, &s->sides[1], &s->other_device.env, true) != 0)
        return -1;
    BENCH_CURD(curd_buffer_alloc(env->device, TOTAL_BYTES, &s->contiguous));
    BENCH_CURD(curd_buffer_device_ptr(env->device, s->contiguous, &device_ptr));
    s->contiguous_ptr = (bench_cu_deviceptr)device_ptr;
    if (bench_raw_copy_in(env, s->contiguous_ptr, s->pieces, TOTAL_BYTES) != 0)
        return -1;
    for (unsigned kind = 0; kind < KINDS; kind++) {
        s->contiguous_ops[kind] = raw_op(s, s->contiguous_ptr,
                                         s->sides[0].ops[kind].host,
                                         TOTAL_BYTES);
        s->contiguous_ops[kind].buffer = s->contiguous;
    }
    s->raw_pieces = raw_op(s, s->sides[0].device_ptr, s->pinned, TOTAL_BYTES);
    s->raw_pieces.item_count = PIECES;
    s->raw_pieces.piece_bytes = PIECE_BYTES;
    s->raw_pieces.offsets = s->offsets;
    s->raw_pinned = raw_op(s, s->contiguous_ptr, s->pinned, TOTAL_BYTES);
    s->raw_pageable = raw_op(s, s->contiguous_ptr, s->host, TOTAL_BYTES);
    s->raw_staged = s->raw_pageable;
    s->raw_staged.bounce = s->pinned;
    s->stage = (bench_stage_op){s->host, s->pinned, TOTAL_BYTES, upload};
    if (irregular &&
        bench_raw_gather_create(env, s->stream, s->sides[0].device_ptr,
                                s->offsets, PIECES, PIECE_BYTES, s->host,
                                &s->raw_kernels) != 0)
        return -1;
    return 0;
}

/* A read into the op's host memory must give the pieces. */
static int check_read(scattered *s, bench_op_fn run, bench_copy_op *op,
                      const char *what)
{
    return bench_check_read_into(run, op, op->host, s->pieces, TOTAL_BYTES,
                                 what);
}

/* A write into a poisoned buffer must leave the pieces where they go and
 * the poison elsewhere. */
static int check_write(scattered *s, bench_op_fn run, void *op,
                       bench_cu_deviceptr device_ptr, bool strided,
                       const char *what)
{
    return bench_check_write_to(s->env, run, op, device_ptr, s->scratch,
                                strided ? s->expected : s->pieces,
                                strided ? SOURCE_BYTES : TOTAL_BYTES, what);
}

static int scattered_check(scattered *s)
{
    const char *const side_names[2] = {
        "planner", s->irregular ? "a DMA per piece" : "the kernels"};
    static const char *const kind_names[KINDS] = {"malloc", "registered"};
    bench_op_fn batch = s->upload ? bench_op_curd_upload_batch
                                  : bench_op_curd_download_batch;
    bench_op_fn one = s->upload ? bench_op_curd_upload : bench_op_curd_download;
    char what[128];
    for (unsigned kind = 0; kind < KINDS; kind++) {
        if (kind == REGISTERED_MEMORY && !s->with_registered)
            continue;
        for (unsigned side = 0; side < 2; side++) {
            bench_copy_op *op = &s->sides[side].ops[kind];
            snprintf(what, sizeof what, "64 scattered 4 KiB %s, %s memory, %s",
                     s->upload ? "writes" : "reads", kind_names[kind],
                     side_names[side]);
            if (s->upload ? check_write(s, batch, op, s->sides[side].device_ptr,
                                        true, what)
                          : check_read(s, batch, op, what))
                return -1;
        }
        snprintf(what, sizeof what, "one 256 KiB %s, %s memory",
                 s->upload ? "upload" : "download", kind_names[kind]);
        if (s->upload ? check_write(s, one, &s->contiguous_ops[kind],
                                    s->contiguous_ptr, false, what)
                      : check_read(s, one, &s->contiguous_ops[kind], what))
            return -1;
    }
    if (s->raw_kernels != NULL &&
        (s->upload ? check_write(s, bench_op_raw_scatter_write, s->raw_kernels,
                                 s->sides[0].device_ptr, true,
                                 "memcpy + curd_scatter by hand")
                   : bench_check_read_into(bench_op_raw_gather_read,
                                           s->raw_kernels, s->host, s->pieces,
                                           TOTAL_BYTES,
                                           "curd_gather by hand + memcpy")))
        return -1;
    if (s->upload)
        return check_write(s, bench_op_raw_htod_pieces, &s->raw_pieces,
                           s->sides[0].device_ptr, true,
                           "64 x cuMemcpyHtoDAsync 4 KiB") ||
               check_write(s, bench_op_raw_htod_async, &s->raw_pinned,
                           s->contiguous_ptr, false,
                           "cuMemcpyHtoDAsync 256 KiB") ||
               check_write(s, bench_op_raw_htod_sync, &s->raw_pageable,
                           s->contiguous_ptr, false, "cuMemcpyHtoD 256 KiB") ||
               check_write(s, bench_op_raw_htod_staged, &s->raw_staged,
                           s->contiguous_ptr, false,
                           "memcpy + cuMemcpyHtoDAsync 256 KiB");
    return check_read(s, bench_op_raw_dtoh_pieces, &s->raw_pieces,
                      "64 x cuMemcpyDtoHAsync 4 KiB") ||
           check_read(s, bench_op_raw_dtoh_async, &s->raw_pinned,
                      "cuMemcpyDtoHAsync 256 KiB") ||
           check_read(s, bench_op_raw_dtoh_sync, &s->raw_pageable,
                      "cuMemcpyDtoH 256 KiB") ||
           check_read(s, bench_op_raw_dtoh_staged, &s->raw_staged,
                      "cuMemcpyDtoHAsync + memcpy 256 KiB");
}

/* PyTorch's figure for scenario `name`: measure.py's CSV row, else
 * builtin_ns (0: none); printed as the reference line, with the target of
 * issue 38 on variant `index` (1.5x faster) where there is a figure. */
static void check_pytorch(bench_scenario *scenario, int index,
                          const char *name, bool upload, double builtin_ns,
                          const char *builtin_source)
{
    char variant[96];
    char target[64];
    double pytorch_ns = 0.0;
    const char *work = upload ? "copy + index_copy_" : "index_select + copy";
    if (bench_peer_median_ns(name, "torch", &pytorch_ns, variant,
                             sizeof variant))
        bench_note(scenario, "reference: PyTorch %s %.1f us (%s, %s)", work,
                   pytorch_ns / 1e3, BENCH_PEERS_CSV_VARIABLE, variant);
    else if (builtin_ns > 0.0) {
        pytorch_ns = builtin_ns;
        bench_note(scenario, "reference: PyTorch %s %.1f us (%s)", work,
                   pytorch_ns / 1e3, builtin_source);
    } else {
        bench_note(scenario, "reference: no PyTorch figure (run "
                             "bench/peers/measure.py, pass its CSV in %s)",
                   BENCH_PEERS_CSV_VARIABLE);
        return;
    }
    snprintf(target, sizeof target, "< %.1f us: %.1fx PyTorch's %.1f us",
             pytorch_ns / PYTORCH_SPEEDUP / 1e3, PYTORCH_SPEEDUP,
             pytorch_ns / 1e3);
    bench_check_median_ns(scenario, index, pytorch_ns / PYTORCH_SPEEDUP,
                          target);
}

/* The stage variants of a cold scenario (CURD_BENCH_STAGES): the host
 * copy with memcpy and with streaming stores, and one access per page;
 * their indexes in index[] (-1: not added). */
static int add_stages(scattered *s, bench_scenario *scenario,
                      int index[STAGES])
{
    bench_op_fn prepare = s->upload ? refill : refill_and_land;
    const struct {
        bench_op_fn op;
        const char *label;
    } stages[STAGES] = {
        {bench_stage_copy, s->upload
                               ? "stage: memcpy 256 KiB cold malloc -> pinned"
                               : "stage: memcpy 256 KiB pinned (DMA-written)"
                                 " -> cold malloc"},
        {bench_stage_copy_streaming,
         s->upload ? "stage: streaming stores 256 KiB cold malloc -> pinned"
                   : "stage: streaming stores 256 KiB pinned (DMA-written)"
                     " -> cold malloc"},
        {bench_stage_touch_pages,
         s->upload ? "stage: one read per 4 KiB page, 256 KiB cold malloc"
                   : "stage: one write per 4 KiB page, 256 KiB cold malloc"},
    };
    for (unsigned i = 0; i < STAGES; i++) {
        index[i] = -1;
        if (!bench_stages_wanted()
            || (i == STAGE_STREAMING && !bench_stage_has_streaming()))
            continue;
        index[i] = bench_add_variant(scenario, &(bench_variant_spec){
            .label = stages[i].label, .role = BENCH_ROLE_REF,
            .op = stages[i].op, .context = &s->stage,
            .bytes_per_op = TOTAL_BYTES, .iterations = 1,
            .prepare = i == STAGE_TOUCH ? refill : prepare,
            .prepare_context = s});
        if (index[i] < 0)
            return -1;
    }
    return 0;
}

/* The planner's batch into the cold region under each candidate setting
 * (CURD_BENCH_STAGES), checked first; their indexes in index[]. */
static int add_tunings(scattered *s, bench_scenario *scenario,
                       int index[TUNINGS])
{
    const tuning *tunings = s->upload ? write_tunings : read_tunings;
    for (unsigned i = 0; i < TUNINGS; i++) {
        char label[BENCH_LABEL_BYTES];
        index[i] = -1;
        if (!bench_stages_wanted())
            continue;
        device_side *side = &s->tuned_sides[i];
        if (bench_tuned_open(&s->tuned_devices[i], s->env,
                             tunings[i].settings) != 0 ||
            side_init(s, side, &s->tuned_devices[i].env, false) != 0)
            return -1;
        snprintf(label, sizeof label, "same, %s, malloc", tunings[i].label);
        if (s->upload ? check_write(s, bench_op_curd_upload_batch,
                                    &side->ops[MALLOC_MEMORY],
                                    side->device_ptr, true, label)
                      : check_read(s, bench_op_curd_download_batch,
                                   &side->ops[MALLOC_MEMORY], label))
            return -1;
        index[i] = bench_add_variant(scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_CURD,
            .op = s->upload ? bench_op_curd_upload_batch
                            : bench_op_curd_download_batch,
            .context = &side->ops[MALLOC_MEMORY],
            .bytes_per_op = TOTAL_BYTES, .iterations = 1, .prepare = refill,
            .prepare_context = s});
        if (index[i] < 0)
            return -1;
    }
    return 0;
}

/* The minor page faults of curd's batch into the cold region, over a few
 * untimed operations (each after a refill): what first touches cost it,
 * noted with the stages. */
static int note_faults(scattered *s, bench_scenario *scenario,
                       bench_op_fn batch)
{
    enum { ROUNDS = 5 };
    long faults = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        if (refill(s, 1) != 0)
            return -1;
        long before = bench_stage_minor_faults();
        if (batch(&s->sides[0].ops[MALLOC_MEMORY], 1) != 0)
            return -1;
        faults += bench_stage_minor_faults() - before;
    }
    bench_note(scenario, "stages: %.1f minor page faults per cold batch "
                         "(planner, malloc; %d untimed batches)",
               (double)faults / ROUNDS, ROUNDS);
    return 0;
}

static int scattered_run(const bench_env *env, const char *name, bool upload,
                         bool irregular, bool cold)
{
    scattered *s = calloc(1, sizeof *s);
    bench_scenario *scenario = malloc(sizeof *scenario);
    const char *verb = upload ? "writes" : "reads";
    const char *batch_call = upload ? "curd_upload_batch" : "curd_download_batch";
    /* index: [0..2] malloc memory (the planner, the other path, one
     * contiguous copy), [3..5] the same into registered memory, [6..9]
     * raw: the pieces, one pinned copy, one malloc copy, one malloc copy
     * staged by hand through pinned memory. */
    char label[96];
    const char *other_path = irregular ? "dma" : "gather";
    enum { VARIANTS = 10 };
    int index[VARIANTS] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    int stage_index[STAGES];
    int tuning_index[TUNINGS];
    int result = -1;

    if (s == NULL || scenario == NULL) {
        bench_fail("out of host memory for %s", name);
        goto done;
    }
    if (scattered_init(s, env, upload, irregular, cold) != 0
        || scattered_check(s) != 0)
        goto done;
    char coldness[64] = "";
    if (cold)
        snprintf(coldness, sizeof coldness,
                 " (cold: the start of %zu MiB a download refilled)",
                 s->region_bytes / BENCH_MIB);
    /* Cold: each sample is one operation after a 256 MiB refill, so the
     * 256 MiB scenarios' count. */
    bench_scenario_init(scenario, env, name,
                        cold ? env->samples_large : env->samples,
                        "64 scattered 4 KiB %s (one in each 8 KiB, %s) %s"
                        " one 256 KiB of host memory%s, one batch", verb,
                        irregular ? "at random points" : "at one stride",
                        upload ? "from" : "into", coldness);
    {
        bench_op_fn batch = upload ? bench_op_curd_upload_batch
                                   : bench_op_curd_download_batch;
        bench_op_fn one = upload ? bench_op_curd_upload : bench_op_curd_download;
        const char *direction = upload ? "HtoD" : "DtoH";
        /* label: what (a format of one %s, given `word`), then memory. */
        const struct {
            bench_role role;
            bench_op_fn op;
            bench_copy_op *context;
            const char *what;
            const char *word;
            const char *memory;
        } variants[VARIANTS] = {
            {BENCH_ROLE_CURD, batch, &s->sides[0].ops[MALLOC_MEMORY],
             "%s 64 x 4 KiB scattered", batch_call, "malloc"},
            {BENCH_ROLE_CURD, batch, &s->sides[1].ops[MALLOC_MEMORY],
             "same, CURD_TRANSFER_PATH=%s", other_path, "malloc"},
            {BENCH_ROLE_CURD, one, &s->contiguous_ops[MALLOC_MEMORY],
             "curd_buffer_%s 256 KiB contiguous",
             upload ? "upload" : "download", "malloc"},
            {BENCH_ROLE_CURD, batch, &s->sides[0].ops[REGISTERED_MEMORY],
             "%s 64 x 4 KiB scattered", batch_call, "registered"},
            {BENCH_ROLE_CURD, batch, &s->sides[1].ops[REGISTERED_MEMORY],
             "same, CURD_TRANSFER_PATH=%s", other_path, "registered"},
            {BENCH_ROLE_CURD, one, &s->contiguous_ops[REGISTERED_MEMORY],
             "curd_buffer_%s 256 KiB contiguous",
             upload ? "upload" : "download", "registered"},
            {BENCH_ROLE_RAW,
             upload ? bench_op_raw_htod_pieces : bench_op_raw_dtoh_pieces,
             &s->raw_pieces, "64 x cuMemcpy%sAsync 4 KiB scattered",
             direction, "pinned"},
            {BENCH_ROLE_RAW,
             upload ? bench_op_raw_htod_async : bench_op_raw_dtoh_async,
             &s->raw_pinned, "1 x cuMemcpy%sAsync 256 KiB", direction,
             "pinned"},
            {BENCH_ROLE_RAW,
             upload ? bench_op_raw_htod_sync : bench_op_raw_dtoh_sync,
             &s->raw_pageable, "1 x cuMemcpy%s 256 KiB", direction,
             "malloc"},
            {BENCH_ROLE_RAW,
             upload ? bench_op_raw_htod_staged : bench_op_raw_dtoh_staged,
             &s->raw_staged, "1 x cuMemcpy%sAsync 256 KiB staged by memcpy",
             direction, "malloc"},
        };
        for (unsigned i = 0; i < VARIANTS; i++) {
            char what[64];
            if (i >= 3 && i < 6 && !s->with_registered)
                continue;
            snprintf(what, sizeof what, variants[i].what, variants[i].word);
            snprintf(label, sizeof label, "%s, %s", what,
                     variants[i].memory);
            /* Cold: one operation per sample, each after a refill. */
            index[i] = bench_add_variant(scenario, &(bench_variant_spec){
                .label = label, .role = variants[i].role,
                .op = variants[i].op, .context = variants[i].context,
                .bytes_per_op = TOTAL_BYTES, .iterations = cold ? 1 : 0,
                .prepare = cold ? refill : NULL, .prepare_context = s});
            if (index[i] < 0)
                goto done;
        }
    }
    int by_hand = -1;
    if (s->raw_kernels != NULL) {
        snprintf(label, sizeof label, upload
                     ? "memcpy + curd_scatter launched by hand, malloc"
                     : "curd_gather launched by hand + memcpy, malloc");
        by_hand = bench_add_variant(scenario, &(bench_variant_spec){
            .label = label, .role = BENCH_ROLE_RAW,
            .op = upload ? bench_op_raw_scatter_write
                         : bench_op_raw_gather_read,
            .context = s->raw_kernels, .bytes_per_op = TOTAL_BYTES,
            .iterations = cold ? 1 : 0, .prepare = cold ? refill : NULL,
            .prepare_context = s});
        if (by_hand < 0)
            goto done;
    }
    for (unsigned i = 0; i < STAGES; i++)
        stage_index[i] = -1;
    for (unsigned i = 0; i < TUNINGS; i++)
        tuning_index[i] = -1;
    if (cold && (add_stages(s, scenario, stage_index) != 0 ||
                 add_tunings(s, scenario, tuning_index) != 0))
        goto done;
    if (bench_measure(scenario) != 0)
        goto done;

    double pytorch_half_ns =
        upload ? PYTORCH_WRITES_HALF_NS : PYTORCH_READS_HALF_NS;
    const char *pytorch_target =
        upload ? "< 24.9 us: 2x PyTorch's 49.8 us copy + scatter"
               : "< 26.9 us: 2x PyTorch's 53.7 us gather";
    bench_check_ratio(scenario, index[0], index[2], 1.2,
                      "within 1.2x of one contiguous copy");
    if (!cold)
        bench_check_median_ns(scenario, index[0], pytorch_half_ns,
                              pytorch_target);
    if (cold)
        check_pytorch(scenario, index[0], name, upload,
                      !upload && !irregular ? PYTORCH_COLD_READS_NS : 0.0,
                      "the H200 of issue 38, best of 9");
    else
        check_pytorch(scenario, index[0], name, upload, 2.0 * pytorch_half_ns,
                      "the H100 of doc/PERFORMANCE.md");
    /* The floor of the path curd takes for irregular pieces: the same
     * kernels by hand (doc/PERFORMANCE.md, the seventeenth run). */
    if (by_hand >= 0)
        bench_check_ratio(scenario, index[0], by_hand, 1.2,
                          "within 1.2x of the same kernels by hand");
    bench_check_ratio(scenario, index[0], index[1], 0.0, NULL);
    bench_check_ratio(scenario, index[0], index[6], 0.0, NULL);
    bench_check_ratio(scenario, index[0], index[8], 0.0, NULL);
    if (!upload)
        bench_check_ratio(scenario, index[2], index[7], 1.5,
                          "within 1.5x of one pinned copy");
    else
        bench_check_ratio(scenario, index[2], index[7], 0.0, NULL);
    /* What one core's copy costs the same bytes without curd: the bound
     * of the target above (doc/PERFORMANCE.md, the eleventh run). */
    bench_check_ratio(scenario, index[2], index[9], 0.0, NULL);
    bench_check_ratio(scenario, index[9], index[7], 0.0, NULL);
    if (s->with_registered) {
        bench_check_ratio(scenario, index[3], index[5], 1.2,
                          "within 1.2x of one contiguous copy");
        bench_check_ratio(scenario, index[3], index[7], 1.2,
                          "within 1.2x of one pinned copy");
        if (!cold)
            bench_check_median_ns(scenario, index[3], pytorch_half_ns,
                                  pytorch_target);
        bench_check_ratio(scenario, index[3], index[4], 0.0, NULL);
    }
    /* The stages against what they are part of: the host copy and the
     * page walk against curd's batch into malloc memory; the batch into
     * registered memory is the DMA (or kernel) stage with no copy. */
    for (unsigned i = 0; i < STAGES; i++)
        if (stage_index[i] >= 0)
            bench_check_ratio(scenario, stage_index[i], index[0], 0.0, NULL);
    /* Each candidate setting against the defaults: below 1, it gains. */
    for (unsigned i = 0; i < TUNINGS; i++)
        if (tuning_index[i] >= 0)
            bench_check_ratio(scenario, tuning_index[i], index[0], 0.0, NULL);
    if (cold && bench_stages_wanted()
        && note_faults(s, scenario, upload ? bench_op_curd_upload_batch
                                           : bench_op_curd_download_batch)
               != 0)
        goto done;
    if (bench_note_batch_cost(scenario, &s->sides[0].ops[MALLOC_MEMORY], upload,
                              "planner, malloc") != 0 ||
        bench_note_batch_cost(scenario, &s->sides[1].ops[MALLOC_MEMORY], upload,
                              irregular ? "a DMA per piece, malloc"
                                        : "the kernels, malloc") != 0)
        goto done;
    if (s->with_registered &&
        bench_note_batch_cost(scenario, &s->sides[0].ops[REGISTERED_MEMORY],
                              upload, "planner, registered") != 0)
        goto done;
    bench_report_scenario(scenario);
    if (!s->with_registered)
        bench_report_skip(name, "registered memory: no cuMemHostRegister in "
                                "this driver");
    result = 0;

done:
    if (s != NULL)
        scattered_free(s);
    free(s);
    free(scenario);
    return result;
}

int bench_transfer_scattered_reads(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-reads", false, false,
                         false);
}

int bench_transfer_scattered_writes(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-writes", true, false,
                         false);
}

int bench_transfer_scattered_reads_irregular(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-reads-irregular", false,
                         true, false);
}

int bench_transfer_scattered_writes_irregular(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-writes-irregular", true,
                         true, false);
}

int bench_transfer_scattered_reads_cold(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-reads-cold", false, false,
                         true);
}

int bench_transfer_scattered_writes_cold(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-writes-cold", true, false,
                         true);
}

int bench_transfer_scattered_reads_irregular_cold(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-reads-irregular-cold", false,
                         true, true);
}

int bench_transfer_scattered_writes_irregular_cold(const bench_env *env)
{
    return scattered_run(env, "transfer/scattered-writes-irregular-cold", true,
                         true, true);
}
