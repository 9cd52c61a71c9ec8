/* jit.c - the driver's JIT options and logs, and its linker; jit.h says
 * what each call promises.
 *
 * Read top to bottom: the logs, the option arrays, then the link (its
 * failure sentence, the steps, the one function that owns the link
 * state from cuLinkCreate to cuLinkDestroy). */
#include "launch/jit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "driver/driver.h"

/* ------------------------------------------------------------------------
 * Logs
 * ---------------------------------------------------------------------- */
curd_status curdi_jit_logs_new(curdi_jit_logs *logs)
{
    logs->error = calloc(1, CURDI_JIT_LOG_BYTES);
    logs->info = calloc(1, CURDI_JIT_LOG_BYTES);
    if (logs->error != NULL && logs->info != NULL)
        return CURD_OK;
    curdi_jit_logs_free(logs);
    return curdi_fail(CURD_E_OUT_OF_MEMORY,
                      "curd_program_load: 2 x %u bytes for the JIT's logs "
                      "could not be allocated. Fix: free host memory and "
                      "try again.",
                      CURDI_JIT_LOG_BYTES);
}

void curdi_jit_logs_free(curdi_jit_logs *logs)
{
    free(logs->error);
    free(logs->info);
    logs->error = logs->info = NULL;
}

char *curdi_jit_logs_take_info(curdi_jit_logs *logs)
{
    char *info = logs->info;
    logs->info = NULL;
    if (info == NULL)
        return NULL;
    info[CURDI_JIT_LOG_BYTES - 1] = '\0';
    if (info[0] != '\0')
        return info;
    free(info); /* a quiet JIT keeps nothing */
    return NULL;
}

void curdi_jit_logs_error_one_line(curdi_jit_logs *logs)
{
    char *log = logs->error;
    log[CURDI_JIT_LOG_BYTES - 1] = '\0';
    size_t log_len = strlen(log);
    while (log_len > 0 && (log[log_len - 1] == '\n' || log[log_len - 1] == '\r'))
        log[--log_len] = '\0';
    char *one_line = malloc(2 * log_len + 1);
    if (one_line == NULL)
        return;
    size_t at = 0;
    for (size_t i = 0; i < log_len; i++) {
        if (log[i] == '\r')
            continue;
        if (log[i] == '\n') {
            one_line[at++] = ';';
            one_line[at++] = ' ';
        } else {
            one_line[at++] = log[i];
        }
    }
    one_line[at] = '\0';
    free(log);
    logs->error = one_line;
}

/* ------------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------- */
void curdi_jit_option_list_make(const curdi_jit_options *jit,
                                const curdi_jit_logs *logs,
                                curdi_jit_option_list *out)
{
    unsigned count = 0;
#define CURDI_OPTION_(name, value)                                            \
    do {                                                                      \
        out->options[count] = CURDI_CU_JIT_##name;                            \
        out->values[count++] = (void *)(value);                               \
    } while (0)
    CURDI_OPTION_(ERROR_LOG_BUFFER, logs->error);
    CURDI_OPTION_(ERROR_LOG_BUFFER_SIZE_BYTES, (uintptr_t)CURDI_JIT_LOG_BYTES);
    CURDI_OPTION_(INFO_LOG_BUFFER, logs->info);
    CURDI_OPTION_(INFO_LOG_BUFFER_SIZE_BYTES, (uintptr_t)CURDI_JIT_LOG_BYTES);
    CURDI_OPTION_(LOG_VERBOSE, (uintptr_t)1u);
    if (jit->optimization_level != UINT32_MAX)
        CURDI_OPTION_(OPTIMIZATION_LEVEL, (uintptr_t)jit->optimization_level);
    if (jit->max_registers != 0)
        CURDI_OPTION_(MAX_REGISTERS, (uintptr_t)jit->max_registers);
    if (jit->target != 0)
        CURDI_OPTION_(TARGET, (uintptr_t)jit->target);
    if (jit->line_info != 0)
        CURDI_OPTION_(GENERATE_LINE_INFO, (uintptr_t)1u);
#undef CURDI_OPTION_
    out->count = count;
}

/* ------------------------------------------------------------------------
 * The link
 * ---------------------------------------------------------------------- */
static const char *kind_name(curd_image_kind kind)
{
    switch (kind) {
    case CURD_IMAGE_PTX: return "PTX";
    case CURD_IMAGE_CUBIN: return "cubin";
    case CURD_IMAGE_FATBIN: return "fatbin";
    case CURD_IMAGE_LIBRARY: return "library";
    default: return "image";
    }
}

static curdi_cu_jit_input_type input_type(curd_image_kind kind)
{
    switch (kind) {
    case CURD_IMAGE_PTX: return CURDI_CU_JIT_INPUT_PTX;
    case CURD_IMAGE_FATBIN: return CURDI_CU_JIT_INPUT_FATBINARY;
    case CURD_IMAGE_LIBRARY: return CURDI_CU_JIT_INPUT_LIBRARY;
    default: return CURDI_CU_JIT_INPUT_CUBIN;
    }
}

