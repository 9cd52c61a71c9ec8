/* main.c - the command line and the run of a benchmark program. */
#include "harness/main.h"
#include "harness/progress.h"
#include "harness/report.h"
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_NO_GPU 3
#define EXIT_TIME_LIMIT 4
#define EXIT_MISS 5

/* What the command line asks for. */
typedef struct bench_options {
    bool list;
    bool quick;
    bool fail_on_miss;
    unsigned long long samples; /* 0: the mode's default */
    unsigned long long ordinal;
    unsigned long long seed;
    bool have_seed;
    unsigned long long time_limit_s;
    bench_report_options report;
} bench_options;

static void usage(const bench_program *program, FILE *out)
{
    fprintf(out,
            "usage: %s [options]\n"
            "  --list              list the scenarios and exit\n"
            "  --scenario=NAME     run only NAME (repeatable); a group name\n"
            "                      such as 'pool' or 'transfer' runs the group;\n"
            "                      scenarios listed 'on request' run only so\n"
            "  --quick             fewer, shorter samples (a few seconds)\n"
            "  --samples=N         samples per variant (256 MiB ones too)\n"
            "  --device=N          device ordinal (default 0)\n"
            "  --seed=N            seed of the random bytes (default: clock)\n"
            "  --json              print JSON on standard output, no table\n"
            "  --json=PATH         print the table and write JSON to PATH\n"
            "  --csv               print CSV on standard output, no table\n"
            "  --csv=PATH          print the table and write CSV to PATH\n"
            "  --time-limit=S      give up after S seconds (default 300)\n"
            "  --fail-on-miss      exit 5 when a target is missed\n"
            "  --version           print the versions and exit\n"
            "  --help              this text\n"
            "Options that take a value accept --opt=VALUE and --opt VALUE.\n"
            "Exit status: 0 ran, 1 a check or call failed, 2 usage, 3 no "
            "driver or device,\n4 time limit, 5 a target missed under "
            "--fail-on-miss.\n",
            program->name);
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

enum {
    OPT_LIST = 256,
    OPT_SCENARIO,
    OPT_QUICK,
    OPT_SAMPLES,
    OPT_DEVICE,
    OPT_SEED,
    OPT_JSON,
    OPT_CSV,
    OPT_TIME_LIMIT,
    OPT_FAIL_ON_MISS,
    OPT_VERSION,
    OPT_HELP
};

static const struct option long_options[] = {
    {"list", no_argument, NULL, OPT_LIST},
    {"scenario", required_argument, NULL, OPT_SCENARIO},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"json", optional_argument, NULL, OPT_JSON},
    {"csv", optional_argument, NULL, OPT_CSV},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"fail-on-miss", no_argument, NULL, OPT_FAIL_ON_MISS},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* -1 to go on, else the exit status (after --help, --version or a bad
 * argument). */
