/* driver-faults.c - failing one driver call on purpose (see
 * driver-faults.h).
 *
 * One wrapper per entry of CURDI_CUDA_ENTRY_LIST, generated from the same
 * list as the table, so a new entry is wrapped without touching this file.
 * The entries that let go of something have wrappers of their own, from
 * RELEASE_ENTRIES below, which also keep the argument of a failed call so
 * that it can be made later. Single-threaded arming: begin and end are
 * called from one thread while the library is idle; the wrappers
 * themselves may run on any thread. */
#include "support/driver-faults.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "driver/driver.h"

static curdi_driver saved_table;
static curdi_driver *live_table;
static bool faults_active;
static unsigned fault_at;
static curdi_cu_result fault_result;
static char fault_only[64];
static atomic_uint fault_calls;
static _Atomic(const char *) fault_entry;
/* The release call that failed, made for real by the completion. */
static curdi_cu_result (*withheld)(void);

static bool fault_now(const char *entry)
{
    if (fault_only[0] != '\0' && strcmp(entry, fault_only) != 0)
        return false;
    unsigned number = atomic_fetch_add(&fault_calls, 1) + 1;
    if (fault_at != 0 && number == fault_at) {
        atomic_store(&fault_entry, entry);
        return true;
    }
    return false;
}

