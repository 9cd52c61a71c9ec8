/* report.c - the report of a run: the table on standard output as
 * scenarios finish, then the targets, and the JSON and CSV written at the
 * end (report-json.c, report-csv.c). */
#include "harness/report.h"

#include "harness/clock.h"
#include "harness/progress.h"
#include "harness/report-csv.h"
#include "harness/report-json.h"
#include "harness/report-run.h"
#include "harness/tuned.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct {
    const bench_env *env;
    bench_report_options options;
    bench_scenario **scenarios;
    size_t scenario_count;
    bench_report_skip_entry skips[32];
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
                 bench_gb_per_s(variant->spec.bytes_per_op, variant->median_ns),
                 bench_gb_per_s(variant->spec.bytes_per_op, variant->max_ns),
                 bench_gb_per_s(variant->spec.bytes_per_op, variant->min_ns));
    } else if (variant->spec.threads > 0) {
        snprintf(out, capacity, "%.2f Mops/s (%.2f, %.2f)",
                 mops_per_s(variant->median_ns), mops_per_s(variant->max_ns),
                 mops_per_s(variant->min_ns));
    } else {
        out[0] = '\0';
    }
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
    case BENCH_CHECK_EXTRA_NS:
        snprintf(out, capacity, "%+.0f ns", check->value);
        break;
    }
}

static void print_scenario_text(FILE *out, const bench_scenario *scenario)
{
    unsigned index;
    size_t label_width = 8;

    for (index = 0; index < scenario->variant_count; index++) {
        size_t length = strlen(scenario->variants[index].label);
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
                    bench_role_name(variant->spec.role), (int)label_width,
                    variant->label, times, ops, rate);
        else
            fprintf(out, "  %-4s  %-*s  %-28s  %s\n",
                    bench_role_name(variant->spec.role), (int)label_width,
                    variant->label, times, ops);
    }
    for (index = 0; index < scenario->check_count; index++) {
        const bench_check *check = &scenario->checks[index];
        char value[64];
        format_check_value(value, sizeof value, check);
        fprintf(out, "  %-4s  %s = %s", bench_check_result(check), check->label,
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
    /* JSON or CSV on standard output replace the table. */
    report.text = options->json_stdout || options->csv_stdout ? NULL : stdout;
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
    {
        char tuning[512];
        bench_tuning_environment(tuning, sizeof tuning);
        if (tuning[0] != '\0')
            fprintf(report.text, "libcurd tuning from the environment: %s\n",
                    tuning);
    }
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
    if (report.text != NULL) {
        bench_progress_clear();
        print_scenario_text(report.text, scenario);
    }
}

void bench_report_skip(const char *scenario_name, const char *reason)
{
    if (report.skip_count < sizeof report.skips / sizeof report.skips[0]) {
        bench_report_skip_entry *entry = &report.skips[report.skip_count++];
        snprintf(entry->name, sizeof entry->name, "%s", scenario_name);
        snprintf(entry->reason, sizeof entry->reason, "%s", reason);
    }
    if (report.text != NULL) {
        fprintf(report.text, "  skip  %s: %s\n", scenario_name, reason);
        fflush(report.text);
    }
}

/* Writes the run to path with writer; nothing when path is NULL. 0, or
 * -1 with errno set. */
static int write_file(const char *path,
                      void (*writer)(FILE *out, const bench_report_run *run),
                      const bench_report_run *run)
{
    FILE *file;
    if (path == NULL)
        return 0;
    file = fopen(path, "w");
    if (file == NULL)
        return -1;
    writer(file, run);
    if (ferror(file) != 0) {
        fclose(file);
        errno = EIO;
        return -1;
    }
    return fclose(file) != 0 ? -1 : 0;
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
    bench_progress_clear();
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
                        bench_check_result(item), scenario->name, item->label,
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
    {
        const bench_report_run run = {
            .env = report.env, .scenarios = report.scenarios,
            .scenario_count = report.scenario_count, .skips = report.skips,
            .skip_count = report.skip_count, .failure = failure,
            .passes = passes, .misses = misses, .wall_s = wall_s};
        if (report.options.json_stdout)
            bench_report_write_json(stdout, &run);
        if (report.options.csv_stdout)
            bench_report_write_csv(stdout, &run);
        fflush(stdout);
        if (write_file(report.options.json_path, bench_report_write_json,
                       &run) != 0 ||
            write_file(report.options.csv_path, bench_report_write_csv,
                       &run) != 0)
            result = -1;
    }
    for (index = 0; index < report.scenario_count; index++)
        free(report.scenarios[index]);
    free(report.scenarios);
    report.scenarios = NULL;
    report.scenario_count = 0;
    return result;
}
