/* test-resident.c - the resident module, on the CPU.
 *
 * The module's budget, statistics and in-flight marks are driven through a host-side curd_device whose device pool has a plain
 * malloc upstream, so every path that makes no driver call runs here
 * (under Valgrind in make check). The GPU half is test-resident-gpu.c. */
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "core/core.h"
#include "memory/pool.h"
#include "memory/resident.h"
#include "support/curd-test.h"

/* ------------------------------------------------------------------------
 * The module, on a host-side device
 * ---------------------------------------------------------------------- */

static curd_status host_alloc(void *context, size_t byte_len,
                              uint64_t *out_address)
{
    (void)context;
    void *memory = malloc(byte_len);
    if (memory == NULL)
        return CURD_E_OUT_OF_MEMORY;
    *out_address = (uint64_t)(uintptr_t)memory;
    return CURD_OK;
}

static curd_status host_free(void *context, uint64_t address, size_t byte_len)
{
    (void)context;
    (void)byte_len;
    free((void *)(uintptr_t)address);
    return CURD_OK;
}

static curd_device *resident_device_open(uint64_t limit_bytes)
{
    curd_device *device = g_new0(curd_device, 1);
    curdi_upstream upstream = {host_alloc, host_free, NULL, NULL};
    curdi_pool_config config = {.name = "device", .cache_budget_bytes = 1u << 20};
    curd_device_options_init(&device->options);
    device->options.resident_limit_bytes = limit_bytes;
    g_assert_cmpint(
        curdi_pool_lifecycle_create(&upstream, &config, &device->device_pool),
        ==, CURD_OK);
    g_assert_cmpint(curdi_resident_open(device), ==, CURD_OK);
    g_assert_nonnull(device->resident);
    /* Open as far as every entry point's check can tell. */
    g_assert_cmpint(curdi_core_register(device), ==, CURD_OK);
    return device;
}

static void resident_device_close(curd_device *device)
{
    g_assert_true(curdi_core_unregister(device));
    curdi_resident_close(device);
    g_assert_null(device->resident);
    curdi_pool_lifecycle_destroy(device->device_pool);
    g_free(device);
}

/* curd_buffer_alloc's steps without the driver: reserve, pool, commit. */
static curd_status resident_alloc(curd_device *device, size_t byte_len,
                                  uint64_t total, uint64_t free_bytes,
                                  uint64_t *out_id)
{
    uint64_t ptr = 0;
    size_t class_bytes = 0;
    curd_status status =
        curdi_resident_reserve(device, "test", byte_len, total, free_bytes);
    if (status != CURD_OK)
        return status;
    status = curdi_pool_acquire(device->device_pool, byte_len, &ptr,
                                &class_bytes);
    if (status != CURD_OK) {
        curdi_resident_unreserve(device, byte_len);
        return status;
    }
    *out_id = curdi_resident_commit(device, byte_len, ptr);
    return CURD_OK;
}

static void resident_free(curd_device *device, uint64_t id)
{
    uint64_t ptr = 0;
    g_assert_cmpint(curdi_resident_take(device, "test", id, &ptr), ==, CURD_OK);
    g_assert_cmpint(curdi_pool_release(device->device_pool, ptr), ==, CURD_OK);
}

static void test_budget_is_nine_tenths_of_total_capped_by_free_plus_resident(void)
{
    const uint64_t total = 10000;
    curd_device *device = resident_device_open(0);
    uint64_t a = 0, b = 0, c = 0;
    /* Plenty free: 9/10 of total = 9000 is the budget. */
    g_assert_cmpint(resident_alloc(device, 9001, total, total, &a), ==,
                    CURD_E_BUDGET);
    g_assert_cmpint(resident_alloc(device, 9000, total, total, &a), ==,
                    CURD_OK);
    resident_free(device, a);
    /* 4000 free: 9/10 * 4000 + resident. */
    g_assert_cmpint(resident_alloc(device, 3000, total, 4000, &a), ==,
                    CURD_OK);
    /* Now 3000 resident and (say) 1000 free: 900 + 3000 = 3900 allowed. */
    g_assert_cmpint(resident_alloc(device, 901, total, 1000, &b), ==,
                    CURD_E_BUDGET);
    g_assert_cmpint(resident_alloc(device, 900, total, 1000, &b), ==, CURD_OK);
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 3900);
    g_assert_cmpint(resident_alloc(device, 1, total, 0, &c), ==,
                    CURD_E_BUDGET);
    resident_free(device, a);
    resident_free(device, b);
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 0);
    resident_device_close(device);
}

