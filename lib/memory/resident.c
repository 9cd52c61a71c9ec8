/* resident.c - resident buffers: budgets, in-flight marks, the entries.
 *
 * Read top to bottom: the device's resident module, built on the pure
 * handle table (memory/handle_table.c: a mutex, the budget, statistics
 * and in-flight marks around it), then the public curd_buffer_* entry
 * points. See handle_table.h for the id layout and the rules. */
#include "memory/resident.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "memory/pool.h"
#include "memory/vmm.h"

/* ------------------------------------------------------------------------
 * The device's resident module
 * ---------------------------------------------------------------------- */

struct curdi_resident_table {
    pthread_mutex_t lock;
    curdi_handle_table table;
    /* Bytes and slots promised to allocations between their budget check
     * and their insert (the pool call runs without the lock). */
    uint64_t reserved_bytes;
    uint32_t reserved_slots;
    curd_stat_family bytes;   /* current: the resident bytes */
    curd_stat_family buffers; /* current: the live buffers */
    uint64_t imported_bytes;  /* of the live imported buffers, apart */
    /* The end of curd_buffer_free's sentence for a buffer a module owns
     * (curdi_resident_own: the one module that owns buffers, sessions, sets
     * it). */
    const char *owner_fix;
};

curd_status curdi_resident_open(curd_device *device)
{
    struct curdi_resident_table *resident = calloc(1, sizeof *resident);
    curd_status status;
    if (resident == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the resident buffer table."
                          " Fix: free host memory.");
    status = curdi_handle_table_init(&resident->table,
                                     curdi_handle_table_tag_next(), 0);
    if (status != CURD_OK) {
        free(resident);
        return status;
    }
    if (pthread_mutex_init(&resident->lock, NULL) != 0) {
        free(resident);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the resident table's lock."
                          " Fix: free system resources.");
    }
    device->resident = resident;
    return CURD_OK;
}

/* Closes the slot's kept export descriptor, if any: the importers'
 * descriptors and mappings hold the memory from then on. */
static void forget_export(curdi_handle_slot *slot)
{
    if (slot->export_fd >= 0)
        (void)close(slot->export_fd);
    slot->export_fd = -1;
}

/* The mapping behind a live slot with mapping_log2 != 0. Its size was
 * rounded up without overflow when it was made. */
static curdi_vmm_mapping mapping_of(const curdi_handle_slot *slot)
{
    curdi_vmm_mapping mapping = {slot->device_ptr, 0, slot->mapping_log2};
    (void)curdi_vmm_round_up(slot->byte_len, slot->mapping_log2,
                             &mapping.mapped_len);
    return mapping;
}

void curdi_resident_close(curd_device *device)
{
    struct curdi_resident_table *resident;
    curdi_handle_table *table;
    if (device == NULL || device->resident == NULL)
        return;
    resident = device->resident;
    table = &resident->table;
    for (uint32_t index = 0; index < table->slot_count; index++) {
        curdi_handle_slot *slot = &table->slots[index];
        /* The pool frees upstream (or caches) what it has live; a failure
         * here has nowhere to go at close, and the pool's own destroy frees
         * whatever is still live anyway. */
        if (slot->state == CURDI_SLOT_LIVE)
            forget_export(slot);
        if (slot->state == CURDI_SLOT_LIVE && slot->mapping_log2 != 0
            && curdi_driver_usable()) {
            curdi_vmm_mapping mapping = mapping_of(slot);
            (void)curdi_vmm_unmap(device, &mapping);
        } else if (slot->state == CURDI_SLOT_LIVE && !slot->imported
            && device->device_pool != NULL)
            (void)curdi_pool_release(device->device_pool, slot->device_ptr);
    }
    curdi_handle_table_fini(table);
    pthread_mutex_destroy(&resident->lock);
    free(resident);
    device->resident = NULL;
}

uint64_t curdi_resident_bytes(curd_device *device)
{
    uint64_t bytes;
    if (device == NULL || device->resident == NULL)
        return 0;
    pthread_mutex_lock(&device->resident->lock);
    bytes = device->resident->bytes.current;
    pthread_mutex_unlock(&device->resident->lock);
    return bytes;
}

