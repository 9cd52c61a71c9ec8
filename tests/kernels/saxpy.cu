// saxpy: y[i] = a * x[i] + y[i] for i < n. The scalar sits between the
// pointers, so a launch must pass parameters in the kernel's own order.
// fmaf keeps the result exact to compare: one rounding, as the host
// reference's fmaf.
extern "C" __global__ void curd_saxpy(const float *x, float a, float *y,
                                      unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = fmaf(a, x[i], y[i]);
}
