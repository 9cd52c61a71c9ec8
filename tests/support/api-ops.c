/* api-ops.c - THE list: every public function that reaches the driver,
 * with how to set it up, call it and check it (api_ops[]), and every
 * other public function with why it makes no driver call
 * (api_quiet_functions[]). api-sweep.h says how a run uses an entry;
 * tests/test-fault-sweep.c fails when curd.h declares a function that is
 * in neither list.
 *
 * To add a function: write its setup, call and finish beside the others
 * of its group and add one line to api_ops[] (or, if it never reaches the
 * driver, one line to api_quiet_functions[]). A finish checks what the
 * call promises for the status it got, then undoes what setup and the call
 * made; after CURD_E_DEVICE_LOST it frees host state only. */
#include "support/api-sweep.h"
#include "support/fake-live.h"
#include "support/kernel-load.h"

#include "core/core.h"
#include "driver/driver.h"
#include <stdio.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void nothing(api_world *w)
{
    (void)w;
}

static bool lost(curd_status status)
{
    return status == CURD_E_DEVICE_LOST;
}

/* Fresh buffer contents, and fresh caller bytes in host[0, len) with a
 * copy to compare against. */
static void fresh(api_world *w, size_t len)
{
    api_world_reset_buffers(w);
    api_world_random(w, w->host, len);
    memcpy(w->host_copy, w->host, len);
}

static void host_unchanged(api_world *w, size_t from, size_t to)
{
    API_CHECK(memcmp(w->host + from, w->host_copy + from, to - from) == 0,
              "caller memory [%zu, %zu) changed", from, to);
}

/* ------------------------------------------------------------------------
 * Driver and devices
 * ---------------------------------------------------------------------- */
static curd_status count_call(api_world *w)
{
    (void)w;
    int count = -7;
    curd_status status = curd_device_count(&count);
    API_CHECK(status == CURD_OK ? count >= 1 : count == -7,
              "count %d after %s", count, curd_status_name(status));
    return status;
}

static void no_finish(api_world *w, curd_status status)
{
    (void)w, (void)status;
}

static curd_status open_call(api_world *w)
{
    curd_device_options options;
    api_world_options(&options);
    w->extra = NULL;
    curd_status status = curd_device_open(0, &options, &w->extra);
    API_CHECK((status == CURD_OK) == (w->extra != NULL),
              "out_device written by a failed open, or not by a good one");
    return status;
}

static void open_finish(api_world *w, curd_status status)
{
    (void)status;
    if (w->extra != NULL)
        API_OK(curd_device_close(w->extra));
    w->extra = NULL;
}

/* A second device with something in every module: a buffer with bytes,
 * pooled streams and events, a registration, a program it has run, a
 * graph batch it has run, and a session with a buffer lent and a set
 * held. */
static void close_setup(api_world *w)
{
    curd_device_options options;
    api_world_options(&options);
    API_OK(curd_device_open(0, &options, &w->extra));
    curd_buffer buffer;
    API_OK(curd_buffer_alloc(w->extra, 65536, &buffer));
    api_world_random(w, w->host, 65536);
    API_OK(curd_buffer_upload(w->extra, buffer, w->host, 65536));
    w->range = aligned_alloc(4096, 65536);
    API_CHECK(w->range != NULL, "out of host memory");
    if (w->can_register)
        API_OK(curd_host_register(w->extra, w->range, 65536));
    curd_program *program = NULL;
    API_OK(curd_test_kernel_load(w->extra, "add_one.ptx", "curd_add_one", &program));
    uint32_t n = 1000;
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = n;
    launch.block[0] = 128;
    curd_arg args[] = {curd_arg_host(CURD_ROLE_INOUT, w->host, n * 4u),
                       curd_arg_scalar(&n, sizeof n)};
    API_OK(curd_dispatch(w->extra, program, &launch, args, 2));

    curd_batch_options batch_options;
    curd_batch_options_init(&batch_options);
    batch_options.flags = CURD_BATCH_GRAPH;
    curd_batch *batch = NULL;
    API_OK(curd_batch_new(w->extra, &batch_options, &batch));
    curd_arg batch_args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                             curd_arg_scalar(&n, sizeof n)};
    API_OK(curd_batch_launch(batch, program, &launch, batch_args, 2, NULL));
    API_OK(curd_batch_download(batch, buffer, 0, n * 4u, w->host));
    API_OK(curd_batch_run(batch, NULL));

    API_OK(curd_session_new(w->extra, NULL, &w->session));
    API_OK(curd_session_alloc(w->session, 4096, &buffer));
    curd_static_payload payload = {w->host, 1000};
    API_OK(curd_session_upload_static(w->session, "api-sweep/close", &payload,
                                      1, &w->set));
}

static curd_status close_call(api_world *w)
{
    curd_status status = curd_device_close(w->extra);
    w->extra = NULL; /* gone whatever close said */
    return status;
}

/* The close detached the session: freeing it frees its shell. */
static void close_finish(api_world *w, curd_status status)
{
    (void)status;
    free(w->range);
    w->range = NULL;
    API_OK(curd_session_free(w->session));
    w->session = NULL;
    w->set = NULL;
}

static curd_status info_call(api_world *w)
{
    curd_device_props props;
    memset(&props, 0xEE, sizeof props);
    props.struct_size = sizeof props;
    curd_status status = curd_device_info(w->device, &props);
    if (status == CURD_OK)
        API_CHECK(props.total_memory_bytes != 0 &&
                      props.free_memory_bytes <= props.total_memory_bytes,
                  "props: %llu of %llu bytes free",
                  (unsigned long long)props.free_memory_bytes,
                  (unsigned long long)props.total_memory_bytes);
    else
        API_CHECK(props.ordinal == (int)0xEEEEEEEE,
                  "props written by a failed call");
    return status;
}

static curd_status self_test_call(api_world *w)
{
    char report[256] = "";
    curd_status status =
        curd_device_self_test(w->device, report, sizeof report);
    API_CHECK(status != CURD_OK || report[0] != '\0', "no report");
    return status;
}

/* ------------------------------------------------------------------------
 * Pools
 * ---------------------------------------------------------------------- */
static void cache_something(api_world *w)
{
    for (int kind = CURD_POOL_DEVICE; kind <= CURD_POOL_PINNED; kind++) {
        curd_block block;
        API_OK(curd_block_acquire(w->device, (curd_pool_kind)kind, 65536,
                                  &block));
        API_OK(curd_block_release(w->device, &block));
    }
}

static curd_status trim_call(api_world *w)
{
    return curd_device_trim(w->device, 0);
}

static void trim_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK)
        return;
    curd_stats stats = api_stats_of(w->device);
    API_CHECK(stats.device_pool.cached_bytes.current == 0 &&
                  stats.pinned_pool.cached_bytes.current == 0,
              "a trim to 0 left bytes cached");
}

static curd_status acquire(api_world *w, curd_pool_kind kind)
{
    curd_block untouched;
    memset(&w->block, 0xEE, sizeof w->block);
    untouched = w->block;
    curd_status status =
        curd_block_acquire(w->device, kind, API_UPSTREAM_BYTES, &w->block);
    API_CHECK(status == CURD_OK ||
                  memcmp(&w->block, &untouched, sizeof untouched) == 0,
              "out_block written by a failed acquire");
    return status;
}

static curd_status acquire_device_call(api_world *w)
{
    return acquire(w, CURD_POOL_DEVICE);
}

static curd_status acquire_pinned_call(api_world *w)
{
    return acquire(w, CURD_POOL_PINNED);
}

static void acquire_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_OK(curd_block_release(w->device, &w->block));
}

static void acquire_device_block(api_world *w)
{
    API_OK(curd_block_acquire(w->device, CURD_POOL_DEVICE, API_UPSTREAM_BYTES,
                              &w->block));
}

static void acquire_pinned_block(api_world *w)
{
    API_OK(curd_block_acquire(w->device, CURD_POOL_PINNED, API_UPSTREAM_BYTES,
                              &w->block));
}

static curd_status release_call(api_world *w)
{
    return curd_block_release(w->device, &w->block);
}

/* A failed release changed nothing: the block is still live. */
static void release_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK && !lost(status))
        API_OK(curd_block_release(w->device, &w->block));
}

/* ------------------------------------------------------------------------
 * Resident buffers and fills
 * ---------------------------------------------------------------------- */
/* The status of an allocation into made, which was zeroed before it:
 * written exactly when it succeeded. */
static curd_status made_if_ok(api_world *w, curd_status status)
{
    API_CHECK((status == CURD_OK) == (w->made.id != 0),
              "out_buffer written by a failed allocation, or not by a good"
              " one");
    return status;
}

static curd_status alloc_call(api_world *w)
{
    w->made.id = 0;
    return made_if_ok(
        w, curd_buffer_alloc(w->device, API_UPSTREAM_BYTES, &w->made));
}

static void alloc_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_OK(curd_buffer_free(w->device, w->made));
}

static void alloc_made(api_world *w)
{
    API_OK(curd_buffer_alloc(w->device, API_UPSTREAM_BYTES, &w->made));
}

static curd_status free_call(api_world *w)
{
    return curd_buffer_free(w->device, w->made);
}

static void free_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK && !lost(status))
        API_OK(curd_buffer_free(w->device, w->made));
}

static curd_status fill_call(api_world *w)
{
    return curd_buffer_fill(w->device, w->small, 100, 2000, 0xA5);
}

static void fill_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK)
        return;
    memset(w->small_model + 100, 0xA5, 2000);
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
}

static curd_status clear_call(api_world *w)
{
    return curd_buffer_clear(w->device, w->large);
}

static void clear_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK)
        return;
    memset(w->large_model, 0, API_LARGE_BYTES);
    api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
}

/* ------------------------------------------------------------------------
 * Transfers. Sources are never written; a failed download writes nothing
 * outside its named ranges (and nothing at all through one staging
 * chunk).
 * ---------------------------------------------------------------------- */
static void fresh_small(api_world *w)
{
    fresh(w, API_SMALL_BYTES);
}

static void fresh_all(api_world *w)
{
    fresh(w, w->host_len);
}

static curd_status upload_call(api_world *w)
{
    return curd_buffer_upload(w->device, w->small, w->host, API_SMALL_BYTES);
}

