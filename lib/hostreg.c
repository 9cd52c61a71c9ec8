/* hostreg.c - the transfer room's shared host-side state (see hostreg.h).
 *
 * Read top to bottom: the state and its lock, the registered ranges and
 * their use by transfers, the copy team and idle events that transfers
 * reuse, opening and closing, the pending asynchronous uploads, then the
 * public curd_host_register and curd_host_unregister. */
#include "hostreg.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "device.h"
#include "driver.h"
#include "resident.h"
#include "status.h"
#include "transfer.h"

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

/* An asynchronous upload not yet completed by curd_device_sync_uploads. */
typedef struct curdi_async_entry {
    uint64_t buffer_id;
    uintptr_t range_key; /* its source's registered range, or 0 */
    uint64_t serial;     /* enqueue order */
} curdi_async_entry;

/* The transfer room's state, behind curd_device.host_registry. One lock
 * guards it; it is never held across a driver call. */
struct curdi_host_registry {
    pthread_mutex_t lock;
    curdi_host_range *ranges; /* sorted by start, never overlapping */
    size_t range_count;
    size_t range_capacity;
    curdi_async_entry *pending; /* in enqueue order */
    size_t pending_count;
    size_t pending_capacity;
    /* Entries promised to uploads between reserve and commit or cancel:
     * the room each reserve made stays theirs. */
    size_t pending_reserved;
    uint64_t next_serial;
    curdi_cu_event *idle_events;
    size_t idle_event_count;
    size_t idle_event_capacity;
    curdi_copy_team *team; /* created on the first staged transfer */
    bool team_tried;
};

/* Grows *array to hold at least `needed` elements; false when it cannot
 * (the array is unchanged then). */
static bool curdi_grow(void **array, size_t *capacity, size_t needed,
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

/* Index of the last range starting at or before address; range_count when
 * none does. Lock held. */
static size_t curdi_range_before(const struct curdi_host_registry *registry,
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
static curdi_host_range *curdi_range_holding(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    uintptr_t start, size_t byte_len)
{
    curdi_host_range *range = hint;
    if (range == NULL || start < range->start) {
        size_t index = curdi_range_before(registry, start);
        if (index == registry->range_count)
            return NULL;
        range = &registry->ranges[index];
    }
    /* start >= range->start; the subtraction cannot wrap. */
    if (start - range->start > range->byte_len
        || byte_len > range->byte_len - (start - range->start)) {
        if (range == hint)
            return curdi_range_holding(registry, NULL, start, byte_len);
        return NULL;
    }
    return range;
}

/* Marks the registered range that holds [host, host + byte_len) as used
 * and returns it (its start is the item's registered_key), or NULL when
 * that memory is not (wholly) registered. Lock held. */
static curdi_host_range *curdi_registry_use_range(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    const void *host, size_t byte_len)
{
    curdi_host_range *range;
    if (byte_len == 0 || registry->range_count == 0)
        return NULL;
    range = curdi_range_holding(registry, hint, (uintptr_t)host, byte_len);
    if (range == NULL || !range->ready || range->use_count == UINT32_MAX)
        return NULL;
    range->use_count++;
    return range;
}

/* curdi_registry_use_range for one range: its start, or 0. Lock held. */
static uintptr_t curdi_registry_use(struct curdi_host_registry *registry,
                                    const void *host, size_t byte_len)
{
    curdi_host_range *range =
        curdi_registry_use_range(registry, NULL, host, byte_len);
    return range != NULL ? range->start : 0;
}

/* Undoes a use of the range starting at key (0: none), trying `hint`
 * first; returns the range. Lock held. */
static curdi_host_range *curdi_registry_unuse_range(
    struct curdi_host_registry *registry, curdi_host_range *hint,
    uintptr_t key)
{
    curdi_host_range *range = hint;
    if (key == 0)
        return hint;
    if (range == NULL || range->start != key) {
        size_t index = curdi_range_before(registry, key);
        if (index == registry->range_count
            || registry->ranges[index].start != key)
            return hint;
        range = &registry->ranges[index];
    }
    if (range->use_count > 0)
        range->use_count--;
    return range;
}

/* Undoes curdi_registry_use. Lock held. */
static void curdi_registry_unuse(struct curdi_host_registry *registry,
                                 uintptr_t key)
{
    (void)curdi_registry_unuse_range(registry, NULL, key);
}

void curdi_hostreg_unuse_items(curd_device *device,
                               const curdi_xfer_item *items, size_t count)
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
        hint = curdi_registry_unuse_range(registry, hint, key);
    }
    pthread_mutex_unlock(&registry->lock);
}

