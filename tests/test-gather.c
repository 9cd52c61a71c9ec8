/* test-gather.c - scattered batches through both ways the transfer engine
 * moves them: one DMA per span, and the device's gather and scatter
 * kernels with one launch per chunk (lib/transfer/gather.cu), each forced by the test
 * switch CURD_TRANSFER_PATH (read when the device opens); plus the
 * planner's own choice between them and the engine's tunables from the
 * environment.
 *
 * Every batch is random (many sizes, several buffers, adjacent,
 * overlapping and scattered ranges); outputs are poisoned first, and every
 * byte is compared with a host model that applies the items in order
 * (the later of overlapping uploads wins). The counters show which way
 * the bytes went: a gathered chunk is one operation across the bus (one
 * launch) whatever its spans. Each test opens device 0 or skips with the
 * reason; its stand-in twin test-gather-fake (tests/README.md) runs them
 * on the stand-in driver, which runs the kernels block by block. */
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "memory/landing.h"
#include "support/curd-test.h"
#include "transfer-test.h"

#define BUFFERS 4

static curd_buffer alloc_ok(curd_device *device, size_t len)
{
    curd_buffer buffer = {0};
    g_assert_cmpint(curd_buffer_alloc(device, len, &buffer), ==, CURD_OK);
    return buffer;
}

/* Device 0, opened with the variable name set to value (NULL: unset),
 * where its driver can register host memory; NULL otherwise, the test
 * then skipped (or, with no GPU, skipped by curd_test_gpu_open). */
static curd_device *open_registering(const char *name, const char *value)
{
    curd_device *device = transfer_test_open_with(name, value);
    if (device == NULL)
        return NULL;
    if ((curd_test_device_info(device).capabilities & CURD_CAP_HOST_REGISTER)
        == 0) {
        g_test_skip("the driver cannot register host memory");
        g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
        return NULL;
    }
    return device;
}

/* Resident buffers of random sizes with random contents, and their host
 * models. */
typedef struct buffers {
    curd_device *device;
    curd_buffer buffer[BUFFERS];
    size_t len[BUFFERS];
    unsigned char *model[BUFFERS];
} buffers;

static void buffers_make(buffers *b, curd_device *device, size_t max_len)
{
    b->device = device;
    for (size_t i = 0; i < BUFFERS; i++) {
        b->len[i] = (size_t)g_test_rand_int_range(1, (gint32)max_len + 1);
        b->buffer[i] = alloc_ok(device, b->len[i]);
        b->model[i] = g_malloc(b->len[i]);
        curd_test_fill_random(b->model[i], b->len[i]);
        g_assert_cmpint(curd_buffer_upload(device, b->buffer[i], b->model[i],
                                           b->len[i]),
                        ==, CURD_OK);
    }
}

static void buffers_check(const buffers *b)
{
    for (size_t i = 0; i < BUFFERS; i++)
        assert_buffer_holds(b->device, b->buffer[i], b->model[i], b->len[i]);
}

static void buffers_free(buffers *b)
{
    for (size_t i = 0; i < BUFFERS; i++) {
        g_assert_cmpint(curd_buffer_free(b->device, b->buffer[i]), ==, CURD_OK);
        g_free(b->model[i]);
    }
}

/* A batch's ranges: item i is [offset[i], + len[i]) of buffer which[i]. */
typedef struct ranges {
    size_t count;
    size_t *which;
    size_t *offset;
    size_t *len;
    curd_buffer *item_buffer;
    size_t total;
} ranges;

/* A length from a few scales, so the kernels' byte, word and 16-byte
 * paths, tiles cut mid-piece and pieces spanning tiles all occur. */
static size_t random_len(size_t room, size_t max_len)
{
    size_t limit = room < max_len ? room : max_len;
    size_t len;
    if (limit == 0)
        return 0;
    switch (g_test_rand_int_range(0, 5)) {
    case 0:
        len = (size_t)g_test_rand_int_range(1, 17);
        break;
    case 1:
        len = (size_t)g_test_rand_int_range(1, 600);
        break;
    case 2:
        len = 4096u * (size_t)g_test_rand_int_range(1, 3);
        break;
    case 3:
        len = (size_t)g_test_rand_int_range(1, 20000);
        break;
    default:
        len = (size_t)g_test_rand_int_range(1, (gint32)max_len + 1);
        break;
    }
    if (len > limit)
        len = limit;
    if (g_test_rand_int_range(0, 12) == 0)
        len = 0;
    return len;
}

