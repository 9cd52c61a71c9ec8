/* device.c - devices: the primary context, streams, the open-device list,
 * the device properties, and the order in which the rooms open and close.
 *
 * A device opens in this order, and closes in the reverse one:
 *   primary context (retained), context pushed, properties read, upload
 *   stream, memory room (pools), resident room, transfer room.
 * A failure at any step undoes the steps before it, so a failed open
 * leaves nothing behind (tests/test-device.c fails every driver call of
 * open in turn to prove it). */
#include "device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "driver.h"
#include "memory.h"
#include "program.h"
#include "resident.h"
#include "status.h"
#include "transfer.h"

/* ------------------------------------------------------------------------
 * The process-wide list of open devices
 * ---------------------------------------------------------------------- */
/* Guards open_devices and every device's next_open. Held while the OOM
 * ladder's callback runs on the devices of one ordinal, so that none of
 * them can be closed underneath it; open and close hold it only to link
 * and unlink. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static curd_device *open_devices;

static void open_list_add(curd_device *device)
{
    pthread_mutex_lock(&open_lock);
    device->next_open = open_devices;
    open_devices = device;
    pthread_mutex_unlock(&open_lock);
}

static void open_list_remove(curd_device *device)
{
    pthread_mutex_lock(&open_lock);
    for (curd_device **link = &open_devices; *link != NULL;
         link = &(*link)->next_open) {
        if (*link == device) {
            *link = device->next_open;
            break;
        }
    }
    device->next_open = NULL;
    pthread_mutex_unlock(&open_lock);
}

void curdi_devices_for_ordinal(int ordinal, void (*fn)(curd_device *, void *),
                               void *context)
{
    if (fn == NULL)
        return;
    pthread_mutex_lock(&open_lock);
    for (curd_device *device = open_devices; device != NULL;
         device = device->next_open)
        if (device->ordinal == ordinal)
            fn(device, context);
    pthread_mutex_unlock(&open_lock);
}

/* ------------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------- */
/* Past this many unknown bytes a struct_size is garbage, not a newer
 * caller: refuse it rather than read that far. */
#define CURDI_OPTIONS_MAX_TAIL 4096u

curd_status curdi_options_check(const void *options, size_t known_size,
                                size_t min_size, const char *what)
{
    if (options == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "The %s pointer is NULL. Fix: pass NULL where the "
                          "call allows it for the defaults, or a struct set "
                          "up by its _init function.",
                          what);
    size_t struct_size;
    memcpy(&struct_size, options, sizeof struct_size);
    if (struct_size < min_size)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s.struct_size is %zu, smaller than the %zu bytes "
                          "of the oldest version of that struct. Fix: "
                          "initialise it with its _init function (or set "
                          "struct_size = sizeof(%s)).",
                          what, struct_size, min_size, what);
    if (struct_size > known_size &&
        struct_size - known_size > CURDI_OPTIONS_MAX_TAIL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s.struct_size is %zu, implausibly larger than "
                          "the %zu bytes this library knows. Fix: "
                          "initialise it with its _init function.",
                          what, struct_size, known_size);
    const unsigned char *bytes = options;
    for (size_t at = known_size; at < struct_size; at++)
        if (bytes[at] != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s sets byte %zu, in a field this version of "
                              "curd (%s) does not know (it knows %zu bytes, "
                              "struct_size is %zu). Fix: leave fields of "
                              "newer versions zero, or link a newer libcurd.",
                              what, at, curd_version_string(), known_size,
                              struct_size);
    return CURD_OK;
}

curd_status curdi_result_struct_check(const void *result, size_t min_size,
                                      const char *call, const char *param,
                                      const char *type)
{
    if (result == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s is NULL. Fix: pass a %s with struct_size "
                          "set.",
                          call, param, type);
    size_t struct_size;
    memcpy(&struct_size, result, sizeof struct_size);
    if (struct_size < min_size)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s->struct_size is %zu, smaller than the %zu "
                          "bytes of %s. Fix: set %s->struct_size = "
                          "sizeof(%s).",
                          call, param, struct_size, min_size, type, param,
                          type);
    return CURD_OK;
}