bool curdi_resident_length(curd_device *device, uint64_t id,
                           size_t *out_byte_len)
{
    pthread_mutex_lock(&device->resident->lock);
    const curdi_handle_slot *slot = curdi_handle_table_lookup(&device->resident->table, id);
    if (slot != NULL)
        *out_byte_len = slot->byte_len;
    pthread_mutex_unlock(&device->resident->lock);
    return slot != NULL;
}

void curdi_resident_stats(curd_device *device, curd_stat_family *bytes,
                          curd_stat_family *buffers)
{
    static const curd_stat_family zero;
    if (device == NULL || device->resident == NULL) {
        if (bytes != NULL)
            *bytes = zero;
        if (buffers != NULL)
            *buffers = zero;
        return;
    }
    pthread_mutex_lock(&device->resident->lock);
    if (bytes != NULL)
        *bytes = device->resident->bytes;
    if (buffers != NULL)
        *buffers = device->resident->buffers;
    pthread_mutex_unlock(&device->resident->lock);
}

void curdi_resident_stats_reset(curd_device *device)
{
    struct curdi_resident_table *resident;
    if (device == NULL || device->resident == NULL)
        return;
    resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    resident->bytes.allocated = 0;
    resident->bytes.freed = 0;
    resident->bytes.peak = resident->bytes.current;
    resident->buffers.allocated = 0;
    resident->buffers.freed = 0;
    resident->buffers.peak = resident->buffers.current;
    pthread_mutex_unlock(&resident->lock);
}

/* "<what>" for one item, "<what> item <i>" in a batch. Formatted only for
 * an error message. */
static const char *use_what(const char *what, size_t count, size_t index,
                                  char *scratch, size_t scratch_len)
{
    if (count == 1)
        return what;
    snprintf(scratch, scratch_len, "%s item %zu", what, index);
    return scratch;
}

curd_status curdi_resident_use_begin(curd_device *device, const char *what,
                                     const uint64_t *ids, size_t count,
                                     curdi_resident_use *out)
{
    struct curdi_resident_table *resident = device->resident;
    char scratch[160];
    curdi_handle_slot *previous = NULL;
    size_t index;
    curd_status status = CURD_OK;
    pthread_mutex_lock(&resident->lock);
    for (index = 0; index < count; index++) {
        /* A batch often names one buffer item after item: the slot found
         * for the previous id serves an equal one (the lock is held, so
         * it is still live). */
        curdi_handle_slot *slot =
            index > 0 && ids[index] == ids[index - 1]
                ? previous
                : curdi_handle_table_lookup(&resident->table, ids[index]);
        if (slot == NULL)
            CURDI_TRY(status,
                      curdi_handle_table_find(&resident->table, ids[index],
                                              use_what(what, count, index,
                                                       scratch,
                                                       sizeof scratch),
                                              &slot),
                      unmark);
        if (slot->use_count == UINT32_MAX)
            CURDI_TRY(status,
                      curdi_fail(CURD_E_BUSY,
                                 "%s: curd_buffer 0x%016" PRIx64 " has %" PRIu32
                                 " uses in flight already. Fix: complete"
                                 " asynchronous uploads with"
                                 " curd_device_sync_uploads().",
                                 use_what(what, count, index, scratch,
                                          sizeof scratch),
                                 ids[index], slot->use_count),
                      unmark);
        slot->use_count++;
        previous = slot;
        out[index].id = ids[index];
        out[index].device_ptr = slot->device_ptr;
        out[index].byte_len = slot->byte_len;
        out[index].async_pending = slot->async_count != 0;
    }
    pthread_mutex_unlock(&resident->lock);
    return CURD_OK;
unmark:
    /* All or none: undo the marks taken so far. Their slots are still
     * live, since nothing can free a marked buffer. */
    for (size_t undo = 0; undo < index; undo++)
        resident->table.slots[curdi_handle_table_id_index(ids[undo])]
            .use_count--;
    pthread_mutex_unlock(&resident->lock);
    return status;
}