/* Runs of adjacent, overlapping or scattered ranges over the buffers. */
static void ranges_make(ranges *r, const buffers *b, size_t count,
                        size_t max_len)
{
    r->count = count;
    r->which = g_new(size_t, count);
    r->offset = g_new(size_t, count);
    r->len = g_new(size_t, count);
    r->item_buffer = g_new(curd_buffer, count);
    r->total = 0;
    for (size_t i = 0; i < count;) {
        size_t which = (size_t)g_test_rand_int_range(0, BUFFERS);
        size_t run = (size_t)g_test_rand_int_range(1, 6);
        int kind = g_test_rand_int_range(0, 4);
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)b->len[which] + 1);
        for (size_t k = 0; k < run && i < count; k++, i++) {
            size_t len = random_len(b->len[which] - offset, max_len);
            r->which[i] = which;
            r->offset[i] = offset;
            r->len[i] = len;
            r->item_buffer[i] = b->buffer[which];
            r->total += len;
            if (kind == 0)
                offset += len;
            else if (kind == 1 && len > 0)
                offset += (size_t)g_test_rand_int_range(0, (gint32)len);
            else
                offset = (size_t)g_test_rand_int_range(0, (gint32)b->len[which] + 1);
            if (offset > b->len[which])
                offset = b->len[which];
        }
    }
}

static void ranges_free(ranges *r)
{
    g_free(r->which);
    g_free(r->offset);
    g_free(r->len);
    g_free(r->item_buffer);
}

/* What a round must show in the counters, by the way it was moved. */
typedef enum expect {
    /* One DMA per fused span, fewer where spans of one length at one
     * stride join into one strided DMA (the ranges-at-one-stride tests
     * count those exactly). */
    EXPECT_DMA_PER_SPAN,
    EXPECT_ONE_GATHER,     /* one DMA for the whole batch (one chunk) */
    EXPECT_ANY             /* the planner's choice */
} expect;

static void check_counts(const transfer_test_snapshot *before,
                         const transfer_test_snapshot *after, bool upload,
                         uint64_t moved, size_t spans, expect how)
{
    uint64_t bytes = upload ? after->h2d_bytes - before->h2d_bytes
                            : after->d2h_bytes - before->d2h_bytes;
    uint64_t ops = after->copy_ops - before->copy_ops;
    g_assert_cmpuint(bytes, ==, moved);
    g_assert_cmpuint(after->fences - before->fences, ==, moved > 0 ? 1 : 0);
    if (moved == 0)
        g_assert_cmpuint(ops, ==, 0);
    else if (how == EXPECT_DMA_PER_SPAN) {
        g_assert_cmpuint(ops, >=, 1);
        g_assert_cmpuint(ops, <=, spans);
    }
    else if (how == EXPECT_ONE_GATHER)
        g_assert_cmpuint(ops, ==, 1);
    /* Staging, pinned and on the device, went back to the pools. */
    g_assert_cmpuint(after->pinned_live_bytes, ==, before->pinned_live_bytes);
    g_assert_cmpuint(after->device_live_bytes, ==, before->device_live_bytes);
}

/* One upload batch and one download batch of the same ranges, from and
 * into malloc memory (an arena with random gaps, poisoned for the
 * download), every byte checked. */
static void scattered_round(curd_device *device, size_t count, size_t max_buffer,
                            size_t max_len, expect how)
{
    buffers b;
    ranges r;
    size_t spans;
    uint64_t moved;
    size_t *at;
    size_t arena_len = 0;
    unsigned char *arena, *expected;
    curd_upload *ups = g_new(curd_upload, count);
    curd_download *downs = g_new(curd_download, count);
    transfer_test_snapshot before, after;

    buffers_make(&b, device, max_buffer);
    ranges_make(&r, &b, count, max_len);
    moved = transfer_test_union(b.buffer, BUFFERS, r.item_buffer, r.offset,
                                r.len, count, &spans);
    at = g_new(size_t, count);
    for (size_t i = 0; i < count; i++) {
        arena_len += (size_t)g_test_rand_int_range(0, 40);
        at[i] = arena_len;
        arena_len += r.len[i];
    }
    arena = g_malloc(arena_len + 1);
    expected = g_malloc(arena_len + 1);

    curd_test_fill_random(arena, arena_len + 1);
    for (size_t i = 0; i < count; i++) {
        ups[i] = (curd_upload){r.item_buffer[i], r.offset[i],
                               r.len[i] ? arena + at[i] : NULL, r.len[i]};
        memcpy(b.model[r.which[i]] + r.offset[i], arena + at[i], r.len[i]);
    }
    memcpy(expected, arena, arena_len + 1);
    before = transfer_test_take(device);
    g_assert_cmpint(curd_upload_batch(device, ups, count), ==, CURD_OK);
    after = transfer_test_take(device);
    check_counts(&before, &after, true, moved, spans, how);
    /* Sources are never written. */
    assert_same_bytes(arena, expected, arena_len + 1);
    buffers_check(&b);

    curd_test_poison(arena, arena_len + 1);
    memcpy(expected, arena, arena_len + 1);
    for (size_t i = 0; i < count; i++) {
        downs[i] = (curd_download){r.item_buffer[i], r.offset[i], r.len[i],
                                   r.len[i] ? arena + at[i] : NULL, r.len[i]};
        memcpy(expected + at[i], b.model[r.which[i]] + r.offset[i], r.len[i]);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, downs, count), ==, CURD_OK);
    after = transfer_test_take(device);
    check_counts(&before, &after, false, moved, spans, how);
    /* The named bytes arrived; the gaps between them kept their poison. */
    assert_same_bytes(arena, expected, arena_len + 1);
    /* Downloads never write a buffer. */
    buffers_check(&b);

    buffers_free(&b);
    ranges_free(&r);
    g_free(at);
    g_free(arena);
    g_free(expected);
    g_free(ups);
    g_free(downs);
}

