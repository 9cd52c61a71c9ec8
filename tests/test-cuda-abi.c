/* test-cuda-abi.c - lib/driver/cuda_abi.h against the CUDA toolkit's cuda.h.
 *
 * curd declares the driver ABI it uses itself (it never includes cuda.h).
 * When the toolkit's header is present (the Makefile then defines
 * CURD_HAVE_CUDA_H), this program compiles both and checks every value and
 * every entry's signature; without it each test skips and says why.
 *
 * cuda.h maps many names to versioned symbols by macro (cuMemAlloc ->
 * cuMemAlloc_v2, ...). The checks take &name through a macro argument, so
 * the same mapping applies, and each signature is compared with the
 * variant cuda.h calls by that name today. That is also the variant
 * cuGetProcAddress returns for CUDA 12.0 for every entry curd uses: the
 * only CUDA 13 remap among them, cuEventElapsedTime -> _v2, keeps the same
 * signature. */
#include <glib.h>
#include <stddef.h>
#include <string.h>

#ifdef CURD_HAVE_CUDA_H
#include <cuda.h>
#endif

#include "driver/cuda_abi.h"

#ifdef CURD_HAVE_CUDA_H

static void test_typedefs_match(void)
{
#define SAME_TYPE(ours, theirs)                                               \
    g_assert_true(__builtin_types_compatible_p(ours, theirs))
    SAME_TYPE(curdi_cu_result, CUresult);
    SAME_TYPE(curdi_cu_device, CUdevice);
    SAME_TYPE(curdi_cu_deviceptr, CUdeviceptr);
    SAME_TYPE(curdi_cu_context, CUcontext);
    SAME_TYPE(curdi_cu_stream, CUstream);
    SAME_TYPE(curdi_cu_event, CUevent);
    SAME_TYPE(curdi_cu_module, CUmodule);
    SAME_TYPE(curdi_cu_function, CUfunction);
    SAME_TYPE(curdi_cu_device_attribute, CUdevice_attribute);
    SAME_TYPE(curdi_cu_jit_option, CUjit_option);
    SAME_TYPE(curdi_cu_proc_address_query_result,
              CUdriverProcAddressQueryResult);
    SAME_TYPE(curdi_cu_graph, CUgraph);
    SAME_TYPE(curdi_cu_graph_node, CUgraphNode);
    SAME_TYPE(curdi_cu_graph_exec, CUgraphExec);
    SAME_TYPE(curdi_cu_kernel, CUkernel);
    SAME_TYPE(curdi_cu_link_state, CUlinkState);
    SAME_TYPE(curdi_cu_jit_input_type, CUjitInputType);
    SAME_TYPE(curdi_cu_function_attribute, CUfunction_attribute);
    SAME_TYPE(curdi_cu_stream_capture_mode, CUstreamCaptureMode);
    SAME_TYPE(curdi_cu_graph_node_type, CUgraphNodeType);
    SAME_TYPE(curdi_cu_kernel_node_params_abi_t, CUDA_KERNEL_NODE_PARAMS);
    SAME_TYPE(curdi_cu_graph_exec_update_result_info_abi_t,
              CUgraphExecUpdateResultInfo);
    SAME_TYPE(curdi_cu_memcpy2d_abi_t, CUDA_MEMCPY2D);
    SAME_TYPE(curdi_cu_mem_handle, CUmemGenericAllocationHandle);
    SAME_TYPE(curdi_cu_mem_handle_type, CUmemAllocationHandleType);
    SAME_TYPE(curdi_cu_mem_granularity_flags,
              CUmemAllocationGranularity_flags);
    SAME_TYPE(curdi_cu_mem_allocation_prop_abi_t, CUmemAllocationProp);
    SAME_TYPE(curdi_cu_mem_access_desc_abi_t, CUmemAccessDesc);
    /* Sizes too, for the record (compatibility already implies them). */
    g_assert_cmpuint(sizeof(curdi_cu_deviceptr), ==, sizeof(CUdeviceptr));
    g_assert_cmpuint(sizeof(curdi_cu_result), ==, sizeof(CUresult));
#undef SAME_TYPE
}

/* curd's own copies of the two structs the graph entries take: the same
 * size and every field at the same offset with the same size. */
