/* gather.c - the transfer engine's kernels on a device (see gather.h). */
#include "transfer/gather.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "transfer/state.h"

/* The module's state, behind curd_device.gather. lock guards the fields
 * below it and is never held across a driver call. */
struct curdi_gather_state {
    pthread_mutex_t lock;
    bool loaded;
    bool unavailable; /* the driver could not JIT the PTX */
    curdi_cu_module module;
    curdi_gather_kernels kernels;
};

curd_status curdi_gather_open(curd_device *device)
{
    struct curdi_gather_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's gather state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the gather state's lock."
                          " Fix: free system resources.");
    }
    device->gather = state;
    return CURD_OK;
}

void curdi_gather_close(curd_device *device)
{
    struct curdi_gather_state *state;
    if (device == NULL || device->gather == NULL)
        return;
    state = device->gather;
    /* Errors have nowhere to go at close. */
    if (state->loaded && curdi_driver_usable())
        (void)curdi_driver_note(
            curdi_driver_get()->cuModuleUnload(state->module));
    pthread_mutex_destroy(&state->lock);
    free(state);
    device->gather = NULL;
}

/* A flag of the state, read under its lock. */
static bool locked_flag(struct curdi_gather_state *state, const bool *flag)
{
    bool value;
    pthread_mutex_lock(&state->lock);
    value = *flag;
    pthread_mutex_unlock(&state->lock);
    return value;
}

bool curdi_gather_unavailable(curd_device *device)
{
    return locked_flag(device->gather, &device->gather->unavailable);
}

bool curdi_gather_loaded(curd_device *device)
{
    return locked_flag(device->gather, &device->gather->loaded);
}

/* Remembers that this device cannot run the kernels (why: a trace line);
 * its transfers move scattered ranges one DMA each from then on. */
static void mark_unavailable(struct curdi_gather_state *state, const char *why,
                             int ordinal)
{
    pthread_mutex_lock(&state->lock);
    state->unavailable = true;
    pthread_mutex_unlock(&state->lock);
    curdi_trace("device %d %s; it moves scattered ranges one DMA each",
                ordinal, why);
}

/* Loads the module and finds both kernels; on failure nothing is left
 * loaded. */
static curd_status load_kernels(curd_device *device,
                                curdi_cu_module *out_module,
                                curdi_gather_kernels *out_kernels)
{
    const curdi_driver *driver = curdi_driver_get();
    char jit_log[1024] = "";
    curdi_cu_jit_option options[2] = {
        CURDI_CU_JIT_ERROR_LOG_BUFFER,
        CURDI_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    };
    void *option_values[2] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
    curdi_cu_module module = NULL;
    curdi_cu_result cu_result = curdi_driver_note(driver->cuModuleLoadDataEx(
        &module, curdi_gather_ptx, 2, options, option_values));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        char call[sizeof jit_log + 96];
        jit_log[sizeof jit_log - 1] = '\0';
        if (curdi_driver_status_of(cu_result) == CURD_E_PROGRAM)
            mark_unavailable(device->gather,
                             "cannot JIT the transfer kernels",
                             device->ordinal);
        snprintf(call, sizeof call,
                 "cuModuleLoadDataEx (the transfer kernels' PTX%s%s)",
                 jit_log[0] != '\0' ? ", JIT log: " : "", jit_log);
        return curdi_driver_fail((int)cu_result, call, CURDI_DRIVER_FIX);
    }
    cu_result = curdi_driver_note(
        driver->cuModuleGetFunction(&out_kernels->gather, module, "curd_gather"));
    if (cu_result == CURDI_CUDA_SUCCESS)
        cu_result = curdi_driver_note(driver->cuModuleGetFunction(
            &out_kernels->scatter, module, "curd_scatter"));
    if (cu_result != CURDI_CUDA_SUCCESS) {
        curd_status status = curdi_driver_fail(
            (int)cu_result, "cuModuleGetFunction (curd_gather, curd_scatter)",
            CURDI_DRIVER_FIX);
        (void)curdi_driver_note(driver->cuModuleUnload(module));
        return status;
    }
    *out_module = module;
    return CURD_OK;
}

/* The kernels read and write page-locked host memory at the address the
 * CPU uses: that takes unified addressing and a device that reaches
 * registered memory at its host address (every 64-bit Linux system with a
 * GPU of this century). Where it does not, the module is unavailable, as
 * when the PTX cannot be JIT-compiled, and scattered ranges move one DMA
 * each. */
static curd_status check_host_access(curd_device *device)
{
    int same_address = 0;
    curdi_cu_result cu_result = curdi_driver_note(
        curdi_driver_get()->cuDeviceGetAttribute(
            &same_address,
            CURDI_CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
            device->cu_device));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail(
            (int)cu_result,
            "cuDeviceGetAttribute(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)",
            CURDI_DRIVER_FIX);
    if (same_address != 0
        && (device->props.capabilities & CURD_CAP_UNIFIED_ADDRESSING) != 0)
        return CURD_OK;
    mark_unavailable(device->gather,
                     "cannot reach page-locked host memory at its host"
                     " address",
                     device->ordinal);
    return curdi_fail(CURD_E_PROGRAM,
                      "device %d cannot run the transfer kernels on host"
                      " memory. Fix: scattered ranges move one DMA each.",
                      device->ordinal);
}

