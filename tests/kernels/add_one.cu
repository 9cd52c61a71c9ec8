// add_one: data[i] += 1 for i < n (uint32, wrapping), one thread per element.
extern "C" __global__ void curd_add_one(unsigned int *data, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] += 1u;
}
