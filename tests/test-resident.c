/* test-resident.c - the resident handle table and the resident room, on the
 * CPU.
 *
 * The table is pure; the room's budget, statistics and in-flight marks are
 * driven through a host-side curd_device whose device pool has a plain
 * malloc upstream, so every path that makes no driver call runs here
 * (under Valgrind in make check). The GPU half is test-resident-gpu.c. */
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "core/core.h"
#include "memory/pool.h"
#include "memory/resident.h"
#include "support/curd-test.h"

/* ------------------------------------------------------------------------
 * Ids
 * ---------------------------------------------------------------------- */

static void test_id_fields_round_trip(void)
{
    for (int round = 0; round < 10000; round++) {
        uint16_t tag = (uint16_t)g_test_rand_int_range(1, 65536);
        uint32_t generation =
            (uint32_t)g_test_rand_int_range(1, (gint32)CURDI_HANDLE_MAX_GENERATION + 1);
        uint32_t index =
            (uint32_t)g_test_rand_int_range(0, (gint32)CURDI_HANDLE_MAX_SLOTS);
        uint64_t id = curdi_handle_id_make(tag, generation, index);
        g_assert_cmpuint(id, !=, 0);
        g_assert_cmpuint(curdi_handle_id_tag(id), ==, tag);
        g_assert_cmpuint(curdi_handle_id_generation(id), ==, generation);
        g_assert_cmpuint(curdi_handle_id_index(id), ==, index);
    }
}

static void test_device_tags_are_nonzero_and_differ(void)
{
    uint16_t previous = curdi_handle_tag_next();
    g_assert_cmpuint(previous, !=, 0);
    /* Past a full cycle of the 16-bit counter: never 0, never the same
     * twice in a row. */
    for (int round = 0; round < 70000; round++) {
        uint16_t tag = curdi_handle_tag_next();
        g_assert_cmpuint(tag, !=, 0);
        g_assert_cmpuint(tag, !=, previous);
        previous = tag;
    }
}

/* ------------------------------------------------------------------------
 * The table
 * ---------------------------------------------------------------------- */

static void table_init(curdi_handle_table *table, uint16_t tag,
                       uint32_t max_slots)
{
    g_assert_cmpint(curdi_handle_table_init(table, tag, max_slots), ==,
                    CURD_OK);
}

static uint64_t table_insert(curdi_handle_table *table, uint64_t ptr,
                             size_t len)
{
    uint64_t id = 0;
    g_assert_cmpint(curdi_handle_table_insert(table, ptr, len, &id), ==,
                    CURD_OK);
    return id;
}

static void assert_live(const curdi_handle_table *table, uint64_t id,
                        uint64_t ptr, size_t len)
{
    curdi_handle_slot *slot = NULL;
    g_assert_cmpint(curdi_handle_table_find(table, id, "test", &slot), ==,
                    CURD_OK);
    g_assert_cmpuint(slot->device_ptr, ==, ptr);
    g_assert_cmpuint(slot->byte_len, ==, len);
    /* The silent lookup of the hot paths agrees. */
    g_assert_true(curdi_handle_table_lookup(table, id) == slot);
}

