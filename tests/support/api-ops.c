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
#include "support/kernel-load.h"

#include <stdlib.h>
#include <string.h>

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

/* A second device with something in every room: a buffer with bytes,
 * pooled streams and events, a registration, a program it has run. */
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
}

static curd_status close_call(api_world *w)
{
    curd_status status = curd_device_close(w->extra);
    w->extra = NULL; /* gone whatever close said */
    return status;
}

static void close_finish(api_world *w, curd_status status)
{
    (void)status;
    free(w->range);
    w->range = NULL;
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
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    API_OK(curd_device_stats(w->device, &stats));
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
static curd_status alloc_call(api_world *w)
{
    w->made.id = 0;
    curd_status status =
        curd_buffer_alloc(w->device, API_UPSTREAM_BYTES, &w->made);
    API_CHECK((status == CURD_OK) == (w->made.id != 0),
              "out_buffer written by a failed allocation, or not by a good"
              " one");
    return status;
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

static curd_status upload_batch_call(api_world *w)
{
    curd_upload items[PIECES];
    for (size_t i = 0; i < PIECES; i++)
        items[i] = (curd_upload){piece_buffer(w, &pieces[i]),
                                 pieces[i].offset, w->host + pieces[i].host_at,
                                 pieces[i].len};
    return curd_upload_batch(w->device, items, PIECES);
}

static void upload_batch_finish(api_world *w, curd_status status)
{
    host_unchanged(w, 0, w->host_len);
    if (status != CURD_OK)
        return;
    for (size_t i = 0; i < PIECES; i++)
        memcpy(piece_model(w, &pieces[i]) + pieces[i].offset,
               w->host + pieces[i].host_at, pieces[i].len);
    api_world_expect_buffer(w, w->small, w->small_model, API_SMALL_BYTES);
    api_world_expect_buffer(w, w->large, w->large_model, API_LARGE_BYTES);
}

static curd_status download_batch_call(api_world *w)
{
    curd_download items[PIECES];
    for (size_t i = 0; i < PIECES; i++)
        items[i] = (curd_download){piece_buffer(w, &pieces[i]),
                                   pieces[i].offset, pieces[i].len,
                                   w->host + pieces[i].host_at,
                                   pieces[i].len};
    return curd_download_batch(w->device, items, PIECES);
}

static void download_batch_finish(api_world *w, curd_status status)
{
    /* Outside the pieces nothing is written, whatever happened. */
    unsigned char *expected = malloc(w->host_len);
    API_CHECK(expected != NULL, "out of host memory");
    memcpy(expected, w->host_copy, w->host_len);
    for (size_t i = 0; i < PIECES; i++)
        memcpy(expected + pieces[i].host_at,
               status == CURD_OK
                   ? piece_model(w, &pieces[i]) + pieces[i].offset
                   : w->host + pieces[i].host_at,
               pieces[i].len);
    bool same = memcmp(w->host, expected, w->host_len) == 0;
    free(expected);
    API_CHECK(same, status == CURD_OK
                        ? "the batch's bytes differ from the buffers'"
                        : "a failed batch wrote outside its pieces");
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
static void fresh_words(api_world *w)
{
    if (w->words == NULL) {
        w->words = malloc(WORDS * sizeof *w->words);
        w->words_want = malloc(WORDS * sizeof *w->words);
        API_CHECK(w->words != NULL && w->words_want != NULL,
                  "out of host memory");
    }
    w->word_count = WORDS;
    api_world_random(w, w->words, WORDS * sizeof *w->words);
    for (uint32_t i = 0; i < WORDS; i++)
        w->words_want[i] = w->words[i] + 1u;
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
    return memcmp(w->words, w->words_want, WORDS * sizeof *w->words) == 0;
}

static bool words_untouched(const api_world *w)
{
    for (uint32_t i = 0; i < WORDS; i++)
        if (w->words[i] + 1u != w->words_want[i])
            return false;
    return true;
}

static curd_status borrowed_dispatch_call(api_world *w)
{
    curd_launch launch = words_launch();
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, w->words, WORDS * sizeof *w->words),
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
    API_OK(curd_buffer_alloc(w->device, WORDS * sizeof *w->words, &w->made));
    API_OK(curd_buffer_upload(w->device, w->made, w->words,
                              WORDS * sizeof *w->words));
}

static curd_status resident_dispatch_call(api_world *w)
{
    curd_launch launch = words_launch();
    curd_arg buffer = curd_arg_buffer(CURD_ROLE_INOUT, w->made);
    buffer.host = w->words; /* read back */
    buffer.byte_len = WORDS * sizeof *w->words;
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
        curd_arg_host(CURD_ROLE_INOUT, w->words, WORDS * sizeof *w->words),
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

static void async_finish(api_world *w, curd_status status)
{
    if (status == CURD_OK)
        API_OK(curd_pending_wait(w->pending, NULL));
    if (w->pending != NULL)
        API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
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
    API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
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
    return curd_pending_free(w->pending);
}

/* A free whose wait failed freed nothing: freeing it again works. */
static void pending_free_finish(api_world *w, curd_status status)
{
    if (status != CURD_OK && !lost(status))
        API_OK(curd_pending_free(w->pending));
    w->pending = NULL;
}

/* ------------------------------------------------------------------------
 * The list
 * ---------------------------------------------------------------------- */
const api_op api_ops[] = {
    {"curd_device_count", "counts-devices", nothing, count_call, no_finish},
    {"curd_device_open", "opens-a-second-device", nothing, open_call,
     open_finish},
    {"curd_device_close", "closes-a-device-with-something-in-every-room",
     close_setup, close_call, close_finish},
    {"curd_device_info", "reads-free-memory", nothing, info_call, no_finish},
    {"curd_device_self_test", "runs-its-kernel", nothing, self_test_call,
     no_finish},
    {"curd_device_trim", "frees-both-pools-caches", cache_something,
     trim_call, trim_finish},
    {"curd_block_acquire", "device-block-from-upstream", nothing,
     acquire_device_call, acquire_finish},
    {"curd_block_acquire", "pinned-block-from-upstream", nothing,
     acquire_pinned_call, acquire_finish},
    {"curd_block_release", "device-block-to-upstream", acquire_device_block,
     release_call, release_finish},
    {"curd_block_release", "pinned-block-to-upstream", acquire_pinned_block,
     release_call, release_finish},
    {"curd_buffer_alloc", "from-upstream", nothing, alloc_call, alloc_finish},
    {"curd_buffer_free", "to-upstream", alloc_made, free_call, free_finish},
    {"curd_buffer_fill", "part-of-a-buffer", api_world_reset_buffers,
     fill_call, fill_finish},
    {"curd_buffer_clear", "a-large-buffer", api_world_reset_buffers,
     clear_call, clear_finish},
    {"curd_buffer_upload", "staged", fresh_small, upload_call, upload_finish},
    {"curd_buffer_upload", "pipelined", fresh_all, upload_large_call,
     upload_large_finish},
    {"curd_buffer_upload_at", "from-registered-memory", fresh_all,
     upload_at_call, upload_at_finish},
    {"curd_buffer_download", "staged", fresh_small, download_call,
     download_finish},
    {"curd_buffer_download_range", "pipelined", fresh_all,
     download_range_call, download_range_finish},
    {"curd_buffer_download_range", "into-registered-memory", fresh_all,
     download_direct_call, download_direct_finish},
    {"curd_upload_batch", "staged-pipelined-and-direct", fresh_all,
     upload_batch_call, upload_batch_finish},
    {"curd_download_batch", "staged-pipelined-and-direct", fresh_all,
     download_batch_call, download_batch_finish},
    {"curd_host_register", "a-new-range", new_range, register_call,
     register_finish},
    {"curd_host_unregister", "a-registered-range", registered_range,
     unregister_call, unregister_finish},
    {"curd_buffer_upload_async", "from-registered-memory", fresh_all,
     upload_async_call, upload_async_finish},
    {"curd_device_sync_uploads", "one-upload-pending", upload_pending,
     sync_call, sync_finish},
    {"curd_program_load", "jit-of-an-image-not-cached", evict_saxpy,
     load_call, load_finish},
    {"curd_program_free", "unloads-an-idle-module-past-the-bound",
     two_programs_one_freed, program_free_call, no_finish},
    {"curd_dispatch", "borrowed-memory", fresh_words, borrowed_dispatch_call,
     dispatch_finish},
    {"curd_dispatch", "resident-buffer-read-back", words_in_buffer,
     resident_dispatch_call, resident_dispatch_finish},
    {"curd_dispatch_async", "borrowed-memory", fresh_words, async_dispatch,
     async_finish},
    {"curd_pending_wait", "a-dispatch-in-flight", pending_made, wait_call,
     wait_finish},
    {"curd_pending_ready", "a-dispatch-in-flight", pending_made, ready_call,
     ready_finish},
    {"curd_pending_free", "a-dispatch-not-waited-for", pending_made,
     pending_free_call, pending_free_finish},
};
const size_t api_op_count = sizeof api_ops / sizeof api_ops[0];

const api_quiet_function api_quiet_functions[] = {
    {"curd_version", "a constant"},
    {"curd_version_string", "a constant"},
    {"curd_status_name", "a table"},
    {"curd_last_error", "the thread's sentence"},
    {"curd_last_driver_code", "the thread's last code"},
    {"curd_driver_version", "read when the driver loaded (test-driver fails"
                            " each call of the load)"},
    {"curd_device_options_init", "fills a struct"},
    {"curd_device_stats", "reads the rooms' counters"},
    {"curd_device_stats_reset", "resets the rooms' counters"},
    {"curd_device_set_reclaim", "stores a callback"},
    {"curd_buffer_size", "reads the handle table"},
    {"curd_buffer_device_ptr", "reads the handle table"},
    {"curd_device_resident_bytes", "reads the resident room"},
    {"curd_program_desc_init", "fills a struct"},
    {"curd_program_info", "returns what the load read"},
    {"curd_launch_init", "fills a struct"},
};
const size_t api_quiet_function_count =
    sizeof api_quiet_functions / sizeof api_quiet_functions[0];
