/* test-hash-map.c - the hash map (lib/base/hash_map.c) against a naive
 * reference.
 *
 * The reference is an array of (key, value) entries searched end to end.
 * Random operations (insert, find with every duplicate, remove one entry,
 * remove by cursor, clear) run on both, from keys drawn out of a small
 * pool so that duplicates, misses and removals of absent entries are
 * common, and after each the map must hold exactly the reference's
 * entries. GLib prints the seed; --seed replays a failure. */
#include <glib.h>
#include <string.h>

#include "base/hash_map.h"
#include "support/curd-test.h"

#define MAX_KEY_BYTES 24u

typedef struct entry {
    unsigned char key[MAX_KEY_BYTES];
    void *value;
} entry;

typedef struct reference {
    entry *entries;
    size_t count;
    size_t key_size; /* bytes a key takes: 8 for uint64 keys */
} reference;

/* The values are distinct non-NULL pointers: the addresses of a static
 * array, so each entry can be named by its value. */
static char value_storage[1 << 16];
static size_t next_value;

static void *fresh_value(void)
{
    return &value_storage[next_value++ % sizeof value_storage];
}

static size_t reference_matches(const reference *ref, const void *key,
                                void **out_values)
{
    size_t found = 0;
    for (size_t i = 0; i < ref->count; i++)
        if (memcmp(ref->entries[i].key, key, ref->key_size) == 0)
            out_values[found++] = ref->entries[i].value;
    return found;
}

static void reference_remove(reference *ref, const void *value)
{
    for (size_t i = 0; i < ref->count; i++) {
        if (ref->entries[i].value == value) {
            ref->entries[i] = ref->entries[--ref->count];
            return;
        }
    }
    g_assert_not_reached();
}

static int compare_pointers(const void *a, const void *b)
{
    uintptr_t left = (uintptr_t)*(void *const *)a;
    uintptr_t right = (uintptr_t)*(void *const *)b;
    return left < right ? -1 : left > right;
}

/* Every value with key, through find and find_next, sorted. */
static size_t map_matches(const curdi_hash_map *map, const void *key,
                          void **out_values)
{
    curdi_hash_map_cursor cursor;
    size_t found = 0;
    for (void *value = curdi_hash_map_find(map, key, &cursor); value != NULL;
         value = curdi_hash_map_find_next(map, key, &cursor))
        out_values[found++] = value;
    qsort(out_values, found, sizeof *out_values, compare_pointers);
    return found;
}

static void assert_same_entries(const curdi_hash_map *map,
                                const reference *ref)
{
    g_assert_cmpuint(curdi_hash_map_count(map), ==, ref->count);
    /* Every value once through the iteration, and each under its key. */
    void **seen = g_new(void *, ref->count + 1u);
    void **expected = g_new(void *, ref->count + 1u);
    void **got = g_new(void *, ref->count + 1u);
    size_t position = 0, iterated = 0;
    for (void *value; (value = curdi_hash_map_next_entry(map, &position)) !=
                      NULL;) {
        g_assert_cmpuint(iterated, <, ref->count);
        seen[iterated++] = value;
    }
    g_assert_cmpuint(iterated, ==, ref->count);
    for (size_t i = 0; i < ref->count; i++)
        expected[i] = ref->entries[i].value;
    qsort(seen, iterated, sizeof *seen, compare_pointers);
    qsort(expected, ref->count, sizeof *expected, compare_pointers);
    g_assert_cmpuint(iterated, ==, ref->count);
    g_assert_true(memcmp(seen, expected, iterated * sizeof *seen) == 0);
    for (size_t i = 0; i < ref->count; i++) {
        size_t want = reference_matches(ref, ref->entries[i].key, expected);
        qsort(expected, want, sizeof *expected, compare_pointers);
        size_t have = map_matches(map, ref->entries[i].key, got);
        g_assert_cmpuint(have, ==, want);
        g_assert_true(memcmp(got, expected, have * sizeof *got) == 0);
    }
    g_free(seen);
    g_free(expected);
    g_free(got);
}

/* A key from a pool of `distinct` keys, written as a uint64 (key_bytes 0)
 * or as key_bytes bytes that share all but a few of their bytes, so the
 * byte comparison, not only the hash, tells them apart. */
static void draw_key(const reference *ref, size_t key_bytes, size_t distinct,
                     unsigned char *out)
{
    uint64_t pick = (uint64_t)g_test_rand_int_range(0, (gint32)distinct);
    memset(out, 0, MAX_KEY_BYTES);
    if (key_bytes == 0) {
        /* Addresses (low bits zero), small handles, and the extremes. */
        uint64_t key = pick % 3u == 0   ? pick << 12
                       : pick % 3u == 1 ? pick
                                        : UINT64_MAX - pick;
        memcpy(out, &key, sizeof key);
        return;
    }
    memset(out, 0xa5, ref->key_size);
    out[pick % ref->key_size] ^= (unsigned char)(pick + 1u);
    out[ref->key_size - 1u] = (unsigned char)(pick >> 3);
}