#define DRIVER_FAULTS_WRAP_(name, symbol, tier, params, args)                \
    static curdi_cu_result wrap_##name params                                \
    {                                                                        \
        if (fault_now(#name))                                                \
            return fault_result;                                             \
        return saved_table.name args;                                        \
    }
CURDI_CUDA_ENTRY_LIST(DRIVER_FAULTS_WRAP_)
#undef DRIVER_FAULTS_WRAP_

/* The entries that let go of one object, named by their one argument. */
#define RELEASE_ENTRIES(X)                                                   \
    X(cuMemFree, curdi_cu_deviceptr)                                         \
    X(cuMemFreeHost, void *)                                                 \
    X(cuMemHostUnregister, void *)                                           \
    X(cuStreamDestroy, curdi_cu_stream)                                      \
    X(cuEventDestroy, curdi_cu_event)                                        \
    X(cuModuleUnload, curdi_cu_module)                                       \
    X(cuGraphDestroy, curdi_cu_graph)                                        \
    X(cuGraphExecDestroy, curdi_cu_graph_exec)                               \
    X(cuLinkDestroy, curdi_cu_link_state)                                    \
    X(cuDevicePrimaryCtxRelease, curdi_cu_device)                           \
    X(cuMemRelease, curdi_cu_mem_handle)

#define DRIVER_FAULTS_RELEASE_(name, type)                                   \
    static type withheld_##name;                                             \
    static curdi_cu_result complete_##name(void)                             \
    {                                                                        \
        return saved_table.name(withheld_##name);                            \
    }                                                                        \
    static curdi_cu_result release_##name(type handle)                       \
    {                                                                        \
        if (fault_now(#name)) {                                              \
            withheld_##name = handle;                                        \
            withheld = complete_##name;                                      \
            return fault_result;                                             \
        }                                                                    \
        return saved_table.name(handle);                                     \
    }
RELEASE_ENTRIES(DRIVER_FAULTS_RELEASE_)
#undef DRIVER_FAULTS_RELEASE_

/* Freeing a reserved address range takes the range's start and size. */
static curdi_cu_deviceptr withheld_range_start;
static size_t withheld_range_len;
static curdi_cu_result complete_cuMemAddressFree(void)
{
    return saved_table.cuMemAddressFree(withheld_range_start,
                                        withheld_range_len);
}

static curdi_cu_result release_cuMemAddressFree(curdi_cu_deviceptr start,
                                                size_t byte_len)
{
    if (fault_now("cuMemAddressFree")) {
        withheld_range_start = start;
        withheld_range_len = byte_len;
        withheld = complete_cuMemAddressFree;
        return fault_result;
    }
    return saved_table.cuMemAddressFree(start, byte_len);
}

/* Popping a context lets go of the push before it; its argument is only
 * where the popped context is written. */
static curdi_cu_result complete_cuCtxPopCurrent(void)
{
    curdi_cu_context popped = NULL;
    return saved_table.cuCtxPopCurrent(&popped);
}

static curdi_cu_result release_cuCtxPopCurrent(curdi_cu_context *context)
{
    if (fault_now("cuCtxPopCurrent")) {
        withheld = complete_cuCtxPopCurrent;
        return fault_result;
    }
    return saved_table.cuCtxPopCurrent(context);
}

/* A capture ends whatever cuStreamEndCapture returns: the driver ends an
 * invalidated capture too. A failure that left the stream capturing
 * would keep this thread in capture mode, where every later synchronising
 * call fails (NCCL's own destroy among them), which no driver does. */
static curdi_cu_result end_cuStreamEndCapture(curdi_cu_stream stream,
                                              curdi_cu_graph *graph)
{
    if (fault_now("cuStreamEndCapture")) {
        curdi_cu_graph captured = NULL;
        if (saved_table.cuStreamEndCapture(stream, &captured)
                == CURDI_CUDA_SUCCESS
            && captured != NULL)
            (void)saved_table.cuGraphDestroy(captured);
        *graph = NULL;
        return fault_result;
    }
    return saved_table.cuStreamEndCapture(stream, graph);
}

bool driver_faults_begin(unsigned fail_at, int cu_result,
                         const char *only_entry)
{
    if (faults_active)
        return false;
    faults_active = true;
    fault_at = fail_at;
    fault_result = (curdi_cu_result)cu_result;
    fault_only[0] = '\0';
    if (only_entry != NULL && strlen(only_entry) < sizeof fault_only)
        strcpy(fault_only, only_entry);
    atomic_store(&fault_calls, 0);
    atomic_store(&fault_entry, NULL);
    withheld = NULL;

    (void)curdi_driver_load();
    live_table = curdi_driver_table_for_test();
    if (live_table == NULL)
        return true;
    saved_table = *live_table;
#define DRIVER_FAULTS_INSTALL_(name, symbol, tier, params, args)             \
    if (live_table->name != NULL)                                            \
        live_table->name = wrap_##name;
    CURDI_CUDA_ENTRY_LIST(DRIVER_FAULTS_INSTALL_)
#undef DRIVER_FAULTS_INSTALL_
#define DRIVER_FAULTS_INSTALL_RELEASE_(name, type)                           \
    if (live_table->name != NULL)                                            \
        live_table->name = release_##name;
    RELEASE_ENTRIES(DRIVER_FAULTS_INSTALL_RELEASE_)
#undef DRIVER_FAULTS_INSTALL_RELEASE_
    live_table->cuCtxPopCurrent = release_cuCtxPopCurrent;
    live_table->cuStreamEndCapture = end_cuStreamEndCapture;
    if (live_table->cuMemAddressFree != NULL)
        live_table->cuMemAddressFree = release_cuMemAddressFree;
    /* Describing errors is not an operation's driver call (see above). */
    live_table->cuGetErrorName = saved_table.cuGetErrorName;
    live_table->cuGetErrorString = saved_table.cuGetErrorString;
    return true;
}

unsigned driver_faults_end(void)
{
    if (!faults_active)
        return 0;
    faults_active = false;
    if (live_table != NULL)
        *live_table = saved_table;
    live_table = NULL;
    return atomic_load(&fault_calls);
}

bool driver_faults_fired(void)
{
    return atomic_load(&fault_entry) != NULL;
}

const char *driver_faults_fired_entry(void)
{
    return atomic_load(&fault_entry);
}

bool driver_faults_fired_release(void)
{
    return withheld != NULL;
}

bool driver_faults_complete_release(void)
{
    curdi_cu_result (*call)(void) = withheld;
    withheld = NULL;
    if (call == NULL || faults_active)
        return false;
    (void)call();
    return true;
}
