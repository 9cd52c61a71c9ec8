/* progress.h - the progress line (progress.c): one line on standard
 * error, rewritten in place, only when standard error is a terminal and
 * the run has lasted a second; silent otherwise. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_PROGRESS_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_PROGRESS_H

/* The run is about to take scenario_count scenarios. */
void bench_progress_begin(unsigned scenario_count);
/* Scenario number index (from 0) starts. */
void bench_progress_scenario(unsigned index, const char *name);
/* A scenario's samples: done of total rounds. */
void bench_progress_samples(unsigned done, unsigned total);
/* Clears the line, so that what is printed next starts a clean line; the
 * next update draws it again. */
void bench_progress_clear(void);

#endif
