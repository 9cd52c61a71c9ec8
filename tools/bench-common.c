/* bench-common.c - timing, statistics and reporting for curd-bench. */
#include "bench-common.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

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

int bench_fail_cu(const char *call, curdi_cu_result cu_result)
{
    char name[96];
    call_name(name, sizeof name, call);
    return bench_fail("raw driver call %s returned %s (CUresult %u)", name,
                      curdi_driver_result_name(cu_result), cu_result);
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
uint64_t bench_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

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
    BENCH_CURD(curdi_device_enter(env->device));
    return 0;
}

void bench_raw_leave(const bench_env *env)
{
    curdi_device_leave(env->device);
}

int bench_stream_acquire(const bench_env *env, curdi_cu_stream *out)
{
    curd_status status;
    if (bench_raw_enter(env) != 0)
        return -1;
    status = curdi_stream_acquire(env->device, out);
    bench_raw_leave(env);
    if (status != CURD_OK)
        return bench_fail_curd("curdi_stream_acquire", status);
    return 0;
}

void bench_stream_release(const bench_env *env, curdi_cu_stream stream)
{
    if (stream == NULL)
        return;
    if (bench_raw_enter(env) != 0)
        return;
    curdi_stream_release(env->device, stream);
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
    if (variant->spec.ops_per_iteration == 0)
        variant->spec.ops_per_iteration = 1;
    return (int)scenario->variant_count++;
}

