/* test-pool-gpu.c - the device and pinned pools on the driver.
 *
 * On a GPU host these drive cuMemAlloc/cuMemFree and
 * cuMemHostAlloc/cuMemFreeHost for real; without one each test skips with
 * the reason (make check-gpu counts a skip as a failure). Its stand-in
 * twin test-pool-gpu-fake (CURD_TEST_ON_FAKE, tests/README.md) runs every
 * test against the stand-in libcuda (tests/fake/) with 64 MiB of "device
 * memory", so the same paths also run, under Valgrind, on hosts without a
 * GPU; there the fake's count of live allocations must be back where it
 * was after every test.
 *
 * The out-of-memory test fills the device: run it alone on the GPU. */
#include <glib.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/checked.h"
#include "core/core.h"
#include "driver/driver.h"
#include "memory/memory.h"
#include "pool-model.h"
#include "support/curd-test.h"

#if CURD_TEST_ON_FAKE
#define PATH_PREFIX "/pool-fake"
#else
#define PATH_PREFIX "/pool-gpu"
#endif

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */
static uint64_t free_memory(curd_device *device)
{
    return curd_test_device_info(device).free_memory_bytes;
}

static curd_block acquire_ok(curd_device *device, curd_pool_kind kind,
                             size_t byte_len)
{
    curd_block block;
    curd_status status = curd_block_acquire(device, kind, byte_len, &block);
    if (status != CURD_OK)
        g_error("curd_block_acquire(%s, %zu): %s: %s",
                kind == CURD_POOL_DEVICE ? "device" : "pinned", byte_len,
                curd_status_name(status), curd_last_error());
    g_assert_cmpuint(block.byte_len, ==, byte_len);
    g_assert_cmpuint(block.class_bytes, >=, byte_len);
    g_assert_cmpuint(block.pool_kind, ==, (uint32_t)kind);
    if (kind == CURD_POOL_DEVICE) {
        g_assert_cmpuint(block.device_ptr, !=, 0);
        g_assert_null(block.host_ptr);
    } else {
        g_assert_nonnull(block.host_ptr);
        g_assert_cmpuint(block.device_ptr, ==, 0);
    }
    return block;
}

static void release_ok(curd_device *device, const curd_block *block)
{
    curd_status status = curd_block_release(device, block);
    if (status != CURD_OK)
        g_error("curd_block_release: %s: %s", curd_status_name(status),
                curd_last_error());
}

/* Copies through the driver with the device's context current. */
static void copy_to_device(curd_device *device, uint64_t device_ptr,
                           const void *src, size_t byte_len)
{
    g_assert_cmpint(curdi_core_device_enter(device), ==, CURD_OK);
    curdi_cu_result rc = curdi_driver_get()->cuMemcpyHtoD(
        (curdi_cu_deviceptr)device_ptr, src, byte_len);
    curdi_core_device_leave(device);
    g_assert_cmpuint(rc, ==, CURDI_CUDA_SUCCESS);
}

static void copy_from_device(curd_device *device, void *dst,
                             uint64_t device_ptr, size_t byte_len)
{
    g_assert_cmpint(curdi_core_device_enter(device), ==, CURD_OK);
    curdi_cu_result rc = curdi_driver_get()->cuMemcpyDtoH(
        dst, (curdi_cu_deviceptr)device_ptr, byte_len);
    curdi_core_device_leave(device);
    g_assert_cmpuint(rc, ==, CURDI_CUDA_SUCCESS);
}

static size_t random_size(size_t max_bytes)
{
    /* log-uniform in [1, max_bytes] */
    unsigned bits = (unsigned)g_bit_storage((gulong)max_bytes);
    unsigned shift = (unsigned)g_test_rand_int_range(0, (gint32)bits);
    size_t low = (size_t)1 << shift;
    size_t size = low + (size_t)g_test_rand_int_range(0, (gint32)low);
    return size > max_bytes ? max_bytes : size;
}

/* ------------------------------------------------------------------------
 * The stand-in driver's live allocations (test-pool-gpu-fake only)
 * ---------------------------------------------------------------------- */
static gboolean fake_live(long *device_memory, long *host_memory)
{
    static const char *const kinds[] = {"device_memory", "host_memory"};
    long counts[G_N_ELEMENTS(kinds)];
    if (!CURD_TEST_ON_FAKE
        || !curd_test_fake_live(kinds, G_N_ELEMENTS(kinds), counts))
        return FALSE;
    *device_memory = counts[0];
    *host_memory = counts[1];
    return TRUE;
}

typedef struct pool_case {
    const char *path;
    void (*body)(void);
} pool_case;

