/* transfer-test.h - checks shared by the resident and transfer tests.
 *
 * g_assert_cmpmem takes int lengths and prints whole buffers; these take
 * size_t and name the first differing byte, which is what a failed round
 * trip of 64 MiB needs. */
#ifndef CURD_TESTS_TRANSFER_TEST_H
#define CURD_TESTS_TRANSFER_TEST_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curd.h"
#include "support/curd-test.h"

static inline void transfer_test_same_bytes(const char *file, int line,
                                            const char *func,
                                            const char *what,
                                            const void *actual,
                                            const void *expected, size_t len)
{
    const unsigned char *a = actual;
    const unsigned char *b = expected;
    size_t at = 0;
    char *message;
    if (memcmp(a, b, len) == 0)
        return;
    while (a[at] == b[at])
        at++;
    message = g_strdup_printf("%s: byte %zu of %zu is 0x%02x, expected 0x%02x",
                              what, at, len, a[at], b[at]);
    g_assertion_message(G_LOG_DOMAIN, file, line, func, message);
    g_free(message);
}

/* Every byte of actual[0, len) equals expected[0, len). */
#define assert_same_bytes(actual, expected, len)                              \
    transfer_test_same_bytes(__FILE__, __LINE__, G_STRFUNC,                   \
                             #actual " vs " #expected, (actual), (expected),  \
                             (len))

/* What a failed call must leave as it was: the transfer counters, the
 * resident statistics, and the live levels of both pools. */
typedef struct transfer_test_snapshot {
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t copy_ops;
    uint64_t fences;
    uint64_t fill_ops;
    uint64_t fill_bytes;
    uint64_t accounting_repairs;
    curd_stat_family resident_bytes;
    curd_stat_family resident_buffers;
    uint64_t device_live_bytes;
    uint64_t pinned_live_bytes;
} transfer_test_snapshot;

static inline transfer_test_snapshot transfer_test_take(curd_device *device)
{
    curd_stats stats = curd_test_device_stats(device);
    transfer_test_snapshot snapshot;
    snapshot.h2d_bytes = stats.h2d_bytes;
    snapshot.d2h_bytes = stats.d2h_bytes;
    snapshot.copy_ops = stats.copy_ops;
    snapshot.fences = stats.fences;
    snapshot.fill_ops = stats.fill_ops;
    snapshot.fill_bytes = stats.fill_bytes;
    snapshot.accounting_repairs = stats.accounting_repairs;
    snapshot.resident_bytes = stats.resident_bytes;
    snapshot.resident_buffers = stats.resident_buffers;
    snapshot.device_live_bytes = stats.device_pool.live_bytes.current;
    snapshot.pinned_live_bytes = stats.pinned_pool.live_bytes.current;
    return snapshot;
}

#define assert_snapshot_equal(a, b)                                           \
    do {                                                                      \
        transfer_test_snapshot a_ = (a), b_ = (b);                            \
        g_assert_cmpuint(a_.h2d_bytes, ==, b_.h2d_bytes);                     \
        g_assert_cmpuint(a_.d2h_bytes, ==, b_.d2h_bytes);                     \
        g_assert_cmpuint(a_.copy_ops, ==, b_.copy_ops);                       \
        g_assert_cmpuint(a_.fences, ==, b_.fences);                           \
        g_assert_cmpuint(a_.fill_ops, ==, b_.fill_ops);                       \
        g_assert_cmpuint(a_.fill_bytes, ==, b_.fill_bytes);                   \
        g_assert_cmpuint(a_.accounting_repairs, ==, b_.accounting_repairs);   \
        g_assert_cmpuint(a_.resident_bytes.current, ==,                       \
                         b_.resident_bytes.current);                          \
        g_assert_cmpuint(a_.resident_bytes.allocated, ==,                     \
                         b_.resident_bytes.allocated);                        \
        g_assert_cmpuint(a_.resident_bytes.freed, ==,                         \
                         b_.resident_bytes.freed);                            \
        g_assert_cmpuint(a_.resident_buffers.current, ==,                     \
                         b_.resident_buffers.current);                        \
        g_assert_cmpuint(a_.resident_buffers.allocated, ==,                   \
                         b_.resident_buffers.allocated);                      \
        g_assert_cmpuint(a_.device_live_bytes, ==, b_.device_live_bytes);     \
        g_assert_cmpuint(a_.pinned_live_bytes, ==, b_.pinned_live_bytes);     \
    } while (0)

