/* driver.c - loads libcuda at run time and fills the entry-point table.
 *
 * The only file in curd that names driver symbols. See driver.h for the
 * contract and cuda_abi.h for the entries. */
#include "driver/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* What to install, in one place. Neither distribution's default apt
 * sources carry the driver: Debian ships it in non-free (firmware in
 * non-free-firmware) as nvidia-driver and libcuda1, Ubuntu in restricted
 * and multiverse as nvidia-driver-<branch> and libnvidia-compute-<branch>. */
#define CURDI_DRIVER_PACKAGE_HINT                                             \
    "install the NVIDIA driver's CUDA library (Debian: add the non-free and " \
    "non-free-firmware areas to the apt sources, then apt-get install "       \
    "nvidia-driver, or libcuda1 alone; Ubuntu: enable the restricted and "    \
    "multiverse areas, then apt-get install nvidia-driver-<branch>, or "      \
    "libnvidia-compute-<branch> alone), or set CURD_LIBCUDA to the full "     \
    "path of libcuda.so.1"

const char curdi_fork_message[] =
    "CUDA contexts do not survive fork; this process is a child of fork() "
    "made after the parent initialised the CUDA driver. Fix: open the "
    "device in the child after exec, or before any use in the parent";

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static curdi_driver table;
static void *libcuda;
static curd_status load_status;
static curdi_cu_result load_cu_result;
static char load_message[768];

static atomic_bool table_ready;
static atomic_bool driver_initialised;
static atomic_bool no_device;
static atomic_bool forked;
static atomic_bool deinitialized;

static void on_fork_child(void)
{
    /* Async-signal-safe: one atomic load and one store. */
    if (atomic_load(&driver_initialised))
        atomic_store(&forked, true);
}

CURDI_PRINTF(3, 4)
static void driver_set_load_failure(curd_status status,
                                    curdi_cu_result cu_result,
                                    const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(load_message, sizeof load_message, format, args);
    va_end(args);
    load_status = status;
    load_cu_result = cu_result;
}

/* Resolves one entry: cuGetProcAddress by base name for CUDA 12.0 (or the
 * later version its tier names) first (it returns the ABI variant of that
 * version), then dlsym of the symbol that carries the same ABI. */
static void *resolve(curdi_pfn_cuGetProcAddress_v2 get_v2,
                     curdi_pfn_cuGetProcAddress_v1 get_v1, const char *base,
                     const char *symbol, int cuda_version)
{
    void *fn = NULL;
    if (get_v2 != NULL) {
        curdi_cu_proc_address_query_result found =
            CURDI_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (get_v2(base, &fn, cuda_version,
                   CURDI_CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) !=
                CURDI_CUDA_SUCCESS ||
            found != CURDI_CU_GET_PROC_ADDRESS_SUCCESS)
            fn = NULL;
    } else if (get_v1 != NULL) {
        if (get_v1(base, &fn, cuda_version,
                   CURDI_CU_GET_PROC_ADDRESS_LEGACY_STREAM) !=
            CURDI_CUDA_SUCCESS)
            fn = NULL;
    }
    if (fn == NULL)
        fn = dlsym(libcuda, symbol);
    return fn;
}

/* dlsym hands back an object pointer; POSIX guarantees it converts to the
 * function pointer of the symbol's real type, which cuda_abi.h declares
 * (and tests/test-cuda-abi.c checks against cuda.h). */
#define CURDI_AS_FN(type, pointer) ((type)(uintptr_t)(pointer))

