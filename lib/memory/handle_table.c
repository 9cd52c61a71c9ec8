/* handle_table.c - the handle table (pure): a curd_buffer id to its slot
 * and back. handle_table.h says how an id is laid out and what the table
 * promises; the id fields and the lookup are inline there, for the
 * resident module's per-item loops. */
#include "memory/handle_table.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "base/status.h"

/* ------------------------------------------------------------------------
 * Device tags
 * ---------------------------------------------------------------------- */

uint16_t curdi_handle_table_tag_next(void)
{
    static _Atomic uint32_t last_tag;
    uint32_t tag;
    /* Tags cycle through 1 .. 65535; 0 is skipped so no id of a live
     * buffer has a zero top half by accident of its tag. */
    do
        tag = atomic_fetch_add(&last_tag, 1u) + 1u;
    while ((uint16_t)tag == 0);
    return (uint16_t)tag;
}

/* ------------------------------------------------------------------------
 * The handle table (pure)
 * ---------------------------------------------------------------------- */

/* A seed for a table's first generations: not secret, only different per
 * table and per run, so handles cannot be guessed by counting. */
static uint64_t handle_seed(uint16_t tag, const void *table)
{
    static _Atomic uint64_t tables;
    struct timespec now;
    uint64_t seed = atomic_fetch_add(&tables, 1u) * 0x9E3779B97F4A7C15u;
    clock_gettime(CLOCK_MONOTONIC, &now);
    seed ^= (uint64_t)now.tv_nsec + ((uint64_t)now.tv_sec << 30);
    seed ^= (uint64_t)(uintptr_t)table ^ ((uint64_t)tag << 48);
    return seed;
}

