/* common.h - the harness shared by curd-bench's scenarios.
 *
 * A scenario sets up its memory, checks every path it will time for
 * correctness (random bytes in, every byte compared out), then declares its
 * variants (one per way of doing the same work: raw driver or curd) and lets
 * the harness time them side by side: each variant is warmed up and
 * calibrated, then the samples of all variants are taken interleaved, so a
 * drift of clocks or temperature during the run hits every variant alike.
 * A sample times many operations with CLOCK_MONOTONIC and records the
 * nanoseconds per operation; a variant's operation must include whatever
 * synchronisation makes its work complete (the fence), so that host clock
 * readings around it are honest. Checks then compare medians.
 *
 * Every failure goes through bench_fail(), which keeps the first message
 * (thread-safe) and returns -1; the scenario returns -1 up to main(), which
 * prints that one line and exits non-zero. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_COMMON_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "harness/cuda.h"

#define BENCH_PRINTF(f, a) __attribute__((format(printf, f, a)))

#define BENCH_KIB ((size_t)1024)
#define BENCH_MIB ((size_t)1024 * 1024)

#define BENCH_MAX_VARIANTS 40
#define BENCH_MAX_CHECKS 40
#define BENCH_MAX_NOTES 8
#define BENCH_MAX_SAMPLES 201
/* The longest variant label, its NUL included. */
#define BENCH_LABEL_BYTES 160

/* ------------------------------------------------------------------------
 * Run-wide settings and the device under test.
 * ---------------------------------------------------------------------- */
typedef struct bench_env {
    curd_device *device;
    /* The raw driver for the baselines, and the device's primary context
     * (the one libcurd uses too), retained by the tool. */
    const bench_cuda *cu;
    bench_cu_device cu_device;
    bench_cu_context context;
    curd_device_props props;
    int driver_version;
    bool quick;
    /* Samples per variant: small operations, and operations on 256 MiB. */
    unsigned samples;
    unsigned samples_large;
    /* A calibrated sample runs about this long. */
    uint64_t sample_target_ns;
    /* Warm-up runs at least this long before calibrating. */
    uint64_t warmup_ns;
    uint64_t seed;
} bench_env;

/* ------------------------------------------------------------------------
 * Failures.
 * ---------------------------------------------------------------------- */
/* Records the first failure's sentence; always returns -1. Thread-safe. */
int bench_fail(const char *format, ...) BENCH_PRINTF(1, 2);
/* The same, for a failed curd call: names the call, the status and
 * curd_last_error(). */
int bench_fail_curd(const char *call, curd_status status);
/* The same, for a failed raw driver call: names the call and the CUresult
 * with its name. */
int bench_fail_cu(const char *call, bench_cu_result cu_result);
/* The recorded sentence, or NULL when nothing failed. */
const char *bench_failure(void);

