/* test-plan.c - the host-side policy the plan decides (lib/transfer/plan.h:
 * curdi_plan_decide_host, curdi_plan_team_share, curdi_plan_team_growth),
 * one rule per test, on the CPU.
 *
 * Each test builds a plan of made-up items (no device: the plan is pure),
 * under the default tuning with the one tunable its rule is about set to
 * a round number, and checks what the rule says of the plan's chunks,
 * slots, events, streaming stores and copy team. The spans and the engine
 * are tests/test-spans.c's and tests/test-transfer.c's. */
#include <glib.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer/plan.h"

#define KIB ((uint64_t)1024)
#define MIB ((uint64_t)1024 * 1024)

/* The host memory the items point at: never read, since nothing runs. */
static unsigned char host_bytes[4096];

/* A registered range's start, for items that lie in one. */
#define REGISTERED_KEY ((uintptr_t)host_bytes)

/* Item `index` of a batch of equal items, byte_len each, one buffer, laid
 * out with a gap after each on the device (so they never fuse); host: in
 * registered memory (key) or pageable (key 0). The host addresses only
 * need to differ: the plan never reads them. */
static curdi_transfer_item item_at(size_t index, uint64_t byte_len,
                                   uintptr_t registered_key)
{
    curdi_transfer_item item;
    memset(&item, 0, sizeof item);
    item.buffer_key = 1;
    item.device_base = (uint64_t)1 << 40;
    item.offset = (uint64_t)index * 2u * byte_len;
    item.byte_len = byte_len;
    item.host = host_bytes + index;
    item.registered_key = registered_key;
    return item;
}

/* The plan of one pageable item of byte_len and its host side. */
static void decide_one(uint64_t byte_len, bool upload,
                       const curdi_tuning *tuning, curdi_plan *plan,
                       curdi_plan_host *host)
{
    curdi_transfer_item item = item_at(0, byte_len, 0);
    g_assert_cmpint(curdi_plan_build(&item, 1, NULL, 0, plan), ==, CURD_OK);
    curdi_plan_decide_host(plan, &item, 1, upload, tuning, host);
}

static void test_a_stream_up_to_the_minimum_chunk_is_one_chunk(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.chunk_min_bytes = MIB;
    decide_one(MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.chunk_bytes, ==, MIB);
    g_assert_cmpuint(host.chunk_count, ==, 1);
    curdi_plan_free(&plan);
}

static void test_a_longer_stream_is_cut_into_chunks_between_the_bounds(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.chunk_min_bytes = MIB;
    tuning.chunk_max_bytes = 8 * MIB;
    /* A quarter of 16 MiB, within the bounds. */
    decide_one(16 * MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.chunk_bytes, ==, 4 * MIB);
    g_assert_cmpuint(host.chunk_count, ==, 4);
    curdi_plan_free(&plan);
    /* A quarter of 256 MiB is past the largest chunk. */
    decide_one(256 * MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.chunk_bytes, ==, 8 * MIB);
    g_assert_cmpuint(host.chunk_count, ==, 32);
    curdi_plan_free(&plan);
}

static void test_slots_are_the_fewer_of_the_chunks_and_the_tuning(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.chunk_min_bytes = MIB;
    tuning.chunk_max_bytes = MIB;
    tuning.slots = 3;
    decide_one(2 * MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.chunk_count, ==, 2);
    g_assert_cmpuint(host.slot_count, ==, 2);
    curdi_plan_free(&plan);
    decide_one(16 * MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.slot_count, ==, 3);
    curdi_plan_free(&plan);
}

