/* curd-bench - curd against the raw CUDA driver, side by side in one run.
 *
 * For each scenario it checks every path byte for byte with random data,
 * then times the raw driver doing the work in the fewest calls and curd
 * doing the same work, interleaved, and prints median (min, max) per
 * operation, the curd/raw ratios and the targets of the issues with PASS or
 * MISS. tools/README-bench.md says what each scenario compares.
 *
 * It uses only the public API of libcurd.so.1; the raw driver it loads on
 * its own (bench-cuda.c). Exit status: see bench-main.h. */
#include "bench-main.h"
#include "bench-scenarios.h"

static const bench_scenario_entry scenarios[] = {
    {"pool/device-hit",
     "4 KiB device-pool cache hit vs cuMemAllocAsync (warm pool) and "
     "cuMemAlloc",
     bench_pool_device_hit},
    {"pool/pinned-hit", "4 KiB pinned-pool cache hit vs cuMemHostAlloc",
     bench_pool_pinned_hit},
    {"pool/threads",
     "cache-hit acquire+release throughput at 1, 2, 4, 8 threads",
     bench_pool_threads},
    {"transfer/fused-reads",
     "64 adjacent 4 KiB reads in one batch vs 64 raw copies and one 256 KiB "
     "copy",
     bench_transfer_fused_reads},
    {"transfer/pageable-upload-256M",
     "256 MiB upload from malloc memory vs cuMemcpyHtoD and pinned "
     "cuMemcpyHtoDAsync",
     bench_transfer_pageable_upload},
    {"transfer/pinned-upload-256M",
     "256 MiB upload from registered memory vs pinned cuMemcpyHtoDAsync",
     bench_transfer_pinned_upload},
    {"transfer/pageable-download-256M",
     "256 MiB download into malloc memory vs cuMemcpyDtoH and pinned "
     "cuMemcpyDtoHAsync",
     bench_transfer_pageable_download},
    {"transfer/pinned-download-256M",
     "256 MiB download into registered memory vs pinned cuMemcpyDtoHAsync",
     bench_transfer_pinned_download},
    {"transfer/small-roundtrip",
     "4 KiB upload + 4 KiB download, one fence each, vs raw copies",
     bench_transfer_small_roundtrip},
    {"transfer/upload-sweep",
     "uploads of 4 KiB to 256 MiB: raw and curd, pageable and page-locked",
     bench_transfer_upload_sweep},
    {"transfer/download-sweep",
     "downloads of 4 KiB to 256 MiB: raw and curd, pageable and page-locked",
     bench_transfer_download_sweep},
    {"session/reuse",
     "4 KiB session alloc+release of a size held idle vs "
     "curd_buffer_alloc+free",
     bench_session_reuse},
    {"session/static-hit",
     "1 MiB static set hit (no upload) vs uploading the tables, and vs a "
     "session that caches nothing",
     bench_session_static_hit},
};

int main(int argc, char **argv)
{
    static const bench_program program = {
        "curd-bench", scenarios, sizeof scenarios / sizeof scenarios[0]};
    return bench_main(&program, argc, argv);
}
