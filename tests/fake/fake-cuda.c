/* fake-cuda.c - a stand-in libcuda.so.1 for tests on hosts without a GPU.
 *
 * Built as $(BUILD)/tests/libcuda-fake.so.1 and loaded through
 * CURD_LIBCUDA. It is not a GPU: "device memory" is host memory, copies
 * are memcpy, streams and events complete at once, and the only kernel it
 * can run is curd's self-test kernel (curd_selftest_xor), emulated on the
 * host. What it does model faithfully is the bookkeeping a driver checks:
 * a current context for every call that needs one, primary-context retain
 * counts, every allocation, stream, event and module by handle (an unknown
 * or freed handle is CUDA_ERROR_INVALID_VALUE / _HANDLE), and teardown at
 * exit (CUDA_ERROR_DEINITIALIZED from every call after its atexit handler
 * ran). The tests read its live counts through fake_cuda_live() to prove
 * that curd leaks nothing.
 *
 * Like the real driver it exports cuDriverGetVersion and cuGetProcAddress
 * (_v2 and v1) and nothing else by name, so the library finds every entry
 * through cuGetProcAddress. Environment knobs (read at load):
 *   FAKE_CUDA_VERSION   what cuDriverGetVersion reports (default 12080)
 *   FAKE_CUDA_DEVICES   device count (default 1; 0: cuInit reports
 *                       CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_MEMORY    bytes of memory per device (default 256 MiB)
 *   FAKE_CUDA_OMIT      comma-separated base names cuGetProcAddress
 *                       reports as not found (e.g. "cuMemAllocAsync")
 *   FAKE_CUDA_INIT_RESULT  the CUresult cuInit returns (default 0) */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_MAX_DEVICES 4
#define FAKE_STACK_DEPTH 16

/* ------------------------------------------------------------------------
 * State
 * ---------------------------------------------------------------------- */
typedef enum fake_kind {
    FAKE_DEVICE_MEMORY,
    FAKE_HOST_MEMORY,
    FAKE_REGISTERED,
    FAKE_STREAM,
    FAKE_EVENT,
    FAKE_MODULE,
    FAKE_KIND_COUNT
} fake_kind;

static const char *const kind_names[FAKE_KIND_COUNT] = {
    "device_memory", "host_memory", "registered", "stream", "event", "module",
};

/* Every live object, by kind: a singly linked list is plenty here. */
typedef struct fake_object {
    struct fake_object *next;
    fake_kind kind;
    void *address; /* host memory backing, or the handle itself */
    size_t byte_len;
    int device;    /* owning device (memory, streams, events, modules) */
    char *image;   /* modules: a copy of the PTX text */
} fake_object;

struct CUctx_st {
    int device;
    unsigned retain_count;
};

