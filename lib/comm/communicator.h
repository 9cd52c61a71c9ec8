/* communicator.h - the communicator module: curd_comm, one NCCL rank bound
 * to one curd_device, and the one wait every communicator call ends in.
 *
 * A curd_comm holds two NCCL communicators of the same rank. `nccl` is
 * non-blocking: opening, splitting and closing go through it, each a job
 * in NCCL's own thread that curd's wait polls against a timeout, and so
 * does any group NCCL may have to connect on the caller's thread (send
 * and receive, whose channels NCCL connects at their first use).
 * `blocking` is its twin, split from it while the ranks join: a blocking
 * communicator enqueues on the caller's thread, with no thread started
 * per group, which is what makes a collective as fast as raw NCCL's. It
 * shares `nccl`'s resources (NCCL's splitShare), and every channel a
 * collective uses was connected while the ranks joined (curd asks NCCL to
 * connect at init: NCCL_RUNTIME_CONNECT=0 unless the user set it), so an
 * enqueue on it never waits for a peer: a peer that dies or stops shows
 * in curd's wait, which aborts both on this thread, never while another
 * thread is inside NCCL. `blocking` is NULL where NCCL has no split or
 * the user asked NCCL to connect at run time; then every group takes
 * `nccl`.
 *
 * A curd_comm lives in two lists: the process-wide registry of live
 * communicators (so a closed or forged pointer is refused without being
 * read) and its device's communicator state (so curd_device_close closes
 * what is still open, leaving a shell that curd_comm_close frees). Both
 * are intrusive: joining them allocates nothing, so no step after NCCL's
 * init can fail.
 *
 * Every wait goes through curdi_communicator_wait: it polls NCCL's
 * asynchronous error of each communicator and, once none is in progress,
 * the work's own completion, until each communicator's timeout; on an
 * error or a timeout it aborts every communicator it was given (NCCL's
 * work on them then ends, so the streams drain) and fails with
 * CURD_E_COMM. */
#ifndef CURD_LIB_COMM_COMMUNICATOR_H
#define CURD_LIB_COMM_COMMUNICATOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "curd.h"
#include "driver/nccl.h"

struct curd_comm {
    /* NULL once curd_device_close detached the communicator. */
    curd_device *device;
    /* NULL once aborted (after a failure) or destroyed. */
    curdi_nccl_comm nccl;
    /* The blocking twin collectives enqueue on (see above); NULL when
     * there is none, and once aborted or destroyed. */
    curdi_nccl_comm blocking;
    int rank;
    int size;
    uint32_t timeout_ms;      /* waits on its work */
    uint32_t open_timeout_ms; /* waits for the ranks to join (and split) */
    struct curd_comm *registry_prev, *registry_next;
    struct curd_comm *device_next; /* the device's open communicators */
    /* Collective runs enqueued and not yet released (their pending not
     * freed): the communicator cannot be closed under them. */
    atomic_int runs_in_flight;
    /* Batch items naming it (lib/comm/collective.c): it cannot be closed
     * under them, and a graph batch's graph may hold its work, which NCCL
     * waits for before letting a communicator go. */
    atomic_int batch_holds;
};

/* The most asynchronous runs a communicator takes before they are
 * waited for: each holds a slot of NCCL's work queue, and an enqueue on a
 * blocking communicator whose queue is full would wait on the GPU (and so
 * on a peer). */
#define CURDI_COMM_MAX_RUNS_IN_FLIGHT 64

/* How long the abort of a failed open waits for NCCL's thread to end a
 * join or split still in flight (curdi_communicator_abort_opening): a
 * one-process join ends in well under a second, so a failed open returns
 * at most this much later, and only when a join could not end. */
#define CURDI_COMM_SETTLE_MS 5000u

/* The NCCL communicator a group goes to: the blocking twin when the
 * communicator has one and the group holds no send or receive, else the
 * non-blocking one. */
static inline curdi_nccl_comm
curdi_communicator_nccl_for(const curd_comm *comm, bool point_to_point)
{
    return comm->blocking != NULL && !point_to_point ? comm->blocking
                                                     : comm->nccl;
}

/* The device's communicator state: its open communicators and the
 * collective counts. */