static void test_one_chunk_takes_no_events_and_more_take_one_per_slot(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.chunk_min_bytes = MIB;
    tuning.chunk_max_bytes = MIB;
    tuning.slots = 3;
    decide_one(MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.slot_count, ==, 1);
    g_assert_cmpuint(host.event_count, ==, 0);
    curdi_plan_free(&plan);
    decide_one(8 * MIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(host.event_count, ==, host.slot_count);
    g_assert_cmpuint(host.event_count, ==, 3);
    curdi_plan_free(&plan);
}

static void test_a_registered_direct_plan_stages_nothing(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_transfer_item item = item_at(0, 64 * MIB, REGISTERED_KEY);
    curdi_tuning_defaults(&tuning);
    g_assert_cmpint(curdi_plan_build(&item, 1, NULL, 0, &plan), ==, CURD_OK);
    curdi_plan_decide_host(&plan, &item, 1, true, &tuning, &host);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    g_assert_cmpuint(host.chunk_count, ==, 0);
    g_assert_cmpuint(host.slot_count, ==, 0);
    g_assert_cmpuint(host.event_count, ==, 0);
    g_assert_false(host.wants_team);
    g_assert_false(host.streaming);
    curdi_plan_free(&plan);
}

static void test_a_plan_gathering_straight_to_registered_memory_has_no_slots_or_team(void)
{
    curdi_gather_policy gather = {CURDI_PATH_GATHER, 1, MIB};
    curdi_transfer_item items[8];
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.copy_parallel_min = 0;
    /* Eight 4 KiB items a gap apart on the device, laid out in one
     * registered range exactly as the stream puts them. */
    for (size_t index = 0; index < 8; index++) {
        items[index] = item_at(index, 4 * KIB, REGISTERED_KEY);
        items[index].host = (unsigned char *)((uintptr_t)1 << 30)
                            + index * 4 * KIB;
    }
    g_assert_cmpint(curdi_plan_build(items, 8, &gather, 0, &plan), ==,
                    CURD_OK);
    g_assert_true(plan.gather);
    g_assert_nonnull(plan.gather_host);
    curdi_plan_decide_host(&plan, items, 8, false, &tuning, &host);
    g_assert_cmpuint(host.chunk_count, ==, 1);
    g_assert_cmpuint(host.slot_count, ==, 0);
    g_assert_cmpuint(host.event_count, ==, 0);
    g_assert_false(host.wants_team);
    curdi_plan_free(&plan);
}

static void test_a_stream_below_the_parallel_minimum_wants_no_team(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.copy_parallel_min = MIB;
    decide_one(MIB - 1, false, &tuning, &plan, &host);
    g_assert_false(host.wants_team);
    curdi_plan_free(&plan);
    decide_one(MIB, false, &tuning, &plan, &host);
    g_assert_true(host.wants_team);
    curdi_plan_free(&plan);
}

static void test_a_download_from_the_streaming_minimum_uses_streaming_stores(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.streaming_download_min = 16 * MIB;
    decide_one(16 * MIB - 4 * KIB, false, &tuning, &plan, &host);
    g_assert_false(host.streaming);
    curdi_plan_free(&plan);
    decide_one(16 * MIB, false, &tuning, &plan, &host);
    g_assert_true(host.streaming);
    curdi_plan_free(&plan);
}

/* Up to its maximum a download touches the lines of its copy-out under
 * the DMAs; never an upload, nor a download with streaming stores (they
 * read no line), nor one gathered straight to registered memory. */
static void test_a_download_up_to_the_touch_maximum_touches(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    g_assert_cmpuint(tuning.touch_download_max, ==, 256 * KIB);
    tuning.touch_download_max = 0;
    decide_one(4 * KIB, false, &tuning, &plan, &host);
    g_assert_false(host.touches);
    curdi_plan_free(&plan);
    tuning.touch_download_max = 256 * KIB;
    decide_one(256 * KIB, false, &tuning, &plan, &host);
    g_assert_true(host.touches);
    curdi_plan_free(&plan);
    decide_one(256 * KIB + 4 * KIB, false, &tuning, &plan, &host);
    g_assert_false(host.touches);
    curdi_plan_free(&plan);
    decide_one(256 * KIB, true, &tuning, &plan, &host);
    g_assert_false(host.touches);
    curdi_plan_free(&plan);
    tuning.streaming_download_min = 64 * KIB;
    decide_one(256 * KIB, false, &tuning, &plan, &host);
    g_assert_true(host.streaming);
    g_assert_false(host.touches);
    curdi_plan_free(&plan);
}

static void test_an_upload_between_the_streaming_and_growth_minimums_streams(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.pageable_direct_max = 0;
    tuning.streaming_upload_min = 64 * KIB;
    tuning.upload_growth_min = 64 * MIB;
    decide_one(64 * KIB - 4 * KIB, true, &tuning, &plan, &host);
    g_assert_false(host.streaming);
    curdi_plan_free(&plan);
    decide_one(64 * KIB, true, &tuning, &plan, &host);
    g_assert_true(host.streaming);
    g_assert_false(host.grows_team);
    curdi_plan_free(&plan);
}

static void test_a_long_upload_grows_the_team_and_copies_through_the_cache(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.streaming_upload_min = 64 * KIB;
    tuning.upload_growth_min = 64 * MIB;
    decide_one(64 * MIB, true, &tuning, &plan, &host);
    g_assert_true(host.grows_team);
    g_assert_false(host.streaming);
    curdi_plan_free(&plan);
}

static void test_a_download_never_grows_the_team(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.upload_growth_min = 64 * MIB;
    decide_one(256 * MIB, false, &tuning, &plan, &host);
    g_assert_false(host.grows_team);
    curdi_plan_free(&plan);
}

static void test_a_small_pageable_upload_goes_direct_and_stages_nothing(void)
{
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.pageable_direct_max = 16 * KIB;
    decide_one(16 * KIB, true, &tuning, &plan, &host);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_DIRECT);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    g_assert_cmpuint(host.chunk_count, ==, 0);
    g_assert_cmpuint(host.slot_count, ==, 0);
    curdi_plan_free(&plan);
    /* A download of the same stages: the driver takes only uploads at
     * the call. */
    decide_one(16 * KIB, false, &tuning, &plan, &host);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_STAGED);
    g_assert_cmpuint(host.chunk_count, ==, 1);
    curdi_plan_free(&plan);
}

