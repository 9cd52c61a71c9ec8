/* test-soak-gpu.c - many threads on one device for a bounded time, then
 * every counter reconciled exactly; and a device opened and closed 1000
 * times leaking nothing.
 *
 * The soak: 8, then 16 threads each allocate, upload, download, upload
 * and download batches, fill, upload asynchronously (from memory each
 * registered for itself) and sync, trim, free and dispatch the harness's
 * add_one (on a resident buffer and on borrowed memory), at random, on
 * one device, for CURD_SOAK_SECONDS (default 3 on a GPU, 0.3 on the
 * stand-in driver). Each thread keeps a model of its own buffers and
 * checks every byte it reads back, and counts what it moved. At the end:
 * h2d and d2h bytes, DMAs, fills and fill bytes, resident buffers and
 * bytes allocated and freed equal the threads' sums exactly, fences lie
 * between the fences the threads surely caused and that plus their syncs
 * (a sync finds nothing pending when another thread's sync completed its
 * upload first), the pools hold nothing after a trim and their traffic
 * balances, and once the device is closed the GPU's free memory (read
 * through an observer device) is back where it was before it opened, and
 * on the stand-in driver so is every live count.
 *
 * The opens: a device opened and closed CURD_SOAK_OPENS times (default
 * 1000), each time moving bytes and now and then loading and running a
 * program and registering memory, while an observer device of the same
 * GPU stays open: the GPU's free memory is back where it was, and on the
 * stand-in driver so is every live count (memory and its bytes, streams,
 * events, modules, registrations, context retains).
 *
 * Skips without a GPU; its stand-in twin test-soak-gpu-fake
 * (CURD_TEST_ON_FAKE, tests/README.md) runs on the stand-in driver
 * (tests/fake/), briefly, under Valgrind in make check and
 * ThreadSanitizer (make check-tsan). */
#include <glib.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/curd-test.h"
#include "support/kernel-load.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/soak-fake"
#define DEFAULT_SECONDS 0.3
#else
#define PATH_ROOT "/soak"
#define DEFAULT_SECONDS 3.0
#endif

#define MAX_BUFFERS 4
/* Every transfer fits one staging chunk (1 MiB) and every buffer holds
 * whole uint32 words, so each item is exactly one DMA and add_one runs on
 * any buffer. */
#define MAX_LEN ((size_t)256 << 10)
#define MIN_OPERATIONS 24u

static void ok(curd_status status, const char *what)
{
    if (status != CURD_OK)
        g_error("%s: %s: %s", what, curd_status_name(status),
                curd_last_error());
}

static double soak_seconds(void)
{
    const char *value = g_getenv("CURD_SOAK_SECONDS");
    double seconds = value != NULL ? g_ascii_strtod(value, NULL) : 0.0;
    return seconds > 0.0 ? seconds : DEFAULT_SECONDS;
}

/* Under a compute-sanitizer tool (run-remote.sh sets
 * CURD_SOAK_SANITIZED) the device's free memory moves with the tool's own
 * device bookkeeping (memcheck's, for mapped page-locked memory too), so
 * the free-memory comparisons are left to the plain runs; the tool's leak
 * check covers that question there. */
static bool free_memory_comparable(void)
{
    return g_getenv("CURD_SOAK_SANITIZED") == NULL;
}

static curd_program *load_add_one(curd_device *device)
{
    curd_program *program = NULL;
    ok(curd_test_kernel_load(device, "add_one.ptx", "curd_add_one",
                             &program),
       "loading add_one");
    return program;
}

/* ------------------------------------------------------------------------
 * One thread
 * ---------------------------------------------------------------------- */
typedef struct counted {
    uint64_t h2d_bytes, d2h_bytes, copy_ops, fill_ops, fill_bytes;
    uint64_t sure_fences; /* synchronous transfers, fills, dispatches */
    uint64_t syncs;       /* syncs after an asynchronous upload */
    uint64_t allocs, frees, alloc_bytes, free_bytes;
    uint64_t dispatches, trims, operations;
} counted;

typedef struct owned {
    curd_buffer buffer;
    size_t len; /* 0: free slot */
    unsigned char *model;
} owned;

