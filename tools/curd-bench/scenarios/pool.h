/* pool.h - what the pool scenarios of curd-bench (scenarios/pool.c) and
 * of curd-bench-internal (tools/curd-bench/internal/) share: the public block loop,
 * priming, the pool's hit counters, the thread counts and their targets. */
#ifndef CURD_TOOLS_CURD_BENCH_SCENARIOS_POOL_H
#define CURD_TOOLS_CURD_BENCH_SCENARIOS_POOL_H

#include "harness/common.h"
#include "harness/team.h"

#define BENCH_POOL_BLOCK_BYTES (4 * BENCH_KIB)

/* pool/threads runs every variant at these thread counts. */
#define BENCH_POOL_THREAD_COUNTS 4
extern const unsigned bench_pool_thread_counts[BENCH_POOL_THREAD_COUNTS];
/* "Near-linear": a k-thread rate of at least this fraction of k times the
 * 1-thread rate. */
#define BENCH_POOL_EFFICIENCY_TARGET 0.75

/* curd_block_acquire + curd_block_release of byte_len bytes from the
 * device's pool of kind: what an application pays for a cache hit. */
typedef struct bench_block_loop {
    const bench_env *env;
    curd_pool_kind kind;
    size_t byte_len;
} bench_block_loop;
/* A bench_op_fn over a bench_block_loop. */
int bench_block_acquire_release(void *loop, uint64_t iterations);

/* Leaves `blocks` blocks of byte_len cached in the pool (each a miss
 * once), so that as many threads can hit at once. */
int bench_prime_pool(const bench_env *env, curd_pool_kind kind,
                     size_t byte_len, unsigned blocks);

/* A pool's hit and miss counters (curd_device_stats) over the timed
 * samples: armed before bench_measure, noted after it. */
typedef struct bench_hit_counters {
    const bench_env *env;
    curd_pool_kind kind;
    uint64_t hits;
    uint64_t misses;
} bench_hit_counters;
void bench_watch_hits(bench_scenario *scenario, bench_hit_counters *counters,
                      const bench_env *env, curd_pool_kind kind);
void bench_note_hits(bench_scenario *scenario,
                     const bench_hit_counters *counters);

/* The near-linear targets: for every thread count past the first, the
 * speedup of index_of[count] over index_of[0]. */
void bench_check_team_speedups(bench_scenario *scenario,
                               const int index_of[BENCH_POOL_THREAD_COUNTS]);

/* The team runs at every thread count: teams[count] has
 * bench_pool_thread_counts[count] workers. */
int bench_pool_teams_start(bench_team *teams[BENCH_POOL_THREAD_COUNTS],
                           bench_team_start_fn on_start, void *context);
void bench_pool_teams_stop(bench_team *teams[BENCH_POOL_THREAD_COUNTS]);

/* "<what>, 1 thread", "<what>, 8 threads": the label of a team variant,
 * kept in labels (the scenario keeps the pointer). */
const char *bench_team_label(char *labels, size_t capacity, const char *what,
                             unsigned thread_count);

#endif