static void test_over_budget_names_the_numbers_and_changes_nothing(void)
{
    curd_device *device = resident_device_open(5000);
    uint64_t a = 0, b = 0;
    curd_stat_family bytes_before, buffers_before, bytes_after, buffers_after;
    curd_pool_stats pool_before, pool_after;
    g_assert_cmpint(resident_alloc(device, 4000, 1000000, 1000000, &a), ==,
                    CURD_OK);
    curdi_resident_stats(device, &bytes_before, &buffers_before);
    curdi_pool_report_stats(device->device_pool, &pool_before);
    g_assert_cmpint(resident_alloc(device, 1001, 1000000, 1000000, &b), ==,
                    CURD_E_BUDGET);
    const char *message = curd_last_error();
    g_assert_nonnull(strstr(message, "1001 bytes"));
    g_assert_nonnull(strstr(message, "5001 bytes"));
    g_assert_nonnull(strstr(message, "budget of 5000 bytes"));
    g_assert_nonnull(strstr(message, "limit 5000"));
    g_assert_nonnull(strstr(message, "Fix: "));
    curdi_resident_stats(device, &bytes_after, &buffers_after);
    curdi_pool_report_stats(device->device_pool, &pool_after);
    g_assert_cmpmem(&bytes_before, sizeof bytes_before, &bytes_after,
                    sizeof bytes_after);
    g_assert_cmpmem(&buffers_before, sizeof buffers_before, &buffers_after,
                    sizeof buffers_after);
    g_assert_cmpuint(pool_before.upstream_allocs, ==, pool_after.upstream_allocs);
    g_assert_cmpuint(pool_before.live_bytes.current, ==,
                     pool_after.live_bytes.current);
    /* Exactly at the limit is fine. */
    g_assert_cmpint(resident_alloc(device, 1000, 1000000, 1000000, &b), ==,
                    CURD_OK);
    resident_device_close(device);
}

static void test_a_size_that_overflows_the_budget_sum_is_refused(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t a = 0, b = 0;
    g_assert_cmpint(resident_alloc(device, 100, UINT64_MAX, UINT64_MAX, &a),
                    ==, CURD_OK);
    g_assert_cmpint(curdi_resident_reserve(device, "test", SIZE_MAX, UINT64_MAX,
                                           UINT64_MAX),
                    ==, CURD_E_BUDGET);
    g_assert_nonnull(strstr(curd_last_error(), "more than"));
    (void)b;
    resident_device_close(device);
}

static void test_reservations_count_against_the_budget_until_released(void)
{
    curd_device *device = resident_device_open(1000);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           600, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    /* A second concurrent allocation sees the first one's bytes. */
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           401, 1u << 20, 1u << 20),
                    ==, CURD_E_BUDGET);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           400, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    /* Reservations are not resident bytes. */
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 0);
    curdi_resident_unreserve(device, 600);
    curdi_resident_unreserve(device, 400);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           1000, 1u << 20, 1u << 20),
                    ==, CURD_OK);
    curdi_resident_unreserve(device, 1000);
    resident_device_close(device);
}

/* A block acquired after a successful reserve always gets a live handle:
 * other allocations and frees between the reserve and the commit (the pool
 * call runs without the table lock) cannot take the reserved slot. */
