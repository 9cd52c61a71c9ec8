/* graph.h - CUDA graphs of recorded work: capture, the kernel nodes found
 * in a captured graph, their in-place updates, and the launch.
 *
 * The module takes plain data: the stream, the work's kernel launches in the
 * order they are enqueued (a list of curdi_graph_kernel: the program, the
 * shape, the arguments and the parameter list passed), and a function that
 * enqueues the work on the stream while it captures. The batch module
 * (launch/batch_run.c) is its caller; it keeps one curdi_graph per graph batch
 * and says when a capture is due. Context current for every call but
 * curdi_graph_forget. */
#ifndef CURD_LIB_LAUNCH_GRAPH_H
#define CURD_LIB_LAUNCH_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"
#include "launch/dispatch.h"

struct curd_device;

/* One kernel launch of the work. */
typedef struct curdi_graph_kernel {
    const curd_program *program;
    const curdi_launch_shape *shape;
    const curd_arg *args; /* nargs: for the bytes each parameter passes */
    size_t nargs;
    void **params;        /* the parameter list the launch passes */
    /* shape->iterations of them: the launch's kernel nodes in the captured
     * graph, filled by the capture. */
    curdi_cu_graph_node *nodes;
    struct curdi_graph_kernel *next; /* the next launch of the work */
} curdi_graph_kernel;

typedef struct curdi_graph {
    curdi_cu_graph graph;
    curdi_cu_graph_exec exec;
    bool nodes_known; /* every kernel's nodes were found after the capture */
} curdi_graph;

/* Destroys the executable graph and the graph (when the driver is still
 * usable) and forgets them. */
void curdi_graph_drop(curdi_graph *graph);
/* Forgets them without a driver call: their context is gone. */
void curdi_graph_forget(curdi_graph *graph);

/* Captures what enqueue puts on *stream into a new graph (the old one
 * dropped first), instantiates it and finds each kernel's nodes (the
 * driver lists a captured graph's nodes in the order they were added,
 * which this checks node by node; nodes_known says whether it could).
 * A stream whose capture did not end cannot go back to a pool: it is
 * discarded and *stream set to NULL. On failure the graph is dropped. */
curd_status curdi_graph_capture(curdi_graph *graph, struct curd_device *device,
                                curdi_cu_stream *stream,
                                curd_status (*enqueue)(void *context,
                                                       curdi_cu_stream stream),
                                void *context, curdi_graph_kernel *kernels);

/* Writes one kernel's launch (its shape and parameter list now) into its
 * nodes of the executable graph, in place; adds the nodes written to
 * *updated. Needs nodes_known; a failure of the driver part way clears
 * it, so the graph is captured again. */
curd_status curdi_graph_update(curdi_graph *graph, struct curd_device *device,
                               const curdi_graph_kernel *kernel,
                               uint64_t *updated);

/* Launches the executable graph on stream. */
curd_status curdi_graph_launch(const curdi_graph *graph,
                               struct curd_device *device,
                               curdi_cu_stream stream);

#endif
