/* test-session.c - sessions on a device: exact-size reuse within the idle
 * budget, released handles going stale, static sets that hit without an
 * upload and miss on one changed byte, eviction and retention against the
 * budgets, keyed sets that hit without reading a byte, verified hits
 * compared by the copy team, bad input, teardown back to the resident
 * baseline, the device closing under a session, and eight threads
 * sharing one session.
 *
 * Every test opens device 0 or skips with the reason (no driver, no
 * device); its stand-in twin test-session-fake (tests/README.md) runs
 * the same on the stand-in driver, and
 * test-session-threads.c the threads alone, for ThreadSanitizer. Contents
 * are fresh random bytes, read back into poisoned memory and compared
 * byte for byte. */
#include <glib.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer-test.h"

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */
static curd_session *session_open(curd_device *device, uint64_t idle_budget,
                                  uint64_t static_budget, uint32_t flags)
{
    curd_session_options options;
    curd_session *session = NULL;
    curd_session_options_init(&options);
    options.idle_budget_bytes = idle_budget;
    options.static_budget_bytes = static_budget;
    options.flags = flags;
    g_assert_cmpint(curd_session_new(device, &options, &session), ==, CURD_OK);
    g_assert_nonnull(session);
    return session;
}

static curd_session_stats session_stats(curd_session *session)
{
    curd_session_stats stats;
    curd_test_poison(&stats, sizeof stats);
    stats.struct_size = sizeof stats;
    g_assert_cmpint(curd_session_stats_get(session, &stats), ==, CURD_OK);
    return stats;
}

static uint64_t resident_bytes(curd_device *device)
{
    uint64_t bytes = 0;
    g_assert_cmpint(curd_device_resident_bytes(device, &bytes), ==, CURD_OK);
    return bytes;
}

static curd_buffer session_alloc_ok(curd_session *session, size_t byte_len)
{
    curd_buffer buffer = {0};
    g_assert_cmpint(curd_session_alloc(session, byte_len, &buffer), ==,
                    CURD_OK);
    g_assert_cmpuint(buffer.id, !=, 0);
    return buffer;
}

static uint64_t device_ptr_of(curd_device *device, curd_buffer buffer)
{
    uint64_t device_ptr = 0;
    g_assert_cmpint(curd_buffer_device_ptr(device, buffer, &device_ptr), ==,
                    CURD_OK);
    return device_ptr;
}

/* A buffer's size, checked; the handle must be live. */
static void assert_size(curd_device *device, curd_buffer buffer, size_t len)
{
    size_t size = 0;
    g_assert_cmpint(curd_buffer_size(device, buffer, &size), ==, CURD_OK);
    g_assert_cmpuint(size, ==, len);
}

static void assert_stale(curd_device *device, curd_buffer buffer)
{
    size_t size = 77;
    g_assert_cmpint(curd_buffer_size(device, buffer, &size), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpuint(size, ==, 77);
}

/* The levels of a session's statistics, which a failed call must leave as
 * they were (with every cumulative counter). */
static void assert_session_stats_equal(curd_session_stats a,
                                       curd_session_stats b)
{
    g_assert_cmpuint(a.idle_bytes, ==, b.idle_bytes);
    g_assert_cmpuint(a.idle_buffers, ==, b.idle_buffers);
    g_assert_cmpuint(a.lent_bytes, ==, b.lent_bytes);
    g_assert_cmpuint(a.lent_buffers, ==, b.lent_buffers);
    g_assert_cmpuint(a.cached_bytes, ==, b.cached_bytes);
    g_assert_cmpuint(a.cached_sets, ==, b.cached_sets);
    g_assert_cmpuint(a.unretained_bytes, ==, b.unretained_bytes);
    g_assert_cmpuint(a.unretained_sets, ==, b.unretained_sets);
    g_assert_cmpuint(a.reuse_hits, ==, b.reuse_hits);
    g_assert_cmpuint(a.reuse_misses, ==, b.reuse_misses);
    g_assert_cmpuint(a.static_hits, ==, b.static_hits);
    g_assert_cmpuint(a.static_misses, ==, b.static_misses);
    g_assert_cmpuint(a.idle_evictions, ==, b.idle_evictions);
    g_assert_cmpuint(a.static_evictions, ==, b.static_evictions);
    g_assert_cmpuint(a.release_frees, ==, b.release_frees);
    g_assert_cmpuint(a.idle_budget_bytes, ==, b.idle_budget_bytes);
    g_assert_cmpuint(a.static_budget_bytes, ==, b.static_budget_bytes);
    g_assert_cmpuint(a.static_keyed_hits, ==, b.static_keyed_hits);
    g_assert_cmpuint(a.static_keyed_misses, ==, b.static_keyed_misses);
}

/* Payloads of fresh random bytes; free with tables_free. */
typedef struct tables {
    size_t count;
    unsigned char *bytes[8];
    curd_static_payload payloads[8];
    uint64_t total;
} tables;

static tables tables_random(size_t count, const size_t *byte_lens)
{
    tables t;
    memset(&t, 0, sizeof t);
    g_assert_cmpuint(count, <=, G_N_ELEMENTS(t.bytes));
    t.count = count;
    for (size_t i = 0; i < count; i++) {
        t.bytes[i] = g_malloc(byte_lens[i]);
        curd_test_fill_random(t.bytes[i], byte_lens[i]);
        t.payloads[i] = (curd_static_payload){t.bytes[i], byte_lens[i]};
        t.total += byte_lens[i];
    }
    return t;
}

/* The same bytes in memory of their own, so a hit is proved to come from
 * the content, not from the addresses. */
static tables tables_copy(const tables *from)
{
    tables t = *from;
    for (size_t i = 0; i < t.count; i++) {
        t.bytes[i] = g_memdup2(from->bytes[i], from->payloads[i].byte_len);
        t.payloads[i].data = t.bytes[i];
    }
    return t;
}

static void tables_free(tables *t)
{
    for (size_t i = 0; i < t->count; i++)
        g_free(t->bytes[i]);
    memset(t, 0, sizeof *t);
}

static const curd_static_set *upload_ok(curd_session *session,
                                        const char *domain, const tables *t)
{
    const curd_static_set *set = NULL;
    g_assert_cmpint(curd_session_upload_static(session, domain, t->payloads,
                                               t->count, &set),
                    ==, CURD_OK);
    g_assert_nonnull(set);
    g_assert_cmpuint(set->struct_size, >=, sizeof *set);
    g_assert_cmpuint(set->count, ==, t->count);
    return set;
}

static const curd_static_set *keyed_ok(curd_session *session,
                                       const char *domain, const char *key,
                                       const tables *t)
{
    const curd_static_set *set = NULL;
    g_assert_cmpint(curd_session_upload_static_keyed(session, domain, key,
                                                     strlen(key), t->payloads,
                                                     t->count, &set),
                    ==, CURD_OK);
    g_assert_nonnull(set);
    g_assert_cmpuint(set->count, ==, t->count);
    return set;
}

/* Every buffer of the set holds its payload, every byte. */
static void assert_set_holds(curd_device *device, const curd_static_set *set,
                             const tables *t)
{
    for (size_t i = 0; i < t->count; i++) {
        assert_size(device, set->buffers[i], t->payloads[i].byte_len);
        assert_buffer_holds(device, set->buffers[i], t->bytes[i],
                            t->payloads[i].byte_len);
    }
}

static const size_t three_tables[3] = {4096, 777, 65536 + 13};

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */
static void test_budget_of_64_bytes_keeps_one_of_two_released_64_byte_buffers(
    void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(device, 64, 0, 0);
    curd_buffer a = session_alloc_ok(session, 64);
    curd_buffer b = session_alloc_ok(session, 64);
    uint64_t b_ptr = device_ptr_of(device, b);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 128);
    g_assert_cmpint(curd_session_release(session, a), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, b), ==, CURD_OK);
    /* One kept idle, the other evicted to stay within 64 bytes. */
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 64);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.idle_bytes, ==, 64);
    g_assert_cmpuint(stats.idle_buffers, ==, 1);
    g_assert_cmpuint(stats.idle_evictions, ==, 1);
    g_assert_cmpuint(stats.lent_buffers, ==, 0);
    g_assert_cmpuint(stats.reuse_misses, ==, 2);
    /* The one kept is the last released, and comes back. */
    curd_buffer again = session_alloc_ok(session, 64);
    g_assert_cmpuint(device_ptr_of(device, again), ==, b_ptr);
    g_assert_cmpuint(session_stats(session).reuse_hits, ==, 1);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 64);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_reuse_gives_the_same_memory_under_a_new_handle(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    size_t len = (size_t)g_test_rand_int_range(1, 200000);
    unsigned char *bytes = g_malloc(len);
    curd_test_fill_random(bytes, len);
    curd_buffer first = session_alloc_ok(session, len);
    uint64_t first_ptr = device_ptr_of(device, first);
    g_assert_cmpint(curd_buffer_upload(device, first, bytes, len), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, first), ==, CURD_OK);
    /* The released handle is stale everywhere at once. */
    assert_stale(device, first);
    g_assert_cmpint(curd_buffer_upload(device, first, bytes, len), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_free(device, first), ==, CURD_E_STALE_HANDLE);
    transfer_test_snapshot before = transfer_test_take(device);
    curd_buffer second = session_alloc_ok(session, len);
    /* A hit: no allocation, no transfer, nothing counted on the device. */
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpuint(second.id, !=, first.id);
    g_assert_cmpuint(device_ptr_of(device, second), ==, first_ptr);
    assert_size(device, second, len);
    /* The same memory: the bytes are still there (reuse does not clear). */
    assert_buffer_holds(device, second, bytes, len);
    /* Another size misses. */
    curd_buffer other = session_alloc_ok(session, len + 1);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.reuse_hits, ==, 1);
    g_assert_cmpuint(stats.reuse_misses, ==, 2);
    g_assert_cmpuint(stats.lent_buffers, ==, 2);
    g_assert_cmpuint(stats.lent_bytes, ==, 2 * len + 1);
    g_assert_cmpint(curd_session_release(session, other), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, second), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(bytes);
}

