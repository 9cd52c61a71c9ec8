/* copyteam.c - a few threads per device that split a large host memcpy.
 *
 * A memcpy from ordinary memory into pinned staging runs at what one core
 * can pull through its caches, well under what a PCIe gen5 DMA engine
 * takes; a few cores together keep up with it. The team is a handful of
 * threads that sleep on a condition variable between jobs. A job is an
 * array of pieces taken one at a time through an atomic index; the caller
 * takes pieces too, then waits until every worker has left the job. One
 * caller at a time owns the team; another finds it busy and copies alone
 * rather than wait. Both waits may poll for a while first (spin_ns): a
 * pipelined transfer hands the team a job per chunk, and a sleeping
 * thread's wake-up can cost as much as copying a chunk. */
#include "copyteam.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "status.h"

struct curdi_copy_team {
    pthread_mutex_t lock;
    pthread_cond_t start;
    pthread_cond_t done;
    pthread_mutex_t owner; /* held by the caller whose job runs */
    pthread_t threads[CURDI_COPY_TEAM_MAX];
    unsigned worker_count;
    size_t parallel_min;
    uint64_t spin_ns;
    bool stopping;
    /* One per job; a worker runs each serial once. Written under lock
     * (with the job's fields), read by polling workers without it. */
    _Atomic uint64_t serial;
    const curdi_copy_piece *pieces;
    size_t piece_count;
    bool streaming;
    _Atomic size_t next_piece;
    /* Workers not yet done with the current job: set under lock when the
     * job is published, counted down without it; the worker that ends it
     * signals `done` under lock. */
    _Atomic unsigned busy_workers;
};

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void spin_pause(void)
{
#if defined(__SSE2__)
    _mm_pause();
#endif
}

/* Polls until *word differs from old, for at most spin_ns; true when it
 * did. The clock is read every 64 polls. */
static bool spin_until_changed(const _Atomic uint64_t *word, uint64_t old,
                               uint64_t spin_ns)
{
    uint64_t deadline;
    if (spin_ns == 0)
        return false;
    deadline = monotonic_ns() + spin_ns;
    for (;;) {
        for (unsigned poll = 0; poll < 64; poll++) {
            if (atomic_load_explicit(word, memory_order_acquire) != old)
                return true;
            spin_pause();
        }
        if (monotonic_ns() >= deadline)
            return false;
    }
}

/* The same for the count of busy workers reaching 0. */
static void spin_until_idle(const _Atomic unsigned *busy, uint64_t spin_ns)
{
    uint64_t deadline;
    if (spin_ns == 0)
        return;
    deadline = monotonic_ns() + spin_ns;
    for (;;) {
        for (unsigned poll = 0; poll < 64; poll++) {
            if (atomic_load_explicit(busy, memory_order_acquire) == 0)
                return;
            spin_pause();
        }
        if (monotonic_ns() >= deadline)
            return;
    }
}

void curdi_copy_streaming(void *dst, const void *src, size_t byte_len)
{
#if defined(__SSE2__)
    unsigned char *to = dst;
    const unsigned char *from = src;
    /* Bytes up to the destination's next 64-byte line. */
    size_t head = (size_t)(-(uintptr_t)to & 63u);
    if (byte_len < 4096u) {
        memcpy(dst, src, byte_len);
        return;
    }
    /* head < 64 <= byte_len: the head, whole lines, then the tail, each
     * inside [dst, dst + byte_len) and [src, src + byte_len). */
    memcpy(to, from, head);
    to += head;
    from += head;
    byte_len -= head;
    for (; byte_len >= 64u; byte_len -= 64u, to += 64, from += 64) {
        /* Loads need no alignment; the stores are to a whole line. */
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)from);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(from + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(from + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(from + 48));
        _mm_stream_si128((__m128i *)(void *)to, a);
        _mm_stream_si128((__m128i *)(void *)(to + 16), b);
        _mm_stream_si128((__m128i *)(void *)(to + 32), c);
        _mm_stream_si128((__m128i *)(void *)(to + 48), d);
    }
    memcpy(to, from, byte_len);
    /* Non-temporal stores are weakly ordered: make them visible before
     * whatever tells another thread that the copy is done. */
    _mm_sfence();
#else
    memcpy(dst, src, byte_len);
#endif
}

static void copy_piece_run(const curdi_copy_piece *piece, bool streaming)
{
    /* The engine built each piece inside a staging slot and a caller range
     * that validation checked; pieces of one job do not share destination
     * bytes. */
    if (streaming)
        curdi_copy_streaming(piece->dst, piece->src, piece->byte_len);
    else
        memcpy(piece->dst, piece->src, piece->byte_len);
}

static void copy_pieces(curdi_copy_team *team,
                              const curdi_copy_piece *pieces, size_t count,
                              bool streaming)
{
    for (;;) {
        size_t index = atomic_fetch_add(&team->next_piece, 1u);
        if (index >= count)
            return;
        copy_piece_run(&pieces[index], streaming);
    }
}

