/* hash_map.h - the library's one hash map (pure).
 *
 * Maps a key to a non-NULL pointer to the caller's record. A map's keys are
 * all of one kind, chosen when it is made: uint64 values (key_bytes 0) or
 * byte strings of one fixed length (key_bytes > 0). Every call takes the
 * key by address: a uint64_t, or key_bytes bytes.
 *
 * Open addressing with linear probing, in one array of slots; a removal
 * shifts the entries behind it back (no tombstones), so a lookup stops at
 * the first empty slot. The array grows to keep the map at most half
 * full; it shrinks only when its owner asks (curdi_hash_map_shrink), at a
 * time of its choosing, since a map that shrank on removals would resize
 * again and again under a load that swings (the pool's live blocks). A
 * lookup or a removal allocates nothing; an insert may grow the array,
 * and a growth that cannot allocate leaves the map as it was (the insert
 * then still succeeds while a slot is free besides the one that keeps
 * probes finite). An insert made right after a removal never allocates,
 * so moving a record to a new key cannot fail.
 *
 * Equal keys may be inserted more than once: find gives the first entry
 * with the key, find_next the next one. A caller whose keys are digests
 * keeps records whose digests collide and tells them apart by their own
 * bytes. Not thread-safe: the caller's lock guards a map. */
#ifndef CURD_LIB_BASE_HASH_MAP_H
#define CURD_LIB_BASE_HASH_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* The inline part: the operations the pool's hot path runs (insert,
 * find, remove_at) are written once, over a slot layout they take as an
 * argument; each entry point passes the uint64 layout as a constant when
 * the map has uint64 keys, so the compiler makes that path a copy with
 * the key bytes folded away, inlined in the caller (the byte-string
 * copies live in hash_map.c). Not for use outside
 * this header and hash_map.c. */
typedef struct curdi_hash_map_slot_ {
    void *value; /* NULL: the slot is empty */
    uint64_t word; /* the key (uint64 keys) or the key bytes' hash */
} curdi_hash_map_slot_;

typedef struct curdi_hash_map_layout_ {
    size_t key_bytes;
    size_t slot_bytes;
} curdi_hash_map_layout_;

#define CURDI_HASH_MAP_U64_ ((curdi_hash_map_layout_){0, sizeof(curdi_hash_map_slot_)})
#define CURDI_HASH_MAP_FIBONACCI_ UINT64_C(0x9E3779B97F4A7C15)

/* Out of line: the bytes' hash, and a resize (false, the map unchanged,
 * when the new slots cannot be allocated). */
uint64_t curdi_hash_map_hash_bytes_(const void *key, size_t key_bytes);
bool curdi_hash_map_resize_(curdi_hash_map *map, size_t capacity);

static inline curdi_hash_map_layout_
curdi_hash_map_layout_of_(const curdi_hash_map *map)
{
    return (curdi_hash_map_layout_){map->key_bytes, map->slot_bytes};
}

static inline curdi_hash_map_slot_ *
curdi_hash_map_slot_at_(const curdi_hash_map *map,
                        curdi_hash_map_layout_ shape, size_t slot)
{
    /* slot_bytes is a multiple of 8 and the slots are cache-line aligned,
     * so every slot's head is aligned. */
    return (curdi_hash_map_slot_ *)(void *)(map->slots +
                                            slot * shape.slot_bytes);
}

static inline uint64_t curdi_hash_map_word_(curdi_hash_map_layout_ shape,
                                            const void *key)
{
    uint64_t word;
    if (shape.key_bytes != 0)
        return curdi_hash_map_hash_bytes_(key, shape.key_bytes);
    memcpy(&word, key, sizeof word);
    return word;
}

/* The top bits of the word times 2^64 / phi (Fibonacci hashing): that
 * spreads the keys the callers have (addresses with their low bits zero,
 * handles with entropy in their low bits, digests) over the whole table. */
static inline size_t curdi_hash_map_home_(const curdi_hash_map *map,
                                          uint64_t word)
{
    return (size_t)((word * CURDI_HASH_MAP_FIBONACCI_) >> map->shift);
}

static inline __attribute__((always_inline)) bool
curdi_hash_map_insert_in_(curdi_hash_map *map,
                                             curdi_hash_map_layout_ shape,
                                             const void *key, void *value)
{
    /* At most half full; a growth that fails still leaves space while one
     * more entry leaves an empty slot to end every probe. */
    if ((map->count + 1u) * 2u > map->capacity &&
        !curdi_hash_map_resize_(map, map->capacity * 2u) &&
        map->count + 2u > map->capacity)
        return false;
    uint64_t word = curdi_hash_map_word_(shape, key);
    size_t at = curdi_hash_map_home_(map, word);
    while (curdi_hash_map_slot_at_(map, shape, at)->value != NULL)
        at = (at + 1u) & (map->capacity - 1u);
    curdi_hash_map_slot_ *head = curdi_hash_map_slot_at_(map, shape, at);
    head->value = value;
    head->word = word;
    if (shape.key_bytes != 0)
        memcpy(head + 1, key, shape.key_bytes);
    map->count++;
    return true;
}

/* The value of the first slot from `from` on, in the probe run, that holds
 * key, its slot in *cursor (when not NULL); NULL when the run ends first.
 * A `from` of capacity means the key's home slot. */
