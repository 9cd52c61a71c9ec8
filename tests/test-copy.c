/* test-copy.c - copies between resident buffers (lib/transfer/copy.h):
 * within one device, and between two (peer access, or staged through
 * pinned memory), synchronous, asynchronous and recorded in batches
 * (streamed and graph), and every kind of bad input.
 *
 * Each test fills its sources with fresh random bytes, poisons its
 * destinations, runs the copies on a host model too (the same copies, in
 * order, with memmove) and compares every byte of every buffer with the
 * model. Tests that need two GPUs skip with "needs 2 GPUs" on a host with
 * one; its stand-in twin test-copy-fake (tests/README.md) runs all of
 * them on the stand-in driver with two fake devices (and, to reach the
 * staged route on the CPU, with peer access denied by
 * FAKE_CUDA_NO_PEER_ACCESS, or turned off by CURD_PEER_ACCESS=0). */
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "driver/cuda_abi.h"
#include "support/curd-test.h"
#include "transfer-test.h"

/* ------------------------------------------------------------------------
 * Buffers with a host model
 * ---------------------------------------------------------------------- */

typedef struct modelled {
    curd_device *device;
    curd_buffer buffer;
    unsigned char *model; /* what the buffer must hold */
    size_t len;
} modelled;

/* A buffer of len bytes holding fresh random bytes (a source) or poison
 * (a destination), and its model. */
static modelled modelled_new(curd_device *device, size_t len, bool random)
{
    modelled m = {device, {0}, g_malloc(len), len};
    if (random)
        curd_test_fill_random(m.model, len);
    else
        curd_test_poison(m.model, len);
    g_assert_cmpint(curd_buffer_alloc(device, len, &m.buffer), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload(device, m.buffer, m.model, len), ==,
                    CURD_OK);
    return m;
}

static void modelled_free(modelled *m)
{
    g_assert_cmpint(curd_buffer_free(m->device, m->buffer), ==, CURD_OK);
    g_free(m->model);
}

static void modelled_check(const modelled *m)
{
    assert_buffer_holds(m->device, m->buffer, m->model, m->len);
}

static curd_copy copy_of(const modelled *dst, uint64_t dst_offset,
                         const modelled *src, uint64_t src_offset,
                         uint64_t byte_len)
{
    curd_copy copy = {dst->buffer, dst_offset, src->buffer, src_offset,
                      byte_len};
    return copy;
}

/* Applies copies in order to the models: models[i] holds buffer ids[i]. */
static void model_apply(modelled *const *models, size_t model_count,
                        const curd_copy *copies, size_t count)
{
    for (size_t c = 0; c < count; c++) {
        unsigned char *dst = NULL;
        const unsigned char *src = NULL;
        for (size_t m = 0; m < model_count; m++) {
            if (models[m]->buffer.id == copies[c].dst.id)
                dst = models[m]->model;
            if (models[m]->buffer.id == copies[c].src.id)
                src = models[m]->model;
        }
        g_assert_nonnull(dst);
        g_assert_nonnull(src);
        memmove(dst + copies[c].dst_offset, src + copies[c].src_offset,
                copies[c].byte_len);
    }
}

typedef struct copy_counts {
    uint64_t d2d_bytes, d2d_ops, peer_bytes, peer_ops;
} copy_counts;

static copy_counts counts_of(curd_device *device)
{
    curd_stats stats = curd_test_device_stats(device);
    copy_counts counts = {stats.d2d_bytes, stats.d2d_ops, stats.peer_bytes,
                          stats.peer_ops};
    return counts;
}

static void assert_counted(curd_device *device, copy_counts before,
                           uint64_t d2d_bytes, uint64_t d2d_ops,
                           uint64_t peer_bytes, uint64_t peer_ops)
{
    copy_counts after = counts_of(device);
    g_assert_cmpuint(after.d2d_bytes - before.d2d_bytes, ==, d2d_bytes);
    g_assert_cmpuint(after.d2d_ops - before.d2d_ops, ==, d2d_ops);
    g_assert_cmpuint(after.peer_bytes - before.peer_bytes, ==, peer_bytes);
    g_assert_cmpuint(after.peer_ops - before.peer_ops, ==, peer_ops);
}

/* A refused or failed call: its status and a Fix sentence (callers check
 * that nothing was counted or moved, and free the buffers after, which
 * proves no mark was left). */
static void expect_refused(curd_status status, curd_status expected)
{
    g_assert_cmpstr(curd_status_name(status), ==,
                    curd_status_name(expected));
    curd_test_assert_fix_sentence();
}