static void assert_stale(const curdi_handle_table *table, uint64_t id)
{
    curdi_handle_slot *slot = NULL;
    g_assert_cmpint(curdi_handle_table_find(table, id, "test", &slot), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_null(slot);
    g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
    g_assert_null(curdi_handle_table_lookup(table, id));
}

static void test_init_refuses_zero_tag_and_too_many_slots(void)
{
    curdi_handle_table table;
    g_assert_cmpint(curdi_handle_table_init(&table, 0, 0), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curdi_handle_table_init(&table, 1,
                                            CURDI_HANDLE_MAX_SLOTS + 1u),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curdi_handle_table_init(NULL, 1, 0), ==,
                    CURD_E_INVALID_ARGUMENT);
}

static void test_inserts_give_distinct_live_handles(void)
{
    curdi_handle_table table;
    uint64_t ids[100];
    table_init(&table, 7, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++) {
        ids[i] = table_insert(&table, 0x1000u * (i + 1), i + 1);
        for (size_t j = 0; j < i; j++)
            g_assert_cmpuint(ids[i], !=, ids[j]);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        assert_live(&table, ids[i], 0x1000u * (i + 1), i + 1);
    g_assert_cmpuint(table.live_count, ==, G_N_ELEMENTS(ids));
    curdi_handle_table_fini(&table);
}

static void test_zero_handle_is_stale(void)
{
    curdi_handle_table table;
    table_init(&table, 7, 0);
    assert_stale(&table, 0);
    (void)table_insert(&table, 0x1000, 1);
    assert_stale(&table, 0);
    curdi_handle_table_fini(&table);
}

static void test_freed_handle_is_stale_and_its_slot_gets_a_new_generation(void)
{
    curdi_handle_table table;
    uint64_t first;
    uint64_t second;
    table_init(&table, 9, 0);
    first = table_insert(&table, 0x1000, 16);
    curdi_handle_table_remove(&table, first);
    assert_stale(&table, first);
    g_assert_nonnull(strstr(curd_last_error(), "freed"));
    second = table_insert(&table, 0x2000, 32);
    /* The slot is reused (LIFO), under a new generation. */
    g_assert_cmpuint(curdi_handle_id_index(second), ==,
                     curdi_handle_id_index(first));
    g_assert_cmpuint(curdi_handle_id_generation(second), ==,
                     curdi_handle_id_generation(first) + 1u);
    assert_stale(&table, first);
    assert_live(&table, second, 0x2000, 32);
    curdi_handle_table_fini(&table);
}

static void test_handle_of_another_device_is_stale(void)
{
    curdi_handle_table mine;
    curdi_handle_table theirs;
    uint64_t their_id;
    table_init(&mine, 11, 0);
    table_init(&theirs, 12, 0);
    /* Same slot and generation on both: only the tag tells them apart. */
    (void)table_insert(&mine, 0x1000, 8);
    their_id = table_insert(&theirs, 0x9000, 8);
    assert_stale(&mine, their_id);
    g_assert_nonnull(strstr(curd_last_error(), "another device"));
    curdi_handle_table_fini(&mine);
    curdi_handle_table_fini(&theirs);
}

static void test_forged_handles_are_stale(void)
{
    curdi_handle_table table;
    uint64_t ids[64];
    table_init(&table, 21, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        ids[i] = table_insert(&table, 0x1000u * (i + 1), 4);
    /* A handful of freed ones among them. */
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i += 5)
        curdi_handle_table_remove(&table, ids[i]);

    for (int round = 0; round < 100000; round++) {
        uint64_t forged = ((uint64_t)g_test_rand_int() << 32) | g_test_rand_int();
        bool live = false;
        curdi_handle_slot *slot;
        /* Half of them with this table's tag, to get past the first
         * check. */
        if (round % 2 == 0)
            forged = curdi_handle_id_make(
                21, curdi_handle_id_generation(forged),
                curdi_handle_id_index(forged) % 128u);
        for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
            live = live || (forged == ids[i] && i % 5 != 0);
        if (live)
            continue;
        g_assert_cmpint(curdi_handle_table_find(&table, forged, "test", &slot),
                        ==, CURD_E_STALE_HANDLE);
    }
    /* Every bit flip of a live handle is stale (unless it happens to be
     * another live handle: first generations are random, so a flip of an
     * index bit lands on a neighbour's generation only by a 1-in-2^23
     * accident). */
    for (size_t i = 1; i < G_N_ELEMENTS(ids); i += 5) {
        for (unsigned bit = 0; bit < 64; bit++) {
            uint64_t flipped = ids[i] ^ ((uint64_t)1 << bit);
            bool other_live = false;
            for (size_t j = 0; j < G_N_ELEMENTS(ids); j++)
                other_live = other_live || (flipped == ids[j] && j % 5 != 0);
            if (!other_live)
                assert_stale(&table, flipped);
        }
        assert_live(&table, ids[i], 0x1000u * (i + 1), 4);
    }
    /* Made-up handles by counting (this tag, small generations, every
     * index) are stale. */
    for (uint32_t index = 0; index < 128; index++)
        for (uint32_t generation = 1; generation < 4; generation++) {
            uint64_t guess = curdi_handle_id_make(21, generation, index);
            bool other_live = false;
            for (size_t j = 0; j < G_N_ELEMENTS(ids); j++)
                other_live = other_live || (guess == ids[j] && j % 5 != 0);
            if (!other_live)
                assert_stale(&table, guess);
        }
    curdi_handle_table_fini(&table);
}

static void test_table_grows_and_keeps_every_handle(void)
{
    curdi_handle_table table;
    enum { COUNT = 20000 };
    uint64_t *ids = g_new(uint64_t, COUNT);
    table_init(&table, 3, 0);
    for (size_t i = 0; i < COUNT; i++) {
        ids[i] = table_insert(&table, (uint64_t)i * 256u + 256u, i + 1);
        if (i % 997 == 0) {
            /* Spot checks while it grows. */
            for (size_t j = 0; j <= i; j += 101)
                assert_live(&table, ids[j], (uint64_t)j * 256u + 256u, j + 1);
        }
    }
    g_assert_cmpuint(table.capacity, >=, COUNT);
    for (size_t i = 0; i < COUNT; i++)
        assert_live(&table, ids[i], (uint64_t)i * 256u + 256u, i + 1);
    /* Free every other one and refill: the freed slots come back, the old
     * handles stay stale. */
    for (size_t i = 0; i < COUNT; i += 2)
        curdi_handle_table_remove(&table, ids[i]);
    uint32_t slots_before = table.slot_count;
    for (size_t i = 0; i < COUNT; i += 2) {
        uint64_t id = table_insert(&table, 1, 1);
        g_assert_cmpuint(curdi_handle_id_index(id), <, slots_before);
    }
    g_assert_cmpuint(table.slot_count, ==, slots_before);
    for (size_t i = 0; i < COUNT; i++) {
        if (i % 2 == 0)
            assert_stale(&table, ids[i]);
        else
            assert_live(&table, ids[i], (uint64_t)i * 256u + 256u, i + 1);
    }
    curdi_handle_table_fini(&table);
    g_free(ids);
}

static void test_full_table_is_a_budget_error_and_changes_nothing(void)
{
    curdi_handle_table table;
    uint64_t ids[5];
    uint64_t id = 0;
    table_init(&table, 5, 5);
    for (size_t i = 0; i < 5; i++)
        ids[i] = table_insert(&table, 0x100u * (i + 1), 1);
    g_assert_cmpint(curdi_handle_table_insert(&table, 0x9999, 1, &id), ==,
                    CURD_E_BUDGET);
    g_assert_cmpuint(id, ==, 0);
    g_assert_nonnull(strstr(curd_last_error(), "5 buffers live"));
    g_assert_cmpint(curdi_handle_table_reserve(&table, 1), ==, CURD_E_BUDGET);
    g_assert_cmpuint(table.live_count, ==, 5);
    for (size_t i = 0; i < 5; i++)
        assert_live(&table, ids[i], 0x100u * (i + 1), 1);
    /* Freeing one makes room again. */
    curdi_handle_table_remove(&table, ids[2]);
    g_assert_cmpint(curdi_handle_table_reserve(&table, 1), ==, CURD_OK);
    (void)table_insert(&table, 0x7777, 1);
    curdi_handle_table_fini(&table);
}

static void test_reserve_lets_that_many_inserts_succeed_without_growing(void)
{
    curdi_handle_table table;
    table_init(&table, 5, 0);
    g_assert_cmpint(curdi_handle_table_reserve(&table, 300), ==, CURD_OK);
    uint32_t capacity = table.capacity;
    curdi_handle_slot *slots = table.slots;
    g_assert_cmpuint(capacity, >=, 300);
    for (size_t i = 0; i < 300; i++)
        (void)table_insert(&table, i + 1, 1);
    g_assert_cmpuint(table.capacity, ==, capacity);
    g_assert_true(table.slots == slots);
    curdi_handle_table_fini(&table);
}

/* What curdi_resident_commit relies on: slots reserved while the table
 * could still grow are there to insert into once it cannot, even after a
 * free retires a slot in between; the insert allocates nothing. */
static void test_reserved_inserts_need_no_growth_even_across_retirement(void)
{
    curdi_handle_table table;
    uint64_t ids[4];
    table_init(&table, 6, 4);
    g_assert_cmpint(curdi_handle_table_reserve(&table, 4), ==, CURD_OK);
    g_assert_cmpuint(table.capacity, ==, 4);
    curdi_handle_slot *slots = table.slots;
    ids[0] = curdi_handle_table_insert_reserved(&table, 0x100, 1);
    ids[1] = curdi_handle_table_insert_reserved(&table, 0x200, 2);
    /* One free retires its slot (as after 2^24 - 1 buffers), one does not;
     * together they leave exactly the two reserved slots spare. */
    table.slots[curdi_handle_id_index(ids[0])].generation =
        CURDI_HANDLE_MAX_GENERATION;
    ids[0] = curdi_handle_id_make(6, CURDI_HANDLE_MAX_GENERATION,
                                  curdi_handle_id_index(ids[0]));
    curdi_handle_table_remove(&table, ids[0]);
    curdi_handle_table_remove(&table, ids[1]);
    g_assert_cmpuint(table.retired_count, ==, 1);
    ids[2] = curdi_handle_table_insert_reserved(&table, 0x300, 3);
    ids[3] = curdi_handle_table_insert_reserved(&table, 0x400, 4);
    g_assert_cmpuint(table.capacity, ==, 4);
    g_assert_true(table.slots == slots);
    assert_live(&table, ids[2], 0x300, 3);
    assert_live(&table, ids[3], 0x400, 4);
    assert_stale(&table, ids[0]);
    assert_stale(&table, ids[1]);
    /* Only one more fits now: the reservation made room, not this call. */
    g_assert_cmpint(curdi_handle_table_reserve(&table, 2), ==, CURD_E_BUDGET);
    g_assert_cmpint(curdi_handle_table_reserve(&table, 1), ==, CURD_OK);
    curdi_handle_table_fini(&table);
}

static void test_slot_retires_instead_of_wrapping_its_generation(void)
{
    curdi_handle_table table;
    uint64_t id;
    uint64_t next;
    table_init(&table, 5, 0);
    id = table_insert(&table, 0x1000, 1);
    /* Bring slot 0 to its last generation, as 2^24 - 2 frees would. */
    curdi_handle_table_remove(&table, id);
    table.slots[0].generation = CURDI_HANDLE_MAX_GENERATION;
    id = table_insert(&table, 0x2000, 1);
    g_assert_cmpuint(curdi_handle_id_index(id), ==, 0);
    g_assert_cmpuint(curdi_handle_id_generation(id), ==,
                     CURDI_HANDLE_MAX_GENERATION);
    assert_live(&table, id, 0x2000, 1);
    curdi_handle_table_remove(&table, id);
    g_assert_cmpuint(table.slots[0].state, ==, CURDI_SLOT_RETIRED);
    g_assert_cmpuint(table.retired_count, ==, 1);
    assert_stale(&table, id);
    /* Generation 1 of the slot (what a wrap would give) is stale too. */
    assert_stale(&table, curdi_handle_id_make(5, 1, 0));
    next = table_insert(&table, 0x3000, 1);
    g_assert_cmpuint(curdi_handle_id_index(next), ==, 1);
    assert_stale(&table, id);
    curdi_handle_table_fini(&table);
}

/* A model run: random inserts and removes against a reference list. */
static void test_random_insert_remove_matches_a_model(void)
{
    curdi_handle_table table;
    enum { OPS = 50000, MAX_LIVE = 600 };
    uint64_t live_ids[MAX_LIVE];
    uint64_t live_ptrs[MAX_LIVE];
    size_t live = 0;
    GArray *dead = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    table_init(&table, 77, 0);
    for (int op = 0; op < OPS; op++) {
        bool insert = live == 0 || (live < MAX_LIVE && g_test_rand_bit());
        if (insert) {
            uint64_t ptr = ((uint64_t)g_test_rand_int() << 8) | 1u;
            live_ids[live] = table_insert(&table, ptr, (size_t)op + 1u);
            live_ptrs[live] = ptr;
            live++;
        } else {
            size_t pick = (size_t)g_test_rand_int_range(0, (gint32)live);
            curdi_handle_table_remove(&table, live_ids[pick]);
            g_array_append_val(dead, live_ids[pick]);
            live_ids[pick] = live_ids[live - 1];
            live_ptrs[pick] = live_ptrs[live - 1];
            live--;
        }
        g_assert_cmpuint(table.live_count, ==, live);
    }
    for (size_t i = 0; i < live; i++) {
        curdi_handle_slot *slot;
        g_assert_cmpint(curdi_handle_table_find(&table, live_ids[i], "t", &slot),
                        ==, CURD_OK);
        g_assert_cmpuint(slot->device_ptr, ==, live_ptrs[i]);
    }
    for (guint i = 0; i < dead->len; i++)
        assert_stale(&table, g_array_index(dead, uint64_t, i));
    g_array_free(dead, TRUE);
    curdi_handle_table_fini(&table);
}

/* The silent lookup fails exactly when find does, on made-up ids near the
 * live ones: every tag, generation and index a bit off. */
static void test_lookup_agrees_with_find_on_any_id(void)
{
    curdi_handle_table table;
    uint64_t ids[64];
    table_init(&table, 300, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        ids[i] = table_insert(&table, 0x1000u * (i + 1u), i + 1u);
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i += 3)
        curdi_handle_table_remove(&table, ids[i]);
    for (int round = 0; round < 100000; round++) {
        uint64_t base = ids[g_test_rand_int_range(0, G_N_ELEMENTS(ids))];
        uint16_t tag = (uint16_t)(curdi_handle_id_tag(base)
                                  + g_test_rand_int_range(-1, 2));
        uint32_t generation = curdi_handle_id_generation(base)
                              + (uint32_t)g_test_rand_int_range(-1, 2);
        uint32_t index = curdi_handle_id_index(base)
                         + (uint32_t)g_test_rand_int_range(-2, 3);
        uint64_t id = g_test_rand_int_range(0, 50) == 0
                          ? (uint64_t)g_test_rand_int_range(0, 4)
                          : curdi_handle_id_make(tag, generation, index);
        curdi_handle_slot *found = NULL;
        curd_status status = curdi_handle_table_find(&table, id, "t", &found);
        curdi_handle_slot *looked_up = curdi_handle_table_lookup(&table, id);
        if (status == CURD_OK)
            g_assert_true(looked_up == found);
        else
            g_assert_null(looked_up);
    }
    curdi_handle_table_fini(&table);
}

/* ------------------------------------------------------------------------
 * The room, on a host-side device
 * ---------------------------------------------------------------------- */

static curd_status host_alloc(void *context, size_t byte_len,
                              uint64_t *out_address)
{
    (void)context;
    void *memory = malloc(byte_len);
    if (memory == NULL)
        return CURD_E_OUT_OF_MEMORY;
    *out_address = (uint64_t)(uintptr_t)memory;
    return CURD_OK;
}

static curd_status host_free(void *context, uint64_t address, size_t byte_len)
{
    (void)context;
    (void)byte_len;
    free((void *)(uintptr_t)address);
    return CURD_OK;
}

static curd_device *room_open(uint64_t limit_bytes)
{
    curd_device *device = g_new0(curd_device, 1);
    curdi_upstream upstream = {host_alloc, host_free, NULL, NULL};
    curdi_pool_config config = {.name = "device", .cache_budget_bytes = 1u << 20};
    curd_device_options_init(&device->options);
    device->options.resident_limit_bytes = limit_bytes;
    g_assert_cmpint(curdi_pool_create(&upstream, &config, &device->device_pool),
                    ==, CURD_OK);
    g_assert_cmpint(curdi_resident_open(device), ==, CURD_OK);
    g_assert_nonnull(device->resident);
    /* Open as far as every entry point's check can tell. */
    g_assert_cmpint(curdi_core_register(device), ==, CURD_OK);
    return device;
}

static void room_close(curd_device *device)
{
    g_assert_true(curdi_core_unregister(device));
    curdi_resident_close(device);
    g_assert_null(device->resident);
    curdi_pool_destroy(device->device_pool);
    g_free(device);
}

/* curd_buffer_alloc's steps without the driver: reserve, pool, commit. */
static curd_status room_alloc(curd_device *device, size_t byte_len,
                              uint64_t total, uint64_t free_bytes,
                              uint64_t *out_id)
{
    uint64_t ptr = 0;
    size_t class_bytes = 0;
    curd_status status =
        curdi_resident_reserve(device, "test", byte_len, total, free_bytes);
    if (status != CURD_OK)
        return status;
    status = curdi_pool_acquire(device->device_pool, byte_len, &ptr,
                                &class_bytes);
    if (status != CURD_OK) {
        curdi_resident_unreserve(device, byte_len);
        return status;
    }
    *out_id = curdi_resident_commit(device, byte_len, ptr);
    return CURD_OK;
}

static void room_free(curd_device *device, uint64_t id)
{
    uint64_t ptr = 0;
    g_assert_cmpint(curdi_resident_take(device, "test", id, &ptr), ==, CURD_OK);
    g_assert_cmpint(curdi_pool_release(device->device_pool, ptr), ==, CURD_OK);
}

static void test_budget_is_nine_tenths_of_total_capped_by_free_plus_resident(void)
{
    const uint64_t total = 10000;
    curd_device *device = room_open(0);
    uint64_t a = 0, b = 0, c = 0;
    /* Plenty free: 9/10 of total = 9000 is the budget. */
    g_assert_cmpint(room_alloc(device, 9001, total, total, &a), ==,
                    CURD_E_BUDGET);
    g_assert_cmpint(room_alloc(device, 9000, total, total, &a), ==, CURD_OK);
    room_free(device, a);
    /* 4000 free: 9/10 * 4000 + resident. */
    g_assert_cmpint(room_alloc(device, 3000, total, 4000, &a), ==, CURD_OK);
    /* Now 3000 resident and (say) 1000 free: 900 + 3000 = 3900 allowed. */
    g_assert_cmpint(room_alloc(device, 901, total, 1000, &b), ==,
                    CURD_E_BUDGET);
    g_assert_cmpint(room_alloc(device, 900, total, 1000, &b), ==, CURD_OK);
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 3900);
    g_assert_cmpint(room_alloc(device, 1, total, 0, &c), ==, CURD_E_BUDGET);
    room_free(device, a);
    room_free(device, b);
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 0);
    room_close(device);
}

