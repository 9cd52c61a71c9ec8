/* comm_open.c - how a curd_comm comes to be: curd_comm_open,
 * curd_comm_open_all, curd_comm_open_from_env (with the launchers'
 * rank and size variables it reads), curd_comm_split and
 * curd_comm_id_new; the options they take and the blocking twin each
 * splits off. A communicator they made is published through
 * communicator.c, which owns it from then on (waits, aborts, closing).
 * See communicator.h for the pair of NCCL communicators a curd_comm
 * holds and why. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "comm/communicator.h"
#include "core/core.h"
#include "driver/driver.h"

#define CURDI_COMM_DEFAULT_TIMEOUT_MS 30000u

/* The two timeouts of a communicator (curd_comm_options). */
typedef struct comm_timeouts {
    uint32_t wait_ms;
    uint32_t open_ms;
} comm_timeouts;

#define CURDI_COMM_OPEN_TIMEOUT_FLOOR_MS 60000u

static curd_status check_options(const curd_comm_options *options,
                                 const char *what, comm_timeouts *out)
{
    uint32_t timeout_ms = 0, open_timeout_ms = 0;
    if (options != NULL) {
        curd_status status = curdi_options_check(
            options, sizeof *options, sizeof *options, "curd_comm_options");
        if (status != CURD_OK)
            return status;
        if (options->flags != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: options->flags is 0x%x; no flag is "
                              "defined yet. Fix: set flags to 0.",
                              what, options->flags);
        timeout_ms = options->timeout_ms;
        open_timeout_ms = options->open_timeout_ms;
    }
    if (timeout_ms == 0) {
        timeout_ms = CURDI_COMM_DEFAULT_TIMEOUT_MS;
        const char *value = getenv("CURD_COMM_TIMEOUT_MS");
        if (value != NULL && value[0] != '\0') {
            char *end = NULL;
            errno = 0;
            unsigned long parsed = strtoul(value, &end, 10);
            if (errno != 0 || *end != '\0' || parsed == 0 ||
                parsed > UINT32_MAX || value[0] == '-')
                return curdi_fail(CURD_E_INVALID_ARGUMENT,
                                  "%s: CURD_COMM_TIMEOUT_MS is \"%s\", not a "
                                  "number of milliseconds from 1 to %u. "
                                  "Fix: set it to a positive number of "
                                  "milliseconds, or unset it for the "
                                  "default of %u.",
                                  what, value, UINT32_MAX,
                                  CURDI_COMM_DEFAULT_TIMEOUT_MS);
            timeout_ms = (uint32_t)parsed;
        }
    }
    out->wait_ms = timeout_ms;
    out->open_ms = open_timeout_ms != 0 ? open_timeout_ms
                   : timeout_ms > CURDI_COMM_OPEN_TIMEOUT_FLOOR_MS
                       ? timeout_ms
                       : CURDI_COMM_OPEN_TIMEOUT_FLOOR_MS;
    return CURD_OK;
}

static curd_status check_out(curd_comm **out_comm, const char *what)
{
    if (out_comm == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_comm is NULL. Fix: pass the address of a "
                          "curd_comm pointer.",
                          what);
    return CURD_OK;
}

static curd_comm *comm_new(curd_device *device, int rank, int size,
                           const comm_timeouts *timeouts, const char *what)
{
    curd_comm *comm = calloc(1, sizeof *comm);
    if (comm == NULL) {
        curdi_fail(CURD_E_OUT_OF_MEMORY,
                   "%s: the communicator could not be allocated. Fix: free "
                   "host memory and try again.",
                   what);
        return NULL;
    }
    comm->device = device;
    comm->rank = rank;
    comm->size = size;
    comm->timeout_ms = timeouts->wait_ms;
    comm->open_timeout_ms = timeouts->open_ms;
    return comm;
}

/* The non-blocking communicator's config: NCCL's defaults for everything
 * else. It shares its resources with the communicators split from it
 * (its blocking twin above all: the channels connected for one serve
 * both, and NCCL orders their work). */
static curdi_nccl_config nonblocking_config(void)
{
    curdi_nccl_config config = CURDI_NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.split_share = 1;
    return config;
}

static curdi_nccl_config blocking_config(void)
{
    curdi_nccl_config config = CURDI_NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    return config;
}

