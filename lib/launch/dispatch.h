/* dispatch.h - the dispatch module: launches of a program's kernel
 * (curd_dispatch, curd_dispatch_async), what lib/device.c needs of it, and
 * what it shares with the batch module above it: the checks of a launch and
 * its arguments, and enqueueing a launch (with its fixpoint iterations).
 *
 * curd_dispatch and curd_dispatch_async stage borrowed memory for one
 * launch; a batch (lib/launch/batch.c) records launches on resident buffers and
 * runs them later. Both check a launch and its arguments by the same
 * rules, here.
 *
 * The module's state (struct curdi_dispatch_state behind
 * curd_device.dispatch) is its counters, atomics that a dispatch adds to
 * once its work is complete, so dispatching threads share no lock. */
#ifndef CURD_LIB_LAUNCH_DISPATCH_H
#define CURD_LIB_LAUNCH_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"
#include "memory/resident.h"

struct curd_device;

/* Creates device->dispatch with its counters at zero; no driver call. On
 * failure nothing is left. */
curd_status curdi_dispatch_open(struct curd_device *device);
/* Frees the state. NULL-safe. */
void curdi_dispatch_close(struct curd_device *device);

/* The dispatch counters, for curd_device_stats and its reset. */
void curdi_dispatch_stats(struct curd_device *device, curd_stats *stats);
void curdi_dispatch_stats_reset(struct curd_device *device);
/* Counts launches a batch run completed (curd_stats.launches). */
void curdi_dispatch_count_launches(struct curd_device *device,
                                   uint64_t launches);

/* The grid and block a launch runs, once checked. */
typedef struct curdi_launch_shape {
    unsigned grid[3];
    unsigned block[3];
    unsigned dynamic_shared_bytes;
    bool cooperative;
    uint32_t iterations;
    void *cu_stream; /* the caller's stream (curd 1.1), or NULL */
    curd_timing *timing; /* where curd_dispatch writes its timing, or NULL */
} curdi_launch_shape;

/* Checks a curd_launch against the device's and the kernel's limits
 * (cooperative launches against co-residency: one driver query) and
 * derives the grid from elements when it is all zero. */
curd_status curdi_dispatch_check_shape(struct curd_device *device,
                                       const curd_program *program,
                                       const curd_launch *launch,
                                       const char *what,
                                       curdi_launch_shape *out);

/* Checks every argument alone (kind, role, pointers, sizes, alignments,
 * length arguments) and, when the driver tells the kernel's parameter
 * list, the arguments against it. No device access. */
curd_status curdi_dispatch_check_args(const curd_program *program,
                                      const curd_arg *args, size_t nargs,
                                      const char *what);

/* Binding `index` holds device_bytes: CURD_E_RANGE when the kernel's
 * length for it (elem_bytes times static_elems or its length argument)
 * is more. */
curd_status curdi_dispatch_check_binding(const curd_arg *args, size_t index,
                                         size_t device_bytes,
                                         const char *what);

/* Enqueues shape->iterations launches of the program's kernel with the
 * parameter list params on stream (raising the kernel's dynamic shared
 * memory limit first when the shape needs more than 48 KiB). Context
 * current; a failure that loses the context marks the device lost. */
curd_status curdi_dispatch_enqueue_launch(struct curd_device *device,
                                          const curd_program *program,
                                          const curdi_launch_shape *shape,
                                          void **params,
                                          curdi_cu_stream stream);


#endif
