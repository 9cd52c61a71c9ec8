/* test-transfer-gpu.c - uploads, downloads, batches, fills, registrations
 * and asynchronous uploads on a real device.
 *
 * Every byte that comes back is compared with a host reference; outputs are
 * poisoned first; the counters of curd_device_stats are checked for the
 * promises of curd.h (one fence per batch, fused DMAs, fills that upload
 * nothing, failures that count nothing). Each test opens device 0 or skips
 * with the reason. */
#include <glib.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer-test.h"

static curd_buffer alloc_ok(curd_device *device, size_t len)
{
    curd_buffer buffer = {0};
    g_assert_cmpint(curd_buffer_alloc(device, len, &buffer), ==, CURD_OK);
    return buffer;
}

static bool can_register(curd_device *device)
{
    curd_device_props props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    g_assert_cmpint(curd_device_info(device, &props), ==, CURD_OK);
    return (props.capabilities & CURD_CAP_HOST_REGISTER) != 0;
}

/* The stand-in driver copies with memcpy, under Valgrind in make check:
 * there the largest sizes are left to the GPU run. */
static const size_t round_trip_sizes[] = {
    1,           2,           3,           7,          255,
    256,         257,         4095,        4096,       4097,
    65535,       65537,       (1u << 20) - 1u, 1u << 20, (1u << 20) + 1u,
    (3u << 20) + 5u, (8u << 20) + 13u, (33u << 20) + 1u, 64u << 20,
};

/* ------------------------------------------------------------------------
 * Round trips
 * ---------------------------------------------------------------------- */

static void round_trip(curd_device *device, size_t len, unsigned char *src,
                       unsigned char *dst, bool expect_one_dma)
{
    curd_buffer buffer = alloc_ok(device, len);
    transfer_test_snapshot before, middle, after;
    curd_test_fill_random(src, len);
    curd_test_poison(dst, len);
    before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_upload(device, buffer, src, len), ==, CURD_OK);
    middle = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_download(device, buffer, dst, len), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(dst, src, len);
    g_assert_cmpuint(middle.h2d_bytes - before.h2d_bytes, ==, len);
    g_assert_cmpuint(middle.fences - before.fences, ==, 1);
    g_assert_cmpuint(after.d2h_bytes - middle.d2h_bytes, ==, len);
    g_assert_cmpuint(after.fences - middle.fences, ==, 1);
    g_assert_cmpuint(after.h2d_bytes, ==, middle.h2d_bytes);
    if (expect_one_dma) {
        g_assert_cmpuint(middle.copy_ops - before.copy_ops, ==, 1);
        g_assert_cmpuint(after.copy_ops - middle.copy_ops, ==, 1);
    }
    /* Staging goes back to the pool. */
    g_assert_cmpuint(after.pinned_live_bytes, ==, before.pinned_live_bytes);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
}

static void test_whole_buffer_round_trips_at_many_sizes(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    unsigned char *src = g_malloc(64u << 20);
    unsigned char *dst = g_malloc(64u << 20);
    for (size_t i = 0; i < G_N_ELEMENTS(round_trip_sizes); i++) {
        if (CURD_TEST_ON_FAKE && round_trip_sizes[i] > (16u << 20))
            continue;
        round_trip(device, round_trip_sizes[i], src, dst,
                   round_trip_sizes[i] <= (1u << 20));
    }
    g_free(src);
    g_free(dst);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_registered_memory_round_trips_in_one_dma_each_way(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    if (!can_register(device)) {
        g_test_skip("the driver has no cuMemHostRegister");
        curd_device_close(device);
        return;
    }
    unsigned char *src = g_malloc(64u << 20);
    unsigned char *dst = g_malloc(64u << 20);
    g_assert_cmpint(curd_host_register(device, src, 64u << 20), ==, CURD_OK);
    g_assert_cmpint(curd_host_register(device, dst, 64u << 20), ==, CURD_OK);
    for (size_t i = 0; i < G_N_ELEMENTS(round_trip_sizes); i++) {
        if (CURD_TEST_ON_FAKE && round_trip_sizes[i] > (16u << 20))
            continue;
        round_trip(device, round_trip_sizes[i], src, dst, true);
    }
    g_assert_cmpint(curd_host_unregister(device, src), ==, CURD_OK);
    g_assert_cmpint(curd_host_unregister(device, dst), ==, CURD_OK);
    g_free(src);
    g_free(dst);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_ranges_at_random_offsets_match_a_host_model(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t len = (1u << 20) + 77u;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *model = g_malloc(len);
    unsigned char *scratch = g_malloc(len + 64);
    curd_test_fill_random(model, len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, len), ==, CURD_OK);
    for (int round = 0; round < 300; round++) {
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)len + 1);
        size_t room = len - offset;
        size_t count = room == 0 ? 0
                                 : (size_t)g_test_rand_int_range(0, (gint32)room + 1);
        if (g_test_rand_int_range(0, 4) != 0 && count > 9000)
            count = (size_t)g_test_rand_int_range(0, 9000);
        if (g_test_rand_bit()) {
            curd_test_fill_random(scratch, count);
            g_assert_cmpint(curd_buffer_upload_at(device, buffer, offset, scratch,
                                                  count),
                            ==, CURD_OK);
            memcpy(model + offset, scratch, count);
        } else {
            size_t capacity = count + (size_t)g_test_rand_int_range(0, 64);
            curd_test_poison(scratch, len + 64);
            g_assert_cmpint(curd_buffer_download_range(device, buffer, offset,
                                                       count, scratch, capacity),
                            ==, CURD_OK);
            assert_same_bytes(scratch, model + offset, count);
            /* Nothing past byte_len is written, whatever the capacity. */
            unsigned char *poison = g_malloc(len + 64);
            curd_test_poison(poison, len + 64);
            assert_same_bytes(scratch + count, poison + count, 64);
            g_free(poison);
        }
    }
    assert_buffer_holds(device, buffer, model, len);
    g_free(model);
    g_free(scratch);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Batches
 * ---------------------------------------------------------------------- */

