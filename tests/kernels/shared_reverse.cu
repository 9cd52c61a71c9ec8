// shared_reverse: each block reverses its tile of `tile` uint32 elements
// through dynamic shared memory (tile * 4 bytes, more than 48 KiB for
// tile = 16384: the launch must raise the kernel's
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first). out[b * tile + i]
// = in[b * tile + tile - 1 - i]; blockDim.x threads stride over the tile.
extern "C" __global__ void curd_shared_reverse(const unsigned int *in,
                                               unsigned int *out,
                                               unsigned int tile)
{
    extern __shared__ unsigned int buffer[];
    const unsigned int base = blockIdx.x * tile;
    for (unsigned int i = threadIdx.x; i < tile; i += blockDim.x)
        buffer[i] = in[base + i];
    __syncthreads();
    for (unsigned int i = threadIdx.x; i < tile; i += blockDim.x)
        out[base + i] = buffer[tile - 1u - i];
}
