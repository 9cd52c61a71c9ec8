/* collective.c - collectives on resident buffers. See collective.h. */
#include "comm/collective.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/clock.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "comm/communicator.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/batch.h"
#include "memory/resident.h"
#include "transfer/upload_marks.h"

/* More operations than any group needs; keeps the run's one allocation
 * far from overflowing. */
#define CURDI_COLLECTIVE_MAX_OPS 65536u

typedef struct dtype_info {
    unsigned bytes;
    curdi_nccl_data_type nccl;
} dtype_info;

/* Indexed by curd_dtype. */
static const dtype_info dtypes[] = {
    {1, CURDI_NCCL_Int8},    {1, CURDI_NCCL_Uint8},  {4, CURDI_NCCL_Int32},
    {4, CURDI_NCCL_Uint32},  {8, CURDI_NCCL_Int64},  {8, CURDI_NCCL_Uint64},
    {2, CURDI_NCCL_Float16}, {2, CURDI_NCCL_Bfloat16},
    {4, CURDI_NCCL_Float32}, {8, CURDI_NCCL_Float64},
};
#define DTYPE_COUNT (sizeof dtypes / sizeof dtypes[0])

/* Indexed by curd_reduce_op. */
static const curdi_nccl_red_op reduce_ops[] = {
    CURDI_NCCL_Sum, CURDI_NCCL_Prod, CURDI_NCCL_Min, CURDI_NCCL_Max,
    CURDI_NCCL_Avg,
};
#define REDUCE_OP_COUNT (sizeof reduce_ops / sizeof reduce_ops[0])

static const char *const kind_names[] = {
    "all_reduce", "broadcast", "reduce", "all_gather",
    "reduce_scatter", "send", "recv",
};
/* The NCCL call of each kind, for messages. */
static const char *const kind_calls[] = {
    "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
    "ncclReduceScatter", "ncclSend", "ncclRecv",
};
#define KIND_COUNT (sizeof kind_names / sizeof kind_names[0])

unsigned curdi_collective_dtype_bytes(curd_dtype dtype)
{
    return (unsigned)dtype < DTYPE_COUNT ? dtypes[dtype].bytes : 0;
}

/* One checked operation, with what enqueueing it needs (the caller's
 * array may be reused once an asynchronous run returns). */
typedef struct planned {
    curd_comm *comm;
    curd_collective_kind kind;
    curdi_nccl_data_type nccl_type;
    curdi_nccl_red_op nccl_op;
    uint64_t count;
    int root_or_peer;
    bool uses_send, uses_recv;
    uint64_t send_id, recv_id;
    uint64_t send_offset, recv_offset;
    uint64_t send_bytes, recv_bytes;
    size_t send_use, recv_use; /* indices into the run's uses */
    size_t lane;
} planned;

/* What one device of the run holds: a pooled stream, the event that ends
 * the run's work on it, and its buffers' uses (contiguous in the run's
 * array). */
typedef struct lane {
    curd_device *device;
    curdi_cu_stream stream;
    curdi_cu_event done;
    bool event_taken;
    bool recorded; /* its event is recorded behind NCCL's work */
    bool finished; /* its event completed */
    bool marked;   /* its uses began */
    size_t first_use, use_count;
    uint64_t ops, bytes;
} lane;

typedef struct collective_run {
    curd_pending base; /* first: the run is its pending */
    const char *what;
    size_t op_count, lane_count, comm_count, use_count;
    planned *ops;
    lane *lanes;
    curd_comm **comms;
    uint64_t *ids;
    curdi_resident_use *uses;
    bool counted_in_flight; /* in its communicators' runs_in_flight */
} collective_run;

/* ------------------------------------------------------------------------
 * Checking one operation
 * ---------------------------------------------------------------------- */
static curd_status buffer_length(const curd_collective *op, size_t index,
                                 bool send, const char *what,
                                 uint64_t *out_len)
{
    size_t byte_len = 0;
    uint64_t id = send ? op->send.id : op->recv.id;
    if (!curdi_resident_length(op->comm->device, id, &byte_len))
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: operation %zu (%s)'s %s buffer 0x%llx is not "
                          "a live buffer of its communicator's device "
                          "(freed, never allocated, or another device's). "
                          "Fix: pass a buffer allocated on the device the "
                          "communicator was opened on.",
                          what, index, kind_names[op->kind],
                          send ? "send" : "recv", (unsigned long long)id);
    *out_len = byte_len;
    return CURD_OK;
}

/* Whether [a, a + a_len) and [b, b + b_len) share a byte. */
static bool overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
    return a_len != 0 && b_len != 0 && a < b + b_len && b < a + a_len;
}