static void test_commit_names_a_live_buffer_whatever_ran_meanwhile(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t ptr[2] = {0, 0};
    size_t class_bytes = 0;
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           100, 1u << 30, 1u << 30),
                    ==, CURD_OK);
    g_assert_cmpint(curdi_resident_reserve(device, "test",
                                           200, 1u << 30, 1u << 30),
                    ==, CURD_OK);
    for (size_t i = 0; i < 2; i++)
        g_assert_cmpint(curdi_pool_acquire(device->device_pool, 100 * (i + 1),
                                           &ptr[i], &class_bytes),
                        ==, CURD_OK);
    /* Enough traffic to grow the table past its first 64 slots and shrink
     * back. */
    uint64_t others[200];
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++)
        g_assert_cmpint(
            resident_alloc(device, 8, 1u << 30, 1u << 30, &others[i]), ==,
            CURD_OK);
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++)
        resident_free(device, others[i]);
    uint64_t ids[2];
    for (size_t i = 0; i < 2; i++) {
        ids[i] = curdi_resident_commit(device, 100 * (i + 1), ptr[i]);
        g_assert_cmpuint(ids[i], !=, 0);
    }
    curd_stat_family bytes, buffers;
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 300);
    g_assert_cmpuint(buffers.current, ==, 2);
    for (size_t i = 0; i < 2; i++) {
        uint64_t taken = 0;
        g_assert_cmpint(curdi_resident_take(device, "test", ids[i], &taken), ==,
                        CURD_OK);
        g_assert_cmpuint(taken, ==, ptr[i]);
        g_assert_cmpint(curdi_pool_release(device->device_pool, taken), ==,
                        CURD_OK);
    }
    resident_device_close(device);
}

static void test_statistics_follow_allocations_frees_and_reset(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t ids[10];
    curd_stat_family bytes, buffers;
    for (size_t i = 0; i < 10; i++)
        g_assert_cmpint(
            resident_alloc(device, 100 * (i + 1), 1u << 30, 1u << 30, &ids[i]),
            ==, CURD_OK);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 5500);
    g_assert_cmpuint(bytes.peak, ==, 5500);
    g_assert_cmpuint(bytes.allocated, ==, 5500);
    g_assert_cmpuint(bytes.freed, ==, 0);
    g_assert_cmpuint(buffers.current, ==, 10);
    for (size_t i = 0; i < 5; i++)
        resident_free(device, ids[i]);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 5500 - 1500);
    g_assert_cmpuint(bytes.peak, ==, 5500);
    g_assert_cmpuint(bytes.freed, ==, 1500);
    g_assert_cmpuint(buffers.current, ==, 5);
    g_assert_cmpuint(buffers.peak, ==, 10);
    g_assert_cmpuint(buffers.freed, ==, 5);
    curdi_resident_stats_reset(device);
    curdi_resident_stats(device, &bytes, &buffers);
    g_assert_cmpuint(bytes.current, ==, 4000);
    g_assert_cmpuint(bytes.peak, ==, 4000);
    g_assert_cmpuint(bytes.allocated, ==, 0);
    g_assert_cmpuint(bytes.freed, ==, 0);
    g_assert_cmpuint(buffers.peak, ==, 5);
    resident_device_close(device);
}

static void test_buffer_in_use_cannot_be_taken_until_its_use_ends(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t id = 0;
    uint64_t ptr = 0;
    curdi_resident_use use;
    g_assert_cmpint(resident_alloc(device, 64, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &use), ==,
                    CURD_OK);
    g_assert_cmpuint(use.id, ==, id);
    g_assert_cmpuint(use.byte_len, ==, 64);
    g_assert_false(use.async_pending);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "other threads"));
    g_assert_cmpuint(curdi_resident_bytes(device), ==, 64);
    curdi_resident_use_end(device, &use, 1);
    resident_free(device, id);
    resident_device_close(device);
}

