/* report-csv.h - the run as CSV (report-csv.c): one row per variant. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_CSV_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_CSV_H

#include <stdio.h>

#include "harness/report-run.h"

/* The CSV's header line, without its newline; bench/peers writes the
 * same columns. */
#define BENCH_CSV_HEADER                                                      \
    "scenario,variant,role,size_bytes,threads,median,p10,p90,unit,"          \
    "ratio_vs_raw"

void bench_report_write_csv(FILE *out, const bench_report_run *run);

#endif