static bool is_point_to_point(curd_collective_kind kind)
{
    return kind == CURD_COLLECTIVE_SEND || kind == CURD_COLLECTIVE_RECV;
}

static curd_status check_op(const curd_collective *op, size_t index,
                            const char *what, planned *out)
{
    curd_status status = curdi_communicator_check(op->comm, what);
    if (status != CURD_OK)
        return status;
    curd_comm *comm = op->comm;
    if ((unsigned)op->kind >= KIND_COUNT)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: operation %zu has kind %d, not a "
                          "curd_collective_kind. Fix: use one of "
                          "CURD_COLLECTIVE_*.",
                          what, index, (int)op->kind);
    if ((unsigned)op->dtype >= DTYPE_COUNT)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: operation %zu (%s) has dtype %d, not a "
                          "curd_dtype. Fix: use one of CURD_DTYPE_*.",
                          what, index, kind_names[op->kind], (int)op->dtype);
    bool reduces = op->kind == CURD_COLLECTIVE_ALL_REDUCE ||
                   op->kind == CURD_COLLECTIVE_REDUCE ||
                   op->kind == CURD_COLLECTIVE_REDUCE_SCATTER;
    if (reduces && (unsigned)op->op >= REDUCE_OP_COUNT)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: operation %zu (%s) has reduction %d, not a "
                          "curd_reduce_op. Fix: use one of CURD_REDUCE_*.",
                          what, index, kind_names[op->kind], (int)op->op);
    bool rooted = op->kind == CURD_COLLECTIVE_BROADCAST ||
                  op->kind == CURD_COLLECTIVE_REDUCE;
    bool p2p = is_point_to_point(op->kind);
    if ((rooted || p2p) &&
        (op->root_or_peer < 0 || op->root_or_peer >= comm->size))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: operation %zu (%s) names %s %d, outside the "
                          "communicator's %d ranks. Fix: pass a rank from 0 "
                          "to %d.",
                          what, index, kind_names[op->kind],
                          rooted ? "root" : "peer", op->root_or_peer,
                          comm->size, comm->size - 1);

    planned plan;
    memset(&plan, 0, sizeof plan);
    plan.comm = comm;
    plan.kind = op->kind;
    plan.nccl_type = dtypes[op->dtype].nccl;
    plan.nccl_op = reduces ? reduce_ops[op->op] : CURDI_NCCL_Sum;
    plan.count = op->count;
    plan.root_or_peer = op->root_or_peer;
    plan.send_id = op->send.id;
    plan.recv_id = op->recv.id;
    plan.send_offset = op->send_offset;
    plan.recv_offset = op->recv_offset;
    bool is_root = rooted && comm->rank == op->root_or_peer;
    plan.uses_send = op->kind != CURD_COLLECTIVE_RECV &&
                     (op->kind != CURD_COLLECTIVE_BROADCAST || is_root);
    plan.uses_recv = op->kind != CURD_COLLECTIVE_SEND &&
                     (op->kind != CURD_COLLECTIVE_REDUCE || is_root);

    /* The byte lengths: count elements, times the size for the side that
     * holds every rank's part. */
    uint64_t part_bytes = 0, whole_bytes = 0;
    bool overflow =
        __builtin_mul_overflow(op->count, (uint64_t)dtypes[op->dtype].bytes,
                               &part_bytes) ||
        __builtin_mul_overflow(part_bytes, (uint64_t)comm->size,
                               &whole_bytes) ||
        part_bytes > SIZE_MAX;
    if (overflow)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: operation %zu (%s): %llu elements of %u bytes "
                          "over %d ranks overflow 64 bits. Fix: pass the "
                          "element count, not a byte count, and split "
                          "larger work.",
                          what, index, kind_names[op->kind],
                          (unsigned long long)op->count,
                          dtypes[op->dtype].bytes, comm->size);
    plan.send_bytes = op->kind == CURD_COLLECTIVE_REDUCE_SCATTER
                          ? whole_bytes
                          : part_bytes;
    plan.recv_bytes = op->kind == CURD_COLLECTIVE_ALL_GATHER ? whole_bytes
                                                             : part_bytes;

    char range_name[128];
    for (int side = 0; side < 2; side++) {
        bool send = side == 0;
        if (!(send ? plan.uses_send : plan.uses_recv))
            continue;
        uint64_t buffer_len = 0;
        status = buffer_length(op, index, send, what, &buffer_len);
        if (status != CURD_OK)
            return status;
        snprintf(range_name, sizeof range_name,
                 "%s: operation %zu (%s)'s %s range", what, index,
                 kind_names[op->kind], send ? "send" : "recv");
        status = curdi_checked_range(
            send ? plan.send_offset : plan.recv_offset,
            send ? plan.send_bytes : plan.recv_bytes, buffer_len, range_name);
        if (status != CURD_OK)
            return status;
    }

    /* In place only where NCCL allows it; any other overlap would read
     * what the operation is writing. */
    if (plan.uses_send && plan.uses_recv && plan.send_id == plan.recv_id &&
        overlap(plan.send_offset, plan.send_bytes, plan.recv_offset,
                plan.recv_bytes)) {
        uint64_t own_part = part_bytes * (uint64_t)comm->rank;
        bool in_place;
        if (op->kind == CURD_COLLECTIVE_ALL_GATHER)
            in_place = plan.send_offset == plan.recv_offset + own_part;
        else if (op->kind == CURD_COLLECTIVE_REDUCE_SCATTER)
            in_place = plan.recv_offset == plan.send_offset + own_part;
        else
            in_place = plan.send_offset == plan.recv_offset;
        if (!in_place)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: operation %zu (%s)'s send range [%llu, "
                              "+%llu) and recv range [%llu, +%llu) overlap "
                              "in one buffer without being in place. Fix: "
                              "use separate ranges, or the in-place layout "
                              "(curd.h: the same range; all_gather's send "
                              "at recv part %d; reduce_scatter's recv at "
                              "send part %d).",
                              what, index, kind_names[op->kind],
                              (unsigned long long)plan.send_offset,
                              (unsigned long long)plan.send_bytes,
                              (unsigned long long)plan.recv_offset,
                              (unsigned long long)plan.recv_bytes,
                              comm->rank, comm->rank);
    }
    *out = plan;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The run
 * ---------------------------------------------------------------------- */