static void run_random_operations(size_t key_bytes, size_t min_capacity,
                                  size_t distinct, unsigned operations)
{
    curdi_hash_map map;
    reference ref = {g_new0(entry, operations), 0,
                     key_bytes == 0 ? sizeof(uint64_t) : key_bytes};
    void **values = g_new(void *, operations + 1u);
    g_assert_true(curdi_hash_map_init(&map, key_bytes, min_capacity));
    for (unsigned op = 0; op < operations; op++) {
        unsigned char key[MAX_KEY_BYTES];
        draw_key(&ref, key_bytes, distinct, key);
        int choice = g_test_rand_int_range(0, 100);
        if (choice < 50) {
            void *value = fresh_value();
            g_assert_true(curdi_hash_map_insert(&map, key, value));
            memcpy(ref.entries[ref.count].key, key, MAX_KEY_BYTES);
            ref.entries[ref.count++].value = value;
        } else if (choice < 70) {
            size_t want = reference_matches(&ref, key, values);
            void *victim = want != 0 ? values[g_test_rand_int_range(
                                           0, (gint32)want)]
                                     : fresh_value();
            g_assert_cmpint(curdi_hash_map_remove(&map, key, victim), ==,
                            want != 0);
            if (want != 0)
                reference_remove(&ref, victim);
        } else if (choice < 90) {
            curdi_hash_map_cursor cursor;
            void *first = curdi_hash_map_find(&map, key, &cursor);
            size_t want = reference_matches(&ref, key, values);
            g_assert_cmpint(first != NULL, ==, want != 0);
            if (first != NULL && g_test_rand_bit()) {
                curdi_hash_map_remove_at(&map, &cursor);
                reference_remove(&ref, first);
            }
        } else if (choice < 91) {
            curdi_hash_map_clear(&map);
            ref.count = 0;
        } else if (choice < 93) {
            curdi_hash_map_shrink(&map);
        } else {
            g_assert_cmpint(curdi_hash_map_find(&map, key, NULL) != NULL, ==,
                            reference_matches(&ref, key, values) != 0);
        }
        if (op % 64u == 0 || op + 1u == operations)
            assert_same_entries(&map, &ref);
        /* At most half full, and never below its first capacity. */
        g_assert_cmpuint(curdi_hash_map_count(&map) * 2u, <=, map.capacity);
        g_assert_cmpuint(map.capacity, >=, map.min_capacity);
    }
    curdi_hash_map_fini(&map);
    g_free(values);
    g_free(ref.entries);
}

static void test_random_u64_operations_agree_with_a_naive_reference(void)
{
    run_random_operations(0, 8, 64, 20000);
    run_random_operations(0, 64, 4096, 20000);
}

static void test_random_byte_key_operations_agree_with_a_naive_reference(void)
{
    run_random_operations(16, 8, 64, 20000);
    run_random_operations(5, 16, 2048, 20000);
    run_random_operations(MAX_KEY_BYTES, 8, 16, 5000);
}

static void test_map_grows_past_half_full_and_shrinks_when_asked_down_to_its_first_size(
    void)
{
    curdi_hash_map map;
    g_assert_true(curdi_hash_map_init(&map, 0, 16));
    g_assert_cmpuint(map.capacity, ==, 16);
    for (uint64_t key = 1; key <= 1000; key++)
        g_assert_true(curdi_hash_map_insert(&map, &key, fresh_value()));
    g_assert_cmpuint(map.capacity, ==, 2048);
    for (uint64_t key = 1; key <= 1000; key++) {
        curdi_hash_map_cursor cursor = {0};
        g_assert_nonnull(curdi_hash_map_find(&map, &key, &cursor));
        curdi_hash_map_remove_at(&map, &cursor);
        if (key == 900) {
            /* 100 left: under an eighth of 2048 and of 1024, not of
             * 512. Removals alone never shrink. */
            g_assert_cmpuint(map.capacity, ==, 2048);
            curdi_hash_map_shrink(&map);
            g_assert_cmpuint(map.capacity, ==, 512);
        }
    }
    g_assert_cmpuint(curdi_hash_map_count(&map), ==, 0);
    curdi_hash_map_shrink(&map);
    g_assert_cmpuint(map.capacity, ==, 16);
    curdi_hash_map_fini(&map);
}