static void test_over_budget_names_the_numbers_and_changes_nothing(void)
{
    curd_device *device = room_open(5000);
    uint64_t a = 0, b = 0;
    curd_stat_family bytes_before, buffers_before, bytes_after, buffers_after;
    curd_pool_stats pool_before, pool_after;
    g_assert_cmpint(room_alloc(device, 4000, 1000000, 1000000, &a), ==, CURD_OK);
    curdi_resident_stats(device, &bytes_before, &buffers_before);
    curdi_pool_stats(device->device_pool, &pool_before);
    g_assert_cmpint(room_alloc(device, 1001, 1000000, 1000000, &b), ==,
                    CURD_E_BUDGET);
    const char *message = curd_last_error();
    g_assert_nonnull(strstr(message, "1001 bytes"));
    g_assert_nonnull(strstr(message, "5001 bytes"));
    g_assert_nonnull(strstr(message, "budget of 5000 bytes"));
    g_assert_nonnull(strstr(message, "limit 5000"));
    g_assert_nonnull(strstr(message, "Fix: "));
    curdi_resident_stats(device, &bytes_after, &buffers_after);
    curdi_pool_stats(device->device_pool, &pool_after);
    g_assert_cmpmem(&bytes_before, sizeof bytes_before, &bytes_after,
                    sizeof bytes_after);
    g_assert_cmpmem(&buffers_before, sizeof buffers_before, &buffers_after,
                    sizeof buffers_after);
    g_assert_cmpuint(pool_before.upstream_allocs, ==, pool_after.upstream_allocs);
    g_assert_cmpuint(pool_before.live_bytes.current, ==,
                     pool_after.live_bytes.current);
    /* Exactly at the limit is fine. */
    g_assert_cmpint(room_alloc(device, 1000, 1000000, 1000000, &b), ==, CURD_OK);
    room_close(device);
}

