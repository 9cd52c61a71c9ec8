/* driver.h - the CUDA driver, loaded at run time, as a table of entries.
 *
 * driver.c is the only file that names driver symbols: it dlopens
 * libcuda.so.1 (or $CURD_LIBCUDA), resolves every entry of
 * CURDI_CUDA_ENTRY_LIST (cuda_abi.h) through cuGetProcAddress for CUDA
 * 12.0, falls back to dlsym of the matching symbol, and calls cuInit(0).
 * Everything else calls the driver through curdi_driver_get()->cuXxx.
 *
 * Two process states are kept here and consulted before any driver call:
 *  - forked: the process is a child of fork() made after the driver was
 *    initialised. CUDA contexts do not survive fork, so every entry that
 *    needs the driver returns CURD_E_UNSUPPORTED.
 *  - deinitialized: a call reported CUDA_ERROR_DEINITIALIZED (the driver
 *    is shutting down at process exit). From then on curd makes no driver
 *    call at all; teardown frees host memory only and reports success. */
#ifndef CURD_LIB_DRIVER_DRIVER_H
#define CURD_LIB_DRIVER_DRIVER_H

#include <stdbool.h>

#include "curd.h"
#include "driver/cuda_abi.h"

#define CURDI_DRIVER_MEMBER_(name, symbol, tier, params, args)                \
    curdi_pfn_##name name;
typedef struct curdi_driver {
    /* One function pointer per entry, named after its base CUDA name
     * (cuMemAlloc, cuMemcpyHtoDAsync, ...). Optional entries are NULL when
     * the driver lacks them. */
    CURDI_CUDA_ENTRY_LIST(CURDI_DRIVER_MEMBER_)
    /* cuDriverGetVersion, e.g. 13000. */
    int driver_version;
} curdi_driver;
#undef CURDI_DRIVER_MEMBER_

/* Loads and initialises the driver once per process (thread-safe). On
 * failure every later call gives the same status and sentence:
 * CURD_E_NO_DRIVER when libcuda is missing, a stub, or older than 12.0;
 * CURD_E_UNSUPPORTED in a child after fork. A host whose driver loads but
 * has no device (cuInit reports CUDA_ERROR_NO_DEVICE) loads fine: the
 * device count is then 0. */
curd_status curdi_driver_load(void);

/* The table, or NULL before a successful load. */
const curdi_driver *curdi_driver_get(void);

/* curdi_driver_load(), then the fork and teardown checks: the one call an
 * entry point makes before it touches the driver. On CURD_OK *out is the
 * table. CURD_E_UNSUPPORTED after fork, CURD_E_DRIVER once the driver has
 * been deinitialised. */
curd_status curdi_driver_ready(const curdi_driver **out);

/* Whether cuInit reported that the host has no CUDA device. */
bool curdi_driver_no_device(void);
/* Whether this process is a fork child of a process that had initialised
 * the driver. */
bool curdi_driver_forked(void);
/* Whether the loaded table has every entry of the virtual memory
 * management calls that shareable buffers use (cuMemCreate, cuMemMap,
 * cuMemExportToShareableHandle, ...); false before a load. */
bool curdi_driver_has_vmm(void);
/* Whether a driver call has reported CUDA_ERROR_DEINITIALIZED. */
bool curdi_driver_deinitialized(void);
/* Whether driver calls may be made: loaded, not forked, not deinitialised.
 * Teardown paths check this and skip their driver calls when it is false. */
bool curdi_driver_usable(void);
/* Notes a result: CUDA_ERROR_DEINITIALIZED marks the driver as gone.
 * Returns cu_result unchanged so it can wrap a call. */
curdi_cu_result curdi_driver_note(curdi_cu_result cu_result);

/* The curd_status a CUresult maps to: out of memory, device lost (sticky
 * faults: illegal address, launch failure, ECC, ...), no device, no
 * driver (stub library, driver/library mismatch), program (bad image or
 * PTX), else CURD_E_DRIVER. CUDA_SUCCESS maps to CURD_OK. */
curd_status curdi_driver_status_of(curdi_cu_result cu_result);
/* "CUDA_ERROR_OUT_OF_MEMORY", ...: the driver's name when it can give one,
 * else curd's own table; never NULL. */
const char *curdi_driver_result_name(curdi_cu_result cu_result);
/* The driver's description of a CUresult; NULL when it has none. */
const char *curdi_driver_result_text(curdi_cu_result cu_result);

/* Records cu_result as the thread's last driver code and returns the status
 * it maps to (CURD_E_OUT_OF_MEMORY, CURD_E_DEVICE_LOST, CURD_E_DRIVER, ...),
 * with a sentence naming the call, the driver's error name and the fix
 * (NULL: a default fix for the status). */
curd_status curdi_driver_fail(int cu_result, const char *call,
                              const char *fix);

/* The sentence that explains the fork restriction, for curdi_fail(). */
extern const char curdi_fork_message[];

/* Test-only: the writable table, so a test can wrap entries to inject
 * failures. NULL before a successful load. Reached through libcurd.a;
 * hidden in libcurd.so like every curdi_ symbol. */
curdi_driver *curdi_driver_table_for_test(void);

#endif
