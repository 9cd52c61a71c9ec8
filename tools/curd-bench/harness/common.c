/* common.c - timing, statistics and reporting for curd-bench. */
#include "harness/common.h"
#include "harness/clock.h"
#include "harness/progress.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------
 * Failures.
 * ---------------------------------------------------------------------- */
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;
static char failure_text[1024];
static bool failure_set;

static int fail_v(const char *format, va_list args)
{
    pthread_mutex_lock(&failure_lock);
    if (!failure_set) {
        vsnprintf(failure_text, sizeof failure_text, format, args);
        failure_set = true;
    }
    pthread_mutex_unlock(&failure_lock);
    return -1;
}

int bench_fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fail_v(format, args);
    va_end(args);
    return -1;
}

/* The function's name out of a call's text: "driver->cuMemAlloc(&p, n)"
 * gives "cuMemAlloc". */
static void call_name(char *out, size_t capacity, const char *call)
{
    const char *start = call;
    const char *arrow;
    size_t length;
    while ((arrow = strstr(start, "->")) != NULL &&
           (strchr(start, '(') == NULL || arrow < strchr(start, '(')))
        start = arrow + 2;
    length = strcspn(start, "(");
    if (length >= capacity)
        length = capacity - 1;
    memcpy(out, start, length);
    out[length] = '\0';
}

int bench_fail_curd(const char *call, curd_status status)
{
    char name[96];
    call_name(name, sizeof name, call);
    return bench_fail("%s returned %s: %s", name, curd_status_name(status),
                      curd_last_error());
}

int bench_fail_cu(const char *call, bench_cu_result cu_result)
{
    char name[96];
    call_name(name, sizeof name, call);
    return bench_fail("raw driver call %s returned %s (CUresult %u)", name,
                      bench_cuda_result_name(cu_result),
                      cu_result);
}

const char *bench_failure(void)
{
    const char *text;
    pthread_mutex_lock(&failure_lock);
    text = failure_set ? failure_text : NULL;
    pthread_mutex_unlock(&failure_lock);
    return text;
}

/* ------------------------------------------------------------------------
 * Clock, random bytes, comparison.
 * ---------------------------------------------------------------------- */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void bench_fill_random(uint64_t *state, void *dst, size_t byte_len)
{
    unsigned char *out = dst;
    size_t offset = 0;
    for (; offset + 8 <= byte_len; offset += 8) {
        uint64_t word = splitmix64(state);
        /* memcpy: dst has no alignment promise. */
        memcpy(out + offset, &word, 8);
    }
    if (offset < byte_len) {
        uint64_t word = splitmix64(state);
        memcpy(out + offset, &word, byte_len - offset);
    }
}

void bench_poison(void *dst, size_t byte_len)
{
    /* 0xa5 in every byte: random data matches it over a whole 4 KiB range
     * with probability 2^-32768. */
    memset(dst, 0xa5, byte_len);
}

int bench_compare(const char *what, const void *expected, const void *actual,
                  size_t byte_len)
{
    const unsigned char *want = expected;
    const unsigned char *got = actual;
    size_t offset;
    size_t differing = 0;
    size_t first = 0;

    if (memcmp(want, got, byte_len) == 0)
        return 0;
    for (offset = 0; offset < byte_len; offset++) {
        if (want[offset] != got[offset]) {
            if (differing == 0)
                first = offset;
            differing++;
        }
    }
    return bench_fail("%s: wrong bytes: %zu of %zu differ, first at offset "
                      "%zu (expected 0x%02x, got 0x%02x)",
                      what, differing, byte_len, first, want[first],
                      got[first]);
}

void *bench_host_alloc(size_t byte_len, const char *what)
{
    void *memory = NULL;
    int error = posix_memalign(&memory, 4096, byte_len);
    if (error != 0 || memory == NULL) {
        bench_fail("host allocation of %zu bytes for %s failed", byte_len,
                   what);
        return NULL;
    }
    return memory;
}

/* ------------------------------------------------------------------------
 * Raw driver access.
 * ---------------------------------------------------------------------- */