CURD_API void curd_device_options_init(curd_device_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

/* ------------------------------------------------------------------------
 * Entering a device
 * ---------------------------------------------------------------------- */
curd_status curdi_device_enter(curd_device *device)
{
    if (device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "The device is NULL. Fix: pass the device that "
                          "curd_device_open() returned.");
    const curdi_driver *driver;
    curd_status status = curdi_driver_ready(&driver);
    if (status != CURD_OK)
        return status;
    curdi_cu_result rc = driver->cuCtxPushCurrent(device->context);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuCtxPushCurrent", NULL);
    return CURD_OK;
}

curd_status curdi_device_check_room(const void *room, const char *what)
{
    if (room == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device is NULL. Fix: pass a device from"
                          " curd_device_open().",
                          what);
    if (curdi_driver_forked())
        return curdi_fail(CURD_E_UNSUPPORTED, "%s: %s.", what,
                          curdi_fork_message);
    return CURD_OK;
}

void curdi_device_leave(curd_device *device)
{
    (void)device;
    const curdi_driver *driver = curdi_driver_get();
    if (driver == NULL || !curdi_driver_usable())
        return;
    curdi_cu_context popped = NULL;
    curdi_cu_result rc = curdi_driver_note(driver->cuCtxPopCurrent(&popped));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuCtxPopCurrent failed with %u on leaving device %d", rc,
                    device != NULL ? device->ordinal : -1);
}

/* ------------------------------------------------------------------------
 * Streams
 * ---------------------------------------------------------------------- */
curd_status curdi_stream_acquire(curd_device *device, curdi_cu_stream *out)
{
    pthread_mutex_lock(&device->stream_lock);
    if (device->idle_stream_count > 0) {
        *out = device->idle_streams[--device->idle_stream_count];
        pthread_mutex_unlock(&device->stream_lock);
        return CURD_OK;
    }
    pthread_mutex_unlock(&device->stream_lock);

    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_stream stream = NULL;
    curdi_cu_result rc =
        driver->cuStreamCreate(&stream, CURDI_CU_STREAM_NON_BLOCKING);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuStreamCreate", NULL);
    *out = stream;
    return CURD_OK;
}

static void stream_destroy(const curdi_driver *driver, curdi_cu_stream stream)
{
    if (!curdi_driver_usable())
        return;
    curdi_cu_result rc = curdi_driver_note(driver->cuStreamDestroy(stream));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuStreamDestroy failed with %u", rc);
}