/* Whether communicators get a blocking twin. Only when NCCL connects
 * every collective's channels while the ranks join: at run time it would
 * connect them on the caller's thread, at the first collective of each
 * algorithm, waiting there for a peer that may never answer. NCCL reads
 * NCCL_RUNTIME_CONNECT once, at its first init; curd sets it to 0 before
 * its first communicator unless the user set it, and keeps every group
 * on the non-blocking communicators when the user asked for 1. */
static pthread_once_t twins_once = PTHREAD_ONCE_INIT;
static bool twins_wanted;

static void twins_decide(void)
{
    const char *value = getenv("NCCL_RUNTIME_CONNECT");
    bool unset = value == NULL || value[0] == '\0';
    if (unset)
        twins_wanted = setenv("NCCL_RUNTIME_CONNECT", "0", 1) == 0;
    else
        twins_wanted = strcmp(value, "0") == 0;
    curdi_trace("communicators: %s (NCCL_RUNTIME_CONNECT=%s)",
                twins_wanted ? "collectives enqueue on blocking twins"
                             : "every group stays non-blocking",
                unset ? "unset, now 0" : value);
}

/* Splits a blocking twin off each ready communicator of comms (one group
 * when there are several, as their ranks wait for each other), waiting
 * for the split like for the join. On a failure every communicator of
 * comms is aborted. Nothing is done where no twin is wanted or NCCL has
 * no split. */
static curd_status twins_open(curd_comm *const *comms, size_t count,
                              const char *what)
{
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    if (!twins_wanted || nccl->ncclCommSplit == NULL)
        return CURD_OK;
    curdi_nccl_result result = nccl->ncclGroupStart();
    if (result != CURDI_NCCL_Success)
        return curdi_nccl_fail(result, NULL, "ncclGroupStart", NULL);
    const char *call = NULL;
    curdi_nccl_comm failed = NULL;
    for (size_t index = 0; index < count && call == NULL; index++) {
        curd_comm *comm = comms[index];
        status = curdi_core_device_enter(comm->device);
        if (status != CURD_OK)
            break;
        curdi_nccl_config config = blocking_config();
        result = nccl->ncclCommSplit(comm->nccl, 0, comm->rank,
                                     &comm->blocking, &config);
        curdi_core_device_leave(comm->device);
        if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
            call = "ncclCommSplit (the blocking twin)";
            failed = comm->nccl;
        }
    }
    curdi_nccl_result end = nccl->ncclGroupEnd();
    if (status == CURD_OK && call == NULL && end != CURDI_NCCL_Success &&
        end != CURDI_NCCL_InProgress) {
        result = end;
        call = "ncclGroupEnd (the blocking twins)";
    }
    if (status == CURD_OK && call != NULL)
        status = curdi_nccl_fail_as(CURD_E_COMM, result, failed, call,
                                    "close nothing: the communicator was "
                                    "not opened; check that every rank is "
                                    "alive and try again");
    /* The parents report the splits' progress (NCCL writes each twin's
     * handle when its split completes). */
    if (status == CURD_OK)
        status = curdi_communicator_wait(comms, count, true, NULL, NULL, what);
    for (size_t index = 0; index < count && status == CURD_OK; index++)
        if (comms[index]->blocking == NULL)
            status = curdi_fail(CURD_E_COMM,
                                "%s: NCCL's split of rank %d's blocking "
                                "twin completed without a communicator. "
                                "Fix: run with NCCL_DEBUG=WARN and report "
                                "NCCL's view; NCCL_RUNTIME_CONNECT=1 opens "
                                "without twins.",
                                what, comms[index]->rank);
    if (status != CURD_OK)
        curdi_communicator_abort_opening(comms, count);
    return status;
}

