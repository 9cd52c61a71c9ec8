/* fake-cuda.c - a stand-in libcuda.so.1 for tests on hosts without a GPU.
 *
 * Built as $(BUILD)/tests/libcuda-fake.so.1 and loaded through
 * CURD_LIBCUDA. It is not a GPU: "device memory" is host memory, copies
 * are memcpy, streams and events complete at once, and the kernels it can
 * run are curd's self-test kernel and the harness kernels of
 * tests/kernels/, emulated on the host by name (fake-kernels.c). What it
 * does model faithfully is the bookkeeping a driver checks:
 * a current context for every call that needs one, primary-context retain
 * counts, every allocation, stream, event and module by handle (an unknown
 * or freed handle is CUDA_ERROR_INVALID_VALUE / _HANDLE), and teardown at
 * exit (CUDA_ERROR_DEINITIALIZED from every call after its atexit handler
 * ran). The tests read its live counts through fake_cuda_live() to prove
 * that curd leaks nothing.
 *
 * Modules and launches (see fake.h): a module load tells PTX, cubin and
 * fatbin apart by content (anything else is CUDA_ERROR_INVALID_IMAGE),
 * parses the entries and their parameter layouts, and counts each PTX
 * JIT ("jit_compilations"). A PTX holding the line "// fake: jit error"
 * fails to compile (CUDA_ERROR_INVALID_PTX, with a log written into
 * CU_JIT_ERROR_LOG_BUFFER), as does one calling a function it does not
 * define (".extern .func"). The linker (cuLinkCreate ... cuLinkDestroy,
 * live as "link_state" objects) joins its inputs' texts into one "cubin"
 * whose entries are all of theirs, reading a library's text after its
 * first member header; an .extern .func that no input defines fails
 * cuLinkComplete with nvlink's "Undefined reference" in the error log;
 * "link_completions" counts the links made. A kernel that touches memory outside every
 * allocation (or traps) faults as on a GPU: the launch returns success,
 * and every later call on that context returns the fault
 * (CUDA_ERROR_ILLEGAL_ADDRESS, or CUDA_ERROR_LAUNCH_FAILED for a trap)
 * until the primary context is released to zero retains, which destroys
 * it with everything it held, and retained again. Launches, async copies
 * and memsets on a capturing stream are recorded into a graph, in order;
 * cuGraphLaunch replays them, and cuGraphExecKernelNodeSetParams /
 * cuGraphExecUpdate change them. Host functions (cuLaunchHostFunc, which
 * curd does not call: the stand-in NCCL does, to put a collective into a
 * capture, as NCCL puts its work into one) run at once outside a capture
 * and are recorded as host nodes inside one; a replay runs a host node
 * without the driver's lock held, so it may wait for another thread (a
 * peer rank). cuStreamIsCapturing says whether a stream captures.
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
 *   FAKE_CUDA_INIT_RESULT  the CUresult cuInit returns (default 0)
 *   FAKE_CUDA_NO_HOST_POINTER  when set (read at each query), devices do not
 *                       reach page-locked host memory at its host address
 *                       (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0)
 *   FAKE_CUDA_NO_STREAM_MEMOPS  when set (read at each call),
 *                       cuStreamWriteValue32 returns
 *                       CUDA_ERROR_NOT_SUPPORTED
 *   FAKE_CUDA_NO_PEER_ACCESS  when set (read at each call), no device
 *                       reaches another's memory: cuDeviceCanAccessPeer
 *                       says 0 and cuCtxEnablePeerAccess returns
 *                       CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (so the staged
 *                       path of copies between devices runs on the CPU)
 *   FAKE_CUDA_NO_SHAREABLE  when set (read at each query), devices have no
 *                       virtual memory management and export no POSIX
 *                       file descriptors (both attributes are 0)
 *
 * With several devices (FAKE_CUDA_DEVICES), every device's memory is host
 * memory of one process, so a copy between devices is a memmove like any
 * other; what is modelled is the bookkeeping: which context enabled peer
 * access to which (cuCtxEnablePeerAccess a second time is
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, as on a GPU). */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/cuda_abi.h"
#include "fake.h"

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_MAX_DEVICES 4
/* CU_DEVICE_ATTRIBUTE_MAX_PITCH, as real devices report it. */
#define FAKE_MAX_PITCH 2147483647u
/* The real driver's context stack has no small bound. The fault sweeps
 * leave one context pushed for each run whose cuCtxPopCurrent they fail
 * (the library has no way to pop it again), so a test program with many
 * sweeps needs space for that many. */
#define FAKE_STACK_DEPTH 256

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
    FAKE_GRAPH,
    FAKE_GRAPH_EXEC,
    FAKE_LINK_STATE,
    FAKE_ALLOCATION,
    FAKE_MEM_HANDLE,
    FAKE_VA_RANGE,
    FAKE_KIND_COUNT
} fake_kind;

static const char *const kind_names[FAKE_KIND_COUNT] = {
    "device_memory", "host_memory", "registered", "stream",
    "event",         "module",      "graph",      "graph_exec",
    "link_state",    "allocation",  "mem_handle", "va_range",
};

typedef struct fake_graph fake_graph;
typedef struct fake_link fake_link;

/* Every live object, by kind: a singly linked list is plenty here. */
typedef struct fake_object {
    struct fake_object *next;
    fake_kind kind;
    void *address; /* host memory backing, or the handle itself */
    size_t byte_len;
    int device;    /* owning device (memory, streams, events, modules) */
    fake_module_info module; /* modules: the entries */
    fake_graph *graph; /* graphs and executable graphs: the nodes;
                          streams: the graph being captured, or NULL */
    fake_link *link;   /* link states: the inputs so far, the logs */
    bool not_ready; /* events: recorded while fake_cuda_hold_events held */
    /* Virtual memory management (see "Virtual memory management" below):
     * an allocation's memfd, its references (handles and mappings), the
     * handle types it may be exported as, and whether it came from an
     * import (then in no device's used bytes); a handle's or a mapping's
     * allocation (device memory with `allocation` set is a mapping). */
    int fd;
    long refs;
    unsigned handle_types;
    bool imported;
    struct fake_object *allocation;
} fake_object;

struct CUctx_st {
    int device;
    unsigned retain_count;
};

struct CUfunc_st {
    fake_object *module;
    const fake_entry_info *entry;
    int max_dynamic_shared; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
};

/* A recorded launch. Its handle (CUgraphNode) is its address; an
 * executable graph keeps its own copies and the handles of the nodes it
 * was made from, which identify them and are never read. */
/* A captured node: a kernel launch, a copy, a memset or a host function
 * (the types cuGraphNodeGetType reports: CU_GRAPH_NODE_TYPE_KERNEL,
 * _MEMCPY, _MEMSET, _HOST). */
enum {
    FAKE_NODE_KERNEL = 0,
    FAKE_NODE_COPY = 1,
    FAKE_NODE_MEMSET = 2,
    FAKE_NODE_HOST = 3
};

typedef struct fake_node {
    unsigned kind;
    /* Copies and memsets: dst, src (copies), byte_len bytes; device_side
     * is the device address, checked when the node runs. */
    void *dst;
    const void *src;
    size_t byte_len;
    uintptr_t device_side;
    unsigned char value;
    void (*host_fn)(void *); /* host nodes: the function and its data */
    void *host_data;
    struct CUfunc_st *function;
    unsigned grid[3], block[3];
    unsigned shared_bytes;
    bool cooperative;
    unsigned char param_bytes[4096];
    void *param_ptrs[FAKE_MAX_PARAMS];
} fake_node;