#define BATCH_BUFFERS 3

/* Random items over the buffers: runs of adjacent, overlapping or
 * scattered ranges, some empty. */
static void random_ranges(const size_t *sizes, size_t count, size_t max_len,
                          size_t *which, size_t *offsets, size_t *lens)
{
    for (size_t i = 0; i < count;) {
        size_t b = (size_t)g_test_rand_int_range(0, BATCH_BUFFERS);
        size_t run = (size_t)g_test_rand_int_range(1, 8);
        int kind = g_test_rand_int_range(0, 3);
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)sizes[b] + 1);
        for (size_t r = 0; r < run && i < count; r++, i++) {
            size_t room = sizes[b] - offset;
            size_t len = room == 0 ? 0
                                   : (size_t)g_test_rand_int_range(0, (gint32)room + 1);
            if (len > max_len)
                len = (size_t)g_test_rand_int_range(0, (gint32)max_len + 1);
            if (g_test_rand_int_range(0, 10) == 0)
                len = 0;
            which[i] = b;
            offsets[i] = offset;
            lens[i] = len;
            if (kind == 0)
                offset += len;
            else if (kind == 1 && len > 0)
                offset += (size_t)g_test_rand_int_range(0, (gint32)len);
            else
                offset = (size_t)g_test_rand_int_range(0, (gint32)sizes[b] + 1);
        }
    }
}

static void batch_round(curd_device *device, size_t max_items, size_t max_size,
                        size_t max_len)
{
    curd_buffer buffers[BATCH_BUFFERS];
    size_t sizes[BATCH_BUFFERS];
    unsigned char *models[BATCH_BUFFERS];
    size_t count = (size_t)g_test_rand_int_range(1, (gint32)max_items + 1);
    size_t *which = g_new(size_t, count);
    size_t *offsets = g_new(size_t, count);
    size_t *lens = g_new(size_t, count);
    curd_buffer *item_buffers = g_new(curd_buffer, count);
    curd_upload *ups = g_new(curd_upload, count);
    curd_download *downs = g_new(curd_download, count);
    size_t arena_len = 0;
    unsigned char *arena, *expected;
    transfer_test_snapshot before, after;

    for (size_t b = 0; b < BATCH_BUFFERS; b++) {
        sizes[b] = (size_t)g_test_rand_int_range(1, (gint32)max_size + 1);
        buffers[b] = alloc_ok(device, sizes[b]);
        models[b] = g_malloc(sizes[b]);
        curd_test_fill_random(models[b], sizes[b]);
        g_assert_cmpint(curd_buffer_upload(device, buffers[b], models[b],
                                           sizes[b]),
                        ==, CURD_OK);
    }
    random_ranges(sizes, count, max_len, which, offsets, lens);
    for (size_t i = 0; i < count; i++) {
        item_buffers[i] = buffers[which[i]];
        arena_len += lens[i];
    }
    arena = g_malloc(arena_len + 1);
    expected = g_malloc(arena_len + 1);

    /* Upload: sources back to back in the arena, applied in item order. */
    curd_test_fill_random(arena, arena_len + 1);
    for (size_t i = 0, at = 0; i < count; i++) {
        ups[i] = (curd_upload){buffers[which[i]], offsets[i],
                               lens[i] ? arena + at : NULL, lens[i]};
        memcpy(models[which[i]] + offsets[i], arena + at, lens[i]);
        at += lens[i];
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_upload_batch(device, ups, count), ==, CURD_OK);
    after = transfer_test_take(device);
    uint64_t moved = transfer_test_union(buffers, BATCH_BUFFERS, item_buffers,
                                         offsets, lens, count, NULL);
    g_assert_cmpuint(after.h2d_bytes - before.h2d_bytes, ==, moved);
    g_assert_cmpuint(after.fences - before.fences, ==, moved > 0 ? 1 : 0);
    g_assert_cmpuint(after.d2h_bytes, ==, before.d2h_bytes);
    for (size_t b = 0; b < BATCH_BUFFERS; b++) {
        assert_buffer_holds(device, buffers[b], models[b], sizes[b]);
    }

    /* Download: destinations back to back, poisoned first. */
    curd_test_poison(arena, arena_len + 1);
    memcpy(expected, arena, arena_len + 1);
    for (size_t i = 0, at = 0; i < count; i++) {
        size_t slack = (size_t)g_test_rand_int_range(0, 2);
        downs[i] = (curd_download){buffers[which[i]], offsets[i], lens[i],
                                   lens[i] ? arena + at : NULL,
                                   lens[i] + (i + 1 == count ? slack : 0)};
        memcpy(expected + at, models[which[i]] + offsets[i], lens[i]);
        at += lens[i];
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, downs, count), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(arena, expected, arena_len + 1);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, moved);
    g_assert_cmpuint(after.fences - before.fences, ==, moved > 0 ? 1 : 0);
    g_assert_cmpuint(after.h2d_bytes, ==, before.h2d_bytes);
    g_assert_cmpuint(after.pinned_live_bytes, ==, before.pinned_live_bytes);

    for (size_t b = 0; b < BATCH_BUFFERS; b++) {
        g_assert_cmpint(curd_buffer_free(device, buffers[b]), ==, CURD_OK);
        g_free(models[b]);
    }
    g_free(arena);
    g_free(expected);
    g_free(which);
    g_free(offsets);
    g_free(lens);
    g_free(item_buffers);
    g_free(ups);
    g_free(downs);
}

