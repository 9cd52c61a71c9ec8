/* communicator.c - a curd_comm once it is open: the registry of live
 * communicators and the device's communicator state
 * (curdi_communicator_publish enters one), the wait that keeps every
 * communicator call from hanging, aborting, closing, and its rank and
 * size. comm_open.c makes them. See communicator.h. */
#include "comm/communicator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"

struct curdi_communicator_state {
    pthread_mutex_t lock;
    curd_comm *head;
    _Atomic uint64_t ops;
    _Atomic uint64_t bytes;
};

/* The registry of live communicators, a list through the communicators
 * themselves. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static curd_comm *registry_head;

static void communicator_registry_add(curd_comm *comm)
{
    pthread_mutex_lock(&registry_lock);
    comm->registry_prev = NULL;
    comm->registry_next = registry_head;
    if (registry_head != NULL)
        registry_head->registry_prev = comm;
    registry_head = comm;
    pthread_mutex_unlock(&registry_lock);
}

static bool registry_live_locked(const curd_comm *comm)
{
    for (const curd_comm *at = registry_head; at != NULL;
         at = at->registry_next)
        if (at == comm)
            return true;
    return false;
}

/* Removes comm; false when it was not live (closed, or never opened). */
static bool registry_remove(curd_comm *comm)
{
    pthread_mutex_lock(&registry_lock);
    bool live = registry_live_locked(comm);
    if (live) {
        if (comm->registry_prev != NULL)
            comm->registry_prev->registry_next = comm->registry_next;
        else
            registry_head = comm->registry_next;
        if (comm->registry_next != NULL)
            comm->registry_next->registry_prev = comm->registry_prev;
    }
    pthread_mutex_unlock(&registry_lock);
    return live;
}

/* ------------------------------------------------------------------------
 * The device's state
 * ---------------------------------------------------------------------- */
curd_status curdi_communicator_open(curd_device *device)
{
    struct curdi_communicator_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the communicator state could not"
                          " be allocated. Fix: free host memory and try"
                          " again.");
    if (pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the communicator state's lock"
                          " could not be created. Fix: free system"
                          " resources and try again.");
    }
    device->comm = state;
    return CURD_OK;
}

static void device_list_add(curd_comm *comm)
{
    struct curdi_communicator_state *state = comm->device->comm;
    pthread_mutex_lock(&state->lock);
    comm->device_next = state->head;
    state->head = comm;
    pthread_mutex_unlock(&state->lock);
}

static void device_list_remove(curd_comm *comm)
{
    struct curdi_communicator_state *state = comm->device->comm;
    pthread_mutex_lock(&state->lock);
    curd_comm **link = &state->head;
    while (*link != NULL && *link != comm)
        link = &(*link)->device_next;
    if (*link != NULL)
        *link = comm->device_next;
    pthread_mutex_unlock(&state->lock);
    comm->device_next = NULL;
}

void curdi_communicator_count(curd_device *device, uint64_t ops,
                              uint64_t bytes)
{
    atomic_fetch_add(&device->comm->ops, ops);
    atomic_fetch_add(&device->comm->bytes, bytes);
}

void curdi_communicator_stats(curd_device *device, curd_stats *stats)
{
    stats->collective_ops = atomic_load(&device->comm->ops);
    stats->collective_bytes = atomic_load(&device->comm->bytes);
}

void curdi_communicator_stats_reset(curd_device *device)
{
    atomic_store(&device->comm->ops, 0);
    atomic_store(&device->comm->bytes, 0);
}

/* ------------------------------------------------------------------------
 * Waiting, aborting, destroying
 * ---------------------------------------------------------------------- */
/* Aborts one NCCL communicator of the pair. The device is entered by the
 * caller where it can be. */
static void abort_one(const curdi_nccl *nccl, curdi_nccl_comm handle)
{
    curdi_nccl_result result = nccl->ncclCommAbort(handle);
    /* ncclInProgress: the abort goes on in NCCL's own thread (its
     * kernels were told to stop before the call returned). */
    if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress)
        curdi_trace("ncclCommAbort failed with %s; its resources stay with "
                    "NCCL",
                    curdi_nccl_result_name(result));
}