static void test_async_marked_buffer_is_busy_until_its_uploads_complete(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t id = 0;
    uint64_t ptr = 0;
    curdi_resident_use use, again;
    g_assert_cmpint(resident_alloc(device, 64, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &use), ==,
                    CURD_OK);
    curdi_resident_async_begin(device, id);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "curd_device_sync_uploads"));
    /* Later uses see the pending upload, to order after it. */
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &id, 1, &again),
                    ==, CURD_OK);
    g_assert_true(again.async_pending);
    curdi_resident_use_end(device, &again, 1);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    curdi_resident_async_end(device, id);
    resident_free(device, id);
    resident_device_close(device);
}

static void test_use_begin_marks_all_items_or_none(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t ids[4];
    uint64_t batch[5];
    curdi_resident_use uses[5];
    uint64_t ptr;
    for (size_t i = 0; i < 4; i++)
        g_assert_cmpint(
            resident_alloc(device, 32, 1u << 20, 1u << 20, &ids[i]), ==,
            CURD_OK);
    resident_free(device, ids[3]);
    batch[0] = ids[0];
    batch[1] = ids[1];
    batch[2] = ids[0]; /* twice: marked twice */
    batch[3] = ids[2];
    batch[4] = ids[3]; /* stale */
    g_assert_cmpint(curdi_resident_use_begin(device, "batch", batch, 5, uses),
                    ==, CURD_E_STALE_HANDLE);
    g_assert_nonnull(strstr(curd_last_error(), "batch item 4"));
    /* None left marked: each can be taken. */
    for (size_t i = 0; i < 3; i++) {
        g_assert_cmpint(curdi_resident_take(device, "test",
                                            ids[i], &ptr), ==, CURD_OK);
        g_assert_cmpint(curdi_pool_release(device->device_pool, ptr), ==,
                        CURD_OK);
    }
    resident_device_close(device);
}

