/* test-transfer.c - the transfer plan, the pipelined engine and the copy
 * team, on the CPU.
 *
 * The engine reaches the device only through curdi_engine_ops. Here those
 * ops stand for a device whose "memory" is host memory and whose DMAs are
 * *deferred*: a copy is queued, and runs only when the engine waits on a
 * later mark or finishes. So an engine that refilled a staging slot before
 * waiting for the DMA that reads it, or copied a download out of a slot
 * before its DMA ran, gives wrong bytes here, as it would on a GPU. Every
 * result is compared byte by byte with a reference model that applies the
 * items one after another. Gathered chunks are deferred the same way: the
 * kernel that moves a chunk's pieces between their device bytes and the
 * chunk's host side runs in queue order with the DMAs. The GPU half is
 * test-transfer-gpu.c and test-gather.c. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer-test.h"
#include "transfer/copy_team.h"
#include "transfer/engine.h"
#include "transfer/plan.h"

/* ------------------------------------------------------------------------
 * A deferred-DMA device
 * ---------------------------------------------------------------------- */

/* One queued operation: a DMA, or a gathered chunk's kernel (pieces set:
 * an upload places them from host, a download packs them into it). */
typedef struct fake_dma {
    bool upload;
    uint64_t device_ptr;
    unsigned char *host;
    uint64_t byte_len; /* of each row */
    curdi_engine_piece *pieces;
    size_t piece_count;
    /* A strided DMA's rows (1 for a plain one) and their pitches. */
    uint64_t rows;
    uint64_t device_pitch;
    uint64_t host_pitch;
} fake_dma;

/* The device's largest pitch in the tests that do not set their own: a
 * real device's (CU_DEVICE_ATTRIBUTE_MAX_PITCH). */
#define TEST_MAX_PITCH ((uint64_t)2147483647)

typedef struct fake_device {
    GArray *queue;    /* fake_dma, not yet run */
    size_t ran;       /* entries of queue already run */
    size_t marks[CURDI_PLAN_SLOTS_MAX]; /* queue length at each slot's last mark */
    bool marked[CURDI_PLAN_SLOTS_MAX];
    unsigned finishes;
    unsigned copies;
    unsigned calls;   /* every op, for fault injection */
    unsigned fail_at; /* 0: never */
    unsigned gathers;  /* gathered chunks */
    unsigned strided;  /* strided DMAs (also counted in copies) */
    uint64_t chunk_len; /* the longest a gathered chunk may be */
    uint64_t max_pitch; /* 0: no strided DMAs */
} fake_device;

static void fake_run_kernel(const fake_dma *kernel)
{
    for (size_t i = 0; i < kernel->piece_count; i++) {
        const curdi_engine_piece *piece = &kernel->pieces[i];
        void *device = (void *)(uintptr_t)piece->device_ptr;
        unsigned char *staged = kernel->host + piece->stage_offset;
        if (kernel->upload)
            memcpy(device, staged, (size_t)piece->byte_len);
        else
            memcpy(staged, device, (size_t)piece->byte_len);
    }
}

static void fake_run_until(fake_device *fake, size_t end)
{
    for (; fake->ran < end; fake->ran++) {
        fake_dma *dma = &g_array_index(fake->queue, fake_dma, fake->ran);
        if (dma->pieces != NULL) {
            fake_run_kernel(dma);
            continue;
        }
        for (uint64_t row = 0; row < dma->rows; row++) {
            void *device =
                (void *)(uintptr_t)(dma->device_ptr + row * dma->device_pitch);
            unsigned char *host = dma->host + row * dma->host_pitch;
            if (dma->upload)
                memcpy(device, host, (size_t)dma->byte_len);
            else
                memcpy(host, device, (size_t)dma->byte_len);
        }
    }
}

static curd_status fake_fault(fake_device *fake)
{
    fake->calls++;
    if (fake->fail_at != 0 && fake->calls == fake->fail_at)
        return CURD_E_DRIVER;
    return CURD_OK;
}

static curd_status fake_copy(void *context, bool upload, uint64_t device_ptr,
                             unsigned char *host, uint64_t byte_len)
{
    fake_device *fake = context;
    fake_dma dma = {upload, device_ptr, host, byte_len, NULL, 0, 1, 0, 0};
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    g_assert_cmpuint(byte_len, >, 0);
    g_array_append_val(fake->queue, dma);
    fake->copies++;
    return CURD_OK;
}

/* A strided DMA, checked as the driver checks one: at least two rows, each
 * pitch between the width and the device's largest. */
static curd_status fake_copy_rows(void *context, bool upload,
                                  const curdi_plan_rows *run)
{
    fake_device *fake = context;
    fake_dma dma = {upload, run->device_ptr, (unsigned char *)run->host,
                    run->width, NULL, 0, run->count, run->device_pitch,
                    run->host_pitch};
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    g_assert_cmpuint(run->width, >, 0);
    g_assert_cmpuint(run->count, >=, 2);
    g_assert_cmpuint(run->device_pitch, >=, run->width);
    g_assert_cmpuint(run->host_pitch, >=, run->width);
    g_assert_cmpuint(run->device_pitch, <=, fake->max_pitch);
    g_assert_cmpuint(run->host_pitch, <=, fake->max_pitch);
    g_array_append_val(fake->queue, dma);
    fake->copies++;
    fake->strided++;
    return CURD_OK;
}

/* A gathered chunk: one kernel between the chunk's host side and its
 * pieces, a queued operation (and a fault point) like a DMA. */
static curd_status fake_gathered(void *context, bool upload,
                                 unsigned char *host, uint64_t byte_len,
                                 const curdi_engine_piece *pieces, size_t count)
{
    fake_device *fake = context;
    fake_dma kernel = {upload, 0, host, byte_len, NULL, count, 1, 0, 0};
    uint64_t at = 0;
    g_assert_cmpuint(byte_len, >, 0);
    g_assert_cmpuint(byte_len, <=, fake->chunk_len);
    g_assert_cmpuint(count, >, 0);
    /* Back to back from 0 to byte_len, as the kernels expect. */
    for (size_t i = 0; i < count; i++) {
        g_assert_cmpuint(pieces[i].stage_offset, ==, at);
        g_assert_cmpuint(pieces[i].byte_len, >, 0);
        at += pieces[i].byte_len;
    }
    g_assert_cmpuint(at, ==, byte_len);
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    kernel.pieces = g_memdup2(pieces, count * sizeof *pieces);
    g_array_append_val(fake->queue, kernel);
    fake->gathers++;
    return CURD_OK;
}

static curd_status fake_mark(void *context, unsigned slot)
{
    fake_device *fake = context;
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    g_assert_cmpuint(slot, <, CURDI_PLAN_SLOTS_MAX);
    fake->marks[slot] = fake->queue->len;
    fake->marked[slot] = true;
    return CURD_OK;
}

static curd_status fake_wait(void *context, unsigned slot)
{
    fake_device *fake = context;
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    /* Waiting on a slot never marked would be a hang on a GPU (an event
     * never recorded completes at once, so worse: a silent race). */
    g_assert_true(fake->marked[slot]);
    fake_run_until(fake, fake->marks[slot]);
    return CURD_OK;
}

static curd_status fake_finish(void *context)
{
    fake_device *fake = context;
    if (fake_fault(fake) != CURD_OK)
        return CURD_E_DRIVER;
    fake_run_until(fake, fake->queue->len);
    fake->finishes++;
    return CURD_OK;
}

static void fake_init(fake_device *fake)
{
    memset(fake, 0, sizeof *fake);
    fake->queue = g_array_new(FALSE, FALSE, sizeof(fake_dma));
    fake->max_pitch = TEST_MAX_PITCH;
}

static void fake_fini(fake_device *fake)
{
    for (size_t i = 0; i < fake->queue->len; i++)
        g_free(g_array_index(fake->queue, fake_dma, i).pieces);
    g_array_free(fake->queue, TRUE);
}

/* ------------------------------------------------------------------------
 * A random batch and its reference
 * ---------------------------------------------------------------------- */

#define BUFFER_COUNT 4
#define ARENA_BYTES ((size_t)64 * 1024)

typedef struct scenario {
    unsigned char *buffers[BUFFER_COUNT]; /* the "device" */
    size_t buffer_len[BUFFER_COUNT];
    unsigned char *reference[BUFFER_COUNT];
    unsigned char *arena;       /* host sources or destinations */
    unsigned char *arena_ref;   /* downloads: what the arena must hold */
    uintptr_t registered_start; /* [start, end) counts as registered */
    uintptr_t registered_end;
    curdi_transfer_item *items;
    size_t count;
} scenario;