/* ------------------------------------------------------------------------
 * Both paths, forced
 * ---------------------------------------------------------------------- */

/* Rounds of batches that move at most 1 MiB (one staging chunk) on a
 * device opened with CURD_TRANSFER_PATH=path. */
static void small_scattered_rounds(const char *path, expect how)
{
    curd_device *device = transfer_test_open_with("CURD_TRANSFER_PATH", path);
    if (device == NULL)
        return;
    for (int round = 0; round < 30; round++)
        scattered_round(device, (size_t)g_test_rand_int_range(1, 60),
                        64 * 1024, 20000, how);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_random_scattered_batches_match_the_model_through_dmas(void)
{
    small_scattered_rounds("dma", EXPECT_DMA_PER_SPAN);
}

static void test_random_scattered_batches_match_the_model_through_the_kernels(void)
{
    /* One DMA for every span of the chunk, however many. */
    small_scattered_rounds("gather", EXPECT_ONE_GATHER);
}

static void test_large_gathered_batches_pipeline_across_chunks(void)
{
    curd_device *device =
        transfer_test_open_with("CURD_TRANSFER_PATH", "gather");
    if (device == NULL)
        return;
    /* Several chunks of staging: the copy threads, the slots' events and
     * spans cut at chunk boundaries, all through the kernels. */
    int rounds = CURD_TEST_ON_FAKE ? 2 : 8;
    for (int round = 0; round < rounds; round++)
        scattered_round(device, (size_t)g_test_rand_int_range(20, 120),
                        3u << 20, 1u << 20, EXPECT_ANY);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_more_pieces_than_one_launch_takes(void)
{
    curd_device *device =
        transfer_test_open_with("CURD_TRANSFER_PATH", "gather");
    if (device == NULL)
        return;
    /* Hundreds of tiny scattered ranges: several launches for one chunk,
     * many pieces in one 4 KiB tile, at every alignment. */
    enum { COUNT = 1000, STRIDE = 37 };
    curd_buffer buffer = alloc_ok(device, COUNT * STRIDE);
    unsigned char *model = g_malloc(COUNT * STRIDE);
    unsigned char *src = g_malloc(COUNT * STRIDE);
    unsigned char *dst = g_malloc(COUNT * STRIDE);
    unsigned char *expected = g_malloc(COUNT * STRIDE);
    curd_upload ups[COUNT];
    curd_download downs[COUNT];
    transfer_test_snapshot before, after;
    curd_test_fill_random(model, COUNT * STRIDE);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, COUNT * STRIDE),
                    ==, CURD_OK);
    curd_test_fill_random(src, COUNT * STRIDE);
    curd_test_poison(dst, COUNT * STRIDE);
    memcpy(expected, dst, COUNT * STRIDE);
    for (size_t i = 0; i < COUNT; i++) {
        /* Piece i: 1 to 29 bytes at i * STRIDE + (i % 7), gaps between. */
        size_t offset = i * STRIDE + i % 7;
        size_t len = 1 + (i * 13) % 29;
        ups[i] = (curd_upload){buffer, offset, src + offset, len};
        downs[i] = (curd_download){buffer, offset, len, dst + offset, len};
        memcpy(model + offset, src + offset, len);
        memcpy(expected + offset, model + offset, len);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_upload_batch(device, ups, COUNT), ==, CURD_OK);
    g_assert_cmpint(curd_download_batch(device, downs, COUNT), ==, CURD_OK);
    after = transfer_test_take(device);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 2);
    assert_same_bytes(dst, expected, COUNT * STRIDE);
    assert_buffer_holds(device, buffer, model, COUNT * STRIDE);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(model);
    g_free(src);
    g_free(dst);
    g_free(expected);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_overlapping_gathered_uploads_keep_the_later_item(void)
{
    curd_device *device =
        transfer_test_open_with("CURD_TRANSFER_PATH", "gather");
    if (device == NULL)
        return;
    /* Overlaps inside one span and across chunk boundaries (a span of
     * several MiB), with scattered spans around them. */
    const size_t len = 5u << 20;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *model = g_malloc(len);
    unsigned char *src = g_malloc(len);
    curd_upload items[8];
    curd_test_fill_random(model, len);
    curd_test_fill_random(src, len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, len), ==, CURD_OK);
    items[0] = (curd_upload){buffer, 100, src, 3u << 20};
    items[1] = (curd_upload){buffer, (1u << 20) + 5, src + 7, 2u << 20};
    items[2] = (curd_upload){buffer, 200, src + 11, 50};
    items[3] = (curd_upload){buffer, (4u << 20), src + 13, 4096};
    items[4] = (curd_upload){buffer, (4u << 20) + 8192, src + 17, 4096};
    items[5] = (curd_upload){buffer, (4u << 20) + 10000, src + 19, 9000};
    items[6] = (curd_upload){buffer, (4u << 20) + 12000, src + 23, 100};
    items[7] = (curd_upload){buffer, 150, src + 29, 10};
    for (size_t i = 0; i < G_N_ELEMENTS(items); i++)
        memcpy(model + items[i].offset, items[i].src, items[i].byte_len);
    g_assert_cmpint(curd_upload_batch(device, items, G_N_ELEMENTS(items)), ==,
                    CURD_OK);
    assert_buffer_holds(device, buffer, model, len);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(model);
    g_free(src);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Straight into registered memory
 * ---------------------------------------------------------------------- */

