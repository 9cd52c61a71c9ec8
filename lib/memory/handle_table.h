/* handle_table.h - the handle table (pure): no driver, no lock, no
 * allocation but its own slot array. It turns a curd_buffer id into a
 * slot and back; the resident module (memory/resident.c) keeps one per
 * device under its mutex, and tests/test-handle-table.c drives it on the
 * CPU.
 *
 * A curd_buffer id packs three fields:
 *
 *      63        48 47            24 23             0
 *     +------------+----------------+----------------+
 *     | device tag |   generation   |   slot index   |
 *     +------------+----------------+----------------+
 *
 * The tag is non-zero and differs between devices open at the same time
 * (a process-wide counter, so it repeats only after 65535 opens), so a
 * handle of another device is stale here. A slot's first generation is
 * drawn at random from [1, 2^23], so a made-up handle (a neighbour's index,
 * a small integer) names a live buffer only by a 1-in-2^23 accident; the
 * generation then grows each time the slot is freed, and a slot whose
 * generation would pass 2^24 - 1 is retired for good instead of wrapping,
 * so a freed handle never names a live buffer again. Id 0 is never live
 * (its generation is 0). */
#ifndef CURD_LIB_MEMORY_HANDLE_TABLE_H
#define CURD_LIB_MEMORY_HANDLE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

#define CURDI_HANDLE_INDEX_BITS 24u
#define CURDI_HANDLE_GENERATION_BITS 24u
#define CURDI_HANDLE_TAG_BITS 16u
/* Slots a table can ever hold: indices 0 .. 2^24 - 1. */
#define CURDI_HANDLE_MAX_SLOTS ((uint32_t)1 << CURDI_HANDLE_INDEX_BITS)
#define CURDI_HANDLE_MAX_GENERATION                                           \
    (((uint32_t)1 << CURDI_HANDLE_GENERATION_BITS) - 1u)

/* ------------------------------------------------------------------------
 * The pure handle table.
 * ---------------------------------------------------------------------- */

typedef enum curdi_slot_state {
    CURDI_SLOT_FREE = 0,    /* on the free list */
    CURDI_SLOT_LIVE = 1,    /* names a buffer */
    CURDI_SLOT_RETIRED = 2  /* generations used up; never reused */
} curdi_slot_state;

typedef struct curdi_handle_slot {
    uint64_t device_ptr;
    size_t byte_len;
    uint32_t generation;  /* of the live buffer, or of the next one */
    uint32_t state;       /* curdi_slot_state */
    /* Uses in flight: synchronous transfers running now plus asynchronous
     * uploads not yet completed. A buffer with any cannot be freed. */
    uint32_t use_count;
    uint32_t async_count; /* the asynchronous part of use_count */
    /* Memory another library allocated (curd_buffer_import): no pool
     * block behind it, never freed by curd, in no budget. */
    bool imported;
    /* Memory mapped through the virtual memory management calls
     * (memory/vmm.c: a shareable buffer, or one imported from a file
     * descriptor), in granules of 2^mapping_log2 bytes; 0 for any other.
     * Freeing it unmaps the byte_len bytes rounded up to the granule. */
    uint8_t mapping_log2;
    /* A shareable buffer's descriptor from the driver's export, kept so
     * that each later export is a dup of it (the export took ~600 us on
     * the H200), closed when the buffer goes; -1: none. */
    int export_fd;
    /* A module above owns it (a static set's buffer, lib/session/): the
     * public curd_buffer_free refuses it, the module frees it itself. */
    bool owned;
    uint32_t next_free;   /* free list: index + 1 of the next, 0 ends */
    /* The public call that ended the slot's last generation
     * (curd_buffer_free, curd_session_release, ...), a static string, or
     * NULL before any: a stale handle's sentence names it. */
    const char *ended_by;
} curdi_handle_slot;

typedef struct curdi_handle_table {
    curdi_handle_slot *slots;
    uint32_t slot_count;  /* slots ever used: indices below are valid */
    uint32_t capacity;    /* slots allocated */
    uint32_t max_slots;   /* at most CURDI_HANDLE_MAX_SLOTS */
    uint32_t free_head;   /* index + 1 of the first free slot, 0: none */
    uint32_t live_count;
    uint32_t retired_count;
    uint16_t tag;
    uint64_t random_state; /* for first generations (splitmix64) */
} curdi_handle_table;

/* tag must be non-zero; max_slots 0 means CURDI_HANDLE_MAX_SLOTS (tests
 * pass a small number to reach the limit). Allocates nothing yet. */
