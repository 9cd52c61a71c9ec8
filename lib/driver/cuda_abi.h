/* cuda_abi.h - the part of the CUDA Driver API ABI that curd uses.
 *
 * curd never includes cuda.h: it builds on hosts without the CUDA toolkit
 * and loads libcuda at run time. These are the library's own declarations
 * of the types, values and function signatures it relies on. They are ABI
 * facts, so tests/test-cuda-abi.c compiles them next to cuda.h (when the
 * toolkit is present) and checks every value and every signature.
 *
 * Why CUresult and the enum parameters are `unsigned int` here: cuda.h
 * declares them as C enums whose constants are all non-negative, and GCC
 * and Clang give such an enum the underlying type unsigned int. Declaring
 * them unsigned keeps our function-pointer types *compatible* with
 * cuda.h's (checked with __builtin_types_compatible_p), not merely the
 * same size.
 *
 * The lists below are X-macros so that one list drives the enum values
 * here, the entry-point table in driver.h, the fault-injection wrappers in
 * the tests and the checks against cuda.h. */
#ifndef CURD_LIB_DRIVER_CUDA_ABI_H
#define CURD_LIB_DRIVER_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef unsigned int curdi_cu_result;     /* CUresult */
typedef int curdi_cu_device;              /* CUdevice */
typedef unsigned long long curdi_cu_deviceptr; /* CUdeviceptr (64-bit) */
typedef struct CUctx_st *curdi_cu_context;
typedef struct CUstream_st *curdi_cu_stream;
typedef struct CUevent_st *curdi_cu_event;
typedef struct CUmod_st *curdi_cu_module;
typedef struct CUfunc_st *curdi_cu_function;
typedef struct CUmemPoolHandle_st *curdi_cu_mempool; /* CUmemoryPool */
typedef struct CUgraph_st *curdi_cu_graph;
typedef struct CUgraphNode_st *curdi_cu_graph_node;
typedef struct CUgraphExec_st *curdi_cu_graph_exec;
typedef struct CUkern_st *curdi_cu_kernel; /* CUkernel */
typedef struct CUlinkState_st *curdi_cu_link_state; /* CUlinkState */
typedef unsigned int curdi_cu_jit_input_type;   /* CUjitInputType */
typedef unsigned int curdi_cu_function_attribute; /* CUfunction_attribute */
typedef unsigned int curdi_cu_stream_capture_mode; /* CUstreamCaptureMode */
typedef unsigned int curdi_cu_graph_node_type;    /* CUgraphNodeType */
typedef unsigned int curdi_cu_device_attribute; /* CUdevice_attribute */
typedef unsigned int curdi_cu_jit_option;       /* CUjit_option */
typedef unsigned int curdi_cu_mempool_attribute; /* CUmemPool_attribute */
typedef unsigned int curdi_cu_pointer_attribute; /* CUpointer_attribute */
/* CUmemGenericAllocationHandle: the driver's name for one physical
 * allocation of the virtual memory management calls (cuMemCreate). */
typedef unsigned long long curdi_cu_mem_handle;
typedef unsigned int curdi_cu_mem_handle_type; /* CUmemAllocationHandleType */
/* CUmemAllocationGranularity_flags */
typedef unsigned int curdi_cu_mem_granularity_flags;
/* CUdriverProcAddressQueryResult */
typedef unsigned int curdi_cu_proc_address_query_result;

/* CUDA_KERNEL_NODE_PARAMS as cuda.h declares it since CUDA 12.0 (the _v2
 * layout, which cuGraphKernelNodeGetParams_v2 and
 * cuGraphExecKernelNodeSetParams_v2 take). Declared under curd's own tag,
 * since a translation unit that includes cuda.h too (test-cuda-abi) cannot
 * define cuda.h's; the entries take cuda.h's tag, incomplete here, and
 * curd passes its struct through curdi_cu_kernel_node_params_abi().
 * test-cuda-abi checks the size and every offset against cuda.h. */
typedef struct curdi_cu_kernel_node_params {
    curdi_cu_function func;
    unsigned int grid_x, grid_y, grid_z;
    unsigned int block_x, block_y, block_z;
    unsigned int shared_bytes;
    void **kernel_params;
    void **extra;
    curdi_cu_kernel kern;       /* used only when func is NULL */
    curdi_cu_context context;   /* ignored when func is set */
} curdi_cu_kernel_node_params;
typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st curdi_cu_kernel_node_params_abi_t;

/* CUgraphExecUpdateResultInfo (cuGraphExecUpdate_v2, CUDA 12.0), under
 * curd's own tag for the same reason. */
typedef struct curdi_cu_graph_exec_update_result_info {
    unsigned int result; /* CUgraphExecUpdateResult */
    curdi_cu_graph_node error_node;
    curdi_cu_graph_node error_from_node;
} curdi_cu_graph_exec_update_result_info;
typedef struct CUgraphExecUpdateResultInfo_st
    curdi_cu_graph_exec_update_result_info_abi_t;