static void collective_run_complete(curd_pending *pending, bool copy_out)
{
    (void)copy_out; /* the results are in resident buffers already */
    collective_run *run = (collective_run *)pending;
    for (size_t index = 0; index < run->lane_count; index++)
        curdi_communicator_count(run->lanes[index].device,
                                 run->lanes[index].ops,
                                 run->lanes[index].bytes);
}

/* Gives back every lane's stream, event and uses; the work is drained
 * first unless it completed (after a failure the communicators were
 * aborted, which ends NCCL's kernels, so the drain returns). */
static void collective_run_release(curd_pending *pending)
{
    collective_run *run = (collective_run *)pending;
    for (size_t index = 0; index < run->lane_count; index++) {
        lane *l = &run->lanes[index];
        if ((l->stream != NULL || l->event_taken) && curdi_driver_usable()
            && curdi_core_device_enter(l->device) == CURD_OK) {
            if (!l->finished && l->stream != NULL)
                (void)curdi_driver_note(
                    curdi_driver_get()->cuStreamSynchronize(l->stream));
            if (l->event_taken)
                curdi_streams_events_release(l->device, &l->done, 1);
            curdi_streams_release(l->device, l->stream);
            curdi_core_device_leave(l->device);
        }
        if (l->marked)
            curdi_resident_use_end(l->device, run->uses + l->first_use,
                                   l->use_count);
    }
    for (size_t index = 0; run->counted_in_flight && index < run->comm_count;
         index++)
        atomic_fetch_sub(&run->comms[index]->runs_in_flight, 1);
    free(run);
}

/* Records each lane's event behind the work NCCL has enqueued on its
 * stream. Only once no communicator of the run reports ncclInProgress:
 * a non-blocking NCCL may still be enqueueing before then (connecting to
 * its peers), and an event recorded earlier would complete ahead of the
 * work. */
static curd_status record_lanes(collective_run *run)
{
    for (size_t at = 0; at < run->lane_count; at++) {
        lane *l = &run->lanes[at];
        if (l->recorded)
            continue;
        curd_status status = curdi_core_device_enter(l->device);
        if (status != CURD_OK)
            return status;
        curdi_cu_result rc = curdi_driver_note(
            curdi_driver_get()->cuEventRecord(l->done, l->stream));
        curdi_core_device_leave(l->device);
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_pending_fail_driver(l->device, rc, "cuEventRecord");
        l->recorded = true;
    }
    return CURD_OK;
}

/* curdi_communicator_work_done_fn, called once NCCL has enqueued everything:
 * every lane's event completed. */