static void scenario_free(scenario *s)
{
    for (int b = 0; b < BUFFER_COUNT; b++) {
        g_free(s->buffers[b]);
        g_free(s->reference[b]);
    }
    g_free(s->arena);
    g_free(s->arena_ref);
    g_free(s->items);
}

static uintptr_t registered_key_of(const scenario *s, const unsigned char *host,
                                   uint64_t len)
{
    uintptr_t start = (uintptr_t)host;
    if (len == 0 || start < s->registered_start
        || start + len > s->registered_end)
        return 0;
    return s->registered_start;
}

/* Builds a random batch. Download destinations never overlap; upload
 * sources may. Items come in runs that are adjacent on the device (often
 * also on the host, to make direct spans), overlapping, scattered, or of
 * one length at one stride on each side (rows for one strided DMA). */
static void scenario_make(scenario *s, bool upload, size_t count,
                          size_t max_buffer)
{
    size_t arena_next = 0;
    memset(s, 0, sizeof *s);
    for (int b = 0; b < BUFFER_COUNT; b++) {
        s->buffer_len[b] = (size_t)g_test_rand_int_range(1, (gint32)max_buffer + 1);
        s->buffers[b] = g_malloc(s->buffer_len[b]);
        curd_test_fill_random(s->buffers[b], s->buffer_len[b]);
        s->reference[b] = g_memdup2(s->buffers[b], s->buffer_len[b]);
    }
    s->arena = g_malloc(ARENA_BYTES);
    curd_test_fill_random(s->arena, ARENA_BYTES);
    /* A random middle part of the arena is "registered". */
    s->registered_start = (uintptr_t)s->arena
                          + (uintptr_t)g_test_rand_int_range(0, ARENA_BYTES / 2);
    s->registered_end = s->registered_start
                        + (uintptr_t)g_test_rand_int_range(0, ARENA_BYTES / 2);
    s->items = g_new0(curdi_transfer_item, count);
    s->count = count;

    for (size_t i = 0; i < count;) {
        int b = g_test_rand_int_range(0, BUFFER_COUNT);
        size_t run = (size_t)g_test_rand_int_range(1, 6);
        /* adjacent, overlap, scatter, rows */
        int kind = g_test_rand_int_range(0, 4);
        bool host_contiguous = g_test_rand_bit();
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)s->buffer_len[b] + 1);
        /* Rows: one length, and the gaps after each row on either side. */
        size_t row_len = (size_t)g_test_rand_int_range(1, 600);
        size_t device_gap = (size_t)g_test_rand_int_range(0, 300);
        size_t host_gap = (size_t)g_test_rand_int_range(0, 300);
        if (kind == 3)
            run = (size_t)g_test_rand_int_range(2, 12);
        for (size_t r = 0; r < run && i < count; r++, i++) {
            curdi_transfer_item *item = &s->items[i];
            size_t room = s->buffer_len[b] - offset;
            size_t len = room == 0 ? 0
                                   : (size_t)g_test_rand_int_range(0, (gint32)room + 1);
            if (kind == 3)
                len = row_len <= room ? row_len : 0;
            else if (g_test_rand_int_range(0, 8) == 0)
                len = 0;
            if (len > ARENA_BYTES / 8)
                len = ARENA_BYTES / 8;
            item->buffer_key = 0x100u + (uint64_t)b;
            item->device_base = (uint64_t)(uintptr_t)s->buffers[b];
            item->offset = offset;
            item->byte_len = len;
            if (arena_next + len > ARENA_BYTES || !host_contiguous)
                arena_next = upload ? (size_t)g_test_rand_int_range(
                                          0, (gint32)(ARENA_BYTES - len) + 1)
                                    : arena_next;
            if (arena_next + len > ARENA_BYTES) {
                /* Downloads: out of fresh arena, make the rest empty. */
                len = 0;
                item->byte_len = 0;
            }
            item->host = len == 0 && g_test_rand_bit() ? NULL
                                                        : s->arena + arena_next;
            item->registered_key = registered_key_of(s, item->host, len);
            if (upload || len > 0)
                arena_next += len;
            if (kind == 3 && len > 0 && arena_next + host_gap <= ARENA_BYTES)
                arena_next += host_gap;
            if (kind == 0)
                offset += len;
            else if (kind == 3)
                offset += len + device_gap;
            else if (kind == 1 && len > 0)
                offset += (size_t)g_test_rand_int_range(0, (gint32)len);
            else
                offset = (size_t)g_test_rand_int_range(0, (gint32)s->buffer_len[b] + 1);
            if (offset > s->buffer_len[b])
                offset = s->buffer_len[b];
        }
    }

    if (upload) {
        for (size_t i = 0; i < count; i++) {
            const curdi_transfer_item *item = &s->items[i];
            int b = (int)(item->buffer_key - 0x100u);
            if (item->byte_len > 0)
                memcpy(s->reference[b] + item->offset, item->host,
                       (size_t)item->byte_len);
        }
    } else {
        /* Destinations start poisoned; bytes no item names must stay so. */
        curd_test_poison(s->arena, ARENA_BYTES);
        s->arena_ref = g_memdup2(s->arena, ARENA_BYTES);
        for (size_t i = 0; i < count; i++) {
            const curdi_transfer_item *item = &s->items[i];
            int b = (int)(item->buffer_key - 0x100u);
            if (item->byte_len > 0)
                memcpy(s->arena_ref + (item->host - s->arena),
                       s->buffers[b] + item->offset, (size_t)item->byte_len);
        }
    }
}

static void scenario_check(const scenario *s, bool upload)
{
    for (int b = 0; b < BUFFER_COUNT; b++)
        assert_same_bytes(s->buffers[b], s->reference[b], s->buffer_len[b]);
    if (!upload)
        assert_same_bytes(s->arena, s->arena_ref, ARENA_BYTES);
}

/* The chunk size the library picks by default for a stream. */
static uint64_t default_chunk(uint64_t stream_bytes)
{
    return curdi_plan_chunk_bytes(stream_bytes, CURDI_CHUNK_MIN_BYTES_DEFAULT,
                                  CURDI_CHUNK_MAX_BYTES_DEFAULT);
}

/* Runs a plan through the deferred device with staging slots of
 * chunk_bytes (none when it gathers straight to registered memory), host
 * copies in pieces of the default size, streaming stores where the
 * library would use them by default. */
static curd_status run_plan(const curdi_plan *plan,
                            const curdi_transfer_item *items, bool upload,
                            uint64_t chunk_bytes, fake_device *fake,
                            curdi_copy_team *team, curdi_engine_result *result)
{
    unsigned char *slots[CURDI_PLAN_SLOTS_MAX] = {NULL};
    curdi_engine_staging staging = {slots, 0, chunk_bytes,
                                  CURDI_COPY_PIECE_BYTES, false, false};
    curdi_engine_ops ops = {.copy = fake_copy,
                          .copy_rows = fake_copy_rows,
                          .max_pitch = fake->max_pitch,
                          .gathered = fake_gathered,
                          .mark = fake_mark,
                          .wait = fake_wait,
                          .finish = fake_finish,
                          .context = fake};
    curd_status status;
    if (plan->stream_bytes > 0) {
        uint64_t chunks = (plan->stream_bytes + chunk_bytes - 1) / chunk_bytes;
        if (plan->gather_host == NULL)
            staging.slot_count =
                curdi_plan_slot_count(chunks, CURDI_STAGING_SLOTS_DEFAULT);
        for (unsigned i = 0; i < staging.slot_count; i++) {
            slots[i] = g_malloc((size_t)chunk_bytes);
            curd_test_poison(slots[i], (size_t)chunk_bytes);
        }
        staging.streaming =
            !upload
            && plan->stream_bytes >= CURDI_STREAMING_DOWNLOAD_MIN_DEFAULT;
    }
    if (plan->gather)
        fake->chunk_len = chunk_bytes;
    status = curdi_engine_run(plan, items, upload, &staging, &ops, team,
                              result);
    /* What the caller does on failure: drain what was enqueued. */
    fake_run_until(fake, fake->queue->len);
    for (unsigned i = 0; i < staging.slot_count; i++)
        g_free(slots[i]);
    return status;
}

/* ------------------------------------------------------------------------
 * Tests: the plan
 * ---------------------------------------------------------------------- */

