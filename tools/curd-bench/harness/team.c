/* team.c - the same operation on k threads at once. */
#include "harness/team.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct team_worker {
    bench_team *team;
    unsigned index;
    pthread_t thread;
    bool started;
} team_worker;

struct bench_team {
    unsigned thread_count;
    pthread_barrier_t start;
    pthread_barrier_t done;
    bool barriers_ready;
    team_worker workers[BENCH_TEAM_MAX_THREADS];
    bench_team_start_fn on_start;
    void *start_context;
    /* Written by the main thread before the start barrier, read by the
     * workers after it (the barrier orders the accesses). */
    const bench_team_work *work;
    uint64_t iterations;
    bool quit;
    atomic_int failures;
};

static void *worker_main(void *opaque)
{
    team_worker *worker = opaque;
    bench_team *team = worker->team;
    /* A failure here fails the first sample; the worker still meets the
     * others at every barrier. */
    if (team->on_start != NULL &&
        team->on_start(team->start_context, worker->index) != 0)
        atomic_fetch_add(&team->failures, 1);
    for (;;) {
        pthread_barrier_wait(&team->start);
        if (team->quit)
            break;
        if (team->work->op(team->work->contexts[worker->index],
                           team->iterations) != 0)
            atomic_fetch_add(&team->failures, 1);
        pthread_barrier_wait(&team->done);
    }
    return NULL;
}

int bench_team_run(void *opaque, uint64_t iterations)
{
    const bench_team_work *work = opaque;
    bench_team *team = work->team;
    team->work = work;
    team->iterations = iterations;
    pthread_barrier_wait(&team->start);
    pthread_barrier_wait(&team->done);
    return atomic_load(&team->failures) != 0 ? -1 : 0;
}

void bench_team_stop(bench_team *team)
{
    unsigned index;
    if (team == NULL)
        return;
    if (team->barriers_ready) {
        team->quit = true;
        pthread_barrier_wait(&team->start);
    }
    for (index = 0; index < team->thread_count; index++)
        if (team->workers[index].started)
            pthread_join(team->workers[index].thread, NULL);
    if (team->barriers_ready) {
        pthread_barrier_destroy(&team->start);
        pthread_barrier_destroy(&team->done);
    }
    free(team);
}

int bench_team_start(bench_team **out, unsigned thread_count,
                     bench_team_start_fn on_start, void *start_context)
{
    unsigned index;
    bench_team *team;
    if (thread_count == 0 || thread_count > BENCH_TEAM_MAX_THREADS)
        return bench_fail("a team of %u threads (1 to %d)", thread_count,
                          BENCH_TEAM_MAX_THREADS);
    team = calloc(1, sizeof *team);
    if (team == NULL)
        return bench_fail("out of memory for a team of %u threads",
                          thread_count);
    team->thread_count = thread_count;
    team->on_start = on_start;
    team->start_context = start_context;
    atomic_init(&team->failures, 0);
    /* All the workers and the main thread meet at each barrier. */
    if (pthread_barrier_init(&team->start, NULL, thread_count + 1) != 0)
        goto fail;
    if (pthread_barrier_init(&team->done, NULL, thread_count + 1) != 0) {
        pthread_barrier_destroy(&team->start);
        goto fail;
    }
    team->barriers_ready = true;
    for (index = 0; index < thread_count; index++) {
        team_worker *worker = &team->workers[index];
        worker->team = team;
        worker->index = index;
        if (pthread_create(&worker->thread, NULL, worker_main, worker) !=
            0) {
            /* The started workers wait at a start barrier that can never
             * fill, so the team is left as it is (stopping it would wait
             * forever) and the run fails; main() ends the process. */
            *out = NULL;
            return bench_fail("pthread_create of worker %u of %u failed",
                              index + 1, thread_count);
        }
        worker->started = true;
    }
    *out = team;
    return 0;

fail:
    free(team);
    return bench_fail("pthread_barrier_init failed");
}