/* Times one call of op; 0 and *out_ns, or -1. */
static int time_call(const bench_variant *variant, uint64_t iterations,
                     uint64_t *out_ns)
{
    uint64_t start_ns = bench_now_ns();
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

static void summarize(bench_variant *variant)
{
    double sorted[BENCH_MAX_SAMPLES];
    unsigned count = variant->sample_count;
    memcpy(sorted, variant->sample_ns, count * sizeof sorted[0]);
    qsort(sorted, count, sizeof sorted[0], compare_doubles);
    variant->min_ns = sorted[0];
    variant->max_ns = sorted[count - 1];
    if (count % 2 == 1)
        variant->median_ns = sorted[count / 2];
    else
        variant->median_ns = (sorted[count / 2 - 1] + sorted[count / 2]) / 2.0;
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
    snprintf(check->label, sizeof check->label, "%s / %s", a->spec.label,
             b->spec.label);
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
    snprintf(check->label, sizeof check->label, "%s median", a->spec.label);
    check->a = index;
    check->b = -1;
    check->limit = limit_ns;
    snprintf(check->target, sizeof check->target, "%s",
             target != NULL ? target : "");
    check->value = a->median_ns;
    check->has_target = limit_ns > 0.0;
    check->pass = check->has_target && check->value < limit_ns;
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
    snprintf(check->label, sizeof check->label, "speedup %s vs %s",
             a->spec.label, b->spec.label);
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

/* ------------------------------------------------------------------------
 * The report.
 * ---------------------------------------------------------------------- */
typedef struct skip_entry {
    char name[64];
    char reason[160];
} skip_entry;

static struct {
    const bench_env *env;
    bench_report_options options;
    bench_scenario **scenarios;
    size_t scenario_count;
    skip_entry skips[32];
    size_t skip_count;
    uint64_t start_ns;
    FILE *text; /* where the table goes; NULL: nowhere */
} report;

/* A duration in the unit that keeps 3 significant digits readable. */
static const char *duration_unit(double ns, double *scale)
{
    if (ns < 1e3) {
        *scale = 1.0;
        return "ns";
    }
    if (ns < 1e6) {
        *scale = 1e3;
        return "us";
    }
    if (ns < 1e9) {
        *scale = 1e6;
        return "ms";
    }
    *scale = 1e9;
    return "s";
}

static void format_number(char *out, size_t capacity, double value)
{
    if (value >= 100.0)
        snprintf(out, capacity, "%.0f", value);
    else if (value >= 10.0)
        snprintf(out, capacity, "%.1f", value);
    else
        snprintf(out, capacity, "%.2f", value);
}

/* "23.4 ns (22.9, 25.1)": median (min, max), one unit for all three. */
static void format_times(char *out, size_t capacity,
                         const bench_variant *variant)
{
    double scale;
    const char *unit = duration_unit(variant->median_ns, &scale);
    char median[32], low[32], high[32];
    format_number(median, sizeof median, variant->median_ns / scale);
    format_number(low, sizeof low, variant->min_ns / scale);
    format_number(high, sizeof high, variant->max_ns / scale);
    snprintf(out, capacity, "%s %s (%s, %s)", median, unit, low, high);
}

static double gb_per_s(uint64_t byte_count, double ns)
{
    /* Decimal GB/s: bytes per nanosecond. */
    return ns > 0.0 ? (double)byte_count / ns : 0.0;
}

static double mops_per_s(double ns_per_op)
{
    return ns_per_op > 0.0 ? 1e3 / ns_per_op : 0.0;
}

static void format_rate(char *out, size_t capacity,
                        const bench_variant *variant)
{
    if (variant->spec.bytes_per_op != 0) {
        /* The fastest sample has the highest rate. */
        snprintf(out, capacity, "%.2f GB/s (%.2f, %.2f)",
                 gb_per_s(variant->spec.bytes_per_op, variant->median_ns),
                 gb_per_s(variant->spec.bytes_per_op, variant->max_ns),
                 gb_per_s(variant->spec.bytes_per_op, variant->min_ns));
    } else if (variant->spec.threads > 0) {
        snprintf(out, capacity, "%.2f Mops/s (%.2f, %.2f)",
                 mops_per_s(variant->median_ns), mops_per_s(variant->max_ns),
                 mops_per_s(variant->min_ns));
    } else {
        out[0] = '\0';
    }
}

static const char *role_name(bench_role role)
{
    return role == BENCH_ROLE_CURD  ? "curd"
           : role == BENCH_ROLE_REF ? "ref"
                                    : "raw";
}

static const char *check_result(const bench_check *check)
{
    if (!check->has_target)
        return "-";
    return check->pass ? "PASS" : "MISS";
}

static void format_check_value(char *out, size_t capacity,
                               const bench_check *check)
{
    double scale;
    const char *unit;
    switch (check->kind) {
    case BENCH_CHECK_RATIO:
        if (check->value <= 1.0)
            snprintf(out, capacity, "%.3g (%.3gx faster)", check->value,
                     1.0 / check->value);
        else
            snprintf(out, capacity, "%.3g (%.3gx slower)", check->value,
                     check->value);
        break;
    case BENCH_CHECK_MEDIAN_NS:
        unit = duration_unit(check->value, &scale);
        snprintf(out, capacity, "%.3g %s", check->value / scale, unit);
        break;
    case BENCH_CHECK_SPEEDUP:
        snprintf(out, capacity, "%.2fx", check->value);
        break;
    }
}

static void print_scenario_text(FILE *out, const bench_scenario *scenario)
{
    unsigned index;
    size_t label_width = 8;

    for (index = 0; index < scenario->variant_count; index++) {
        size_t length = strlen(scenario->variants[index].spec.label);
        if (length > label_width)
            label_width = length;
    }
    fprintf(out, "\n%s: %s\n", scenario->name, scenario->what);
    fprintf(out, "  %-4s  %-*s  %-28s  %-10s  %s\n", "", (int)label_width,
            "variant", "per op: median (min, max)", "ops/sample", "rate");
    for (index = 0; index < scenario->variant_count; index++) {
        const bench_variant *variant = &scenario->variants[index];
        char times[128], rate[128], ops[32];
        format_times(times, sizeof times, variant);
        format_rate(rate, sizeof rate, variant);
        snprintf(ops, sizeof ops, "%llu",
                 (unsigned long long)(variant->iterations *
                                      variant->spec.ops_per_iteration));
        if (rate[0] != '\0')
            fprintf(out, "  %-4s  %-*s  %-28s  %-10s  %s\n",
                    role_name(variant->spec.role), (int)label_width,
                    variant->spec.label, times, ops, rate);
        else
            fprintf(out, "  %-4s  %-*s  %-28s  %s\n",
                    role_name(variant->spec.role), (int)label_width,
                    variant->spec.label, times, ops);
    }
    for (index = 0; index < scenario->check_count; index++) {
        const bench_check *check = &scenario->checks[index];
        char value[64];
        format_check_value(value, sizeof value, check);
        fprintf(out, "  %-4s  %s = %s", check_result(check), check->label,
                value);
        if (check->has_target)
            fprintf(out, "   [target %s]", check->target);
        fputc('\n', out);
    }
    for (index = 0; index < scenario->note_count; index++)
        fprintf(out, "  note  %s\n", scenario->notes[index]);
    fflush(out);
}

void bench_report_begin(const bench_env *env,
                        const bench_report_options *options)
{
    report.env = env;
    report.options = *options;
    report.start_ns = bench_now_ns();
    report.text = options->json_stdout ? NULL : stdout;
    if (report.text == NULL)
        return;
    fprintf(report.text,
            "curd-bench: curd %s, CUDA driver %d (%d.%d), device %d: %s "
            "(%s, compute %d.%d)\n",
            curd_version_string(), env->driver_version,
            env->driver_version / 1000, (env->driver_version % 1000) / 10,
            env->props.ordinal, env->props.name, env->props.pci_bus_id,
            env->props.compute_capability_major,
            env->props.compute_capability_minor);
    fprintf(report.text,
            "mode %s: %u samples per variant (%u for 256 MiB), ~%.1f ms per "
            "sample, interleaved after warm-up; seed 0x%016llx\n",
            env->quick ? "quick" : "default", env->samples,
            env->samples_large, (double)env->sample_target_ns / 1e6,
            (unsigned long long)env->seed);
    fprintf(report.text,
            "every path is checked byte for byte with random data before it "
            "is timed; ratios are curd/raw of median time per op\n");
    fflush(report.text);
}

void bench_report_scenario(const bench_scenario *scenario)
{
    bench_scenario **grown;
    bench_scenario *copy = malloc(sizeof *copy);
    if (copy != NULL) {
        grown = realloc(report.scenarios,
                        (report.scenario_count + 1) * sizeof *grown);
        if (grown != NULL) {
            *copy = *scenario;
            report.scenarios = grown;
            report.scenarios[report.scenario_count++] = copy;
        } else {
            free(copy);
        }
    }
    if (report.text != NULL)
        print_scenario_text(report.text, scenario);
}

void bench_report_skip(const char *scenario_name, const char *reason)
{
    if (report.skip_count < sizeof report.skips / sizeof report.skips[0]) {
        skip_entry *entry = &report.skips[report.skip_count++];
        snprintf(entry->name, sizeof entry->name, "%s", scenario_name);
        snprintf(entry->reason, sizeof entry->reason, "%s", reason);
    }
    if (report.text != NULL) {
        fprintf(report.text, "  skip  %s: %s\n", scenario_name, reason);
        fflush(report.text);
    }
}

static void json_string(FILE *out, const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    fputc('"', out);
    for (; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void json_number(FILE *out, double value)
{
    if (isfinite(value))
        fprintf(out, "%.6g", value);
    else
        fputs("null", out);
}

static void json_variant(FILE *out, const bench_variant *variant)
{
    unsigned sample;
    fputs("        {\"label\": ", out);
    json_string(out, variant->spec.label);
    fprintf(out, ", \"role\": \"%s\", \"ops_per_sample\": %llu",
            role_name(variant->spec.role),
            (unsigned long long)(variant->iterations *
                                 variant->spec.ops_per_iteration));
    fputs(", \"median_ns\": ", out);
    json_number(out, variant->median_ns);
    fputs(", \"min_ns\": ", out);
    json_number(out, variant->min_ns);
    fputs(", \"max_ns\": ", out);
    json_number(out, variant->max_ns);
    if (variant->spec.bytes_per_op != 0) {
        fprintf(out, ", \"bytes_per_op\": %llu",
                (unsigned long long)variant->spec.bytes_per_op);
        fputs(", \"median_gb_per_s\": ", out);
        json_number(out, gb_per_s(variant->spec.bytes_per_op,
                                  variant->median_ns));
    }
    if (variant->spec.threads > 0) {
        fprintf(out, ", \"threads\": %u", variant->spec.threads);
        fputs(", \"median_ops_per_s\": ", out);
        json_number(out, mops_per_s(variant->median_ns) * 1e6);
    }
    fputs(", \"samples_ns\": [", out);
    for (sample = 0; sample < variant->sample_count; sample++) {
        if (sample > 0)
            fputs(", ", out);
        json_number(out, variant->sample_ns[sample]);
    }
    fputs("]}", out);
}

static const char *check_kind_name(bench_check_kind kind)
{
    switch (kind) {
    case BENCH_CHECK_RATIO:
        return "ratio";
    case BENCH_CHECK_MEDIAN_NS:
        return "median_ns";
    case BENCH_CHECK_SPEEDUP:
        return "speedup";
    }
    return "?";
}

static void json_check(FILE *out, const bench_scenario *scenario,
                       const bench_check *check)
{
    fputs("        {\"kind\": ", out);
    json_string(out, check_kind_name(check->kind));
    fputs(", \"label\": ", out);
    json_string(out, check->label);
    fputs(", \"a\": ", out);
    json_string(out, scenario->variants[check->a].spec.label);
    if (check->b >= 0) {
        fputs(", \"b\": ", out);
        json_string(out, scenario->variants[check->b].spec.label);
    }
    fputs(", \"value\": ", out);
    json_number(out, check->value);
    if (check->has_target) {
        fputs(", \"limit\": ", out);
        json_number(out, check->limit);
        fputs(", \"target\": ", out);
        json_string(out, check->target);
        fprintf(out, ", \"result\": \"%s\"", check_result(check));
    } else {
        fputs(", \"result\": null", out);
    }
    fputc('}', out);
}

static void json_scenario(FILE *out, const bench_scenario *scenario)
{
    unsigned index;
    fputs("    {\"name\": ", out);
    json_string(out, scenario->name);
    fputs(", \"what\": ", out);
    json_string(out, scenario->what);
    fprintf(out, ", \"samples\": %u,\n      \"variants\": [\n",
            scenario->samples);
    for (index = 0; index < scenario->variant_count; index++) {
        json_variant(out, &scenario->variants[index]);
        fputs(index + 1 < scenario->variant_count ? ",\n" : "\n", out);
    }
    fputs("      ],\n      \"checks\": [\n", out);
    for (index = 0; index < scenario->check_count; index++) {
        json_check(out, scenario, &scenario->checks[index]);
        fputs(index + 1 < scenario->check_count ? ",\n" : "\n", out);
    }
    fputs("      ],\n      \"notes\": [", out);
    for (index = 0; index < scenario->note_count; index++) {
        if (index > 0)
            fputs(", ", out);
        json_string(out, scenario->notes[index]);
    }
    fputs("]}", out);
}

static void write_json(FILE *out, const char *failure, unsigned passes,
                       unsigned misses, double wall_s)
{
    const bench_env *env = report.env;
    size_t index;
    fputs("{\n  \"tool\": \"curd-bench\",\n  \"curd_version\": ", out);
    json_string(out, curd_version_string());
    fprintf(out, ",\n  \"driver_version\": %d,\n", env->driver_version);
    fprintf(out, "  \"device\": {\"ordinal\": %d, \"name\": ",
            env->props.ordinal);
    json_string(out, env->props.name);
    fputs(", \"pci_bus_id\": ", out);
    json_string(out, env->props.pci_bus_id);
    fprintf(out, ", \"compute_capability\": \"%d.%d\"},\n",
            env->props.compute_capability_major,
            env->props.compute_capability_minor);
    fprintf(out,
            "  \"mode\": \"%s\",\n  \"samples\": %u,\n  \"samples_large\": "
            "%u,\n  \"sample_target_ns\": %llu,\n  \"seed\": %llu,\n",
            env->quick ? "quick" : "default", env->samples,
            env->samples_large, (unsigned long long)env->sample_target_ns,
            (unsigned long long)env->seed);
    fprintf(out, "  \"ok\": %s,\n  \"error\": ",
            failure == NULL ? "true" : "false");
    if (failure != NULL)
        json_string(out, failure);
    else
        fputs("null", out);
    fprintf(out, ",\n  \"passes\": %u,\n  \"misses\": %u,\n  \"wall_s\": ",
            passes, misses);
    json_number(out, wall_s);
    fputs(",\n  \"skipped\": [", out);
    for (index = 0; index < report.skip_count; index++) {
        if (index > 0)
            fputs(", ", out);
        fputs("{\"name\": ", out);
        json_string(out, report.skips[index].name);
        fputs(", \"reason\": ", out);
        json_string(out, report.skips[index].reason);
        fputc('}', out);
    }
    fputs("],\n  \"scenarios\": [\n", out);
    for (index = 0; index < report.scenario_count; index++) {
        json_scenario(out, report.scenarios[index]);
        fputs(index + 1 < report.scenario_count ? ",\n" : "\n", out);
    }
    fputs("  ]\n}\n", out);
}

int bench_report_end(const char *failure)
{
    unsigned passes = 0;
    unsigned misses = 0;
    size_t index;
    int result;
    double wall_s = (double)(bench_now_ns() - report.start_ns) / 1e9;

    for (index = 0; index < report.scenario_count; index++) {
        const bench_scenario *scenario = report.scenarios[index];
        unsigned check;
        for (check = 0; check < scenario->check_count; check++) {
            if (!scenario->checks[check].has_target)
                continue;
            if (scenario->checks[check].pass)
                passes++;
            else
                misses++;
        }
    }
    result = (int)misses;
    if (report.text != NULL && passes + misses > 0) {
        /* The targets again, one line each, so the end of the output
         * alone answers "which targets hold". */
        fprintf(report.text, "\ntargets:\n");
        for (index = 0; index < report.scenario_count; index++) {
            const bench_scenario *scenario = report.scenarios[index];
            unsigned check;
            for (check = 0; check < scenario->check_count; check++) {
                const bench_check *item = &scenario->checks[check];
                char value[64];
                if (!item->has_target)
                    continue;
                format_check_value(value, sizeof value, item);
                fprintf(report.text, "  %s  %-31s  %s = %s  [%s]\n",
                        check_result(item), scenario->name, item->label,
                        value, item->target);
            }
        }
    }
    if (report.text != NULL) {
        fprintf(report.text,
                "\n%zu scenarios, %u targets: %u PASS, %u MISS; %.1f s\n",
                report.scenario_count, passes + misses, passes, misses,
                wall_s);
        fflush(report.text);
    }
    if (report.options.json_stdout) {
        write_json(stdout, failure, passes, misses, wall_s);
        fflush(stdout);
    }
    if (report.options.json_path != NULL) {
        FILE *file = fopen(report.options.json_path, "w");
        if (file == NULL) {
            result = -1;
        } else {
            write_json(file, failure, passes, misses, wall_s);
            if (fclose(file) != 0)
                result = -1;
        }
    }
    for (index = 0; index < report.scenario_count; index++)
        free(report.scenarios[index]);
    free(report.scenarios);
    report.scenarios = NULL;
    report.scenario_count = 0;
    return result;
}
