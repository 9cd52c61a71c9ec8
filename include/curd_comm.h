/*
 * curd_comm.h - curd's communicators and collectives (curd 1.1).
 *
 * Included by curd.h, which a program includes instead of this file: the
 * conventions at the top of curd.h hold here too. Kept apart because this
 * part is optional: it needs NCCL at run time, and none of the rest of
 * curd does. It is installed beside curd.h, so pkg-config's Cflags for
 * curd cover it.
 */
#ifndef CURD_COMM_H
#define CURD_COMM_H

#include "curd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Communicators and collectives (curd 1.1)
 * A curd_comm is one rank of an NCCL communicator, bound to one
 * curd_device. NCCL (libnccl.so.2, 2.14 or newer, or $CURD_LIBNCCL) is
 * loaded on the first call of this group, never before; without it every
 * call here returns CURD_E_UNSUPPORTED, naming what to install.
 *
 * Communicators never hang: no call waits inside NCCL for a peer, and
 * every wait (opening, a collective, closing) polls NCCL's asynchronous
 * error and the work's completion against the communicator's timeout. A
 * peer that dies or does not answer within it, or an error NCCL reports, is
 * CURD_E_COMM with NCCL's message: the communicator is then aborted (every
 * later call on it is CURD_E_COMM until it is closed), while the device
 * stays usable for local work. curd never changes NCCL's transports (its
 * environment, NCCL_NVLS_ENABLE and the like, stays in charge).
 *
 * A curd_comm belongs to one thread at a time. curd_device_close closes
 * the device's open communicators; what is left is a shell that every
 * call refuses (CURD_E_INVALID_ARGUMENT) and curd_comm_close frees. */
typedef struct curd_comm curd_comm;

#define CURD_COMM_ID_BYTES 128
/* What ranks share out of band (a file, MPI, a socket) to meet: made once
 * by curd_comm_id_new on one rank, copied to the others byte for byte. */
typedef struct curd_comm_id {
    unsigned char bytes[CURD_COMM_ID_BYTES];
} curd_comm_id;

typedef struct curd_comm_options {
    size_t struct_size;
    uint32_t flags;      /* none yet: must be 0 */
    /* How long any wait on the communicator's work (collectives, its
     * close) may take, in ms. 0: the default, $CURD_COMM_TIMEOUT_MS when
     * set, else 30000. */
    uint32_t timeout_ms;
    /* How long opening (and splitting) may wait for every rank to join:
     * NCCL's setup takes seconds. 0: the larger of timeout_ms and
     * 60000. */
    uint32_t open_timeout_ms;
} curd_comm_options;

CURD_API void curd_comm_options_init(curd_comm_options *options);

/* A fresh unique id (ncclGetUniqueId): its maker's host listens for the
 * ranks that join with it. */
CURD_API curd_status curd_comm_id_new(curd_comm_id *id);
/* Joins rank `rank` of `nranks` on device; returns once every rank has
 * joined (or fails within the timeout). options may be NULL. */
CURD_API curd_status curd_comm_open(curd_device *device,
                                    const curd_comm_id *id, int rank,
                                    int nranks,
                                    const curd_comm_options *options,
                                    curd_comm **out_comm);
/* One communicator over `count` devices of this process, rank i on
 * devices[i]: comms[i]. All or nothing. */
CURD_API curd_status curd_comm_open_all(curd_device *const *devices,
                                        int count,
                                        const curd_comm_options *options,
                                        curd_comm **comms);
/* Joins the job a launcher started: the rank and size from torchrun
 * (RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, _SIZE) or Slurm
 * (SLURM_PROCID, SLURM_NTASKS), in that order; the meeting point from
 * NCCL_COMM_ID (host:port of rank 0) when set, else torchrun's
 * MASTER_ADDR with MASTER_PORT + 1 (torchrun's own store holds
 * MASTER_PORT), which curd then puts in NCCL_COMM_ID: NCCL's own
 * bootstrap, so rank 0 listens and every rank finds it. */
CURD_API curd_status curd_comm_open_from_env(curd_device *device,
                                             const curd_comm_options *options,
                                             curd_comm **out_comm);
#define CURD_COMM_SPLIT_NONE (-1)
/* Splits comm by colour (ranks of one colour form one communicator,
 * ordered by key, then by their rank here); every rank of comm calls it,
 * each from its own thread or process. color CURD_COMM_SPLIT_NONE takes
 * no part: *out_comm is NULL. CURD_E_UNSUPPORTED when NCCL lacks
 * ncclCommSplit (before 2.18). The new communicator keeps comm's
 * timeout. */