static void upload_finish(api_world *w, curd_status status)
{
    host_unchanged(w, 0, API_SMALL_BYTES);
    if (status == CURD_OK)
        api_world_expect_buffer(w, w->small, w->host, API_SMALL_BYTES);
}

static curd_status upload_large_call(api_world *w)
{
    return curd_buffer_upload(w->device, w->large, w->host, API_LARGE_BYTES);
}

static void upload_large_finish(api_world *w, curd_status status)
{
    host_unchanged(w, 0, w->host_len);
    if (status == CURD_OK)
        api_world_expect_buffer(w, w->large, w->host, API_LARGE_BYTES);
}

/* From registered memory when the device can register: one direct DMA. */
#define AT_OFFSET 1000u
#define AT_BYTES 100000u
static curd_status upload_at_call(api_world *w)
{
    return curd_buffer_upload_at(w->device, w->large, AT_OFFSET,
                                 w->registered, AT_BYTES);
}

static void upload_at_finish(api_world *w, curd_status status)
{
    host_unchanged(w, 0, w->host_len);
    if (status != CURD_OK)
        return;
    memcpy(w->large_model + AT_OFFSET, w->registered, AT_BYTES);
    api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
}

static curd_status download_call(api_world *w)
{
    return curd_buffer_download(w->device, w->small, w->host,
                                API_SMALL_BYTES);
}

static void download_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_CHECK(memcmp(w->host, w->small_model, API_SMALL_BYTES) == 0,
                  "the download's bytes differ from the buffer's");
    else
        host_unchanged(w, 0, w->host_len); /* one chunk: copied after */
}

#define RANGE_OFFSET 77u
#define RANGE_BYTES (API_LARGE_BYTES - RANGE_OFFSET)
static curd_status download_range_call(api_world *w)
{
    return curd_buffer_download_range(w->device, w->large, RANGE_OFFSET,
                                      RANGE_BYTES, w->host, w->host_len);
}

static void download_range_finish(api_world *w, curd_status status)
{
    host_unchanged(w, RANGE_BYTES, w->host_len);
    if (status == CURD_OK)
        API_CHECK(memcmp(w->host, w->large_model + RANGE_OFFSET,
                         RANGE_BYTES) == 0,
                  "the range's bytes differ from the buffer's");
}

static curd_status download_direct_call(api_world *w)
{
    return curd_buffer_download_range(w->device, w->large, 0, AT_BYTES,
                                      w->registered, AT_BYTES);
}

static void download_direct_finish(api_world *w, curd_status status)
{
    size_t at = (size_t)(w->registered - w->host);
    host_unchanged(w, 0, at);
    host_unchanged(w, at + AT_BYTES, w->host_len);
    if (status == CURD_OK)
        API_CHECK(memcmp(w->registered, w->large_model, AT_BYTES) == 0,
                  "the direct download's bytes differ from the buffer's");
}

/* Batches: pieces of both buffers with gaps between them, one of them
 * large and one in registered memory. */
typedef struct piece {
    int large;
    size_t offset, len, host_at; /* host_at past the pageable half: the
                                    registered half */
} piece;

static const piece pieces[] = {
    {0, 0, 1000, 0},
    {0, 2000, 999, 1000},
    {1, 5000, 300000, 5000},
    {1, 400000, 70000, API_LARGE_BYTES + 10000},
};
#define PIECES (sizeof pieces / sizeof pieces[0])

static curd_buffer piece_buffer(const api_world *w, const piece *p)
{
    return p->large ? w->large : w->small;
}

static unsigned char *piece_model(const api_world *w, const piece *p)
{
    return p->large ? w->large_model : w->small_model;
}

/* Rows: 32 of 4 KiB at one stride of the large buffer into registered
 * memory at another, and 16 at a third stride into pageable memory, so
 * that each group crosses in one strided DMA (lib/transfer/plan.h). Each group
 * alone is a batch of rows, checked as one range on each side
 * (lib/transfer/transfer.c): the first 32 in registered memory, the last 16 in
 * pageable memory. */
#define ROW_PIECES 48u
#define REGISTERED_ROW_PIECES 32u
#define PAGEABLE_ROW_PIECES (ROW_PIECES - REGISTERED_ROW_PIECES)
static const piece *row_pieces(void)
{
    static piece rows[ROW_PIECES];
    for (size_t i = 0; i < ROW_PIECES; i++)
        rows[i] = i < 32 ? (piece){1, i * 8192u, 4096u,
                                   API_LARGE_BYTES + i * 8000u}
                         : (piece){1, 300000u + (i - 32) * 6000u, 4096u,
                                   (i - 32) * 4096u};
    return rows;
}

static curd_status upload_pieces(api_world *w, const piece *table,
                                 size_t count)
{
    curd_upload items[ROW_PIECES];
    for (size_t i = 0; i < count; i++)
        items[i] = (curd_upload){piece_buffer(w, &table[i]), table[i].offset,
                                 w->host + table[i].host_at, table[i].len};
    return curd_upload_batch(w->device, items, count);
}

static void upload_pieces_finish(api_world *w, const piece *table,
                                 size_t count, curd_status status)
{
    host_unchanged(w, 0, w->host_len);
    if (status != CURD_OK)
        return;
    for (size_t i = 0; i < count; i++)
        memcpy(piece_model(w, &table[i]) + table[i].offset,
               w->host + table[i].host_at, table[i].len);
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
    api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
}

static curd_status download_pieces(api_world *w, const piece *table,
                                   size_t count)
{
    curd_download items[ROW_PIECES];
    for (size_t i = 0; i < count; i++)
        items[i] = (curd_download){piece_buffer(w, &table[i]),
                                   table[i].offset, table[i].len,
                                   w->host + table[i].host_at, table[i].len};
    return curd_download_batch(w->device, items, count);
}

static void download_pieces_finish(api_world *w, const piece *table,
                                   size_t count, curd_status status)
{
    /* Outside the pieces nothing is written, whatever happened. */
    unsigned char *expected = malloc(w->host_len);
    API_CHECK(expected != NULL, "out of host memory");
    memcpy(expected, w->host_copy, w->host_len);
    for (size_t i = 0; i < count; i++)
        memcpy(expected + table[i].host_at,
               status == CURD_OK
                   ? piece_model(w, &table[i]) + table[i].offset
                   : w->host + table[i].host_at,
               table[i].len);
    bool same = memcmp(w->host, expected, w->host_len) == 0;
    free(expected);
    API_CHECK(same, status == CURD_OK
                        ? "the batch's bytes differ from the buffers'"
                        : "a failed batch wrote outside its pieces");
}

static curd_status upload_batch_call(api_world *w)
{
    return upload_pieces(w, pieces, PIECES);
}

static void upload_batch_finish(api_world *w, curd_status status)
{
    upload_pieces_finish(w, pieces, PIECES, status);
}

static curd_status download_batch_call(api_world *w)
{
    return download_pieces(w, pieces, PIECES);
}

static void download_batch_finish(api_world *w, curd_status status)
{
    download_pieces_finish(w, pieces, PIECES, status);
}

static curd_status upload_rows_call(api_world *w)
{
    return upload_pieces(w, row_pieces(), ROW_PIECES);
}

static void upload_rows_finish(api_world *w, curd_status status)
{
    upload_pieces_finish(w, row_pieces(), ROW_PIECES, status);
}

static curd_status upload_registered_rows_call(api_world *w)
{
    return upload_pieces(w, row_pieces(), REGISTERED_ROW_PIECES);
}

static void upload_registered_rows_finish(api_world *w, curd_status status)
{
    upload_pieces_finish(w, row_pieces(), REGISTERED_ROW_PIECES, status);
}

static curd_status download_registered_rows_call(api_world *w)
{
    return download_pieces(w, row_pieces(), REGISTERED_ROW_PIECES);
}

static void download_registered_rows_finish(api_world *w,
                                            curd_status status)
{
    download_pieces_finish(w, row_pieces(), REGISTERED_ROW_PIECES, status);
}

static const piece *pageable_row_pieces(void)
{
    return row_pieces() + REGISTERED_ROW_PIECES;
}

static curd_status upload_pageable_rows_call(api_world *w)
{
    return upload_pieces(w, pageable_row_pieces(), PAGEABLE_ROW_PIECES);
}

static void upload_pageable_rows_finish(api_world *w, curd_status status)
{
    upload_pieces_finish(w, pageable_row_pieces(), PAGEABLE_ROW_PIECES,
                         status);
}

static curd_status download_pageable_rows_call(api_world *w)
{
    return download_pieces(w, pageable_row_pieces(), PAGEABLE_ROW_PIECES);
}

static void download_pageable_rows_finish(api_world *w, curd_status status)
{
    download_pieces_finish(w, pageable_row_pieces(), PAGEABLE_ROW_PIECES,
                           status);
}

static curd_status download_rows_call(api_world *w)
{
    return download_pieces(w, row_pieces(), ROW_PIECES);
}

static void download_rows_finish(api_world *w, curd_status status)
{
    download_pieces_finish(w, row_pieces(), ROW_PIECES, status);
}

/* ------------------------------------------------------------------------
 * Registrations and asynchronous uploads
 * ---------------------------------------------------------------------- */
#define RANGE_LEN 65536u
static void new_range(api_world *w)
{
    w->range = aligned_alloc(4096, RANGE_LEN);
    API_CHECK(w->range != NULL, "out of host memory");
}

static curd_status register_call(api_world *w)
{
    return curd_host_register(w->device, w->range, RANGE_LEN);
}

/* A failed registration left nothing registered: registering the range
 * works. */
static void register_finish(api_world *w, curd_status status)
{
    if (!lost(status)) {
        if (status != CURD_OK)
            API_OK(curd_host_register(w->device, w->range, RANGE_LEN));
        API_OK(curd_host_unregister(w->device, w->range));
    }
    free(w->range);
    w->range = NULL;
}

static void registered_range(api_world *w)
{
    new_range(w);
    API_OK(curd_host_register(w->device, w->range, RANGE_LEN));
}

static curd_status unregister_call(api_world *w)
{
    return curd_host_unregister(w->device, w->range);
}

/* A failed unregistration left the range registered and usable. */
static void unregister_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK && !lost(status))
        API_OK(curd_host_unregister(w->device, w->range));
    free(w->range);
    w->range = NULL;
}

