/* graph.c - CUDA graphs of recorded work; graph.h says what each call
 * promises and what the caller gives.
 *
 * Read top to bottom: dropping a graph, finding the kernel nodes of a
 * captured one, the capture, the in-place update, the launch. */
#include "launch/graph.h"

#include <stdlib.h>
#include <string.h>

#include "base/nvtx.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "launch/program.h"

void curdi_graph_drop(curdi_graph *graph)
{
    const curdi_driver *driver = curdi_driver_get();
    bool usable = driver != NULL && curdi_driver_usable();
    if (graph->exec != NULL && usable)
        (void)curdi_driver_note(driver->cuGraphExecDestroy(graph->exec));
    if (graph->graph != NULL && usable)
        (void)curdi_driver_note(driver->cuGraphDestroy(graph->graph));
    curdi_graph_forget(graph);
}

void curdi_graph_forget(curdi_graph *graph)
{
    graph->exec = NULL;
    graph->graph = NULL;
    graph->nodes_known = false;
}

/* Whether a captured kernel node runs exactly this launch. */
static bool node_is(curdi_cu_graph_node node,
                    const curdi_graph_kernel *kernel)
{
    curdi_cu_kernel_node_params params;
    memset(&params, 0, sizeof params);
    if (curdi_driver_note(curdi_driver_get()->cuGraphKernelNodeGetParams(
            node, curdi_cu_kernel_node_params_abi(&params)))
        != CURDI_CUDA_SUCCESS)
        return false;
    const curdi_launch_shape *shape = kernel->shape;
    if (params.func != curdi_program_function(kernel->program)
        || params.grid_x != shape->grid[0] || params.grid_y != shape->grid[1]
        || params.grid_z != shape->grid[2]
        || params.block_x != shape->block[0]
        || params.block_y != shape->block[1]
        || params.block_z != shape->block[2]
        || params.shared_bytes != shape->dynamic_shared_bytes
        || (kernel->nargs != 0 && params.kernel_params == NULL))
        return false;
    for (size_t index = 0; index < kernel->nargs; index++) {
        const curd_arg *arg = &kernel->args[index];
        size_t bytes = arg->kind == CURD_ARG_SCALAR ? arg->byte_len
                                                    : sizeof(uint64_t);
        if (memcmp(params.kernel_params[index], kernel->params[index], bytes)
            != 0)
            return false;
    }
    return true;
}

/* Finds each kernel's nodes in the captured graph. The driver lists a
 * captured graph's nodes in the order they were added: each launch takes
 * the first kernel node after the last one taken that matches it (its
 * function, shape and parameters); when one is not found, changed
 * launches are captured again instead of updated. */
static bool find_nodes(curdi_graph *graph, curdi_graph_kernel *kernels)
{
    const curdi_driver *driver = curdi_driver_get();
    size_t count = 0;
    if (curdi_driver_note(driver->cuGraphGetNodes(graph->graph, NULL, &count))
        != CURDI_CUDA_SUCCESS)
        return false;
    curdi_cu_graph_node *nodes = calloc(count + 1u, sizeof *nodes);
    if (nodes == NULL)
        return false;
    bool found = curdi_driver_note(driver->cuGraphGetNodes(
                     graph->graph, nodes, &count))
                 == CURDI_CUDA_SUCCESS;
    size_t next = 0;
    for (curdi_graph_kernel *kernel = kernels; found && kernel != NULL;
         kernel = kernel->next) {
        for (uint32_t iteration = 0;
             found && iteration < kernel->shape->iterations; iteration++) {
            /* Other nodes (copies, and the kernels that are not the
             * work's launches, such as a batch's read-backs) are passed
             * over. */
            curdi_cu_graph_node_type type = 1u;
            while (next < count
                   && (curdi_driver_note(driver->cuGraphNodeGetType(
                           nodes[next], &type))
                           != CURDI_CUDA_SUCCESS
                       || type != CURDI_CU_GRAPH_NODE_TYPE_KERNEL
                       || !node_is(nodes[next], kernel)))
                next++;
            found = next < count;
            if (found)
                kernel->nodes[iteration] = nodes[next++];
        }
    }
    free(nodes);
    return found;
}

