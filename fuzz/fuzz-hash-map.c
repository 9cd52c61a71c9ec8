/* fuzz-hash-map.c - the hash map against a slow reference.
 *
 * The first byte picks the key kind (uint64, or a byte string of 1 to 31
 * bytes) and the first capacity; then each operation is a byte (insert,
 * remove one entry, remove the first found through its cursor, clear,
 * shrink) and a key, drawn from few enough values that duplicates and
 * misses are common. The reference is an array of (key, value) searched end to end;
 * after every operation each key touched must give, through find and
 * find_next, exactly the reference's values, and the count and an
 * iteration over the whole map must agree with it.
 *
 * fuzz-srcs: lib/base/hash_map.c */
#include "fuzz.h"

#include "base/hash_map.h"

#define MAX_ENTRIES 4096u
#define MAX_KEY 32u

typedef struct reference_entry {
    unsigned char key[MAX_KEY];
    void *value;
} reference_entry;

static reference_entry entries[MAX_ENTRIES];
static size_t entry_count;
static size_t key_size;
static char value_storage[MAX_ENTRIES * 4u];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static size_t reference_count(const unsigned char *key)
{
    size_t found = 0;
    for (size_t i = 0; i < entry_count; i++)
        found += memcmp(entries[i].key, key, key_size) == 0;
    return found;
}

static bool reference_has(const unsigned char *key, const void *value)
{
    for (size_t i = 0; i < entry_count; i++)
        if (entries[i].value == value &&
            memcmp(entries[i].key, key, key_size) == 0)
            return true;
    return false;
}

static void reference_remove(const void *value)
{
    for (size_t i = 0; i < entry_count; i++) {
        if (entries[i].value == value) {
            entries[i] = entries[--entry_count];
            return;
        }
    }
    FUZZ_CHECK(false);
}

/* The map's values for key, each the reference's, none twice, as many. */
static void check_key(const curdi_hash_map *map, const unsigned char *key)
{
    curdi_hash_map_cursor cursor;
    size_t found = 0;
    const void *seen[MAX_ENTRIES];
    for (void *value = curdi_hash_map_find(map, key, &cursor); value != NULL;
         value = curdi_hash_map_find_next(map, key, &cursor)) {
        FUZZ_CHECK(found < MAX_ENTRIES);
        FUZZ_CHECK(reference_has(key, value));
        for (size_t i = 0; i < found; i++)
            FUZZ_CHECK(seen[i] != value);
        seen[found++] = value;
    }
    FUZZ_CHECK(found == reference_count(key));
}

static void check_all(const curdi_hash_map *map)
{
    size_t position = 0, iterated = 0;
    FUZZ_CHECK(curdi_hash_map_count(map) == entry_count);
    for (void *value; (value = curdi_hash_map_next_entry(map, &position)) !=
                      NULL;) {
        bool known = false;
        for (size_t i = 0; i < entry_count && !known; i++)
            known = entries[i].value == value;
        FUZZ_CHECK(known);
        iterated++;
    }
    FUZZ_CHECK(iterated == entry_count);
    FUZZ_CHECK(map->count * 2u <= map->capacity);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    uint8_t shape = fuzz_u8(&in);
    size_t key_bytes = shape & 31u; /* 0: uint64 keys */
    key_size = key_bytes == 0 ? sizeof(uint64_t) : key_bytes;
    curdi_hash_map map;
    if (!curdi_hash_map_init(&map, key_bytes, (size_t)1 << (shape >> 5)))
        return 0;
    entry_count = 0;
    size_t next_value = 0;
    while (fuzz_more(&in) && entry_count < MAX_ENTRIES &&
           next_value < sizeof value_storage) {
        uint8_t op = fuzz_u8(&in);
        unsigned char key[MAX_KEY] = {0};
        /* Few distinct keys: a byte, spread over the key's length (an
         * address's low zero bits for uint64 keys). */
        uint8_t pick = fuzz_u8(&in);
        if (key_bytes == 0) {
            uint64_t word = (op & 0x80u) ? (uint64_t)pick << 21 : pick;
            memcpy(key, &word, sizeof word);
        } else {
            key[pick % key_size] = pick;
            key[key_size - 1u] ^= (unsigned char)(pick >> 4);
        }
        switch (op & 3u) {
        case 0:
        case 1: {
            void *value = &value_storage[next_value++ % sizeof value_storage];
            FUZZ_CHECK(curdi_hash_map_insert(&map, key, value));
            memcpy(entries[entry_count].key, key, MAX_KEY);
            entries[entry_count++].value = value;
            break;
        }
        case 2: {
            /* The first entry with the key in the reference, by value. */
            void *victim = NULL;
            for (size_t i = 0; i < entry_count && victim == NULL; i++)
                if (memcmp(entries[i].key, key, key_size) == 0)
                    victim = entries[i].value;
            bool removed = curdi_hash_map_remove(
                &map, key, victim != NULL ? victim : (void *)&map);
            FUZZ_CHECK(removed == (victim != NULL));
            if (victim != NULL)
                reference_remove(victim);
            break;
        }
        default:
            if ((op & 0x7cu) == 0x7cu) {
                curdi_hash_map_clear(&map);
                entry_count = 0;
            } else if ((op & 0x7cu) == 0x78u) {
                curdi_hash_map_shrink(&map);
            } else {
                curdi_hash_map_cursor cursor;
                void *found = curdi_hash_map_find(&map, key, &cursor);
                FUZZ_CHECK((found != NULL) == (reference_count(key) != 0));
                if (found != NULL) {
                    curdi_hash_map_remove_at(&map, &cursor);
                    reference_remove(found);
                }
            }
            break;
        }
        check_key(&map, key);
        check_all(&map);
    }
    curdi_hash_map_fini(&map);
    return 0;
}