/* The levels alone: resident bytes and buffers now, both pools' live
 * bytes. What work that allocates and frees again (a rollback, a
 * session's end) must bring back, though it moved the cumulative
 * counters. */
#define assert_snapshot_levels_equal(a, b)                                    \
    do {                                                                      \
        transfer_test_snapshot a_ = (a), b_ = (b);                            \
        g_assert_cmpuint(a_.resident_bytes.current, ==,                       \
                         b_.resident_bytes.current);                          \
        g_assert_cmpuint(a_.resident_buffers.current, ==,                     \
                         b_.resident_buffers.current);                        \
        g_assert_cmpuint(a_.device_live_bytes, ==, b_.device_live_bytes);     \
        g_assert_cmpuint(a_.pinned_live_bytes, ==, b_.pinned_live_bytes);     \
    } while (0)

/* A buffer's whole contents, downloaded (the caller frees with g_free). */
static inline unsigned char *transfer_test_contents(curd_device *device,
                                                    curd_buffer buffer,
                                                    size_t len)
{
    unsigned char *bytes = g_malloc(len);
    memset(bytes, 0x5A, len);
    g_assert_cmpint(curd_buffer_download(device, buffer, bytes, len), ==,
                    CURD_OK);
    return bytes;
}

static inline void transfer_test_buffer_holds(const char *file, int line,
                                              const char *func,
                                              const char *what,
                                              curd_device *device,
                                              curd_buffer buffer,
                                              const void *expected, size_t len)
{
    unsigned char *contents = transfer_test_contents(device, buffer, len);
    transfer_test_same_bytes(file, line, func, what, contents, expected, len);
    g_free(contents);
}

/* Every byte of a buffer of len bytes, downloaded into poisoned memory,
 * equals expected[0, len). */
#define assert_buffer_holds(device, buffer, expected, len)                    \
    transfer_test_buffer_holds(__FILE__, __LINE__, G_STRFUNC,                 \
                               #buffer " vs " #expected, (device), (buffer),  \
                               (expected), (len))

/* ------------------------------------------------------------------------
 * Opening under a setting, and round trips
 * ---------------------------------------------------------------------- */

/* Opens device 0 with the environment variable `name` set to value (NULL:
 * nothing set) while it opens; the device keeps what it read. NULL when
 * there is none (the test then skipped). */
static inline curd_device *transfer_test_open_with(const char *name,
                                                   const char *value)
{
    curd_device *device;
    if (value != NULL)
        g_setenv(name, value, TRUE);
    device = curd_test_gpu_open();
    g_unsetenv(name);
    return device;
}

/* Uploads fresh random bytes into a new buffer of byte_len, downloads
 * them into poisoned malloc memory and compares every byte. */
static inline void transfer_test_round_trip(curd_device *device,
                                            size_t byte_len)
{
    curd_buffer buffer = {0};
    unsigned char *model = g_malloc(byte_len);
    unsigned char *back = g_malloc(byte_len);
    curd_test_fill_random(model, byte_len);
    curd_test_poison(back, byte_len);
    g_assert_cmpint(curd_buffer_alloc(device, byte_len, &buffer), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, byte_len), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_download(device, buffer, back, byte_len), ==,
                    CURD_OK);
    assert_same_bytes(back, model, byte_len);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(back);
    g_free(model);
}

typedef struct transfer_test_round_trips {
    curd_device *device;
    unsigned rounds;
    size_t max_len;
} transfer_test_round_trips;

static inline gpointer transfer_test_round_trips_run(gpointer data)
{
    const transfer_test_round_trips *work = data;
    for (unsigned round = 0; round < work->rounds; round++)
        transfer_test_round_trip(
            work->device, (size_t)g_random_int_range(1, (gint32)work->max_len));
    return NULL;
}

/* thread_count threads at once, each making `rounds` round trips of
 * random lengths in [1, max_len); returns when all are done. */
