/* host_register.c - host registrations (see host_register.h).
 *
 * Read top to bottom: the registry and its lock, the registered ranges
 * and their use by transfers and fences, opening and closing, then the
 * public curd_host_register and curd_host_unregister. */
#include "transfer/host_register.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * The state and the registered ranges
 * ---------------------------------------------------------------------- */

/* A host range page-locked with curd_host_register. */
typedef struct curdi_host_range {
    uintptr_t start;
    size_t byte_len;
    /* Transfers using it now plus asynchronous uploads from it pending:
     * it cannot be unregistered while any are. */
    uint32_t use_count;
    bool ready; /* false while being registered or unregistered */
} curdi_host_range;

/* The registry, behind curd_device.host_registry. One lock guards it; it
 * is never held across a driver call. */
struct curdi_host_registry {
    pthread_mutex_t lock;
    curdi_host_range *ranges; /* sorted by start, never overlapping */
    size_t range_count;
    size_t range_capacity;
};

/* Index of the last range starting at or before address; range_count when
 * none does. Lock held. */
static size_t range_before(const struct curdi_host_registry *registry,
                                 uintptr_t address)
{
    size_t low = 0;
    size_t high = registry->range_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (registry->ranges[middle].start <= address)
            low = middle + 1;
        else
            high = middle;
    }
    return low == 0 ? registry->range_count : low - 1;
}

/* The range that holds all of [host, host + byte_len), or NULL. The
 * caller tries `hint` first (the range of the batch's previous item, as a
 * rule the same one), then searches. Lock held. */
static curdi_host_range *range_holding(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    uintptr_t start, size_t byte_len)
{
    curdi_host_range *range = hint;
    if (range == NULL || start < range->start) {
        size_t index = range_before(registry, start);
        if (index == registry->range_count)
            return NULL;
        range = &registry->ranges[index];
    }
    /* start >= range->start; the subtraction cannot wrap. */
    if (start - range->start > range->byte_len
        || byte_len > range->byte_len - (start - range->start)) {
        if (range == hint)
            return range_holding(registry, NULL, start, byte_len);
        return NULL;
    }
    return range;
}

/* Marks the registered range that holds [host, host + byte_len) as used
 * and returns it (its start is the item's registered_key), or NULL when
 * that memory is not (wholly) registered. Lock held. */
static curdi_host_range *registry_use_range(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    const void *host, size_t byte_len)
{
    curdi_host_range *range;
    if (byte_len == 0 || registry->range_count == 0)
        return NULL;
    range = range_holding(registry, hint, (uintptr_t)host, byte_len);
    if (range == NULL || !range->ready || range->use_count == UINT32_MAX)
        return NULL;
    range->use_count++;
    return range;
}

uintptr_t curdi_host_register_use(curd_device *device, const void *host,
                            size_t byte_len)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_host_range *range;
    uintptr_t key;
    /* The key is read under the lock: once it is dropped, another
     * thread's registration may move the ranges array. */
    pthread_mutex_lock(&registry->lock);
    range = registry_use_range(registry, NULL, host, byte_len);
    key = range != NULL ? range->start : 0;
    pthread_mutex_unlock(&registry->lock);
    return key;
}

/* Undoes a use of the range starting at key (0: none), trying `hint`
 * first; returns the range. Lock held. */
static curdi_host_range *registry_unuse_range(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    uintptr_t key)
{
    curdi_host_range *range = hint;
    if (key == 0)
        return hint;
    if (range == NULL || range->start != key) {
        size_t index = range_before(registry, key);
        if (index == registry->range_count
            || registry->ranges[index].start != key)
            return hint;
        range = &registry->ranges[index];
    }
    if (range->use_count > 0)
        range->use_count--;
    return range;
}

void curdi_host_register_unuse(curd_device *device, uintptr_t key)
{
    struct curdi_host_registry *registry = device->host_registry;
    if (key == 0)
        return;
    pthread_mutex_lock(&registry->lock);
    (void)registry_unuse_range(registry, NULL, key);
    pthread_mutex_unlock(&registry->lock);
}