static void run_case(gconstpointer data)
{
    const pool_case *c = data;
    long device_before = 0, host_before = 0;
    gboolean counted = fake_live(&device_before, &host_before);
    c->body();
    long device_after = 0, host_after = 0;
    if (counted && !g_test_failed() && fake_live(&device_after, &host_after)) {
        g_assert_cmpint(device_after, ==, device_before);
        g_assert_cmpint(host_after, ==, host_before);
    }
}

/* ------------------------------------------------------------------------
 * Data through the pools
 * ---------------------------------------------------------------------- */
static void body_data_round_trips_through_device_and_pinned_blocks(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    for (int round = 0; round < 24; round++) {
        size_t byte_len = random_size(4 * MIB);
        curd_block src = acquire_ok(device, CURD_POOL_PINNED, byte_len);
        curd_block dst = acquire_ok(device, CURD_POOL_PINNED, byte_len);
        curd_block on_device = acquire_ok(device, CURD_POOL_DEVICE, byte_len);
        curd_test_fill_random(src.host_ptr, byte_len);
        curd_test_poison(dst.host_ptr, byte_len);
        copy_to_device(device, on_device.device_ptr, src.host_ptr, byte_len);
        copy_from_device(device, dst.host_ptr, on_device.device_ptr, byte_len);
        g_assert_true(memcmp(src.host_ptr, dst.host_ptr, byte_len) == 0);
        /* The whole class is the block's: its last byte is writable. */
        ((unsigned char *)src.host_ptr)[src.class_bytes - 1] = 0x5A;
        release_ok(device, &src);
        release_ok(device, &dst);
        release_ok(device, &on_device);
    }
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.live_blocks.current, ==, 0);
    g_assert_cmpuint(stats.pinned_pool.live_blocks.current, ==, 0);
    g_assert_cmpuint(stats.device_pool.live_blocks.allocated, ==, 24);
    g_assert_cmpuint(stats.pinned_pool.live_blocks.allocated, ==, 48);
    g_assert_cmpuint(stats.device_pool.upstream_allocs, >, 0);
    g_assert_cmpuint(stats.device_pool.upstream_ns, >, 0);
    g_assert_cmpuint(stats.pinned_pool.upstream_ns, >, 0);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_a_cache_hit_makes_no_driver_call(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_block warm_device = acquire_ok(device, CURD_POOL_DEVICE, 4096);
    curd_block warm_pinned = acquire_ok(device, CURD_POOL_PINNED, 4096);
    release_ok(device, &warm_device);
    release_ok(device, &warm_pinned);
    curd_test_faults_begin(0, 0, NULL); /* count every driver call */
    for (int i = 0; i < 100; i++) {
        curd_block a = acquire_ok(device, CURD_POOL_DEVICE, 4000);
        curd_block b = acquire_ok(device, CURD_POOL_PINNED, 4096);
        g_assert_cmpuint(a.device_ptr, ==, warm_device.device_ptr);
        g_assert_true(b.host_ptr == warm_pinned.host_ptr);
        release_ok(device, &a);
        release_ok(device, &b);
    }
    unsigned calls = curd_test_faults_end();
    g_assert_cmpuint(calls, ==, 0);
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cache_hits, ==, 100);
    g_assert_cmpuint(stats.pinned_pool.cache_hits, ==, 100);
    g_assert_cmpuint(stats.device_pool.upstream_allocs, ==, 1);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Statistics and options
 * ---------------------------------------------------------------------- */