typedef struct worker {
    curd_device *device;
    curd_program *add_one;
    gint64 deadline_us;
    guint32 seed;
    GRand *rand;
    owned buffers[MAX_BUFFERS];
    unsigned char *scratch;    /* pageable caller memory */
    unsigned char *expected;   /* what scratch must come back as */
    unsigned char *registered; /* registered with the device */
    counted count;
} worker;

static size_t random_len(worker *w, size_t max)
{
    return 4u * (size_t)g_rand_int_range(w->rand, 1, (gint32)(max / 4u) + 1);
}

static void random_bytes(worker *w, unsigned char *bytes, size_t len)
{
    for (size_t at = 0; at < len; at += 4) {
        guint32 word = g_rand_int(w->rand);
        memcpy(bytes + at, &word, len - at < 4 ? len - at : 4);
    }
}

static owned *live_buffer(worker *w)
{
    unsigned start = (unsigned)g_rand_int_range(w->rand, 0, MAX_BUFFERS);
    for (unsigned i = 0; i < MAX_BUFFERS; i++) {
        owned *b = &w->buffers[(start + i) % MAX_BUFFERS];
        if (b->len != 0)
            return b;
    }
    return NULL;
}

static owned *free_slot(worker *w)
{
    for (unsigned i = 0; i < MAX_BUFFERS; i++)
        if (w->buffers[i].len == 0)
            return &w->buffers[i];
    return NULL;
}

static void counted_transfer(worker *w, bool upload, size_t bytes,
                             unsigned dmas)
{
    if (upload)
        w->count.h2d_bytes += bytes;
    else
        w->count.d2h_bytes += bytes;
    w->count.copy_ops += dmas;
    w->count.sure_fences++;
}

/* The whole buffer, downloaded into poisoned memory, is its model. */
static void check_buffer(worker *w, owned *b)
{
    curd_test_poison(w->scratch, b->len);
    ok(curd_buffer_download(w->device, b->buffer, w->scratch, b->len),
       "curd_buffer_download");
    counted_transfer(w, false, b->len, 1);
    if (memcmp(w->scratch, b->model, b->len) != 0)
        g_error("thread %u: a buffer of %zu bytes lost its bytes", w->seed,
                b->len);
}

static void do_alloc(worker *w)
{
    owned *b = free_slot(w);
    if (b == NULL)
        return;
    b->len = random_len(w, MAX_LEN);
    ok(curd_buffer_alloc(w->device, b->len, &b->buffer), "curd_buffer_alloc");
    w->count.allocs++;
    w->count.alloc_bytes += b->len;
    random_bytes(w, b->model, b->len);
    ok(curd_buffer_upload(w->device, b->buffer, b->model, b->len),
       "curd_buffer_upload");
    counted_transfer(w, true, b->len, 1);
}

static void do_free(worker *w, owned *b)
{
    ok(curd_buffer_free(w->device, b->buffer), "curd_buffer_free");
    w->count.frees++;
    w->count.free_bytes += b->len;
    b->len = 0;
}

/* A part of the buffer: [*offset, *offset + *len), len at least 4. */
static void random_part(worker *w, const owned *b, size_t *offset,
                        size_t *len)
{
    *len = random_len(w, b->len);
    *offset = 4u * (size_t)g_rand_int_range(
                       w->rand, 0, (gint32)((b->len - *len) / 4u) + 1);
}

static void do_upload_at(worker *w, owned *b)
{
    size_t offset, len;
    random_part(w, b, &offset, &len);
    random_bytes(w, b->model + offset, len);
    ok(curd_buffer_upload_at(w->device, b->buffer, offset, b->model + offset,
                             len),
       "curd_buffer_upload_at");
    counted_transfer(w, true, len, 1);
}

static void do_download_range(worker *w, owned *b)
{
    size_t offset, len;
    random_part(w, b, &offset, &len);
    curd_test_poison(w->scratch, len);
    ok(curd_buffer_download_range(w->device, b->buffer, offset, len,
                                  w->scratch, MAX_LEN),
       "curd_buffer_download_range");
    counted_transfer(w, false, len, 1);
    if (memcmp(w->scratch, b->model + offset, len) != 0)
        g_error("thread %u: a range came back different", w->seed);
}

