/* report-run.h - a finished run as the report's writers see it, and the
 * helpers they share with the table (report-run.c). The table (report.c)
 * and the writers (report-csv.c, report-json.c) stand above this module;
 * the writers never reach the table. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_RUN_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_RUN_H

#include <stddef.h>

#include "harness/common.h"

typedef struct bench_report_skip_entry {
    char name[64];
    char reason[160];
} bench_report_skip_entry;

/* A finished run, as the writers see it. */
typedef struct bench_report_run {
    const bench_env *env;
    bench_scenario *const *scenarios;
    size_t scenario_count;
    const bench_report_skip_entry *skips;
    size_t skip_count;
    const char *failure; /* NULL, or what stopped the run */
    unsigned passes;
    unsigned misses;
    double wall_s;
} bench_report_run;

/* "curd", "raw", "ref". */
const char *bench_role_name(bench_role role);
/* "PASS", "MISS", or "-" for a value reported without a target. */
const char *bench_check_result(const bench_check *check);
/* Decimal GB/s (bytes per nanosecond) of byte_count moved in ns. */
double bench_gb_per_s(uint64_t byte_count, double ns);

#endif
