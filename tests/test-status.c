/* test-status.c - status names, the thread's error sentence, the driver
 * code, tracing and the version. Needs no GPU. */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "curd.h"
#include "driver/driver.h"
#include "support/curd-test.h"

static gboolean ends_with_fix(const char *sentence)
{
    const char *fix = strstr(sentence, "Fix:");
    return fix != NULL && strlen(fix) > strlen("Fix: ") &&
           sentence[strlen(sentence) - 1] == '.';
}

/* ------------------------------------------------------------------------ */
static void test_names_cover_every_status(void)
{
    static const struct {
        curd_status status;
        const char *name;
    } expected[] = {
        {CURD_OK, "CURD_OK"},
        {CURD_E_INVALID_ARGUMENT, "CURD_E_INVALID_ARGUMENT"},
        {CURD_E_RANGE, "CURD_E_RANGE"},
        {CURD_E_OVERFLOW, "CURD_E_OVERFLOW"},
        {CURD_E_BUDGET, "CURD_E_BUDGET"},
        {CURD_E_OUT_OF_MEMORY, "CURD_E_OUT_OF_MEMORY"},
        {CURD_E_NO_DRIVER, "CURD_E_NO_DRIVER"},
        {CURD_E_NO_DEVICE, "CURD_E_NO_DEVICE"},
        {CURD_E_DRIVER, "CURD_E_DRIVER"},
        {CURD_E_STALE_HANDLE, "CURD_E_STALE_HANDLE"},
        {CURD_E_BUSY, "CURD_E_BUSY"},
        {CURD_E_UNSUPPORTED, "CURD_E_UNSUPPORTED"},
        {CURD_E_PROGRAM, "CURD_E_PROGRAM"},
        {CURD_E_DEVICE_LOST, "CURD_E_DEVICE_LOST"},
        {CURD_E_COMM, "CURD_E_COMM"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(expected); i++) {
        /* The numbers are ABI: they must be 0..14 in this order. */
        g_assert_cmpint(expected[i].status, ==, (int)i);
        g_assert_cmpstr(curd_status_name(expected[i].status), ==,
                        expected[i].name);
    }
}

static void test_unknown_status_has_unknown_name(void)
{
    g_assert_cmpstr(curd_status_name((curd_status)15), ==, "CURD_E_UNKNOWN");
    g_assert_cmpstr(curd_status_name((curd_status)-1), ==, "CURD_E_UNKNOWN");
    g_assert_cmpstr(curd_status_name((curd_status)g_test_rand_int_range(
                        1000, G_MAXINT32)),
                    ==, "CURD_E_UNKNOWN");
}

/* ------------------------------------------------------------------------ */
static gpointer read_fresh_thread_state(gpointer data)
{
    (void)data;
    char *state = g_strdup_printf("[%s] %d", curd_last_error(),
                                  curd_last_driver_code());
    return state;
}

static void test_fresh_thread_has_no_error(void)
{
    /* Make this thread fail first: a new thread must not see it. */
    (void)curdi_fail(CURD_E_RANGE, "main thread failure. Fix: none.");
    curdi_status_note_driver_code(700);
    GThread *thread = g_thread_new("fresh", read_fresh_thread_state, NULL);
    char *state = g_thread_join(thread);
    g_assert_cmpstr(state, ==, "[] 0");
    g_free(state);
}

static void test_failure_returns_status_and_stores_sentence(void)
{
    int value = g_test_rand_int_range(0, 1000000);
    curd_status status =
        curdi_fail(CURD_E_BUDGET, "request of %d bytes is over budget. Fix: "
                                  "free something.",
                   value);
    g_assert_cmpint(status, ==, CURD_E_BUDGET);
    char *expected = g_strdup_printf("request of %d bytes is over budget. "
                                     "Fix: free something.",
                                     value);
    g_assert_cmpstr(curd_last_error(), ==, expected);
    g_free(expected);
}

static void test_public_failure_sentence_ends_with_a_fix(void)
{
    /* A public entry with a bad argument: no driver needed. */
    g_assert_cmpint(curd_device_count(NULL), ==, CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "count"));
    g_assert_true(ends_with_fix(curd_last_error()));
    g_assert_cmpint(curd_device_open(0, NULL, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "out_device"));
    g_assert_true(ends_with_fix(curd_last_error()));
}

