/* nccl.h - NCCL, loaded at run time, as a table of entries.
 *
 * nccl.c is the only file that names NCCL symbols: on the first
 * communicator call it dlopens libnccl.so.2 (or $CURD_LIBNCCL), checks
 * ncclGetVersion against CURDI_NCCL_MIN_VERSION and resolves every entry
 * of CURDI_NCCL_ENTRY_LIST (nccl_abi.h) with dlsym. A program that never
 * opens a communicator never loads NCCL. Everything else calls NCCL
 * through the table curdi_nccl_ready() hands out. */
#ifndef CURD_LIB_DRIVER_NCCL_H
#define CURD_LIB_DRIVER_NCCL_H

#include "curd.h"
#include "driver/nccl_abi.h"

#define CURDI_NCCL_MEMBER_(name, tier, params, args) curdi_pfn_##name name;
#define CURDI_NCCL_TEXT_MEMBER_(name, params, args) curdi_pfn_##name name;
typedef struct curdi_nccl {
    /* One pointer per entry, named after the NCCL function. Optional
     * entries (ncclCommSplit) are NULL when the library lacks them. */
    CURDI_NCCL_ENTRY_LIST(CURDI_NCCL_MEMBER_)
    CURDI_NCCL_TEXT_ENTRY_LIST(CURDI_NCCL_TEXT_MEMBER_)
    /* ncclGetVersion, e.g. 22809 for 2.28.9. */
    int version;
} curdi_nccl;
#undef CURDI_NCCL_MEMBER_
#undef CURDI_NCCL_TEXT_MEMBER_

/* Loads NCCL once per process (thread-safe) and hands out the table. On
 * failure every later call gives the same CURD_E_UNSUPPORTED and sentence
 * (missing, not NCCL, or older than the minimum), saying what to
 * install. */
curd_status curdi_nccl_ready(const curdi_nccl **out);

/* The status an ncclResult_t maps to: CURD_OK for ncclSuccess,
 * CURD_E_DRIVER for a CUDA error inside NCCL, CURD_E_INVALID_ARGUMENT for
 * arguments or usage NCCL refused, CURD_E_COMM for everything else (system,
 * internal and remote errors: the communicator is broken). */
curd_status curdi_nccl_status_of(curdi_nccl_result result);
/* "ncclRemoteError", ...; never NULL. */
const char *curdi_nccl_result_name(curdi_nccl_result result);

/* Fails with the status nccl_result maps to (never CURD_OK) and a sentence
 * naming the call, NCCL's error name, NCCL's own last message for comm
 * (ncclGetLastError; comm may be NULL) and the fix (NULL: a default for
 * the status). */
curd_status curdi_nccl_fail(curdi_nccl_result nccl_result,
                            curdi_nccl_comm comm, const char *call,
                            const char *fix);

/* The same with the status chosen by the caller: CURD_E_COMM for an error
 * a running communicator reported, whatever its code. */
curd_status curdi_nccl_fail_as(curd_status status,
                               curdi_nccl_result nccl_result,
                               curdi_nccl_comm comm, const char *call,
                               const char *fix);

/* Test-only: the writable table, so a test can wrap entries to inject
 * failures (or clear an optional one). NULL before a successful load. */
curdi_nccl *curdi_nccl_table_for_test(void);

#endif
