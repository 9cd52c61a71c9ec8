/* copy_team.c - a few threads per device that split a large host memcpy.
 *
 * A memcpy from ordinary memory into pinned staging runs at what one core
 * can pull through its caches, well under what a PCIe gen5 DMA engine
 * takes; a few cores together keep up with it. The team is a handful of
 * threads that sleep on a condition variable between jobs. A job is an
 * array of pieces taken one at a time through an atomic index; the caller
 * takes pieces too. One caller at a time owns the team; another finds it
 * busy and copies alone rather than wait.
 *
 * A worker joins a job only while it is open: it counts itself in, then
 * checks the job is still the open one. When the caller has copied what
 * it could take, it closes the job and waits only for the workers that
 * joined (the check after counting in makes a late one leave without
 * touching the pieces). So a worker still waking up never holds a caller
 * back: a small job costs at most what the caller copies alone.
 *
 * Waking a sleeping thread costs several microseconds, as much as copying
 * 64 KiB. A caller that knows a job is coming (a download whose DMA is on
 * its way) warms the team first (curdi_copy_team_warm): the workers it
 * wakes poll for the job instead of sleeping, until the caller cools the
 * team or the time it gave runs out. Idle workers and a caller waiting
 * for its job's end may also poll for spin_ns before they sleep. */
#include "transfer/copy_team.h"

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

#include "base/clock.h"
#include "base/status.h"

/* How long a caller polls for the workers still copying pieces of its
 * job before it sleeps: a few pieces' time. */
#define CURDI_COPY_JOIN_SPIN_NS 200000u

struct curdi_copy_team {
    pthread_mutex_t lock;
    pthread_cond_t start;
    pthread_cond_t done;
    pthread_mutex_t owner; /* held by the caller whose job runs */
    pthread_t threads[CURDI_COPY_TEAM_MAX];
    unsigned worker_count;
    /* Held by the caller that grew the team, until it shrinks it back
     * (curdi_copy_team_grow): one growth at a time. */
    pthread_mutex_t growth;
    pthread_t added_threads[CURDI_COPY_TEAM_MAX];
    /* Threads the growth asked for, and those started (the first of them
     * starts the rest; see added_worker). */
    unsigned added_wanted;
    _Atomic unsigned added_started;
    /* A growth ended but not yet joined: its threads leave on their own,
     * and the next growth (or the team's end) joins them, so that the
     * caller ending a growth does not wait for threads to exit. */
    bool added_to_join;
    /* Set when a growth ends, until its threads are joined: its added
     * workers poll it as they poll for jobs, and leave. */
    _Atomic bool added_leaving;
    size_t parallel_min;
    uint64_t spin_ns;
    bool stopping;
    /* One per job; a worker looks at each serial once. Written under lock
     * (with the job's fields), read by polling workers without it. */
    _Atomic uint64_t serial;
    /* The serial of the job workers may join now; 0 once it is closed. */
    _Atomic uint64_t open_serial;
    /* The open job: copies (pieces) or comparisons (compares, the other
     * NULL), piece_count of them. */
    const curdi_copy_piece *pieces;
    const curdi_compare_piece *compares;
    size_t piece_count;
    bool streaming;
    /* A comparison found a difference: the pieces left are skipped. */
    _Atomic bool differs;
    _Atomic size_t next_piece;
    /* Workers inside the open job (counted in before they check it is
     * still open); the one that leaves last signals `done` under lock. */
    _Atomic unsigned busy_workers;
    /* Until this monotonic time, idle workers poll for a job rather than
     * sleep (curdi_copy_team_warm); 0: not warm. */
    _Atomic uint64_t warm_until_ns;
    /* Sleepers still to wake for the warming: each worker woken for it
     * wakes the next, so the caller pays for one wake-up only. */
    _Atomic unsigned warm_wanted;
};

/* Polls until *word differs from old, for at most spin_ns or until
 * *warm_until_ns passes, whichever is later, or until *leave (NULL: never)
 * is set; true when *word changed. The clock is read every 64 polls. */
