/* test-tuning.c - the transfer engine's tunables from the environment
 * (lib/transfer/tuning.c), on the CPU: the defaults, every variable, the size
 * suffixes, and values that are ignored. */
#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer/tuning.h"

static const char *const variables[] = {
    "CURD_TRANSFER_PATH",          "CURD_GATHER_MIN_SPANS",
    "CURD_GATHER_MAX_SPAN_BYTES",  "CURD_CHUNK_MIN_BYTES",
    "CURD_CHUNK_MAX_BYTES",        "CURD_STAGING_SLOTS",
    "CURD_COPY_THREADS",           "CURD_COPY_PIECE_BYTES",
    "CURD_COPY_PARALLEL_MIN",      "CURD_COPY_SPIN_US",
    "CURD_STREAMING_DOWNLOAD_MIN", "CURD_STREAMING_UPLOAD_MIN",
    "CURD_PAGEABLE_DIRECT_MAX",    "CURD_FENCE_SPIN_US",
    "CURD_LANDING_BYTES",          "CURD_UPLOAD_GROWTH_THREADS",
    "CURD_UPLOAD_GROWTH_MIN",      "CURD_COMPARE_PARALLEL_MIN",
    "CURD_TOUCH_DOWNLOAD_MAX",
};

static void unset_all(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(variables); i++)
        g_unsetenv(variables[i]);
}

static curdi_tuning read_with(const char *name, const char *value)
{
    curdi_tuning tuning;
    unset_all();
    if (name != NULL)
        g_setenv(name, value, TRUE);
    curdi_tuning_from_env(&tuning);
    unset_all();
    return tuning;
}

static void test_without_variables_the_defaults_hold(void)
{
    curdi_tuning defaults, read = read_with(NULL, NULL);
    curdi_tuning_defaults(&defaults);
    g_assert_cmpmem(&read, sizeof read, &defaults, sizeof defaults);
    g_assert_cmpint(defaults.gather.path, ==, CURDI_PATH_AUTO);
    g_assert_cmpuint(defaults.gather.min_spans, ==,
                     CURDI_GATHER_MIN_SPANS_DEFAULT);
    g_assert_cmpuint(defaults.chunk_min_bytes, ==, CURDI_CHUNK_MIN_BYTES_DEFAULT);
    g_assert_cmpuint(defaults.chunk_max_bytes, ==, CURDI_CHUNK_MAX_BYTES_DEFAULT);
    g_assert_cmpuint(defaults.slots, ==, CURDI_STAGING_SLOTS_DEFAULT);
    g_assert_cmpuint(defaults.copy_threads, ==, 0);
    g_assert_cmpuint(defaults.copy_spin_us, ==, 0);
    g_assert_cmpuint(defaults.upload_growth_threads, ==,
                     CURDI_UPLOAD_GROWTH_THREADS_DEFAULT);
    g_assert_cmpuint(defaults.upload_growth_min, ==,
                     CURDI_UPLOAD_GROWTH_MIN_DEFAULT);
    g_assert_cmpuint(defaults.streaming_upload_min, ==, 64u << 10);
    g_assert_cmpuint(defaults.fence_spin_us, ==, CURDI_FENCE_SPIN_US_DEFAULT);
    g_assert_cmpuint(defaults.landing_bytes, ==, CURDI_LANDING_BYTES_DEFAULT);
    g_assert_cmpuint(defaults.touch_download_max, ==,
                     CURDI_TOUCH_DOWNLOAD_MAX_DEFAULT);
}