/* Two pieces of the buffer with a gap between them: two DMAs. */
static void two_pieces(worker *w, const owned *b, size_t offset[2],
                       size_t len[2])
{
    size_t half = b->len / 2u;
    len[0] = random_len(w, half - 4u > 4u ? half - 4u : 4u);
    offset[0] = 0;
    offset[1] = half;
    len[1] = random_len(w, b->len - half);
}

static void do_batches(worker *w, owned *b)
{
    size_t offset[2], len[2];
    if (b->len < 16u) {
        check_buffer(w, b);
        return;
    }
    two_pieces(w, b, offset, len);
    curd_upload up[2];
    for (int i = 0; i < 2; i++) {
        random_bytes(w, b->model + offset[i], len[i]);
        up[i] = (curd_upload){b->buffer, offset[i], b->model + offset[i],
                              len[i]};
    }
    /* Two DMAs, or one where the pieces are of one length: half a buffer
     * apart on both sides, they are rows of one strided DMA. */
    unsigned dmas = len[0] == len[1] ? 1u : 2u;
    ok(curd_upload_batch(w->device, up, 2), "curd_upload_batch");
    counted_transfer(w, true, len[0] + len[1], dmas);
    curd_test_poison(w->scratch, b->len);
    curd_download down[2] = {
        {b->buffer, offset[0], len[0], w->scratch, len[0]},
        {b->buffer, offset[1], len[1], w->scratch + offset[1], len[1]},
    };
    ok(curd_download_batch(w->device, down, 2), "curd_download_batch");
    counted_transfer(w, false, len[0] + len[1], dmas);
    for (int i = 0; i < 2; i++)
        if (memcmp(down[i].dst, b->model + offset[i], len[i]) != 0)
            g_error("thread %u: a batch piece came back different", w->seed);
}

static void do_fill(worker *w, owned *b)
{
    size_t offset, len;
    random_part(w, b, &offset, &len);
    guint8 value = (guint8)g_rand_int(w->rand);
    ok(curd_buffer_fill(w->device, b->buffer, offset, len, value),
       "curd_buffer_fill");
    memset(b->model + offset, value, len);
    w->count.fill_ops++;
    w->count.fill_bytes += len;
    w->count.sure_fences++;
}

static void do_async(worker *w, owned *b)
{
    random_bytes(w, w->registered, b->len);
    ok(curd_buffer_upload_async(w->device, b->buffer, 0, w->registered,
                                b->len),
       "curd_buffer_upload_async");
    w->count.h2d_bytes += b->len;
    w->count.copy_ops++;
    /* Another thread's sync may complete it first: then this one finds
     * nothing pending and costs no fence. */
    ok(curd_device_sync_uploads(w->device), "curd_device_sync_uploads");
    w->count.syncs++;
    memcpy(b->model, w->registered, b->len);
}

static void add_one_to(unsigned char *bytes, size_t len)
{
    for (size_t at = 0; at < len; at += 4) {
        guint32 word;
        memcpy(&word, bytes + at, 4);
        word += 1u;
        memcpy(bytes + at, &word, 4);
    }
}

static curd_launch launch_over(uint32_t words)
{
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = words;
    launch.block[0] = 128;
    return launch;
}

/* add_one on the buffer, read back into poisoned memory; or, through
 * curd_dispatch_async, on borrowed words of the same length. */
