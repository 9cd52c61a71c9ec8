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
    if (waited_ns < CURDI_CLOCK_SPIN_NS) {
        curdi_clock_pause();
    } else if (waited_ns < CURDI_CLOCK_YIELD_NS) {
        sched_yield();
    } else {
        /* A nap of 1% of the wait so far: a late wake-up costs at most
         * about that, and the timer's slack (50 us) is small beside it. */
        uint64_t nap_ns = waited_ns / 100u;
        if (nap_ns > CURDI_CLOCK_NAP_MAX_NS)
            nap_ns = CURDI_CLOCK_NAP_MAX_NS;
        struct timespec nap = {0, (long)nap_ns};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
            ;
    }
}