static int parse_options(const bench_program *program, int argc, char **argv,
                         bench_options *options, bool *selected)
{
    int option;
    bool any_selected = false;
    unsigned index;

    memset(options, 0, sizeof *options);
    options->time_limit_s = 300;
    opterr = 0; /* the messages below name the program and the fix */
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) !=
           -1) {
        bool found = false;
        bool good = true;
        switch (option) {
        case OPT_LIST:
            options->list = true;
            break;
        case OPT_SCENARIO:
            for (index = 0; index < program->scenario_count; index++)
                if (scenario_matches(program->scenarios[index].name,
                                     optarg)) {
                    selected[index] = true;
                    found = true;
                }
            if (!found) {
                fprintf(stderr, "%s: no scenario '%s'. Fix: see --list.\n",
                        program->name, optarg);
                return EXIT_USAGE;
            }
            any_selected = true;
            break;
        case OPT_QUICK:
            options->quick = true;
            break;
        case OPT_SAMPLES:
            good = parse_unsigned(optarg, BENCH_MAX_SAMPLES,
                                  &options->samples) &&
                   options->samples > 0;
            break;
        case OPT_DEVICE:
            good = parse_unsigned(optarg, 1024, &options->ordinal);
            break;
        case OPT_SEED:
            good = parse_unsigned(optarg, UINT64_MAX, &options->seed);
            options->have_seed = good;
            break;
        case OPT_JSON:
            if (optarg != NULL)
                options->report.json_path = optarg;
            else
                options->report.json_stdout = true;
            break;
        case OPT_CSV:
            if (optarg != NULL)
                options->report.csv_path = optarg;
            else
                options->report.csv_stdout = true;
            break;
        case OPT_TIME_LIMIT:
            good = parse_unsigned(optarg, 86400, &options->time_limit_s) &&
                   options->time_limit_s > 0;
            break;
        case OPT_FAIL_ON_MISS:
            options->fail_on_miss = true;
            break;
        case OPT_VERSION:
            printf("%s %d.%d.%d (libcurd %s)\n", program->name,
                   CURD_VERSION_MAJOR, CURD_VERSION_MINOR, CURD_VERSION_PATCH,
                   curd_version_string());
            return 0;
        case 'h':
        case OPT_HELP:
            usage(program, stdout);
            return 0;
        default:
            tool_bad_option(program->name, argv[optind - 1], optopt);
            usage(program, stderr);
            return EXIT_USAGE;
        }
        if (!good) {
            /* The option as written, without its "=VALUE"; "--opt VALUE"
             * took two arguments. */
            const char *written = argv[optind - 1] == optarg
                                      ? argv[optind - 2]
                                      : argv[optind - 1];
            fprintf(stderr, "%s: bad value '%s' for %.*s. Fix: see --help.\n",
                    program->name, optarg, (int)strcspn(written, "="),
                    written);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", program->name,
                argv[optind]);
        usage(program, stderr);
        return EXIT_USAGE;
    }
    if (options->report.json_stdout && options->report.csv_stdout) {
        fprintf(stderr, "%s: --json and --csv both on standard output. Fix: "
                        "give one of them a file (--csv=PATH).\n",
                program->name);
        return EXIT_USAGE;
    }
    if (!any_selected)
        for (index = 0; index < program->scenario_count; index++)
            selected[index] = !program->scenarios[index].on_request;
    return -1;
}

static void on_time_limit(int signal_number)
{
    static const char message[] =
        "benchmark: time limit reached; the run was stopped (raise it with "
        "--time-limit, or run one --scenario)\n";
    (void)signal_number;
    /* Only async-signal-safe calls here. */
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(EXIT_TIME_LIMIT);
}

static void settle_env(bench_env *env, const bench_options *options)
{
    env->quick = options->quick;
    env->samples = options->quick ? 11u : 41u;
    env->samples_large = options->quick ? 5u : 21u;
    env->sample_target_ns = options->quick ? 2000000u : 5000000u;
    env->warmup_ns = options->quick ? 20000000u : 50000000u;
    if (options->samples != 0) {
        env->samples = (unsigned)options->samples;
        env->samples_large = (unsigned)options->samples;
    }
    if (options->have_seed) {
        env->seed = options->seed;
    } else {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        env->seed = ((uint64_t)now.tv_sec * 1000000000u +
                     (uint64_t)now.tv_nsec) ^
                    ((uint64_t)getpid() << 32);
    }
}

/* Opens the device through curd and reaches the same device's primary
 * context through the raw driver. 0, or the exit status. */
static int open_device(const bench_program *program,
                       const bench_options *options, bench_env *env)
{
    int device_count = 0;
    char why[512];
    curd_status status = curd_driver_version(&env->driver_version);
    bench_cu_result cu_result;

    if (status != CURD_OK) {
        fprintf(stderr, "%s: no usable CUDA driver (%s): %s\n", program->name,
                curd_status_name(status), curd_last_error());
        return EXIT_NO_GPU;
    }
    status = curd_device_count(&device_count);
    if (status != CURD_OK || device_count <= 0 ||
        options->ordinal >= (unsigned long long)device_count) {
        fprintf(stderr, "%s: no CUDA device %llu (%d device%s found)%s%s\n",
                program->name, options->ordinal, device_count,
                device_count == 1 ? "" : "s", status != CURD_OK ? ": " : "",
                status != CURD_OK ? curd_last_error() : "");
        return EXIT_NO_GPU;
    }
    status = curd_device_open((int)options->ordinal, NULL, &env->device);
    if (status != CURD_OK) {
        fprintf(stderr, "%s: curd_device_open(%llu) returned %s: %s\n",
                program->name, options->ordinal, curd_status_name(status),
                curd_last_error());
        return status == CURD_E_NO_DEVICE ? EXIT_NO_GPU : EXIT_FAILED;
    }
    env->props.struct_size = sizeof env->props;
    status = curd_device_info(env->device, &env->props);
    if (status != CURD_OK) {
        fprintf(stderr, "%s: curd_device_info returned %s: %s\n",
                program->name, curd_status_name(status), curd_last_error());
        return EXIT_FAILED;
    }
    env->cu = bench_cuda_load(why, sizeof why);
    if (env->cu == NULL) {
        fprintf(stderr, "%s: the raw driver for the baselines: %s\n",
                program->name, why);
        return EXIT_FAILED;
    }
    cu_result = env->cu->cuDeviceGet(&env->cu_device, env->props.ordinal);
    if (cu_result == BENCH_CUDA_SUCCESS)
        cu_result = env->cu->cuDevicePrimaryCtxRetain(&env->context,
                                                      env->cu_device);
    if (cu_result != BENCH_CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuDeviceGet/cuDevicePrimaryCtxRetain(%d) "
                        "returned %s\n",
                program->name, env->props.ordinal,
                bench_cuda_result_name(cu_result));
        env->context = NULL;
        return EXIT_FAILED;
    }
    return 0;
}