static void do_dispatch(worker *w, owned *b)
{
    uint32_t words = (uint32_t)(b->len / 4u);
    curd_launch launch = launch_over(words);
    curd_arg args[2] = {curd_arg_buffer(CURD_ROLE_INOUT, b->buffer),
                        curd_arg_scalar(&words, sizeof words)};
    if (g_rand_boolean(w->rand)) {
        curd_test_poison(w->scratch, b->len);
        args[0].host = w->scratch;
        args[0].byte_len = b->len;
        ok(curd_dispatch(w->device, w->add_one, &launch, args, 2),
           "curd_dispatch");
        add_one_to(b->model, b->len);
        if (memcmp(w->scratch, b->model, b->len) != 0)
            g_error("thread %u: add_one's read-back is wrong", w->seed);
        /* The read-back counts as a transfer's copy would. */
        w->count.d2h_bytes += b->len;
        w->count.copy_ops++;
    } else {
        random_bytes(w, w->scratch, b->len);
        memcpy(w->expected, w->scratch, b->len);
        add_one_to(w->expected, b->len);
        args[0] = curd_arg_host(CURD_ROLE_INOUT, w->scratch, b->len);
        curd_pending *pending = NULL;
        ok(curd_dispatch_async(w->device, w->add_one, &launch, args, 2,
                               &pending),
           "curd_dispatch_async");
        ok(curd_pending_wait(pending, NULL), "curd_pending_wait");
        ok(curd_pending_free(pending), "curd_pending_free");
        if (memcmp(w->scratch, w->expected, b->len) != 0)
            g_error("thread %u: add_one on borrowed memory is wrong",
                    w->seed);
        /* The words' upload and read-back. */
        w->count.h2d_bytes += b->len;
        w->count.d2h_bytes += b->len;
        w->count.copy_ops += 2;
    }
    /* Its wait is one fence. */
    w->count.sure_fences++;
    w->count.dispatches++;
}

static gpointer work(gpointer data)
{
    worker *w = data;
    w->rand = g_rand_new_with_seed(w->seed);
    w->scratch = g_malloc(MAX_LEN);
    w->expected = g_malloc(MAX_LEN);
    w->registered = g_malloc(MAX_LEN);
    ok(curd_host_register(w->device, w->registered, MAX_LEN),
       "curd_host_register");
    for (unsigned i = 0; i < MAX_BUFFERS; i++)
        w->buffers[i].model = g_malloc(MAX_LEN);
    /* A few operations each even past the deadline, so that a slow run
     * (Valgrind, ThreadSanitizer) still mixes every kind. */
    while (g_get_monotonic_time() < w->deadline_us ||
           w->count.operations < MIN_OPERATIONS) {
        owned *b = live_buffer(w);
        int op = g_rand_int_range(w->rand, 0, 100);
        w->count.operations++;
        if (b == NULL || op < 10) {
            do_alloc(w);
        } else if (op < 16) {
            do_free(w, b);
        } else if (op < 28) {
            random_bytes(w, b->model, b->len);
            ok(curd_buffer_upload(w->device, b->buffer, b->model, b->len),
               "curd_buffer_upload");
            counted_transfer(w, true, b->len, 1);
        } else if (op < 38) {
            do_upload_at(w, b);
        } else if (op < 50) {
            check_buffer(w, b);
        } else if (op < 60) {
            do_download_range(w, b);
        } else if (op < 70) {
            do_batches(w, b);
        } else if (op < 78) {
            do_fill(w, b);
        } else if (op < 86) {
            do_async(w, b);
        } else if (op < 89) {
            ok(curd_device_trim(w->device,
                                (uint64_t)g_rand_int_range(w->rand, 0, 4) *
                                    MAX_LEN),
               "curd_device_trim");
            w->count.trims++;
        } else {
            do_dispatch(w, b);
        }
    }
    for (unsigned i = 0; i < MAX_BUFFERS; i++) {
        if (w->buffers[i].len != 0) {
            check_buffer(w, &w->buffers[i]);
            do_free(w, &w->buffers[i]);
        }
        g_free(w->buffers[i].model);
    }
    ok(curd_host_unregister(w->device, w->registered), "curd_host_unregister");
    g_free(w->scratch);
    g_free(w->expected);
    g_free(w->registered);
    g_rand_free(w->rand);
    return NULL;
}

/* ------------------------------------------------------------------------
 * The soak
 * ---------------------------------------------------------------------- */
static curd_stats stats_now(curd_device *device)
{
    return curd_test_device_stats(device);
}

static uint64_t free_memory(curd_device *device)
{
    return curd_test_device_info(device).free_memory_bytes;
}

