/* test-fence.c - the fence every synchronous transfer ends with: a word
 * of page-locked memory its stream writes behind the work, polled, with
 * the driver's own wait where the word cannot serve (lib/core/fence.h).
 *
 * Each test moves fresh random bytes both ways at several sizes, poisons
 * what it reads into first and compares every byte with the host model,
 * and reads the fence module's counts to see which way each fence ended.
 * The last three replay graph batches whose last kernel may signal its
 * own end instead (lib/transfer/gather.h).
 * Each opens device 0 or skips with the reason; its stand-in twin
 * test-fence-fake (tests/README.md) runs them on the stand-in driver,
 * whose streams write the word at once. */
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/fence.h"
#include "support/curd-test.h"
#include "support/kernel-load.h"
#include "transfer-test.h"

/* Device 0 with the default poll, where its driver writes words; NULL
 * otherwise, the test then skipped (or, with no GPU, skipped by
 * curd_test_gpu_open). */
static curd_device *open_polling(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return NULL;
    if (!curdi_fence_available(device)) {
        g_test_skip("the driver has no stream memory operations");
        g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
        return NULL;
    }
    return device;
}

typedef struct fence_counts {
    uint64_t seen;
    uint64_t synced;
} fence_counts;

static fence_counts counts_of(curd_device *device)
{
    fence_counts counts;
    curdi_fence_counts(device, &counts.seen, &counts.synced);
    return counts;
}

/* The waits that ended between two counts, either way. */
static uint64_t waits_between(fence_counts before, fence_counts after)
{
    return (after.seen - before.seen) + (after.synced - before.synced);
}

static const size_t sizes[] = {1, 4096, 65536, 1u << 20, 16u << 20};