static void test_batches_match_a_model_with_one_fence_each(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    for (int round = 0; round < 60; round++)
        batch_round(device, 50, 70000, 20000);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_large_batches_pipeline_across_staging_chunks(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    if (CURD_TEST_ON_FAKE)
        batch_round(device, 12, 6u << 20, 3u << 20);
    else
        for (int round = 0; round < 4; round++)
            batch_round(device, 20, 24u << 20, 12u << 20);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void adjacent_reads(curd_device *device, unsigned char *dst)
{
    enum { PIECES = 64, PIECE = 4096 };
    curd_buffer buffer = alloc_ok(device, PIECES * PIECE);
    unsigned char *src = g_malloc(PIECES * PIECE);
    curd_download items[PIECES];
    transfer_test_snapshot before, after;
    curd_test_fill_random(src, PIECES * PIECE);
    g_assert_cmpint(curd_buffer_upload(device, buffer, src, PIECES * PIECE), ==,
                    CURD_OK);
    curd_test_poison(dst, PIECES * PIECE);
    for (size_t i = 0; i < PIECES; i++)
        items[i] = (curd_download){buffer, i * PIECE, PIECE, dst + i * PIECE,
                                   PIECE};
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, items, PIECES), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(dst, src, PIECES * PIECE);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(after.fences - before.fences, ==, 1);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, PIECES * PIECE);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(src);
}

static void test_sixty_four_adjacent_4k_reads_are_one_dma_and_one_fence(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    unsigned char *dst = g_malloc(64 * 4096);
    adjacent_reads(device, dst);
    if (can_register(device)) {
        /* Registered and laid out like the buffer: one DMA straight into
         * the caller's memory. */
        g_assert_cmpint(curd_host_register(device, dst, 64 * 4096), ==, CURD_OK);
        adjacent_reads(device, dst);
        g_assert_cmpint(curd_host_unregister(device, dst), ==, CURD_OK);
    }
    g_free(dst);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_overlapping_upload_items_apply_in_order(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, 1000);
    unsigned char a[600], b[600], c[10], model[1000];
    curd_test_fill_random(model, sizeof model);
    curd_test_fill_random(a, sizeof a);
    curd_test_fill_random(b, sizeof b);
    curd_test_fill_random(c, sizeof c);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, sizeof model), ==,
                    CURD_OK);
    curd_upload items[3] = {{buffer, 0, a, 600}, {buffer, 300, b, 600},
                            {buffer, 400, c, 10}};
    memcpy(model, a, 600);
    memcpy(model + 300, b, 600);
    memcpy(model + 400, c, 10);
    g_assert_cmpint(curd_upload_batch(device, items, 3), ==, CURD_OK);
    assert_buffer_holds(device, buffer, model, 1000);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Fills
 * ---------------------------------------------------------------------- */

static void test_fill_and_clear_use_device_memset_and_upload_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t len = (2u << 20) + 3u;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *model = g_malloc(len);
    curd_test_fill_random(model, len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, len), ==, CURD_OK);
    for (int round = 0; round < 20; round++) {
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)len + 1);
        size_t count = (size_t)g_test_rand_int_range(0, (gint32)(len - offset) + 1);
        uint8_t value = (uint8_t)g_test_rand_int_range(0, 256);
        transfer_test_snapshot before = transfer_test_take(device);
        g_assert_cmpint(curd_buffer_fill(device, buffer, offset, count, value),
                        ==, CURD_OK);
        transfer_test_snapshot after = transfer_test_take(device);
        memset(model + offset, value, count);
        g_assert_cmpuint(after.h2d_bytes, ==, before.h2d_bytes);
        g_assert_cmpuint(after.copy_ops, ==, before.copy_ops);
        g_assert_cmpuint(after.fill_ops - before.fill_ops, ==, count ? 1 : 0);
        g_assert_cmpuint(after.fill_bytes - before.fill_bytes, ==, count);
        g_assert_cmpuint(after.fences - before.fences, ==, count ? 1 : 0);
        g_assert_cmpuint(after.pinned_live_bytes, ==, before.pinned_live_bytes);
    }
    assert_buffer_holds(device, buffer, model, len);
    transfer_test_snapshot before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_clear(device, buffer), ==, CURD_OK);
    transfer_test_snapshot after = transfer_test_take(device);
    g_assert_cmpuint(after.h2d_bytes, ==, before.h2d_bytes);
    g_assert_cmpuint(after.fill_bytes - before.fill_bytes, ==, len);
    memset(model, 0, len);
    assert_buffer_holds(device, buffer, model, len);
    g_free(model);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Zero-length and bad input
 * ---------------------------------------------------------------------- */

static void test_zero_length_transfers_cost_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, 100);
    unsigned char byte = 0x42;
    curd_upload ups[3] = {{buffer, 0, NULL, 0}, {buffer, 100, &byte, 0},
                          {buffer, 50, NULL, 0}};
    curd_download downs[2] = {{buffer, 100, 0, NULL, 0}, {buffer, 3, 0, &byte, 0}};
    transfer_test_snapshot before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_upload_at(device, buffer, 100, NULL, 0), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_download_range(device, buffer, 0, 0, NULL, 0),
                    ==, CURD_OK);
    g_assert_cmpint(curd_upload_batch(device, ups, 3), ==, CURD_OK);
    g_assert_cmpint(curd_download_batch(device, downs, 2), ==, CURD_OK);
    g_assert_cmpint(curd_upload_batch(device, NULL, 0), ==, CURD_OK);
    g_assert_cmpint(curd_download_batch(device, NULL, 0), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_fill(device, buffer, 100, 0, 1), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 7, NULL, 0), ==,
                    CURD_OK);
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpuint(byte, ==, 0x42);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

