/* test-driver.c - loading the driver: no driver, a too-old or incomplete
 * driver, optional entries, no device, cuInit failures, fork, teardown,
 * and the fault-injection layer itself.
 *
 * The driver loads once per process, so each test runs in a subprocess
 * that sets up its environment before the first curd call. Tests that
 * need a driver use the stand-in libcuda built beside this program
 * (tests/fake/fake-cuda.c, $(BUILD)/tests/libcuda-fake.so.1); none needs
 * a GPU. */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlfcn.h>

#include "curd.h"
#include "driver/driver.h"
#include "support/curd-test.h"

#define MISSING_PATH "/nonexistent/curd-test-dir/libcuda.so.1"

/* In the parent: runs this test in a subprocess and requires it to pass.
 * Returns FALSE in the parent (the caller returns), TRUE in the child. */
static gboolean in_child(gboolean needs_fake)
{
    if (g_test_subprocess())
        return TRUE;
    if (needs_fake) {
        char *path = curd_test_fake_driver_path();
        gboolean present = g_file_test(path, G_FILE_TEST_EXISTS);
        if (!present) {
            char *reason = g_strdup_printf("the stand-in driver %s is not "
                                           "built (make tests builds it)",
                                           path);
            g_test_skip(reason);
            g_free(reason);
        }
        g_free(path);
        if (!present)
            return FALSE;
    }
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC,
                           G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
    return FALSE;
}

/* In the child: point curd at the stand-in driver. */
static void use_fake_driver(void)
{
    char *path = curd_test_fake_driver_path();
    g_setenv("CURD_LIBCUDA", path, TRUE);
    g_free(path);
}