curd_status curdi_graph_capture(curdi_graph *graph, struct curd_device *device,
                                curdi_cu_stream *stream,
                                curd_status (*enqueue)(void *context,
                                                       curdi_cu_stream stream),
                                void *context, curdi_graph_kernel *kernels)
{
    CURDI_RANGE("graph capture");
    const curdi_driver *driver = curdi_driver_get();
    curdi_graph_drop(graph);
    curdi_cu_result rc = curdi_driver_note(driver->cuStreamBeginCapture(
        *stream, CURDI_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(device, rc, "cuStreamBeginCapture");
    curd_status status = enqueue(context, *stream);
    curdi_cu_graph captured = NULL;
    rc = curdi_driver_note(driver->cuStreamEndCapture(*stream, &captured));
    if (rc != CURDI_CUDA_SUCCESS) {
        /* A stream whose capture did not end cannot go back to the
         * pool. */
        curdi_streams_discard(device, *stream);
        *stream = NULL;
        if (status == CURD_OK)
            status = curdi_pending_fail_driver(device, rc,
                                               "cuStreamEndCapture");
    }
    if (status != CURD_OK) {
        if (captured != NULL)
            (void)curdi_driver_note(driver->cuGraphDestroy(captured));
        return status;
    }
    graph->graph = captured;
    rc = curdi_driver_note(
        driver->cuGraphInstantiateWithFlags(&graph->exec, captured, 0));
    if (rc != CURDI_CUDA_SUCCESS) {
        graph->exec = NULL;
        curdi_graph_drop(graph);
        return curdi_pending_fail_driver(device, rc,
                                         "cuGraphInstantiateWithFlags");
    }
    graph->nodes_known = find_nodes(graph, kernels);
    return CURD_OK;
}

curd_status curdi_graph_update(curdi_graph *graph, struct curd_device *device,
                               const curdi_graph_kernel *kernel,
                               uint64_t *updated)
{
    const curdi_driver *driver = curdi_driver_get();
    const curdi_launch_shape *shape = kernel->shape;
    if (shape->dynamic_shared_bytes > 48u * 1024u) {
        curd_status status = curdi_program_reserve_dynamic_shared(
            kernel->program, shape->dynamic_shared_bytes);
        if (status != CURD_OK)
            return status;
    }
    curdi_cu_kernel_node_params params = {
        .func = curdi_program_function(kernel->program),
        .grid_x = shape->grid[0], .grid_y = shape->grid[1],
        .grid_z = shape->grid[2], .block_x = shape->block[0],
        .block_y = shape->block[1], .block_z = shape->block[2],
        .shared_bytes = shape->dynamic_shared_bytes,
        .kernel_params = kernel->params};
    for (uint32_t iteration = 0; iteration < shape->iterations; iteration++) {
        curdi_cu_result rc =
            curdi_driver_note(driver->cuGraphExecKernelNodeSetParams(
                graph->exec, kernel->nodes[iteration],
                curdi_cu_kernel_node_params_abi(&params)));
        if (rc != CURDI_CUDA_SUCCESS) {
            /* Part way: the nodes no longer say what the graph runs. */
            graph->nodes_known = false;
            return curdi_pending_fail_driver(device, rc,
                                             "cuGraphExecKernelNodeSetParams");
        }
        (*updated)++;
    }
    return CURD_OK;
}

curd_status curdi_graph_launch(const curdi_graph *graph,
                               struct curd_device *device,
                               curdi_cu_stream stream)
{
    CURDI_RANGE("graph replay");
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuGraphLaunch(graph->exec, stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(device, rc, "cuGraphLaunch");
    return CURD_OK;
}
