/* curd-bench - curd against the raw CUDA driver, side by side in one run.
 *
 * For each scenario it checks every path byte for byte with random data,
 * then times the raw driver doing the work in the fewest calls and curd
 * doing the same work, interleaved, and prints median (min, max) per
 * operation, the curd/raw ratios and the targets of the issues with PASS or
 * MISS. tools/README-bench.md says what each scenario compares.
 *
 * Exit status: 0 when every scenario ran (MISS included, unless
 * --fail-on-miss), 1 when a check or a call failed, 2 for bad usage, 3 when
 * there is no driver or no such device, 4 when the time limit passed,
 * 5 for a MISS under --fail-on-miss. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench-common.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_NO_GPU 3
#define EXIT_TIME_LIMIT 4
#define EXIT_MISS 5

typedef struct scenario_entry {
    const char *name;
    const char *summary;
    int (*run)(const bench_env *env);
} scenario_entry;

static const scenario_entry scenarios[] = {
    {"pool/device-hit",
     "4 KiB device-pool cache hit vs cuMemAllocAsync (warm pool) and "
     "cuMemAlloc",
     bench_pool_device_hit},
    {"pool/pinned-hit", "4 KiB pinned-pool cache hit vs cuMemHostAlloc",
     bench_pool_pinned_hit},
    {"pool/threads",
     "cache-hit acquire+release throughput at 1, 2, 4, 8 threads",
     bench_pool_threads},
    {"transfer/fused-reads",
     "64 adjacent 4 KiB reads in one batch vs 64 raw copies and one 256 KiB "
     "copy",
     bench_transfer_fused_reads},
    {"transfer/pageable-upload-256M",
     "256 MiB upload from malloc memory vs cuMemcpyHtoD and pinned "
     "cuMemcpyHtoDAsync",
     bench_transfer_pageable_upload},
    {"transfer/pinned-upload-256M",
     "256 MiB upload from registered memory vs pinned cuMemcpyHtoDAsync",
     bench_transfer_pinned_upload},
    {"transfer/pageable-download-256M",
     "256 MiB download into malloc memory vs cuMemcpyDtoH and pinned "
     "cuMemcpyDtoHAsync",
     bench_transfer_pageable_download},
    {"transfer/pinned-download-256M",
     "256 MiB download into registered memory vs pinned cuMemcpyDtoHAsync",
     bench_transfer_pinned_download},
    {"transfer/small-roundtrip",
     "4 KiB upload + 4 KiB download, one fence each, vs raw copies",
     bench_transfer_small_roundtrip},
};
enum { SCENARIO_COUNT = sizeof scenarios / sizeof scenarios[0] };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: curd-bench [options]\n"
            "  --list              list the scenarios and exit\n"
            "  --scenario NAME     run only NAME (repeatable); a group name\n"
            "                      such as 'pool' or 'transfer' runs the group\n"
            "  --quick             fewer, shorter samples (a few seconds)\n"
            "  --samples N         samples per variant (256 MiB ones too)\n"
            "  --device N          device ordinal (default 0)\n"
            "  --seed N            seed of the random bytes (default: clock)\n"
            "  --json              print JSON on standard output, no table\n"
            "  --json=PATH         print the table and write JSON to PATH\n"
            "  --time-limit S      give up after S seconds (default 300)\n"
            "  --fail-on-miss      exit 5 when a target is missed\n"
            "  --help              this text\n");
}

static bool scenario_matches(const char *name, const char *pattern)
{
    size_t length = strlen(pattern);
    if (strcmp(name, pattern) == 0)
        return true;
    /* "pool" and "pool/" select the group. */
    if (length > 0 && pattern[length - 1] == '/')
        length--;
    return length > 0 && strncmp(name, pattern, length) == 0 &&
           name[length] == '/';
}

static bool parse_unsigned(const char *text, unsigned long long max,
                           unsigned long long *out)
{
    char *end = NULL;
    unsigned long long value;
    if (text == NULL || *text == '\0' || *text == '-')
        return false;
    errno = 0;
    value = strtoull(text, &end, 0);
    if (errno != 0 || end == NULL || *end != '\0' || value > max)
        return false;
    *out = value;
    return true;
}

static void on_time_limit(int signal_number)
{
    static const char message[] =
        "curd-bench: time limit reached; the run was stopped (raise it with "
        "--time-limit, or run one --scenario)\n";
    (void)signal_number;
    /* Only async-signal-safe calls here. */
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(EXIT_TIME_LIMIT);
}