static inline __attribute__((always_inline)) void *
curdi_hash_map_probe_(const curdi_hash_map *map,
                                          curdi_hash_map_layout_ shape,
                                          size_t from, const void *key,
                                          curdi_hash_map_cursor *cursor)
{
    uint64_t word = curdi_hash_map_word_(shape, key);
    if (from == map->capacity)
        from = curdi_hash_map_home_(map, word);
    for (size_t at = from;; at = (at + 1u) & (map->capacity - 1u)) {
        curdi_hash_map_slot_ *head = curdi_hash_map_slot_at_(map, shape, at);
        if (head->value == NULL)
            return NULL;
        if (head->word == word &&
            (shape.key_bytes == 0 ||
             memcmp(head + 1, key, shape.key_bytes) == 0)) {
            if (cursor != NULL)
                cursor->slot = at;
            return head->value;
        }
    }
}

static inline __attribute__((always_inline)) void
curdi_hash_map_remove_in_(curdi_hash_map *map,
                                             curdi_hash_map_layout_ shape,
                                             size_t hole)
{
    size_t mask = map->capacity - 1u;
    /* Backward shift: an entry after the hole moves into it unless its
     * home lies cyclically in (hole, at], where it would no longer be
     * found. */
    for (size_t at = (hole + 1u) & mask;; at = (at + 1u) & mask) {
        curdi_hash_map_slot_ *head = curdi_hash_map_slot_at_(map, shape, at);
        if (head->value == NULL)
            break;
        size_t home = curdi_hash_map_home_(map, head->word);
        if (((at - home) & mask) < ((at - hole) & mask))
            continue;
        memcpy(curdi_hash_map_slot_at_(map, shape, hole), head,
               shape.slot_bytes);
        hole = at;
    }
    curdi_hash_map_slot_at_(map, shape, hole)->value = NULL;
    map->count--;
}

/* Out of line: the same operations for byte-string keys, which no hot
 * path uses; inline, only the uint64 keys' copy reaches a caller. */
bool curdi_hash_map_insert_bytes_(curdi_hash_map *map, const void *key,
                                  void *value);
void *curdi_hash_map_probe_bytes_(const curdi_hash_map *map, size_t from,
                                  const void *key,
                                  curdi_hash_map_cursor *cursor);
void curdi_hash_map_remove_bytes_(curdi_hash_map *map, size_t slot);

/* Adds key -> value (value not NULL), beside any entry with an equal key.
 * False, with the map unchanged, when it is full and cannot grow. */
static inline bool curdi_hash_map_insert(curdi_hash_map *map, const void *key,
                                         void *value)
{
    if (map->key_bytes != 0)
        return curdi_hash_map_insert_bytes_(map, key, value);
    return curdi_hash_map_insert_in_(map, CURDI_HASH_MAP_U64_, key, value);
}

/* The value of the first entry with key, or NULL; with cursor not NULL,
 * where it was, for find_next and remove_at. */
static inline void *curdi_hash_map_find(const curdi_hash_map *map,
                                        const void *key,
                                        curdi_hash_map_cursor *cursor)
{
    if (map->key_bytes != 0)
        return curdi_hash_map_probe_bytes_(map, map->capacity, key, cursor);
    return curdi_hash_map_probe_(map, CURDI_HASH_MAP_U64_, map->capacity, key,
                                 cursor);
}

/* The value of the next entry with key after the cursor's, or NULL. */
static inline void *curdi_hash_map_find_next(const curdi_hash_map *map,
                                             const void *key,
                                             curdi_hash_map_cursor *cursor)
{
    size_t from = (cursor->slot + 1u) & (map->capacity - 1u);
    if (map->key_bytes != 0)
        return curdi_hash_map_probe_bytes_(map, from, key, cursor);
    return curdi_hash_map_probe_(map, CURDI_HASH_MAP_U64_, from, key, cursor);
}

/* Removes the entry the cursor is at (from find or find_next, the map
 * unchanged since). */
static inline void curdi_hash_map_remove_at(curdi_hash_map *map,
                                            const curdi_hash_map_cursor *cursor)
{
    if (map->key_bytes != 0)
        curdi_hash_map_remove_bytes_(map, cursor->slot);
    else
        curdi_hash_map_remove_in_(map, CURDI_HASH_MAP_U64_, cursor->slot);
}

/* Removes the entry with key whose value is value; false when there is
 * none. */
bool curdi_hash_map_remove(curdi_hash_map *map, const void *key,
                           const void *value);

/* Grows the map, if need be, so that `more` inserts will not allocate
 * (nor fail); false, the map unchanged, when it cannot. */
bool curdi_hash_map_reserve(curdi_hash_map *map, size_t more);

/* Halves the slots while the map stays under an eighth full and at its
 * first capacity or above; a failure to allocate keeps them all. */
void curdi_hash_map_shrink(curdi_hash_map *map);

/* Every value, in no order: start *position at 0; NULL once all were
 * given. The map may not change in between. */
void *curdi_hash_map_next_entry(const curdi_hash_map *map, size_t *position);
/* Calls fn on every value, in no order; fn may not change the map. */
void curdi_hash_map_each(const curdi_hash_map *map,
                         void (*fn)(void *value, void *context),
                         void *context);
/* Empties the map, keeping its slots; the records are the caller's. */
void curdi_hash_map_clear(curdi_hash_map *map);

/* A record's address as a uint64 key, for maps of records by address. */
static inline uint64_t curdi_hash_map_address_key(const void *pointer)
{
    return (uint64_t)(uintptr_t)pointer;
}

static inline size_t curdi_hash_map_count(const curdi_hash_map *map)
{
    return map->count;
}

#endif