static void test_eviction_takes_the_largest_idle_buffers_first(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 1000, 0, 0);
    const size_t sizes[] = {100, 200, 600, 300};
    curd_buffer buffers[G_N_ELEMENTS(sizes)];
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        buffers[i] = session_alloc_ok(session, sizes[i]);
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        g_assert_cmpint(curd_session_release(session, buffers[i]), ==,
                        CURD_OK);
    /* 100 + 200 + 600 fit; 300 more did not, so 600 went. */
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.idle_bytes, ==, 600);
    g_assert_cmpuint(stats.idle_buffers, ==, 3);
    g_assert_cmpuint(stats.idle_evictions, ==, 1);
    curd_buffer hit = session_alloc_ok(session, 300);
    curd_buffer miss = session_alloc_ok(session, 600);
    stats = session_stats(session);
    g_assert_cmpuint(stats.reuse_hits, ==, 1);
    g_assert_cmpuint(stats.reuse_misses, ==, 5);
    g_assert_cmpint(curd_session_release(session, hit), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, miss), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_buffer_larger_than_the_whole_budget_is_freed_at_once(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(device, 1000, 0, 0);
    curd_buffer kept = session_alloc_ok(session, 1000);
    curd_buffer large = session_alloc_ok(session, 1001);
    g_assert_cmpint(curd_session_release(session, kept), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, large), ==, CURD_OK);
    assert_stale(device, large);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.release_frees, ==, 1);
    g_assert_cmpuint(stats.idle_evictions, ==, 0);
    g_assert_cmpuint(stats.idle_bytes, ==, 1000);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 1000);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_zero_budgets_turn_reuse_and_caching_off_and_stay_correct(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(
        device, 0, 0, CURD_SESSION_NO_REUSE | CURD_SESSION_NO_STATIC_CACHE);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.idle_budget_bytes, ==, 0);
    g_assert_cmpuint(stats.static_budget_bytes, ==, 0);
    for (int round = 0; round < 3; round++) {
        curd_buffer buffer = session_alloc_ok(session, 64);
        g_assert_cmpint(curd_session_release(session, buffer), ==, CURD_OK);
        g_assert_cmpuint(resident_bytes(device), ==, baseline);
    }
    tables t = tables_random(3, three_tables);
    for (int round = 0; round < 2; round++) {
        transfer_test_snapshot before = transfer_test_take(device);
        const curd_static_set *set = upload_ok(session, "zero", &t);
        g_assert_cmpuint(set->retained, ==, 0);
        g_assert_cmpuint(transfer_test_take(device).h2d_bytes
                             - before.h2d_bytes,
                         ==, t.total);
        assert_set_holds(device, set, &t);
        g_assert_cmpint(curd_session_release_static(session, set), ==,
                        CURD_OK);
        g_assert_cmpuint(resident_bytes(device), ==, baseline);
    }
    stats = session_stats(session);
    g_assert_cmpuint(stats.reuse_hits, ==, 0);
    g_assert_cmpuint(stats.reuse_misses, ==, 3);
    g_assert_cmpuint(stats.release_frees, ==, 3);
    g_assert_cmpuint(stats.static_hits, ==, 0);
    g_assert_cmpuint(stats.static_misses, ==, 2);
    g_assert_cmpuint(stats.cached_sets, ==, 0);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

