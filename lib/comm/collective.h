/* collective.h - collectives on resident buffers: curd_collective_run and
 * curd_collective_run_async (the public calls in curd.h).
 *
 * A run checks every operation before anything is enqueued (the
 * communicator, the enums, the root or peer, each range against its
 * buffer, the overlaps NCCL allows), marks the buffers in use, takes one
 * pooled stream and one event per device the operations touch, orders
 * those streams after the device's pending asynchronous uploads, enqueues
 * every operation in one NCCL group, records the events, and waits
 * through curdi_communicator_wait (communicator.h): NCCL's asynchronous errors
 * and the events, until the timeout. The asynchronous form hands the same
 * run out as a curd_pending (lib/core/pending.h) whose wait is that
 * poll. curd_batch_collective records one checked operation in a batch
 * as an external item (lib/launch/batch.h), which the batch enqueues on
 * its stream or captures into its graph and whose wait polls the
 * communicator. The module has no state of its own: its counts are the
 * communicator module's. */
#ifndef CURD_LIB_COMM_COLLECTIVE_H
#define CURD_LIB_COMM_COLLECTIVE_H

#include "curd.h"

/* The bytes of one element of dtype; 0 for a value curd_dtype lacks. */
unsigned curdi_collective_dtype_bytes(curd_dtype dtype);

#endif