void curdi_communicator_abort(curd_comm *comm)
{
    if (comm->nccl == NULL && comm->blocking == NULL)
        return;
    const curdi_nccl *nccl = NULL;
    if (curdi_nccl_ready(&nccl) != CURD_OK)
        return; /* unreachable: the communicator was made through it */
    bool entered = comm->device != NULL && curdi_driver_usable()
                   && curdi_core_device_enter(comm->device) == CURD_OK;
    /* The non-blocking one first: its abort joins a split still in
     * NCCL's thread, which writes the twin's handle as it ends (on a
     * failure too), so the twin is read only after. */
    if (comm->nccl != NULL)
        abort_one(nccl, comm->nccl);
    curdi_nccl_comm twin =
        __atomic_load_n(&comm->blocking, __ATOMIC_ACQUIRE);
    if (twin != NULL)
        abort_one(nccl, twin);
    if (entered)
        curdi_core_device_leave(comm->device);
    comm->blocking = NULL;
    comm->nccl = NULL;
}

void curdi_communicator_abort_all(curd_comm *const *comms, size_t count)
{
    for (size_t index = 0; index < count; index++)
        curdi_communicator_abort(comms[index]);
}

/* Whether NCCL's thread still runs a join or split of one of comms (an
 * init job reports ncclInProgress until it ends, on a failure too). */
static bool opening_in_flight(const curdi_nccl *nccl, curd_comm *const *comms,
                              size_t count)
{
    for (size_t index = 0; index < count; index++) {
        if (comms[index] == NULL)
            continue;
        const curdi_nccl_comm pair[2] = {
            comms[index]->nccl,
            __atomic_load_n(&comms[index]->blocking, __ATOMIC_ACQUIRE)};
        for (int which = 0; which < 2; which++) {
            curdi_nccl_result async_error = CURDI_NCCL_Success;
            if (pair[which] != NULL &&
                nccl->ncclCommGetAsyncError(pair[which], &async_error) ==
                    CURDI_NCCL_Success &&
                async_error == CURDI_NCCL_InProgress)
                return true;
        }
    }
    return false;
}

/* curdi_communicator_abort_opening with the open timeout counted from
 * since_ns, when the wait for the join began: an open that ran out of it
 * has a peer that never came, whose join cannot end, so nothing is left
 * to let settle. */
static void abort_opening_since(curd_comm *const *comms, size_t count,
                                uint64_t since_ns)
{
    const curdi_nccl *nccl = NULL;
    uint64_t start_ns = curdi_clock_ns();
    uint64_t bound_ns = (uint64_t)CURDI_COMM_SETTLE_MS * 1000000u;
    for (size_t index = 0; index < count; index++) {
        if (comms[index] == NULL)
            continue;
        uint64_t open_end_ns =
            since_ns + (uint64_t)comms[index]->open_timeout_ms * 1000000u;
        uint64_t left_ns = open_end_ns > start_ns ? open_end_ns - start_ns : 0;
        if (left_ns < bound_ns)
            bound_ns = left_ns;
    }
    if (bound_ns > 0 && curdi_nccl_ready(&nccl) == CURD_OK)
        while (opening_in_flight(nccl, comms, count)) {
            uint64_t waited_ns = curdi_clock_ns() - start_ns;
            if (waited_ns >= bound_ns)
                break;
            curdi_clock_poll_pause(waited_ns);
        }
    for (size_t index = 0; index < count; index++)
        if (comms[index] != NULL)
            curdi_communicator_abort(comms[index]);
}

void curdi_communicator_abort_opening(curd_comm *const *comms, size_t count)
{
    abort_opening_since(comms, count, curdi_clock_ns());
}

/* A communicator an earlier failure aborted refuses every later call. */
static curd_status fail_aborted(const curd_comm *comm, const char *what)
{
    return curdi_fail(CURD_E_COMM,
                      "%s: communicator %p (rank %d of %d) was aborted after "
                      "an earlier failure. Fix: close it and open a new one "
                      "on every rank.",
                      what, (const void *)comm, comm->rank, comm->size);
}

/* One NCCL communicator's asynchronous error: CURD_OK (setting
 * *in_progress while NCCL is still enqueueing), else CURD_E_COMM with
 * NCCL's sentence. */
