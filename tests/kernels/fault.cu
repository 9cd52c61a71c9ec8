// fault: writes through the address it is given, plus `offset` bytes. Given
// a bad address (0, or past the end of an allocation) it faults with
// CUDA_ERROR_ILLEGAL_ADDRESS, which the context keeps: every later call
// returns it until the primary context is released and retained again.
// With trap != 0 it executes a trap instruction instead (CUDA_ERROR_LAUNCH_FAILED
// on the real driver).
extern "C" __global__ void curd_fault(unsigned int *target,
                                      unsigned long long offset,
                                      unsigned int trap)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    if (trap != 0)
        __trap();
    *(volatile unsigned int *)((char *)target + offset) = 0xDEADu;
}