static curd_status upload_async_call(api_world *w)
{
    return curd_buffer_upload_async(w->device, w->small, 0, w->registered,
                                    API_SMALL_BYTES);
}

static void upload_async_finish(api_world *w, curd_status status)
{
    if (lost(status))
        return;
    /* Nothing is left pending after a failure; the bytes arrive after
     * the sync on success. */
    API_OK(curd_device_sync_uploads(w->device));
    host_unchanged(w, 0, w->host_len);
    api_world_expect_buffer(w, w->small,
                            status == CURD_OK ? w->registered
                                              : w->small_model,
                            API_SMALL_BYTES);
}

static void upload_pending(api_world *w)
{
    fresh_all(w);
    API_OK(curd_buffer_upload_async(w->device, w->small, 0, w->registered,
                                    API_SMALL_BYTES));
}

static curd_status sync_call(api_world *w)
{
    return curd_device_sync_uploads(w->device);
}

/* A failed sync keeps the uploads pending until one succeeds. */
static void sync_finish(api_world *w, curd_status status)
{
    if (lost(status))
        return;
    if (status != CURD_OK) {
        API_CHECK(curd_buffer_free(w->device, w->small) == CURD_E_BUSY,
                  "the buffer of a pending upload could be freed");
        API_OK(curd_device_sync_uploads(w->device));
    }
    api_world_expect_buffer(w, w->small, w->registered, API_SMALL_BYTES);
}

/* ------------------------------------------------------------------------
 * Copies between buffers. Every copy reads buffers that no copy of the
 * same call writes, so a failed call (which may have written part of its
 * destinations, curd.h) can be made again and must then leave exactly
 * the model's bytes.
 * ---------------------------------------------------------------------- */
#define COPY_SPAN (1u << 20)

/* Within the world's device: small's bytes into two places of large. */
static void copies_within(const api_world *w, curd_copy copies[2])
{
    copies[0] = (curd_copy){w->large, 1000, w->small, 0, API_SMALL_BYTES};
    copies[1] = (curd_copy){w->large, COPY_SPAN + 5, w->small, 7,
                            API_SMALL_BYTES - 7};
}

static curd_status copy_within_call(api_world *w)
{
    curd_copy copies[2];
    copies_within(w, copies);
    return curd_buffer_copy(w->device, w->device, copies, 2);
}

/* Made again after a failure; the bytes as the model says, the model
 * kept for the entries after. */
static void copy_within_finish(api_world *w, curd_status status)
{
    if (lost(status))
        return;
    if (status != CURD_OK)
        API_OK(copy_within_call(w));
    memcpy(w->large_model + 1000, w->small_model, API_SMALL_BYTES);
    memcpy(w->large_model + COPY_SPAN + 5, w->small_model + 7,
           API_SMALL_BYTES - 7);
    api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
}

static curd_status copy_within_async_call(api_world *w)
{
    curd_copy copies[2];
    copies_within(w, copies);
    w->pending = NULL;
    curd_status status =
        curd_buffer_copy_async(w->device, w->device, copies, 2, &w->pending);
    API_CHECK((status == CURD_OK) == (w->pending != NULL),
              "out_pending written by a failed copy, or not by a good one");
    return status;
}

/* After an asynchronous call: its pending, if it made one, waited for
 * when the call succeeded, then freed. */
static void async_pending_end(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_OK(curd_pending_wait(w->pending, NULL));
    if (w->pending != NULL)
        API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
}

/* After a call on a pending (a wait, whether it failed or not): freeing it
 * gives everything back. */
static void pending_let_go(api_world *w)
{
    API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
}

static void copy_within_async_finish(api_world *w, curd_status status)
{
    async_pending_end(w, status);
    copy_within_finish(w, status);
}

static void copy_pending_made(api_world *w)
{
    fresh_all(w);
    API_OK(copy_within_async_call(w));
}

/* Waited for (the wait failed or not): freeing it gives back everything,
 * and the copy is in place or can be made again. */
static void copy_wait_finish(api_world *w, curd_status status)
{
    pending_let_go(w);
    copy_within_finish(w, status);
}

/* A second device (ordinal 1 where there is one, else a second handle of
 * device 0) in extra, opened with CURD_PEER_ACCESS as given, with a
 * buffer (made) holding host's fresh bytes, which host_copy keeps. */
static void second_device_with(api_world *w, const char *peer_access)
{
    int count = 0;
    curd_device_options options;
    API_OK(curd_device_count(&count));
    api_world_options(&options);
    fresh_all(w);
    if (peer_access != NULL)
        setenv("CURD_PEER_ACCESS", peer_access, 1);
    curd_status status =
        curd_device_open(count >= 2 ? 1 : 0, &options, &w->extra);
    unsetenv("CURD_PEER_ACCESS");
    API_OK(status);
    API_OK(curd_buffer_alloc(w->extra, API_LARGE_BYTES, &w->made));
    API_OK(curd_buffer_upload(w->extra, w->made, w->host, API_LARGE_BYTES));
}

static void second_device(api_world *w)
{
    second_device_with(w, NULL);
}

static void second_device_staged(api_world *w)
{
    second_device_with(w, "0");
}

/* Three spans from the second device's buffer into the world's: three
 * staging chunks when staged, so the third waits for the first's slot. */
static curd_status copy_between_call(api_world *w)
{
    curd_copy copies[3] = {
        {w->large, 0, w->made, 0, COPY_SPAN},
        {w->small, 0, w->made, COPY_SPAN + 100, API_SMALL_BYTES},
        {w->large, COPY_SPAN + 10, w->made, 2u * COPY_SPAN, 77},
    };
    return curd_buffer_copy(w->device, w->extra, copies, 3);
}

static void copy_between_finish(api_world *w, curd_status status)
{
    if (!lost(status)) {
        if (status != CURD_OK)
            API_OK(copy_between_call(w));
        memcpy(w->large_model, w->host_copy, COPY_SPAN);
        memcpy(w->small_model, w->host_copy + COPY_SPAN + 100,
               API_SMALL_BYTES);
        memcpy(w->large_model + COPY_SPAN + 10, w->host_copy + 2u * COPY_SPAN,
               77);
        api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
        api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
        API_OK(curd_buffer_free(w->extra, w->made));
    }
    /* Closed whatever happened: a lost device's close frees what it
     * holds. */
    (void)curd_device_close(w->extra);
    w->extra = NULL;
}

/* ------------------------------------------------------------------------
 * Programs. The world keeps one idle module (module_cache_count 1), so
 * loading a second image evicts the first.
 * ---------------------------------------------------------------------- */
static void evict_saxpy(api_world *w)
{
    curd_program *filler = NULL;
    API_OK(curd_test_kernel_load(w->device, "scalars.ptx", "curd_scalars", &filler));
    API_OK(curd_program_free(filler));
}

/* The harness's saxpy, not cached: a JIT and its function's reads. */
static curd_status load_call(api_world *w)
{
    w->programs[0] = NULL;
    curd_status status = curd_test_kernel_load(w->device, "saxpy.ptx", "curd_saxpy",
                                        &w->programs[0]);
    API_CHECK((status == CURD_OK) == (w->programs[0] != NULL),
              "out_program written by a failed load, or not by a good one");
    return status;
}

/* The linker's harness (tests/kernels/link_*), not cached: a link of two
 * PTX modules, the linked image's load and its function's reads. */
static curd_status link_load_call(api_world *w)
{
    static const char *const links[] = {"link_mix.ptx"};
    w->programs[0] = NULL;
    curd_status status = curd_test_kernel_load_linked(
        w->device, "link_apply.ptx", links, 1, "curd_link_apply",
        &w->programs[0]);
    API_CHECK((status == CURD_OK) == (w->programs[0] != NULL),
              "out_program written by a failed link, or not by a good one");
    return status;
}

static void load_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_OK(curd_program_free(w->programs[0]));
    w->programs[0] = NULL;
}

static void two_programs_one_freed(api_world *w)
{
    curd_program *saxpy = NULL;
    API_OK(curd_test_kernel_load(w->device, "saxpy.ptx", "curd_saxpy", &saxpy));
    API_OK(curd_test_kernel_load(w->device, "scalars.ptx", "curd_scalars",
                          &w->programs[1]));
    API_OK(curd_program_free(saxpy));
}

static curd_status program_free_call(api_world *w)
{
    curd_status status = curd_program_free(w->programs[1]);
    w->programs[1] = NULL; /* freed whatever it said */
    return status;
}

/* ------------------------------------------------------------------------
 * Dispatch: add_one over borrowed memory or a resident buffer.
 * ---------------------------------------------------------------------- */
#define WORDS 3001u
#define WORD_BYTES (WORDS * sizeof(uint32_t))
/* Fresh random words, of which add_one is to add 1 to the first count
 * (its scalar argument, word_count). */
static void words_of(api_world *w, uint32_t count)
{
    if (w->words == NULL) {
        w->words = malloc(WORD_BYTES);
        w->words_want = malloc(WORD_BYTES);
        API_CHECK(w->words != NULL && w->words_want != NULL,
                  "out of host memory");
    }
    w->word_count = count;
    api_world_random(w, w->words, WORD_BYTES);
    for (uint32_t i = 0; i < WORDS; i++)
        w->words_want[i] = w->words[i] + (i < count ? 1u : 0u);
}

static void fresh_words(api_world *w)
{
    words_of(w, WORDS);
}

static curd_launch words_launch(void)
{
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = WORDS;
    launch.block[0] = 128;
    return launch;
}

static bool words_added(const api_world *w)
{
    return memcmp(w->words, w->words_want, WORD_BYTES) == 0;
}

static bool words_untouched(const api_world *w)
{
    for (uint32_t i = 0; i < WORDS; i++)
        if (w->words[i] + (i < w->word_count ? 1u : 0u) != w->words_want[i])
            return false;
    return true;
}

static curd_status borrowed_dispatch_call(api_world *w)
{
    curd_launch launch = words_launch();
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, w->words, WORD_BYTES),
        curd_arg_scalar(&w->word_count, sizeof w->word_count)};
    return curd_dispatch(w->device, w->add_one, &launch, args, 2);
}

/* A failed dispatch leaves caller memory untouched. */
static void dispatch_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_CHECK(words_added(w), "add_one's outputs are wrong");
    else if (!lost(status))
        API_CHECK(words_untouched(w), "a failed dispatch wrote its outputs");
}