/* CUDA_MEMCPY2D (the _v2 layout, which cuMemcpy2DAsync_v2 takes), under
 * curd's own tag for the same reason: one strided copy between linear
 * device memory and host memory, `height` rows of `width` bytes, each
 * side's rows `pitch` bytes apart. The array fields stay NULL. */
typedef struct curdi_cu_memcpy2d {
    size_t src_x_bytes, src_y;
    unsigned int src_memory_type; /* CUmemorytype: CURDI_CU_MEMORYTYPE_* */
    const void *src_host;
    curdi_cu_deviceptr src_device;
    void *src_array; /* CUarray */
    size_t src_pitch;
    size_t dst_x_bytes, dst_y;
    unsigned int dst_memory_type;
    void *dst_host;
    curdi_cu_deviceptr dst_device;
    void *dst_array;
    size_t dst_pitch;
    size_t width;
    size_t height;
} curdi_cu_memcpy2d;
typedef struct CUDA_MEMCPY2D_st curdi_cu_memcpy2d_abi_t;

/* CUmemLocation, CUmemAllocationProp and CUmemAccessDesc (the _v1
 * layouts the virtual memory management entries take), under curd's own
 * tags for the same reason; test-cuda-abi checks every offset. */
typedef struct curdi_cu_mem_location {
    unsigned int type; /* CUmemLocationType: CURDI_CU_MEM_LOCATION_TYPE_* */
    int id;            /* a device ordinal, for a device location */
} curdi_cu_mem_location;
typedef struct curdi_cu_mem_allocation_prop {
    unsigned int type; /* CUmemAllocationType: CURDI_CU_MEM_ALLOCATION_* */
    unsigned int requested_handle_types; /* CUmemAllocationHandleType */
    curdi_cu_mem_location location;
    void *win32_handle_metadata; /* NULL but on Windows */
    struct {
        unsigned char compression_type;
        unsigned char gpu_direct_rdma_capable;
        unsigned short usage;
        unsigned char reserved[4];
    } alloc_flags;
} curdi_cu_mem_allocation_prop;
typedef struct CUmemAllocationProp_st curdi_cu_mem_allocation_prop_abi_t;
typedef struct curdi_cu_mem_access_desc {
    curdi_cu_mem_location location;
    unsigned int flags; /* CUmemAccess_flags */
} curdi_cu_mem_access_desc;
typedef struct CUmemAccessDesc_st curdi_cu_mem_access_desc_abi_t;

/* The same memory seen as the type the entry point declares: the driver
 * reads the bytes, whose layout test-cuda-abi proves equal. */
static inline curdi_cu_kernel_node_params_abi_t *
curdi_cu_kernel_node_params_abi(curdi_cu_kernel_node_params *params)
{
    return (curdi_cu_kernel_node_params_abi_t *)(void *)params;
}
static inline curdi_cu_graph_exec_update_result_info_abi_t *
curdi_cu_graph_exec_update_result_info_abi(
    curdi_cu_graph_exec_update_result_info *info)
{
    return (curdi_cu_graph_exec_update_result_info_abi_t *)(void *)info;
}
static inline const curdi_cu_memcpy2d_abi_t *
curdi_cu_memcpy2d_abi(const curdi_cu_memcpy2d *copy)
{
    return (const curdi_cu_memcpy2d_abi_t *)(const void *)copy;
}
static inline curdi_cu_mem_allocation_prop_abi_t *
curdi_cu_mem_allocation_prop_abi(curdi_cu_mem_allocation_prop *prop)
{
    return (curdi_cu_mem_allocation_prop_abi_t *)(void *)prop;
}
static inline const curdi_cu_mem_access_desc_abi_t *
curdi_cu_mem_access_desc_abi(const curdi_cu_mem_access_desc *desc)
{
    return (const curdi_cu_mem_access_desc_abi_t *)(const void *)desc;
}

/* The first CUDA version whose driver curd supports, and the version it
 * asks cuGetProcAddress for: each entry then resolves to the ABI variant
 * that CUDA 12.0 headers declare (cuMemAlloc -> cuMemAlloc_v2, ...), which
 * is the signature declared below. */
#define CURDI_CUDA_MIN_VERSION 12000
/* Entries of tier OPTIONAL_12_4 first appeared in CUDA 12.4; they are
 * asked for at that version, and a 12.0 driver simply lacks them. */
#define CURDI_CUDA_12_4_VERSION 12040