static void test_a_size_that_overflows_the_budget_sum_is_refused(void)
{
    curd_device *device = room_open(0);
    uint64_t a = 0, b = 0;
    g_assert_cmpint(room_alloc(device, 100, UINT64_MAX, UINT64_MAX, &a), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_resident_reserve(device, "test", SIZE_MAX, UINT64_MAX,
                                           UINT64_MAX),
                    ==, CURD_E_BUDGET);
    g_assert_nonnull(strstr(curd_last_error(), "more than"));
    (void)b;
    room_close(device);
}

static void test_reservations_count_against_the_budget_until_released(void)
{
    curd_device *device = room_open(1000);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           600, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    /* A second concurrent allocation sees the first one's bytes. */
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           401, 1u << 20, 1u << 20),
                    ==, CURD_E_BUDGET);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           400, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    /* Reservations are not resident bytes. */
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 0);
    curdi_resident_unreserve(device, 600);
    curdi_resident_unreserve(device, 400);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           1000, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    curdi_resident_unreserve(device, 1000);
    room_close(device);
}

/* A block acquired after a successful reserve always gets a live handle:
 * other allocations and frees between the reserve and the commit (the pool
 * call runs without the table lock) cannot take the reserved slot. */
static void test_commit_names_a_live_buffer_whatever_ran_meanwhile(void)
{
    curd_device *device = room_open(0);
    uint64_t ptr[2] = {0, 0};
    size_t class_bytes = 0;
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           100, 1u << 30, 1u << 30),
                    ==, CURD_OK);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           200, 1u << 30, 1u << 30),
                    ==, CURD_OK);
    for (size_t i = 0; i < 2; i++)
        g_assert_cmpint(curdi_pool_acquire(device->device_pool, 100 * (i + 1),
                                           &ptr[i], &class_bytes),
                        ==, CURD_OK);
    /* Enough traffic to grow the table past its first 64 slots and shrink
     * back. */
    uint64_t others[200];
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++)
        g_assert_cmpint(room_alloc(device, 8, 1u << 30, 1u << 30, &others[i]),
                        ==, CURD_OK);
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++)
        room_free(device, others[i]);
    uint64_t ids[2];
    for (size_t i = 0; i < 2; i++) {
        ids[i] = curdi_resident_commit(device, 100 * (i + 1), ptr[i]);
        g_assert_cmpuint(ids[i], !=, 0);
    }
    curd_stat_family bytes, buffers;
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 300);
    g_assert_cmpuint(buffers.current, ==, 2);
    for (size_t i = 0; i < 2; i++) {
        uint64_t taken = 0;
        g_assert_cmpint(curdi_resident_take(device, "test", ids[i], &taken), ==,
                        CURD_OK);
        g_assert_cmpuint(taken, ==, ptr[i]);
        g_assert_cmpint(curdi_pool_release(device->device_pool, taken), ==,
                        CURD_OK);
    }
    room_close(device);
}

