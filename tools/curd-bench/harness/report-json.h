/* report-json.h - the run as JSON (report-json.c), through
 * tools/json-writer.c. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_JSON_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_REPORT_JSON_H

#include <stdio.h>

#include "harness/report-run.h"

void bench_report_write_json(FILE *out, const bench_report_run *run);

#endif