static curdi_transfer_item item_at(uint64_t key, unsigned char *base,
                               uint64_t offset, uint64_t len,
                               unsigned char *host, uintptr_t registered)
{
    curdi_transfer_item item = {key, (uint64_t)(uintptr_t)base, offset, len, host,
                            registered};
    return item;
}

static void test_adjacent_reads_fuse_into_one_staged_span(void)
{
    enum { PIECES = 64, PIECE = 4096 };
    unsigned char *device = g_malloc(PIECES * PIECE);
    unsigned char *dst = g_malloc(PIECES * PIECE);
    curdi_transfer_item items[PIECES];
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    curd_test_fill_random(device, PIECES * PIECE);
    curd_test_poison(dst, PIECES * PIECE);
    /* Items in a shuffled order: fusion must not depend on it. */
    for (size_t i = 0; i < PIECES; i++) {
        size_t piece = (i * 37u) % PIECES;
        items[i] = item_at(1, device, piece * PIECE, PIECE, dst + piece * PIECE, 0);
    }
    g_assert_cmpint(curdi_plan_build(items, PIECES, NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_STAGED);
    g_assert_cmpuint(plan.stream_bytes, ==, PIECES * PIECE);
    g_assert_cmpuint(plan.dma_bytes, ==, PIECES * PIECE);
    g_assert_false(plan.overlapping);
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, false,
                             default_chunk(plan.stream_bytes), &fake,
                             NULL, &result),
                    ==, CURD_OK);
    g_assert_cmpuint(result.dma_ops, ==, 1);
    g_assert_cmpuint(result.fences, ==, 1);
    g_assert_cmpuint(fake.finishes, ==, 1);
    assert_same_bytes(dst, device, PIECES * PIECE);
    fake_fini(&fake);
    curdi_plan_free(&plan);
    g_free(device);
    g_free(dst);
}

/* One small upload from pageable memory goes to the driver as it is: one
 * direct DMA from the caller's bytes, no staging; a larger one, a
 * registered one or a batch of two stay as planned (transfer.c asks for
 * uploads only). */
static void test_a_small_pageable_upload_goes_to_the_driver_as_it_is(void)
{
    enum { LEN = 8192 };
    unsigned char *device = g_malloc(2 * LEN);
    unsigned char *src = g_malloc(2 * LEN);
    curdi_transfer_item items[2];
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    curd_test_fill_random(src, 2 * LEN);
    curd_test_poison(device, 2 * LEN);
    items[0] = item_at(1, device, 0, LEN, src, 0);
    g_assert_cmpint(curdi_plan_build(items, 1, NULL, 0, &plan), ==, CURD_OK);
    g_assert_false(curdi_plan_pageable_direct(&plan, items, 1, LEN - 1));
    g_assert_cmpuint(plan.stream_bytes, ==, LEN);
    g_assert_true(curdi_plan_pageable_direct(&plan, items, 1, LEN));
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_DIRECT);
    g_assert_true(plan.spans[0].host == src);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    g_assert_cmpuint(plan.dma_bytes, ==, LEN);
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, true, 0, &fake, NULL, &result), ==,
                    CURD_OK);
    g_assert_cmpuint(result.dma_ops, ==, 1);
    g_assert_cmpuint(result.dma_bytes, ==, LEN);
    assert_same_bytes(device, src, LEN);
    fake_fini(&fake);
    curdi_plan_free(&plan);

    /* Registered, or two items: left alone. */
    items[0] = item_at(1, device, 0, LEN, src, 7);
    g_assert_cmpint(curdi_plan_build(items, 1, NULL, 0, &plan), ==, CURD_OK);
    g_assert_false(curdi_plan_pageable_direct(&plan, items, 1, LEN));
    curdi_plan_free(&plan);
    items[0] = item_at(1, device, 0, LEN, src, 0);
    items[1] = item_at(1, device, LEN, LEN, src + LEN, 0);
    g_assert_cmpint(curdi_plan_build(items, 2, NULL, 0, &plan), ==, CURD_OK);
    g_assert_false(curdi_plan_pageable_direct(&plan, items, 2, 4 * LEN));
    curdi_plan_free(&plan);
    g_free(device);
    g_free(src);
}

static void test_registered_run_adjacent_on_both_sides_is_one_direct_dma(void)
{
    enum { PIECES = 64, PIECE = 4096 };
    unsigned char *device = g_malloc(PIECES * PIECE);
    unsigned char *dst = g_malloc(PIECES * PIECE);
    curdi_transfer_item items[PIECES];
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    curd_test_fill_random(device, PIECES * PIECE);
    curd_test_poison(dst, PIECES * PIECE);
    for (size_t i = 0; i < PIECES; i++)
        items[i] = item_at(1, device, i * PIECE, PIECE, dst + i * PIECE,
                           (uintptr_t)dst);
    g_assert_cmpint(curdi_plan_build(items, PIECES, NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_DIRECT);
    g_assert_true(plan.spans[0].host == dst);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, false, 0, &fake, NULL, &result), ==,
                    CURD_OK);
    g_assert_cmpuint(result.dma_ops, ==, 1);
    g_assert_cmpuint(result.dma_bytes, ==, PIECES * PIECE);
    assert_same_bytes(dst, device, PIECES * PIECE);
    fake_fini(&fake);
    curdi_plan_free(&plan);
    g_free(device);
    g_free(dst);
}