curd_status curdi_communicator_open(curd_device *device);
/* Closes every communicator still open on the device (waiting for its
 * work up to its timeout, aborting it past that) and detaches it. */
void curdi_communicator_close(curd_device *device);

/* What every entry point checks of a communicator: live in the registry
 * (else CURD_E_INVALID_ARGUMENT), its device not closed
 * (CURD_E_INVALID_ARGUMENT), not aborted (CURD_E_COMM), and its device
 * usable (curdi_core_device_check). */
curd_status curdi_communicator_check(const curd_comm *comm, const char *what);

/* Whether the work the wait is for has completed: true with *status CURD_OK
 * when it has, false while it runs, true with a failed *status (its
 * sentence set) when asking failed. */
typedef bool (*curdi_communicator_work_done_fn)(void *context,
                                                curd_status *status);

/* Polls until every communicator of comms reports no work in progress and
 * work_done (NULL: nothing more) says the work completed, or until a
 * communicator's timeout passes (its open timeout when `opening`),
 * measured from this call. On an NCCL error or a timeout the status is
 * CURD_E_COMM (what names the call) and nothing is aborted: for a caller
 * that may not abort where it stands (inside a graph's capture). */
curd_status curdi_communicator_poll_until_done(
    curd_comm *const *comms, size_t count, bool opening,
    curdi_communicator_work_done_fn work_done, void *context,
    const char *what);
/* curdi_communicator_poll_until_done, then, on an NCCL error or a
 * timeout, every communicator of comms aborted (when `opening`, as
 * curdi_communicator_abort_opening does, within what is left of the open
 * timeout counted from this call: nothing after the open timed out). */
curd_status curdi_communicator_wait(curd_comm *const *comms, size_t count,
                                    bool opening,
                                    curdi_communicator_work_done_fn work_done,
                                    void *context, const char *what);

/* The two halves of one poll of that wait, for waits that poll other
 * work beside (a batch run: lib/launch/batch.c). poll_error: CURD_E_COMM
 * (sentence set) when NCCL reports an error on either of the pair or the
 * communicator was aborted; else sets *in_progress when NCCL is still
 * enqueueing.
 * poll_timeout: CURD_E_COMM once waited_ns passed the communicator's
 * timeout (its open timeout when `opening`). Neither aborts. */
curd_status curdi_communicator_poll_error(curd_comm *comm, bool *in_progress,
                                          const char *what);
/* poll_error without a sentence, for a readiness query: true while NCCL
 * still enqueues on either of the pair; *failed when NCCL reported an
 * error on either, or the communicator was aborted. NCCL loaded. */
bool curdi_communicator_peek(const curd_comm *comm, bool *failed);
curd_status curdi_communicator_poll_timeout(const curd_comm *comm,
                                            uint64_t waited_ns, bool opening,
                                            const char *what);

/* Aborts the communicator's NCCL side (its device entered when it can
 * be); the curd_comm stays, refusing further work with CURD_E_COMM. */
void curdi_communicator_abort(curd_comm *comm);
/* curdi_communicator_abort on each of comms. */
void curdi_communicator_abort_all(curd_comm *const *comms, size_t count);
/* The abort of an open that failed (a join or a split; NULL entries of
 * comms are passed over): first lets each join or split that NCCL's own
 * thread still runs end, for at most CURDI_COMM_SETTLE_MS and never past
 * a communicator's open timeout, then aborts them all. NCCL 2.28 keeps
 * what an init job had allocated when its communicator is aborted while
 * the job runs; a job that cannot end (a peer that never joins) is
 * aborted at the bound all the same. */
void curdi_communicator_abort_opening(curd_comm *const *comms, size_t count);

/* Enters an initialised communicator in the registry and its device's
 * module. Allocates nothing, so it cannot fail. */
void curdi_communicator_publish(curd_comm *comm);

/* Counts complete collectives for curd_stats (collective_ops,
 * collective_bytes). */
void curdi_communicator_count(curd_device *device, uint64_t ops,
                              uint64_t bytes);
void curdi_communicator_stats(curd_device *device, curd_stats *stats);
void curdi_communicator_stats_reset(curd_device *device);

#endif