static void test_an_insert_right_after_a_removal_never_grows_the_map(void)
{
    curdi_hash_map map;
    g_assert_true(curdi_hash_map_init(&map, 0, 8));
    for (uint64_t key = 1; key <= 200; key++) {
        g_assert_true(curdi_hash_map_insert(&map, &key, fresh_value()));
        size_t capacity = map.capacity;
        void *value = curdi_hash_map_find(&map, &key, NULL);
        g_assert_true(curdi_hash_map_remove(&map, &key, value));
        size_t after_removal = map.capacity;
        uint64_t moved = key + 1000000u;
        g_assert_true(curdi_hash_map_insert(&map, &moved, value));
        g_assert_cmpuint(map.capacity, ==, after_removal);
        g_assert_cmpuint(map.capacity, <=, capacity);
        g_assert_true(curdi_hash_map_remove(&map, &moved, value));
        g_assert_true(curdi_hash_map_insert(&map, &key, value));
    }
    curdi_hash_map_fini(&map);
}

static void test_a_reservation_lets_that_many_inserts_keep_their_slots(void)
{
    curdi_hash_map map;
    g_assert_true(curdi_hash_map_init(&map, 8, 8));
    g_assert_true(curdi_hash_map_reserve(&map, 100));
    unsigned char *slots = map.slots;
    for (uint64_t key = 0; key < 100; key++)
        g_assert_true(curdi_hash_map_insert(&map, &key, fresh_value()));
    g_assert_true(map.slots == slots);
    g_assert_false(curdi_hash_map_reserve(&map, SIZE_MAX));
    g_assert_true(map.slots == slots);
    curdi_hash_map_fini(&map);
}

/* Reserve, then fill, as the registry of live pendings does
 * (lib/core/pending.c): slots are reserved one at a time, each for
 * however many are outstanding, while earlier ones are filled and
 * entries removed. No fill may move the slots: a fill that allocated
 * could fail, and the registry promises that publishing cannot. */
static void test_slots_reserved_one_at_a_time_are_filled_in_place(void)
{
    curdi_hash_map map;
    g_assert_true(curdi_hash_map_init(&map, 0, 8));
    uint64_t keys[4096];
    size_t count = 0;
    size_t reserved = 0;
    uint64_t next_key = 1;
    for (unsigned round = 0; round < 2000; round++) {
        unsigned takes = (unsigned)g_test_rand_int_range(0, 4);
        for (unsigned i = 0; i < takes && count + reserved < 4096u; i++) {
            g_assert_true(curdi_hash_map_reserve(&map, reserved + 1u));
            reserved++;
        }
        unsigned fills =
            (unsigned)g_test_rand_int_range(0, (gint32)reserved + 1);
        for (unsigned i = 0; i < fills; i++) {
            unsigned char *slots = map.slots;
            uint64_t key = next_key++ * 4096u; /* addresses: low bits 0 */
            g_assert_true(curdi_hash_map_insert(&map, &key, fresh_value()));
            g_assert_true(map.slots == slots);
            keys[count++] = key;
            reserved--;
        }
        unsigned removals =
            (unsigned)g_test_rand_int_range(0, (gint32)count / 2 + 1);
        for (unsigned i = 0; i < removals; i++) {
            size_t at = (size_t)g_test_rand_int_range(0, (gint32)count);
            void *value = curdi_hash_map_find(&map, &keys[at], NULL);
            g_assert_nonnull(value);
            g_assert_true(curdi_hash_map_remove(&map, &keys[at], value));
            keys[at] = keys[--count];
        }
        g_assert_cmpuint(curdi_hash_map_count(&map), ==, count);
    }
    for (size_t i = 0; i < count; i++)
        g_assert_nonnull(curdi_hash_map_find(&map, &keys[i], NULL));
    curdi_hash_map_fini(&map);
}

static void test_a_finished_map_can_be_finished_again(void)
{
    curdi_hash_map map;
    g_assert_true(curdi_hash_map_init(&map, 16, 0));
    curdi_hash_map_fini(&map);
    curdi_hash_map_fini(&map);
    curdi_hash_map_fini(NULL);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/hash-map/random-u64-operations-agree-with-a-naive-reference",
                    test_random_u64_operations_agree_with_a_naive_reference);
    g_test_add_func(
        "/hash-map/random-byte-key-operations-agree-with-a-naive-reference",
        test_random_byte_key_operations_agree_with_a_naive_reference);
    g_test_add_func(
        "/hash-map/map-grows-past-half-full-and-shrinks-when-asked-down-to-its-first-size",
        test_map_grows_past_half_full_and_shrinks_when_asked_down_to_its_first_size);
    g_test_add_func(
        "/hash-map/an-insert-right-after-a-removal-never-grows-the-map",
        test_an_insert_right_after_a_removal_never_grows_the_map);
    g_test_add_func(
        "/hash-map/a-reservation-lets-that-many-inserts-keep-their-slots",
        test_a_reservation_lets_that_many_inserts_keep_their_slots);
    g_test_add_func(
        "/hash-map/slots-reserved-one-at-a-time-are-filled-in-place",
        test_slots_reserved_one_at_a_time_are_filled_in_place);
    g_test_add_func("/hash-map/a-finished-map-can-be-finished-again",
                    test_a_finished_map_can_be_finished_again);
    return g_test_run();
}