void curdi_stream_release(curd_device *device, curdi_cu_stream stream)
{
    if (stream == NULL)
        return;
    pthread_mutex_lock(&device->stream_lock);
    if (device->idle_stream_count == device->idle_stream_capacity) {
        size_t capacity = device->idle_stream_capacity == 0
                              ? 4
                              : device->idle_stream_capacity * 2;
        curdi_cu_stream *grown =
            capacity > SIZE_MAX / sizeof *grown
                ? NULL
                : realloc(device->idle_streams, capacity * sizeof *grown);
        if (grown == NULL) {
            /* No room to cache it: destroy it instead (the caller holds the
             * context, as for every stream call). */
            pthread_mutex_unlock(&device->stream_lock);
            stream_destroy(curdi_driver_get(), stream);
            return;
        }
        device->idle_streams = grown;
        device->idle_stream_capacity = capacity;
    }
    device->idle_streams[device->idle_stream_count++] = stream;
    pthread_mutex_unlock(&device->stream_lock);
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
        return curdi_fail_driver((int)rc, "cuDeviceGetCount", NULL);
    *count = found;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Properties
 * ---------------------------------------------------------------------- */
typedef struct attribute_read {
    curdi_cu_device_attribute attribute;
    const char *name;
    int *out;
} attribute_read;

static curd_status read_props(const curdi_driver *driver, curd_device *device)
{
    curd_device_props *props = &device->props;
    memset(props, 0, sizeof *props);
    props->struct_size = sizeof *props;
    props->ordinal = device->ordinal;
    props->driver_version = driver->driver_version;

    curdi_cu_result rc = driver->cuDeviceGetName(
        props->name, (int)sizeof props->name, device->cu_device);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuDeviceGetName", NULL);
    props->name[sizeof props->name - 1] = '\0';

    rc = driver->cuDeviceGetPCIBusId(props->pci_bus_id,
                                     (int)sizeof props->pci_bus_id,
                                     device->cu_device);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuDeviceGetPCIBusId", NULL);
    props->pci_bus_id[sizeof props->pci_bus_id - 1] = '\0';

    size_t total_bytes = 0;
    rc = driver->cuDeviceTotalMem(&total_bytes, device->cu_device);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuDeviceTotalMem", NULL);
    props->total_memory_bytes = total_bytes;

    int cooperative = 0, unified = 0, memory_pools = 0, host_register = 0;
#define CURDI_ATTR_(attr, field)                                              \
    { CURDI_CU_DEVICE_ATTRIBUTE_##attr, "CU_DEVICE_ATTRIBUTE_" #attr, field }
    const attribute_read reads[] = {
        CURDI_ATTR_(COMPUTE_CAPABILITY_MAJOR, &props->compute_capability_major),
        CURDI_ATTR_(COMPUTE_CAPABILITY_MINOR, &props->compute_capability_minor),
        CURDI_ATTR_(MULTIPROCESSOR_COUNT, &props->multiprocessor_count),
        CURDI_ATTR_(MAX_THREADS_PER_BLOCK, &props->max_threads_per_block),
        CURDI_ATTR_(MAX_BLOCK_DIM_X, &props->max_block_dim[0]),
        CURDI_ATTR_(MAX_BLOCK_DIM_Y, &props->max_block_dim[1]),
        CURDI_ATTR_(MAX_BLOCK_DIM_Z, &props->max_block_dim[2]),
        CURDI_ATTR_(MAX_GRID_DIM_X, &props->max_grid_dim[0]),
        CURDI_ATTR_(MAX_GRID_DIM_Y, &props->max_grid_dim[1]),
        CURDI_ATTR_(MAX_GRID_DIM_Z, &props->max_grid_dim[2]),
        CURDI_ATTR_(MAX_SHARED_MEMORY_PER_BLOCK,
                    &props->shared_memory_per_block_bytes),
        CURDI_ATTR_(ASYNC_ENGINE_COUNT, &props->async_engine_count),
        CURDI_ATTR_(COOPERATIVE_LAUNCH, &cooperative),
        CURDI_ATTR_(UNIFIED_ADDRESSING, &unified),
        CURDI_ATTR_(MEMORY_POOLS_SUPPORTED, &memory_pools),
        CURDI_ATTR_(HOST_REGISTER_SUPPORTED, &host_register),
    };
#undef CURDI_ATTR_
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        rc = driver->cuDeviceGetAttribute(reads[i].out, reads[i].attribute,
                                          device->cu_device);
        if (rc != CURDI_CUDA_SUCCESS) {
            char call[96];
            snprintf(call, sizeof call, "cuDeviceGetAttribute(%s)",
                     reads[i].name);
            return curdi_fail_driver((int)rc, call, NULL);
        }
    }

    uint32_t caps = 0;
    if (cooperative)
        caps |= CURD_CAP_COOPERATIVE_LAUNCH;
    if (unified)
        caps |= CURD_CAP_UNIFIED_ADDRESSING;
    /* Optional entries count only where the device can use them too. */
    if (memory_pools && driver->cuMemAllocAsync != NULL &&
        driver->cuMemFreeAsync != NULL)
        caps |= CURD_CAP_STREAM_ORDERED_ALLOC;
    if (host_register && driver->cuMemHostRegister != NULL &&
        driver->cuMemHostUnregister != NULL)
        caps |= CURD_CAP_HOST_REGISTER;
    props->capabilities = caps;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Open and close
 * ---------------------------------------------------------------------- */
static void free_host_state(curd_device *device)
{
    pthread_mutex_destroy(&device->stream_lock);
    free(device->idle_streams);
    free(device);
}

/* Destroys the pooled streams and the upload stream (context current). */
static void destroy_streams(const curdi_driver *driver, curd_device *device)
{
    for (size_t i = 0; i < device->idle_stream_count; i++)
        stream_destroy(driver, device->idle_streams[i]);
    device->idle_stream_count = 0;
    if (device->upload_stream != NULL)
        stream_destroy(driver, device->upload_stream);
    device->upload_stream = NULL;
}

static void pop_context(const curdi_driver *driver)
{
    if (!curdi_driver_usable())
        return;
    curdi_cu_context popped = NULL;
    curdi_cu_result rc = curdi_driver_note(driver->cuCtxPopCurrent(&popped));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuCtxPopCurrent failed with %u", rc);
}

static void release_context(const curdi_driver *driver, curd_device *device)
{
    if (!curdi_driver_usable())
        return;
    curdi_cu_result rc =
        curdi_driver_note(driver->cuDevicePrimaryCtxRelease(device->cu_device));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuDevicePrimaryCtxRelease(%d) failed with %u",
                    device->ordinal, rc);
}

/* Opens the rooms in order; on a failure closes those already open. */
static curd_status open_rooms(curd_device *device)
{
    curd_status status = curdi_memory_open(device);
    if (status != CURD_OK)
        return status;
    status = curdi_resident_open(device);
    if (status != CURD_OK) {
        curdi_memory_close(device);
        return status;
    }
    status = curdi_transfer_open(device);
    if (status != CURD_OK) {
        curdi_resident_close(device);
        curdi_memory_close(device);
        return status;
    }
    status = curdi_program_open(device);
    if (status != CURD_OK) {
        curdi_transfer_close(device);
        curdi_resident_close(device);
        curdi_memory_close(device);
        return status;
    }
    return CURD_OK;
}

static void close_rooms(curd_device *device)
{
    curdi_program_close(device);
    curdi_transfer_close(device);
    curdi_resident_close(device);
    curdi_memory_close(device);
}

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
            return curdi_fail_driver((int)rc, "cuDeviceGetCount", NULL);
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
        return curdi_fail_driver((int)rc, "cuDeviceGet", NULL);

    curd_device *device = calloc(1, sizeof *device);
    if (device == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: %zu bytes of host memory for the "
                          "device could not be allocated. Fix: free host "
                          "memory and try again.",
                          sizeof *device);
    if (pthread_mutex_init(&device->stream_lock, NULL) != 0) {
        free(device);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the stream lock could not be "
                          "created. Fix: free host resources and try again.");
    }
    device->ordinal = ordinal;
    device->cu_device = cu_device;
    device->options = effective;

    rc = driver->cuDevicePrimaryCtxRetain(&device->context, cu_device);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)rc, "cuDevicePrimaryCtxRetain", NULL);
        goto fail_free;
    }
    rc = driver->cuCtxPushCurrent(device->context);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)rc, "cuCtxPushCurrent", NULL);
        goto fail_release;
    }
    status = read_props(driver, device);
    if (status != CURD_OK)
        goto fail_pop;
    rc = driver->cuStreamCreate(&device->upload_stream,
                                CURDI_CU_STREAM_NON_BLOCKING);
    if (rc != CURDI_CUDA_SUCCESS) {
        device->upload_stream = NULL;
        status = curdi_fail_driver((int)rc, "cuStreamCreate", NULL);
        goto fail_pop;
    }
    status = open_rooms(device);
    if (status != CURD_OK)
        goto fail_streams;
    pop_context(driver);

    open_list_add(device);
    curdi_trace("opened device %d (%s, %s)", ordinal, device->props.name,
                device->props.pci_bus_id);
    *out_device = device;
    return CURD_OK;