static void words_in_buffer(api_world *w)
{
    fresh_words(w);
    API_OK(curd_buffer_alloc(w->device, WORD_BYTES, &w->made));
    API_OK(curd_buffer_upload(w->device, w->made, w->words,
                              WORD_BYTES));
}

static curd_status resident_dispatch_call(api_world *w)
{
    curd_launch launch = words_launch();
    curd_arg buffer = curd_arg_buffer(CURD_ROLE_INOUT, w->made);
    buffer.host = w->words; /* read back */
    buffer.byte_len = WORD_BYTES;
    curd_arg args[] = {buffer,
                       curd_arg_scalar(&w->word_count, sizeof w->word_count)};
    return curd_dispatch(w->device, w->add_one, &launch, args, 2);
}

static void resident_dispatch_finish(api_world *w, curd_status status)
{
    dispatch_finish(w, status);
    if (!lost(status))
        API_OK(curd_buffer_free(w->device, w->made));
}

static curd_status async_dispatch(api_world *w)
{
    curd_launch launch = words_launch();
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, w->words, WORD_BYTES),
        curd_arg_scalar(&w->word_count, sizeof w->word_count)};
    w->pending = NULL;
    curd_status status = curd_dispatch_async(w->device, w->add_one, &launch,
                                             args, 2, &w->pending);
    API_CHECK((status == CURD_OK) == (w->pending != NULL),
              "out_pending written by a failed dispatch, or not by a good"
              " one");
    return status;
}

static void pending_made(api_world *w)
{
    fresh_words(w);
    API_OK(async_dispatch(w));
}

/* A stream of the caller's own in the device's context, as another
 * library's would be (made through curd's driver table, which the test
 * reaches), and a dispatch to enqueue on it. */
static void callers_stream_made(api_world *w)
{
    fresh_words(w);
    curdi_cu_stream stream = NULL;
    API_OK(curdi_core_device_enter(w->device));
    curdi_cu_result rc = curdi_driver_get()->cuStreamCreate(
        &stream, CURDI_CU_STREAM_NON_BLOCKING);
    curdi_core_device_leave(w->device);
    API_CHECK(rc == CURDI_CUDA_SUCCESS, "cuStreamCreate failed with %u", rc);
    w->caller_stream = stream;
}

static curd_status on_callers_stream_call(api_world *w)
{
    curd_launch launch = words_launch();
    launch.cu_stream = w->caller_stream;
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, w->words, WORD_BYTES),
        curd_arg_scalar(&w->word_count, sizeof w->word_count)};
    w->pending = NULL;
    return curd_dispatch_async(w->device, w->add_one, &launch, args, 2,
                               &w->pending);
}

static void async_finish(api_world *w, curd_status status);

/* As async_finish; then the caller's stream goes (with a lost context it
 * went with it). */
static void on_callers_stream_finish(api_world *w, curd_status status)
{
    async_finish(w, status);
    if (!lost(status)) {
        API_OK(curdi_core_device_enter(w->device));
        curdi_cu_result rc = curdi_driver_get()->cuStreamDestroy(
            (curdi_cu_stream)w->caller_stream);
        curdi_core_device_leave(w->device);
        API_CHECK(rc == CURDI_CUDA_SUCCESS, "cuStreamDestroy failed with %u",
                  rc);
    }
    w->caller_stream = NULL;
}

static void async_finish(api_world *w, curd_status status)
{
    async_pending_end(w, status);
    dispatch_finish(w, status);
}

static curd_status wait_call(api_world *w)
{
    curd_timing timing = {.struct_size = sizeof timing};
    return curd_pending_wait(w->pending, &timing);
}

/* Waited for (the wait failed or not): freeing it gives back everything. */
static void wait_finish(api_world *w, curd_status status)
{
    pending_let_go(w);
    dispatch_finish(w, status);
}

static curd_status ready_call(api_world *w)
{
    int ready = -1;
    curd_status status = curd_pending_ready(w->pending, &ready);
    API_CHECK(status == CURD_OK ? (ready == 0 || ready == 1) : ready == -1,
              "ready is %d after %s", ready, curd_status_name(status));
    return status;
}

/* Asking whether it is done changes nothing about the dispatch: it
 * completes with its outputs whatever the answer was. */
static void ready_finish(api_world *w, curd_status status)
{
    curd_status waited = CURD_OK;
    if (!lost(status))
        waited = curd_pending_wait(w->pending, NULL);
    API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
    API_OK(waited);
    if (!lost(status))
        API_CHECK(words_added(w), "add_one's outputs are wrong");
}

static curd_status pending_free_call(api_world *w)
{
    curd_status status = curd_pending_free(w->pending);
    w->pending = NULL; /* freed whatever it said: a failed wait is final,
                          and the free drains the work first
                          (curd_dispatch(3)) */
    return status;
}

/* Freeing writes no output, whether the work was done or not. */
static void pending_free_finish(api_world *w, curd_status status)
{
    (void)status;
    API_CHECK(words_untouched(w), "curd_pending_free wrote the outputs");
}

/* ------------------------------------------------------------------------
 * Imported memory: the small buffer's own memory imported again, as
 * another library's allocation would be.
 * ---------------------------------------------------------------------- */
static curd_status import_call(api_world *w)
{
    uint64_t device_ptr = 0;
    API_OK(curd_buffer_device_ptr(w->device, w->small, &device_ptr));
    w->made.id = 0;
    return curd_buffer_import(w->device, device_ptr, API_SMALL_BYTES,
                              &w->made);
}

/* Imported, the handle reads the small buffer's bytes; freed, it is
 * forgotten and the small buffer's memory stays. */
static void import_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK) {
        API_CHECK(w->made.id == 0, "a failed import wrote out_buffer");
        return;
    }
    api_world_expect_buffer(w, w->made, w->small_model, API_SMALL_BYTES);
    API_OK(curd_buffer_free(w->device, w->made));
    w->made.id = 0;
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
}

/* ------------------------------------------------------------------------
 * Shareable buffers: made, exported, imported (in this process: the
 * driver calls are the same as in another) and freed.
 * ---------------------------------------------------------------------- */
static int shared_fd = -1;
static curd_buffer shared_import;

static curd_status alloc_shareable_call(api_world *w)
{
    w->made.id = 0;
    return curd_buffer_alloc_shareable(w->device, API_SMALL_BYTES, &w->made);
}

/* Made, it holds what is uploaded; failed, out_buffer is untouched. */
static void alloc_shareable_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK) {
        API_CHECK(w->made.id == 0, "a failed allocation wrote out_buffer");
        return;
    }
    API_OK(curd_buffer_upload(w->device, w->made, w->small_model,
                              API_SMALL_BYTES));
    api_world_expect_buffer(w, w->made, w->small_model, API_SMALL_BYTES);
    API_OK(curd_buffer_free(w->device, w->made));
    w->made.id = 0;
}

/* A shareable buffer holding the small buffer's bytes. */
static void shareable_made(api_world *w)
{
    api_world_reset_buffers(w);
    API_OK(curd_buffer_alloc_shareable(w->device, API_SMALL_BYTES, &w->made));
    API_OK(curd_buffer_upload(w->device, w->made, w->small_model,
                              API_SMALL_BYTES));
}

/* The shareable buffer freed, unless the device was lost (the world's
 * reopening closes it). */
static void shareable_freed(api_world *w, curd_status status)
{
    if (!lost(status) && w->made.id != 0)
        API_OK(curd_buffer_free(w->device, w->made));
    w->made.id = 0;
}

static curd_status export_fd_call(api_world *w)
{
    shared_fd = -1;
    return curd_buffer_export_fd(w->device, w->made, &shared_fd);
}

/* Exported, the descriptor imports to the same bytes; failed, no
 * descriptor. */
static void export_fd_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK) {
        curd_buffer imported = {0};
        API_OK(curd_buffer_import_fd(w->device, shared_fd, API_SMALL_BYTES,
                                     &imported));
        api_world_expect_buffer(w, imported, w->small_model, API_SMALL_BYTES);
        API_OK(curd_buffer_free(w->device, imported));
        close(shared_fd);
    } else {
        API_CHECK(shared_fd == -1, "a failed export wrote out_fd");
    }
    shared_fd = -1;
    shareable_freed(w, status);
}

static void shareable_exported(api_world *w)
{
    shareable_made(w);
    API_OK(curd_buffer_export_fd(w->device, w->made, &shared_fd));
}

static curd_status import_fd_call(api_world *w)
{
    shared_import.id = 0;
    return curd_buffer_import_fd(w->device, shared_fd, API_SMALL_BYTES,
                                 &shared_import);
}

/* Imported, the handle reads the exporter's bytes, and still does after
 * the exporter's buffer is freed; failed, out_buffer is untouched. The
 * descriptor stays the caller's either way. */
static void import_fd_finish(api_world *w, curd_status status)
{
    API_CHECK(fcntl(shared_fd, F_GETFD) != -1,
              "curd_buffer_import_fd closed the caller's descriptor");
    close(shared_fd);
    shared_fd = -1;
    if (status != CURD_OK) {
        API_CHECK(shared_import.id == 0, "a failed import wrote out_buffer");
        shareable_freed(w, status);
        return;
    }
    api_world_expect_buffer(w, shared_import, w->small_model,
                            API_SMALL_BYTES);
    shareable_freed(w, status);
    api_world_expect_buffer(w, shared_import, w->small_model,
                            API_SMALL_BYTES);
    API_OK(curd_buffer_free(w->device, shared_import));
    shared_import.id = 0;
}

/* Freed, the handle is stale; failed, the buffer is as it was. */
static void free_shareable_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK) {
        size_t size = 0;
        API_CHECK(curd_buffer_size(w->device, w->made, &size)
                      == CURD_E_STALE_HANDLE,
                  "a freed shareable buffer is still live");
        w->made.id = 0;
        return;
    }
    if (!lost(status))
        api_world_expect_buffer(w, w->made, w->small_model, API_SMALL_BYTES);
    shareable_freed(w, status);
}

/* ------------------------------------------------------------------------
 * An asynchronous download of the small buffer into registered memory (or,
 * where the driver cannot register, nowhere page-locked: refused).
 * ---------------------------------------------------------------------- */