static gboolean contains(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

static void assert_sentence_ends_with_fix(const char *sentence)
{
    g_assert_true(contains(sentence, "Fix: "));
    g_assert_true(g_str_has_suffix(sentence, "."));
}

/* ------------------------------------------------------------------------
 * No driver
 * ---------------------------------------------------------------------- */
static gpointer count_on_thread(gpointer data)
{
    (void)data;
    int count = -7;
    curd_status status = curd_device_count(&count);
    char *result = g_strdup_printf("%d %d %s", status, count, curd_last_error());
    return result;
}

static void test_missing_libcuda_is_no_driver(void)
{
    if (!in_child(FALSE))
        return;
    g_setenv("CURD_LIBCUDA", MISSING_PATH, TRUE);

    int count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(count, ==, -7); /* untouched */
    const char *sentence = curd_last_error();
    g_assert_true(contains(sentence, MISSING_PATH));
    g_assert_true(contains(sentence, "libcuda1"));
    g_assert_true(contains(sentence, "libnvidia-compute"));
    /* Neither default apt source has the driver: the sentence names the
     * archive areas to enable, per distribution. */
    g_assert_true(contains(sentence, "non-free"));
    g_assert_true(contains(sentence, "restricted"));
    g_assert_true(contains(sentence, "multiverse"));
    assert_sentence_ends_with_fix(sentence);
    /* The path came from CURD_LIBCUDA: the sentence says so first, with
     * dlopen's reason, and its Fix starts with that variable, not with
     * installing a driver. */
    g_assert_true(g_str_has_prefix(sentence, "CURD_LIBCUDA is set to "
                                             MISSING_PATH
                                             ", which cannot be loaded ("));
    g_assert_true(contains(sentence, "No such file or directory"));
    g_assert_true(contains(sentence, "Fix: set CURD_LIBCUDA to the full"
                                     " path of a libcuda.so.1"));
    g_assert_true(strstr(sentence, "Fix: set CURD_LIBCUDA")
                  < strstr(sentence, "install"));
    char *first = g_strdup(sentence);

    /* Every entry that needs the driver says the same, every time, on
     * every thread. */
    int version = -7;
    g_assert_cmpint(curd_driver_version(&version), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(version, ==, -7);
    g_assert_cmpstr(curd_last_error(), ==, first);
    curd_device *device = (curd_device *)(uintptr_t)0x5;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_E_NO_DRIVER);
    g_assert_true(device == (curd_device *)(uintptr_t)0x5);
    g_assert_cmpstr(curd_last_error(), ==, first);
    g_assert_null(curdi_driver_get());

    GThread *thread = g_thread_new("count", count_on_thread, NULL);
    char *on_thread = g_thread_join(thread);
    char *expected = g_strdup_printf("%d -7 %s", CURD_E_NO_DRIVER, first);
    g_assert_cmpstr(on_thread, ==, expected);
    g_free(expected);
    g_free(on_thread);
    g_free(first);
}

/* CURD_LIBCUDA naming a file that is there but no library: the sentence
 * names the variable and the path first, carries dlopen's own reason
 * word for word, and its Fix is about the variable. */
static void test_unloadable_curd_libcuda_names_the_variable_and_dlopens_reason(
    void)
{
    if (!in_child(FALSE))
        return;
    char *dir = g_dir_make_tmp("curd-test-driver-XXXXXX", NULL);
    g_assert_nonnull(dir);
    char *path = g_build_filename(dir, "libcuda.so.1", NULL);
    g_assert_true(g_file_set_contents(path, "not a library\n", -1, NULL));
    /* What dlopen says of it, as the library will have seen it. */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    g_assert_null(handle);
    char *reason = g_strdup(dlerror());
    g_setenv("CURD_LIBCUDA", path, TRUE);
    int count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(count, ==, -7);
    const char *sentence = curd_last_error();
    char *start = g_strdup_printf("CURD_LIBCUDA is set to %s, which cannot"
                                  " be loaded (%s)", path, reason);
    if (!g_str_has_prefix(sentence, start))
        g_error("the sentence does not start with '%s': %s", start,
                sentence);
    g_assert_true(contains(sentence, "Fix: set CURD_LIBCUDA"));
    assert_sentence_ends_with_fix(sentence);
    g_free(start);
    g_free(reason);
    unlink(path);
    rmdir(dir);
    g_free(path);
    g_free(dir);
}

static void test_default_library_is_libcuda_so_1(void)
{
    if (!in_child(FALSE))
        return;
    g_unsetenv("CURD_LIBCUDA");
    int count = 0;
    curd_status status = curd_device_count(&count);
    if (status == CURD_E_NO_DRIVER) {
        g_assert_true(contains(curd_last_error(), "libcuda.so.1"));
        assert_sentence_ends_with_fix(curd_last_error());
    } else {
        /* A host with a driver: it loaded by the default name. */
        g_assert_cmpint(status, ==, CURD_OK);
        g_assert_cmpint(count, >=, 0);
    }
}

static void test_library_without_cuda_symbols_is_not_a_driver(void)
{
    if (!in_child(FALSE))
        return;
    /* Any loadable library that is not libcuda: GLib is loaded already. */
    g_setenv("CURD_LIBCUDA", "libglib-2.0.so.0", TRUE);
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
    g_assert_true(contains(curd_last_error(), "libglib-2.0.so.0"));
    g_assert_true(contains(curd_last_error(), "cuDriverGetVersion"));
    assert_sentence_ends_with_fix(curd_last_error());
}

static void test_table_is_null_before_load(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_assert_null(curdi_driver_get());
    g_assert_null(curdi_driver_table_for_test());
    g_assert_false(curdi_driver_usable());
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    g_assert_nonnull(curdi_driver_get());
    g_assert_true(curdi_driver_usable());
}

/* ------------------------------------------------------------------------
 * Old or incomplete drivers
 * ---------------------------------------------------------------------- */
static void test_too_old_driver_names_both_versions(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_setenv("FAKE_CUDA_VERSION", "11080", TRUE);
    int version = -7;
    g_assert_cmpint(curd_driver_version(&version), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(version, ==, -7);
    const char *sentence = curd_last_error();
    g_assert_true(contains(sentence, "too old"));
    g_assert_true(contains(sentence, "11.8"));
    g_assert_true(contains(sentence, "12.0"));
    g_assert_true(contains(sentence, "libcuda-fake.so.1"));
    assert_sentence_ends_with_fix(sentence);
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
}

static void test_missing_required_entry_is_named(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_setenv("FAKE_CUDA_OMIT", "cuLaunchKernel", TRUE);
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
    g_assert_true(contains(curd_last_error(), "lacks cuLaunchKernel"));
    g_assert_true(contains(curd_last_error(), "12.0"));
    assert_sentence_ends_with_fix(curd_last_error());
    g_assert_null(curdi_driver_get());
}

static void test_every_entry_resolves(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    int version = 0;
    g_assert_cmpint(curd_driver_version(&version), ==, CURD_OK);
    g_assert_cmpint(version, ==, 12080);
    const curdi_driver *driver = curdi_driver_get();
    g_assert_nonnull(driver);
    g_assert_cmpint(driver->driver_version, ==, 12080);
    unsigned resolved = 0;
#define CHECK_(name, symbol, tier, params, args)                              \
    if (driver->name == NULL)                                                 \
        g_error("%s was not resolved", #name);                                \
    resolved++;
    CURDI_CUDA_ENTRY_LIST(CHECK_)
#undef CHECK_
    g_assert_cmpuint(resolved, >=, 40);
}

static void test_missing_optional_entries_clear_capabilities(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_setenv("FAKE_CUDA_OMIT", "cuMemAllocAsync,cuMemHostUnregister,cuMemCreate",
             TRUE);
    curd_device *device = NULL;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_OK);
    const curdi_driver *driver = curdi_driver_get();
    g_assert_null(driver->cuMemAllocAsync);
    g_assert_nonnull(driver->cuMemFreeAsync);
    g_assert_null(driver->cuMemHostUnregister);
    g_assert_nonnull(driver->cuMemHostRegister);
    curd_device_props props = curd_test_device_info(device);
    g_assert_cmpuint(props.capabilities & CURD_CAP_STREAM_ORDERED_ALLOC, ==, 0);
    g_assert_cmpuint(props.capabilities & CURD_CAP_HOST_REGISTER, ==, 0);
    /* The device says yes; the driver lacks an entry shareable buffers
     * use. */
    g_assert_cmpuint(props.capabilities & CURD_CAP_SHAREABLE, ==, 0);
    /* The fake says yes to both attributes. */
    g_assert_cmpuint(props.capabilities & CURD_CAP_COOPERATIVE_LAUNCH, !=, 0);
    g_assert_cmpuint(props.capabilities & CURD_CAP_UNIFIED_ADDRESSING, !=, 0);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_present_optional_entries_set_capabilities(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    curd_device *device = NULL;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_OK);
    curd_device_props props = curd_test_device_info(device);
    g_assert_cmpuint(props.capabilities, ==,
                     CURD_CAP_COOPERATIVE_LAUNCH | CURD_CAP_UNIFIED_ADDRESSING |
                         CURD_CAP_STREAM_ORDERED_ALLOC |
                         CURD_CAP_HOST_REGISTER | CURD_CAP_SHAREABLE);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * No device, failing cuInit
 * ---------------------------------------------------------------------- */
static void test_host_without_devices_counts_zero(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_setenv("FAKE_CUDA_DEVICES", "0", TRUE);
    int count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    g_assert_cmpint(count, ==, 0);
    curd_device *device = NULL;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_E_NO_DEVICE);
    g_assert_null(device);
    g_assert_true(contains(curd_last_error(), "no device"));
    assert_sentence_ends_with_fix(curd_last_error());
}

static void test_failing_cuinit_is_no_driver_with_its_code(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    g_setenv("FAKE_CUDA_INIT_RESULT", "803", TRUE);
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(curd_last_driver_code(), ==, 803);
    g_assert_true(contains(curd_last_error(),
                           "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));
    assert_sentence_ends_with_fix(curd_last_error());
}

/* ------------------------------------------------------------------------
 * Concurrency, fork, teardown
 * ---------------------------------------------------------------------- */
static gpointer count_status(gpointer data)
{
    (void)data;
    int count = -1;
    curd_status status = curd_device_count(&count);
    return GINT_TO_POINTER(status == CURD_OK && count == 1);
}

static void test_concurrent_first_loads_agree(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    GThread *threads[8];
    for (int i = 0; i < 8; i++)
        threads[i] = g_thread_new("load", count_status, NULL);
    for (int i = 0; i < 8; i++)
        g_assert_true(GPOINTER_TO_INT(g_thread_join(threads[i])));
}

/* Runs in a fork child: 0 when every check holds, else the failed check's
 * number. Only _exit: the child must not run the parent's exit handlers. */
static int fork_child_checks(curd_device *parent_device)
{
    int count = -7;
    if (curd_device_count(&count) != CURD_E_UNSUPPORTED || count != -7)
        return 10;
    if (!contains(curd_last_error(), "CUDA contexts do not survive fork") ||
        !contains(curd_last_error(), "Fix: open the device in the child "
                                     "after exec, or before any use in the "
                                     "parent"))
        return 11;
    curd_device *device = NULL;
    if (curd_device_open(0, NULL, &device) != CURD_E_UNSUPPORTED ||
        device != NULL)
        return 12;
    curd_device_props props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    if (curd_device_info(parent_device, &props) != CURD_E_UNSUPPORTED)
        return 13;
    /* The calls that make no driver call refuse too: the device is the
     * parent's (issue 10 found statistics, their reset and the reclaim
     * callback answering CURD_OK here). */
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    if (curd_device_stats(parent_device, &stats) != CURD_E_UNSUPPORTED ||
        stats.struct_size != sizeof stats || stats.h2d_bytes != 0)
        return 16;
    if (curd_device_stats_reset(parent_device) != CURD_E_UNSUPPORTED)
        return 17;
    if (curd_device_set_reclaim(parent_device, NULL, NULL) !=
        CURD_E_UNSUPPORTED)
        return 18;
    if (curd_device_trim(parent_device, 0) != CURD_E_UNSUPPORTED)
        return 19;
    uint64_t resident = 7;
    if (curd_device_resident_bytes(parent_device, &resident) !=
            CURD_E_UNSUPPORTED ||
        resident != 7)
        return 20;
    if (!contains(curd_last_error(), "CUDA contexts do not survive fork"))
        return 21;
    /* The parent's last check of the device (a pool hit's) does not carry
     * over: the thread that forked remembers it, and must not trust it. */
    curd_block block;
    if (curd_block_acquire(parent_device, CURD_POOL_DEVICE, 64, &block) !=
            CURD_E_UNSUPPORTED ||
        !contains(curd_last_error(), "CUDA contexts do not survive fork"))
        return 22;
    if (curd_device_close(parent_device) != CURD_E_UNSUPPORTED)
        return 14;
    /* The version needs no driver call and still answers. */
    int version = 0;
    if (curd_driver_version(&version) != CURD_OK || version != 12080)
        return 15;
    return 0;
}

static void test_fork_child_is_unsupported(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    curd_device *device = NULL;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_OK);
    /* A pool hit before the fork: its device check is remembered. */
    curd_block block;
    g_assert_cmpint(curd_block_acquire(device, CURD_POOL_DEVICE, 64, &block),
                    ==, CURD_OK);
    g_assert_cmpint(curd_block_release(device, &block), ==, CURD_OK);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0)
        _exit(fork_child_checks(device));
    int wait_status = 0;
    g_assert_cmpint(waitpid(pid, &wait_status, 0), ==, pid);
    g_assert_true(WIFEXITED(wait_status));
    g_assert_cmpint(WEXITSTATUS(wait_status), ==, 0);
    /* The parent is unaffected. */
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_fork_before_first_use_is_fine(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        int count = 0;
        curd_device *device = NULL;
        int bad = curd_device_count(&count) != CURD_OK || count != 1 ||
                  curd_device_open(0, NULL, &device) != CURD_OK ||
                  curd_device_close(device) != CURD_OK;
        _exit(bad);
    }
    int wait_status = 0;
    g_assert_cmpint(waitpid(pid, &wait_status, 0), ==, pid);
    g_assert_true(WIFEXITED(wait_status));
    g_assert_cmpint(WEXITSTATUS(wait_status), ==, 0);
}

static void test_deinitialized_driver_gets_no_more_calls(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    curd_device *device = NULL;
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_OK);
    /* What the driver does at process exit, now. */
    void *fake = dlopen(g_getenv("CURD_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
    g_assert_nonnull(fake);
    void (*teardown)(void) =
        (void (*)(void))(uintptr_t)dlsym(fake, "fake_cuda_teardown");
    g_assert_nonnull(teardown);
    teardown();

    curd_test_faults_begin(0, 0, NULL); /* count only */
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    /* One call learnt that the driver is gone; nothing followed it. */
    g_assert_cmpuint(curd_test_faults_end(), ==, 1);
    g_assert_true(curdi_driver_deinitialized());
    g_assert_false(curdi_driver_usable());

    int count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_DRIVER);
    g_assert_cmpint(count, ==, -7);
    g_assert_cmpint(curd_last_driver_code(), ==, 4);
    g_assert_true(contains(curd_last_error(), "shut down"));
    assert_sentence_ends_with_fix(curd_last_error());
    dlclose(fake);
}

/* ------------------------------------------------------------------------
 * The fault-injection layer (tests/support/curd-test.c)
 * ---------------------------------------------------------------------- */
static void test_fault_injection_fails_the_chosen_call(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    int count = 0;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);

    curd_test_faults_begin(2, 999, NULL);
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    g_assert_false(curd_test_faults_fired());
    count = -7;
    g_assert_cmpint(curd_device_count(&count), ==, CURD_E_DRIVER);
    g_assert_cmpint(count, ==, -7);
    g_assert_cmpint(curd_last_driver_code(), ==, 999);
    g_assert_true(contains(curd_last_error(), "cuDeviceGetCount"));
    g_assert_true(curd_test_faults_fired());
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK); /* once only */
    g_assert_cmpuint(curd_test_faults_end(), ==, 3);

    /* Restored: nothing is numbered or failed any more. */
    g_assert_cmpint(curd_device_count(&count), ==, CURD_OK);
    g_assert_cmpint(count, ==, 1);
}