static void body_stats_report_both_pools_and_their_budgets(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    /* Smaller than curd 1.0's struct (which ends at accounting_repairs). */
    stats.struct_size = offsetof(curd_stats, module_cache_hits) - 1;
    g_assert_cmpint(curd_device_stats(device, &stats), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_device_stats(device, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    stats.struct_size = sizeof stats;
    g_assert_cmpint(curd_device_stats(NULL, &stats), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_stats_reset(NULL), ==, CURD_E_INVALID_ARGUMENT);

    curd_block block = acquire_ok(device, CURD_POOL_DEVICE, 1000);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.struct_size, ==, sizeof stats);
    g_assert_cmpuint(stats.device_pool.live_bytes.current, ==, 1024);
    g_assert_cmpuint(stats.device_pool.requested_bytes.current, ==, 1000);
    g_assert_cmpuint(stats.device_pool.cache_misses, ==, 1);
    g_assert_cmpuint(stats.pinned_pool.live_bytes.current, ==, 0);
    uint64_t total = curd_test_device_info(device).total_memory_bytes;
    g_assert_cmpuint(stats.device_pool.cache_budget_bytes, ==,
                     curdi_memory_default_device_cache(total));
    g_assert_cmpuint(stats.pinned_pool.cache_budget_bytes, ==,
                     CURDI_PINNED_CACHE_DEFAULT);
    g_assert_cmpuint(stats.device_pool.live_limit_bytes, ==, 0);
    release_ok(device, &block);
    g_assert_cmpint(curd_device_stats_reset(device), ==, CURD_OK);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cache_misses, ==, 0);
    g_assert_cmpuint(stats.device_pool.live_bytes.allocated, ==, 0);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==, 1024);
    g_assert_cmpuint(stats.device_pool.cached_bytes.peak, ==, 1024);
    g_assert_cmpuint(stats.h2d_bytes, ==, 0);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);

    /* Budgets and limits from the options. */
    curd_device_options options;
    curd_device_options_init(&options);
    options.device_cache_bytes = 12345678;
    options.pinned_cache_bytes = 7654321;
    options.device_live_limit_bytes = 64 * MIB;
    options.pinned_live_limit_bytes = 1 * MIB;
    device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cache_budget_bytes, ==, 12345678);
    g_assert_cmpuint(stats.pinned_pool.cache_budget_bytes, ==, 7654321);
    g_assert_cmpuint(stats.device_pool.live_limit_bytes, ==, 64 * MIB);
    g_assert_cmpuint(stats.pinned_pool.live_limit_bytes, ==, 1 * MIB);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_the_live_limit_refuses_with_budget(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.device_live_limit_bytes = 1 * MIB;
    options.pinned_live_limit_bytes = 256 * KIB;
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    curd_block a = acquire_ok(device, CURD_POOL_DEVICE, 1 * MIB);
    curd_block b = acquire_ok(device, CURD_POOL_PINNED, 256 * KIB);
    curd_block none;
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_DEVICE, 1, &none), ==,
                    CURD_E_BUDGET);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "device_live_limit_bytes"));
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_PINNED, 1, &none), ==,
                    CURD_E_BUDGET);
    g_assert_nonnull(strstr(curd_last_error(), "pinned_live_limit_bytes"));
    release_ok(device, &a);
    release_ok(device, &b);
    curd_block c = acquire_ok(device, CURD_POOL_DEVICE, 512 * KIB);
    release_ok(device, &c);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Bad blocks
 * ---------------------------------------------------------------------- */