static void test_transfers_end_on_the_word_their_stream_writes(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    enum { ROUNDS = 8 };
    fence_counts before = counts_of(device);
    uint64_t fences = transfer_test_take(device).fences;
    for (unsigned round = 0; round < ROUNDS; round++)
        for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
            transfer_test_round_trip(device, sizes[i]);
    fence_counts after = counts_of(device);
    uint64_t fenced = transfer_test_take(device).fences - fences;
    /* Every fence is one wait, ended one way or the other. */
    g_assert_cmpuint(fenced, ==, 2u * ROUNDS * G_N_ELEMENTS(sizes));
    g_assert_cmpuint(waits_between(before, after), ==, fenced);
    /* The small ones end well inside the default 100 us of polling; a
     * slow moment of the host may push a few past it. */
    g_assert_cmpuint(after.seen - before.seen, >=, 2u * ROUNDS * 3u / 2u);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_a_spin_of_zero_waits_in_the_driver(void)
{
    curd_device *device = transfer_test_open_with("CURD_FENCE_SPIN_US", "0");
    if (device == NULL)
        return;
    fence_counts before = counts_of(device);
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        transfer_test_round_trip(device, sizes[i]);
    fence_counts after = counts_of(device);
    g_assert_cmpuint(after.seen, ==, before.seen);
    g_assert_cmpuint(after.synced - before.synced, ==,
                     2u * G_N_ELEMENTS(sizes));
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A driver that has the entry point but refuses the write as unsupported:
 * that transfer and every later one wait in the driver, and succeed. */
static void test_an_unsupported_write_leaves_the_driver_wait(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    fence_counts before = counts_of(device);
    curd_test_faults_begin(1, 801 /* CUDA_ERROR_NOT_SUPPORTED */,
                           "cuStreamWriteValue32");
    transfer_test_round_trip(device, 4096);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    g_assert_false(curdi_fence_available(device));
    /* No write is asked for again. */
    curd_test_faults_begin(1, 999, "cuStreamWriteValue32");
    transfer_test_round_trip(device, 65536);
    g_assert_false(curd_test_faults_fired());
    (void)curd_test_faults_end();
    fence_counts after = counts_of(device);
    g_assert_cmpuint(after.seen, ==, before.seen);
    g_assert_cmpuint(after.synced - before.synced, ==, 4u);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* The page is made by the first wait that polls: when the driver cannot
 * make it then, that wait is the driver's and succeeds, and a later wait
 * makes the page. The first page-locked allocation of a fresh device
 * whose first work is a 1-byte upload from malloc memory (handed to the
 * driver as it is, no staging) is the page's. */
static void test_a_page_that_cannot_be_made_leaves_the_wait_to_the_driver(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    curd_buffer buffer = {0};
    unsigned char byte = (unsigned char)g_test_rand_int();
    unsigned char back = (unsigned char)~byte;
    g_assert_cmpint(curd_buffer_alloc(device, 1, &buffer), ==, CURD_OK);
    fence_counts before = counts_of(device);
    curd_test_faults_begin(1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */,
                           "cuMemHostAlloc");
    g_assert_cmpint(curd_buffer_upload(device, buffer, &byte, 1), ==,
                    CURD_OK);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    fence_counts after = counts_of(device);
    g_assert_cmpuint(after.seen, ==, before.seen);
    g_assert_cmpuint(after.synced - before.synced, ==, 1);
    g_assert_cmpint(curd_buffer_download(device, buffer, &back, 1), ==,
                    CURD_OK);
    g_assert_cmpuint(back, ==, byte);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    /* Small work ends on its word now that the page is there. */
    before = counts_of(device);
    for (unsigned round = 0; round < 8; round++)
        transfer_test_round_trip(device, 4096);
    after = counts_of(device);
    g_assert_cmpuint(after.seen - before.seen, >=, 8);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A write the driver refuses otherwise fails the transfer like any
 * enqueue: typed, with its Fix sentence, nothing counted; the next one
 * works. */
static void test_a_refused_write_fails_its_transfer(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    enum { LEN = 8192 };
    curd_buffer buffer = {0};
    unsigned char *model = g_malloc(LEN);
    curd_test_fill_random(model, LEN);
    g_assert_cmpint(curd_buffer_alloc(device, LEN, &buffer), ==, CURD_OK);
    transfer_test_snapshot before = transfer_test_take(device);
    curd_test_faults_begin(1, 999, "cuStreamWriteValue32");
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, LEN), ==,
                    CURD_E_DRIVER);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "cuStreamWriteValue32"));
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_true(curdi_fence_available(device));
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(model);
    transfer_test_round_trip(device, LEN);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A synchronous dispatch that asked for no timing waits on its word too;
 * an asynchronous one, whose wait may come long after its work ended,
 * waits on its end event. add_one on fresh random words, read back into
 * poisoned memory. */
static void test_a_synchronous_dispatch_ends_on_its_word(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    curd_program *add_one = NULL;
    g_assert_cmpint(curd_test_kernel_load(device, "add_one.ptx",
                                          "curd_add_one", &add_one),
                    ==, CURD_OK);
    enum { WORDS = 100000 };
    uint32_t words = WORDS;
    guint32 *model = g_new(guint32, WORDS);
    guint32 *back = g_new(guint32, WORDS);
    curd_test_fill_random(model, WORDS * sizeof *model);
    memcpy(back, model, WORDS * sizeof *model);
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = WORDS;
    launch.block[0] = 128;
    curd_arg args[2] = {
        curd_arg_host(CURD_ROLE_INOUT, back, WORDS * sizeof *back),
        curd_arg_scalar(&words, sizeof words)};

    fence_counts before = counts_of(device);
    g_assert_cmpint(curd_dispatch(device, add_one, &launch, args, 2), ==,
                    CURD_OK);
    fence_counts after = counts_of(device);
    g_assert_cmpuint(waits_between(before, after), ==, 1);
    for (size_t i = 0; i < WORDS; i++)
        model[i] += 1u;
    assert_same_bytes(back, model, WORDS * sizeof *model);

    curd_pending *pending = NULL;
    before = after;
    g_assert_cmpint(curd_dispatch_async(device, add_one, &launch, args, 2,
                                        &pending),
                    ==, CURD_OK);
    g_assert_cmpint(curd_pending_wait(pending, NULL), ==, CURD_OK);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
    after = counts_of(device);
    g_assert_cmpuint(after.seen, ==, before.seen);
    g_assert_cmpuint(after.synced, ==, before.synced);
    for (size_t i = 0; i < WORDS; i++)
        model[i] += 1u;
    assert_same_bytes(back, model, WORDS * sizeof *model);

    g_free(back);
    g_free(model);
    g_assert_cmpint(curd_program_free(add_one), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A graph batch of add_one over a buffer of `words` uint32 and downloads
 * of the (offset, length) ranges in bytes, one after another, the last
 * item: a graph whose last kernel reads them back. */
typedef struct graph_case {
    curd_device *device;
    curd_program *add_one;
    curd_buffer buffer;
    uint32_t words;
    guint32 *model;
    unsigned char *back;
    size_t ranges[2][2];
    size_t range_count;
    curd_batch *batch;
} graph_case;

/* Records add_one over the whole buffer. */
static void graph_case_add_one(graph_case *c)
{
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = c->words;
    curd_arg args[2] = {curd_arg_buffer(CURD_ROLE_INOUT, c->buffer),
                        curd_arg_scalar(&c->words, sizeof c->words)};
    g_assert_cmpint(curd_batch_launch(c->batch, c->add_one, &launch, args, 2,
                                      NULL),
                    ==, CURD_OK);
}

static void graph_case_open(graph_case *c, curd_device *device,
                            uint32_t words, const size_t (*ranges)[2],
                            size_t range_count)
{
    memset(c, 0, sizeof *c);
    c->device = device;
    c->words = words;
    c->range_count = range_count;
    memcpy(c->ranges, ranges, range_count * sizeof *ranges);
    c->model = g_new(guint32, words);
    c->back = g_malloc((size_t)words * 4u);
    g_assert_cmpint(curd_test_kernel_load(device, "add_one.ptx",
                                          "curd_add_one", &c->add_one),
                    ==, CURD_OK);
    g_assert_cmpint(curd_buffer_alloc(device, (size_t)words * 4u, &c->buffer),
                    ==, CURD_OK);
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = CURD_BATCH_GRAPH;
    g_assert_cmpint(curd_batch_new(device, &options, &c->batch), ==, CURD_OK);
    graph_case_add_one(c);
    for (size_t i = 0; i < range_count; i++)
        g_assert_cmpint(curd_batch_download_range(
                            c->batch, c->buffer, ranges[i][0], ranges[i][1],
                            c->back + ranges[i][0], ranges[i][1]),
                        ==, CURD_OK);
}

static void graph_case_close(graph_case *c)
{
    g_assert_cmpint(curd_batch_free(c->batch), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(c->device, c->buffer), ==, CURD_OK);
    g_assert_cmpint(curd_program_free(c->add_one), ==, CURD_OK);
    g_free(c->back);
    g_free(c->model);
}

/* Fresh random words in the buffer and the poisoned read-back. */
static void graph_case_refill(graph_case *c)
{
    curd_test_fill_random(c->model, (size_t)c->words * 4u);
    g_assert_cmpint(curd_buffer_upload(c->device, c->buffer, c->model,
                                       (size_t)c->words * 4u),
                    ==, CURD_OK);
    curd_test_poison(c->back, (size_t)c->words * 4u);
    for (uint32_t i = 0; i < c->words; i++)
        c->model[i] += 1u;
}

/* Every downloaded byte is the model's. */
static void graph_case_check(const graph_case *c)
{
    const unsigned char *model = (const unsigned char *)c->model;
    for (size_t i = 0; i < c->range_count; i++)
        assert_same_bytes(c->back + c->ranges[i][0], model + c->ranges[i][0],
                          c->ranges[i][1]);
}

/* One run of the batch (timed when timing is not NULL): how many
 * cuStreamWriteValue32 calls it made, and the fence's counts around it in
 * *out_before and *out_after. */
static unsigned graph_case_run(graph_case *c, curd_timing *timing,
                               fence_counts *out_before,
                               fence_counts *out_after)
{
    graph_case_refill(c);
    *out_before = counts_of(c->device);
    curd_test_faults_begin(0, 0, "cuStreamWriteValue32");
    curd_status status = curd_batch_run(c->batch, timing);
    unsigned writes = curd_test_faults_end();
    *out_after = counts_of(c->device);
    g_assert_cmpint(status, ==, CURD_OK);
    graph_case_check(c);
    return writes;
}

/* The batch's last kernel, the read-back of its downloads, signals its
 * own end: a synchronous replay polls the kernel's words and asks the
 * stream for none; the first run (which captures) does the same. Ranges
 * that start and end off the kernel's 16-byte words over 9 of its 4 KiB
 * tiles, then one range of all 16 tiles its words cover. The words need
 * no stream memory operations, and the poll lasts up to 100 ms here, so
 * that every run ends on them even under compute-sanitizer. */
static void test_a_graph_batch_ends_on_its_read_backs_signal(void)
{
    curd_device *device =
        transfer_test_open_with("CURD_FENCE_SPIN_US", "100000");
    if (device == NULL)
        return;
    static const size_t whole[1][2] = {{0, 65536}};
    graph_case c;
    graph_case_open(&c, device, 16384, whole, 1);
    for (unsigned round = 0; round < 3; round++) {
        fence_counts before, after;
        g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 0);
        g_assert_cmpuint(after.seen - before.seen, ==, 1);
    }
    graph_case_close(&c);

    enum { ROUNDS = 12 };
    static const size_t ranges[2][2] = {{0, 4096}, {4100, 30001}};
    graph_case_open(&c, device, 9000, ranges, 2);
    for (unsigned round = 0; round < ROUNDS; round++) {
        fence_counts before, after;
        g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 0);
        g_assert_cmpuint(after.seen - before.seen, ==, 1);
        g_assert_cmpuint(after.synced, ==, before.synced);
    }
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.graph_captures, ==, 2);
    g_assert_cmpuint(stats.graph_replays, ==, 3 + ROUNDS);

    /* A timed run waits for its end event; the kernel still signals, and
     * the next synchronous run clears the words before polling them. */
    curd_timing timing = {.struct_size = sizeof timing};
    fence_counts before, after;
    g_assert_cmpuint(graph_case_run(&c, &timing, &before, &after), ==, 0);
    g_assert_cmpuint(waits_between(before, after), ==, 0);
    g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 0);
    g_assert_cmpuint(waits_between(before, after), ==, 1);
    graph_case_close(&c);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Where the last read-back launch spans more tiles than its words cover
 * (two downloads of 40 KiB: 20 tiles), or the batch ends in a launch, the
 * stream writes the fence's word as before; every byte arrives. */
