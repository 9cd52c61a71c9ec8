/* test-resident-gpu.c - resident buffers on a real device: allocation,
 * handles, budgets, in-flight protection, teardown.
 *
 * Every test opens device 0 or skips with the reason (no driver, no
 * device); make check-gpu counts a skip as a failure. The table logic
 * itself is covered on the CPU by test-resident.c. */
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "memory/resident.h"
#include "support/curd-test.h"
#include "transfer-test.h"

static curd_buffer alloc_ok(curd_device *device, size_t len)
{
    curd_buffer buffer = {0};
    g_assert_cmpint(curd_buffer_alloc(device, len, &buffer), ==, CURD_OK);
    g_assert_cmpuint(buffer.id, !=, 0);
    return buffer;
}

static void test_alloc_gives_a_buffer_of_the_size_asked_for(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    size_t sizes[] = {1, 255, 256, 4097, (1u << 20) + 3u, 16u << 20};
    curd_buffer buffers[G_N_ELEMENTS(sizes)];
    uint64_t pointers[G_N_ELEMENTS(sizes)];
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        size_t size = 0;
        buffers[i] = alloc_ok(device, sizes[i]);
        g_assert_cmpint(curd_buffer_size(device, buffers[i], &size), ==, CURD_OK);
        g_assert_cmpuint(size, ==, sizes[i]);
        g_assert_cmpint(curd_buffer_device_ptr(device, buffers[i], &pointers[i]),
                        ==, CURD_OK);
        g_assert_cmpuint(pointers[i], !=, 0);
        for (size_t j = 0; j < i; j++) {
            g_assert_cmpuint(buffers[i].id, !=, buffers[j].id);
            /* Distinct buffers do not share device memory. */
            g_assert_true(pointers[i] + sizes[i] <= pointers[j]
                          || pointers[j] + sizes[j] <= pointers[i]);
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
        g_assert_cmpint(curd_buffer_free(device, buffers[i]), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_bad_allocation_arguments_allocate_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = {12345};
    transfer_test_snapshot before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_alloc(device, 0, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(buffer.id, ==, 12345);
    g_assert_cmpint(curd_buffer_alloc(device, 16, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_buffer_alloc(NULL, 16, &buffer), ==,
                    CURD_E_INVALID_ARGUMENT);
    /* More than the device could ever hold. */
    g_assert_cmpint(curd_buffer_alloc(device, SIZE_MAX, &buffer), ==,
                    CURD_E_BUDGET);
    g_assert_cmpuint(buffer.id, ==, 12345);
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_freed_buffer_is_stale_in_every_call(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, 1000);
    unsigned char bytes[1000];
    size_t size = 77;
    uint64_t pointer = 77;
    curd_upload up = {buffer, 0, bytes, 10};
    curd_download down = {buffer, 0, 10, bytes, sizeof bytes};
    curd_test_fill_random(bytes, sizeof bytes);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    transfer_test_snapshot before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_STALE_HANDLE);
    g_assert_nonnull(strstr(curd_last_error(), "freed"));
    g_assert_cmpint(curd_buffer_size(device, buffer, &size), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_device_ptr(device, buffer, &pointer), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpuint(size, ==, 77);
    g_assert_cmpuint(pointer, ==, 77);
    g_assert_cmpint(curd_buffer_upload(device, buffer, bytes, 1000), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_upload_at(device, buffer, 0, bytes, 10), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_download(device, buffer, bytes, 1000), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_download_range(device, buffer, 0, 10, bytes,
                                               sizeof bytes),
                    ==, CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_upload_batch(device, &up, 1), ==, CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_download_batch(device, &down, 1), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_fill(device, buffer, 0, 10, 1), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_clear(device, buffer), ==, CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 0, bytes, 10), ==,
                    CURD_E_STALE_HANDLE);
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_handle_of_another_device_is_stale(void)
{
    curd_device *first = curd_test_gpu_open();
    if (first == NULL)
        return;
    curd_device *second = curd_test_gpu_open();
    if (second == NULL) {
        curd_device_close(first);
        return;
    }
    curd_buffer mine = alloc_ok(first, 4096);
    curd_buffer theirs = alloc_ok(second, 4096);
    unsigned char bytes[4096];
    size_t size = 0;
    curd_test_fill_random(bytes, sizeof bytes);
    g_assert_cmpint(curd_buffer_size(first, theirs, &size), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_nonnull(strstr(curd_last_error(), "another device"));
    g_assert_cmpint(curd_buffer_upload(first, theirs, bytes, sizeof bytes), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_free(first, theirs), ==, CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_free(second, mine), ==, CURD_E_STALE_HANDLE);
    /* Both still work on their own device. */
    g_assert_cmpint(curd_buffer_size(second, theirs, &size), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(first, mine), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(second, theirs), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(second), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(first), ==, CURD_OK);
}

static void test_forged_handles_are_stale(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer live = alloc_ok(device, 64);
    for (int round = 0; round < 2000; round++) {
        curd_buffer forged = {((uint64_t)g_test_rand_int() << 32)
                              | g_test_rand_int()};
        size_t size;
        if (round % 3 == 0)
            forged.id = live.id + (uint64_t)g_test_rand_int_range(1, 1000);
        if (forged.id == live.id)
            continue;
        g_assert_cmpint(curd_buffer_size(device, forged, &size), ==,
                        CURD_E_STALE_HANDLE);
    }
    g_assert_cmpint(curd_buffer_free(device, (curd_buffer){0}), ==,
                    CURD_E_STALE_HANDLE);
    g_assert_cmpint(curd_buffer_free(device, live), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_resident_bytes_and_statistics_follow_alloc_and_free(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffers[20];
    uint64_t total = 0;
    uint64_t resident = 1;
    curd_stats stats;
    g_assert_cmpint(curd_device_resident_bytes(device, &resident), ==, CURD_OK);
    g_assert_cmpuint(resident, ==, 0);
    for (size_t i = 0; i < 20; i++) {
        size_t len = (size_t)g_test_rand_int_range(1, 300000);
        buffers[i] = alloc_ok(device, len);
        total += len;
    }
    g_assert_cmpint(curd_device_resident_bytes(device, &resident), ==, CURD_OK);
    g_assert_cmpuint(resident, ==, total);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.resident_bytes.current, ==, total);
    g_assert_cmpuint(stats.resident_bytes.allocated, ==, total);
    g_assert_cmpuint(stats.resident_buffers.current, ==, 20);
    /* Buffers come from the device pool. */
    g_assert_cmpuint(stats.device_pool.live_bytes.current, >=, total);
    for (size_t i = 0; i < 20; i++)
        g_assert_cmpint(curd_buffer_free(device, buffers[i]), ==, CURD_OK);
    stats = curd_test_device_stats(device);
    g_assert_cmpuint(stats.resident_bytes.current, ==, 0);
    g_assert_cmpuint(stats.resident_bytes.peak, ==, total);
    g_assert_cmpuint(stats.resident_bytes.freed, ==, total);
    g_assert_cmpuint(stats.resident_buffers.current, ==, 0);
    g_assert_cmpuint(stats.resident_buffers.freed, ==, 20);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_resident_limit_refuses_past_it_and_allocates_nothing(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.resident_limit_bytes = 1u << 20;
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    curd_buffer a = alloc_ok(device, 768u << 10);
    curd_buffer b = {0};
    transfer_test_snapshot before = transfer_test_take(device);
    g_assert_cmpint(curd_buffer_alloc(device, (256u << 10) + 1u, &b), ==,
                    CURD_E_BUDGET);
    g_assert_cmpuint(b.id, ==, 0);
    const char *message = curd_last_error();
    g_assert_nonnull(strstr(message, "262145 bytes"));
    g_assert_nonnull(strstr(message, "budget of 1048576 bytes"));
    g_assert_nonnull(strstr(message, "Fix: "));
    assert_snapshot_equal(transfer_test_take(device), before);
    /* Exactly up to the limit works; freeing makes space again. */
    b = alloc_ok(device, 256u << 10);
    g_assert_cmpint(curd_buffer_free(device, a), ==, CURD_OK);
    a = alloc_ok(device, 768u << 10);
    g_assert_cmpint(curd_buffer_free(device, a), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, b), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_default_budget_refuses_more_than_nine_tenths_of_memory(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = {0};
    curd_device_props props = curd_test_device_info(device);
    transfer_test_snapshot before = transfer_test_take(device);
    uint64_t over = props.total_memory_bytes / 10u * 9u + (64u << 20);
    g_assert_cmpint(curd_buffer_alloc(device, (size_t)over, &buffer), ==,
                    CURD_E_BUDGET);
    g_assert_cmpuint(buffer.id, ==, 0);
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_free_during_pending_async_upload_is_busy_until_sync(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const size_t len = 8u << 20;
    curd_buffer buffer = alloc_ok(device, len);
    unsigned char *src = g_malloc(len);
    unsigned char *back = g_malloc(len);
    bool registered;
    curd_test_fill_random(src, len);
    registered = curd_host_register(device, src, len) == CURD_OK;
    g_assert_cmpint(curd_buffer_upload_async(device, buffer, 0, src, len), ==,
                    CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "curd_device_sync_uploads"));
    if (registered)
        g_assert_cmpint(curd_host_unregister(device, src), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_device_sync_uploads(device), ==, CURD_OK);
    curd_test_poison(back, len);
    g_assert_cmpint(curd_buffer_download(device, buffer, back, len), ==, CURD_OK);
    assert_same_bytes(back, src, len);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    if (registered)
        g_assert_cmpint(curd_host_unregister(device, src), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(src);
    g_free(back);
}

static void test_free_during_a_transfer_in_flight_is_busy(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer = alloc_ok(device, 4096);
    curdi_resident_use use;
    /* What a transfer on another thread holds while its DMAs run. */
    g_assert_cmpint(curdi_resident_use_begin(device, "test", &buffer.id, 1,
                                             &use),
                    ==, CURD_OK);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_E_BUSY);
    g_assert_nonnull(strstr(curd_last_error(), "other threads"));
    curdi_resident_use_end(device, &use, 1);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_many_buffers_allocated_and_freed_in_random_order(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { COUNT = 2000 };
    curd_buffer *buffers = g_new0(curd_buffer, COUNT);
    size_t *sizes = g_new0(size_t, COUNT);
    for (size_t round = 0; round < 3 * COUNT; round++) {
        size_t i = (size_t)g_test_rand_int_range(0, COUNT);
        if (buffers[i].id == 0) {
            sizes[i] = (size_t)g_test_rand_int_range(1, 70000);
            buffers[i] = alloc_ok(device, sizes[i]);
        } else {
            size_t size = 0;
            g_assert_cmpint(curd_buffer_size(device, buffers[i], &size), ==,
                            CURD_OK);
            g_assert_cmpuint(size, ==, sizes[i]);
            g_assert_cmpint(curd_buffer_free(device, buffers[i]), ==, CURD_OK);
            g_assert_cmpint(curd_buffer_size(device, buffers[i], &size), ==,
                            CURD_E_STALE_HANDLE);
            buffers[i].id = 0;
        }
    }
    /* Close frees whatever is left. */
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(buffers);
    g_free(sizes);
}

static void test_close_returns_the_memory_of_live_buffers(void)
{
    curd_device *observer = curd_test_gpu_open();
    if (observer == NULL)
        return;
    curd_device_props before, after;
    memset(&before, 0, sizeof before);
    before.struct_size = sizeof before;
    after = before;
    g_assert_cmpint(curd_device_info(observer, &before), ==, CURD_OK);
    curd_device *device = curd_test_gpu_open();
    g_assert_nonnull(device);
    for (int i = 0; i < 8; i++)
        (void)alloc_ok(device, 8u << 20);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_assert_cmpint(curd_device_info(observer, &after), ==, CURD_OK);
    /* 64 MiB were held; other users of the GPU may move the number a
     * little, never by that much. */
    g_assert_cmpuint(after.free_memory_bytes + (16u << 20), >=,
                     before.free_memory_bytes);
    g_assert_cmpint(curd_device_close(observer), ==, CURD_OK);
}

static const transfer_test_case cases[] = {
    {"alloc-gives-a-buffer-of-the-size-asked-for",
     test_alloc_gives_a_buffer_of_the_size_asked_for},
    {"bad-allocation-arguments-allocate-nothing",
     test_bad_allocation_arguments_allocate_nothing},
    {"freed-buffer-is-stale-in-every-call",
     test_freed_buffer_is_stale_in_every_call},
    {"handle-of-another-device-is-stale",
     test_handle_of_another_device_is_stale},
    {"forged-handles-are-stale",
     test_forged_handles_are_stale},
    {"resident-bytes-and-statistics-follow-alloc-and-free",
     test_resident_bytes_and_statistics_follow_alloc_and_free},
    {"resident-limit-refuses-past-it-and-allocates-nothing",
     test_resident_limit_refuses_past_it_and_allocates_nothing},
    {"default-budget-refuses-more-than-nine-tenths-of-memory",
     test_default_budget_refuses_more_than_nine_tenths_of_memory},
    {"free-during-pending-async-upload-is-busy-until-sync",
     test_free_during_pending_async_upload_is_busy_until_sync},
    {"free-during-a-transfer-in-flight-is-busy",
     test_free_during_a_transfer_in_flight_is_busy},
    {"many-buffers-allocated-and-freed-in-random-order",
     test_many_buffers_allocated_and_freed_in_random_order},
    {"close-returns-the-memory-of-live-buffers",
     test_close_returns_the_memory_of_live_buffers},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "resident", cases,
                              G_N_ELEMENTS(cases));
}
