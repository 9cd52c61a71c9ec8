/* device.c - the top of the library: opening and closing a device, its
 * information and its statistics. The one file that knows every module:
 * it opens them in layer order over the core and closes them in the
 * reverse one, and composes their statistics (doc/ARCHITECTURE.md).
 *
 * A device opens in this order, and closes in the reverse one:
 *   the core (primary context retained and pushed, properties read,
 *   upload stream), the fence module (the words streams write), the
 *   landing module (places for small downloads), the memory module (pools),
 *   the resident module, host registrations, the fence module, the gather
 *   module, the transfer module, the copy module (peer answers and its
 *   counters), the program module (the module cache), the dispatch module
 *   (its counters), the batch module, the session module and the
 *   communicator module; then it is entered in the registry of open
 *   devices, which every entry point checks.
 * A failure at any step undoes the steps before it, so a failed open
 * leaves nothing behind (tests/test-device.c fails every driver call of
 * open in turn to prove it). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "comm/communicator.h"
#include "core/core.h"
#include "core/fence.h"
#include "driver/driver.h"
#include "launch/batch.h"
#include "launch/dispatch.h"
#include "launch/program.h"
#include "memory/landing.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "session/session.h"
#include "transfer/copy.h"
#include "transfer/gather.h"
#include "transfer/host_register.h"
#include "transfer/transfer.h"
#include "transfer/upload_marks.h"

CURD_API void curd_device_options_init(curd_device_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

/* ------------------------------------------------------------------------
 * Driver and device count
 * ---------------------------------------------------------------------- */
CURD_API curd_status curd_driver_version(int *version)
{
    if (version == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_driver_version: version is NULL. Fix: pass "
                          "the address of an int.");
    /* The version was read at load; no driver call, so this works after
     * fork and teardown too. */
    curd_status status = curdi_driver_load();
    if (status != CURD_OK)
        return status;
    *version = curdi_driver_get()->driver_version;
    return CURD_OK;
}

