/* cuda.c - loads the raw CUDA driver for curd-bench's baselines. */
#include "harness/cuda.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The CUDA version whose ABI the declarations in harness/cuda.h follow. */
#define BENCH_CUDA_ABI_VERSION 12000
/* CU_GET_PROC_ADDRESS_LEGACY_STREAM: the entries libcurd resolves too. */
#define BENCH_CU_GET_PROC_ADDRESS_LEGACY_STREAM 1u

typedef bench_cu_result (*get_proc_address_fn)(const char *symbol,
                                               void **function,
                                               int cuda_version,
                                               unsigned long long flags,
                                               int *symbol_status);

static bench_cuda cuda;
static const bench_cuda *loaded;

static void *resolve(void *library, get_proc_address_fn get_proc_address,
                     const char *base_name, const char *symbol)
{
    void *function = NULL;
    int found = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    if (get_proc_address != NULL &&
        (get_proc_address(base_name, &function, BENCH_CUDA_ABI_VERSION,
                          BENCH_CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                          &found) != BENCH_CUDA_SUCCESS ||
         found != 0))
        function = NULL;
    if (function == NULL)
        function = dlsym(library, symbol);
    return function;
}

const bench_cuda *bench_cuda_load(char *why, size_t why_capacity)
{
    const char *override = getenv("CURD_LIBCUDA");
    const char *path =
        override != NULL && override[0] != '\0' ? override : "libcuda.so.1";
    void *library;
    get_proc_address_fn get_proc_address;

    if (loaded != NULL)
        return loaded;
    /* Never closed: the entries are used until the process exits. */
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(why, why_capacity, "dlopen(%s) failed: %s", path,
                 error != NULL ? error : "no reason given");
        return NULL;
    }
    /* POSIX lets a dlsym result convert to the function pointer type of
     * the symbol, which the declarations above give. */
    get_proc_address = (get_proc_address_fn)(uintptr_t)dlsym(
        library, "cuGetProcAddress_v2");
#define BENCH_CUDA_RESOLVE_(name, symbol, required, params)                   \
    cuda.name = (bench_cu_result(*) params)(uintptr_t)resolve(                \
        library, get_proc_address, #name, symbol);                            \
    if (cuda.name == NULL && (required)) {                                    \
        snprintf(why, why_capacity, "%s lacks %s", path, #name);              \
        return NULL;                                                          \
    }
    BENCH_CUDA_ENTRIES(BENCH_CUDA_RESOLVE_)
#undef BENCH_CUDA_RESOLVE_
    loaded = &cuda;
    return loaded;
}

const char *bench_cuda_result_name(bench_cu_result result)
{
    const char *name = NULL;
    if (loaded == NULL ||
        loaded->cuGetErrorName(result, &name) != BENCH_CUDA_SUCCESS ||
        name == NULL)
        return "an unknown CUresult";
    return name;
}