/* ------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------- */
CURD_API void curd_comm_options_init(curd_comm_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

_Static_assert(sizeof(curd_comm_id) == sizeof(curdi_nccl_unique_id),
               "curd_comm_id must be ncclUniqueId's 128 bytes");

CURD_API curd_status curd_comm_id_new(curd_comm_id *id)
{
    if (id == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_comm_id_new: id is NULL. Fix: pass the "
                          "address of a curd_comm_id.");
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    curdi_nccl_unique_id unique;
    curdi_nccl_result result = nccl->ncclGetUniqueId(&unique);
    if (result != CURDI_NCCL_Success)
        return curdi_nccl_fail(result, NULL,
                               "curd_comm_id_new: "
                               "ncclGetUniqueId",
                               "check that this host has a network "
                               "interface NCCL can use (NCCL_SOCKET_IFNAME)"
                               " and, if NCCL_COMM_ID is set, that it reads"
                               " host:port");
    memcpy(id->bytes, unique.internal, sizeof id->bytes);
    return CURD_OK;
}

/* Starts rank `rank` of a communicator on the device (entered here): the
 * NCCL call only, inside or outside a group. On a failure the caller
 * aborts what NCCL may have made (outside the group). */
static curd_status init_rank(curd_comm *comm, const curdi_nccl_unique_id *id,
                             const char *what)
{
    const curdi_nccl *nccl = NULL;
    curd_status status = curdi_nccl_ready(&nccl);
    if (status == CURD_OK)
        status = curdi_core_device_enter(comm->device);
    if (status != CURD_OK)
        return status;
    (void)pthread_once(&twins_once, twins_decide);
    curdi_nccl_config config = nonblocking_config();
    curdi_nccl_result result = nccl->ncclCommInitRankConfig(
        &comm->nccl, comm->size, *id, comm->rank,
        &config);
    curdi_core_device_leave(comm->device);
    if (result == CURDI_NCCL_Success || result == CURDI_NCCL_InProgress)
        return CURD_OK;
    char call[128];
    snprintf(call, sizeof call, "%s: ncclCommInitRankConfig of rank %d of %d",
             what, comm->rank, comm->size);
    return curdi_nccl_fail(result, comm->nccl, call,
                           "give every rank the same id and size, each rank "
                           "once, one GPU per rank");
}

static curd_status open_checked(curd_device *device,
                                const curdi_nccl_unique_id *id, int rank,
                                int nranks, const comm_timeouts *timeouts,
                                const char *what, curd_comm **out_comm)
{
    curd_comm *comm = comm_new(device, rank, nranks, timeouts, what);
    if (comm == NULL)
        return CURD_E_OUT_OF_MEMORY;
    curd_status status = init_rank(comm, id, what);
    if (status == CURD_OK)
        status = curdi_communicator_wait(&comm, 1, true, NULL, NULL, what);
    if (status == CURD_OK)
        status = twins_open(&comm, 1, what);
    if (status != CURD_OK) {
        curdi_communicator_abort_opening(&comm, 1);
        free(comm);
        return status;
    }
    curdi_communicator_publish(comm);
    *out_comm = comm;
    return CURD_OK;
}

static curd_status check_rank(int rank, int nranks, const char *what)
{
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: rank %d of %d is outside the communicator. "
                          "Fix: pass nranks >= 1 and 0 <= rank < nranks.",
                          what, rank, nranks);
    return CURD_OK;
}

CURD_API curd_status curd_comm_open(curd_device *device,
                                    const curd_comm_id *id, int rank,
                                    int nranks,
                                    const curd_comm_options *options,
                                    curd_comm **out_comm)
{
    const char *what = "curd_comm_open";
    comm_timeouts timeouts = {0, 0};
    curd_status status = curdi_core_device_check(device, what);
    if (status == CURD_OK)
        status = check_out(out_comm, what);
    if (status == CURD_OK && id == NULL)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: id is NULL. Fix: pass the curd_comm_id "
                            "that curd_comm_id_new made on one rank.",
                            what);
    if (status == CURD_OK)
        status = check_rank(rank, nranks, what);
    if (status == CURD_OK)
        status = check_options(options, what, &timeouts);
    if (status != CURD_OK)
        return status;
    *out_comm = NULL;
    curdi_nccl_unique_id unique;
    memcpy(unique.internal, id->bytes, sizeof unique.internal);
    return open_checked(device, &unique, rank, nranks, &timeouts, what,
                        out_comm);
}

