/* hash_map.c - the library's one hash map; hash_map.h says what it
 * promises.
 *
 * A slot is a head (the value, NULL when the slot is empty, and the key
 * word) followed, for byte-string keys, by the key's bytes. The key word
 * is the key itself for uint64 keys and the bytes' hash for byte strings,
 * so a probe compares one word before it compares any bytes, and a
 * removal finds where an entry belongs without hashing again. The home
 * slot is the top bits of the key word times 2^64 / phi (Fibonacci
 * hashing): that spreads the keys the callers have, addresses with their
 * low bits zero, handles with entropy in their low bits, digests, over
 * the whole table. */
#include "base/hash_map.h"

#include <stdlib.h>
#include <string.h>

#define FIBONACCI UINT64_C(0x9E3779B97F4A7C15)
#define SMALLEST_CAPACITY 8u

typedef struct slot_head {
    void *value;
    uint64_t word;
} slot_head;

static inline slot_head *slot_at(const curdi_hash_map *map, size_t slot)
{
    /* slot_bytes is a multiple of 8 and malloc's memory is aligned for
     * any type, so every head is aligned. */
    return (slot_head *)(void *)(map->slots + slot * map->slot_bytes);
}

static inline unsigned char *slot_key(slot_head *head)
{
    return (unsigned char *)(head + 1);
}

static uint64_t key_word(const curdi_hash_map *map, const void *key)
{
    uint64_t word = 0;
    if (map->key_bytes == 0) {
        memcpy(&word, key, sizeof word);
        return word;
    }
    /* The bytes eight at a time (the tail zero-padded), each folded in
     * with a multiply and a shift (splitmix64's mixer), so every byte
     * moves the top bits. */
    const unsigned char *bytes = key;
    uint64_t hash = FIBONACCI ^ (uint64_t)map->key_bytes;
    for (size_t at = 0; at < map->key_bytes; at += sizeof word) {
        size_t take = map->key_bytes - at < sizeof word ? map->key_bytes - at
                                                        : sizeof word;
        word = 0;
        memcpy(&word, bytes + at, take);
        hash = (hash ^ word) * UINT64_C(0xBF58476D1CE4E5B9);
        hash ^= hash >> 31;
    }
    hash = (hash ^ (hash >> 30)) * UINT64_C(0x94D049BB133111EB);
    return hash ^ (hash >> 31);
}

static inline size_t home_of(const curdi_hash_map *map, uint64_t word)
{
    return (size_t)((word * FIBONACCI) >> map->shift);
}

static inline bool slot_has_key(const curdi_hash_map *map, slot_head *head,
                                uint64_t word, const void *key)
{
    return head->word == word &&
           (map->key_bytes == 0 ||
            memcmp(slot_key(head), key, map->key_bytes) == 0);
}

static unsigned log2_of(size_t power_of_two)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < power_of_two)
        bits++;
    return bits;
}

/* Moves every entry into a new array of `capacity` slots; false, with the
 * map as it was, when it cannot be allocated. */
static bool resize(curdi_hash_map *map, size_t capacity)
{
    if (capacity > SIZE_MAX / map->slot_bytes)
        return false;
    unsigned char *slots = calloc(capacity, map->slot_bytes);
    if (slots == NULL)
        return false;
    curdi_hash_map old = *map;
    map->slots = slots;
    map->capacity = capacity;
    map->shift = 64u - log2_of(capacity);
    for (size_t slot = 0; slot < old.capacity; slot++) {
        slot_head *head = slot_at(&old, slot);
        if (head->value == NULL)
            continue;
        size_t at = home_of(map, head->word);
        while (slot_at(map, at)->value != NULL)
            at = (at + 1u) & (capacity - 1u);
        memcpy(slot_at(map, at), head, map->slot_bytes);
    }
    free(old.slots);
    return true;
}

bool curdi_hash_map_init(curdi_hash_map *map, size_t key_bytes,
                         size_t min_capacity)
{
    size_t capacity = SMALLEST_CAPACITY;
    while (capacity < min_capacity && capacity <= SIZE_MAX / 4u)
        capacity *= 2u;
    memset(map, 0, sizeof *map);
    map->key_bytes = key_bytes;
    map->slot_bytes = sizeof(slot_head) + (key_bytes + 7u) / 8u * 8u;
    map->min_capacity = capacity;
    if (key_bytes > SIZE_MAX / 2u || !resize(map, capacity)) {
        memset(map, 0, sizeof *map);
        return false;
    }
    return true;
}

