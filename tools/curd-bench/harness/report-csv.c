/* report-csv.c - a run as CSV (--csv): one row per measured variant,
 *
 *   scenario,variant,role,size_bytes,threads,median,p10,p90,unit,ratio_vs_raw
 *
 * times per operation in ns; size_bytes is what one operation moves (0 when
 * it moves nothing); ratio_vs_raw is the median over the median of the
 * scenario's first raw variant of the same size and thread count (empty
 * when there is none). A sweep's variants are named by their series, so a
 * chart joins their sizes into one line. Before the header, lines
 * starting "# " name the generator, the device, the driver and the date. bench/peers/ writes the same
 * columns, and scripts/bench-plot.sh reads them. Fields are quoted as RFC
 * 4180 says when they hold a comma or a quote. */
#include "harness/report-csv.h"

#include <string.h>
#include <time.h>

static void write_field(FILE *out, const char *text)
{
    if (strpbrk(text, ",\"\n") == NULL) {
        fputs(text, out);
        return;
    }
    fputc('"', out);
    for (; *text != '\0'; text++) {
        if (*text == '"')
            fputc('"', out);
        fputc(*text, out);
    }
    fputc('"', out);
}

static const bench_variant *raw_baseline(const bench_scenario *scenario,
                                         const bench_variant *variant)
{
    unsigned index;
    for (index = 0; index < scenario->variant_count; index++) {
        const bench_variant *candidate = &scenario->variants[index];
        if (candidate->spec.role == BENCH_ROLE_RAW &&
            candidate->spec.threads == variant->spec.threads &&
            candidate->spec.bytes_per_op == variant->spec.bytes_per_op)
            return candidate;
    }
    return NULL;
}

static void write_row(FILE *out, const bench_scenario *scenario,
                      const bench_variant *variant)
{
    const bench_variant *raw = raw_baseline(scenario, variant);
    write_field(out, scenario->name);
    fputc(',', out);
    write_field(out, variant->series);
    fprintf(out, ",%s,%llu,%u,%.6g,%.6g,%.6g,ns,",
            bench_role_name(variant->spec.role),
            (unsigned long long)variant->spec.bytes_per_op,
            variant->spec.threads > 0 ? variant->spec.threads : 1u,
            variant->median_ns, variant->p10_ns, variant->p90_ns);
    if (raw != NULL && raw->median_ns > 0.0)
        fprintf(out, "%.6g", variant->median_ns / raw->median_ns);
    fputc('\n', out);
}

/* "# key: value" lines before the header: what the numbers were measured
 * on, for the charts' titles (scripts/bench-plot.sh); a CSV reader skips
 * lines that start with '#'. */
static void write_metadata(FILE *out, const bench_report_run *run)
{
    const bench_env *env = run->env;
    char date[32] = "unknown";
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc) != NULL)
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    fprintf(out, "# generator: curd-bench %d.%d.%d (libcurd %s)\n",
            CURD_VERSION_MAJOR, CURD_VERSION_MINOR, CURD_VERSION_PATCH,
            curd_version_string());
    fprintf(out, "# device: %s (%s, compute %d.%d)\n", env->props.name,
            env->props.pci_bus_id, env->props.compute_capability_major,
            env->props.compute_capability_minor);
    fprintf(out, "# driver: CUDA %d.%d (%d)\n", env->driver_version / 1000,
            env->driver_version % 1000 / 10, env->driver_version);
    fprintf(out, "# date: %s\n", date);
}

void bench_report_write_csv(FILE *out, const bench_report_run *run)
{
    size_t index;
    write_metadata(out, run);
    fputs(BENCH_CSV_HEADER "\n", out);
    for (index = 0; index < run->scenario_count; index++) {
        const bench_scenario *scenario = run->scenarios[index];
        unsigned variant;
        for (variant = 0; variant < scenario->variant_count; variant++)
            write_row(out, scenario, &scenario->variants[variant]);
    }
}
