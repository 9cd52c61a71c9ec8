/* copy_team.h - a few threads per device that split a large host memcpy
 * (or a large comparison: curdi_copy_team_equal).
 *
 * Pure: host threads and memcpy only, no driver. The transfer engine
 * (lib/transfer/engine.c) uses a team to copy into and out of pinned staging at what
 * a DMA engine takes, which one core cannot; tests/test-transfer.c drives
 * it on the CPU. */
#ifndef CURD_LIB_TRANSFER_COPY_TEAM_H
#define CURD_LIB_TRANSFER_COPY_TEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

/* The engine splits host copies into pieces of this size for the team
 * (the default; lib/transfer/tuning.h). */
#define CURDI_COPY_PIECE_BYTES ((uint64_t)256 * 1024)
/* Below this a job is copied by its caller alone (the default;
 * lib/transfer/tuning.h). A worker that wakes late costs its caller nothing, but
 * on the H100 host of doc/PERFORMANCE.md (a virtual machine) a sleeping
 * worker takes tens of microseconds to wake: sharing a 256 KiB download's
 * copy paid only with workers kept polling (CURD_COPY_SPIN_US). */
#define CURDI_COPY_PARALLEL_MIN ((size_t)1024 * 1024)
/* Pieces are never cut smaller than this for the team. */
#define CURDI_COPY_PIECE_MIN_BYTES ((uint64_t)16 * 1024)
/* Workers a team may have, and how many it gets when not told. */
#define CURDI_COPY_TEAM_MAX 32u
#define CURDI_COPY_TEAM_AUTO_MAX 6u

/* One host copy. The ranges of the pieces of one job must not overlap
 * each other's destinations (the team runs them in any order, at once). */
typedef struct curdi_copy_piece {
    void *dst;
    const void *src;
    size_t byte_len;
} curdi_copy_piece;

/* One comparison of two ranges of the same length, both only read. */
typedef struct curdi_compare_piece {
    const void *left;
    const void *right;
    size_t byte_len;
} curdi_compare_piece;

typedef struct curdi_copy_team curdi_copy_team;

/* How a team works (lib/transfer/tuning.h gives the transfer module's). */
typedef struct curdi_copy_team_config {
    /* Threads to start (0: one per processor online but the caller's, at
     * most CURDI_COPY_TEAM_AUTO_MAX; never more than CURDI_COPY_TEAM_MAX). */
    unsigned worker_count;
    /* Jobs of fewer bytes are copied by their caller alone. Workers that
     * are asleep when a job comes join it as they wake; the caller waits
     * only for those that joined (lib/transfer/copy_team.c). */
    size_t parallel_min;
    /* How long an idle worker, and a caller waiting for the workers to
     * finish, poll before they sleep on a condition variable: a job that
     * comes (or ends) within it starts (or returns) without a wake-up's
     * latency, at the price of a busy core for that long. 0: sleep at
     * once. */
    uint64_t spin_ns;
} curdi_copy_team_config;

/* Starts the team's threads. Fewer may start if the system refuses; a
 * team of none still works (the caller copies alone).
 * CURD_E_OUT_OF_MEMORY only when the team itself cannot be allocated. */
curd_status curdi_copy_team_create(const curdi_copy_team_config *config,
                                   curdi_copy_team **out_team);
/* Joins the workers. NULL-safe. */
void curdi_copy_team_destroy(curdi_copy_team *team);
unsigned curdi_copy_team_workers(const curdi_copy_team *team);
/* Adds up to `count` workers (at most CURDI_COPY_TEAM_MAX) for a caller
 * about to hand the team a long run of jobs that only more cores than the
 * team keeps copy as fast as a DMA engine reads (doc/PERFORMANCE.md, the
 * ninth run). They take part in every job like the team's own until
 * curdi_copy_team_shrink; the threads exist only in between, since a team
 * kept that large slowed the transfers that did not need it. They start
 * in the background (the first starts the rest), joining jobs as they
 * come up, so the caller pays for one thread's start. Returns what to
 * pass to curdi_copy_team_shrink: 0 when another caller's growth is in
 * place or no thread could start. NULL-safe. */
unsigned curdi_copy_team_grow(curdi_copy_team *team, unsigned count);
/* Ends the growth whose return was `added` (0: nothing), from the thread
 * that grew the team: each added worker finishes the piece it copies, if
 * any, and leaves. It returns at once; the next growth or the team's end
 * joins the threads. A job the caller ran has ended before its run
 * returned, so none of them touches its memory again. NULL-safe. */
void curdi_copy_team_shrink(curdi_copy_team *team, unsigned added);
/* Wakes up to `workers` sleeping workers to poll for jobs for within_ns
 * (or until curdi_copy_team_cool): a caller that will hand the team a job
 * soon, as when a DMA is on its way, hides the workers' wake-up behind
 * the wait, and a pipelined transfer keeps them awake between its chunks.
 * Returns the warmth to pass to curdi_copy_team_cool (0 when nothing was
 * warmed). NULL-safe. */
uint64_t curdi_copy_team_warm(curdi_copy_team *team, unsigned workers,
                              uint64_t within_ns);
/* Ends the warming of curdi_copy_team_warm's return, unless another warm
 * has replaced it: idle workers sleep again (after spin_ns). NULL-safe. */
void curdi_copy_team_cool(curdi_copy_team *team, uint64_t warmth);
/* Copies every piece, the calling thread taking part. team may be NULL,
 * and a team busy with another caller's job is not waited for: the caller
 * then copies alone. Returns when every byte is copied. streaming: with
 * curdi_copy_team_streaming instead of memcpy. */
void curdi_copy_team_run(curdi_copy_team *team, const curdi_copy_piece *pieces,
                         size_t count, bool streaming);

/* Reads one byte of each cache line of every piece's destination, on the
 * calling thread alone: a copy into those lines made soon after finds
 * them in the cache instead of reading each from memory as it stores.
 * A download runs it while its last DMAs are in flight (the time it
 * would otherwise spend polling its fence). Reads nothing outside the
 * destinations. */
void curdi_copy_team_touch(const curdi_copy_piece *pieces, size_t count);

/* Whether every piece's two ranges hold the same bytes, the calling
 * thread taking part; pieces are taken as curdi_copy_team_run takes
 * them, and once one differs the rest are skipped. The caller decides
 * whether the job is large enough to share (parallel_min is the copies'
 * rule): a team that is NULL, has no workers or is busy with another
 * caller's job leaves the caller to compare alone. Returns once no worker
 * reads the ranges any more. The static sets' verified hits
 * (lib/session/static_sets.c) compare with it. */
bool curdi_copy_team_equal(curdi_copy_team *team,
                           const curdi_compare_piece *pieces, size_t count);

/* memcpy for a large destination that the copier will not read back: on
 * x86-64 with non-temporal stores, which skip reading each destination
 * line into the cache before writing it (a third less memory traffic) and
 * leave the cache to others; the stores are fenced before it returns, so
 * another thread that learns of the copy through an atomic or a lock sees
 * every byte. Elsewhere, and below 4 KiB, plain memcpy. The ranges must
 * not overlap. */
void curdi_copy_team_streaming(void *dst, const void *src, size_t byte_len);

#endif
