/* clock.h - the library's one clock: monotonic nanoseconds, for the pool's
 * and the program module's timing counters, the copy team's and the fence
 * module's polling deadlines and the pending results' stage times; and the
 * pause every polling loop takes between two polls. Pure: no driver, no
 * state. */
#ifndef CURD_LIB_BASE_CLOCK_H
#define CURD_LIB_BASE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds: never goes back, counts from an
 * unspecified start; differences are durations. */
uint64_t curdi_clock_ns(void);

/* One pause of a loop that polls memory another thread or the device
 * writes: tells the core it spins (x86 PAUSE, arm64 YIELD), so a sibling
 * hyperthread gets the core and the loop's exit skips the pipeline flush
 * a plain spin pays; nothing elsewhere. */
static inline void curdi_clock_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Between two polls of work that may take long (a collective waiting on
 * its peers), waited_ns into the wait: spins for the first 50 us (a small
 * collective completes in tens of microseconds), then yields the core up
 * to 50 ms, then sleeps 1% of the time waited so far (at most 2 ms). A
 * sleep's granularity (the timer's 50 us slack and more) would be seen in
 * every collective from 64 KiB to hundreds of MiB, which take 20 us to
 * a few ms; yielding costs them nothing, and past 50 ms a wake-up late by
 * 1% costs little CPU and little time. */
#define CURDI_CLOCK_SPIN_NS 50000u
#define CURDI_CLOCK_YIELD_NS 50000000u
#define CURDI_CLOCK_NAP_MAX_NS 2000000u
void curdi_clock_poll_pause(uint64_t waited_ns);

#endif
