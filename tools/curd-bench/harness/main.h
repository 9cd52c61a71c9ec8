/* main.h - the command line and the run of a benchmark program
 * (curd-bench, curd-bench-internal): options, the device, the raw driver,
 * then each selected scenario in turn. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_MAIN_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_MAIN_H

#include "harness/common.h"

typedef struct bench_scenario_entry {
    const char *name;    /* "group/name" */
    const char *summary; /* one line for --list */
    int (*run)(const bench_env *env);
    /* Left out of a run that names no --scenario: it runs only when one
     * names it or its group (the tune/ sweeps). */
    bool on_request;
} bench_scenario_entry;

typedef struct bench_program {
    const char *name; /* for messages and --version */
    const bench_scenario_entry *scenarios;
    unsigned scenario_count;
} bench_program;

/* Exit status, the convention of every program curd ships (man
 * curd-bench): 0 when every scenario ran (MISS included, unless
 * --fail-on-miss), 1 when a check or a call failed, 2 for bad usage, 3
 * when there is no driver or no such device; two failures of the work of
 * its own: 4 when the time limit passed, 5 for a MISS under
 * --fail-on-miss. */
int bench_main(const bench_program *program, int argc, char **argv);

#endif
