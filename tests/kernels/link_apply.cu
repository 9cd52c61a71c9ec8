// link_apply: out[i] = curd_link_mix(in[i], key) for i < n, one thread per
// element. curd_link_mix lives in link_mix.cu: this module's PTX declares
// it .extern .func, and loads only when linked with link_mix.ptx
// (kernels.mk: LINK_CU).
extern "C" __device__ unsigned int curd_link_mix(unsigned int x,
                                                 unsigned int key);

extern "C" __global__ void curd_link_apply(const unsigned int *in,
                                           unsigned int *out, unsigned int n,
                                           unsigned int key)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = curd_link_mix(in[i], key);
}
