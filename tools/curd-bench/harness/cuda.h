/* cuda.h - the raw CUDA driver, as curd-bench reaches it on its own.
 *
 * The baselines time the driver doing the work in the fewest calls. The
 * tool loads libcuda.so.1 itself (dlopen, never a link-time dependency)
 * instead of borrowing libcurd's internal entry table, so that it uses
 * nothing of libcurd but the public API of libcurd.so.1.
 *
 * The declarations below are the few the baselines need, written from the
 * CUDA Driver API's ABI (cuda.h, CUDA 12.0): result codes are ints,
 * device pointers 64-bit, handles opaque pointers. Each entry is resolved
 * through cuGetProcAddress by its base name for CUDA 12.0 (which picks the
 * ABI variant of that version, as libcurd does), then through dlsym of the
 * symbol that carries the same ABI (cuMemAlloc_v2, ...). */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_CUDA_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_CUDA_H

#include <stddef.h>

typedef unsigned int bench_cu_result;         /* CUresult */
typedef int bench_cu_device;                  /* CUdevice */
typedef unsigned long long bench_cu_deviceptr; /* CUdeviceptr */
typedef struct CUctx_st *bench_cu_context;
typedef struct CUstream_st *bench_cu_stream;
typedef struct CUmemPoolHandle_st *bench_cu_mempool;
typedef struct CUmod_st *bench_cu_module;
typedef struct CUfunc_st *bench_cu_function;
typedef struct CUgraph_st *bench_cu_graph;
typedef struct CUgraphExec_st *bench_cu_graph_exec;
typedef struct CUevent_st *bench_cu_event;

#define BENCH_CUDA_SUCCESS 0u
#define BENCH_CU_STREAM_NON_BLOCKING 0x1u
#define BENCH_CU_MEMHOSTALLOC_PORTABLE 0x01u
#define BENCH_CU_MEMHOSTREGISTER_PORTABLE 0x01u
#define BENCH_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4u
#define BENCH_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1u
#define BENCH_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704u
#define BENCH_CU_EVENT_DISABLE_TIMING 0x2u

/* X(base name, dlsym fallback symbol, required, return and parameters) */
#define BENCH_CUDA_ENTRIES(X)                                                 \
    X(cuDeviceGet, "cuDeviceGet", 1, (bench_cu_device *, int))                \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1,                \
      (bench_cu_context *, bench_cu_device))                                  \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 1,           \
      (bench_cu_device))                                                      \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 1, (bench_cu_context))         \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 1, (bench_cu_context *))         \
    X(cuCtxSynchronize, "cuCtxSynchronize", 1, (void))                        \
    X(cuMemAlloc, "cuMemAlloc_v2", 1, (bench_cu_deviceptr *, size_t))         \
    X(cuMemFree, "cuMemFree_v2", 1, (bench_cu_deviceptr))                     \
    X(cuMemHostAlloc, "cuMemHostAlloc", 1, (void **, size_t, unsigned int))   \
    X(cuMemFreeHost, "cuMemFreeHost", 1, (void *))                            \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", 1,                                     \
      (bench_cu_deviceptr, const void *, size_t))                             \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", 1,                                     \
      (void *, bench_cu_deviceptr, size_t))                                   \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1,                           \
      (bench_cu_deviceptr, const void *, size_t, bench_cu_stream))            \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1,                           \
      (void *, bench_cu_deviceptr, size_t, bench_cu_stream))                  \
    X(cuStreamCreate, "cuStreamCreate", 1, (bench_cu_stream *, unsigned int)) \
    X(cuStreamDestroy, "cuStreamDestroy_v2", 1, (bench_cu_stream))            \
    X(cuStreamSynchronize, "cuStreamSynchronize", 1, (bench_cu_stream))       \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", 1,                              \
      (bench_cu_stream, bench_cu_event, unsigned int))                        \
    X(cuEventCreate, "cuEventCreate", 1, (bench_cu_event *, unsigned int))    \
    X(cuEventDestroy, "cuEventDestroy_v2", 1, (bench_cu_event))               \
    X(cuEventRecord, "cuEventRecord", 1, (bench_cu_event, bench_cu_stream))   \
    X(cuGetErrorName, "cuGetErrorName", 1, (bench_cu_result, const char **))  \
    X(cuMemHostRegister, "cuMemHostRegister_v2", 0,                           \
      (void *, size_t, unsigned int))                                         \
    X(cuMemHostUnregister, "cuMemHostUnregister", 0, (void *))                \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx", 1,                            \
      (bench_cu_module *, const void *, unsigned int, unsigned int *,         \
       void **))                                                              \
    X(cuModuleUnload, "cuModuleUnload", 1, (bench_cu_module))                 \
    X(cuModuleGetFunction, "cuModuleGetFunction", 1,                          \
      (bench_cu_function *, bench_cu_module, const char *))                   \
    X(cuLaunchKernel, "cuLaunchKernel", 1,                                    \
      (bench_cu_function, unsigned int, unsigned int, unsigned int,           \
       unsigned int, unsigned int, unsigned int, unsigned int,                \
       bench_cu_stream, void **, void **))                                    \
    X(cuMemAllocAsync, "cuMemAllocAsync", 0,                                  \
      (bench_cu_deviceptr *, size_t, bench_cu_stream))                        \
    X(cuMemFreeAsync, "cuMemFreeAsync", 0,                                    \
      (bench_cu_deviceptr, bench_cu_stream))                                  \
    X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 0,              \
      (bench_cu_mempool *, bench_cu_device))                                  \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 0,                      \
      (bench_cu_mempool, unsigned int, void *))                               \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", 1,                     \
      (bench_cu_stream, unsigned int))                                        \
    X(cuStreamEndCapture, "cuStreamEndCapture", 1,                            \
      (bench_cu_stream, bench_cu_graph *))                                    \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 1,          \
      (bench_cu_graph_exec *, bench_cu_graph, unsigned long long))            \
    X(cuGraphLaunch, "cuGraphLaunch", 1,                                      \
      (bench_cu_graph_exec, bench_cu_stream))                                 \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", 1, (bench_cu_graph_exec))     \
    X(cuGraphDestroy, "cuGraphDestroy", 1, (bench_cu_graph))                 \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 1,                      \
      (int *, bench_cu_device, bench_cu_device))                              \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", 1,                      \
      (bench_cu_context, unsigned int))                                       \
    X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 1,                              \
      (bench_cu_deviceptr, bench_cu_context, bench_cu_deviceptr,              \
       bench_cu_context, size_t, bench_cu_stream))

#define BENCH_CUDA_MEMBER_(name, symbol, required, params)                    \
    bench_cu_result(*name) params;
/* One pointer per entry; an optional entry (required 0) is NULL when the
 * driver lacks it. */
typedef struct bench_cuda {
    BENCH_CUDA_ENTRIES(BENCH_CUDA_MEMBER_)
} bench_cuda;
#undef BENCH_CUDA_MEMBER_

/* Loads the driver once: $CURD_LIBCUDA when set (as libcurd honours it,
 * so both load the same library), else libcuda.so.1. NULL when it cannot
 * be loaded or lacks a required entry, with the reason in why. Call it
 * after libcurd has initialised the driver (curd_device_open), which is
 * what makes cuInit unnecessary here. */
const bench_cuda *bench_cuda_load(char *why, size_t why_capacity);

/* "CUDA_ERROR_OUT_OF_MEMORY", ...; "an unknown CUresult" when the driver
 * is not loaded or cannot name it. */
const char *bench_cuda_result_name(bench_cu_result result);

#endif