static void test_bad_buffer_calls_are_typed_errors_that_change_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    curd_session *other = session_open(device, 0, 0, 0);
    curd_buffer lent = session_alloc_ok(session, 4096);
    curd_buffer released = session_alloc_ok(session, 4096);
    curd_buffer theirs = session_alloc_ok(other, 4096);
    curd_buffer plain = {0};
    g_assert_cmpint(curd_buffer_alloc(device, 4096, &plain), ==, CURD_OK);
    g_assert_cmpint(curd_session_release(session, released), ==, CURD_OK);
    transfer_test_snapshot before = transfer_test_take(device);
    curd_session_stats stats_before = session_stats(session);
    curd_buffer out = {12345};

    g_assert_cmpint(curd_session_alloc(session, 0, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_alloc(session, 16, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_alloc(NULL, 16, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpuint(out.id, ==, 12345);
    /* Released twice: the handle went stale at the first release. */
    g_assert_cmpint(curd_session_release(session, released), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_nonnull(strstr(curd_last_error(), "released already"));
    curd_test_assert_fix_sentence();
    /* Freed directly while idle: the caller's handle is stale already. */
    g_assert_cmpint(curd_buffer_free(device, released), ==,
                    CURD_E_STALE_HANDLE);
    /* Not this session's: a plain buffer, another session's. */
    g_assert_cmpint(curd_session_release(session, plain), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "not lent by this session"));
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_release(session, theirs), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_release(session, (curd_buffer){0}), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_session_release(NULL, lent), ==,
                    CURD_E_INVALID_ARGUMENT);
    assert_snapshot_equal(transfer_test_take(device), before);
    assert_session_stats_equal(session_stats(session), stats_before);
    assert_size(device, lent, 4096);
    assert_size(device, theirs, 4096);
    assert_size(device, plain, 4096);

    /* A lent buffer freed directly: its release is stale, and the session
     * forgets it. */
    g_assert_cmpint(curd_buffer_free(device, lent), ==, CURD_OK);
    g_assert_cmpuint(session_stats(session).lent_buffers, ==, 1);
    g_assert_cmpint(curd_session_release(session, lent), ==,
                    CURD_E_STALE_HANDLE);
    curd_test_assert_fix_sentence();
    g_assert_cmpuint(session_stats(session).lent_buffers, ==, 0);
    g_assert_cmpuint(session_stats(session).lent_bytes, ==, 0);

    g_assert_cmpint(curd_buffer_free(device, plain), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(other), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, 0);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_release_of_a_buffer_with_an_upload_pending_is_busy(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    const size_t len = 1u << 20;
    curd_block pinned;
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_PINNED, len, &pinned),
                    ==, CURD_OK);
    curd_test_fill_random(pinned.host_ptr, len);
    curd_buffer buffer = session_alloc_ok(session, len);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 0,
                                             pinned.host_ptr, len),
                    ==, CURD_OK);
    curd_session_stats before = session_stats(session);
    g_assert_cmpint(curd_session_release(session, buffer), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "curd_device_sync_uploads"));
    g_assert_cmpint(curd_session_free(session), ==, CURD_E_BUSY);
    curd_test_assert_fix_sentence();
    assert_session_stats_equal(session_stats(session), before);
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    assert_buffer_holds(device, buffer, pinned.host_ptr, len);
    g_assert_cmpint(curd_session_release(session, buffer), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_block_release(device, &pinned), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Static sets
 * ---------------------------------------------------------------------- */
/* An upload of the given kind, checked as upload_ok checks it. */
static const curd_static_set *upload_kind_ok(curd_session *session,
                                             bool keyed, const tables *t)
{
    return keyed ? keyed_ok(session, "tables", "v1", t)
                 : upload_ok(session, "tables-v1", t);
}

/* The cold upload moves the payloads' bytes in one fence, which the set's
 * buffers hold; the warm one moves nothing and hands out the same set:
 * for a verified upload given the same bytes from other memory (the hit
 * comes from the content), for a keyed one given other bytes of the same
 * lengths (the key is the caller's word: the hit reads no byte). */
static void cold_then_warm(bool keyed)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    transfer_test_snapshot cold = transfer_test_take(device);
    const curd_static_set *set = upload_kind_ok(session, keyed, &t);
    transfer_test_snapshot warm = transfer_test_take(device);
    g_assert_cmpuint(warm.h2d_bytes - cold.h2d_bytes, ==, t.total);
    g_assert_cmpuint(warm.fences - cold.fences, ==, 1);
    g_assert_cmpuint(set->retained, ==, 1);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + t.total);
    assert_set_holds(device, set, &t);
    warm = transfer_test_take(device);
    tables again_tables = keyed ? tables_random(3, three_tables)
                                : tables_copy(&t);
    const curd_static_set *again = upload_kind_ok(session, keyed,
                                                  &again_tables);
    assert_snapshot_equal(transfer_test_take(device), warm);
    g_assert_true(again == set);
    assert_set_holds(device, set, &t);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(keyed ? stats.static_keyed_misses : stats.static_misses,
                     ==, 1);
    g_assert_cmpuint(keyed ? stats.static_keyed_hits : stats.static_hits, ==,
                     1);
    g_assert_cmpuint(keyed ? stats.static_hits + stats.static_misses
                           : stats.static_keyed_hits
                                 + stats.static_keyed_misses,
                     ==, 0);
    g_assert_cmpuint(stats.cached_sets, ==, 1);
    g_assert_cmpuint(stats.cached_bytes, ==, t.total);
    g_assert_cmpint(curd_session_release_static(session, again), ==, CURD_OK);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    /* Retained: still cached after its last release. */
    g_assert_cmpuint(session_stats(session).cached_sets, ==, 1);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + t.total);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&again_tables);
    tables_free(&t);
}

static void test_cold_then_warm_upload_moves_the_payload_bytes_then_none(void)
{
    cold_then_warm(false);
}

static void test_one_changed_byte_misses(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *first = upload_ok(session, "tables", &t);
    tables changed = tables_copy(&t);
    size_t which = (size_t)g_test_rand_int_range(0, 3);
    size_t at = (size_t)g_test_rand_int_range(
        0, (gint32)changed.payloads[which].byte_len);
    changed.bytes[which][at] ^= (unsigned char)g_test_rand_int_range(1, 256);
    transfer_test_snapshot before = transfer_test_take(device);
    const curd_static_set *second = upload_ok(session, "tables", &changed);
    g_assert_cmpuint(transfer_test_take(device).h2d_bytes - before.h2d_bytes,
                     ==, changed.total);
    g_assert_true(second != first);
    assert_set_holds(device, second, &changed);
    /* The first set is untouched. */
    assert_set_holds(device, first, &t);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_misses, ==, 2);
    g_assert_cmpuint(stats.static_hits, ==, 0);
    g_assert_cmpuint(stats.cached_sets, ==, 2);
    g_assert_cmpint(curd_session_release_static(session, first), ==, CURD_OK);
    g_assert_cmpint(curd_session_release_static(session, second), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&changed);
    tables_free(&t);
}

static void test_sets_of_one_shape_taking_turns_all_hit(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables versions[3];
    const curd_static_set *cached[3];
    for (size_t v = 0; v < 3; v++) {
        versions[v] = tables_random(3, three_tables);
        cached[v] = upload_ok(session, "tables", &versions[v]);
        g_assert_cmpint(curd_session_release_static(session, cached[v]), ==,
                        CURD_OK);
    }
    /* Each upload finds its own set, whichever of the shape came last. */
    transfer_test_snapshot before = transfer_test_take(device);
    for (int round = 0; round < 12; round++) {
        size_t v = (size_t)g_test_rand_int_range(0, 3);
        tables copy = tables_copy(&versions[v]);
        const curd_static_set *set = upload_ok(session, "tables", &copy);
        g_assert_true(set == cached[v]);
        assert_set_holds(device, set, &versions[v]);
        g_assert_cmpint(curd_session_release_static(session, set), ==,
                        CURD_OK);
        tables_free(&copy);
    }
    g_assert_cmpuint(transfer_test_take(device).h2d_bytes, ==,
                     before.h2d_bytes);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_hits, ==, 12);
    g_assert_cmpuint(stats.static_misses, ==, 3);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    for (size_t v = 0; v < 3; v++)
        tables_free(&versions[v]);
}

static void test_domain_and_the_split_of_the_bytes_are_part_of_the_key(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    const size_t one[1] = {3000};
    tables whole = tables_random(1, one);
    /* The same 3000 bytes as two payloads, 1000 then 2000. */
    tables split;
    memset(&split, 0, sizeof split);
    split.count = 2;
    split.total = 3000;
    split.bytes[0] = g_memdup2(whole.bytes[0], 1000);
    split.bytes[1] = g_memdup2(whole.bytes[0] + 1000, 2000);
    split.payloads[0] = (curd_static_payload){split.bytes[0], 1000};
    split.payloads[1] = (curd_static_payload){split.bytes[1], 2000};
    const curd_static_set *a = upload_ok(session, "a", &whole);
    const curd_static_set *b = upload_ok(session, "b", &whole);
    const curd_static_set *c = upload_ok(session, "a", &split);
    g_assert_true(a != b && a != c && b != c);
    g_assert_cmpuint(session_stats(session).static_misses, ==, 3);
    assert_set_holds(device, c, &split);
    const curd_static_set *sets[] = {a, b, c};
    for (size_t i = 0; i < G_N_ELEMENTS(sets); i++)
        g_assert_cmpint(curd_session_release_static(session, sets[i]), ==,
                        CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&split);
    tables_free(&whole);
}

