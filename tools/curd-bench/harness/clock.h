/* clock.h - the one clock of the harness: CLOCK_MONOTONIC in nanoseconds,
 * for the samples, the progress line and the run's wall time. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_CLOCK_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_CLOCK_H

#include <stdint.h>

uint64_t bench_now_ns(void);

#endif
