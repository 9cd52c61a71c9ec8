/* pool_records.c - the records of a pool's upstream blocks and the
 * directory that tokens name them by.
 *
 * Why a module of its own: a record's life (made, handed out under a new
 * generation, retired to the spare list, freed with the pool) and the
 * directory that maps a token's index to it are one concern that needs
 * nothing of the pool's shards, fronts or statistics; the pool's modules
 * only hand records around. This module owns the index + generation scheme
 * and the rule that no record is freed before its pool.
 *
 * Tokens (why a release needs no table)
 * -------------------------------------
 * A block handed out through curd_block_acquire carries a token in
 * curd_block.reserved: its record's index in the pool's directory and the
 * low 8 bits of a generation that every hand-out moves on. The record is
 * in no live table; its state says it is out under that generation. The
 * release looks the record up by index (two loads), checks that the state,
 * the address and both sizes are what the block says, and claims it with
 * one compare-and-swap of the state (of two releases of one block at once,
 * one wins; the other is stale). So a release is O(1) on any thread, and
 * a copy altered in any field (a forged token included) is refused: a
 * token names only records of this pool, and an index whose record is not
 * out under that generation with those sizes at that address is refused
 * before anything changes. Records are never freed before the pool: when
 * a block goes upstream its record waits on a spare list for the next one
 * (keeping its index and generation), so no token, however stale, reads
 * freed memory. Past 2^24 - 1 records a new record has no index; its
 * block is handed out with token 0 and found by its address in the live
 * tables, as every block of curdi_pool_acquire is.
 */
#include "memory/pool_records.h"

#include <stdlib.h>
#include <string.h>

bool curdi_pool_records_init(pool_records *records)
{
    _Atomic(pool_block *) *_Atomic *directory =
        calloc(DIRECTORY_CHUNKS, sizeof *directory);
    if (directory == NULL ||
        pthread_mutex_init(&records->records_lock, NULL) != 0) {
        free(directory);
        return false;
    }
    records->directory = directory;
    for (unsigned c = 0; c < DIRECTORY_CHUNKS; c++)
        atomic_init(&directory[c], NULL);
    return true;
}

void curdi_pool_records_fini(pool_records *records)
{
    /* Every record with an index (spare or not: destroy has sent every
     * block upstream) and the directory. */
    for (unsigned c = 0; records->directory != NULL && c < DIRECTORY_CHUNKS;
         c++) {
        _Atomic(pool_block *) *chunk = atomic_load(&records->directory[c]);
        for (unsigned j = 0; chunk != NULL && j < DIRECTORY_CHUNK; j++)
            free(atomic_load(&chunk[j]));
        free(chunk);
    }
    free(records->directory);
    pthread_mutex_destroy(&records->records_lock);
}

/* A record for a new upstream block: a spare one (its index kept), else a
 * new one with the next index, else (past DIRECTORY_MAX - 1 records) one
 * without an index, whose block is handed out without a token. NULL when
 * host memory is short. */
pool_block *curdi_pool_records_new(pool_records *records)
{
    pthread_mutex_lock(&records->records_lock);
    pool_block *block = records->spare_records;
    if (block != NULL) {
        records->spare_records = block->next;
        pthread_mutex_unlock(&records->records_lock);
        block->next = NULL;
        /* Its generation goes on, so that no earlier token names it. */
        uint32_t generation = atomic_load(&block->state) >> 8;
        atomic_store_explicit(&block->state, state_of(generation, BLOCK_IDLE),
                              memory_order_relaxed);
        return block;
    }
    /* A cache line of its own: a record is written on every acquire and
     * release, by whichever thread holds it now, and records allocated one
     * after the other by one thread may be used by different threads. */
    block = aligned_alloc(CACHE_LINE, CACHE_LINE);
    if (block == NULL) {
        pthread_mutex_unlock(&records->records_lock);
        return NULL;
    }
    memset(block, 0, sizeof *block);
    atomic_init(&block->state, state_of(0, BLOCK_IDLE));
    uint32_t index = records->records_made + 1u;
    if (index < DIRECTORY_MAX) {
        _Atomic(pool_block *) *chunk = atomic_load_explicit(
            &records->directory[index >> DIRECTORY_CHUNK_SHIFT],
            memory_order_relaxed);
        if (chunk == NULL) {
            chunk = calloc(DIRECTORY_CHUNK, sizeof *chunk);
            if (chunk != NULL)
                atomic_store_explicit(
                    &records->directory[index >> DIRECTORY_CHUNK_SHIFT], chunk,
                    memory_order_release);
        }
        if (chunk != NULL) {
            block->index = index;
            records->records_made = index;
            atomic_store_explicit(&chunk[index & (DIRECTORY_CHUNK - 1u)],
                                  block, memory_order_release);
        }
    }
    pthread_mutex_unlock(&records->records_lock);
    return block;
}

/* The record of a block gone upstream: kept for its index, or freed when
 * it has none. */
void curdi_pool_records_retire(pool_records *records, pool_block *block)
{
    if (block->index == 0) {
        free(block);
        return;
    }
    uint32_t generation = atomic_load(&block->state) >> 8;
    atomic_store_explicit(&block->state, state_of(generation, BLOCK_SPARE),
                          memory_order_relaxed);
    pthread_mutex_lock(&records->records_lock);
    block->next = records->spare_records;
    records->spare_records = block;
    pthread_mutex_unlock(&records->records_lock);
}

void curdi_pool_records_detach_held(pool_records *records,
                                    pool_block **detached)
{
    /* Blocks out with a token are in no table: the directory has them. */
    for (unsigned c = 0; c < DIRECTORY_CHUNKS; c++) {
        _Atomic(pool_block *) *chunk = atomic_load(&records->directory[c]);
        for (unsigned j = 0; chunk != NULL && j < DIRECTORY_CHUNK; j++) {
            pool_block *block = atomic_load(&chunk[j]);
            if (block != NULL &&
                (atomic_load(&block->state) & 0xffu) == BLOCK_HELD) {
                block->next = *detached;
                *detached = block;
            }
        }
    }
}
