/* test-handle-table.c - the handle table (lib/memory/handle_table.c), a
 * pure module, on the CPU: the id fields, the device tags, and the table
 * against the rules handle_table.h states (stale handles of every kind,
 * growth, the budget of slots, reservations, retirement) and a model of
 * random inserts and removals. */
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "memory/handle_table.h"
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
        uint64_t id = curdi_handle_table_id_make(tag, generation, index);
        g_assert_cmpuint(id, !=, 0);
        g_assert_cmpuint(curdi_handle_table_id_tag(id), ==, tag);
        g_assert_cmpuint(curdi_handle_table_id_generation(id), ==, generation);
        g_assert_cmpuint(curdi_handle_table_id_index(id), ==, index);
    }
}

static void test_device_tags_are_nonzero_and_differ(void)
{
    uint16_t previous = curdi_handle_table_tag_next();
    g_assert_cmpuint(previous, !=, 0);
    /* Past a full cycle of the 16-bit counter: never 0, never the same
     * twice in a row. */
    for (int round = 0; round < 70000; round++) {
        uint16_t tag = curdi_handle_table_tag_next();
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
    curdi_handle_table_remove(&table, first, "curd_buffer_free");
    assert_stale(&table, first);
    g_assert_nonnull(strstr(curd_last_error(), "freed"));
    second = table_insert(&table, 0x2000, 32);
    /* The slot is reused (LIFO), under a new generation. */
    g_assert_cmpuint(curdi_handle_table_id_index(second), ==,
                     curdi_handle_table_id_index(first));
    g_assert_cmpuint(curdi_handle_table_id_generation(second), ==,
                     curdi_handle_table_id_generation(first) + 1u);
    assert_stale(&table, first);
    assert_live(&table, second, 0x2000, 32);
    curdi_handle_table_fini(&table);
}

/* A stale handle's sentence names the call that let its buffer go, when
 * that was the slot's last ending, and never the slot or generation
 * numbers (those go to CURD_TRACE); an older handle of the same slot gets
 * a sentence that names no one call. */
static void test_stale_sentence_names_the_call_that_let_it_go(void)
{
    curdi_handle_table table;
    table_init(&table, 11, 0);
    uint64_t released = table_insert(&table, 0x1000, 16);
    curdi_handle_table_remove(&table, released, "curd_session_release");
    assert_stale(&table, released);
    const char *sentence = curd_last_error();
    g_assert_nonnull(strstr(sentence, "let go by curd_session_release()"));
    g_assert_null(strstr(sentence, "curd_buffer_free"));
    g_assert_null(strstr(sentence, "slot"));
    g_assert_null(strstr(sentence, "generation"));
    /* The slot serves a new buffer, which curd_buffer_free ends. */
    uint64_t freed = table_insert(&table, 0x2000, 32);
    g_assert_cmpuint(curdi_handle_table_id_index(freed), ==,
                     curdi_handle_table_id_index(released));
    curdi_handle_table_remove(&table, freed, "curd_buffer_free");
    assert_stale(&table, freed);
    g_assert_nonnull(strstr(curd_last_error(), "let go by curd_buffer_free()"));
    g_assert_null(strstr(curd_last_error(), "slot"));
    assert_stale(&table, released);
    g_assert_null(strstr(curd_last_error(), "let go by"));
    g_assert_null(strstr(curd_last_error(), "generation"));
    /* A static set's buffer, ended with its set. */
    uint64_t in_set = table_insert(&table, 0x3000, 8);
    curdi_handle_table_remove(&table, in_set, "curd_session_release_static");
    assert_stale(&table, in_set);
    g_assert_nonnull(strstr(curd_last_error(),
                            "let go by curd_session_release_static()"));
    g_assert_nonnull(strstr(curd_last_error(), "curd_session_upload_static"));
    /* Never issued: no numbers either. */
    uint64_t ahead = curdi_handle_table_id_make(
        11, curdi_handle_table_id_generation(in_set) + 5u,
        curdi_handle_table_id_index(in_set));
    assert_stale(&table, ahead);
    g_assert_nonnull(strstr(curd_last_error(), "never issued"));
    g_assert_null(strstr(curd_last_error(), "slot"));
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
        curdi_handle_table_remove(&table, ids[i], "curd_buffer_free");

    for (int round = 0; round < 100000; round++) {
        uint64_t forged = ((uint64_t)g_test_rand_int() << 32) | g_test_rand_int();
        bool live = false;
        curdi_handle_slot *slot;
        /* Half of them with this table's tag, to get past the first
         * check. */
        if (round % 2 == 0)
            forged = curdi_handle_table_id_make(
                21, curdi_handle_table_id_generation(forged),
                curdi_handle_table_id_index(forged) % 128u);
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
            uint64_t guess = curdi_handle_table_id_make(21, generation, index);
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
        curdi_handle_table_remove(&table, ids[i], "curd_buffer_free");
    uint32_t slots_before = table.slot_count;
    for (size_t i = 0; i < COUNT; i += 2) {
        uint64_t id = table_insert(&table, 1, 1);
        g_assert_cmpuint(curdi_handle_table_id_index(id), <, slots_before);
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
    /* Freeing one makes space again. */
    curdi_handle_table_remove(&table, ids[2], "curd_buffer_free");
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
    table.slots[curdi_handle_table_id_index(ids[0])].generation =
        CURDI_HANDLE_MAX_GENERATION;
    ids[0] = curdi_handle_table_id_make(6, CURDI_HANDLE_MAX_GENERATION,
                                        curdi_handle_table_id_index(ids[0]));
    curdi_handle_table_remove(&table, ids[0], "curd_buffer_free");
    curdi_handle_table_remove(&table, ids[1], "curd_buffer_free");
    g_assert_cmpuint(table.retired_count, ==, 1);
    ids[2] = curdi_handle_table_insert_reserved(&table, 0x300, 3);
    ids[3] = curdi_handle_table_insert_reserved(&table, 0x400, 4);
    g_assert_cmpuint(table.capacity, ==, 4);
    g_assert_true(table.slots == slots);
    assert_live(&table, ids[2], 0x300, 3);
    assert_live(&table, ids[3], 0x400, 4);
    assert_stale(&table, ids[0]);
    assert_stale(&table, ids[1]);
    /* Only one more fits now: the reservation made space, not this call. */
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
    curdi_handle_table_remove(&table, id, "curd_buffer_free");
    table.slots[0].generation = CURDI_HANDLE_MAX_GENERATION;
    id = table_insert(&table, 0x2000, 1);
    g_assert_cmpuint(curdi_handle_table_id_index(id), ==, 0);
    g_assert_cmpuint(curdi_handle_table_id_generation(id), ==,
                     CURDI_HANDLE_MAX_GENERATION);
    assert_live(&table, id, 0x2000, 1);
    curdi_handle_table_remove(&table, id, "curd_buffer_free");
    g_assert_cmpuint(table.slots[0].state, ==, CURDI_SLOT_RETIRED);
    g_assert_cmpuint(table.retired_count, ==, 1);
    assert_stale(&table, id);
    /* Generation 1 of the slot (what a wrap would give) is stale too. */
    assert_stale(&table, curdi_handle_table_id_make(5, 1, 0));
    next = table_insert(&table, 0x3000, 1);
    g_assert_cmpuint(curdi_handle_table_id_index(next), ==, 1);
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
            curdi_handle_table_remove(&table, live_ids[pick], "curd_buffer_free");
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
        curdi_handle_table_remove(&table, ids[i], "curd_buffer_free");
    for (int round = 0; round < 100000; round++) {
        uint64_t base = ids[g_test_rand_int_range(0, G_N_ELEMENTS(ids))];
        uint16_t tag = (uint16_t)(curdi_handle_table_id_tag(base)
                                  + g_test_rand_int_range(-1, 2));
        uint32_t generation = curdi_handle_table_id_generation(base)
                              + (uint32_t)g_test_rand_int_range(-1, 2);
        uint32_t index = curdi_handle_table_id_index(base)
                         + (uint32_t)g_test_rand_int_range(-2, 3);
        uint64_t id = g_test_rand_int_range(0, 50) == 0
                          ? (uint64_t)g_test_rand_int_range(0, 4)
                          : curdi_handle_table_id_make(tag, generation, index);
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/handle-table/ids/fields-round-trip", test_id_fields_round_trip);
    g_test_add_func("/handle-table/ids/device-tags-are-nonzero-and-differ",
                    test_device_tags_are_nonzero_and_differ);
    g_test_add_func("/handle-table/init-refuses-zero-tag-and-too-many-slots",
                    test_init_refuses_zero_tag_and_too_many_slots);
    g_test_add_func("/handle-table/stale-sentence-names-the-call-that-let-it-go",
                    test_stale_sentence_names_the_call_that_let_it_go);
    g_test_add_func("/handle-table/inserts-give-distinct-live-handles",
                    test_inserts_give_distinct_live_handles);
    g_test_add_func("/handle-table/zero-handle-is-stale",
                    test_zero_handle_is_stale);
    g_test_add_func(
        "/handle-table/freed-handle-is-stale-and-its-slot-gets-a-new-generation",
        test_freed_handle_is_stale_and_its_slot_gets_a_new_generation);
    g_test_add_func("/handle-table/handle-of-another-device-is-stale",
                    test_handle_of_another_device_is_stale);
    g_test_add_func("/handle-table/forged-handles-are-stale",
                    test_forged_handles_are_stale);
    g_test_add_func("/handle-table/grows-and-keeps-every-handle",
                    test_table_grows_and_keeps_every_handle);
    g_test_add_func("/handle-table/full-table-is-a-budget-error-and-changes-nothing",
                    test_full_table_is_a_budget_error_and_changes_nothing);
    g_test_add_func(
        "/handle-table/reserve-lets-that-many-inserts-succeed-without-growing",
        test_reserve_lets_that_many_inserts_succeed_without_growing);
    g_test_add_func("/handle-table/reserved-inserts-need-no-growth-even-across-retirement",
                    test_reserved_inserts_need_no_growth_even_across_retirement);
    g_test_add_func("/handle-table/slot-retires-instead-of-wrapping-its-generation",
                    test_slot_retires_instead_of_wrapping_its_generation);
    g_test_add_func("/handle-table/random-insert-remove-matches-a-model",
                    test_random_insert_remove_matches_a_model);
    g_test_add_func("/handle-table/lookup-agrees-with-find-on-any-id",
                    test_lookup_agrees_with_find_on_any_id);
    return g_test_run();
}