static bool lanes_done(void *context, curd_status *status)
{
    collective_run *run = context;
    *status = record_lanes(run);
    if (*status != CURD_OK)
        return true;
    for (size_t index = 0; index < run->lane_count; index++) {
        lane *l = &run->lanes[index];
        if (l->finished)
            continue;
        curd_status entered = curdi_core_device_enter(l->device);
        if (entered != CURD_OK) {
            *status = entered;
            return true;
        }
        curdi_cu_result rc =
            curdi_driver_note(curdi_driver_get()->cuEventQuery(l->done));
        curdi_core_device_leave(l->device);
        if (rc == CURDI_CUDA_ERROR_NOT_READY)
            return false;
        if (rc != CURDI_CUDA_SUCCESS) {
            *status = curdi_pending_fail_driver(l->device, rc, "cuEventQuery");
            return true;
        }
        l->finished = true;
    }
    *status = CURD_OK;
    return true;
}

static curd_status collective_run_wait(curd_pending *pending)
{
    collective_run *run = (collective_run *)pending;
    return curdi_communicator_wait(run->comms, run->comm_count, false,
                                   lanes_done, run, run->what);
}

/* Ready: no communicator still enqueueing or failed (a failure is
 * "ready": the wait reports it), and every lane's event complete. */
static curd_status run_ready(curd_pending *pending, int *out_ready)
{
    collective_run *run = (collective_run *)pending;
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    for (size_t index = 0; index < run->comm_count; index++) {
        bool failed = false;
        bool in_progress = curdi_communicator_peek(run->comms[index], &failed);
        if (failed || in_progress) {
            *out_ready = failed;
            return CURD_OK;
        }
    }
    bool done = lanes_done(run, &status);
    *out_ready = done;
    return status;
}

static const curdi_pending_ops run_ops = {.complete = collective_run_complete,
                                          .release = collective_run_release,
                                          .wait = collective_run_wait,
                                          .ready = run_ready};

/* One allocation for the run and its arrays (count is bounded, so the
 * sizes cannot overflow). */
static collective_run *run_new(size_t count, const char *what)
{
    size_t bytes = sizeof(collective_run) + count * sizeof(planned) +
                   count * sizeof(lane) + count * sizeof(curd_comm *) +
                   2 * count * sizeof(uint64_t) +
                   2 * count * sizeof(curdi_resident_use);
    collective_run *run = calloc(1, bytes);
    if (run == NULL) {
        curdi_fail(CURD_E_OUT_OF_MEMORY,
                   "%s: no host memory to plan %zu operations. Fix: free "
                   "host memory and try again.",
                   what, count);
        return NULL;
    }
    /* Every array's elements need at most 8-byte alignment, which each
     * offset keeps (the sizes are multiples of 8). */
    unsigned char *at = (unsigned char *)(run + 1);
    run->ops = (planned *)(void *)at;
    at += count * sizeof(planned);
    run->lanes = (lane *)(void *)at;
    at += count * sizeof(lane);
    run->comms = (curd_comm **)(void *)at;
    at += count * sizeof(curd_comm *);
    run->ids = (uint64_t *)(void *)at;
    at += 2 * count * sizeof(uint64_t);
    run->uses = (curdi_resident_use *)(void *)at;
    run->what = what;
    return run;
}

_Static_assert(sizeof(collective_run) % 8 == 0 && sizeof(planned) % 8 == 0 &&
                   sizeof(lane) % 8 == 0 &&
                   sizeof(curdi_resident_use) % 8 == 0,
               "the run's arrays are laid out at 8-byte boundaries");

/* Groups the checked operations by device (lanes) and communicator, lays
 * the buffer uses out lane by lane, and marks them. */
static curd_status plan_lanes(collective_run *run)
{
    for (size_t index = 0; index < run->op_count; index++) {
        planned *op = &run->ops[index];
        size_t at = 0;
        while (at < run->lane_count &&
               run->lanes[at].device != op->comm->device)
            at++;
        if (at == run->lane_count)
            run->lanes[run->lane_count++].device = op->comm->device;
        op->lane = at;
        size_t comm_at = 0;
        while (comm_at < run->comm_count && run->comms[comm_at] != op->comm)
            comm_at++;
        if (comm_at == run->comm_count)
            run->comms[run->comm_count++] = op->comm;
        run->lanes[at].ops++;
        run->lanes[at].bytes += op->send_bytes > op->recv_bytes
                                    ? op->send_bytes
                                    : op->recv_bytes;
    }
    for (size_t at = 0; at < run->lane_count; at++) {
        lane *l = &run->lanes[at];
        l->first_use = run->use_count;
        for (size_t index = 0; index < run->op_count; index++) {
            planned *op = &run->ops[index];
            if (op->lane != at)
                continue;
            if (op->uses_send) {
                op->send_use = run->use_count;
                run->ids[run->use_count++] = op->send_id;
            }
            if (op->uses_recv) {
                op->recv_use = run->use_count;
                run->ids[run->use_count++] = op->recv_id;
            }
        }
        l->use_count = run->use_count - l->first_use;
        if (l->use_count == 0)
            continue;
        curd_status status = curdi_resident_use_begin(
            l->device, run->what, run->ids + l->first_use, l->use_count,
            run->uses + l->first_use);
        if (status != CURD_OK)
            return status; /* the lanes marked so far are unmarked later */
        l->marked = true;
    }
    return CURD_OK;
}