static curd_status download_async_call(api_world *w)
{
    w->pending = NULL;
    return curd_buffer_download_async(w->device, w->small, 0, w->registered,
                                      API_SMALL_BYTES, &w->pending);
}

/* Waited for, the bytes are the small buffer's; failed, no pending. */
static void download_async_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK) {
        API_CHECK(w->pending == NULL, "a failed download wrote out_pending");
        return;
    }
    curd_status waited = curd_pending_wait(w->pending, NULL);
    API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
    API_OK(waited);
    API_CHECK(memcmp(w->registered, w->small_model, API_SMALL_BYTES) == 0,
              "the downloaded bytes differ from the small buffer's");
}

/* ------------------------------------------------------------------------
 * Working beside other CUDA code: the legacy default stream (NULL) stands
 * for a caller's stream, and a dispatch's end event for a caller's event.
 * ---------------------------------------------------------------------- */
static curd_status wait_stream_call(api_world *w)
{
    return curd_device_wait_stream(w->device, NULL);
}

/* A dispatch in flight whose end event has not completed: on the
 * stand-in, whose streams run at once, events are held
 * (fake_hold_events) until the finish, so that curd_device_wait_event
 * goes past its query to the waits; a real GPU is still running it. */
static void unfinished_pending_made(api_world *w)
{
    fake_hold_events(1);
    pending_made(w);
}

static void unfinished_ready_finish(api_world *w, curd_status status)
{
    fake_hold_events(0);
    ready_finish(w, status);
}

static curd_status wait_event_call(api_world *w)
{
    void *event = NULL;
    API_OK(curd_pending_event(w->pending, &event));
    return curd_device_wait_event(w->device, event);
}

static curd_status pending_stream_wait_call(api_world *w)
{
    return curd_pending_stream_wait(w->pending, NULL);
}

/* ------------------------------------------------------------------------
 * Batches: add_one over a resident buffer (made), recorded as a fill, an
 * upload of the words, the launch and a download back into them; run
 * streamed (the launch cooperative) or as a graph: captured, replayed,
 * and updated in place after curd_batch_set_args. A failed run writes no
 * download and leaves the batch to run again. Recording makes no driver
 * call but a cooperative launch's occupancy query.
 * ---------------------------------------------------------------------- */
static curd_launch batch_words_launch(bool cooperative)
{
    curd_launch launch = words_launch();
    launch.flags = cooperative ? CURD_LAUNCH_COOPERATIVE : 0u;
    return launch;
}

/* The launch's arguments: made, and the count as word_count is now. */
static void batch_words_args(api_world *w, curd_arg args[2])
{
    args[0] = curd_arg_buffer(CURD_ROLE_INOUT, w->made);
    args[1] = curd_arg_scalar(&w->word_count, sizeof w->word_count);
}

/* A batch with made filled (overwritten next) and the words uploaded
 * into it, the launch not yet recorded. */
static void batch_before_launch(api_world *w, uint32_t flags)
{
    fresh_words(w);
    API_OK(curd_buffer_alloc(w->device, WORD_BYTES, &w->made));
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    API_OK(curd_batch_new(w->device, &options, &w->batch));
    API_OK(curd_batch_fill(w->batch, w->made, 0, WORD_BYTES, 0xA5));
    API_OK(curd_batch_upload(w->batch, w->made, 0, w->words, WORD_BYTES));
}

static void batch_of_words(api_world *w, uint32_t flags, bool cooperative)
{
    curd_arg args[2];
    curd_launch launch = batch_words_launch(cooperative);
    batch_before_launch(w, flags);
    batch_words_args(w, args);
    API_OK(curd_batch_launch(w->batch, w->add_one, &launch, args, 2,
                             &w->item));
    API_OK(curd_batch_download_range(w->batch, w->made, 0, WORD_BYTES,
                                     w->words, WORD_BYTES));
}

static void streamed_batch(api_world *w)
{
    batch_of_words(w, 0, true);
}

static void graph_batch(api_world *w)
{
    batch_of_words(w, CURD_BATCH_GRAPH, false);
}

/* The streamed batch, and a copy of large's first bytes into small after
 * its download. */
static void streamed_batch_with_copy(api_world *w)
{
    api_world_reset_buffers(w);
    streamed_batch(w);
    curd_copy copy = {w->small, 0, w->large, 0, API_SMALL_BYTES};
    API_OK(curd_batch_copy(w->batch, &copy));
}

/* Captured by a run, then fresh words for the next; the statistics as
 * the next run finds them. */
static void graph_batch_ran(api_world *w)
{
    graph_batch(w);
    API_OK(curd_batch_run(w->batch, NULL));
    API_CHECK(words_added(w), "the graph batch's first run is wrong");
    fresh_words(w);
    w->stats = api_stats_of(w->device);
}

/* Captured, then its launch given another count: the next run updates
 * the executable graph in place. */
static void graph_batch_args_changed(api_world *w)
{
    curd_arg args[2];
    graph_batch_ran(w);
    words_of(w, WORDS / 2u + 1u);
    batch_words_args(w, args);
    API_OK(curd_batch_set_args(w->batch, w->item, args, 2));
}

/* Frees the batch (a lost device's too) and, on a device that works,
 * made. */
static void batch_done(api_world *w, curd_status status)
{
    API_OK(curd_batch_free(w->batch));
    w->batch = NULL;
    if (!api_world_lost(w, status))
        API_OK(curd_buffer_free(w->device, w->made));
}

static curd_status batch_run_call(api_world *w)
{
    curd_timing timing = {.struct_size = sizeof timing};
    return curd_batch_run(w->batch, &timing);
}

/* The download in place on success; none after a failure, and the batch
 * runs again. */
static void batch_run_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK) {
        API_CHECK(words_added(w), "the batch's download is not add_one's");
    } else if (!api_world_lost(w, status)) {
        API_CHECK(words_untouched(w), "a failed batch run wrote its download");
        API_OK(curd_batch_run(w->batch, NULL));
        API_CHECK(words_added(w), "a run after a failed one is wrong");
    }
    batch_done(w, status);
}

/* A run of a captured graph that succeeded replayed it, capturing
 * nothing, with `updates` kernel nodes changed in place first. */
static void graph_reused(api_world *w, curd_status status, uint64_t updates)
{
    if (status == CURD_OK) {
        curd_stats stats = api_stats_of(w->device);
        API_CHECK(stats.graph_replays == w->stats.graph_replays + 1u &&
                      stats.graph_updates ==
                          w->stats.graph_updates + updates &&
                      stats.graph_captures == w->stats.graph_captures,
                  "the run replayed %llu graphs, updated %llu nodes and"
                  " captured %llu graphs",
                  (unsigned long long)(stats.graph_replays -
                                       w->stats.graph_replays),
                  (unsigned long long)(stats.graph_updates -
                                       w->stats.graph_updates),
                  (unsigned long long)(stats.graph_captures -
                                       w->stats.graph_captures));
    }
    batch_run_finish(w, status);
}

/* batch_run_finish's checks (a failed run is run again), and the copy
 * in place. */
static void batch_copy_finish(api_world *w, curd_status status)
{
    bool works = !api_world_lost(w, status);
    batch_run_finish(w, status);
    if (!works)
        return;
    memcpy(w->small_model, w->large_model, API_SMALL_BYTES);
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
}

static void graph_replayed_finish(api_world *w, curd_status status)
{
    graph_reused(w, status, 0);
}

static void graph_updated_finish(api_world *w, curd_status status)
{
    graph_reused(w, status, 1);
}

static curd_status batch_run_async_call(api_world *w)
{
    w->pending = NULL;
    curd_status status = curd_batch_run_async(w->batch, &w->pending);
    API_CHECK((status == CURD_OK) == (w->pending != NULL),
              "out_pending written by a failed run, or not by a good one");
    return status;
}

static void batch_run_async_finish(api_world *w, curd_status status)
{
    async_pending_end(w, status);
    batch_run_finish(w, status);
}

static void graph_batch_pending(api_world *w)
{
    graph_batch(w);
    API_OK(batch_run_async_call(w));
}

/* Waited for (the wait failed or not): freeing it gives everything back
 * and leaves the batch to run again. */
static void batch_wait_finish(api_world *w, curd_status status)
{
    pending_let_go(w);
    batch_run_finish(w, status);
}

/* Freeing a run writes no download, and leaves the batch to run again. */
static void batch_pending_free_finish(api_world *w, curd_status status)
{
    API_CHECK(words_untouched(w), "curd_pending_free wrote the download");
    if (!api_world_lost(w, status)) {
        API_OK(curd_batch_run(w->batch, NULL));
        API_CHECK(words_added(w), "a run after a freed one is wrong");
    }
    batch_done(w, status);
}

static void batch_recording(api_world *w)
{
    batch_before_launch(w, 0);
}

static curd_status batch_launch_call(api_world *w)
{
    curd_arg args[2];
    curd_launch launch = batch_words_launch(true);
    batch_words_args(w, args);
    w->item = SIZE_MAX;
    curd_status status =
        curd_batch_launch(w->batch, w->add_one, &launch, args, 2, &w->item);
    API_CHECK((status == CURD_OK) == (w->item != SIZE_MAX),
              "out_item written by a failed launch, or not by a good one");
    return status;
}

/* A launch refused records nothing: the batch runs without it. */
static void batch_launch_finish(api_world *w, curd_status status)
{
    if (!api_world_lost(w, status)) {
        API_OK(curd_batch_download_range(w->batch, w->made, 0, WORD_BYTES,
                                         w->words, WORD_BYTES));
        API_OK(curd_batch_run(w->batch, NULL));
        API_CHECK(status == CURD_OK ? words_added(w) : words_untouched(w),
                  status == CURD_OK ? "the recorded launch did not run"
                                    : "a refused launch ran");
    }
    batch_done(w, status);
}

/* Wider blocks, still cooperative: asks the occupancy again. */
static curd_status batch_set_launch_call(api_world *w)
{
    curd_launch launch = batch_words_launch(true);
    launch.block[0] = 256;
    return curd_batch_set_launch(w->batch, w->item, &launch);
}

/* Either launch adds 1 to every word. */
static void batch_set_launch_finish(api_world *w, curd_status status)
{
    if (!api_world_lost(w, status)) {
        API_OK(curd_batch_run(w->batch, NULL));
        API_CHECK(words_added(w), "the batch's download is not add_one's");
    }
    batch_done(w, status);
}