curd_status curdi_handle_table_init(curdi_handle_table *table, uint16_t tag,
                                    uint32_t max_slots);
/* Frees the slot array; the table holds nothing afterwards. */
void curdi_handle_table_fini(curdi_handle_table *table);

/* Makes sure `more` slots can be inserted without allocating: grows the
 * slot array if the free list and spare capacity do not have them.
 * CURD_E_BUDGET past max_slots, CURD_E_OUT_OF_MEMORY if growing fails;
 * nothing changes on either. */
curd_status curdi_handle_table_reserve(curdi_handle_table *table,
                                       uint32_t more);
/* Inserts a live buffer into a slot that curdi_handle_table_reserve set
 * aside (the caller owns that reservation) and returns its id. Allocates
 * nothing, so it cannot fail. */
uint64_t curdi_handle_table_insert_reserved(curdi_handle_table *table,
                                           uint64_t device_ptr,
                                           size_t byte_len);
/* Reserves one slot (as reserve does: it may grow the table and fail) and
 * inserts into it. */
curd_status curdi_handle_table_insert(curdi_handle_table *table,
                                      uint64_t device_ptr, size_t byte_len,
                                      uint64_t *out_id);
/* Resolves an id to its live slot; CURD_E_STALE_HANDLE (with a sentence
 * saying why: zero, another device's, never issued, or let go, naming the
 * call that let it go when the slot's last generation was the handle's)
 * otherwise. `what` names the use in the message ("curd_buffer_free",
 * ...). The slot and generation numbers go to CURD_TRACE, not into the
 * sentence. */
curd_status curdi_handle_table_find(const curdi_handle_table *table,
                                    uint64_t id, const char *what,
                                    curdi_handle_slot **out_slot);
/* Frees the live slot of id (which the caller has just found): its
 * generation moves on, so id and every copy of it are stale from now on.
 * ended_by names the public call that let the buffer go (a static
 * string), for the sentence a later use of id gets. */
void curdi_handle_table_remove(curdi_handle_table *table, uint64_t id,
                               const char *ended_by);


/* A fresh non-zero tag for a new device (process-wide, thread-safe). */
uint16_t curdi_handle_table_tag_next(void);

/* ------------------------------------------------------------------------
 * Ids and the lookup, inline
 * ---------------------------------------------------------------------- */
#define CURDI_HANDLE_INDEX_MASK ((uint64_t)CURDI_HANDLE_MAX_SLOTS - 1u)

static inline uint64_t
curdi_handle_table_id_make(uint16_t tag, uint32_t generation, uint32_t index)
{
    return ((uint64_t)tag
            << (CURDI_HANDLE_INDEX_BITS + CURDI_HANDLE_GENERATION_BITS))
           | ((uint64_t)(generation & CURDI_HANDLE_MAX_GENERATION)
              << CURDI_HANDLE_INDEX_BITS)
           | ((uint64_t)index & CURDI_HANDLE_INDEX_MASK);
}

static inline uint32_t curdi_handle_table_id_index(uint64_t id)
{
    return (uint32_t)(id & CURDI_HANDLE_INDEX_MASK);
}

static inline uint32_t curdi_handle_table_id_generation(uint64_t id)
{
    return (uint32_t)((id >> CURDI_HANDLE_INDEX_BITS)
                      & CURDI_HANDLE_MAX_GENERATION);
}

static inline uint16_t curdi_handle_table_id_tag(uint64_t id)
{
    return (uint16_t)(id >> (CURDI_HANDLE_INDEX_BITS
                             + CURDI_HANDLE_GENERATION_BITS));
}

/* The live slot id names, or NULL exactly when curdi_handle_table_find
 * fails; it sets no error (for hot paths that word one only on failure).
 * Inline: the resident module runs it for every item of a batch. */
static inline curdi_handle_slot *
curdi_handle_table_lookup(const curdi_handle_table *table, uint64_t id)
{
    uint32_t index = curdi_handle_table_id_index(id);
    curdi_handle_slot *slot;
    /* The conditions of curdi_handle_table_find, without the sentences: a
     * live slot's generation is never 0, so a zero generation fails the
     * last comparison. */
    if (id == 0 || curdi_handle_table_id_tag(id) != table->tag
        || index >= table->slot_count)
        return NULL;
    slot = &table->slots[index];
    if (slot->state != CURDI_SLOT_LIVE
        || slot->generation != curdi_handle_table_id_generation(id))
        return NULL;
    return slot;
}

#endif