/* Every lane's stream and event, ordered after its device's pending
 * uploads. */
static curd_status take_lanes(collective_run *run)
{
    lane *l = NULL;
    curd_status status;
    for (size_t at = 0; at < run->lane_count; at++) {
        l = &run->lanes[at];
        CURDI_TRY(status, curdi_core_device_enter(l->device), out);
        CURDI_TRY(status, curdi_streams_acquire(l->device, &l->stream), leave);
        CURDI_TRY(status, curdi_streams_events_acquire(l->device, &l->done, 1),
                  leave);
        l->event_taken = true;
        CURDI_TRY(status,
                  curdi_upload_marks_wait_for(l->device,
                                              run->uses + l->first_use,
                                              l->use_count),
                  leave);
        curdi_core_device_leave(l->device);
    }
    return CURD_OK;
leave:
    curdi_core_device_leave(l->device);
out:
    return status; /* what the lanes took is given back by the release */
}

static void *device_pointer(const collective_run *run, size_t use,
                            uint64_t offset)
{
    /* The range was checked against the buffer: base + offset is inside
     * it. */
    return (void *)(uintptr_t)(run->uses[use].device_ptr + offset);
}

/* The NCCL call of one checked operation, on stream, through comm (one
 * of the pair of op->comm); send and recv are NULL where the operation
 * uses no such buffer. */
static curdi_nccl_result enqueue_call(const curdi_nccl *nccl,
                                      const planned *op, curdi_nccl_comm comm,
                                      void *send, void *recv,
                                      curdi_cu_stream stream)
{
    size_t count = (size_t)op->count;
    switch (op->kind) {
    case CURD_COLLECTIVE_ALL_REDUCE:
        return nccl->ncclAllReduce(send, recv, count, op->nccl_type,
                                   op->nccl_op, comm, stream);
    case CURD_COLLECTIVE_BROADCAST:
        /* Off the root NCCL reads no send buffer. */
        return nccl->ncclBroadcast(send != NULL ? send : recv, recv, count,
                                   op->nccl_type, op->root_or_peer, comm,
                                   stream);
    case CURD_COLLECTIVE_REDUCE:
        /* Off the root NCCL writes no receive buffer. */
        return nccl->ncclReduce(send, recv != NULL ? recv : send, count,
                                op->nccl_type, op->nccl_op, op->root_or_peer,
                                comm, stream);
    case CURD_COLLECTIVE_ALL_GATHER:
        return nccl->ncclAllGather(send, recv, count, op->nccl_type, comm,
                                   stream);
    case CURD_COLLECTIVE_REDUCE_SCATTER:
        return nccl->ncclReduceScatter(send, recv, count, op->nccl_type,
                                       op->nccl_op, comm, stream);
    case CURD_COLLECTIVE_SEND:
        return nccl->ncclSend(send, count, op->nccl_type, op->root_or_peer,
                              comm, stream);
    case CURD_COLLECTIVE_RECV:
        return nccl->ncclRecv(recv, count, op->nccl_type, op->root_or_peer,
                              comm, stream);
    }
    return CURDI_NCCL_InvalidArgument; /* check_op refused every other kind */
}

/* The communicator of the pair that carries op: its blocking twin for a
 * collective, the non-blocking one for a send or receive (and for every
 * operation of a communicator without a twin). The choice depends on the
 * operation alone, so every rank makes the same one. */
static curdi_nccl_comm op_nccl(const planned *op)
{
    return curdi_communicator_nccl_for(op->comm, is_point_to_point(op->kind));
}

static bool op_on_twin(const planned *op)
{
    return op_nccl(op) == op->comm->blocking;
}

static curdi_nccl_result enqueue_op(const curdi_nccl *nccl,
                                    const collective_run *run,
                                    const planned *op)
{
    void *send = op->uses_send
                     ? device_pointer(run, op->send_use, op->send_offset)
                     : NULL;
    void *recv = op->uses_recv
                     ? device_pointer(run, op->recv_use, op->recv_offset)
                     : NULL;
    return enqueue_call(nccl, op, op_nccl(op), send, recv,
                        run->lanes[op->lane].stream);
}