static void test_set_larger_than_the_budget_is_not_retained_and_freed_at_release(
    void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(device, 0, 1000, 0);
    const size_t large[2] = {600, 401};
    tables t = tables_random(2, large);
    const curd_static_set *set = upload_ok(session, "large", &t);
    g_assert_cmpuint(set->retained, ==, 0);
    assert_set_holds(device, set, &t);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.unretained_sets, ==, 1);
    g_assert_cmpuint(stats.unretained_bytes, ==, 1001);
    g_assert_cmpuint(stats.cached_sets, ==, 0);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 1001);
    curd_buffer kept = set->buffers[0];
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    assert_stale(device, kept);
    stats = session_stats(session);
    g_assert_cmpuint(stats.unretained_sets, ==, 0);
    g_assert_cmpuint(stats.unretained_bytes, ==, 0);
    /* Its last release freed it: a second is refused, reading nothing. */
    g_assert_cmpint(curd_session_release_static(session, set), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

/* The sentence a stale handle gets names the call that let it go, in the
 * caller's words: no slot or generation number. */
static void assert_stale_names(curd_device *device, curd_buffer buffer,
                               const char *call)
{
    assert_stale(device, buffer);
    curd_test_assert_fix_sentence();
    const char *sentence = curd_last_error();
    char *named = g_strdup_printf("let go by %s()", call);
    if (strstr(sentence, named) == NULL)
        g_error("the stale handle's sentence does not name %s(): %s", call,
                sentence);
    g_free(named);
    g_assert_null(strstr(sentence, "slot"));
    g_assert_null(strstr(sentence, "generation"));
}

static void test_released_handle_names_curd_session_release(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    size_t len = (size_t)g_test_rand_int_range(1, 100000);
    curd_buffer lent = session_alloc_ok(session, len);
    g_assert_cmpint(curd_session_release(session, lent), ==, CURD_OK);
    assert_stale_names(device, lent, "curd_session_release");
    g_assert_null(strstr(curd_last_error(), "curd_buffer_free"));
    /* Freed at once (larger than the whole idle budget) names it too. */
    curd_session *tight = session_open(device, 1, 0, 0);
    curd_buffer big = session_alloc_ok(tight, len + 1u);
    g_assert_cmpint(curd_session_release(tight, big), ==, CURD_OK);
    assert_stale_names(device, big, "curd_session_release");
    /* A buffer freed by the user names curd_buffer_free. */
    curd_buffer mine;
    g_assert_cmpint(curd_buffer_alloc(device, len, &mine), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, mine), ==, CURD_OK);
    assert_stale_names(device, mine, "curd_buffer_free");
    g_assert_cmpint(curd_session_free(tight), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* curd_buffer_free of a static set's buffer is refused (CURD_E_BUSY, its
 * Fix naming curd_session_release_static) and changes nothing, whether
 * the set is held or only cached; the next hit hands out the same live
 * buffers, every byte in place. */
static void static_set_buffer_free_is_busy(bool held)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *set = upload_ok(session, "busy", &t);
    g_assert_cmpuint(set->retained, ==, 1);
    curd_buffer victim = set->buffers[g_test_rand_int_range(0, 3)];
    if (!held)
        g_assert_cmpint(curd_session_release_static(session, set), ==,
                        CURD_OK);
    uint64_t resident = resident_bytes(device);
    curd_session_stats before = session_stats(session);
    g_assert_cmpint(curd_buffer_free(device, victim), ==, CURD_E_BUSY);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(),
                            "curd_session_release_static()"));
    g_assert_cmpuint(resident_bytes(device), ==, resident);
    assert_session_stats_equal(session_stats(session), before);
    const curd_static_set *again = upload_ok(session, "busy", &t);
    g_assert_cmpuint(session_stats(session).static_hits, ==,
                     before.static_hits + 1u);
    g_assert_true(again == set);
    assert_set_holds(device, again, &t);
    if (held)
        g_assert_cmpint(curd_session_release_static(session, set), ==,
                        CURD_OK);
    g_assert_cmpint(curd_session_release_static(session, again), ==,
                    CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

static void test_freeing_a_held_static_sets_buffer_is_busy(void)
{
    static_set_buffer_free_is_busy(true);
}

static void test_freeing_a_cached_static_sets_buffer_is_busy(void)
{
    static_set_buffer_free_is_busy(false);
}

/* Once the set is gone (its last release of a set not retained, or its
 * session freed), its buffers are stale, and the sentence names the call
 * that ended the set. */
static void test_a_gone_static_sets_buffer_is_stale_naming_its_end(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 1000, 0);
    const size_t large[2] = {600, 401};
    tables t = tables_random(2, large);
    const curd_static_set *set = upload_ok(session, "gone", &t);
    g_assert_cmpuint(set->retained, ==, 0);
    curd_buffer kept = set->buffers[1];
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, kept), ==, CURD_E_STALE_HANDLE);
    assert_stale_names(device, kept, "curd_session_release_static");
    const size_t small[1] = {64};
    tables u = tables_random(1, small);
    set = upload_ok(session, "gone", &u);
    kept = set->buffers[0];
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    assert_stale_names(device, kept, "curd_session_free");
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
    tables_free(&u);
}

static void test_static_eviction_is_largest_first_and_spares_held_sets(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 1000, 0);
    const size_t s500[1] = {500}, s300[1] = {300}, s400[1] = {400},
                 s100[1] = {100};
    tables a = tables_random(1, s500), b = tables_random(1, s300),
           c = tables_random(1, s400), d = tables_random(1, s100);
    const curd_static_set *set;
    set = upload_ok(session, "t", &a);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    set = upload_ok(session, "t", &b);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    /* 800 cached; 400 more evicts the largest nobody holds: a. */
    const curd_static_set *held = upload_ok(session, "t", &c);
    g_assert_cmpuint(held->retained, ==, 1);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_evictions, ==, 1);
    g_assert_cmpuint(stats.cached_bytes, ==, 700);
    set = upload_ok(session, "t", &b);
    g_assert_cmpuint(session_stats(session).static_hits, ==, 1);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    /* a again (500): c (400) is held, so b (300) goes; 900 cached. */
    const curd_static_set *a_again = upload_ok(session, "t", &a);
    stats = session_stats(session);
    g_assert_cmpuint(stats.static_misses, ==, 4);
    g_assert_cmpuint(stats.static_evictions, ==, 2);
    g_assert_cmpuint(stats.cached_bytes, ==, 900);
    g_assert_cmpuint(a_again->retained, ==, 1);
    /* Both held now: d (100) fits exactly; then nothing more can. */
    const curd_static_set *d_set = upload_ok(session, "t", &d);
    g_assert_cmpuint(d_set->retained, ==, 1);
    const curd_static_set *b_set = upload_ok(session, "t", &b);
    g_assert_cmpuint(b_set->retained, ==, 0);
    assert_set_holds(device, held, &c);
    assert_set_holds(device, a_again, &a);
    assert_set_holds(device, b_set, &b);
    stats = session_stats(session);
    g_assert_cmpuint(stats.cached_bytes, ==, 1000);
    g_assert_cmpuint(stats.unretained_bytes, ==, 300);
    const curd_static_set *sets[] = {held, a_again, d_set, b_set};
    for (size_t i = 0; i < G_N_ELEMENTS(sets); i++)
        g_assert_cmpint(curd_session_release_static(session, sets[i]), ==,
                        CURD_OK);
    /* A retained set nobody holds cannot be released again. */
    g_assert_cmpint(curd_session_release_static(session, held), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "more often"));
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&a);
    tables_free(&b);
    tables_free(&c);
    tables_free(&d);
}