/* CUresult values: X(NAME without the CUDA_ prefix, value). */
#define CURDI_CUDA_RESULT_LIST(X)                                             \
    X(SUCCESS, 0)                                                             \
    X(ERROR_INVALID_VALUE, 1)                                                 \
    X(ERROR_OUT_OF_MEMORY, 2)                                                 \
    X(ERROR_NOT_INITIALIZED, 3)                                               \
    X(ERROR_DEINITIALIZED, 4)                                                 \
    X(ERROR_STUB_LIBRARY, 34)                                                 \
    X(ERROR_CALL_REQUIRES_NEWER_DRIVER, 36)                                   \
    X(ERROR_DEVICE_UNAVAILABLE, 46)                                           \
    X(ERROR_NO_DEVICE, 100)                                                   \
    X(ERROR_INVALID_DEVICE, 101)                                              \
    X(ERROR_INVALID_IMAGE, 200)                                               \
    X(ERROR_INVALID_CONTEXT, 201)                                             \
    X(ERROR_NO_BINARY_FOR_GPU, 209)                                           \
    X(ERROR_PEER_ACCESS_UNSUPPORTED, 217)                                     \
    X(ERROR_ECC_UNCORRECTABLE, 214)                                           \
    X(ERROR_INVALID_PTX, 218)                                                 \
    X(ERROR_NVLINK_UNCORRECTABLE, 220)                                        \
    X(ERROR_JIT_COMPILER_NOT_FOUND, 221)                                      \
    X(ERROR_UNSUPPORTED_PTX_VERSION, 222)                                     \
    X(ERROR_JIT_COMPILATION_DISABLED, 223)                                    \
    X(ERROR_CONTAINED, 226)                                                   \
    X(ERROR_OPERATING_SYSTEM, 304)                                            \
    X(ERROR_INVALID_HANDLE, 400)                                              \
    X(ERROR_NOT_FOUND, 500)                                                   \
    X(ERROR_NOT_READY, 600)                                                   \
    X(ERROR_ILLEGAL_ADDRESS, 700)                                             \
    X(ERROR_LAUNCH_OUT_OF_RESOURCES, 701)                                     \
    X(ERROR_LAUNCH_TIMEOUT, 702)                                              \
    X(ERROR_PEER_ACCESS_ALREADY_ENABLED, 704)                                 \
    X(ERROR_CONTEXT_IS_DESTROYED, 709)                                        \
    X(ERROR_ASSERT, 710)                                                      \
    X(ERROR_TOO_MANY_PEERS, 711)                                              \
    X(ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)                              \
    X(ERROR_HOST_MEMORY_NOT_REGISTERED, 713)                                  \
    X(ERROR_HARDWARE_STACK_ERROR, 714)                                        \
    X(ERROR_ILLEGAL_INSTRUCTION, 715)                                         \
    X(ERROR_MISALIGNED_ADDRESS, 716)                                          \
    X(ERROR_INVALID_ADDRESS_SPACE, 717)                                       \
    X(ERROR_INVALID_PC, 718)                                                  \
    X(ERROR_LAUNCH_FAILED, 719)                                               \
    X(ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720)                                \
    X(ERROR_NOT_PERMITTED, 800)                                               \
    X(ERROR_NOT_SUPPORTED, 801)                                               \
    X(ERROR_SYSTEM_NOT_READY, 802)                                            \
    X(ERROR_SYSTEM_DRIVER_MISMATCH, 803)                                      \
    X(ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)                              \
    X(ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)                                  \
    X(ERROR_STREAM_CAPTURE_INVALIDATED, 901)                                  \
    X(ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910)                                   \
    X(ERROR_UNKNOWN, 999)

/* CUdevice_attribute values: X(NAME without the CU_DEVICE_ATTRIBUTE_
 * prefix, value). */
#define CURDI_CU_DEVICE_ATTRIBUTE_LIST(X)                                     \
    X(MAX_THREADS_PER_BLOCK, 1)                                               \
    X(MAX_BLOCK_DIM_X, 2)                                                     \
    X(MAX_BLOCK_DIM_Y, 3)                                                     \
    X(MAX_BLOCK_DIM_Z, 4)                                                     \
    X(MAX_GRID_DIM_X, 5)                                                      \
    X(MAX_GRID_DIM_Y, 6)                                                      \
    X(MAX_GRID_DIM_Z, 7)                                                      \
    X(MAX_SHARED_MEMORY_PER_BLOCK, 8)                                         \
    X(MAX_PITCH, 11)                                                          \
    X(MULTIPROCESSOR_COUNT, 16)                                               \
    X(CAN_MAP_HOST_MEMORY, 19)                                                \
    X(ASYNC_ENGINE_COUNT, 40)                                                 \
    X(UNIFIED_ADDRESSING, 41)                                                 \
    X(COMPUTE_CAPABILITY_MAJOR, 75)                                           \
    X(COMPUTE_CAPABILITY_MINOR, 76)                                           \
    X(COOPERATIVE_LAUNCH, 95)                                                 \
    X(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 91)                            \
    X(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 97)                                  \
    X(HOST_REGISTER_SUPPORTED, 99)                                            \
    X(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)                               \
    X(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 103)                       \
    X(MEMORY_POOLS_SUPPORTED, 115)

/* Flags and other enumerators, named as in cuda.h: X(NAME, value); each
 * is declared as CURDI_<NAME>. */