static void test_statistics_follow_allocations_frees_and_reset(void)
{
    curd_device *device = room_open(0);
    uint64_t ids[10];
    curd_stat_family bytes, buffers;
    for (size_t i = 0; i < 10; i++)
        g_assert_cmpint(room_alloc(device, 100 * (i + 1), 1u << 30, 1u << 30,
                                   &ids[i]),
                        ==, CURD_OK);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 5500);
    g_assert_cmpuint(bytes.peak, ==, 5500);
    g_assert_cmpuint(bytes.allocated, ==, 5500);
    g_assert_cmpuint(bytes.freed, ==, 0);
    g_assert_cmpuint(buffers.current, ==, 10);
    for (size_t i = 0; i < 5; i++)
        room_free(device, ids[i]);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 5500 - 1500);
    g_assert_cmpuint(bytes.peak, ==, 5500);
    g_assert_cmpuint(bytes.freed, ==, 1500);
    g_assert_cmpuint(buffers.current, ==, 5);
    g_assert_cmpuint(buffers.peak, ==, 10);
    g_assert_cmpuint(buffers.freed, ==, 5);
    curdi_resident_stats_reset(device);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 4000);
    g_assert_cmpuint(bytes.peak, ==, 4000);
    g_assert_cmpuint(bytes.allocated, ==, 0);
    g_assert_cmpuint(bytes.freed, ==, 0);
    g_assert_cmpuint(buffers.peak, ==, 5);
    room_close(device);
}

