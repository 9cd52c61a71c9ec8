/* curd-info - what curd sees: the driver, each device, its resident budget,
 * and a self-test per device (upload, a tiny kernel, download, verify).
 *
 * usage: curd-info [--json] [--help] [--version]
 *
 * Exit status, as every program curd ships (curd-bench, the examples): 0
 * every device passed; 1 a device failed to open or its self-test failed;
 * 2 a bad command line; 3 no usable CUDA driver, or a driver but no
 * device. Errors go to standard error, each line starting "curd-info: ";
 * with --json the report on standard output also carries the error.
 * curd-info uses only the public API of libcurd.so.1. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curd.h"
#include "json-writer.h"
#include "options.h"

enum {
    EXIT_ALL_PASSED = 0,
    EXIT_DEVICE_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_NO_DRIVER_OR_DEVICE = 3
};

/* ------------------------------------------------------------------------
 * Output helpers
 * ---------------------------------------------------------------------- */
static void human_bytes(uint64_t bytes, char *out, size_t capacity)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = (double)bytes;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024.0;
        unit++;
    }
    if (unit == 0)
        snprintf(out, capacity, "%" PRIu64 " B", bytes);
    else
        snprintf(out, capacity, "%.1f %s", value, units[unit]);
}

static const struct {
    uint32_t bit;
    const char *name;
} capability_names[] = {
    {CURD_CAP_COOPERATIVE_LAUNCH, "cooperative-launch"},
    {CURD_CAP_UNIFIED_ADDRESSING, "unified-addressing"},
    {CURD_CAP_STREAM_ORDERED_ALLOC, "stream-ordered-alloc"},
    {CURD_CAP_HOST_REGISTER, "host-register"},
    {CURD_CAP_SHAREABLE, "shareable"},
};
#define CAPABILITY_COUNT (sizeof capability_names / sizeof capability_names[0])

/* ------------------------------------------------------------------------
 * One device
 * ---------------------------------------------------------------------- */
typedef struct device_result {
    int ordinal;
    curd_status open_status;
    char open_error[1024];
    curd_device_props props;
    curd_status info_status;
    curd_status self_test_status;
    char self_test_report[1024];
} device_result;

static void probe_device(int ordinal, device_result *result)
{
    memset(result, 0, sizeof *result);
    result->ordinal = ordinal;
    curd_device *device = NULL;
    result->open_status = curd_device_open(ordinal, NULL, &device);
    if (result->open_status != CURD_OK) {
        snprintf(result->open_error, sizeof result->open_error, "%s",
                 curd_last_error());
        return;
    }
    result->props.struct_size = sizeof result->props;
    result->info_status = curd_device_info(device, &result->props);
    if (result->info_status != CURD_OK)
        snprintf(result->open_error, sizeof result->open_error, "%s",
                 curd_last_error());
    result->self_test_status = curd_device_self_test(
        device, result->self_test_report, sizeof result->self_test_report);
    if (curd_device_close(device) != CURD_OK &&
        result->self_test_status == CURD_OK) {
        result->self_test_status = CURD_E_DRIVER;
        snprintf(result->self_test_report, sizeof result->self_test_report,
                 "closing the device failed: %s", curd_last_error());
    }
}

static bool device_passed(const device_result *r)
{
    return r->open_status == CURD_OK && r->info_status == CURD_OK &&
           r->self_test_status == CURD_OK;
}

