/* program_load.c - loading a module (the JIT of one image, or the
 * driver's linker over several) and reading a function of it: its
 * attributes, its parameter layout and the device's opt-in shared
 * memory. Driver calls only, with the context current and the state's
 * lock not held; program.c decides what is loaded and caches it. */
#include "launch/program_load.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "launch/image.h"

/* More parameters than a kernel can have (the driver caps a parameter
 * buffer at 32764 bytes); a bound on the cuFuncGetParamInfo loop. */
#define CURDI_MAX_PARAMS 8192u
#define CURDI_SHARED_DEFAULT_BYTES 49152u

void curdi_program_load_function_free(curdi_function *f)
{
    free(f->entry);
    free(f->param_storage);
    free(f);
}

/* ------------------------------------------------------------------------
 * Loading (driver calls; context current, state lock not held)
 * ---------------------------------------------------------------------- */
static const char *const kind_names[] = {"", "PTX", "cubin", "fatbin",
                                         "library"};

/* A failed cuModuleLoadDataEx of `what` (the image, or the linked cubin):
 * its sentence carries the error log, and `fix` when the code says the
 * image is at fault. */
static curd_status load_failed(curdi_module *m, curdi_cu_result rc,
                               curdi_jit_logs *logs, const char *what,
                               const char *entry, const char *fix)
{
    m->module = NULL;
    curdi_jit_logs_error_one_line(logs);
    char call[2 * CURDI_JIT_LOG_BYTES + 256];
    snprintf(call, sizeof call,
             "curd_program_load: cuModuleLoadDataEx (%s, for entry %s%s%s)",
             what, entry, logs->error[0] != '\0' ? "; JIT log: " : "",
             logs->error);
    return curdi_driver_fail(
        (int)rc, call,
        curdi_driver_status_of(rc) == CURD_E_PROGRAM ? fix : NULL);
}

/* cuModuleLoadDataEx of the module's one image with the JIT options and
 * both logs; CURD_E_PROGRAM with the error log when it does not compile or
 * load. */
static curd_status jit_image(curdi_module *m, const char *entry,
                             curdi_jit_logs *logs)
{
    curdi_jit_option_list list;
    curdi_jit_option_list_make(&m->jit, logs, &list);
    curdi_cu_result rc = curdi_driver_get()->cuModuleLoadDataEx(
        &m->module, m->image, list.count, list.options, list.values);
    if (rc == CURDI_CUDA_SUCCESS) {
        m->info_log = curdi_jit_logs_take_info(logs);
        return CURD_OK;
    }
    char what[64];
    snprintf(what, sizeof what, "%s image of %zu bytes", kind_names[m->kind],
             m->inputs[0].byte_len);
    return load_failed(
        m, rc, logs, what, entry,
        m->kind == CURD_IMAGE_PTX
            ? "correct the PTX at the place the JIT log names, or target a "
              "PTX ISA and sm version this driver knows"
            : "build the binary for this device's architecture (or include "
              "PTX in the fatbin so the driver can JIT it)");
}

/* The module's inputs through the driver's linker, then the linked cubin
 * loaded; the linker's information log is the module's. */
