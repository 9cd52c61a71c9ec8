/* team.h - the same operation on k threads at once, for throughput
 * variants (pool/threads), and for work that must run on several threads
 * at once (collective/graph-batch: a batch per rank, each on its own
 * thread, ops_per_iteration 1, so a per-op time is the slowest worker's).
 *
 * A team's workers are created once and wait on a barrier between
 * samples; a sample releases them, each runs the same number of
 * iterations of its operation, and the sample ends when the last one is
 * done. The variant's per-op time is then wall time over the operations
 * of all threads (ops_per_iteration = the thread count), so ops/s is
 * 1e9 / per-op ns and a speedup is the 1-thread per-op time over the
 * k-thread one. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_TEAM_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_TEAM_H

#include "harness/common.h"

#define BENCH_TEAM_MAX_THREADS 8

typedef struct bench_team bench_team;

/* Runs once on each worker's own thread before its first sample (memory
 * made there comes from that thread's malloc arena); 0, or -1 after
 * bench_fail(), which fails the team's first sample. */
typedef int (*bench_team_start_fn)(void *context, unsigned worker);

/* 0 and *out, or -1 after bench_fail(). on_start may be NULL. */
int bench_team_start(bench_team **out, unsigned thread_count,
                     bench_team_start_fn on_start, void *start_context);
/* Joins the workers and frees the team; NULL is a no-op. */
void bench_team_stop(bench_team *team);

/* What a team runs in one sample: op on every worker, each with its own
 * context (contexts[worker]). */
typedef struct bench_team_work {
    bench_team *team;
    bench_op_fn op;
    void *contexts[BENCH_TEAM_MAX_THREADS];
} bench_team_work;

/* A bench_op_fn over a bench_team_work. */
int bench_team_run(void *work, uint64_t iterations);

#endif