/* Host places taken for staging: blocks of the pinned pool and places in
 * the landing area (a download of one chunk lands there). */
static uint64_t staging_takes(curd_device *device)
{
    curd_stats stats = curd_test_device_stats(device);
    uint64_t landed, declined;
    curdi_landing_counts(device, &landed, &declined);
    return stats.pinned_pool.cache_hits + stats.pinned_pool.cache_misses
           + landed;
}

/* 64 scattered 4 KiB pieces of two buffers, read into (and written from)
 * one registered run laid out as the planner orders them (by buffer
 * handle, then offset): one launch each way, straight between the run
 * and the buffers, no pinned staging at all. Each piece starts at a
 * random point of its 8 KiB: at one stride they would join into rows
 * instead (the ranges-at-one-stride tests below). */
static void test_scattered_pieces_move_straight_to_registered_memory(void)
{
    curd_device *device = open_registering("CURD_TRANSFER_PATH", NULL);
    if (device == NULL)
        return;
    enum { PIECES = 64, PIECE = 4096, STRIDE = 8192 };
    curd_buffer buffer[2] = {alloc_ok(device, PIECES / 2 * STRIDE),
                             alloc_ok(device, PIECES / 2 * STRIDE)};
    unsigned char *model[2] = {g_malloc(PIECES / 2 * STRIDE),
                               g_malloc(PIECES / 2 * STRIDE)};
    unsigned char *host = g_malloc(PIECES * PIECE);
    unsigned char *expected = g_malloc(PIECES * PIECE);
    curd_download downs[PIECES];
    curd_upload ups[PIECES];
    size_t offsets[PIECES];
    transfer_test_snapshot before, after;
    uint64_t acquires;
    for (size_t i = 0; i < PIECES; i++)
        offsets[i] = (i % (PIECES / 2)) * STRIDE
                     + (size_t)g_test_rand_int_range(0, (STRIDE - PIECE) / 64 + 1)
                           * 64u;
    for (int b = 0; b < 2; b++) {
        curd_test_fill_random(model[b], PIECES / 2 * STRIDE);
        g_assert_cmpint(curd_buffer_upload(device, buffer[b], model[b],
                                           PIECES / 2 * STRIDE),
                        ==, CURD_OK);
    }
    g_assert_cmpint(curd_host_register(device, host, PIECES * PIECE), ==,
                    CURD_OK);
    /* The buffer whose handle sorts first takes the first half. */
    size_t first = buffer[0].id < buffer[1].id ? 0 : 1;
    curd_test_poison(host, PIECES * PIECE);
    for (size_t i = 0; i < PIECES; i++) {
        size_t b = i / (PIECES / 2) == 0 ? first : 1 - first;
        size_t offset = offsets[i];
        downs[i] = (curd_download){buffer[b], offset, PIECE, host + i * PIECE,
                                   PIECE};
        memcpy(expected + i * PIECE, model[b] + offset, PIECE);
    }
    before = transfer_test_take(device);
    acquires = staging_takes(device);
    g_assert_cmpint(curd_download_batch(device, downs, PIECES), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(host, expected, PIECES * PIECE);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, PIECES * PIECE);
    g_assert_cmpuint(staging_takes(device), ==, acquires);

    curd_test_fill_random(host, PIECES * PIECE);
    for (size_t i = 0; i < PIECES; i++) {
        size_t b = i / (PIECES / 2) == 0 ? first : 1 - first;
        size_t offset = offsets[i];
        ups[i] = (curd_upload){buffer[b], offset, host + i * PIECE, PIECE};
        memcpy(model[b] + offset, host + i * PIECE, PIECE);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_upload_batch(device, ups, PIECES), ==, CURD_OK);
    after = transfer_test_take(device);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(staging_takes(device), ==, acquires);
    for (int b = 0; b < 2; b++)
        assert_buffer_holds(device, buffer[b], model[b], PIECES / 2 * STRIDE);

    g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);
    for (int b = 0; b < 2; b++) {
        g_assert_cmpint(curd_buffer_free(device, buffer[b]), ==, CURD_OK);
        g_free(model[b]);
    }
    g_free(host);
    g_free(expected);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* count scattered reads of piece bytes, stride apart in one buffer, into
 * malloc memory on device (CURD_TRANSFER_PATH as it opened), every byte
 * compared (the gaps keep their poison); returns the DMAs they took, and
 * the counters before and after. Uneven: every other piece is 64 bytes
 * shorter, so no two neighbours join into rows. */
