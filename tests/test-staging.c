/* test-staging.c - the staging helpers over a host pool (no GPU).
 *
 * The area is poisoned before each write so that a byte the helper should
 * not touch, or should have zeroed, shows; every byte is compared with a
 * reference built here. */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "memory/pool.h"
#include "memory/staging.h"
#include "pool-model.h"
#include "support/curd-test.h"

typedef struct fixture {
    pm_upstream upstream;
    curdi_pool *pool;
} fixture;

static void fixture_setup(fixture *f, gconstpointer data)
{
    (void)data;
    pm_upstream_init(&f->upstream, UINT64_MAX);
    g_assert_cmpint(pm_pool_create(&f->upstream, "pinned", 1u << 20, 0,
                                   &f->pool),
                    ==, CURD_OK);
}

static void fixture_teardown(fixture *f, gconstpointer data)
{
    (void)data;
    curd_pool_stats stats;
    curdi_pool_report_stats(f->pool, &stats);
    g_assert_cmpuint(stats.live_blocks.current, ==, 0);
    curdi_pool_lifecycle_destroy(f->pool);
    g_assert_cmpuint(f->upstream.held_bytes, ==, 0);
    pm_upstream_fini(&f->upstream);
}

static curdi_staging acquire(fixture *f, size_t byte_len)
{
    curdi_staging staging;
    g_assert_cmpint(curdi_staging_acquire(f->pool, byte_len, &staging), ==,
                    CURD_OK);
    g_assert_nonnull(staging.host);
    g_assert_cmpuint(staging.byte_len, ==, byte_len);
    g_assert_cmpuint(staging.class_bytes, >=, byte_len);
    return staging;
}

static void test_a_zero_byte_transfer_acquires_nothing(fixture *f,
                                                       gconstpointer data)
{
    (void)data;
    curd_pool_stats before, after;
    curdi_pool_report_stats(f->pool, &before);
    curdi_staging staging;
    memset(&staging, 0xFF, sizeof staging);
    g_assert_cmpint(curdi_staging_acquire(f->pool, 0, &staging), ==, CURD_OK);
    g_assert_null(staging.host);
    g_assert_null(staging.pool);
    g_assert_cmpuint(staging.byte_len, ==, 0);
    /* Not even a pool is needed for nothing. */
    g_assert_cmpint(curdi_staging_acquire(NULL, 0, &staging), ==, CURD_OK);
    /* Empty writes and reads are fine and touch nothing. */
    g_assert_cmpint(curdi_staging_write(&staging, 0, 0, NULL, 0), ==, CURD_OK);
    g_assert_cmpint(curdi_staging_read(&staging, 0, 0, NULL, 0), ==, CURD_OK);
    g_assert_cmpint(curdi_staging_release(&staging), ==, CURD_OK);
    curdi_pool_report_stats(f->pool, &after);
    g_assert_cmpuint(after.cache_misses, ==, before.cache_misses);
    g_assert_cmpuint(after.cache_hits, ==, before.cache_hits);
    g_assert_cmpuint(after.live_blocks.allocated, ==, 0);
    g_assert_cmpuint(f->upstream.attempts, ==, 0);
}

static void test_write_copies_the_source_and_zeroes_the_padding(fixture *f,
                                                               gconstpointer d)
{
    (void)d;
    for (int round = 0; round < 200; round++) {
        size_t area = (size_t)g_test_rand_int_range(1, 70000);
        curdi_staging staging = acquire(f, area);
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)area + 1);
        size_t transfer =
            (size_t)g_test_rand_int_range(0, (gint32)(area - offset) + 1);
        size_t src_len = (size_t)g_test_rand_int_range(0, (gint32)transfer + 1);
        guint8 *src = g_malloc(src_len + 1);
        curd_test_fill_random(src, src_len);
        guint8 *expect = g_malloc(area);
        curd_test_poison(staging.host, area);
        memcpy(expect, staging.host, area);
        memcpy(expect + offset, src, src_len);
        memset(expect + offset + src_len, 0, transfer - src_len);
        g_assert_cmpint(curdi_staging_write(&staging, offset, transfer, src,
                                            src_len),
                        ==, CURD_OK);
        g_assert_true(memcmp(staging.host, expect, area) == 0);
        g_free(src);
        g_free(expect);
        g_assert_cmpint(curdi_staging_release(&staging), ==, CURD_OK);
        g_assert_null(staging.host);
    }
}