static void test_a_buffer_named_twice_needs_both_uses_ended(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t id = 0;
    uint64_t batch[2];
    uint64_t ptr;
    curdi_resident_use uses[2];
    g_assert_cmpint(resident_alloc(device, 32, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    batch[0] = batch[1] = id;
    g_assert_cmpint(curdi_resident_use_begin(device, "batch", batch, 2, uses),
                    ==, CURD_OK);
    curdi_resident_use_end(device, &uses[0], 1);
    g_assert_cmpint(curdi_resident_take(device, "test",
                                        id, &ptr), ==, CURD_E_BUSY);
    curdi_resident_use_end(device, &uses[1], 1);
    resident_free(device, id);
    resident_device_close(device);
}

static void test_taking_a_stale_handle_changes_nothing(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t id = 0, other = 0, ptr = 0;
    curd_stat_family before, after;
    g_assert_cmpint(resident_alloc(device, 32, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(resident_alloc(device, 48, 1u << 20, 1u << 20, &other), ==,
                    CURD_OK);
    resident_free(device, id);
    curdi_resident_stats(device, &before, NULL);
    g_assert_cmpint(curdi_resident_take(device, "test", id, &ptr), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curdi_resident_take(device, "test", 0, &ptr), ==,
                    CURD_E_STALE_HANDLE);
    curdi_resident_stats(device, &after, NULL);
    g_assert_cmpmem(&before, sizeof before, &after, sizeof after);
    g_assert_cmpuint(ptr, ==, 0);
    resident_device_close(device);
}

static void test_close_gives_every_live_buffer_back_to_the_pool(void)
{
    curd_device *device = resident_device_open(0);
    curd_pool_stats stats;
    uint64_t id;
    for (size_t i = 0; i < 50; i++)
        g_assert_cmpint(
            resident_alloc(device, 1000 + i, 1u << 30, 1u << 30, &id), ==,
            CURD_OK);
    curdi_pool_report_stats(device->device_pool, &stats);
    g_assert_cmpuint(stats.live_blocks.current, ==, 50);
    curdi_resident_close(device);
    curdi_pool_report_stats(device->device_pool, &stats);
    g_assert_cmpuint(stats.live_blocks.current, ==, 0);
    curdi_pool_lifecycle_destroy(device->device_pool);
    g_free(device);
}

/* ------------------------------------------------------------------------
 * Public entry points without a device
 * ---------------------------------------------------------------------- */

static void test_public_entries_refuse_a_null_device(void)
{
    curd_buffer buffer = {0};
    size_t size = 7;
    uint64_t value = 7;
    g_assert_cmpint(curd_buffer_alloc(NULL, 16, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(buffer.id, ==, 0);
    g_assert_cmpint(curd_buffer_free(NULL, buffer), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_buffer_size(NULL, buffer, &size), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(size, ==, 7);
    g_assert_cmpint(curd_buffer_device_ptr(NULL, buffer, &value), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_resident_bytes(NULL, &value), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(value, ==, 7);
    g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
}

static void test_size_and_pointer_lookups_resolve_only_live_handles(void)
{
    curd_device *device = resident_device_open(0);
    uint64_t id = 0;
    size_t size = 0;
    uint64_t ptr = 0;
    g_assert_cmpint(resident_alloc(device, 4321, 1u << 20, 1u << 20, &id), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, &size), ==,
                    CURD_OK);
    g_assert_cmpuint(size, ==, 4321);
    g_assert_cmpint(curd_buffer_device_ptr(device, (curd_buffer){id}, &ptr), ==,
                    CURD_OK);
    g_assert_cmpuint(ptr, !=, 0);
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_resident_bytes(device, &ptr), ==, CURD_OK);
    g_assert_cmpuint(ptr, ==, 4321);
    resident_free(device, id);
    size = 99;
    g_assert_cmpint(curd_buffer_size(device, (curd_buffer){id}, &size), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpuint(size, ==, 99);
    resident_device_close(device);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func(
        "/resident/module/"
        "budget-is-nine-tenths-of-total-capped-by-free-plus-resident",
        test_budget_is_nine_tenths_of_total_capped_by_free_plus_resident);
    g_test_add_func(
        "/resident/module/over-budget-names-the-numbers-and-changes-nothing",
        test_over_budget_names_the_numbers_and_changes_nothing);
    g_test_add_func(
        "/resident/module/a-size-that-overflows-the-budget-sum-is-refused",
        test_a_size_that_overflows_the_budget_sum_is_refused);
    g_test_add_func("/resident/module/"
                    "reservations-count-against-the-budget-until-released",
                    test_reservations_count_against_the_budget_until_released);
    g_test_add_func(
        "/resident/module/commit-names-a-live-buffer-whatever-ran-meanwhile",
        test_commit_names_a_live_buffer_whatever_ran_meanwhile);
    g_test_add_func(
        "/resident/module/statistics-follow-allocations-frees-and-reset",
        test_statistics_follow_allocations_frees_and_reset);
    g_test_add_func(
        "/resident/module/buffer-in-use-cannot-be-taken-until-its-use-ends",
        test_buffer_in_use_cannot_be_taken_until_its_use_ends);
    g_test_add_func(
        "/resident/module/"
        "async-marked-buffer-is-busy-until-its-uploads-complete",
        test_async_marked_buffer_is_busy_until_its_uploads_complete);
    g_test_add_func("/resident/module/use-begin-marks-all-items-or-none",
                    test_use_begin_marks_all_items_or_none);
    g_test_add_func(
        "/resident/module/a-buffer-named-twice-needs-both-uses-ended",
        test_a_buffer_named_twice_needs_both_uses_ended);
    g_test_add_func("/resident/module/taking-a-stale-handle-changes-nothing",
                    test_taking_a_stale_handle_changes_nothing);
    g_test_add_func(
        "/resident/module/close-gives-every-live-buffer-back-to-the-pool",
        test_close_gives_every_live_buffer_back_to_the_pool);
    g_test_add_func("/resident/api/public-entries-refuse-a-null-device",
                    test_public_entries_refuse_a_null_device);
    g_test_add_func("/resident/api/size-and-pointer-lookups-resolve-only-live-handles",
                    test_size_and_pointer_lookups_resolve_only_live_handles);
    return g_test_run();
}
