/* scenarios.h - curd-bench's scenarios (scenarios/pool.c,
 * scenarios/transfer.c, scenarios/sweep.c, scenarios/scattered.c, scenarios/tune.c,
 * scenarios/dispatch.c, scenarios/batch.c, scenarios/session.c, scenarios/pipeline.c,
 * scenarios/peer.c, scenarios/collective.c, scenarios/interop.c,
 * scenarios/share.c);
 * tools/curd-bench/README.md says what each compares. */
#ifndef CURD_TOOLS_CURD_BENCH_SCENARIOS_SCENARIOS_H
#define CURD_TOOLS_CURD_BENCH_SCENARIOS_SCENARIOS_H

#include "harness/common.h"

int bench_pool_device_hit(const bench_env *env);
int bench_pool_pinned_hit(const bench_env *env);
int bench_pool_threads(const bench_env *env);
int bench_transfer_fused_reads(const bench_env *env);
int bench_transfer_pageable_upload(const bench_env *env);
int bench_transfer_pinned_upload(const bench_env *env);
int bench_transfer_pageable_download(const bench_env *env);
int bench_transfer_pinned_download(const bench_env *env);
int bench_transfer_pinned_download_async(const bench_env *env);
int bench_transfer_small_roundtrip(const bench_env *env);
int bench_transfer_upload_sweep(const bench_env *env);
int bench_transfer_download_sweep(const bench_env *env);
int bench_transfer_scattered_reads(const bench_env *env);
int bench_transfer_scattered_writes(const bench_env *env);
int bench_transfer_scattered_reads_irregular(const bench_env *env);
int bench_transfer_scattered_writes_irregular(const bench_env *env);
int bench_transfer_scattered_reads_cold(const bench_env *env);
int bench_transfer_scattered_writes_cold(const bench_env *env);
int bench_transfer_scattered_reads_irregular_cold(const bench_env *env);
int bench_transfer_scattered_writes_irregular_cold(const bench_env *env);
int bench_share_import_read(const bench_env *env);
int bench_share_export_import(const bench_env *env);
int bench_tune_pageable_upload(const bench_env *env);
int bench_tune_pageable_download(const bench_env *env);
int bench_tune_small_download(const bench_env *env);
int bench_tune_gather_reads(const bench_env *env);
int bench_tune_gather_writes(const bench_env *env);
int bench_dispatch_borrowed_small(const bench_env *env);
int bench_dispatch_borrowed_large(const bench_env *env);
int bench_dispatch_empty_launch(const bench_env *env);
int bench_program_load_cached(const bench_env *env);
int bench_batch_eight_launches(const bench_env *env);
int bench_batch_eight_launches_second_stream(const bench_env *env);
int bench_batch_eight_launches_streamed(const bench_env *env);
int bench_batch_graph_update(const bench_env *env);
int bench_batch_launch_cost(const bench_env *env);
int bench_session_reuse(const bench_env *env);
int bench_session_static_hit(const bench_env *env);
int bench_session_pipeline(const bench_env *env);
int bench_peer_copy_large(const bench_env *env);
int bench_peer_copy_small(const bench_env *env);
int bench_collective_all_reduce_4K(const bench_env *env);
int bench_collective_all_reduce_64K(const bench_env *env);
int bench_collective_all_reduce_1M(const bench_env *env);
int bench_collective_all_reduce_16M(const bench_env *env);
int bench_collective_all_reduce_64M(const bench_env *env);
int bench_collective_all_reduce_256M(const bench_env *env);
int bench_collective_graph_batch(const bench_env *env);
int bench_interop_event_wait_dispatch(const bench_env *env);
int bench_interop_batch_on_caller_stream(const bench_env *env);

#endif