static curd_status link_images(curdi_module *m, const char *entry,
                               curdi_jit_logs *logs)
{
    curdi_link_input inputs[1 + CURD_PROGRAM_LINK_MAX];
    /* The names the linker's log gives the inputs: the desc's fields. */
    char names[1 + CURD_PROGRAM_LINK_MAX][32];
    for (size_t i = 0; i < m->input_count; i++) {
        if (i == 0)
            snprintf(names[i], sizeof names[i], "image");
        else
            snprintf(names[i], sizeof names[i], "link_images[%u]",
                     (unsigned)(i - 1u));
        inputs[i].bytes = m->image + m->inputs[i].offset;
        inputs[i].byte_len = m->inputs[i].byte_len;
        inputs[i].kind = m->inputs[i].kind;
        inputs[i].name = names[i];
    }
    void *cubin = NULL;
    size_t cubin_bytes = 0;
    curd_status status = curdi_jit_link(inputs, m->input_count, &m->jit, entry,
                                        logs, &cubin, &cubin_bytes);
    if (status != CURD_OK)
        return status;
    m->info_log = curdi_jit_logs_take_info(logs);
    /* A cubin takes no JIT options; its error log is the one to keep. */
    logs->error[0] = '\0';
    curdi_cu_jit_option options[2] = {
        CURDI_CU_JIT_ERROR_LOG_BUFFER,
        CURDI_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    };
    void *values[2] = {logs->error, (void *)(uintptr_t)CURDI_JIT_LOG_BYTES};
    curdi_cu_result rc = curdi_driver_get()->cuModuleLoadDataEx(
        &m->module, cubin, 2, options, values);
    free(cubin);
    if (rc == CURDI_CUDA_SUCCESS)
        return CURD_OK;
    char what[96];
    snprintf(what, sizeof what, "the cubin of %zu bytes linked from %zu "
             "inputs", cubin_bytes, m->input_count);
    return load_failed(m, rc, logs, what, entry,
                       "build the inputs for this device's architecture, or "
                       "pass them as PTX so the driver compiles them for it");
}

/* Loads the module (compiling or linking it); *out_ns is the time spent
 * in the driver. */
curd_status curdi_program_load_module(curdi_module *m, const char *entry,
                                      uint64_t *out_ns)
{
    curdi_jit_logs logs;
    curd_status status = curdi_jit_logs_new(&logs);
    if (status != CURD_OK)
        return status;
    uint64_t start = curdi_clock_ns();
    status = m->linked ? link_images(m, entry, &logs)
                       : jit_image(m, entry, &logs);
    *out_ns = curdi_clock_ns() - start;
    curdi_jit_logs_free(&logs);
    return status;
}

/* The names of the module's entries, for a missing-entry sentence. */
static void entry_names(const curdi_module *m, char *out, size_t capacity)
{
    const curdi_driver *driver = curdi_driver_get();
    out[0] = '\0';
    unsigned int count = 0;
    if (driver->cuModuleGetFunctionCount != NULL &&
        driver->cuModuleEnumerateFunctions != NULL &&
        driver->cuFuncGetName != NULL &&
        driver->cuModuleGetFunctionCount(&count, m->module) ==
            CURDI_CUDA_SUCCESS) {
        curdi_cu_function *functions =
            count != 0 ? calloc(count, sizeof *functions) : NULL;
        if (count == 0 ||
            (functions != NULL &&
             driver->cuModuleEnumerateFunctions(functions, count, m->module) ==
                 CURDI_CUDA_SUCCESS)) {
            size_t at = 0;
            for (unsigned int i = 0; i < count; i++) {
                const char *name = NULL;
                if (driver->cuFuncGetName(&name, functions[i]) !=
                        CURDI_CUDA_SUCCESS ||
                    name == NULL || at + strlen(name) + 3 >= capacity)
                    continue;
                at += (size_t)snprintf(out + at, capacity - at, "%s%s",
                                       at == 0 ? "" : ", ", name);
            }
            free(functions);
            if (count == 0)
                snprintf(out, capacity, "(none)");
            return;
        }
        free(functions);
    }
    bool any_ptx = false;
    for (size_t i = 0; i < m->input_count; i++) {
        if (m->inputs[i].kind != CURD_IMAGE_PTX)
            continue;
        any_ptx = true;
        curdi_image_ptx_entry_names((const char *)m->image +
                                        m->inputs[i].offset,
                                    out, capacity);
    }
    if (any_ptx && out[0] == '\0')
        snprintf(out, capacity, "(none)");
}

static curd_status get_attribute(const curdi_driver *driver,
                                 curdi_cu_function function,
                                 curdi_cu_function_attribute attribute,
                                 const char *name, int *out)
{
    curdi_cu_result rc = driver->cuFuncGetAttribute(out, attribute, function);
    if (rc == CURDI_CUDA_SUCCESS)
        return CURD_OK;
    char call[128];
    snprintf(call, sizeof call, "curd_program_load: cuFuncGetAttribute(%s)",
             name);
    return curdi_driver_fail((int)rc, call, NULL);
}