void curdi_resident_use_end(curd_device *device,
                            const curdi_resident_use *uses, size_t count)
{
    struct curdi_resident_table *resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    for (size_t index = 0; index < count; index++) {
        /* A marked buffer cannot be freed, so its slot is still the same
         * live one. */
        curdi_handle_slot *slot =
            &resident->table
                 .slots[curdi_handle_table_id_index(uses[index].id)];
        if (slot->use_count > 0)
            slot->use_count--;
    }
    pthread_mutex_unlock(&resident->lock);
}

void curdi_resident_async_begin(curd_device *device, uint64_t id)
{
    struct curdi_resident_table *resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    resident->table.slots[curdi_handle_table_id_index(id)].async_count++;
    pthread_mutex_unlock(&resident->lock);
}

void curdi_resident_async_end(curd_device *device, uint64_t id)
{
    struct curdi_resident_table *resident = device->resident;
    curdi_handle_slot *slot;
    pthread_mutex_lock(&resident->lock);
    slot = &resident->table.slots[curdi_handle_table_id_index(id)];
    if (slot->async_count > 0)
        slot->async_count--;
    if (slot->use_count > 0)
        slot->use_count--;
    pthread_mutex_unlock(&resident->lock);
}

curd_status curdi_resident_reserve(curd_device *device, const char *what,
                                   size_t byte_len, uint64_t total_bytes,
                                   uint64_t free_bytes)
{
    struct curdi_resident_table *resident = device->resident;
    uint64_t committed;
    uint64_t budget;
    uint64_t wanted = UINT64_MAX;
    uint64_t check;
    bool wanted_overflows;
    curd_status status;

    pthread_mutex_lock(&resident->lock);
    committed = resident->bytes.current + resident->reserved_bytes;
    budget =
        curdi_checked_resident_budget(total_bytes, free_bytes, committed,
                                      device->options.resident_limit_bytes);
    wanted_overflows = !curdi_u64_add(committed, byte_len, &wanted);
    if (wanted_overflows || wanted > budget) {
        pthread_mutex_unlock(&resident->lock);
        return curdi_fail(
            CURD_E_BUDGET,
            "%s: %zu bytes would bring resident memory to %s%"
            PRIu64 " bytes, over the resident budget of %" PRIu64
            " bytes (%" PRIu64 " resident or being allocated; device total %"
            PRIu64 ", free %" PRIu64 " including the pool's cache; limit %"
            PRIu64 ", 0 meaning none). Fix: free buffers you no longer"
            " need, or raise resident_limit_bytes if you set it.",
            what, byte_len, wanted_overflows ? "more than " : "", wanted,
            budget,
            committed, total_bytes, free_bytes,
            device->options.resident_limit_bytes);
    }
    /* Statistics never saturate: refuse what would overflow a cumulative
     * counter (only reachable after 2^64 bytes without a reset). */
    if (!curdi_u64_add(resident->bytes.allocated, wanted, &check)
        || !curdi_u64_add(resident->buffers.allocated,
                          (uint64_t)resident->reserved_slots + 1u, &check)) {
        pthread_mutex_unlock(&resident->lock);
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: the cumulative resident statistics would"
                          " pass 2^64-1. Fix: call"
                          " curd_device_stats_reset().",
                          what);
    }
    CURDI_TRY(status,
              curdi_handle_table_reserve(&resident->table,
                                         resident->reserved_slots + 1u),
              unlock);
    resident->reserved_bytes += byte_len;
    resident->reserved_slots++;
unlock:
    pthread_mutex_unlock(&resident->lock);
    return status;
}

void curdi_resident_unreserve(curd_device *device, size_t byte_len)
{
    struct curdi_resident_table *resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    resident->reserved_bytes -= byte_len;
    resident->reserved_slots--;
    pthread_mutex_unlock(&resident->lock);
}

uint64_t curdi_resident_commit(curd_device *device, size_t byte_len,
                               uint64_t device_ptr)
{
    struct curdi_resident_table *resident = device->resident;
    uint64_t id;
    pthread_mutex_lock(&resident->lock);
    /* The slot this allocation reserved is still there: a table's spare
     * slots (capacity - live - retired) are kept >= reserved_slots under
     * this lock; reserve grows the table for one more before counting it,
     * an insert spends one of each, and a remove only adds a spare (or,
     * retiring its slot, leaves the count as it was). The counters below
     * were checked in reserve with this allocation included. */
    resident->reserved_bytes -= byte_len;
    resident->reserved_slots--;
    id = curdi_handle_table_insert_reserved(&resident->table, device_ptr,
                                            byte_len);
    resident->bytes.current += byte_len;
    resident->bytes.allocated += byte_len;
    if (resident->bytes.current > resident->bytes.peak)
        resident->bytes.peak = resident->bytes.current;
    resident->buffers.current++;
    resident->buffers.allocated++;
    if (resident->buffers.current > resident->buffers.peak)
        resident->buffers.peak = resident->buffers.current;
    pthread_mutex_unlock(&resident->lock);
    return id;
}