typedef struct bad_case {
    const char *name;
    curd_status expected;
    curd_status (*run)(curd_device *, curd_buffer, curd_buffer, curd_buffer,
                       unsigned char *, unsigned char *);
    /* What the sentence must say: the call and, in a batch, the item. */
    const char *says;
} bad_case;

enum { BAD_LEN = 4096 };

static curd_status bad_upload_wrong_length(curd_device *d, curd_buffer a,
                                           curd_buffer b, curd_buffer other,
                                           unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    return curd_buffer_upload(d, a, src, BAD_LEN - 1);
}

static curd_status bad_download_wrong_length(curd_device *d, curd_buffer a,
                                             curd_buffer b, curd_buffer other,
                                             unsigned char *src,
                                             unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    return curd_buffer_download(d, a, dst, BAD_LEN + 1);
}

/* SIZE_MAX: the host range would wrap, but the length is first of all not
 * the buffer's (curd.h promises CURD_E_RANGE). */
static curd_status bad_upload_of_size_max(curd_device *d, curd_buffer a,
                                          curd_buffer b, curd_buffer other,
                                          unsigned char *src,
                                          unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    return curd_buffer_upload(d, a, src, SIZE_MAX);
}

static curd_status bad_download_of_size_max(curd_device *d, curd_buffer a,
                                            curd_buffer b, curd_buffer other,
                                            unsigned char *src,
                                            unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    return curd_buffer_download(d, a, dst, SIZE_MAX);
}

static curd_status bad_offset_past_end(curd_device *d, curd_buffer a,
                                       curd_buffer b, curd_buffer other,
                                       unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    return curd_buffer_upload_at(d, a, BAD_LEN + 1, src, 0);
}

static curd_status bad_range_past_end(curd_device *d, curd_buffer a,
                                      curd_buffer b, curd_buffer other,
                                      unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    return curd_buffer_upload_at(d, a, 10, src, BAD_LEN - 9);
}

static curd_status bad_overflowing_length(curd_device *d, curd_buffer a,
                                          curd_buffer b, curd_buffer other,
                                          unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    return curd_buffer_download_range(d, a, SIZE_MAX - 1, 2, dst, SIZE_MAX);
}

static curd_status bad_capacity_too_small(curd_device *d, curd_buffer a,
                                          curd_buffer b, curd_buffer other,
                                          unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    return curd_buffer_download_range(d, a, 0, 100, dst, 99);
}

static curd_status bad_null_source(curd_device *d, curd_buffer a, curd_buffer b,
                                   curd_buffer other, unsigned char *src,
                                   unsigned char *dst)
{
    (void)b, (void)other, (void)src, (void)dst;
    return curd_buffer_upload_at(d, a, 0, NULL, 1);
}

static curd_status bad_null_destination(curd_device *d, curd_buffer a,
                                        curd_buffer b, curd_buffer other,
                                        unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)src, (void)dst;
    return curd_buffer_download_range(d, a, 0, 1, NULL, 1);
}

static curd_status bad_stale_handle(curd_device *d, curd_buffer a,
                                    curd_buffer b, curd_buffer other,
                                    unsigned char *src, unsigned char *dst)
{
    (void)a, (void)b, (void)other, (void)dst;
    curd_buffer gone = alloc_ok(d, 64);
    g_assert_cmpint(curd_buffer_free(d, gone), ==, CURD_OK);
    return curd_buffer_upload_at(d, gone, 0, src, 64);
}

static curd_status bad_other_device_handle(curd_device *d, curd_buffer a,
                                           curd_buffer b, curd_buffer other,
                                           unsigned char *src,
                                           unsigned char *dst)
{
    (void)a, (void)b, (void)dst;
    return curd_buffer_upload_at(d, other, 0, src, 64);
}

static curd_status bad_batch_last_item_past_end(curd_device *d, curd_buffer a,
                                                curd_buffer b, curd_buffer other,
                                                unsigned char *src,
                                                unsigned char *dst)
{
    (void)other, (void)dst;
    curd_upload items[4] = {{a, 0, src, 100},
                            {b, 0, src + 100, BAD_LEN},
                            {a, 100, src + 200, 0},
                            {b, BAD_LEN - 5, src + 300, 6}};
    return curd_upload_batch(d, items, 4);
}

static curd_status bad_batch_with_a_stale_item(curd_device *d, curd_buffer a,
                                               curd_buffer b, curd_buffer other,
                                               unsigned char *src,
                                               unsigned char *dst)
{
    (void)src;
    curd_download items[3] = {{a, 0, 100, dst, 100},
                              {other, 0, 100, dst + 100, 100},
                              {b, 0, 100, dst + 200, 100}};
    return curd_download_batch(d, items, 3);
}

static curd_status bad_batch_capacity_in_the_middle(curd_device *d,
                                                    curd_buffer a, curd_buffer b,
                                                    curd_buffer other,
                                                    unsigned char *src,
                                                    unsigned char *dst)
{
    (void)other, (void)src;
    curd_download items[3] = {{a, 0, 100, dst, 100},
                              {b, 0, 100, dst + 100, 50},
                              {b, 100, 100, dst + 200, 100}};
    return curd_download_batch(d, items, 3);
}