static void test_buffer_in_use_cannot_be_taken_until_its_use_ends(void)
{
    curd_device *device = room_open(0);
    uint64_t id = 0;
    uint64_t ptr = 0;
    curdi_resident_use use;
    g_assert_cmpint(room_alloc(device, 64, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &use), ==,
                    CURD_OK);
    g_assert_cmpuint(use.id, ==, id);
    g_assert_cmpuint(use.byte_len, ==, 64);
    g_assert_false(use.async_pending);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "other threads"));
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 64);
    curdi_resident_use_end(device, &use, 1);
    room_free(device, id);
    room_close(device);
}

static void test_async_marked_buffer_is_busy_until_its_uploads_complete(void)
{
    curd_device *device = room_open(0);
    uint64_t id = 0;
    uint64_t ptr = 0;
    curdi_resident_use use, again;
    g_assert_cmpint(room_alloc(device, 64, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &use), ==,
                    CURD_OK);
    curdi_resident_async_begin(device, id);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "curd_device_sync_uploads"));
    /* Later uses see the pending upload, to order after it. */
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &again),
                    ==, CURD_OK);
    g_assert_true(again.async_pending);
    curdi_resident_use_end(device, &again, 1);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    curdi_resident_async_end(device, id);
    room_free(device, id);
    room_close(device);
}