/* Runs `threads` workers until the deadline; sums their counts. */
static counted run_workers(curd_device *device, curd_program *add_one,
                           unsigned threads, double seconds)
{
    worker *workers = g_new0(worker, threads);
    GThread **running = g_new(GThread *, threads);
    gint64 deadline = g_get_monotonic_time() + (gint64)(seconds * 1e6);
    for (unsigned i = 0; i < threads; i++) {
        workers[i].device = device;
        workers[i].add_one = add_one;
        workers[i].deadline_us = deadline;
        workers[i].seed = (guint32)g_test_rand_int();
        running[i] = g_thread_new("soak", work, &workers[i]);
    }
    counted sum;
    memset(&sum, 0, sizeof sum);
    for (unsigned i = 0; i < threads; i++) {
        g_thread_join(running[i]);
        const counted *c = &workers[i].count;
        sum.h2d_bytes += c->h2d_bytes;
        sum.d2h_bytes += c->d2h_bytes;
        sum.copy_ops += c->copy_ops;
        sum.fill_ops += c->fill_ops;
        sum.fill_bytes += c->fill_bytes;
        sum.sure_fences += c->sure_fences;
        sum.syncs += c->syncs;
        sum.allocs += c->allocs;
        sum.frees += c->frees;
        sum.alloc_bytes += c->alloc_bytes;
        sum.free_bytes += c->free_bytes;
        sum.dispatches += c->dispatches;
        sum.trims += c->trims;
        sum.operations += c->operations;
    }
    g_free(running);
    g_free(workers);
    return sum;
}

static void pool_balances(const char *name, const curd_pool_stats *pool)
{
    const curd_stat_family *families[] = {
        &pool->live_bytes, &pool->cached_bytes, &pool->requested_bytes,
        &pool->live_blocks, &pool->cached_blocks};
    for (size_t i = 0; i < G_N_ELEMENTS(families); i++) {
        if (families[i]->current != 0 ||
            families[i]->allocated != families[i]->freed)
            g_error("%s pool, family %zu: %" PRIu64 " left, %" PRIu64
                    " in and %" PRIu64 " out",
                    name, i, families[i]->current, families[i]->allocated,
                    families[i]->freed);
    }
    g_assert_cmpuint(pool->upstream_allocs, ==, pool->upstream_frees);
    g_assert_cmpuint(pool->oom_failures, ==, 0);
}

static const char *const live_kinds[] = {
    "device_memory", "device_memory_bytes", "host_memory",
    "host_memory_bytes", "registered", "registered_bytes", "stream",
    "event", "module", "context_retains", "context_stack",
};

/* The stand-in driver's live counts (FALSE on a GPU). */
static gboolean live_now(long counts[G_N_ELEMENTS(live_kinds)])
{
    return curd_test_fake_live(live_kinds, G_N_ELEMENTS(live_kinds), counts);
}

static void live_as_before(const long before[G_N_ELEMENTS(live_kinds)],
                           const char *after_what)
{
    long after[G_N_ELEMENTS(live_kinds)];
    g_assert_true(live_now(after));
    for (size_t i = 0; i < G_N_ELEMENTS(live_kinds); i++)
        if (after[i] != before[i])
            g_error("after %s the stand-in driver holds %ld %s, %ld before",
                    after_what, after[i], live_kinds[i], before[i]);
}

/* A device's life of `seconds` with `threads` workers: returns it open,
 * its add_one in *program. */
static curd_device *soaked(unsigned threads, double seconds,
                           curd_program **program, counted *sum)
{
    curd_device *device = NULL;
    ok(curd_device_open(0, NULL, &device), "curd_device_open");
    *program = load_add_one(device);
    *sum = run_workers(device, *program, threads, seconds);
    ok(curd_device_trim(device, 0), "curd_device_trim");
    return device;
}

/* The driver keeps what it pooled for the context at its high-water mark
 * (for as many streams and events, and stream memory operations, as the
 * threads held at once), so a life that reaches a new mark leaves less
 * free memory behind without any leak, once; a leak of curd's recurs with
 * every life. After a life that left less, up to three more lives run:
 * true when one of them leaves free memory as it found it. On the H100 a
 * 16-thread life once left 2 MiB so, after a first life as long. */