struct CUfunc_st {
    char name[128];
    fake_object *module;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_object *objects;
static struct CUctx_st contexts[FAKE_MAX_DEVICES];
static size_t used_bytes[FAKE_MAX_DEVICES];
static bool initialised;
static bool deinitialised;

static int cfg_version = 12080;
static int cfg_devices = 1;
static size_t cfg_memory = (size_t)256 << 20;
static char cfg_omit[512];
static unsigned cfg_init_result;

static __thread curdi_cu_context stack[FAKE_STACK_DEPTH];
static __thread int stack_depth;

__attribute__((constructor)) static void fake_configure(void)
{
    const char *value;
    if ((value = getenv("FAKE_CUDA_VERSION")) != NULL)
        cfg_version = atoi(value);
    if ((value = getenv("FAKE_CUDA_DEVICES")) != NULL)
        cfg_devices = atoi(value);
    if (cfg_devices < 0 || cfg_devices > FAKE_MAX_DEVICES)
        cfg_devices = 1;
    if ((value = getenv("FAKE_CUDA_MEMORY")) != NULL)
        cfg_memory = (size_t)strtoull(value, NULL, 0);
    if ((value = getenv("FAKE_CUDA_OMIT")) != NULL)
        snprintf(cfg_omit, sizeof cfg_omit, ",%s,", value);
    if ((value = getenv("FAKE_CUDA_INIT_RESULT")) != NULL)
        cfg_init_result = (unsigned)atoi(value);
    for (int i = 0; i < FAKE_MAX_DEVICES; i++)
        contexts[i].device = i;
}

static fake_object *find(fake_kind kind, const void *address)
{
    for (fake_object *o = objects; o != NULL; o = o->next)
        if (o->kind == kind && o->address == address)
            return o;
    return NULL;
}

/* Device memory containing [address, address + byte_len). */
static fake_object *find_range(uintptr_t address, size_t byte_len)
{
    for (fake_object *o = objects; o != NULL; o = o->next) {
        if (o->kind != FAKE_DEVICE_MEMORY)
            continue;
        uintptr_t start = (uintptr_t)o->address;
        if (address >= start && address - start <= o->byte_len &&
            byte_len <= o->byte_len - (address - start))
            return o;
    }
    return NULL;
}

static fake_object *add(fake_kind kind, void *address, size_t byte_len,
                        int device)
{
    fake_object *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->kind = kind;
    o->address = address;
    o->byte_len = byte_len;
    o->device = device;
    o->next = objects;
    objects = o;
    return o;
}

static void drop(fake_object *gone)
{
    for (fake_object **link = &objects; *link != NULL; link = &(*link)->next) {
        if (*link == gone) {
            *link = gone->next;
            free(gone->image);
            free(gone);
            return;
        }
    }
}

static void on_exit_teardown(void)
{
    pthread_mutex_lock(&lock);
    deinitialised = true;
    pthread_mutex_unlock(&lock);
}

/* The usual preamble: initialised, not torn down, and (for calls that
 * need one) a current context whose device is returned. */
#define ENTER_NO_CONTEXT()                                                    \
    pthread_mutex_lock(&lock);                                                \
    if (deinitialised)                                                        \
        return unlock_with(CURDI_CUDA_ERROR_DEINITIALIZED);                   \
    if (!initialised)                                                         \
        return unlock_with(CURDI_CUDA_ERROR_NOT_INITIALIZED)

#define ENTER_CONTEXT(device_var)                                             \
    ENTER_NO_CONTEXT();                                                       \
    if (stack_depth == 0 || stack[stack_depth - 1]->retain_count == 0)        \
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);                 \
    int device_var = stack[stack_depth - 1]->device

static curdi_cu_result unlock_with(curdi_cu_result result)
{
    pthread_mutex_unlock(&lock);
    return result;
}

/* ------------------------------------------------------------------------
 * Entries
 * ---------------------------------------------------------------------- */
