/* curd-bench - curd against the raw CUDA driver, side by side in one run.
 *
 * For each scenario it checks every path byte for byte with random data,
 * then times the raw driver doing the work in the fewest calls and curd
 * doing the same work, interleaved, and prints median (min, max) per
 * operation, the curd/raw ratios and the targets of the issues with PASS or
 * MISS. tools/curd-bench/README.md says what each scenario compares.
 *
 * It uses only the public API of libcurd.so.1; the raw driver it loads on
 * its own (harness/cuda.c). Exit status: see harness/main.h. */
#include "harness/main.h"
#include "scenarios/scenarios.h"
#include "scenarios/share.h"

static const bench_scenario_entry scenarios[] = {
    {"pool/device-hit",
     "4 KiB device-pool cache hit vs cuMemAllocAsync (warm pool) and "
     "cuMemAlloc",
     bench_pool_device_hit, false},
    {"pool/pinned-hit", "4 KiB pinned-pool cache hit vs cuMemHostAlloc",
     bench_pool_pinned_hit, false},
    {"pool/threads",
     "cache-hit acquire+release throughput at 1, 2, 4, 8 threads",
     bench_pool_threads, false},
    {"transfer/fused-reads",
     "64 adjacent 4 KiB reads in one batch vs 64 raw copies and one 256 KiB "
     "copy",
     bench_transfer_fused_reads, false},
    {"transfer/pageable-upload-256M",
     "256 MiB upload from malloc memory vs cuMemcpyHtoD and pinned "
     "cuMemcpyHtoDAsync",
     bench_transfer_pageable_upload, false},
    {"transfer/pinned-upload-256M",
     "256 MiB upload from registered memory vs pinned cuMemcpyHtoDAsync",
     bench_transfer_pinned_upload, false},
    {"transfer/pageable-download-256M",
     "256 MiB download into malloc memory vs cuMemcpyDtoH and pinned "
     "cuMemcpyDtoHAsync",
     bench_transfer_pageable_download, false},
    {"transfer/pinned-download-256M",
     "256 MiB download into registered memory vs pinned cuMemcpyDtoHAsync",
     bench_transfer_pinned_download, false},
    {"transfer/pinned-download-async-256M",
     "256 MiB curd_buffer_download_async into registered memory vs "
     "cuMemcpyDtoHAsync",
     bench_transfer_pinned_download_async, false},
    {"transfer/small-roundtrip",
     "4 KiB upload + 4 KiB download, one fence each, vs raw copies",
     bench_transfer_small_roundtrip, false},
    {"transfer/upload-sweep",
     "uploads of 4 KiB to 1 GiB: raw and curd, pageable and page-locked",
     bench_transfer_upload_sweep, false},
    {"transfer/download-sweep",
     "downloads of 4 KiB to 1 GiB: raw and curd, pageable and page-locked",
     bench_transfer_download_sweep, false},
    {"transfer/scattered-reads",
     "64 4 KiB reads at one stride: one strided DMA, the kernels, one"
     " contiguous copy",
     bench_transfer_scattered_reads, false},
    {"transfer/scattered-writes",
     "64 4 KiB writes at one stride: one strided DMA, the kernels, one"
     " contiguous copy",
     bench_transfer_scattered_writes, false},
    {"transfer/scattered-reads-irregular",
     "64 4 KiB reads at random points: gathered, one DMA each, one"
     " contiguous copy",
     bench_transfer_scattered_reads_irregular, false},
    {"transfer/scattered-writes-irregular",
     "64 4 KiB writes at random points: scattered, one DMA each, one"
     " contiguous copy",
     bench_transfer_scattered_writes_irregular, false},
    {"transfer/scattered-reads-cold",
     "64 4 KiB reads at one stride into cold malloc memory (the start of "
     "256 MiB a download just filled)",
     bench_transfer_scattered_reads_cold, false},
    {"transfer/scattered-writes-cold",
     "64 4 KiB writes at one stride from cold malloc memory (the start of "
     "256 MiB a download just filled)",
     bench_transfer_scattered_writes_cold, false},
    {"transfer/scattered-reads-irregular-cold",
     "64 4 KiB reads at random points into cold malloc memory",
     bench_transfer_scattered_reads_irregular_cold, false},
    {"transfer/scattered-writes-irregular-cold",
     "64 4 KiB writes at random points from cold malloc memory",
     bench_transfer_scattered_writes_irregular_cold, false},
    {"share/import-read-256M",
     "256 MiB read of a shareable buffer by the process that imported it vs "
     "by the exporter",
     bench_share_import_read, false},
    {"share/export-import-map",
     "a shareable buffer handed to another process: export, send, import, "
     "map, unmap",
     bench_share_export_import, false},
    {"tune/pageable-upload",
     "256 MiB from malloc memory under each of libcurd's copy settings",
     bench_tune_pageable_upload, true},
    {"tune/pageable-download",
     "256 MiB into malloc memory under each of libcurd's copy settings",
     bench_tune_pageable_download, true},
    {"tune/small-download",
     "256 KiB into malloc memory under smaller chunks and copy jobs",
     bench_tune_small_download, true},
    {"tune/gather-reads",
     "2 to 256 scattered reads of 4 KiB to 1 MiB: one DMA each vs gathered",
     bench_tune_gather_reads, true},
    {"tune/gather-writes",
     "2 to 256 scattered writes of 4 KiB to 1 MiB: one DMA each vs scattered",
     bench_tune_gather_writes, true},
    {"dispatch/borrowed-small",
     "4 KiB in, add_one, 4 KiB out, one fence: curd_dispatch vs "
     "HtoDAsync+cuLaunchKernel+DtoHAsync+sync",
     bench_dispatch_borrowed_small, false},
    {"dispatch/borrowed-large",
     "256 KiB in, add_one, 256 KiB out, one fence: curd_dispatch vs "
     "HtoDAsync+cuLaunchKernel+DtoHAsync+sync",
     bench_dispatch_borrowed_large, false},
    {"dispatch/empty-launch",
     "an empty launch and its fence: curd_dispatch vs cuLaunchKernel+sync",
     bench_dispatch_empty_launch, false},
    {"program/load-cached",
     "load+free of an image already loaded vs the driver's cached "
     "cuModuleLoadDataEx",
     bench_program_load_cached, false},
    {"batch/eight-launches",
     "8 dependent launches + 4 KiB read-back, streamed and as a graph, vs "
     "a raw graph replay",
     bench_batch_eight_launches, false},
    {"batch/eight-launches-second-stream",
     "the same graph and streamed batches after launches on a second stream",
     bench_batch_eight_launches_second_stream, false},
    {"batch/eight-launches-streamed",
     "the same batch streamed vs raw streamed launches",
     bench_batch_eight_launches_streamed, false},
    {"batch/graph-update",
     "graph replay after changing a launch's scalar or buffer vs replaying "
     "unchanged",
     bench_batch_graph_update, false},
    {"batch/launch-cost",
     "what each launch in a batch costs beyond cuLaunchKernel",
     bench_batch_launch_cost, false},
    {"session/reuse",
     "4 KiB session alloc+release of a size held idle vs "
     "curd_buffer_alloc+free",
     bench_session_reuse, false},
    {"session/static-hit",
     "1 MiB static set hit (no upload) vs uploading the tables, and vs a "
     "session that caches nothing",
     bench_session_static_hit, false},
    {"session/pipeline",
     "50 passes of allocations, static tables, a batch and read-backs, with "
     "a session vs without",
     bench_session_pipeline, false},
    {"peer/copy-256M",
     "256 MiB GPU0 -> GPU1: curd_buffer_copy vs cuMemcpyPeerAsync+sync",
     bench_peer_copy_large, false},
    {"peer/copy-4K-sync",
     "4 KiB GPU0 -> GPU1, synchronised: curd_buffer_copy vs "
     "cuMemcpyPeerAsync+sync",
     bench_peer_copy_small, false},
#define ALL_REDUCE_ENTRY(suffix, size)                                        \
    {"collective/all-reduce-" #suffix,                                        \
     size " float32 all-reduce on 2 GPUs: curd_collective_run vs "            \
          "ncclAllReduce in a group",                                         \
     bench_collective_all_reduce_##suffix, false}
    ALL_REDUCE_ENTRY(4K, "4 KiB"),
    ALL_REDUCE_ENTRY(64K, "64 KiB"),
    ALL_REDUCE_ENTRY(1M, "1 MiB"),
    ALL_REDUCE_ENTRY(16M, "16 MiB"),
    ALL_REDUCE_ENTRY(64M, "64 MiB"),
    ALL_REDUCE_ENTRY(256M, "256 MiB"),
#undef ALL_REDUCE_ENTRY
    {"collective/graph-batch",
     "per GPU of 2, a thread each: 8 launches + a 4 KiB all-reduce + a "
     "read-back, graph replay vs streamed",
     bench_collective_graph_batch, false},
    {"interop/event-wait-dispatch",
     "an empty dispatch after curd_device_wait_event on the caller's event "
     "vs the dispatch alone",
     bench_interop_event_wait_dispatch, false},
    {"interop/batch-on-caller-stream",
     "8 launches as a batch on the caller's stream + its sync vs raw "
     "launches + sync, and vs curd's stream",
     bench_interop_batch_on_caller_stream, false},
};

int main(int argc, char **argv)
{
    /* Started again by the share/ scenarios as their importing process. */
    if (bench_share_child_wanted())
        return bench_share_child_main();
    static const bench_program program = {
        "curd-bench", scenarios, sizeof scenarios / sizeof scenarios[0]};
    return bench_main(&program, argc, argv);
}