static curd_status bad_batch_overlapping_destinations(curd_device *d,
                                                      curd_buffer a,
                                                      curd_buffer b,
                                                      curd_buffer other,
                                                      unsigned char *src,
                                                      unsigned char *dst)
{
    (void)other, (void)src;
    curd_download items[2] = {{a, 0, 100, dst, 100},
                              {b, 0, 100, dst + 99, 100}};
    return curd_download_batch(d, items, 2);
}

static curd_status bad_chained_batch_last_item_past_end(curd_device *d,
                                                        curd_buffer a,
                                                        curd_buffer b,
                                                        curd_buffer other,
                                                        unsigned char *src,
                                                        unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    /* Each item continues the one before, on the device and in dst. */
    curd_download items[3] = {{a, 0, 2000, dst, 2000},
                              {a, 2000, 2000, dst + 2000, 2000},
                              {a, 4000, 200, dst + 4000, 200}};
    return curd_download_batch(d, items, 3);
}

static curd_status bad_chained_batch_of_a_foreign_buffer(curd_device *d,
                                                         curd_buffer a,
                                                         curd_buffer b,
                                                         curd_buffer other,
                                                         unsigned char *src,
                                                         unsigned char *dst)
{
    (void)a, (void)b, (void)dst;
    curd_upload items[2] = {{other, 0, src, 100}, {other, 100, src + 100, 100}};
    return curd_upload_batch(d, items, 2);
}

static curd_status bad_batch_null_items(curd_device *d, curd_buffer a,
                                        curd_buffer b, curd_buffer other,
                                        unsigned char *src, unsigned char *dst)
{
    (void)a, (void)b, (void)other, (void)src, (void)dst;
    return curd_upload_batch(d, NULL, 3);
}

static curd_status bad_batch_overflowing_item(curd_device *d, curd_buffer a,
                                              curd_buffer b, curd_buffer other,
                                              unsigned char *src,
                                              unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    curd_upload items[2] = {{a, 0, src, 10}, {a, SIZE_MAX, src, 1}};
    return curd_upload_batch(d, items, 2);
}

static curd_status bad_fill_past_end(curd_device *d, curd_buffer a,
                                     curd_buffer b, curd_buffer other,
                                     unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)src, (void)dst;
    return curd_buffer_fill(d, a, 1, BAD_LEN, 0xFF);
}

static curd_status bad_async_past_end(curd_device *d, curd_buffer a,
                                      curd_buffer b, curd_buffer other,
                                      unsigned char *src, unsigned char *dst)
{
    (void)b, (void)other, (void)dst;
    return curd_buffer_upload_async(d, a, BAD_LEN, src, 1);
}

static curd_status bad_async_download_without_out(curd_device *d,
                                                  curd_buffer a, curd_buffer b,
                                                  curd_buffer other,
                                                  unsigned char *src,
                                                  unsigned char *dst)
{
    (void)b, (void)other, (void)src;
    return curd_buffer_download_async(d, a, 0, dst, BAD_LEN, NULL);
}

static const bad_case bad_cases[] = {
    {"upload of the wrong length", CURD_E_RANGE, bad_upload_wrong_length,
     "curd_buffer_upload: byte_len is 4095"},
    {"download of the wrong length", CURD_E_RANGE, bad_download_wrong_length,
     "curd_buffer_download [0, 4097)"},
    {"upload of SIZE_MAX bytes", CURD_E_RANGE, bad_upload_of_size_max,
     "curd_buffer_upload: byte_len is 18446744073709551615 but the buffer"
     " holds 4096"},
    {"download of SIZE_MAX bytes", CURD_E_RANGE, bad_download_of_size_max,
     "curd_buffer_download: byte_len is 18446744073709551615 but the buffer"
     " holds 4096"},
    {"offset past the end", CURD_E_RANGE, bad_offset_past_end,
     "curd_buffer_upload_at [4097, 4097)"},
    {"range past the end", CURD_E_RANGE, bad_range_past_end,
     "curd_buffer_upload_at [10, 4097)"},
    {"overflowing length", CURD_E_OVERFLOW, bad_overflowing_length,
     "curd_buffer_download_range at offset 18446744073709551614"},
    {"capacity too small", CURD_E_RANGE, bad_capacity_too_small,
     "curd_buffer_download_range: 100 bytes asked for"},
    {"NULL source", CURD_E_INVALID_ARGUMENT, bad_null_source,
     "curd_buffer_upload_at: src is NULL"},
    {"NULL destination", CURD_E_INVALID_ARGUMENT, bad_null_destination,
     "curd_buffer_download_range: dst is NULL"},
    {"stale handle", CURD_E_STALE_HANDLE, bad_stale_handle,
     "curd_buffer_upload_at: curd_buffer 0x"},
    {"another device's handle", CURD_E_STALE_HANDLE, bad_other_device_handle,
     "curd_buffer_upload_at: curd_buffer 0x"},
    {"batch whose last item passes the end", CURD_E_RANGE,
     bad_batch_last_item_past_end, "curd_upload_batch item 3 [4091, 4097)"},
    {"batch with a foreign item", CURD_E_STALE_HANDLE,
     bad_batch_with_a_stale_item, "curd_download_batch item 1: curd_buffer 0x"},
    {"batch with a small capacity in the middle", CURD_E_RANGE,
     bad_batch_capacity_in_the_middle,
     "curd_download_batch item 1: 100 bytes asked for"},
    {"batch with overlapping destinations", CURD_E_INVALID_ARGUMENT,
     bad_batch_overlapping_destinations,
     "curd_download_batch: the destinations of items 0 and 1 overlap"},
    {"chained batch whose last item passes the end", CURD_E_RANGE,
     bad_chained_batch_last_item_past_end,
     "curd_download_batch item 2 [4000, 4200)"},
    {"chained batch of another device's buffer", CURD_E_STALE_HANDLE,
     bad_chained_batch_of_a_foreign_buffer,
     "curd_upload_batch item 0: curd_buffer 0x"},
    {"batch of NULL items", CURD_E_INVALID_ARGUMENT, bad_batch_null_items,
     "curd_upload_batch: items is NULL"},
    {"batch with an overflowing item", CURD_E_OVERFLOW,
     bad_batch_overflowing_item,
     "curd_upload_batch item 1 at offset 18446744073709551615"},
    {"fill past the end", CURD_E_RANGE, bad_fill_past_end,
     "curd_buffer_fill [1, 4097)"},
    {"asynchronous upload past the end", CURD_E_RANGE, bad_async_past_end,
     "curd_buffer_upload_async [4096, 4097)"},
    {"asynchronous download without out_pending", CURD_E_INVALID_ARGUMENT,
     bad_async_download_without_out,
     "curd_buffer_download_async: out_pending is NULL"},
};

