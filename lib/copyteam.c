/* copyteam.c - a few threads per device that split a large host memcpy.
 *
 * A memcpy from ordinary memory into pinned staging runs at what one core
 * can pull through its caches, well under what a PCIe gen5 DMA engine
 * takes; a few cores together keep up with it. The team is a handful of
 * threads that sleep on a condition variable between jobs. A job is an
 * array of pieces taken one at a time through an atomic index; the caller
 * takes pieces too, then waits until every worker has left the job. One
 * caller at a time owns the team; another finds it busy and copies alone
 * rather than wait. */
#include "copyteam.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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
    bool stopping;
    uint64_t serial; /* one per job; a worker runs each serial once */
    const curdi_copy_piece *pieces;
    size_t piece_count;
    bool streaming;
    _Atomic size_t next_piece;
    unsigned busy_workers; /* workers not yet done with the current job */
};

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
    pthread_mutex_lock(&team->lock);
    for (;;) {
        const curdi_copy_piece *pieces;
        size_t count;
        bool streaming;
        while (!team->stopping && team->serial == seen)
            pthread_cond_wait(&team->start, &team->lock);
        if (team->stopping)
            break;
        seen = team->serial;
        pieces = team->pieces;
        count = team->piece_count;
        streaming = team->streaming;
        pthread_mutex_unlock(&team->lock);
        copy_pieces(team, pieces, count, streaming);
        pthread_mutex_lock(&team->lock);
        if (--team->busy_workers == 0)
            pthread_cond_signal(&team->done);
    }
    pthread_mutex_unlock(&team->lock);
    return NULL;
}

curd_status curdi_copy_team_create(unsigned worker_count, size_t parallel_min,
                                   curdi_copy_team **out_team)
{
    curdi_copy_team *team;
    sigset_t all_signals;
    sigset_t previous;
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
    team->parallel_min = parallel_min;
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
    team->busy_workers = team->worker_count;
    team->serial++;
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);

    copy_pieces(team, pieces, count, streaming);

    /* Every worker must leave this job before the pieces (the caller's
     * memory) go out of scope and before the next job is published. */
    pthread_mutex_lock(&team->lock);
    while (team->busy_workers != 0)
        pthread_cond_wait(&team->done, &team->lock);
    team->pieces = NULL;
    team->piece_count = 0;
    pthread_mutex_unlock(&team->lock);
    pthread_mutex_unlock(&team->owner);
}