static GMutex step_lock;
static GCond step_cond;
static int threads_failed;

static gpointer fail_then_read(gpointer data)
{
    int index = GPOINTER_TO_INT(data);
    (void)curdi_fail(CURD_E_RANGE, "thread %d failed. Fix: thread %d fix.",
                     index, index);
    curdi_status_note_driver_code(100 + index);
    /* Wait until every thread has failed, so that a shared buffer would
     * show another thread's sentence. */
    g_mutex_lock(&step_lock);
    threads_failed++;
    g_cond_broadcast(&step_cond);
    while (threads_failed < 8)
        g_cond_wait(&step_cond, &step_lock);
    g_mutex_unlock(&step_lock);
    char *expected =
        g_strdup_printf("thread %d failed. Fix: thread %d fix.", index, index);
    gboolean same = strcmp(curd_last_error(), expected) == 0 &&
                    curd_last_driver_code() == 100 + index;
    g_free(expected);
    return GINT_TO_POINTER(same);
}

static void test_last_error_is_thread_local(void)
{
    (void)curdi_fail(CURD_E_BUSY, "main thread sentence. Fix: main.");
    curdi_status_note_driver_code(1);
    threads_failed = 0;
    GThread *threads[8];
    for (int i = 0; i < 8; i++)
        threads[i] = g_thread_new("failer", fail_then_read, GINT_TO_POINTER(i));
    for (int i = 0; i < 8; i++)
        g_assert_true(GPOINTER_TO_INT(g_thread_join(threads[i])));
    g_assert_cmpstr(curd_last_error(), ==, "main thread sentence. Fix: main.");
    g_assert_cmpint(curd_last_driver_code(), ==, 1);
}

static void test_long_sentence_keeps_head_and_fix(void)
{
    GString *middle = g_string_new(NULL);
    size_t middle_len = (size_t)g_test_rand_int_range(1200, 6000);
    for (size_t i = 0; i < middle_len; i++)
        g_string_append_c(middle, (char)('a' + (char)(i % 26)));
    (void)curdi_fail(CURD_E_OVERFLOW,
                     "HEAD of the sentence %s. Fix: do the right thing.",
                     middle->str);
    const char *sentence = curd_last_error();
    g_assert_cmpuint(strlen(sentence), <, 1024);
    g_assert_true(g_str_has_prefix(sentence, "HEAD of the sentence abc"));
    g_assert_true(g_str_has_suffix(sentence, " ... Fix: do the right thing."));
    g_string_free(middle, TRUE);
}

static GString *long_middle(void)
{
    GString *middle = g_string_new(NULL);
    size_t middle_len = (size_t)g_test_rand_int_range(1200, 6000);
    for (size_t i = 0; i < middle_len; i++)
        g_string_append_c(middle, (char)('a' + (char)(i % 26)));
    return middle;
}

/* When the full copy of a long sentence cannot be allocated, the cut
 * sentence still ends with the format's own fix (plain text, "%%" read as
 * '%'), and the next long sentence is stored whole again. */
static void test_long_sentence_without_memory_keeps_a_plain_fix(void)
{
    GString *middle = long_middle();
    curdi_status_refuse_next_copy_for_test();
    (void)curdi_fail(CURD_E_OVERFLOW,
                     "HEAD of the sentence %s. Fix: do the right thing, "
                     "100%% of the time.",
                     middle->str);
    const char *sentence = curd_last_error();
    g_assert_cmpuint(strlen(sentence), ==, 1023);
    g_assert_true(g_str_has_prefix(sentence, "HEAD of the sentence abc"));
    g_assert_true(g_str_has_suffix(
        sentence, " ... Fix: do the right thing, 100% of the time."));
    /* The refusal was for one copy only. */
    (void)curdi_fail(CURD_E_OVERFLOW, "HEAD %s. Fix: request %d bytes.",
                     middle->str, 42);
    g_assert_true(g_str_has_suffix(curd_last_error(),
                                   " ... Fix: request 42 bytes."));
    g_string_free(middle, TRUE);
}

/* A fix that needs formatting cannot be restored without the copy: the
 * cut sentence ends with a fix that says so. */