static void test_registered_items_in_another_order_are_staged_when_small(void)
{
    unsigned char *device = g_malloc(3 * 100);
    unsigned char *dst = g_malloc(3 * 100);
    curdi_transfer_item items[3];
    curdi_plan plan;
    /* Device order 0,1,2 but host order 2,1,0: not one run. */
    for (size_t i = 0; i < 3; i++)
        items[i] = item_at(1, device, i * 100, 100, dst + (2 - i) * 100,
                           (uintptr_t)dst);
    g_assert_cmpint(curdi_plan_build(items, 3, NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_STAGED);
    curdi_plan_free(&plan);
    g_free(device);
    g_free(dst);
}

/* count items of len bytes, device_stride apart on the "device" and
 * host_stride apart in host memory (one registered range, or malloc
 * memory when not registered), the first half in buffer key 1 and the
 * second in key `second_key` at the same stride; moved through the engine
 * of a device whose largest pitch is max_pitch, every byte compared (the
 * bytes between the rows keep their poison on the side written). With
 * plan_of_rows the plan is curdi_plan_build_rows' (the items must then be
 * rows of one key). Returns the DMAs, and the strided ones in *strided. */
static uint64_t strided_items_move(bool upload, size_t count, size_t len,
                                   size_t device_stride, size_t host_stride,
                                   bool registered, uint64_t second_key,
                                   uint64_t max_pitch, bool plan_of_rows,
                                   unsigned *strided)
{
    size_t device_len = (count - 1) * device_stride + len;
    size_t host_len = (count - 1) * host_stride + len;
    unsigned char *device = g_malloc(device_len);
    unsigned char *host = g_malloc(host_len);
    unsigned char *expected = g_malloc(upload ? device_len : host_len);
    curdi_transfer_item *items = g_new(curdi_transfer_item, count);
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    if (upload) {
        curd_test_poison(device, device_len);
        curd_test_fill_random(host, host_len);
        memcpy(expected, device, device_len);
    } else {
        curd_test_fill_random(device, device_len);
        curd_test_poison(host, host_len);
        memcpy(expected, host, host_len);
    }
    for (size_t i = 0; i < count; i++) {
        unsigned char *device_row = device + i * device_stride;
        unsigned char *host_row = host + i * host_stride;
        bool first_half = i < count / 2 || second_key == 1;
        /* A second key's buffer starts where its first row is. */
        unsigned char *base =
            first_half ? device : device + count / 2 * device_stride;
        items[i] = item_at(first_half ? 1u : second_key, base,
                           (uint64_t)(device_row - base), len, host_row,
                           registered ? (uintptr_t)host : 0);
        if (upload)
            memcpy(expected + i * device_stride, host_row, len);
        else
            memcpy(expected + i * host_stride, device_row, len);
    }
    if (plan_of_rows) {
        g_assert_cmpint(curdi_plan_build_rows(items, count, device_stride,
                                             host_stride, &plan),
                        ==, CURD_OK);
        /* Registered rows are one span, kept inline. */
        g_assert_true((plan.spans == &plan.one_span) == registered);
    } else {
        g_assert_cmpint(
            curdi_plan_build(items, count, NULL, max_pitch, &plan), ==,
            CURD_OK);
    }
    fake_init(&fake);
    fake.max_pitch = max_pitch;
    g_assert_cmpint(run_plan(&plan, items, upload,
                             default_chunk(plan.stream_bytes), &fake, NULL,
                             &result),
                    ==, CURD_OK);
    g_assert_cmpuint(result.dma_bytes, ==, count * len);
    g_assert_cmpuint(result.fences, ==, 1);
    if (upload)
        assert_same_bytes(device, expected, device_len);
    else
        assert_same_bytes(host, expected, host_len);
    *strided = fake.strided;
    fake_fini(&fake);
    curdi_plan_free(&plan);
    g_free(items);
    g_free(device);
    g_free(host);
    g_free(expected);
    return result.dma_ops;
}

/* Ranges of one length at one stride on each side join into rows that
 * cross in one strided DMA: from and into registered memory and through
 * staging, whatever the host's stride; rows never span two buffers, nor
 * a pitch past the device's largest. */
static void test_ranges_at_one_stride_are_one_strided_dma(void)
{
    const uint64_t max = TEST_MAX_PITCH;
    unsigned strided;
    for (int up = 0; up < 2; up++) {
        bool upload = up == 1;
        for (int reg = 0; reg < 2; reg++) {
            bool registered = reg == 1;
            g_assert_cmpuint(strided_items_move(upload, 64, 4096, 8192, 4096,
                                                registered, 1, max, false,
                                                &strided),
                             ==, 1);
            g_assert_cmpuint(strided, ==, 1);
            g_assert_cmpuint(strided_items_move(upload, 2, 100, 333, 100,
                                                registered, 1, max, false,
                                                &strided),
                             ==, 1);
            /* Two buffers: rows each. */
            g_assert_cmpuint(strided_items_move(upload, 64, 4096, 8192, 4096,
                                                registered, 2, max, false,
                                                &strided),
                             ==, 2);
            g_assert_cmpuint(strided, ==, 2);
            /* A pitch past the largest: a DMA each. */
            g_assert_cmpuint(strided_items_move(upload, 16, 512, 8192, 512,
                                                registered, 1, 4096, false,
                                                &strided),
                             ==, 16);
            g_assert_cmpuint(strided, ==, 0);
        }
        /* The host's stride is its own. */
        g_assert_cmpuint(strided_items_move(upload, 64, 4096, 8192, 12288,
                                            true, 1, max, false, &strided),
                         ==, 1);
        g_assert_cmpuint(strided, ==, 1);
    }
}

/* A plan of rows (a batch the transfer module found to be rows) moves them
 * in one strided DMA, both ways: straight from registered memory, its
 * one span kept inline, or through staging, a span per row; past one
 * chunk of staging, one strided DMA per chunk. */
static void test_a_plan_of_rows_is_one_strided_dma(void)
{
    unsigned strided;
    for (int up = 0; up < 2; up++) {
        for (int reg = 0; reg < 2; reg++) {
            g_assert_cmpuint(strided_items_move(up == 1, 48, 1000, 1536, 1024,
                                                reg == 1, 1, TEST_MAX_PITCH,
                                                true, &strided),
                             ==, 1);
            g_assert_cmpuint(strided, ==, 1);
        }
        /* Rows of 4 KiB: chunks of whole rows, a strided DMA each. */
        const uint64_t stream = 600 * 4096;
        const uint64_t chunk = default_chunk(stream);
        g_assert_cmpuint(chunk % 4096, ==, 0);
        g_assert_cmpuint(strided_items_move(up == 1, 600, 4096, 8192, 6000,
                                            false, 1, TEST_MAX_PITCH, true,
                                            &strided),
                         ==, (stream + chunk - 1) / chunk);
        g_assert_cmpuint(strided, ==, (stream + chunk - 1) / chunk);
    }
}

static void test_large_registered_items_move_directly_one_dma_each(void)
{
    const size_t piece = CURDI_DIRECT_ITEM_MIN_BYTES;
    unsigned char *device = g_malloc(2 * piece);
    unsigned char *src = g_malloc(2 * piece);
    curdi_transfer_item items[2];
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    curd_test_fill_random(src, 2 * piece);
    /* Swapped on the host: a fused span, not one run. */
    items[0] = item_at(1, device, 0, piece, src + piece, (uintptr_t)src);
    items[1] = item_at(1, device, piece, piece, src, (uintptr_t)src);
    g_assert_cmpint(curdi_plan_build(items, 2, NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_DIRECT_ITEMS);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, true, 0, &fake, NULL, &result), ==,
                    CURD_OK);
    g_assert_cmpuint(result.dma_ops, ==, 2);
    assert_same_bytes(device, src + piece, piece);
    assert_same_bytes(device + piece, src, piece);
    fake_fini(&fake);
    curdi_plan_free(&plan);
    g_free(device);
    g_free(src);
}

static void test_zero_length_items_get_no_span_and_no_dma(void)
{
    unsigned char device[16];
    curdi_transfer_item items[3];
    curdi_plan plan;
    items[0] = item_at(1, device, 0, 0, NULL, 0);
    items[1] = item_at(2, device, 16, 0, NULL, 0);
    items[2] = item_at(1, device, 5, 0, device, 0);
    g_assert_cmpint(curdi_plan_build(items, 3, NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 0);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    g_assert_cmpuint(plan.dma_bytes, ==, 0);
    curdi_plan_free(&plan);
}

static void test_overlapping_uploads_are_flagged_and_the_later_item_wins(void)
{
    unsigned char device[64];
    unsigned char first[40], second[40];
    curdi_transfer_item items[2];
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    unsigned char expected[64];
    memset(device, 0, sizeof device);
    memset(first, 0xAA, sizeof first);
    memset(second, 0x55, sizeof second);
    items[0] = item_at(1, device, 0, 40, first, 0);
    items[1] = item_at(1, device, 20, 40, second, 0);
    memset(expected, 0, sizeof expected);
    memset(expected, 0xAA, 20);
    memset(expected + 20, 0x55, 40);
    g_assert_cmpint(curdi_plan_build(items, 2, NULL, 0, &plan), ==, CURD_OK);
    g_assert_true(plan.overlapping);
    g_assert_cmpuint(plan.stream_bytes, ==, 60);
    g_assert_cmpuint(plan.dma_bytes, ==, 60);
    /* Small chunks: the overlap crosses chunk boundaries. */
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, true, 7, &fake, NULL, &result), ==,
                    CURD_OK);
    assert_same_bytes(device, expected, sizeof device);
    fake_fini(&fake);
    curdi_plan_free(&plan);
}

static void test_chunk_size_policy(void)
{
    const uint64_t mib = 1u << 20;
    g_assert_cmpuint(default_chunk(0), ==, 0);
    g_assert_cmpuint(default_chunk(1), ==, 1);
    g_assert_cmpuint(default_chunk(mib), ==, mib);
    g_assert_cmpuint(default_chunk(mib + 1), ==, mib);
    g_assert_cmpuint(default_chunk(16 * mib), ==, 4 * mib);
    g_assert_cmpuint(default_chunk(256 * mib), ==, 8 * mib);
    g_assert_cmpuint(default_chunk(UINT64_MAX), ==, 8 * mib);
    g_assert_cmpuint(default_chunk(10 * mib + 3) % 4096, ==, 0);
    /* A small minimum pipelines a few hundred KiB in quarters. */
    g_assert_cmpuint(curdi_plan_chunk_bytes(256 * 1024, 64 * 1024, 8 * mib), ==,
                     64 * 1024);
    g_assert_cmpuint(curdi_plan_chunk_bytes(256 * 1024 + 1, 64 * 1024, 8 * mib),
                     ==, 68 * 1024);
    g_assert_cmpuint(curdi_plan_chunk_bytes(256 * mib, mib, 32 * mib), ==,
                     32 * mib);
    g_assert_cmpuint(curdi_plan_slot_count(1, 3), ==, 1);
    g_assert_cmpuint(curdi_plan_slot_count(2, 3), ==, 2);
    g_assert_cmpuint(curdi_plan_slot_count(3, 3), ==, 3);
    g_assert_cmpuint(curdi_plan_slot_count(1000, 3), ==, 3);
    g_assert_cmpuint(curdi_plan_slot_count(1000, 8), ==, 8);
    g_assert_cmpuint(curdi_plan_slot_count(1000, 1000), ==,
                     CURDI_PLAN_SLOTS_MAX);
}

