/* test-device.c - devices: arguments, options, open and close, info, the
 * stream pool, the open-device list, fork, teardown, the self-test, and
 * fault sweeps that fail every driver call of an operation in turn.
 *
 * The tests that need a device open device 0 through curd_test_gpu_open()
 * and skip without one. The same tests also run against the stand-in
 * libcuda (tests/fake/fake-cuda.c) in its stand-in twin test-device-fake
 * (CURD_TEST_ON_FAKE, tests/README.md); there no skip is allowed,
 * and the fake's own count of live objects must be zero after each test.
 *
 * Leaks are counted at the driver boundary, the same way on a GPU and on
 * the fake: a test wraps the entry-point table with counters of every
 * successful create/destroy pair (primary-context retain/release,
 * push/pop, streams, events, device and host memory, registrations,
 * modules), and every pair must balance when the test ends. */
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


#include "base/checked.h"
#include "core/core.h"
#include "curd.h"
#include "driver/driver.h"
#include "support/curd-test.h"

static gboolean ends_with_fix(const char *sentence)
{
    const char *fix = strstr(sentence, "Fix: ");
    return fix != NULL && g_str_has_suffix(sentence, ".");
}

/* ------------------------------------------------------------------------
 * Balance counters at the driver boundary
 * ---------------------------------------------------------------------- */
enum {
    BALANCE_CONTEXTS,
    BALANCE_PUSHED,
    BALANCE_STREAMS,
    BALANCE_EVENTS,
    BALANCE_DEVICE_MEMORY,
    BALANCE_HOST_MEMORY,
    BALANCE_REGISTERED,
    BALANCE_MODULES,
    BALANCE_COUNT
};

static const char *const balance_names[BALANCE_COUNT] = {
    "primary-context retains", "pushed contexts", "streams",
    "events",                  "device allocations", "host allocations",
    "host registrations",      "modules",
};

static const struct {
    const char *entry;
    int counter;
    int delta;
} balance_entries[] = {
    {"cuDevicePrimaryCtxRetain", BALANCE_CONTEXTS, +1},
    {"cuDevicePrimaryCtxRelease", BALANCE_CONTEXTS, -1},
    {"cuCtxPushCurrent", BALANCE_PUSHED, +1},
    {"cuCtxPopCurrent", BALANCE_PUSHED, -1},
    {"cuStreamCreate", BALANCE_STREAMS, +1},
    {"cuStreamDestroy", BALANCE_STREAMS, -1},
    {"cuEventCreate", BALANCE_EVENTS, +1},
    {"cuEventDestroy", BALANCE_EVENTS, -1},
    {"cuMemAlloc", BALANCE_DEVICE_MEMORY, +1},
    {"cuMemAllocAsync", BALANCE_DEVICE_MEMORY, +1},
    {"cuMemFree", BALANCE_DEVICE_MEMORY, -1},
    {"cuMemFreeAsync", BALANCE_DEVICE_MEMORY, -1},
    {"cuMemHostAlloc", BALANCE_HOST_MEMORY, +1},
    {"cuMemFreeHost", BALANCE_HOST_MEMORY, -1},
    {"cuMemHostRegister", BALANCE_REGISTERED, +1},
    {"cuMemHostUnregister", BALANCE_REGISTERED, -1},
    {"cuModuleLoadDataEx", BALANCE_MODULES, +1},
    {"cuModuleUnload", BALANCE_MODULES, -1},
};

static atomic_long balance[BALANCE_COUNT];
static curdi_driver balance_saved;
static curdi_driver *balance_table;

static void balance_note(const char *entry)
{
    for (size_t i = 0; i < G_N_ELEMENTS(balance_entries); i++)
        if (strcmp(balance_entries[i].entry, entry) == 0)
            atomic_fetch_add(&balance[balance_entries[i].counter],
                             balance_entries[i].delta);
}