CURD_API curd_status curd_comm_split(curd_comm *comm, int color, int key,
                                     curd_comm **out_comm);
CURD_API curd_status curd_comm_rank(const curd_comm *comm, int *out_rank);
CURD_API curd_status curd_comm_size(const curd_comm *comm, int *out_size);
/* Waits for the communicator's work and frees it (aborting it when the
 * wait fails or times out; the status says so, and it is freed anyway).
 * CURD_E_BUSY, with nothing done, while an asynchronous collective run on
 * it is not yet freed. NULL is a no-op; a second close is
 * CURD_E_INVALID_ARGUMENT. */
CURD_API curd_status curd_comm_close(curd_comm *comm);

typedef enum curd_dtype {
    CURD_DTYPE_INT8 = 0,
    CURD_DTYPE_UINT8 = 1,
    CURD_DTYPE_INT32 = 2,
    CURD_DTYPE_UINT32 = 3,
    CURD_DTYPE_INT64 = 4,
    CURD_DTYPE_UINT64 = 5,
    CURD_DTYPE_FLOAT16 = 6,
    CURD_DTYPE_BFLOAT16 = 7,
    CURD_DTYPE_FLOAT32 = 8,
    CURD_DTYPE_FLOAT64 = 9
} curd_dtype;

typedef enum curd_reduce_op {
    CURD_REDUCE_SUM = 0,
    CURD_REDUCE_PROD = 1,
    CURD_REDUCE_MIN = 2,
    CURD_REDUCE_MAX = 3,
    CURD_REDUCE_AVG = 4 /* integers: the sum divided, truncated */
} curd_reduce_op;

typedef enum curd_collective_kind {
    CURD_COLLECTIVE_ALL_REDUCE = 0,
    CURD_COLLECTIVE_BROADCAST = 1,
    CURD_COLLECTIVE_REDUCE = 2,
    CURD_COLLECTIVE_ALL_GATHER = 3,
    CURD_COLLECTIVE_REDUCE_SCATTER = 4,
    CURD_COLLECTIVE_SEND = 5,
    CURD_COLLECTIVE_RECV = 6
} curd_collective_kind;

/* One operation on resident buffers of the communicator's device. count
 * is in elements; the ranges it covers (n is the communicator's size):
 *   all_reduce      send count, recv count
 *   broadcast       send count (root only), recv count
 *   reduce          send count, recv count (root only)
 *   all_gather      send count, recv count * n (rank r's part at r*count)
 *   reduce_scatter  send count * n, recv count
 *   send / recv     send count / recv count; root_or_peer the peer
 * A buffer a rank does not use (a broadcast's send off the root, a
 * reduce's recv off the root, a send's recv, a recv's send) is ignored.
 * In place where NCCL allows it: the same range of one buffer for
 * all_reduce, broadcast and reduce; all_gather's send at recv's part r,
 * reduce_scatter's recv at send's part r. Any other overlap of send and
 * recv is CURD_E_INVALID_ARGUMENT. */
typedef struct curd_collective {
    curd_comm *comm;
    curd_collective_kind kind;
    curd_dtype dtype;
    curd_reduce_op op; /* all_reduce, reduce, reduce_scatter */
    curd_buffer send;
    uint64_t send_offset; /* bytes */
    curd_buffer recv;
    uint64_t recv_offset; /* bytes */
    uint64_t count;
    int root_or_peer;     /* broadcast, reduce: root; send, recv: peer */
} curd_collective;

/* Runs ops[0 .. count) as one NCCL group and waits for them. Every
 * operation is checked before anything is enqueued (the communicator,
 * the kind, type and operation, the root or peer, each range against its
 * buffer: CURD_E_RANGE, CURD_E_OVERFLOW, CURD_E_STALE_HANDLE for a
 * buffer of another device); the buffers are in use (curd_buffer_free is
 * CURD_E_BUSY) until the work completes, and the work is ordered after
 * the device's pending asynchronous uploads. The operations may span
 * several devices of this process (one thread driving every rank of a
 * curd_comm_open_all). CURD_E_COMM (every communicator of the group
 * aborted) when a peer fails or times out. */
CURD_API curd_status curd_collective_run(const curd_collective *ops,
                                         size_t count);
/* The same, returning at once with the work in flight; every operation's
 * communicator must be of one device. curd_pending_wait then polls as
 * the synchronous call does (CURD_E_COMM on a failure or a timeout). */
CURD_API curd_status curd_collective_run_async(const curd_collective *ops,
                                               size_t count,
                                               curd_pending **out_pending);

#ifdef __cplusplus
}
#endif

#endif /* CURD_COMM_H */
