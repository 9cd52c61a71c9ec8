// link_mix: the device function that link_apply.cu calls, in a module of
// its own, so that only the driver's linker can join the two. Compiled
// with nvcc -rdc=true, which keeps an extern function in the PTX as a
// .visible .func for other modules to call (kernels.mk: LINK_CU).
extern "C" __device__ unsigned int curd_link_mix(unsigned int x,
                                                 unsigned int key)
{
    x ^= key;
    x *= 0x9E3779B1u;
    return x ^ (x >> 16);
}