fail_streams:
    destroy_streams(driver, device);
fail_pop:
    pop_context(driver);
fail_release:
    release_context(driver, device);
fail_free:
    free_host_state(device);
    return status;
}

CURD_API curd_status curd_device_close(curd_device *device)
{
    if (device == NULL)
        return CURD_OK;
    if (curdi_driver_forked())
        return curdi_fail(CURD_E_UNSUPPORTED, "%s.", curdi_fork_message);
    open_list_remove(device);

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
        if (rc == CURDI_CUDA_SUCCESS)
            pushed = true;
        else if (rc != CURDI_CUDA_ERROR_DEINITIALIZED)
            status = curdi_fail_driver((int)rc, "cuCtxPushCurrent", NULL);
    }
    if (pushed && curdi_driver_usable()) {
        curdi_cu_result rc = curdi_driver_note(driver->cuCtxSynchronize());
        if (rc != CURDI_CUDA_SUCCESS && rc != CURDI_CUDA_ERROR_DEINITIALIZED &&
            status == CURD_OK)
            status = curdi_fail_driver(
                (int)rc, "cuCtxSynchronize",
                "the device's outstanding work failed before close; the "
                "device was closed anyway");
    }
    if (status != CURD_OK) {
        /* The rooms may fail quietly in their own way; keep this sentence. */
        snprintf(first_error, sizeof first_error, "%s", curd_last_error());
        first_code = curd_last_driver_code();
    }

    close_rooms(device);
    if (driver != NULL) {
        destroy_streams(driver, device);
        if (pushed)
            pop_context(driver);
        release_context(driver, device);
    }
    curdi_trace("closed device %d", device->ordinal);
    free_host_state(device);

    if (status != CURD_OK) {
        curdi_status_note_driver_code(first_code);
        return curdi_fail(status, "%s", first_error);
    }
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Info
 * ---------------------------------------------------------------------- */
CURD_API curd_status curd_device_info(curd_device *device,
                                      curd_device_props *props)
{
    if (device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_info: device is NULL. Fix: pass the "
                          "device that curd_device_open() returned.");
    curd_status status =
        curdi_result_struct_check(props, sizeof(curd_device_props),
                                  "curd_device_info", "props",
                                  "curd_device_props");
    if (status != CURD_OK)
        return status;

    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    size_t free_bytes = 0, total_bytes = 0;
    curdi_cu_result rc = driver->cuMemGetInfo(&free_bytes, &total_bytes);
    if (rc != CURDI_CUDA_SUCCESS) {
        status = curdi_fail_driver((int)rc, "cuMemGetInfo", NULL);
        curdi_device_leave(device);
        return status;
    }
    uint64_t resident_bytes = curdi_resident_bytes(device);
    curdi_device_leave(device);

    curd_device_props result = device->props;
    result.struct_size = props->struct_size;
    result.free_memory_bytes = free_bytes;
    result.resident_budget_bytes = curdi_resident_budget(
        result.total_memory_bytes, free_bytes, resident_bytes,
        device->options.resident_limit_bytes);
    /* A newer caller's extra fields are left as they were. */
    memcpy(props, &result, sizeof result);
    return CURD_OK;
}