static uint64_t scattered_reads(curd_device *device, size_t count,
                                size_t piece, size_t stride, bool uneven,
                                transfer_test_snapshot *before,
                                transfer_test_snapshot *after)
{
    curd_buffer buffer = alloc_ok(device, count * stride);
    unsigned char *model = g_malloc(count * stride);
    unsigned char *dst = g_malloc(count * piece);
    unsigned char *expected = g_malloc(count * piece);
    curd_download *items = g_new(curd_download, count);
    curd_test_fill_random(model, count * stride);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, count * stride),
                    ==, CURD_OK);
    curd_test_poison(dst, count * piece);
    memcpy(expected, dst, count * piece);
    for (size_t i = 0; i < count; i++) {
        size_t len = uneven && i % 2 == 1 ? piece - 64 : piece;
        items[i] = (curd_download){buffer, i * stride, len, dst + i * piece,
                                   len};
        memcpy(expected + i * piece, model + i * stride, len);
    }
    *before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, items, count), ==, CURD_OK);
    *after = transfer_test_take(device);
    assert_same_bytes(dst, expected, count * piece);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(items);
    g_free(model);
    g_free(dst);
    g_free(expected);
    return after->copy_ops - before->copy_ops;
}

/* The kernels move a chunk between the spans and page-locked host memory
 * across the bus: a gathered batch takes no device memory, so a device
 * whose pool has space for the buffer and nothing more still gathers. */