uint64_t curdi_resident_commit_mapped(curd_device *device, size_t byte_len,
                                      uint64_t device_ptr,
                                      uint8_t mapping_log2)
{
    uint64_t id = curdi_resident_commit(device, byte_len, device_ptr);
    pthread_mutex_lock(&device->resident->lock);
    curdi_handle_table_lookup(&device->resident->table, id)->mapping_log2 =
        mapping_log2;
    pthread_mutex_unlock(&device->resident->lock);
    return id;
}

/* Lock held: the live slot of id for a call that removes it or gives it a
 * new handle. CURD_E_STALE_HANDLE, or CURD_E_BUSY while uses are in
 * flight, with `what` naming the call. */
static curd_status slot_unused(struct curdi_resident_table *resident,
                               const char *what, uint64_t id,
                               curdi_handle_slot **out_slot)
{
    curdi_handle_slot *slot;
    curd_status status =
        curdi_handle_table_find(&resident->table, id, what, &slot);
    if (status != CURD_OK)
        return status;
    if (slot->async_count != 0)
        return curdi_fail(CURD_E_BUSY,
                          "%s: curd_buffer 0x%016" PRIx64 " has %" PRIu32
                          " asynchronous upload(s) not yet completed;"
                          " nothing was done. Fix: call"
                          " curd_device_sync_uploads() first.",
                          what, id, slot->async_count);
    if (slot->use_count != 0)
        return curdi_fail(CURD_E_BUSY,
                          "%s: curd_buffer 0x%016" PRIx64 " is in use by %"
                          PRIu32 " transfer(s) or dispatch(es) running on"
                          " other threads or pending; nothing was done."
                          " Fix: try again once they have returned or"
                          " completed.",
                          what, id, slot->use_count);
    *out_slot = slot;
    return CURD_OK;
}

curd_status curdi_resident_import(curd_device *device, const char *what,
                                  uint64_t device_ptr, size_t byte_len,
                                  uint8_t mapping_log2, uint64_t *out_id)
{
    struct curdi_resident_table *resident = device->resident;
    uint64_t imported = 0;
    curd_status status;
    pthread_mutex_lock(&resident->lock);
    /* One spare slot beyond those promised to allocations in flight. */
    CURDI_TRY(status,
              curdi_handle_table_reserve(&resident->table,
                                         resident->reserved_slots + 1u),
              unlock);
    if (!curdi_u64_add(resident->imported_bytes, byte_len, &imported))
        CURDI_TRY(status,
                  curdi_fail(CURD_E_OVERFLOW,
                             "%s: %zu more imported bytes would pass 2^64."
                             " Fix: free imported buffers you no longer"
                             " use.",
                             what, byte_len),
                  unlock);
    *out_id = curdi_handle_table_insert_reserved(&resident->table, device_ptr,
                                                 byte_len);
    curdi_handle_slot *slot =
        curdi_handle_table_lookup(&resident->table, *out_id);
    slot->imported = true;
    slot->mapping_log2 = mapping_log2;
    resident->imported_bytes = imported;
unlock:
    pthread_mutex_unlock(&resident->lock);
    return status;
}

uint64_t curdi_resident_imported_bytes(curd_device *device)
{
    pthread_mutex_lock(&device->resident->lock);
    uint64_t bytes = device->resident->imported_bytes;
    pthread_mutex_unlock(&device->resident->lock);
    return bytes;
}

void curdi_resident_own(curd_device *device, uint64_t id,
                        const char *owner_fix)
{
    struct curdi_resident_table *resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    curdi_handle_slot *slot = curdi_handle_table_lookup(&resident->table, id);
    if (slot != NULL) {
        slot->owned = true;
        resident->owner_fix = owner_fix;
    }
    pthread_mutex_unlock(&resident->lock);
}