/* What one NCCL group of the run left: the failed call (NULL when none),
 * its result and communicator, and whether NCCL still enqueues. */
typedef struct group_outcome {
    const char *call;
    curdi_nccl_result result;
    curdi_nccl_comm failed_comm;
    bool in_progress;
} group_outcome;

/* One NCCL group of the operations that go to blocking twins (blocking)
 * or to the non-blocking communicators (!blocking); none when the run has
 * no such operation. NCCL refuses a group that mixes the two kinds. */
static curd_status enqueue_group(const curdi_nccl *nccl, collective_run *run,
                                 bool blocking, group_outcome *out)
{
    size_t first = 0;
    while (first < run->op_count && op_on_twin(&run->ops[first]) != blocking)
        first++;
    if (first == run->op_count)
        return CURD_OK;
    curdi_nccl_result result = nccl->ncclGroupStart();
    if (result != CURDI_NCCL_Success)
        return curdi_nccl_fail(result, NULL, "ncclGroupStart", NULL);
    curd_status status = CURD_OK;
    for (size_t index = first; index < run->op_count && out->call == NULL;
         index++) {
        const planned *op = &run->ops[index];
        if (op_on_twin(op) != blocking)
            continue;
        status = curdi_core_device_enter(op->comm->device);
        if (status != CURD_OK)
            break;
        result = enqueue_op(nccl, run, op);
        curdi_core_device_leave(op->comm->device);
        if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
            out->call = kind_calls[op->kind];
            out->result = result;
            out->failed_comm = op_nccl(op);
        }
    }
    curdi_nccl_result end = nccl->ncclGroupEnd();
    out->in_progress |= end == CURDI_NCCL_InProgress;
    if (status != CURD_OK)
        return status;
    if (out->call == NULL && end != CURDI_NCCL_Success &&
        end != CURDI_NCCL_InProgress) {
        out->result = end;
        out->call = "ncclGroupEnd";
    }
    return CURD_OK;
}

/* The run's NCCL groups (the collectives on the blocking twins first,
 * then the rest), then each lane's event. A failure inside a group aborts
 * every communicator of the run: what NCCL took of the group is
 * unknown. */
static curd_status enqueue(collective_run *run)
{
    const curdi_nccl *nccl = NULL;
    group_outcome outcome = {NULL, CURDI_NCCL_Success, NULL, false};
    curd_status status;
    CURDI_TRY(status, curdi_nccl_ready(&nccl), out);
    CURDI_TRY(status, enqueue_group(nccl, run, true, &outcome), abort);
    if (outcome.call == NULL)
        CURDI_TRY(status, enqueue_group(nccl, run, false, &outcome), abort);
    if (outcome.call != NULL) {
        char text[128];
        snprintf(text, sizeof text, "%s: %s", run->what, outcome.call);
        CURDI_TRY(status,
                  curdi_nccl_fail_as(CURD_E_COMM, outcome.result,
                                     outcome.failed_comm, text,
                                     "every communicator of this call was"
                                     " aborted: close them and open new"
                                     " ones on every rank"),
                  abort);
    }
    /* The usual case: NCCL enqueued everything in the groups' ends, and
     * the events go behind it now; else the wait records them. Failing
     * here leaves NCCL's work enqueued: the communicators are aborted, so
     * the release's drain cannot wait on a peer. */
    if (!outcome.in_progress)
        CURDI_TRY(status, record_lanes(run), abort);
    return CURD_OK;
abort:
    for (size_t index = 0; index < run->comm_count; index++)
        curdi_communicator_abort(run->comms[index]);
out:
    return status;
}

/* Checks, plans, marks and enqueues; on CURD_OK *out is the run in
 * flight, on a failure nothing is left. async: the caller will receive
 * the pending (curd_collective_run_async), so the run waits on one device
 * and takes its slot in the registry of live pendings before anything is
 * enqueued. */
