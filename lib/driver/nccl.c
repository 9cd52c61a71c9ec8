/* nccl.c - loads libnccl at run time and fills the entry table.
 *
 * The only file in curd that names NCCL symbols. See nccl.h for the
 * contract and nccl_abi.h for the entries. */
#include "driver/nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* What to install, in one place: Debian and Ubuntu ship NCCL as libnccl2
 * (Debian in non-free, Ubuntu in multiverse), and NVIDIA's CUDA apt
 * repository carries the current release under the same name. */
#define CURDI_NCCL_PACKAGE_HINT                                              \
    "install NCCL 2.14 or newer (apt-get install libnccl2, from Debian's "  \
    "non-free area, Ubuntu's multiverse or NVIDIA's CUDA repository), or "  \
    "set CURD_LIBNCCL to the full path of libnccl.so.2"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static curdi_nccl table;
static void *libnccl;
static curd_status load_status;
static char load_message[768];
static atomic_bool table_ready;

CURDI_PRINTF(1, 2)
static void nccl_set_load_failure(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(load_message, sizeof load_message, format, args);
    va_end(args);
    load_status = CURD_E_UNSUPPORTED;
}

/* dlsym hands back an object pointer; POSIX guarantees it converts to the
 * function pointer of the symbol's real type, which nccl_abi.h declares
 * (and tests/test-nccl-abi.c checks against nccl.h). */
#define CURDI_NCCL_AS_FN(type, pointer) ((type)(uintptr_t)(pointer))