static void test_write_outside_the_area_fails_and_writes_nothing(fixture *f,
                                                                gconstpointer d)
{
    (void)d;
    curdi_staging staging = acquire(f, 1000);
    guint8 src[64];
    curd_test_fill_random(src, sizeof src);
    guint8 before[1000];
    curd_test_poison(staging.host, 1000);
    memcpy(before, staging.host, 1000);
    struct {
        size_t offset, transfer, src_len;
        curd_status want;
    } cases[] = {
        {990, 11, 0, CURD_E_RANGE},      /* padding past the end */
        {1000, 1, 1, CURD_E_RANGE},      /* starts at the end */
        {0, 1001, 64, CURD_E_RANGE},     /* transfer longer than the area */
        {0, 10, 64, CURD_E_RANGE},       /* source longer than the transfer */
        {SIZE_MAX, 2, 1, CURD_E_OVERFLOW},
        {2, SIZE_MAX, 1, CURD_E_OVERFLOW},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_assert_cmpint(curdi_staging_write(&staging, cases[i].offset,
                                            cases[i].transfer, src,
                                            cases[i].src_len),
                        ==, cases[i].want);
        curd_test_assert_fix_sentence();
        g_assert_true(memcmp(staging.host, before, 1000) == 0);
    }
    g_assert_cmpint(curdi_staging_write(&staging, 0, 10, NULL, 5), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curdi_staging_write(NULL, 0, 10, src, 5), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(memcmp(staging.host, before, 1000) == 0);
    /* The last byte exactly is fine. */
    g_assert_cmpint(curdi_staging_write(&staging, 999, 1, src, 1), ==,
                    CURD_OK);
    g_assert_cmpuint(staging.host[999], ==, src[0]);
    g_assert_cmpint(curdi_staging_release(&staging), ==, CURD_OK);
}

static void test_read_copies_a_range_into_caller_memory(fixture *f,
                                                        gconstpointer d)
{
    (void)d;
    for (int round = 0; round < 200; round++) {
        size_t area = (size_t)g_test_rand_int_range(1, 70000);
        curdi_staging staging = acquire(f, area);
        curd_test_fill_random(staging.host, area);
        size_t offset = (size_t)g_test_rand_int_range(0, (gint32)area + 1);
        size_t len =
            (size_t)g_test_rand_int_range(0, (gint32)(area - offset) + 1);
        size_t capacity = len + (size_t)g_test_rand_int_range(0, 16);
        guint8 *dst = g_malloc(capacity + 1);
        curd_test_poison(dst, capacity + 1);
        guint8 *expect = g_malloc(capacity + 1);
        memcpy(expect, dst, capacity + 1);
        memcpy(expect, staging.host + offset, len);
        g_assert_cmpint(curdi_staging_read(&staging, offset, len, dst,
                                           capacity),
                        ==, CURD_OK);
        /* Exactly len bytes written, the rest of dst untouched. */
        g_assert_true(memcmp(dst, expect, capacity + 1) == 0);
        g_free(dst);
        g_free(expect);
        g_assert_cmpint(curdi_staging_release(&staging), ==, CURD_OK);
    }
}

static void test_read_past_the_area_or_the_capacity_fails_untouched(
    fixture *f, gconstpointer d)
{
    (void)d;
    curdi_staging staging = acquire(f, 500);
    curd_test_fill_random(staging.host, 500);
    guint8 dst[600], before[600];
    curd_test_poison(dst, sizeof dst);
    memcpy(before, dst, sizeof dst);
    struct {
        size_t offset, len, capacity;
        curd_status want;
    } cases[] = {
        {0, 501, 600, CURD_E_RANGE},   /* past the area */
        {400, 101, 600, CURD_E_RANGE}, /* past the area */
        {0, 100, 99, CURD_E_RANGE},    /* destination too small */
        {SIZE_MAX, 2, 600, CURD_E_OVERFLOW},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_assert_cmpint(curdi_staging_read(&staging, cases[i].offset,
                                           cases[i].len, dst,
                                           cases[i].capacity),
                        ==, cases[i].want);
        curd_test_assert_fix_sentence();
        g_assert_true(memcmp(dst, before, sizeof dst) == 0);
    }
    g_assert_cmpint(curdi_staging_read(&staging, 0, 1, NULL, 1), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curdi_staging_release(&staging), ==, CURD_OK);
}

static void test_release_gives_the_block_back_for_the_next_transfer(
    fixture *f, gconstpointer d)
{
    (void)d;
    curdi_staging first = acquire(f, 4096);
    unsigned char *host = first.host;
    g_assert_cmpint(curdi_staging_release(&first), ==, CURD_OK);
    /* Released twice: the second time the area is empty (a no-op). */
    g_assert_cmpint(curdi_staging_release(&first), ==, CURD_OK);
    curdi_staging second = acquire(f, 4000);
    g_assert_true(second.host == host);
    curd_pool_stats stats;
    curdi_pool_report_stats(f->pool, &stats);
    g_assert_cmpuint(stats.cache_hits, ==, 1);
    /* A forged area is refused. */
    curdi_staging forged = second;
    forged.pool = NULL;
    g_assert_cmpint(curdi_staging_release(&forged), ==, CURD_E_STALE_HANDLE);
    curd_test_assert_fix_sentence();
    /* A copy released after the original: the pool says stale. */
    curdi_staging copy = second;
    g_assert_cmpint(curdi_staging_release(&second), ==, CURD_OK);
    g_assert_cmpint(curdi_staging_release(&copy), ==, CURD_E_STALE_HANDLE);
    g_assert_cmpint(curdi_staging_release(NULL), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curdi_staging_acquire(f->pool, 10, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    curdi_staging none;
    g_assert_cmpint(curdi_staging_acquire(NULL, 10, &none), ==,
                    CURD_E_INVALID_ARGUMENT);
}

#define ADD(path, fn)                                                         \
    g_test_add("/staging/" path, fixture, NULL, fixture_setup, fn,            \
               fixture_teardown)

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ADD("a-zero-byte-transfer-acquires-nothing",
        test_a_zero_byte_transfer_acquires_nothing);
    ADD("write-copies-the-source-and-zeroes-the-padding",
        test_write_copies_the_source_and_zeroes_the_padding);
    ADD("write-outside-the-area-fails-and-writes-nothing",
        test_write_outside_the_area_fails_and_writes_nothing);
    ADD("read-copies-a-range-into-caller-memory",
        test_read_copies_a_range_into_caller_memory);
    ADD("read-past-the-area-or-the-capacity-fails-and-touches-nothing",
        test_read_past_the_area_or_the_capacity_fails_untouched);
    ADD("release-gives-the-block-back-for-the-next-transfer",
        test_release_gives_the_block_back_for_the_next_transfer);
    return g_test_run();
}