static void driver_load_once_body(void)
{
    const char *override = secure_getenv("CURD_LIBCUDA");
    const char *path = override != NULL && override[0] != '\0'
                           ? override
                           : "libcuda.so.1";

    dlerror();
    libcuda = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (libcuda == NULL && path == override) {
        /* The caller named the library: what is wrong is that path, not
         * the system's driver, and dlopen's own words say why. */
        const char *why = dlerror();
        driver_set_load_failure(
            CURD_E_NO_DRIVER, 0,
            "CURD_LIBCUDA is set to %s, which cannot be loaded"
            " (%s), so no GPU can be used. Fix: set CURD_LIBCUDA"
            " to the full path of a libcuda.so.1 that exists"
            " and loads, or unset it to load the system's"
            " libcuda.so.1; where the system has none, %s.",
            path, why != NULL ? why : "no reason given",
            CURDI_DRIVER_PACKAGE_HINT);
        return;
    }
    if (libcuda == NULL) {
        const char *why = dlerror();
        driver_set_load_failure(
            CURD_E_NO_DRIVER, 0,
            "The CUDA driver library %s could not be loaded "
            "(%s), so no GPU can be used. Fix: %s.",
            path, why != NULL ? why : "no reason given",
            CURDI_DRIVER_PACKAGE_HINT);
        return;
    }

    curdi_pfn_cuDriverGetVersion get_version = CURDI_AS_FN(
        curdi_pfn_cuDriverGetVersion, dlsym(libcuda, "cuDriverGetVersion"));
    if (get_version == NULL) {
        driver_set_load_failure(
            CURD_E_NO_DRIVER, 0,
            "%s was loaded but does not export "
            "cuDriverGetVersion, so it is not a CUDA driver "
            "library. Fix: %s.",
            path, CURDI_DRIVER_PACKAGE_HINT);
        goto fail;
    }
    int version = 0;
    curdi_cu_result rc = get_version(&version);
    if (rc == CURDI_CUDA_ERROR_STUB_LIBRARY) {
        driver_set_load_failure(
            CURD_E_NO_DRIVER, rc,
            "%s is the CUDA toolkit's stub library "
            "(CUDA_ERROR_STUB_LIBRARY), not the driver. Fix: %s, "
            "and keep the toolkit's stubs directory off the "
            "library path.",
            path, CURDI_DRIVER_PACKAGE_HINT);
        goto fail;
    }
    if (rc != CURDI_CUDA_SUCCESS) {
        driver_set_load_failure(
            CURD_E_NO_DRIVER, rc,
            "cuDriverGetVersion in %s failed with CUresult %u. "
            "Fix: %s.",
            path, rc, CURDI_DRIVER_PACKAGE_HINT);
        goto fail;
    }
    if (version < CURDI_CUDA_MIN_VERSION) {
        driver_set_load_failure(
            CURD_E_NO_DRIVER, 0,
            "The CUDA driver at %s is too old: it supports CUDA "
            "%d.%d, and curd needs CUDA %d.%d or newer. Fix: "
            "upgrade the NVIDIA driver to a release for CUDA "
            "%d.%d or newer (driver 525 or later).",
            path, version / 1000, version % 1000 / 10,
            CURDI_CUDA_MIN_VERSION / 1000, CURDI_CUDA_MIN_VERSION % 1000 / 10,
            CURDI_CUDA_MIN_VERSION / 1000, CURDI_CUDA_MIN_VERSION % 1000 / 10);
        goto fail;
    }

    curdi_pfn_cuGetProcAddress_v2 get_v2 = CURDI_AS_FN(
        curdi_pfn_cuGetProcAddress_v2, dlsym(libcuda, "cuGetProcAddress_v2"));
    curdi_pfn_cuGetProcAddress_v1 get_v1 = CURDI_AS_FN(
        curdi_pfn_cuGetProcAddress_v1, dlsym(libcuda, "cuGetProcAddress"));

    curdi_driver loaded;
    memset(&loaded, 0, sizeof loaded);
    const char *missing = NULL;
#define CURDI_RESOLVE_(name, symbol, tier, params, args)                      \
    loaded.name = CURDI_AS_FN(curdi_pfn_##name,                               \
                              resolve(get_v2, get_v1, #name, symbol,          \
                                      CURDI_TIER_VERSION_##tier));            \
    if (loaded.name == NULL && CURDI_TIER_IS_REQUIRED_##tier &&               \
        missing == NULL)                                                      \
        missing = #name;
#define CURDI_TIER_IS_REQUIRED_REQUIRED 1
#define CURDI_TIER_IS_REQUIRED_OPTIONAL 0
#define CURDI_TIER_IS_REQUIRED_OPTIONAL_12_4 0
#define CURDI_TIER_VERSION_REQUIRED CURDI_CUDA_MIN_VERSION
#define CURDI_TIER_VERSION_OPTIONAL CURDI_CUDA_MIN_VERSION
#define CURDI_TIER_VERSION_OPTIONAL_12_4 CURDI_CUDA_12_4_VERSION
    CURDI_CUDA_ENTRY_LIST(CURDI_RESOLVE_)
#undef CURDI_RESOLVE_
    if (missing != NULL) {
        driver_set_load_failure(
            CURD_E_NO_DRIVER, 0,
            "The CUDA driver at %s (CUDA %d.%d) lacks %s, "
            "which curd needs, so the driver is too old or "
            "damaged (curd needs CUDA %d.%d or newer). Fix: "
            "reinstall or upgrade the NVIDIA driver.",
            path, version / 1000, version % 1000 / 10, missing,
            CURDI_CUDA_MIN_VERSION / 1000, CURDI_CUDA_MIN_VERSION % 1000 / 10);
        goto fail;
    }
    loaded.driver_version = version;

    /* Registered before cuInit so that no fork can slip between the
     * driver's initialisation and the handler that guards against it. */
    if (pthread_atfork(NULL, NULL, on_fork_child) != 0) {
        driver_set_load_failure(
            CURD_E_OUT_OF_MEMORY, 0,
            "pthread_atfork could not register curd's fork "
            "guard (out of memory). Fix: free host memory and "
            "try again.");
        goto fail;
    }

    rc = loaded.cuInit(0);
    if (rc == CURDI_CUDA_ERROR_NO_DEVICE) {
        /* A driver without devices is a valid host: count is 0. */
        atomic_store(&no_device, true);
    } else if (rc != CURDI_CUDA_SUCCESS) {
        const char *name = NULL;
        if (loaded.cuGetErrorName(rc, &name) != CURDI_CUDA_SUCCESS ||
            name == NULL)
            name = "an unrecognised CUresult";
        driver_set_load_failure(
            CURD_E_NO_DRIVER, rc,
            "cuInit in %s failed with %s (%u), so the CUDA "
            "driver cannot be used. Fix: check that the NVIDIA "
            "kernel module is loaded and matches the user-space "
            "driver (nvidia-smi must work), and that this user "
            "may open /dev/nvidia*.",
            path, name, rc);
        goto fail;
    }
    atomic_store(&driver_initialised, true);

    table = loaded;
    load_status = CURD_OK;
    atomic_store_explicit(&table_ready, true, memory_order_release);
    curdi_trace("loaded %s: CUDA driver %d.%d%s", path, version / 1000,
                version % 1000 / 10,
                atomic_load(&no_device) ? ", no CUDA device" : "");
    return;

fail:
    dlclose(libcuda);
    libcuda = NULL;
}

curd_status curdi_driver_load(void)
{
    pthread_once(&load_once, driver_load_once_body);
    if (load_status == CURD_OK)
        return CURD_OK;
    curdi_status_note_driver_code((int)load_cu_result);
    return curdi_fail(load_status, "%s", load_message);
}

const curdi_driver *curdi_driver_get(void)
{
    if (!atomic_load_explicit(&table_ready, memory_order_acquire))
        return NULL;
    return &table;
}

curdi_driver *curdi_driver_table_for_test(void)
{
    if (!atomic_load_explicit(&table_ready, memory_order_acquire))
        return NULL;
    return &table;
}

curd_status curdi_driver_ready(const curdi_driver **out)
{
    curd_status status = curdi_driver_load();
    if (status != CURD_OK)
        return status;
    if (atomic_load(&forked))
        return curdi_fail(CURD_E_UNSUPPORTED, "%s.", curdi_fork_message);
    if (atomic_load(&deinitialized)) {
        curdi_status_note_driver_code(CURDI_CUDA_ERROR_DEINITIALIZED);
        return curdi_fail(CURD_E_DRIVER,
                          "The CUDA driver has shut down "
                          "(CUDA_ERROR_DEINITIALIZED: the process is "
                          "exiting), so curd makes no further driver calls. "
                          "Fix: finish GPU work and close devices before the "
                          "process exits.");
    }
    *out = &table;
    return CURD_OK;
}

bool curdi_driver_no_device(void)
{
    return atomic_load(&no_device);
}

bool curdi_driver_forked(void)
{
    return atomic_load(&forked);
}

bool curdi_driver_deinitialized(void)
{
    return atomic_load(&deinitialized);
}

bool curdi_driver_has_vmm(void)
{
    const curdi_driver *driver = curdi_driver_get();
    return driver != NULL && driver->cuMemGetAllocationGranularity != NULL
           && driver->cuMemCreate != NULL && driver->cuMemRelease != NULL
           && driver->cuMemAddressReserve != NULL
           && driver->cuMemAddressFree != NULL && driver->cuMemMap != NULL
           && driver->cuMemUnmap != NULL && driver->cuMemSetAccess != NULL
           && driver->cuMemExportToShareableHandle != NULL
           && driver->cuMemImportFromShareableHandle != NULL
           && driver->cuMemGetAllocationPropertiesFromHandle != NULL
           && driver->cuMemRetainAllocationHandle != NULL;
}

bool curdi_driver_usable(void)
{
    return atomic_load_explicit(&table_ready, memory_order_acquire) &&
           !atomic_load(&forked) && !atomic_load(&deinitialized);
}

curdi_cu_result curdi_driver_note(curdi_cu_result cu_result)
{
    if (cu_result == CURDI_CUDA_ERROR_DEINITIALIZED &&
        !atomic_exchange(&deinitialized, true))
        curdi_trace("the CUDA driver reported CUDA_ERROR_DEINITIALIZED; "
                    "no further driver calls");
    return cu_result;
}

curd_status curdi_driver_status_of(curdi_cu_result cu_result)
{
    switch (cu_result) {
    case CURDI_CUDA_SUCCESS:
        return CURD_OK;
    case CURDI_CUDA_ERROR_OUT_OF_MEMORY:
        return CURD_E_OUT_OF_MEMORY;
    case CURDI_CUDA_ERROR_NO_DEVICE:
    case CURDI_CUDA_ERROR_INVALID_DEVICE:
        return CURD_E_NO_DEVICE;
    case CURDI_CUDA_ERROR_STUB_LIBRARY:
    case CURDI_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CURDI_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CURDI_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
        return CURD_E_NO_DRIVER;
    /* Sticky faults: the context cannot be used again. */
    case CURDI_CUDA_ERROR_ECC_UNCORRECTABLE:
    case CURDI_CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CURDI_CUDA_ERROR_CONTAINED:
    case CURDI_CUDA_ERROR_ILLEGAL_ADDRESS:
    case CURDI_CUDA_ERROR_LAUNCH_TIMEOUT:
    case CURDI_CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CURDI_CUDA_ERROR_ASSERT:
    case CURDI_CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CURDI_CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CURDI_CUDA_ERROR_MISALIGNED_ADDRESS:
    case CURDI_CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CURDI_CUDA_ERROR_INVALID_PC:
    case CURDI_CUDA_ERROR_LAUNCH_FAILED:
    case CURDI_CUDA_ERROR_DEVICE_UNAVAILABLE:
        return CURD_E_DEVICE_LOST;
    /* A module image the driver could not load or JIT. */
    case CURDI_CUDA_ERROR_INVALID_IMAGE:
    case CURDI_CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CURDI_CUDA_ERROR_INVALID_PTX:
    case CURDI_CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CURDI_CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CURDI_CUDA_ERROR_JIT_COMPILATION_DISABLED:
        return CURD_E_PROGRAM;
    default:
        return CURD_E_DRIVER;
    }
}

static const char *own_result_name(curdi_cu_result cu_result)
{
    switch (cu_result) {
#define CURDI_NAME_CASE_(name, value)                                         \
    case CURDI_CUDA_##name:                                                   \
        return "CUDA_" #name;
        CURDI_CUDA_RESULT_LIST(CURDI_NAME_CASE_)
#undef CURDI_NAME_CASE_
    default:
        return "an unrecognised CUresult";
    }
}

/* Whether the driver may be asked to describe an error: a lookup in the
 * driver, but still a call, so not after fork or teardown. */
static bool may_ask_driver(void)
{
    return curdi_driver_usable();
}

const char *curdi_driver_result_name(curdi_cu_result cu_result)
{
    const char *name = NULL;
    if (may_ask_driver() &&
        table.cuGetErrorName(cu_result, &name) == CURDI_CUDA_SUCCESS &&
        name != NULL)
        return name;
    return own_result_name(cu_result);
}

const char *curdi_driver_result_text(curdi_cu_result cu_result)
{
    const char *text = NULL;
    if (may_ask_driver() &&
        table.cuGetErrorString(cu_result, &text) == CURDI_CUDA_SUCCESS)
        return text;
    return NULL;
}

/* ------------------------------------------------------------------------
 * Failures of driver calls
 * ---------------------------------------------------------------------- */
static const char *driver_default_fix(curd_status status)
{
    switch (status) {
    case CURD_E_OUT_OF_MEMORY:
        return "free buffers, trim the pools (curd_device_trim) or lower "
               "their cache budgets, and try again";
    case CURD_E_DEVICE_LOST:
        return "the context is unusable after this fault: close the device "
               "and open it again (the process may need to restart); run "
               "the workload under compute-sanitizer to find the fault";
    case CURD_E_NO_DEVICE:
        return "use an ordinal below curd_device_count(), and check "
               "CUDA_VISIBLE_DEVICES and nvidia-smi";
    case CURD_E_NO_DRIVER:
        return "install or upgrade the NVIDIA driver so that it matches "
               "its kernel module";
    case CURD_E_PROGRAM:
        return "rebuild the module for this device's architecture, or ship "
               "PTX so the driver can JIT it";
    default:
        return "check the arguments of this call; if they are valid, "
               "report the driver error with the output of nvidia-smi";
    }
}

curd_status curdi_driver_fail(int cu_result, const char *call, const char *fix)
{
    curdi_cu_result code = (curdi_cu_result)cu_result;
    curdi_driver_note(code);
    curd_status status = curdi_driver_status_of(code);
    if (status == CURD_OK) /* a caller bug; never report success as failure */
        status = CURD_E_DRIVER;
    const char *name = curdi_driver_result_name(code);
    const char *text = curdi_driver_result_text(code);
    if ((fix == NULL || fix[0] == '\0') &&
        code == CURDI_CUDA_ERROR_DEINITIALIZED)
        fix = "the CUDA driver is shutting down (the process is exiting); "
              "finish GPU work and close devices before exit";
    else if (fix == NULL || fix[0] == '\0')
        fix = driver_default_fix(status);
    else if (strncmp(fix, "Fix:", 4) == 0)
        fix += fix[4] == ' ' ? 5 : 4;
    size_t fix_len = strlen(fix);
    bool ends_with_stop = fix_len > 0 && fix[fix_len - 1] == '.';
    curd_status result = curdi_fail(
        status, "%s failed with %s (%d)%s%s. Fix: %s%s",
        call != NULL ? call : "A CUDA driver call", name, cu_result,
        text != NULL ? ": " : "", text != NULL ? text : "", fix,
        ends_with_stop ? "" : ".");
    /* Set after curdi_fail: the result lookups above may not touch it, but
     * keep the order obvious. */
    curdi_status_note_driver_code(cu_result);
    return result;
}