/* Checks a raw driver call from code that returns int (0 or -1). */
#define BENCH_CU(call)                                                        \
    do {                                                                      \
        bench_cu_result bench_cu_result_ = (call);                            \
        if (bench_cu_result_ != BENCH_CUDA_SUCCESS)                           \
            return bench_fail_cu(#call, bench_cu_result_);                    \
    } while (0)

/* Checks a curd call from code that returns int (0 or -1). */
#define BENCH_CURD(call)                                                      \
    do {                                                                      \
        curd_status bench_curd_status_ = (call);                              \
        if (bench_curd_status_ != CURD_OK)                                    \
            return bench_fail_curd(#call, bench_curd_status_);                \
    } while (0)

/* ------------------------------------------------------------------------
 * Random bytes, comparison, host memory.
 * ---------------------------------------------------------------------- */
/* Fills byte_len bytes with fresh pseudo-random bytes from *state
 * (splitmix64), fast enough for 256 MiB. */
void bench_fill_random(uint64_t *state, void *dst, size_t byte_len);
/* Fills with a poison pattern that no correct output equals by chance. */
void bench_poison(void *dst, size_t byte_len);
/* 0 when equal; else bench_fail() naming what and the first differing
 * offset. */
int bench_compare(const char *what, const void *expected, const void *actual,
                  size_t byte_len);

/* Page-aligned host memory from malloc's family (pageable), or NULL after
 * bench_fail(). Free with free(). */
void *bench_host_alloc(size_t byte_len, const char *what);

/* ------------------------------------------------------------------------
 * Scenarios, variants, checks.
 * ---------------------------------------------------------------------- */
/* REF: a reference that is neither the driver nor curd's own path (the
 * machine's ceiling, say), printed as "ref". */
typedef enum bench_role {
    BENCH_ROLE_RAW = 0,
    BENCH_ROLE_CURD = 1,
    BENCH_ROLE_REF = 2
} bench_role;

/* Runs `iterations` operations back to back, including whatever fence
 * makes them complete; 0 on success, -1 after bench_fail(). */
typedef int (*bench_op_fn)(void *context, uint64_t iterations);

typedef struct bench_variant_spec {
    /* Copied by bench_add_variant (bench_variant's label and series), so
     * they may name a buffer the caller writes again. */
    const char *label;
    /* The label without the size, for variants of a size sweep: the CSV
     * names a sweep's points by it, so they join into one line of a
     * chart. NULL: the label. */
    const char *series;
    bench_role role;
    bench_op_fn op;
    void *context;
    /* Operations one iteration stands for (threads working at once: each
     * iteration is one operation on every thread); 0 means 1. */
    uint64_t ops_per_iteration;
    /* Threads the variant runs on, for the ops/s column; 0: not a
     * throughput variant. */
    unsigned threads;
    /* Bytes one operation moves, for GB/s; 0: not a transfer. */
    uint64_t bytes_per_op;
    /* Fixed iterations per sample; 0: calibrate to the sample target. */
    uint64_t iterations;
    /* Upper bound for calibration; 0: no bound. */
    uint64_t max_iterations;
    /* Run untimed before every timed call of op (warm-up and samples),
     * with prepare_context and 1 iteration, to put the machine in the
     * state each call must start from (host memory out of the caches, say:
     * scenarios/scattered.c's cold scenarios); NULL: nothing. A variant
     * with one sets iterations, usually 1, so that the state holds for
     * each operation timed. */
    bench_op_fn prepare;
    void *prepare_context;
} bench_variant_spec;

typedef struct bench_variant {
    bench_variant_spec spec;
    /* The spec's label and series (the label when it has none), copied:
     * the report keeps the scenario until the end of the run, and callers
     * build labels in buffers that a later scenario writes again. */
    char label[BENCH_LABEL_BYTES];
    char series[BENCH_LABEL_BYTES];
    uint64_t iterations; /* per sample, as calibrated */
    double sample_ns[BENCH_MAX_SAMPLES]; /* ns per operation */
    unsigned sample_count;
    double median_ns;
    double min_ns;
    double max_ns;
    double p10_ns; /* 10th and 90th percentiles */
    double p90_ns;
} bench_variant;

typedef enum bench_check_kind {
    /* median(a) / median(b) must be <= limit (times per operation). */
    BENCH_CHECK_RATIO = 0,
    /* median(a) must be < limit nanoseconds. */
    BENCH_CHECK_MEDIAN_NS = 1,
    /* median(b) / median(a) (a speedup: b is the baseline, a the parallel
     * run) must be >= limit. */
    BENCH_CHECK_SPEEDUP = 2,
    /* median(a) - median(b) (what a costs more than b, per operation)
     * must be <= limit nanoseconds. */
    BENCH_CHECK_EXTRA_NS = 3
} bench_check_kind;

typedef struct bench_check {
    bench_check_kind kind;
    char label[128];
    int a;
    int b; /* -1 for BENCH_CHECK_MEDIAN_NS */
    double limit; /* 0: no target, report only */
    char target[64]; /* the target as the issue words it */
    double value; /* the ratio, the median, or the speedup */
    bool has_target;
    bool pass;
} bench_check;

typedef struct bench_scenario {
    const bench_env *env;
    const char *name;
    char what[160];
    bench_variant variants[BENCH_MAX_VARIANTS];
    unsigned variant_count;
    unsigned samples;
    bench_check checks[BENCH_MAX_CHECKS];
    unsigned check_count;
    char notes[BENCH_MAX_NOTES][160];
    unsigned note_count;
    bool measured;
    /* Optional: called once after warm-up and calibration, right before
     * the first timed sample (e.g. to read counters over the timed part
     * only). */
    void (*sampling_start)(void *context);
    void *sampling_context;
} bench_scenario;

void bench_scenario_init(bench_scenario *scenario, const bench_env *env,
                         const char *name, unsigned samples,
                         const char *what_format, ...) BENCH_PRINTF(5, 6);
/* Returns the variant's index. */
int bench_add_variant(bench_scenario *scenario,
                      const bench_variant_spec *spec);
/* Warms up and calibrates every variant, then takes the samples
 * interleaved; 0, or -1 after bench_fail(). */
int bench_measure(bench_scenario *scenario);

/* Checks on measured variants. limit 0: the value is reported without a
 * target. */
void bench_check_ratio(bench_scenario *scenario, int curd_index,
                       int raw_index, double limit, const char *target);
void bench_check_median_ns(bench_scenario *scenario, int index,
                           double limit_ns, const char *target);
void bench_check_speedup(bench_scenario *scenario, int parallel_index,
                         int baseline_index, double limit,
                         const char *target);
void bench_check_extra_ns(bench_scenario *scenario, int index,
                          int baseline_index, double limit_ns,
                          const char *target);
void bench_note(bench_scenario *scenario, const char *format, ...)
    BENCH_PRINTF(2, 3);

/* ------------------------------------------------------------------------
 * Raw driver access: the device's primary context made current around raw
 * calls (pushed and popped: libcurd's own calls in between are unaffected).
 * ---------------------------------------------------------------------- */
int bench_raw_enter(const bench_env *env);
void bench_raw_leave(const bench_env *env);
/* A non-blocking stream of the device's context, made and destroyed by
 * the raw driver. */
int bench_stream_acquire(const bench_env *env, bench_cu_stream *out);
void bench_stream_release(const bench_env *env, bench_cu_stream stream);

#endif