static void test_bad_static_calls_are_typed_errors_that_upload_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    curd_session *other = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *theirs = upload_ok(other, "t", &t);
    transfer_test_snapshot before = transfer_test_take(device);
    curd_session_stats stats_before = session_stats(session);
    const curd_static_set *set = (const curd_static_set *)&t;
    curd_static_payload bad[3];
    memcpy(bad, t.payloads, sizeof bad);

    g_assert_cmpint(curd_session_upload_static(NULL, "t", t.payloads, 3, &set),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static(session, NULL, t.payloads, 3,
                                               &set),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_upload_static(session, "t", NULL, 3, &set), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static(session, "t", t.payloads, 0,
                                               &set),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static(session, "t", t.payloads, 3,
                                               NULL),
                    ==, CURD_E_INVALID_ARGUMENT);
    bad[2].data = NULL; /* NULL data with a length */
    g_assert_cmpint(curd_session_upload_static(session, "t", bad, 3, &set), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "payload 2"));
    curd_test_assert_fix_sentence();
    bad[2] = (curd_static_payload){NULL, 0}; /* a NULL entry */
    g_assert_cmpint(curd_session_upload_static(session, "t", bad, 3, &set), ==,
                    CURD_E_INVALID_ARGUMENT);
    bad[2] = (curd_static_payload){t.bytes[2], 0}; /* an empty one */
    g_assert_cmpint(curd_session_upload_static(session, "t", bad, 3, &set), ==,
                    CURD_E_INVALID_ARGUMENT);
    bad[2] = (curd_static_payload){t.bytes[2], SIZE_MAX};
    bad[1] = (curd_static_payload){t.bytes[1], SIZE_MAX};
    g_assert_cmpint(curd_session_upload_static(session, "t", bad, 3, &set), ==,
                    CURD_E_OVERFLOW);
    curd_test_assert_fix_sentence();
    g_assert_true(set == (const curd_static_set *)&t);
    /* Releasing NULL, another session's set, or memory that is no set. */
    g_assert_cmpint(curd_session_release_static(session, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_release_static(session, theirs), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "not a live set"));
    g_assert_cmpint(curd_session_release_static(session, set), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_release_static(NULL, theirs), ==,
                    CURD_E_INVALID_ARGUMENT);
    assert_snapshot_equal(transfer_test_take(device), before);
    assert_session_stats_equal(session_stats(session), stats_before);
    assert_set_holds(device, theirs, &t);
    g_assert_cmpint(curd_session_release_static(other, theirs), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(other), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

/* ------------------------------------------------------------------------
 * Keyed static sets, and verified hits compared by the copy team
 * ---------------------------------------------------------------------- */
static void test_keyed_hit_uploads_nothing_and_reads_no_payload_byte(void)
{
    cold_then_warm(true);
}

/* A caller built against curd 1.0's struct gets its fields, and not a
 * byte past them; a smaller struct is refused. */
static void test_stats_fill_a_1_0_sized_struct_to_its_end(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *set = keyed_ok(session, "tables", "v7", &t);
    curd_session_stats old;
    memset(&old, 0xA5, sizeof old);
    old.struct_size = offsetof(curd_session_stats, static_keyed_hits);
    g_assert_cmpint(curd_session_stats_get(session, &old), ==, CURD_OK);
    g_assert_cmpuint(old.cached_sets, ==, 1);
    g_assert_cmpuint(old.static_budget_bytes, ==,
                     session_stats(session).static_budget_bytes);
    g_assert_cmpuint(old.static_keyed_misses, ==, 0xA5A5A5A5A5A5A5A5u);
    old.struct_size = offsetof(curd_session_stats, static_keyed_hits) - 1;
    g_assert_cmpint(curd_session_stats_get(session, &old), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

static void test_keyed_hit_with_other_lengths_is_refused_changing_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *set = keyed_ok(session, "tables", "v1", &t);
    transfer_test_snapshot before = transfer_test_take(device);
    curd_session_stats stats_before = session_stats(session);
    const curd_static_set *out = (const curd_static_set *)&t;
    /* One payload fewer. */
    g_assert_cmpint(curd_session_upload_static_keyed(session, "tables", "v1",
                                                     2, t.payloads, 2, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "3 payloads"));
    curd_test_assert_fix_sentence();
    /* The last payload one byte longer. */
    curd_static_payload longer[3];
    memcpy(longer, t.payloads, sizeof longer);
    unsigned char *grown = g_malloc(longer[2].byte_len + 1);
    memcpy(grown, t.bytes[2], longer[2].byte_len);
    longer[2] = (curd_static_payload){grown, longer[2].byte_len + 1};
    g_assert_cmpint(curd_session_upload_static_keyed(session, "tables", "v1",
                                                     2, longer, 3, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "payload 2"));
    curd_test_assert_fix_sentence();
    /* A bad key. */
    g_assert_cmpint(curd_session_upload_static_keyed(session, "tables", NULL,
                                                     2, t.payloads, 3, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_upload_static_keyed(session, "tables", "v1",
                                                     0, t.payloads, 3, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static_keyed(NULL, "tables", "v1", 2,
                                                     t.payloads, 3, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static_keyed(session, NULL, "v1", 2,
                                                     t.payloads, 3, &out),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static_keyed(session, "tables", "v1",
                                                     2, t.payloads, 3, NULL),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_true(out == (const curd_static_set *)&t);
    assert_snapshot_equal(transfer_test_take(device), before);
    assert_session_stats_equal(session_stats(session), stats_before);
    assert_set_holds(device, set, &t);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(grown);
    tables_free(&t);
}

static void test_keyed_and_verified_sets_never_answer_each_other(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(3, three_tables);
    const curd_static_set *verified = upload_ok(session, "tables", &t);
    const curd_static_set *keyed = keyed_ok(session, "tables", "v1", &t);
    g_assert_true(keyed != verified);
    /* Each finds its own again; another key or domain is another set. */
    const curd_static_set *verified_again = upload_ok(session, "tables", &t);
    const curd_static_set *keyed_again = keyed_ok(session, "tables", "v1", &t);
    const curd_static_set *other_key = keyed_ok(session, "tables", "v2", &t);
    const curd_static_set *other_domain = keyed_ok(session, "tablez", "v1",
                                                   &t);
    g_assert_true(verified_again == verified);
    g_assert_true(keyed_again == keyed);
    g_assert_true(other_key != keyed && other_domain != keyed
                  && other_key != other_domain);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_hits, ==, 1);
    g_assert_cmpuint(stats.static_misses, ==, 1);
    g_assert_cmpuint(stats.static_keyed_hits, ==, 1);
    g_assert_cmpuint(stats.static_keyed_misses, ==, 3);
    g_assert_cmpuint(stats.cached_sets, ==, 4);
    const curd_static_set *sets[] = {verified, keyed,       verified_again,
                                     keyed_again, other_key, other_domain};
    for (size_t i = 0; i < G_N_ELEMENTS(sets); i++) {
        assert_set_holds(device, sets[i], &t);
        g_assert_cmpint(curd_session_release_static(session, sets[i]), ==,
                        CURD_OK);
    }
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t);
}

static void test_keyed_sets_follow_the_eviction_and_release_rules(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    curd_session *session = session_open(device, 0, 1000, 0);
    const size_t s500[1] = {500}, s300[1] = {300}, s400[1] = {400},
                 s2000[1] = {2000};
    tables a = tables_random(1, s500), b = tables_random(1, s300),
           c = tables_random(1, s400), big = tables_random(1, s2000);
    const curd_static_set *set = keyed_ok(session, "t", "a", &a);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    /* A verified set shares the budget. */
    set = upload_ok(session, "t", &b);
    g_assert_cmpint(curd_session_release_static(session, set), ==, CURD_OK);
    /* 800 cached; 400 more evicts the largest nobody holds: keyed a. */
    const curd_static_set *held = keyed_ok(session, "t", "c", &c);
    g_assert_cmpuint(held->retained, ==, 1);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_evictions, ==, 1);
    g_assert_cmpuint(stats.cached_bytes, ==, 700);
    /* a is gone: its key misses and uploads again, evicting b (c is
     * held). */
    transfer_test_snapshot before = transfer_test_take(device);
    const curd_static_set *a_again = keyed_ok(session, "t", "a", &a);
    g_assert_cmpuint(transfer_test_take(device).h2d_bytes - before.h2d_bytes,
                     ==, 500);
    stats = session_stats(session);
    g_assert_cmpuint(stats.static_keyed_misses, ==, 3);
    g_assert_cmpuint(stats.static_evictions, ==, 2);
    g_assert_cmpuint(stats.cached_bytes, ==, 900);
    /* Larger than the budget: not retained, freed at its last release. */
    const curd_static_set *large = keyed_ok(session, "t", "big", &big);
    g_assert_cmpuint(large->retained, ==, 0);
    const curd_static_set *large_again = keyed_ok(session, "t", "big", &big);
    g_assert_true(large_again != large);
    assert_set_holds(device, large, &big);
    assert_set_holds(device, held, &c);
    assert_set_holds(device, a_again, &a);
    stats = session_stats(session);
    g_assert_cmpuint(stats.unretained_sets, ==, 2);
    g_assert_cmpuint(stats.unretained_bytes, ==, 4000);
    const curd_static_set *sets[] = {held, a_again, large, large_again};
    for (size_t i = 0; i < G_N_ELEMENTS(sets); i++)
        g_assert_cmpint(curd_session_release_static(session, sets[i]), ==,
                        CURD_OK);
    stats = session_stats(session);
    g_assert_cmpuint(stats.unretained_sets, ==, 0);
    g_assert_cmpuint(resident_bytes(device), ==, baseline + 900);
    /* Released more often than handed out, or after its last release. */
    g_assert_cmpint(curd_session_release_static(session, held), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "more often"));
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&a);
    tables_free(&b);
    tables_free(&c);
    tables_free(&big);
}

/* Large enough for the copy team (1 MiB by default), split unevenly. */
static const size_t team_tables[2] = {3 * 1024 * 1024 + 5, 4099};

static void test_team_compared_hit_misses_on_one_changed_byte_anywhere(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    tables t = tables_random(2, team_tables);
    const curd_static_set *first = upload_ok(session, "tables", &t);
    tables same = tables_copy(&t);
    size_t large = t.payloads[0].byte_len;
    const size_t positions[] = {0, large / 2, large - 1};
    const curd_static_set *changed_sets[G_N_ELEMENTS(positions)];
    for (size_t i = 0; i < G_N_ELEMENTS(positions); i++) {
        /* The same bytes from other memory hit... */
        const curd_static_set *hit = upload_ok(session, "tables", &same);
        g_assert_true(hit == first);
        g_assert_cmpint(curd_session_release_static(session, hit), ==,
                        CURD_OK);
        /* ...one byte changed misses and uploads the new bytes. */
        tables changed = tables_copy(&t);
        changed.bytes[0][positions[i]] ^=
            (unsigned char)g_test_rand_int_range(1, 256);
        transfer_test_snapshot before = transfer_test_take(device);
        changed_sets[i] = upload_ok(session, "tables", &changed);
        g_assert_cmpuint(
            transfer_test_take(device).h2d_bytes - before.h2d_bytes, ==,
            changed.total);
        g_assert_true(changed_sets[i] != first);
        assert_set_holds(device, changed_sets[i], &changed);
        tables_free(&changed);
    }
    assert_set_holds(device, first, &t);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.static_hits, ==, G_N_ELEMENTS(positions));
    g_assert_cmpuint(stats.static_misses, ==, 1 + G_N_ELEMENTS(positions));
    g_assert_cmpint(curd_session_release_static(session, first), ==, CURD_OK);
    for (size_t i = 0; i < G_N_ELEMENTS(positions); i++)
        g_assert_cmpint(
            curd_session_release_static(session, changed_sets[i]), ==,
            CURD_OK);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&same);
    tables_free(&t);
}