static bool free_memory_settles(curd_device *observer, unsigned threads,
                                double seconds, uint64_t free_now)
{
    for (unsigned life = 0; life < 3; life++) {
        curd_program *add_one;
        counted sum;
        curd_device *device = soaked(threads, seconds, &add_one, &sum);
        ok(curd_program_free(add_one), "curd_program_free");
        ok(curd_device_close(device), "curd_device_close");
        uint64_t free_after = free_memory(observer);
        g_test_message("another life: free memory %" PRIu64 " before, %"
                       PRIu64 " after",
                       free_now, free_after);
        if (free_after == free_now)
            return true;
        free_now = free_after;
    }
    return false;
}

static void soak(unsigned threads)
{
    /* The observer holds the GPU's context and reads its free memory
     * while the soaked devices come and go. */
    curd_device *observer = curd_test_gpu_open();
    if (observer == NULL)
        return;
    double seconds = soak_seconds();
    curd_program *add_one;
    counted sum;
    /* A first life as long as the measured one: what the driver keeps for
     * the context's life (its first kernel's launch resources, the JIT's
     * caches, what it pools for as many streams and events as the threads
     * hold at once) is taken before free memory is measured. On the H100
     * a first life a tenth as long left the measured one 2 MiB of such
     * driver memory to take at 16 threads. */
    curd_device *device = soaked(threads, seconds, &add_one, &sum);
    ok(curd_device_close(device), "curd_device_close");
    uint64_t free_before = free_memory(observer);
    long live_before[G_N_ELEMENTS(live_kinds)];
    gboolean on_fake = live_now(live_before);

    device = soaked(threads, seconds, &add_one, &sum);
    curd_stats stats = stats_now(device);
    uint64_t free_trimmed = free_memory(observer);
    ok(curd_program_free(add_one), "curd_program_free");
    ok(curd_device_close(device), "curd_device_close");
    uint64_t free_after = free_memory(observer);
    g_test_message("soak on %s, %u threads, %.1f s: %" PRIu64
                   " operations (%" PRIu64
                   " allocations, %" PRIu64 " dispatches, %" PRIu64
                   " trims); %" PRIu64 " bytes up, %" PRIu64 " down in %"
                   PRIu64 " DMAs; %" PRIu64 " fills of %" PRIu64
                   " bytes; %" PRIu64 " fences; free memory %" PRIu64
                   " before, %" PRIu64 " after the trim, %" PRIu64
                   " after the close",
                   curd_test_device_info(observer).name, threads, seconds,
                   sum.operations, sum.allocs,
                   sum.dispatches, sum.trims, stats.h2d_bytes,
                   stats.d2h_bytes, stats.copy_ops, stats.fill_ops,
                   stats.fill_bytes, stats.fences, free_before, free_trimmed,
                   free_after);
    g_assert_cmpuint(sum.operations, >, 0);
    g_assert_cmpuint(stats.h2d_bytes, ==, sum.h2d_bytes);
    g_assert_cmpuint(stats.d2h_bytes, ==, sum.d2h_bytes);
    g_assert_cmpuint(stats.copy_ops, ==, sum.copy_ops);
    g_assert_cmpuint(stats.fill_ops, ==, sum.fill_ops);
    g_assert_cmpuint(stats.fill_bytes, ==, sum.fill_bytes);
    g_assert_cmpuint(stats.fences, >=, sum.sure_fences);
    g_assert_cmpuint(stats.fences, <=, sum.sure_fences + sum.syncs);
    g_assert_cmpuint(stats.resident_buffers.allocated, ==, sum.allocs);
    g_assert_cmpuint(stats.resident_buffers.freed, ==, sum.frees);
    g_assert_cmpuint(stats.resident_buffers.current, ==, 0);
    g_assert_cmpuint(stats.resident_bytes.allocated, ==, sum.alloc_bytes);
    g_assert_cmpuint(stats.resident_bytes.freed, ==, sum.free_bytes);
    g_assert_cmpuint(stats.resident_bytes.current, ==, 0);
    g_assert_cmpuint(stats.accounting_repairs, ==, 0);
    pool_balances("device", &stats.device_pool);
    pool_balances("pinned", &stats.pinned_pool);
    if (free_memory_comparable() && free_after != free_before
        && !free_memory_settles(observer, threads, seconds, free_after))
        g_error("free memory went from %" PRIu64 " to %" PRIu64
                " over the soak and kept falling in three more lives",
                free_before, free_after);
    if (on_fake)
        live_as_before(live_before, "the soak");
    ok(curd_device_close(observer), "curd_device_close");
}

