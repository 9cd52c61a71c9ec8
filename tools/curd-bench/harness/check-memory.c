/* check-memory.c - that a block handed out for a benchmark holds
 * what is written to it, read back through the raw driver. */
#include "harness/check-memory.h"

#include <string.h>

#define CHECK_MAX_BYTES (4 * BENCH_KIB)

int bench_check_device_memory(const bench_env *env, uint64_t *seed,
                              bench_cu_deviceptr device_ptr, size_t byte_len,
                              const char *what)
{
    unsigned char expected[CHECK_MAX_BYTES];
    unsigned char actual[CHECK_MAX_BYTES];
    bench_cu_result cu_result;
    if (byte_len > sizeof expected)
        return bench_fail("%s: check size %zu too large", what, byte_len);
    bench_fill_random(seed, expected, byte_len);
    bench_poison(actual, byte_len);
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemcpyHtoD(device_ptr, expected, byte_len);
    if (cu_result == BENCH_CUDA_SUCCESS)
        cu_result = env->cu->cuMemcpyDtoH(actual, device_ptr, byte_len);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemcpyHtoD/DtoH checking a device block",
                             cu_result);
    return bench_compare(what, expected, actual, byte_len);
}

int bench_check_host_memory(const bench_env *env, uint64_t *seed,
                            void *host_ptr, size_t byte_len, const char *what)
{
    unsigned char expected[CHECK_MAX_BYTES];
    unsigned char actual[CHECK_MAX_BYTES];
    bench_cu_deviceptr scratch = 0;
    bench_cu_result cu_result;
    if (byte_len > sizeof expected)
        return bench_fail("%s: check size %zu too large", what, byte_len);
    bench_fill_random(seed, expected, byte_len);
    memcpy(host_ptr, expected, byte_len);
    bench_poison(actual, byte_len);
    if (bench_raw_enter(env) != 0)
        return -1;
    cu_result = env->cu->cuMemAlloc(&scratch, byte_len);
    if (cu_result == BENCH_CUDA_SUCCESS) {
        cu_result = env->cu->cuMemcpyHtoD(scratch, host_ptr, byte_len);
        if (cu_result == BENCH_CUDA_SUCCESS)
            cu_result = env->cu->cuMemcpyDtoH(actual, scratch, byte_len);
        env->cu->cuMemFree(scratch);
    }
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemAlloc/HtoD/DtoH checking a host block",
                             cu_result);
    return bench_compare(what, expected, actual, byte_len);
}
