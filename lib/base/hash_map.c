/* hash_map.c - the library's one hash map; hash_map.h says what it
 * promises.
 *
 * A slot is a head (the value, NULL when the slot is empty, and the key
 * word) followed, for byte-string keys, by the key's bytes. The key word
 * is the key itself for uint64 keys and the bytes' hash for byte strings,
 * so a probe compares one word before it compares any bytes, and a
 * resize or a removal finds where an entry belongs without hashing again.
 * The probing operations are inline in hash_map.h; here are the hash of
 * the bytes, the resize, and what no hot path runs. */
#include "base/hash_map.h"

#include <stdlib.h>
#include <string.h>

#define SMALLEST_CAPACITY 8u
#define CACHE_LINE 64u

typedef curdi_hash_map_slot_ slot_head;

static slot_head *slot_at(const curdi_hash_map *map, size_t slot)
{
    return curdi_hash_map_slot_at_(map, curdi_hash_map_layout_of_(map), slot);
}

/* The bytes eight at a time (the tail zero-padded), each folded in with a
 * multiply and a shift (splitmix64's mixer), so every byte moves the top
 * bits. */
uint64_t curdi_hash_map_hash_bytes_(const void *key, size_t key_bytes)
{
    const unsigned char *bytes = key;
    uint64_t hash = CURDI_HASH_MAP_FIBONACCI_ ^ (uint64_t)key_bytes;
    for (size_t at = 0; at < key_bytes; at += sizeof hash) {
        uint64_t word = 0;
        memcpy(&word, bytes + at,
               key_bytes - at < sizeof word ? key_bytes - at : sizeof word);
        hash = (hash ^ word) * UINT64_C(0xBF58476D1CE4E5B9);
        hash ^= hash >> 31;
    }
    hash = (hash ^ (hash >> 30)) * UINT64_C(0x94D049BB133111EB);
    return hash ^ (hash >> 31);
}

static unsigned log2_of(size_t power_of_two)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < power_of_two)
        bits++;
    return bits;
}

bool curdi_hash_map_resize_(curdi_hash_map *map, size_t capacity)
{
    /* On whole cache lines of its own: maps used by different threads
     * (the pool's shards) never write to one line. */
    if (capacity > (SIZE_MAX - CACHE_LINE) / map->slot_bytes)
        return false;
    size_t bytes = (capacity * map->slot_bytes + CACHE_LINE - 1u) &
                   ~(size_t)(CACHE_LINE - 1u);
    unsigned char *slots = aligned_alloc(CACHE_LINE, bytes);
    if (slots == NULL)
        return false;
    memset(slots, 0, bytes);
    curdi_hash_map old = *map;
    map->slots = slots;
    map->capacity = capacity;
    map->shift = 64u - log2_of(capacity);
    for (size_t slot = 0; slot < old.capacity; slot++) {
        slot_head *head = slot_at(&old, slot);
        if (head->value == NULL)
            continue;
        size_t at = curdi_hash_map_home_(map, head->word);
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
    if (key_bytes > SIZE_MAX / 2u)
        return false;
    map->key_bytes = key_bytes;
    map->slot_bytes = sizeof(slot_head) + (key_bytes + 7u) / 8u * 8u;
    map->min_capacity = capacity;
    if (!curdi_hash_map_resize_(map, capacity)) {
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

bool curdi_hash_map_insert_bytes_(curdi_hash_map *map, const void *key,
                                  void *value)
{
    return curdi_hash_map_insert_in_(map, curdi_hash_map_layout_of_(map), key,
                                     value);
}

void *curdi_hash_map_probe_bytes_(const curdi_hash_map *map, size_t from,
                                  const void *key,
                                  curdi_hash_map_cursor *cursor)
{
    return curdi_hash_map_probe_(map, curdi_hash_map_layout_of_(map), from,
                                 key, cursor);
}

void curdi_hash_map_remove_bytes_(curdi_hash_map *map, size_t slot)
{
    curdi_hash_map_remove_in_(map, curdi_hash_map_layout_of_(map), slot);
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

bool curdi_hash_map_reserve(curdi_hash_map *map, size_t more)
{
    size_t capacity = map->capacity;
    if (more > SIZE_MAX / 4u - map->count)
        return false;
    while ((map->count + more) * 2u > capacity)
        capacity *= 2u;
    return capacity == map->capacity || curdi_hash_map_resize_(map, capacity);
}

void curdi_hash_map_shrink(curdi_hash_map *map)
{
    size_t capacity = map->capacity;
    while (capacity / 2u >= map->min_capacity && map->count * 8u < capacity)
        capacity /= 2u;
    if (capacity != map->capacity)
        (void)curdi_hash_map_resize_(map, capacity);
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

void curdi_hash_map_each(const curdi_hash_map *map,
                         void (*fn)(void *value, void *context),
                         void *context)
{
    size_t position = 0;
    for (void *value; (value = curdi_hash_map_next_entry(map, &position)) !=
                      NULL;)
        fn(value, context);
}

void curdi_hash_map_clear(curdi_hash_map *map)
{
    for (size_t slot = 0; slot < map->capacity; slot++)
        slot_at(map, slot)->value = NULL;
    map->count = 0;
}
