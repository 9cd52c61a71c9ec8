/* clock.c - the library's one clock (see clock.h). */
#include "base/clock.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

uint64_t curdi_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * UINT64_C(1000000000) + (uint64_t)now.tv_nsec;
}

void curdi_clock_poll_pause(uint64_t waited_ns)
{
    if (waited_ns < 50000u) {
        curdi_clock_pause();
    } else if (waited_ns < 2000000u) {
        sched_yield();
    } else {
        struct timespec nap = {0, 50000};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
            ;
    }
}