static curd_status start(const curd_collective *ops, size_t count, bool async,
                         const char *what, collective_run **out)
{
    if (ops == NULL || count == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: ops is %p with count %zu. Fix: pass at least "
                          "one curd_collective.",
                          what, (const void *)ops, count);
    if (count > CURDI_COLLECTIVE_MAX_OPS)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %zu operations in one group, more than the "
                          "%u curd takes. Fix: split them into several "
                          "calls.",
                          what, count, CURDI_COLLECTIVE_MAX_OPS);
    collective_run *run = run_new(count, what);
    if (run == NULL)
        return CURD_E_OUT_OF_MEMORY;
    curd_status status;
    for (size_t index = 0; index < count; index++) {
        CURDI_TRY(status, check_op(&ops[index], index, what, &run->ops[index]),
                  free_run);
        if (atomic_load(&ops[index].comm->runs_in_flight) >=
            CURDI_COMM_MAX_RUNS_IN_FLIGHT)
            CURDI_TRY(status,
                      curdi_fail(CURD_E_BUSY,
                                 "%s: operation %zu's communicator (rank %d "
                                 "of %d) has %d runs in flight, the most "
                                 "curd keeps queued on one communicator; "
                                 "nothing was enqueued. Fix: "
                                 "curd_pending_wait and curd_pending_free "
                                 "earlier runs first.",
                                 what, index, ops[index].comm->rank,
                                 ops[index].comm->size,
                                 CURDI_COMM_MAX_RUNS_IN_FLIGHT),
                      free_run);
        if (async && ops[index].comm->device != ops[0].comm->device)
            CURDI_TRY(status,
                      curdi_fail(CURD_E_INVALID_ARGUMENT,
                                 "%s: operation %zu's communicator is of "
                                 "another device than operation 0's; an "
                                 "asynchronous run waits on one device. "
                                 "Fix: use curd_collective_run for a group "
                                 "over several devices.",
                                 what, index),
                      free_run);
    }
    run->op_count = count;
    curdi_pending_init(&run->base, ops[0].comm->device, &run_ops);
    /* The lanes' own streams and events carry the work; the base's are
     * unused, but for curd_pending_ready's query of the end event. */
    run->base.timed = false;
    CURDI_TRY(status, plan_lanes(run), release);
    if (async)
        CURDI_TRY(status, curdi_pending_take_slot(&run->base, what), release);
    CURDI_TRY(status, take_lanes(run), release);
    run->base.events[1] = run->lanes[0].done;
    CURDI_TRY(status, enqueue(run), release);
    /* The communicators cannot be closed under the run (collective_run_release). */
    for (size_t index = 0; index < run->comm_count; index++)
        atomic_fetch_add(&run->comms[index]->runs_in_flight, 1);
    run->counted_in_flight = true;
    run->base.enqueue_ns = curdi_clock_ns() - run->base.start_ns;
    *out = run;
    return CURD_OK;
release:
    /* Once a pending, the run is its release's to free. */
    curdi_pending_release(&run->base);
    return status;
free_run:
    free(run);
    return status;
}

CURD_API curd_status curd_collective_run(const curd_collective *ops,
                                         size_t count)
{
    CURDI_RANGE("curd_collective_run");
    collective_run *run = NULL;
    curd_status status = start(ops, count, false, "curd_collective_run", &run);
    if (status != CURD_OK)
        return status;
    status = curdi_pending_finish(&run->base, false);
    curdi_pending_release(&run->base);
    return status;
}

CURD_API curd_status curd_collective_run_async(const curd_collective *ops,
                                               size_t count,
                                               curd_pending **out_pending)
{
    CURDI_RANGE("curd_collective_run_async");
    const char *what = "curd_collective_run_async";
    curd_status status = curdi_pending_check_out(out_pending, what);
    if (status != CURD_OK)
        return status;
    collective_run *run = NULL;
    status = start(ops, count, true, what, &run);
    if (status != CURD_OK)
        return status;
    curdi_pending_publish(&run->base);
    *out_pending = &run->base;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Collectives recorded in a batch: an external item of the batch module
 * (lib/launch/batch.h), which stands below this one and calls back here.
 * ---------------------------------------------------------------------- */

/* The checked operation and its device pointers, resolved when recorded
 * (a resident buffer keeps its address for its life; the batch checks at
 * every run that it lives). It holds its communicator (batch_holds). */
typedef struct batch_collective {
    planned op;
    void *send, *recv; /* NULL where the operation uses no such buffer */
} batch_collective;

static curd_status batch_check(void *item, const char *what)
{
    return curdi_communicator_check(((batch_collective *)item)->op.comm, what);
}

static curd_status batch_poll(void *item, uint64_t waited_ns,
                              bool *in_progress, const char *what)
{
    curd_comm *comm = ((batch_collective *)item)->op.comm;
    curd_status status =
        curdi_communicator_poll_error(comm, in_progress, what);
    if (status != CURD_OK)
        return status;
    return curdi_communicator_poll_timeout(comm, waited_ns, false, what);
}

/* One NCCL call on the batch's stream, in order with the batch's other
 * items. A non-blocking communicator may still be enqueueing when the call
 * returns (connecting to its peers, in NCCL's own thread): the next item,
 * and the end of a graph's capture, go behind it only once NCCL is done,
 * which the communicator's polls see within its timeout.
 *
 * A failure aborts nothing here: the call may be inside a graph's
 * capture, where NCCL's abort cannot synchronise its own streams (the
 * thread is in capture mode) and keeps the communicator's memory for
 * ever. The batch aborts its collectives once the capture has ended
 * (batch_abort, through the batch's failure path). */
static curd_status batch_enqueue(void *item, curdi_cu_stream stream,
                                 const char *what)
{
    batch_collective *recorded = item;
    curd_comm *comm = recorded->op.comm;
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    curdi_nccl_comm handle = curdi_communicator_nccl_for(
        comm, is_point_to_point(recorded->op.kind));
    curdi_nccl_result result = enqueue_call(nccl, &recorded->op, handle,
                                            recorded->send, recorded->recv,
                                            stream);
    if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
        char text[128];
        snprintf(text, sizeof text, "%s: %s", what,
                 kind_calls[recorded->op.kind]);
        return curdi_nccl_fail_as(
            CURD_E_COMM, result, handle, text,
            "the communicator was aborted: close it and open a new one on "
            "every rank");
    }
    return curdi_communicator_poll_until_done(&comm, 1, false, NULL, NULL,
                                              what);
}