static void test_gathering_takes_no_device_memory(void)
{
    enum { PIECES = 96, PIECE = 12 * 1024, STRIDE = 16 * 1024 };
    curd_device_options options;
    curd_device *device;
    transfer_test_snapshot before, after;
    curd_device_options_init(&options);
    /* The 1.5 MiB buffer fits in 2 MiB; a 1 MiB staging chunk would not. */
    options.device_live_limit_bytes = 2u << 20;
    g_setenv("CURD_TRANSFER_PATH", "gather", TRUE);
    device = curd_test_gpu_open_with(&options);
    g_unsetenv("CURD_TRANSFER_PATH");
    if (device == NULL)
        return;
    /* 1.125 MiB through staging: two chunks, one launch each. */
    g_assert_cmpuint(scattered_reads(device, PIECES, PIECE, STRIDE, false,
                                     &before, &after),
                     ==, 2);
    g_assert_cmpuint(after.device_live_bytes, ==, before.device_live_bytes);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

#if CURD_TEST_ON_FAKE
/* A device that cannot reach page-locked host memory at its host address
 * (the stand-in says so under FAKE_CUDA_NO_HOST_POINTER) cannot run the
 * kernels: its scattered batches move one DMA per span, and every byte
 * still arrives. */
static void test_a_device_without_host_access_moves_one_dma_per_span(void)
{
    enum { PIECES = 40, PIECE = 4096, STRIDE = 8192 };
    curd_device *device;
    transfer_test_snapshot before, after;
    g_setenv("FAKE_CUDA_NO_HOST_POINTER", "1", TRUE);
    device = transfer_test_open_with("CURD_TRANSFER_PATH", "gather");
    g_assert_nonnull(device);
    /* Uneven pieces: none join into rows. */
    g_assert_cmpuint(scattered_reads(device, PIECES, PIECE, STRIDE, true,
                                     &before, &after),
                     ==, PIECES);
    g_unsetenv("FAKE_CUDA_NO_HOST_POINTER");
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}
#endif

/* ------------------------------------------------------------------------
 * The planner's choice and the tunables
 * ---------------------------------------------------------------------- */

static void test_the_planner_gathers_many_small_ranges_and_dmas_few(void)
{
    transfer_test_snapshot before, after;
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    /* The defaults (lib/transfer/tuning.h): a DMA each below 4 spans, one
     * gathered launch from 4 spans up. Uneven pieces: none join into
     * rows, which would count once. */
    g_assert_cmpuint(
        scattered_reads(device, 3, 4096, 8192, true, &before, &after), ==, 3);
    g_assert_cmpuint(
        scattered_reads(device, 64, 4096, 8192, true, &before, &after), ==, 1);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);

    /* The crossover moves with CURD_GATHER_MIN_SPANS. */
    device = transfer_test_open_with("CURD_GATHER_MIN_SPANS", "65");
    g_assert_nonnull(device);
    g_assert_cmpuint(
        scattered_reads(device, 64, 4096, 8192, true, &before, &after), ==, 64);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Ranges of one length at one stride move in one strided DMA, however
 * many (a DMA of rows runs as fast as one contiguous copy of the same
 * bytes), with the kernels or without; where the stride breaks, a new
 * DMA starts. */
static void test_ranges_at_one_stride_move_in_one_strided_dma(void)
{
    static const char *const paths[] = {"auto", "dma"};
    transfer_test_snapshot before, after;
    for (size_t p = 0; p < G_N_ELEMENTS(paths); p++) {
        curd_device *device =
            transfer_test_open_with("CURD_TRANSFER_PATH", paths[p]);
        if (device == NULL)
            return;
        g_assert_cmpuint(
            scattered_reads(device, 2, 4096, 8192, false, &before, &after), ==,
            1);
        g_assert_cmpuint(
            scattered_reads(device, 64, 4096, 8192, false, &before, &after),
            ==, 1);
        g_assert_cmpuint(
            scattered_reads(device, 1000, 64, 200, false, &before, &after),
            ==, 1);
        /* Through more than one staging chunk: a DMA of rows each. */
        g_assert_cmpuint(scattered_reads(device, 512, 4096, 12288, false,
                                         &before, &after),
                         ==, 2);
        g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    }
}

/* The same rows between a buffer and registered memory, with a stride of
 * their own on the host: one strided DMA each way straight between the
 * two, and the bytes between the rows keep their poison on the side
 * written (the whole buffer is read back after the upload). */
static void test_ranges_at_one_stride_move_in_one_strided_dma_to_registered(void)
{
    enum { ROWS = 64, ROW = 4096, DEVICE_STRIDE = 8192, HOST_STRIDE = 6144 };
    const size_t device_len = ROWS * DEVICE_STRIDE;
    const size_t host_len = ROWS * HOST_STRIDE;
    curd_device *device = open_registering("CURD_TRANSFER_PATH", NULL);
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, device_len);
    unsigned char *model = g_malloc(device_len);
    unsigned char *host = g_malloc(host_len);
    unsigned char *expected = g_malloc(host_len);
    unsigned char *back = g_malloc(device_len);
    curd_download downs[ROWS];
    curd_upload ups[ROWS];
    transfer_test_snapshot before, after;
    curd_test_fill_random(model, device_len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, device_len), ==,
                    CURD_OK);
    g_assert_cmpint(curd_host_register(device, host, host_len), ==, CURD_OK);

    curd_test_poison(host, host_len);
    memcpy(expected, host, host_len);
    for (size_t i = 0; i < ROWS; i++) {
        downs[i] = (curd_download){buffer, i * DEVICE_STRIDE, ROW,
                                   host + i * HOST_STRIDE, ROW};
        memcpy(expected + i * HOST_STRIDE, model + i * DEVICE_STRIDE, ROW);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, downs, ROWS), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(host, expected, host_len);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, ROWS * ROW);

    curd_test_fill_random(host, host_len);
    for (size_t i = 0; i < ROWS; i++) {
        ups[i] = (curd_upload){buffer, i * DEVICE_STRIDE, host + i * HOST_STRIDE,
                               ROW};
        memcpy(model + i * DEVICE_STRIDE, host + i * HOST_STRIDE, ROW);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_upload_batch(device, ups, ROWS), ==, CURD_OK);
    after = transfer_test_take(device);
    g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 1);
    g_assert_cmpuint(after.h2d_bytes - before.h2d_bytes, ==, ROWS * ROW);
    curd_test_poison(back, device_len);
    g_assert_cmpint(curd_buffer_download(device, buffer, back, device_len), ==,
                    CURD_OK);
    assert_same_bytes(back, model, device_len);

    g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(model);
    g_free(host);
    g_free(expected);
    g_free(back);
}

/* rows downloads of ROW bytes, DEVICE_STRIDE apart from offset 0 of
 * buffer (whose bytes model holds) and HOST_STRIDE apart in host, plus
 * the straggler, when asked, which continues the host side but not the
 * device side; every byte of host compared (the gaps keep their poison).
 * Returns the DMAs the batch took. */
