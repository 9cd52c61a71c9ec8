/* program.h - the program module: module images, the per-device module cache,
 * and what the dispatch module reads of a program.
 *
 * The state (struct curdi_program_state behind curd_device.program) holds,
 * under one short mutex that is never held across a driver call:
 *  - the loaded modules, in a map (base/hash_map) keyed by an XXH3-128 of the
 *    image bytes, the device's compute capability and the JIT options; each
 *    keeps a copy of its image, so a hit is confirmed byte by byte;
 *  - per module, its functions by entry name, each with its attributes and
 *    parameter layout read once, so a load that finds both makes no driver
 *    call;
 *  - the modules no program uses, least recently used last, unloaded past
 *    curd_device_options.module_cache_count (default 64);
 *  - every live program of the device, which curdi_program_close frees.
 * A JIT runs outside the lock: two threads loading the same new image at
 * once may both compile it, and the first to finish is kept.
 *
 * Programs are immutable once loaded (except the dynamic shared memory
 * limit, below), so the accessors take no lock. */
#ifndef CURD_LIB_LAUNCH_PROGRAM_H
#define CURD_LIB_LAUNCH_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"
#include "launch/program_types.h"

struct curd_device;

#define CURDI_MODULE_CACHE_DEFAULT 64u

/* Opens the device's program state (no driver call) from
 * device->options; called by curd_device_open. On failure nothing is
 * left to close. */
curd_status curdi_program_open(struct curd_device *device);
/* Frees every program the device still has and unloads every module;
 * called by curd_device_close with the device's context current (driver
 * calls are skipped when curdi_driver_usable() is false). NULL-safe. */
void curdi_program_close(struct curd_device *device);

/* Validates a program argument of an entry point named `call`: not NULL
 * and, when device is not NULL, loaded on that device
 * (CURD_E_INVALID_ARGUMENT otherwise, with a Fix sentence). */
curd_status curdi_program_check(const curd_program *program,
                                const struct curd_device *device,
                                const char *call);

/* A batch launch records the program (use) until it is forgotten
 * (unuse); curd_program_free refuses a program in use (CURD_E_BUSY). */
void curdi_program_use(const curd_program *program);
void curdi_program_unuse(const curd_program *program);

/* Accessors, valid while the program lives. */
struct curd_device *curdi_program_device(const curd_program *program);
curdi_cu_function curdi_program_function(const curd_program *program);
const char *curdi_program_entry(const curd_program *program);
curd_image_kind curdi_program_image_kind(const curd_program *program);
const curdi_program_attrs *curdi_program_attrs_of(const curd_program *program);
const curdi_param_layout *curdi_program_params(const curd_program *program);

/* Makes sure the kernel may be launched with dynamic_shared_bytes of
 * dynamic shared memory: above the 48 KiB every kernel may use, raises
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES once, to the function's
 * whole opt-in limit (it stays raised for every program of that
 * function). Context current. CURD_E_RANGE past
 * max_dynamic_shared_bytes, with the numbers. */
curd_status curdi_program_reserve_dynamic_shared(const curd_program *program,
                                                 size_t dynamic_shared_bytes);

/* Reads the module's counters (zeroes for a NULL device). */
void curdi_program_counts_read(struct curd_device *device,
                               curdi_program_counts *counts);
/* Zeroes the cumulative counters (hits, misses, jit_ns, evictions); the
 * levels stay. */
void curdi_program_counts_reset(struct curd_device *device);

#endif