/* A failed step's sentence. The linker's verdict on the inputs (a code
 * the driver gives for a bad image, or any code other than the device's
 * loss or a shortage when the linker wrote why) is CURD_E_PROGRAM, with
 * its log; anything else is the driver's status, the log kept too. */
static curd_status link_failed(curdi_cu_result rc, const char *step,
                               const char *entry, curdi_jit_logs *logs)
{
    curdi_jit_logs_error_one_line(logs);
    const char *log = logs->error;
    curd_status status = curdi_driver_status_of(rc);
    char call[2 * CURDI_JIT_LOG_BYTES + 512];
    snprintf(call, sizeof call, "curd_program_load: %s, for entry %s%s%s)",
             step, entry, log[0] != '\0' ? "; linker log: " : "", log);
    if (status == CURD_E_PROGRAM ||
        (status == CURD_E_DRIVER && log[0] != '\0')) {
        curd_status failed = curdi_fail(
            CURD_E_PROGRAM,
            "%s failed with %s (%d). Fix: define every function the "
            "inputs call in one of them (PTX compiled with nvcc "
            "-rdc=true), add the library that defines it to "
            "desc->link_images, or build the inputs for this device and "
            "a PTX ISA this driver knows.",
            call, curdi_driver_result_name(rc), (int)rc);
        curdi_status_note_driver_code((int)rc);
        return failed;
    }
    return curdi_driver_fail((int)rc, call, NULL);
}

/* Adds every input and completes the link; on CURD_OK the copy of the
 * cubin is the caller's. */
static curd_status link_steps(const curdi_driver *driver,
                              curdi_cu_link_state state,
                              const curdi_link_input *inputs, size_t count,
                              const char *entry, curdi_jit_logs *logs,
                              void **out_cubin, size_t *out_cubin_bytes)
{
    char step[256];
    for (size_t i = 0; i < count; i++) {
        /* PTX with its NUL, as the driver reads text; the linker takes
         * the bytes as data it does not write. */
        size_t byte_len = inputs[i].byte_len +
                          (inputs[i].kind == CURD_IMAGE_PTX ? 1u : 0u);
        curdi_cu_result rc = curdi_driver_note(driver->cuLinkAddData(
            state, input_type(inputs[i].kind),
            (void *)(uintptr_t)inputs[i].bytes, byte_len, inputs[i].name, 0,
            NULL, NULL));
        if (rc != CURDI_CUDA_SUCCESS) {
            snprintf(step, sizeof step,
                     "cuLinkAddData (%s: %s of %zu bytes, input %zu of %zu",
                     inputs[i].name, kind_name(inputs[i].kind),
                     inputs[i].byte_len, i + 1, count);
            return link_failed(rc, step, entry, logs);
        }
    }
    void *cubin = NULL;
    size_t cubin_bytes = 0;
    curdi_cu_result rc = curdi_driver_note(
        driver->cuLinkComplete(state, &cubin, &cubin_bytes));
    if (rc != CURDI_CUDA_SUCCESS) {
        snprintf(step, sizeof step, "cuLinkComplete (%zu inputs", count);
        return link_failed(rc, step, entry, logs);
    }
    if (cubin == NULL || cubin_bytes == 0)
        return curdi_fail(CURD_E_DRIVER,
                          "curd_program_load: cuLinkComplete of %zu inputs "
                          "for entry %s succeeded but gave %s of %zu bytes. "
                          "Fix: report this driver bug; try another driver "
                          "release.",
                          count, entry, cubin == NULL ? "no image" : "an image",
                          cubin_bytes);
    /* The driver's image lives until cuLinkDestroy: a copy outlives it. */
    void *copy = malloc(cubin_bytes);
    if (copy == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_program_load: %zu bytes for the linked image "
                          "of entry %s could not be allocated. Fix: free host "
                          "memory and try again.",
                          cubin_bytes, entry);
    memcpy(copy, cubin, cubin_bytes);
    *out_cubin = copy;
    *out_cubin_bytes = cubin_bytes;
    return CURD_OK;
}

curd_status curdi_jit_link(const curdi_link_input *inputs, size_t count,
                           const curdi_jit_options *jit, const char *entry,
                           curdi_jit_logs *logs, void **out_cubin,
                           size_t *out_cubin_bytes)
{
    const curdi_driver *driver = curdi_driver_get();
    curdi_jit_option_list list;
    curdi_jit_option_list_make(jit, logs, &list);
    curdi_cu_link_state state = NULL;
    curdi_cu_result rc = curdi_driver_note(
        driver->cuLinkCreate(list.count, list.options, list.values, &state));
    if (rc != CURDI_CUDA_SUCCESS)
        return link_failed(rc, "cuLinkCreate (the link's state", entry, logs);
    curd_status status = link_steps(driver, state, inputs, count, entry, logs,
                                    out_cubin, out_cubin_bytes);
    rc = curdi_driver_note(driver->cuLinkDestroy(state));
    /* The link's result is already copied out (or its failure told):
     * a state the driver would not free is only worth a trace. */
    if (rc != CURDI_CUDA_SUCCESS)
        curdi_trace("curd_program_load: cuLinkDestroy failed with %s (%d)"
                    " after linking for entry %s",
                    curdi_driver_result_name(rc), (int)rc, entry);
    return status;
}