static void test_other_graph_batches_end_on_the_streams_word(void)
{
    curd_device *device = open_polling();
    if (device == NULL)
        return;
    static const size_t wide[2][2] = {{0, 40960}, {40960, 40960}};
    graph_case c;
    graph_case_open(&c, device, 20480, wide, 2);
    for (unsigned round = 0; round < 3; round++) {
        fence_counts before, after;
        g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 1);
        g_assert_cmpuint(waits_between(before, after), ==, 1);
    }
    graph_case_close(&c);

    static const size_t narrow[1][2] = {{64, 4096}};
    graph_case_open(&c, device, 2048, narrow, 1);
    /* The read-back sits between the two add_ones: it sees the first, as
     * graph_case_run's check expects. */
    graph_case_add_one(&c);
    fence_counts before, after;
    g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 1);
    g_assert_cmpuint(waits_between(before, after), ==, 1);
    graph_case_close(&c);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* With no polling the replay waits in the driver, signal or not; a wait
 * the driver fails is the run's failure, with its sentence, and the next
 * run succeeds. */
static void test_a_spin_of_zero_waits_for_a_graph_in_the_driver(void)
{
    curd_device *device = transfer_test_open_with("CURD_FENCE_SPIN_US", "0");
    if (device == NULL)
        return;
    static const size_t ranges[1][2] = {{0, 4096}};
    graph_case c;
    graph_case_open(&c, device, 1024, ranges, 1);
    for (unsigned round = 0; round < 3; round++) {
        fence_counts before, after;
        g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 0);
        g_assert_cmpuint(after.seen, ==, before.seen);
        g_assert_cmpuint(after.synced - before.synced, ==, 1);
    }
    curd_test_faults_begin(1, 999 /* CUDA_ERROR_UNKNOWN */,
                           "cuStreamSynchronize");
    curd_status status = curd_batch_run(c.batch, NULL);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    g_assert_cmpint(status, !=, CURD_OK);
    g_assert_nonnull(strstr(curd_last_error(), "cuStreamSynchronize"));
    curd_test_assert_fix_sentence();
    fence_counts before, after;
    g_assert_cmpuint(graph_case_run(&c, NULL, &before, &after), ==, 0);
    graph_case_close(&c);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* More threads than words: each fence takes a free word or, with none
 * free, waits in the driver; every byte arrives either way. */