/* ------------------------------------------------------------------------
 * Devices
 * ---------------------------------------------------------------------- */

/* Device 0 as dst and device 1 as src, both opened with CURD_PEER_ACCESS
 * set to peer_setting (NULL: unset); FALSE, the test skipped, without two
 * GPUs. */
static gboolean open_two(const char *peer_setting, curd_device **dst,
                         curd_device **src)
{
    *dst = transfer_test_open_with("CURD_PEER_ACCESS", peer_setting);
    if (*dst == NULL)
        return FALSE;
    if (!curd_test_have_gpus(2)) {
        g_assert_cmpint(curd_device_close(*dst), ==, CURD_OK);
        return FALSE;
    }
    if (peer_setting != NULL)
        g_setenv("CURD_PEER_ACCESS", peer_setting, TRUE);
    curd_status status = curd_device_open(1, NULL, src);
    g_unsetenv("CURD_PEER_ACCESS");
    g_assert_cmpint(status, ==, CURD_OK);
    return TRUE;
}

static void close_two(curd_device *dst, curd_device *src)
{
    g_assert_cmpint(curd_device_close(src), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(dst), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Within one device
 * ---------------------------------------------------------------------- */

static void test_one_copy_within_a_device_moves_every_byte(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    static const size_t sizes[] = {1, 4096, 65537, (4u << 20) + 13u};
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        size_t len = sizes[i];
        modelled src = modelled_new(device, len, true);
        modelled dst = modelled_new(device, len + 64, false);
        modelled *models[] = {&src, &dst};
        curd_copy copy = copy_of(&dst, 32, &src, 0, len);
        copy_counts before = counts_of(device);
        uint64_t fences = curd_test_device_stats(device).fences;
        g_assert_cmpint(curd_buffer_copy(device, device, &copy, 1), ==,
                        CURD_OK);
        model_apply(models, 2, &copy, 1);
        assert_counted(device, before, len, 1, 0, 0);
        /* A copy is counted in its own fields, not as a transfer. */
        g_assert_cmpuint(curd_test_device_stats(device).fences, ==, fences);
        modelled_check(&dst);
        modelled_check(&src);
        modelled_free(&dst);
        modelled_free(&src);
    }
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Random spans between three buffers of one device, some of them a chain
 * of copies that continue one another (fused into one DMA). */
static void test_many_spans_apply_in_order_and_chains_fuse(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { LEN = 1 << 20, RANDOM = 48, CHAIN = 8, PIECE = 4096 };
    modelled a = modelled_new(device, LEN, true);
    modelled b = modelled_new(device, LEN, true);
    modelled c = modelled_new(device, LEN, false);
    modelled *models[] = {&a, &b, &c};
    modelled *sides[] = {&a, &b, &c};
    curd_copy copies[RANDOM + CHAIN];
    size_t count = 0;
    /* The chain: b[0, 32 KiB) into c[LEN - 32 KiB, LEN) in 8 pieces. */
    for (size_t i = 0; i < CHAIN; i++)
        copies[count++] = copy_of(&c, LEN - CHAIN * PIECE + i * PIECE, &b,
                                  i * PIECE, PIECE);
    for (size_t i = 0; i < RANDOM; i++) {
        modelled *dst = sides[g_test_rand_int_range(0, 3)];
        modelled *src = sides[g_test_rand_int_range(0, 3)];
        uint64_t len = (uint64_t)g_test_rand_int_range(0, 20000);
        uint64_t dst_offset = (uint64_t)g_test_rand_int_range(0, LEN / 2);
        uint64_t src_offset =
            dst == src ? dst_offset + len + (uint64_t)g_test_rand_int_range(
                                                 0, LEN / 4)
                       : (uint64_t)g_test_rand_int_range(0, LEN - 20000);
        copies[count++] = copy_of(dst, dst_offset, src, src_offset, len);
    }
    copy_counts before = counts_of(device);
    g_assert_cmpint(curd_buffer_copy(device, device, copies, count), ==,
                    CURD_OK);
    model_apply(models, 3, copies, count);
    for (size_t i = 0; i < G_N_ELEMENTS(models); i++)
        modelled_check(models[i]);
    copy_counts after = counts_of(device);
    uint64_t bytes = 0;
    size_t moving = 0;
    for (size_t i = 0; i < count; i++) {
        bytes += copies[i].byte_len;
        moving += copies[i].byte_len != 0;
    }
    g_assert_cmpuint(after.d2d_bytes - before.d2d_bytes, ==, bytes);
    /* The chain fused into one DMA; a random pair may fuse too, never
     * more than that. */
    g_assert_cmpuint(after.d2d_ops - before.d2d_ops, <=, moving - CHAIN + 1);
    g_assert_cmpuint(after.d2d_ops - before.d2d_ops, >=, 1);
    for (size_t i = 0; i < G_N_ELEMENTS(models); i++)
        modelled_free(models[i]);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Copies along one buffer, each reading what the one before wrote: they
 * apply in order, and are not fused into a DMA that reads what it
 * writes. */
static void test_a_chain_along_one_buffer_is_not_fused_over_itself(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { PIECE = 4096 };
    modelled a = modelled_new(device, 4 * PIECE, true);
    modelled *models[] = {&a};
    curd_copy copies[] = {copy_of(&a, PIECE, &a, 0, PIECE),
                          copy_of(&a, 2 * PIECE, &a, PIECE, PIECE),
                          copy_of(&a, 3 * PIECE, &a, 2 * PIECE, PIECE)};
    copy_counts before = counts_of(device);
    g_assert_cmpint(curd_buffer_copy(device, device, copies, 3), ==, CURD_OK);
    model_apply(models, 1, copies, 3);
    modelled_check(&a);
    assert_counted(device, before, 3 * PIECE, 3, 0, 0);
    modelled_free(&a);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_an_asynchronous_copy_holds_its_buffers_until_waited(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    size_t len = (2u << 20) + 7u;
    modelled src = modelled_new(device, len, true);
    modelled dst = modelled_new(device, len, false);
    modelled *models[] = {&src, &dst};
    curd_copy copy = copy_of(&dst, 0, &src, 0, len);
    copy_counts before = counts_of(device);
    curd_pending *pending = NULL;
    g_assert_cmpint(curd_buffer_copy_async(device, device, &copy, 1, &pending),
                    ==, CURD_OK);
    g_assert_nonnull(pending);
    g_assert_cmpint(curd_buffer_free(device, src.buffer), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_buffer_free(device, dst.buffer), ==, CURD_E_BUSY);
    curd_timing timing = {.struct_size = sizeof timing};
    g_assert_cmpint(curd_pending_wait(pending, &timing), ==, CURD_OK);
    g_assert_cmpuint(timing.wall_ns, >, 0);
    assert_counted(device, before, len, 1, 0, 0);
    model_apply(models, 2, &copy, 1);
    modelled_check(&dst);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
    /* Complete: its buffers are free to go before the pending does. */
    modelled scratch = modelled_new(device, 64, false);
    curd_copy small = copy_of(&scratch, 0, &src, 0, 64);
    g_assert_cmpint(curd_buffer_copy_async(device, device, &small, 1, &pending),
                    ==, CURD_OK);
    g_assert_cmpint(curd_pending_wait(pending, NULL), ==, CURD_OK);
    memcpy(scratch.model, src.model, 64);
    modelled_check(&scratch);
    modelled_free(&scratch);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
    /* Freed without a wait: the work completes (and counts) at the free. */
    before = counts_of(device);
    g_assert_cmpint(curd_buffer_copy_async(device, device, &copy, 1, &pending),
                    ==, CURD_OK);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
    assert_counted(device, before, len, 1, 0, 0);
    modelled_free(&dst);
    modelled_free(&src);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A copy's source with an asynchronous upload pending reads the uploaded
 * bytes: its device's upload stream is synchronised first (on the
 * stand-in driver, whose fences end on their word, that is the only
 * stream synchronisation of the call). */
static void copy_after_async_upload(curd_device *dst_device,
                                    curd_device *src_device)
{
    size_t len = 1u << 20;
    modelled src = modelled_new(src_device, len, false);
    modelled dst = modelled_new(dst_device, len, false);
    curd_block pinned;
    g_assert_cmpint(curd_block_acquire(src_device, CURD_POOL_PINNED, len,
                                       &pinned),
                    ==, CURD_OK);
    curd_test_fill_random(pinned.host_ptr, len);
    memcpy(src.model, pinned.host_ptr, len);
    g_assert_cmpint(curd_buffer_upload_async(src_device, src.buffer, 0,
                                             pinned.host_ptr, len),
                    ==, CURD_OK);
    curd_copy copy = copy_of(&dst, 0, &src, 0, len);
    curd_test_faults_begin(0, 0, "cuStreamSynchronize");
    g_assert_cmpint(curd_buffer_copy(dst_device, src_device, &copy, 1), ==,
                    CURD_OK);
    g_assert_cmpuint(curd_test_faults_end(), >=, 1);
    memcpy(dst.model, src.model, len);
    g_assert_cmpint(curd_device_sync_uploads(src_device), ==, CURD_OK);
    modelled_check(&dst);
    g_assert_cmpint(curd_block_release(src_device, &pinned), ==, CURD_OK);
    modelled_free(&dst);
    modelled_free(&src);
}

static void test_a_copy_sees_an_asynchronous_upload_before_it(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    copy_after_async_upload(device, device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_a_copy_sees_an_asynchronous_upload_on_its_source(void)
{
    curd_device *dev0, *dev1;
    if (!open_two(NULL, &dev0, &dev1))
        return;
    copy_after_async_upload(dev0, dev1);
    close_two(dev0, dev1);
}

/* A batch: upload into a, copy a into b, download b, run twice, streamed
 * and as a graph; each run counts its copy. */
static void batch_copies(uint32_t flags)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    size_t len = 65536 + 3;
    modelled a = modelled_new(device, len, false);
    modelled b = modelled_new(device, 2 * len, false);
    unsigned char *input = g_malloc(len);
    unsigned char *output = g_malloc(len);
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    curd_batch *batch = NULL;
    g_assert_cmpint(curd_batch_new(device, &options, &batch), ==, CURD_OK);
    curd_copy copy = copy_of(&b, len, &a, 0, len);
    g_assert_cmpint(curd_batch_upload(batch, a.buffer, 0, input, len), ==,
                    CURD_OK);
    g_assert_cmpint(curd_batch_copy(batch, &copy), ==, CURD_OK);
    g_assert_cmpint(curd_batch_download_range(batch, b.buffer, len,
                                              len, output, len),
                    ==, CURD_OK);
    for (unsigned run = 0; run < 3; run++) {
        curd_test_fill_random(input, len);
        curd_test_poison(output, len);
        copy_counts before = counts_of(device);
        if (run == 2) {
            curd_pending *pending = NULL;
            g_assert_cmpint(curd_batch_run_async(batch, &pending), ==,
                            CURD_OK);
            g_assert_cmpint(curd_pending_wait(pending, NULL), ==, CURD_OK);
            g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
        } else {
            g_assert_cmpint(curd_batch_run(batch, NULL), ==, CURD_OK);
        }
        assert_counted(device, before, len, 1, 0, 0);
        assert_same_bytes(output, input, len);
        memcpy(a.model, input, len);
        memcpy(b.model + len, input, len);
        modelled_check(&a);
        modelled_check(&b);
    }
    curd_stats stats = curd_test_device_stats(device);
    if (flags & CURD_BATCH_GRAPH)
        g_assert_cmpuint(stats.graph_replays, >=, 3);
    g_assert_cmpint(curd_batch_free(batch), ==, CURD_OK);
    g_free(output);
    g_free(input);
    modelled_free(&b);
    modelled_free(&a);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_a_streamed_batch_copies_at_each_run(void)
{
    batch_copies(0);
}

static void test_a_graph_batch_copies_at_each_replay(void)
{
    batch_copies(CURD_BATCH_GRAPH);
}

/* ------------------------------------------------------------------------
 * Between two devices
 * ---------------------------------------------------------------------- */

/* Copies between dst and src devices, both ways, in many spans (sync and
 * async), each checked byte by byte; peer_* counted on the destination. */
static void copies_between(const char *peer_setting)
{
    curd_device *dev0, *dev1;
    if (!open_two(peer_setting, &dev0, &dev1))
        return;
    /* Past two staging slots (8 MiB each), with an odd tail. */
    size_t len = (20u << 20) + 4099u;
    modelled on1 = modelled_new(dev1, len, true);
    modelled on0 = modelled_new(dev0, len, false);
    modelled *models[] = {&on0, &on1};

    /* One large span, 1 -> 0. */
    curd_copy whole = copy_of(&on0, 0, &on1, 0, len);
    copy_counts before0 = counts_of(dev0), before1 = counts_of(dev1);
    g_assert_cmpint(curd_buffer_copy(dev0, dev1, &whole, 1), ==, CURD_OK);
    model_apply(models, 2, &whole, 1);
    modelled_check(&on0);
    assert_counted(dev0, before0, 0, 0, len, 1);
    assert_counted(dev1, before1, 0, 0, 0, 0);

    /* Many small spans back, 0 -> 1, out of fresh bytes in on0's first
     * MiB, into on1's first 8 MiB (some overlapping: they apply in
     * order). */
    enum { SPANS = 40 };
    curd_test_fill_random(on0.model, 1u << 20);
    g_assert_cmpint(curd_buffer_upload_at(dev0, on0.buffer, 0, on0.model,
                                          1u << 20),
                    ==, CURD_OK);
    curd_copy spans[SPANS];
    uint64_t bytes = 0;
    for (size_t i = 0; i < SPANS; i++) {
        uint64_t span_len = (uint64_t)g_test_rand_int_range(1, 30000);
        spans[i] = copy_of(&on1, (uint64_t)g_test_rand_int_range(0, 8 << 20),
                           &on0,
                           (uint64_t)g_test_rand_int_range(0, 1 << 20),
                           span_len);
        bytes += span_len;
    }
    before1 = counts_of(dev1);
    curd_pending *pending = NULL;
    g_assert_cmpint(curd_buffer_copy_async(dev1, dev0, spans, SPANS, &pending),
                    ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(dev0, on0.buffer), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_buffer_free(dev1, on1.buffer), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_pending_wait(pending, NULL), ==, CURD_OK);
    g_assert_cmpint(curd_pending_free(pending), ==, CURD_OK);
    model_apply(models, 2, spans, SPANS);
    modelled_check(&on1);
    modelled_check(&on0);
    copy_counts after1 = counts_of(dev1);
    g_assert_cmpuint(after1.peer_bytes - before1.peer_bytes, ==, bytes);
    g_assert_cmpuint(after1.peer_ops - before1.peer_ops, <=, SPANS);

    modelled_free(&on0);
    modelled_free(&on1);
    close_two(dev0, dev1);
}

static void test_copies_between_two_devices_with_peer_access(void)
{
    copies_between(NULL);
}

static void test_copies_between_two_devices_staged_when_told(void)
{
    copies_between("0");
}

#if CURD_TEST_ON_FAKE
/* The driver denies peer access: staged, on the driver's word. */
static void test_copies_between_two_devices_staged_without_peer_access(void)
{
    g_setenv("FAKE_CUDA_NO_PEER_ACCESS", "1", TRUE);
    copies_between(NULL);
    g_unsetenv("FAKE_CUDA_NO_PEER_ACCESS");
}

/* Peer access is enabled on the first copy of an ordered pair and not
 * asked again (the stand-in driver counts the pairs). */
static void test_peer_access_is_enabled_once_per_ordered_pair(void)
{
    curd_device *dev0, *dev1;
    if (!open_two(NULL, &dev0, &dev1))
        return;
    static const char *const kinds[] = {"peer_access"};
    long before = 0, after = 0;
    g_assert_true(curd_test_fake_live(kinds, 1, &before));
    modelled a = modelled_new(dev0, 4096, true);
    modelled b = modelled_new(dev1, 4096, false);
    curd_copy to_b = copy_of(&b, 0, &a, 0, 4096);
    curd_copy to_a = copy_of(&a, 0, &b, 0, 4096);
    for (int i = 0; i < 3; i++)
        g_assert_cmpint(curd_buffer_copy(dev1, dev0, &to_b, 1), ==, CURD_OK);
    g_assert_true(curd_test_fake_live(kinds, 1, &after));
    g_assert_cmpint(after - before, <=, 1);
    g_assert_cmpint(curd_buffer_copy(dev0, dev1, &to_a, 1), ==, CURD_OK);
    g_assert_true(curd_test_fake_live(kinds, 1, &after));
    g_assert_cmpint(after - before, <=, 2);
    memcpy(b.model, a.model, 4096);
    modelled_check(&b);
    modelled_check(&a);
    modelled_free(&a);
    modelled_free(&b);
    close_two(dev0, dev1);
}
#endif

/* Enabling peer access: a failure fails the copy (nothing remembered, the
 * next copy asks again); a refusal the driver gives for pairs that cannot
 * be peers routes the copy through staging instead. */
static void test_enabling_peer_access_fails_or_falls_back(void)
{
    curd_device *dev0, *dev1;
    if (!open_two(NULL, &dev0, &dev1))
        return;
    modelled src = modelled_new(dev1, 100000, true);
    modelled dst = modelled_new(dev0, 100000, false);
    curd_copy copy = copy_of(&dst, 0, &src, 0, 100000);
    copy_counts before = counts_of(dev0);
    curd_test_faults_begin(1, CURDI_CUDA_ERROR_UNKNOWN,
                           "cuCtxEnablePeerAccess");
    curd_status status = curd_buffer_copy(dev0, dev1, &copy, 1);
    gboolean asked = curd_test_faults_fired();
    curd_test_faults_end();
    if (!asked) {
        /* A pair of GPUs without peer access never asks to enable it. */
        g_assert_cmpint(status, ==, CURD_OK);
        g_test_skip("the driver offers no peer access between devices 0"
                    " and 1");
        modelled_free(&dst);
        modelled_free(&src);
        close_two(dev0, dev1);
        return;
    }
    expect_refused(status, CURD_E_DRIVER);
    assert_counted(dev0, before, 0, 0, 0, 0);
    /* Asked again: a refusal of this pair now, so the bytes go staged. */
    curd_test_faults_begin(1, CURDI_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                           "cuCtxEnablePeerAccess");
    g_assert_cmpint(curd_buffer_copy(dev0, dev1, &copy, 1), ==, CURD_OK);
    g_assert_true(curd_test_faults_fired());
    /* Remembered: the next copy does not ask. */
    g_assert_cmpint(curd_buffer_copy(dev0, dev1, &copy, 1), ==, CURD_OK);
    g_assert_cmpuint(curd_test_faults_end(), ==, 1);
    assert_counted(dev0, before, 0, 0, 200000, 2);
    memcpy(dst.model, src.model, 100000);
    modelled_check(&dst);
    modelled_free(&dst);
    modelled_free(&src);
    close_two(dev0, dev1);
}

/* Two curd_devices of one GPU share its context: a copy between them is a
 * copy within one device. */
static void test_two_handles_of_one_gpu_copy_within_it(void)
{
    curd_device *first = curd_test_gpu_open();
    if (first == NULL)
        return;
    curd_device *second = curd_test_gpu_open();
    g_assert_nonnull(second);
    modelled src = modelled_new(second, 70000, true);
    modelled dst = modelled_new(first, 70000, false);
    curd_copy copy = copy_of(&dst, 0, &src, 0, 70000);
    copy_counts before = counts_of(first);
    g_assert_cmpint(curd_buffer_copy(first, second, &copy, 1), ==, CURD_OK);
    memcpy(dst.model, src.model, 70000);
    modelled_check(&dst);
    assert_counted(first, before, 70000, 1, 0, 0);
    modelled_free(&dst);
    modelled_free(&src);
    g_assert_cmpint(curd_device_close(second), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(first), ==, CURD_OK);
}

/* Threads copying at once, each its own buffers, half of them between the
 * two devices (racing to enable peer access first) and half within
 * device 0: every byte right, every copy counted. */
typedef struct copy_thread_work {
    curd_device *dev0, *dev1;
    unsigned index;
} copy_thread_work;

enum { COPY_THREADS = 4, COPY_ROUNDS = 16, COPY_THREAD_BYTES = 300000 };

static gpointer copy_thread_run(gpointer data)
{
    const copy_thread_work *work = data;
    curd_device *src_device = work->index % 2 == 0 ? work->dev1 : work->dev0;
    modelled src = modelled_new(src_device, COPY_THREAD_BYTES, true);
    modelled dst = modelled_new(work->dev0, COPY_THREAD_BYTES, false);
    for (unsigned round = 0; round < COPY_ROUNDS; round++) {
        uint64_t at = (uint64_t)round * 1000u;
        curd_copy copy = copy_of(&dst, at, &src, at,
                                 COPY_THREAD_BYTES - 20000u);
        g_assert_cmpint(curd_buffer_copy(work->dev0, src_device, &copy, 1),
                        ==, CURD_OK);
        memcpy(dst.model + at, src.model + at, COPY_THREAD_BYTES - 20000u);
    }
    modelled_check(&dst);
    modelled_free(&dst);
    modelled_free(&src);
    return NULL;
}

static void test_threads_copy_at_once(void)
{
    curd_device *dev0, *dev1;
    if (!open_two(NULL, &dev0, &dev1))
        return;
    copy_counts before = counts_of(dev0);
    copy_thread_work work[COPY_THREADS];
    GThread *threads[COPY_THREADS];
    for (unsigned i = 0; i < COPY_THREADS; i++) {
        work[i] = (copy_thread_work){dev0, dev1, i};
        threads[i] = g_thread_new("copies", copy_thread_run, &work[i]);
    }
    for (unsigned i = 0; i < COPY_THREADS; i++)
        g_thread_join(threads[i]);
    uint64_t per_thread = (uint64_t)COPY_ROUNDS * (COPY_THREAD_BYTES - 20000u);
    uint64_t halves = COPY_THREADS / 2;
    assert_counted(dev0, before, halves * per_thread, halves * COPY_ROUNDS,
                   halves * per_thread, halves * COPY_ROUNDS);
    close_two(dev0, dev1);
}

/* ------------------------------------------------------------------------
 * Bad input
 * ---------------------------------------------------------------------- */

static void test_bad_input_is_refused_before_anything_moves(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    modelled a = modelled_new(device, 4096, true);
    modelled b = modelled_new(device, 4096, false);
    curd_pending *pending = NULL;
    curd_copy good = copy_of(&b, 0, &a, 0, 4096);
    curd_buffer freed = {0};
    g_assert_cmpint(curd_buffer_alloc(device, 64, &freed), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, freed), ==, CURD_OK);
    transfer_test_snapshot snapshot = transfer_test_take(device);
    copy_counts before = counts_of(device);

    expect_refused(curd_buffer_copy(NULL, device, &good, 1),
                   CURD_E_INVALID_ARGUMENT);
    expect_refused(curd_buffer_copy(device, NULL, &good, 1),
                   CURD_E_INVALID_ARGUMENT);
    expect_refused(curd_buffer_copy(device, device, NULL, 2),
                   CURD_E_INVALID_ARGUMENT);
    expect_refused(curd_buffer_copy_async(device, device, &good, 1, NULL),
                   CURD_E_INVALID_ARGUMENT);

    struct {
        curd_copy copy;
        curd_status expected;
    } bad[] = {
        {copy_of(&b, 1, &a, 0, 4096), CURD_E_RANGE},
        {copy_of(&b, 0, &a, 1, 4096), CURD_E_RANGE},
        {copy_of(&b, 4097, &a, 0, 0), CURD_E_RANGE},
        {copy_of(&b, UINT64_MAX, &a, 0, 2), CURD_E_OVERFLOW},
        {copy_of(&b, 2, &a, 0, UINT64_MAX), CURD_E_OVERFLOW},
        {copy_of(&b, 0, &a, UINT64_MAX - 1, 2), CURD_E_OVERFLOW},
        {copy_of(&a, 100, &a, 0, 200), CURD_E_INVALID_ARGUMENT},
        {copy_of(&a, 0, &a, 100, 200), CURD_E_INVALID_ARGUMENT},
        {copy_of(&a, 0, &a, 0, 1), CURD_E_INVALID_ARGUMENT},
        {{freed, 0, a.buffer, 0, 1}, CURD_E_STALE_HANDLE},
        {{b.buffer, 0, freed, 0, 1}, CURD_E_STALE_HANDLE},
        {{{0}, 0, a.buffer, 0, 1}, CURD_E_STALE_HANDLE},
        {{b.buffer, 0, {12345}, 0, 1}, CURD_E_STALE_HANDLE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        /* Alone, after a good copy (all or none), and asynchronously. */
        curd_copy pair[2] = {good, bad[i].copy};
        expect_refused(curd_buffer_copy(device, device, &bad[i].copy, 1),
                       bad[i].expected);
        expect_refused(curd_buffer_copy(device, device, pair, 2),
                       bad[i].expected);
        pending = NULL;
        expect_refused(curd_buffer_copy_async(device, device, pair, 2,
                                              &pending),
                       bad[i].expected);
        g_assert_null(pending);
    }

    assert_snapshot_equal(transfer_test_take(device), snapshot);

    /* Batches: the same checks when recorded, and nothing recorded (the
     * run of the empty batch copies nothing). */
    curd_batch *batch = NULL;
    g_assert_cmpint(curd_batch_new(device, NULL, &batch), ==, CURD_OK);
    expect_refused(curd_batch_copy(NULL, &good), CURD_E_INVALID_ARGUMENT);
    expect_refused(curd_batch_copy(batch, NULL), CURD_E_INVALID_ARGUMENT);
    curd_copy empty = copy_of(&b, 0, &a, 0, 0);
    expect_refused(curd_batch_copy(batch, &empty), CURD_E_INVALID_ARGUMENT);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        if (bad[i].copy.byte_len != 0)
            expect_refused(curd_batch_copy(batch, &bad[i].copy),
                           bad[i].expected);
    g_assert_cmpint(curd_batch_run(batch, NULL), ==, CURD_OK);
    g_assert_cmpint(curd_batch_free(batch), ==, CURD_OK);

    assert_counted(device, before, 0, 0, 0, 0);
    modelled_check(&b);
    modelled_check(&a);
    modelled_free(&a);
    modelled_free(&b);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A buffer of the other device on either side: CURD_E_INVALID_ARGUMENT
 * naming the side; the other device's batch refuses it as stale. */
static void test_a_buffer_of_the_other_device_is_named_as_such(void)
{
    curd_device *dev0, *dev1;
    if (!open_two(NULL, &dev0, &dev1))
        return;
    modelled on0 = modelled_new(dev0, 4096, true);
    modelled on1 = modelled_new(dev1, 4096, true);
    curd_copy dst_wrong = copy_of(&on1, 0, &on1, 2048, 16);
    curd_copy src_wrong = copy_of(&on0, 0, &on0, 2048, 16);
    expect_refused(curd_buffer_copy(dev0, dev1, &dst_wrong, 1),
                   CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "dst"));
    expect_refused(curd_buffer_copy(dev0, dev1, &src_wrong, 1),
                   CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "src"));
    curd_copy within1 = copy_of(&on1, 0, &on1, 2048, 16);
    expect_refused(curd_buffer_copy(dev0, dev0, &within1, 1),
                   CURD_E_STALE_HANDLE);
    curd_batch *batch = NULL;
    g_assert_cmpint(curd_batch_new(dev0, NULL, &batch), ==, CURD_OK);
    expect_refused(curd_batch_copy(batch, &within1), CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_batch_free(batch), ==, CURD_OK);
    modelled_check(&on0);
    modelled_check(&on1);
    modelled_free(&on0);
    modelled_free(&on1);
    /* A device closed already is refused as such, on either side. */
    curd_copy nothing = {{0}, 0, {0}, 0, 0};
    g_assert_cmpint(curd_device_close(dev1), ==, CURD_OK);
    expect_refused(curd_buffer_copy(dev0, dev1, &nothing, 1),
                   CURD_E_INVALID_ARGUMENT);
    expect_refused(curd_buffer_copy(dev1, dev0, &nothing, 1),
                   CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_close(dev0), ==, CURD_OK);
}

static const transfer_test_case cases[] = {
    {"one-device/one-copy-moves-every-byte",
     test_one_copy_within_a_device_moves_every_byte},
    {"one-device/many-spans-apply-in-order-and-chains-fuse",
     test_many_spans_apply_in_order_and_chains_fuse},
    {"one-device/a-chain-along-one-buffer-is-not-fused-over-itself",
     test_a_chain_along_one_buffer_is_not_fused_over_itself},
    {"one-device/an-async-copy-holds-its-buffers-until-waited",
     test_an_asynchronous_copy_holds_its_buffers_until_waited},
    {"one-device/a-copy-sees-an-async-upload-before-it",
     test_a_copy_sees_an_asynchronous_upload_before_it},
    {"one-device/a-streamed-batch-copies-at-each-run",
     test_a_streamed_batch_copies_at_each_run},
    {"one-device/a-graph-batch-copies-at-each-replay",
     test_a_graph_batch_copies_at_each_replay},
    {"one-device/two-handles-of-one-gpu-copy-within-it",
     test_two_handles_of_one_gpu_copy_within_it},
    {"two-devices/peer-access", test_copies_between_two_devices_with_peer_access},
    {"two-devices/staged-when-told-CURD_PEER_ACCESS-0",
     test_copies_between_two_devices_staged_when_told},
#if CURD_TEST_ON_FAKE
    /* The stand-in's alone: a GPU cannot be told to deny peer access, and
     * the driver does not count its enabled pairs. */
    {"two-devices/staged-without-peer-access",
     test_copies_between_two_devices_staged_without_peer_access},
    {"two-devices/peer-access-is-enabled-once-per-ordered-pair",
     test_peer_access_is_enabled_once_per_ordered_pair},
#endif
    {"two-devices/threads-copy-at-once", test_threads_copy_at_once},
    {"two-devices/enabling-peer-access-fails-or-falls-back",
     test_enabling_peer_access_fails_or_falls_back},
    {"two-devices/a-copy-sees-an-async-upload-on-its-source",
     test_a_copy_sees_an_asynchronous_upload_on_its_source},
    {"bad-input/refused-before-anything-moves",
     test_bad_input_is_refused_before_anything_moves},
    {"bad-input/a-buffer-of-the-other-device-is-named-as-such",
     test_a_buffer_of_the_other_device_is_named_as_such},
};

int main(int argc, char **argv)
{
    /* The stand-in driver reads its device count when it loads, at the
     * first driver call; a GPU host ignores it. */
    if (CURD_TEST_ON_FAKE)
        g_setenv("FAKE_CUDA_DEVICES", "2", TRUE);
    return transfer_test_main(argc, argv, "copy", cases, G_N_ELEMENTS(cases));
}