void curdi_hash_map_fini(curdi_hash_map *map)
{
    if (map == NULL)
        return;
    free(map->slots);
    memset(map, 0, sizeof *map);
}

bool curdi_hash_map_insert(curdi_hash_map *map, const void *key, void *value)
{
    /* At most half full; a growth that fails still leaves room while one
     * more entry leaves an empty slot to end every probe. */
    if ((map->count + 1u) * 2u > map->capacity &&
        !resize(map, map->capacity * 2u) && map->count + 2u > map->capacity)
        return false;
    uint64_t word = key_word(map, key);
    size_t at = home_of(map, word);
    while (slot_at(map, at)->value != NULL)
        at = (at + 1u) & (map->capacity - 1u);
    slot_head *head = slot_at(map, at);
    head->value = value;
    head->word = word;
    if (map->key_bytes != 0)
        memcpy(slot_key(head), key, map->key_bytes);
    map->count++;
    return true;
}

/* The first slot at or after `from` in the probe run that holds key, or
 * the capacity when the run ends first. */
static size_t probe_from(const curdi_hash_map *map, size_t from,
                         uint64_t word, const void *key)
{
    for (size_t at = from;; at = (at + 1u) & (map->capacity - 1u)) {
        slot_head *head = slot_at(map, at);
        if (head->value == NULL)
            return map->capacity;
        if (slot_has_key(map, head, word, key))
            return at;
    }
}

void *curdi_hash_map_find(const curdi_hash_map *map, const void *key,
                          curdi_hash_map_cursor *cursor)
{
    uint64_t word = key_word(map, key);
    size_t at = probe_from(map, home_of(map, word), word, key);
    if (at == map->capacity)
        return NULL;
    if (cursor != NULL)
        cursor->slot = at;
    return slot_at(map, at)->value;
}

void *curdi_hash_map_find_next(const curdi_hash_map *map, const void *key,
                               curdi_hash_map_cursor *cursor)
{
    uint64_t word = key_word(map, key);
    size_t at = probe_from(map, (cursor->slot + 1u) & (map->capacity - 1u),
                           word, key);
    if (at == map->capacity)
        return NULL;
    cursor->slot = at;
    return slot_at(map, at)->value;
}

void curdi_hash_map_remove_at(curdi_hash_map *map,
                              const curdi_hash_map_cursor *cursor)
{
    size_t mask = map->capacity - 1u;
    size_t hole = cursor->slot;
    /* Backward shift: an entry after the hole moves into it unless its
     * home lies cyclically in (hole, at], where it would no longer be
     * found. */
    for (size_t at = (hole + 1u) & mask;; at = (at + 1u) & mask) {
        slot_head *head = slot_at(map, at);
        if (head->value == NULL)
            break;
        size_t home = home_of(map, head->word);
        if (((at - home) & mask) < ((at - hole) & mask))
            continue;
        memcpy(slot_at(map, hole), head, map->slot_bytes);
        hole = at;
    }
    slot_at(map, hole)->value = NULL;
    map->count--;
    /* Under an eighth full: half the slots (a failure keeps them all).
     * Half full at most after, so the next insert never grows. */
    if (map->capacity > map->min_capacity && map->count * 8u < map->capacity)
        (void)resize(map, map->capacity / 2u);
}

bool curdi_hash_map_remove(curdi_hash_map *map, const void *key,
                           const void *value)
{
    curdi_hash_map_cursor cursor;
    for (void *found = curdi_hash_map_find(map, key, &cursor); found != NULL;
         found = curdi_hash_map_find_next(map, key, &cursor)) {
        if (found == value) {
            curdi_hash_map_remove_at(map, &cursor);
            return true;
        }
    }
    return false;
}

void *curdi_hash_map_next_entry(const curdi_hash_map *map, size_t *position)
{
    while (*position < map->capacity) {
        slot_head *head = slot_at(map, (*position)++);
        if (head->value != NULL)
            return head->value;
    }
    return NULL;
}

void curdi_hash_map_clear(curdi_hash_map *map)
{
    for (size_t slot = 0; slot < map->capacity; slot++)
        slot_at(map, slot)->value = NULL;
    map->count = 0;
}