static void test_the_copy_ops_bound_counts_spans_items_and_chunks(void)
{
    curdi_transfer_item items[3];
    curdi_tuning tuning;
    curdi_plan plan;
    curdi_plan_host host;
    curdi_tuning_defaults(&tuning);
    tuning.chunk_min_bytes = 64 * KIB;
    tuning.chunk_max_bytes = 64 * KIB;
    for (size_t index = 0; index < 3; index++)
        items[index] = item_at(index, 64 * KIB, 0);
    g_assert_cmpint(curdi_plan_build(items, 3, NULL, 0, &plan), ==, CURD_OK);
    curdi_plan_decide_host(&plan, items, 3, false, &tuning, &host);
    /* Three spans (a gap between each), three items, three chunks. */
    g_assert_cmpuint(plan.span_count, ==, 3);
    g_assert_cmpuint(host.chunk_count, ==, 3);
    g_assert_cmpuint(host.copy_ops_bound, ==, 9);
    curdi_plan_free(&plan);
}

static void test_a_chunk_is_shared_between_the_workers_and_the_caller(void)
{
    curdi_tuning tuning;
    curdi_plan_team share;
    curdi_tuning_defaults(&tuning);
    tuning.copy_piece_bytes = 4 * MIB;
    /* 4 MiB among 3 workers and the caller: 1 MiB each. */
    curdi_plan_team_share(&tuning, 3, 4 * MIB, 4 * MIB, &share);
    g_assert_cmpuint(share.piece_bytes, ==, MIB);
    g_assert_cmpuint(share.warm_workers, ==, 3);
}

static void test_pieces_are_never_below_the_smallest_piece(void)
{
    curdi_tuning tuning;
    curdi_plan_team share;
    curdi_tuning_defaults(&tuning);
    curdi_plan_team_share(&tuning, 15, 64 * KIB, 64 * KIB, &share);
    g_assert_cmpuint(share.piece_bytes, ==, CURDI_COPY_PIECE_MIN_BYTES);
    /* 64 KiB in 16 KiB pieces: one is the caller's. */
    g_assert_cmpuint(share.warm_workers, ==, 3);
}

static void test_pieces_are_never_above_the_tuned_piece(void)
{
    curdi_tuning tuning;
    curdi_plan_team share;
    curdi_tuning_defaults(&tuning);
    tuning.copy_piece_bytes = 256 * KIB;
    curdi_plan_team_share(&tuning, 1, 8 * MIB, 8 * MIB, &share);
    g_assert_cmpuint(share.piece_bytes, ==, 256 * KIB);
    g_assert_cmpuint(share.warm_workers, ==, 31);
}

static void test_the_warm_window_grows_with_the_stream(void)
{
    curdi_tuning tuning;
    curdi_plan_team small;
    curdi_plan_team large;
    curdi_tuning_defaults(&tuning);
    curdi_plan_team_share(&tuning, 3, MIB, MIB, &small);
    curdi_plan_team_share(&tuning, 3, MIB, 256 * MIB, &large);
    /* 50 us for the first DMA, then 4 bytes a nanosecond. */
    g_assert_cmpuint(small.warm_window_ns, ==, 50000u + MIB / 4u);
    g_assert_cmpuint(large.warm_window_ns, ==, 50000u + 256 * MIB / 4u);
}