curd_status curdi_gather_kernels_get(curd_device *device,
                                     curdi_gather_kernels *out)
{
    struct curdi_gather_state *state = device->gather;
    curdi_cu_module module = NULL;
    curdi_gather_kernels kernels;
    curd_status status;

    pthread_mutex_lock(&state->lock);
    if (state->loaded) {
        *out = state->kernels;
        pthread_mutex_unlock(&state->lock);
        return CURD_OK;
    }
    if (state->unavailable) {
        pthread_mutex_unlock(&state->lock);
        return curdi_fail(CURD_E_PROGRAM,
                          "the driver could not JIT the transfer kernels on"
                          " device %d before. Fix: scattered ranges move one"
                          " DMA each; update the driver to use them.",
                          device->ordinal);
    }
    pthread_mutex_unlock(&state->lock);

    status = check_host_access(device);
    if (status != CURD_OK)
        return status;
    /* Outside the lock: two threads may both load; the first to finish is
     * kept and the other module unloaded. */
    status = load_kernels(device, &module, &kernels);
    if (status != CURD_OK)
        return status;
    pthread_mutex_lock(&state->lock);
    if (!state->loaded) {
        state->module = module;
        state->kernels = kernels;
        state->loaded = true;
        module = NULL;
    }
    *out = state->kernels;
    pthread_mutex_unlock(&state->lock);
    if (module != NULL)
        (void)curdi_driver_note(curdi_driver_get()->cuModuleUnload(module));
    return CURD_OK;
}

curd_status curdi_gather_kernels_if_usable(curd_device *device,
                                           curdi_gather_kernels *out,
                                           bool *out_usable)
{
    *out_usable = false;
    if (device->transfer->tuning.gather.path == CURDI_PATH_DMA
        || curdi_gather_unavailable(device))
        return CURD_OK;
    curd_status status = curdi_gather_kernels_get(device, out);
    if (status == CURD_E_PROGRAM)
        return CURD_OK;
    *out_usable = status == CURD_OK;
    return status;
}

/* The blocks one launch of table needs: one per tile of its range. */
static unsigned table_grid(const curdi_gather_table *table)
{
    return (unsigned)(((uint64_t)table->range_end - table->range_start
                       + CURDI_GATHER_TILE_BYTES - 1u)
                      / CURDI_GATHER_TILE_BYTES);
}

/* The table of one launch of count pieces (1 to CURDI_GATHER_PIECES). */
static void table_fill(curdi_gather_table *table,
                       const curdi_engine_piece *pieces, size_t count)
{
    const curdi_engine_piece *last = &pieces[count - 1];
    memset(table, 0, sizeof *table);
    table->count = (uint32_t)count;
    /* Every offset and length lies within one chunk, below 4 GiB
     * (gather.h). */
    table->range_start = (uint32_t)pieces[0].stage_offset;
    table->range_end = (uint32_t)(last->stage_offset + last->byte_len);
    for (size_t index = 0; index < count; index++) {
        table->piece[index].device_ptr = pieces[index].device_ptr;
        table->piece[index].stage_offset = (uint32_t)pieces[index].stage_offset;
        table->piece[index].byte_len = (uint32_t)pieces[index].byte_len;
    }
}

/* Launches one table's kernel; the driver copies the parameters at the
 * call, so the table can be refilled for the next launch at once. */
static curd_status table_launch(const curdi_gather_kernels *kernels,
                                curdi_cu_stream stream, bool to_stage,
                                unsigned char *stage,
                                curdi_gather_table *table)
{
    /* Page-locked host memory is the kernels' at the CPU's own address
     * (checked when the module loaded). */
    uint64_t stage_ptr = (uint64_t)(uintptr_t)stage;
    void *params[2] = {&stage_ptr, table};
    curdi_cu_result cu_result = curdi_driver_note(
        curdi_driver_get()->cuLaunchKernel(
            to_stage ? kernels->gather : kernels->scatter, table_grid(table),
            1, 1, CURDI_GATHER_BLOCK_THREADS, 1, 1, 0, stream, params, NULL));
    if (cu_result != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)cu_result,
                                 to_stage ? "cuLaunchKernel (curd_gather)"
                                          : "cuLaunchKernel (curd_scatter)",
                                 CURDI_DRIVER_FIX);
    return CURD_OK;
}

curd_status curdi_gather_enqueue(const curdi_gather_kernels *kernels,
                                 curdi_cu_stream stream, bool to_stage,
                                 unsigned char *stage,
                                 const curdi_engine_piece *pieces, size_t count)
{
    curdi_gather_table table;
    for (size_t first = 0; first < count; first += CURDI_GATHER_PIECES) {
        size_t batch = count - first < CURDI_GATHER_PIECES
                           ? count - first
                           : CURDI_GATHER_PIECES;
        table_fill(&table, &pieces[first], batch);
        curd_status status =
            table_launch(kernels, stream, to_stage, stage, &table);
        if (status != CURD_OK)
            return status;
    }
    return CURD_OK;
}

curd_status curdi_gather_enqueue_signalled(const curdi_gather_kernels *kernels,
                                           curdi_cu_stream stream,
                                           unsigned char *stage,
                                           const curdi_engine_piece *pieces,
                                           size_t count, size_t signal_offset,
                                           unsigned *out_words)
{
    curdi_gather_table table;
    table_fill(&table, pieces, count);
    unsigned blocks = table_grid(&table);
    *out_words = blocks <= CURDI_GATHER_SIGNAL_BLOCKS ? blocks : 0u;
    if (*out_words != 0)
        table.signal_offset = (uint32_t)signal_offset;
    return table_launch(kernels, stream, true, stage, &table);
}