static void test_fault_injection_can_target_one_entry(void)
{
    if (!in_child(TRUE))
        return;
    use_fake_driver();
    curd_device *device = NULL;
    curd_test_faults_begin(1, 2 /* OUT_OF_MEMORY */, "cuStreamCreate");
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==,
                    CURD_E_OUT_OF_MEMORY);
    g_assert_null(device);
    g_assert_true(contains(curd_last_error(), "cuStreamCreate"));
    g_assert_true(curd_test_faults_fired());
    g_assert_cmpuint(curd_test_faults_end(), ==, 1);
    g_assert_cmpint(curd_device_open(0, NULL, &device), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* ------------------------------------------------------------------------
 * Translation (pure)
 * ---------------------------------------------------------------------- */
static void test_status_of_results(void)
{
    g_assert_cmpint(curdi_driver_status_of(0), ==, CURD_OK);
    g_assert_cmpint(curdi_driver_status_of(2), ==, CURD_E_OUT_OF_MEMORY);
    g_assert_cmpint(curdi_driver_status_of(4), ==, CURD_E_DRIVER);
    g_assert_cmpint(curdi_driver_status_of(100), ==, CURD_E_NO_DEVICE);
    g_assert_cmpint(curdi_driver_status_of(700), ==, CURD_E_DEVICE_LOST);
    g_assert_cmpint(curdi_driver_status_of(716), ==, CURD_E_DEVICE_LOST);
    g_assert_cmpint(curdi_driver_status_of(222), ==, CURD_E_PROGRAM);
    g_assert_cmpint(curdi_driver_status_of(34), ==, CURD_E_NO_DRIVER);
    g_assert_cmpint(curdi_driver_status_of(500), ==, CURD_E_DRIVER);
    g_assert_cmpint(curdi_driver_status_of(
                        (curdi_cu_result)g_test_rand_int_range(1000, 100000)),
                    ==, CURD_E_DRIVER);
    /* Without a loaded driver, names come from curd's own table. */
    g_assert_cmpstr(curdi_driver_result_name(719), ==,
                    "CUDA_ERROR_LAUNCH_FAILED");
    g_assert_cmpstr(curdi_driver_result_name(123456), ==,
                    "an unrecognised CUresult");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/driver/missing-libcuda-is-no-driver-naming-the-path-and-the-package",
                    test_missing_libcuda_is_no_driver);
    g_test_add_func("/driver/unloadable-curd-libcuda-names-the-variable-and-dlopens-reason",
                    test_unloadable_curd_libcuda_names_the_variable_and_dlopens_reason);
    g_test_add_func("/driver/default-library-is-libcuda-so-1",
                    test_default_library_is_libcuda_so_1);
    g_test_add_func("/driver/library-without-cuda-symbols-is-not-a-driver",
                    test_library_without_cuda_symbols_is_not_a_driver);
    g_test_add_func("/driver/table-is-null-until-the-driver-loads",
                    test_table_is_null_before_load);
    g_test_add_func("/driver/too-old-driver-is-no-driver-naming-both-versions",
                    test_too_old_driver_names_both_versions);
    g_test_add_func("/driver/missing-required-entry-is-no-driver-naming-it",
                    test_missing_required_entry_is_named);
    g_test_add_func("/driver/every-entry-resolves-through-cuGetProcAddress",
                    test_every_entry_resolves);
    g_test_add_func("/driver/missing-optional-entries-clear-their-capabilities",
                    test_missing_optional_entries_clear_capabilities);
    g_test_add_func("/driver/present-optional-entries-set-their-capabilities",
                    test_present_optional_entries_set_capabilities);
    g_test_add_func("/driver/host-without-devices-counts-zero-and-opens-none",
                    test_host_without_devices_counts_zero);
    g_test_add_func("/driver/failing-cuinit-is-no-driver-with-its-code",
                    test_failing_cuinit_is_no_driver_with_its_code);
    g_test_add_func("/driver/concurrent-first-loads-agree",
                    test_concurrent_first_loads_agree);
    g_test_add_func("/driver/fork-child-gets-unsupported-from-every-entry",
                    test_fork_child_is_unsupported);
    g_test_add_func("/driver/fork-before-first-use-leaves-the-child-free",
                    test_fork_before_first_use_is_fine);
    g_test_add_func("/driver/deinitialized-driver-gets-no-further-calls",
                    test_deinitialized_driver_gets_no_more_calls);
    g_test_add_func("/driver/fault-injection-fails-exactly-the-numbered-call",
                    test_fault_injection_fails_the_chosen_call);
    g_test_add_func("/driver/fault-injection-can-number-one-entry-only",
                    test_fault_injection_can_target_one_entry);
    g_test_add_func("/driver/cuda-results-map-to-statuses",
                    test_status_of_results);
    return g_test_run();
}
