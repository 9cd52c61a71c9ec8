/* test-batch.c - batches: fills, clears, uploads, launches and downloads
 * recorded once and run again and again with one fence, streamed or as a
 * CUDA graph replayed after its launches were changed in place; pending
 * runs; refusals that change nothing; and every driver call of a run
 * failed in turn.
 *
 * Most tests run twice, streamed and as a graph (the path names say
 * which). Every test opens device 0 or skips with the reason.
 * Its stand-in twin test-batch-fake (CURD_TEST_ON_FAKE, tests/README.md):
 * there the stand-in libcuda (tests/fake/) runs every test, the kernels
 * emulated on the host, and no skip is allowed. */
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch-test.h"
#include "transfer-test.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/batch-fake"
#else
#define PATH_ROOT "/batch"
#endif

static curd_batch *batch_new(curd_device *device, uint32_t flags)
{
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(device, &options, &batch), "curd_batch_new");
    return batch;
}

static curd_arg counted(curd_arg arg, int32_t length_arg)
{
    arg.elem_bytes = 4;
    arg.length_arg = length_arg;
    return arg;
}

static void download_words(curd_device *device, curd_buffer buffer,
                           uint32_t *out, uint32_t count)
{
    curd_test_poison(out, count * sizeof *out);
    check_ok(curd_buffer_download(device, buffer, out, count * sizeof *out),
             "curd_buffer_download");
}

/* y = fmaf(a, x, y), element by element, bit for bit (the kernel's one
 * rounding). */
static void assert_saxpy(const float *got, float a, const float *x,
                         const float *y, uint32_t n, const char *what)
{
    for (uint32_t i = 0; i < n; i++) {
        float expect = fmaf(a, x[i], y[i]);
        if (memcmp(&got[i], &expect, sizeof expect) != 0)
            g_error("%s: element %" PRIu32 " is %a, expected %a", what, i,
                    (double)got[i], (double)expect);
    }
}

/* ------------------------------------------------------------------------
 * Runs
 * ---------------------------------------------------------------------- */

/* Upload, a clear, a fill, two launches and two downloads, in order; run
 * three times with new input each time (an upload's source is read at
 * each run). */
static void test_items_run_in_order_and_again(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    curd_program *saxpy = load(device, "saxpy.ptx", "curd_saxpy");
    uint32_t n = random_count(1000, 40000);
    uint32_t fill_at = n / 5, fill_len = n / 7;
    uint8_t fill_value = (uint8_t)g_test_rand_int_range(1, 255);
    size_t bytes = n * sizeof(uint32_t);
    curd_buffer words, xs, ys;
    check_ok(curd_buffer_alloc(device, bytes, &words), "curd_buffer_alloc");
    check_ok(curd_buffer_alloc(device, bytes, &xs), "curd_buffer_alloc");
    check_ok(curd_buffer_alloc(device, bytes, &ys), "curd_buffer_alloc");
    uint32_t *input = g_new(uint32_t, n);
    float *x = g_new(float, n);
    uint32_t *got_words = g_new(uint32_t, n);
    float *got_y = g_new(float, n);
    float *zeros = g_new(float, n);
    float a = (float)g_test_rand_double_range(-3.0, 3.0);
    uint32_t iterations = (uint32_t)g_test_rand_int_range(1, 5);

    curd_batch *batch = batch_new(device, flags);
    curd_launch over = launch_over(n, 128);
    over.iterations = iterations;
    curd_arg add_args[] = {
        counted(curd_arg_buffer(CURD_ROLE_INOUT, words), 1),
        curd_arg_scalar(&n, sizeof n)};
    curd_launch once = launch_over(n, 256);
    curd_arg saxpy_args[] = {
        counted(curd_arg_buffer(CURD_ROLE_INPUT, xs), 3),
        curd_arg_scalar(&a, sizeof a),
        counted(curd_arg_buffer(CURD_ROLE_INOUT, ys), 3),
        curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_batch_upload(batch, words, 0, input, bytes),
             "curd_batch_upload");
    check_ok(curd_batch_upload(batch, xs, 0, x, bytes), "curd_batch_upload");
    check_ok(curd_batch_clear(batch, ys), "curd_batch_clear");
    check_ok(curd_batch_launch(batch, add_one, &over, add_args, 2, NULL),
             "curd_batch_launch");
    check_ok(curd_batch_fill(batch, words, fill_at * 4u, fill_len * 4u,
                             fill_value),
             "curd_batch_fill");
    check_ok(curd_batch_launch(batch, saxpy, &once, saxpy_args, 4, NULL),
             "curd_batch_launch");
    check_ok(curd_batch_download_range(batch, words, 0, bytes, got_words,
                                       bytes),
             "curd_batch_download_range");
    check_ok(curd_batch_download_range(batch, ys, 0, bytes, got_y, bytes),
             "curd_batch_download_range");
    /* The scalars were copied when recorded: changing them now changes
     * nothing. */
    float a_recorded = a;
    a = 1e9f;

    curd_stats before = curd_test_device_stats(device);
    uint32_t *want = g_new(uint32_t, n);
    for (int run = 0; run < 3; run++) {
        curd_test_fill_random(input, bytes);
        for (uint32_t i = 0; i < n; i++)
            x[i] = (float)g_test_rand_double_range(-100.0, 100.0);
        curd_test_poison(got_words, bytes);
        curd_test_poison(got_y, bytes);
        curd_timing timing = {.struct_size = sizeof timing};
        check_ok(curd_batch_run(batch, &timing), "curd_batch_run");
        g_assert_cmpuint(timing.wall_ns, >=, timing.wait_ns);
        for (uint32_t i = 0; i < n; i++)
            want[i] = input[i] + iterations;
        memset(want + fill_at, fill_value, fill_len * 4u);
        assert_words(got_words, want, n, "add_one, then the fill");
        /* y was cleared: saxpy leaves fmaf(a, x, 0). */
        memset(zeros, 0, bytes);
        assert_saxpy(got_y, a_recorded, x, zeros, n, "saxpy on cleared y");
    }
    g_free(want);
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(after.batch_runs - before.batch_runs, ==, 3);
    g_assert_cmpuint(after.launches - before.launches, ==,
                     3 * (iterations + 1u));
    g_assert_cmpuint(after.h2d_bytes - before.h2d_bytes, ==, 3 * 2 * bytes);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, 3 * 2 * bytes);
    g_assert_cmpuint(after.fences - before.fences, ==, 3);
    g_assert_cmpuint(after.fill_ops - before.fill_ops, ==, 3 * 2);
    g_assert_cmpuint(after.fill_bytes - before.fill_bytes, ==,
                     3 * (bytes + fill_len * 4u));
    if (flags & CURD_BATCH_GRAPH) {
        g_assert_cmpuint(after.graph_captures - before.graph_captures, ==, 1);
        g_assert_cmpuint(after.graph_replays - before.graph_replays, ==, 3);
    } else {
        g_assert_cmpuint(after.graph_replays, ==, before.graph_replays);
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, words), "curd_buffer_free");
    check_ok(curd_buffer_free(device, xs), "curd_buffer_free");
    check_ok(curd_buffer_free(device, ys), "curd_buffer_free");
    g_free(input);
    g_free(x);
    g_free(got_words);
    g_free(got_y);
    g_free(zeros);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* The floor's shape: eight dependent launches on resident data and one
 * 4 KiB read-back, run again and again. */