static void *copy_worker(void *argument)
{
    curdi_copy_team *team = argument;
    uint64_t seen = 0;
    for (;;) {
        const curdi_copy_piece *pieces;
        size_t count;
        bool streaming;
        /* A job seen while polling is read under the lock all the same. */
        (void)spin_until_changed(&team->serial, seen, team->spin_ns);
        pthread_mutex_lock(&team->lock);
        while (!team->stopping && atomic_load(&team->serial) == seen)
            pthread_cond_wait(&team->start, &team->lock);
        if (team->stopping) {
            pthread_mutex_unlock(&team->lock);
            break;
        }
        seen = atomic_load(&team->serial);
        pieces = team->pieces;
        count = team->piece_count;
        streaming = team->streaming;
        pthread_mutex_unlock(&team->lock);
        copy_pieces(team, pieces, count, streaming);
        if (atomic_fetch_sub_explicit(&team->busy_workers, 1u,
                                      memory_order_acq_rel)
            == 1u) {
            /* Under the lock, so a caller between its check and its wait
             * cannot miss it. */
            pthread_mutex_lock(&team->lock);
            pthread_cond_signal(&team->done);
            pthread_mutex_unlock(&team->lock);
        }
    }
    return NULL;
}

curd_status curdi_copy_team_create(const curdi_copy_team_config *config,
                                   curdi_copy_team **out_team)
{
    curdi_copy_team *team;
    sigset_t all_signals;
    sigset_t previous;
    unsigned worker_count = config->worker_count;
    if (worker_count == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        /* Leave one processor to the caller, who copies too. */
        worker_count = online > 1 ? (unsigned)(online - 1) : 0u;
        if (worker_count > CURDI_COPY_TEAM_AUTO_MAX)
            worker_count = CURDI_COPY_TEAM_AUTO_MAX;
    }
    if (worker_count > CURDI_COPY_TEAM_MAX)
        worker_count = CURDI_COPY_TEAM_MAX;
    team = calloc(1, sizeof *team);
    if (team == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate a copy team. Fix: free host"
                          " memory.");
    if (pthread_mutex_init(&team->lock, NULL) != 0
        || pthread_mutex_init(&team->owner, NULL) != 0
        || pthread_cond_init(&team->start, NULL) != 0
        || pthread_cond_init(&team->done, NULL) != 0) {
        /* Initialising these never fails on Linux with default attributes;
         * should it, a team of no workers still copies correctly. */
        free(team);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise a copy team's locks. Fix:"
                          " free system resources.");
    }
    team->parallel_min = config->parallel_min;
    team->spin_ns = config->spin_ns;
    /* The workers take no signals: those belong to the application's own
     * threads. */
    sigfillset(&all_signals);
    pthread_sigmask(SIG_SETMASK, &all_signals, &previous);
    for (unsigned index = 0; index < worker_count; index++) {
        if (pthread_create(&team->threads[index], NULL, copy_worker,
                           team)
            != 0)
            break;
        team->worker_count++;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    *out_team = team;
    return CURD_OK;
}

void curdi_copy_team_destroy(curdi_copy_team *team)
{
    if (team == NULL)
        return;
    pthread_mutex_lock(&team->lock);
    team->stopping = true;
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);
    for (unsigned index = 0; index < team->worker_count; index++)
        pthread_join(team->threads[index], NULL);
    pthread_cond_destroy(&team->done);
    pthread_cond_destroy(&team->start);
    pthread_mutex_destroy(&team->owner);
    pthread_mutex_destroy(&team->lock);
    free(team);
}

unsigned curdi_copy_team_workers(const curdi_copy_team *team)
{
    return team != NULL ? team->worker_count : 0u;
}

void curdi_copy_team_run(curdi_copy_team *team, const curdi_copy_piece *pieces,
                         size_t count, bool streaming)
{
    size_t total = 0;
    for (size_t index = 0;
         team != NULL && index < count && total < team->parallel_min; index++)
        total += pieces[index].byte_len;
    if (team == NULL || team->worker_count == 0 || count < 2
        || total < team->parallel_min
        || pthread_mutex_trylock(&team->owner) != 0) {
        for (size_t index = 0; index < count; index++)
            copy_piece_run(&pieces[index], streaming);
        return;
    }
    pthread_mutex_lock(&team->lock);
    team->pieces = pieces;
    team->piece_count = count;
    team->streaming = streaming;
    atomic_store(&team->next_piece, 0u);
    atomic_store(&team->busy_workers, team->worker_count);
    /* Release: a worker that polls the serial then takes the lock and
     * reads the job under it. */
    atomic_fetch_add_explicit(&team->serial, 1u, memory_order_release);
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);

    copy_pieces(team, pieces, count, streaming);

    /* Every worker must leave this job before the pieces (the caller's
     * memory) go out of scope and before the next job is published. */
    spin_until_idle(&team->busy_workers, team->spin_ns);
    pthread_mutex_lock(&team->lock);
    while (atomic_load(&team->busy_workers) != 0)
        pthread_cond_wait(&team->done, &team->lock);
    team->pieces = NULL;
    team->piece_count = 0;
    pthread_mutex_unlock(&team->lock);
    pthread_mutex_unlock(&team->owner);
}
