/* hash_map.h - the library's one hash map (pure).
 *
 * Maps a key to a non-NULL pointer to the caller's record. A map's keys are
 * all of one kind, chosen when it is made: uint64 values (key_bytes 0) or
 * byte strings of one fixed length (key_bytes > 0). Every call takes the
 * key by address: a uint64_t, or key_bytes bytes.
 *
 * Open addressing with linear probing, in one array of slots; a removal
 * shifts the entries behind it back (no tombstones), so a lookup stops at
 * the first empty slot. The array grows to keep the map at most half full
 * and shrinks when it is under an eighth full, never below the capacity it
 * was made with. A lookup allocates nothing; an insert or a removal may
 * resize, and a resize that cannot allocate leaves the map as it was (an
 * insert then still succeeds while a slot is free besides the one that
 * keeps probes finite). An insert made right after a removal never
 * allocates, so moving a record to a new key cannot fail.
 *
 * Equal keys may be inserted more than once: find gives the first entry
 * with the key, find_next the next one. A caller whose keys are digests
 * keeps records whose digests collide and tells them apart by their own
 * bytes. Not thread-safe: the caller's lock guards a map. */
#ifndef CURD_LIB_HASH_MAP_H
#define CURD_LIB_HASH_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct curdi_hash_map {
    unsigned char *slots; /* capacity slots of slot_bytes each */
    size_t capacity;      /* a power of two */
    size_t count;
    size_t min_capacity;
    size_t key_bytes;  /* 0: uint64 keys */
    size_t slot_bytes; /* the value, the key word, the key's bytes */
    unsigned shift;    /* 64 - log2(capacity): a hash's top bits pick */
} curdi_hash_map;

/* Where find left off: the slot of the entry it returned. Invalid once
 * the map changes, except through curdi_hash_map_remove_at. */
typedef struct curdi_hash_map_cursor {
    size_t slot;
} curdi_hash_map_cursor;

/* Makes an empty map of at least min_capacity slots (rounded up to a power
 * of two, at least 8). False when the slots cannot be allocated (nothing
 * to finish then). */
bool curdi_hash_map_init(curdi_hash_map *map, size_t key_bytes,
                         size_t min_capacity);
/* Frees the slots, not the records they point to. A NULL map, or one
 * finished already, is left alone. */
void curdi_hash_map_fini(curdi_hash_map *map);

/* Adds key -> value (value not NULL), beside any entry with an equal key.
 * False, with the map unchanged, when it is full and cannot grow. */
bool curdi_hash_map_insert(curdi_hash_map *map, const void *key, void *value);

/* The value of the first entry with key, or NULL; with cursor not NULL,
 * where it was, for find_next and remove_at. */
void *curdi_hash_map_find(const curdi_hash_map *map, const void *key,
                          curdi_hash_map_cursor *cursor);
/* The value of the next entry with key after the cursor's, or NULL. */
void *curdi_hash_map_find_next(const curdi_hash_map *map, const void *key,
                               curdi_hash_map_cursor *cursor);
/* Removes the entry the cursor is at (from find or find_next, the map
 * unchanged since). */
void curdi_hash_map_remove_at(curdi_hash_map *map,
                              const curdi_hash_map_cursor *cursor);
/* Removes the entry with key whose value is value; false when there is
 * none. */
bool curdi_hash_map_remove(curdi_hash_map *map, const void *key,
                           const void *value);

/* Every value, in no order: start *position at 0; NULL once all were
 * given. The map may not change in between. */
void *curdi_hash_map_next_entry(const curdi_hash_map *map, size_t *position);
/* Empties the map, keeping its slots; the records are the caller's. */
void curdi_hash_map_clear(curdi_hash_map *map);

static inline size_t curdi_hash_map_count(const curdi_hash_map *map)
{
    return map->count;
}

#endif