enum { ROW = 4096, DEVICE_STRIDE = 8192, HOST_STRIDE = 4608 };
static uint64_t rows_download(curd_device *device, curd_buffer buffer,
                              const unsigned char *model, size_t rows,
                              bool straggler, unsigned char *host)
{
    const size_t count = rows + (straggler ? 1u : 0u);
    const size_t host_len = count * HOST_STRIDE;
    curd_download *downs = g_new(curd_download, count);
    unsigned char *expected = g_malloc(host_len);
    transfer_test_snapshot before, after;
    curd_test_poison(host, host_len);
    memcpy(expected, host, host_len);
    for (size_t i = 0; i < count; i++) {
        size_t offset = i < rows ? i * DEVICE_STRIDE
                                 : rows * DEVICE_STRIDE + 512;
        downs[i] = (curd_download){buffer, offset, ROW,
                                   host + i * HOST_STRIDE, ROW};
        memcpy(expected + i * HOST_STRIDE, model + offset, ROW);
    }
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, downs, count), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(host, expected, host_len);
    g_assert_cmpuint(after.d2h_bytes - before.d2h_bytes, ==, count * ROW);
    g_free(downs);
    g_free(expected);
    return after.copy_ops - before.copy_ops;
}

/* A batch of rows is checked as one range on each side (lib/transfer/transfer.c).
 * In registered memory it crosses in one strided DMA straight between the
 * two, with no staging; with a straggler that breaks the device stride
 * it is planned item by item, and the engine still joins the rows, the
 * straggler taking a DMA of its own; half registered, all of it is
 * staged, one strided DMA into staging (registering all of it, or none,
 * is what pays). Where the tuning gathers even one DMA
 * (CURD_TRANSFER_PATH=gather, the test switch, or CURD_GATHER_MIN_SPANS=1)
 * the rows go through the kernels, into staging, in one launch.
 * Rows past the buffer's end fail with the sentence of the item that
 * passes it, before anything moved. */
static void test_rows_in_registered_memory_cross_as_one_range(void)
{
    enum { ROWS = 64 };
    static const char *const gathering[][2] = {
        {"CURD_TRANSFER_PATH", "gather"}, {"CURD_GATHER_MIN_SPANS", "1"}};
    /* Space for the straggler after the last row. */
    const size_t device_len = (ROWS + 1) * DEVICE_STRIDE;
    const size_t host_len = (ROWS + 1) * HOST_STRIDE;
    curd_device *device = open_registering("CURD_TRANSFER_PATH", NULL);
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, device_len);
    unsigned char *model = g_malloc(device_len);
    unsigned char *host = g_malloc(host_len);
    unsigned char *poisoned = g_malloc(host_len);
    curd_download downs[ROWS + 1];
    transfer_test_snapshot before, after;
    uint64_t acquires;
    curd_test_fill_random(model, device_len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, device_len), ==,
                    CURD_OK);

    g_assert_cmpint(curd_host_register(device, host, host_len), ==, CURD_OK);
    acquires = staging_takes(device);
    g_assert_cmpuint(rows_download(device, buffer, model, ROWS, false, host),
                     ==, 1);
    g_assert_cmpuint(rows_download(device, buffer, model, ROWS, true, host),
                     ==, 2);
    g_assert_cmpuint(staging_takes(device), ==, acquires);
    g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);

    g_assert_cmpint(curd_host_register(device, host, ROWS / 2 * HOST_STRIDE),
                    ==, CURD_OK);
    g_assert_cmpuint(rows_download(device, buffer, model, ROWS, false, host),
                     ==, 1);
    g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);

    /* Rows whose last one passes the buffer's end by a byte. */
    g_assert_cmpint(curd_host_register(device, host, host_len), ==, CURD_OK);
    curd_test_poison(host, host_len);
    memcpy(poisoned, host, host_len);
    for (size_t i = 0; i < ROWS + 1; i++)
        downs[i] = (curd_download){buffer, i * DEVICE_STRIDE + 4097, ROW,
                                   host + i * HOST_STRIDE, ROW};
    before = transfer_test_take(device);
    g_assert_cmpint(curd_download_batch(device, downs, ROWS + 1), ==,
                    CURD_E_RANGE);
    g_assert_nonnull(strstr(curd_last_error(), "item 64"));
    g_assert_nonnull(strstr(curd_last_error(), "Fix:"));
    after = transfer_test_take(device);
    g_assert_cmpuint(after.copy_ops, ==, before.copy_ops);
    g_assert_cmpuint(after.d2h_bytes, ==, before.d2h_bytes);
    assert_same_bytes(host, poisoned, host_len);
    g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);

    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);

    /* Where the tuning gathers even one DMA: one launch (one operation)
     * into staging. */
    for (size_t t = 0; t < G_N_ELEMENTS(gathering); t++) {
        device = open_registering(gathering[t][0], gathering[t][1]);
        g_assert_nonnull(device);
        buffer = alloc_ok(device, device_len);
        g_assert_cmpint(curd_buffer_upload(device, buffer, model, device_len),
                        ==, CURD_OK);
        g_assert_cmpint(curd_host_register(device, host, host_len), ==,
                        CURD_OK);
        acquires = staging_takes(device);
        g_assert_cmpuint(
            rows_download(device, buffer, model, ROWS, false, host), ==, 1);
        g_assert_cmpuint(staging_takes(device), >, acquires);
        g_assert_cmpint(curd_host_unregister(device, host), ==, CURD_OK);
        g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
        g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    }
    g_free(model);
    g_free(host);
    g_free(poisoned);
}

