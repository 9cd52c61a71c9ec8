/* report.h - the report (report.c): a table on standard output as each
 * scenario finishes, then the summary, the JSON (report-json.c) and the
 * CSV (report-csv.c). report.c dispatches to the writers; they share
 * report-run.h and never call back into it. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_H

#include <stdbool.h>

#include "harness/common.h"

typedef struct bench_report_options {
    bool json_stdout;       /* JSON on stdout, no table */
    const char *json_path;  /* also write JSON here (NULL: no) */
    bool csv_stdout;        /* CSV on stdout, no table */
    const char *csv_path;   /* also write CSV here (NULL: no) */
} bench_report_options;

void bench_report_begin(const bench_env *env,
                        const bench_report_options *options);
/* Hands a finished scenario to the report (printed as text at once unless
 * the run prints JSON to standard output). */
void bench_report_scenario(const bench_scenario *scenario);
/* A variant that could not run here (a driver entry missing). */
void bench_report_skip(const char *scenario_name, const char *reason);
/* Prints the summary, writes the JSON and the CSV; returns the number of
 * MISSes, or -1 if a file could not be written (errno says why). failure:
 * NULL, or the sentence of the failure that stopped the run. */
int bench_report_end(const char *failure);

#endif