static int close_device(const bench_program *program, bench_env *env,
                        int exit_code)
{
    curd_status status;
    if (env->context != NULL)
        env->cu->cuDevicePrimaryCtxRelease(env->cu_device);
    if (env->device == NULL)
        return exit_code;
    status = curd_device_close(env->device);
    if (status != CURD_OK && exit_code == 0) {
        fprintf(stderr, "%s: curd_device_close returned %s: %s\n",
                program->name, curd_status_name(status), curd_last_error());
        exit_code = EXIT_FAILED;
    }
    return exit_code;
}

static unsigned count_selected(const bool *selected, unsigned count)
{
    unsigned index, total = 0;
    for (index = 0; index < count; index++)
        total += selected[index] ? 1u : 0u;
    return total;
}

int bench_main(const bench_program *program, int argc, char **argv)
{
    bool *selected = calloc(program->scenario_count, sizeof *selected);
    bench_options options;
    bench_env env;
    unsigned index, position = 0;
    int misses;
    int exit_code;

    if (selected == NULL)
        return EXIT_FAILED;
    exit_code = parse_options(program, argc, argv, &options, selected);
    if (exit_code >= 0)
        goto done;
    exit_code = 0;
    if (options.list) {
        int name_width = 0;
        for (index = 0; index < program->scenario_count; index++) {
            size_t name_len = strlen(program->scenarios[index].name);
            if (name_len > (size_t)name_width)
                name_width = (int)name_len;
        }
        for (index = 0; index < program->scenario_count; index++)
            printf("%-*s  %s%s\n", name_width,
                   program->scenarios[index].name,
                   program->scenarios[index].summary,
                   program->scenarios[index].on_request ? " (on request)"
                                                        : "");
        goto done;
    }

    signal(SIGALRM, on_time_limit);
    alarm((unsigned)options.time_limit_s);
    memset(&env, 0, sizeof env);
    settle_env(&env, &options);
    exit_code = open_device(program, &options, &env);
    if (exit_code != 0) {
        exit_code = close_device(program, &env, exit_code);
        goto done;
    }

    bench_report_begin(&env, &options.report);
    bench_progress_begin(count_selected(selected, program->scenario_count));
    for (index = 0; index < program->scenario_count; index++) {
        const bench_scenario_entry *entry = &program->scenarios[index];
        if (!selected[index])
            continue;
        bench_progress_scenario(position++, entry->name);
        if (entry->run(&env) != 0) {
            const char *failure = bench_failure();
            char line[1200];
            snprintf(line, sizeof line, "%s: %s", entry->name,
                     failure != NULL ? failure
                                     : "failed without a message (a bug in "
                                       "the benchmark)");
            bench_progress_clear();
            fflush(stdout);
            fprintf(stderr, "%s: FAILED %s\n", program->name, line);
            bench_report_end(line);
            exit_code = close_device(program, &env, EXIT_FAILED);
            goto done;
        }
    }
    misses = bench_report_end(NULL);
    if (misses < 0) {
        fprintf(stderr, "%s: could not write the JSON or CSV file: %s\n",
                program->name, strerror(errno));
        exit_code = EXIT_FAILED;
    } else if (misses > 0 && options.fail_on_miss) {
        exit_code = EXIT_MISS;
    }
    exit_code = close_device(program, &env, exit_code);

done:
    free(selected);
    return exit_code;
}