void curdi_hostreg_use_items(curd_device *device, curdi_xfer_item *items,
                             size_t count)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_host_range *hint = NULL;
    /* The ranges array does not move while the lock is held, so a range
     * found for one item is a valid hint for the next. */
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < count; index++) {
        curdi_xfer_item *item = &items[index];
        uintptr_t start = (uintptr_t)item->host;
        curdi_host_range *range;
        /* Most often inside the range of the item before (the checks of
         * curdi_range_holding and curdi_registry_use_range, inline). */
        if (hint != NULL && item->byte_len != 0 && start >= hint->start
            && start - hint->start <= hint->byte_len
            && item->byte_len <= hint->byte_len - (start - hint->start)
            && hint->use_count != UINT32_MAX) {
            hint->use_count++;
            item->registered_key = hint->start;
            continue;
        }
        range = curdi_registry_use_range(registry, hint, item->host,
                                         (size_t)item->byte_len);
        item->registered_key = range != NULL ? range->start : 0;
        if (range != NULL)
            hint = range;
    }
    pthread_mutex_unlock(&registry->lock);
}

/* ------------------------------------------------------------------------
 * Reused between transfers: the copy team and idle events
 * ---------------------------------------------------------------------- */

curdi_copy_team *curdi_hostreg_team(curd_device *device)
{
    struct curdi_host_registry *registry = device->host_registry;
    curdi_copy_team *team;
    pthread_mutex_lock(&registry->lock);
    if (!registry->team_tried) {
        registry->team_tried = true;
        if (curdi_copy_team_create(0, &registry->team) != CURD_OK)
            registry->team = NULL;
    }
    team = registry->team;
    pthread_mutex_unlock(&registry->lock);
    return team;
}

curd_status curdi_hostreg_events_acquire(curd_device *device,
                                         curdi_cu_event *events,
                                         unsigned count)
{
    struct curdi_host_registry *registry = device->host_registry;
    const curdi_driver *driver = curdi_driver_get();
    unsigned taken = 0;
    pthread_mutex_lock(&registry->lock);
    while (taken < count && registry->idle_event_count > 0)
        events[taken++] = registry->idle_events[--registry->idle_event_count];
    pthread_mutex_unlock(&registry->lock);
    for (; taken < count; taken++) {
        curdi_cu_result cu_result = curdi_driver_note(
            driver->cuEventCreate(&events[taken],
                                  CURDI_CU_EVENT_DISABLE_TIMING));
        if (cu_result != CURDI_CUDA_SUCCESS) {
            curd_status status = curdi_fail_driver(
                (int)cu_result, "cuEventCreate",
                "check that the device is still usable (nvidia-smi)");
            for (unsigned index = 0; index < taken; index++)
                (void)curdi_driver_note(driver->cuEventDestroy(events[index]));
            return status;
        }
    }
    return CURD_OK;
}

void curdi_hostreg_events_release(curd_device *device,
                                  const curdi_cu_event *events, unsigned count)
{
    struct curdi_host_registry *registry = device->host_registry;
    const curdi_driver *driver = curdi_driver_get();
    unsigned kept = 0;
    pthread_mutex_lock(&registry->lock);
    if (curdi_grow((void **)&registry->idle_events,
                   &registry->idle_event_capacity,
                   registry->idle_event_count + count, sizeof *events)) {
        for (; kept < count; kept++)
            registry->idle_events[registry->idle_event_count++] = events[kept];
    }
    pthread_mutex_unlock(&registry->lock);
    /* No room to keep them: destroy them instead. */
    for (unsigned index = kept; index < count; index++)
        if (curdi_driver_usable())
            (void)curdi_driver_note(driver->cuEventDestroy(events[index]));
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

curd_status curdi_hostreg_open(curd_device *device)
{
    struct curdi_host_registry *registry = calloc(1, sizeof *registry);
    if (registry == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's transfer state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&registry->lock, NULL) != 0) {
        free(registry);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the transfer state's lock."
                          " Fix: free system resources.");
    }
    registry->next_serial = 1;
    device->host_registry = registry;
    return CURD_OK;
}

void curdi_hostreg_close(curd_device *device)
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
        for (size_t index = 0; index < registry->idle_event_count; index++)
            if (curdi_driver_usable())
                (void)curdi_driver_note(
                    driver->cuEventDestroy(registry->idle_events[index]));
    }
    /* The asynchronous marks die with the resident table, which
     * curdi_resident_close frees next whatever its marks. */
    curdi_copy_team_destroy(registry->team);
    free(registry->ranges);
    free(registry->pending);
    free(registry->idle_events);
    pthread_mutex_destroy(&registry->lock);
    free(registry);
    device->host_registry = NULL;
}

/* ------------------------------------------------------------------------
 * Pending asynchronous uploads
 * ---------------------------------------------------------------------- */

curd_status curdi_hostreg_async_reserve(curd_device *device, const void *src,
                                        size_t byte_len, const char *what,
                                        uintptr_t *out_range_key)
{
    struct curdi_host_registry *registry = device->host_registry;
    /* Room for the pending entry first, so nothing can fail after the
     * copy is enqueued. */
    pthread_mutex_lock(&registry->lock);
    /* pending_count + pending_reserved entries exist or are promised, each
     * a byte of memory at least: the sum cannot wrap. */
    if (!curdi_grow((void **)&registry->pending, &registry->pending_capacity,
                    registry->pending_count + registry->pending_reserved + 1u,
                    sizeof *registry->pending)) {
        pthread_mutex_unlock(&registry->lock);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: could not grow the list of pending uploads."
                          " Fix: call curd_device_sync_uploads() or free"
                          " host memory.",
                          what);
    }
    registry->pending_reserved++;
    *out_range_key = curdi_registry_use(registry, src, byte_len);
    pthread_mutex_unlock(&registry->lock);
    return CURD_OK;
}

