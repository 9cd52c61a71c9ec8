/* gather.h - the gather module: the transfer engine's two kernels on a
 * device (lib/transfer/gather.cu), loaded on first use, and their launches.
 *
 * curd_gather packs pieces of device memory, scattered over one or more
 * resident buffers, into one contiguous area of page-locked host memory
 * (a pinned staging slot, or the caller's registered memory); curd_scatter
 * places them back from it. The kernels reach that memory across the bus
 * at its host address, so a chunk of many small spans crosses in one
 * launch, with no DMA and no device staging (lib/transfer/plan.h says when the
 * planner chooses it). On the H100 of doc/PERFORMANCE.md a launch and its
 * fence cost about 9.5 us, a DMA and its fence 7 to 12 us, and a kernel
 * followed by a DMA 25 us: the one launch is what keeps 64 scattered
 * reads near one contiguous copy.
 *
 * The kernels come from the PTX committed beside their CUDA C
 * (lib/transfer/gather.ptx, embedded as curdi_gather_ptx by the build). The module
 * loads that module with the driver directly, once per device, on the
 * first transfer that gathers; it does not go through the program module,
 * which sits above transfer in lib/LAYERS and whose module cache, bound
 * and counters belong to the application's programs. A driver that cannot
 * JIT the PTX (an image error: CURD_E_PROGRAM) is remembered: transfers
 * on that device then use one DMA per span, as before. Any other failure
 * of the load fails the transfer that asked, and the next one tries
 * again. A device that cannot reach page-locked host memory at its host
 * address (no unified addressing) is remembered the same way. The state's
 * lock is never held across a driver call. */
#ifndef CURD_LIB_TRANSFER_GATHER_H
#define CURD_LIB_TRANSFER_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"
#include "transfer/engine.h"

struct curd_device;

/* The PTX of lib/transfer/gather.cu (generated from lib/transfer/gather.ptx). */
extern const char curdi_gather_ptx[];

/* Must match lib/transfer/gather.cu: pieces per launch, bytes per block (one tile
 * of the staging area), threads per block. */
#define CURDI_GATHER_PIECES 254u
#define CURDI_GATHER_TILE_BYTES 4096u
#define CURDI_GATHER_BLOCK_THREADS 256u

/* The kernels' parameter after the staging pointer, laid out as struct
 * curd_gather_table in lib/transfer/gather.cu (the PTX declares 4080 bytes,
 * 8-aligned): the pieces of one launch, in stage_offset order, back to
 * back over [range_start, range_end) of the staging area. The stand-in
 * driver (tests/fake/) reads it as the kernels do. */
typedef struct curdi_gather_piece {
    uint64_t device_ptr;
    uint32_t stage_offset;
    uint32_t byte_len;
} curdi_gather_piece;

typedef struct curdi_gather_table {
    uint32_t count;
    uint32_t range_start;
    uint32_t range_end;
    uint32_t signal_offset; /* curd_gather: 0, or its blocks' words */
    curdi_gather_piece piece[CURDI_GATHER_PIECES];
} curdi_gather_table;

_Static_assert(sizeof(curdi_gather_table) == 4080,
               "curdi_gather_table must match lib/transfer/gather.cu");

/* The two kernels of a device whose module is loaded. */
typedef struct curdi_gather_kernels {
    curdi_cu_function gather;  /* device pieces -> host staging */
    curdi_cu_function scatter; /* host staging -> device pieces */
} curdi_gather_kernels;

/* Creates device->gather (no driver call; the module loads on first
 * use). On failure nothing is left. */
curd_status curdi_gather_open(struct curd_device *device);
/* Unloads the module, if loaded (driver calls skipped when
 * curdi_driver_usable() is false), and frees the state. NULL-safe. */
void curdi_gather_close(struct curd_device *device);

/* Whether the device is known not to run the kernels (its driver could
 * not JIT them): the planner then never gathers. */
bool curdi_gather_unavailable(struct curd_device *device);
/* Whether the device holds the kernels' module now (one driver module
 * beside the program module's, until the device closes): for the tests
 * that count what the driver holds. */
bool curdi_gather_loaded(struct curd_device *device);

/* The kernels, loading the module on the first call (context current).
 * CURD_E_PROGRAM when the driver cannot JIT the PTX (remembered: from
 * then on curdi_gather_unavailable is true); another status, with its
 * sentence, for a failed driver call. */
curd_status curdi_gather_kernels_get(struct curd_device *device,
                                     curdi_gather_kernels *out);

/* The kernels for work that would use them (a plan that gathers, a
 * batch's read-backs in lib/launch/batch_run.c), context current:
 * *out_usable is false, with CURD_OK, where that work should use DMAs
 * instead: the device's transfer path is "dma" (CURD_TRANSFER_PATH), or
 * its driver cannot run the kernels (remembered as above). Another
 * status, with its sentence, for a failed driver call. */
curd_status curdi_gather_kernels_if_usable(struct curd_device *device,
                                           curdi_gather_kernels *out,
                                           bool *out_usable);

/* Enqueues on stream the launches that move count pieces between their
 * device bytes and stage + stage_offset, page-locked host memory (a pinned
 * allocation or a registration): into it (to_stage, curd_gather) or out
 * of it (curd_scatter). The pieces come in stage_offset order, back to
 * back, all below 4 GiB (a chunk is at most CURDI_CHUNK_BYTES_LIMIT). One
 * launch per CURDI_GATHER_PIECES pieces. */
curd_status curdi_gather_enqueue(const curdi_gather_kernels *kernels,
                                 curdi_cu_stream stream, bool to_stage,
                                 unsigned char *stage,
                                 const curdi_engine_piece *pieces, size_t count);

/* The most blocks a signalling launch may have: their words fill one
 * 64-byte line. */
#define CURDI_GATHER_SIGNAL_BLOCKS 16u

/* Enqueues one curd_gather launch of pieces (at most CURDI_GATHER_PIECES),
 * as curdi_gather_enqueue. When it has at most CURDI_GATHER_SIGNAL_BLOCKS
 * blocks, they then signal that the bytes are visible to the host: block b
 * writes 1 to the uint32_t at stage + signal_offset + 4 * b
 * (lib/transfer/gather.cu), and *out_words is how many blocks there are;
 * the caller clears those words before the launch runs and polls them.
 * A wider launch does not signal, and *out_words is 0. The words lie
 * outside the pieces' bytes, 4-aligned, at a non-zero offset below
 * 4 GiB. */
curd_status curdi_gather_enqueue_signalled(const curdi_gather_kernels *kernels,
                                           curdi_cu_stream stream,
                                           unsigned char *stage,
                                           const curdi_engine_piece *pieces,
                                           size_t count, size_t signal_offset,
                                           unsigned *out_words);

#endif