/* Lock held: removes the live slot of id and takes its bytes out of the
 * statistics it is counted in (the imported bytes, or the resident
 * families). */
static void remove_counted(curd_device *device, curdi_handle_slot *slot,
                           uint64_t id, const char *what)
{
    struct curdi_resident_table *resident = device->resident;
    size_t byte_len = slot->byte_len;
    bool imported = slot->imported;
    forget_export(slot);
    curdi_handle_table_remove(&resident->table, id, what);
    if (imported) {
        resident->imported_bytes -= byte_len;
        return;
    }
    /* current >= byte_len: it is the sum of the live buffers' sizes. The
     * cumulative freed counters are statistics; one that would pass 2^64
     * (not reachable in a real run) is counted as a repair rather than
     * failing a free. */
    resident->bytes.current -= byte_len;
    resident->buffers.current--;
    if (!curdi_u64_add(resident->bytes.freed, byte_len, &resident->bytes.freed)
        || !curdi_u64_add(resident->buffers.freed, 1u,
                          &resident->buffers.freed))
        atomic_fetch_add(&device->accounting_repairs, 1u);
}

/* take, for the module's own calls (owners_too) or curd_buffer_free (a
 * buffer a module owns is refused). */
static curd_status resident_take(curd_device *device, const char *what,
                                 uint64_t id, bool owners_too,
                                 uint64_t *out_device_ptr)
{
    struct curdi_resident_table *resident = device->resident;
    curdi_handle_slot *slot;
    size_t byte_len;
    curd_status status;

    pthread_mutex_lock(&resident->lock);
    CURDI_TRY(status, slot_unused(resident, what, id, &slot), unlock);
    if (slot->owned && !owners_too)
        CURDI_TRY(status,
                  curdi_fail(CURD_E_BUSY,
                             "%s: curd_buffer 0x%016" PRIx64 " belongs to a"
                             " static set that its session owns"
                             " (curd_session_upload_static); nothing was"
                             " freed. %s",
                             what, id, resident->owner_fix),
                  unlock);
    if (slot->imported || slot->mapping_log2 != 0)
        CURDI_TRY(status,
                  curdi_fail(CURD_E_INVALID_ARGUMENT,
                             "%s: curd_buffer 0x%016" PRIx64 " is %s, with"
                             " no block of curd's pool behind it; nothing"
                             " was done. Fix: free it with"
                             " curd_buffer_free.",
                             what, id,
                             slot->mapping_log2 != 0
                                 ? "shareable memory"
                                   " (curd_buffer_alloc_shareable"
                                   " or curd_buffer_import_fd)"
                                 : "imported memory (curd_buffer_import)"),
                  unlock);
    *out_device_ptr = slot->device_ptr;
    byte_len = slot->byte_len;
    (void)byte_len;
    remove_counted(device, slot, id, what);
unlock:
    pthread_mutex_unlock(&resident->lock);
    return status;
}

curd_status curdi_resident_take(curd_device *device, const char *what,
                                uint64_t id, uint64_t *out_device_ptr)
{
    return resident_take(device, what, id, true, out_device_ptr);
}

/* take, then the block back to the pool. */
static curd_status resident_free(curd_device *device, const char *what,
                                 uint64_t id, bool owners_too)
{
    uint64_t device_ptr = 0;
    curd_status status =
        resident_take(device, what, id, owners_too, &device_ptr);
    if (status != CURD_OK)
        return status;
    /* The pool call runs without the table lock (it may free upstream,
     * entering the device itself). The block is one this table received
     * from the pool, so a failure means the pool lost track of it: report
     * it; the handle is gone either way. */
    return curdi_pool_release(device->device_pool, device_ptr);
}

curd_status curdi_resident_free(curd_device *device, const char *what,
                                uint64_t id)
{
    return resident_free(device, what, id, true);
}