/* splitmix64: one step. */
static uint64_t handle_random(curdi_handle_table *table)
{
    uint64_t z = (table->random_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

curd_status curdi_handle_table_init(curdi_handle_table *table, uint16_t tag,
                                    uint32_t max_slots)
{
    if (table == NULL || tag == 0 || max_slots > CURDI_HANDLE_MAX_SLOTS)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "a handle table needs a table, a non-zero device"
                          " tag and at most %" PRIu32 " slots (got tag %u,"
                          " %" PRIu32 " slots). Fix: pass valid values.",
                          CURDI_HANDLE_MAX_SLOTS, (unsigned)tag, max_slots);
    memset(table, 0, sizeof *table);
    table->tag = tag;
    table->random_state = handle_seed(tag, table);
    table->max_slots = max_slots == 0 ? CURDI_HANDLE_MAX_SLOTS : max_slots;
    return CURD_OK;
}

void curdi_handle_table_fini(curdi_handle_table *table)
{
    if (table == NULL)
        return;
    free(table->slots);
    table->slots = NULL;
    table->slot_count = 0;
    table->capacity = 0;
    table->free_head = 0;
    table->live_count = 0;
    table->retired_count = 0;
}

/* Slots that an insert can take without growing past capacity: the free
 * list plus the allocated but never used tail. */
static uint32_t table_spare(const curdi_handle_table *table)
{
    uint32_t free_count = table->slot_count - table->live_count
                          - table->retired_count;
    return free_count + (table->capacity - table->slot_count);
}

curd_status curdi_handle_table_reserve(curdi_handle_table *table,
                                       uint32_t more)
{
    uint32_t spare = table_spare(table);
    uint64_t needed_capacity;
    uint64_t new_capacity;
    curdi_handle_slot *slots;
    if (more <= spare)
        return CURD_OK;
    /* Free slots sit below slot_count, so what is missing must come from
     * new slots past capacity. */
    needed_capacity = (uint64_t)table->capacity + (more - spare);
    if (needed_capacity > table->max_slots)
        return curdi_fail(CURD_E_BUDGET,
                          "the resident handle table is full: %" PRIu32
                          " buffers live and %" PRIu32
                          " slots retired of at most %" PRIu32
                          ". Fix: free buffers you no longer need, or pack"
                          " small ones into fewer larger buffers.",
                          table->live_count, table->retired_count,
                          table->max_slots);
    /* Doubling keeps growth amortised O(1); 64 slots to start. */
    new_capacity = table->capacity < 32u ? 64u : (uint64_t)table->capacity * 2u;
    if (new_capacity < needed_capacity)
        new_capacity = needed_capacity;
    if (new_capacity > table->max_slots)
        new_capacity = table->max_slots;
    /* new_capacity <= 2^24 slots of a few dozen bytes: the product fits. */
    slots = realloc(table->slots,
                    (size_t)new_capacity * sizeof(curdi_handle_slot));
    if (slots == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not grow the resident handle table to %" PRIu64
                          " slots. Fix: free host memory or buffers you no"
                          " longer need.",
                          new_capacity);
    table->slots = slots;
    table->capacity = (uint32_t)new_capacity;
    return CURD_OK;
}

uint64_t curdi_handle_table_insert_reserved(curdi_handle_table *table,
                                           uint64_t device_ptr,
                                           size_t byte_len)
{
    curdi_handle_slot *slot;
    uint32_t index;
    /* The caller holds a slot that curdi_handle_table_reserve set aside, so
     * spare >= 1: either the free list has a slot, or slot_count <
     * capacity and slots[slot_count] is allocated. Nothing is allocated
     * here, hence no failure. */
    if (table->free_head != 0) {
        index = table->free_head - 1u;
        CURDI_ASSERT(index < table->slot_count);
        slot = &table->slots[index];
        CURDI_ASSERT(slot->state == CURDI_SLOT_FREE);
        table->free_head = slot->next_free;
    } else {
        CURDI_ASSERT(table->slot_count < table->capacity);
        index = table->slot_count++;
        slot = &table->slots[index];
        /* In [1, 2^23]: at least 2^23 reuses before the slot retires. */
        slot->generation = (uint32_t)(handle_random(table)
                                      & ((CURDI_HANDLE_MAX_GENERATION >> 1)))
                           + 1u;
        slot->ended_by = NULL;
    }
    slot->device_ptr = device_ptr;
    slot->byte_len = byte_len;
    slot->imported = false;
    slot->mapping_log2 = 0;
    slot->export_fd = -1;
    slot->owned = false;
    slot->state = CURDI_SLOT_LIVE;
    slot->use_count = 0;
    slot->async_count = 0;
    slot->next_free = 0;
    table->live_count++;
    /* A generation that fits its field and is never 0 (id 0 is never
     * live). */
    CURDI_ASSERT(slot->generation >= 1u
                 && slot->generation <= CURDI_HANDLE_MAX_GENERATION);
    return curdi_handle_table_id_make(table->tag, slot->generation, index);
}

curd_status curdi_handle_table_insert(curdi_handle_table *table,
                                      uint64_t device_ptr, size_t byte_len,
                                      uint64_t *out_id)
{
    curd_status status = curdi_handle_table_reserve(table, 1u);
    if (status != CURD_OK)
        return status;
    *out_id = curdi_handle_table_insert_reserved(table, device_ptr, byte_len);
    return CURD_OK;
}

/* What a user can do about a handle that the call ended_by let go. */
static const char *stale_fix(const char *ended_by)
{
    if (strcmp(ended_by, "curd_session_release") == 0)
        return "do not use a buffer after releasing it to its session;"
               " take a new one with curd_session_alloc() and use the"
               " handle it returns.";
    /* A static set's buffers end with its release, its session, or its
     * eviction by a later upload. */
    if (strncmp(ended_by, "curd_session_", 13) == 0)
        return "use a static set's buffers only while the set is held;"
               " upload it again (curd_session_upload_static) and use the"
               " set it returns.";
    return "do not use a buffer after it was freed; allocate a new one.";
}

/* The sentence for a handle that names no live buffer (slot NULL: an
 * index or generation this table never issued). The numbers a reader of
 * the library needs (slot, generations) go to CURD_TRACE; the caller's
 * sentence names the call that let the buffer go, when the slot's last
 * ending was the handle's own. */
static curd_status handle_stale(const curdi_handle_table *table, uint64_t id,
                                const curdi_handle_slot *slot,
                                const char *what)
{
    uint32_t index = curdi_handle_table_id_index(id);
    uint32_t generation = curdi_handle_table_id_generation(id);
    /* Generations only grow, and a retired slot keeps its last one. */
    bool never = slot == NULL || generation > slot->generation
                 || (slot->state != CURDI_SLOT_RETIRED
                     && generation == slot->generation);
    curdi_trace("%s: curd_buffer 0x%016" PRIx64 " is stale: slot %" PRIu32
                " (of %" PRIu32 "), handle generation %" PRIu32
                ", slot generation %" PRIu32 "%s",
                what, id, index, table->slot_count, generation,
                slot != NULL ? slot->generation : 0u,
                slot == NULL                          ? ", no such slot"
                : slot->state == CURDI_SLOT_RETIRED ? ", retired"
                : slot->state == CURDI_SLOT_FREE    ? ", free"
                                                    : ", live");
    if (never)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: curd_buffer 0x%016" PRIx64 " was never issued"
                          " by this device. Fix: pass a buffer from"
                          " curd_buffer_alloc(), unchanged.",
                          what, id);
    bool last = slot->state == CURDI_SLOT_RETIRED
                    ? generation == slot->generation
                    : generation + 1u == slot->generation;
    if (last && slot->ended_by != NULL)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: curd_buffer 0x%016" PRIx64 " was let go by"
                          " %s(), so it names no buffer any more. Fix: %s",
                          what, id, slot->ended_by,
                          stale_fix(slot->ended_by));
    return curdi_fail(CURD_E_STALE_HANDLE,
                      "%s: curd_buffer 0x%016" PRIx64 " was let go earlier"
                      " (freed, or released to a session). Fix: do not use"
                      " a buffer after curd_buffer_free() or"
                      " curd_session_release(); allocate a new one.",
                      what, id);
}