void curdi_host_register_unuse_items(curd_device *device,
                               const curdi_transfer_item *items, size_t count)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_host_range *hint = NULL;
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < count; index++) {
        uintptr_t key = items[index].registered_key;
        if (key == 0)
            continue;
        /* Most often the range of the item before. */
        if (hint != NULL && hint->start == key) {
            if (hint->use_count > 0)
                hint->use_count--;
            continue;
        }
        hint = registry_unuse_range(registry, hint, key);
    }
    pthread_mutex_unlock(&registry->lock);
}

void curdi_host_register_use_items(curd_device *device, curdi_transfer_item *items,
                             size_t count)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_host_range *hint = NULL;
    /* The ranges array does not move while the lock is held, so a range
     * found for one item is a valid hint for the next. */
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < count; index++) {
        curdi_transfer_item *item = &items[index];
        uintptr_t start = (uintptr_t)item->host;
        curdi_host_range *range;
        /* Most often inside the range of the item before (the checks of
         * range_holding and registry_use_range, inline). */
        if (hint != NULL && item->byte_len != 0 && start >= hint->start
            && start - hint->start <= hint->byte_len
            && item->byte_len <= hint->byte_len - (start - hint->start)
            && hint->use_count != UINT32_MAX) {
            hint->use_count++;
            item->registered_key = hint->start;
            continue;
        }
        range = registry_use_range(registry, hint, item->host,
                                         (size_t)item->byte_len);
        item->registered_key = range != NULL ? range->start : 0;
        if (range != NULL)
            hint = range;
    }
    pthread_mutex_unlock(&registry->lock);
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

curd_status curdi_host_register_open(curd_device *device)
{
    struct curdi_host_registry *registry = calloc(1, sizeof *registry);
    if (registry == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's host registry."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&registry->lock, NULL) != 0) {
        free(registry);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the host registry's lock."
                          " Fix: free system resources.");
    }
    device->host_registry = registry;
    return CURD_OK;
}

void curdi_host_register_close(curd_device *device)
{
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    if (device == NULL || device->host_registry == NULL)
        return;
    registry = device->host_registry;
    driver = curdi_driver_get();
    if (driver != NULL && curdi_driver_usable()) {
        /* Errors have nowhere to go at close. */
        for (size_t index = 0; index < registry->range_count; index++)
            if (registry->ranges[index].ready && curdi_driver_usable())
                (void)curdi_driver_note(driver->cuMemHostUnregister(
                    (void *)registry->ranges[index].start));
    }
    free(registry->ranges);
    pthread_mutex_destroy(&registry->lock);
    free(registry);
    device->host_registry = NULL;
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_host_register(curd_device *device, void *ptr,
                                        size_t byte_len)
{
    const char *what = "curd_host_register";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    uintptr_t start = (uintptr_t)ptr;
    uintptr_t end;
    size_t index;
    curdi_cu_result cu_result;
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL || byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s. Fix: pass the start and length of host"
                          " memory you own.",
                          what, ptr == NULL ? "ptr is NULL" : "byte_len is 0");
    status = curdi_checked_host_range(ptr, byte_len, what, "ptr");
    if (status != CURD_OK)
        return status;
    end = start + byte_len; /* checked not to wrap just above */
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    if (driver->cuMemHostRegister == NULL || driver->cuMemHostUnregister == NULL) {
        curdi_core_device_leave(device);
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: this driver has no cuMemHostRegister. Fix:"
                          " copy through curd's staging (plain"
                          " transfers), or update the NVIDIA driver.",
                          what);
    }
    registry = device->host_registry;

    /* Claim the range first (not ready), so a concurrent registration of
     * overlapping memory fails here rather than in the driver. */
    pthread_mutex_lock(&registry->lock);
    index = range_before(registry, end - 1u);
    if (index != registry->range_count) {
        const curdi_host_range *range = &registry->ranges[index];
        /* range->start < end; it overlaps unless it ends before start. */
        if (range->start + range->byte_len > start) {
            pthread_mutex_unlock(&registry->lock);
            curdi_core_device_leave(device);
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: [%p, +%zu) overlaps [%p, +%zu), which is"
                              " registered already. Fix: register each"
                              " range once, or unregister the old one"
                              " first.",
                              what, ptr, byte_len, (void *)range->start,
                              range->byte_len);
        }
    }
    if (!curdi_core_array_reserve(
            (void **)&registry->ranges, &registry->range_capacity,
            registry->range_count + 1u, sizeof *registry->ranges)) {
        pthread_mutex_unlock(&registry->lock);
        curdi_core_device_leave(device);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not grow the registry. Fix: free host"
                          " memory.",
                          what);
    }
    index = index == registry->range_count ? 0 : index + 1u;
    memmove(&registry->ranges[index + 1u], &registry->ranges[index],
            (registry->range_count - index) * sizeof *registry->ranges);
    registry->ranges[index] = (curdi_host_range){start, byte_len, 0, false};
    registry->range_count++;
    pthread_mutex_unlock(&registry->lock);

    /* Mapped: the transfer kernels reach it across the bus
     * (lib/transfer/gather.h). */
    cu_result = curdi_driver_note(driver->cuMemHostRegister(
        ptr, byte_len,
        CURDI_CU_MEMHOSTREGISTER_PORTABLE | CURDI_CU_MEMHOSTREGISTER_DEVICEMAP));

    pthread_mutex_lock(&registry->lock);
    index = range_before(registry, start);
    /* The claim is still there: only this call removes or readies it. */
    if (cu_result == CURDI_CUDA_SUCCESS) {
        registry->ranges[index].ready = true;
    } else {
        memmove(&registry->ranges[index], &registry->ranges[index + 1u],
                (registry->range_count - index - 1u)
                    * sizeof *registry->ranges);
        registry->range_count--;
    }
    pthread_mutex_unlock(&registry->lock);
    if (cu_result != CURDI_CUDA_SUCCESS)
        status = curdi_driver_fail(
            (int)cu_result, "cuMemHostRegister",
            cu_result == CURDI_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                ? "register a range once per process (another device or"
                  " library may have registered it)"
                : "register memory you own that is mapped read-write, or"
                  " lower the locked-memory use (ulimit -l)");
    curdi_core_device_leave(device);
    return status;
}