static void test_eight_dependent_launches_and_a_read_back(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = 1024;
    uint32_t *start = random_words(n);
    curd_buffer buffer = upload_new(device, start, n * 4u);
    uint32_t *got = g_new(uint32_t, n);
    curd_batch *batch = batch_new(device, flags);
    curd_launch launch = launch_over(n, 256);
    curd_arg args[] = {counted(curd_arg_buffer(CURD_ROLE_INOUT, buffer), 1),
                       curd_arg_scalar(&n, sizeof n)};
    for (int i = 0; i < 8; i++)
        check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
                 "curd_batch_launch");
    check_ok(curd_batch_download_range(batch, buffer, 0, n * 4u, got, n * 4u),
             "curd_batch_download_range");
    uint32_t *want = g_memdup2(start, n * 4u);
    int runs = g_test_rand_int_range(2, 6);
    for (int run = 1; run <= runs; run++) {
        curd_test_poison(got, n * 4u);
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        for (uint32_t i = 0; i < n; i++)
            want[i] += 8u;
        assert_words(got, want, n, "eight add_ones per run");
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(start);
    g_free(want);
    g_free(got);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* got holds want's bytes [offset, offset + byte_len), byte for byte. */
static void assert_range(const unsigned char *got, const uint32_t *want,
                         size_t offset, size_t byte_len)
{
    const unsigned char *expect = (const unsigned char *)want + offset;
    for (size_t i = 0; i < byte_len; i++)
        if (got[i] != expect[i])
            g_error("read-back of %zu bytes at %zu: byte %zu is 0x%02x,"
                    " expected 0x%02x",
                    byte_len, offset, i, got[i], expect[i]);
}

/* Downloads of every size, from one byte to past the read-back kernel's
 * 64 KiB, at odd offsets, after a launch, in a row (more than one
 * read-back launch takes) and apart: every byte lands where it was asked,
 * run after run, whether a kernel or a DMA reads it back, and the same
 * with the transfer path forced to DMA (CURD_TRANSFER_PATH=dma). */
static void test_read_backs_of_every_size_land_exactly(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    static const struct {
        size_t offset, byte_len;
    } ranges[] = {{1, 1},          {7, 3},           {4096, 4096},
                  {13, 65536},     {100, 65537},     {5, 200000},
                  {65536, 65536},  {3, 100}};
    enum { SMALL = 40, RANGES = G_N_ELEMENTS(ranges) };
    const char *paths[] = {NULL, "dma"};
    for (size_t path = 0; path < G_N_ELEMENTS(paths); path++) {
        if (paths[path] != NULL)
            g_setenv("CURD_TRANSFER_PATH", paths[path], TRUE);
        curd_device *device = curd_test_gpu_open();
        g_unsetenv("CURD_TRANSFER_PATH");
        if (device == NULL)
            return;
        curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
        uint32_t n = 300000 / 4;
        uint32_t *start = random_words(n);
        curd_buffer buffer = upload_new(device, start, n * 4u);
        curd_batch *batch = batch_new(device, flags);
        curd_launch launch = launch_over(n, 256);
        curd_arg args[] = {
            counted(curd_arg_buffer(CURD_ROLE_INOUT, buffer), 1),
            curd_arg_scalar(&n, sizeof n)};
        unsigned char *got[RANGES + SMALL];
        check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
                 "curd_batch_launch");
        for (size_t i = 0; i < RANGES; i++) {
            got[i] = g_malloc(ranges[i].byte_len);
            check_ok(curd_batch_download_range(batch, buffer, ranges[i].offset,
                                               ranges[i].byte_len, got[i],
                                               ranges[i].byte_len),
                     "curd_batch_download_range");
            if (i == RANGES - 2)
                check_ok(curd_batch_launch(batch, add_one, &launch, args, 2,
                                           NULL),
                         "curd_batch_launch");
        }
        /* More small ones in a row than one read-back launch takes. */
        for (size_t i = 0; i < SMALL; i++) {
            got[RANGES + i] = g_malloc(16);
            check_ok(curd_batch_download_range(batch, buffer, 1000 + 37 * i,
                                               16, got[RANGES + i], 16),
                     "curd_batch_download_range");
        }
        uint32_t *want = g_memdup2(start, n * 4u);
        for (int run = 1; run <= 3; run++) {
            for (size_t i = 0; i < RANGES; i++)
                curd_test_poison(got[i], ranges[i].byte_len);
            for (size_t i = 0; i < SMALL; i++)
                curd_test_poison(got[RANGES + i], 16);
            check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
            /* One add_one before the first ranges, two before the last
             * and the small ones. */
            for (uint32_t i = 0; i < n; i++)
                want[i] += 1u;
            for (size_t i = 0; i < RANGES - 1; i++)
                assert_range(got[i], want, ranges[i].offset,
                             ranges[i].byte_len);
            for (uint32_t i = 0; i < n; i++)
                want[i] += 1u;
            assert_range(got[RANGES - 1], want, ranges[RANGES - 1].offset,
                         ranges[RANGES - 1].byte_len);
            for (size_t i = 0; i < SMALL; i++)
                assert_range(got[RANGES + i], want, 1000 + 37 * i, 16);
        }
        check_ok(curd_batch_free(batch), "curd_batch_free");
        check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
        for (size_t i = 0; i < RANGES + SMALL; i++)
            g_free(got[i]);
        g_free(start);
        g_free(want);
        check_ok(curd_program_free(add_one), "curd_program_free");
        check_ok(curd_device_close(device), "curd_device_close");
    }
}

