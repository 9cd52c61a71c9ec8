/* curd-info - what curd sees: the driver, each device, its resident budget,
 * and a self-test per device (upload, a tiny kernel, download, verify).
 *
 * usage: curd-info [--json]
 *
 * Exit status: 0 every device passed; 1 a device failed to open or its
 * self-test failed; 2 no usable CUDA driver; 3 a driver but no device;
 * 64 a bad command line. curd-info uses only the public API of
 * libcurd.so.1. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curd.h"

enum {
    EXIT_ALL_PASSED = 0,
    EXIT_DEVICE_FAILED = 1,
    EXIT_NO_DRIVER = 2,
    EXIT_NO_DEVICE = 3,
    EXIT_USAGE = 64
};

/* ------------------------------------------------------------------------
 * Output helpers
 * ---------------------------------------------------------------------- */
static void json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0';
         c++) {
        switch (*c) {
        case '"':
            fputs("\\\"", stdout);
            break;
        case '\\':
            fputs("\\\\", stdout);
            break;
        case '\n':
            fputs("\\n", stdout);
            break;
        case '\t':
            fputs("\\t", stdout);
            break;
        default:
            if (*c < 0x20)
                printf("\\u%04x", *c);
            else
                putchar(*c);
        }
    }
    putchar('"');
}

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

static void print_device_json(const device_result *r)
{
    printf("{\"ordinal\":%d,\"opened\":%s", r->ordinal,
           r->open_status == CURD_OK ? "true" : "false");
    if (r->open_status != CURD_OK || r->info_status != CURD_OK) {
        printf(",\"status\":");
        json_string(curd_status_name(r->open_status != CURD_OK
                                         ? r->open_status
                                         : r->info_status));
        printf(",\"error\":");
        json_string(r->open_error);
    }
    if (r->open_status == CURD_OK && r->info_status == CURD_OK) {
        const curd_device_props *p = &r->props;
        printf(",\"name\":");
        json_string(p->name);
        printf(",\"pci_bus_id\":");
        json_string(p->pci_bus_id);
        printf(",\"compute_capability\":\"%d.%d\"",
               p->compute_capability_major, p->compute_capability_minor);
        printf(",\"total_memory_bytes\":%" PRIu64
               ",\"free_memory_bytes\":%" PRIu64
               ",\"resident_budget_bytes\":%" PRIu64,
               p->total_memory_bytes, p->free_memory_bytes,
               p->resident_budget_bytes);
        printf(",\"multiprocessor_count\":%d,\"max_threads_per_block\":%d",
               p->multiprocessor_count, p->max_threads_per_block);
        printf(",\"max_block_dim\":[%d,%d,%d],\"max_grid_dim\":[%d,%d,%d]",
               p->max_block_dim[0], p->max_block_dim[1], p->max_block_dim[2],
               p->max_grid_dim[0], p->max_grid_dim[1], p->max_grid_dim[2]);
        printf(",\"shared_memory_per_block_bytes\":%d,\"async_engine_count\":%d",
               p->shared_memory_per_block_bytes, p->async_engine_count);
        printf(",\"capabilities\":[");
        int shown = 0;
        for (size_t i = 0; i < CAPABILITY_COUNT; i++)
            if (p->capabilities & capability_names[i].bit) {
                printf("%s", shown++ ? "," : "");
                json_string(capability_names[i].name);
            }
        printf("]");
    }
    if (r->open_status == CURD_OK) {
        printf(",\"self_test\":{\"passed\":%s,\"report\":",
               r->self_test_status == CURD_OK ? "true" : "false");
        json_string(r->self_test_report);
        printf("}");
    }
    printf("}");
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */
static void usage(FILE *to)
{
    fputs("usage: curd-info [--json]\n"
          "Prints the CUDA driver version, each device's properties and "
          "resident\nbudget, and runs a self-test on each device.\n"
          "Exit status: 0 all passed, 1 a device failed, 2 no CUDA driver, "
          "3 no device.\n",
          to);
}

/* Driver-level failures: one line, a distinct exit status. */
static int report_no_driver(bool json, curd_status status)
{
    int code = status == CURD_E_NO_DEVICE ? EXIT_NO_DEVICE : EXIT_NO_DRIVER;
    const char *what =
        status == CURD_E_NO_DEVICE ? "no CUDA device" : "no CUDA driver";
    if (json) {
        printf("{\"curd_version\":");
        json_string(curd_version_string());
        printf(",\"error\":");
        json_string(status == CURD_E_NO_DEVICE ? "no_device" : "no_driver");
        printf(",\"status\":");
        json_string(curd_status_name(status));
        printf(",\"message\":");
        json_string(curd_last_error());
        printf("}\n");
    } else {
        printf("curd-info: %s: %s\n", what, curd_last_error());
    }
    return code;
}

int main(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return EXIT_ALL_PASSED;
        } else {
            fprintf(stderr, "curd-info: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }

    int driver_version = 0;
    curd_status status = curd_driver_version(&driver_version);
    if (status != CURD_OK)
        return report_no_driver(json, status);
    int count = 0;
    status = curd_device_count(&count);
    if (status != CURD_OK)
        return report_no_driver(json, status);

    if (count == 0) {
        const char *message =
            "the CUDA driver loaded but sees no device. Fix: check "
            "nvidia-smi and CUDA_VISIBLE_DEVICES.";
        if (json) {
            printf("{\"curd_version\":");
            json_string(curd_version_string());
            printf(",\"driver_version\":%d,\"error\":\"no_device\","
                   "\"status\":\"CURD_E_NO_DEVICE\",\"message\":",
                   driver_version);
            json_string(message);
            printf("}\n");
        } else {
            printf("curd-info: no CUDA device: %s\n", message);
        }
        return EXIT_NO_DEVICE;
    }

    if (json) {
        printf("{\"curd_version\":");
        json_string(curd_version_string());
        printf(",\"driver_version\":%d,\"device_count\":%d,\"devices\":[",
               driver_version, count);
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
        if (json) {
            if (ordinal > 0)
                putchar(',');
            print_device_json(&result);
        } else {
            print_device_text(&result);
        }
        fflush(stdout);
    }

    if (json)
        printf("],\"passed\":%s}\n", failed == 0 ? "true" : "false");
    else
        printf("%d of %d device%s passed the self-test\n", count - failed,
               count, count == 1 ? "" : "s");
    return failed == 0 ? EXIT_ALL_PASSED : EXIT_DEVICE_FAILED;
}