CURD_API curd_status curd_comm_open_all(curd_device *const *devices,
                                        int count,
                                        const curd_comm_options *options,
                                        curd_comm **comms)
{
    const char *what = "curd_comm_open_all";
    comm_timeouts timeouts = {0, 0};
    if (devices == NULL || comms == NULL || count < 1)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: devices %p, comms %p, count %d. Fix: pass "
                          "count >= 1 devices and space for count "
                          "communicators.",
                          what, (const void *)devices, (const void *)comms,
                          count);
    for (int index = 0; index < count; index++) {
        curd_status status = curdi_core_device_check(devices[index], what);
        if (status != CURD_OK)
            return status;
        for (int other = 0; other < index; other++)
            if (devices[other]->ordinal == devices[index]->ordinal)
                return curdi_fail(CURD_E_INVALID_ARGUMENT,
                                  "%s: devices %d and %d are both GPU %d; "
                                  "NCCL takes one rank per GPU. Fix: pass "
                                  "each GPU's device once.",
                                  what, other, index,
                                  devices[index]->ordinal);
    }
    curd_status status = check_options(options, what, &timeouts);
    if (status != CURD_OK)
        return status;
    const curdi_nccl *nccl = NULL;
    status = curdi_nccl_ready(&nccl);
    if (status != CURD_OK)
        return status;
    curd_comm **made = calloc((size_t)count, sizeof *made);
    if (made == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: no host memory for %d communicators. Fix: "
                          "free host memory and try again.",
                          what, count);
    for (int index = 0; index < count && status == CURD_OK; index++)
        if ((made[index] = comm_new(devices[index], index, count, &timeouts,
                                    what)) == NULL)
            status = CURD_E_OUT_OF_MEMORY;
    curd_comm_id id;
    if (status == CURD_OK)
        status = curd_comm_id_new(&id);
    if (status == CURD_OK) {
        /* One thread starts every rank: only inside one group can each
         * rank's init wait for the others. */
        curdi_nccl_unique_id unique;
        memcpy(unique.internal, id.bytes, sizeof unique.internal);
        curdi_nccl_result result = nccl->ncclGroupStart();
        if (result != CURDI_NCCL_Success)
            status = curdi_nccl_fail(result, NULL, "ncclGroupStart", NULL);
        for (int index = 0; index < count && status == CURD_OK &&
                            result == CURDI_NCCL_Success;
             index++)
            status = init_rank(made[index], &unique, what);
        if (result == CURDI_NCCL_Success) {
            result = nccl->ncclGroupEnd();
            if (status == CURD_OK && result != CURDI_NCCL_Success &&
                result != CURDI_NCCL_InProgress)
                status = curdi_nccl_fail(
                    result, NULL, "curd_comm_open_all: ncclGroupEnd", NULL);
        }
    }
    if (status == CURD_OK)
        status = curdi_communicator_wait(made, (size_t)count, true, NULL, NULL,
                                         what);
    if (status == CURD_OK)
        status = twins_open(made, (size_t)count, what);
    if (status != CURD_OK) {
        curdi_communicator_abort_opening(made, (size_t)count);
        for (int index = 0; index < count; index++)
            free(made[index]);
        free(made);
        return status;
    }
    for (int index = 0; index < count; index++) {
        curdi_communicator_publish(made[index]);
        comms[index] = made[index];
    }
    free(made);
    return CURD_OK;
}

/* The first of the launchers' rank and size variables that is set. */
static const char *const launcher_variables[][3] = {
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

static bool parse_int(const char *text, int *out)
{
    if (text == NULL || text[0] == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < 0 || value > INT32_MAX)
        return false;
    *out = (int)value;
    return true;
}

CURD_API curd_status curd_comm_open_from_env(curd_device *device,
                                             const curd_comm_options *options,
                                             curd_comm **out_comm)
{
    const char *what = "curd_comm_open_from_env";
    comm_timeouts timeouts = {0, 0};
    curd_status status = curdi_core_device_check(device, what);
    if (status == CURD_OK)
        status = check_out(out_comm, what);
    if (status == CURD_OK)
        status = check_options(options, what, &timeouts);
    if (status != CURD_OK)
        return status;
    size_t launcher = 0;
    size_t launcher_count =
        sizeof launcher_variables / sizeof launcher_variables[0];
    while (launcher < launcher_count &&
           getenv(launcher_variables[launcher][1]) == NULL)
        launcher++;
    if (launcher == launcher_count)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: no launcher's rank variable is set (RANK, "
                          "OMPI_COMM_WORLD_RANK, SLURM_PROCID). Fix: start "
                          "the program under torchrun, mpirun or srun, or "
                          "use curd_comm_open with an id of your own.",
                          what);
    const char *rank_name = launcher_variables[launcher][1];
    const char *size_name = launcher_variables[launcher][2];
    int rank = -1, size = 0;
    if (!parse_int(getenv(rank_name), &rank) ||
        !parse_int(getenv(size_name), &size) || size < 1 || rank >= size)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s's %s=\"%s\" and %s=\"%s\" are not a rank "
                          "below a size. Fix: check the launcher's "
                          "environment.",
                          what, launcher_variables[launcher][0], rank_name,
                          getenv(rank_name), size_name,
                          getenv(size_name) != NULL ? getenv(size_name) : "");
    /* NCCL's own bootstrap: every rank's unique id is the address in
     * NCCL_COMM_ID, and rank 0's init listens there. */
    const char *comm_id = getenv("NCCL_COMM_ID");
    if (comm_id == NULL || comm_id[0] == '\0') {
        const char *address = getenv("MASTER_ADDR");
        int port = 0;
        if (address == NULL || address[0] == '\0' ||
            !parse_int(getenv("MASTER_PORT"), &port) || port < 1 ||
            port >= 65535)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: neither NCCL_COMM_ID nor MASTER_ADDR and "
                              "MASTER_PORT say where rank 0 listens. Fix: "
                              "export NCCL_COMM_ID=<rank 0's host>:<a free "
                              "port> to every rank (mpirun -x, srun "
                              "--export), or set MASTER_ADDR and "
                              "MASTER_PORT.",
                              what);
        char address_port[300];
        snprintf(address_port, sizeof address_port, "%s:%d", address,
                 port + 1);
        if (setenv("NCCL_COMM_ID", address_port, 1) != 0)
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "%s: NCCL_COMM_ID could not be set. Fix: free "
                              "host memory, or export NCCL_COMM_ID "
                              "yourself.",
                              what);
    }
    curd_comm_id id;
    status = curd_comm_id_new(&id);
    if (status != CURD_OK)
        return status;
    *out_comm = NULL;
    curdi_nccl_unique_id unique;
    memcpy(unique.internal, id.bytes, sizeof unique.internal);
    return open_checked(device, &unique, rank, size, &timeouts, what,
                        out_comm);
}