static void test_bad_input_is_a_typed_error_with_nothing_moved(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device *elsewhere = curd_test_gpu_open();
    g_assert_nonnull(elsewhere);
    curd_buffer a = alloc_ok(device, BAD_LEN);
    curd_buffer b = alloc_ok(device, BAD_LEN);
    curd_buffer other = alloc_ok(elsewhere, BAD_LEN);
    unsigned char *a_bytes = g_malloc(BAD_LEN), *b_bytes = g_malloc(BAD_LEN);
    unsigned char *src = g_malloc(2 * BAD_LEN), *dst = g_malloc(2 * BAD_LEN);
    unsigned char *src_copy = g_malloc(2 * BAD_LEN);
    unsigned char *poison = g_malloc(2 * BAD_LEN);
    curd_test_fill_random(a_bytes, BAD_LEN);
    curd_test_fill_random(b_bytes, BAD_LEN);
    g_assert_cmpint(curd_buffer_upload(device, a, a_bytes, BAD_LEN), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload(device, b, b_bytes, BAD_LEN), ==, CURD_OK);
    curd_test_poison(poison, 2 * BAD_LEN);
    for (size_t i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        const bad_case *c = &bad_cases[i];
        curd_test_fill_random(src, 2 * BAD_LEN);
        memcpy(src_copy, src, 2 * BAD_LEN);
        curd_test_poison(dst, 2 * BAD_LEN);
        transfer_test_snapshot before = transfer_test_take(device);
        curd_status status = c->run(device, a, b, other, src, dst);
        if (status != c->expected)
            g_error("%s: got %s, expected %s (%s)", c->name,
                    curd_status_name(status), curd_status_name(c->expected),
                    curd_last_error());
        g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
        if (strstr(curd_last_error(), c->says) == NULL)
            g_error("%s: the error does not say \"%s\": %s", c->name, c->says,
                    curd_last_error());
        transfer_test_snapshot after = transfer_test_take(device);
        /* The stale-handle case allocates and frees a helper buffer. */
        if (c->run == bad_stale_handle) {
            before.resident_bytes = after.resident_bytes;
            before.resident_buffers = after.resident_buffers;
        }
        assert_snapshot_equal(after, before);
        assert_same_bytes(src, src_copy, 2 * BAD_LEN);
        assert_same_bytes(dst, poison, 2 * BAD_LEN);
        assert_buffer_holds(device, a, a_bytes, BAD_LEN);
        assert_buffer_holds(device, b, b_bytes, BAD_LEN);
    }
    g_free(a_bytes);
    g_free(b_bytes);
    g_free(src);
    g_free(dst);
    g_free(src_copy);
    g_free(poison);
    g_assert_cmpint(curd_device_close(elsewhere), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Registration and asynchronous uploads
 * ---------------------------------------------------------------------- */

static void test_host_register_refuses_overlaps_and_unknown_pointers(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    if (!can_register(device)) {
        g_test_skip("the driver has no cuMemHostRegister");
        curd_device_close(device);
        return;
    }
    /* Page-aligned, page-sized ranges: the driver locks whole pages, and
     * two registrations that share a page may be refused by it. */
    void *aligned = NULL;
    g_assert_cmpint(posix_memalign(&aligned, 65536, 1u << 20), ==, 0);
    unsigned char *memory = aligned;
    g_assert_cmpint(curd_host_register(device, memory + 4096, 8192), ==,
                    CURD_OK);
    g_assert_cmpint(curd_host_register(device, memory, 4097), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_register(device, memory + 12287, 10), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_register(device, memory + 4096, 8192), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_register(device, NULL, 10), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_register(device, memory, 0), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_register(device, (void *)(UINTPTR_MAX - 4), 10),
                    ==, CURD_E_OVERFLOW);
    /* Neighbours on both sides are fine. */
    g_assert_cmpint(curd_host_register(device, memory, 4096), ==, CURD_OK);
    g_assert_cmpint(curd_host_register(device, memory + 12288, 4096), ==,
                    CURD_OK);
    g_assert_cmpint(curd_host_unregister(device, memory + 4097), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_unregister(device, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_unregister(device, memory + 4096), ==, CURD_OK);
    g_assert_cmpint(curd_host_unregister(device, memory + 4096), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_host_unregister(device, memory), ==, CURD_OK);
    /* One left registered: close unregisters it. */
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    free(memory);
}

static void async_round(curd_device *device, bool registered)
{
    const size_t len = (4u << 20) + 11u;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *src = g_malloc(len);
    unsigned char *dst = g_malloc(len);
    transfer_test_snapshot before, after;
    curd_test_fill_random(src, len);
    if (registered)
        g_assert_cmpint(curd_host_register(device, src, len), ==, CURD_OK);
    before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 0, src, len / 2),
                    ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, len / 2,
                                             src + len / 2, len - len / 2),
                    ==, CURD_OK);
    after = transfer_test_take(device);
    g_assert_cmpuint(after.h2d_bytes - before.h2d_bytes, ==, len);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 2);
    g_assert_cmpuint(after.fences, ==, before.fences);
    /* A download before the sync is ordered after the pending uploads. */
    curd_test_poison(dst, len);
    g_assert_cmpint(curd_buffer_download(device, buffer, dst, len), ==, CURD_OK);
    assert_same_bytes(dst, src, len);
    before = transfer_test_take(device);
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    after = transfer_test_take(device);
    g_assert_cmpuint(after.fences - before.fences, ==, 1);
    /* Nothing pending: no fence. */
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    assert_snapshot_equal(transfer_test_take(device), after);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    if (registered)
        g_assert_cmpint(curd_host_unregister(device, src), ==, CURD_OK);
    g_free(src);
    g_free(dst);
}

