/* nccl-faults.c - failing one NCCL call on purpose (see nccl-faults.h).
 * One wrapper per entry of CURDI_NCCL_ENTRY_LIST, generated from the list
 * the table is made of, so a new entry is wrapped without touching this
 * file. Single-threaded arming, like driver-faults.c; the wrappers may
 * run on any thread. */
#include "support/nccl-faults.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "driver/nccl.h"

static curdi_nccl saved_table;
static curdi_nccl *live_table;
static bool faults_active;
static unsigned fault_at;
static curdi_nccl_result fault_result;
static atomic_uint fault_calls;
static _Atomic(const char *) fault_entry;

static _Atomic(const char *) last_entry;

/* A run of consecutive ncclCommGetAsyncError calls is one fault point, at
 * its first call: curd polls it while NCCL works (a real communicator's
 * setup takes hundreds of polls), and failing each poll of the run would
 * open hundreds of real communicators to reach the same path. */
static bool repeated_poll(const char *entry)
{
    const char *previous = atomic_exchange(&last_entry, entry);
    return previous != NULL && strcmp(entry, "ncclCommGetAsyncError") == 0
           && strcmp(previous, entry) == 0;
}

static bool fault_now(const char *entry)
{
    if (repeated_poll(entry))
        return false;
    unsigned number = atomic_fetch_add(&fault_calls, 1) + 1;
    if (fault_at != 0 && number == fault_at) {
        atomic_store(&fault_entry, entry);
        return true;
    }
    return false;
}

#define NCCL_FAULTS_WRAP_(name, tier, params, args)                          \
    static curdi_nccl_result wrap_##name params                              \
    {                                                                        \
        if (fault_now(#name))                                                \
            return fault_result;                                             \
        return saved_table.name args;                                        \
    }
CURDI_NCCL_ENTRY_LIST(NCCL_FAULTS_WRAP_)
#undef NCCL_FAULTS_WRAP_

/* An abort that failed still lets go: the caller cannot retry it. */
static curdi_nccl_result release_ncclCommAbort(curdi_nccl_comm comm)
{
    if (fault_now("ncclCommAbort")) {
        (void)saved_table.ncclCommAbort(comm);
        return fault_result;
    }
    return saved_table.ncclCommAbort(comm);
}

/* A group end that failed still ends the group, as NCCL's does (it
 * leaves the thread's group before anything can fail): otherwise the
 * stand-in's group stays open and takes the thread's later calls. */
static curdi_nccl_result release_ncclGroupEnd(void)
{
    if (fault_now("ncclGroupEnd")) {
        (void)saved_table.ncclGroupEnd();
        return fault_result;
    }
    return saved_table.ncclGroupEnd();
}

bool nccl_faults_begin(unsigned fail_at, unsigned nccl_result)
{
    if (faults_active)
        return false;
    faults_active = true;
    fault_at = fail_at;
    fault_result = nccl_result;
    atomic_store(&fault_calls, 0);
    atomic_store(&last_entry, NULL);
    atomic_store(&fault_entry, NULL);
    live_table = curdi_nccl_table_for_test();
    if (live_table == NULL)
        return true;
    saved_table = *live_table;
#define NCCL_FAULTS_INSTALL_(name, tier, params, args)                       \
    if (live_table->name != NULL)                                            \
        live_table->name = wrap_##name;
    CURDI_NCCL_ENTRY_LIST(NCCL_FAULTS_INSTALL_)
#undef NCCL_FAULTS_INSTALL_
    live_table->ncclCommAbort = release_ncclCommAbort;
    live_table->ncclGroupEnd = release_ncclGroupEnd;
    return true;
}

unsigned nccl_faults_end(void)
{
    if (!faults_active)
        return 0;
    faults_active = false;
    if (live_table != NULL)
        *live_table = saved_table;
    live_table = NULL;
    return atomic_load(&fault_calls);
}

const char *nccl_faults_fired_entry(void)
{
    return atomic_load(&fault_entry);
}
