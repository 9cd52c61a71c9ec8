/* pool_records.h - the pool's block records and the directory that a
 * token names them by (pool_records.c says why tokens exist).
 *
 * Only the pool's modules include it (pool_shards.h, pool_fronts.c, pool.c):
 * the record is the one type every part of the pool moves around, and a
 * token's encoding (index and generation) is what its release decodes.
 * hand_out, directory_record and state_of are inline here because the
 * lock-free hit and the token release call them: a call layer is a
 * measurable part of a 30 ns hit. Making and retiring records takes a lock
 * and stays in pool_records.c. */
#ifndef CURD_LIB_MEMORY_POOL_RECORDS_H
#define CURD_LIB_MEMORY_POOL_RECORDS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CACHE_LINE 64u

/* Tokens: a record's directory index (below 2^24, 0 for none) and the low
 * 8 bits of its hand-out generation. */
#define TOKEN_GENERATION_BITS 8u
#define DIRECTORY_CHUNK_SHIFT 12u
#define DIRECTORY_CHUNK (1u << DIRECTORY_CHUNK_SHIFT)
#define DIRECTORY_CHUNKS (1u << 12)
#define DIRECTORY_MAX (DIRECTORY_CHUNK * DIRECTORY_CHUNKS)

/* The host-side record of one upstream block. It sits in exactly one place
 * at a time: a shard's live table (keyed by its address), a shard's class
 * stack (linked through next), a front's slots, or, handed out with a
 * token, nowhere but its directory entry (state BLOCK_HELD). A record
 * keeps its directory index for the pool's life: when its block goes
 * upstream it waits on the spare list (state BLOCK_SPARE) for the next
 * block, so a token, however stale, never names freed memory. */
typedef struct pool_block {
    uint64_t address;
    size_t class_bytes;
    size_t byte_len; /* what the current holder asked for, while live */
    unsigned class_index;
    uint32_t index; /* in the pool's directory; 0: none (no token) */
    /* kind (BLOCK_*) in the low 8 bits, the hand-out generation above. */
    _Atomic uint32_t state;
    struct pool_block *next;
} pool_block;

enum block_kind {
    BLOCK_IDLE,  /* cached, in a live table, or between places */
    BLOCK_HELD,  /* handed out with a token: in no table */
    BLOCK_SPARE  /* its block is gone upstream; waiting for the next */
};
_Static_assert(sizeof(pool_block) <= CACHE_LINE,
               "a block record fits the cache line it is allocated as");

/* Index -> record for tokens: chunks made as records are, never moved or
 * freed before the pool. */
typedef struct pool_records {
    _Atomic(pool_block *) *_Atomic *directory;
    pthread_mutex_t records_lock; /* records_made, spare_records */
    uint32_t records_made;
    pool_block *spare_records;
} pool_records;

/* An empty directory; false (nothing to free) when host memory is short
 * or the lock cannot be made. */
bool curdi_pool_records_init(pool_records *records);
/* Frees every record with an index (spare or not: the pool has sent every
 * block upstream) and the directory. */
void curdi_pool_records_fini(pool_records *records);
/* NULL when host memory is short (pool_records.c says which record). */
pool_block *curdi_pool_records_new(pool_records *records);
void curdi_pool_records_retire(pool_records *records, pool_block *block);
/* Pushes every record out with a token (in no table, so only the
 * directory has it) onto *detached, through next (the pool is closing,
 * every shard locked). */
void curdi_pool_records_detach_held(pool_records *records,
                                    pool_block **detached);

static inline uint32_t state_of(uint32_t generation, enum block_kind kind)
{
    return generation << 8 | (uint32_t)kind;
}

/* The record a token's index names, or NULL (no such index). */
static inline pool_block *directory_record(pool_records *records,
                                          uint32_t index)
{
    if (index == 0 || index >= DIRECTORY_MAX)
        return NULL;
    _Atomic(pool_block *) *chunk = atomic_load_explicit(
        &records->directory[index >> DIRECTORY_CHUNK_SHIFT],
        memory_order_acquire);
    if (chunk == NULL)
        return NULL;
    return atomic_load_explicit(&chunk[index & (DIRECTORY_CHUNK - 1u)],
                                memory_order_acquire);
}

/* Hands a block out with a token (it goes in no table): a new generation,
 * published with the sizes it is handed out with. */
static inline uint32_t hand_out(pool_block *block, size_t byte_len)
{
    block->byte_len = byte_len;
    uint32_t generation =
        ((atomic_load_explicit(&block->state, memory_order_relaxed) >> 8) +
         1u) & ((1u << TOKEN_GENERATION_BITS) - 1u);
    atomic_store_explicit(&block->state, state_of(generation, BLOCK_HELD),
                          memory_order_release);
    return block->index << TOKEN_GENERATION_BITS | generation;
}

#endif