static void batch_abort(void *item)
{
    curdi_communicator_abort(((batch_collective *)item)->op.comm);
}

static void batch_complete(void *item)
{
    const planned *op = &((batch_collective *)item)->op;
    curdi_communicator_count(op->comm->device, 1,
                             op->send_bytes > op->recv_bytes ? op->send_bytes
                                                             : op->recv_bytes);
}

static void batch_free(void *item)
{
    batch_collective *recorded = item;
    atomic_fetch_sub(&recorded->op.comm->batch_holds, 1);
    free(recorded);
}

static const curdi_batch_external_ops batch_ops = {
    .check = batch_check,
    .enqueue = batch_enqueue,
    .poll = batch_poll,
    .abort = batch_abort,
    .complete = batch_complete,
    .free = batch_free,
};

CURD_API curd_status curd_batch_collective(curd_batch *batch,
                                           const curd_collective *op)
{
    const char *what = "curd_batch_collective";
    curd_device *device = NULL;
    batch_collective *recorded = NULL;
    /* The pointers of the buffers it uses, each resolved on the device
     * (uses[] in the op's order: send, then recv). */
    curdi_resident_use uses[2];
    uint64_t ids[2];
    size_t use_count = 0;
    curd_status status;
    CURDI_TRY(status, curdi_batch_record_check(batch, what, &device), out);
    if (op == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: op is NULL. Fix: pass the address of a "
                          "curd_collective.",
                          what);
    CURDI_TRY(status, curdi_communicator_check(op->comm, what), out);
    if (op->comm->device != device)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the communicator (rank %d of %d) was opened "
                          "on GPU %d, the batch on GPU %d. Fix: record a "
                          "collective in a batch of its communicator's "
                          "device.",
                          what, op->comm->rank, op->comm->size,
                          op->comm->device->ordinal, device->ordinal);
    recorded = calloc(1, sizeof *recorded);
    if (recorded == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: no host memory for the item. Fix: free "
                          "host memory and try again.",
                          what);
    CURDI_TRY(status, check_op(op, 0, what, &recorded->op), free_recorded);
    if (recorded->op.uses_send)
        ids[use_count++] = recorded->op.send_id;
    if (recorded->op.uses_recv)
        ids[use_count++] = recorded->op.recv_id;
    CURDI_TRY(status,
              curdi_resident_use_begin(device, what, ids, use_count, uses),
              free_recorded);
    curdi_resident_use_end(device, uses, use_count);
    /* Each range was checked inside its buffer. */
    size_t at = 0;
    if (recorded->op.uses_send)
        recorded->send = (void *)(uintptr_t)(uses[at++].device_ptr +
                                             recorded->op.send_offset);
    if (recorded->op.uses_recv)
        recorded->recv = (void *)(uintptr_t)(uses[at].device_ptr +
                                             recorded->op.recv_offset);
    CURDI_TRY(status,
              curdi_batch_record_external(batch, &batch_ops, recorded, uses,
                                          use_count, what),
              free_recorded);
    atomic_fetch_add(&recorded->op.comm->batch_holds, 1);
    return CURD_OK;
free_recorded:
    free(recorded);
out:
    return status;
}