static void test_async_uploads_complete_at_sync_and_order_later_transfers(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    if (can_register(device))
        async_round(device, true);
    async_round(device, false);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_fill_after_a_pending_async_upload_lands_last(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t len = 1u << 20;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *src = g_malloc(len);
    unsigned char *model = g_malloc(len);
    curd_test_fill_random(src, len);
    memcpy(model, src, len);
    memset(model + 1000, 0x3C, 5000);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 0, src, len), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_fill(device, buffer, 1000, 5000, 0x3C), ==,
                    CURD_OK);
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    assert_buffer_holds(device, buffer, model, len);
    g_free(src);
    g_free(model);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Threads
 * ---------------------------------------------------------------------- */

typedef struct worker {
    curd_device *device;
    size_t len;
    unsigned char *src;
    unsigned char *dst;
    int failures;
} worker;

static gpointer worker_run(gpointer data)
{
    worker *w = data;
    curd_buffer buffer = {0};
    if (curd_buffer_alloc(w->device, w->len, &buffer) != CURD_OK)
        return GINT_TO_POINTER(1);
    for (int round = 0; round < 10; round++) {
        memset(w->dst, round, w->len);
        if (curd_buffer_upload(w->device, buffer, w->src, w->len) != CURD_OK
            || curd_buffer_download(w->device, buffer, w->dst, w->len) != CURD_OK
            || memcmp(w->src, w->dst, w->len) != 0)
            w->failures++;
    }
    if (curd_buffer_free(w->device, buffer) != CURD_OK)
        w->failures++;
    return GINT_TO_POINTER(w->failures);
}

/* Runs worker_run on one thread per length at once, each over its own
 * random bytes, and asserts that none failed. */
static void round_trips_on_threads(curd_device *device, const size_t *lens,
                                   size_t count)
{
    worker *workers = g_new0(worker, count);
    GThread **threads = g_new0(GThread *, count);
    for (size_t i = 0; i < count; i++) {
        workers[i].device = device;
        workers[i].len = lens[i];
        workers[i].src = g_malloc(lens[i]);
        workers[i].dst = g_malloc(lens[i]);
        curd_test_fill_random(workers[i].src, lens[i]);
    }
    for (size_t i = 0; i < count; i++)
        threads[i] = g_thread_new("worker", worker_run, &workers[i]);
    for (size_t i = 0; i < count; i++)
        g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(threads[i])), ==, 0);
    for (size_t i = 0; i < count; i++) {
        g_free(workers[i].src);
        g_free(workers[i].dst);
    }
    g_free(workers);
    g_free(threads);
}

