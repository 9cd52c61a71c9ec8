/* api-world.c - the world the sweep's entries run in, and its checks (see
 * api-sweep.h): opening and closing it, random bytes, comparing buffers,
 * and the failed-check handler. */
#include "support/api-sweep.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/kernel-load.h"

/* ------------------------------------------------------------------------
 * Checks
 * ---------------------------------------------------------------------- */
static void default_handler(const char *file, int line, const char *message)
{
    fprintf(stderr, "%s:%d: %s\n", file, line, message);
    abort();
}

static api_check_handler check_handler = default_handler;

void api_check_set_handler(api_check_handler handler)
{
    check_handler = handler != NULL ? handler : default_handler;
}

char api_run_description[256];

void api_check_failed(const char *file, int line, const char *format, ...)
{
    char message[2048];
    int used = snprintf(message, sizeof message, "%s%s",
                        api_run_description,
                        api_run_description[0] != '\0' ? ": " : "");
    if (used < 0 || (size_t)used >= sizeof message)
        used = 0;
    va_list args;
    va_start(args, format);
    vsnprintf(message + used, sizeof message - (size_t)used, format, args);
    va_end(args);
    check_handler(file, line, message);
    abort(); /* a handler that returned */
}

/* ------------------------------------------------------------------------
 * Random bytes (splitmix64: the harness seeds it, so a run replays)
 * ---------------------------------------------------------------------- */
static uint64_t next_random(api_world *w)
{
    uint64_t z = (w->random_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void api_world_random(api_world *w, void *bytes, size_t len)
{
    unsigned char *out = bytes;
    for (size_t at = 0; at < len; at += 8) {
        uint64_t word = next_random(w);
        size_t take = len - at < 8 ? len - at : 8;
        memcpy(out + at, &word, take);
    }
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */
static unsigned char *download(api_world *w, curd_buffer buffer, size_t len)
{
    unsigned char *bytes = malloc(len);
    API_CHECK(bytes != NULL, "out of host memory");
    memset(bytes, 0x5A, len);
    API_OK(curd_buffer_download(w->device, buffer, bytes, len));
    return bytes;
}

void api_world_expect_buffer(api_world *w, curd_buffer buffer,
                             const unsigned char *expected, size_t len)
{
    unsigned char *bytes = download(w, buffer, len);
    if (memcmp(bytes, expected, len) != 0) {
        size_t at = 0;
        while (bytes[at] == expected[at])
            at++;
        unsigned got = bytes[at], want = expected[at];
        free(bytes);
        api_check_failed(__FILE__, __LINE__,
                         "byte %zu of %zu of a buffer is 0x%02x, expected "
                         "0x%02x",
                         at, len, got, want);
    }
    free(bytes);
}

/* FNV-1a over the buffer's bytes. */
static uint64_t buffer_sum(api_world *w, curd_buffer buffer, size_t len)
{
    unsigned char *bytes = download(w, buffer, len);
    uint64_t sum = UINT64_C(0xcbf29ce484222325);
    for (size_t at = 0; at < len; at++)
        sum = (sum ^ bytes[at]) * UINT64_C(0x100000001b3);
    free(bytes);
    return sum;
}

uint64_t api_world_bystander_sum(api_world *w)
{
    return buffer_sum(w, w->bystander, API_BYSTANDER_BYTES);
}

bool api_world_lost(api_world *w, curd_status status)
{
    uint64_t bytes;
    return status == CURD_E_DEVICE_LOST ||
           curd_device_resident_bytes(w->device, &bytes) ==
               CURD_E_DEVICE_LOST;
}

void api_world_reset_buffers(api_world *w)
{
    api_world_random(w, w->small_model, API_SMALL_BYTES);
    api_world_random(w, w->large_model, API_LARGE_BYTES);
    API_OK(curd_buffer_upload(w->device, w->small, w->small_model,
                              API_SMALL_BYTES));
    API_OK(curd_buffer_upload(w->device, w->large, w->large_model,
                              API_LARGE_BYTES));
}

static curd_buffer alloc_ok(api_world *w, size_t len)
{
    curd_buffer buffer = {0};
    API_OK(curd_buffer_alloc(w->device, len, &buffer));
    return buffer;
}

/* ------------------------------------------------------------------------
 * Open and close
 * ---------------------------------------------------------------------- */
void api_world_options(curd_device_options *options)
{
    curd_device_options_init(options);
    options->device_cache_bytes = 4u << 20;
    options->pinned_cache_bytes = API_UPSTREAM_BYTES - 1u;
    options->module_cache_count = 1;
}

curd_status api_world_open(api_world *w, uint64_t seed)
{
    curd_device_options options;
    memset(w, 0, sizeof *w);
    w->random_state = seed;
    api_world_options(&options);
    curd_status status = curd_device_open(0, &options, &w->device);
    if (status != CURD_OK)
        return status;
    curd_device_props props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    API_OK(curd_device_info(w->device, &props));
    w->can_register = (props.capabilities & CURD_CAP_HOST_REGISTER) != 0;

    w->small_model = malloc(API_SMALL_BYTES);
    w->large_model = malloc(API_LARGE_BYTES);
    w->host_len = (size_t)API_LARGE_BYTES + API_REGISTERED_BYTES;
    w->host = malloc(w->host_len);
    w->host_copy = malloc(w->host_len);
    API_CHECK(w->small_model != NULL && w->large_model != NULL &&
                  w->host != NULL && w->host_copy != NULL,
              "out of host memory");
    /* host_copy equals host but where the run in progress wrote. */
    api_world_random(w, w->host, w->host_len);
    memcpy(w->host_copy, w->host, w->host_len);
    w->registered = w->host + API_LARGE_BYTES;
    if (w->can_register)
        API_OK(curd_host_register(w->device, w->registered,
                                  API_REGISTERED_BYTES));
    w->small = alloc_ok(w, API_SMALL_BYTES);
    w->large = alloc_ok(w, API_LARGE_BYTES);
    w->bystander = alloc_ok(w, API_BYSTANDER_BYTES);
    unsigned char *bystander = malloc(API_BYSTANDER_BYTES);
    API_CHECK(bystander != NULL, "out of host memory");
    api_world_random(w, bystander, API_BYSTANDER_BYTES);
    API_OK(curd_buffer_upload(w->device, w->bystander, bystander,
                              API_BYSTANDER_BYTES));
    free(bystander);
    w->bystander_sum = api_world_bystander_sum(w);
    api_world_reset_buffers(w);
    API_OK(curd_test_kernel_load(w->device, "add_one.ptx", "curd_add_one",
                                 &w->add_one));
    return CURD_OK;
}

void api_world_close(api_world *w)
{
    if (w->device != NULL) {
        curd_status status = curd_device_close(w->device);
        API_CHECK(status == CURD_OK || status == CURD_E_DEVICE_LOST,
                  "curd_device_close: %s: %s", curd_status_name(status),
                  curd_last_error());
    }
    free(w->small_model);
    free(w->large_model);
    free(w->host);
    free(w->host_copy);
    free(w->words);
    free(w->words_want);
    memset(w, 0, sizeof *w);
}