static curdi_cu_result f_cuInit(unsigned int flags)
{
    if (flags != 0)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (deinitialised)
        return unlock_with(CURDI_CUDA_ERROR_DEINITIALIZED);
    if (cfg_init_result != 0)
        return unlock_with(cfg_init_result);
    if (cfg_devices == 0)
        return unlock_with(CURDI_CUDA_ERROR_NO_DEVICE);
    if (!initialised) {
        initialised = true;
        /* The real driver tears down at exit; model it the same way. */
        atexit(on_exit_teardown);
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

FAKE_API curdi_cu_result cuDriverGetVersion(int *version);
FAKE_API curdi_cu_result cuDriverGetVersion(int *version)
{
    if (version == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    *version = cfg_version;
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuDeviceGetCount(int *count)
{
    ENTER_NO_CONTEXT();
    if (count == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    *count = cfg_devices;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDeviceGet(curdi_cu_device *device, int ordinal)
{
    ENTER_NO_CONTEXT();
    if (device == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (ordinal < 0 || ordinal >= cfg_devices)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static bool valid_device(curdi_cu_device dev)
{
    return dev >= 0 && dev < cfg_devices;
}

static curdi_cu_result f_cuDeviceGetName(char *name, int len,
                                         curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (name == NULL || len <= 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "curd fake CUDA device %d", dev);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDeviceGetAttribute(int *value,
                                              curdi_cu_device_attribute attr,
                                              curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (value == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    switch (attr) {
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = 1024;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        *value = 1024;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        *value = 64;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        *value = 2147483647;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        *value = 65535;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        *value = 49152;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = 4;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        *value = 2;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = 9;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = 0;
        break;
    default:
        *value = 1; /* every yes/no capability: yes */
        break;
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDeviceTotalMem(size_t *byte_len,
                                          curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (byte_len == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    *byte_len = cfg_memory;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDeviceGetPCIBusId(char *id, int len,
                                             curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (id == NULL || len <= 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDevicePrimaryCtxRetain(curdi_cu_context *context,
                                                  curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (context == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    contexts[dev].retain_count++;
    *context = &contexts[dev];
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDevicePrimaryCtxRelease(curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    if (contexts[dev].retain_count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    contexts[dev].retain_count--;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuCtxPushCurrent(curdi_cu_context context)
{
    ENTER_NO_CONTEXT();
    if (context == NULL || context->retain_count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    if (stack_depth == FAKE_STACK_DEPTH)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    stack[stack_depth++] = context;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuCtxPopCurrent(curdi_cu_context *context)
{
    ENTER_NO_CONTEXT();
    if (stack_depth == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    curdi_cu_context top = stack[--stack_depth];
    if (context != NULL)
        *context = top;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuCtxGetCurrent(curdi_cu_context *context)
{
    ENTER_NO_CONTEXT();
    if (context == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    *context = stack_depth > 0 ? stack[stack_depth - 1] : NULL;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuCtxSynchronize(void)
{
    ENTER_CONTEXT(device);
    (void)device;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    ENTER_CONTEXT(device);
    if (free_bytes == NULL || total_bytes == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    *total_bytes = cfg_memory;
    *free_bytes = cfg_memory - used_bytes[device];
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemAlloc(curdi_cu_deviceptr *device_ptr,
                                    size_t byte_len)
{
    ENTER_CONTEXT(device);
    if (device_ptr == NULL || byte_len == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (byte_len > cfg_memory - used_bytes[device])
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    void *memory = malloc(byte_len);
    if (memory == NULL || add(FAKE_DEVICE_MEMORY, memory, byte_len, device) ==
                              NULL) {
        free(memory);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    used_bytes[device] += byte_len;
    *device_ptr = (curdi_cu_deviceptr)(uintptr_t)memory;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemFree(curdi_cu_deviceptr device_ptr)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_DEVICE_MEMORY, (void *)(uintptr_t)device_ptr);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    used_bytes[o->device] -= o->byte_len;
    free(o->address);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemHostAlloc(void **host_ptr, size_t byte_len,
                                        unsigned int flags)
{
    ENTER_CONTEXT(device);
    if (host_ptr == NULL || byte_len == 0 || (flags & ~0x7u) != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    void *memory = malloc(byte_len);
    if (memory == NULL ||
        add(FAKE_HOST_MEMORY, memory, byte_len, device) == NULL) {
        free(memory);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    *host_ptr = memory;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemFreeHost(void *host_ptr)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_HOST_MEMORY, host_ptr);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    free(o->address);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemHostRegister(void *host_ptr, size_t byte_len,
                                           unsigned int flags)
{
    ENTER_CONTEXT(device);
    if (host_ptr == NULL || byte_len == 0 || (flags & ~0xFu) != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    for (fake_object *o = objects; o != NULL; o = o->next) {
        if (o->kind != FAKE_REGISTERED)
            continue;
        uintptr_t a = (uintptr_t)o->address, b = (uintptr_t)host_ptr;
        if (a < b + byte_len && b < a + o->byte_len)
            return unlock_with(CURDI_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
    if (add(FAKE_REGISTERED, host_ptr, byte_len, device) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemHostUnregister(void *host_ptr)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_REGISTERED, host_ptr);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static bool valid_stream(curdi_cu_stream stream)
{
    /* The fake never accepts the legacy null stream: curd must not use
     * it. */
    return stream != NULL && find(FAKE_STREAM, stream) != NULL;
}

static curdi_cu_result copy(void *dst, const void *src, size_t byte_len,
                            uintptr_t device_side, size_t device_len,
                            curdi_cu_stream stream, bool need_stream)
{
    if (need_stream && !valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (byte_len != 0 && find_range(device_side, device_len) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (byte_len != 0)
        memmove(dst, src, byte_len);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemcpyHtoD(curdi_cu_deviceptr dst, const void *src,
                                      size_t byte_len)
{
    ENTER_CONTEXT(device);
    (void)device;
    return copy((void *)(uintptr_t)dst, src, byte_len, (uintptr_t)dst,
                byte_len, NULL, false);
}

static curdi_cu_result f_cuMemcpyDtoH(void *dst, curdi_cu_deviceptr src,
                                      size_t byte_len)
{
    ENTER_CONTEXT(device);
    (void)device;
    return copy(dst, (const void *)(uintptr_t)src, byte_len, (uintptr_t)src,
                byte_len, NULL, false);
}

static curdi_cu_result f_cuMemcpyHtoDAsync(curdi_cu_deviceptr dst,
                                           const void *src, size_t byte_len,
                                           curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    return copy((void *)(uintptr_t)dst, src, byte_len, (uintptr_t)dst,
                byte_len, stream, true);
}

static curdi_cu_result f_cuMemcpyDtoHAsync(void *dst, curdi_cu_deviceptr src,
                                           size_t byte_len,
                                           curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    return copy(dst, (const void *)(uintptr_t)src, byte_len, (uintptr_t)src,
                byte_len, stream, true);
}

static curdi_cu_result f_cuMemcpyDtoDAsync(curdi_cu_deviceptr dst,
                                           curdi_cu_deviceptr src,
                                           size_t byte_len,
                                           curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (byte_len != 0 && find_range((uintptr_t)src, byte_len) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                byte_len, (uintptr_t)dst, byte_len, stream, true);
}

static curdi_cu_result f_cuMemsetD8Async(curdi_cu_deviceptr dst,
                                         unsigned char value, size_t byte_len,
                                         curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (!valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (byte_len != 0 && find_range((uintptr_t)dst, byte_len) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (byte_len != 0)
        memset((void *)(uintptr_t)dst, value, byte_len);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* Streams and events are heap tokens, so their handles are unique. */
static curdi_cu_result new_token(fake_kind kind, int device, void **out)
{
    void *token = malloc(1);
    if (token == NULL || add(kind, token, 0, device) == NULL) {
        free(token);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    *out = token;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result drop_token(fake_kind kind, void *token)
{
    fake_object *o = find(kind, token);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    free(o->address);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuStreamCreate(curdi_cu_stream *stream,
                                        unsigned int flags)
{
    ENTER_CONTEXT(device);
    if (stream == NULL || (flags & ~1u) != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    void *token = NULL;
    curdi_cu_result rc = new_token(FAKE_STREAM, device, &token);
    if (rc == CURDI_CUDA_SUCCESS)
        *stream = token;
    return rc;
}

static curdi_cu_result f_cuStreamDestroy(curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    return drop_token(FAKE_STREAM, stream);
}

static curdi_cu_result f_cuStreamSynchronize(curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    return unlock_with(valid_stream(stream) ? CURDI_CUDA_SUCCESS
                                            : CURDI_CUDA_ERROR_INVALID_HANDLE);
}

static curdi_cu_result f_cuStreamQuery(curdi_cu_stream stream)
{
    return f_cuStreamSynchronize(stream);
}

static curdi_cu_result f_cuEventCreate(curdi_cu_event *event,
                                       unsigned int flags)
{
    ENTER_CONTEXT(device);
    if (event == NULL || (flags & ~7u) != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    void *token = NULL;
    curdi_cu_result rc = new_token(FAKE_EVENT, device, &token);
    if (rc == CURDI_CUDA_SUCCESS)
        *event = token;
    return rc;
}

static curdi_cu_result f_cuEventDestroy(curdi_cu_event event)
{
    ENTER_CONTEXT(device);
    (void)device;
    return drop_token(FAKE_EVENT, event);
}

static curdi_cu_result f_cuEventRecord(curdi_cu_event event,
                                       curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (find(FAKE_EVENT, event) == NULL || !valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuEventSynchronize(curdi_cu_event event)
{
    ENTER_CONTEXT(device);
    (void)device;
    return unlock_with(find(FAKE_EVENT, event) != NULL
                           ? CURDI_CUDA_SUCCESS
                           : CURDI_CUDA_ERROR_INVALID_HANDLE);
}

static curdi_cu_result f_cuEventQuery(curdi_cu_event event)
{
    return f_cuEventSynchronize(event);
}

static curdi_cu_result f_cuEventElapsedTime(float *milliseconds,
                                            curdi_cu_event start,
                                            curdi_cu_event end)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (milliseconds == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (find(FAKE_EVENT, start) == NULL || find(FAKE_EVENT, end) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    *milliseconds = 0.001f;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* Functions are interned per module and name in a small fixed table, so
 * handles stay valid for the module's life without tracking them. */
#define FAKE_MAX_FUNCTIONS 64
static struct CUfunc_st functions[FAKE_MAX_FUNCTIONS];

static curdi_cu_result f_cuModuleLoadDataEx(curdi_cu_module *module,
                                            const void *image,
                                            unsigned int option_count,
                                            curdi_cu_jit_option *options,
                                            void **option_values)
{
    ENTER_CONTEXT(device);
    if (module == NULL || image == NULL ||
        (option_count != 0 && (options == NULL || option_values == NULL)))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    /* PTX text only: it must name a target and hold an entry. */
    const char *text = image;
    if (strstr(text, ".target") == NULL || strstr(text, ".entry") == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_PTX);
    char *copy_of_text = strdup(text);
    fake_object *o = copy_of_text != NULL
                         ? add(FAKE_MODULE, NULL, 0, device)
                         : NULL;
    if (o == NULL) {
        free(copy_of_text);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    o->image = copy_of_text;
    o->address = o; /* the handle */
    *module = (curdi_cu_module)(void *)o;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuModuleUnload(curdi_cu_module module)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_MODULE, module);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    /* Functions of the module die with it. */
    for (int i = 0; i < FAKE_MAX_FUNCTIONS; i++)
        if (functions[i].module == o)
            memset(&functions[i], 0, sizeof functions[i]);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuModuleGetFunction(curdi_cu_function *function,
                                             curdi_cu_module module,
                                             const char *name)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (function == NULL || name == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *o = find(FAKE_MODULE, module);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    char pattern[160];
    snprintf(pattern, sizeof pattern, ".entry %s(", name);
    if (strstr(o->image, pattern) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_NOT_FOUND);
    for (int i = 0; i < FAKE_MAX_FUNCTIONS; i++) {
        if (functions[i].module == NULL ||
            (functions[i].module == o && strcmp(functions[i].name, name) == 0)) {
            snprintf(functions[i].name, sizeof functions[i].name, "%s", name);
            functions[i].module = o;
            *function = &functions[i];
            return unlock_with(CURDI_CUDA_SUCCESS);
        }
    }
    return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
}

static curdi_cu_result f_cuLaunchKernel(
    curdi_cu_function function, unsigned int grid_x, unsigned int grid_y,
    unsigned int grid_z, unsigned int block_x, unsigned int block_y,
    unsigned int block_z, unsigned int shared_bytes, curdi_cu_stream stream,
    void **params, void **extra)
{
    ENTER_CONTEXT(device);
    (void)device;
    (void)shared_bytes;
    (void)extra;
    if (function == NULL || find(FAKE_MODULE, function->module) == NULL ||
        !valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 ||
        block_y == 0 || block_z == 0 ||
        (uint64_t)block_x * block_y * block_z > 1024)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (strcmp(function->name, "curd_selftest_xor") != 0)
        return unlock_with(CURDI_CUDA_ERROR_NOT_SUPPORTED);
    /* out[i] = in[i] ^ 0x5A for i < byte_len, one thread per byte. */
    if (params == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    uint64_t in, out;
    uint32_t byte_len;
    memcpy(&in, params[0], sizeof in);
    memcpy(&out, params[1], sizeof out);
    memcpy(&byte_len, params[2], sizeof byte_len);
    uint64_t threads = (uint64_t)grid_x * block_x;
    uint64_t n = byte_len < threads ? byte_len : threads;
    if (n != 0 && (find_range((uintptr_t)in, (size_t)n) == NULL ||
                   find_range((uintptr_t)out, (size_t)n) == NULL))
        return unlock_with(CURDI_CUDA_ERROR_ILLEGAL_ADDRESS);
    const uint8_t *src = (const uint8_t *)(uintptr_t)in;
    uint8_t *dst = (uint8_t *)(uintptr_t)out;
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(src[i] ^ 0x5A);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGetErrorName(curdi_cu_result error,
                                        const char **name)
{
    if (name == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    switch (error) {
#define FAKE_NAME_(n, v)                                                      \
    case CURDI_CUDA_##n:                                                      \
        *name = "CUDA_" #n;                                                   \
        return CURDI_CUDA_SUCCESS;
        CURDI_CUDA_RESULT_LIST(FAKE_NAME_)
#undef FAKE_NAME_
    default:
        *name = NULL;
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    }
}

static curdi_cu_result f_cuGetErrorString(curdi_cu_result error,
                                          const char **text)
{
    const char *name = NULL;
    curdi_cu_result rc = f_cuGetErrorName(error, &name);
    if (rc != CURDI_CUDA_SUCCESS || text == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    *text = "reported by the curd fake driver";
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuMemAllocAsync(curdi_cu_deviceptr *device_ptr,
                                         size_t byte_len,
                                         curdi_cu_stream stream)
{
    pthread_mutex_lock(&lock);
    bool ok = valid_stream(stream);
    pthread_mutex_unlock(&lock);
    if (!ok)
        return CURDI_CUDA_ERROR_INVALID_HANDLE;
    return f_cuMemAlloc(device_ptr, byte_len);
}

static curdi_cu_result f_cuMemFreeAsync(curdi_cu_deviceptr device_ptr,
                                        curdi_cu_stream stream)
{
    pthread_mutex_lock(&lock);
    bool ok = valid_stream(stream);
    pthread_mutex_unlock(&lock);
    if (!ok)
        return CURDI_CUDA_ERROR_INVALID_HANDLE;
    return f_cuMemFree(device_ptr);
}

/* The stream-ordered allocator above has no pool of its own to keep warm,
 * so the default pool is a token per device and its attributes are
 * accepted and ignored. */
static char fake_default_pools[16];

static curdi_cu_result f_cuDeviceGetDefaultMemPool(curdi_cu_mempool *pool,
                                                   curdi_cu_device device)
{
    if (pool == NULL || !valid_device(device) ||
        (size_t)device >= sizeof fake_default_pools)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    *pool = (curdi_cu_mempool)(void *)&fake_default_pools[device];
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuMemPoolSetAttribute(
    curdi_cu_mempool pool, curdi_cu_mempool_attribute attribute, void *value)
{
    (void)attribute;
    if (pool == NULL || value == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuDriverGetVersion(int *version)
{
    return cuDriverGetVersion(version);
}

/* ------------------------------------------------------------------------
 * cuGetProcAddress: the entries by base name, each with its exact type so
 * a signature mismatch with cuda_abi.h fails to compile.
 * ---------------------------------------------------------------------- */
typedef struct fake_entry {
    const char *name;
    void (*fn)(void);
} fake_entry;

#define FAKE_CHECK_(name, symbol, tier, params, args)                         \
    _Static_assert(                                                           \
        __builtin_types_compatible_p(__typeof__(&f_##name), curdi_pfn_##name), \
        "f_" #name " does not match curdi_pfn_" #name);
CURDI_CUDA_ENTRY_LIST(FAKE_CHECK_)
#undef FAKE_CHECK_
/* void (*)(void) is the generic function pointer (no cast warning). */
#define FAKE_ENTRY_(name, symbol, tier, params, args)                         \
    {#name, (void (*)(void))f_##name},
static const fake_entry entries[] = {CURDI_CUDA_ENTRY_LIST(FAKE_ENTRY_)};
#undef FAKE_ENTRY_

static bool omitted(const char *symbol)
{
    char pattern[96];
    snprintf(pattern, sizeof pattern, ",%s,", symbol);
    return strstr(cfg_omit, pattern) != NULL;
}

static void *lookup(const char *symbol)
{
    if (symbol == NULL || omitted(symbol))
        return NULL;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(entries[i].name, symbol) == 0)
            return (void *)(uintptr_t)entries[i].fn;
    return NULL;
}

FAKE_API curdi_cu_result cuGetProcAddress_v2(
    const char *symbol, void **pfn, int cuda_version, uint64_t flags,
    curdi_cu_proc_address_query_result *symbol_status);
FAKE_API curdi_cu_result cuGetProcAddress_v2(
    const char *symbol, void **pfn, int cuda_version, uint64_t flags,
    curdi_cu_proc_address_query_result *symbol_status)
{
    (void)flags;
    if (symbol == NULL || pfn == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    if (cuda_version > cfg_version)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    *pfn = lookup(symbol);
    if (symbol_status != NULL)
        *symbol_status = *pfn != NULL
                             ? CURDI_CU_GET_PROC_ADDRESS_SUCCESS
                             : CURDI_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CURDI_CUDA_SUCCESS;
}

FAKE_API curdi_cu_result cuGetProcAddress(const char *symbol, void **pfn,
                                          int cuda_version, uint64_t flags);
FAKE_API curdi_cu_result cuGetProcAddress(const char *symbol, void **pfn,
                                          int cuda_version, uint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, NULL);
}

/* ------------------------------------------------------------------------
 * For the tests: what is still alive.
 * ---------------------------------------------------------------------- */
/* Live objects of a kind ("device_memory", "host_memory", "registered",
 * "stream", "event", "module"), or "context_retains": the primary-context
 * retain counts of every device, summed. -1 for an unknown name. */
FAKE_API long fake_cuda_live(const char *what);
FAKE_API long fake_cuda_live(const char *what)
{
    long count = 0;
    pthread_mutex_lock(&lock);
    if (strcmp(what, "context_retains") == 0) {
        for (int i = 0; i < FAKE_MAX_DEVICES; i++)
            count += contexts[i].retain_count;
    } else if (strcmp(what, "context_stack") == 0) {
        count = stack_depth;
    } else {
        count = -1;
        for (int k = 0; k < FAKE_KIND_COUNT; k++) {
            if (strcmp(what, kind_names[k]) != 0)
                continue;
            count = 0;
            for (fake_object *o = objects; o != NULL; o = o->next)
                count += o->kind == (fake_kind)k;
        }
    }
    pthread_mutex_unlock(&lock);
    return count;
}

/* Simulates the driver's exit-time teardown now. */
FAKE_API void fake_cuda_teardown(void);
FAKE_API void fake_cuda_teardown(void)
{
    on_exit_teardown();
}