curd_status curdi_handle_table_find(const curdi_handle_table *table,
                                    uint64_t id, const char *what,
                                    curdi_handle_slot **out_slot)
{
    uint32_t index = curdi_handle_table_id_index(id);
    uint32_t generation = curdi_handle_table_id_generation(id);
    uint16_t tag = curdi_handle_table_id_tag(id);
    curdi_handle_slot *slot;
    if (id == 0)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: the curd_buffer is zero, which never names a"
                          " buffer. Fix: pass a buffer from"
                          " curd_buffer_alloc().",
                          what);
    if (tag != table->tag)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: curd_buffer 0x%016" PRIx64 " belongs to"
                          " another device (device tag %u, this device's is"
                          " %u) or was forged. Fix: use each buffer only with"
                          " the device that allocated it.",
                          what, id, (unsigned)tag, (unsigned)table->tag);
    slot = index < table->slot_count && generation != 0
               ? &table->slots[index]
               : NULL;
    if (slot != NULL && slot->state == CURDI_SLOT_LIVE
        && slot->generation == generation) {
        *out_slot = slot;
        return CURD_OK;
    }
    return handle_stale(table, id, slot, what);
}

void curdi_handle_table_remove(curdi_handle_table *table, uint64_t id,
                               const char *ended_by)
{
    uint32_t index = curdi_handle_table_id_index(id);
    /* The caller has just found id: its slot is live, of id's generation. */
    CURDI_ASSERT(index < table->slot_count && table->live_count > 0);
    curdi_handle_slot *slot = &table->slots[index];
    CURDI_ASSERT(slot->state == CURDI_SLOT_LIVE
                 && slot->generation == curdi_handle_table_id_generation(id));
    slot->ended_by = ended_by;
    slot->device_ptr = 0;
    slot->byte_len = 0;
    slot->use_count = 0;
    slot->async_count = 0;
    table->live_count--;
    if (slot->generation >= CURDI_HANDLE_MAX_GENERATION) {
        /* Wrapping would let an old handle name a new buffer; a slot that
         * has served 2^24 - 1 buffers is cheaper to give up. */
        slot->state = CURDI_SLOT_RETIRED;
        slot->next_free = 0;
        table->retired_count++;
        return;
    }
    slot->generation++;
    slot->state = CURDI_SLOT_FREE;
    /* LIFO reuse keeps the table's hot slots few. */
    slot->next_free = table->free_head;
    table->free_head = index + 1u;
}