curd_status curdi_resident_retag(curd_device *device, const char *what,
                                 uint64_t id, uint64_t *out_id)
{
    struct curdi_resident_table *resident = device->resident;
    curdi_handle_slot *slot;
    curd_status status;

    pthread_mutex_lock(&resident->lock);
    /* One spare slot beyond those promised to allocations in flight, so
     * the insert below cannot fail; the remove gives one back, and the
     * insert takes that very slot unless the remove retired it. Reserved
     * before the slot is looked up: growing the table moves its slots. */
    CURDI_TRY(status,
              curdi_handle_table_reserve(&resident->table,
                                         resident->reserved_slots + 1u),
              unlock);
    CURDI_TRY(status, slot_unused(resident, what, id, &slot), unlock);
    /* Only buffers of curdi_resident_alloc's making are retagged (a
     * session's): the new slot carries no import, mapping or kept export
     * descriptor over. */
    CURDI_ASSERT(!slot->imported && slot->mapping_log2 == 0
                 && slot->export_fd < 0);
    uint64_t device_ptr = slot->device_ptr;
    size_t byte_len = slot->byte_len;
    curdi_handle_table_remove(&resident->table, id, what);
    *out_id = curdi_handle_table_insert_reserved(&resident->table, device_ptr,
                                                 byte_len);
unlock:
    pthread_mutex_unlock(&resident->lock);
    return status;
}

curdi_resident_state curdi_resident_probe(curd_device *device, uint64_t id)
{
    struct curdi_resident_table *resident = device->resident;
    curdi_resident_state state;
    pthread_mutex_lock(&resident->lock);
    const curdi_handle_slot *slot = curdi_handle_table_lookup(&resident->table, id);
    state = slot == NULL             ? CURDI_RESIDENT_STALE
            : slot->use_count != 0 ? CURDI_RESIDENT_IN_USE
                                   : CURDI_RESIDENT_UNUSED;
    pthread_mutex_unlock(&resident->lock);
    return state;
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ---------------------------------------------------------------------- */

/* Live free device memory as the budget sees it: what the driver reports
 * free plus what the device pool holds cached, since the pool hands cached
 * blocks back on demand (a freed buffer's memory goes to that cache, and
 * must count as free again for the next allocation). */
static curd_status resident_free_bytes(curd_device *device,
                                             uint64_t *out_free,
                                             uint64_t *out_total)
{
    const curdi_driver *driver = curdi_driver_get();
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    curd_pool_stats pool_stats;
    curdi_cu_result cu_result =
        curdi_driver_note(driver->cuMemGetInfo(&free_bytes, &total_bytes));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result, "cuMemGetInfo",
                                 "check that the device is still usable"
                                 " (nvidia-smi)");
    curdi_pool_report_stats(device->device_pool, &pool_stats);
    if (!curdi_u64_add(free_bytes, pool_stats.cached_bytes.current, out_free))
        *out_free = UINT64_MAX;
    *out_total = device->props.total_memory_bytes != 0
                     ? device->props.total_memory_bytes
                     : (uint64_t)total_bytes;
    return CURD_OK;
}

curd_status curdi_resident_reserve_live(curd_device *device,
                                        const char *what, size_t byte_len)
{
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
    curd_status status = resident_free_bytes(device, &free_bytes, &total_bytes);
    if (status != CURD_OK)
        return status;
    return curdi_resident_reserve(device, what, byte_len, total_bytes,
                                  free_bytes);
}

bool curdi_resident_mapped(curd_device *device, uint64_t id)
{
    pthread_mutex_lock(&device->resident->lock);
    const curdi_handle_slot *slot =
        curdi_handle_table_lookup(&device->resident->table, id);
    bool mapped = slot != NULL && slot->mapping_log2 != 0;
    pthread_mutex_unlock(&device->resident->lock);
    return mapped;
}

/* A dup of fd (close-on-exec) into *out_fd. */
static curd_status export_dup(const char *what, int fd, int *out_fd)
{
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: the buffer's descriptor could not be"
                          " duplicated: %s. Fix: close descriptors this"
                          " process no longer needs, or raise its limit"
                          " (ulimit -n).",
                          what, strerror(errno));
    *out_fd = copy;
    return CURD_OK;
}