#define CURDI_CU_FLAG_LIST(X)                                                 \
    X(CU_STREAM_DEFAULT, 0x0)                                                 \
    X(CU_STREAM_NON_BLOCKING, 0x1)                                            \
    X(CU_EVENT_DEFAULT, 0x0)                                                  \
    X(CU_EVENT_BLOCKING_SYNC, 0x1)                                            \
    X(CU_EVENT_DISABLE_TIMING, 0x2)                                           \
    X(CU_MEMHOSTALLOC_PORTABLE, 0x01)                                         \
    X(CU_MEMHOSTALLOC_DEVICEMAP, 0x02)                                        \
    X(CU_MEMHOSTALLOC_WRITECOMBINED, 0x04)                                    \
    X(CU_MEMHOSTREGISTER_PORTABLE, 0x01)                                      \
    X(CU_MEMHOSTREGISTER_DEVICEMAP, 0x02)                                     \
    X(CU_MEMHOSTREGISTER_READ_ONLY, 0x08)                                     \
    X(CU_MEMORYTYPE_HOST, 0x01)                                               \
    X(CU_MEMORYTYPE_DEVICE, 0x02)                                             \
    X(CU_JIT_INFO_LOG_BUFFER, 3)                                              \
    X(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 4)                                   \
    X(CU_JIT_ERROR_LOG_BUFFER, 5)                                             \
    X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6)                                  \
    X(CU_JIT_LOG_VERBOSE, 12)                                                 \
    X(CU_GET_PROC_ADDRESS_DEFAULT, 0)                                         \
    X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1)                                   \
    X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 2)                       \
    X(CU_GET_PROC_ADDRESS_SUCCESS, 0)                                         \
    X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)                                \
    X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)                          \
    X(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4)                                   \
    X(CU_JIT_MAX_REGISTERS, 0)                                                \
    X(CU_JIT_WALL_TIME, 2)                                                    \
    X(CU_JIT_TARGET, 9)                                                       \
    X(CU_JIT_GENERATE_LINE_INFO, 13)                                          \
    X(CU_JIT_OPTIMIZATION_LEVEL, 7)                                           \
    X(CU_JIT_GENERATE_DEBUG_INFO, 11)                                         \
    X(CU_JIT_INPUT_CUBIN, 0)                                                  \
    X(CU_JIT_INPUT_PTX, 1)                                                    \
    X(CU_JIT_INPUT_FATBINARY, 2)                                              \
    X(CU_JIT_INPUT_LIBRARY, 4)                                                \
    X(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0)                             \
    X(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 1)                                 \
    X(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, 2)                                  \
    X(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, 3)                                  \
    X(CU_FUNC_ATTRIBUTE_NUM_REGS, 4)                                          \
    X(CU_FUNC_ATTRIBUTE_PTX_VERSION, 5)                                       \
    X(CU_FUNC_ATTRIBUTE_BINARY_VERSION, 6)                                    \
    X(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8)                     \
    X(CU_STREAM_CAPTURE_MODE_GLOBAL, 0)                                       \
    X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1)                                 \
    X(CU_STREAM_CAPTURE_MODE_RELAXED, 2)                                      \
    X(CU_GRAPH_EXEC_UPDATE_SUCCESS, 0)                                        \
    X(CU_GRAPH_NODE_TYPE_KERNEL, 0)                                           \
    X(CU_GRAPH_EXEC_UPDATE_ERROR, 1)                                          \
    X(CU_STREAM_WRITE_VALUE_DEFAULT, 0x0)                                     \
    X(CU_POINTER_ATTRIBUTE_CONTEXT, 1)                                        \
    X(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2)                                    \
    X(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9)                                 \
    X(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, 11)                              \
    X(CU_POINTER_ATTRIBUTE_RANGE_SIZE, 12)                                    \
    X(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0x1)                          \
    X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 0x3)                                \
    X(CU_MEM_LOCATION_TYPE_DEVICE, 0x1)                                       \
    X(CU_MEM_ALLOCATION_TYPE_PINNED, 0x1)                                     \
    X(CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0x0)                                  \
    X(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, 0x1)

#define CURDI_ABI_RESULT_ENUM_(name, value) CURDI_CUDA_##name = value,
#define CURDI_ABI_ATTRIBUTE_ENUM_(name, value)                                \
    CURDI_CU_DEVICE_ATTRIBUTE_##name = value,
#define CURDI_ABI_FLAG_ENUM_(name, value) CURDI_##name = value,
enum curdi_cuda_result_value { CURDI_CUDA_RESULT_LIST(CURDI_ABI_RESULT_ENUM_) };
enum curdi_cu_device_attribute_value {
    CURDI_CU_DEVICE_ATTRIBUTE_LIST(CURDI_ABI_ATTRIBUTE_ENUM_)
};
enum curdi_cu_flag_value { CURDI_CU_FLAG_LIST(CURDI_ABI_FLAG_ENUM_) };
#undef CURDI_ABI_RESULT_ENUM_
#undef CURDI_ABI_ATTRIBUTE_ENUM_
#undef CURDI_ABI_FLAG_ENUM_

