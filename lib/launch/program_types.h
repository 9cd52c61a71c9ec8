/* program_types.h - what the program module tells the modules above about a
 * program, and its own modules need too: a kernel's attributes and
 * parameter layout, and the module's counters. */
#ifndef CURD_LIB_LAUNCH_PROGRAM_TYPES_H
#define CURD_LIB_LAUNCH_PROGRAM_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kernel's attributes, read at load (cuFuncGetAttribute), and the
 * device's opt-in shared memory limit less the static shared memory. */
typedef struct curdi_program_attrs {
    int registers_per_thread;
    int max_threads_per_block;
    size_t static_shared_bytes;
    size_t local_bytes_per_thread;
    size_t const_bytes;
    size_t max_dynamic_shared_bytes;
    int binary_version;
    int ptx_version;
} curdi_program_attrs;

/* A kernel's parameter list as the driver lays it out (cuFuncGetParamInfo;
 * CUDA 12.4 drivers). known is false where the driver cannot tell; then
 * count is 0 and the arrays NULL. */
typedef struct curdi_param_layout {
    bool known;
    uint32_t count;
    const uint32_t *offsets; /* count of them, ascending */
    const uint32_t *sizes;
    size_t total_bytes; /* offset + size of the last parameter */
} curdi_param_layout;

/* The module's counters; cumulative ones count from the device's open (or
 * the last reset), and only loads that succeeded. */
typedef struct curdi_program_counts {
    uint64_t hits;           /* loads that found their module cached */
    uint64_t misses;         /* loads that loaded their module */
    uint64_t jit_ns;         /* the misses' time in cuModuleLoadDataEx */
    uint64_t modules_loaded; /* modules loaded now, used or idle */
    uint64_t modules_cached; /* of those, idle: no program uses them */
    uint64_t evictions;      /* idle modules unloaded past the bound */
} curdi_program_counts;

#endif