int main(int argc, char **argv)
{
    bool selected[SCENARIO_COUNT];
    bool any_selected = false;
    bool quick = false;
    bool list = false;
    bool fail_on_miss = false;
    unsigned long long samples = 0;
    unsigned long long ordinal = 0;
    unsigned long long seed = 0;
    bool have_seed = false;
    unsigned long long time_limit_s = 300;
    bench_report_options report_options = {false, NULL};
    bench_env env;
    curd_device_props props;
    curd_device *device = NULL;
    curd_status status;
    int device_count = 0;
    int driver_version = 0;
    int index;
    int argi;
    int misses;
    int exit_code = 0;

    memset(selected, 0, sizeof selected);
    for (argi = 1; argi < argc; argi++) {
        const char *arg = argv[argi];
        const char *value = argi + 1 < argc ? argv[argi + 1] : NULL;
        if (strcmp(arg, "--list") == 0) {
            list = true;
        } else if (strcmp(arg, "--quick") == 0) {
            quick = true;
        } else if (strcmp(arg, "--fail-on-miss") == 0) {
            fail_on_miss = true;
        } else if (strcmp(arg, "--json") == 0) {
            report_options.json_stdout = true;
        } else if (strncmp(arg, "--json=", 7) == 0 && arg[7] != '\0') {
            report_options.json_path = arg + 7;
        } else if (strcmp(arg, "--scenario") == 0 && value != NULL) {
            bool found = false;
            for (index = 0; index < SCENARIO_COUNT; index++) {
                if (scenario_matches(scenarios[index].name, value)) {
                    selected[index] = true;
                    found = true;
                }
            }
            if (!found) {
                fprintf(stderr,
                        "curd-bench: no scenario '%s'; Fix: see --list\n",
                        value);
                return EXIT_USAGE;
            }
            any_selected = true;
            argi++;
        } else if (strcmp(arg, "--samples") == 0 &&
                   parse_unsigned(value, BENCH_MAX_SAMPLES, &samples) &&
                   samples > 0) {
            argi++;
        } else if (strcmp(arg, "--device") == 0 &&
                   parse_unsigned(value, 1024, &ordinal)) {
            argi++;
        } else if (strcmp(arg, "--seed") == 0 &&
                   parse_unsigned(value, UINT64_MAX, &seed)) {
            have_seed = true;
            argi++;
        } else if (strcmp(arg, "--time-limit") == 0 &&
                   parse_unsigned(value, 86400, &time_limit_s) &&
                   time_limit_s > 0) {
            argi++;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "curd-bench: bad argument '%s'%s\n", arg,
                    value == NULL ? "" : " (or its value)");
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (list) {
        for (index = 0; index < SCENARIO_COUNT; index++)
            printf("%-32s %s\n", scenarios[index].name,
                   scenarios[index].summary);
        return 0;
    }
    if (!any_selected)
        for (index = 0; index < SCENARIO_COUNT; index++)
            selected[index] = true;

    signal(SIGALRM, on_time_limit);
    alarm((unsigned)time_limit_s);

    status = curd_driver_version(&driver_version);
    if (status != CURD_OK) {
        fprintf(stderr, "curd-bench: no usable CUDA driver (%s): %s\n",
                curd_status_name(status), curd_last_error());
        return EXIT_NO_GPU;
    }
    status = curd_device_count(&device_count);
    if (status != CURD_OK || device_count <= 0 ||
        ordinal >= (unsigned long long)device_count) {
        fprintf(stderr,
                "curd-bench: no CUDA device %llu (%d device%s found)%s%s\n",
                ordinal, device_count, device_count == 1 ? "" : "s",
                status != CURD_OK ? ": " : "",
                status != CURD_OK ? curd_last_error() : "");
        return EXIT_NO_GPU;
    }
    status = curd_device_open((int)ordinal, NULL, &device);
    if (status != CURD_OK) {
        fprintf(stderr, "curd-bench: curd_device_open(%llu) returned %s: %s\n",
                ordinal, curd_status_name(status), curd_last_error());
        return status == CURD_E_NO_DEVICE ? EXIT_NO_GPU : EXIT_FAILED;
    }
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    status = curd_device_info(device, &props);
    if (status != CURD_OK) {
        fprintf(stderr, "curd-bench: curd_device_info returned %s: %s\n",
                curd_status_name(status), curd_last_error());
        curd_device_close(device);
        return EXIT_FAILED;
    }

    memset(&env, 0, sizeof env);
    env.device = device;
    env.driver = curdi_driver_get();
    env.props = props;
    env.driver_version = driver_version;
    env.quick = quick;
    env.samples = quick ? 11u : 41u;
    env.samples_large = quick ? 5u : 21u;
    env.sample_target_ns = quick ? 2000000u : 5000000u;
    env.warmup_ns = quick ? 20000000u : 50000000u;
    if (samples != 0) {
        env.samples = (unsigned)samples;
        env.samples_large = (unsigned)samples;
    }
    if (have_seed) {
        env.seed = seed;
    } else {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        env.seed = ((uint64_t)now.tv_sec * 1000000000u +
                    (uint64_t)now.tv_nsec) ^
                   ((uint64_t)getpid() << 32);
    }
    if (env.driver == NULL) {
        fprintf(stderr, "curd-bench: the driver table is not loaded after "
                        "curd_device_open\n");
        curd_device_close(device);
        return EXIT_FAILED;
    }

    bench_report_begin(&env, &report_options);
    for (index = 0; index < SCENARIO_COUNT; index++) {
        if (!selected[index])
            continue;
        if (scenarios[index].run(&env) != 0) {
            const char *failure = bench_failure();
            char line[1200];
            snprintf(line, sizeof line, "%s: %s", scenarios[index].name,
                     failure != NULL ? failure
                                     : "failed without a message (a bug in "
                                       "curd-bench)");
            fflush(stdout);
            fprintf(stderr, "curd-bench: FAILED %s\n", line);
            bench_report_end(line);
            curd_device_close(device);
            return EXIT_FAILED;
        }
    }
    misses = bench_report_end(NULL);
    if (misses < 0) {
        fprintf(stderr, "curd-bench: could not write %s: %s\n",
                report_options.json_path, strerror(errno));
        exit_code = EXIT_FAILED;
    } else if (misses > 0 && fail_on_miss) {
        exit_code = EXIT_MISS;
    }
    status = curd_device_close(device);
    if (status != CURD_OK && exit_code == 0) {
        fprintf(stderr, "curd-bench: curd_device_close returned %s: %s\n",
                curd_status_name(status), curd_last_error());
        exit_code = EXIT_FAILED;
    }
    return exit_code;
}