static void test_growth_leaves_a_processor_to_the_caller_and_one_to_the_system(void)
{
    curdi_tuning tuning;
    curdi_tuning_defaults(&tuning);
    tuning.upload_growth_threads = 6;
    /* 8 processors, 5 workers: one more fits beside the caller and the
     * system. */
    g_assert_cmpuint(curdi_plan_team_growth(&tuning, 8, 5), ==, 1);
    g_assert_cmpuint(curdi_plan_team_growth(&tuning, 8, 6), ==, 0);
    g_assert_cmpuint(curdi_plan_team_growth(&tuning, 2, 0), ==, 0);
}

static void test_growth_is_at_most_the_tuned_threads(void)
{
    curdi_tuning tuning;
    curdi_tuning_defaults(&tuning);
    tuning.upload_growth_threads = 6;
    g_assert_cmpuint(curdi_plan_team_growth(&tuning, 64, 6), ==, 6);
    tuning.upload_growth_threads = 0;
    g_assert_cmpuint(curdi_plan_team_growth(&tuning, 64, 6), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/plan/host/a-stream-up-to-the-minimum-chunk-is-one-chunk",
                    test_a_stream_up_to_the_minimum_chunk_is_one_chunk);
    g_test_add_func(
        "/plan/host/a-longer-stream-is-cut-into-chunks-between-the-bounds",
        test_a_longer_stream_is_cut_into_chunks_between_the_bounds);
    g_test_add_func("/plan/host/slots-are-the-fewer-of-the-chunks-and-the-tuning",
                    test_slots_are_the_fewer_of_the_chunks_and_the_tuning);
    g_test_add_func(
        "/plan/host/one-chunk-takes-no-events-and-more-take-one-per-slot",
        test_one_chunk_takes_no_events_and_more_take_one_per_slot);
    g_test_add_func("/plan/host/a-registered-direct-plan-stages-nothing",
                    test_a_registered_direct_plan_stages_nothing);
    g_test_add_func(
        "/plan/host/a-plan-gathering-straight-to-registered-memory-has-no-slots-or-team",
        test_a_plan_gathering_straight_to_registered_memory_has_no_slots_or_team);
    g_test_add_func("/plan/host/a-stream-below-the-parallel-minimum-wants-no-team",
                    test_a_stream_below_the_parallel_minimum_wants_no_team);
    g_test_add_func(
        "/plan/host/a-download-from-the-streaming-minimum-uses-streaming-stores",
        test_a_download_from_the_streaming_minimum_uses_streaming_stores);
    g_test_add_func("/plan/host/a-download-up-to-the-touch-maximum-touches",
                    test_a_download_up_to_the_touch_maximum_touches);
    g_test_add_func(
        "/plan/host/an-upload-between-the-streaming-and-growth-minimums-streams",
        test_an_upload_between_the_streaming_and_growth_minimums_streams);
    g_test_add_func(
        "/plan/host/a-long-upload-grows-the-team-and-copies-through-the-cache",
        test_a_long_upload_grows_the_team_and_copies_through_the_cache);
    g_test_add_func("/plan/host/a-download-never-grows-the-team",
                    test_a_download_never_grows_the_team);
    g_test_add_func(
        "/plan/host/a-small-pageable-upload-goes-direct-and-stages-nothing",
        test_a_small_pageable_upload_goes_direct_and_stages_nothing);
    g_test_add_func("/plan/host/the-copy-ops-bound-counts-spans-items-and-chunks",
                    test_the_copy_ops_bound_counts_spans_items_and_chunks);
    g_test_add_func("/plan/team/a-chunk-is-shared-between-the-workers-and-the-caller",
                    test_a_chunk_is_shared_between_the_workers_and_the_caller);
    g_test_add_func("/plan/team/pieces-are-never-below-the-smallest-piece",
                    test_pieces_are_never_below_the_smallest_piece);
    g_test_add_func("/plan/team/pieces-are-never-above-the-tuned-piece",
                    test_pieces_are_never_above_the_tuned_piece);
    g_test_add_func("/plan/team/the-warm-window-grows-with-the-stream",
                    test_the_warm_window_grows_with_the_stream);
    g_test_add_func(
        "/plan/team/growth-leaves-a-processor-to-the-caller-and-one-to-the-system",
        test_growth_leaves_a_processor_to_the_caller_and_one_to_the_system);
    g_test_add_func("/plan/team/growth-is-at-most-the-tuned-threads",
                    test_growth_is_at_most_the_tuned_threads);
    return g_test_run();
}