/* ------------------------------------------------------------------------
 * Sessions as a whole
 * ---------------------------------------------------------------------- */
static void test_options_are_checked_and_the_default_budget_is_a_32nd(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device_props props = curd_test_device_info(device);
    curd_session *session = NULL;
    g_assert_cmpint(curd_session_new(device, NULL, &session), ==, CURD_OK);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(stats.idle_budget_bytes, ==, props.total_memory_bytes / 32);
    g_assert_cmpuint(stats.static_budget_bytes, ==,
                     props.total_memory_bytes / 32);
    g_assert_cmpuint(stats.idle_bytes + stats.lent_bytes + stats.cached_bytes
                         + stats.unretained_bytes + stats.reuse_hits
                         + stats.static_misses,
                     ==, 0);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);

    curd_session *untouched = (curd_session *)&props;
    curd_session_options options;
    curd_session_options_init(&options);
    options.flags = 1u << 7;
    g_assert_cmpint(curd_session_new(device, &options, &untouched), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    curd_session_options_init(&options);
    options.flags = CURD_SESSION_NO_REUSE;
    options.idle_budget_bytes = 64;
    g_assert_cmpint(curd_session_new(device, &options, &untouched), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "CURD_SESSION_NO_REUSE"));
    curd_session_options_init(&options);
    options.flags = CURD_SESSION_NO_STATIC_CACHE;
    options.static_budget_bytes = 64;
    g_assert_cmpint(curd_session_new(device, &options, &untouched), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_session_options_init(&options);
    options.struct_size = 8;
    g_assert_cmpint(curd_session_new(device, &options, &untouched), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_new(device, NULL, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_new(NULL, NULL, &untouched), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(untouched == (curd_session *)&props);

    g_assert_cmpint(curd_session_new(device, NULL, &session), ==, CURD_OK);
    curd_session_stats small;
    small.struct_size = 4;
    g_assert_cmpint(curd_session_stats_get(session, &small), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_stats_get(session, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_stats_get(NULL, &small), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    /* A second free is refused without reading the freed session. */
    g_assert_cmpint(curd_session_free(session), ==, CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_free(NULL), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_session_free_returns_resident_bytes_to_the_baseline(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer before_session = {0};
    g_assert_cmpint(curd_buffer_alloc(device, 12345, &before_session), ==,
                    CURD_OK);
    transfer_test_snapshot baseline = transfer_test_take(device);
    curd_session *session = session_open(device, 4096, 100000, 0);
    /* Some lent, some idle, one evicted, one freed at release. */
    curd_buffer lent[6];
    for (size_t i = 0; i < G_N_ELEMENTS(lent); i++)
        lent[i] = session_alloc_ok(session,
                                   (size_t)g_test_rand_int_range(1, 3000));
    for (size_t i = 0; i < 3; i++)
        g_assert_cmpint(curd_session_release(session, lent[i]), ==, CURD_OK);
    curd_buffer large = session_alloc_ok(session, 5000);
    g_assert_cmpint(curd_session_release(session, large), ==, CURD_OK);
    /* Sets: retained and held, retained and released, not retained. */
    const size_t small[2] = {1000, 2000}, big[1] = {200000};
    tables t1 = tables_random(2, small), t2 = tables_random(2, small),
           t3 = tables_random(1, big);
    const curd_static_set *held = upload_ok(session, "t", &t1);
    const curd_static_set *released = upload_ok(session, "t", &t2);
    g_assert_cmpint(curd_session_release_static(session, released), ==,
                    CURD_OK);
    const curd_static_set *unretained = upload_ok(session, "t", &t3);
    g_assert_cmpuint(unretained->retained, ==, 0);
    g_assert_cmpuint(held->retained, ==, 1);
    curd_session_stats stats = session_stats(session);
    g_assert_cmpuint(resident_bytes(device), ==,
                     baseline.resident_bytes.current + stats.idle_bytes
                         + stats.lent_bytes + stats.cached_bytes
                         + stats.unretained_bytes);
    g_assert_cmpuint(stats.lent_buffers, ==, 3);
    g_assert_cmpuint(stats.idle_evictions + stats.release_frees, >=, 1);
    curd_buffer set_buffers[3] = {held->buffers[1], released->buffers[0],
                                  unretained->buffers[0]};
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    assert_snapshot_levels_equal(transfer_test_take(device), baseline);
    /* The session's handles are all stale; the buffer from before it is
     * not. */
    for (size_t i = 0; i < G_N_ELEMENTS(lent); i++)
        assert_stale(device, lent[i]);
    for (size_t i = 0; i < G_N_ELEMENTS(set_buffers); i++)
        assert_stale(device, set_buffers[i]);
    assert_size(device, before_session, 12345);
    g_assert_cmpint(curd_buffer_free(device, before_session), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&t1);
    tables_free(&t2);
    tables_free(&t3);
}

static void test_device_close_detaches_its_sessions(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_session *session = session_open(device, 0, 0, 0);
    curd_session *empty = session_open(device, 0, 0, 0);
    curd_buffer lent = session_alloc_ok(session, 100);
    curd_buffer idle = session_alloc_ok(session, 200);
    g_assert_cmpint(curd_session_release(session, idle), ==, CURD_OK);
    tables t = tables_random(3, three_tables);
    const curd_static_set *set = upload_ok(session, "t", &t);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    /* Every call but free is refused with a sentence; nothing is read
     * of the closed device. */
    curd_buffer out = {0};
    curd_session_stats stats;
    stats.struct_size = sizeof stats;
    g_assert_cmpint(curd_session_alloc(session, 100, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "device was closed"));
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_session_release(session, lent), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_upload_static(session, "t", t.payloads,
                                               t.count, &set),
                    ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_release_static(session, set), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_stats_get(session, &stats), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_session_free(session), ==, CURD_OK);
    g_assert_cmpint(curd_session_free(empty), ==, CURD_OK);
    tables_free(&t);
}

/* ------------------------------------------------------------------------
 * Eight threads, one session
 * ---------------------------------------------------------------------- */
enum { THREADS = 8, ROUNDS = 40 };
static const size_t thread_sizes[4] = {256, 4096, 65536 + 8, 3000};

typedef struct shared_tables {
    curd_device *device;
    curd_session *session;
    tables common; /* every thread uploads these */
} shared_tables;

typedef struct worker {
    shared_tables *shared;
    unsigned index;
    guint32 seed; /* drawn by the main thread: g_test_rand_* is not for
                     threads */
    uint64_t allocs;
    uint64_t uploads;       /* verified */
    uint64_t keyed_uploads;
    char failure[512];
} worker;

static void worker_fail(worker *w, const char *what, curd_status status)
{
    if (w->failure[0] == '\0')
        g_snprintf(w->failure, sizeof w->failure, "thread %u: %s: %s: %s",
                   w->index, what, curd_status_name(status),
                   curd_last_error());
}

#define WORKER_CALL(w, call)                                                  \
    do {                                                                      \
        curd_status worker_status_ = (call);                                  \
        if (worker_status_ != CURD_OK) {                                      \
            worker_fail((w), #call, worker_status_);                          \
            return FALSE;                                                     \
        }                                                                     \
    } while (0)

/* A set's buffers, downloaded, against the payloads. */
static gboolean worker_check_set(worker *w, const curd_static_set *set,
                                 const tables *t)
{
    for (size_t i = 0; i < t->count; i++) {
        size_t len = t->payloads[i].byte_len;
        unsigned char *back = g_malloc(len);
        curd_test_poison(back, len);
        curd_status status = curd_buffer_download(w->shared->device,
                                                  set->buffers[i], back, len);
        gboolean same = status == CURD_OK && memcmp(back, t->bytes[i], len) == 0;
        g_free(back);
        if (!same) {
            worker_fail(w, "set contents", status);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean worker_round(worker *w, unsigned round, GRand *rand,
                             const tables *own)
{
    curd_session *session = w->shared->session;
    curd_device *device = w->shared->device;
    curd_buffer buffers[4];
    unsigned char *bytes[4];
    for (size_t i = 0; i < 4; i++) {
        size_t len = thread_sizes[(i + round + w->index) % 4];
        bytes[i] = g_malloc(len);
        for (size_t b = 0; b < len; b++)
            bytes[i][b] = (unsigned char)g_rand_int(rand);
        WORKER_CALL(w, curd_session_alloc(session, len, &buffers[i]));
        WORKER_CALL(w, curd_buffer_upload(device, buffers[i], bytes[i], len));
        w->allocs++;
    }
    const curd_static_set *common = NULL, *mine = NULL, *keyed = NULL;
    WORKER_CALL(w, curd_session_upload_static(session, "common",
                                              w->shared->common.payloads,
                                              w->shared->common.count,
                                              &common));
    WORKER_CALL(w, curd_session_upload_static(session, "own", own->payloads,
                                              own->count, &mine));
    /* The common tables under a key too: threads that miss it at once
     * all upload, and all but one take the first one's set. */
    WORKER_CALL(w, curd_session_upload_static_keyed(
                       session, "common", "common-v1", 9,
                       w->shared->common.payloads, w->shared->common.count,
                       &keyed));
    w->uploads += 2;
    w->keyed_uploads++;
    if (!worker_check_set(w, common, &w->shared->common)
        || !worker_check_set(w, mine, own)
        || !worker_check_set(w, keyed, &w->shared->common))
        return FALSE;
    for (size_t i = 0; i < 4; i++) {
        size_t len = thread_sizes[(i + round + w->index) % 4];
        unsigned char *back = g_malloc(len);
        curd_test_poison(back, len);
        curd_status status =
            curd_buffer_download(device, buffers[i], back, len);
        gboolean same = status == CURD_OK && memcmp(back, bytes[i], len) == 0;
        g_free(back);
        g_free(bytes[i]);
        if (!same) {
            worker_fail(w, "buffer round trip", status);
            return FALSE;
        }
        WORKER_CALL(w, curd_session_release(session, buffers[i]));
    }
    WORKER_CALL(w, curd_session_release_static(session, common));
    WORKER_CALL(w, curd_session_release_static(session, mine));
    WORKER_CALL(w, curd_session_release_static(session, keyed));
    return TRUE;
}

static gpointer worker_run(gpointer data)
{
    worker *w = data;
    GRand *rand = g_rand_new_with_seed(w->seed);
    const size_t own_sizes[2] = {512 + w->index, 2048};
    tables own;
    memset(&own, 0, sizeof own);
    own.count = 2;
    for (size_t i = 0; i < 2; i++) {
        own.bytes[i] = g_malloc(own_sizes[i]);
        for (size_t b = 0; b < own_sizes[i]; b++)
            own.bytes[i][b] = (unsigned char)g_rand_int(rand);
        own.payloads[i] = (curd_static_payload){own.bytes[i], own_sizes[i]};
        own.total += own_sizes[i];
    }
    for (unsigned round = 0; round < ROUNDS; round++)
        if (!worker_round(w, round, rand, &own))
            break;
    tables_free(&own);
    g_rand_free(rand);
    return NULL;
}

static void test_eight_threads_share_one_session(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    uint64_t baseline = resident_bytes(device);
    shared_tables shared = {device, session_open(device, 1u << 20, 1u << 20, 0),
                            tables_random(3, three_tables)};
    worker workers[THREADS];
    GThread *threads[THREADS];
    memset(workers, 0, sizeof workers);
    for (unsigned i = 0; i < THREADS; i++) {
        workers[i].shared = &shared;
        workers[i].index = i;
        workers[i].seed = g_test_rand_int();
    }
    for (unsigned i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("session", worker_run, &workers[i]);
    uint64_t allocs = 0, uploads = 0, keyed_uploads = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        g_thread_join(threads[i]);
        if (workers[i].failure[0] != '\0')
            g_error("%s", workers[i].failure);
        allocs += workers[i].allocs;
        uploads += workers[i].uploads;
        keyed_uploads += workers[i].keyed_uploads;
    }
    curd_session_stats stats = session_stats(shared.session);
    g_assert_cmpuint(allocs, ==, (uint64_t)THREADS * ROUNDS * 4);
    g_assert_cmpuint(stats.reuse_hits + stats.reuse_misses, ==, allocs);
    g_assert_cmpuint(stats.static_hits + stats.static_misses, ==, uploads);
    g_assert_cmpuint(stats.static_keyed_hits + stats.static_keyed_misses, ==,
                     keyed_uploads);
    g_assert_cmpuint(stats.static_keyed_hits, >, stats.static_keyed_misses);
    g_assert_cmpuint(stats.lent_buffers, ==, 0);
    /* At most 4 sizes per thread ever missed at once, then they were
     * reused: far more hits than misses. */
    g_assert_cmpuint(stats.reuse_hits, >, stats.reuse_misses);
    g_assert_cmpuint(stats.static_hits, >, stats.static_misses);
    g_assert_cmpuint(stats.idle_bytes, <=, stats.idle_budget_bytes);
    g_assert_cmpuint(stats.cached_bytes, <=, stats.static_budget_bytes);
    g_assert_cmpint(curd_session_free(shared.session), ==, CURD_OK);
    g_assert_cmpuint(resident_bytes(device), ==, baseline);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    tables_free(&shared.common);
}

static const transfer_test_case cases[] = {
    {"budget-of-64-bytes-keeps-one-of-two-released-64-byte-buffers",
     test_budget_of_64_bytes_keeps_one_of_two_released_64_byte_buffers},
    {"reuse-gives-the-same-memory-under-a-new-handle",
     test_reuse_gives_the_same_memory_under_a_new_handle},
    {"eviction-takes-the-largest-idle-buffers-first",
     test_eviction_takes_the_largest_idle_buffers_first},
    {"buffer-larger-than-the-whole-budget-is-freed-at-once",
     test_buffer_larger_than_the_whole_budget_is_freed_at_once},
    {"zero-budgets-turn-reuse-and-caching-off-and-stay-correct",
     test_zero_budgets_turn_reuse_and_caching_off_and_stay_correct},
    {"bad-buffer-calls-are-typed-errors-that-change-nothing",
     test_bad_buffer_calls_are_typed_errors_that_change_nothing},
    {"release-of-a-buffer-with-an-upload-pending-is-busy",
     test_release_of_a_buffer_with_an_upload_pending_is_busy},
    {"cold-then-warm-upload-moves-the-payload-bytes-then-none",
     test_cold_then_warm_upload_moves_the_payload_bytes_then_none},
    {"one-changed-byte-misses", test_one_changed_byte_misses},
    {"sets-of-one-shape-taking-turns-all-hit",
     test_sets_of_one_shape_taking_turns_all_hit},
    {"domain-and-the-split-of-the-bytes-are-part-of-the-key",
     test_domain_and_the_split_of_the_bytes_are_part_of_the_key},
    {"set-larger-than-the-budget-is-not-retained-and-freed-at-release",
     test_set_larger_than_the_budget_is_not_retained_and_freed_at_release},
    {"released-handle-names-curd-session-release",
     test_released_handle_names_curd_session_release},
    {"freeing-a-held-static-sets-buffer-is-busy",
     test_freeing_a_held_static_sets_buffer_is_busy},
    {"freeing-a-cached-static-sets-buffer-is-busy",
     test_freeing_a_cached_static_sets_buffer_is_busy},
    {"a-gone-static-sets-buffer-is-stale-naming-its-end",
     test_a_gone_static_sets_buffer_is_stale_naming_its_end},
    {"static-eviction-is-largest-first-and-spares-held-sets",
     test_static_eviction_is_largest_first_and_spares_held_sets},
    {"bad-static-calls-are-typed-errors-that-upload-nothing",
     test_bad_static_calls_are_typed_errors_that_upload_nothing},
    {"keyed-hit-uploads-nothing-and-reads-no-payload-byte",
     test_keyed_hit_uploads_nothing_and_reads_no_payload_byte},
    {"stats-fill-a-1-0-sized-struct-to-its-end",
     test_stats_fill_a_1_0_sized_struct_to_its_end},
    {"keyed-hit-with-other-lengths-is-refused-changing-nothing",
     test_keyed_hit_with_other_lengths_is_refused_changing_nothing},
    {"keyed-and-verified-sets-never-answer-each-other",
     test_keyed_and_verified_sets_never_answer_each_other},
    {"keyed-sets-follow-the-eviction-and-release-rules",
     test_keyed_sets_follow_the_eviction_and_release_rules},
    {"team-compared-hit-misses-on-one-changed-byte-anywhere",
     test_team_compared_hit_misses_on_one_changed_byte_anywhere},
    {"options-are-checked-and-the-default-budget-is-a-32nd",
     test_options_are_checked_and_the_default_budget_is_a_32nd},
    {"session-free-returns-resident-bytes-to-the-baseline",
     test_session_free_returns_resident_bytes_to_the_baseline},
    {"device-close-detaches-its-sessions",
     test_device_close_detaches_its_sessions},
    /* Last: test-session-threads.c runs this one alone. */
    {"eight-threads-share-one-session", test_eight_threads_share_one_session},
};

int main(int argc, char **argv)
{
#ifdef SESSION_TEST_THREADS_ONLY
    return transfer_test_main(argc, argv, "session-threads",
                              &cases[G_N_ELEMENTS(cases) - 1], 1);
#else
    return transfer_test_main(argc, argv, "session", cases,
                              G_N_ELEMENTS(cases));
#endif
}