static void test_round_trips_from_many_threads_at_once(void)
{
    curd_device *device = curd_test_gpu_open();
    size_t lens[6];
    if (device == NULL)
        return;
    for (size_t i = 0; i < G_N_ELEMENTS(lens); i++)
        lens[i] = i % 2 ? (3u << 20) + i : 4096u * (i + 1);
    round_trips_on_threads(device, lens, G_N_ELEMENTS(lens));
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Uploads that stage at least CURD_UPLOAD_GROWTH_MIN add copy threads for
 * their own time (lib/transfer/copy_team.h, curdi_copy_team_grow): set low here, so
 * that every upload of a few MiB grows the team (where the host has cores
 * to spare: the GPU machine, not a two-core runner), from one thread and
 * from several at once, one growth at a time. A device reads the tuning
 * from the environment when it opens, so this runs in a process of its
 * own that sets it before any thread exists and never unsets it. */
/* Runs the calling test again in a process of its own, where the tuning
 * variables it sets are read at the device's open; true in that process.
 * Skips where there is no GPU, as the other tests do. */
static bool in_own_process(void)
{
    if (g_test_subprocess())
        return true;
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return false;
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC,
                           G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
    return false;
}

static void test_uploads_that_add_copy_threads_move_every_byte(void)
{
    curd_device *device;
    size_t lens[3];
    if (!in_own_process())
        return;
    g_setenv("CURD_UPLOAD_GROWTH_MIN", "1m", TRUE);
    g_setenv("CURD_UPLOAD_GROWTH_THREADS", "3", TRUE);
    device = curd_test_gpu_open();
    g_assert_nonnull(device);
    for (int round = 0; round < 6; round++) {
        size_t len = (size_t)g_test_rand_int_range(1 << 20, 9 << 20);
        unsigned char *src = g_malloc(len);
        unsigned char *dst = g_malloc(len);
        curd_buffer buffer = alloc_ok(device, len);
        size_t offset = (size_t)g_test_rand_int_range(0, 1 << 16);
        curd_test_fill_random(src, len);
        curd_test_poison(dst, len);
        /* The whole buffer, then a range at a random offset over it. */
        g_assert_cmpint(curd_buffer_upload(device, buffer, src, len), ==,
                        CURD_OK);
        g_assert_cmpint(curd_buffer_upload_at(device, buffer, offset, src,
                                              len - offset),
                        ==, CURD_OK);
        memmove(src + offset, src, len - offset);
        g_assert_cmpint(curd_buffer_download(device, buffer, dst, len), ==,
                        CURD_OK);
        assert_same_bytes(dst, src, len);
        g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
        g_free(src);
        g_free(dst);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(lens); i++)
        lens[i] = (2u << 20) + (size_t)g_test_rand_int_range(0, 1 << 20);
    round_trips_on_threads(device, lens, G_N_ELEMENTS(lens));
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* With touching on (CURD_TOUCH_DOWNLOAD_MAX), scattered downloads into
 * malloc memory, 64 pieces at one stride and pieces of random lengths at
 * random offsets, land every byte where a host model puts it. */
static void test_downloads_that_touch_their_copy_out_move_every_byte(void)
{
    curd_device *device;
    if (!in_own_process())
        return;
    g_setenv("CURD_TOUCH_DOWNLOAD_MAX", "1m", TRUE);
    device = curd_test_gpu_open();
    g_assert_nonnull(device);
    enum { PIECES = 64, STRIDE = 8192, BUFFER = PIECES * STRIDE };
    curd_buffer buffer = alloc_ok(device, BUFFER);
    unsigned char *src = g_malloc(BUFFER);
    curd_test_fill_random(src, BUFFER);
    g_assert_cmpint(curd_buffer_upload(device, buffer, src, BUFFER), ==,
                    CURD_OK);
    for (int round = 0; round < 8; round++) {
        curd_download items[PIECES];
        unsigned char *dst = g_malloc(BUFFER);
        unsigned char *expected = g_malloc(BUFFER);
        size_t at = 0;
        curd_test_poison(dst, BUFFER);
        memcpy(expected, dst, BUFFER);
        for (size_t i = 0; i < PIECES; i++) {
            /* Even rounds: 4 KiB at each 8 KiB; odd ones: random. */
            size_t len = round % 2 == 0
                             ? 4096
                             : (size_t)g_test_rand_int_range(1, 8193);
            size_t offset = round % 2 == 0
                                ? i * STRIDE
                                : (size_t)g_test_rand_int_range(
                                      0, BUFFER - (int)len + 1);
            items[i] = (curd_download){.buffer = buffer,
                                       .offset = offset,
                                       .byte_len = len,
                                       .dst = dst + at,
                                       .dst_capacity = len};
            memcpy(expected + at, src + offset, len);
            at += len;
        }
        g_assert_cmpint(curd_download_batch(device, items, PIECES), ==,
                        CURD_OK);
        assert_same_bytes(dst, expected, BUFFER);
        g_free(dst);
        g_free(expected);
    }
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(src);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static const transfer_test_case cases[] = {
    {"whole-buffer-round-trips-at-many-sizes",
     test_whole_buffer_round_trips_at_many_sizes},
    {"registered-memory-round-trips-in-one-dma-each-way",
     test_registered_memory_round_trips_in_one_dma_each_way},
    {"ranges-at-random-offsets-match-a-host-model",
     test_ranges_at_random_offsets_match_a_host_model},
    {"batches-match-a-model-with-one-fence-each",
     test_batches_match_a_model_with_one_fence_each},
    {"large-batches-pipeline-across-staging-chunks",
     test_large_batches_pipeline_across_staging_chunks},
    {"sixty-four-adjacent-4k-reads-are-one-dma-and-one-fence",
     test_sixty_four_adjacent_4k_reads_are_one_dma_and_one_fence},
    {"overlapping-upload-items-apply-in-order",
     test_overlapping_upload_items_apply_in_order},
    {"fill-and-clear-use-device-memset-and-upload-nothing",
     test_fill_and_clear_use_device_memset_and_upload_nothing},
    {"zero-length-transfers-cost-nothing",
     test_zero_length_transfers_cost_nothing},
    {"bad-input-is-a-typed-error-with-nothing-moved",
     test_bad_input_is_a_typed_error_with_nothing_moved},
    {"host-register-refuses-overlaps-and-unknown-pointers",
     test_host_register_refuses_overlaps_and_unknown_pointers},
    {"async-uploads-complete-at-sync-and-order-later-transfers",
     test_async_uploads_complete_at_sync_and_order_later_transfers},
    {"fill-after-a-pending-async-upload-lands-last",
     test_fill_after_a_pending_async_upload_lands_last},
    {"round-trips-from-many-threads-at-once",
     test_round_trips_from_many_threads_at_once},
    {"uploads-that-add-copy-threads-move-every-byte",
     test_uploads_that_add_copy_threads_move_every_byte},
    {"downloads-that-touch-their-copy-out-move-every-byte",
     test_downloads_that_touch_their_copy_out_move_every_byte},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "transfer", cases,
                              G_N_ELEMENTS(cases));
}