/* A changed scalar, another buffer of the same size and another grid: the
 * next run does what the batch now says, and a graph batch updates its
 * nodes in place rather than capturing again. */
static void test_changed_launches_run_as_changed(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *saxpy = load(device, "saxpy.ptx", "curd_saxpy");
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = random_count(2000, 30000);
    size_t bytes = n * 4u;
    float *x = g_new(float, n), *y = g_new(float, n), *got = g_new(float, n);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = (float)g_test_rand_double_range(-50.0, 50.0);
        y[i] = (float)g_test_rand_double_range(-50.0, 50.0);
    }
    curd_buffer xs = upload_new(device, x, bytes);
    curd_buffer ys = upload_new(device, y, bytes);
    curd_buffer other_x = upload_new(device, y, bytes); /* x := y later */
    uint32_t *words = random_words(n);
    curd_buffer counters = upload_new(device, words, bytes);
    float a = (float)g_test_rand_double_range(-2.0, 2.0);
    curd_batch *batch = batch_new(device, flags);
    curd_launch over = launch_over(n, 128);
    curd_arg args[] = {counted(curd_arg_buffer(CURD_ROLE_INPUT, xs), 3),
                       curd_arg_scalar(&a, sizeof a),
                       counted(curd_arg_buffer(CURD_ROLE_INOUT, ys), 3),
                       curd_arg_scalar(&n, sizeof n)};
    size_t saxpy_item = 99, add_item = 99;
    check_ok(curd_batch_upload(batch, ys, 0, y, bytes), "curd_batch_upload");
    check_ok(curd_batch_launch(batch, saxpy, &over, args, 4, &saxpy_item),
             "curd_batch_launch");
    curd_arg add_args[] = {curd_arg_buffer(CURD_ROLE_INOUT, counters),
                           curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_batch_launch(batch, add_one, &over, add_args, 2, &add_item),
             "curd_batch_launch");
    check_ok(curd_batch_download_range(batch, ys, 0, bytes, got, bytes),
             "curd_batch_download_range");
    g_assert_cmpuint(saxpy_item, ==, 1);
    g_assert_cmpuint(add_item, ==, 2);
    curd_test_poison(got, bytes);
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
    assert_saxpy(got, a, x, y, n, "saxpy as recorded");
    curd_stats before = curd_test_device_stats(device);

    /* Another a, and x from another buffer of the same size. */
    float a2 = (float)g_test_rand_double_range(-2.0, 2.0);
    curd_arg changed[] = {counted(curd_arg_buffer(CURD_ROLE_INPUT, other_x), 3),
                          curd_arg_scalar(&a2, sizeof a2),
                          counted(curd_arg_buffer(CURD_ROLE_INOUT, ys), 3),
                          curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_batch_set_args(batch, saxpy_item, changed, 4),
             "curd_batch_set_args");
    /* add_one over only the first blocks: a grid of 2 blocks of 128. */
    curd_launch smaller;
    curd_launch_init(&smaller);
    smaller.grid[0] = 2;
    smaller.grid[1] = smaller.grid[2] = 1;
    smaller.block[0] = 128;
    check_ok(curd_batch_set_launch(batch, add_item, &smaller),
             "curd_batch_set_launch");
    curd_test_poison(got, bytes);
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
    /* y is uploaded afresh each run, and x now holds y's values. */
    assert_saxpy(got, a2, y, y, n, "saxpy after set_args");
    uint32_t *counted_words = g_new(uint32_t, n);
    download_words(device, counters, counted_words, n);
    for (uint32_t i = 0; i < n; i++)
        words[i] += i < 256 ? 2u : 1u; /* two runs; the second over 256 */
    assert_words(counted_words, words, n, "add_one after set_launch");
    curd_stats after = curd_test_device_stats(device);
    if (flags & CURD_BATCH_GRAPH) {
        g_assert_cmpuint(after.graph_captures, ==, before.graph_captures);
        g_assert_cmpuint(after.graph_updates - before.graph_updates, ==, 2);
        g_assert_cmpuint(after.graph_replays - before.graph_replays, ==, 1);
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, xs), "curd_buffer_free");
    check_ok(curd_buffer_free(device, ys), "curd_buffer_free");
    check_ok(curd_buffer_free(device, other_x), "curd_buffer_free");
    check_ok(curd_buffer_free(device, counters), "curd_buffer_free");
    g_free(x);
    g_free(y);
    g_free(got);
    g_free(words);
    g_free(counted_words);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A run as a curd_pending: the batch cannot change, run or be freed until
 * the pending is waited for or freed; the wait writes the downloads. */
