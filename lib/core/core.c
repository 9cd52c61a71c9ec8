/* core.c - the device core (see core.h): the registry of open devices,
 * entering a device, the properties read at open, and the core's part of
 * opening and closing a device. Its pooled streams and events are in
 * streams.c, the waits for others' work in waits.c, the options checks
 * in options.c.
 *
 * Read top to bottom: the registry, entering, a growable array,
 * properties, then opening and closing the core. */
#include "core/core.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * The registry of open devices
 * ---------------------------------------------------------------------- */
/* A fixed array of slots, so an entry point can ask "is this pointer an
 * open device?" with atomic loads and no lock, before it reads the device
 * at all. registry_end is one past the highest slot ever used, so a
 * process with one open device checks one slot. Registering and
 * unregistering take registry_lock, which also keeps every registered
 * device open while curdi_core_devices_for_ordinal runs its callback.
 *
 * The check cannot make a concurrent close safe: a thread that closes a
 * device while another uses it has a race of its own (curd.h says so).
 * It makes a sequential use after close, and a second close, a typed
 * error instead of a read of freed memory. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(curd_device *) registry[CURDI_OPEN_DEVICES_MAX];
static atomic_uint registry_end;

/* What lets curdi_core_device_check skip the registry (core.h): every
 * thread's last device that passed the whole check, and the count of
 * closes then. A close (and a fork, whose child may not use a device)
 * moves the count on, so no device is taken on trust after it. */
atomic_uint curdi_device_closes;
_Thread_local curdi_checked_device curdi_device_checked
    __attribute__((tls_model("initial-exec")));
static pthread_once_t fork_watch_once = PTHREAD_ONCE_INIT;
/* Without the fork handler a fork child could trust its parent's device,
 * so then no thread remembers one and every check walks the registry. */
static atomic_bool forks_watched;

static void forget_checked_in_child(void)
{
    atomic_fetch_add(&curdi_device_closes, 1u);
}

static void watch_forks(void)
{
    if (pthread_atfork(NULL, NULL, forget_checked_in_child) == 0)
        atomic_store(&forks_watched, true);
}

static bool registered(const curd_device *device)
{
    unsigned end = atomic_load_explicit(&registry_end, memory_order_acquire);
    for (unsigned slot = 0; slot < end; slot++)
        if (atomic_load_explicit(&registry[slot], memory_order_acquire)
            == device)
            return true;
    return false;
}

curd_status curdi_core_register(curd_device *device)
{
    pthread_once(&fork_watch_once, watch_forks);
    pthread_mutex_lock(&registry_lock);
    unsigned end = atomic_load_explicit(&registry_end, memory_order_relaxed);
    unsigned slot = 0;
    while (slot < end
           && atomic_load_explicit(&registry[slot], memory_order_relaxed)
                  != NULL)
        slot++;
    if (slot == CURDI_OPEN_DEVICES_MAX) {
        pthread_mutex_unlock(&registry_lock);
        return curdi_fail(CURD_E_BUDGET,
                          "curd_device_open: %u devices are open already,"
                          " the most one process may have open at once."
                          " Fix: close devices you no longer use (one"
                          " curd_device per GPU is enough for every"
                          " thread).",
                          CURDI_OPEN_DEVICES_MAX);
    }
    atomic_store_explicit(&registry[slot], device, memory_order_release);
    if (slot == end)
        atomic_store_explicit(&registry_end, end + 1u, memory_order_release);
    pthread_mutex_unlock(&registry_lock);
    return CURD_OK;
}