#define THREADS 80
#define THREAD_ROUNDS 6

static void test_threads_share_the_words(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    fence_counts before = counts_of(device);
    transfer_test_round_trips_on_threads(device, THREADS, THREAD_ROUNDS,
                                         256 * 1024);
    fence_counts after = counts_of(device);
    g_assert_cmpuint(waits_between(before, after), ==,
                     2u * THREADS * THREAD_ROUNDS);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static const transfer_test_case cases[] = {
    {"transfers-end-on-the-word-their-stream-writes",
     test_transfers_end_on_the_word_their_stream_writes},
    {"a-spin-of-zero-waits-in-the-driver",
     test_a_spin_of_zero_waits_in_the_driver},
    {"an-unsupported-write-leaves-the-driver-wait",
     test_an_unsupported_write_leaves_the_driver_wait},
    {"a-page-that-cannot-be-made-leaves-the-wait-to-the-driver",
     test_a_page_that_cannot_be_made_leaves_the_wait_to_the_driver},
    {"a-refused-write-fails-its-transfer",
     test_a_refused_write_fails_its_transfer},
    {"a-synchronous-dispatch-ends-on-its-word",
     test_a_synchronous_dispatch_ends_on_its_word},
    {"threads-share-the-words", test_threads_share_the_words},
    {"a-graph-batch-ends-on-its-read-backs-signal",
     test_a_graph_batch_ends_on_its_read_backs_signal},
    {"other-graph-batches-end-on-the-streams-word",
     test_other_graph_batches_end_on_the_streams_word},
    {"a-spin-of-zero-waits-for-a-graph-in-the-driver",
     test_a_spin_of_zero_waits_for_a_graph_in_the_driver},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "fence", cases, G_N_ELEMENTS(cases));
}