static curd_status poll_one(const curdi_nccl *nccl, const curd_comm *comm,
                            curdi_nccl_comm handle, bool *in_progress,
                            const char *what)
{
    curdi_nccl_result async_error = CURDI_NCCL_Success;
    curdi_nccl_result result =
        nccl->ncclCommGetAsyncError(handle, &async_error);
    const char *call = "ncclCommGetAsyncError";
    if (result == CURDI_NCCL_Success) {
        if (async_error == CURDI_NCCL_InProgress) {
            *in_progress = true;
            return CURD_OK;
        }
        result = async_error;
        call = "the communicator's work (ncclCommGetAsyncError)";
    }
    if (result == CURDI_NCCL_Success)
        return CURD_OK;
    char call_text[160];
    snprintf(call_text, sizeof call_text, "%s: %s on rank %d of %d", what,
             call, comm->rank, comm->size);
    return curdi_nccl_fail_as(
        CURD_E_COMM, result, handle, call_text,
        "every communicator of this call was aborted: close them and open "
        "new ones on every rank (the device is still usable); check that "
        "every peer is alive, and run with NCCL_DEBUG=WARN for NCCL's view");
}

curd_status curdi_communicator_poll_error(curd_comm *comm, bool *in_progress,
                                          const char *what)
{
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    if (comm->nccl == NULL)
        return fail_aborted(comm, what);
    if (comm->blocking != NULL)
        status = poll_one(nccl, comm, comm->blocking, in_progress, what);
    if (status == CURD_OK)
        status = poll_one(nccl, comm, comm->nccl, in_progress, what);
    return status;
}

bool curdi_communicator_peek(const curd_comm *comm, bool *failed)
{
    const curdi_nccl *nccl = NULL;
    *failed = curdi_nccl_ready(&nccl) != CURD_OK || comm->nccl == NULL;
    const curdi_nccl_comm pair[2] = {comm->blocking, comm->nccl};
    for (int which = 0; which < 2 && !*failed; which++) {
        curdi_nccl_result async_error = CURDI_NCCL_Success;
        if (pair[which] == NULL)
            continue;
        *failed = nccl->ncclCommGetAsyncError(pair[which], &async_error) !=
                      CURDI_NCCL_Success ||
                  (async_error != CURDI_NCCL_Success &&
                   async_error != CURDI_NCCL_InProgress);
        if (!*failed && async_error == CURDI_NCCL_InProgress)
            return true;
    }
    return false;
}

curd_status curdi_communicator_poll_timeout(const curd_comm *comm,
                                            uint64_t waited_ns, bool opening,
                                            const char *what)
{
    uint32_t timeout_ms = opening ? comm->open_timeout_ms : comm->timeout_ms;
    if (waited_ns / 1000000u < timeout_ms)
        return CURD_OK;
    return curdi_fail(
        CURD_E_COMM,
        "%s: rank %d of %d waited %u ms (its timeout) and the %s did not "
        "complete: a peer died, stopped answering or never made the "
        "matching call. Every communicator of this call was aborted. Fix: "
        "close them and open new ones on every rank (the device is still "
        "usable); make every rank make the same calls, or raise "
        "curd_comm_options.%s if the peers are only slow.",
        what, comm->rank, comm->size, timeout_ms,
        opening ? "joining of every rank" : "work",
        opening ? "open_timeout_ms" : "timeout_ms (CURD_COMM_TIMEOUT_MS)");
}

curd_status curdi_communicator_poll_until_done(
    curd_comm *const *comms, size_t count, bool opening,
    curdi_communicator_work_done_fn work_done, void *context,
    const char *what)
{
    uint64_t start_ns = curdi_clock_ns();
    for (;;) {
        bool in_progress = false;
        curd_status status = CURD_OK;
        for (size_t index = 0; index < count && status == CURD_OK; index++)
            status = curdi_communicator_poll_error(comms[index], &in_progress,
                                                   what);
        if (status == CURD_OK && !in_progress &&
            (work_done == NULL || work_done(context, &status)) &&
            status == CURD_OK)
            return CURD_OK;
        uint64_t waited_ns = curdi_clock_ns() - start_ns;
        for (size_t index = 0; index < count && status == CURD_OK; index++)
            status = curdi_communicator_poll_timeout(comms[index], waited_ns,
                                                     opening, what);
        if (status != CURD_OK)
            return status;
        curdi_clock_poll_pause(waited_ns);
    }
}