/* A whole-buffer round trip through malloc memory, every byte checked;
 * returns the DMAs of the download. */
static uint64_t whole_round_trip(curd_device *device, size_t len)
{
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *src = g_malloc(len);
    unsigned char *dst = g_malloc(len);
    transfer_test_snapshot before, after;
    curd_test_fill_random(src, len);
    curd_test_poison(dst, len);
    g_assert_cmpint(curd_buffer_upload(device, buffer, src, len), ==, CURD_OK);
    before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_download(device, buffer, dst, len), ==, CURD_OK);
    after = transfer_test_take(device);
    assert_same_bytes(dst, src, len);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(src);
    g_free(dst);
    return after.copy_ops - before.copy_ops;
}

static void test_the_engine_tunables_come_from_the_environment(void)
{
    static const char *const settings[][2] = {
        {"CURD_CHUNK_MIN_BYTES", "64k"},   {"CURD_CHUNK_MAX_BYTES", "256k"},
        {"CURD_STAGING_SLOTS", "6"},       {"CURD_COPY_THREADS", "3"},
        {"CURD_COPY_SPIN_US", "200"},      {"CURD_COPY_PIECE_BYTES", "16k"},
        {"CURD_COPY_PARALLEL_MIN", "32k"}, {"CURD_STREAMING_UPLOAD_MIN", "0"},
        {"CURD_STREAMING_DOWNLOAD_MIN", "100k"},
    };
    curd_device *device;
    for (size_t i = 0; i < G_N_ELEMENTS(settings); i++)
        g_setenv(settings[i][0], settings[i][1], TRUE);
    device = curd_test_gpu_open();
    for (size_t i = 0; i < G_N_ELEMENTS(settings); i++)
        g_unsetenv(settings[i][0]);
    if (device == NULL)
        return;
    /* 256 KiB in chunks of 64 KiB; 3 MiB + 5 in chunks of 256 KiB through
     * six slots and three polling copy threads. */
    g_assert_cmpuint(whole_round_trip(device, 256 * 1024), ==, 4);
    g_assert_cmpuint(whole_round_trip(device, (3u << 20) + 5u), ==, 13);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);

    /* A value out of range is ignored: the defaults stay (one chunk up to
     * 1 MiB). */
    device = transfer_test_open_with("CURD_CHUNK_MIN_BYTES", "12");
    g_assert_nonnull(device);
    g_assert_cmpuint(whole_round_trip(device, 256 * 1024), ==, 1);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static const transfer_test_case cases[] = {
    {"random-scattered-batches-match-the-model-through-dmas",
     test_random_scattered_batches_match_the_model_through_dmas},
    {"random-scattered-batches-match-the-model-through-the-kernels",
     test_random_scattered_batches_match_the_model_through_the_kernels},
    {"large-gathered-batches-pipeline-across-chunks",
     test_large_gathered_batches_pipeline_across_chunks},
    {"more-pieces-than-one-launch-takes",
     test_more_pieces_than_one_launch_takes},
    {"overlapping-gathered-uploads-keep-the-later-item",
     test_overlapping_gathered_uploads_keep_the_later_item},
    {"scattered-pieces-move-straight-to-registered-memory",
     test_scattered_pieces_move_straight_to_registered_memory},
    {"gathering-takes-no-device-memory",
     test_gathering_takes_no_device_memory},
#if CURD_TEST_ON_FAKE
    {"a-device-without-host-access-moves-one-dma-per-span",
     test_a_device_without_host_access_moves_one_dma_per_span},
#endif
    {"the-planner-gathers-many-small-ranges-and-dmas-few",
     test_the_planner_gathers_many_small_ranges_and_dmas_few},
    {"ranges-at-one-stride-move-in-one-strided-dma",
     test_ranges_at_one_stride_move_in_one_strided_dma},
    {"ranges-at-one-stride-move-in-one-strided-dma-to-registered-memory",
     test_ranges_at_one_stride_move_in_one_strided_dma_to_registered},
    {"rows-in-registered-memory-cross-as-one-range",
     test_rows_in_registered_memory_cross_as_one_range},
    {"the-engine-tunables-come-from-the-environment",
     test_the_engine_tunables_come_from_the_environment},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "gather", cases, G_N_ELEMENTS(cases));
}
