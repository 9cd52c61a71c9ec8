/* curd-test.c - helpers shared by the test programs (see curd-test.h). */
#include "support/curd-test.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "support/driver-faults.h"
#include "support/fake-live.h"

/* Each TAP line leaves as it is written, also into a file or a pipe: a
 * sanitizer writes its reports straight to the same log, and
 * tests/gpu/run-remote.sh names the test an error belongs to by the TAP
 * line that follows it, which a buffered stdout would hold back until
 * exit. */
__attribute__((constructor)) static void tap_lines_unbuffered(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* ------------------------------------------------------------------------
 * Data
 * ---------------------------------------------------------------------- */
void curd_test_fill_random(void *p, size_t n)
{
    unsigned char *bytes = p;
    size_t at = 0;
    while (at < n) {
        guint32 word = g_test_rand_int();
        for (int i = 0; i < 4 && at < n; i++, at++)
            bytes[at] = (unsigned char)(word >> (8 * i));
    }
}

void curd_test_poison(void *p, size_t n)
{
    /* 0xDEADBEEF in memory order, shifted by the byte's position mod 251 so
     * the pattern never lines up with a copy of itself at another
     * offset. */
    static const unsigned char pattern[4] = {0xDE, 0xAD, 0xBE, 0xEF};
    unsigned char *bytes = p;
    for (size_t i = 0; i < n; i++)
        bytes[i] = (unsigned char)(pattern[i % 4] ^ (unsigned char)(i % 251));
}

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */
void curd_test_assert_fix_sentence(void)
{
    const char *message = curd_last_error();
    g_assert_nonnull(strstr(message, "Fix: "));
    g_assert_cmpint(message[strlen(message) - 1], ==, '.');
}

/* ------------------------------------------------------------------------
 * GPU open or skip
 * ---------------------------------------------------------------------- */
curd_device *curd_test_gpu_open_with(const curd_device_options *options)
{
    curd_device *device = NULL;
    curd_status status = curd_device_open(0, options, &device);
    if (status == CURD_OK)
        return device;
    if (status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE) {
        /* The reason is the library's own sentence: it names the library
         * it looked for, or the device count. Where a GPU is required
         * (make check-gpu, the fake-driver runs) its absence fails. */
        const char *required = getenv("CURD_REQUIRE_GPU");
        if (required != NULL && required[0] != '\0' &&
            strcmp(required, "0") != 0) {
            g_test_fail_printf("CURD_REQUIRE_GPU is set and there is no "
                               "GPU: %s: %s",
                               curd_status_name(status), curd_last_error());
            return NULL;
        }
        g_test_skip_printf("no GPU: %s: %s", curd_status_name(status),
                           curd_last_error());
        return NULL;
    }
    /* A driver and a device exist, and opening failed: that is a failure,
     * not a reason to skip. */
    g_test_fail_printf("curd_device_open(0) failed with %s: %s",
                       curd_status_name(status), curd_last_error());
    return NULL;
}

curd_device *curd_test_gpu_open(void)
{
    return curd_test_gpu_open_with(NULL);
}

gboolean curd_test_have_gpus(int count)
{
    int have = 0;
    curd_status status = curd_device_count(&have);
    if (status != CURD_OK)
        g_error("curd_device_count: %s: %s", curd_status_name(status),
                curd_last_error());
    if (have >= count)
        return TRUE;
    /* tests/run-tests.sh reads these words: keep them as they are. */
    g_test_skip_printf("needs %d GPUs; this host has %d", count, have);
    return FALSE;
}

curd_device_props curd_test_device_info(curd_device *device)
{
    curd_device_props props;
    curd_test_poison(&props, sizeof props);
    props.struct_size = sizeof props;
    curd_status status = curd_device_info(device, &props);
    if (status != CURD_OK)
        g_error("curd_device_info: %s: %s", curd_status_name(status),
                curd_last_error());
    return props;
}

curd_stats curd_test_device_stats(curd_device *device)
{
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    curd_status status = curd_device_stats(device, &stats);
    if (status != CURD_OK)
        g_error("curd_device_stats: %s: %s", curd_status_name(status),
                curd_last_error());
    return stats;
}

/* ------------------------------------------------------------------------
 * The stand-in driver beside the program
 * ---------------------------------------------------------------------- */
char *curd_test_path_beside(const char *file)
{
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_assert_nonnull(exe);
    char *dir = g_path_get_dirname(exe);
    char *path = g_build_filename(dir, file, NULL);
    g_free(dir);
    g_free(exe);
    return path;
}

char *curd_test_fake_driver_path(void)
{
    return curd_test_path_beside("libcuda-fake.so.1");
}

gboolean curd_test_fake_live(const char *const *kinds, size_t count,
                             long *counts)
{
    return fake_live_read(kinds, count, counts);
}

long curd_test_fake_count(const char *kind)
{
    long count = -1;
    if (!curd_test_fake_live(&kind, 1, &count))
        return -1;
    return count;
}

void curd_test_run_holding_nothing(void (*body)(void),
                                   const char *const *kinds, size_t count,
                                   long *before, gboolean *counted)
{
    *counted = curd_test_fake_live(kinds, count, before);
    body();
    long *after = g_new(long, count);
    if (*counted && !g_test_failed()
        && curd_test_fake_live(kinds, count, after))
        for (size_t i = 0; i < count; i++)
            if (after[i] != before[i])
                g_error("the stand-in driver holds %ld %s, %ld when the test"
                        " began",
                        after[i], kinds[i], before[i]);
    g_free(after);
}

char *curd_test_fake_nccl_path(void)
{
    return curd_test_path_beside("libnccl-fake.so.2");
}

long curd_test_fake_nccl_live(void)
{
    long count = 0;
    (void)fake_live_nccl_comms(&count); /* never loaded: none made */
    return count;
}

long curd_test_fake_nccl_abandoned_joins(void)
{
    long count = 0;
    (void)fake_live_nccl_abandoned_joins(&count); /* never loaded: none */
    return count;
}

long curd_test_fake_nccl_groups(int blocking)
{
    long count = 0;
    (void)fake_live_nccl_groups(blocking != 0, &count); /* never loaded: none */
    return count;
}

void curd_test_require_fake_driver(void)
{
    char *path = curd_test_fake_driver_path();
    char *nccl = curd_test_fake_nccl_path();
    /* Kept when set: a test's subprocess may point it elsewhere. */
    g_setenv("CURD_LIBNCCL", nccl, FALSE);
    g_free(nccl);
    g_setenv("CURD_LIBCUDA", path, TRUE);
    g_setenv("CURD_REQUIRE_GPU", "1", TRUE);
    g_free(path);
}

/* ------------------------------------------------------------------------
 * Fault injection (support/driver-faults.c)
 * ---------------------------------------------------------------------- */
void curd_test_faults_begin(unsigned fail_at, int cu_result,
                            const char *only_entry)
{
    g_assert_true(only_entry == NULL || strlen(only_entry) < 64);
    g_assert_true(driver_faults_begin(fail_at, cu_result, only_entry));
}

void curd_test_pop_leftover_contexts(void)
{
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_context current = NULL;
    if (driver == NULL)
        return;
    while (driver->cuCtxGetCurrent(&current) == CURDI_CUDA_SUCCESS &&
           current != NULL) {
        curdi_cu_context popped = NULL;
        g_assert_cmpuint(driver->cuCtxPopCurrent(&popped), ==,
                         CURDI_CUDA_SUCCESS);
    }
}

unsigned curd_test_faults_end(void)
{
    return driver_faults_end();
}

gboolean curd_test_faults_fired(void)
{
    return driver_faults_fired();
}