static bool spin_until_changed(const _Atomic uint64_t *word, uint64_t old,
                               uint64_t spin_ns,
                               const _Atomic uint64_t *warm_until_ns,
                               const _Atomic bool *leave)
{
    uint64_t start;
    if (spin_ns == 0
        && atomic_load_explicit(warm_until_ns, memory_order_relaxed) == 0)
        return false;
    start = curdi_clock_ns();
    for (;;) {
        uint64_t now;
        for (unsigned poll = 0; poll < 64; poll++) {
            if (atomic_load_explicit(word, memory_order_acquire) != old)
                return true;
            curdi_clock_pause();
        }
        if (leave != NULL && atomic_load(leave))
            return false;
        now = curdi_clock_ns();
        if (now - start >= spin_ns
            && now >= atomic_load_explicit(warm_until_ns,
                                           memory_order_relaxed))
            return false;
    }
}

/* Polls for the count of busy workers reaching 0, for at most spin_ns. */
static void spin_until_idle(const _Atomic unsigned *busy, uint64_t spin_ns)
{
    uint64_t deadline = curdi_clock_ns() + spin_ns;
    for (;;) {
        for (unsigned poll = 0; poll < 64; poll++) {
            if (atomic_load_explicit(busy, memory_order_acquire) == 0)
                return;
            curdi_clock_pause();
        }
        if (curdi_clock_ns() >= deadline)
            return;
    }
}

/* curdi_copy_team_streaming without its fence: a run of pieces fences once,
 * at its end (stream_fence). With a fence per piece, 64 pieces of 4 KiB
 * took 5 us longer than with memcpy; fenced once, 3 to 7 us shorter
 * (doc/PERFORMANCE.md, tenth run). */
static void stream_unfenced(void *dst, const void *src, size_t byte_len)
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
#else
    memcpy(dst, src, byte_len);
#endif
}

/* Non-temporal stores are weakly ordered: make them visible before
 * whatever tells another thread (or the DMA) that the copy is done. */
static void stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

void curdi_copy_team_streaming(void *dst, const void *src, size_t byte_len)
{
    stream_unfenced(dst, src, byte_len);
    stream_fence();
}

/* The engine built each piece inside a staging slot and a caller range
 * that validation checked; pieces of one job do not share destination
 * bytes. A streaming run ends with stream_fence. */
static void copy_piece_run(const curdi_copy_piece *piece, bool streaming)
{
    if (streaming)
        stream_unfenced(piece->dst, piece->src, piece->byte_len);
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
            break;
        copy_piece_run(&pieces[index], streaming);
    }
    if (streaming)
        stream_fence();
}

/* Compares pieces until none is left or one differs; the ranges are the
 * caller's, read only. */
static void compare_pieces(curdi_copy_team *team,
                           const curdi_compare_piece *pieces, size_t count)
{
    while (!atomic_load_explicit(&team->differs, memory_order_relaxed)) {
        size_t index = atomic_fetch_add(&team->next_piece, 1u);
        if (index >= count)
            break;
        if (memcmp(pieces[index].left, pieces[index].right,
                   pieces[index].byte_len)
            != 0)
            atomic_store_explicit(&team->differs, true, memory_order_relaxed);
    }
}

/* The open job's pieces that are left, whichever kind it is. */
static void job_work(curdi_copy_team *team)
{
    if (team->compares != NULL)
        compare_pieces(team, team->compares, team->piece_count);
    else
        copy_pieces(team, team->pieces, team->piece_count, team->streaming);
}

/* Whether a worker that found no new job should poll instead of sleep. */
static bool team_warm(curdi_copy_team *team)
{
    uint64_t until =
        atomic_load_explicit(&team->warm_until_ns, memory_order_relaxed);
    return until != 0 && curdi_clock_ns() < until;
}