int bench_raw_enter(const bench_env *env)
{
    BENCH_CU(env->cu->cuCtxPushCurrent(env->context));
    return 0;
}

void bench_raw_leave(const bench_env *env)
{
    bench_cu_context popped = NULL;
    env->cu->cuCtxPopCurrent(&popped);
}

int bench_stream_acquire(const bench_env *env, bench_cu_stream *out)
{
    bench_cu_result cu_result;
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuStreamCreate(out, BENCH_CU_STREAM_NON_BLOCKING);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuStreamCreate", cu_result);
    return 0;
}

void bench_stream_release(const bench_env *env, bench_cu_stream stream)
{
    if (stream == NULL)
        return;
    if (bench_raw_enter(env) != 0)
        return;
    env->cu->cuStreamDestroy(stream);
    bench_raw_leave(env);
}

/* ------------------------------------------------------------------------
 * Scenarios and measuring.
 * ---------------------------------------------------------------------- */
void bench_scenario_init(bench_scenario *scenario, const bench_env *env,
                         const char *name, unsigned samples,
                         const char *what_format, ...)
{
    va_list args;
    memset(scenario, 0, sizeof *scenario);
    scenario->env = env;
    scenario->name = name;
    if (samples < 1)
        samples = 1;
    if (samples > BENCH_MAX_SAMPLES)
        samples = BENCH_MAX_SAMPLES;
    scenario->samples = samples;
    va_start(args, what_format);
    vsnprintf(scenario->what, sizeof scenario->what, what_format, args);
    va_end(args);
}

/* false when label does not fit. */
static bool copy_label(char out[BENCH_LABEL_BYTES], const char *label)
{
    int length = snprintf(out, BENCH_LABEL_BYTES, "%s", label);
    return length >= 0 && length < BENCH_LABEL_BYTES;
}

int bench_add_variant(bench_scenario *scenario,
                      const bench_variant_spec *spec)
{
    bench_variant *variant;
    if (scenario->variant_count >= BENCH_MAX_VARIANTS)
        return bench_fail("%s: more than %d variants", scenario->name,
                          BENCH_MAX_VARIANTS);
    variant = &scenario->variants[scenario->variant_count];
    memset(variant, 0, sizeof *variant);
    variant->spec = *spec;
    if (!copy_label(variant->label, spec->label)
        || !copy_label(variant->series,
                       spec->series != NULL ? spec->series : spec->label))
        return bench_fail("%s: a variant label longer than %d bytes: %s",
                          scenario->name, BENCH_LABEL_BYTES - 1, spec->label);
    /* The caller's buffers: read label and series from now on. */
    variant->spec.label = NULL;
    variant->spec.series = NULL;
    if (variant->spec.ops_per_iteration == 0)
        variant->spec.ops_per_iteration = 1;
    return (int)scenario->variant_count++;
}

/* Times one call of op, after its untimed prepare; 0 and *out_ns, or
 * -1. */
static int time_call(const bench_variant *variant, uint64_t iterations,
                     uint64_t *out_ns)
{
    uint64_t start_ns;
    if (variant->spec.prepare != NULL &&
        variant->spec.prepare(variant->spec.prepare_context, 1) != 0)
        return -1;
    start_ns = bench_now_ns();
    if (variant->spec.op(variant->spec.context, iterations) != 0)
        return -1;
    *out_ns = bench_now_ns() - start_ns;
    return 0;
}

/* Warm-up doubles the iterations until one call lasts an eighth of a
 * sample and the warm-up time has passed, then sets the iterations per
 * sample from the fastest rate seen in calls that long (a single slow call,
 * a page fault or a preemption, must not shrink every sample). */