CURD_API curd_status curd_host_unregister(curd_device *device, void *ptr)
{
    const char *what = "curd_host_unregister";
    struct curdi_host_registry *registry;
    const curdi_driver *driver;
    uintptr_t start = (uintptr_t)ptr;
    size_t index;
    curdi_cu_result cu_result;
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: ptr is NULL. Fix: pass the pointer given to"
                          " curd_host_register().",
                          what);
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    index = range_before(registry, start);
    if (index == registry->range_count || registry->ranges[index].start != start
        || !registry->ranges[index].ready) {
        pthread_mutex_unlock(&registry->lock);
        curdi_core_device_leave(device);
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %p is not the start of a range registered"
                          " with this device. Fix: pass the exact pointer"
                          " given to curd_host_register(), once.",
                          what, ptr);
    }
    if (registry->ranges[index].use_count != 0) {
        uint32_t uses = registry->ranges[index].use_count;
        pthread_mutex_unlock(&registry->lock);
        curdi_core_device_leave(device);
        return curdi_fail(CURD_E_BUSY,
                          "%s: %p is in use by %" PRIu32 " transfer(s) or"
                          " asynchronous upload(s); nothing was"
                          " unregistered. Fix: call"
                          " curd_device_sync_uploads() or wait for the"
                          " transfers, then unregister.",
                          what, ptr, uses);
    }
    registry->ranges[index].ready = false;
    pthread_mutex_unlock(&registry->lock);

    cu_result = curdi_driver_note(driver->cuMemHostUnregister(ptr));

    pthread_mutex_lock(&registry->lock);
    index = range_before(registry, start);
    if (cu_result == CURDI_CUDA_SUCCESS) {
        memmove(&registry->ranges[index], &registry->ranges[index + 1u],
                (registry->range_count - index - 1u)
                    * sizeof *registry->ranges);
        registry->range_count--;
    } else {
        /* Still registered as far as anyone can tell: keep it usable. */
        registry->ranges[index].ready = true;
    }
    pthread_mutex_unlock(&registry->lock);
    if (cu_result != CURDI_CUDA_SUCCESS)
        status = curdi_driver_fail((int)cu_result, "cuMemHostUnregister",
                                   CURDI_DRIVER_FIX);
    curdi_core_device_leave(device);
    return status;
}