static void body_bad_arguments_and_forged_blocks_change_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device *other = curd_test_gpu_open();
    if (other == NULL) {
        curd_device_close(device);
        return;
    }
    curd_block block = acquire_ok(device, CURD_POOL_DEVICE, 4096);
    curd_block pinned = acquire_ok(device, CURD_POOL_PINNED, 4096);
    curd_stats before = curd_test_device_stats(device);
    curd_block out;
    g_assert_cmpint(curd_block_acquire(NULL, CURD_POOL_DEVICE, 1, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_block_acquire(device, (curd_pool_kind)7, 1, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_DEVICE, 0, &out), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_DEVICE, 1, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_DEVICE, SIZE_MAX,
                                       &out),
                    ==, CURD_E_OVERFLOW);
    g_assert_cmpint(curd_block_release(device, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_block_release(NULL, &block), ==,
                    CURD_E_INVALID_ARGUMENT);

    curd_block forged = block;
    forged.pool_kind = CURD_POOL_PINNED; /* a device block named pinned */
    g_assert_cmpint(curd_block_release(device, &forged), ==,
                    CURD_E_STALE_HANDLE);
    curd_test_assert_fix_sentence();
    forged = block;
    forged.device_ptr += 256;
    g_assert_cmpint(curd_block_release(device, &forged), ==,
                    CURD_E_STALE_HANDLE);
    forged = block;
    forged.pool_kind = 9;
    g_assert_cmpint(curd_block_release(device, &forged), ==,
                    CURD_E_STALE_HANDLE);
    forged = pinned;
    forged.host_ptr = (char *)forged.host_ptr + 1;
    g_assert_cmpint(curd_block_release(device, &forged), ==,
                    CURD_E_STALE_HANDLE);
    /* Another device (of the same GPU) never handed it out. */
    g_assert_cmpint(curd_block_release(other, &block), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_block_release(other, &pinned), ==,
                    CURD_E_STALE_HANDLE);
    curd_stats after = curd_test_device_stats(device);
    after.device_pool.upstream_ns = before.device_pool.upstream_ns;
    after.pinned_pool.upstream_ns = before.pinned_pool.upstream_ns;
    g_assert_true(memcmp(&before.device_pool, &after.device_pool,
                         sizeof before.device_pool) == 0);
    g_assert_true(memcmp(&before.pinned_pool, &after.pinned_pool,
                         sizeof before.pinned_pool) == 0);
    curd_stats other_stats = curd_test_device_stats(other);
    g_assert_cmpuint(other_stats.device_pool.live_blocks.current, ==, 0);

    release_ok(device, &block);
    g_assert_cmpint(curd_block_release(device, &block), ==,
                    CURD_E_STALE_HANDLE);
    release_ok(device, &pinned);
    g_assert_cmpint(curd_device_set_reclaim(NULL, NULL, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_trim(NULL, 0), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_close(other), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Every field of a copied block, altered: device_ptr, host_ptr, byte_len,
 * class_bytes, pool_kind, reserved. */
#define ALTERATIONS 10
static curd_block altered(const curd_block *block, int which)
{
    curd_block copy = *block;
    switch (which) {
    case 0: copy.byte_len -= 1; break;
    case 1: copy.byte_len = copy.class_bytes; break;
    case 2: copy.class_bytes += 8; break;
    case 3: copy.class_bytes *= 2; break;
    case 4: copy.reserved = 1; break;
    case 5: copy.reserved = UINT32_MAX; break;
    case 6: copy.pool_kind ^= 1u; break;
    case 7: copy.device_ptr += copy.class_bytes; break;
    case 8: copy.host_ptr = (char *)copy.host_ptr + copy.class_bytes; break;
    default: copy.device_ptr ^= 1u; break;
    }
    return copy;
}

static void body_a_copied_block_altered_in_any_field_is_stale(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    for (int kind = CURD_POOL_DEVICE; kind <= CURD_POOL_PINNED; kind++) {
        /* byte_len below its class, so every size field can move either
         * way and stay plausible. */
        curd_block block = acquire_ok(device, (curd_pool_kind)kind, 5000);
        g_assert_cmpuint(block.class_bytes, >, block.byte_len);
        curd_stats before = curd_test_device_stats(device);
        for (int which = 0; which < ALTERATIONS; which++) {
            curd_block copy = altered(&block, which);
            if (memcmp(&copy, &block, sizeof copy) == 0)
                continue; /* e.g. host_ptr of a device block, still NULL */
            g_assert_cmpint(curd_block_release(device, &copy), ==,
                            CURD_E_STALE_HANDLE);
            curd_test_assert_fix_sentence();
            curd_stats after = curd_test_device_stats(device);
            g_assert_true(memcmp(&before, &after, sizeof before) == 0);
        }
        /* The real block is still live, and releases once. */
        release_ok(device, &block);
        g_assert_cmpint(curd_block_release(device, &block), ==,
                        CURD_E_STALE_HANDLE);
    }
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static uint64_t count_reclaim_calls(void *context, uint64_t bytes_needed)
{
    (void)bytes_needed;
    (*(unsigned *)context)++;
    return 0;
}

/* A request larger than everything behind its pool is refused at once:
 * no cache of this device or of another one of the same GPU trimmed, no
 * reclaim callback asked, no counter moved. */
static void body_an_impossible_request_is_refused_before_anything_changes(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device *other = curd_test_gpu_open();
    g_assert_nonnull(other);
    unsigned reclaim_calls = 0;
    g_assert_cmpint(curd_device_set_reclaim(device, count_reclaim_calls,
                                            &reclaim_calls),
                    ==, CURD_OK);
    /* Something cached in both devices' pools, which a ladder would trim. */
    for (int kind = CURD_POOL_DEVICE; kind <= CURD_POOL_PINNED; kind++) {
        curd_block mine = acquire_ok(device, (curd_pool_kind)kind, 64 * KIB);
        curd_block theirs = acquire_ok(other, (curd_pool_kind)kind, 64 * KIB);
        release_ok(device, &mine);
        release_ok(other, &theirs);
    }
    uint64_t total = curd_test_device_info(device).total_memory_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    g_assert_cmpint(pages, >, 0);
    uint64_t host_total = (uint64_t)pages * (uint64_t)page_bytes;
    const struct {
        curd_pool_kind kind;
        uint64_t byte_len;
    } impossible[] = {
        {CURD_POOL_DEVICE, total + 1},
        {CURD_POOL_DEVICE, (uint64_t)1 << 40},
        {CURD_POOL_PINNED, host_total + 1},
        {CURD_POOL_PINNED, (uint64_t)1 << 50},
    };
    curd_stats before = curd_test_device_stats(device);
    curd_stats other_before = curd_test_device_stats(other);
    for (size_t i = 0; i < G_N_ELEMENTS(impossible); i++) {
        curd_block out;
        curd_test_poison(&out, sizeof out);
        curd_block poisoned = out;
        g_assert_cmpint(curd_block_acquire(device, impossible[i].kind,
                                           (size_t)impossible[i].byte_len,
                                           &out),
                        ==, CURD_E_OUT_OF_MEMORY);
        curd_test_assert_fix_sentence();
        g_assert_nonnull(strstr(curd_last_error(), "has in all"));
        g_assert_true(memcmp(&out, &poisoned, sizeof out) == 0);
    }
    curd_stats after = curd_test_device_stats(device);
    curd_stats other_after = curd_test_device_stats(other);
    g_assert_true(memcmp(&before, &after, sizeof before) == 0);
    g_assert_true(memcmp(&other_before, &other_after, sizeof before) == 0);
    g_assert_cmpuint(reclaim_calls, ==, 0);
    g_assert_cmpuint(after.device_pool.cached_bytes.current, >, 0);
    g_assert_cmpuint(after.pinned_pool.cached_bytes.current, >, 0);
    g_assert_cmpint(curd_device_close(other), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Trim and close give memory back
 * ---------------------------------------------------------------------- */
static void body_trim_returns_cached_memory_to_the_device(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.device_cache_bytes = 256 * MIB;
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    curd_block blocks[8];
    for (int i = 0; i < 8; i++)
        blocks[i] = acquire_ok(device, CURD_POOL_DEVICE, 4 * MIB);
    curd_block pinned = acquire_ok(device, CURD_POOL_PINNED, 1 * MIB);
    for (int i = 0; i < 8; i++)
        release_ok(device, &blocks[i]);
    release_ok(device, &pinned);
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==, 32 * MIB);
    uint64_t free_before = free_memory(device);
    g_assert_cmpint(curd_device_trim(device, 8 * MIB), ==, CURD_OK);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==, 8 * MIB);
    g_assert_cmpuint(stats.pinned_pool.cached_bytes.current, ==, 1 * MIB);
    g_assert_cmpint(curd_device_trim(device, 0), ==, CURD_OK);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==, 0);
    g_assert_cmpuint(stats.pinned_pool.cached_bytes.current, ==, 0);
    g_assert_cmpuint(stats.device_pool.upstream_frees, ==, 8);
    uint64_t free_after = free_memory(device);
    g_test_message("free memory %" PRIu64 " -> %" PRIu64, free_before,
                   free_after);
    /* The driver may keep a little; 32 MiB went back, at least 28. */
    g_assert_cmpuint(free_after, >=, free_before + 28 * MIB);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_close_returns_device_free_memory_to_where_it_was(void)
{
    /* The observer holds the primary context, so what the context itself
     * takes stays out of the comparison. */
    curd_device *observer = curd_test_gpu_open();
    if (observer == NULL)
        return;
    uint64_t free_before = free_memory(observer);
    curd_device *device = curd_test_gpu_open();
    g_assert_nonnull(device);
    curd_block blocks[24];
    for (int i = 0; i < 24; i++)
        blocks[i] = acquire_ok(device, i % 3 == 0 ? CURD_POOL_PINNED
                                                  : CURD_POOL_DEVICE,
                               random_size(2 * MIB));
    /* Half go back to the caches, half stay live: close frees both. */
    for (int i = 0; i < 24; i += 2)
        release_ok(device, &blocks[i]);
    g_assert_cmpuint(free_memory(observer), <, free_before);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    uint64_t free_after = free_memory(observer);
    g_test_message("free memory %" PRIu64 " before, %" PRIu64 " after close",
                   free_before, free_after);
    uint64_t tolerance = CURD_TEST_ON_FAKE ? 0 : 16 * MIB;
    uint64_t gap = free_after > free_before ? free_after - free_before
                                            : free_before - free_after;
    g_assert_cmpuint(gap, <=, tolerance);
    g_assert_cmpint(curd_device_close(observer), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Out of memory, on a nearly full device
 * ---------------------------------------------------------------------- */
typedef struct reclaim_context {
    curd_device *device;
    GArray *blocks; /* live blocks it may release */
    unsigned release_count;
    unsigned calls;
    uint64_t bytes_needed;
} reclaim_context;

static uint64_t reclaim_some(void *opaque, uint64_t bytes_needed)
{
    reclaim_context *r = opaque;
    r->calls++;
    r->bytes_needed = bytes_needed;
    uint64_t freed = 0;
    for (unsigned i = 0; i < r->release_count && r->blocks->len > 0; i++) {
        curd_block block =
            g_array_index(r->blocks, curd_block, r->blocks->len - 1);
        g_array_set_size(r->blocks, r->blocks->len - 1);
        /* Called with no curd lock held: releasing is allowed. */
        release_ok(r->device, &block);
        freed += block.class_bytes;
    }
    return freed;
}

/* Acquires chunks until the driver runs out; returns the failing status. */
static curd_status fill(curd_device *device, GArray *blocks, size_t chunk)
{
    for (int i = 0; i < 256; i++) {
        curd_block block;
        curd_status status =
            curd_block_acquire(device, CURD_POOL_DEVICE, chunk, &block);
        if (status != CURD_OK)
            return status;
        g_array_append_val(blocks, block);
    }
    g_error("256 chunks of %zu bytes fit on the device; it never filled",
            chunk);
}

static void release_all(curd_device *device, GArray *blocks)
{
    for (guint i = 0; i < blocks->len; i++)
        release_ok(device, &g_array_index(blocks, curd_block, i));
    g_array_set_size(blocks, 0);
}

static void body_out_of_memory_trims_reclaims_and_names_the_numbers(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.device_cache_bytes = (uint64_t)1 << 50; /* cache everything */
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    /* Chunks of about 1/16 of free memory, in whole 2 MiB pages. */
    size_t chunk = (size_t)(free_memory(device) / 16) & ~(2 * MIB - 1);
    g_assert_cmpuint(chunk, >=, 2 * MIB);
    size_t chunk_class = 0, big_class = 0;
    size_t big = chunk + chunk / 2;
    g_assert_cmpint(curdi_checked_size_class(chunk, &chunk_class, NULL), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_checked_size_class(big, &big_class, NULL), ==,
                    CURD_OK);
    g_assert_cmpuint(big_class, >, chunk_class);
    g_assert_cmpuint(big_class, <=, 2 * chunk_class);
    GArray *blocks = g_array_new(FALSE, FALSE, sizeof(curd_block));

    /* 1. Fill the device: the last acquire fails after the whole ladder,
     *    with the numbers in its sentence. */
    curd_status status = fill(device, blocks, chunk);
    g_assert_cmpint(status, ==, CURD_E_OUT_OF_MEMORY);
    g_assert_cmpint(curd_last_driver_code(), ==, CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    curd_test_assert_fix_sentence();
    char *message = g_strdup(curd_last_error());
    g_test_message("%s", message);
    curd_stats stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.live_bytes.current, >=,
                     (uint64_t)blocks->len * chunk_class);
    char *requested = g_strdup_printf("%zu-byte request", chunk);
    char *live = g_strdup_printf("%" PRIu64 " bytes are live",
                                 stats.device_pool.live_bytes.current);
    char *cached = g_strdup_printf(" %" PRIu64 " cached",
                                   stats.device_pool.cached_bytes.current);
    g_assert_nonnull(strstr(message, requested));
    g_assert_nonnull(strstr(message, live));
    g_assert_nonnull(strstr(message, cached));
    g_assert_nonnull(strstr(message, "bytes free"));
    g_free(requested);
    g_free(live);
    g_free(cached);
    g_free(message);
    guint filled = blocks->len;
    g_test_message("%u chunks of %zu bytes filled the device", filled, chunk);
    g_assert_cmpuint(filled, >=, 4);
    g_assert_cmpuint(stats.device_pool.oom_failures, ==, 1);
    g_assert_cmpuint(stats.device_pool.oom_retries, ==, 0);

    /* 2. Half the chunks go to the cache. A request of a larger class
     *    cannot be a hit and does not fit: the pool frees just enough of
     *    its cache (two chunks) and the retry succeeds. */
    for (guint i = filled / 2; i < filled; i++)
        release_ok(device, &g_array_index(blocks, curd_block, i));
    g_array_set_size(blocks, filled / 2);
    curd_stats before = curd_test_device_stats(device);
    curd_block big_block = acquire_ok(device, CURD_POOL_DEVICE, big);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.device_pool.oom_retries, ==,
                     before.device_pool.oom_retries + 1);
    g_assert_cmpuint(stats.device_pool.oom_failures, ==,
                     before.device_pool.oom_failures);
    g_assert_cmpuint(stats.device_pool.upstream_frees, ==,
                     before.device_pool.upstream_frees + 2);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==,
                     before.device_pool.cached_bytes.current - 2 * chunk_class);
    g_array_append_val(blocks, big_block);

    /* 3. With nothing cached, the reclaim callback is asked for the bytes;
     *    what it releases lands in the cache, which the pool frees before
     *    its retry. */
    g_assert_cmpint(curd_device_trim(device, 0), ==, CURD_OK);
    status = fill(device, blocks, chunk);
    g_assert_cmpint(status, ==, CURD_E_OUT_OF_MEMORY);
    reclaim_context reclaim = {.device = device, .blocks = blocks,
                               .release_count = 2};
    g_assert_cmpint(curd_device_set_reclaim(device, reclaim_some, &reclaim),
                    ==, CURD_OK);
    before = curd_test_device_stats(device);
    big_block = acquire_ok(device, CURD_POOL_DEVICE, big);
    g_array_append_val(blocks, big_block);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(reclaim.calls, ==, 1);
    g_assert_cmpuint(reclaim.bytes_needed, ==, big_class);
    g_assert_cmpuint(stats.device_pool.oom_retries, ==,
                     before.device_pool.oom_retries + 1);
    g_assert_cmpuint(stats.device_pool.cached_bytes.current, ==, 0);
    g_assert_cmpint(curd_device_set_reclaim(device, NULL, NULL), ==, CURD_OK);

    /* 4. Another curd_device of the same GPU holds cached chunks: the last
     *    rung trims its cache too. */
    release_all(device, blocks);
    g_assert_cmpint(curd_device_trim(device, 0), ==, CURD_OK);
    curd_device *other = curd_test_gpu_open_with(&options);
    g_assert_nonnull(other);
    GArray *other_blocks = g_array_new(FALSE, FALSE, sizeof(curd_block));
    for (int i = 0; i < 3; i++) {
        curd_block block = acquire_ok(other, CURD_POOL_DEVICE, chunk);
        g_array_append_val(other_blocks, block);
    }
    release_all(other, other_blocks);
    curd_stats other_stats = curd_test_device_stats(other);
    g_assert_cmpuint(other_stats.device_pool.cached_bytes.current, ==,
                     3 * chunk_class);
    before = curd_test_device_stats(device);
    status = fill(device, blocks, chunk);
    g_assert_cmpint(status, ==, CURD_E_OUT_OF_MEMORY);
    stats = curd_test_device_stats(device);
    other_stats = curd_test_device_stats(other);
    g_assert_cmpuint(other_stats.device_pool.cached_bytes.current, ==, 0);
    g_assert_cmpuint(other_stats.device_pool.upstream_frees, ==, 3);
    g_assert_cmpuint(stats.device_pool.oom_retries, >=,
                     before.device_pool.oom_retries + 1);
    g_assert_cmpuint(stats.device_pool.oom_failures, ==,
                     before.device_pool.oom_failures + 1);

    release_all(device, blocks);
    g_array_free(blocks, TRUE);
    g_array_free(other_blocks, TRUE);
    g_assert_cmpint(curd_device_close(other), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Fault sweep: fail each cuMemAlloc in turn
 * ---------------------------------------------------------------------- */
typedef struct sweep_op {
    int kind; /* 0 acquire, 1 release the pick-th live block, 2 trim */
    size_t byte_len;
    unsigned pick;
} sweep_op;

enum { SWEEP_OPS = 48 };
#define SWEEP_BUDGET (4 * MIB)

static void sweep_check(curd_device *device, const pool_model *model, size_t at)
{
    curd_stats stats = curd_test_device_stats(device);
    char why[256];
    if (!pm_compare(model, &stats.device_pool, why, sizeof why))
        g_error("sweep step %zu: %s", at, why);
}

/* Runs the script on a fresh device with cuMemAlloc number fail_at (0:
 * none) failing with cu_result, comparing the device pool with the model
 * after every step; returns how many cuMemAlloc calls were made. */
static unsigned sweep_run(const sweep_op *ops, unsigned fail_at, int cu_result,
                          curd_status as_status)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.device_cache_bytes = SWEEP_BUDGET;
    curd_device *device = curd_test_gpu_open_with(&options);
    g_assert_nonnull(device);
    pool_model model;
    pm_init(&model, SWEEP_BUDGET, 0, UINT64_MAX);
    model.fail_at = fail_at;
    model.fail_status = as_status;
    curd_test_faults_begin(fail_at, cu_result, "cuMemAlloc");
    /* The blocks as handed out: a release passes one back unchanged. */
    curd_block held[SWEEP_OPS];
    size_t held_count = 0;
    for (size_t i = 0; i < SWEEP_OPS; i++) {
        const sweep_op *op = &ops[i];
        if (op->kind == 0) {
            curd_block block;
            curd_status got = curd_block_acquire(device, CURD_POOL_DEVICE,
                                                 op->byte_len, &block);
            uint64_t predicted = 0;
            size_t want_class = 0;
            curd_status want = pm_acquire(&model, op->byte_len,
                                          got == CURD_OK ? block.device_ptr : 0,
                                          &predicted, &want_class);
            if (got != want)
                g_error("sweep (fail %u) step %zu: acquire %zu: got %s (%s), "
                        "want %s",
                        fail_at, i, op->byte_len, curd_status_name(got),
                        curd_last_error(), curd_status_name(want));
            if (got == CURD_OK) {
                held[held_count++] = block;
                g_assert_cmpuint(block.class_bytes, ==, want_class);
                if (predicted != 0)
                    g_assert_cmpuint(block.device_ptr, ==, predicted);
            } else {
                curd_test_assert_fix_sentence();
                g_assert_cmpint(curd_last_driver_code(), ==, cu_result);
            }
        } else if (op->kind == 1 && model.live_count > 0) {
            pm_block live = model.live[op->pick % model.live_count];
            size_t at = 0;
            while (held[at].device_ptr != live.address)
                at++; /* the model's live blocks are all held */
            curd_block block = held[at];
            held[at] = held[--held_count];
            g_assert_cmpuint(block.byte_len, ==, live.byte_len);
            g_assert_cmpint(curd_block_release(device, &block), ==, CURD_OK);
            g_assert_cmpint(pm_release(&model, live.address), ==, CURD_OK);
        } else if (op->kind == 2) {
            g_assert_cmpint(curd_device_trim(device, op->byte_len), ==,
                            CURD_OK);
            pm_trim(&model, op->byte_len);
        }
        sweep_check(device, &model, i);
    }
    unsigned calls = curd_test_faults_end();
    g_assert_cmpuint(calls, ==, model.attempts);
    if (fail_at != 0 && fail_at <= calls)
        g_assert_true(curd_test_faults_fired());
    /* Blocks left live go back at close. */
    pm_fini(&model);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    return calls;
}

static void body_failing_each_cumemalloc_in_turn_keeps_counters_exact(void)
{
    /* The observer keeps the primary context alive between the runs, so
     * each run's open is cheap. */
    curd_device *observer = curd_test_gpu_open();
    if (observer == NULL)
        return;
    uint64_t free_before = free_memory(observer);
    static const size_t sizes[] = {100,   4096,  5000,   65536,
                                   65537, 1 * MIB, 3 * MIB, 256};
    sweep_op ops[SWEEP_OPS];
    for (size_t i = 0; i < SWEEP_OPS; i++) {
        int kind = g_test_rand_int_range(0, 10);
        ops[i].kind = kind < 6 ? 0 : kind < 9 ? 1 : 2;
        ops[i].byte_len = ops[i].kind == 2
                              ? (size_t)g_test_rand_int_range(0, 8 * MIB)
                              : sizes[g_test_rand_int_range(
                                    0, G_N_ELEMENTS(sizes))];
        ops[i].pick = g_test_rand_int();
    }
    unsigned clean = sweep_run(ops, 0, 0, CURD_OK);
    g_test_message("%u cuMemAlloc calls in the clean run", clean);
    g_assert_cmpuint(clean, >, 0);
    for (unsigned fail_at = 1; fail_at <= clean + 1; fail_at++) {
        sweep_run(ops, fail_at, CURDI_CUDA_ERROR_OUT_OF_MEMORY,
                  CURD_E_OUT_OF_MEMORY);
        sweep_run(ops, fail_at, CURDI_CUDA_ERROR_INVALID_VALUE, CURD_E_DRIVER);
    }
    uint64_t free_after = free_memory(observer);
    uint64_t gap = free_after > free_before ? free_after - free_before
                                            : free_before - free_after;
    g_assert_cmpuint(gap, <=, CURD_TEST_ON_FAKE ? 0 : 16 * MIB);
    g_assert_cmpint(curd_device_close(observer), ==, CURD_OK);
}

/* ------------------------------------------------------------------------ */
static const pool_case cases[] = {
    {"/data-round-trips-through-device-and-pinned-blocks",
     body_data_round_trips_through_device_and_pinned_blocks},
    {"/a-cache-hit-makes-no-driver-call", body_a_cache_hit_makes_no_driver_call},
    {"/stats-report-both-pools-and-their-budgets",
     body_stats_report_both_pools_and_their_budgets},
    {"/the-live-limit-refuses-with-budget",
     body_the_live_limit_refuses_with_budget},
    {"/bad-arguments-and-forged-or-foreign-blocks-change-nothing",
     body_bad_arguments_and_forged_blocks_change_nothing},
    {"/a-copied-block-altered-in-any-field-is-stale-and-releases-nothing",
     body_a_copied_block_altered_in_any_field_is_stale},
    {"/an-impossible-request-is-refused-before-anything-changes",
     body_an_impossible_request_is_refused_before_anything_changes},
    {"/trim-returns-cached-memory-to-the-device",
     body_trim_returns_cached_memory_to_the_device},
    {"/close-returns-device-free-memory-to-where-it-was",
     body_close_returns_device_free_memory_to_where_it_was},
    {"/out-of-memory-trims-reclaims-trims-every-device-and-names-the-numbers",
     body_out_of_memory_trims_reclaims_and_names_the_numbers},
    {"/failing-each-cuMemAlloc-in-turn-keeps-every-counter-exact",
     body_failing_each_cumemalloc_in_turn_keeps_counters_exact},
};

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    /* The stand-in driver beside this program, with a small memory so the
     * out-of-memory test fills it quickly; no skip is allowed here. */
    curd_test_require_fake_driver();
    g_setenv("FAKE_CUDA_MEMORY", "67108864", TRUE);
#endif
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *path = g_strconcat(PATH_PREFIX, cases[i].path, NULL);
        g_test_add_data_func(path, &cases[i], run_case);
        g_free(path);
    }
    return g_test_run();
}