curd_status curdi_communicator_wait(curd_comm *const *comms, size_t count,
                                    bool opening,
                                    curdi_communicator_work_done_fn work_done,
                                    void *context, const char *what)
{
    uint64_t start_ns = curdi_clock_ns();
    curd_status status = curdi_communicator_poll_until_done(
        comms, count, opening, work_done, context, what);
    if (status == CURD_OK)
        return CURD_OK;
    if (opening)
        abort_opening_since(comms, count, start_ns);
    else
        curdi_communicator_abort_all(comms, count);
    return status;
}

/* Lets go of the blocking twin: its finalize and destroy run on this
 * thread and wait on nothing of a peer's (NCCL's own streams, which hold
 * no collective of curd's once its runs are released, and its proxy). */
static curd_status destroy_blocking(curd_comm *comm, const curdi_nccl *nccl)
{
    if (comm->blocking == NULL)
        return CURD_OK;
    const char *call = "ncclCommFinalize";
    curdi_nccl_result result = nccl->ncclCommFinalize(comm->blocking);
    if (result == CURDI_NCCL_Success) {
        call = "ncclCommDestroy";
        result = nccl->ncclCommDestroy(comm->blocking);
    }
    if (result != CURDI_NCCL_Success) {
        curd_status status = curdi_nccl_fail_as(
            CURD_E_COMM, result, comm->blocking, call,
            "the communicator was aborted and freed anyway; nothing is "
            "left to do");
        curdi_communicator_abort(comm);
        return status;
    }
    comm->blocking = NULL;
    return CURD_OK;
}

/* Lets go of the communicator's NCCL side: the twin, then finalize (its
 * work flushed within the timeout) and destroy; abort when either fails.
 * The device is entered by the caller. Returns the status of the wait. */
static curd_status destroy_nccl(curd_comm *comm, const char *what)
{
    if (comm->nccl == NULL)
        return CURD_OK;
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status == CURD_OK)
        status = destroy_blocking(comm, nccl);
    if (status != CURD_OK)
        return status;
    curdi_nccl_result result = nccl->ncclCommFinalize(comm->nccl);
    if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
        status = curdi_nccl_fail_as(CURD_E_COMM, result, comm->nccl,
                                    "ncclCommFinalize",
                                    "the communicator was aborted and freed "
                                    "anyway; nothing is left to do");
        curdi_communicator_abort(comm);
        return status;
    }
    status = curdi_communicator_wait(&comm, 1, false, NULL, NULL, what);
    if (status != CURD_OK)
        return status; /* aborted by the wait */
    /* A non-blocking communicator's destroy may finish in NCCL's own
     * thread (ncclInProgress): the handle is NCCL's from here on. */
    result = nccl->ncclCommDestroy(comm->nccl);
    if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
        status = curdi_nccl_fail_as(CURD_E_COMM, result, comm->nccl,
                                    "ncclCommDestroy",
                                    "the communicator was aborted and freed "
                                    "anyway; nothing is left to do");
        curdi_communicator_abort(comm);
        return status;
    }
    comm->nccl = NULL;
    return CURD_OK;
}

void curdi_communicator_close(curd_device *device)
{
    struct curdi_communicator_state *state = device->comm;
    if (state == NULL)
        return;
    /* Detached one by one, the lock not held across NCCL's waits. */
    for (;;) {
        pthread_mutex_lock(&state->lock);
        curd_comm *comm = state->head;
        if (comm != NULL)
            state->head = comm->device_next;
        pthread_mutex_unlock(&state->lock);
        if (comm == NULL)
            break;
        /* With a run still in flight (a pending not freed) the work may
         * wait on a peer for ever: aborted, it ends, and the device's close
         * cannot hang in its synchronisation. A communicator that batches
         * still name is aborted too: NCCL's finalize would wait for their
         * graphs, which the batch state frees after this one. */
        bool entered = atomic_load(&comm->runs_in_flight) == 0
                       && atomic_load(&comm->batch_holds) == 0
                       && curdi_driver_usable()
                       && curdi_core_device_enter(device) == CURD_OK;
        if (entered) {
            (void)destroy_nccl(comm, "curd_device_close");
            curdi_core_device_leave(device);
        } else {
            curdi_communicator_abort(comm);
        }
        comm->device_next = NULL;
        comm->device = NULL;
    }
    pthread_mutex_destroy(&state->lock);
    free(state);
    device->comm = NULL;
}