static void test_gather_crossover_policy(void)
{
    curdi_gather_policy policy = {CURDI_PATH_AUTO, 4, 1000};
    g_assert_false(curdi_plan_wants_gather(NULL, 100, 100));
    g_assert_false(curdi_plan_wants_gather(&policy, 0, 0));
    g_assert_false(curdi_plan_wants_gather(&policy, 3, 30));
    g_assert_true(curdi_plan_wants_gather(&policy, 4, 4000));
    g_assert_false(curdi_plan_wants_gather(&policy, 4, 4004));
    policy.path = CURDI_PATH_DMA;
    g_assert_false(curdi_plan_wants_gather(&policy, 100, 100));
    policy.path = CURDI_PATH_GATHER;
    g_assert_true(curdi_plan_wants_gather(&policy, 1, UINT64_MAX));
    g_assert_false(curdi_plan_wants_gather(&policy, 0, 0));
}

/* ------------------------------------------------------------------------
 * Tests: the engine against the reference
 * ---------------------------------------------------------------------- */

/* The policies the engine is run under: DMAs only, the default crossover
 * (spans of 4 KiB or more are never gathered here, so small and large
 * ones both occur), and gathering forced. */
static const curdi_gather_policy policy_auto = {CURDI_PATH_AUTO, 3, 4096};
static const curdi_gather_policy policy_gather = {CURDI_PATH_GATHER, 1, 1};

static void random_round_trips(bool upload, int rounds, size_t max_items,
                               size_t max_buffer,
                               const curdi_gather_policy *policy)
{
    for (int round = 0; round < rounds; round++) {
        scenario s;
        curdi_plan plan;
        curdi_engine_result result;
        fake_device fake;
        size_t count = (size_t)g_test_rand_int_range(1, (gint32)max_items + 1);
        uint64_t chunk;
        uint64_t expected_bytes = 0;
        scenario_make(&s, upload, count, max_buffer);
        g_assert_cmpint(curdi_plan_build(s.items, s.count, policy,
                                              TEST_MAX_PITCH, &plan), ==,
                        CURD_OK);
        for (size_t i = 0; i < plan.span_count; i++)
            expected_bytes += plan.spans[i].mode == CURDI_SPAN_DIRECT_ITEMS
                                  ? 0
                                  : plan.spans[i].byte_len;
        /* Chunks from one byte to more than the whole stream. */
        chunk = (uint64_t)g_test_rand_int_range(1, 4096);
        fake_init(&fake);
        g_assert_cmpint(run_plan(&plan, s.items, upload, chunk, &fake, NULL,
                                 &result),
                        ==, CURD_OK);
        scenario_check(&s, upload);
        g_assert_cmpuint(result.dma_bytes, ==, plan.dma_bytes);
        g_assert_cmpuint(result.fences, ==, result.dma_ops > 0 ? 1 : 0);
        g_assert_cmpuint(fake.finishes, ==, result.fences);
        if (policy == NULL || policy->path == CURDI_PATH_DMA)
            g_assert_false(plan.gather);
        if (policy != NULL && policy->path == CURDI_PATH_GATHER)
            g_assert_true(plan.gather == (plan.stream_bytes > 0));
        if (plan.gather)
            g_assert_cmpuint(fake.gathers, ==,
                             (plan.stream_bytes + chunk - 1) / chunk);
        if (plan.stream_bytes == 0)
            g_assert_cmpuint(expected_bytes, <=, plan.dma_bytes);
        fake_fini(&fake);
        curdi_plan_free(&plan);
        scenario_free(&s);
    }
}

static void test_random_upload_batches_match_the_reference(void)
{
    random_round_trips(true, 300, 40, 8192, NULL);
}

static void test_random_download_batches_match_the_reference(void)
{
    random_round_trips(false, 300, 40, 8192, NULL);
}

static void test_random_gathered_batches_match_the_reference(void)
{
    for (int direction = 0; direction < 2; direction++) {
        random_round_trips(direction == 0, 200, 40, 8192, &policy_gather);
        random_round_trips(direction == 0, 200, 40, 8192, &policy_auto);
    }
}

/* Scattered ranges of two buffers into one registered run laid out like
 * the stream: gathered straight into it, one DMA per chunk, no pinned
 * staging at all. */
static void test_scattered_reads_into_one_registered_run_gather_straight_there(void)
{
    enum { PIECES = 64, PIECE = 4096, STRIDE = 8192 };
    unsigned char *device[2] = {g_malloc(PIECES * STRIDE),
                                g_malloc(PIECES * STRIDE)};
    unsigned char *dst = g_malloc(2 * PIECES * PIECE);
    unsigned char *expected = g_malloc(2 * PIECES * PIECE);
    curdi_transfer_item items[2 * PIECES];
    const curdi_gather_policy policy = {CURDI_PATH_AUTO, 4,
                                        CURDI_GATHER_MAX_SPAN_BYTES_DEFAULT};
    curdi_plan plan;
    curdi_engine_result result;
    fake_device fake;
    for (int b = 0; b < 2; b++)
        curd_test_fill_random(device[b], PIECES * STRIDE);
    curd_test_poison(dst, 2 * PIECES * PIECE);
    for (size_t i = 0; i < 2 * PIECES; i++) {
        size_t b = i / PIECES, piece = i % PIECES;
        items[i] = item_at(1 + b, device[b], piece * STRIDE, PIECE,
                           dst + i * PIECE, (uintptr_t)dst);
        memcpy(expected + i * PIECE, device[b] + piece * STRIDE, PIECE);
    }
    g_assert_cmpint(curdi_plan_build(items, 2 * PIECES, &policy, 0, &plan),
                    ==, CURD_OK);
    /* Each piece alone would be one direct DMA. */
    g_assert_true(plan.gather);
    g_assert_true(plan.gather_host == dst);
    g_assert_cmpuint(plan.stream_bytes, ==, 2 * PIECES * PIECE);
    fake_init(&fake);
    g_assert_cmpint(run_plan(&plan, items, false, 64 * 1024, &fake, NULL,
                             &result),
                    ==, CURD_OK);
    g_assert_cmpuint(result.dma_ops, ==, 8);
    g_assert_cmpuint(fake.gathers, ==, 8);
    g_assert_cmpuint(result.fences, ==, 1);
    assert_same_bytes(dst, expected, 2 * PIECES * PIECE);
    fake_fini(&fake);
    curdi_plan_free(&plan);
    /* Without the kernels: one direct DMA per piece. */
    g_assert_cmpint(curdi_plan_build(items, 2 * PIECES, NULL, 0, &plan), ==,
                    CURD_OK);
    g_assert_false(plan.gather);
    g_assert_cmpuint(plan.stream_bytes, ==, 0);
    g_assert_cmpuint(plan.span_count, ==, 2 * PIECES);
    curdi_plan_free(&plan);
    g_free(device[0]);
    g_free(device[1]);
    g_free(dst);
    g_free(expected);
}

/* Under the default crossover: a few spans, or large ones, keep a DMA
 * each; many small ones are gathered; spans moved item by item never. */
static void test_the_planner_gathers_many_small_spans_only(void)
{
    enum { SPANS = 8 };
    const curdi_gather_policy policy = {CURDI_PATH_AUTO, 4, 64 * 1024};
    unsigned char *device = g_malloc(SPANS * 2 * 128 * 1024);
    unsigned char *host = g_malloc(SPANS * 128 * 1024);
    curdi_transfer_item items[SPANS];
    curdi_plan plan;
    struct {
        size_t count;
        uint64_t len;
        bool gather;
    } cases[] = {{3, 4096, false}, {4, 4096, true}, {SPANS, 64 * 1024, true},
                 {SPANS, 64 * 1024 + 1, false}};
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        for (size_t i = 0; i < cases[c].count; i++)
            items[i] = item_at(1, device, i * 2 * 128 * 1024, cases[c].len,
                               host + i * cases[c].len, 0);
        g_assert_cmpint(curdi_plan_build(items, cases[c].count, &policy, 0, &plan),
                        ==, CURD_OK);
        g_assert_true(plan.gather == cases[c].gather);
        g_assert_null(plan.gather_host);
        g_assert_cmpuint(plan.staged_span_count, ==, cases[c].count);
        curdi_plan_free(&plan);
    }
    /* Registered items of 256 KiB, swapped on the host: one DMA each
     * even when gathering is forced. */
    items[0] = item_at(1, device, 0, 256 * 1024, host + 256 * 1024,
                       (uintptr_t)host);
    items[1] = item_at(1, device, 256 * 1024, 256 * 1024, host,
                       (uintptr_t)host);
    g_assert_cmpint(curdi_plan_build(items, 2, &policy_gather, 0, &plan), ==,
                    CURD_OK);
    g_assert_false(plan.gather);
    g_assert_cmpuint(plan.spans[0].mode, ==, CURDI_SPAN_DIRECT_ITEMS);
    curdi_plan_free(&plan);
    g_free(device);
    g_free(host);
}