static int warm_up_and_calibrate(const bench_env *env, bench_variant *variant)
{
    uint64_t iterations = 1;
    uint64_t max_iterations = variant->spec.max_iterations;
    uint64_t warm_start_ns = bench_now_ns();
    uint64_t elapsed_ns = 0;
    double best_per_call_ns = 0.0;
    unsigned calls;

    if (variant->spec.iterations != 0) {
        iterations = variant->spec.iterations;
        for (calls = 0; calls < 2; calls++)
            if (time_call(variant, iterations, &elapsed_ns) != 0)
                return -1;
        variant->iterations = iterations;
        return 0;
    }
    if (max_iterations == 0)
        max_iterations = UINT64_MAX / 4;
    /* A bound on the rounds, so that a clock that never advances cannot
     * loop forever: 64 doublings cover every count. */
    for (calls = 0; calls < 200; calls++) {
        bool long_enough;
        bool warm;
        if (time_call(variant, iterations, &elapsed_ns) != 0)
            return -1;
        long_enough = elapsed_ns >= env->sample_target_ns / 8 ||
                      iterations >= max_iterations;
        if (long_enough) {
            double per_call_ns =
                (double)(elapsed_ns == 0 ? 1 : elapsed_ns) / (double)iterations;
            if (best_per_call_ns == 0.0 || per_call_ns < best_per_call_ns)
                best_per_call_ns = per_call_ns;
        }
        warm = bench_now_ns() - warm_start_ns >= env->warmup_ns;
        if (long_enough && warm && calls >= 1)
            break;
        if (!long_enough) {
            iterations *= 2;
            if (iterations > max_iterations)
                iterations = max_iterations;
        }
    }
    if (elapsed_ns == 0)
        elapsed_ns = 1;
    if (best_per_call_ns == 0.0)
        best_per_call_ns = (double)elapsed_ns / (double)iterations;
    {
        double wanted = (double)env->sample_target_ns / best_per_call_ns;
        if (wanted < 1.0)
            wanted = 1.0;
        if (wanted > (double)max_iterations)
            wanted = (double)max_iterations;
        variant->iterations = (uint64_t)wanted;
    }
    return 0;
}

static int compare_doubles(const void *left, const void *right)
{
    double a = *(const double *)left;
    double b = *(const double *)right;
    return (a > b) - (a < b);
}

/* The q-quantile of count sorted values, interpolated between the two
 * nearest ranks (q 0.5 is the median). */