/* The parameter layout through cuFuncGetParamInfo; unknown without it. */
static curd_status read_params(const curdi_driver *driver, curdi_function *f)
{
    memset(&f->params, 0, sizeof f->params);
    if (driver->cuFuncGetParamInfo == NULL)
        return CURD_OK;
    size_t capacity = 0;
    uint32_t count = 0;
    uint32_t *offsets = NULL, *sizes = NULL;
    for (;;) {
        size_t offset = 0, size = 0;
        curdi_cu_result rc =
            driver->cuFuncGetParamInfo(f->function, count, &offset, &size);
        if (rc == CURDI_CUDA_ERROR_INVALID_VALUE)
            break; /* past the last parameter */
        if (rc != CURDI_CUDA_SUCCESS) {
            free(offsets);
            free(sizes);
            return curdi_driver_fail(
                (int)rc, "curd_program_load: cuFuncGetParamInfo", NULL);
        }
        if (count == CURDI_MAX_PARAMS || offset > UINT32_MAX ||
            size > UINT32_MAX) {
            free(offsets);
            free(sizes);
            return curdi_fail(CURD_E_PROGRAM,
                              "curd_program_load: the driver describes more "
                              "than %u parameters, or one past 4 GiB, for "
                              "entry %s. Fix: check the image; no kernel can "
                              "have such a parameter list.",
                              CURDI_MAX_PARAMS, f->entry);
        }
        if (count == capacity) {
            capacity = capacity == 0 ? 16 : capacity * 2;
            uint32_t *grown_offsets = realloc(offsets, capacity * 4);
            if (grown_offsets != NULL)
                offsets = grown_offsets;
            uint32_t *grown_sizes = realloc(sizes, capacity * 4);
            if (grown_sizes != NULL)
                sizes = grown_sizes;
            if (grown_offsets == NULL || grown_sizes == NULL) {
                free(offsets);
                free(sizes);
                return curdi_fail(CURD_E_OUT_OF_MEMORY,
                                  "curd_program_load: the parameter layout "
                                  "of entry %s could not be stored. Fix: free "
                                  "host memory and try again.",
                                  f->entry);
            }
        }
        offsets[count] = (uint32_t)offset;
        sizes[count] = (uint32_t)size;
        count++;
    }
    /* One block: offsets, then sizes. */
    if (count != 0) {
        f->param_storage = malloc((size_t)count * 8);
        if (f->param_storage == NULL) {
            free(offsets);
            free(sizes);
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "curd_program_load: the parameter layout of "
                              "entry %s could not be stored. Fix: free host "
                              "memory and try again.",
                              f->entry);
        }
        memcpy(f->param_storage, offsets, (size_t)count * 4);
        memcpy(f->param_storage + count, sizes, (size_t)count * 4);
        f->params.offsets = f->param_storage;
        f->params.sizes = f->param_storage + count;
        f->params.total_bytes =
            (size_t)offsets[count - 1] + (size_t)sizes[count - 1];
    }
    free(offsets);
    free(sizes);
    f->params.known = true;
    f->params.count = count;
    return CURD_OK;
}

/* The device's opt-in shared memory per block, read once. */
static curd_status shared_optin(curd_device *device, int *out)
{
    struct curdi_program_state *state = device->program;
    int value = atomic_load(&state->shared_optin_bytes);
    if (value == 0) {
        curdi_cu_result rc = curdi_driver_get()->cuDeviceGetAttribute(
            &value, CURDI_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            device->cu_device);
        if (rc != CURDI_CUDA_SUCCESS)
            return curdi_driver_fail(
                (int)rc,
                "curd_program_load: cuDeviceGetAttribute("
                "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)",
                NULL);
        atomic_store(&state->shared_optin_bytes, value);
    }
    *out = value;
    return CURD_OK;
}

/* Finds the entry in a loaded module and reads what the module caches of
 * it into a new function (not yet in the module's list). */