static curd_status batch_free_call(api_world *w)
{
    curd_status status = curd_batch_free(w->batch);
    w->batch = NULL;
    return status;
}

/* It frees the batch whatever the driver says (its graph stays with a
 * context it could not make current). */
static void batch_free_finish(api_world *w, curd_status status)
{
    API_CHECK(status == CURD_OK, "curd_batch_free: %s: %s",
              curd_status_name(status), curd_last_error());
    if (!api_world_lost(w, status))
        API_OK(curd_buffer_free(w->device, w->made));
}

/* ------------------------------------------------------------------------
 * Communicators of one rank on the world's device (NCCL accepts a
 * communicator of one rank, and every collective on it), and collectives
 * on the small buffer in place: a sum over one rank leaves it as it was.
 * ---------------------------------------------------------------------- */
static void comm_options(curd_comm_options *options)
{
    curd_comm_options_init(options);
    options->timeout_ms = 5000;
}

static void new_comm_id(api_world *w)
{
    w->comm = NULL;
    API_OK(curd_comm_id_new(&w->comm_id));
}

static void one_rank_open(api_world *w)
{
    curd_comm_options options;
    comm_options(&options);
    w->comm = NULL;
    API_OK(curd_comm_open_all(&w->device, 1, &options, &w->comm));
}

static void one_rank_fresh(api_world *w)
{
    fresh(w, API_SMALL_BYTES);
    one_rank_open(w);
}

/* Closes the world's communicators; one a failure aborted closes too. */
static void comm_close_all(api_world *w)
{
    curd_status status = curd_comm_close(w->comm_child);
    API_CHECK(status == CURD_OK || status == CURD_E_COMM,
              "curd_comm_close: %s: %s", curd_status_name(status),
              curd_last_error());
    status = curd_comm_close(w->comm);
    API_CHECK(status == CURD_OK || status == CURD_E_COMM,
              "curd_comm_close: %s: %s", curd_status_name(status),
              curd_last_error());
    w->comm = w->comm_child = NULL;
}

static void comm_made_finish(api_world *w, curd_status status)
{
    API_CHECK((status == CURD_OK) == (w->comm != NULL),
              "out_comm written by a failed open, or not by a good one");
    comm_close_all(w);
}

static curd_status comm_open_call(api_world *w)
{
    curd_comm_options options;
    comm_options(&options);
    return curd_comm_open(w->device, &w->comm_id, 0, 1, &options, &w->comm);
}

static curd_status comm_open_all_call(api_world *w)
{
    curd_comm_options options;
    comm_options(&options);
    w->comm = NULL;
    curd_status status = curd_comm_open_all(&w->device, 1, &options, &w->comm);
    if (status != CURD_OK)
        API_CHECK(w->comm == NULL, "comms written by a failed open");
    return status;
}

/* A launcher's rank variables and NCCL's address, a fresh port each run
 * (NCCL's root listens there while rank 0 opens). */
static void launcher_environment(api_world *w)
{
    static unsigned runs;
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%u", 30000u + runs++ % 20000u);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("NCCL_COMM_ID", address, 1);
    w->comm = NULL;
}

static curd_status comm_open_from_env_call(api_world *w)
{
    curd_comm_options options;
    comm_options(&options);
    return curd_comm_open_from_env(w->device, &options, &w->comm);
}

static void comm_open_from_env_finish(api_world *w, curd_status status)
{
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("NCCL_COMM_ID");
    comm_made_finish(w, status);
}

static curd_status comm_split_call(api_world *w)
{
    w->comm_child = NULL;
    return curd_comm_split(w->comm, 0, 0, &w->comm_child);
}

static void comm_split_finish(api_world *w, curd_status status)
{
    API_CHECK((status == CURD_OK) == (w->comm_child != NULL),
              "out_comm written by a failed split, or not by a good one");
    comm_close_all(w);
}

static curd_status comm_close_call(api_world *w)
{
    curd_status status = curd_comm_close(w->comm);
    w->comm = NULL; /* freed whatever it said (curd_comm_open(3)) */
    return status;
}

static curd_collective small_all_reduce(api_world *w)
{
    return (curd_collective){.comm = w->comm,
                             .kind = CURD_COLLECTIVE_ALL_REDUCE,
                             .dtype = CURD_DTYPE_UINT8,
                             .op = CURD_REDUCE_SUM,
                             .send = w->small,
                             .recv = w->small,
                             .count = API_SMALL_BYTES};
}

static curd_status collective_run_call(api_world *w)
{
    curd_collective op = small_all_reduce(w);
    return curd_collective_run(&op, 1);
}

/* A sum over one rank, in place: the bytes stay, run or not. */
static void collective_finish(api_world *w, curd_status status)
{
    if (!lost(status) && !api_world_lost(w, CURD_OK))
        api_world_expect_buffer(w, w->small, w->small_model,
                                API_SMALL_BYTES);
    comm_close_all(w);
}

static curd_status collective_run_async_call(api_world *w)
{
    curd_collective op = small_all_reduce(w);
    w->pending = NULL;
    curd_status status = curd_collective_run_async(&op, 1, &w->pending);
    API_CHECK((status == CURD_OK) == (w->pending != NULL),
              "out_pending written by a failed run, or not by a good one");
    return status;
}

static void collective_async_finish(api_world *w, curd_status status)
{
    if (w->pending != NULL) {
        curd_timing timing = {.struct_size = sizeof timing};
        API_OK(curd_pending_wait(w->pending, &timing));
        API_OK(curd_pending_free(w->pending));
        w->pending = NULL;
    }
    collective_finish(w, status);
}

/* A batch of words (fill, upload, add_one, download) and an all-reduce of
 * one rank on small, in place, recorded after them: streamed, or
 * captured with them into a graph. */
static void batch_with_collective(api_world *w, uint32_t flags)
{
    one_rank_fresh(w);
    batch_of_words(w, flags, flags == 0);
    curd_collective op = small_all_reduce(w);
    API_OK(curd_batch_collective(w->batch, &op));
}

static void streamed_batch_with_collective(api_world *w)
{
    batch_with_collective(w, 0);
}

static void graph_batch_with_collective(api_world *w)
{
    batch_with_collective(w, CURD_BATCH_GRAPH);
}

/* The download in place on success, none after a failure; small as it
 * was either way (a sum over one rank); the batch freed before its
 * communicator, which it holds. A failed run is not run again: a failure
 * after NCCL took the collective aborted the communicator. */
static void batch_collective_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_CHECK(words_added(w), "the batch's download is not add_one's");
    else if (!api_world_lost(w, status))
        API_CHECK(words_untouched(w), "a failed batch run wrote its download");
    batch_done(w, status);
    collective_finish(w, status);
}

/* The graph batch with its collective captured by a first run. */
static void graph_batch_with_collective_ran(api_world *w)
{
    graph_batch_with_collective(w);
    API_OK(curd_batch_run(w->batch, NULL));
    API_CHECK(words_added(w), "the graph batch's first run is wrong");
    fresh_words(w);
}

static curd_status batch_reset_call(api_world *w)
{
    return curd_batch_reset(w->batch);
}

/* A reset dropped the graph, and with it the batch's hold on the
 * communicator, which then closes; a refused one changed nothing. */
static void batch_reset_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK) {
        API_CHECK(curd_comm_close(w->comm) == CURD_OK,
                  "the communicator is still held after a reset: %s",
                  curd_last_error());
        w->comm = NULL;
    }
    batch_done(w, status);
    collective_finish(w, status);
}

/* ------------------------------------------------------------------------
 * Sessions: allocations that miss, releases that free (too large for the
 * idle budget, or evicting idle buffers), a static set uploaded on a miss
 * and freed at its last release, and a session freed with what it lent
 * and holds. A session is freed at the end of every entry (a lost
 * device's too).
 * ---------------------------------------------------------------------- */
static void session_made(api_world *w, uint64_t idle_budget_bytes,
                         uint32_t flags)
{
    curd_session_options options;
    curd_session_options_init(&options);
    options.idle_budget_bytes = idle_budget_bytes;
    options.flags = flags;
    API_OK(curd_session_new(w->device, &options, &w->session));
}

static curd_session_stats session_stats(api_world *w)
{
    curd_session_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    API_OK(curd_session_stats_get(w->session, &stats));
    return stats;
}

static void session_done(api_world *w)
{
    API_OK(curd_session_free(w->session));
    w->session = NULL;
    w->set = NULL;
}

/* The handle names no buffer any more. */
static void handle_stale(api_world *w, curd_buffer buffer)
{
    size_t byte_len = 0;
    API_CHECK(curd_buffer_size(w->device, buffer, &byte_len) ==
                  CURD_E_STALE_HANDLE,
              "a released or freed handle still names a buffer");
}

static void default_session(api_world *w)
{
    session_made(w, 0, 0);
}

static curd_status session_alloc_call(api_world *w)
{
    w->made.id = 0;
    return made_if_ok(
        w, curd_session_alloc(w->session, API_UPSTREAM_BYTES, &w->made));
}

/* A failed miss lent and counted nothing. */
static void session_alloc_finish(api_world *w, curd_status status)
{
    if (!api_world_lost(w, status)) {
        curd_session_stats stats = session_stats(w);
        uint64_t made = status == CURD_OK ? 1u : 0u;
        API_CHECK(stats.lent_buffers == made && stats.reuse_misses == made &&
                      stats.lent_bytes == made * API_UPSTREAM_BYTES,
                  "the session lent %llu buffers after %s",
                  (unsigned long long)stats.lent_buffers,
                  curd_status_name(status));
    }
    session_done(w);
}

/* Lent, and larger than the whole idle budget: its release frees it. */
static void session_lent_too_large(api_world *w)
{
    session_made(w, 1u << 20, 0);
    API_OK(curd_session_alloc(w->session, API_UPSTREAM_BYTES, &w->made));
}

/* Lent, with the idle budget full of another size: its release evicts. */
static void session_idle_full(api_world *w)
{
    curd_buffer idle;
    session_made(w, API_UPSTREAM_BYTES, 0);
    API_OK(curd_session_alloc(w->session, API_UPSTREAM_BYTES, &idle));
    API_OK(curd_session_release(w->session, idle));
    API_OK(curd_session_alloc(w->session, API_UPSTREAM_BYTES - 4096u,
                              &w->made));
}

