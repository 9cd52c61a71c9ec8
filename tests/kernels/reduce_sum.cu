// reduce_sum: *sum += the sum of in[0..n) (uint32 values into a uint64),
// through a grid-stride loop and one atomicAdd per thread.
extern "C" __global__ void curd_reduce_sum(const unsigned int *in,
                                           unsigned int n,
                                           unsigned long long *sum)
{
    unsigned long long local = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x)
        local += in[i];
    if (local != 0)
        atomicAdd(sum, local);
}
