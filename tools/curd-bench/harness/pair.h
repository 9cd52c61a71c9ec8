/* pair.h - a second device for the scenarios that need two GPUs (peer
 * copies, the graph batch), or every visible GPU (the all-reduces): the
 * run's device and the next ones, each as a
 * bench_env, so every raw helper (bench_raw_enter, bench_stream_acquire,
 * the raw set-up copies) serves either side. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_PAIR_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_PAIR_H

#include "harness/common.h"

/* Opens the device after env's (ordinal + 1, wrapping to 0) with curd and
 * retains its primary context, into *second, which takes every other
 * setting from env. Returns 1 with *second untouched when the machine has
 * fewer than two devices, after reporting scenario `name` skipped ("needs
 * 2 GPUs"); 0 when opened; -1 after bench_fail(). */
int bench_pair_open(const bench_env *env, const char *name,
                    bench_env *second);
/* Releases what bench_pair_open opened (nothing when it did not). */
void bench_pair_close(bench_env *second);

/* Every visible GPU, up to `most`, for the scenarios that take them all:
 * env's device is rank 0, others[i - 1] the device i after it (wrapping),
 * each opened as bench_pair_open opens one. *out_count is the number of
 * ranks, env's included (1 on a machine of one GPU). 0 when opened; -1
 * after bench_fail(), nothing left open. */
int bench_gang_open(const bench_env *env, int most, bench_env *others,
                    int *out_count);
/* Releases what bench_gang_open opened for count ranks. */
void bench_gang_close(bench_env *others, int count);

#endif
