/* clock.c - the harness's clock (clock.h). */
#include "harness/clock.h"

#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}