/* Takes one wake-up from those the warming still wants. */
static bool wake_wanted(curdi_copy_team *team)
{
    unsigned wanted = atomic_load(&team->warm_wanted);
    while (wanted != 0)
        if (atomic_compare_exchange_weak(&team->warm_wanted, &wanted,
                                         wanted - 1u))
            return true;
    return false;
}

/* A worker's turn at job `serial`: it counts itself in, then copies only
 * if the job is still open (see the top of this file). */
static void join_job(curdi_copy_team *team, uint64_t serial)
{
    atomic_fetch_add(&team->busy_workers, 1u);
    if (atomic_load(&team->open_serial) == serial)
        job_work(team);
    if (atomic_fetch_sub(&team->busy_workers, 1u) == 1u) {
        /* Under the lock, so a caller between its check and its wait
         * cannot miss it. */
        pthread_mutex_lock(&team->lock);
        pthread_cond_signal(&team->done);
        pthread_mutex_unlock(&team->lock);
    }
}

/* A worker's life: wait for a job (polling while warm), join it, again,
 * until the team stops or, for a worker that a growth added (leave not
 * NULL), until *leave is set. It starts having seen job `seen`. */
static void worker_loop(curdi_copy_team *team, uint64_t seen,
                        const _Atomic bool *leave)
{
    for (;;) {
        bool stopping;
        (void)spin_until_changed(&team->serial, seen, team->spin_ns,
                                 &team->warm_until_ns, leave);
        pthread_mutex_lock(&team->lock);
        while (!team->stopping && (leave == NULL || !atomic_load(leave))
               && atomic_load(&team->serial) == seen && !team_warm(team))
            pthread_cond_wait(&team->start, &team->lock);
        stopping = team->stopping || (leave != NULL && atomic_load(leave));
        if (!stopping && atomic_load(&team->serial) == seen
            && wake_wanted(team))
            pthread_cond_signal(&team->start);
        pthread_mutex_unlock(&team->lock);
        if (stopping)
            break;
        /* Woken to warm up, with no job yet: back to polling. */
        if (atomic_load(&team->serial) == seen)
            continue;
        seen = atomic_load(&team->serial);
        join_job(team, seen);
    }
}

static void *copy_worker(void *argument)
{
    worker_loop(argument, 0, NULL);
    return NULL;
}

static unsigned start_threads(curdi_copy_team *team, pthread_t *threads,
                              unsigned count, void *(*body)(void *));

/* A worker a growth added: the job open when it starts is left to those
 * already in it. */
static void *added_worker(void *argument)
{
    curdi_copy_team *team = argument;
    worker_loop(team, atomic_load(&team->serial), &team->added_leaving);
    return NULL;
}

/* The first thread of a growth starts the others, so that its caller
 * pays for one thread's start (about 17 us each on the H100's host) and
 * copies meanwhile; then it works like them. */
static void *added_starter(void *argument)
{
    curdi_copy_team *team = argument;
    unsigned started =
        start_threads(team, team->added_threads + 1,
                      team->added_wanted - 1u, added_worker);
    /* join_added reads the count after it has joined this thread. */
    atomic_store(&team->added_started, 1u + started);
    return added_worker(team);
}

/* Joins the threads of a growth that ended, if any, and lets the next
 * growth's stay. The caller holds `growth` (or is the team's end). */
static void join_added(curdi_copy_team *team)
{
    unsigned started;
    if (!team->added_to_join)
        return;
    /* The starter has started every other thread before it works, so
     * once it is joined the count is final. */
    pthread_join(team->added_threads[0], NULL);
    started = atomic_load(&team->added_started);
    for (unsigned index = 1; index < started; index++)
        pthread_join(team->added_threads[index], NULL);
    team->added_to_join = false;
    atomic_store(&team->added_leaving, false);
}

/* A worker's stack: it only copies and waits. Far below the default
 * 8 MiB, so that starting a growth's threads and ending them (the stacks
 * go back to the C library's cache rather than to the system) cost a long
 * upload little. */
#define CURDI_COPY_WORKER_STACK_BYTES ((size_t)256 * 1024)

