// bfs_step: one hop of breadth-first search over a CSR graph, for fixpoint
// iterations. Each vertex v whose level is `level` relaxes its neighbours:
// an unvisited one (level 0xFFFFFFFF) gets level + 1 and *changed is set.
// Launching it with level 0, 1, 2, ... (or as many times as the graph's
// diameter) computes every vertex's distance from the sources.
extern "C" __global__ void curd_bfs_step(const unsigned int *row_offsets,
                                         const unsigned int *columns,
                                         unsigned int *levels,
                                         unsigned int vertex_count,
                                         unsigned int level,
                                         unsigned int *changed)
{
    unsigned int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vertex_count || levels[v] != level)
        return;
    for (unsigned int e = row_offsets[v]; e < row_offsets[v + 1]; e++) {
        unsigned int w = columns[e];
        if (levels[w] == 0xFFFFFFFFu) {
            levels[w] = level + 1u;
            *changed = 1u;
        }
    }
}