#define BALANCE_WRAP_(name, symbol, tier, params, args)                       \
    static curdi_cu_result balance_##name params                              \
    {                                                                         \
        curdi_cu_result rc = balance_saved.name args;                         \
        if (rc == CURDI_CUDA_SUCCESS)                                         \
            balance_note(#name);                                              \
        return rc;                                                            \
    }
CURDI_CUDA_ENTRY_LIST(BALANCE_WRAP_)
#undef BALANCE_WRAP_

/* Installs the counters when a driver can be loaded; a no-op without one
 * (the test then skips). */
static void balance_begin(void)
{
    for (int i = 0; i < BALANCE_COUNT; i++)
        atomic_store(&balance[i], 0);
    (void)curdi_driver_load();
    balance_table = curdi_driver_table_for_test();
    if (balance_table == NULL)
        return;
    balance_saved = *balance_table;
#define BALANCE_INSTALL_(name, symbol, tier, params, args)                    \
    if (balance_table->name != NULL)                                          \
        balance_table->name = balance_##name;
    CURDI_CUDA_ENTRY_LIST(BALANCE_INSTALL_)
#undef BALANCE_INSTALL_
}

static void balance_assert_zero(const char *when)
{
    for (int i = 0; i < BALANCE_COUNT; i++) {
        long value = atomic_load(&balance[i]);
        if (value != 0)
            g_error("%s: %ld %s left over (created minus destroyed at the "
                    "driver boundary)",
                    when, value, balance_names[i]);
    }
}

static void balance_end(gboolean check)
{
    if (balance_table == NULL)
        return;
    *balance_table = balance_saved;
    balance_table = NULL;
    if (check)
        balance_assert_zero("at the end of the test");
}

/* The stand-in driver's own count of live objects (test-device-fake): a
 * snapshot when a test begins, compared when it ends. */
static const char *const fake_kinds[] = {
    "device_memory", "host_memory", "registered",      "stream",
    "event",         "module",      "context_retains", "context_stack",
};
#define FAKE_KIND_COUNT G_N_ELEMENTS(fake_kinds)

static gboolean fake_snapshot(long *out)
{
    /* FALSE where not loaded: the test made no driver call. */
    return CURD_TEST_ON_FAKE
           && curd_test_fake_live(fake_kinds, FAKE_KIND_COUNT, out);
}

static long fake_at_begin[FAKE_KIND_COUNT];
static gboolean fake_at_begin_valid;

static void fake_begin(void)
{
    fake_at_begin_valid = fake_snapshot(fake_at_begin);
}

static void fake_assert_nothing_new(void)
{
    long now[FAKE_KIND_COUNT];
    if (!fake_at_begin_valid || !fake_snapshot(now))
        return;
    for (size_t i = 0; i < FAKE_KIND_COUNT; i++)
        if (now[i] != fake_at_begin[i])
            g_error("the fake driver holds %ld %s, %ld when the test began",
                    now[i], fake_kinds[i], fake_at_begin[i]);
}

/* ------------------------------------------------------------------------
 * Test cases: each body runs between balance_begin and balance_end.
 * ---------------------------------------------------------------------- */
typedef struct device_case {
    const char *path;
    void (*body)(void);
    /* The body leaves driver objects behind on purpose (an injected
     * failure of a destroy call cannot be undone). */
    gboolean may_leak;
} device_case;

static void run_case(gconstpointer data)
{
    const device_case *c = data;
    balance_begin();
    fake_begin();
    c->body();
    gboolean check = !c->may_leak && !g_test_failed();
    balance_end(check);
    if (check)
        fake_assert_nothing_new();
}

/* ------------------------------------------------------------------------
 * Arguments and options (no driver needed)
 * ---------------------------------------------------------------------- */
static curd_device *const untouched_device = (curd_device *)(uintptr_t)0x77;

static void body_null_arguments_are_invalid(void)
{
    g_assert_cmpint(curd_device_open(0, NULL, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_assert_cmpint(curd_device_count(NULL), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_assert_cmpint(curd_driver_version(NULL), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));
    curd_device_props props;
    props.struct_size = sizeof props;
    g_assert_cmpint(curd_device_info(NULL, &props), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_assert_cmpint(curd_device_self_test(NULL, NULL, 0), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));
    /* Closing nothing is fine. */
    g_assert_cmpint(curd_device_close(NULL), ==, CURD_OK);
    /* Options init tolerates NULL. */
    curd_device_options_init(NULL);
}

static void body_negative_ordinal_is_no_device(void)
{
    curd_device *device = untouched_device;
    int ordinal = -g_test_rand_int_range(1, G_MAXINT32);
    g_assert_cmpint(curd_device_open(ordinal, NULL, &device), ==,
                    CURD_E_NO_DEVICE);
    g_assert_true(device == untouched_device);
    char *number = g_strdup_printf("%d", ordinal);
    g_assert_nonnull(strstr(curd_last_error(), number));
    g_free(number);
    g_assert_true(ends_with_fix(curd_last_error()));
}

static void body_options_init_sets_size_and_zeroes(void)
{
    curd_device_options options;
    curd_test_poison(&options, sizeof options);
    curd_device_options_init(&options);
    g_assert_cmpuint(options.struct_size, ==, sizeof options);
    g_assert_cmpuint(options.device_cache_bytes, ==, 0);
    g_assert_cmpuint(options.pinned_cache_bytes, ==, 0);
    g_assert_cmpuint(options.device_live_limit_bytes, ==, 0);
    g_assert_cmpuint(options.pinned_live_limit_bytes, ==, 0);
    g_assert_cmpuint(options.resident_limit_bytes, ==, 0);
    g_assert_cmpuint(options.flags, ==, 0);
}

/* An options struct from a "newer caller": sizeof + extra bytes. */
static curd_device_options *newer_options(size_t extra)
{
    curd_device_options *options = g_malloc0(sizeof *options + extra);
    curd_device_options_init(options);
    options->struct_size = sizeof *options + extra;
    return options;
}

static void body_options_with_unknown_tail_bytes_are_invalid(void)
{
    size_t extra = (size_t)g_test_rand_int_range(1, 64);
    curd_device_options *options = newer_options(extra);
    size_t at = sizeof *options + (size_t)g_test_rand_int_range(0, (int)extra);
    ((unsigned char *)options)[at] = (unsigned char)g_test_rand_int_range(1, 256);
    curd_device *device = untouched_device;
    g_assert_cmpint(curd_device_open(0, options, &device), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(device == untouched_device);
    char *byte = g_strdup_printf("byte %zu", at);
    g_assert_nonnull(strstr(curd_last_error(), byte));
    g_free(byte);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_free(options);
}

static void body_options_with_unknown_flags_are_invalid(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.flags = 1u << g_test_rand_int_range(0, 32);
    curd_device *device = untouched_device;
    g_assert_cmpint(curd_device_open(0, &options, &device), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(device == untouched_device);
    g_assert_nonnull(strstr(curd_last_error(), "flags"));
    g_assert_true(ends_with_fix(curd_last_error()));
}

static void body_options_smaller_than_known_are_invalid(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.struct_size = (size_t)g_test_rand_int_range(0, sizeof options);
    curd_device *device = untouched_device;
    g_assert_cmpint(curd_device_open(0, &options, &device), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(device == untouched_device);
    g_assert_nonnull(strstr(curd_last_error(), "struct_size"));
    /* Absurdly large: refused without reading that far. */
    options.struct_size = SIZE_MAX;
    g_assert_cmpint(curd_device_open(0, &options, &device), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(device == untouched_device);
}

/* ------------------------------------------------------------------------
 * Open, close, info
 * ---------------------------------------------------------------------- */
static void body_open_and_close_leave_nothing_behind(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    g_assert_cmpint(atomic_load(&balance[BALANCE_CONTEXTS]), ==, 1);
    g_assert_cmpint(atomic_load(&balance[BALANCE_PUSHED]), ==, 0);
    g_assert_cmpint(atomic_load(&balance[BALANCE_STREAMS]), >=, 1);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_count_agrees_with_an_open_device(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    g_assert_cmpint(count, >=, 1);
    int version = 0;
    g_assert_cmpint(curd_driver_version(&version), ==, CURD_OK);
    g_assert_cmpint(version, >=, 12000);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static gboolean is_pci_bus_id(const char *id)
{
    return g_regex_match_simple(
        "^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]$", id, 0,
        0);
}

static void body_info_fields_are_sane(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_device_props p = curd_test_device_info(device);
    g_test_message("device 0: %s, %s, cc %d.%d, %" G_GUINT64_FORMAT
                   " bytes total, %" G_GUINT64_FORMAT " free, budget %"
                   G_GUINT64_FORMAT ", caps 0x%x",
                   p.name, p.pci_bus_id, p.compute_capability_major,
                   p.compute_capability_minor, p.total_memory_bytes,
                   p.free_memory_bytes, p.resident_budget_bytes,
                   p.capabilities);
    g_assert_cmpuint(p.struct_size, ==, sizeof p);
    g_assert_cmpint(p.ordinal, ==, 0);
    g_assert_cmpuint(strlen(p.name), >, 0);
    g_assert_cmpuint(strlen(p.name), <, sizeof p.name);
    g_assert_true(is_pci_bus_id(p.pci_bus_id));
    g_assert_cmpint(p.compute_capability_major, >=, 5);
    g_assert_cmpint(p.compute_capability_minor, >=, 0);
    g_assert_cmpint(p.compute_capability_minor, <=, 9);
    g_assert_cmpuint(p.total_memory_bytes, >, 0);
    g_assert_cmpuint(p.free_memory_bytes, <=, p.total_memory_bytes);
    g_assert_cmpint(p.multiprocessor_count, >, 0);
    g_assert_cmpint(p.max_threads_per_block, >=, 64);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpint(p.max_block_dim[i], >=, 1);
        g_assert_cmpint(p.max_grid_dim[i], >=, 1);
    }
    g_assert_cmpint(p.max_block_dim[0], <=, p.max_threads_per_block);
    g_assert_cmpint(p.max_grid_dim[0], >=, 65535);
    g_assert_cmpint(p.shared_memory_per_block_bytes, >=, 16 * 1024);
    g_assert_cmpint(p.async_engine_count, >=, 0);
    int version = 0;
    g_assert_cmpint(curd_driver_version(&version), ==, CURD_OK);
    g_assert_cmpint(p.driver_version, ==, version);
    g_assert_cmpuint(p.capabilities & ~(uint32_t)0x1F, ==, 0);
    /* Every device a CUDA 12 driver runs has unified addressing on 64-bit
     * Linux. */
    g_assert_cmpuint(p.capabilities & CURD_CAP_UNIFIED_ADDRESSING, !=, 0);
    /* The budget, from the same call's numbers (nothing is resident):
     * min(9/10 total, 9/10 free), in 128-bit arithmetic. */
    unsigned __int128 nine_total = (unsigned __int128)p.total_memory_bytes * 9 / 10;
    unsigned __int128 nine_free = (unsigned __int128)p.free_memory_bytes * 9 / 10;
    unsigned __int128 expected = nine_total < nine_free ? nine_total : nine_free;
    g_assert_cmpuint(p.resident_budget_bytes, ==, (uint64_t)expected);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_info_rejects_bad_props_and_spares_newer_fields(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    g_assert_cmpint(curd_device_info(device, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_true(ends_with_fix(curd_last_error()));

    curd_device_props small;
    curd_test_poison(&small, sizeof small);
    small.struct_size = sizeof small - 1;
    curd_device_props before = small;
    g_assert_cmpint(curd_device_info(device, &small), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(memcmp(&small, &before, sizeof small), ==, 0);

    /* A newer caller's struct: the tail the library does not know stays
     * as it was. */
    size_t extra = (size_t)g_test_rand_int_range(1, 128);
    unsigned char *bigger = g_malloc(sizeof(curd_device_props) + extra);
    curd_test_poison(bigger, sizeof(curd_device_props) + extra);
    unsigned char *tail = g_memdup2(bigger + sizeof(curd_device_props), extra);
    size_t struct_size = sizeof(curd_device_props) + extra;
    memcpy(bigger, &struct_size, sizeof struct_size);
    g_assert_cmpint(curd_device_info(device, (curd_device_props *)bigger), ==,
                    CURD_OK);
    curd_device_props known;
    memcpy(&known, bigger, sizeof known);
    g_assert_cmpuint(known.struct_size, ==, struct_size);
    g_assert_cmpuint(strlen(known.name), >, 0);
    g_assert_cmpint(memcmp(bigger + sizeof(curd_device_props), tail, extra), ==, 0);
    g_free(tail);
    g_free(bigger);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_ordinal_past_the_count_is_no_device(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    curd_device *other = untouched_device;
    int ordinal = count + g_test_rand_int_range(0, 1000);
    g_assert_cmpint(curd_device_open(ordinal, NULL, &other), ==,
                    CURD_E_NO_DEVICE);
    g_assert_true(other == untouched_device);
    char *has = g_strdup_printf("has %d CUDA device", count);
    g_assert_nonnull(strstr(curd_last_error(), has));
    g_free(has);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_two_opens_of_one_ordinal_are_independent(void)
{
    curd_device *first = curd_test_gpu_open();
    if (first == NULL)
        return;
    curd_device *second = curd_test_gpu_open();
    g_assert_nonnull(second);
    g_assert_true(first != second);
    g_assert_true(first->context == second->context); /* the primary one */
    g_assert_cmpint(atomic_load(&balance[BALANCE_CONTEXTS]), ==, 2);
    g_assert_cmpint(curd_device_close(first), ==, CURD_OK);
    /* The second still works after the first is gone. */
    curd_device_props p = curd_test_device_info(second);
    g_assert_cmpuint(p.total_memory_bytes, >, 0);
    g_assert_cmpint(curd_device_close(second), ==, CURD_OK);
}

static void body_newer_options_with_zero_tail_are_accepted(void)
{
    curd_device_options *options =
        newer_options((size_t)g_test_rand_int_range(1, 256));
    curd_device *device = curd_test_gpu_open_with(options);
    g_free(options);
    if (device == NULL)
        return;
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_resident_limit_lowers_the_budget(void)
{
    curd_device_options options;
    curd_device_options_init(&options);
    options.resident_limit_bytes =
        (uint64_t)g_test_rand_int_range(1, 1 << 20);
    curd_device *device = curd_test_gpu_open_with(&options);
    if (device == NULL)
        return;
    curd_device_props p = curd_test_device_info(device);
    g_assert_cmpuint(p.resident_budget_bytes, ==, options.resident_limit_bytes);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

typedef struct open_close_worker {
    int rounds;
    int failures;
    char error[512];
} open_close_worker;

static gpointer open_close_loop(gpointer data)
{
    open_close_worker *worker = data;
    for (int i = 0; i < worker->rounds; i++) {
        curd_device *device = NULL;
        curd_status status = curd_device_open(0, NULL, &device);
        if (status == CURD_OK)
            status = curd_device_close(device);
        if (status != CURD_OK) {
            worker->failures++;
            snprintf(worker->error, sizeof worker->error, "%s: %s",
                     curd_status_name(status), curd_last_error());
        }
    }
    return NULL;
}

static void body_concurrent_opens_and_closes_leave_nothing_behind(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    open_close_worker workers[4];
    GThread *threads[4];
    for (int i = 0; i < 4; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].rounds = 5;
        threads[i] = g_thread_new("open-close", open_close_loop, &workers[i]);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(threads[i]);
        if (workers[i].failures != 0)
            g_error("worker %d: %d failures, last %s", i, workers[i].failures,
                    workers[i].error);
    }
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Internals: enter/leave, streams, the open list
 * ---------------------------------------------------------------------- */
static void body_enter_makes_the_context_current(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_context current = NULL;
    g_assert_cmpint(curdi_core_device_enter(device), ==, CURD_OK);
    g_assert_cmpuint(driver->cuCtxGetCurrent(&current), ==, CURDI_CUDA_SUCCESS);
    g_assert_true(current == device->context);
    curdi_core_device_leave(device);
    g_assert_cmpint(atomic_load(&balance[BALANCE_PUSHED]), ==, 0);
    g_assert_cmpint(curdi_core_device_enter(NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void body_stream_pool_reuses_streams(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    long streams_at_open = atomic_load(&balance[BALANCE_STREAMS]);
    g_assert_cmpint(curdi_core_device_enter(device), ==, CURD_OK);
    curdi_cu_stream a = NULL, b = NULL, c = NULL, d = NULL;
    g_assert_cmpint(curdi_streams_acquire(device, &a), ==, CURD_OK);
    g_assert_cmpint(curdi_streams_acquire(device, &b), ==, CURD_OK);
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    g_assert_true(a != b);
    g_assert_true(a != device->upload_stream && b != device->upload_stream);
    /* Usable: a query on an idle stream succeeds. */
    g_assert_cmpuint(curdi_driver_get()->cuStreamQuery(a), ==,
                     CURDI_CUDA_SUCCESS);
    curdi_streams_release(device, a);
    curdi_streams_release(device, b);
    long streams_made = atomic_load(&balance[BALANCE_STREAMS]);
    g_assert_cmpint(curdi_streams_acquire(device, &c), ==, CURD_OK);
    g_assert_cmpint(curdi_streams_acquire(device, &d), ==, CURD_OK);
    /* Both came from the pool: no new stream was created. */
    g_assert_cmpint(atomic_load(&balance[BALANCE_STREAMS]), ==, streams_made);
    g_assert_true((c == a && d == b) || (c == b && d == a));
    curdi_streams_release(device, c);
    curdi_streams_release(device, d);
    curdi_core_device_leave(device);
    g_assert_cmpint(streams_made - streams_at_open, ==, 2);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void count_visit(curd_device *device, void *context)
{
    (void)device;
    (*(int *)context)++;
}

static void body_devices_for_ordinal_visits_each_open_device(void)
{
    curd_device *first = curd_test_gpu_open();
    if (first == NULL)
        return;
    curd_device *second = curd_test_gpu_open();
    g_assert_nonnull(second);
    int visits = 0;
    curdi_core_devices_for_ordinal(0, count_visit, &visits);
    g_assert_cmpint(visits, ==, 2);
    visits = 0;
    curdi_core_devices_for_ordinal(-1, count_visit, &visits);
    g_assert_cmpint(visits, ==, 0);
    g_assert_cmpint(curd_device_close(first), ==, CURD_OK);
    visits = 0;
    curdi_core_devices_for_ordinal(0, count_visit, &visits);
    g_assert_cmpint(visits, ==, 1);
    g_assert_cmpint(curd_device_close(second), ==, CURD_OK);
    visits = 0;
    curdi_core_devices_for_ordinal(0, count_visit, &visits);
    g_assert_cmpint(visits, ==, 0);
}

/* ------------------------------------------------------------------------
 * Fault sweeps
 * ---------------------------------------------------------------------- */
static void sweep_open(int cu_result, curd_status expected)
{
    unsigned failed_runs = 0, tolerated_runs = 0, at;
    for (at = 1;; at++) {
        curd_device *device = untouched_device;
        curd_test_faults_begin(at, cu_result, NULL);
        curd_status status = curd_device_open(0, NULL, &device);
        gboolean fired = curd_test_faults_fired();
        unsigned calls = curd_test_faults_end();
        if (!fired) {
            /* Past the last call: the sweep is complete. */
            g_assert_cmpint(status, ==, CURD_OK);
            g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
            g_assert_cmpuint(calls, ==, at - 1);
            break;
        }
        if (status == CURD_OK) {
            /* The failed call was one whose failure open may ignore (the
             * final pop): the device works and closes cleanly. */
            tolerated_runs++;
            (void)curd_test_device_info(device);
            g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
            curd_test_pop_leftover_contexts();
        } else {
            failed_runs++;
            if (status != expected)
                g_error("failing driver call %u of open with %d gave %s, "
                        "expected %s: %s",
                        at, cu_result, curd_status_name(status),
                        curd_status_name(expected), curd_last_error());
            g_assert_true(device == untouched_device);
            g_assert_cmpint(curd_last_driver_code(), ==, cu_result);
            g_assert_true(ends_with_fix(curd_last_error()));
        }
        char *when = g_strdup_printf("after failing call %u of open with %d",
                                     at, cu_result);
        balance_assert_zero(when);
        g_free(when);
    }
    g_test_message("open made %u driver calls: %u failures reported, %u "
                   "tolerated",
                   at - 1, failed_runs, tolerated_runs);
    /* count, get, retain, push, name, bus id, memory, 16 attributes,
     * stream, pop: at least 25. */
    g_assert_cmpuint(at - 1, >=, 25);
    g_assert_cmpuint(failed_runs, >=, at - 1 - 2);
}

static void body_fault_sweep_over_open_leaks_nothing(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    sweep_open(999 /* CUDA_ERROR_UNKNOWN */, CURD_E_DRIVER);
    sweep_open(2 /* CUDA_ERROR_OUT_OF_MEMORY */, CURD_E_OUT_OF_MEMORY);
    sweep_open(700 /* CUDA_ERROR_ILLEGAL_ADDRESS */, CURD_E_DEVICE_LOST);
}

static void body_fault_sweep_over_self_test_keeps_the_device_usable(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    char report[512];
    g_assert_cmpint(curd_device_self_test(device, report, sizeof report), ==,
                    CURD_OK);
    /* What the first run leaves: its module cached, its blocks in the
     * pools. A failure must leave no more than that. */
    long baseline[BALANCE_COUNT];
    for (int i = 0; i < BALANCE_COUNT; i++)
        baseline[i] = atomic_load(&balance[i]);
    unsigned at, failed_runs = 0;
    for (at = 1;; at++) {
        curd_test_faults_begin(at, 999, NULL);
        curd_test_poison(report, sizeof report);
        curd_status status =
            curd_device_self_test(device, report, sizeof report);
        gboolean fired = curd_test_faults_fired();
        unsigned calls = curd_test_faults_end();
        if (!fired) {
            g_assert_cmpint(status, ==, CURD_OK);
            g_assert_cmpuint(calls, ==, at - 1);
            break;
        }
        if (status != CURD_OK) {
            failed_runs++;
            g_assert_cmpint(status, ==, CURD_E_DRIVER);
            g_assert_cmpint(curd_last_driver_code(), ==, 999);
            /* The report carries the sentence. */
            g_assert_cmpstr(report, ==, curd_last_error());
            g_assert_true(ends_with_fix(report));
            /* A failure in the main path cleans up fully. */
            long device_memory = atomic_load(&balance[BALANCE_DEVICE_MEMORY]);
            long modules = atomic_load(&balance[BALANCE_MODULES]);
            long pushed = atomic_load(&balance[BALANCE_PUSHED]);
            g_assert_cmpint(device_memory, ==,
                            baseline[BALANCE_DEVICE_MEMORY]);
            g_assert_cmpint(modules, ==, baseline[BALANCE_MODULES]);
            g_assert_cmpint(pushed, ==, baseline[BALANCE_PUSHED]);
        } else {
            /* The failed call was a cleanup call (free, unload, pop): the
             * driver object it would have destroyed stays; counted as a
             * leak of the injection, not of curd. */
            curd_test_pop_leftover_contexts();
            for (int i = 0; i < BALANCE_COUNT; i++)
                if (i != BALANCE_CONTEXTS && i != BALANCE_STREAMS)
                    atomic_store(&balance[i], baseline[i]);
        }
    }
    g_test_message("the self-test made %u driver calls, %u failures reported",
                   at - 1, failed_runs);
    /* Its dispatch is synchronous and untimed: no events, one stream
     * synchronisation (lib/core/pending.h). */
    g_assert_cmpuint(at - 1, >=, 8);
    g_assert_cmpuint(failed_runs, >=, 7);
    /* Still usable. */
    g_assert_cmpint(curd_device_self_test(device, report, sizeof report), ==,
                    CURD_OK);
    (void)curd_test_device_info(device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Self-test
 * ---------------------------------------------------------------------- */
static void body_self_test_verifies_every_byte(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    char report[512];
    curd_test_poison(report, sizeof report);
    curd_status status = curd_device_self_test(device, report, sizeof report);
    if (status != CURD_OK)
        g_error("self-test: %s: %s", curd_status_name(status),
                curd_last_error());
    g_test_message("%s", report);
    g_assert_true(g_str_has_prefix(report, "self-test passed on device 0"));
    /* A tiny report buffer is truncated, still terminated. */
    char tiny[8];
    g_assert_cmpint(curd_device_self_test(device, tiny, sizeof tiny), ==,
                    CURD_OK);
    g_assert_cmpstr(tiny, ==, "self-te");
    g_assert_cmpint(curd_device_self_test(device, NULL, 0), ==, CURD_OK);
    g_assert_cmpint(curd_device_self_test(device, NULL, 16), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Fork and teardown
 * ---------------------------------------------------------------------- */
static int fork_child_checks(curd_device *parent_device)
{
    curd_device *device = NULL;
    if (curd_device_open(0, NULL, &device) != CURD_E_UNSUPPORTED ||
        device != NULL)
        return 10;
    if (strstr(curd_last_error(), "CUDA contexts do not survive fork") ==
            NULL ||
        strstr(curd_last_error(), "Fix: open the device in the child after "
                                  "exec, or before any use in the parent") ==
            NULL)
        return 11;
    curd_device_props props;
    props.struct_size = sizeof props;
    if (curd_device_info(parent_device, &props) != CURD_E_UNSUPPORTED)
        return 12;
    if (curd_device_self_test(parent_device, NULL, 0) != CURD_E_UNSUPPORTED)
        return 13;
    int count = -7;
    if (curd_device_count(&count) != CURD_E_UNSUPPORTED || count != -7)
        return 14;
    if (curd_device_close(parent_device) != CURD_E_UNSUPPORTED)
        return 15;
    return 0;
}

static void body_fork_child_gets_unsupported(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0)
        _exit(fork_child_checks(device)); /* no exit handlers in the child */
    int wait_status = 0;
    g_assert_cmpint(waitpid(pid, &wait_status, 0), ==, pid);
    g_assert_true(WIFEXITED(wait_status));
    g_assert_cmpint(WEXITSTATUS(wait_status), ==, 0);
    /* The parent's device is unaffected. */
    (void)curd_test_device_info(device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* In a parent about to run a subprocess: skips (or fails, where a GPU is
 * required) the way the subprocess would, since a skip inside it reads as a
 * failure out here. */
static gboolean gpu_present_or_skip(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return FALSE;
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    return TRUE;
}

static void body_close_after_deinitialized_driver_is_quiet(void)
{
    if (!g_test_subprocess()) {
        if (!gpu_present_or_skip())
            return;
        /* Marks the driver as gone for good: only in a subprocess. */
        g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC,
                               G_TEST_SUBPROCESS_INHERIT_STDERR |
                                   G_TEST_SUBPROCESS_INHERIT_STDOUT);
        g_test_trap_assert_passed();
        return;
    }
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    /* The first call of close learns that the driver is shutting down. */
    curd_test_faults_begin(1, 4 /* CUDA_ERROR_DEINITIALIZED */, NULL);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_assert_true(curd_test_faults_fired());
    g_assert_cmpuint(curd_test_faults_end(), ==, 1); /* and nothing after */
    int count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_DRIVER);
    g_assert_cmpint(count, ==, -7);
    g_assert_true(ends_with_fix(curd_last_error()));
}

/* ------------------------------------------------------------------------
 * A closed or never-opened device
 * ---------------------------------------------------------------------- */
/* Every public call that takes a device, made with `device`; each must
 * refuse it with CURD_E_INVALID_ARGUMENT and a Fix sentence, reading
 * nothing of it (ASan and Valgrind run this test too). */
static void assert_every_call_refuses(curd_device *device)
{
    unsigned char bytes[64] = {0};
    curd_buffer buffer = {0x0001000100000001ull};
    curd_block block;
    curd_device_props props = {.struct_size = sizeof props};
    curd_stats stats = {.struct_size = sizeof stats};
    size_t size = 0;
    uint64_t value = 0;
    curd_upload upload = {buffer, 0, bytes, 1};
    curd_download download = {buffer, 0, 1, bytes, sizeof bytes};
    char report[64];
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    curd_program *program = NULL;
    curd_launch launch;
    curd_launch_init(&launch);
    curd_pending *pending = NULL;
    const struct {
        const char *call;
        curd_status status;
    } calls[] = {
        {"curd_device_info", curd_device_info(device, &props)},
        {"curd_device_stats", curd_device_stats(device, &stats)},
        {"curd_device_stats_reset", curd_device_stats_reset(device)},
        {"curd_device_trim", curd_device_trim(device, 0)},
        {"curd_device_set_reclaim", curd_device_set_reclaim(device, NULL, NULL)},
        {"curd_device_resident_bytes",
         curd_device_resident_bytes(device, &value)},
        {"curd_device_self_test",
         curd_device_self_test(device, report, sizeof report)},
        {"curd_device_sync_uploads", curd_device_sync_uploads(device)},
        {"curd_block_acquire",
         curd_block_acquire(device, CURD_POOL_DEVICE, 64, &block)},
        {"curd_block_release", curd_block_release(device, &block)},
        {"curd_buffer_alloc", curd_buffer_alloc(device, 64, &buffer)},
        {"curd_buffer_free", curd_buffer_free(device, buffer)},
        {"curd_buffer_size", curd_buffer_size(device, buffer, &size)},
        {"curd_buffer_device_ptr",
         curd_buffer_device_ptr(device, buffer, &value)},
        {"curd_buffer_upload", curd_buffer_upload(device, buffer, bytes, 1)},
        {"curd_buffer_upload_at",
         curd_buffer_upload_at(device, buffer, 0, bytes, 1)},
        {"curd_buffer_upload_async",
         curd_buffer_upload_async(device, buffer, 0, bytes, 1)},
        {"curd_buffer_download",
         curd_buffer_download(device, buffer, bytes, 1)},
        {"curd_buffer_download_range",
         curd_buffer_download_range(device, buffer, 0, 1, bytes, 1)},
        {"curd_buffer_fill", curd_buffer_fill(device, buffer, 0, 1, 7)},
        {"curd_buffer_clear", curd_buffer_clear(device, buffer)},
        {"curd_upload_batch", curd_upload_batch(device, &upload, 1)},
        {"curd_download_batch", curd_download_batch(device, &download, 1)},
        {"curd_host_register",
         curd_host_register(device, bytes, sizeof bytes)},
        {"curd_host_unregister", curd_host_unregister(device, bytes)},
        {"curd_program_load", curd_program_load(device, &desc, &program)},
        {"curd_dispatch", curd_dispatch(device, NULL, &launch, NULL, 0)},
        {"curd_dispatch_async",
         curd_dispatch_async(device, NULL, &launch, NULL, 0, &pending)},
        {"curd_device_close", curd_device_close(device)},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(calls); i++) {
        if (calls[i].status != CURD_E_INVALID_ARGUMENT)
            g_error("%s on a device that is not open returned %s, not "
                    "CURD_E_INVALID_ARGUMENT",
                    calls[i].call, curd_status_name(calls[i].status));
    }
    /* The sentence of the last call, which is as any other's. */
    g_assert_nonnull(strstr(curd_last_error(), "not open"));
    g_assert_true(ends_with_fix(curd_last_error()));
}

static void body_close_twice_is_invalid_not_a_crash(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "curd_device_close"));
    g_assert_true(ends_with_fix(curd_last_error()));
}

static void body_every_call_after_close_is_refused(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_buffer buffer;
    g_assert_cmpint(curd_buffer_alloc(device, 4096, &buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    assert_every_call_refuses(device);
    /* A device opened after it works, whatever address it got. */
    curd_device *again = curd_test_gpu_open();
    g_assert_nonnull(again);
    g_assert_cmpint(curd_buffer_alloc(again, 4096, &buffer), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(again), ==, CURD_OK);
}

static void body_a_never_opened_device_is_refused(void)
{
    /* Looks like a device to nobody: the registry says no before any
     * field is read (the bytes are poison, so a read would misbehave). */
    union {
        unsigned char bytes[4096];
        max_align_t align;
    } fake;
    memset(fake.bytes, 0xA5, sizeof fake.bytes);
    assert_every_call_refuses((curd_device *)(void *)&fake);
}

static curd_device *exit_device;

static void close_at_exit(void)
{
    curd_status status = curd_device_close(exit_device);
    if (status != CURD_OK) {
        fprintf(stderr, "curd_device_close at exit: %s: %s\n",
                curd_status_name(status), curd_last_error());
        _exit(3);
    }
}

static void body_close_at_exit_is_quiet(void)
{
    if (!g_test_subprocess()) {
        if (!gpu_present_or_skip())
            return;
        g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC,
                               G_TEST_SUBPROCESS_INHERIT_STDOUT);
        g_test_trap_assert_passed();
        g_test_trap_assert_stderr_unmatched("*curd_device_close at exit*");
        return;
    }
    /* Registered before the driver initialises, so it runs after the
     * driver's own exit handlers, when those exist. */
    atexit(close_at_exit);
    exit_device = curd_test_gpu_open();
}

/* ------------------------------------------------------------------------ */
static const device_case cases[] = {
    {"/device/null-arguments-are-invalid-before-the-driver-loads",
     body_null_arguments_are_invalid, FALSE},
    {"/device/negative-ordinal-is-no-device", body_negative_ordinal_is_no_device,
     FALSE},
    {"/device/options-init-sets-the-size-and-zeroes-the-rest",
     body_options_init_sets_size_and_zeroes, FALSE},
    {"/device/options-with-unknown-tail-bytes-set-are-invalid",
     body_options_with_unknown_tail_bytes_are_invalid, FALSE},
    {"/device/options-with-unknown-flags-are-invalid",
     body_options_with_unknown_flags_are_invalid, FALSE},
    {"/device/options-smaller-than-known-or-absurd-are-invalid",
     body_options_smaller_than_known_are_invalid, FALSE},
    {"/device/open-and-close-leave-nothing-behind",
     body_open_and_close_leave_nothing_behind, FALSE},
    {"/device/count-and-version-agree-with-an-open-device",
     body_count_agrees_with_an_open_device, FALSE},
    {"/device/info-fields-are-sane", body_info_fields_are_sane, FALSE},
    {"/device/info-rejects-bad-props-and-spares-newer-fields",
     body_info_rejects_bad_props_and_spares_newer_fields, FALSE},
    {"/device/ordinal-past-the-count-is-no-device",
     body_ordinal_past_the_count_is_no_device, FALSE},
    {"/device/two-opens-of-one-ordinal-are-independent",
     body_two_opens_of_one_ordinal_are_independent, FALSE},
    {"/device/newer-options-with-a-zero-tail-are-accepted",
     body_newer_options_with_zero_tail_are_accepted, FALSE},
    {"/device/resident-limit-lowers-the-budget",
     body_resident_limit_lowers_the_budget, FALSE},
    {"/device/concurrent-opens-and-closes-leave-nothing-behind",
     body_concurrent_opens_and_closes_leave_nothing_behind, FALSE},
    {"/device/enter-makes-the-context-current-and-leave-pops-it",
     body_enter_makes_the_context_current, FALSE},
    {"/device/stream-pool-reuses-non-blocking-streams",
     body_stream_pool_reuses_streams, FALSE},
    {"/device/devices-for-ordinal-visits-each-open-device",
     body_devices_for_ordinal_visits_each_open_device, FALSE},
    {"/device/fault-sweep-over-open-fails-cleanly-and-leaks-nothing",
     body_fault_sweep_over_open_leaks_nothing, FALSE},
    {"/device/self-test-verifies-every-byte",
     body_self_test_verifies_every_byte, FALSE},
    {"/device/fault-sweep-over-self-test-keeps-the-device-usable",
     body_fault_sweep_over_self_test_keeps_the_device_usable, TRUE},
    {"/device/fork-child-gets-unsupported", body_fork_child_gets_unsupported,
     FALSE},
    {"/device/close-twice-is-invalid-not-a-crash",
     body_close_twice_is_invalid_not_a_crash, FALSE},
    {"/device/every-call-after-close-is-refused",
     body_every_call_after_close_is_refused, FALSE},
    {"/device/a-never-opened-device-is-refused",
     body_a_never_opened_device_is_refused, FALSE},
    /* These two leave the primary context retained in their subprocess on
     * purpose: no driver call is made once the driver is gone. */
    {"/device/close-after-the-driver-deinitialized-is-quiet",
     body_close_after_deinitialized_driver_is_quiet, TRUE},
    {"/device/close-at-process-exit-is-quiet", body_close_at_exit_is_quiet,
     TRUE},
};

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    /* Every test against the stand-in driver beside this program; a
     * missing device is a failure here, never a skip. */
    curd_test_require_fake_driver();
#endif
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *path = CURD_TEST_ON_FAKE ? g_strdup_printf(
                         "/device-fake%s", cases[i].path + strlen("/device"))
                                       : g_strdup(cases[i].path);
        g_test_add_data_func(path, &cases[i], run_case);
        g_free(path);
    }
    return g_test_run();
}