/* Starts up to count threads running `body` into threads[], with every
 * signal blocked in them (signals belong to the application's own
 * threads); returns how many started. */
static unsigned start_threads(curdi_copy_team *team, pthread_t *threads,
                              unsigned count, void *(*body)(void *))
{
    pthread_attr_t attributes;
    sigset_t all_signals;
    sigset_t previous;
    unsigned started = 0;
    if (pthread_attr_init(&attributes) != 0)
        return 0;
    /* Should the size be refused, the default stands. */
    (void)pthread_attr_setstacksize(&attributes, CURDI_COPY_WORKER_STACK_BYTES);
    sigfillset(&all_signals);
    pthread_sigmask(SIG_SETMASK, &all_signals, &previous);
    while (started < count
           && pthread_create(&threads[started], &attributes, body, team) == 0)
        started++;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
    return started;
}

curd_status curdi_copy_team_create(const curdi_copy_team_config *config,
                                   curdi_copy_team **out_team)
{
    curdi_copy_team *team;
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
        || pthread_mutex_init(&team->growth, NULL) != 0
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
    team->worker_count =
        start_threads(team, team->threads, worker_count, copy_worker);
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
    /* No growth is in place: its caller ended it before the device could
     * close. */
    join_added(team);
    pthread_cond_destroy(&team->done);
    pthread_cond_destroy(&team->start);
    pthread_mutex_destroy(&team->growth);
    pthread_mutex_destroy(&team->owner);
    pthread_mutex_destroy(&team->lock);
    free(team);
}

unsigned curdi_copy_team_workers(const curdi_copy_team *team)
{
    return team != NULL ? team->worker_count : 0u;
}

unsigned curdi_copy_team_grow(curdi_copy_team *team, unsigned count)
{
    if (team == NULL || count == 0)
        return 0;
    if (count > CURDI_COPY_TEAM_MAX)
        count = CURDI_COPY_TEAM_MAX;
    if (pthread_mutex_trylock(&team->growth) != 0)
        return 0;
    join_added(team);
    team->added_wanted = count;
    atomic_store(&team->added_started, 0u);
    if (start_threads(team, team->added_threads, 1, added_starter) == 0) {
        pthread_mutex_unlock(&team->growth);
        return 0;
    }
    return count;
}

void curdi_copy_team_shrink(curdi_copy_team *team, unsigned added)
{
    if (team == NULL || added == 0)
        return;
    atomic_store(&team->added_leaving, true);
    /* Under the lock, so an added worker between its check and its wait
     * cannot miss it; the team's own workers wake, find nothing and sleep
     * again. */
    pthread_mutex_lock(&team->lock);
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);
    team->added_to_join = true;
    pthread_mutex_unlock(&team->growth);
}

uint64_t curdi_copy_team_warm(curdi_copy_team *team, unsigned workers,
                              uint64_t within_ns)
{
    uint64_t until;
    if (team == NULL || team->worker_count == 0 || workers == 0)
        return 0;
    if (workers > team->worker_count)
        workers = team->worker_count;
    /* Never 0, which means cool. */
    until = curdi_clock_ns() + within_ns + 1u;
    atomic_store_explicit(&team->warm_until_ns, until, memory_order_relaxed);
    /* One signal wakes at most one sleeper, which wakes the next while
     * the warming wants more (a signal with no sleeper is lost: those
     * workers are polling already). */
    atomic_store(&team->warm_wanted, workers - 1u);
    pthread_mutex_lock(&team->lock);
    pthread_cond_signal(&team->start);
    pthread_mutex_unlock(&team->lock);
    return until;
}

void curdi_copy_team_cool(curdi_copy_team *team, uint64_t warmth)
{
    /* Only this caller's warming: another caller may have warmed the team
     * since, for a transfer still running. */
    if (team != NULL && warmth != 0
        && atomic_compare_exchange_strong(&team->warm_until_ns, &warmth, 0u))
        atomic_store(&team->warm_wanted, 0u);
}