/* The crossover counts the DMAs the spans would take: spans of one length
 * at one stride join into rows and count once, so 64 of them at one
 * stride stay on the copy engines, in malloc memory or registered; at
 * uneven lengths, or where the device takes no strided DMA (largest
 * pitch 0), they are 64 DMAs and gather. */
static void test_the_crossover_counts_ranges_at_one_stride_once(void)
{
    enum { SPANS = 64, LEN = 4096, STRIDE = 8192 };
    const curdi_gather_policy policy = {CURDI_PATH_AUTO, 4, 64 * 1024};
    unsigned char *device = g_malloc(SPANS * STRIDE);
    unsigned char *host = g_malloc(SPANS * LEN);
    curdi_transfer_item items[SPANS];
    curdi_plan plan;
    struct {
        uintptr_t registered;
        uint64_t uneven; /* bytes off every other span */
        uint64_t max_pitch;
        bool gather;
    } cases[] = {{0, 0, TEST_MAX_PITCH, false},
                 {1, 0, TEST_MAX_PITCH, false},
                 {0, 64, TEST_MAX_PITCH, true},
                 {1, 64, TEST_MAX_PITCH, true},
                 {0, 0, 0, true},
                 {0, 0, STRIDE - 1, true}};
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        for (size_t i = 0; i < SPANS; i++)
            items[i] = item_at(1, device, i * STRIDE,
                               LEN - (i % 2 == 1 ? cases[c].uneven : 0),
                               host + i * LEN,
                               cases[c].registered ? (uintptr_t)host : 0);
        g_assert_cmpint(curdi_plan_build(items, SPANS, &policy,
                                              cases[c].max_pitch, &plan),
                        ==, CURD_OK);
        g_assert_true(plan.gather == cases[c].gather);
        curdi_plan_free(&plan);
    }
    g_free(device);
    g_free(host);
}

static void test_many_chunks_reuse_slots_only_after_their_dmas_ran(void)
{
    /* One item, 1000 chunks of 13 bytes: the three slots are reused over
     * and over. */
    for (int direction = 0; direction < 2; direction++) {
        bool upload = direction == 0;
        size_t len = 13000;
        unsigned char *device = g_malloc(len);
        unsigned char *host = g_malloc(len);
        unsigned char *expected = g_malloc(len);
        curdi_transfer_item item;
        curdi_plan plan;
        curdi_engine_result result;
        fake_device fake;
        curd_test_fill_random(device, len);
        curd_test_fill_random(host, len);
        memcpy(expected, upload ? host : device, len);
        item = item_at(9, device, 0, len, host, 0);
        g_assert_cmpint(curdi_plan_build(&item, 1, NULL, 0, &plan), ==, CURD_OK);
        fake_init(&fake);
        g_assert_cmpint(run_plan(&plan, &item, upload, 13, &fake, NULL, &result),
                        ==, CURD_OK);
        g_assert_cmpuint(result.dma_ops, ==, 1000);
        g_assert_cmpuint(result.fences, ==, 1);
        assert_same_bytes(upload ? device : host, expected, len);
        fake_fini(&fake);
        curdi_plan_free(&plan);
        g_free(device);
        g_free(host);
        g_free(expected);
    }
}

static void test_every_failing_op_returns_its_error_and_frees_everything(void)
{
    for (int run = 0; run < 4; run++) {
        bool upload = run % 2 == 0;
        const curdi_gather_policy *policy = run < 2 ? NULL : &policy_gather;
        for (unsigned fail_at = 1;; fail_at++) {
            scenario s;
            curdi_plan plan;
            curdi_engine_result result = {99, 99, 99};
            fake_device fake;
            curd_status status;
            g_test_rand_int(); /* vary the scenarios a little */
            scenario_make(&s, upload, 12, 2048);
            g_assert_cmpint(curdi_plan_build(s.items, s.count, policy,
                                              TEST_MAX_PITCH, &plan), ==,
                            CURD_OK);
            fake_init(&fake);
            fake.fail_at = fail_at;
            status = run_plan(&plan, s.items, upload, 64, &fake, NULL, &result);
            if (fake.calls < fail_at) {
                /* Past the last op: the run succeeded untouched. */
                g_assert_cmpint(status, ==, CURD_OK);
                scenario_check(&s, upload);
                fake_fini(&fake);
                curdi_plan_free(&plan);
                scenario_free(&s);
                break;
            }
            g_assert_cmpint(status, ==, CURD_E_DRIVER);
            /* A failed run reports no result. */
            g_assert_cmpuint(result.dma_ops, ==, 99);
            fake_fini(&fake);
            curdi_plan_free(&plan);
            scenario_free(&s);
        }
    }
}

/* ------------------------------------------------------------------------
 * Tests: the copy team
 * ---------------------------------------------------------------------- */

/* Touching reads only inside each piece's destination (AddressSanitizer
 * and Valgrind would see a byte outside: each piece is an allocation of
 * its own, of an odd length) and changes none. */
static void test_copy_team_touch_reads_only_the_destinations(void)
{
    enum { PIECES = 9 };
    curdi_copy_piece pieces[PIECES];
    unsigned char *copies[PIECES];
    for (size_t i = 0; i < PIECES; i++) {
        size_t len = i == 0 ? 1 : (size_t)g_test_rand_int_range(2, 70000);
        unsigned char *dst = g_malloc(len);
        curd_test_fill_random(dst, len);
        copies[i] = g_memdup2(dst, len);
        pieces[i] = (curdi_copy_piece){.dst = dst, .src = NULL,
                                       .byte_len = len};
    }
    /* One starting mid-line, one empty. */
    pieces[PIECES - 1].dst = (unsigned char *)pieces[PIECES - 1].dst + 1;
    pieces[PIECES - 1].byte_len -= 1;
    pieces[1].byte_len = 0;
    curdi_copy_team_touch(pieces, PIECES);
    curdi_copy_team_touch(pieces, 0);
    for (size_t i = 0; i < PIECES; i++) {
        unsigned char *dst = pieces[i].dst;
        if (i == PIECES - 1)
            dst -= 1;
        g_assert_cmpint(memcmp(pieces[i].dst, copies[i] + (i == PIECES - 1),
                               pieces[i].byte_len),
                        ==, 0);
        g_free(dst);
        g_free(copies[i]);
    }
}

static void test_copy_team_copies_every_piece(void)
{
    curdi_copy_team *team = NULL;
    enum { PIECES = 40 };
    size_t len = 3u << 20;
    unsigned char *src = g_malloc(len);
    unsigned char *dst = g_malloc(len);
    curdi_copy_piece pieces[PIECES];
    curdi_copy_team_config config = {3, CURDI_COPY_PARALLEL_MIN, 0};
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    g_assert_cmpuint(curdi_copy_team_workers(team), <=, 3);
    for (int round = 0; round < 5; round++) {
        size_t at = 0;
        curd_test_fill_random(src, len);
        curd_test_poison(dst, len);
        /* Pieces of uneven size, in a scrambled order. */
        for (size_t i = 0; i < PIECES; i++) {
            size_t piece = (i * 7u) % PIECES;
            size_t size = len / PIECES;
            size_t start = piece * size;
            if (piece == PIECES - 1)
                size = len - start;
            pieces[i].dst = dst + start;
            pieces[i].src = src + start;
            pieces[i].byte_len = size;
            at += size;
        }
        g_assert_cmpuint(at, ==, len);
        /* Odd rounds write with streaming stores. */
        curdi_copy_team_run(team, pieces, PIECES, round % 2 == 1);
        assert_same_bytes(dst, src, len);
    }
    /* Small jobs and an empty job run on the caller alone. */
    curdi_copy_team_run(team, pieces, 0, false);
    curdi_copy_team_run(team, pieces, 1, true);
    curd_test_poison(dst, len);
    curdi_copy_team_run(NULL, pieces, PIECES, true);
    assert_same_bytes(dst, src, len);
    curdi_copy_team_destroy(team);
    curdi_copy_team_destroy(NULL);
    g_free(src);
    g_free(dst);
}