curd_status curdi_program_load_function(curd_device *device,
                                        const curdi_module *m,
                                        const char *entry,
                                        curdi_function **out)
{
    const curdi_driver *driver = curdi_driver_get();
    curdi_function *f = calloc(1, sizeof *f);
    char *name = strdup(entry);
    if (f == NULL || name == NULL) {
        free(f);
        free(name);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_program_load: the function of entry %s could "
                          "not be allocated. Fix: free host memory and try "
                          "again.",
                          entry);
    }
    f->entry = name;
    curdi_cu_result rc =
        driver->cuModuleGetFunction(&f->function, m->module, entry);
    if (rc == CURDI_CUDA_ERROR_NOT_FOUND) {
        char names[1024];
        entry_names(m, names, sizeof names);
        curdi_program_load_function_free(f);
        curdi_status_note_driver_code((int)rc);
        if (names[0] == '\0')
            return curdi_fail(CURD_E_PROGRAM,
                              "curd_program_load: the %s image has no entry "
                              "named \"%s\", and this driver cannot list a "
                              "binary's entries (that needs CUDA 12.4). Fix: "
                              "pass the kernel's name as the image declares it "
                              "(extern \"C\" kernels keep their name; C++ ones "
                              "are mangled: cuobjdump -elf lists them).",
                              m->kind == CURD_IMAGE_CUBIN ? "cubin" : "fatbin",
                              entry);
        return curdi_fail(CURD_E_PROGRAM,
                          "curd_program_load: the image has no entry named "
                          "\"%s\"; its entries are: %s. Fix: pass one of "
                          "those names (C++ kernels have mangled names unless "
                          "declared extern \"C\").",
                          entry, names);
    }
    if (rc != CURDI_CUDA_SUCCESS) {
        curdi_program_load_function_free(f);
        return curdi_driver_fail(
            (int)rc, "curd_program_load: cuModuleGetFunction", NULL);
    }
    int regs = 0, shared = 0, local = 0, constant = 0, threads = 0,
        binary = 0, ptx = 0, optin = 0;
    curd_status status = CURD_OK;
#define CURDI_ATTR_(attr, out)                                                \
    if (status == CURD_OK)                                                    \
        status = get_attribute(driver, f->function, CURDI_CU_FUNC_##attr,     \
                               "CU_FUNC_" #attr, out);
    CURDI_ATTR_(ATTRIBUTE_NUM_REGS, &regs)
    CURDI_ATTR_(ATTRIBUTE_SHARED_SIZE_BYTES, &shared)
    CURDI_ATTR_(ATTRIBUTE_LOCAL_SIZE_BYTES, &local)
    CURDI_ATTR_(ATTRIBUTE_CONST_SIZE_BYTES, &constant)
    CURDI_ATTR_(ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads)
    CURDI_ATTR_(ATTRIBUTE_BINARY_VERSION, &binary)
    CURDI_ATTR_(ATTRIBUTE_PTX_VERSION, &ptx)
#undef CURDI_ATTR_
    if (status == CURD_OK)
        status = shared_optin(device, &optin);
    if (status == CURD_OK)
        status = read_params(driver, f);
    if (status != CURD_OK) {
        curdi_program_load_function_free(f);
        return status;
    }
    f->attrs.registers_per_thread = regs;
    f->attrs.max_threads_per_block = threads;
    f->attrs.static_shared_bytes = shared > 0 ? (size_t)shared : 0;
    f->attrs.local_bytes_per_thread = local > 0 ? (size_t)local : 0;
    f->attrs.const_bytes = constant > 0 ? (size_t)constant : 0;
    f->attrs.max_dynamic_shared_bytes =
        optin > shared ? (size_t)(optin - shared) : 0;
    f->attrs.binary_version = binary;
    f->attrs.ptx_version = ptx;
    size_t default_limit = CURDI_SHARED_DEFAULT_BYTES > f->attrs.static_shared_bytes
                               ? CURDI_SHARED_DEFAULT_BYTES -
                                     f->attrs.static_shared_bytes
                               : 0;
    atomic_store(&f->dynamic_shared_limit, default_limit);
    *out = f;
    return CURD_OK;
}