struct fake_graph {
    size_t count;
    fake_node **nodes;
    fake_node **origin; /* executable graphs: the nodes they came from */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_object *objects;
static struct CUctx_st contexts[FAKE_MAX_DEVICES];
static size_t used_bytes[FAKE_MAX_DEVICES];
/* A context's sticky fault (0: none), cleared when it is destroyed. */
static curdi_cu_result sticky[FAKE_MAX_DEVICES];
/* peer_enabled[a][b]: context a enabled access to context b's memory;
 * forgotten when a is destroyed. */
static bool peer_enabled[FAKE_MAX_DEVICES][FAKE_MAX_DEVICES];
static long jit_compilations;
static long link_completions;
/* Events recorded while this is set answer cuEventQuery with
 * CUDA_ERROR_NOT_READY until fake_cuda_hold_events(0): the one way a test
 * sees work of someone else's that has not completed yet, since streams
 * here run at once. */
static bool hold_events;
static long stream_waits; /* cuStreamWaitEvent calls that succeeded */
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

/* Memory of `kind` containing [address, address + byte_len). */
static fake_object *find_range_of(fake_kind kind, uintptr_t address,
                                  size_t byte_len)
{
    for (fake_object *o = objects; o != NULL; o = o->next) {
        if (o->kind != kind)
            continue;
        uintptr_t start = (uintptr_t)o->address;
        if (address >= start && address - start <= o->byte_len &&
            byte_len <= o->byte_len - (address - start))
            return o;
    }
    return NULL;
}

/* Device memory containing [address, address + byte_len). */
static fake_object *find_range(uintptr_t address, size_t byte_len)
{
    return find_range_of(FAKE_DEVICE_MEMORY, address, byte_len);
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

static void graph_free(fake_graph *graph)
{
    if (graph == NULL)
        return;
    for (size_t i = 0; i < graph->count; i++)
        free(graph->nodes[i]);
    free(graph->nodes);
    free(graph->origin);
    free(graph);
}

/* A link state (cuLinkCreate): the text of every input added, one after
 * another (the stand-in's "machine code"), the image cuLinkComplete made
 * of it, the logs the options named, and what the info log reports. */
struct fake_link {
    char *text; /* NUL-terminated */
    size_t text_len;
    unsigned inputs;
    unsigned char *linked; /* "\x7f" "ELF" + text + NUL, once complete */
    char *error_log, *info_log;
    size_t error_capacity, info_capacity;
    long level, registers, target, line_info; /* -1: not given */
};

static void link_free(fake_link *link)
{
    if (link == NULL)
        return;
    free(link->text);
    free(link->linked);
    free(link);
}

static void drop(fake_object *gone)
{
    for (fake_object **link = &objects; *link != NULL; link = &(*link)->next) {
        if (*link == gone) {
            *link = gone->next;
            fake_module_info_free(&gone->module);
            graph_free(gone->graph);
            link_free(gone->link);
            free(gone);
            return;
        }
    }
}

size_t fake_span(uint64_t address)
{
    for (fake_object *o = objects; o != NULL; o = o->next) {
        /* Page-locked host memory is the device's at its host address, as
         * under unified addressing. */
        if (o->kind != FAKE_DEVICE_MEMORY && o->kind != FAKE_HOST_MEMORY
            && o->kind != FAKE_REGISTERED)
            continue;
        uint64_t start = (uint64_t)(uintptr_t)o->address;
        if (address >= start && address - start < o->byte_len)
            return o->byte_len - (size_t)(address - start);
    }
    return 0;
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
    int device_var = stack[stack_depth - 1]->device;                          \
    if (sticky[device_var] != 0)                                              \
        return unlock_with(sticky[device_var])

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
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        *value = 227 * 1024; /* an H100's */
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = 4;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_MAX_PITCH:
        *value = FAKE_MAX_PITCH;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
        /* Read at each call: a test turns it off for one device. */
        *value = getenv("FAKE_CUDA_NO_HOST_POINTER") == NULL;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        *value = 2;
        break;
    case CURDI_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CURDI_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        *value = getenv("FAKE_CUDA_NO_SHAREABLE") == NULL;
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

static void forget_functions_of(const fake_object *module);

/* The last release of a faulted context destroys it, and with it every
 * object it held (a healthy one is kept, so that the tests' leak counts
 * stay meaningful); the next retain makes a fresh one. */
static void destroy_broken_context(int dev)
{
    fake_object **link = &objects;
    while (*link != NULL) {
        fake_object *o = *link;
        /* What the virtual memory management calls made belongs to the
         * process, not to a context: it outlives the context. */
        bool process_wide = o->kind == FAKE_ALLOCATION
                            || o->kind == FAKE_MEM_HANDLE
                            || o->kind == FAKE_VA_RANGE
                            || o->allocation != NULL;
        if (o->device != dev || process_wide) {
            link = &o->next;
            continue;
        }
        if (o->kind == FAKE_DEVICE_MEMORY || o->kind == FAKE_HOST_MEMORY ||
            o->kind == FAKE_STREAM || o->kind == FAKE_EVENT)
            free(o->address);
        if (o->kind == FAKE_MODULE)
            forget_functions_of(o);
        *link = o->next;
        fake_module_info_free(&o->module);
        graph_free(o->graph);
        link_free(o->link);
        free(o);
    }
    used_bytes[dev] = 0;
    for (fake_object *o = objects; o != NULL; o = o->next)
        if (o->kind == FAKE_ALLOCATION && o->device == dev && !o->imported)
            used_bytes[dev] += o->byte_len;
    sticky[dev] = 0;
    memset(peer_enabled[dev], 0, sizeof peer_enabled[dev]);
}

static curdi_cu_result f_cuDevicePrimaryCtxRelease(curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    if (contexts[dev].retain_count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    /* Like the real driver, a context a fault broke stays broken when
     * its last retain goes: only cuDevicePrimaryCtxReset mends it. */
    contexts[dev].retain_count--;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuDevicePrimaryCtxReset(curdi_cu_device dev)
{
    ENTER_NO_CONTEXT();
    if (!valid_device(dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    destroy_broken_context(dev);
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
    if (o == NULL || o->allocation != NULL) /* a mapping is unmapped */
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

/* The device reaches page-locked memory at its host address. */
static curdi_cu_result f_cuMemHostGetDevicePointer(
    curdi_cu_deviceptr *device_ptr, void *host_ptr, unsigned int flags)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (device_ptr == NULL || flags != 0 ||
        find_range_of(FAKE_HOST_MEMORY, (uintptr_t)host_ptr, 1) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    *device_ptr = (curdi_cu_deviceptr)(uintptr_t)host_ptr;
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

/* A stream a caller hands curd to order work against
 * (curd_device_wait_stream, curd_pending_stream_wait): the legacy null
 * stream is one the caller may pass; curd only records on it or makes it
 * wait, and never enqueues work of its own there. */
static bool valid_caller_stream(curdi_cu_stream stream)
{
    return stream == NULL || find(FAKE_STREAM, stream) != NULL;
}

static bool capturing(curdi_cu_stream stream);
static curdi_cu_result capture_node(curdi_cu_stream stream,
                                    const struct fake_node *node);

static curdi_cu_result copy(void *dst, const void *src, size_t byte_len,
                            uintptr_t device_side, size_t device_len,
                            curdi_cu_stream stream, bool need_stream)
{
    if (need_stream && !valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (byte_len != 0 && find_range(device_side, device_len) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (need_stream && capturing(stream)) {
        static fake_node node; /* large; guarded by the lock */
        memset(&node, 0, sizeof node);
        node.kind = FAKE_NODE_COPY;
        node.dst = dst;
        node.src = src;
        node.byte_len = byte_len;
        node.device_side = device_side;
        return unlock_with(capture_node(stream, &node));
    }
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

/* A copy between two contexts' memory: each side must be device memory
 * (of any device: the fake does not tell them apart by address), the
 * contexts live. Peer access is not required, as on a GPU (the driver
 * then stages the copy itself). */
static curdi_cu_result f_cuMemcpyPeerAsync(curdi_cu_deviceptr dst,
                                           curdi_cu_context dst_context,
                                           curdi_cu_deviceptr src,
                                           curdi_cu_context src_context,
                                           size_t byte_len,
                                           curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (dst_context == NULL || dst_context->retain_count == 0
        || src_context == NULL || src_context->retain_count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    if (byte_len != 0 && find_range((uintptr_t)src, byte_len) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                byte_len, (uintptr_t)dst, byte_len, stream, true);
}

static curdi_cu_result f_cuDeviceCanAccessPeer(int *can_access,
                                               curdi_cu_device dev,
                                               curdi_cu_device peer_dev)
{
    ENTER_NO_CONTEXT();
    if (can_access == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev) || !valid_device(peer_dev))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    *can_access = dev != peer_dev && getenv("FAKE_CUDA_NO_PEER_ACCESS") == NULL;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuCtxEnablePeerAccess(curdi_cu_context peer_context,
                                               unsigned int flags)
{
    ENTER_CONTEXT(device);
    if (flags != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (peer_context == NULL || peer_context->retain_count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_CONTEXT);
    if (peer_context->device == device)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    if (getenv("FAKE_CUDA_NO_PEER_ACCESS") != NULL)
        return unlock_with(CURDI_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    if (peer_enabled[device][peer_context->device])
        return unlock_with(CURDI_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    peer_enabled[device][peer_context->device] = true;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* One strided copy between device and host memory, as the driver checks
 * it: linear memory only (no arrays), each pitch at least the width and
 * at most FAKE_MAX_PITCH, and every row of the device side (the whole
 * extent from the first row to the last, as one allocation) device
 * memory. Rows are copied one by one; the bytes between them stay. */
static curdi_cu_result f_cuMemcpy2DAsync(const curdi_cu_memcpy2d_abi_t *abi,
                                         curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    (void)device;
    const curdi_cu_memcpy2d *c = (const curdi_cu_memcpy2d *)(const void *)abi;
    if (!valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (capturing(stream))
        return unlock_with(CURDI_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    bool down = c->src_memory_type == CURDI_CU_MEMORYTYPE_DEVICE
                && c->dst_memory_type == CURDI_CU_MEMORYTYPE_HOST;
    bool up = c->src_memory_type == CURDI_CU_MEMORYTYPE_HOST
              && c->dst_memory_type == CURDI_CU_MEMORYTYPE_DEVICE;
    if ((!down && !up) || c->src_array != NULL || c->dst_array != NULL
        || c->src_x_bytes != 0 || c->src_y != 0 || c->dst_x_bytes != 0
        || c->dst_y != 0 || c->src_pitch < c->width
        || c->dst_pitch < c->width || c->src_pitch > FAKE_MAX_PITCH
        || c->dst_pitch > FAKE_MAX_PITCH)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (c->width == 0 || c->height == 0)
        return unlock_with(CURDI_CUDA_SUCCESS);
    uintptr_t device_side = down ? (uintptr_t)c->src_device
                                 : (uintptr_t)c->dst_device;
    size_t device_pitch = down ? c->src_pitch : c->dst_pitch;
    size_t extent = (c->height - 1u) * device_pitch + c->width;
    if (find_range(device_side, extent) == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    const unsigned char *src = down ? (const unsigned char *)(uintptr_t)
                                          c->src_device
                                    : c->src_host;
    unsigned char *dst = down ? c->dst_host
                              : (unsigned char *)(uintptr_t)c->dst_device;
    for (size_t row = 0; row < c->height; row++)
        memmove(dst + row * c->dst_pitch, src + row * c->src_pitch, c->width);
    return unlock_with(CURDI_CUDA_SUCCESS);
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
    if (capturing(stream)) {
        static fake_node node; /* large; guarded by the lock */
        memset(&node, 0, sizeof node);
        node.kind = FAKE_NODE_MEMSET;
        node.dst = (void *)(uintptr_t)dst;
        node.byte_len = byte_len;
        node.device_side = (uintptr_t)dst;
        node.value = value;
        return unlock_with(capture_node(stream, &node));
    }
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
    if (!valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    return unlock_with(capturing(stream)
                           ? CURDI_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                           : CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuStreamQuery(curdi_cu_stream stream)
{
    return f_cuStreamSynchronize(stream);
}

/* Streams run at once here, so the word is written at once: into memory
 * from cuMemHostAlloc (what curd asks for) or device memory. */
static curdi_cu_result f_cuStreamWriteValue32(curdi_cu_stream stream,
                                              curdi_cu_deviceptr address,
                                              uint32_t value,
                                              unsigned int flags)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (getenv("FAKE_CUDA_NO_STREAM_MEMOPS") != NULL)
        return unlock_with(CURDI_CUDA_ERROR_NOT_SUPPORTED);
    if (!valid_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (flags != 0 || address % 4u != 0 || capturing(stream) ||
        (find_range_of(FAKE_HOST_MEMORY, (uintptr_t)address, 4) == NULL &&
         find_range((uintptr_t)address, 4) == NULL))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    __atomic_store_n((uint32_t *)(uintptr_t)address, value,
                     __ATOMIC_RELEASE);
    return unlock_with(CURDI_CUDA_SUCCESS);
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
    fake_object *o = find(FAKE_EVENT, event);
    if (o == NULL || !valid_caller_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    o->not_ready = hold_events;
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
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_EVENT, event);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    return unlock_with(o->not_ready ? CURDI_CUDA_ERROR_NOT_READY
                                    : CURDI_CUDA_SUCCESS);
}

/* Memory the fake allocated or registered (any device's, as with
 * unified addressing); anything else is CUDA_ERROR_INVALID_VALUE, as the
 * driver answers for memory it does not know. */
static curdi_cu_result f_cuPointerGetAttribute(void *data,
                                               curdi_cu_pointer_attribute
                                                   attribute,
                                               curdi_cu_deviceptr device_ptr)
{
    ENTER_NO_CONTEXT();
    /* Device memory, else page-locked host memory (allocated or
     * registered), as unified addressing lets the driver tell apart. */
    fake_object *o = find_range((uintptr_t)device_ptr, 1);
    if (o == NULL)
        o = find_range_of(FAKE_HOST_MEMORY, (uintptr_t)device_ptr, 1);
    if (o == NULL)
        o = find_range_of(FAKE_REGISTERED, (uintptr_t)device_ptr, 1);
    if (data == NULL || o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    switch (attribute) {
    case CURDI_CU_POINTER_ATTRIBUTE_CONTEXT:
        *(curdi_cu_context *)data = &contexts[o->device];
        break;
    case CURDI_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = o->kind == FAKE_DEVICE_MEMORY
                                    ? CURDI_CU_MEMORYTYPE_DEVICE
                                    : CURDI_CU_MEMORYTYPE_HOST;
        break;
    case CURDI_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = o->device;
        break;
    case CURDI_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(curdi_cu_deviceptr *)data = (uintptr_t)o->address;
        break;
    case CURDI_CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = o->byte_len;
        break;
    default:
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* Work runs at once here, so there is nothing to wait for; an event of
 * any context may be waited on, as with the driver. */
static curdi_cu_result f_cuStreamWaitEvent(curdi_cu_stream stream,
                                           curdi_cu_event event,
                                           unsigned int flags)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (flags != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (find(FAKE_EVENT, event) == NULL || !valid_caller_stream(stream))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    stream_waits++;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* The legacy null stream belongs to the current context. */
static curdi_cu_result f_cuStreamGetCtx(curdi_cu_stream stream,
                                        curdi_cu_context *context)
{
    ENTER_CONTEXT(device);
    if (context == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (stream == NULL) {
        *context = &contexts[device];
        return unlock_with(CURDI_CUDA_SUCCESS);
    }
    fake_object *o = find(FAKE_STREAM, stream);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    *context = &contexts[o->device];
    return unlock_with(CURDI_CUDA_SUCCESS);
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

/* ------------------------------------------------------------------------
 * Modules and functions
 * ---------------------------------------------------------------------- */
/* Functions are interned per module and entry in a fixed table, so
 * handles stay valid for the module's life without tracking them. */
#define FAKE_MAX_FUNCTIONS 512
static struct CUfunc_st functions[FAKE_MAX_FUNCTIONS];

/* The default dynamic shared memory a function may use, and what it may
 * opt in to (an H100's 227 KiB per block). */
#define FAKE_SHARED_DEFAULT 49152
#define FAKE_SHARED_OPTIN (227 * 1024)
#define FAKE_JIT_ERROR_MARKER "// fake: jit error"

static void forget_functions_of(const fake_object *module)
{
    for (int i = 0; i < FAKE_MAX_FUNCTIONS; i++)
        if (functions[i].module == module)
            memset(&functions[i], 0, sizeof functions[i]);
}

static struct CUfunc_st *intern_function(fake_object *module,
                                         const fake_entry_info *entry)
{
    struct CUfunc_st *free_slot = NULL;
    for (int i = 0; i < FAKE_MAX_FUNCTIONS; i++) {
        if (functions[i].module == module && functions[i].entry == entry)
            return &functions[i];
        if (functions[i].module == NULL && free_slot == NULL)
            free_slot = &functions[i];
    }
    if (free_slot != NULL) {
        free_slot->module = module;
        free_slot->entry = entry;
        free_slot->max_dynamic_shared =
            FAKE_SHARED_DEFAULT - (int)module->module.static_shared_bytes;
    }
    return free_slot;
}

/* A function of a live module, or NULL. */
static struct CUfunc_st *live_function(curdi_cu_function function)
{
    if (function == NULL || function < &functions[0] ||
        function >= &functions[FAKE_MAX_FUNCTIONS] ||
        function->module == NULL || find(FAKE_MODULE, function->module) == NULL)
        return NULL;
    return function;
}

/* Writes the JIT error log the way the driver does: into the caller's
 * buffer, truncated and terminated, with the size option set to what was
 * written. */
static void write_jit_log(unsigned int option_count,
                          curdi_cu_jit_option *options, void **option_values,
                          const char *log)
{
    char *buffer = NULL;
    size_t capacity = 0;
    int size_index = -1;
    for (unsigned int i = 0; i < option_count; i++) {
        if (options[i] == CURDI_CU_JIT_ERROR_LOG_BUFFER)
            buffer = option_values[i];
        if (options[i] == CURDI_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            capacity = (size_t)(uintptr_t)option_values[i];
            size_index = (int)i;
        }
    }
    if (buffer == NULL || capacity == 0)
        return;
    snprintf(buffer, capacity, "%s", log);
    size_t written = strlen(buffer) + 1;
    option_values[size_index] = (void *)(uintptr_t)written;
}

/* A compiled PTX's information log: the options the JIT was given (-1:
 * not given), so the tests see what curd passed. */
static void write_info_log(unsigned int option_count,
                           curdi_cu_jit_option *options, void **option_values)
{
    char *buffer = NULL;
    size_t capacity = 0;
    long level = -1, registers = -1, target = -1, line_info = -1;
    for (unsigned int i = 0; i < option_count; i++) {
        long value = (long)(uintptr_t)option_values[i];
        switch (options[i]) {
        case CURDI_CU_JIT_INFO_LOG_BUFFER: buffer = option_values[i]; break;
        case CURDI_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            capacity = (size_t)(uintptr_t)option_values[i];
            break;
        case CURDI_CU_JIT_OPTIMIZATION_LEVEL: level = value; break;
        case CURDI_CU_JIT_MAX_REGISTERS: registers = value; break;
        case CURDI_CU_JIT_TARGET: target = value; break;
        case CURDI_CU_JIT_GENERATE_LINE_INFO: line_info = value; break;
        default: break;
        }
    }
    if (buffer != NULL && capacity != 0)
        snprintf(buffer, capacity,
                 "fake ptxas info: optimization level %ld, max registers"
                 " %ld, target %ld, line info %ld",
                 level, registers, target, line_info);
}

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
    fake_image_kind kind = fake_image_kind_of(image);
    /* A library is only ever an input of a link. */
    if (kind == FAKE_IMAGE_NONE || kind == FAKE_IMAGE_LIBRARY)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_IMAGE);
    size_t text_len = 0;
    const char *text = fake_image_text(image, 0, kind, &text_len);
    if (text == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_IMAGE);
    if (kind == FAKE_IMAGE_PTX) {
        jit_compilations++;
        if (strstr(text, FAKE_JIT_ERROR_MARKER) != NULL) {
            write_jit_log(option_count, options, option_values,
                          "ptxas application ptx input, line 1; error   : "
                          "the image asked the fake driver to fail its JIT "
                          "(" FAKE_JIT_ERROR_MARKER ")\n"
                          "ptxas fatal   : Ptx assembly aborted due to errors");
            return unlock_with(CURDI_CUDA_ERROR_INVALID_PTX);
        }
        if (strstr(text, ".target") == NULL) {
            write_jit_log(option_count, options, option_values,
                          "ptxas fatal   : no .target directive");
            return unlock_with(CURDI_CUDA_ERROR_INVALID_PTX);
        }
    }
    /* A module loaded alone must define what it calls; only the linker
     * joins modules (as ptxas says of PTX, and of a linked image too). */
    char missing[FAKE_NAME_BYTES];
    if (fake_ptx_unresolved(text, text_len, missing, sizeof missing)) {
        char log[256];
        snprintf(log, sizeof log,
                 "ptxas fatal   : Unresolved extern function '%s'", missing);
        write_jit_log(option_count, options, option_values, log);
        return unlock_with(CURDI_CUDA_ERROR_INVALID_PTX);
    }
    fake_object *o = add(FAKE_MODULE, NULL, 0, device);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    if (!fake_module_parse(text, text_len, &o->module)) {
        drop(o);
        return unlock_with(kind == FAKE_IMAGE_PTX
                               ? CURDI_CUDA_ERROR_INVALID_PTX
                               : CURDI_CUDA_ERROR_INVALID_IMAGE);
    }
    o->module.kind = kind;
    o->address = o; /* the handle */
    *module = (curdi_cu_module)(void *)o;
    if (kind == FAKE_IMAGE_PTX)
        write_info_log(option_count, options, option_values);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------
 * The linker: inputs are joined as text, and an undefined reference is
 * an error of cuLinkComplete, as nvlink reports it.
 * ---------------------------------------------------------------------- */
static void write_log(char *buffer, size_t capacity, const char *text)
{
    if (buffer != NULL && capacity != 0)
        snprintf(buffer, capacity, "%s", text);
}

static curdi_cu_result f_cuLinkCreate(unsigned int option_count,
                                      curdi_cu_jit_option *options,
                                      void **option_values,
                                      curdi_cu_link_state *state)
{
    ENTER_CONTEXT(device);
    if (state == NULL ||
        (option_count != 0 && (options == NULL || option_values == NULL)))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_link *link = calloc(1, sizeof *link);
    char *text = calloc(1, 1);
    fake_object *o = link != NULL && text != NULL
                         ? add(FAKE_LINK_STATE, NULL, 0, device)
                         : NULL;
    if (o == NULL) {
        free(link);
        free(text);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    link->text = text;
    link->level = link->registers = link->target = link->line_info = -1;
    for (unsigned int i = 0; i < option_count; i++) {
        void *value = option_values[i];
        long number = (long)(uintptr_t)value;
        switch (options[i]) {
        case CURDI_CU_JIT_ERROR_LOG_BUFFER: link->error_log = value; break;
        case CURDI_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            link->error_capacity = (size_t)(uintptr_t)value;
            break;
        case CURDI_CU_JIT_INFO_LOG_BUFFER: link->info_log = value; break;
        case CURDI_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            link->info_capacity = (size_t)(uintptr_t)value;
            break;
        case CURDI_CU_JIT_OPTIMIZATION_LEVEL: link->level = number; break;
        case CURDI_CU_JIT_MAX_REGISTERS: link->registers = number; break;
        case CURDI_CU_JIT_TARGET: link->target = number; break;
        case CURDI_CU_JIT_GENERATE_LINE_INFO: link->line_info = number; break;
        default: break;
        }
    }
    o->link = link;
    o->address = o; /* the handle */
    *state = (curdi_cu_link_state)(void *)o;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuLinkAddData(curdi_cu_link_state state,
                                       curdi_cu_jit_input_type type,
                                       void *data, size_t byte_len,
                                       const char *name,
                                       unsigned int option_count,
                                       curdi_cu_jit_option *options,
                                       void **option_values)
{
    ENTER_CONTEXT(device);
    (void)device;
    (void)options;
    (void)option_values;
    fake_object *o = find(FAKE_LINK_STATE, state);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    fake_link *link = o->link;
    if (data == NULL || byte_len < 8 || option_count != 0 ||
        link->linked != NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    static const fake_image_kind kind_of_type[] = {
        [CURDI_CU_JIT_INPUT_CUBIN] = FAKE_IMAGE_CUBIN,
        [CURDI_CU_JIT_INPUT_PTX] = FAKE_IMAGE_PTX,
        [CURDI_CU_JIT_INPUT_FATBINARY] = FAKE_IMAGE_FATBIN,
        [CURDI_CU_JIT_INPUT_LIBRARY] = FAKE_IMAGE_LIBRARY,
    };
    fake_image_kind kind = fake_image_kind_of(data);
    char log[512];
    if (type >= sizeof kind_of_type / sizeof kind_of_type[0] ||
        kind == FAKE_IMAGE_NONE || kind_of_type[type] != kind) {
        snprintf(log, sizeof log,
                 "nvlink error   : '%s' is not of the input type given (%u)",
                 name != NULL ? name : "(unnamed)", type);
        write_log(link->error_log, link->error_capacity, log);
        return unlock_with(CURDI_CUDA_ERROR_INVALID_IMAGE);
    }
    size_t text_len = 0;
    const char *text = fake_image_text(data, byte_len, kind, &text_len);
    if (text == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_IMAGE);
    if (kind == FAKE_IMAGE_PTX) {
        /* The text's own length: the driver reads PTX to its NUL. */
        text_len = strnlen(text, byte_len);
        jit_compilations++;
        if (strstr(text, FAKE_JIT_ERROR_MARKER) != NULL) {
            snprintf(log, sizeof log,
                     "ptxas application ptx input, line 1; error   : '%s'"
                     " asked the fake driver to fail its JIT ("
                     FAKE_JIT_ERROR_MARKER ")",
                     name != NULL ? name : "(unnamed)");
            write_log(link->error_log, link->error_capacity, log);
            return unlock_with(CURDI_CUDA_ERROR_INVALID_PTX);
        }
    }
    char *grown = realloc(link->text, link->text_len + text_len + 2);
    if (grown == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    link->text = grown;
    memcpy(link->text + link->text_len, text, text_len);
    link->text_len += text_len;
    link->text[link->text_len++] = '\n';
    link->text[link->text_len] = '\0';
    link->inputs++;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuLinkComplete(curdi_cu_link_state state,
                                        void **cubin, size_t *cubin_bytes)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_LINK_STATE, state);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    fake_link *link = o->link;
    if (cubin == NULL || cubin_bytes == NULL || link->inputs == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    char missing[FAKE_NAME_BYTES], log[512];
    if (fake_ptx_unresolved(link->text, link->text_len, missing,
                            sizeof missing)) {
        snprintf(log, sizeof log,
                 "nvlink error   : Undefined reference to '%s'", missing);
        write_log(link->error_log, link->error_capacity, log);
        return unlock_with(CURDI_CUDA_ERROR_INVALID_IMAGE);
    }
    free(link->linked);
    link->linked = malloc(4 + link->text_len + 1);
    if (link->linked == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    memcpy(link->linked, "\x7f" "ELF", 4);
    memcpy(link->linked + 4, link->text, link->text_len + 1);
    snprintf(log, sizeof log,
             "fake nvlink info: linked %u inputs; optimization level %ld,"
             " max registers %ld, target %ld, line info %ld",
             link->inputs, link->level, link->registers, link->target,
             link->line_info);
    write_log(link->info_log, link->info_capacity, log);
    link_completions++;
    *cubin = link->linked;
    *cubin_bytes = 4 + link->text_len + 1;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuLinkDestroy(curdi_cu_link_state state)
{
    ENTER_NO_CONTEXT();
    fake_object *o = find(FAKE_LINK_STATE, state);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuModuleUnload(curdi_cu_module module)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *o = find(FAKE_MODULE, module);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    forget_functions_of(o); /* functions of the module die with it */
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
    for (uint32_t i = 0; i < o->module.entry_count; i++) {
        if (strcmp(o->module.entries[i].name, name) != 0)
            continue;
        struct CUfunc_st *f = intern_function(o, &o->module.entries[i]);
        if (f == NULL)
            return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
        *function = f;
        return unlock_with(CURDI_CUDA_SUCCESS);
    }
    return unlock_with(CURDI_CUDA_ERROR_NOT_FOUND);
}

static curdi_cu_result f_cuModuleGetFunctionCount(unsigned int *count,
                                                  curdi_cu_module module)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (count == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *o = find(FAKE_MODULE, module);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    *count = o->module.entry_count;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuModuleEnumerateFunctions(
    curdi_cu_function *out, unsigned int function_count,
    curdi_cu_module module)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (out == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *o = find(FAKE_MODULE, module);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (function_count < o->module.entry_count)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    for (uint32_t i = 0; i < o->module.entry_count; i++) {
        out[i] = intern_function(o, &o->module.entries[i]);
        if (out[i] == NULL)
            return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuFuncGetName(const char **name,
                                       curdi_cu_function function)
{
    ENTER_NO_CONTEXT();
    if (name == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    *name = f->entry->name;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuFuncGetParamInfo(curdi_cu_function function,
                                            size_t param_index,
                                            size_t *param_offset,
                                            size_t *param_size)
{
    ENTER_NO_CONTEXT();
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (param_index >= f->entry->param_count)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (param_offset != NULL)
        *param_offset = f->entry->params[param_index].offset;
    if (param_size != NULL)
        *param_size = f->entry->params[param_index].size;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuFuncGetAttribute(
    int *value, curdi_cu_function_attribute attribute,
    curdi_cu_function function)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (value == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    const fake_module_info *info = &f->module->module;
    switch (attribute) {
    case CURDI_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = 1024;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *value = (int)info->static_shared_bytes;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CURDI_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *value = 0;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_NUM_REGS:
        /* Plausible, and different between kernels. */
        *value = 8 + 2 * (int)f->entry->param_count;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *value = info->ptx_version != 0 ? info->ptx_version : 90;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *value = 90;
        break;
    case CURDI_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = f->max_dynamic_shared;
        break;
    default:
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuFuncSetAttribute(
    curdi_cu_function function, curdi_cu_function_attribute attribute,
    int value)
{
    ENTER_CONTEXT(device);
    (void)device;
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (attribute != CURDI_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if (value < 0 ||
        value > FAKE_SHARED_OPTIN - (int)f->module->module.static_shared_bytes)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    f->max_dynamic_shared = value;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* Blocks per multiprocessor: limited by 2048 threads, 32 blocks and
 * 228 KiB of shared memory (1 KiB reserved per block), as on an H100. */
static int occupancy(const struct CUfunc_st *f, int block_size,
                     size_t dynamic_shared)
{
    size_t shared = f->module->module.static_shared_bytes + dynamic_shared +
                    1024;
    int by_threads = 2048 / block_size;
    int by_shared = (int)((size_t)228 * 1024 / shared);
    int blocks = by_threads < 32 ? by_threads : 32;
    return blocks < by_shared ? blocks : by_shared;
}

static curdi_cu_result f_cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *block_count, curdi_cu_function function, int block_size,
    size_t dynamic_shared_bytes)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (block_count == NULL || block_size <= 0 || block_size > 1024)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (dynamic_shared_bytes > (size_t)f->max_dynamic_shared) {
        *block_count = 0;
        return unlock_with(CURDI_CUDA_SUCCESS);
    }
    *block_count = occupancy(f, block_size, dynamic_shared_bytes);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------
 * Launches and graphs
 * ---------------------------------------------------------------------- */
#define FAKE_MULTIPROCESSORS 4 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */

static fake_object *stream_object(curdi_cu_stream stream)
{
    return stream != NULL ? find(FAKE_STREAM, stream) : NULL;
}

/* Whether a stream is capturing: work the fake cannot record there (copies,
 * memsets, synchronisation) is refused as the driver refuses what breaks
 * a capture. */
static bool capturing(curdi_cu_stream stream)
{
    fake_object *o = stream_object(stream);
    return o != NULL && o->graph != NULL;
}

/* Checks a launch and fills a node with it (parameters copied). */
static curdi_cu_result make_node(curdi_cu_function function,
                                 const unsigned grid[3],
                                 const unsigned block[3],
                                 unsigned shared_bytes, bool cooperative,
                                 void **params, fake_node *node)
{
    struct CUfunc_st *f = live_function(function);
    if (f == NULL)
        return CURDI_CUDA_ERROR_INVALID_HANDLE;
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || block[0] == 0 ||
        block[1] == 0 || block[2] == 0 || grid[1] > 65535 || grid[2] > 65535 ||
        grid[0] > 2147483647u || block[2] > 64 ||
        (uint64_t)block[0] * block[1] * block[2] > 1024)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    if (shared_bytes > (unsigned)f->max_dynamic_shared)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    const fake_entry_info *entry = f->entry;
    if (entry->param_count != 0 && params == NULL)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    if (cooperative) {
        int per_sm =
            occupancy(f, (int)(block[0] * block[1] * block[2]), shared_bytes);
        if ((uint64_t)grid[0] * grid[1] * grid[2] >
            (uint64_t)per_sm * FAKE_MULTIPROCESSORS)
            return CURDI_CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    memset(node, 0, sizeof *node);
    node->function = f;
    memcpy(node->grid, grid, sizeof node->grid);
    memcpy(node->block, block, sizeof node->block);
    node->shared_bytes = shared_bytes;
    node->cooperative = cooperative;
    for (uint32_t i = 0; i < entry->param_count; i++) {
        const fake_param *param = &entry->params[i];
        if (param->offset + param->size > sizeof node->param_bytes)
            return CURDI_CUDA_ERROR_INVALID_VALUE;
        memcpy(node->param_bytes + param->offset, params[i], param->size);
        node->param_ptrs[i] = node->param_bytes + param->offset;
    }
    return CURDI_CUDA_SUCCESS;
}

/* Runs a node on the host; a fault becomes the context's sticky error and
 * the launch itself succeeds, as on a GPU. */
static curdi_cu_result run_node(int device, const fake_node *node)
{
    if (node->kind != FAKE_NODE_KERNEL) {
        /* The device memory may have been freed since the capture. */
        if (node->byte_len != 0
            && find_range(node->device_side, node->byte_len) == NULL)
            return CURDI_CUDA_ERROR_INVALID_VALUE;
        if (node->kind == FAKE_NODE_COPY)
            memmove(node->dst, node->src, node->byte_len);
        else
            memset(node->dst, node->value, node->byte_len);
        return CURDI_CUDA_SUCCESS;
    }
    if (live_function(node->function) == NULL)
        return CURDI_CUDA_ERROR_INVALID_HANDLE;
    fake_launch launch = {
        .entry = node->function->entry,
        .shared_bytes = node->shared_bytes,
        .cooperative = node->cooperative,
        .params = (void **)(uintptr_t)node->param_ptrs,
    };
    memcpy(launch.grid, node->grid, sizeof launch.grid);
    memcpy(launch.block, node->block, sizeof launch.block);
    bool fault = false;
    curdi_cu_result rc = fake_kernel_run(&launch, &fault);
    if (fault) {
        sticky[device] = rc;
        return CURDI_CUDA_SUCCESS;
    }
    return rc;
}

static curdi_cu_result graph_append(fake_graph *graph, const fake_node *node)
{
    fake_node *copy = malloc(sizeof *copy);
    fake_node **grown =
        copy != NULL ? realloc(graph->nodes, (graph->count + 1) * sizeof *grown)
                     : NULL;
    if (grown == NULL) {
        free(copy);
        return CURDI_CUDA_ERROR_OUT_OF_MEMORY;
    }
    *copy = *node;
    /* The copy's parameter pointers point into the copy. */
    for (uint32_t i = 0; i < FAKE_MAX_PARAMS; i++)
        if (node->param_ptrs[i] != NULL)
            copy->param_ptrs[i] =
                copy->param_bytes +
                ((unsigned char *)node->param_ptrs[i] - node->param_bytes);
    graph->nodes = grown;
    graph->nodes[graph->count++] = copy;
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result capture_node(curdi_cu_stream stream,
                                    const fake_node *node)
{
    return graph_append(stream_object(stream)->graph, node);
}

static curdi_cu_result launch(curdi_cu_function function, unsigned grid_x,
                              unsigned grid_y, unsigned grid_z,
                              unsigned block_x, unsigned block_y,
                              unsigned block_z, unsigned shared_bytes,
                              curdi_cu_stream stream, void **params,
                              bool cooperative)
{
    ENTER_CONTEXT(device);
    fake_object *s = stream_object(stream);
    if (s == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    const unsigned grid[3] = {grid_x, grid_y, grid_z};
    const unsigned block[3] = {block_x, block_y, block_z};
    static fake_node node; /* large; guarded by the lock */
    curdi_cu_result rc = make_node(function, grid, block, shared_bytes,
                                   cooperative, params, &node);
    if (rc != CURDI_CUDA_SUCCESS)
        return unlock_with(rc);
    if (s->graph != NULL)
        return unlock_with(graph_append(s->graph, &node));
    return unlock_with(run_node(device, &node));
}

static curdi_cu_result f_cuLaunchKernel(
    curdi_cu_function function, unsigned int grid_x, unsigned int grid_y,
    unsigned int grid_z, unsigned int block_x, unsigned int block_y,
    unsigned int block_z, unsigned int shared_bytes, curdi_cu_stream stream,
    void **params, void **extra)
{
    if (extra != NULL)
        return CURDI_CUDA_ERROR_NOT_SUPPORTED; /* the fake takes params only */
    return launch(function, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                  shared_bytes, stream, params, false);
}

static curdi_cu_result f_cuLaunchCooperativeKernel(
    curdi_cu_function function, unsigned int grid_x, unsigned int grid_y,
    unsigned int grid_z, unsigned int block_x, unsigned int block_y,
    unsigned int block_z, unsigned int shared_bytes, curdi_cu_stream stream,
    void **params)
{
    return launch(function, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                  shared_bytes, stream, params, true);
}

static curdi_cu_result f_cuStreamBeginCapture(curdi_cu_stream stream,
                                              curdi_cu_stream_capture_mode mode)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (mode > CURDI_CU_STREAM_CAPTURE_MODE_RELAXED)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *s = stream_object(stream);
    if (s == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (s->graph != NULL)
        return unlock_with(CURDI_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    s->graph = calloc(1, sizeof *s->graph);
    if (s->graph == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuStreamEndCapture(curdi_cu_stream stream,
                                            curdi_cu_graph *graph)
{
    ENTER_CONTEXT(device);
    if (graph == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *s = stream_object(stream);
    if (s == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (s->graph == NULL)
        return unlock_with(CURDI_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    fake_object *o = add(FAKE_GRAPH, NULL, 0, device);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    o->address = o;
    o->graph = s->graph;
    s->graph = NULL;
    *graph = (curdi_cu_graph)(void *)o;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphInstantiateWithFlags(
    curdi_cu_graph_exec *graph_exec, curdi_cu_graph graph,
    unsigned long long flags)
{
    ENTER_CONTEXT(device);
    if (graph_exec == NULL || flags != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *g = find(FAKE_GRAPH, graph);
    if (g == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    fake_graph *copy = calloc(1, sizeof *copy);
    if (copy == NULL)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    copy->origin = calloc(g->graph->count + 1, sizeof *copy->origin);
    bool ok = copy->origin != NULL;
    for (size_t i = 0; ok && i < g->graph->count; i++) {
        ok = graph_append(copy, g->graph->nodes[i]) == CURDI_CUDA_SUCCESS;
        if (ok)
            copy->origin[i] = g->graph->nodes[i];
    }
    fake_object *o = ok ? add(FAKE_GRAPH_EXEC, NULL, 0, device) : NULL;
    if (o == NULL) {
        graph_free(copy);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    o->address = o;
    o->graph = copy;
    *graph_exec = (curdi_cu_graph_exec)(void *)o;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphLaunch(curdi_cu_graph_exec graph_exec,
                                       curdi_cu_stream stream)
{
    ENTER_CONTEXT(device);
    fake_object *e = find(FAKE_GRAPH_EXEC, graph_exec);
    fake_object *s = stream_object(stream);
    if (e == NULL || s == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (s->graph != NULL)
        return unlock_with(CURDI_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    for (size_t i = 0; i < e->graph->count && sticky[device] == 0; i++) {
        const fake_node *node = e->graph->nodes[i];
        if (node->kind == FAKE_NODE_HOST) {
            /* It may wait for another thread's driver calls. */
            pthread_mutex_unlock(&lock);
            node->host_fn(node->host_data);
            pthread_mutex_lock(&lock);
            continue;
        }
        curdi_cu_result rc = run_node(device, node);
        if (rc != CURDI_CUDA_SUCCESS)
            return unlock_with(rc);
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* Not in curd's table (cuda_abi.h): the stand-in NCCL's. Real types:
 * CUresult cuLaunchHostFunc(CUstream, CUhostFn, void *) and
 * cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *), the status an
 * int-sized enum (0 none, 1 active). */
static curdi_cu_result f_cuLaunchHostFunc(curdi_cu_stream stream,
                                          void (*fn)(void *), void *data)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *s = stream_object(stream);
    if (s == NULL || fn == NULL)
        return unlock_with(s == NULL ? CURDI_CUDA_ERROR_INVALID_HANDLE
                                     : CURDI_CUDA_ERROR_INVALID_VALUE);
    if (s->graph != NULL) {
        static fake_node node; /* large; guarded by the lock */
        memset(&node, 0, sizeof node);
        node.kind = FAKE_NODE_HOST;
        node.host_fn = fn;
        node.host_data = data;
        return unlock_with(graph_append(s->graph, &node));
    }
    pthread_mutex_unlock(&lock);
    fn(data); /* the stream's earlier work is complete already */
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuStreamIsCapturing(curdi_cu_stream stream,
                                             int *status)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *s = stream_object(stream);
    if (s == NULL || status == NULL)
        return unlock_with(s == NULL ? CURDI_CUDA_ERROR_INVALID_HANDLE
                                     : CURDI_CUDA_ERROR_INVALID_VALUE);
    *status = s->graph != NULL;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* The node of an executable graph that was made from `node`, or NULL. */
static fake_node *exec_node(fake_graph *exec, curdi_cu_graph_node node)
{
    for (size_t i = 0; i < exec->count; i++)
        if ((void *)exec->origin[i] == (void *)node)
            return exec->nodes[i];
    return NULL;
}

static curdi_cu_result set_node_params(fake_node *target,
                                       const curdi_cu_kernel_node_params *p)
{
    const unsigned grid[3] = {p->grid_x, p->grid_y, p->grid_z};
    const unsigned block[3] = {p->block_x, p->block_y, p->block_z};
    static fake_node node; /* large; guarded by the lock */
    if (p->extra != NULL || p->func == NULL)
        return CURDI_CUDA_ERROR_NOT_SUPPORTED;
    curdi_cu_result rc = make_node(p->func, grid, block, p->shared_bytes,
                                   target->cooperative, p->kernel_params,
                                   &node);
    if (rc != CURDI_CUDA_SUCCESS)
        return rc;
    *target = node;
    for (uint32_t i = 0; i < FAKE_MAX_PARAMS; i++)
        if (node.param_ptrs[i] != NULL)
            target->param_ptrs[i] =
                target->param_bytes +
                ((unsigned char *)node.param_ptrs[i] - node.param_bytes);
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuGraphExecKernelNodeSetParams(
    curdi_cu_graph_exec graph_exec, curdi_cu_graph_node node,
    const curdi_cu_kernel_node_params_abi_t *params)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (params == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *e = find(FAKE_GRAPH_EXEC, graph_exec);
    if (e == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    fake_node *target = exec_node(e->graph, node);
    if (target == NULL || target->kind != FAKE_NODE_KERNEL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    /* The driver reads the bytes as its own struct (cuda_abi.h). */
    const curdi_cu_kernel_node_params *p =
        (const curdi_cu_kernel_node_params *)(const void *)params;
    return unlock_with(set_node_params(target, p));
}

static curdi_cu_result f_cuGraphExecUpdate(
    curdi_cu_graph_exec graph_exec, curdi_cu_graph graph,
    curdi_cu_graph_exec_update_result_info_abi_t *result_info)
{
    ENTER_CONTEXT(device);
    (void)device;
    curdi_cu_graph_exec_update_result_info *info =
        (curdi_cu_graph_exec_update_result_info *)(void *)result_info;
    if (info == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *e = find(FAKE_GRAPH_EXEC, graph_exec);
    fake_object *g = find(FAKE_GRAPH, graph);
    if (e == NULL || g == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    memset(info, 0, sizeof *info);
    if (e->graph->count != g->graph->count) {
        info->result = CURDI_CU_GRAPH_EXEC_UPDATE_ERROR;
        return unlock_with(CURDI_CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    }
    for (size_t i = 0; i < e->graph->count; i++) {
        if (e->graph->nodes[i]->cooperative != g->graph->nodes[i]->cooperative
            || e->graph->nodes[i]->kind != g->graph->nodes[i]->kind) {
            info->result = CURDI_CU_GRAPH_EXEC_UPDATE_ERROR;
            info->error_node = (curdi_cu_graph_node)(void *)g->graph->nodes[i];
            return unlock_with(CURDI_CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        }
    }
    /* Every node takes the new graph's launch; the copies keep their
     * identity (the nodes of the graph they were made from). */
    for (size_t i = 0; i < e->graph->count; i++) {
        fake_node *target = e->graph->nodes[i];
        const fake_node *source = g->graph->nodes[i];
        *target = *source;
        for (uint32_t k = 0; k < FAKE_MAX_PARAMS; k++)
            if (source->param_ptrs[k] != NULL)
                target->param_ptrs[k] =
                    target->param_bytes +
                    ((const unsigned char *)source->param_ptrs[k] -
                     source->param_bytes);
    }
    info->result = CURDI_CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphGetNodes(curdi_cu_graph graph,
                                         curdi_cu_graph_node *nodes,
                                         size_t *node_count)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (node_count == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *g = find(FAKE_GRAPH, graph);
    if (g == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    if (nodes != NULL) {
        for (size_t i = 0; i < *node_count; i++)
            nodes[i] = i < g->graph->count
                           ? (curdi_cu_graph_node)(void *)g->graph->nodes[i]
                           : NULL;
        if (*node_count > g->graph->count)
            *node_count = g->graph->count;
    } else {
        *node_count = g->graph->count;
    }
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphKernelNodeGetParams(
    curdi_cu_graph_node node, curdi_cu_kernel_node_params_abi_t *params)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (params == NULL || node == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    /* A node is named by its address; it must be in a live graph. */
    fake_node *found = NULL;
    for (fake_object *o = objects; o != NULL && found == NULL; o = o->next)
        if (o->kind == FAKE_GRAPH)
            for (size_t i = 0; i < o->graph->count; i++)
                if ((void *)o->graph->nodes[i] == (void *)node)
                    found = o->graph->nodes[i];
    if (found == NULL || found->kind != FAKE_NODE_KERNEL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    curdi_cu_kernel_node_params *p = (curdi_cu_kernel_node_params *)(void *)params;
    memset(p, 0, sizeof *p);
    p->func = found->function;
    p->grid_x = found->grid[0];
    p->grid_y = found->grid[1];
    p->grid_z = found->grid[2];
    p->block_x = found->block[0];
    p->block_y = found->block[1];
    p->block_z = found->block[2];
    p->shared_bytes = found->shared_bytes;
    p->kernel_params = found->param_ptrs;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphNodeGetType(curdi_cu_graph_node node,
                                           curdi_cu_graph_node_type *type)
{
    ENTER_CONTEXT(device);
    (void)device;
    if (type == NULL || node == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    for (fake_object *o = objects; o != NULL; o = o->next)
        if (o->kind == FAKE_GRAPH)
            for (size_t i = 0; i < o->graph->count; i++)
                if ((void *)o->graph->nodes[i] == (void *)node) {
                    *type = o->graph->nodes[i]->kind;
                    return unlock_with(CURDI_CUDA_SUCCESS);
                }
    return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
}

static curdi_cu_result f_cuGraphDestroy(curdi_cu_graph graph)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *g = find(FAKE_GRAPH, graph);
    if (g == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    drop(g);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuGraphExecDestroy(curdi_cu_graph_exec graph_exec)
{
    ENTER_CONTEXT(device);
    (void)device;
    fake_object *e = find(FAKE_GRAPH_EXEC, graph_exec);
    if (e == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_HANDLE);
    drop(e);
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

/* ------------------------------------------------------------------------
 * Virtual memory management: cuMemCreate and the calls around it.
 *
 * An allocation is a memfd (named "fake-cuda-dev<N>", sealed against
 * resizing) of a multiple of the granularity; a handle names it (created
 * or imported), an address range reserved with cuMemAddressReserve is an
 * anonymous PROT_NONE mapping, and cuMemMap maps the memfd over part of
 * it, PROT_NONE until cuMemSetAccess makes it readable and writable (a
 * device that touches memory it was given no access to faults, as on a
 * GPU). A mapping is device memory like cuMemAlloc's (copies and kernels
 * reach it) that holds a reference to its allocation; the allocation goes
 * when its last handle is released and its last mapping unmapped.
 * cuMemExportToShareableHandle hands out a duplicate of the memfd, and
 * cuMemImportFromShareableHandle takes any such descriptor, in this
 * process or another: two processes on the stand-in then share the bytes
 * for real, and the kernel keeps them until the last process lets go.
 * A descriptor that is not such a memfd is CUDA_ERROR_INVALID_VALUE.
 * ---------------------------------------------------------------------- */
#define FAKE_GRANULARITY ((size_t)2 << 20)

static bool valid_allocation_prop(const curdi_cu_mem_allocation_prop *prop)
{
    return prop != NULL && prop->type == CURDI_CU_MEM_ALLOCATION_TYPE_PINNED
           && prop->location.type == CURDI_CU_MEM_LOCATION_TYPE_DEVICE
           && valid_device(prop->location.id)
           && (prop->requested_handle_types
               & ~(unsigned)CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                  == 0;
}

static const curdi_cu_mem_allocation_prop *
prop_of(const curdi_cu_mem_allocation_prop_abi_t *abi)
{
    return (const curdi_cu_mem_allocation_prop *)(const void *)abi;
}

static fake_object *handle_object(curdi_cu_mem_handle handle)
{
    return find(FAKE_MEM_HANDLE, (void *)(uintptr_t)handle);
}

/* A new handle on allocation, which it holds a reference to. */
static curdi_cu_result new_mem_handle(fake_object *allocation,
                                      curdi_cu_mem_handle *out)
{
    void *token = malloc(1);
    fake_object *o = token == NULL ? NULL
                                   : add(FAKE_MEM_HANDLE, token, 0,
                                         allocation->device);
    if (o == NULL) {
        free(token);
        return CURDI_CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->allocation = allocation;
    allocation->refs++;
    *out = (curdi_cu_mem_handle)(uintptr_t)token;
    return CURDI_CUDA_SUCCESS;
}

static void allocation_unref(fake_object *allocation)
{
    if (--allocation->refs > 0)
        return;
    close(allocation->fd);
    if (!allocation->imported)
        used_bytes[allocation->device] -= allocation->byte_len;
    free(allocation->address);
    drop(allocation);
}

/* An allocation object over fd (owned from here on). */
static curdi_cu_result new_allocation(int fd, size_t byte_len, int device,
                                      unsigned handle_types, bool imported,
                                      fake_object **out)
{
    void *token = malloc(1);
    fake_object *o = token == NULL ? NULL
                                   : add(FAKE_ALLOCATION, token, byte_len,
                                         device);
    if (o == NULL) {
        free(token);
        close(fd);
        return CURDI_CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->fd = fd;
    o->handle_types = handle_types;
    o->imported = imported;
    *out = o;
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result f_cuMemGetAllocationGranularity(
    size_t *granularity, const curdi_cu_mem_allocation_prop_abi_t *prop,
    curdi_cu_mem_granularity_flags option)
{
    ENTER_NO_CONTEXT();
    if (granularity == NULL || !valid_allocation_prop(prop_of(prop))
        || option > CURDI_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    *granularity = FAKE_GRANULARITY;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemCreate(
    curdi_cu_mem_handle *handle, size_t byte_len,
    const curdi_cu_mem_allocation_prop_abi_t *abi, unsigned long long flags)
{
    ENTER_NO_CONTEXT();
    const curdi_cu_mem_allocation_prop *prop = prop_of(abi);
    if (handle == NULL || !valid_allocation_prop(prop) || flags != 0
        || byte_len == 0 || byte_len % FAKE_GRANULARITY != 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    int device = prop->location.id;
    if (byte_len > cfg_memory - used_bytes[device])
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    char name[32];
    snprintf(name, sizeof name, "fake-cuda-dev%d", device);
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    if (ftruncate(fd, (off_t)byte_len) != 0
        || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
               != 0) {
        close(fd);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    fake_object *allocation = NULL;
    curdi_cu_result result =
        new_allocation(fd, byte_len, device, prop->requested_handle_types,
                       false, &allocation);
    if (result != CURDI_CUDA_SUCCESS)
        return unlock_with(result);
    used_bytes[device] += byte_len;
    result = new_mem_handle(allocation, handle);
    if (result != CURDI_CUDA_SUCCESS) {
        allocation->refs = 1;
        allocation_unref(allocation);
    }
    return unlock_with(result);
}

static curdi_cu_result f_cuMemRelease(curdi_cu_mem_handle handle)
{
    ENTER_NO_CONTEXT();
    fake_object *o = handle_object(handle);
    if (o == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    fake_object *allocation = o->allocation;
    free(o->address);
    drop(o);
    allocation_unref(allocation);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemAddressReserve(curdi_cu_deviceptr *device_ptr,
                                             size_t byte_len, size_t alignment,
                                             curdi_cu_deviceptr address,
                                             unsigned long long flags)
{
    ENTER_NO_CONTEXT();
    (void)address; /* a hint */
    if (device_ptr == NULL || byte_len == 0
        || byte_len % FAKE_GRANULARITY != 0 || flags != 0
        || (alignment != 0 && alignment > FAKE_GRANULARITY))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    void *range = mmap(NULL, byte_len, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    if (add(FAKE_VA_RANGE, range, byte_len, -1) == NULL) {
        munmap(range, byte_len);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    *device_ptr = (curdi_cu_deviceptr)(uintptr_t)range;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* A mapping overlapping [address, address + byte_len), or NULL. */
static fake_object *mapping_overlapping(uintptr_t address, size_t byte_len)
{
    for (fake_object *o = objects; o != NULL; o = o->next) {
        if (o->kind != FAKE_DEVICE_MEMORY || o->allocation == NULL)
            continue;
        uintptr_t start = (uintptr_t)o->address;
        if (address < start + o->byte_len && start < address + byte_len)
            return o;
    }
    return NULL;
}

static curdi_cu_result f_cuMemAddressFree(curdi_cu_deviceptr device_ptr,
                                          size_t byte_len)
{
    ENTER_NO_CONTEXT();
    fake_object *o = find(FAKE_VA_RANGE, (void *)(uintptr_t)device_ptr);
    /* The whole reservation, with nothing mapped in it any more. */
    if (o == NULL || o->byte_len != byte_len
        || mapping_overlapping((uintptr_t)device_ptr, byte_len) != NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    munmap(o->address, o->byte_len);
    drop(o);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemMap(curdi_cu_deviceptr device_ptr,
                                  size_t byte_len, size_t offset,
                                  curdi_cu_mem_handle handle,
                                  unsigned long long flags)
{
    ENTER_NO_CONTEXT();
    fake_object *h = handle_object(handle);
    uintptr_t address = (uintptr_t)device_ptr;
    /* Offset 0 (as the driver asks), a multiple of the granularity, no
     * larger than the allocation, inside one reservation, over nothing
     * mapped yet. */
    if (h == NULL || offset != 0 || flags != 0 || byte_len == 0
        || byte_len % FAKE_GRANULARITY != 0
        || byte_len > h->allocation->byte_len
        || find_range_of(FAKE_VA_RANGE, address, byte_len) == NULL
        || mapping_overlapping(address, byte_len) != NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    void *mapped = mmap((void *)address, byte_len, PROT_NONE,
                        MAP_SHARED | MAP_FIXED, h->allocation->fd, 0);
    if (mapped == MAP_FAILED)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    fake_object *o = add(FAKE_DEVICE_MEMORY, mapped, byte_len,
                         h->allocation->device);
    if (o == NULL) {
        mmap(mapped, byte_len, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    }
    o->allocation = h->allocation;
    h->allocation->refs++;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemUnmap(curdi_cu_deviceptr device_ptr,
                                    size_t byte_len)
{
    ENTER_NO_CONTEXT();
    fake_object *o = find(FAKE_DEVICE_MEMORY, (void *)(uintptr_t)device_ptr);
    if (o == NULL || o->allocation == NULL || o->byte_len != byte_len)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    /* The range goes back to being reserved, inaccessible. */
    mmap(o->address, byte_len, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    fake_object *allocation = o->allocation;
    drop(o);
    allocation_unref(allocation);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemSetAccess(
    curdi_cu_deviceptr device_ptr, size_t byte_len,
    const curdi_cu_mem_access_desc_abi_t *abi, size_t count)
{
    ENTER_NO_CONTEXT();
    const curdi_cu_mem_access_desc *desc =
        (const curdi_cu_mem_access_desc *)(const void *)abi;
    fake_object *o = find(FAKE_DEVICE_MEMORY, (void *)(uintptr_t)device_ptr);
    if (o == NULL || o->allocation == NULL || o->byte_len != byte_len
        || desc == NULL || count == 0)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CURDI_CU_MEM_LOCATION_TYPE_DEVICE
            || desc[i].flags != CURDI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
        if (!valid_device(desc[i].location.id))
            return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
        /* Another device than the memory's reaches it over peer access. */
        if (desc[i].location.id != o->device
            && getenv("FAKE_CUDA_NO_PEER_ACCESS") != NULL)
            return unlock_with(CURDI_CUDA_ERROR_INVALID_DEVICE);
    }
    if (mprotect(o->address, byte_len, PROT_READ | PROT_WRITE) != 0)
        return unlock_with(CURDI_CUDA_ERROR_OUT_OF_MEMORY);
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemExportToShareableHandle(
    void *shareable_handle, curdi_cu_mem_handle handle,
    curdi_cu_mem_handle_type handle_type, unsigned long long flags)
{
    ENTER_NO_CONTEXT();
    fake_object *h = handle_object(handle);
    if (h == NULL || shareable_handle == NULL || flags != 0
        || handle_type != CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    if ((h->allocation->handle_types & handle_type) == 0)
        return unlock_with(CURDI_CUDA_ERROR_NOT_PERMITTED);
    /* A file of its own each time, as the driver's: the memfd opened
     * again, not a dup of the allocation's descriptor. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", h->allocation->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return unlock_with(CURDI_CUDA_ERROR_OPERATING_SYSTEM);
    *(int *)shareable_handle = fd;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

/* The device whose allocation fd is (a stand-in memfd, sealed against
 * resizing), and its size; false for any other descriptor. */
static bool stand_in_allocation(int fd, int *device, size_t *byte_len)
{
    char link[64], target[128];
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW))
                         != (F_SEAL_SHRINK | F_SEAL_GROW)
        || fstat(fd, &st) != 0 || st.st_size <= 0)
        return false;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length <= 0)
        return false;
    target[length] = '\0';
    if (sscanf(target, "/memfd:fake-cuda-dev%d", device) != 1
        || !valid_device(*device))
        return false;
    *byte_len = (size_t)st.st_size;
    return true;
}

static curdi_cu_result f_cuMemImportFromShareableHandle(
    curdi_cu_mem_handle *handle, void *os_handle,
    curdi_cu_mem_handle_type handle_type)
{
    ENTER_NO_CONTEXT();
    int fd = (int)(intptr_t)os_handle;
    int device = -1;
    size_t byte_len = 0;
    if (handle == NULL
        || handle_type != CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        || !stand_in_allocation(fd, &device, &byte_len))
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return unlock_with(CURDI_CUDA_ERROR_OPERATING_SYSTEM);
    fake_object *allocation = NULL;
    curdi_cu_result result =
        new_allocation(own, byte_len, device,
                       CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, true,
                       &allocation);
    if (result == CURDI_CUDA_SUCCESS) {
        result = new_mem_handle(allocation, handle);
        if (result != CURDI_CUDA_SUCCESS) {
            allocation->refs = 1;
            allocation_unref(allocation);
        }
    }
    return unlock_with(result);
}

static curdi_cu_result f_cuMemGetAllocationPropertiesFromHandle(
    curdi_cu_mem_allocation_prop_abi_t *abi, curdi_cu_mem_handle handle)
{
    ENTER_NO_CONTEXT();
    fake_object *h = handle_object(handle);
    if (h == NULL || abi == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    curdi_cu_mem_allocation_prop *prop =
        (curdi_cu_mem_allocation_prop *)(void *)abi;
    memset(prop, 0, sizeof *prop);
    prop->type = CURDI_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requested_handle_types = h->allocation->handle_types;
    prop->location.type = CURDI_CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = h->allocation->device;
    return unlock_with(CURDI_CUDA_SUCCESS);
}

static curdi_cu_result f_cuMemRetainAllocationHandle(
    curdi_cu_mem_handle *handle, void *address)
{
    ENTER_NO_CONTEXT();
    fake_object *o = find(FAKE_DEVICE_MEMORY, address);
    if (handle == NULL || o == NULL || o->allocation == NULL)
        return unlock_with(CURDI_CUDA_ERROR_INVALID_VALUE);
    return unlock_with(new_mem_handle(o->allocation, handle));
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
static const fake_entry entries[] = {
    CURDI_CUDA_ENTRY_LIST(FAKE_ENTRY_)
    {"cuLaunchHostFunc", (void (*)(void))f_cuLaunchHostFunc},
    {"cuStreamIsCapturing", (void (*)(void))f_cuStreamIsCapturing},
};
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
 * "stream", "event", "module", "graph", "graph_exec", "link_state"), their
 * bytes
 * ("device_memory_bytes", "host_memory_bytes", "registered_bytes"), or
 * "allocation", "mem_handle", "va_range" (the virtual memory management
 * calls': allocations, handles and reserved ranges; a mapping counts as
 * device_memory),
 * "context_retains": the primary-context retain counts of every device,
 * summed; "context_stack": this thread's pushed contexts;
 * "jit_compilations": PTX images compiled since the library loaded (a
 * running count, not a live one; a linked PTX input counts too);
 * "link_completions": links completed (a running count); "stream_waits": cuStreamWaitEvent
 * calls that succeeded (a running count too); "sticky_faults": contexts
 * holding a sticky fault; "peer_access": ordered pairs of contexts with
 * peer access enabled. -1 for an unknown name. */
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
    } else if (strcmp(what, "jit_compilations") == 0) {
        count = jit_compilations;
    } else if (strcmp(what, "link_completions") == 0) {
        count = link_completions;
    } else if (strcmp(what, "peer_access") == 0) {
        for (int i = 0; i < FAKE_MAX_DEVICES; i++)
            for (int j = 0; j < FAKE_MAX_DEVICES; j++)
                count += peer_enabled[i][j];
    } else if (strcmp(what, "stream_waits") == 0) {
        count = stream_waits;
    } else if (strcmp(what, "sticky_faults") == 0) {
        for (int i = 0; i < FAKE_MAX_DEVICES; i++)
            count += sticky[i] != 0;
    } else {
        count = -1;
        size_t name_len = strlen(what);
        bool bytes = name_len > 6 && strcmp(what + name_len - 6, "_bytes") == 0;
        if (bytes)
            name_len -= 6;
        for (int k = 0; k < FAKE_KIND_COUNT; k++) {
            if (strlen(kind_names[k]) != name_len ||
                strncmp(what, kind_names[k], name_len) != 0)
                continue;
            count = 0;
            for (fake_object *o = objects; o != NULL; o = o->next)
                if (o->kind == (fake_kind)k)
                    count += bytes ? (long)o->byte_len : 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return count;
}

/* Holds (1) or lets go (0) the events recorded from now on: held, a
 * query of them answers CUDA_ERROR_NOT_READY; letting go completes every
 * held one. */
FAKE_API void fake_cuda_hold_events(int hold);
FAKE_API void fake_cuda_hold_events(int hold)
{
    pthread_mutex_lock(&lock);
    hold_events = hold != 0;
    if (!hold_events)
        for (fake_object *o = objects; o != NULL; o = o->next)
            o->not_ready = false;
    pthread_mutex_unlock(&lock);
}

/* Simulates the driver's exit-time teardown now. */
FAKE_API void fake_cuda_teardown(void);
FAKE_API void fake_cuda_teardown(void)
{
    on_exit_teardown();
}