void curdi_hostreg_async_cancel(curd_device *device, uintptr_t range_key)
{
    struct curdi_host_registry *registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    registry->pending_reserved--;
    curdi_registry_unuse(registry, range_key);
    pthread_mutex_unlock(&registry->lock);
}

void curdi_hostreg_async_commit(curd_device *device, uint64_t buffer_id,
                                uintptr_t range_key)
{
    struct curdi_host_registry *registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    registry->pending_reserved--;
    registry->pending[registry->pending_count++] =
        (curdi_async_entry){buffer_id, range_key, registry->next_serial++};
    pthread_mutex_unlock(&registry->lock);
}

bool curdi_hostreg_async_pending(curd_device *device,
                                 uint64_t *out_serial_limit)
{
    struct curdi_host_registry *registry = device->host_registry;
    size_t pending;
    pthread_mutex_lock(&registry->lock);
    *out_serial_limit = registry->next_serial;
    pending = registry->pending_count;
    pthread_mutex_unlock(&registry->lock);
    return pending != 0;
}

void curdi_hostreg_async_complete(curd_device *device, uint64_t serial_limit)
{
    struct curdi_host_registry *registry = device->host_registry;
    size_t kept = 0;
    /* Everything enqueued before serial_limit is done. Entries are in
     * serial order; a concurrent sync may have taken some. */
    pthread_mutex_lock(&registry->lock);
    for (size_t index = 0; index < registry->pending_count; index++) {
        curdi_async_entry *entry = &registry->pending[index];
        if (entry->serial < serial_limit) {
            curdi_registry_unuse(registry, entry->range_key);
            curdi_resident_async_end(device, entry->buffer_id);
        } else {
            registry->pending[kept++] = *entry;
        }
    }
    registry->pending_count = kept;
    pthread_mutex_unlock(&registry->lock);
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
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL || byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s. Fix: pass the start and length of host"
                          " memory you own.",
                          what, ptr == NULL ? "ptr is NULL" : "byte_len is 0");
    if (__builtin_add_overflow(start, byte_len, &end))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: %p plus %zu bytes passes the end of the"
                          " address space. Fix: pass a valid host range.",
                          what, ptr, byte_len);
    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    if (driver->cuMemHostRegister == NULL || driver->cuMemHostUnregister == NULL) {
        curdi_device_leave(device);
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
    index = curdi_range_before(registry, end - 1u);
    if (index != registry->range_count) {
        const curdi_host_range *range = &registry->ranges[index];
        /* range->start < end; it overlaps unless it ends before start. */
        if (range->start + range->byte_len > start) {
            pthread_mutex_unlock(&registry->lock);
            curdi_device_leave(device);
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: [%p, +%zu) overlaps [%p, +%zu), which is"
                              " registered already. Fix: register each"
                              " range once, or unregister the old one"
                              " first.",
                              what, ptr, byte_len, (void *)range->start,
                              range->byte_len);
        }
    }
    if (!curdi_grow((void **)&registry->ranges, &registry->range_capacity,
                    registry->range_count + 1u, sizeof *registry->ranges)) {
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
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

    cu_result = curdi_driver_note(driver->cuMemHostRegister(
        ptr, byte_len, CURDI_CU_MEMHOSTREGISTER_PORTABLE));

    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, start);
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
        status = curdi_fail_driver(
            (int)cu_result, "cuMemHostRegister",
            cu_result == CURDI_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                ? "register a range once per process (another device or"
                  " library may have registered it)"
                : "register memory you own that is mapped read-write, or"
                  " lower the locked-memory use (ulimit -l)");
    curdi_device_leave(device);
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
    curd_status status = curdi_transfer_check_device(device, what);
    if (status != CURD_OK)
        return status;
    if (ptr == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: ptr is NULL. Fix: pass the pointer given to"
                          " curd_host_register().",
                          what);
    status = curdi_device_enter(device);
    if (status != CURD_OK)
        return status;
    driver = curdi_driver_get();
    registry = device->host_registry;
    pthread_mutex_lock(&registry->lock);
    index = curdi_range_before(registry, start);
    if (index == registry->range_count || registry->ranges[index].start != start
        || !registry->ranges[index].ready) {
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %p is not the start of a range registered"
                          " with this device. Fix: pass the exact pointer"
                          " given to curd_host_register(), once.",
                          what, ptr);
    }
    if (registry->ranges[index].use_count != 0) {
        uint32_t uses = registry->ranges[index].use_count;
        pthread_mutex_unlock(&registry->lock);
        curdi_device_leave(device);
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
    index = curdi_range_before(registry, start);
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
        status = curdi_fail_driver((int)cu_result, "cuMemHostUnregister",
                                   CURDI_DRIVER_FIX);
    curdi_device_leave(device);
    return status;
}