/* A comparison shared by the team finds equal ranges equal and one
 * changed byte in any piece (the first, one in the middle, the last, at
 * its first or last byte); a job of no piece is equal; no team, or one
 * piece, compares on the caller alone. */
static void test_copy_team_compare_finds_any_one_changed_byte(void)
{
    curdi_copy_team *team = NULL;
    enum { PIECES = 48 };
    size_t len = 3u << 20, size = len / PIECES;
    unsigned char *left = g_malloc(len);
    unsigned char *right = g_malloc(len);
    curdi_compare_piece pieces[PIECES];
    curdi_copy_team_config config = {3, CURDI_COPY_PARALLEL_MIN, 0};
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    curd_test_fill_random(left, len);
    memcpy(right, left, len);
    for (size_t i = 0; i < PIECES; i++)
        pieces[i] = (curdi_compare_piece){left + i * size, right + i * size,
                                          size};
    g_assert_true(curdi_copy_team_equal(team, pieces, PIECES));
    g_assert_true(curdi_copy_team_equal(team, pieces, 0));
    g_assert_true(curdi_copy_team_equal(NULL, pieces, PIECES));
    const size_t changed[] = {0, size - 1, (PIECES / 2) * size + 17,
                              len - size, len - 1};
    for (size_t c = 0; c < G_N_ELEMENTS(changed); c++) {
        size_t at = changed[c];
        right[at] ^= (unsigned char)g_test_rand_int_range(1, 256);
        /* Again and again: the piece that differs may be a worker's last,
         * still being compared when the caller finds none left. */
        for (int round = 0; round < 50; round++)
            g_assert_false(curdi_copy_team_equal(team, pieces, PIECES));
        g_assert_false(curdi_copy_team_equal(NULL, pieces, PIECES));
        g_assert_false(
            curdi_copy_team_equal(team, &pieces[at / size], 1));
        right[at] = left[at];
        g_assert_true(curdi_copy_team_equal(team, pieces, PIECES));
    }
    curdi_copy_team_destroy(team);
    g_free(left);
    g_free(right);
}

static void test_streaming_copy_matches_memcpy_at_any_alignment(void)
{
    /* Lengths around the 4 KiB cut-over and the 64-byte lines, from and
     * to every offset within a line; the bytes just outside stay. */
    enum { ROOM = 3 * 4096 + 256 };
    unsigned char *src = g_malloc(ROOM);
    unsigned char *dst = g_malloc(ROOM);
    unsigned char *expected = g_malloc(ROOM);
    static const size_t lengths[] = {0, 1, 63, 64, 65, 4095, 4096, 4097,
                                     4096 + 63, 8192 + 1, 3 * 4096};
    curd_test_fill_random(src, ROOM);
    for (size_t l = 0; l < G_N_ELEMENTS(lengths); l++)
        for (size_t from = 0; from < 64; from += 7)
            for (size_t to = 0; to < 64; to += 5) {
                size_t len = lengths[l];
                curd_test_poison(dst, ROOM);
                memcpy(expected, dst, ROOM);
                memcpy(expected + to, src + from, len);
                curdi_copy_team_streaming(dst + to, src + from, len);
                assert_same_bytes(dst, expected, ROOM);
            }
    g_free(src);
    g_free(dst);
    g_free(expected);
}

/* One job of count pieces of piece_bytes each, side by side in new
 * source and destination blocks (g_free them). */
static void equal_pieces(curdi_copy_piece *pieces, size_t count,
                         size_t piece_bytes, unsigned char **out_src,
                         unsigned char **out_dst)
{
    unsigned char *src = g_malloc(count * piece_bytes);
    unsigned char *dst = g_malloc(count * piece_bytes);
    for (size_t i = 0; i < count; i++)
        pieces[i] = (curdi_copy_piece){dst + i * piece_bytes,
                                       src + i * piece_bytes, piece_bytes};
    *out_src = src;
    *out_dst = dst;
}

/* Warmed workers poll for jobs instead of sleeping; many small jobs in a
 * row, each closed while workers may still be waking, copy every byte;
 * a cool with a stale warmth leaves the newer warming, and the team still
 * stops at destroy while warm. */
static void test_a_warmed_team_copies_small_jobs_in_a_row(void)
{
    curdi_copy_team *team = NULL;
    enum { PIECES = 8, PIECE = 16 * 1024, ROUNDS = 300 };
    unsigned char *src, *dst;
    curdi_copy_piece pieces[PIECES];
    curdi_copy_team_config config = {4, 0, 0};
    uint64_t first, second;
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    equal_pieces(pieces, PIECES, PIECE, &src, &dst);
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t warmth = 0;
        curd_test_fill_random(src, PIECES * PIECE);
        curd_test_poison(dst, PIECES * PIECE);
        /* A third warmed, a third cold, a third warmed and cooled first. */
        if (round % 3 != 1)
            warmth = curdi_copy_team_warm(team, PIECES - 1, 1000000u);
        if (round % 3 == 2)
            curdi_copy_team_cool(team, warmth);
        curdi_copy_team_run(team, pieces, PIECES, round % 2 == 1);
        assert_same_bytes(dst, src, PIECES * PIECE);
        curdi_copy_team_cool(team, warmth);
    }
    first = curdi_copy_team_warm(team, 2, 1000000u);
    g_assert_cmpuint(first, !=, 0);
    second = curdi_copy_team_warm(team, 2, 5000000000u);
    curdi_copy_team_cool(team, first); /* stale: the second stays */
    g_assert_cmpuint(curdi_copy_team_warm(NULL, 2, 1u), ==, 0);
    g_assert_cmpuint(curdi_copy_team_warm(team, 0, 1u), ==, 0);
    curdi_copy_team_cool(NULL, second);
    curdi_copy_team_destroy(team); /* while warm for 5 s */
    g_free(src);
    g_free(dst);
}

typedef struct team_caller {
    curdi_copy_team *team;
    unsigned char *src;
    unsigned char *dst;
    size_t len;
} team_caller;

static gpointer team_caller_run(gpointer data)
{
    team_caller *caller = data;
    curdi_copy_piece pieces[8];
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < 8; i++) {
            pieces[i].dst = caller->dst + i * (caller->len / 8);
            pieces[i].src = caller->src + i * (caller->len / 8);
            pieces[i].byte_len = caller->len / 8;
        }
        curd_test_poison(caller->dst, caller->len);
        curdi_copy_team_run(caller->team, pieces, 8, round % 2 == 1);
        if (memcmp(caller->dst, caller->src, caller->len) != 0)
            return GINT_TO_POINTER(1);
    }
    return GINT_TO_POINTER(0);
}

static void test_copy_team_serves_concurrent_callers(void)
{
    curdi_copy_team *team = NULL;
    team_caller callers[3];
    GThread *threads[3];
    unsigned added;
    /* Workers and callers poll a while before they sleep. */
    curdi_copy_team_config config = {2, CURDI_COPY_PARALLEL_MIN, 200000};
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    for (int i = 0; i < 3; i++) {
        callers[i].team = team;
        callers[i].len = 2u << 20;
        callers[i].src = g_malloc(callers[i].len);
        callers[i].dst = g_malloc(callers[i].len);
        /* g_test_rand_* is not for other threads: fill here. */
        curd_test_fill_random(callers[i].src, callers[i].len);
    }
    /* Two more workers for the callers' time, like a long upload's. */
    added = curdi_copy_team_grow(team, 2);
    g_assert_cmpuint(added, ==, 2);
    for (int i = 0; i < 3; i++)
        threads[i] = g_thread_new("caller", team_caller_run, &callers[i]);
    for (int i = 0; i < 3; i++)
        g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(threads[i])), ==, 0);
    curdi_copy_team_shrink(team, added);
    for (int i = 0; i < 3; i++) {
        g_free(callers[i].src);
        g_free(callers[i].dst);
    }
    curdi_copy_team_destroy(team);
}

/* Threads of this process, from /proc/self/status. */
static unsigned process_thread_count(void)
{
    char *status = NULL;
    const char *line;
    unsigned count = 0;
    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL,
                                      NULL));
    line = strstr(status, "\nThreads:");
    g_assert_nonnull(line);
    count = (unsigned)strtoul(line + strlen("\nThreads:"), NULL, 10);
    g_free(status);
    return count;
}

/* The thread count once it is back to `want`, polled for up to a second:
 * pthread_join returns once a thread has cleared its id, and the kernel
 * may count the thread a little longer while it reaps it (seen on a
 * loaded two-core host under ASan). */