static void test_use_begin_marks_all_items_or_none(void)
{
    curd_device *device = room_open(0);
    uint64_t ids[4];
    uint64_t batch[5];
    curdi_resident_use uses[5];
    uint64_t ptr;
    for (size_t i = 0; i < 4; i++)
        g_assert_cmpint(room_alloc(device, 32, 1u << 20, 1u << 20, &ids[i]),
                        ==, CURD_OK);
    room_free(device, ids[3]);
    batch[0] = ids[0];
    batch[1] = ids[1];
    batch[2] = ids[0]; /* twice: marked twice */
    batch[3] = ids[2];
    batch[4] = ids[3]; /* stale */
    g_assert_cmpint(curdi_resident_use_begin(device, "batch", batch, 5, uses),
                    ==, CURD_E_STALE_HANDLE);
    g_assert_nonnull(strstr(curd_last_error(), "batch item 4"));
    /* None left marked: each can be taken. */
    for (size_t i = 0; i < 3; i++) {
        g_assert_cmpint(curdi_resident_take(device, "test",
                                            ids[i], &ptr), ==, CURD_OK);
        g_assert_cmpint(curdi_pool_release(device->device_pool, ptr), ==,
                        CURD_OK);
    }
    room_close(device);
}

static void test_a_buffer_named_twice_needs_both_uses_ended(void)
{
    curd_device *device = room_open(0);
    uint64_t id = 0;
    uint64_t batch[2];
    uint64_t ptr;
    curdi_resident_use uses[2];
    g_assert_cmpint(room_alloc(device, 32, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    batch[0] = batch[1] = id;
    g_assert_cmpint(curdi_resident_use_begin(device, "batch", batch, 2, uses),
                    ==, CURD_OK);
    curdi_resident_use_end(device, &uses[0], 1);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    curdi_resident_use_end(device, &uses[1], 1);
    room_free(device, id);
    room_close(device);
}

static void test_taking_a_stale_handle_changes_nothing(void)
{
    curd_device *device = room_open(0);
    uint64_t id = 0, other = 0, ptr = 0;
    curd_stat_family before, after;
    g_assert_cmpint(room_alloc(device, 32, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(room_alloc(device, 48, 1u << 20, 1u << 20, &other), ==,
                    CURD_OK);
    room_free(device, id);
    curdi_resident_stats(device, &before, NULL);
    g_assert_cmpint(curdi_resident_take(device, "test", id, &ptr), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curdi_resident_take(device, "test", 0, &ptr), ==,
                    CURD_E_STALE_HANDLE);
    curdi_resident_stats(device, &after, NULL);
    g_assert_cmpmem(&before, sizeof before, &after, sizeof after);
    g_assert_cmpuint(ptr, ==, 0);
    room_close(device);
}

static void test_close_gives_every_live_buffer_back_to_the_pool(void)
{
    curd_device *device = room_open(0);
    curd_pool_stats stats;
    uint64_t id;
    for (size_t i = 0; i < 50; i++)
        g_assert_cmpint(room_alloc(device, 1000 + i, 1u << 30, 1u << 30, &id),
                        ==, CURD_OK);
    curdi_pool_stats(device->device_pool, &stats);
    g_assert_cmpuint(stats.live_blocks.current, ==, 50);
    curdi_resident_close(device);
    curdi_pool_stats(device->device_pool, &stats);
    g_assert_cmpuint(stats.live_blocks.current, ==, 0);
    curdi_pool_destroy(device->device_pool);
    g_free(device);
}

/* ------------------------------------------------------------------------
 * Public entry points without a device
 * ---------------------------------------------------------------------- */

static void test_public_entries_refuse_a_null_device(void)
{
    curd_buffer buffer = {0};
    size_t size = 7;
    uint64_t value = 7;
    g_assert_cmpint(curd_buffer_alloc(NULL, 16, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(buffer.id, ==, 0);
    g_assert_cmpint(curd_buffer_free(NULL, buffer), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_buffer_size(NULL, buffer, &size), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(size, ==, 7);
    g_assert_cmpint(curd_buffer_device_ptr(NULL, buffer, &value), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_resident_bytes(NULL, &value), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(value, ==, 7);
    g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
}

static void test_size_and_pointer_lookups_resolve_only_live_handles(void)
{
    curd_device *device = room_open(0);
    uint64_t id = 0;
    size_t size = 0;
    uint64_t ptr = 0;
    g_assert_cmpint(room_alloc(device, 4321, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, &size), ==,
                    CURD_OK);
    g_assert_cmpuint(size, ==, 4321);
    g_assert_cmpint(curd_buffer_device_ptr(device, (curd_buffer){id}, &ptr), ==,
                    CURD_OK);
    g_assert_cmpuint(ptr, !=, 0);
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_resident_bytes(device, &ptr), ==, CURD_OK);
    g_assert_cmpuint(ptr, ==, 4321);
    room_free(device, id);
    size = 99;
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, &size), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpuint(size, ==, 99);
    room_close(device);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/resident/ids/fields-round-trip", test_id_fields_round_trip);
    g_test_add_func("/resident/ids/device-tags-are-nonzero-and-differ",
                    test_device_tags_are_nonzero_and_differ);
    g_test_add_func("/resident/table/init-refuses-zero-tag-and-too-many-slots",
                    test_init_refuses_zero_tag_and_too_many_slots);
    g_test_add_func("/resident/table/inserts-give-distinct-live-handles",
                    test_inserts_give_distinct_live_handles);
    g_test_add_func("/resident/table/zero-handle-is-stale",
                    test_zero_handle_is_stale);
    g_test_add_func(
        "/resident/table/freed-handle-is-stale-and-its-slot-gets-a-new-generation",
        test_freed_handle_is_stale_and_its_slot_gets_a_new_generation);
    g_test_add_func("/resident/table/handle-of-another-device-is-stale",
                    test_handle_of_another_device_is_stale);
    g_test_add_func("/resident/table/forged-handles-are-stale",
                    test_forged_handles_are_stale);
    g_test_add_func("/resident/table/grows-and-keeps-every-handle",
                    test_table_grows_and_keeps_every_handle);
    g_test_add_func("/resident/table/full-table-is-a-budget-error-and-changes-nothing",
                    test_full_table_is_a_budget_error_and_changes_nothing);
    g_test_add_func(
        "/resident/table/reserve-lets-that-many-inserts-succeed-without-growing",
        test_reserve_lets_that_many_inserts_succeed_without_growing);
    g_test_add_func("/resident/table/reserved-inserts-need-no-growth-even-across-retirement",
                    test_reserved_inserts_need_no_growth_even_across_retirement);
    g_test_add_func("/resident/table/slot-retires-instead-of-wrapping-its-generation",
                    test_slot_retires_instead_of_wrapping_its_generation);
    g_test_add_func("/resident/table/random-insert-remove-matches-a-model",
                    test_random_insert_remove_matches_a_model);
    g_test_add_func("/resident/table/lookup-agrees-with-find-on-any-id",
                    test_lookup_agrees_with_find_on_any_id);
    g_test_add_func(
        "/resident/room/budget-is-nine-tenths-of-total-capped-by-free-plus-resident",
        test_budget_is_nine_tenths_of_total_capped_by_free_plus_resident);
    g_test_add_func("/resident/room/over-budget-names-the-numbers-and-changes-nothing",
                    test_over_budget_names_the_numbers_and_changes_nothing);
    g_test_add_func("/resident/room/a-size-that-overflows-the-budget-sum-is-refused",
                    test_a_size_that_overflows_the_budget_sum_is_refused);
    g_test_add_func(
        "/resident/room/reservations-count-against-the-budget-until-released",
        test_reservations_count_against_the_budget_until_released);
    g_test_add_func("/resident/room/commit-names-a-live-buffer-whatever-ran-meanwhile",
                    test_commit_names_a_live_buffer_whatever_ran_meanwhile);
    g_test_add_func("/resident/room/statistics-follow-allocations-frees-and-reset",
                    test_statistics_follow_allocations_frees_and_reset);
    g_test_add_func("/resident/room/buffer-in-use-cannot-be-taken-until-its-use-ends",
                    test_buffer_in_use_cannot_be_taken_until_its_use_ends);
    g_test_add_func(
        "/resident/room/async-marked-buffer-is-busy-until-its-uploads-complete",
        test_async_marked_buffer_is_busy_until_its_uploads_complete);
    g_test_add_func("/resident/room/use-begin-marks-all-items-or-none",
                    test_use_begin_marks_all_items_or_none);
    g_test_add_func("/resident/room/a-buffer-named-twice-needs-both-uses-ended",
                    test_a_buffer_named_twice_needs_both_uses_ended);
    g_test_add_func("/resident/room/taking-a-stale-handle-changes-nothing",
                    test_taking_a_stale_handle_changes_nothing);
    g_test_add_func("/resident/room/close-gives-every-live-buffer-back-to-the-pool",
                    test_close_gives_every_live_buffer_back_to_the_pool);
    g_test_add_func("/resident/api/public-entries-refuse-a-null-device",
                    test_public_entries_refuse_a_null_device);
    g_test_add_func("/resident/api/size-and-pointer-lookups-resolve-only-live-handles",
                    test_size_and_pointer_lookups_resolve_only_live_handles);
    return g_test_run();
}