static void test_struct_layouts_match(void)
{
#define SAME_FIELD(ours, theirs, our_field, their_field)                      \
    g_assert_cmpuint(offsetof(ours, our_field), ==,                           \
                     offsetof(theirs, their_field));                          \
    g_assert_cmpuint(sizeof(((ours *)0)->our_field), ==,                      \
                     sizeof(((theirs *)0)->their_field))
    g_assert_cmpuint(sizeof(curdi_cu_kernel_node_params), ==,
                     sizeof(CUDA_KERNEL_NODE_PARAMS));
    g_assert_cmpuint(_Alignof(curdi_cu_kernel_node_params), ==,
                     _Alignof(CUDA_KERNEL_NODE_PARAMS));
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, func, func);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, grid_x,
               gridDimX);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, grid_y,
               gridDimY);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, grid_z,
               gridDimZ);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, block_x,
               blockDimX);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, block_y,
               blockDimY);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, block_z,
               blockDimZ);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS,
               shared_bytes, sharedMemBytes);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS,
               kernel_params, kernelParams);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, extra,
               extra);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, kern, kern);
    SAME_FIELD(curdi_cu_kernel_node_params, CUDA_KERNEL_NODE_PARAMS, context,
               ctx);
    g_assert_cmpuint(sizeof(curdi_cu_graph_exec_update_result_info), ==,
                     sizeof(CUgraphExecUpdateResultInfo));
    SAME_FIELD(curdi_cu_graph_exec_update_result_info,
               CUgraphExecUpdateResultInfo, result, result);
    SAME_FIELD(curdi_cu_graph_exec_update_result_info,
               CUgraphExecUpdateResultInfo, error_node, errorNode);
    SAME_FIELD(curdi_cu_graph_exec_update_result_info,
               CUgraphExecUpdateResultInfo, error_from_node, errorFromNode);
    g_assert_cmpuint(sizeof(curdi_cu_memcpy2d), ==, sizeof(CUDA_MEMCPY2D));
    g_assert_cmpuint(_Alignof(curdi_cu_memcpy2d), ==, _Alignof(CUDA_MEMCPY2D));
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_x_bytes, srcXInBytes);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_y, srcY);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_memory_type,
               srcMemoryType);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_host, srcHost);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_device, srcDevice);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_array, srcArray);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, src_pitch, srcPitch);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_x_bytes, dstXInBytes);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_y, dstY);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_memory_type,
               dstMemoryType);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_host, dstHost);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_device, dstDevice);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_array, dstArray);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, dst_pitch, dstPitch);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, width, WidthInBytes);
    SAME_FIELD(curdi_cu_memcpy2d, CUDA_MEMCPY2D, height, Height);
    /* The virtual memory management entries' structs. */
    g_assert_cmpuint(sizeof(curdi_cu_mem_location), ==, sizeof(CUmemLocation));
    SAME_FIELD(curdi_cu_mem_location, CUmemLocation, type, type);
    SAME_FIELD(curdi_cu_mem_location, CUmemLocation, id, id);
    g_assert_cmpuint(sizeof(curdi_cu_mem_allocation_prop), ==,
                     sizeof(CUmemAllocationProp));
    g_assert_cmpuint(_Alignof(curdi_cu_mem_allocation_prop), ==,
                     _Alignof(CUmemAllocationProp));
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp, type, type);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               requested_handle_types, requestedHandleTypes);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp, location,
               location);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               win32_handle_metadata, win32HandleMetaData);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               alloc_flags.compression_type, allocFlags.compressionType);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               alloc_flags.gpu_direct_rdma_capable,
               allocFlags.gpuDirectRDMACapable);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               alloc_flags.usage, allocFlags.usage);
    SAME_FIELD(curdi_cu_mem_allocation_prop, CUmemAllocationProp,
               alloc_flags.reserved, allocFlags.reserved);
    g_assert_cmpuint(sizeof(curdi_cu_mem_access_desc), ==,
                     sizeof(CUmemAccessDesc));
    SAME_FIELD(curdi_cu_mem_access_desc, CUmemAccessDesc, location, location);
    SAME_FIELD(curdi_cu_mem_access_desc, CUmemAccessDesc, flags, flags);
#undef SAME_FIELD
}