/* The driver entry points curd calls, as
 *   X(base name, dlsym fallback symbol, tier, (parameters), (arguments))
 * The base name is what cuGetProcAddress takes; the fallback is the
 * symbol that carries the same ABI when cuGetProcAddress cannot help. The
 * tier is REQUIRED (without it the driver counts as too old), OPTIONAL
 * (its absence is a capability flag) or OPTIONAL_12_4 (optional, and
 * asked for at CUDA 12.4, where it first appeared). Parameter lists match cuda.h as of
 * CUDA_MIN_VERSION. Each entry gets a function-pointer type
 * curdi_pfn_<base name>. */
#define CURDI_CUDA_ENTRY_LIST(X)                                              \
    X(cuInit, "cuInit", REQUIRED, (unsigned int flags), (flags))              \
    X(cuDriverGetVersion, "cuDriverGetVersion", REQUIRED,                     \
      (int *driver_version), (driver_version))                                \
    X(cuDeviceGetCount, "cuDeviceGetCount", REQUIRED, (int *count), (count))  \
    X(cuDeviceGet, "cuDeviceGet", REQUIRED,                                   \
      (curdi_cu_device * device, int ordinal), (device, ordinal))             \
    X(cuDeviceGetName, "cuDeviceGetName", REQUIRED,                           \
      (char *name, int len, curdi_cu_device dev), (name, len, dev))           \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", REQUIRED,                 \
      (int *value, curdi_cu_device_attribute attribute, curdi_cu_device dev), \
      (value, attribute, dev))                                                \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", REQUIRED,                      \
      (size_t *byte_len, curdi_cu_device dev), (byte_len, dev))               \
    X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", REQUIRED,                   \
      (char *pci_bus_id, int len, curdi_cu_device dev),                       \
      (pci_bus_id, len, dev))                                                 \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", REQUIRED,         \
      (curdi_cu_context * context, curdi_cu_device dev), (context, dev))      \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", REQUIRED,    \
      (curdi_cu_device dev), (dev))                                           \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", REQUIRED,                      \
      (curdi_cu_context context), (context))                                  \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", REQUIRED,                        \
      (curdi_cu_context * context), (context))                                \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", REQUIRED,                           \
      (curdi_cu_context * context), (context))                                \
    X(cuCtxSynchronize, "cuCtxSynchronize", REQUIRED, (void), ())             \
    X(cuMemGetInfo, "cuMemGetInfo_v2", REQUIRED,                              \
      (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes))   \
    X(cuMemAlloc, "cuMemAlloc_v2", REQUIRED,                                  \
      (curdi_cu_deviceptr * device_ptr, size_t byte_len),                     \
      (device_ptr, byte_len))                                                 \
    X(cuMemFree, "cuMemFree_v2", REQUIRED, (curdi_cu_deviceptr device_ptr),   \
      (device_ptr))                                                           \
    X(cuMemHostAlloc, "cuMemHostAlloc", REQUIRED,                             \
      (void **host_ptr, size_t byte_len, unsigned int flags),                 \
      (host_ptr, byte_len, flags))                                            \
    X(cuMemFreeHost, "cuMemFreeHost", REQUIRED, (void *host_ptr), (host_ptr)) \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", REQUIRED,                              \
      (curdi_cu_deviceptr dst, const void *src, size_t byte_len),             \
      (dst, src, byte_len))                                                   \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", REQUIRED,                              \
      (void *dst, curdi_cu_deviceptr src, size_t byte_len),                   \
      (dst, src, byte_len))                                                   \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", REQUIRED,                    \
      (curdi_cu_deviceptr dst, const void *src, size_t byte_len,              \
       curdi_cu_stream stream),                                               \
      (dst, src, byte_len, stream))                                           \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", REQUIRED,                    \
      (void *dst, curdi_cu_deviceptr src, size_t byte_len,                    \
       curdi_cu_stream stream),                                               \
      (dst, src, byte_len, stream))                                           \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", REQUIRED,                    \
      (curdi_cu_deviceptr dst, curdi_cu_deviceptr src, size_t byte_len,       \
       curdi_cu_stream stream),                                               \
      (dst, src, byte_len, stream))                                           \
    X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2", REQUIRED,                        \
      (const curdi_cu_memcpy2d_abi_t *copy, curdi_cu_stream stream),          \
      (copy, stream))                                                         \
    X(cuMemsetD8Async, "cuMemsetD8Async", REQUIRED,                           \
      (curdi_cu_deviceptr dst, unsigned char value, size_t byte_len,          \
       curdi_cu_stream stream),                                               \
      (dst, value, byte_len, stream))                                         \
    X(cuStreamCreate, "cuStreamCreate", REQUIRED,                             \
      (curdi_cu_stream * stream, unsigned int flags), (stream, flags))        \
    X(cuStreamDestroy, "cuStreamDestroy_v2", REQUIRED,                        \
      (curdi_cu_stream stream), (stream))                                     \
    X(cuStreamSynchronize, "cuStreamSynchronize", REQUIRED,                   \
      (curdi_cu_stream stream), (stream))                                     \
    X(cuStreamQuery, "cuStreamQuery", REQUIRED, (curdi_cu_stream stream),     \
      (stream))                                                               \
    X(cuEventCreate, "cuEventCreate", REQUIRED,                               \
      (curdi_cu_event * event, unsigned int flags), (event, flags))           \
    X(cuEventDestroy, "cuEventDestroy_v2", REQUIRED, (curdi_cu_event event),  \
      (event))                                                                \
    X(cuEventRecord, "cuEventRecord", REQUIRED,                               \
      (curdi_cu_event event, curdi_cu_stream stream), (event, stream))        \
    X(cuEventSynchronize, "cuEventSynchronize", REQUIRED,                     \
      (curdi_cu_event event), (event))                                        \
    X(cuEventQuery, "cuEventQuery", REQUIRED, (curdi_cu_event event),         \
      (event))                                                                \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", REQUIRED,                       \
      (curdi_cu_stream stream, curdi_cu_event event, unsigned int flags),     \
      (stream, event, flags))                                                 \
    X(cuStreamGetCtx, "cuStreamGetCtx", REQUIRED,                             \
      (curdi_cu_stream stream, curdi_cu_context * context),                   \
      (stream, context))                                                      \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", REQUIRED,               \
      (void *data, curdi_cu_pointer_attribute attribute,                      \
       curdi_cu_deviceptr device_ptr),                                        \
      (data, attribute, device_ptr))                                          \
    X(cuEventElapsedTime, "cuEventElapsedTime", REQUIRED,                     \
      (float *milliseconds, curdi_cu_event start, curdi_cu_event end),        \
      (milliseconds, start, end))                                             \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx", REQUIRED,                     \
      (curdi_cu_module * module, const void *image, unsigned int option_count, \
       curdi_cu_jit_option *options, void **option_values),                   \
      (module, image, option_count, options, option_values))                  \
    X(cuModuleUnload, "cuModuleUnload", REQUIRED, (curdi_cu_module module),   \
      (module))                                                               \
    X(cuLinkCreate, "cuLinkCreate_v2", REQUIRED,                              \
      (unsigned int option_count, curdi_cu_jit_option *options,               \
       void **option_values, curdi_cu_link_state *state),                     \
      (option_count, options, option_values, state))                          \
    X(cuLinkAddData, "cuLinkAddData_v2", REQUIRED,                            \
      (curdi_cu_link_state state, curdi_cu_jit_input_type type, void *data,   \
       size_t byte_len, const char *name, unsigned int option_count,          \
       curdi_cu_jit_option *options, void **option_values),                   \
      (state, type, data, byte_len, name, option_count, options,              \
       option_values))                                                        \
    X(cuLinkComplete, "cuLinkComplete", REQUIRED,                             \
      (curdi_cu_link_state state, void **cubin, size_t *cubin_bytes),         \
      (state, cubin, cubin_bytes))                                            \
    X(cuLinkDestroy, "cuLinkDestroy", REQUIRED,                               \
      (curdi_cu_link_state state), (state))                                   \
    X(cuModuleGetFunction, "cuModuleGetFunction", REQUIRED,                   \
      (curdi_cu_function * function, curdi_cu_module module,                  \
       const char *name),                                                     \
      (function, module, name))                                               \
    X(cuLaunchKernel, "cuLaunchKernel", REQUIRED,                             \
      (curdi_cu_function function, unsigned int grid_x, unsigned int grid_y,  \
       unsigned int grid_z, unsigned int block_x, unsigned int block_y,       \
       unsigned int block_z, unsigned int shared_bytes,                       \
       curdi_cu_stream stream, void **params, void **extra),                  \
      (function, grid_x, grid_y, grid_z, block_x, block_y, block_z,           \
       shared_bytes, stream, params, extra))                                  \
    X(cuGetErrorName, "cuGetErrorName", REQUIRED,                             \
      (curdi_cu_result error, const char **name), (error, name))              \
    X(cuGetErrorString, "cuGetErrorString", REQUIRED,                         \
      (curdi_cu_result error, const char **text), (error, text))              \
    X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset_v2", OPTIONAL,        \
      (curdi_cu_device dev), (dev))                                           \
    X(cuMemHostRegister, "cuMemHostRegister_v2", OPTIONAL,                    \
      (void *host_ptr, size_t byte_len, unsigned int flags),                  \
      (host_ptr, byte_len, flags))                                            \
    X(cuMemHostUnregister, "cuMemHostUnregister", OPTIONAL,                   \
      (void *host_ptr), (host_ptr))                                           \
    X(cuMemAllocAsync, "cuMemAllocAsync", OPTIONAL,                           \
      (curdi_cu_deviceptr * device_ptr, size_t byte_len,                      \
       curdi_cu_stream stream),                                               \
      (device_ptr, byte_len, stream))                                         \
    X(cuMemFreeAsync, "cuMemFreeAsync", OPTIONAL,                             \
      (curdi_cu_deviceptr device_ptr, curdi_cu_stream stream),                \
      (device_ptr, stream))                                                   \
    X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", OPTIONAL,       \
      (curdi_cu_mempool * pool, curdi_cu_device device), (pool, device))      \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", OPTIONAL,               \
      (curdi_cu_mempool pool, curdi_cu_mempool_attribute attribute,           \
       void *value),                                                          \
      (pool, attribute, value))                                               \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", REQUIRED,                     \
      (int *value, curdi_cu_function_attribute attribute,                     \
       curdi_cu_function function),                                           \
      (value, attribute, function))                                           \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", REQUIRED,                     \
      (curdi_cu_function function, curdi_cu_function_attribute attribute,     \
       int value),                                                            \
      (function, attribute, value))                                           \
    X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", REQUIRED,       \
      (curdi_cu_function function, unsigned int grid_x, unsigned int grid_y,  \
       unsigned int grid_z, unsigned int block_x, unsigned int block_y,       \
       unsigned int block_z, unsigned int shared_bytes,                       \
       curdi_cu_stream stream, void **params),                                \
      (function, grid_x, grid_y, grid_z, block_x, block_y, block_z,           \
       shared_bytes, stream, params))                                         \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                            \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor", REQUIRED,                \
      (int *block_count, curdi_cu_function function, int block_size,          \
       size_t dynamic_shared_bytes),                                          \
      (block_count, function, block_size, dynamic_shared_bytes))              \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", REQUIRED,              \
      (curdi_cu_stream stream, curdi_cu_stream_capture_mode mode),            \
      (stream, mode))                                                         \
    X(cuStreamEndCapture, "cuStreamEndCapture", REQUIRED,                     \
      (curdi_cu_stream stream, curdi_cu_graph * graph), (stream, graph))      \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", REQUIRED,   \
      (curdi_cu_graph_exec * graph_exec, curdi_cu_graph graph,                \
       unsigned long long flags),                                             \
      (graph_exec, graph, flags))                                             \
    X(cuGraphLaunch, "cuGraphLaunch", REQUIRED,                               \
      (curdi_cu_graph_exec graph_exec, curdi_cu_stream stream),               \
      (graph_exec, stream))                                                   \
    X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2",    \
      REQUIRED,                                                               \
      (curdi_cu_graph_exec graph_exec, curdi_cu_graph_node node,              \
       const curdi_cu_kernel_node_params_abi_t *params),                      \
      (graph_exec, node, params))                                             \
    X(cuGraphExecUpdate, "cuGraphExecUpdate_v2", REQUIRED,                    \
      (curdi_cu_graph_exec graph_exec, curdi_cu_graph graph,                  \
       curdi_cu_graph_exec_update_result_info_abi_t *result_info),            \
      (graph_exec, graph, result_info))                                       \
    X(cuGraphGetNodes, "cuGraphGetNodes", REQUIRED,                           \
      (curdi_cu_graph graph, curdi_cu_graph_node *nodes, size_t *node_count), \
      (graph, nodes, node_count))                                             \
    X(cuGraphNodeGetType, "cuGraphNodeGetType", REQUIRED,                     \
      (curdi_cu_graph_node node, curdi_cu_graph_node_type * type),            \
      (node, type))                                                           \
    X(cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2", REQUIRED,  \
      (curdi_cu_graph_node node, curdi_cu_kernel_node_params_abi_t *params),  \
      (node, params))                                                         \
    X(cuGraphDestroy, "cuGraphDestroy", REQUIRED, (curdi_cu_graph graph),     \
      (graph))                                                                \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", REQUIRED,                     \
      (curdi_cu_graph_exec graph_exec), (graph_exec))                         \
    X(cuModuleGetFunctionCount, "cuModuleGetFunctionCount", OPTIONAL_12_4,    \
      (unsigned int *count, curdi_cu_module module), (count, module))         \
    X(cuModuleEnumerateFunctions, "cuModuleEnumerateFunctions",               \
      OPTIONAL_12_4,                                                          \
      (curdi_cu_function * functions, unsigned int function_count,            \
       curdi_cu_module module),                                               \
      (functions, function_count, module))                                    \
    X(cuFuncGetName, "cuFuncGetName", OPTIONAL_12_4,                          \
      (const char **name, curdi_cu_function function), (name, function))      \
    X(cuFuncGetParamInfo, "cuFuncGetParamInfo", OPTIONAL_12_4,                \
      (curdi_cu_function function, size_t param_index, size_t *param_offset,  \
       size_t *param_size),                                                   \
      (function, param_index, param_offset, param_size))                      \
    X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", OPTIONAL,    \
      (curdi_cu_deviceptr * device_ptr, void *host_ptr, unsigned int flags),  \
      (device_ptr, host_ptr, flags))                                          \
    X(cuStreamWriteValue32, "cuStreamWriteValue32_v2", OPTIONAL,              \
      (curdi_cu_stream stream, curdi_cu_deviceptr address, uint32_t value,    \
       unsigned int flags),                                                   \
      (stream, address, value, flags))                                        \
    X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", REQUIRED,               \
      (int *can_access, curdi_cu_device dev, curdi_cu_device peer_dev),       \
      (can_access, dev, peer_dev))                                            \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", REQUIRED,               \
      (curdi_cu_context peer_context, unsigned int flags),                    \
      (peer_context, flags))                                                  \
    X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync", REQUIRED,                       \
      (curdi_cu_deviceptr dst, curdi_cu_context dst_context,                  \
       curdi_cu_deviceptr src, curdi_cu_context src_context, size_t byte_len, \
       curdi_cu_stream stream),                                               \
      (dst, dst_context, src, src_context, byte_len, stream))                 \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",         \
      OPTIONAL,                                                               \
      (size_t *granularity, const curdi_cu_mem_allocation_prop_abi_t *prop,   \
       curdi_cu_mem_granularity_flags option),                                \
      (granularity, prop, option))                                            \
    X(cuMemCreate, "cuMemCreate", OPTIONAL,                                   \
      (curdi_cu_mem_handle * handle, size_t byte_len,                         \
       const curdi_cu_mem_allocation_prop_abi_t *prop,                        \
       unsigned long long flags),                                             \
      (handle, byte_len, prop, flags))                                        \
    X(cuMemRelease, "cuMemRelease", OPTIONAL, (curdi_cu_mem_handle handle),   \
      (handle))                                                               \
    X(cuMemAddressReserve, "cuMemAddressReserve", OPTIONAL,                   \
      (curdi_cu_deviceptr * device_ptr, size_t byte_len, size_t alignment,    \
       curdi_cu_deviceptr address, unsigned long long flags),                 \
      (device_ptr, byte_len, alignment, address, flags))                      \
    X(cuMemAddressFree, "cuMemAddressFree", OPTIONAL,                         \
      (curdi_cu_deviceptr device_ptr, size_t byte_len),                       \
      (device_ptr, byte_len))                                                 \
    X(cuMemMap, "cuMemMap", OPTIONAL,                                         \
      (curdi_cu_deviceptr device_ptr, size_t byte_len, size_t offset,         \
       curdi_cu_mem_handle handle, unsigned long long flags),                 \
      (device_ptr, byte_len, offset, handle, flags))                          \
    X(cuMemUnmap, "cuMemUnmap", OPTIONAL,                                     \
      (curdi_cu_deviceptr device_ptr, size_t byte_len),                       \
      (device_ptr, byte_len))                                                 \
    X(cuMemSetAccess, "cuMemSetAccess", OPTIONAL,                             \
      (curdi_cu_deviceptr device_ptr, size_t byte_len,                        \
       const curdi_cu_mem_access_desc_abi_t *desc, size_t count),             \
      (device_ptr, byte_len, desc, count))                                    \
    X(cuMemExportToShareableHandle, "cuMemExportToShareableHandle",           \
      OPTIONAL,                                                               \
      (void *shareable_handle, curdi_cu_mem_handle handle,                    \
       curdi_cu_mem_handle_type handle_type, unsigned long long flags),       \
      (shareable_handle, handle, handle_type, flags))                         \
    X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle",       \
      OPTIONAL,                                                               \
      (curdi_cu_mem_handle * handle, void *os_handle,                         \
       curdi_cu_mem_handle_type handle_type),                                 \
      (handle, os_handle, handle_type))                                       \
    X(cuMemGetAllocationPropertiesFromHandle,                                 \
      "cuMemGetAllocationPropertiesFromHandle", OPTIONAL,                     \
      (curdi_cu_mem_allocation_prop_abi_t *prop, curdi_cu_mem_handle handle), \
      (prop, handle))                                                         \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", OPTIONAL,   \
      (curdi_cu_mem_handle * handle, void *address), (handle, address))

#define CURDI_ABI_PFN_(name, symbol, tier, params, args)                      \
    typedef curdi_cu_result (*curdi_pfn_##name) params;
CURDI_CUDA_ENTRY_LIST(CURDI_ABI_PFN_)
#undef CURDI_ABI_PFN_

/* The two ways in: cuGetProcAddress_v2 (CUDA 12.0+) and the older
 * cuGetProcAddress (CUDA 11.3+), both found with dlsym. */
typedef curdi_cu_result (*curdi_pfn_cuGetProcAddress_v2)(
    const char *symbol, void **pfn, int cuda_version, uint64_t flags,
    curdi_cu_proc_address_query_result *symbol_status);
typedef curdi_cu_result (*curdi_pfn_cuGetProcAddress_v1)(const char *symbol,
                                                         void **pfn,
                                                         int cuda_version,
                                                         uint64_t flags);

#endif