static void test_a_pending_run_holds_the_batch(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = random_count(500, 5000);
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    uint32_t *got = g_new(uint32_t, n);
    curd_test_poison(got, n * 4u);
    curd_batch *batch = batch_new(device, flags);
    curd_launch launch = launch_over(n, 64);
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
             "curd_batch_launch");
    check_ok(curd_batch_download_range(batch, buffer, 0, n * 4u, got, n * 4u),
             "curd_batch_download_range");
    curd_pending *pending = NULL;
    g_assert_cmpint(curd_batch_run_async(batch, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    check_ok(curd_batch_run_async(batch, &pending), "curd_batch_run_async");
    curd_pending *second = NULL;
    g_assert_cmpint(curd_batch_run_async(batch, &second), ==, CURD_E_BUSY);
    curd_test_assert_fix_sentence();
    g_assert_null(second);
    g_assert_cmpint(curd_batch_run(batch, NULL), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_batch_clear(batch, buffer), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_batch_reset(batch), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_batch_free(batch), ==, CURD_E_BUSY);
    /* Its buffer is in flight until the fence. */
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_BUSY);
    curd_timing timing = {.struct_size = sizeof timing};
    check_ok(curd_pending_wait(pending, &timing), "curd_pending_wait");
    for (uint32_t i = 0; i < n; i++)
        words[i]++;
    assert_words(got, words, n, "the pending run's download");
    g_assert_cmpuint(timing.wall_ns, >=, timing.enqueue_ns);
    check_ok(curd_pending_free(pending), "curd_pending_free");
    /* Free again to run: a pending freed unwaited completes quietly. */
    check_ok(curd_batch_run_async(batch, &pending), "curd_batch_run_async");
    check_ok(curd_pending_free(pending), "curd_pending_free");
    download_words(device, buffer, got, n);
    for (uint32_t i = 0; i < n; i++)
        words[i]++;
    assert_words(got, words, n, "the run freed unwaited");
    /* Reset empties it; a run of an empty batch is one fence. */
    check_ok(curd_batch_reset(batch), "curd_batch_reset");
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(words);
    g_free(got);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A batch cooperative launch and one with more than 48 KiB of dynamic
 * shared memory. */
static void test_cooperative_and_large_shared_launches(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device_props props = curd_test_device_info(device);
    curd_program *coop = load(device, "coop_sum.ptx", "curd_coop_sum");
    curd_program *reverse =
        load(device, "shared_reverse.ptx", "curd_shared_reverse");
    uint32_t blocks = (uint32_t)props.multiprocessor_count, threads = 128;
    uint32_t n = random_count(10000, 100000);
    uint32_t *in = random_words(n);
    uint64_t want = 0;
    for (uint32_t i = 0; i < n; i++)
        want += in[i];
    size_t out_count = (size_t)blocks * threads;
    curd_buffer ins = upload_new(device, in, n * 4u), partial, outs;
    check_ok(curd_buffer_alloc(device, blocks * 8u, &partial),
             "curd_buffer_alloc");
    check_ok(curd_buffer_alloc(device, out_count * 8u, &outs),
             "curd_buffer_alloc");
    uint32_t tile = 16384, tiles = 3; /* 64 KiB of shared memory a block */
    uint32_t *rin = random_words(tile * tiles);
    curd_buffer rins = upload_new(device, rin, tile * tiles * 4u), routs;
    check_ok(curd_buffer_alloc(device, tile * tiles * 4u, &routs),
             "curd_buffer_alloc");
    uint64_t *sums = g_new(uint64_t, out_count);
    uint32_t *reversed = g_new(uint32_t, tile * tiles);
    curd_test_poison(sums, out_count * 8u);
    curd_test_poison(reversed, tile * tiles * 4u);

    curd_batch *batch = batch_new(device, flags);
    curd_launch cooperative;
    curd_launch_init(&cooperative);
    cooperative.grid[0] = blocks;
    cooperative.grid[1] = cooperative.grid[2] = 1;
    cooperative.block[0] = threads;
    cooperative.flags = CURD_LAUNCH_COOPERATIVE;
    curd_arg coop_args[] = {curd_arg_buffer(CURD_ROLE_INPUT, ins),
                            curd_arg_scalar(&n, sizeof n),
                            curd_arg_buffer(CURD_ROLE_SCRATCH, partial),
                            curd_arg_buffer(CURD_ROLE_OUTPUT, outs)};
    curd_launch shared;
    curd_launch_init(&shared);
    shared.grid[0] = tiles;
    shared.grid[1] = shared.grid[2] = 1;
    shared.block[0] = 1024;
    shared.dynamic_shared_bytes = tile * 4u;
    curd_arg reverse_args[] = {curd_arg_buffer(CURD_ROLE_INPUT, rins),
                               curd_arg_buffer(CURD_ROLE_OUTPUT, routs),
                               curd_arg_scalar(&tile, sizeof tile)};
    check_ok(curd_batch_clear(batch, partial), "curd_batch_clear");
    check_ok(curd_batch_launch(batch, coop, &cooperative, coop_args, 4, NULL),
             "curd_batch_launch");
    check_ok(curd_batch_launch(batch, reverse, &shared, reverse_args, 3, NULL),
             "curd_batch_launch");
    check_ok(curd_batch_download_range(batch, outs, 0, out_count * 8u, sums,
                                       out_count * 8u),
             "curd_batch_download_range");
    check_ok(curd_batch_download_range(batch, routs, 0, tile * tiles * 4u,
                                       reversed, tile * tiles * 4u),
             "curd_batch_download_range");
    for (int run = 0; run < 2; run++) {
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        for (size_t i = 0; i < out_count; i++)
            if (sums[i] != want)
                g_error("cooperative sum %zu: %" PRIu64 ", expected %" PRIu64,
                        i, sums[i], want);
        for (uint32_t t = 0; t < tiles; t++)
            for (uint32_t i = 0; i < tile; i++)
                if (reversed[t * tile + i] != rin[t * tile + tile - 1u - i])
                    g_error("tile %" PRIu32 " element %" PRIu32
                            " not reversed", t, i);
        curd_test_poison(sums, out_count * 8u);
        curd_test_poison(reversed, tile * tiles * 4u);
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    curd_buffer all[] = {ins, partial, outs, rins, routs};
    for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
        check_ok(curd_buffer_free(device, all[i]), "curd_buffer_free");
    g_free(in);
    g_free(rin);
    g_free(sums);
    g_free(reversed);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Refusals
 * ---------------------------------------------------------------------- */

static void assert_refused(curd_status got, curd_status want)
{
    g_assert_cmpint(got, ==, want);
    curd_test_assert_fix_sentence();
}

/* Host bytes that no run may have written still hold what they held. */
static void assert_untouched(const unsigned char *got,
                             const unsigned char *was, size_t byte_len,
                             const char *what)
{
    for (size_t i = 0; i < byte_len; i++)
        if (got[i] != was[i])
            g_error("%s: byte %zu of %zu is 0x%02x, was 0x%02x", what, i,
                    byte_len, got[i], was[i]);
}

static void test_bad_input_is_refused_and_changes_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = 256;
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    curd_buffer doomed = upload_new(device, words, n * 4u);
    uint32_t host[256];
    curd_batch *batch = NULL;
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = 0x80u;
    assert_refused(curd_batch_new(device, &options, &batch),
                   CURD_E_INVALID_ARGUMENT);
    assert_refused(curd_batch_new(device, NULL, NULL),
                   CURD_E_INVALID_ARGUMENT);
    g_assert_null(batch);
    batch = batch_new(device, 0);
    assert_refused(curd_batch_fill(NULL, buffer, 0, 4, 0),
                   CURD_E_INVALID_ARGUMENT);
    /* Ranges, sizes and pointers. */
    assert_refused(curd_batch_fill(batch, buffer, n * 4u - 2u, 4, 0),
                   CURD_E_RANGE);
    assert_refused(curd_batch_upload(batch, buffer, 0, host, n * 4u + 4u),
                   CURD_E_RANGE);
    /* A host range that wraps the address space: refused when recorded,
     * as the transfer calls refuse it, and never touched by a run. */
    const void *near_top = (const void *)(UINTPTR_MAX - 15u);
    assert_refused(curd_batch_upload(batch, buffer, 0, near_top, 32),
                   CURD_E_OVERFLOW);
    assert_refused(curd_batch_download(batch, buffer, 0, 32,
                                       (void *)(uintptr_t)near_top),
                   CURD_E_OVERFLOW);
    assert_refused(curd_batch_download_range(batch, buffer, 0, 32,
                                             (void *)(uintptr_t)near_top, 32),
                   CURD_E_OVERFLOW);
    assert_refused(curd_buffer_upload_at(device, buffer, 0, near_top, 32),
                   CURD_E_OVERFLOW);
    assert_refused(curd_batch_upload(batch, buffer, 0, NULL, 4),
                   CURD_E_INVALID_ARGUMENT);
    assert_refused(curd_batch_download(batch, buffer, 0, 0, host),
                   CURD_E_INVALID_ARGUMENT);
    assert_refused(curd_batch_download_range(batch, buffer, 0, 0, host,
                                             sizeof host),
                   CURD_E_INVALID_ARGUMENT);
    curd_buffer forged = {buffer.id ^ 0x5555u};
    assert_refused(curd_batch_clear(batch, forged), CURD_E_STALE_HANDLE);
    /* Launch arguments batches do not take, and wrong shapes. */
    curd_launch launch = launch_over(n, 64);
    curd_arg borrowed[] = {curd_arg_host(CURD_ROLE_INOUT, host, sizeof host),
                           curd_arg_scalar(&n, sizeof n)};
    assert_refused(curd_batch_launch(batch, add_one, &launch, borrowed, 2,
                                     NULL),
                   CURD_E_INVALID_ARGUMENT);
    curd_arg read_back[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                            curd_arg_scalar(&n, sizeof n)};
    read_back[0].host = host;
    read_back[0].byte_len = sizeof host;
    assert_refused(curd_batch_launch(batch, add_one, &launch, read_back, 2,
                                     NULL),
                   CURD_E_INVALID_ARGUMENT);
    uint32_t too_many = n + 1u;
    curd_arg too_long[] = {counted(curd_arg_buffer(CURD_ROLE_INOUT, buffer), 1),
                           curd_arg_scalar(&too_many, sizeof too_many)};
    assert_refused(curd_batch_launch(batch, add_one, &launch, too_long, 2,
                                     NULL),
                   CURD_E_RANGE);
    curd_launch none = launch;
    none.iterations = 0;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    assert_refused(curd_batch_launch(batch, add_one, &none, args, 2, NULL),
                   CURD_E_INVALID_ARGUMENT);
    /* A program of another device. */
    curd_device *other = curd_test_gpu_open();
    curd_program *foreign = load(other, "add_one.ptx", "curd_add_one");
    assert_refused(curd_batch_launch(batch, foreign, &launch, args, 2, NULL),
                   CURD_E_INVALID_ARGUMENT);
    check_ok(curd_device_close(other), "curd_device_close");
    curd_stats empty = curd_test_device_stats(device);
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run of nothing");

    /* Set calls: not a launch, other kinds, sizes or counts. */
    size_t item = 0;
    check_ok(curd_batch_clear(batch, buffer), "curd_batch_clear");
    check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, &item),
             "curd_batch_launch");
    assert_refused(curd_batch_set_args(batch, 0, args, 2),
                   CURD_E_INVALID_ARGUMENT);
    assert_refused(curd_batch_set_args(batch, item, args, 1),
                   CURD_E_INVALID_ARGUMENT);
    uint64_t wide = n;
    curd_arg other_size[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                             curd_arg_scalar(&wide, sizeof wide)};
    assert_refused(curd_batch_set_args(batch, item, other_size, 2),
                   CURD_E_INVALID_ARGUMENT);
    curd_arg other_kind[] = {curd_arg_null(), curd_arg_scalar(&n, sizeof n)};
    assert_refused(curd_batch_set_args(batch, item, other_kind, 2),
                   CURD_E_INVALID_ARGUMENT);
    curd_launch more = launch;
    more.iterations = 2;
    assert_refused(curd_batch_set_launch(batch, item, &more),
                   CURD_E_INVALID_ARGUMENT);
    assert_refused(curd_batch_set_launch(batch, 7, &launch),
                   CURD_E_INVALID_ARGUMENT);
    /* The program cannot be freed while the batch launches it. */
    assert_refused(curd_program_free(add_one), CURD_E_BUSY);

    /* A buffer freed after it was recorded: the run is refused whole. */
    curd_arg doomed_args[] = {curd_arg_buffer(CURD_ROLE_INOUT, doomed),
                              curd_arg_scalar(&n, sizeof n)};
    check_ok(curd_batch_launch(batch, add_one, &launch, doomed_args, 2, NULL),
             "curd_batch_launch");
    check_ok(curd_buffer_free(device, doomed), "curd_buffer_free");
    curd_stats before = curd_test_device_stats(device);
    assert_refused(curd_batch_run(batch, NULL), CURD_E_STALE_HANDLE);
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpmem(&before, sizeof before, &after, sizeof after);
    g_assert_cmpuint(empty.batch_runs + 1u, ==, after.batch_runs);
    uint32_t *got = g_new(uint32_t, n);
    download_words(device, buffer, got, n);
    assert_words(got, words, n, "the buffer after a refused run");
    /* Reset forgets it, and the program may go. */
    check_ok(curd_batch_reset(batch), "curd_batch_reset");
    check_ok(curd_program_free(add_one), "curd_program_free");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(words);
    g_free(got);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* Batches and a pending run left open are freed by curd_device_close
 * (Valgrind and the stand-in driver's live counts prove nothing leaks). */
static void test_close_frees_batches_left_open(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = 512;
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    curd_launch launch = launch_over(n, 128);
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    uint32_t got[512];
    for (uint32_t flags = 0; flags <= CURD_BATCH_GRAPH; flags++) {
        curd_batch *batch = batch_new(device, flags);
        check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
                 "curd_batch_launch");
        check_ok(curd_batch_download_range(batch, buffer, 0, sizeof got, got,
                                           sizeof got),
                 "curd_batch_download_range");
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        curd_pending *pending;
        check_ok(curd_batch_run_async(batch, &pending),
                 "curd_batch_run_async");
    }
    check_ok(curd_device_close(device), "curd_device_close");
    g_free(words);
}

/* A kernel that accumulates into its binding (add_one: words[i] += 1,
 * iterations times) bound as OUTPUT or SCRATCH gives the same answer
 * through curd_dispatch and through a batch, streamed or as a graph: both
 * zero the buffer first, at every run, so each run leaves exactly
 * `iterations` in every word whatever the buffer held. Each zeroing counts
 * as one fill of the buffer's bytes, as a dispatch's does. A changed
 * OUTPUT buffer (curd_batch_set_args) is the one zeroed next, a graph
 * captured anew for it. */
static void test_outputs_and_scratch_are_zeroed_as_dispatch_zeroes_them(
    gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    static const curd_arg_role roles[] = {CURD_ROLE_OUTPUT,
                                          CURD_ROLE_SCRATCH};
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    for (size_t r = 0; r < G_N_ELEMENTS(roles); r++) {
        uint32_t n = random_count(100, 20000);
        uint32_t iterations = (uint32_t)g_test_rand_int_range(1, 4);
        uint32_t *garbage = random_words(n);
        uint32_t *want = g_new(uint32_t, n);
        for (uint32_t i = 0; i < n; i++)
            want[i] = iterations;
        uint32_t *got = g_new(uint32_t, n);
        curd_launch launch = launch_over(n, 128);
        launch.iterations = iterations;

        /* Through curd_dispatch. */
        curd_buffer through_dispatch = upload_new(device, garbage, n * 4u);
        curd_arg dispatch_args[] = {
            counted(curd_arg_buffer(roles[r], through_dispatch), 1),
            curd_arg_scalar(&n, sizeof n)};
        check_ok(curd_dispatch(device, add_one, &launch, dispatch_args, 2),
                 "curd_dispatch");
        uint32_t *dispatched = g_new(uint32_t, n);
        download_words(device, through_dispatch, dispatched, n);
        assert_words(dispatched, want, n, "the dispatch's accumulation");

        /* Through a batch, run three times over fresh garbage. */
        curd_buffer through_batch = upload_new(device, garbage, n * 4u);
        curd_batch *batch = batch_new(device, flags);
        curd_arg batch_args[] = {
            counted(curd_arg_buffer(roles[r], through_batch), 1),
            curd_arg_scalar(&n, sizeof n)};
        size_t item = 0;
        check_ok(curd_batch_launch(batch, add_one, &launch, batch_args, 2,
                                   &item),
                 "curd_batch_launch");
        check_ok(curd_batch_download_range(batch, through_batch, 0, n * 4u,
                                           got, n * 4u),
                 "curd_batch_download_range");
        for (int run = 0; run < 3; run++) {
            curd_test_fill_random(garbage, n * 4u);
            check_ok(curd_buffer_upload(device, through_batch, garbage,
                                        n * 4u),
                     "curd_buffer_upload");
            curd_test_poison(got, n * 4u);
            curd_stats before = curd_test_device_stats(device);
            check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
            curd_stats after = curd_test_device_stats(device);
            assert_words(got, dispatched, n,
                         "the batch's accumulation against the dispatch's");
            g_assert_cmpuint(after.fill_ops - before.fill_ops, ==, 1);
            g_assert_cmpuint(after.fill_bytes - before.fill_bytes, ==,
                             n * 4u);
        }

        /* Another buffer bound in its place is the one zeroed now. */
        curd_buffer other = upload_new(device, garbage, n * 4u);
        curd_arg other_args[] = {
            counted(curd_arg_buffer(roles[r], other), 1),
            curd_arg_scalar(&n, sizeof n)};
        check_ok(curd_batch_set_args(batch, item, other_args, 2),
                 "curd_batch_set_args");
        curd_test_fill_random(garbage, n * 4u);
        check_ok(curd_buffer_upload(device, through_batch, garbage, n * 4u),
                 "curd_buffer_upload");
        curd_stats before = curd_test_device_stats(device);
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        curd_stats after = curd_test_device_stats(device);
        if (flags & CURD_BATCH_GRAPH)
            g_assert_cmpuint(after.graph_captures - before.graph_captures,
                             ==, 1);
        download_words(device, other, got, n);
        assert_words(got, want, n, "the buffer bound by set_args");
        /* The old one was neither zeroed nor launched on: read back as
         * the garbage it holds. */
        uint32_t *old = g_new(uint32_t, n);
        download_words(device, through_batch, old, n);
        assert_words(old, garbage, n, "the buffer no longer bound");
        g_free(old);

        check_ok(curd_batch_free(batch), "curd_batch_free");
        check_ok(curd_buffer_free(device, through_dispatch),
                 "curd_buffer_free");
        check_ok(curd_buffer_free(device, through_batch), "curd_buffer_free");
        check_ok(curd_buffer_free(device, other), "curd_buffer_free");
        g_free(dispatched);
        g_free(garbage);
        g_free(want);
        g_free(got);
    }
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A download whose destination is smaller than its length is refused
 * when recorded (CURD_E_RANGE, with its Fix), so no run ever writes past
 * the destination: the batch records nothing, its runs move no byte, and
 * the destination and the bytes after it keep their poison. */
static void test_download_range_past_its_capacity_is_refused_when_recorded(
    gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint32_t n = 1024;
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    size_t capacity = (size_t)g_test_rand_int_range(1, 4096);
    /* The destination, with a guard of poison after it that a run which
     * overran it would change. */
    unsigned char *dst = g_malloc(capacity + 64u);
    curd_test_poison(dst, capacity + 64u);
    unsigned char *poison = g_memdup2(dst, capacity + 64u);
    curd_batch *batch = batch_new(device, flags);
    curd_stats before = curd_test_device_stats(device);
    assert_refused(curd_batch_download_range(batch, buffer, 0, 4096, dst,
                                             capacity),
                   CURD_E_RANGE);
    assert_refused(curd_batch_download_range(batch, buffer, 16, capacity + 1u,
                                             dst, capacity),
                   CURD_E_RANGE);
    check_ok(curd_batch_run(batch, NULL), "curd_batch_run of nothing");
    curd_stats after = curd_test_device_stats(device);
    g_assert_cmpuint(after.d2h_bytes, ==, before.d2h_bytes);
    assert_untouched(dst, poison, capacity + 64u,
                     "the refused download's destination and guard");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(poison);
    g_free(dst);
    g_free(words);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* A download within its capacity writes byte_len bytes at dst, every one
 * of them the buffer's, and nothing after them, run after run. */
static void test_download_range_writes_its_length_and_nothing_past_it(
    gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint32_t n = random_count(64, 20000);
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    size_t offset = (size_t)g_test_rand_int_range(0, (gint32)(n * 2u));
    size_t byte_len =
        (size_t)g_test_rand_int_range(1, (gint32)(n * 4u - offset));
    size_t capacity = byte_len + (size_t)g_test_rand_int_range(0, 100);
    unsigned char *dst = g_malloc(capacity);
    curd_batch *batch = batch_new(device, flags);
    check_ok(curd_batch_download_range(batch, buffer, offset, byte_len, dst,
                                       capacity),
             "curd_batch_download_range");
    for (int run = 0; run < 2; run++) {
        curd_test_poison(dst, capacity);
        unsigned char *tail = g_memdup2(dst + byte_len, capacity - byte_len);
        check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
        assert_range(dst, words, offset, byte_len);
        assert_untouched(dst + byte_len, tail, capacity - byte_len,
                         "the destination past byte_len");
        g_free(tail);
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(dst);
    g_free(words);
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Faults
 * ---------------------------------------------------------------------- */

/* Each driver call of a run failed in turn (a first graph run captures; a
 * later one updates a node): a typed error, every statistic as before, the
 * batch's buffer as before, and the next run correct. */
static void test_every_failed_driver_call_of_a_run(gconstpointer data)
{
    uint32_t flags = GPOINTER_TO_UINT(data);
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *add_one = load(device, "add_one.ptx", "curd_add_one");
    uint32_t n = random_count(300, 3000);
    uint32_t *words = random_words(n);
    curd_buffer buffer = upload_new(device, words, n * 4u);
    uint32_t *input = random_words(n);
    uint32_t *got = g_new(uint32_t, n);
    curd_launch launch = launch_over(n, 128);
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&n, sizeof n)};
    unsigned survived = 0;
    for (int updating = 0; updating < 2; updating++) {
        for (unsigned fail_at = 1;; fail_at++) {
            curd_batch *batch = batch_new(device, flags);
            size_t item;
            check_ok(curd_batch_upload(batch, buffer, 0, input, n * 4u),
                     "curd_batch_upload");
            check_ok(curd_batch_launch(batch, add_one, &launch, args, 2,
                                       &item),
                     "curd_batch_launch");
            check_ok(curd_batch_download_range(batch, buffer, 0,
                                               n * 4u, got, n * 4u),
                     "curd_batch_download_range");
            if (updating) {
                check_ok(curd_batch_run(batch, NULL), "curd_batch_run");
                check_ok(curd_batch_set_args(batch, item, args, 2),
                         "curd_batch_set_args");
            }
            transfer_test_snapshot before = transfer_test_take(device);
            curd_stats batches = curd_test_device_stats(device);
            curd_test_faults_begin(fail_at, 1 /* CUDA_ERROR_INVALID_VALUE */,
                                   NULL);
            curd_status status = curd_batch_run(batch, NULL);
            gboolean fired = curd_test_faults_fired();
            curd_test_faults_end();
            if (!fired) {
                check_ok(status, "curd_batch_run past the last fault point");
                check_ok(curd_batch_free(batch), "curd_batch_free");
                break;
            }
            for (uint32_t i = 0; i < n; i++)
                words[i] = input[i] + 1u;
            if (status == CURD_OK) {
                /* A failure the library may ignore (popping the context,
                 * reading the device time): the run did all its work. */
                assert_words(got, words, n, "a run past an ignored fault");
            } else {
                curd_test_assert_fix_sentence();
                assert_snapshot_equal(before, transfer_test_take(device));
                curd_stats after = curd_test_device_stats(device);
                g_assert_cmpuint(after.batch_runs, ==, batches.batch_runs);
                g_assert_cmpuint(after.graph_replays, ==,
                                 batches.graph_replays);
            }
            /* The same batch runs correctly next. */
            curd_test_poison(got, n * 4u);
            check_ok(curd_batch_run(batch, NULL), "curd_batch_run after");
            assert_words(got, words, n, "the run after a fault");
            check_ok(curd_batch_free(batch), "curd_batch_free");
            survived++;
        }
    }
    g_test_message("batch run fault points survived: %u", survived);
    g_assert_cmpuint(survived, >=, 4);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    g_free(words);
    g_free(input);
    g_free(got);
    check_ok(curd_device_close(device), "curd_device_close");
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    static const struct {
        const char *name;
        GTestDataFunc func;
    } both[] = {
        {"items-run-in-order-and-again", test_items_run_in_order_and_again},
        {"eight-dependent-launches-and-a-read-back",
         test_eight_dependent_launches_and_a_read_back},
        {"read-backs-of-every-size-land-exactly",
         test_read_backs_of_every_size_land_exactly},
        {"changed-launches-run-as-changed",
         test_changed_launches_run_as_changed},
        {"a-pending-run-holds-the-batch", test_a_pending_run_holds_the_batch},
        {"cooperative-and-large-shared-launches",
         test_cooperative_and_large_shared_launches},
        {"every-failed-driver-call-of-a-run",
         test_every_failed_driver_call_of_a_run},
        {"outputs-and-scratch-are-zeroed-as-dispatch-zeroes-them",
         test_outputs_and_scratch_are_zeroed_as_dispatch_zeroes_them},
        {"download-range-past-its-capacity-is-refused-when-recorded",
         test_download_range_past_its_capacity_is_refused_when_recorded},
        {"download-range-writes-its-length-and-nothing-past-it",
         test_download_range_writes_its_length_and_nothing_past_it},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(both); i++) {
        char *streamed = g_strdup_printf(PATH_ROOT "/streamed/%s", both[i].name);
        char *graph = g_strdup_printf(PATH_ROOT "/graph/%s", both[i].name);
        g_test_add_data_func(streamed, GUINT_TO_POINTER(0u), both[i].func);
        g_test_add_data_func(graph, GUINT_TO_POINTER(CURD_BATCH_GRAPH),
                             both[i].func);
        g_free(streamed);
        g_free(graph);
    }
    g_test_add_func(PATH_ROOT "/bad-input-is-refused-and-changes-nothing",
                    test_bad_input_is_refused_and_changes_nothing);
    g_test_add_func(PATH_ROOT "/close-frees-batches-left-open",
                    test_close_frees_batches_left_open);
    return g_test_run();
}