static void test_result_values_match(void)
{
    unsigned checked = 0;
#define CHECK_RESULT_(name, value)                                            \
    g_assert_cmpint(CURDI_CUDA_##name, ==, CUDA_##name);                      \
    g_assert_cmpint(value, ==, CUDA_##name);                                  \
    checked++;
    CURDI_CUDA_RESULT_LIST(CHECK_RESULT_)
#undef CHECK_RESULT_
    g_assert_cmpuint(checked, >=, 10);
}

static void test_attribute_values_match(void)
{
    unsigned checked = 0;
#define CHECK_ATTRIBUTE_(name, value)                                         \
    g_assert_cmpint(CURDI_CU_DEVICE_ATTRIBUTE_##name, ==,                     \
                    CU_DEVICE_ATTRIBUTE_##name);                              \
    g_assert_cmpint(value, ==, CU_DEVICE_ATTRIBUTE_##name);                   \
    checked++;
    CURDI_CU_DEVICE_ATTRIBUTE_LIST(CHECK_ATTRIBUTE_)
#undef CHECK_ATTRIBUTE_
    g_assert_cmpuint(checked, >=, 10);
}

static void test_flag_values_match(void)
{
    unsigned checked = 0;
    /* `name` expands here: cuda.h's macros (CU_MEMHOSTALLOC_PORTABLE) and
     * enumerators (CU_STREAM_NON_BLOCKING) alike. */
#define CHECK_FLAG_(name, value)                                              \
    g_assert_cmpint(CURDI_##name, ==, name);                                  \
    g_assert_cmpint(value, ==, name);                                         \
    checked++;
    CURDI_CU_FLAG_LIST(CHECK_FLAG_)
#undef CHECK_FLAG_
    g_assert_cmpuint(checked, >=, 10);
}

static void test_entry_signatures_match(void)
{
    unsigned checked = 0;
    /* `name` is macro-expanded in &name (cuMemAlloc -> cuMemAlloc_v2) but
     * not in the ## paste, so ours keeps its base name. */
#define CHECK_ENTRY_(name, symbol, tier, params, args)                        \
    if (!__builtin_types_compatible_p(curdi_pfn_##name, __typeof__(&name)))   \
        g_error("curdi_pfn_%s does not match cuda.h's declaration of %s",     \
                #name, #name);                                                \
    checked++;
    CURDI_CUDA_ENTRY_LIST(CHECK_ENTRY_)
#undef CHECK_ENTRY_
    g_assert_cmpuint(checked, >=, 40);
    /* cuGetProcAddress is cuGetProcAddress_v2 in cuda.h (the older
     * four-argument form is only declared for the driver's own build). */
    g_assert_true(__builtin_types_compatible_p(curdi_pfn_cuGetProcAddress_v2,
                                               __typeof__(&cuGetProcAddress)));
}

/* The dlsym fallback symbol of each entry is what cuda.h maps the base
 * name to, whenever cuda.h maps it at all. */
static void test_fallback_symbols_match_versioned_names(void)
{
#define CURD_STRINGIFY_EXPANDED_(x) #x
#define CURD_STRINGIFY_(x) CURD_STRINGIFY_EXPANDED_(x)
#define CHECK_SYMBOL_(name, symbol, tier, params, args)                       \
    {                                                                         \
        const char *mapped = CURD_STRINGIFY_(name);                           \
        /* cuEventElapsedTime: CUDA 12.0 resolves v1 and the fallback is    \
         * v1; cuda.h of CUDA 12.8+ maps the name to _v2 (same ABI). */       \
        if (strcmp(#name, "cuEventElapsedTime") != 0)                         \
            g_assert_cmpstr(symbol, ==, mapped);                              \
    }
    CURDI_CUDA_ENTRY_LIST(CHECK_SYMBOL_)
#undef CHECK_SYMBOL_
}

static void test_minimum_version_is_below_the_headers(void)
{
    g_assert_cmpint(CURDI_CUDA_MIN_VERSION, <=, CUDA_VERSION);
    g_assert_cmpint(CURDI_CUDA_12_4_VERSION, <=, CUDA_VERSION);
}

#else /* !CURD_HAVE_CUDA_H */

static void skip_without_cuda_h(void)
{
    g_test_skip("cuda.h not found at build time (looked in "
                "$CUDA_HOME/include, default /usr/local/cuda/include); "
                "install the CUDA toolkit headers to check lib/driver/cuda_abi.h");
}

#endif

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#ifdef CURD_HAVE_CUDA_H
    g_test_add_func("/cuda-abi/typedefs-are-compatible-with-cuda-h",
                    test_typedefs_match);
    g_test_add_func("/cuda-abi/struct-layouts-equal-cuda-h",
                    test_struct_layouts_match);
    g_test_add_func("/cuda-abi/cuda-result-values-equal-cuda-h",
                    test_result_values_match);
    g_test_add_func("/cuda-abi/device-attribute-values-equal-cuda-h",
                    test_attribute_values_match);
    g_test_add_func("/cuda-abi/flag-values-equal-cuda-h",
                    test_flag_values_match);
    g_test_add_func("/cuda-abi/entry-signatures-are-compatible-with-cuda-h",
                    test_entry_signatures_match);
    g_test_add_func("/cuda-abi/fallback-symbols-are-the-versioned-names",
                    test_fallback_symbols_match_versioned_names);
    g_test_add_func("/cuda-abi/minimum-version-is-not-above-the-headers",
                    test_minimum_version_is_below_the_headers);
#else
    g_test_add_func("/cuda-abi/typedefs-are-compatible-with-cuda-h",
                    skip_without_cuda_h);
    g_test_add_func("/cuda-abi/struct-layouts-equal-cuda-h",
                    skip_without_cuda_h);
    g_test_add_func("/cuda-abi/cuda-result-values-equal-cuda-h",
                    skip_without_cuda_h);
    g_test_add_func("/cuda-abi/device-attribute-values-equal-cuda-h",
                    skip_without_cuda_h);
    g_test_add_func("/cuda-abi/flag-values-equal-cuda-h", skip_without_cuda_h);
    g_test_add_func("/cuda-abi/entry-signatures-are-compatible-with-cuda-h",
                    skip_without_cuda_h);
#endif
    return g_test_run();
}
