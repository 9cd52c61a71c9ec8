/* clock.c - the library's one clock (see clock.h). */
#include "base/clock.h"

#include <time.h>

uint64_t curdi_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * UINT64_C(1000000000) + (uint64_t)now.tv_nsec;
}