curd_status curdi_resident_export_dup(curd_device *device, const char *what,
                                      uint64_t id, int *out_fd)
{
    curd_status status = CURD_OK;
    *out_fd = -1;
    pthread_mutex_lock(&device->resident->lock);
    const curdi_handle_slot *slot =
        curdi_handle_table_lookup(&device->resident->table, id);
    if (slot != NULL && slot->export_fd >= 0)
        status = export_dup(what, slot->export_fd, out_fd);
    pthread_mutex_unlock(&device->resident->lock);
    return status;
}

curd_status curdi_resident_export_keep(curd_device *device, const char *what,
                                       uint64_t id, int fd, int *out_fd)
{
    pthread_mutex_lock(&device->resident->lock);
    curdi_handle_slot *slot =
        curdi_handle_table_lookup(&device->resident->table, id);
    /* The caller's use keeps the buffer live. */
    CURDI_ASSERT(slot != NULL);
    if (slot->export_fd >= 0)
        (void)close(fd); /* another thread's export was kept first */
    else
        slot->export_fd = fd;
    curd_status status = export_dup(what, slot->export_fd, out_fd);
    pthread_mutex_unlock(&device->resident->lock);
    return status;
}

bool curdi_resident_imported(curd_device *device, uint64_t id)
{
    pthread_mutex_lock(&device->resident->lock);
    const curdi_handle_slot *slot =
        curdi_handle_table_lookup(&device->resident->table, id);
    bool imported = slot != NULL && slot->imported;
    pthread_mutex_unlock(&device->resident->lock);
    return imported;
}

curd_status curdi_resident_alloc(curd_device *device, const char *what,
                                 size_t byte_len, uint64_t *out_id)
{
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
    uint64_t device_ptr = 0;
    size_t class_bytes = 0;
    curd_status status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    CURDI_TRY(status, resident_free_bytes(device, &free_bytes, &total_bytes),
              leave);
    CURDI_TRY(status,
              curdi_resident_reserve(device, what, byte_len, total_bytes,
                                     free_bytes),
              leave);
    /* Without the table lock: the pool may run its out-of-memory ladder,
     * whose reclaim callback may call curd_buffer_free. */
    CURDI_TRY(status,
              curdi_pool_acquire(device->device_pool, byte_len, &device_ptr,
                                 &class_bytes),
              unreserve);
    *out_id = curdi_resident_commit(device, byte_len, device_ptr);
    curdi_core_device_leave(device);
    return CURD_OK;
unreserve:
    curdi_resident_unreserve(device, byte_len);
leave:
    curdi_core_device_leave(device);
    return status;
}

CURD_API curd_status curd_buffer_alloc(curd_device *device, size_t byte_len,
                                       curd_buffer *out_buffer)
{
    uint64_t id = 0;
    curd_status status = curdi_core_device_check(device, "curd_buffer_alloc");
    if (status != CURD_OK)
        return status;
    if (out_buffer == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_alloc: out_buffer is NULL. Fix: pass"
                          " the address of a curd_buffer to receive the"
                          " handle.");
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_alloc: a buffer of 0 bytes was asked"
                          " for. Fix: allocate at least one byte.");
    status = curdi_resident_alloc(device, "curd_buffer_alloc", byte_len, &id);
    if (status != CURD_OK)
        return status;
    out_buffer->id = id;
    return CURD_OK;
}

/* An imported buffer is forgotten (true), with no driver call; false
 * for any other id, which the caller frees as usual. */
static bool forget_if_imported(curd_device *device, uint64_t id)
{
    struct curdi_resident_table *resident = device->resident;
    pthread_mutex_lock(&resident->lock);
    curdi_handle_slot *slot = curdi_handle_table_lookup(&resident->table, id);
    bool imported = slot != NULL && slot->imported && slot->mapping_log2 == 0;
    bool idle = imported && slot->use_count == 0;
    if (idle) /* Nothing to give back: the memory is its owner's. */
        remove_counted(device, slot, id, "curd_buffer_free");
    pthread_mutex_unlock(&resident->lock);
    /* One in use is refused by the take below, with its sentence. */
    return idle;
}

/* A mapped buffer (shareable or imported from a descriptor): *mapped
 * false for any other, which the caller frees as usual. Unmapped first,
 * removed after: an unmap that fails leaves the buffer live and mapped,
 * as it was. While it unmaps, the slot carries the most uses a slot can
 * (UINT32_MAX), so that neither a free nor a use begins on it. Device
 * entered. */
