/* gather.h - scattered pieces staged by hand with the raw driver and the
 * library's own transfer kernels (lib/transfer/gather.cu's curd_gather
 * and curd_scatter, from the committed PTX): what a program that had
 * those kernels would do without curd, as the baseline of the irregular
 * scattered scenarios (scenarios/scattered.c).
 *
 * Why: curd moves irregular pieces between a resident buffer and malloc
 * memory through a page-locked staging area, a kernel launch that packs
 * or places them across the bus, a fence, and one core's copy between
 * the staging area and the caller's memory. Against a DMA per piece or
 * one contiguous copy, a miss says little about curd; against the same
 * kernels launched by hand, it does (doc/PERFORMANCE.md, the seventeenth
 * run).
 *
 * One operation: a read launches curd_gather into the staging area,
 * synchronizes the stream and copies the staging area out with memcpy; a
 * write copies in with memcpy, launches curd_scatter and synchronizes.
 * The kernel's table is built once, not per operation. */
#ifndef CURD_TOOLS_CURD_BENCH_RAW_GATHER_H
#define CURD_TOOLS_CURD_BENCH_RAW_GATHER_H

#include "harness/common.h"

typedef struct bench_raw_gather bench_raw_gather;

/* count pieces of piece_bytes, piece i at device_ptr + offsets[i] and at
 * i * piece_bytes of host (count * piece_bytes of malloc memory), moved on
 * stream through page-locked memory of its own. 0 and *out, or -1 after
 * bench_fail() with nothing left. The device's context is pushed around
 * the driver calls. */
int bench_raw_gather_create(const bench_env *env, bench_cu_stream stream,
                            bench_cu_deviceptr device_ptr,
                            const size_t *offsets, size_t count,
                            size_t piece_bytes, unsigned char *host,
                            bench_raw_gather **out);
/* Unloads the module and frees the rest; NULL is a no-op. */
void bench_raw_gather_destroy(bench_raw_gather *gather);

/* bench_op_fn over a bench_raw_gather: `iterations` reads into its host
 * memory, or writes from it, each ending when its bytes have landed. */
int bench_op_raw_gather_read(void *gather, uint64_t iterations);
int bench_op_raw_scatter_write(void *gather, uint64_t iterations);

#endif