static void test_8_threads_soak_one_device(void)
{
    soak(8);
}

static void test_16_threads_soak_one_device(void)
{
    soak(16);
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */
static unsigned soak_opens(void)
{
    const char *value = g_getenv("CURD_SOAK_OPENS");
    unsigned opens = value != NULL ? (unsigned)atoi(value) : 0u;
    return opens != 0 ? opens : 1000u;
}

/* One life of a device: bytes up and down, and now and then a program run
 * and a registration. */
static void one_life(unsigned round, unsigned char *bytes,
                     unsigned char *back, size_t len)
{
    curd_device *device = NULL;
    ok(curd_device_open(0, NULL, &device), "curd_device_open");
    curd_buffer buffer;
    ok(curd_buffer_alloc(device, len, &buffer), "curd_buffer_alloc");
    ok(curd_buffer_upload(device, buffer, bytes, len), "curd_buffer_upload");
    curd_test_poison(back, len);
    ok(curd_buffer_download(device, buffer, back, len),
       "curd_buffer_download");
    if (memcmp(bytes, back, len) != 0)
        g_error("open %u: the round trip came back different", round);
    if (round % 50u == 0) {
        curd_program *add_one = load_add_one(device);
        uint32_t words = (uint32_t)(len / 4u);
        curd_launch launch = launch_over(words);
        curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                           curd_arg_scalar(&words, sizeof words)};
        ok(curd_dispatch(device, add_one, &launch, args, 2), "curd_dispatch");
        ok(curd_host_register(device, back, len), "curd_host_register");
        ok(curd_buffer_download(device, buffer, back, len),
           "curd_buffer_download");
        add_one_to(bytes, len);
        if (memcmp(bytes, back, len) != 0)
            g_error("open %u: add_one came back wrong", round);
        /* Left for close: the program, the registration, the buffer. */
    } else {
        ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    }
    ok(curd_device_close(device), "curd_device_close");
}

static void test_opening_and_closing_a_device_leaks_nothing(void)
{
    curd_device *observer = curd_test_gpu_open();
    if (observer == NULL)
        return;
    unsigned opens = soak_opens();
    size_t len = 64u << 10;
    unsigned char *bytes = g_malloc(len);
    unsigned char *back = aligned_alloc(4096, len);
    curd_test_fill_random(bytes, len);
    /* The first life loads what the driver keeps for the process (on a
     * GPU the module's code, the JIT's caches) before anything is
     * measured. */
    one_life(0, bytes, back, len);
    long live_before[G_N_ELEMENTS(live_kinds)];
    gboolean on_fake = live_now(live_before);
    uint64_t free_before = free_memory(observer);
    for (unsigned round = 1; round <= opens; round++)
        one_life(round, bytes, back, len);
    uint64_t free_after = free_memory(observer);
    g_test_message("%u opens and closes on %s: free memory %" PRIu64
                   " before, %" PRIu64 " after",
                   opens, curd_test_device_info(observer).name, free_before,
                   free_after);
    if (free_memory_comparable())
        g_assert_cmpuint(free_after, ==, free_before);
    if (on_fake)
        live_as_before(live_before, "the opens");
    free(back);
    g_free(bytes);
    ok(curd_device_close(observer), "curd_device_close");
}

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    g_test_add_func(PATH_ROOT "/8-threads-soak-one-device-and-every-counter-"
                              "reconciles",
                    test_8_threads_soak_one_device);
    g_test_add_func(PATH_ROOT "/16-threads-soak-one-device-and-every-counter-"
                              "reconciles",
                    test_16_threads_soak_one_device);
    g_test_add_func(PATH_ROOT "/opening-and-closing-a-device-1000-times-"
                              "leaks-nothing",
                    test_opening_and_closing_a_device_leaks_nothing);
    return g_test_run();
}