static curd_status free_if_mapped(curd_device *device, uint64_t id,
                                  bool *mapped)
{
    struct curdi_resident_table *resident = device->resident;
    const char *what = "curd_buffer_free";
    curdi_handle_slot *slot = NULL;
    pthread_mutex_lock(&resident->lock);
    slot = curdi_handle_table_lookup(&resident->table, id);
    *mapped = slot != NULL && slot->mapping_log2 != 0;
    if (!*mapped) {
        pthread_mutex_unlock(&resident->lock);
        return CURD_OK;
    }
    curd_status status = slot_unused(resident, what, id, &slot);
    if (status != CURD_OK) {
        pthread_mutex_unlock(&resident->lock);
        return status;
    }
    curdi_vmm_mapping mapping = mapping_of(slot);
    slot->use_count = UINT32_MAX;
    pthread_mutex_unlock(&resident->lock);
    status = curdi_vmm_unmap(device, &mapping);
    pthread_mutex_lock(&resident->lock);
    /* The mark kept the slot live and the same. */
    slot = &resident->table.slots[curdi_handle_table_id_index(id)];
    slot->use_count = 0;
    if (status == CURD_OK)
        remove_counted(device, slot, id, what);
    pthread_mutex_unlock(&resident->lock);
    return status;
}

CURD_API curd_status curd_buffer_free(curd_device *device, curd_buffer buffer)
{
    curd_status status = curdi_core_device_check(device, "curd_buffer_free");
    if (status != CURD_OK)
        return status;
    if (forget_if_imported(device, buffer.id))
        return CURD_OK;
    /* Entered for the driver's state check (fork, teardown) and so that a
     * pool freeing upstream finds the context current already. */
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    bool mapped = false;
    status = free_if_mapped(device, buffer.id, &mapped);
    if (!mapped)
        status = resident_free(device, "curd_buffer_free", buffer.id, false);
    curdi_core_device_leave(device);
    return status;
}

/* Looks one buffer up without marking it. */
static curd_status resident_peek(curd_device *device, curd_buffer buffer,
                                       const char *what, uint64_t *out_ptr,
                                       size_t *out_len)
{
    curdi_handle_slot *slot;
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    pthread_mutex_lock(&device->resident->lock);
    CURDI_TRY(status,
              curdi_handle_table_find(&device->resident->table, buffer.id,
                                      what, &slot),
              unlock);
    *out_ptr = slot->device_ptr;
    *out_len = slot->byte_len;
unlock:
    pthread_mutex_unlock(&device->resident->lock);
    return status;
}

CURD_API curd_status curd_buffer_size(curd_device *device, curd_buffer buffer,
                                      size_t *out_byte_len)
{
    uint64_t device_ptr;
    size_t byte_len;
    curd_status status;
    if (out_byte_len == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_size: out_byte_len is NULL. Fix: pass"
                          " the address of a size_t.");
    status = resident_peek(device, buffer, "curd_buffer_size",
                                 &device_ptr, &byte_len);
    if (status != CURD_OK)
        return status;
    *out_byte_len = byte_len;
    return CURD_OK;
}

CURD_API curd_status curd_buffer_device_ptr(curd_device *device,
                                            curd_buffer buffer,
                                            uint64_t *out_device_ptr)
{
    uint64_t device_ptr;
    size_t byte_len;
    curd_status status;
    if (out_device_ptr == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_device_ptr: out_device_ptr is NULL."
                          " Fix: pass the address of a uint64_t.");
    status = resident_peek(device, buffer, "curd_buffer_device_ptr",
                                 &device_ptr, &byte_len);
    if (status != CURD_OK)
        return status;
    *out_device_ptr = device_ptr;
    return CURD_OK;
}

CURD_API curd_status curd_device_resident_bytes(curd_device *device,
                                                uint64_t *out_bytes)
{
    curd_status status =
        curdi_core_device_check(device, "curd_device_resident_bytes");
    if (status != CURD_OK)
        return status;
    if (out_bytes == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_resident_bytes: out_bytes is NULL."
                          " Fix: pass the address of a uint64_t.");
    *out_bytes = curdi_resident_bytes(device);
    return CURD_OK;
}
