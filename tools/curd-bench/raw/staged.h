/* staged.h - the best staged upload from malloc memory that the raw
 * driver and this host's cores allow, as the baseline curd's long pageable
 * upload is held to (transfer/pageable-upload-256M).
 *
 * Why: the device cannot read pageable memory, so a pageable upload is a
 * host copy into page-locked memory and a DMA out of it, and on the H100
 * host of doc/PERFORMANCE.md the host copy, not the bus, is the bound
 * (the eleventh run). Against pinned memory's bandwidth alone, a miss says
 * nothing about curd; against this pipeline, it does.
 *
 * The pipeline: `threads` threads (the caller among them) copy each
 * 8 MiB chunk into one of three page-locked slots, each thread a fixed
 * slice of it, and cuMemcpyHtoDAsync moves the chunk while they copy the
 * next. Between uploads the helpers sleep; during one they poll for the
 * next chunk, so no chunk waits for a wake-up. It shares nothing with
 * libcurd but the device's primary context. */
#ifndef CURD_TOOLS_CURD_BENCH_RAW_STAGED_H
#define CURD_TOOLS_CURD_BENCH_RAW_STAGED_H

#include "harness/common.h"

/* As many threads as curd copies a long upload with on the 16-core H100
 * host (its 6 copy threads, the 6 a long upload adds and the caller), at
 * most one fewer than the processors online. */
#define BENCH_STAGED_THREADS 13u
/* Chunks and slots as curd's defaults have them (CURD_CHUNK_MAX_BYTES,
 * CURD_STAGING_SLOTS), so that only the copying differs. */
#define BENCH_STAGED_CHUNK_MIB 8u
#define BENCH_STAGED_SLOTS 3u

typedef struct bench_staged bench_staged;

/* A pipeline that uploads byte_len bytes from host to device_ptr: its
 * slots, streams and helper threads. 0 and *out, or -1 after bench_fail().
 * The device's context is pushed around the driver calls. */
int bench_staged_create(const bench_env *env, bench_cu_deviceptr device_ptr,
                        const void *host, size_t byte_len,
                        bench_staged **out);
/* Joins the helpers and frees the rest; NULL is a no-op. */
void bench_staged_destroy(bench_staged *staged);
/* Threads that copy (the caller's included). */
unsigned bench_staged_threads(const bench_staged *staged);

/* A bench_op_fn over a bench_staged: `iterations` uploads, each ending
 * when its last DMA has. */
int bench_op_staged_upload(void *staged, uint64_t iterations);

#endif
