/* tuned.h - devices opened under the library's tuning variables
 * (tuned.c): libcurd reads CURD_TRANSFER_PATH, CURD_COPY_THREADS, ...
 * (man curd) when a device opens, so a scenario compares settings side by
 * side by opening one more curd_device of the same ordinal per setting
 * (they share the primary context, and the raw driver's view of it). */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_TUNED_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_TUNED_H

#include "harness/common.h"

typedef struct bench_tuned {
    bench_env env; /* the run's, with a device of its own */
    bool open;
} bench_tuned;

/* Opens env's device again with settings ("NAME=VALUE" strings, NULL
 * ended; NULL: none) set in the environment while it opens; the run's own
 * values of those variables are put back after. 0, or -1 after
 * bench_fail(). */
int bench_tuned_open(bench_tuned *tuned, const bench_env *env,
                     const char *const *settings);
/* Closes it (nothing when not open). */
void bench_tuned_close(bench_tuned *tuned);
/* The CURD_ variables of this process's environment but CURD_LIBCUDA,
 * "NAME=VALUE" separated by spaces, into out; "" when there are none. */
void bench_tuning_environment(char *out, size_t capacity);

#endif
