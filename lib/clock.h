/* clock.h - the library's one clock: monotonic nanoseconds, for the pool's
 * and the program room's timing counters, the copy team's polling
 * deadlines and the pending results' stage times. Pure: no driver, no
 * state. */
#ifndef CURD_LIB_CLOCK_H
#define CURD_LIB_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds: never goes back, counts from an
 * unspecified start; differences are durations. */
uint64_t curdi_clock_ns(void);

#endif