bool curdi_core_unregister(const curd_device *device)
{
    bool found = false;
    pthread_mutex_lock(&registry_lock);
    unsigned end = atomic_load_explicit(&registry_end, memory_order_relaxed);
    for (unsigned slot = 0; slot < end && !found; slot++) {
        if (atomic_load_explicit(&registry[slot], memory_order_relaxed)
            == device) {
            atomic_store_explicit(&registry[slot], NULL,
                                  memory_order_release);
            atomic_fetch_add_explicit(&curdi_device_closes, 1u,
                                      memory_order_release);
            found = true;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

curd_status curdi_core_device_check_fully(const curd_device *device,
                                          const char *what)
{
    /* Read before the registry: a close after it moves the count past
     * what the thread remembers. */
    unsigned closes =
        atomic_load_explicit(&curdi_device_closes, memory_order_acquire);
    if (device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device is NULL. Fix: pass a device from"
                          " curd_device_open().",
                          what);
    if (!registered(device))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device %p is not open (closed already, or"
                          " never returned by curd_device_open); nothing was"
                          " read from it. Fix: pass a device between its"
                          " curd_device_open() and curd_device_close().",
                          what, (const void *)device);
    if (curdi_driver_forked())
        return curdi_fail(CURD_E_UNSUPPORTED, "%s: %s.", what,
                          curdi_fork_message);
    if (atomic_load_explicit(&device->lost, memory_order_relaxed))
        return curdi_fail(CURD_E_DEVICE_LOST,
                          "%s: device %d's context was lost to an earlier"
                          " fault (a kernel's illegal address or trap, or a"
                          " context that could not be made current), and"
                          " nothing can run on it any more. Fix: close the"
                          " device and open it again.",
                          what, device->ordinal);
    if (atomic_load_explicit(&forks_watched, memory_order_relaxed))
        curdi_device_checked = (curdi_checked_device){device, closes};
    return CURD_OK;
}

static void mark_lost(curd_device *device, void *context)
{
    (void)context;
    atomic_store(&device->lost, true);
}

void curdi_core_device_mark_lost(curd_device *device)
{
    /* The devices of one ordinal share the primary context: all of them
     * lost it. */
    curdi_core_devices_for_ordinal(device->ordinal, mark_lost, NULL);
    mark_lost(device, NULL);
}

void curdi_core_devices_for_ordinal(int ordinal,
                                    void (*fn)(curd_device *, void *),
                                    void *context)
{
    if (fn == NULL)
        return;
    pthread_mutex_lock(&registry_lock);
    unsigned end = atomic_load_explicit(&registry_end, memory_order_relaxed);
    for (unsigned slot = 0; slot < end; slot++) {
        curd_device *device =
            atomic_load_explicit(&registry[slot], memory_order_relaxed);
        if (device != NULL && device->ordinal == ordinal)
            fn(device, context);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ------------------------------------------------------------------------
 * Entering a device
 * ---------------------------------------------------------------------- */
curd_status curdi_core_device_enter(curd_device *device)
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
        return curdi_driver_fail((int)rc, "cuCtxPushCurrent", NULL);
    return CURD_OK;
}

void curdi_core_device_leave(curd_device *device)
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
 * A growable array, for the modules' small lists
 * ---------------------------------------------------------------------- */
bool curdi_core_array_reserve(void **array, size_t *capacity, size_t needed,
                              size_t element_bytes)
{
    size_t new_capacity;
    size_t bytes;
    void *grown;
    if (needed <= *capacity)
        return true;
    new_capacity = *capacity < 8u ? 8u : *capacity;
    while (new_capacity < needed) {
        if (!curdi_size_mul(new_capacity, 2u, &new_capacity))
            return false;
    }
    if (!curdi_size_mul(new_capacity, element_bytes, &bytes))
        return false;
    grown = realloc(*array, bytes);
    if (grown == NULL)
        return false;
    *array = grown;
    *capacity = new_capacity;
    return true;
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
        return curdi_driver_fail((int)rc, "cuDeviceGetName", NULL);
    props->name[sizeof props->name - 1] = '\0';

    rc = driver->cuDeviceGetPCIBusId(props->pci_bus_id,
                                     (int)sizeof props->pci_bus_id,
                                     device->cu_device);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuDeviceGetPCIBusId", NULL);
    props->pci_bus_id[sizeof props->pci_bus_id - 1] = '\0';

    size_t total_bytes = 0;
    rc = driver->cuDeviceTotalMem(&total_bytes, device->cu_device);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuDeviceTotalMem", NULL);
    props->total_memory_bytes = total_bytes;

    int cooperative = 0, unified = 0, memory_pools = 0, host_register = 0;
    int vmm = 0, fd_handles = 0;
    int max_pitch = 0;
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
        CURDI_ATTR_(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &vmm),
        CURDI_ATTR_(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, &fd_handles),
        CURDI_ATTR_(MAX_PITCH, &max_pitch),
    };
#undef CURDI_ATTR_
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        rc = driver->cuDeviceGetAttribute(reads[i].out, reads[i].attribute,
                                          device->cu_device);
        if (rc != CURDI_CUDA_SUCCESS) {
            char call[96];
            snprintf(call, sizeof call, "cuDeviceGetAttribute(%s)",
                     reads[i].name);
            return curdi_driver_fail((int)rc, call, NULL);
        }
    }

    device->max_copy_pitch = max_pitch > 0 ? (uint64_t)max_pitch : 0u;
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
    if (vmm && fd_handles && curdi_driver_has_vmm())
        caps |= CURD_CAP_SHAREABLE;
    props->capabilities = caps;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Opening and closing the core
 * ---------------------------------------------------------------------- */
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

/* Destroys the pooled streams and events and the upload stream (context
 * current). */
static void destroy_streams_and_events(const curdi_driver *driver,
                                       curd_device *device)
{
    for (size_t i = 0; i < device->idle_stream_count; i++)
        curdi_streams_destroy(driver, device->idle_streams[i]);
    device->idle_stream_count = 0;
    for (size_t i = 0; i < device->idle_event_count; i++)
        curdi_streams_event_destroy(driver, device->idle_events[i]);
    device->idle_event_count = 0;
    for (size_t i = 0; i < device->idle_timed_event_count; i++)
        curdi_streams_event_destroy(driver, device->idle_timed_events[i]);
    device->idle_timed_event_count = 0;
    if (device->upload_stream != NULL)
        curdi_streams_destroy(driver, device->upload_stream);
    device->upload_stream = NULL;
    curdi_waits_destroy(driver, device);
}

static void free_host_state(curd_device *device)
{
    pthread_mutex_destroy(&device->waits_lock);
    free(device->waits);
    pthread_mutex_destroy(&device->pool_lock);
    free(device->idle_streams);
    free(device->idle_events);
    free(device->idle_timed_events);
    free(device);
}

/* Retains the primary context and makes it current; on a failure
 * neither is left. */
static curd_status retain_and_enter(const curdi_driver *driver,
                                    curd_device *device)
{
    curdi_cu_result rc =
        driver->cuDevicePrimaryCtxRetain(&device->context, device->cu_device);
    /* A retain that answers a fault: the NVIDIA driver (580) keeps a GPU
     * whose context took a sticky error unusable for the rest of the
     * process, even after the reset the last close made (CUDA's own rule
     * for sticky errors); only a new process mends it. */
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail(
            (int)rc, "cuDevicePrimaryCtxRetain",
            curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST
                ? "this GPU took a kernel fault earlier in this process, and"
                  " the driver keeps it unusable here even after curd reset"
                  " its primary context: restart the process, and run the"
                  " faulting kernel under compute-sanitizer to find the fault"
                : NULL);
    rc = driver->cuCtxPushCurrent(device->context);
    if (rc != CURDI_CUDA_SUCCESS) {
        curd_status status =
            curdi_driver_fail((int)rc, "cuCtxPushCurrent", NULL);
        release_context(driver, device);
        return status;
    }
    return CURD_OK;
}

/* The device's upload stream; NULL after a failure. */
static curdi_cu_result create_upload_stream(const curdi_driver *driver,
                                            curd_device *device)
{
    curdi_cu_result rc = curdi_driver_note(driver->cuStreamCreate(
        &device->upload_stream, CURDI_CU_STREAM_NON_BLOCKING));
    if (rc != CURDI_CUDA_SUCCESS)
        device->upload_stream = NULL;
    return rc;
}

static void count_device(curd_device *device, void *context);

/* Resets a broken primary context that no curd device of the ordinal
 * has open, and retains and enters it afresh. The context is unusable
 * for every user in the process already; the reset, the only thing that
 * mends it, frees what they held in it (curd.h says so). Entered on
 * entry; on CURD_OK entered again, else neither retained nor entered. */
static curd_status mend_broken_context(const curdi_driver *driver,
                                       curd_device *device)
{
    unsigned open_on_ordinal = 0;
    curdi_core_devices_for_ordinal(device->ordinal, count_device,
                                   &open_on_ordinal);
    pop_context(driver);
    release_context(driver, device);
    if (open_on_ordinal != 0)
        /* They share the broken context: their next call says so, and
         * the last of them to close resets it. */
        curdi_core_devices_for_ordinal(device->ordinal, mark_lost, NULL);
    if (open_on_ordinal != 0 || driver->cuDevicePrimaryCtxReset == NULL)
        return curdi_fail(
            CURD_E_DEVICE_LOST,
            "curd_device_open: device %d's primary context holds a fault"
            " (a kernel's illegal address or trap, curd's or another"
            " library's), and %s. Fix: %s.",
            device->ordinal,
            open_on_ordinal != 0
                ? "curd devices still open on it keep it from being reset"
                : "this driver cannot reset it (no cuDevicePrimaryCtxReset)",
            open_on_ordinal != 0
                ? "close every curd device of this GPU; the last close"
                  " resets the context (where the driver still refuses it"
                  " afterwards, restart the process)"
                : "restart the process");
    curdi_cu_result rc =
        curdi_driver_note(driver->cuDevicePrimaryCtxReset(device->cu_device));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc, "cuDevicePrimaryCtxReset",
                                 "the device's primary context holds a fault"
                                 " and could not be reset; restart the"
                                 " process");
    curdi_trace("device %d: reset a primary context a fault had broken",
                device->ordinal);
    return retain_and_enter(driver, device);
}

curd_status curdi_core_open(int ordinal, curdi_cu_device cu_device,
                            const curd_device_options *options,
                            curd_device **out_device)
{
    const curdi_driver *driver = curdi_driver_get();
    curd_status status;
    curd_device *device = calloc(1, sizeof *device);
    if (device == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: %zu bytes of host memory for the "
                          "device could not be allocated. Fix: free host "
                          "memory and try again.",
                          sizeof *device);
    bool pool_lock_made = pthread_mutex_init(&device->pool_lock, NULL) == 0;
    if (!pool_lock_made
        || pthread_mutex_init(&device->waits_lock, NULL) != 0) {
        if (pool_lock_made)
            pthread_mutex_destroy(&device->pool_lock);
        free(device);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the stream locks could not be "
                          "created. Fix: free host resources and try again.");
    }
    device->ordinal = ordinal;
    device->cu_device = cu_device;
    device->options = *options;

    status = retain_and_enter(driver, device);
    if (status != CURD_OK) {
        free_host_state(device);
        return status;
    }
    status = read_props(driver, device);
    if (status == CURD_OK) {
        curdi_cu_result rc = create_upload_stream(driver, device);
        /* The first call of open that needs the context: one a fault
         * broke while no curd device of the GPU had it open (another
         * library's kernel) answers it with the fault. A wait would have
         * told too, but would also wait for the other users' work. */
        if (curdi_driver_status_of(rc) == CURD_E_DEVICE_LOST) {
            status = mend_broken_context(driver, device);
            if (status != CURD_OK) {
                /* Neither retained nor entered any more. */
                free_host_state(device);
                return status;
            }
            rc = create_upload_stream(driver, device);
        }
        if (rc != CURDI_CUDA_SUCCESS)
            status = curdi_driver_fail((int)rc, "cuStreamCreate", NULL);
    }
    if (status != CURD_OK) {
        curdi_core_close(device, true);
        return status;
    }
    *out_device = device;
    return CURD_OK;
}

void curdi_core_open_done(curd_device *device)
{
    (void)device;
    pop_context(curdi_driver_get());
}

static void count_device(curd_device *device, void *context)
{
    (void)device;
    (*(unsigned *)context)++;
}

/* A context a fault broke stays broken when its last retain is released:
 * the driver mends it only through cuDevicePrimaryCtxReset. The last
 * closing device of a lost ordinal resets it, so that the next open works
 * (every allocation in it is gone with the fault anyway). */
static void reset_if_lost(const curdi_driver *driver, curd_device *device)
{
    unsigned still_open = 0;
    if (!atomic_load(&device->lost) || driver->cuDevicePrimaryCtxReset == NULL
        || !curdi_driver_usable())
        return;
    curdi_core_devices_for_ordinal(device->ordinal, count_device, &still_open);
    if (still_open != 0)
        return;
    curdi_cu_result rc =
        curdi_driver_note(driver->cuDevicePrimaryCtxReset(device->cu_device));
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("cuDevicePrimaryCtxReset(%d) failed with %u",
                    device->ordinal, rc);
}

void curdi_core_close(curd_device *device, bool pushed)
{
    const curdi_driver *driver = curdi_driver_get();
    if (driver != NULL) {
        destroy_streams_and_events(driver, device);
        if (pushed)
            pop_context(driver);
        reset_if_lost(driver, device);
        release_context(driver, device);
    }
    free_host_state(device);
}
