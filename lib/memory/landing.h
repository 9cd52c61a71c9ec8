/* landing.h - the landing module: a few MiB of page-locked memory that the
 * staging slots of downloads into pageable memory, and a dispatch's
 * read-backs, land in, each time at a place the CPU has not read lately.
 *
 * Why: a DMA into lines that a core holds in its caches waits on every
 * line's snoop. The pinned pool keeps its free blocks last in, first out,
 * so every download got the blocks the last one's copy-out had just
 * read. On the H100 host of doc/PERFORMANCE.md (raw driver, one run), a
 * DMA into a block the CPU had just read took 16.7 us at 256 KiB, 28.0 us
 * at 512 KiB and 48.2 us at 1 MiB; into one it had not read, 11.2, 16.4
 * and 27.8 us. A read of 256 KiB into malloc memory (DMA, wait, memcpy
 * out) went from 27.9 to 25.4 us when it took turns over 16 places, 4 MiB
 * in all; turns over 1 MiB in all helped only partly (the core's L2 holds
 * 2 MiB). Where several cores copy a download out (1 MiB and up, the
 * copy team), the turns must pass all their caches: lib/transfer/tuning.h has the
 * area's size and what it bought.
 *
 * The module owns one area (made at the first landing) of CURDI_LANDING_GRANULES
 * granules, a mask of the free ones, and a cursor: a landing takes the
 * granules at the cursor and moves it past them, so landings follow one
 * another around the area. Lock-free but for making the area. */
#ifndef CURD_LIB_MEMORY_LANDING_H
#define CURD_LIB_MEMORY_LANDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/staging.h"

struct curd_device;

/* Granules of one area: one bit each in the free mask. */
#define CURDI_LANDING_GRANULES 64u

/* A place taken: host NULL when none. */
typedef struct curdi_landing {
    unsigned char *host;
    uint64_t granules; /* the mask bits held */
} curdi_landing;

/* Creates the module; no driver call (the area is made by the first
 * landing, so a device that never lands holds none). */
curd_status curdi_landing_open(struct curd_device *device);
/* Frees the area, if made (context current). NULL-safe. */
void curdi_landing_close(struct curd_device *device);

/* The area's size (rounded down to a multiple of CURDI_LANDING_GRANULES *
 * 4 KiB; 0: no landing); set once as the device opens, before any landing
 * (the transfer module sets it from the device's tuning,
 * CURD_LANDING_BYTES). */
void curdi_landing_set_bytes(struct curd_device *device, uint64_t area_bytes);

/* A place for byte_len bytes (context current): true with *out set;
 * false, with *out empty, when landing is off, byte_len is 0 or more than
 * a quarter of the area, the area could not be made (a later landing
 * tries again), or another landing holds granules at the cursor. The
 * caller then stages through its pool. */
bool curdi_landing_take(struct curd_device *device, size_t byte_len,
                        curdi_landing *out);
/* Gives a place back and empties *landing; an empty one is a no-op. */
void curdi_landing_give(struct curd_device *device, curdi_landing *landing);

/* The page-locked place that a DMA from the device fills for the CPU to
 * copy out of (context current): a place in the area when one is free
 * (curdi_landing_take), else a block of the device's pinned pool.
 * *staging names it either way (its host and byte_len, for
 * curdi_staging_read and the DMA); after a landing it holds no pool block,
 * so it goes back through curdi_landing_put_back, never
 * curdi_staging_release. Fails only as the pool's acquire does, with both
 * left empty. */
curd_status curdi_landing_or_staging(struct curd_device *device,
                                     size_t byte_len, curdi_landing *landing,
                                     curdi_staging *staging);
/* Gives back what curdi_landing_or_staging took (or a staging area taken
 * from the pool directly, with *landing empty) and empties both. */
void curdi_landing_put_back(struct curd_device *device,
                            curdi_landing *landing, curdi_staging *staging);

/* How many takes landed and how many were declined (the tests' view). */
void curdi_landing_counts(const struct curd_device *device,
                          uint64_t *out_landed, uint64_t *out_declined);

#endif