/* ------------------------------------------------------------------------
 * Checks
 * ---------------------------------------------------------------------- */
curd_status curdi_communicator_check(const curd_comm *comm, const char *what)
{
    if (comm == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the communicator is NULL. Fix: pass one that "
                          "curd_comm_open (or _open_all, _open_from_env, "
                          "_split) returned.",
                          what);
    pthread_mutex_lock(&registry_lock);
    bool live = registry_live_locked(comm);
    pthread_mutex_unlock(&registry_lock);
    if (!live)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: communicator %p is not open (closed already, "
                          "or never returned by curd_comm_open); nothing was "
                          "done. Fix: use each communicator until its "
                          "curd_comm_close only.",
                          what, (const void *)comm);
    if (comm->device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the device of communicator %p (rank %d of %d) "
                          "was closed, which closed the communicator; "
                          "nothing was done. Fix: close communicators before "
                          "their device, and curd_comm_close this one.",
                          what, (const void *)comm, comm->rank, comm->size);
    if (comm->nccl == NULL)
        return fail_aborted(comm, what);
    return curdi_core_device_check(comm->device, what);
}

void curdi_communicator_publish(curd_comm *comm)
{
    communicator_registry_add(comm);
    device_list_add(comm);
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */
static curd_status check_readable(const curd_comm *comm, const void *out,
                                  const char *what)
{
    curd_status status = curdi_communicator_check(comm, what);
    if (status == CURD_E_COMM)
        status = CURD_OK; /* an aborted communicator still has its rank */
    if (status == CURD_OK && out == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: the out pointer is NULL. Fix: pass the "
                            "address of an int.",
                            what);
    return status;
}

CURD_API curd_status curd_comm_rank(const curd_comm *comm, int *out_rank)
{
    curd_status status = check_readable(comm, out_rank, "curd_comm_rank");
    if (status == CURD_OK)
        *out_rank = comm->rank;
    return status;
}

CURD_API curd_status curd_comm_size(const curd_comm *comm, int *out_size)
{
    curd_status status = check_readable(comm, out_size, "curd_comm_size");
    if (status == CURD_OK)
        *out_size = comm->size;
    return status;
}

CURD_API curd_status curd_comm_close(curd_comm *comm)
{
    const char *what = "curd_comm_close";
    if (comm == NULL)
        return CURD_OK;
    pthread_mutex_lock(&registry_lock);
    bool live = registry_live_locked(comm);
    int in_flight = live ? atomic_load(&comm->runs_in_flight) : 0;
    int held = live ? atomic_load(&comm->batch_holds) : 0;
    pthread_mutex_unlock(&registry_lock);
    if (!live)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: communicator %p is not open (closed already, "
                          "or never returned by curd_comm_open); nothing was "
                          "done. Fix: close each communicator once.",
                          what, (const void *)comm);
    if (in_flight != 0)
        return curdi_fail(CURD_E_BUSY,
                          "%s: communicator %p (rank %d of %d) has %d "
                          "asynchronous collective run(s) not yet freed; "
                          "nothing was done. Fix: curd_pending_wait and "
                          "curd_pending_free them first.",
                          what, (const void *)comm, comm->rank, comm->size,
                          in_flight);
    if (held != 0)
        return curdi_fail(CURD_E_BUSY,
                          "%s: communicator %p (rank %d of %d) is named by "
                          "%d collective(s) recorded in batches; nothing was "
                          "done. Fix: curd_batch_reset or curd_batch_free "
                          "those batches first.",
                          what, (const void *)comm, comm->rank, comm->size,
                          held);
    (void)registry_remove(comm);
    curd_status status = CURD_OK;
    if (comm->device != NULL) {
        device_list_remove(comm);
        bool entered = curdi_driver_usable()
                       && curdi_core_device_enter(comm->device) == CURD_OK;
        if (entered) {
            status = destroy_nccl(comm, what);
            curdi_core_device_leave(comm->device);
        } else {
            curdi_communicator_abort(comm);
        }
    }
    free(comm);
    return status;
}