static unsigned process_thread_count_settled(unsigned want)
{
    unsigned count = process_thread_count();
    for (int tries = 0; count != want && tries < 100; tries++) {
        g_usleep(10000);
        count = process_thread_count();
    }
    return count;
}

/* A growth adds workers that copy like the team's own, one growth at a
 * time; ending it returns at once, and the next growth or the team's end
 * joins its threads: none is left. Growths ended before their threads
 * have all started change nothing either (serves-concurrent-callers has
 * other callers' jobs run while a growth is in place). */
static void test_a_grown_team_copies_and_leaves_no_thread(void)
{
    curdi_copy_team *team = NULL;
    enum { PIECES = 24, PIECE = 64 * 1024, ROUNDS = 40 };
    unsigned char *src, *dst;
    curdi_copy_piece pieces[PIECES];
    curdi_copy_team_config config = {2, 0, 0};
    unsigned threads_before = process_thread_count();
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    equal_pieces(pieces, PIECES, PIECE, &src, &dst);
    for (int round = 0; round < ROUNDS; round++) {
        unsigned added = curdi_copy_team_grow(team, 1u + round % 4u);
        uint64_t warmth = 0;
        g_assert_cmpuint(added, ==, 1u + round % 4u);
        /* One growth at a time. */
        g_assert_cmpuint(curdi_copy_team_grow(team, 2), ==, 0);
        if (round % 3 == 0)
            warmth = curdi_copy_team_warm(team, 2, 1000000u);
        /* Every fifth growth ends before any job, its threads perhaps
         * still starting. */
        for (int job = 0; round % 5 != 4 && job < 3; job++) {
            curd_test_fill_random(src, PIECES * PIECE);
            curd_test_poison(dst, PIECES * PIECE);
            curdi_copy_team_run(team, pieces, PIECES, job % 2 == 1);
            assert_same_bytes(dst, src, PIECES * PIECE);
        }
        curdi_copy_team_cool(team, warmth);
        curdi_copy_team_shrink(team, added);
    }
    g_assert_cmpuint(curdi_copy_team_grow(NULL, 3), ==, 0);
    g_assert_cmpuint(curdi_copy_team_grow(team, 0), ==, 0);
    curdi_copy_team_shrink(NULL, 3);
    curdi_copy_team_shrink(team, 0);
    /* Ended a growth last: the team's end joins its threads. */
    curdi_copy_team_destroy(team);
    g_assert_cmpuint(process_thread_count_settled(threads_before), ==,
                     threads_before);
    g_free(src);
    g_free(dst);
}

static void test_large_pipelined_transfer_through_the_team(void)
{
    curdi_copy_team *team = NULL;
    curdi_copy_team_config config = {3, CURDI_COPY_PARALLEL_MIN, 0};
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    /* The larger download is written out with streaming stores. */
    for (int run = 0; run < 4; run++) {
        bool upload = run % 2 == 0;
        size_t len = run < 2 ? (5u << 20) + 12345u
                             : (size_t)CURDI_STREAMING_DOWNLOAD_MIN_DEFAULT + 4097u;
        unsigned char *device = g_malloc(len);
        unsigned char *host = g_malloc(len);
        unsigned char *expected = g_malloc(len);
        curdi_transfer_item items[3];
        curdi_plan plan;
        curdi_engine_result result;
        fake_device fake;
        curd_test_fill_random(device, len);
        curd_test_fill_random(host, len);
        /* Three adjacent items, one span, host in the same layout. */
        items[0] = item_at(1, device, 0, 1000, host, 0);
        items[1] = item_at(1, device, 1000, len - 2000, host + 1000, 0);
        items[2] = item_at(1, device, len - 1000, 1000, host + len - 1000, 0);
        memcpy(expected, upload ? host : device, len);
        g_assert_cmpint(curdi_plan_build(items, 3, NULL, 0, &plan), ==, CURD_OK);
        fake_init(&fake);
        g_assert_cmpint(run_plan(&plan, items, upload,
                                 default_chunk(plan.stream_bytes),
                                 &fake, team, &result),
                        ==, CURD_OK);
        g_assert_cmpuint(result.dma_bytes, ==, len);
        g_assert_cmpuint(result.fences, ==, 1);
        assert_same_bytes(upload ? device : host, expected, len);
        fake_fini(&fake);
        curdi_plan_free(&plan);
        g_free(device);
        g_free(host);
        g_free(expected);
    }
    curdi_copy_team_destroy(team);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/transfer/plan/adjacent-reads-fuse-into-one-staged-span",
                    test_adjacent_reads_fuse_into_one_staged_span);
    g_test_add_func(
        "/transfer/plan/registered-run-adjacent-on-both-sides-is-one-direct-dma",
        test_registered_run_adjacent_on_both_sides_is_one_direct_dma);
    g_test_add_func(
        "/transfer/plan/registered-items-in-another-order-are-staged-when-small",
        test_registered_items_in_another_order_are_staged_when_small);
    g_test_add_func("/transfer/engine/ranges-at-one-stride-are-one-strided-dma",
                    test_ranges_at_one_stride_are_one_strided_dma);
    g_test_add_func("/transfer/engine/a-plan-of-rows-is-one-strided-dma",
                    test_a_plan_of_rows_is_one_strided_dma);
    g_test_add_func(
        "/transfer/plan/large-registered-items-move-directly-one-dma-each",
        test_large_registered_items_move_directly_one_dma_each);
    g_test_add_func("/transfer/plan/zero-length-items-get-no-span-and-no-dma",
                    test_zero_length_items_get_no_span_and_no_dma);
    g_test_add_func(
        "/transfer/plan/overlapping-uploads-are-flagged-and-the-later-item-wins",
        test_overlapping_uploads_are_flagged_and_the_later_item_wins);
    g_test_add_func("/transfer/plan/chunk-size-policy", test_chunk_size_policy);
    g_test_add_func("/transfer/plan/gather-crossover-policy",
                    test_gather_crossover_policy);
    g_test_add_func("/transfer/plan/the-planner-gathers-many-small-spans-only",
                    test_the_planner_gathers_many_small_spans_only);
    g_test_add_func(
        "/transfer/plan/the-crossover-counts-ranges-at-one-stride-once",
        test_the_crossover_counts_ranges_at_one_stride_once);
    g_test_add_func(
        "/transfer/engine/scattered-reads-into-one-registered-run-gather-straight-there",
        test_scattered_reads_into_one_registered_run_gather_straight_there);
    g_test_add_func("/transfer/engine/random-gathered-batches-match-the-reference",
                    test_random_gathered_batches_match_the_reference);
    g_test_add_func("/transfer/engine/random-upload-batches-match-the-reference",
                    test_random_upload_batches_match_the_reference);
    g_test_add_func("/transfer/engine/random-download-batches-match-the-reference",
                    test_random_download_batches_match_the_reference);
    g_test_add_func(
        "/transfer/engine/many-chunks-reuse-slots-only-after-their-dmas-ran",
        test_many_chunks_reuse_slots_only_after_their_dmas_ran);
    g_test_add_func(
        "/transfer/engine/every-failing-op-returns-its-error-and-frees-everything",
        test_every_failing_op_returns_its_error_and_frees_everything);
    g_test_add_func("/transfer/plan/a-small-pageable-upload-goes-to-the-driver-as-it-is",
                    test_a_small_pageable_upload_goes_to_the_driver_as_it_is);
    g_test_add_func("/transfer/team/copies-every-piece",
                    test_copy_team_copies_every_piece);
    g_test_add_func("/transfer/team/touch-reads-only-the-destinations",
                    test_copy_team_touch_reads_only_the_destinations);
    g_test_add_func("/transfer/team/compare-finds-any-one-changed-byte",
                    test_copy_team_compare_finds_any_one_changed_byte);
    g_test_add_func("/transfer/team/streaming-copy-matches-memcpy-at-any-alignment",
                    test_streaming_copy_matches_memcpy_at_any_alignment);
    g_test_add_func("/transfer/team/a-warmed-team-copies-small-jobs-in-a-row",
                    test_a_warmed_team_copies_small_jobs_in_a_row);
    g_test_add_func("/transfer/team/serves-concurrent-callers",
                    test_copy_team_serves_concurrent_callers);
    g_test_add_func("/transfer/team/a-grown-team-copies-and-leaves-no-thread",
                    test_a_grown_team_copies_and_leaves_no_thread);
    g_test_add_func("/transfer/engine/large-pipelined-transfer-through-the-team",
                    test_large_pipelined_transfer_through_the_team);
    return g_test_run();
}