CURD_API curd_status curd_comm_split(curd_comm *comm, int color, int key,
                                     curd_comm **out_comm)
{
    const char *what = "curd_comm_split";
    curd_status status = curdi_communicator_check(comm, what);
    if (status == CURD_OK)
        status = check_out(out_comm, what);
    if (status == CURD_OK && color < CURD_COMM_SPLIT_NONE)
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: color %d is negative. Fix: pass a colour "
                            ">= 0, or CURD_COMM_SPLIT_NONE to take no part.",
                            what, color);
    const curdi_nccl *nccl = NULL;
    if (status == CURD_OK)
        status = curdi_nccl_ready(&nccl);
    if (status == CURD_OK && nccl->ncclCommSplit == NULL)
        status = curdi_fail(CURD_E_UNSUPPORTED,
                            "%s: this NCCL (version code %d) has no "
                            "ncclCommSplit, which came in NCCL 2.18. Fix: "
                            "upgrade NCCL (libnccl2) to 2.18 or newer, or "
                            "open the smaller communicators with "
                            "curd_comm_open.",
                            what, nccl->version);
    if (status != CURD_OK)
        return status;
    *out_comm = NULL;
    /* Its rank and size are known once the split completes. */
    const comm_timeouts inherited = {comm->timeout_ms, comm->open_timeout_ms};
    curd_comm *child = comm_new(comm->device, 0, 0, &inherited, what);
    if (child == NULL)
        return CURD_E_OUT_OF_MEMORY;
    status = curdi_core_device_enter(comm->device);
    if (status != CURD_OK) {
        free(child);
        return status;
    }
    curdi_nccl_config config = nonblocking_config();
    curdi_nccl_result result = nccl->ncclCommSplit(
        comm->nccl, color, key, &child->nccl, &config);
    curdi_core_device_leave(comm->device);
    if (result != CURDI_NCCL_Success && result != CURDI_NCCL_InProgress) {
        status = curdi_nccl_fail(result, comm->nccl, "ncclCommSplit", NULL);
        curdi_communicator_abort_opening(&child, 1);
        free(child);
        return status;
    }
    /* The parent reports the split's progress; the child its own init. */
    curd_comm *both[2] = {comm, child};
    status = curdi_communicator_wait(both, child->nccl != NULL ? 2 : 1, true,
                                     NULL, NULL, what);
    if (status == CURD_OK && child->nccl != NULL) {
        result = nccl->ncclCommUserRank(child->nccl, &child->rank);
        if (result == CURDI_NCCL_Success)
            result = nccl->ncclCommCount(child->nccl, &child->size);
        if (result != CURDI_NCCL_Success)
            status = curdi_nccl_fail(result, child->nccl,
                                     "curd_comm_split: ncclCommUserRank or "
                                     "ncclCommCount",
                                     NULL);
    }
    if (status == CURD_OK && child->nccl != NULL)
        status = twins_open(&child, 1, what);
    if (status != CURD_OK || child->nccl == NULL) {
        curdi_communicator_abort_opening(&child, 1);
        free(child);
        return status;
    }
    curdi_communicator_publish(child);
    *out_comm = child;
    return CURD_OK;
}