static void test_long_sentence_without_memory_ends_with_a_fix(void)
{
    GString *middle = long_middle();
    curdi_status_refuse_next_copy_for_test();
    (void)curdi_fail(CURD_E_OVERFLOW, "HEAD %s. Fix: request %d bytes.",
                     middle->str, 42);
    const char *sentence = curd_last_error();
    g_assert_cmpuint(strlen(sentence), <, 1024);
    g_assert_true(g_str_has_prefix(sentence, "HEAD abc"));
    g_assert_true(ends_with_fix(sentence));
    g_assert_nonnull(strstr(sentence, " ... Fix: "));
    g_assert_nonnull(strstr(sentence, "lack of host memory"));
    /* Nor can a sentence whose format has no fix at all. */
    curdi_status_refuse_next_copy_for_test();
    (void)curdi_fail(CURD_E_OVERFLOW, "HEAD %s, no fix given.", middle->str);
    g_assert_true(ends_with_fix(curd_last_error()));
    g_string_free(middle, TRUE);
}

/* ------------------------------------------------------------------------ */
static void test_driver_failure_maps_results(void)
{
    static const struct {
        int cu_result;
        curd_status status;
        const char *name;
    } cases[] = {
        {2, CURD_E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
        {100, CURD_E_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
        {101, CURD_E_NO_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
        {700, CURD_E_DEVICE_LOST, "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {719, CURD_E_DEVICE_LOST, "CUDA_ERROR_LAUNCH_FAILED"},
        {214, CURD_E_DEVICE_LOST, "CUDA_ERROR_ECC_UNCORRECTABLE"},
        {218, CURD_E_PROGRAM, "CUDA_ERROR_INVALID_PTX"},
        {209, CURD_E_PROGRAM, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
        {34, CURD_E_NO_DRIVER, "CUDA_ERROR_STUB_LIBRARY"},
        {803, CURD_E_NO_DRIVER, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
        {1, CURD_E_DRIVER, "CUDA_ERROR_INVALID_VALUE"},
        {600, CURD_E_DRIVER, "CUDA_ERROR_NOT_READY"},
        {999, CURD_E_DRIVER, "CUDA_ERROR_UNKNOWN"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        curd_status status =
            curdi_driver_fail(cases[i].cu_result, "cuSomething", "do this");
        g_assert_cmpint(status, ==, cases[i].status);
        g_assert_cmpint(curd_last_driver_code(), ==, cases[i].cu_result);
        const char *sentence = curd_last_error();
        g_assert_true(g_str_has_prefix(sentence, "cuSomething failed with "));
        g_assert_nonnull(strstr(sentence, cases[i].name));
        g_assert_true(g_str_has_suffix(sentence, "Fix: do this."));
    }
}

static void test_unrecognised_result_is_a_driver_error_with_its_number(void)
{
    int code = g_test_rand_int_range(5000, 100000);
    g_assert_cmpint(curdi_driver_fail(code, "cuOdd", NULL), ==, CURD_E_DRIVER);
    g_assert_cmpint(curd_last_driver_code(), ==, code);
    char *number = g_strdup_printf("(%d)", code);
    g_assert_nonnull(strstr(curd_last_error(), number));
    g_free(number);
    g_assert_true(ends_with_fix(curd_last_error()));
}

static void test_driver_failure_without_fix_gets_a_default_fix(void)
{
    g_assert_cmpint(curdi_driver_fail(2, "cuMemAlloc", NULL), ==,
                    CURD_E_OUT_OF_MEMORY);
    g_assert_true(ends_with_fix(curd_last_error()));
    /* A fix given as "Fix: ..." is not doubled. */
    (void)curdi_driver_fail(1, "cuX", "Fix: pass a valid value.");
    g_assert_true(g_str_has_suffix(curd_last_error(),
                                   ". Fix: pass a valid value."));
    g_assert_null(strstr(curd_last_error(), "Fix: Fix:"));
}

/* ------------------------------------------------------------------------ */
static void test_trace_is_silent_unless_asked(void)
{
    if (g_test_subprocess()) {
        g_unsetenv("CURD_TRACE");
        (void)curdi_fail(CURD_E_RANGE, "quiet failure. Fix: none.");
        curdi_trace("quiet trace line");
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("");
    g_test_trap_assert_stdout_unmatched("*quiet*");
}

static void test_trace_writes_to_stderr_when_asked(void)
{
    if (g_test_subprocess()) {
        g_setenv("CURD_TRACE", "1", TRUE);
        (void)curdi_fail(CURD_E_RANGE, "traced failure. Fix: none.");
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("*curd: CURD_E_RANGE: traced failure. Fix: "
                              "none.*");
}

/* ------------------------------------------------------------------------ */
static void test_version_matches_the_header(void)
{
    g_assert_cmpuint(curd_version(), ==, CURD_VERSION_NUMBER);
    char *expected = g_strdup_printf("%d.%d.%d", CURD_VERSION_MAJOR,
                                     CURD_VERSION_MINOR, CURD_VERSION_PATCH);
    g_assert_cmpstr(curd_version_string(), ==, expected);
    g_free(expected);
    g_assert_true(curd_version_string() == curd_version_string());
}

/* Each result struct's initialiser (curd 1.2) sets struct_size to the
 * struct's size and leaves every field after it zero. */
static void test_result_initialisers_set_struct_size(void)
{
    curd_stats stats = CURD_STATS_INIT;
    g_assert_cmpuint(stats.struct_size, ==, sizeof stats);
    g_assert_cmpuint(stats.h2d_bytes, ==, 0);
    g_assert_cmpuint(stats.imported_bytes, ==, 0);
    g_assert_cmpuint(stats.device_pool.live_bytes.peak, ==, 0);
    curd_device_props props = CURD_DEVICE_PROPS_INIT;
    g_assert_cmpuint(props.struct_size, ==, sizeof props);
    g_assert_cmpint(props.ordinal, ==, 0);
    g_assert_cmpuint(props.resident_budget_bytes, ==, 0);
    curd_session_stats session = CURD_SESSION_STATS_INIT;
    g_assert_cmpuint(session.struct_size, ==, sizeof session);
    g_assert_cmpuint(session.static_keyed_misses, ==, 0);
    curd_program_props program = CURD_PROGRAM_PROPS_INIT;
    g_assert_cmpuint(program.struct_size, ==, sizeof program);
    g_assert_cmpint(program.ptx_version, ==, 0);
    curd_timing timing = CURD_TIMING_INIT;
    g_assert_cmpuint(timing.struct_size, ==, sizeof timing);
    g_assert_cmpuint(timing.readback_ns, ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/status/result-initialisers-set-struct-size",
                    test_result_initialisers_set_struct_size);
    g_test_add_func("/status/names-cover-every-status-in-abi-order",
                    test_names_cover_every_status);
    g_test_add_func("/status/unknown-status-is-named-unknown",
                    test_unknown_status_has_unknown_name);
    g_test_add_func("/status/a-fresh-thread-has-no-error-and-no-driver-code",
                    test_fresh_thread_has_no_error);
    g_test_add_func("/status/failure-returns-its-status-and-stores-its-sentence",
                    test_failure_returns_status_and_stores_sentence);
    g_test_add_func("/status/public-failure-names-the-argument-and-ends-with-a-fix",
                    test_public_failure_sentence_ends_with_a_fix);
    g_test_add_func("/status/last-error-and-driver-code-are-thread-local",
                    test_last_error_is_thread_local);
    g_test_add_func("/status/long-sentence-keeps-its-head-and-its-fix",
                    test_long_sentence_keeps_head_and_fix);
    g_test_add_func("/status/long-sentence-without-memory-for-a-copy-keeps-a-plain-fix",
                    test_long_sentence_without_memory_keeps_a_plain_fix);
    g_test_add_func("/status/long-sentence-without-memory-for-a-copy-still-ends-with-a-fix",
                    test_long_sentence_without_memory_ends_with_a_fix);
    g_test_add_func("/status/driver-failure-maps-each-cuda-result",
                    test_driver_failure_maps_results);
    g_test_add_func("/status/unrecognised-cuda-result-is-a-driver-error-with-its-number",
                    test_unrecognised_result_is_a_driver_error_with_its_number);
    g_test_add_func("/status/driver-failure-without-a-fix-gets-a-default-fix",
                    test_driver_failure_without_fix_gets_a_default_fix);
    g_test_add_func("/status/trace-is-silent-unless-curd-trace-is-set",
                    test_trace_is_silent_unless_asked);
    g_test_add_func("/status/trace-writes-one-line-to-stderr-when-asked",
                    test_trace_writes_to_stderr_when_asked);
    g_test_add_func("/status/version-matches-the-header",
                    test_version_matches_the_header);
    return g_test_run();
}