static curd_status session_release_call(api_world *w)
{
    return curd_session_release(w->session, w->made);
}

/* A release that let go of made's memory succeeds whatever the driver
 * said of freeing it (no failure of the release's), and made's handle is
 * stale; false on a lost device, else the session's statistics after it
 * for the entry to check. */
static bool released(api_world *w, curd_status status,
                     curd_session_stats *stats)
{
    if (api_world_lost(w, status))
        return false;
    API_OK(status);
    handle_stale(w, w->made);
    *stats = session_stats(w);
    return true;
}

/* Nothing lent; the buffer freed at once or another one evicted. */
static void session_release_finish(api_world *w, curd_status status)
{
    curd_session_stats stats;
    if (released(w, status, &stats))
        API_CHECK(stats.lent_buffers == 0 && stats.idle_buffers <= 1 &&
                      stats.release_frees + stats.idle_evictions == 1,
                  "after the release: %llu lent, %llu idle, %llu freed at"
                  " once, %llu evicted",
                  (unsigned long long)stats.lent_buffers,
                  (unsigned long long)stats.idle_buffers,
                  (unsigned long long)stats.release_frees,
                  (unsigned long long)stats.idle_evictions);
    session_done(w);
}

/* Two payloads of the caller's memory, fresh bytes each run. */
#define STATIC_SMALL 1000u
#define STATIC_LARGE 300000u
static void default_session_fresh_host(api_world *w)
{
    fresh_all(w);
    default_session(w);
}

/* The sweep's set, uploaded verified or under a key. */
static curd_status upload_static_via(api_world *w, bool keyed)
{
    curd_static_payload payloads[] = {{w->host, STATIC_SMALL},
                                      {w->host + STATIC_SMALL, STATIC_LARGE}};
    static const char key[] = "tables-v1";
    w->set = NULL;
    curd_status status =
        keyed ? curd_session_upload_static_keyed(w->session,
                                                 "api-sweep/static", key,
                                                 sizeof key, payloads, 2,
                                                 &w->set)
              : curd_session_upload_static(w->session, "api-sweep/static",
                                           payloads, 2, &w->set);
    API_CHECK((status == CURD_OK) == (w->set != NULL),
              "out_set written by a failed upload, or not by a good one");
    return status;
}

static curd_status upload_static_call(api_world *w)
{
    return upload_static_via(w, false);
}

static curd_status upload_static_keyed_call(api_world *w)
{
    return upload_static_via(w, true);
}

/* The set's buffers hold the payloads; a failed miss cached nothing (so a
 * keyed one's key misses again rather than find a set half made), and
 * the miss is counted as the kind it was. */
static void uploaded_finish(api_world *w, curd_status status, bool keyed)
{
    host_unchanged(w, 0, w->host_len);
    if (!api_world_lost(w, status)) {
        curd_session_stats stats = session_stats(w);
        uint64_t made = status == CURD_OK ? 1u : 0u;
        uint64_t misses = keyed ? stats.static_keyed_misses
                                : stats.static_misses;
        uint64_t other = keyed ? stats.static_misses
                               : stats.static_keyed_misses;
        API_CHECK(stats.cached_sets == made && misses == made && other == 0
                      && stats.unretained_sets == 0,
                  "the session caches %llu sets after %s",
                  (unsigned long long)stats.cached_sets,
                  curd_status_name(status));
    }
    if (status == CURD_OK) {
        API_CHECK(w->set->count == 2 && w->set->retained == 1,
                  "the set holds %zu buffers, retained %u", w->set->count,
                  (unsigned)w->set->retained);
        api_world_expect_buffer(w, w->set->buffers[0], w->host,
                                STATIC_SMALL);
        api_world_expect_buffer(w, w->set->buffers[1], w->host + STATIC_SMALL,
                                STATIC_LARGE);
        API_OK(curd_session_release_static(w->session, w->set));
    }
    session_done(w);
}

static void upload_static_finish(api_world *w, curd_status status)
{
    uploaded_finish(w, status, false);
}

static void upload_static_keyed_finish(api_world *w, curd_status status)
{
    uploaded_finish(w, status, true);
}

/* A set not retained (no static cache) of one payload large enough that
 * its buffer's memory goes upstream when freed. */
static void unretained_set_held(api_world *w)
{
    w->range = malloc(API_UPSTREAM_BYTES);
    API_CHECK(w->range != NULL, "out of host memory");
    api_world_random(w, w->range, API_UPSTREAM_BYTES);
    session_made(w, 0, CURD_SESSION_NO_STATIC_CACHE);
    curd_static_payload payload = {w->range, API_UPSTREAM_BYTES};
    API_OK(curd_session_upload_static(w->session, "api-sweep/unretained",
                                      &payload, 1, &w->set));
    w->made = w->set->buffers[0];
}

static curd_status release_static_call(api_world *w)
{
    return curd_session_release_static(w->session, w->set);
}

/* Its last release freed it. */
static void release_static_finish(api_world *w, curd_status status)
{
    curd_session_stats stats;
    if (released(w, status, &stats))
        API_CHECK(stats.unretained_sets == 0 && stats.unretained_bytes == 0,
                  "%llu sets not retained after their last release",
                  (unsigned long long)stats.unretained_sets);
    free(w->range);
    w->range = NULL;
    session_done(w);
}

/* A buffer lent and a set held. */
static void session_holding(api_world *w)
{
    fresh_all(w);
    default_session(w);
    API_OK(curd_session_alloc(w->session, API_UPSTREAM_BYTES, &w->made));
    API_OK(upload_static_call(w));
}

static curd_status session_free_call(api_world *w)
{
    curd_status status = curd_session_free(w->session);
    w->session = NULL;
    w->set = NULL;
    return status;
}

/* It frees everything whatever the driver says: the device's resident
 * bytes are the world's again. */
static void session_free_finish(api_world *w, curd_status status)
{
    API_CHECK(status == CURD_OK, "curd_session_free: %s: %s",
              curd_status_name(status), curd_last_error());
    if (!api_world_lost(w, status)) {
        uint64_t bytes = 0;
        API_OK(curd_device_resident_bytes(w->device, &bytes));
        API_CHECK(bytes == (uint64_t)API_SMALL_BYTES + API_LARGE_BYTES +
                               API_BYSTANDER_BYTES,
                  "%llu bytes resident after the session's free",
                  (unsigned long long)bytes);
        handle_stale(w, w->made);
    }
}

/* ------------------------------------------------------------------------
 * The list
 * ---------------------------------------------------------------------- */