static double quantile(const double *sorted, unsigned count, double q)
{
    double rank = q * (double)(count - 1);
    unsigned below = (unsigned)rank;
    double fraction = rank - (double)below;
    if (below + 1 >= count)
        return sorted[count - 1];
    return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

static void summarize(bench_variant *variant)
{
    double sorted[BENCH_MAX_SAMPLES];
    unsigned count = variant->sample_count;
    memcpy(sorted, variant->sample_ns, count * sizeof sorted[0]);
    qsort(sorted, count, sizeof sorted[0], compare_doubles);
    variant->min_ns = sorted[0];
    variant->max_ns = sorted[count - 1];
    variant->median_ns = quantile(sorted, count, 0.5);
    variant->p10_ns = quantile(sorted, count, 0.1);
    variant->p90_ns = quantile(sorted, count, 0.9);
}

int bench_measure(bench_scenario *scenario)
{
    unsigned index;
    unsigned sample;
    unsigned count = scenario->variant_count;

    for (index = 0; index < count; index++)
        if (warm_up_and_calibrate(scenario->env,
                                  &scenario->variants[index]) != 0)
            return -1;
    if (scenario->sampling_start != NULL)
        scenario->sampling_start(scenario->sampling_context);
    /* Interleaved, with the order rotated every round, so that no variant
     * always runs right after the same neighbour. */
    for (sample = 0; sample < scenario->samples; sample++) {
        bench_progress_samples(sample, scenario->samples);
        for (index = 0; index < count; index++) {
            bench_variant *variant =
                &scenario->variants[(index + sample) % count];
            uint64_t elapsed_ns = 0;
            double ops;
            if (time_call(variant, variant->iterations, &elapsed_ns) != 0)
                return -1;
            ops = (double)variant->iterations *
                  (double)variant->spec.ops_per_iteration;
            variant->sample_ns[variant->sample_count++] =
                (double)elapsed_ns / ops;
        }
    }
    for (index = 0; index < count; index++)
        summarize(&scenario->variants[index]);
    scenario->measured = true;
    return 0;
}

/* Words a check's label from its variants' labels. Through va_list, as
 * the labels lie in the same scenario as the check's own (never the same
 * bytes, which snprintf's restrict check cannot see). */
static void name_check(bench_check *check, const char *format, ...)
    BENCH_PRINTF(2, 3);
static void name_check(bench_check *check, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(check->label, sizeof check->label, format, args);
    va_end(args);
}

static bench_check *new_check(bench_scenario *scenario)
{
    bench_check *check;
    if (scenario->check_count >= BENCH_MAX_CHECKS)
        return NULL;
    check = &scenario->checks[scenario->check_count++];
    memset(check, 0, sizeof *check);
    return check;
}

void bench_check_ratio(bench_scenario *scenario, int curd_index,
                       int raw_index, double limit, const char *target)
{
    bench_check *check = new_check(scenario);
    const bench_variant *a = &scenario->variants[curd_index];
    const bench_variant *b = &scenario->variants[raw_index];
    if (check == NULL)
        return;
    check->kind = BENCH_CHECK_RATIO;
    name_check(check, "%s / %s", a->label, b->label);
    check->a = curd_index;
    check->b = raw_index;
    check->limit = limit;
    snprintf(check->target, sizeof check->target, "%s",
             target != NULL ? target : "");
    check->value = a->median_ns / b->median_ns;
    check->has_target = limit > 0.0;
    check->pass = check->has_target && check->value <= limit;
}

void bench_check_median_ns(bench_scenario *scenario, int index,
                           double limit_ns, const char *target)
{
    bench_check *check = new_check(scenario);
    const bench_variant *a = &scenario->variants[index];
    if (check == NULL)
        return;
    check->kind = BENCH_CHECK_MEDIAN_NS;
    name_check(check, "%s median", a->label);
    check->a = index;
    check->b = -1;
    check->limit = limit_ns;
    snprintf(check->target, sizeof check->target, "%s",
             target != NULL ? target : "");
    check->value = a->median_ns;
    check->has_target = limit_ns > 0.0;
    check->pass = check->has_target && check->value < limit_ns;
}

void bench_check_extra_ns(bench_scenario *scenario, int index,
                          int baseline_index, double limit_ns,
                          const char *target)
{
    bench_check *check = new_check(scenario);
    const bench_variant *a = &scenario->variants[index];
    const bench_variant *b = &scenario->variants[baseline_index];
    if (check == NULL)
        return;
    check->kind = BENCH_CHECK_EXTRA_NS;
    name_check(check, "%s - %s", a->label, b->label);
    check->a = index;
    check->b = baseline_index;
    check->limit = limit_ns;
    snprintf(check->target, sizeof check->target, "%s",
             target != NULL ? target : "");
    check->value = a->median_ns - b->median_ns;
    check->has_target = limit_ns > 0.0;
    check->pass = check->has_target && check->value <= limit_ns;
}

void bench_check_speedup(bench_scenario *scenario, int parallel_index,
                         int baseline_index, double limit, const char *target)
{
    bench_check *check = new_check(scenario);
    const bench_variant *a = &scenario->variants[parallel_index];
    const bench_variant *b = &scenario->variants[baseline_index];
    if (check == NULL)
        return;
    check->kind = BENCH_CHECK_SPEEDUP;
    name_check(check, "speedup %s vs %s", a->label, b->label);
    check->a = parallel_index;
    check->b = baseline_index;
    check->limit = limit;
    snprintf(check->target, sizeof check->target, "%s",
             target != NULL ? target : "");
    check->value = b->median_ns / a->median_ns;
    check->has_target = limit > 0.0;
    check->pass = check->has_target && check->value >= limit;
}

void bench_note(bench_scenario *scenario, const char *format, ...)
{
    va_list args;
    if (scenario->note_count >= BENCH_MAX_NOTES)
        return;
    va_start(args, format);
    vsnprintf(scenario->notes[scenario->note_count],
              sizeof scenario->notes[0], format, args);
    va_end(args);
    scenario->note_count++;
}