CURD_API curd_status curd_device_count(int *count)
{
    if (count == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_count: count is NULL. Fix: pass the "
                          "address of an int.");
    const curdi_driver *driver;
    curd_status status = curdi_driver_ready(&driver);
    if (status != CURD_OK)
        return status;
    if (curdi_driver_no_device()) {
        *count = 0;
        return CURD_OK;
    }
    int found = 0;
    curdi_cu_result rc = driver->cuDeviceGetCount(&found);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuDeviceGetCount", NULL);
    *count = found;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * The modules, in layer order
 * ---------------------------------------------------------------------- */
typedef struct module_ops {
    curd_status (*open)(curd_device *device);
    void (*close)(curd_device *device);
} module_ops;

static const module_ops modules[] = {
    {curdi_fence_open, curdi_fence_close},
    {curdi_landing_open, curdi_landing_close},
    {curdi_memory_open, curdi_memory_close},
    {curdi_resident_open, curdi_resident_close},
    {curdi_host_register_open, curdi_host_register_close},
    {curdi_upload_marks_open, curdi_upload_marks_close},
    {curdi_gather_open, curdi_gather_close},
    {curdi_transfer_open, curdi_transfer_close},
    {curdi_copy_open, curdi_copy_close},
    {curdi_program_open, curdi_program_close},
    {curdi_dispatch_open, curdi_dispatch_close},
    {curdi_batch_open, curdi_batch_close},
    {curdi_session_open, curdi_session_close},
    {curdi_communicator_open, curdi_communicator_close},
};
#define MODULE_COUNT (sizeof modules / sizeof modules[0])

/* Closes the modules from the top down; each close is NULL-safe, so this
 * also undoes a partly opened device. */
static void close_modules(curd_device *device)
{
    for (size_t index = MODULE_COUNT; index-- > 0;)
        modules[index].close(device);
}

/* Opens the modules from the bottom up, stopping at the first failure (the
 * caller then closes them all: close_modules undoes what was opened). */
static curd_status open_modules(curd_device *device)
{
    for (size_t index = 0; index < MODULE_COUNT; index++) {
        curd_status status = modules[index].open(device);
        if (status != CURD_OK)
            return status;
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Open and close
 * ---------------------------------------------------------------------- */
CURD_API curd_status curd_device_open(int ordinal,
                                      const curd_device_options *options,
                                      curd_device **out_device)
{
    /* Validate everything the caller passed before touching the driver. */
    if (out_device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_open: out_device is NULL. Fix: pass "
                          "the address of a curd_device pointer.");
    curd_device_options effective;
    curd_device_options_init(&effective);
    if (options != NULL) {
        curd_status status = curdi_options_check(
            options, sizeof effective, sizeof effective, "curd_device_options");
        if (status != CURD_OK)
            return status;
        /* Only the fields both sides know (the check above proved the
         * rest is zero). */
        memcpy(&effective, options, sizeof effective);
        effective.struct_size = sizeof effective;
        if ((effective.flags & ~CURD_DEVICE_OPTIONS_FLAGS_KNOWN) != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "curd_device_options.flags is 0x%x, which sets "
                              "flags this version of curd does not define "
                              "(known: 0x%x). Fix: pass flags = 0.",
                              effective.flags,
                              CURD_DEVICE_OPTIONS_FLAGS_KNOWN);
    }
    if (ordinal < 0)
        return curdi_fail(CURD_E_NO_DEVICE,
                          "curd_device_open: ordinal %d is negative. Fix: "
                          "use an ordinal from 0 to curd_device_count() - 1.",
                          ordinal);

    const curdi_driver *driver;
    curd_status status = curdi_driver_ready(&driver);
    if (status != CURD_OK)
        return status;
    int count = 0;
    if (!curdi_driver_no_device()) {
        curdi_cu_result rc = driver->cuDeviceGetCount(&count);
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_driver_fail((int)rc, "cuDeviceGetCount", NULL);
    }
    if (ordinal >= count) {
        if (count == 0)
            return curdi_fail(CURD_E_NO_DEVICE,
                              "curd_device_open: ordinal %d, but the CUDA "
                              "driver sees no device on this host. Fix: check "
                              "nvidia-smi and CUDA_VISIBLE_DEVICES.",
                              ordinal);
        return curdi_fail(CURD_E_NO_DEVICE,
                          "curd_device_open: ordinal %d, but this host has "
                          "%d CUDA device%s (ordinals 0 to %d). Fix: use an "
                          "ordinal below curd_device_count().",
                          ordinal, count, count == 1 ? "" : "s", count - 1);
    }
    curdi_cu_device cu_device = 0;
    curdi_cu_result rc = driver->cuDeviceGet(&cu_device, ordinal);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuDeviceGet", NULL);

    curd_device *device;
    status = curdi_core_open(ordinal, cu_device, &effective, &device);
    if (status != CURD_OK)
        return status;
    status = open_modules(device);
    if (status == CURD_OK)
        status = curdi_core_register(device);
    if (status != CURD_OK) {
        close_modules(device);
        curdi_core_close(device, true);
        return status;
    }
    curdi_core_open_done(device);
    curdi_trace("opened device %d (%s, %s)", ordinal, device->props.name,
                device->props.pci_bus_id);
    *out_device = device;
    return CURD_OK;
}

CURD_API curd_status curd_device_close(curd_device *device)
{
    if (device == NULL)
        return CURD_OK;
    /* The registry, not the device, says whether it is open: a second
     * close must not read what the first one freed. */
    if (curdi_driver_forked()
        && curdi_core_device_check(device, "curd_device_close")
               == CURD_E_UNSUPPORTED)
        return CURD_E_UNSUPPORTED;
    if (!curdi_core_unregister(device))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_close: device %p is not open (closed"
                          " already, or never returned by curd_device_open);"
                          " nothing was done. Fix: close each device once.",
                          (const void *)device);

    /* Teardown never stops half way: every step runs, the first real
     * failure is reported, and the device is gone whatever happens. A
     * driver that reports CUDA_ERROR_DEINITIALIZED (process exit) is not a
     * failure: from then on no driver call is made (curdi_driver_usable). */
    const curdi_driver *driver = curdi_driver_get();
    curd_status status = CURD_OK;
    char first_error[1024] = "";
    int first_code = 0;
    bool pushed = false;
    if (driver != NULL && curdi_driver_usable()) {
        curdi_cu_result rc =
            curdi_driver_note(driver->cuCtxPushCurrent(device->context));
        if (rc == CURDI_CUDA_SUCCESS) {
            pushed = true;
        } else if (rc != CURDI_CUDA_ERROR_DEINITIALIZED) {
            /* Without its context current nothing living in it can be
             * destroyed: the context is as good as lost. Marked so, the
             * last device of the GPU to close resets it (core.c), which
             * frees all of it. */
            status = curdi_driver_fail(
                (int)rc, "cuCtxPushCurrent",
                "the device's context could not be made current, so it is"
                " treated as lost: close the GPU's other devices too, and"
                " the last close resets the context and frees what it"
                " holds");
            curdi_core_device_mark_lost(device);
        }
    }
    /* Communicators first: their work may wait on peers, which the
     * synchronisation below must not (they are waited for up to their
     * timeout, then aborted). Closing the module again below is a no-op. */
    curdi_communicator_close(device);
    /* A device whose context a fault lost has nothing left to wait for:
     * that it fails again is no news at close. */
    if (pushed && curdi_driver_usable() && !atomic_load(&device->lost)) {
        curdi_cu_result rc = curdi_driver_note(driver->cuCtxSynchronize());
        if (curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST)
            /* A fault nobody had seen yet: the context is lost, which close
             * mends (core.c), and that is not this call's failure. */
            curdi_core_device_mark_lost(device);
        else if (rc != CURDI_CUDA_SUCCESS
                 && rc != CURDI_CUDA_ERROR_DEINITIALIZED && status == CURD_OK)
            status = curdi_driver_fail(
                (int)rc, "cuCtxSynchronize",
                "the device's outstanding work failed before close; the "
                "device was closed anyway");
    }
    if (status != CURD_OK) {
        /* The modules may fail quietly in their own way; keep this sentence. */
        snprintf(first_error, sizeof first_error, "%s", curd_last_error());
        first_code = curd_last_driver_code();
    }

    int ordinal = device->ordinal;
    close_modules(device);
    curdi_core_close(device, pushed);
    curdi_trace("closed device %d", ordinal);

    if (status != CURD_OK) {
        curdi_status_note_driver_code(first_code);
        return curdi_fail(status, "%s", first_error);
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Info and statistics
 * ---------------------------------------------------------------------- */
/* The size of curd 1.0's curd_stats: a caller built against it passes
 * this struct_size, and gets the fields it knows. */
#define CURDI_STATS_SIZE_1_0 offsetof(curd_stats, module_cache_hits)

CURD_API curd_status curd_device_info(curd_device *device,
                                      curd_device_props *props)
{
    curd_status status = curdi_core_device_check(device, "curd_device_info");
    if (status != CURD_OK)
        return status;
    status = curdi_options_result_struct_check(
        props, sizeof(curd_device_props), "curd_device_info", "props",
        "curd_device_props");
    if (status != CURD_OK)
        return status;

    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    size_t free_bytes = 0, total_bytes = 0;
    curdi_cu_result rc = driver->cuMemGetInfo(&free_bytes, &total_bytes);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_driver_fail((int)rc, "cuMemGetInfo", NULL);
        curdi_core_device_leave(device);
        return status;
    }
    uint64_t resident_bytes = curdi_resident_bytes(device);
    curdi_core_device_leave(device);

    curd_device_props result = device->props;
    result.struct_size = props->struct_size;
    result.free_memory_bytes = free_bytes;
    result.resident_budget_bytes = curdi_checked_resident_budget(
        result.total_memory_bytes, free_bytes, resident_bytes,
        device->options.resident_limit_bytes);
    /* A newer caller's extra fields are left as they were. */
    memcpy(props, &result, sizeof result);
    return CURD_OK;
}

CURD_API curd_status curd_device_stats(curd_device *device, curd_stats *stats)
{
    curd_status status = curdi_core_device_check(device, "curd_device_stats");
    if (status != CURD_OK)
        return status;
    status = curdi_options_result_struct_check(stats, CURDI_STATS_SIZE_1_0,
                                               "curd_device_stats", "stats",
                                               "curd_stats");
    if (status != CURD_OK)
        return status;
    curd_stats result;
    memset(&result, 0, sizeof result);
    result.struct_size = stats->struct_size;
    /* Each module fills in its own fields. */
    curdi_memory_stats(device, &result);
    curdi_resident_stats(device, &result.resident_bytes,
                         &result.resident_buffers);
    curdi_transfer_stats(device, &result);
    curdi_copy_stats(device, &result);
    curdi_batch_counts batches;
    curdi_batch_counts_read(device, &batches);
    result.batch_runs = batches.runs;
    result.graph_replays = batches.graph_replays;
    result.graph_captures = batches.graph_captures;
    result.graph_updates = batches.graph_updates;
    result.accounting_repairs = atomic_load(&device->accounting_repairs);
    curdi_program_counts programs;
    curdi_program_counts_read(device, &programs);
    result.module_cache_hits = programs.hits;
    result.module_cache_misses = programs.misses;
    result.jit_ns = programs.jit_ns;
    result.modules_loaded = programs.modules_loaded;
    result.modules_cached = programs.modules_cached;
    result.module_evictions = programs.evictions;
    curdi_dispatch_stats(device, &result);
    curdi_communicator_stats(device, &result);
    result.imported_bytes = curdi_resident_imported_bytes(device);
    /* An older caller's struct gets the fields it has (the check above
     * proved it has 1.0's); a newer caller's extra fields are left as
     * they were. */
    size_t copied = stats->struct_size < sizeof result ? stats->struct_size
                                                       : sizeof result;
    memcpy(stats, &result, copied);
    return CURD_OK;
}

CURD_API curd_status curd_device_stats_reset(curd_device *device)
{
    curd_status status =
        curdi_core_device_check(device, "curd_device_stats_reset");
    if (status != CURD_OK)
        return status;
    curdi_memory_stats_reset(device);
    curdi_resident_stats_reset(device);
    curdi_transfer_stats_reset(device);
    curdi_copy_stats_reset(device);
    curdi_program_counts_reset(device);
    curdi_dispatch_stats_reset(device);
    curdi_batch_counts_reset(device);
    curdi_communicator_stats_reset(device);
    atomic_store(&device->accounting_repairs, 0);
    return CURD_OK;
}