static void print_device_text(const device_result *r)
{
    if (r->open_status != CURD_OK) {
        printf("device %d: cannot open: %s: %s\n", r->ordinal,
               curd_status_name(r->open_status), r->open_error);
        return;
    }
    const curd_device_props *p = &r->props;
    if (r->info_status != CURD_OK) {
        printf("device %d: info failed: %s: %s\n", r->ordinal,
               curd_status_name(r->info_status), r->open_error);
    } else {
        char total[32], free_now[32], budget[32], shared[32];
        human_bytes(p->total_memory_bytes, total, sizeof total);
        human_bytes(p->free_memory_bytes, free_now, sizeof free_now);
        human_bytes(p->resident_budget_bytes, budget, sizeof budget);
        human_bytes((uint64_t)p->shared_memory_per_block_bytes, shared,
                    sizeof shared);
        printf("device %d: %s\n", r->ordinal, p->name);
        printf("  pci bus id          %s\n", p->pci_bus_id);
        printf("  compute capability  %d.%d\n", p->compute_capability_major,
               p->compute_capability_minor);
        printf("  memory              %s total, %s free\n", total, free_now);
        printf("  resident budget     %s (%" PRIu64 " bytes)\n", budget,
               p->resident_budget_bytes);
        printf("  multiprocessors     %d\n", p->multiprocessor_count);
        printf("  max threads/block   %d\n", p->max_threads_per_block);
        printf("  max block           %d x %d x %d\n", p->max_block_dim[0],
               p->max_block_dim[1], p->max_block_dim[2]);
        printf("  max grid            %d x %d x %d\n", p->max_grid_dim[0],
               p->max_grid_dim[1], p->max_grid_dim[2]);
        printf("  shared memory/block %s\n", shared);
        printf("  async engines       %d\n", p->async_engine_count);
        printf("  capabilities       ");
        int shown = 0;
        for (size_t i = 0; i < CAPABILITY_COUNT; i++)
            if (p->capabilities & capability_names[i].bit) {
                printf(" %s", capability_names[i].name);
                shown++;
            }
        printf("%s\n", shown ? "" : " none");
    }
    printf("  self-test           %s: %s\n",
           r->self_test_status == CURD_OK ? "PASS" : "FAIL",
           r->self_test_report);
}