static inline void transfer_test_round_trips_on_threads(curd_device *device,
                                                        unsigned thread_count,
                                                        unsigned rounds,
                                                        size_t max_len)
{
    transfer_test_round_trips work = {device, rounds, max_len};
    GThread **threads = g_new(GThread *, thread_count);
    for (unsigned i = 0; i < thread_count; i++)
        threads[i] = g_thread_new("round-trips",
                                  transfer_test_round_trips_run, &work);
    for (unsigned i = 0; i < thread_count; i++)
        g_thread_join(threads[i]);
    g_free(threads);
}

/* ------------------------------------------------------------------------
 * What a batch moves
 * ---------------------------------------------------------------------- */

typedef struct transfer_test_interval {
    size_t start;
    size_t end;
} transfer_test_interval;

static inline int transfer_test_interval_compare(const void *a, const void *b)
{
    const transfer_test_interval *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

/* Bytes of the union of the items' device ranges, per buffer, summed: what
 * a fused staged batch moves over the bus. *out_spans (when not NULL): how
 * many runs that union makes, the spans the planner fuses the items into. */
static inline uint64_t transfer_test_union(const curd_buffer *buffers,
                                           size_t buffer_count,
                                           const curd_buffer *item_buffers,
                                           const size_t *offsets,
                                           const size_t *lens, size_t count,
                                           size_t *out_spans)
{
    uint64_t total = 0;
    size_t runs = 0;
    transfer_test_interval *spans = g_new(transfer_test_interval, count + 1);
    for (size_t b = 0; b < buffer_count; b++) {
        size_t used = 0;
        for (size_t i = 0; i < count; i++)
            if (item_buffers[i].id == buffers[b].id && lens[i] > 0)
                spans[used++] =
                    (transfer_test_interval){offsets[i], offsets[i] + lens[i]};
        qsort(spans, used, sizeof *spans, transfer_test_interval_compare);
        size_t start = 0, end = 0;
        for (size_t i = 0; i < used; i++) {
            if (i == 0 || spans[i].start > end) {
                total += end - start;
                runs++;
                start = spans[i].start;
                end = spans[i].end;
            } else if (spans[i].end > end) {
                end = spans[i].end;
            }
        }
        total += end - start;
    }
    g_free(spans);
    if (out_spans != NULL)
        *out_spans = runs;
    return total;
}

/* ------------------------------------------------------------------------
 * Running the GPU tests, on a GPU or on the stand-in driver
 *
 * A GPU test is built twice (tests/README.md): as itself, against
 * whatever libcuda the host has (skipping without one), and as its
 * stand-in twin, with CURD_TEST_ON_FAKE: then the stand-in libcuda built
 * beside the program (tests/fake/) is loaded, no skip is allowed, and
 * after every test the fake must hold no memory, stream,
 * event, registration, module or context retain: what curd created, it
 * destroyed.
 * ---------------------------------------------------------------------- */

#if CURD_TEST_ON_FAKE
#define TRANSFER_TEST_SUFFIX "-fake"
#else
#define TRANSFER_TEST_SUFFIX "-gpu"
#endif

typedef struct transfer_test_case {
    const char *path;
    void (*run)(void);
} transfer_test_case;

static inline void transfer_test_run_case(gconstpointer data)
{
    static const char *const kinds[] = {
        "device_memory", "host_memory", "registered", "stream",
        "event",         "module",      "context_retains",
    };
    const transfer_test_case *test_case = data;
    long live[G_N_ELEMENTS(kinds)];
    test_case->run();
    if (!CURD_TEST_ON_FAKE || g_test_failed())
        return;
    if (!curd_test_fake_live(kinds, G_N_ELEMENTS(kinds), live))
        g_error("%s: the stand-in driver is not loaded after the test",
                test_case->path);
    for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++)
        if (live[i] != 0)
            g_error("%s: the stand-in driver holds %ld %s after the test",
                    test_case->path, live[i], kinds[i]);
}

static inline int transfer_test_main(int argc, char **argv, const char *area,
                                     const transfer_test_case *cases,
                                     size_t count)
{
    if (CURD_TEST_ON_FAKE) {
        curd_test_require_fake_driver();
    }
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < count; i++) {
        char *path = g_strconcat("/", area, TRANSFER_TEST_SUFFIX, "/",
                                 cases[i].path, NULL);
        g_test_add_data_func(path, &cases[i], transfer_test_run_case);
        g_free(path);
    }
    return g_test_run();
}

#endif