static void nccl_load_once_body(void)
{
    const char *override = secure_getenv("CURD_LIBNCCL");
    const char *path = override != NULL && override[0] != '\0'
                           ? override
                           : "libnccl.so.2";

    dlerror();
    libnccl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (libnccl == NULL) {
        const char *why = dlerror();
        nccl_set_load_failure(
            "The NCCL library %s could not be loaded (%s), so "
            "no communicator can be opened. Fix: %s.",
            path, why != NULL ? why : "no reason given",
            CURDI_NCCL_PACKAGE_HINT);
        return;
    }

    curdi_nccl loaded;
    memset(&loaded, 0, sizeof loaded);
    const char *missing = NULL;
#define CURDI_NCCL_IS_REQUIRED_REQUIRED 1
#define CURDI_NCCL_IS_REQUIRED_OPTIONAL 0
#define CURDI_NCCL_RESOLVE_(name, tier, params, args)                        \
    loaded.name = CURDI_NCCL_AS_FN(curdi_pfn_##name, dlsym(libnccl, #name)); \
    if (loaded.name == NULL && CURDI_NCCL_IS_REQUIRED_##tier &&              \
        missing == NULL)                                                     \
        missing = #name;
#define CURDI_NCCL_RESOLVE_TEXT_(name, params, args)                         \
    loaded.name = CURDI_NCCL_AS_FN(curdi_pfn_##name, dlsym(libnccl, #name)); \
    if (loaded.name == NULL && missing == NULL)                              \
        missing = #name;
    CURDI_NCCL_ENTRY_LIST(CURDI_NCCL_RESOLVE_)
    CURDI_NCCL_TEXT_ENTRY_LIST(CURDI_NCCL_RESOLVE_TEXT_)
#undef CURDI_NCCL_RESOLVE_
#undef CURDI_NCCL_RESOLVE_TEXT_

    int version = 0;
    if (loaded.ncclGetVersion == NULL ||
        loaded.ncclGetVersion(&version) != CURDI_NCCL_Success) {
        nccl_set_load_failure(
            "%s was loaded but ncclGetVersion is missing or "
            "failed, so it is not a usable NCCL library. Fix: "
            "%s.",
            path, CURDI_NCCL_PACKAGE_HINT);
        goto fail;
    }
    /* Versions before 2.9 were coded major * 1000 + minor * 100 + patch;
     * all of them are older than the minimum, whichever coding. */
    if (version < CURDI_NCCL_MIN_VERSION) {
        nccl_set_load_failure(
            "The NCCL library at %s is version code %d, older "
            "than 2.14 (%d), the first with non-blocking "
            "communicators, which curd needs to never hang. "
            "Fix: %s.",
            path, version, CURDI_NCCL_MIN_VERSION, CURDI_NCCL_PACKAGE_HINT);
        goto fail;
    }
    if (missing != NULL) {
        nccl_set_load_failure(
            "The NCCL library at %s (version code %d) lacks %s, "
            "which curd needs, so it is damaged or not NCCL. "
            "Fix: %s.",
            path, version, missing, CURDI_NCCL_PACKAGE_HINT);
        goto fail;
    }
    loaded.version = version;
    table = loaded;
    load_status = CURD_OK;
    atomic_store_explicit(&table_ready, true, memory_order_release);
    curdi_trace("loaded %s: NCCL %d.%d.%d%s", path, version / 10000,
                version / 100 % 100, version % 100,
                loaded.ncclCommSplit != NULL ? "" : ", no ncclCommSplit");
    return;

fail:
    dlclose(libnccl);
    libnccl = NULL;
}

curd_status curdi_nccl_ready(const curdi_nccl **out)
{
    pthread_once(&load_once, nccl_load_once_body);
    if (load_status != CURD_OK)
        return curdi_fail(load_status, "%s", load_message);
    *out = &table;
    return CURD_OK;
}

curdi_nccl *curdi_nccl_table_for_test(void)
{
    if (!atomic_load_explicit(&table_ready, memory_order_acquire))
        return NULL;
    return &table;
}

curd_status curdi_nccl_status_of(curdi_nccl_result result)
{
    switch (result) {
    case CURDI_NCCL_Success:
        return CURD_OK;
    case CURDI_NCCL_UnhandledCudaError:
        return CURD_E_DRIVER;
    case CURDI_NCCL_InvalidArgument:
    case CURDI_NCCL_InvalidUsage:
        return CURD_E_INVALID_ARGUMENT;
    default:
        return CURD_E_COMM;
    }
}

const char *curdi_nccl_result_name(curdi_nccl_result result)
{
    switch (result) {
#define CURDI_NCCL_NAME_CASE_(name, value)                                   \
    case CURDI_NCCL_##name:                                                  \
        return "nccl" #name;
        CURDI_NCCL_RESULT_LIST(CURDI_NCCL_NAME_CASE_)
#undef CURDI_NCCL_NAME_CASE_
    default:
        return "an unrecognised ncclResult_t";
    }
}

static const char *nccl_default_fix(curd_status status)
{
    switch (status) {
    case CURD_E_DRIVER:
        return "check that every rank's device is usable (nvidia-smi); run "
               "with NCCL_DEBUG=WARN to see the CUDA error";
    case CURD_E_INVALID_ARGUMENT:
        return "give every rank the same unique id, size and collective "
               "sequence (same kinds, counts, types and roots), each rank "
               "once; run with NCCL_DEBUG=WARN for NCCL's reason";
    default:
        return "close this communicator and open a new one on every rank; "
               "check that every peer is alive and reachable (run with "
               "NCCL_DEBUG=WARN for NCCL's view of the network)";
    }
}

curd_status curdi_nccl_fail(curdi_nccl_result nccl_result,
                            curdi_nccl_comm comm, const char *call,
                            const char *fix)
{
    curd_status status = curdi_nccl_status_of(nccl_result);
    if (status == CURD_OK) /* a caller bug; never report success as failure */
        status = CURD_E_COMM;
    return curdi_nccl_fail_as(status, nccl_result, comm, call, fix);
}

curd_status curdi_nccl_fail_as(curd_status status,
                               curdi_nccl_result nccl_result,
                               curdi_nccl_comm comm, const char *call,
                               const char *fix)
{
    /* NCCL's own words: the last error it recorded for this communicator
     * (or the thread's, for NULL), then the description of the code. */
    const char *detail = NULL;
    if (atomic_load_explicit(&table_ready, memory_order_acquire)) {
        detail = table.ncclGetLastError(comm);
        if (detail == NULL || detail[0] == '\0')
            detail = table.ncclGetErrorString(nccl_result);
    }
    if (fix == NULL || fix[0] == '\0')
        fix = nccl_default_fix(status);
    size_t fix_len = strlen(fix);
    bool ends_with_stop = fix_len > 0 && fix[fix_len - 1] == '.';
    return curdi_fail(status, "%s failed with %s (%u)%s%s. Fix: %s%s",
                      call != NULL ? call : "An NCCL call",
                      curdi_nccl_result_name(nccl_result), nccl_result,
                      detail != NULL && detail[0] != '\0' ? ": " : "",
                      detail != NULL ? detail : "", fix,
                      ends_with_stop ? "" : ".");
}