static void print_device_json(json_writer *json, const device_result *r)
{
    json_object_begin(json);
    json_member_int(json, "ordinal", r->ordinal);
    json_member_bool(json, "opened", r->open_status == CURD_OK);
    if (r->open_status != CURD_OK || r->info_status != CURD_OK) {
        json_member_string(json, "status",
                           curd_status_name(r->open_status != CURD_OK
                                                ? r->open_status
                                                : r->info_status));
        json_member_string(json, "error", r->open_error);
    }
    if (r->open_status == CURD_OK && r->info_status == CURD_OK) {
        const curd_device_props *p = &r->props;
        char capability[16];
        snprintf(capability, sizeof capability, "%d.%d",
                 p->compute_capability_major, p->compute_capability_minor);
        json_member_string(json, "name", p->name);
        json_member_string(json, "pci_bus_id", p->pci_bus_id);
        json_member_string(json, "compute_capability", capability);
        json_member_uint(json, "total_memory_bytes", p->total_memory_bytes);
        json_member_uint(json, "free_memory_bytes", p->free_memory_bytes);
        json_member_uint(json, "resident_budget_bytes",
                         p->resident_budget_bytes);
        json_member_int(json, "multiprocessor_count", p->multiprocessor_count);
        json_member_int(json, "max_threads_per_block",
                        p->max_threads_per_block);
        json_key(json, "max_block_dim");
        json_array_begin(json);
        for (int i = 0; i < 3; i++)
            json_int(json, p->max_block_dim[i]);
        json_array_end(json);
        json_key(json, "max_grid_dim");
        json_array_begin(json);
        for (int i = 0; i < 3; i++)
            json_int(json, p->max_grid_dim[i]);
        json_array_end(json);
        json_member_int(json, "shared_memory_per_block_bytes",
                        p->shared_memory_per_block_bytes);
        json_member_int(json, "async_engine_count", p->async_engine_count);
        json_key(json, "capabilities");
        json_array_begin(json);
        for (size_t i = 0; i < CAPABILITY_COUNT; i++)
            if (p->capabilities & capability_names[i].bit)
                json_string(json, capability_names[i].name);
        json_array_end(json);
    }
    if (r->open_status == CURD_OK) {
        json_key(json, "self_test");
        json_object_begin(json);
        json_member_bool(json, "passed", r->self_test_status == CURD_OK);
        json_member_string(json, "report", r->self_test_report);
        json_object_end(json);
    }
    json_object_end(json);
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */
static void usage(FILE *to)
{
    fputs("usage: curd-info [--json] [--help] [--version]\n"
          "Prints the CUDA driver version, each device's properties and "
          "resident\nbudget, and runs a self-test on each device.\n"
          "  --json      the same report as one JSON object\n"
          "  --version   print the versions and exit\n"
          "  --help      this text\n"
          "Exit status: 0 all passed, 1 a device failed, 2 a bad command "
          "line,\n3 no CUDA driver or no device.\n",
          to);
}

/* Driver-level failures: one line on standard error (and, with --json,
 * the error in the report), one exit status. */
static int report_no_gpu(json_writer *json, curd_status status,
                         int driver_version, const char *message)
{
    bool no_device = status == CURD_E_NO_DEVICE;
    if (json != NULL) {
        json_object_begin(json);
        json_member_string(json, "curd_version", curd_version_string());
        if (driver_version != 0) {
            json_member_int(json, "driver_version", driver_version);
        }
        json_member_string(json, "error",
                           no_device ? "no_device" : "no_driver");
        json_member_string(json, "status", curd_status_name(status));
        json_member_string(json, "message", message);
        json_object_end(json);
        putchar('\n');
    }
    fprintf(stderr, "curd-info: %s: %s\n",
            no_device ? "no CUDA device" : "no CUDA driver", message);
    return EXIT_NO_DRIVER_OR_DEVICE;
}

/* -1 to go on, else the exit status (after --help, --version or a bad
 * argument). */
static int parse_options(int argc, char **argv, bool *json)
{
    enum { OPT_JSON = 256, OPT_VERSION, OPT_HELP };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int option;
    opterr = 0; /* the message below names the argument and the usage */
    while ((option = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (option) {
        case OPT_JSON:
            *json = true;
            break;
        case OPT_VERSION:
            printf("curd-info %d.%d.%d (libcurd %s)\n", CURD_VERSION_MAJOR,
                   CURD_VERSION_MINOR, CURD_VERSION_PATCH,
                   curd_version_string());
            return EXIT_ALL_PASSED;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return EXIT_ALL_PASSED;
        default:
            tool_bad_option("curd-info", argv[optind - 1], optopt);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "curd-info: unknown argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    return -1;
}

int main(int argc, char **argv)
{
    bool json = false;
    json_writer writer;
    json_writer *out = NULL;
    int exit_code = parse_options(argc, argv, &json);
    if (exit_code >= 0)
        return exit_code;
    if (json) {
        json_writer_init(&writer, stdout);
        out = &writer;
    }

    int driver_version = 0;
    curd_status status = curd_driver_version(&driver_version);
    if (status != CURD_OK)
        return report_no_gpu(out, status, 0, curd_last_error());
    int count = 0;
    status = curd_device_count(&count);
    if (status != CURD_OK)
        return report_no_gpu(out, status, driver_version, curd_last_error());
    if (count == 0)
        return report_no_gpu(out, CURD_E_NO_DEVICE, driver_version,
                             "the CUDA driver loaded but sees no device. "
                             "Fix: check nvidia-smi and "
                             "CUDA_VISIBLE_DEVICES.");

    if (out != NULL) {
        json_object_begin(out);
        json_member_string(out, "curd_version", curd_version_string());
        json_member_int(out, "driver_version", driver_version);
        json_member_int(out, "device_count", count);
        json_key(out, "devices");
        json_array_begin(out);
    } else {
        printf("curd %s, CUDA driver %d.%d (%d), %d device%s\n",
               curd_version_string(), driver_version / 1000,
               driver_version % 1000 / 10, driver_version, count,
               count == 1 ? "" : "s");
    }

    int failed = 0;
    for (int ordinal = 0; ordinal < count; ordinal++) {
        device_result result;
        probe_device(ordinal, &result);
        if (!device_passed(&result))
            failed++;
        if (out != NULL)
            print_device_json(out, &result);
        else
            print_device_text(&result);
        fflush(stdout);
    }

    if (out != NULL) {
        json_array_end(out);
        json_member_bool(out, "passed", failed == 0);
        json_object_end(out);
        putchar('\n');
    } else {
        printf("%d of %d device%s passed the self-test\n", count - failed,
               count, count == 1 ? "" : "s");
    }
    return failed == 0 ? EXIT_ALL_PASSED : EXIT_DEVICE_FAILED;
}
