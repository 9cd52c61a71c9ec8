/* program_load.h - the program module's layout (a function, a module, the
 * state behind curd_device.program) and the driver calls that load a
 * module and read a function, for program.c and program_load.c alone.
 * program.h says how the module is kept and under which lock. */
#ifndef CURD_LIB_LAUNCH_PROGRAM_LOAD_H
#define CURD_LIB_LAUNCH_PROGRAM_LOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/hash_map.h"
#include "curd.h"
#include "driver/cuda_abi.h"
#include "launch/jit.h"
#include "launch/program_types.h"

typedef struct curdi_function {
    struct curdi_function *next;
    char *entry;
    curdi_cu_function function;
    curdi_program_attrs attrs;
    curdi_param_layout params;
    uint32_t *param_storage; /* offsets then sizes */
    /* The dynamic shared memory the function may use now (48 KiB until
     * raised). */
    _Atomic size_t dynamic_shared_limit;
} curdi_function;

/* One image of a load: the desc's image, or an input of a link. */
typedef struct module_input {
    size_t offset; /* of its copy in the module's image block */
    size_t byte_len; /* PTX: up to its first NUL */
    curd_image_kind kind;
} module_input;

typedef struct curdi_module {
    struct curdi_module *evicted_next; /* in a list of evicted modules */
    struct curdi_module *idle_prev, *idle_next; /* while refs == 0 */
    XXH128_hash_t key;
    /* Copies of the load's images back to back, each followed by a NUL
     * (PTX must end in one): one image, or a link's inputs in order. */
    unsigned char *image;
    module_input *inputs;
    size_t input_count;
    bool linked; /* the inputs went through the driver's linker */
    curd_image_kind kind; /* what the driver loaded: a link's is a cubin */
    curdi_cu_module module;
    uint32_t refs; /* programs, and loads in progress, using it */
    curdi_function *functions;
    curdi_jit_options jit;
    char *info_log; /* the JIT's (or linker's) information log; NULL: none */
} curdi_module;

struct curdi_program_state {
    pthread_mutex_t lock;
    /* The loaded modules by key (the image's XXH3-128, bytes compared on
     * a hit, so modules whose keys collide both stay). */
    curdi_hash_map modules;
    curdi_module *idle_head, *idle_tail; /* most recently used first */
    size_t idle_count;
    size_t idle_bound;
    curd_program *programs;
    /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, read on the
     * first miss (0: not yet). */
    _Atomic int shared_optin_bytes;
    curdi_program_counts counts; /* under lock */
};

/* Loading a module and reading a function: driver calls, the context
 * current and the state's lock not held. curdi_program_load_module loads
 * (compiles or links) the module, *out_ns the time spent in the driver;
 * curdi_program_load_function finds the entry in the loaded module and
 * reads what the module caches of it into a new function, not yet in the
 * module's list, which curdi_program_load_function_free frees. */
curd_status curdi_program_load_module(curdi_module *m, const char *entry,
                                      uint64_t *out_ns);
curd_status curdi_program_load_function(curd_device *device,
                                        const curdi_module *m,
                                        const char *entry,
                                        curdi_function **out);
void curdi_program_load_function_free(curdi_function *f);

#endif