static void test_every_variable_sets_its_field(void)
{
    g_assert_cmpint(read_with("CURD_TRANSFER_PATH", "dma").gather.path, ==,
                    CURDI_PATH_DMA);
    g_assert_cmpint(read_with("CURD_TRANSFER_PATH", "gather").gather.path, ==,
                    CURDI_PATH_GATHER);
    g_assert_cmpint(read_with("CURD_TRANSFER_PATH", "auto").gather.path, ==,
                    CURDI_PATH_AUTO);
    g_assert_cmpuint(read_with("CURD_GATHER_MIN_SPANS", "17").gather.min_spans,
                     ==, 17);
    g_assert_cmpuint(
        read_with("CURD_GATHER_MAX_SPAN_BYTES", "3m").gather.max_span_bytes, ==,
        3u << 20);
    g_assert_cmpuint(read_with("CURD_CHUNK_MIN_BYTES", "64K").chunk_min_bytes,
                     ==, 64u << 10);
    g_assert_cmpuint(read_with("CURD_CHUNK_MAX_BYTES", "1g").chunk_max_bytes,
                     ==, 1u << 30);
    g_assert_cmpuint(read_with("CURD_STAGING_SLOTS", "8").slots, ==, 8);
    g_assert_cmpuint(read_with("CURD_COPY_THREADS", "15").copy_threads, ==, 15);
    g_assert_cmpuint(read_with("CURD_COPY_PIECE_BYTES", "1M").copy_piece_bytes,
                     ==, 1u << 20);
    g_assert_cmpuint(read_with("CURD_COPY_PARALLEL_MIN", "0").copy_parallel_min,
                     ==, 0);
    g_assert_cmpuint(read_with("CURD_COPY_SPIN_US", "250").copy_spin_us, ==,
                     250);
    g_assert_cmpuint(
        read_with("CURD_COMPARE_PARALLEL_MIN", "4m").compare_parallel_min, ==,
        4u << 20);
    g_assert_cmpuint(
        read_with("CURD_COMPARE_PARALLEL_MIN", "off").compare_parallel_min,
        ==, UINT64_MAX);
    g_assert_cmpuint(
        read_with("CURD_UPLOAD_GROWTH_THREADS", "0").upload_growth_threads, ==,
        0);
    g_assert_cmpuint(
        read_with("CURD_UPLOAD_GROWTH_THREADS", "9").upload_growth_threads, ==,
        9);
    g_assert_cmpuint(
        read_with("CURD_UPLOAD_GROWTH_MIN", "128m").upload_growth_min, ==,
        128u << 20);
    g_assert_cmpuint(
        read_with("CURD_STREAMING_DOWNLOAD_MIN", "off").streaming_download_min,
        ==, UINT64_MAX);
    g_assert_cmpuint(
        read_with("CURD_STREAMING_UPLOAD_MIN", "32M").streaming_upload_min, ==,
        32u << 20);
    g_assert_cmpuint(
        read_with("CURD_TOUCH_DOWNLOAD_MAX", "256k").touch_download_max, ==,
        256u << 10);
    g_assert_cmpuint(
        read_with("CURD_PAGEABLE_DIRECT_MAX", "0").pageable_direct_max, ==, 0);
    g_assert_cmpuint(
        read_with("CURD_PAGEABLE_DIRECT_MAX", "64k").pageable_direct_max, ==,
        64u << 10);
    g_assert_cmpuint(read_with("CURD_FENCE_SPIN_US", "0").fence_spin_us, ==,
                     0);
    g_assert_cmpuint(read_with("CURD_FENCE_SPIN_US", "2000").fence_spin_us,
                     ==, 2000);
    g_assert_cmpuint(read_with("CURD_LANDING_BYTES", "0").landing_bytes, ==,
                     0);
    g_assert_cmpuint(read_with("CURD_LANDING_BYTES", "16m").landing_bytes, ==,
                     16u << 20);
}

static void test_bad_values_are_ignored(void)
{
    static const char *const bad[][2] = {
        {"CURD_TRANSFER_PATH", "fast"},     {"CURD_GATHER_MIN_SPANS", "0"},
        {"CURD_GATHER_MIN_SPANS", "-3"},    {"CURD_CHUNK_MIN_BYTES", "4095"},
        {"CURD_CHUNK_MAX_BYTES", "2g"},     {"CURD_STAGING_SLOTS", "9"},
        {"CURD_STAGING_SLOTS", "three"},    {"CURD_COPY_THREADS", "33"},
        {"CURD_COPY_PIECE_BYTES", "64kb"},  {"CURD_COPY_SPIN_US", "100001"},
        {"CURD_FENCE_SPIN_US", "100001"},  {"CURD_FENCE_SPIN_US", "-1"},
        {"CURD_LANDING_BYTES", "2g"},       {"CURD_LANDING_BYTES", "-4m"},
        {"CURD_COPY_PARALLEL_MIN", ""},     {"CURD_STAGING_SLOTS", " 4"},
        {"CURD_COPY_THREADS", "off"},       {"CURD_CHUNK_MIN_BYTES",
                                             "99999999999999999999"},
        {"CURD_GATHER_MAX_SPAN_BYTES", "18446744073709551615g"},
        {"CURD_UPLOAD_GROWTH_THREADS", "33"},
        {"CURD_UPLOAD_GROWTH_MIN", "off"},
        {"CURD_COMPARE_PARALLEL_MIN", "-1"},
    };
    curdi_tuning defaults;
    curdi_tuning_defaults(&defaults);
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        curdi_tuning read = read_with(bad[i][0], bad[i][1]);
        if (memcmp(&read, &defaults, sizeof read) != 0)
            g_error("%s=%s changed the tuning", bad[i][0], bad[i][1]);
    }
}

static void test_a_maximum_below_the_minimum_chunk_is_raised_to_it(void)
{
    curdi_tuning tuning;
    unset_all();
    g_setenv("CURD_CHUNK_MIN_BYTES", "16m", TRUE);
    g_setenv("CURD_CHUNK_MAX_BYTES", "1m", TRUE);
    curdi_tuning_from_env(&tuning);
    unset_all();
    g_assert_cmpuint(tuning.chunk_min_bytes, ==, 16u << 20);
    g_assert_cmpuint(tuning.chunk_max_bytes, ==, 16u << 20);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/tuning/without-variables-the-defaults-hold",
                    test_without_variables_the_defaults_hold);
    g_test_add_func("/tuning/every-variable-sets-its-field",
                    test_every_variable_sets_its_field);
    g_test_add_func("/tuning/bad-values-are-ignored",
                    test_bad_values_are_ignored);
    g_test_add_func("/tuning/a-maximum-below-the-minimum-chunk-is-raised-to-it",
                    test_a_maximum_below_the_minimum_chunk_is_raised_to_it);
    return g_test_run();
}
