// coop_sum: a cooperative kernel with a grid-wide barrier. Phase 1: each
// block sums its grid-stride share of in[0..n) into partial[blockIdx.x].
// grid.sync(). Phase 2: every thread of every block reads all partials and
// thread i writes out[i] = the total, for i < gridDim.x * blockDim.x. A
// launch without co-residency (not cuLaunchCooperativeKernel) may hang or
// read partials not yet written.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void curd_coop_sum(const unsigned int *in,
                                         unsigned int n,
                                         unsigned long long *partial,
                                         unsigned long long *out)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ unsigned long long block_sum;
    if (threadIdx.x == 0)
        block_sum = 0;
    __syncthreads();
    unsigned long long local = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x)
        local += in[i];
    atomicAdd(&block_sum, local);
    __syncthreads();
    if (threadIdx.x == 0)
        partial[blockIdx.x] = block_sum;
    grid.sync();
    unsigned long long total = 0;
    for (unsigned int b = 0; b < gridDim.x; b++)
        total += partial[b];
    out[blockIdx.x * blockDim.x + threadIdx.x] = total;
}