const api_op api_ops[] = {
    {"curd_device_count", "counts-devices", nothing, count_call, no_finish, 0},
    {"curd_device_open", "opens-a-second-device", nothing, open_call,
     open_finish, 0},
    {"curd_device_close", "closes-a-device-with-something-in-every-module",
     close_setup, close_call, close_finish, 0},
    {"curd_device_info", "reads-free-memory", nothing, info_call, no_finish,
     0},
    {"curd_device_self_test", "runs-its-kernel", nothing, self_test_call,
     no_finish, API_MAY_LOAD | API_MAY_LET_GO},
    {"curd_device_trim", "frees-both-pools-caches", cache_something, trim_call,
     trim_finish, 0},
    {"curd_block_acquire", "device-block-from-upstream", nothing,
     acquire_device_call, acquire_finish, 0},
    {"curd_block_acquire", "pinned-block-from-upstream", nothing,
     acquire_pinned_call, acquire_finish, 0},
    {"curd_block_release", "device-block-to-upstream", acquire_device_block,
     release_call, release_finish, 0},
    {"curd_block_release", "pinned-block-to-upstream", acquire_pinned_block,
     release_call, release_finish, 0},
    {"curd_buffer_alloc", "from-upstream", nothing, alloc_call, alloc_finish,
     0},
    {"curd_buffer_free", "to-upstream", alloc_made, free_call, free_finish, 0},
    {"curd_buffer_fill", "part-of-a-buffer", api_world_reset_buffers,
     fill_call, fill_finish, 0},
    {"curd_buffer_clear", "a-large-buffer", api_world_reset_buffers,
     clear_call, clear_finish, 0},
    {"curd_buffer_upload", "staged", fresh_small, upload_call, upload_finish,
     0},
    {"curd_buffer_upload", "pipelined", fresh_all, upload_large_call,
     upload_large_finish, 0},
    {"curd_buffer_upload_at", "from-registered-memory", fresh_all,
     upload_at_call, upload_at_finish, 0},
    {"curd_buffer_download", "staged", fresh_small, download_call,
     download_finish, 0},
    {"curd_buffer_download_range", "pipelined", fresh_all, download_range_call,
     download_range_finish, 0},
    {"curd_buffer_download_range", "into-registered-memory", fresh_all,
     download_direct_call, download_direct_finish, 0},
    {"curd_upload_batch", "staged-pipelined-and-direct", fresh_all,
     upload_batch_call, upload_batch_finish, 0},
    {"curd_upload_batch", "rows-at-one-stride", fresh_all, upload_rows_call,
     upload_rows_finish, 0},
    {"curd_upload_batch", "rows-from-registered-memory", fresh_all,
     upload_registered_rows_call, upload_registered_rows_finish, 0},
    {"curd_upload_batch", "rows-from-pageable-memory", fresh_all,
     upload_pageable_rows_call, upload_pageable_rows_finish, 0},
    {"curd_download_batch", "staged-pipelined-and-direct", fresh_all,
     download_batch_call, download_batch_finish, 0},
    {"curd_download_batch", "rows-at-one-stride", fresh_all,
     download_rows_call, download_rows_finish, 0},
    {"curd_download_batch", "rows-into-registered-memory", fresh_all,
     download_registered_rows_call, download_registered_rows_finish, 0},
    {"curd_download_batch", "rows-into-pageable-memory", fresh_all,
     download_pageable_rows_call, download_pageable_rows_finish, 0},
    {"curd_host_register", "a-new-range", new_range, register_call,
     register_finish, 0},
    {"curd_host_unregister", "a-registered-range", registered_range,
     unregister_call, unregister_finish, 0},
    {"curd_buffer_upload_async", "from-registered-memory", fresh_all,
     upload_async_call, upload_async_finish, 0},
    {"curd_device_sync_uploads", "one-upload-pending", upload_pending,
     sync_call, sync_finish, 0},
    {"curd_buffer_copy", "within-one-device", fresh_all, copy_within_call,
     copy_within_finish, 0},
    {"curd_buffer_copy_async", "within-one-device", fresh_all,
     copy_within_async_call, copy_within_async_finish, 0},
    /* With one device (a GPU host of one, or the fuzzer's stand-in) the
     * second device is another handle of device 0: a copy within its
     * context; the stand-in sweep has two devices (test-fault-sweep.c). */
    {"curd_buffer_copy", "from-a-second-device-with-peer-access",
     second_device, copy_between_call, copy_between_finish, 0},
    {"curd_buffer_copy", "from-a-second-device-staged", second_device_staged,
     copy_between_call, copy_between_finish, 0},
    {"curd_program_load", "jit-of-an-image-not-cached", evict_saxpy, load_call,
     load_finish, 0},
    {"curd_program_load", "link-of-two-ptx-not-cached", evict_saxpy,
     link_load_call, load_finish, 0},
    {"curd_program_free", "unloads-an-idle-module-past-the-bound",
     two_programs_one_freed, program_free_call, no_finish, API_MAY_LET_GO},
    {"curd_dispatch", "borrowed-memory", fresh_words, borrowed_dispatch_call,
     dispatch_finish, 0},
    {"curd_dispatch", "resident-buffer-read-back", words_in_buffer,
     resident_dispatch_call, resident_dispatch_finish, 0},
    {"curd_dispatch_async", "borrowed-memory", fresh_words, async_dispatch,
     async_finish, 0},
    {"curd_dispatch_async", "on-the-callers-stream", callers_stream_made,
     on_callers_stream_call, on_callers_stream_finish, 0},
    {"curd_pending_wait", "a-dispatch-in-flight", pending_made, wait_call,
     wait_finish, 0},
    {"curd_pending_ready", "a-dispatch-in-flight", pending_made, ready_call,
     ready_finish, 0},
    {"curd_pending_free", "a-dispatch-not-waited-for", pending_made,
     pending_free_call, pending_free_finish, API_MAY_LET_GO},
    {"curd_pending_wait", "a-copy-in-flight", copy_pending_made, wait_call,
     copy_wait_finish, 0},
    {"curd_pending_free", "a-copy-not-waited-for", copy_pending_made,
     pending_free_call, copy_within_finish, API_MAY_LET_GO},
    {"curd_buffer_alloc_shareable", "mapped-for-the-device", nothing,
     alloc_shareable_call, alloc_shareable_finish, 0},
    {"curd_buffer_export_fd", "a-shareable-buffer", shareable_made,
     export_fd_call, export_fd_finish, 0},
    {"curd_buffer_import_fd", "a-descriptor-of-this-process",
     shareable_exported, import_fd_call, import_fd_finish, 0},
    {"curd_buffer_free", "a-shareable-buffer-unmapped", shareable_made,
     free_call, free_shareable_finish, 0},
    {"curd_buffer_import", "the-small-buffers-memory", api_world_reset_buffers,
     import_call, import_finish, 0},
    {"curd_buffer_download_async", "into-registered-memory",
     api_world_reset_buffers, download_async_call, download_async_finish, 0},
    {"curd_device_wait_stream", "the-legacy-default-stream", nothing,
     wait_stream_call, no_finish, 0},
    {"curd_device_wait_event", "a-dispatch-in-flight", unfinished_pending_made,
     wait_event_call, unfinished_ready_finish, 0},
    {"curd_pending_stream_wait", "a-dispatch-in-flight", pending_made,
     pending_stream_wait_call, ready_finish, 0},
    {"curd_pending_wait", "a-batch-run-in-flight", graph_batch_pending,
     wait_call, batch_wait_finish, 0},
    {"curd_pending_free", "a-batch-run-not-waited-for", graph_batch_pending,
     pending_free_call, batch_pending_free_finish, API_MAY_LET_GO},
    {"curd_batch_launch", "cooperative-asks-the-occupancy", batch_recording,
     batch_launch_call, batch_launch_finish, 0},
    {"curd_batch_set_launch", "cooperative-asks-the-occupancy", streamed_batch,
     batch_set_launch_call, batch_set_launch_finish, 0},
    {"curd_batch_run", "streamed-fill-upload-cooperative-launch-download",
     streamed_batch, batch_run_call, batch_run_finish, 0},
    {"curd_batch_run", "graph-captured", graph_batch, batch_run_call,
     batch_run_finish, 0},
    {"curd_batch_run", "streamed-with-a-copy", streamed_batch_with_copy,
     batch_run_call, batch_copy_finish, 0},
    {"curd_batch_run", "graph-replayed", graph_batch_ran, batch_run_call,
     graph_replayed_finish, 0},
    {"curd_batch_run", "graph-updated-in-place-after-set-args",
     graph_batch_args_changed, batch_run_call, graph_updated_finish, 0},
    {"curd_batch_run_async", "streamed", streamed_batch, batch_run_async_call,
     batch_run_async_finish, 0},
    {"curd_batch_run_async", "graph-captured", graph_batch,
     batch_run_async_call, batch_run_async_finish, 0},
    {"curd_batch_free", "a-captured-graph-and-its-staging", graph_batch_ran,
     batch_free_call, batch_free_finish, 0},
    {"curd_session_alloc", "a-miss-allocates", default_session,
     session_alloc_call, session_alloc_finish, 0},
    {"curd_session_release", "larger-than-the-idle-budget-frees-it",
     session_lent_too_large, session_release_call, session_release_finish, 0},
    {"curd_session_release", "evicts-an-idle-buffer-for-space",
     session_idle_full, session_release_call, session_release_finish, 0},
    {"curd_session_upload_static", "a-miss-allocates-and-uploads",
     default_session_fresh_host, upload_static_call, upload_static_finish,
     API_MAY_MAKE_AND_FREE},
    {"curd_session_upload_static_keyed", "a-miss-allocates-and-uploads",
     default_session_fresh_host, upload_static_keyed_call,
     upload_static_keyed_finish, API_MAY_MAKE_AND_FREE},
    {"curd_session_release_static",
     "the-last-release-frees-a-set-not-retained", unretained_set_held,
     release_static_call, release_static_finish, 0},
    {"curd_session_free", "frees-what-it-lent-and-holds", session_holding,
     session_free_call, session_free_finish, 0},
    {"curd_comm_open", "one-rank", new_comm_id, comm_open_call,
     comm_made_finish, 0},
    {"curd_comm_open_all", "one-device", nothing, comm_open_all_call,
     comm_made_finish, 0},
    {"curd_comm_open_from_env", "one-rank-at-an-address", launcher_environment,
     comm_open_from_env_call, comm_open_from_env_finish, 0},
    {"curd_comm_split", "one-rank-into-one", one_rank_open, comm_split_call,
     comm_split_finish, 0},
    {"curd_comm_close", "one-rank", one_rank_open, comm_close_call, no_finish,
     0},
    {"curd_collective_run", "one-rank-all-reduce-in-place", one_rank_fresh,
     collective_run_call, collective_finish, 0},
    {"curd_collective_run_async", "one-rank-all-reduce-in-place",
     one_rank_fresh, collective_run_async_call, collective_async_finish, 0},
    {"curd_batch_run", "streamed-with-a-one-rank-all-reduce",
     streamed_batch_with_collective, batch_run_call, batch_collective_finish,
     0},
    {"curd_batch_run", "graph-captured-with-a-one-rank-all-reduce",
     graph_batch_with_collective, batch_run_call, batch_collective_finish, 0},
    {"curd_batch_reset", "drops-a-graph-holding-a-collective",
     graph_batch_with_collective_ran, batch_reset_call, batch_reset_finish, 0},
};
const size_t api_op_count = sizeof api_ops / sizeof api_ops[0];

const api_quiet_function api_quiet_functions[] = {
    {"curd_version", "a constant"},
    {"curd_fd_send", "a socket, no device"},
    {"curd_fd_recv", "a socket, no device"},
    {"curd_version_string", "a constant"},
    {"curd_status_name", "a table"},
    {"curd_last_error", "the thread's sentence"},
    {"curd_last_driver_code", "the thread's last code"},
    {"curd_driver_version", "read when the driver loaded (test-driver fails"
                            " each call of the load)"},
    {"curd_device_options_init", "fills a struct"},
    {"curd_device_stats", "reads the modules' counters"},
    {"curd_device_stats_reset", "resets the modules' counters"},
    {"curd_device_set_reclaim", "stores a callback"},
    {"curd_buffer_size", "reads the handle table"},
    {"curd_buffer_device_ptr", "reads the handle table"},
    {"curd_device_resident_bytes", "reads the resident module"},
    {"curd_program_desc_init", "fills a struct"},
    {"curd_program_info", "returns what the load read"},
    {"curd_program_log", "copies the log the load kept"},
    {"curd_launch_init", "fills a struct"},
    {"curd_pending_event", "hands out the end event it holds"},
    {"curd_batch_options_init", "fills a struct"},
    {"curd_batch_new", "host memory and the batch module's list"},
    {"curd_batch_fill", "records: resolves a resident buffer"},
    {"curd_batch_clear", "records: resolves a resident buffer"},
    {"curd_batch_upload", "records: resolves a resident buffer"},
    {"curd_batch_download", "records: resolves a resident buffer"},
    {"curd_batch_download_range", "records: resolves a resident buffer"},
    {"curd_batch_copy", "records: resolves two resident buffers"},
    {"curd_batch_collective", "records: checks the collective as"
                              " curd_collective_run does, resolves its"
                              " buffers"},
    {"curd_batch_set_args", "records: checks the arguments, resolves"
                            " resident buffers, rebuilds the parameter"
                            " list; the next run updates the graph"},
    {"curd_session_options_init", "fills a struct"},
    {"curd_session_new", "host memory and the session module's list"},
    {"curd_session_stats_get", "copies the session's counters"},
    {"curd_comm_options_init", "fills a struct"},
    {"curd_comm_id_new", "asks NCCL alone (ncclGetUniqueId)"},
    {"curd_comm_rank", "reads the communicator"},
    {"curd_comm_size", "reads the communicator"},
};
const size_t api_quiet_function_count =
    sizeof api_quiet_functions / sizeof api_quiet_functions[0];