/* Opens a job of count pieces (copies or compares) to the workers; the
 * caller owns the team. No worker is inside a job: the last caller
 * waited for them all. */
static void job_open(curdi_copy_team *team, const curdi_copy_piece *pieces,
                     const curdi_compare_piece *compares, size_t count,
                     bool streaming)
{
    pthread_mutex_lock(&team->lock);
    team->pieces = pieces;
    team->compares = compares;
    team->piece_count = count;
    team->streaming = streaming;
    atomic_store(&team->differs, false);
    atomic_store(&team->next_piece, 0u);
    uint64_t serial = atomic_load(&team->serial) + 1u;
    atomic_store(&team->open_serial, serial);
    /* Release: a worker that polls the serial joins without the lock. */
    atomic_store_explicit(&team->serial, serial, memory_order_release);
    pthread_cond_broadcast(&team->start);
    pthread_mutex_unlock(&team->lock);
}

/* Every piece is taken (or a comparison differed). Closes the job, then
 * waits for the workers that joined it to finish their pieces: after that
 * none touches the pieces (the caller's memory) again, and *out_differs
 * (when not NULL) is whether any comparison differed, the workers' last
 * pieces included. Gives the team back. */
static void job_close(curdi_copy_team *team, bool *out_differs)
{
    atomic_store(&team->open_serial, 0u);
    /* The workers inside are on their last piece: worth polling for
     * rather than sleeping through a wake-up. */
    spin_until_idle(&team->busy_workers,
                    team->spin_ns > CURDI_COPY_JOIN_SPIN_NS
                        ? team->spin_ns
                        : CURDI_COPY_JOIN_SPIN_NS);
    pthread_mutex_lock(&team->lock);
    while (atomic_load(&team->busy_workers) != 0)
        pthread_cond_wait(&team->done, &team->lock);
    team->pieces = NULL;
    team->compares = NULL;
    team->piece_count = 0;
    pthread_mutex_unlock(&team->lock);
    /* Read before the team goes back: the next job resets it. */
    if (out_differs != NULL)
        *out_differs = atomic_load(&team->differs);
    pthread_mutex_unlock(&team->owner);
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
        if (streaming)
            stream_fence();
        return;
    }
    job_open(team, pieces, NULL, count, streaming);
    copy_pieces(team, pieces, count, streaming);
    job_close(team, NULL);
}

/* The cache line of x86-64 and of the Arm servers curd runs on. */
#define TOUCH_LINE_BYTES 64u

void curdi_copy_team_touch(const curdi_copy_piece *pieces, size_t count)
{
    unsigned char sum = 0;
    for (size_t index = 0; index < count; index++) {
        const volatile unsigned char *at = pieces[index].dst;
        const volatile unsigned char *end = at + pieces[index].byte_len;
        /* The first byte, then the start of each later line: a line
         * never crosses a page, so nothing outside the range is read. */
        while (at < end) {
            sum = (unsigned char)(sum + *at);
            uintptr_t next = ((uintptr_t)at + TOUCH_LINE_BYTES)
                             & ~(uintptr_t)(TOUCH_LINE_BYTES - 1u);
            at = (const volatile unsigned char *)next;
        }
    }
    (void)sum;
}

bool curdi_copy_team_equal(curdi_copy_team *team,
                           const curdi_compare_piece *pieces, size_t count)
{
    if (team == NULL || team->worker_count == 0 || count < 2
        || pthread_mutex_trylock(&team->owner) != 0) {
        for (size_t index = 0; index < count; index++)
            if (memcmp(pieces[index].left, pieces[index].right,
                       pieces[index].byte_len)
                != 0)
                return false;
        return true;
    }
    job_open(team, NULL, pieces, count, false);
    compare_pieces(team, pieces, count);
    /* Only once the workers are out: one may still be comparing the
     * piece that differs when this thread finds none left to take. */
    bool differs;
    job_close(team, &differs);
    return !differs;
}
