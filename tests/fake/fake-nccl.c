/* fake-nccl.c - a stand-in libnccl.so.2 for tests on hosts without GPUs.
 *
 * Built as $(BUILD)/tests/libnccl-fake.so.2 and loaded through
 * CURD_LIBNCCL, beside the stand-in driver (fake-cuda.c), whose "device
 * memory" is host memory at the device address: so every collective is
 * computed here, on the host, with the driver's streams (which complete
 * at once) left alone. Ranks are threads of one process (or one thread
 * driving several communicators inside a group); a communicator joins the
 * clique of its unique id, and the clique is complete once `nranks`
 * communicators have joined.
 *
 * It models what curd relies on from a non-blocking communicator:
 *  - ncclCommInitRankConfig and ncclCommSplit return at once; the new
 *    communicator's ncclCommGetAsyncError says ncclInProgress until its
 *    clique is complete.
 *  - A split whose config says blocking makes a blocking communicator:
 *    its group's end returns once posted (see struct ncclComm).
 *  - ncclGroupStart/End collect a thread's calls; at the outermost
 *    ncclGroupEnd each communicator's calls are posted to its clique as
 *    one group. A clique runs its ranks' groups in order, once every rank
 *    has posted its next one: the matching calls are checked against each
 *    other (kind, count, type, operation, root; a send against the peer's
 *    receive) and computed. Until then ncclGroupEnd and
 *    ncclCommGetAsyncError say ncclInProgress: a rank that never posts
 *    leaves its peers in progress for ever, which is what curd's timeout
 *    is for. Calls that disagree are ncclInvalidUsage on every rank.
 *  - A communicator destroyed or aborted while its peers have groups
 *    waiting breaks the clique: those peers see ncclRemoteError.
 *  - ncclGetLastError gives the communicator's last message.
 *  - A call on a stream that the stand-in driver is capturing is not
 *    posted: it goes into the capture as a host node (cuLaunchHostFunc,
 *    found through the driver CURD_LIBCUDA names), and each replay of the
 *    graph posts it as a group of its own and waits, as a GPU kernel waits
 *    for its peers, until the clique has run it or broke. A clique with a
 *    stalled rank (below) is not waited for: the call stays in progress,
 *    as a kernel whose peer never comes. Captured calls are kept with
 *    their communicator and freed with it.
 *
 * Knobs (read at each use):
 *   FAKE_NCCL_VERSION     what ncclGetVersion reports (default 22809)
 *   FAKE_NCCL_STALL_RANK  groups posted by this rank of any clique are
 *                         accepted and never arrive
 *   FAKE_NCCL_JOIN_POLLS  a communicator made by an init or a split says
 *                         ncclInProgress to its first N
 *                         ncclCommGetAsyncError calls, as NCCL's init job
 *                         runs in its own thread for a while; one
 *                         destroyed or aborted before that is counted by
 *                         fake_nccl_abandoned_joins() (NCCL 2.28 keeps
 *                         what such a job had allocated)
 * fake_nccl_live() counts live communicators, so tests prove none leaks;
 * fake_nccl_groups(blocking) counts the groups posted on blocking or
 * non-blocking communicators, so tests see which of a pair took work. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver/nccl_abi.h"
#include "support/float16.h"

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_NCCL_MAX_RANKS 64

/* Every entry declared from nccl_abi.h's lists, so a definition below
 * whose type differs from curd's declaration does not compile. */
#define FAKE_DECLARE_(name, tier, params, args)                              \
    FAKE_API curdi_nccl_result name params;
CURDI_NCCL_ENTRY_LIST(FAKE_DECLARE_)
#undef FAKE_DECLARE_
#define FAKE_DECLARE_TEXT_(name, params, args) FAKE_API const char *name params;
CURDI_NCCL_TEXT_ENTRY_LIST(FAKE_DECLARE_TEXT_)
#undef FAKE_DECLARE_TEXT_

/* One call of a group. */
typedef enum fake_kind {
    FAKE_ALL_REDUCE,
    FAKE_BROADCAST,
    FAKE_REDUCE,
    FAKE_ALL_GATHER,
    FAKE_REDUCE_SCATTER,
    FAKE_SEND,
    FAKE_RECV
} fake_kind;

typedef struct fake_call {
    fake_kind kind;
    struct ncclComm *comm;
    const void *send;
    void *recv;
    size_t count;
    curdi_nccl_data_type data_type;
    curdi_nccl_red_op op;
    int root_or_peer;
    bool matched; /* a send or receive paired while the group runs */
    curdi_cu_stream stream;
} fake_call;

/* A call captured into a graph, posted at each replay. */
typedef struct fake_replay {
    struct fake_replay *next;
    fake_call call;
} fake_replay;

typedef struct fake_group {
    struct fake_group *next;
    size_t count;
    fake_call *calls;
} fake_group;

typedef struct fake_clique fake_clique;

/* A split in progress on a parent clique: each rank's colour and key and
 * the child communicator it was handed. */
typedef struct fake_split {
    unsigned arrived;
    int color[FAKE_NCCL_MAX_RANKS];
    int key[FAKE_NCCL_MAX_RANKS];
    struct ncclComm *child[FAKE_NCCL_MAX_RANKS];
} fake_split;

struct ncclComm {
    fake_clique *clique; /* NULL until a split places it */
    fake_clique *split_parent; /* a split child not yet placed: where */
    int rank;
    bool joined;         /* counted in its clique */
    /* config.blocking 1: its ncclGroupEnd returns once the group is
     * posted, as a blocking NCCL's returns once the kernel is enqueued;
     * its ncclCommGetAsyncError still says ncclInProgress until the
     * clique ran the group, as the kernel would still be running. */
    bool blocking;
    curdi_nccl_result error;
    unsigned long long posted, completed;
    unsigned long long splits; /* splits this rank called */
    unsigned join_polls; /* FAKE_NCCL_JOIN_POLLS still to answer */
    fake_replay *replays; /* its calls captured into graphs */
    char last_error[256];
};

struct fake_clique {
    fake_clique *next;
    char id[CURDI_NCCL_UNIQUE_ID_BYTES];
    bool from_split; /* never found by id */
    int nranks;
    int joined;
    int live;        /* members not yet destroyed */
    bool broken;
    struct ncclComm *members[FAKE_NCCL_MAX_RANKS];
    fake_group *head[FAKE_NCCL_MAX_RANKS], *tail[FAKE_NCCL_MAX_RANKS];
    unsigned long long splits_done;
    fake_split split;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_clique *cliques;
static long live_comms;
static long abandoned_joins;
/* Groups posted, on non-blocking [0] and blocking [1] communicators. */
static long groups_posted[2];
static __thread char thread_error[256];

static __thread int group_depth;
static __thread fake_call *group_calls;
static __thread size_t group_count, group_capacity;

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */
__attribute__((format(printf, 3, 4)))
static curdi_nccl_result fail(struct ncclComm *comm, curdi_nccl_result result,
                              const char *format, ...)
{
    char *target = comm != NULL ? comm->last_error : thread_error;
    va_list args;
    va_start(args, format);
    vsnprintf(target, sizeof thread_error, format, args);
    va_end(args);
    if (comm != NULL)
        snprintf(thread_error, sizeof thread_error, "%s", comm->last_error);
    return result;
}

static void break_comm(struct ncclComm *comm, curdi_nccl_result result,
                       const char *why)
{
    if (comm->error == CURDI_NCCL_Success || comm->error ==
        CURDI_NCCL_InProgress) {
        comm->error = result;
        snprintf(comm->last_error, sizeof comm->last_error, "%s", why);
    }
}

/* ------------------------------------------------------------------------
 * Reductions, on the host, in the element type (halves through float)
 * ---------------------------------------------------------------------- */
static size_t type_bytes(curdi_nccl_data_type type)
{
    switch (type) {
    case CURDI_NCCL_Int8:
    case CURDI_NCCL_Uint8:
        return 1;
    case CURDI_NCCL_Float16:
    case CURDI_NCCL_Bfloat16:
        return 2;
    case CURDI_NCCL_Int32:
    case CURDI_NCCL_Uint32:
    case CURDI_NCCL_Float32:
        return 4;
    case CURDI_NCCL_Int64:
    case CURDI_NCCL_Uint64:
    case CURDI_NCCL_Float64:
        return 8;
    default:
        return 0;
    }
}

#define FAKE_COMBINE(a, b, op)                                               \
    ((op) == CURDI_NCCL_Prod  ? (a) * (b)                                    \
     : (op) == CURDI_NCCL_Max ? ((a) > (b) ? (a) : (b))                      \
     : (op) == CURDI_NCCL_Min ? ((a) < (b) ? (a) : (b))                      \
                              : (a) + (b))

/* out[i] = op over the n inputs' element i; avg divides the sum by n
 * (integer division for integers, as NCCL does). */
#define FAKE_REDUCE_AS(type, load, store)                                    \
    for (size_t i = 0; i < count; i++) {                                     \
        type acc = load(((const type##_raw *)inputs[0])[i]);                 \
        for (int k = 1; k < n; k++)                                          \
            acc = (type)FAKE_COMBINE(acc,                                    \
                                     load(((const type##_raw *)inputs[k])[i]), \
                                     op);                                    \
        if (op == CURDI_NCCL_Avg)                                            \
            acc = (type)(acc / (type)n);                                     \
        ((type##_raw *)out)[i] = store(acc);                                 \
    }

typedef int8_t int8_t_raw;
typedef uint8_t uint8_t_raw;
typedef int32_t int32_t_raw;
typedef uint32_t uint32_t_raw;
typedef int64_t int64_t_raw;
typedef uint64_t uint64_t_raw;
typedef float float_raw;
typedef double double_raw;
typedef float half_as_float;
typedef uint16_t half_as_float_raw;
typedef float bfloat_as_float;
typedef uint16_t bfloat_as_float_raw;
#define FAKE_SAME(x) (x)

static void reduce(void *out, const void *const *inputs, int n, size_t count,
                   curdi_nccl_data_type data_type, curdi_nccl_red_op op)
{
    switch (data_type) {
    case CURDI_NCCL_Int8:
        FAKE_REDUCE_AS(int8_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Uint8:
        FAKE_REDUCE_AS(uint8_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Int32:
        FAKE_REDUCE_AS(int32_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Uint32:
        FAKE_REDUCE_AS(uint32_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Int64:
        FAKE_REDUCE_AS(int64_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Uint64:
        FAKE_REDUCE_AS(uint64_t, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Float32:
        FAKE_REDUCE_AS(float, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Float64:
        FAKE_REDUCE_AS(double, FAKE_SAME, FAKE_SAME) break;
    case CURDI_NCCL_Float16:
        FAKE_REDUCE_AS(half_as_float, float16_to_float, float_to_float16) break;
    case CURDI_NCCL_Bfloat16:
        FAKE_REDUCE_AS(bfloat_as_float, bfloat16_to_float, float_to_bfloat16)
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------------
 * Running a clique's groups
 * ---------------------------------------------------------------------- */
static bool is_p2p(fake_kind kind)
{
    return kind == FAKE_SEND || kind == FAKE_RECV;
}

/* The next collective (not a send or receive) of a group from *at on. */
static fake_call *next_collective(fake_group *group, size_t *at)
{
    while (*at < group->count && is_p2p(group->calls[*at].kind))
        (*at)++;
    return *at < group->count ? &group->calls[(*at)++] : NULL;
}

static bool agree(const fake_call *a, const fake_call *b)
{
    return a->kind == b->kind && a->count == b->count &&
           a->data_type == b->data_type &&
           (a->kind == FAKE_BROADCAST || a->kind == FAKE_ALL_GATHER ||
            a->op == b->op) &&
           ((a->kind != FAKE_BROADCAST && a->kind != FAKE_REDUCE) ||
            a->root_or_peer == b->root_or_peer);
}

/* One collective across the clique: calls[r] is rank r's. Inputs are
 * copied first, so in-place calls read what was there before. */
static bool run_collective(fake_clique *clique, fake_call **calls)
{
    int n = clique->nranks;
    const fake_call *first = calls[0];
    size_t element = type_bytes(first->data_type);
    size_t in_count =
        first->kind == FAKE_REDUCE_SCATTER ? first->count * (size_t)n
                                           : first->count;
    size_t in_bytes = in_count * element, out_bytes = first->count * element;
    unsigned char *inputs = malloc(in_bytes * (size_t)n + out_bytes + 1);
    if (inputs == NULL)
        return false;
    const void *input_at[FAKE_NCCL_MAX_RANKS];
    for (int r = 0; r < n; r++) {
        input_at[r] = inputs + in_bytes * (size_t)r;
        if (calls[r]->send != NULL)
            memcpy(inputs + in_bytes * (size_t)r, calls[r]->send, in_bytes);
    }
    unsigned char *scratch = inputs + in_bytes * (size_t)n;
    switch (first->kind) {
    case FAKE_ALL_REDUCE:
        reduce(scratch, input_at, n, first->count, first->data_type,
               first->op);
        for (int r = 0; r < n; r++)
            memcpy(calls[r]->recv, scratch, out_bytes);
        break;
    case FAKE_REDUCE:
        reduce(scratch, input_at, n, first->count, first->data_type,
               first->op);
        memcpy(calls[first->root_or_peer]->recv, scratch, out_bytes);
        break;
    case FAKE_BROADCAST:
        for (int r = 0; r < n; r++)
            memcpy(calls[r]->recv, input_at[first->root_or_peer], out_bytes);
        break;
    case FAKE_ALL_GATHER:
        for (int r = 0; r < n; r++)
            for (int k = 0; k < n; k++)
                memcpy((unsigned char *)calls[r]->recv + in_bytes * (size_t)k,
                       input_at[k], in_bytes);
        break;
    case FAKE_REDUCE_SCATTER:
        for (int r = 0; r < n; r++) {
            const void *slices[FAKE_NCCL_MAX_RANKS];
            for (int k = 0; k < n; k++)
                slices[k] = (const unsigned char *)input_at[k] +
                            out_bytes * (size_t)r;
            reduce(calls[r]->recv, slices, n, first->count,
                   first->data_type, first->op);
        }
        break;
    default:
        break;
    }
    free(inputs);
    return true;
}

/* Pairs every send of the groups with its peer's receive, in order, and
 * copies; false when one is left unpaired or a pair disagrees. */
static bool run_p2p(fake_clique *clique, fake_group **groups)
{
    int n = clique->nranks;
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < groups[r]->count; i++) {
            fake_call *send = &groups[r]->calls[i];
            if (send->kind != FAKE_SEND)
                continue;
            fake_group *peer = groups[send->root_or_peer];
            fake_call *recv = NULL;
            for (size_t j = 0; j < peer->count && recv == NULL; j++)
                if (peer->calls[j].kind == FAKE_RECV &&
                    !peer->calls[j].matched &&
                    peer->calls[j].root_or_peer == r)
                    recv = &peer->calls[j];
            if (recv == NULL || recv->count != send->count ||
                recv->data_type != send->data_type)
                return false;
            recv->matched = send->matched = true;
            memmove(recv->recv, send->send,
                    send->count * type_bytes(send->data_type));
        }
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < groups[r]->count; i++)
            if (is_p2p(groups[r]->calls[i].kind) &&
                !groups[r]->calls[i].matched)
                return false;
    return true;
}

static void run_groups(fake_clique *clique, fake_group **groups)
{
    int n = clique->nranks;
    size_t at[FAKE_NCCL_MAX_RANKS] = {0};
    const char *why = NULL;
    for (;;) {
        fake_call *calls[FAKE_NCCL_MAX_RANKS];
        int found = 0;
        for (int r = 0; r < n; r++)
            if ((calls[r] = next_collective(groups[r], &at[r])) != NULL)
                found++;
        if (found == 0)
            break;
        bool same = found == n;
        for (int r = 1; r < n && same; r++)
            same = agree(calls[0], calls[r]);
        if (!same) {
            why = "fake NCCL: the ranks' collectives disagree (kind, count, "
                  "type, operation or root)";
            break;
        }
        if (!run_collective(clique, calls)) {
            why = "fake NCCL: out of host memory";
            break;
        }
    }
    if (why == NULL && !run_p2p(clique, groups))
        why = "fake NCCL: a send and its peer's receive do not pair up "
              "(count, type or missing call)";
    for (int r = 0; r < n; r++) {
        struct ncclComm *member = clique->members[r];
        if (why != NULL)
            break_comm(member, CURDI_NCCL_InvalidUsage, why);
        member->completed++;
    }
}

/* Runs the clique's groups while every rank has one waiting. Lock held. */
static void progress(fake_clique *clique)
{
    if (clique->joined < clique->nranks || clique->broken)
        return;
    for (;;) {
        fake_group *groups[FAKE_NCCL_MAX_RANKS];
        for (int r = 0; r < clique->nranks; r++)
            if ((groups[r] = clique->head[r]) == NULL)
                return;
        for (int r = 0; r < clique->nranks; r++) {
            clique->head[r] = groups[r]->next;
            if (clique->head[r] == NULL)
                clique->tail[r] = NULL;
        }
        run_groups(clique, groups);
        for (int r = 0; r < clique->nranks; r++) {
            free(groups[r]->calls);
            free(groups[r]);
        }
    }
}

/* ------------------------------------------------------------------------
 * Communicators
 * ---------------------------------------------------------------------- */
static bool ready(const struct ncclComm *comm)
{
    return comm->clique != NULL && comm->clique->joined == comm->clique->nranks;
}

static curdi_nccl_result state_of(const struct ncclComm *comm)
{
    if (comm->error != CURDI_NCCL_Success)
        return comm->error;
    if (!ready(comm) || comm->join_polls > 0 || comm->completed < comm->posted)
        return CURDI_NCCL_InProgress;
    return CURDI_NCCL_Success;
}

static fake_clique *clique_new(int nranks)
{
    fake_clique *clique = calloc(1, sizeof *clique);
    if (clique == NULL)
        return NULL;
    clique->nranks = nranks;
    clique->next = cliques;
    cliques = clique;
    return clique;
}

static unsigned join_polls(void)
{
    const char *value = getenv("FAKE_NCCL_JOIN_POLLS");
    return value != NULL ? (unsigned)atoi(value) : 0;
}

static void join(fake_clique *clique, struct ncclComm *comm, int rank)
{
    comm->clique = clique;
    comm->rank = rank;
    comm->joined = true;
    clique->members[rank] = comm;
    clique->joined++;
    clique->live++;
}

FAKE_API curdi_nccl_result ncclGetVersion(int *version)
{
    const char *value = getenv("FAKE_NCCL_VERSION");
    if (version == NULL)
        return fail(NULL, CURDI_NCCL_InvalidArgument, "version is NULL");
    *version = value != NULL ? atoi(value) : 22809;
    return CURDI_NCCL_Success;
}

FAKE_API curdi_nccl_result ncclGetUniqueId(curdi_nccl_unique_id *id)
{
    if (id == NULL)
        return fail(NULL, CURDI_NCCL_InvalidArgument, "uniqueId is NULL");
    memset(id, 0, sizeof *id);
    /* With NCCL_COMM_ID every rank derives the same id from the address,
     * as real NCCL's bootstrap root does. */
    const char *address = getenv("NCCL_COMM_ID");
    if (address != NULL) {
        snprintf(id->internal, sizeof id->internal, "addr:%s", address);
        return CURDI_NCCL_Success;
    }
    static unsigned long long counter;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&lock);
    unsigned long long serial = ++counter;
    pthread_mutex_unlock(&lock);
    snprintf(id->internal, sizeof id->internal, "fake:%ld:%llu:%lld.%09ld",
             (long)getpid(), serial, (long long)now.tv_sec, now.tv_nsec);
    return CURDI_NCCL_Success;
}

static bool config_ok(const curdi_nccl_config *config)
{
    return config == NULL ||
           (config->magic == CURDI_NCCL_API_MAGIC &&
            config->size >= offsetof(curdi_nccl_config, blocking) +
                                sizeof(int));
}

FAKE_API curdi_nccl_result ncclCommInitRankConfig(
    curdi_nccl_comm *out, int nranks, curdi_nccl_unique_id id, int rank,
    curdi_nccl_config *config)
{
    if (out == NULL || nranks < 1 || nranks > FAKE_NCCL_MAX_RANKS ||
        rank < 0 || rank >= nranks || !config_ok(config))
        return fail(NULL, CURDI_NCCL_InvalidArgument,
                    "fake NCCL: bad rank %d of %d, or a bad config", rank,
                    nranks);
    pthread_mutex_lock(&lock);
    fake_clique *clique = cliques;
    while (clique != NULL &&
           (clique->from_split ||
            memcmp(clique->id, id.internal, sizeof clique->id) != 0 ||
            clique->joined == clique->nranks))
        clique = clique->next;
    curdi_nccl_result result = CURDI_NCCL_Success;
    if (clique != NULL &&
        (clique->nranks != nranks || clique->members[rank] != NULL))
        result = fail(NULL, CURDI_NCCL_InvalidUsage,
                      "fake NCCL: rank %d of %d joins a clique of %d whose "
                      "rank %d is taken or whose size differs",
                      rank, nranks, clique->nranks, rank);
    struct ncclComm *comm = NULL;
    if (result == CURDI_NCCL_Success) {
        comm = calloc(1, sizeof *comm);
        if (clique == NULL && comm != NULL &&
            (clique = clique_new(nranks)) != NULL)
            memcpy(clique->id, id.internal, sizeof clique->id);
        if (comm == NULL || clique == NULL) {
            free(comm);
            result = fail(NULL, CURDI_NCCL_SystemError,
                          "fake NCCL: out of host memory");
        }
    }
    if (result == CURDI_NCCL_Success) {
        join(clique, comm, rank);
        comm->join_polls = join_polls();
        live_comms++;
        *out = comm;
        result = ready(comm) ? CURDI_NCCL_Success : CURDI_NCCL_InProgress;
        progress(clique);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

/* Not an entry curd calls: curd-bench's raw baselines make NCCL's default
 * communicators with it, as a program using NCCL directly does. */
FAKE_API curdi_nccl_result ncclCommInitRank(curdi_nccl_comm *out, int nranks,
                                            curdi_nccl_unique_id id,
                                            int rank);
FAKE_API curdi_nccl_result ncclCommInitRank(curdi_nccl_comm *out, int nranks,
                                            curdi_nccl_unique_id id, int rank)
{
    return ncclCommInitRankConfig(out, nranks, id, rank, NULL);
}

/* Places every child of a split that all ranks have called. Lock held. */
static bool finish_split(fake_clique *parent)
{
    fake_split *split = &parent->split;
    for (int r = 0; r < parent->nranks; r++) {
        struct ncclComm *child = split->child[r];
        if (child == NULL || child->clique != NULL)
            continue;
        /* Ranks of the same colour, ordered by key, then parent rank. */
        int members[FAKE_NCCL_MAX_RANKS], size = 0;
        for (int k = 0; k < parent->nranks; k++)
            if (split->child[k] != NULL && split->color[k] == split->color[r])
                members[size++] = k;
        for (int i = 1; i < size; i++)
            for (int j = i; j > 0 && split->key[members[j - 1]] >
                                         split->key[members[j]];
                 j--) {
                int swap = members[j];
                members[j] = members[j - 1];
                members[j - 1] = swap;
            }
        fake_clique *clique = clique_new(size);
        if (clique == NULL)
            return false;
        clique->from_split = true;
        for (int i = 0; i < size; i++) {
            split->child[members[i]]->split_parent = NULL;
            join(clique, split->child[members[i]], i);
        }
    }
    memset(split, 0, sizeof *split);
    parent->splits_done++;
    return true;
}

FAKE_API curdi_nccl_result ncclCommSplit(curdi_nccl_comm comm, int color,
                                         int key, curdi_nccl_comm *out,
                                         curdi_nccl_config *config)
{
    if (comm == NULL || out == NULL || !config_ok(config) || color < -1)
        return fail(comm, CURDI_NCCL_InvalidArgument,
                    "fake NCCL: bad split arguments");
    pthread_mutex_lock(&lock);
    fake_clique *parent = comm->clique;
    curdi_nccl_result result = CURDI_NCCL_Success;
    /* One split at a time per clique, each rank once. */
    if (!ready(comm) || comm->error != CURDI_NCCL_Success ||
        comm->splits != parent->splits_done)
        result = fail(comm, CURDI_NCCL_InvalidUsage,
                      "fake NCCL: split of a communicator that is not ready "
                      "or already splitting");
    struct ncclComm *child = NULL;
    if (result == CURDI_NCCL_Success && color >= 0 &&
        (child = calloc(1, sizeof *child)) == NULL)
        result = fail(comm, CURDI_NCCL_SystemError,
                      "fake NCCL: out of host memory");
    if (result == CURDI_NCCL_Success) {
        fake_split *split = &parent->split;
        split->color[comm->rank] = color;
        split->key[comm->rank] = key;
        split->child[comm->rank] = child;
        split->arrived++;
        comm->splits++;
        if (child != NULL) {
            child->split_parent = parent;
            child->blocking = config != NULL && config->blocking == 1;
            child->join_polls = join_polls();
            live_comms++;
        }
        *out = child;
        if (split->arrived == (unsigned)parent->nranks &&
            !finish_split(parent))
            result = fail(comm, CURDI_NCCL_SystemError,
                          "fake NCCL: out of host memory");
        else if (child != NULL && state_of(child) == CURDI_NCCL_InProgress)
            result = CURDI_NCCL_InProgress;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

FAKE_API curdi_nccl_result ncclCommFinalize(curdi_nccl_comm comm)
{
    if (comm == NULL)
        return fail(NULL, CURDI_NCCL_InvalidArgument, "comm is NULL");
    pthread_mutex_lock(&lock);
    curdi_nccl_result result = state_of(comm);
    pthread_mutex_unlock(&lock);
    return result == CURDI_NCCL_InProgress ? CURDI_NCCL_Success : result;
}

/* Frees a communicator; peers with groups still waiting on it see the
 * clique broken. Lock held. */
static void comm_free(struct ncclComm *comm)
{
    if (comm->join_polls > 0)
        abandoned_joins++;
    fake_clique *clique = comm->clique;
    if (clique != NULL && comm->joined) {
        clique->members[comm->rank] = NULL;
        for (fake_group *group = clique->head[comm->rank]; group != NULL;) {
            fake_group *next = group->next;
            free(group->calls);
            free(group);
            group = next;
        }
        clique->head[comm->rank] = clique->tail[comm->rank] = NULL;
        clique->broken = true;
        for (int r = 0; r < clique->nranks; r++) {
            struct ncclComm *peer = clique->members[r];
            if (peer != NULL && (peer->completed < peer->posted ||
                                 !ready(peer)))
                break_comm(peer, CURDI_NCCL_RemoteError,
                           "fake NCCL: a peer's communicator was destroyed "
                           "or aborted while this rank waited for it");
        }
        if (--clique->live == 0) {
            /* Children of a split this clique never finished forget it. */
            for (int r = 0; r < clique->nranks; r++)
                if (clique->split.child[r] != NULL)
                    clique->split.child[r]->split_parent = NULL;
            fake_clique **link = &cliques;
            while (*link != clique)
                link = &(*link)->next;
            *link = clique->next;
            free(clique);
        }
    } else if (comm->split_parent != NULL) {
        /* A child its split never placed: the split goes on without it,
         * as if this rank had passed no colour. */
        fake_split *split = &comm->split_parent->split;
        for (int r = 0; r < comm->split_parent->nranks; r++)
            if (split->child[r] == comm)
                split->child[r] = NULL;
    }
    while (comm->replays != NULL) {
        fake_replay *next = comm->replays->next;
        free(comm->replays);
        comm->replays = next;
    }
    free(comm);
    live_comms--;
}

FAKE_API curdi_nccl_result ncclCommDestroy(curdi_nccl_comm comm)
{
    if (comm == NULL)
        return fail(NULL, CURDI_NCCL_InvalidArgument, "comm is NULL");
    pthread_mutex_lock(&lock);
    comm_free(comm);
    pthread_mutex_unlock(&lock);
    return CURDI_NCCL_Success;
}

FAKE_API curdi_nccl_result ncclCommAbort(curdi_nccl_comm comm)
{
    return ncclCommDestroy(comm);
}

FAKE_API curdi_nccl_result ncclCommGetAsyncError(curdi_nccl_comm comm,
                                                 curdi_nccl_result *error)
{
    if (comm == NULL || error == NULL)
        return fail(comm, CURDI_NCCL_InvalidArgument,
                    "comm or asyncError is NULL");
    pthread_mutex_lock(&lock);
    *error = state_of(comm);
    if (comm->join_polls > 0)
        comm->join_polls--;
    pthread_mutex_unlock(&lock);
    return CURDI_NCCL_Success;
}

static curdi_nccl_result read_ready(const curdi_nccl_comm comm, int *out,
                                    bool size)
{
    if (comm == NULL || out == NULL)
        return fail(comm, CURDI_NCCL_InvalidArgument, "comm or out is NULL");
    pthread_mutex_lock(&lock);
    curdi_nccl_result result = CURDI_NCCL_Success;
    if (!ready(comm))
        result = fail(comm, CURDI_NCCL_InvalidUsage,
                      "fake NCCL: the communicator is still initialising");
    else
        *out = size ? comm->clique->nranks : comm->rank;
    pthread_mutex_unlock(&lock);
    return result;
}

FAKE_API curdi_nccl_result ncclCommCount(const curdi_nccl_comm comm,
                                         int *count)
{
    return read_ready(comm, count, true);
}

FAKE_API curdi_nccl_result ncclCommUserRank(const curdi_nccl_comm comm,
                                            int *rank)
{
    return read_ready(comm, rank, false);
}

/* ------------------------------------------------------------------------
 * Groups and calls
 * ---------------------------------------------------------------------- */
FAKE_API curdi_nccl_result ncclGroupStart(void)
{
    group_depth++;
    return CURDI_NCCL_Success;
}

static bool stalled(int rank)
{
    const char *value = getenv("FAKE_NCCL_STALL_RANK");
    return value != NULL && value[0] != '\0' && atoi(value) == rank;
}

/* Posts the thread's calls of each communicator as one group. */
static curdi_nccl_result post_groups(void)
{
    curdi_nccl_result result = CURDI_NCCL_Success;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < group_count; i++) {
        struct ncclComm *comm = group_calls[i].comm;
        if (comm == NULL)
            continue; /* posted with an earlier call of its communicator */
        size_t count = 0;
        for (size_t j = i; j < group_count; j++)
            count += group_calls[j].comm == comm;
        fake_group *group = calloc(1, sizeof *group);
        fake_call *calls = calloc(count, sizeof *calls);
        if (group == NULL || calls == NULL) {
            free(group);
            free(calls);
            result = fail(comm, CURDI_NCCL_SystemError,
                          "fake NCCL: out of host memory");
            break;
        }
        group->count = count;
        group->calls = calls;
        for (size_t j = i, k = 0; j < group_count; j++)
            if (group_calls[j].comm == comm) {
                calls[k++] = group_calls[j];
                group_calls[j].comm = NULL;
            }
        fake_clique *clique = comm->clique;
        comm->posted++;
        groups_posted[comm->blocking]++;
        if (clique->broken)
            break_comm(comm, CURDI_NCCL_RemoteError,
                       "fake NCCL: a peer's communicator was destroyed or "
                       "aborted");
        if (clique->broken || stalled(comm->rank)) {
            free(calls);
            free(group);
            continue;
        }
        if (clique->tail[comm->rank] != NULL)
            clique->tail[comm->rank]->next = group;
        else
            clique->head[comm->rank] = group;
        clique->tail[comm->rank] = group;
        progress(clique);
        if (state_of(comm) != CURDI_NCCL_Success &&
            !(comm->blocking && state_of(comm) == CURDI_NCCL_InProgress))
            result = state_of(comm);
    }
    pthread_mutex_unlock(&lock);
    group_count = 0;
    return result;
}

FAKE_API curdi_nccl_result ncclGroupEnd(void)
{
    if (group_depth == 0)
        return fail(NULL, CURDI_NCCL_InvalidUsage,
                    "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0)
        return CURDI_NCCL_Success;
    curdi_nccl_result result = post_groups();
    /* Thread-local: freed here, so a rank's thread leaves nothing. */
    free(group_calls);
    group_calls = NULL;
    group_capacity = 0;
    return result;
}

static curdi_nccl_result post_call(fake_call call);

/* ------------------------------------------------------------------------
 * Capture: the stand-in driver's two entries it needs (real NCCL reaches
 * the driver through the CUDA runtime)
 * ---------------------------------------------------------------------- */
typedef curdi_cu_result (*fake_launch_host_fn)(curdi_cu_stream stream,
                                                void (*fn)(void *),
                                                void *data);
typedef curdi_cu_result (*fake_is_capturing_fn)(curdi_cu_stream stream,
                                                 int *status);
static fake_launch_host_fn launch_host;
static fake_is_capturing_fn is_capturing;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void driver_find(void)
{
    const char *path = getenv("CURD_LIBCUDA");
    void *driver = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (driver == NULL)
        return;
    curdi_cu_result (*proc)(const char *, void **, int, uint64_t) =
        (curdi_cu_result(*)(const char *, void **, int, uint64_t))(uintptr_t)
            dlsym(driver, "cuGetProcAddress");
    void *host = NULL, *query = NULL;
    if (proc != NULL && proc("cuLaunchHostFunc", &host, 11030, 0) == 0 &&
        proc("cuStreamIsCapturing", &query, 11030, 0) == 0 && host != NULL &&
        query != NULL) {
        launch_host = (fake_launch_host_fn)(uintptr_t)host;
        is_capturing = (fake_is_capturing_fn)(uintptr_t)query;
    }
    dlclose(driver); /* curd keeps it loaded */
}

/* Whether the stand-in driver captures stream (the caller's context is
 * current, as for any enqueue). */
static bool capturing(curdi_cu_stream stream)
{
    pthread_once(&driver_once, driver_find);
    int status = 0;
    return stream != NULL && is_capturing != NULL &&
           is_capturing(stream, &status) == 0 && status != 0;
}

/* Whether a rank of the clique is stalled. Lock held. */
static bool clique_stalled(const fake_clique *clique)
{
    for (int r = 0; r < clique->nranks; r++)
        if (stalled(r))
            return true;
    return false;
}

/* A replay: posts the captured call, then waits as a kernel waits for its
 * peers. */
static void replay_run(void *data)
{
    fake_replay *replay = data;
    struct ncclComm *comm = replay->call.comm;
    (void)post_call(replay->call);
    for (;;) {
        pthread_mutex_lock(&lock);
        bool done = comm->completed >= comm->posted ||
                    comm->error != CURDI_NCCL_Success ||
                    clique_stalled(comm->clique);
        pthread_mutex_unlock(&lock);
        if (done)
            return;
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
}

static curdi_nccl_result capture(fake_call call)
{
    struct ncclComm *comm = call.comm;
    if (group_depth > 0)
        return fail(comm, CURDI_NCCL_InvalidUsage,
                    "fake NCCL: a captured call inside a group is not "
                    "modelled");
    fake_replay *replay = calloc(1, sizeof *replay);
    if (replay == NULL)
        return fail(comm, CURDI_NCCL_SystemError,
                    "fake NCCL: out of host memory");
    replay->call = call;
    pthread_mutex_lock(&lock);
    replay->next = comm->replays;
    comm->replays = replay;
    pthread_mutex_unlock(&lock);
    if (launch_host(call.stream, replay_run, replay) != 0)
        return fail(comm, CURDI_NCCL_UnhandledCudaError,
                    "fake NCCL: cuLaunchHostFunc failed in a capture");
    return CURDI_NCCL_Success;
}

static curdi_nccl_result enqueue(fake_call call)
{
    struct ncclComm *comm = call.comm;
    if (comm == NULL)
        return fail(NULL, CURDI_NCCL_InvalidArgument, "comm is NULL");
    pthread_mutex_lock(&lock);
    curdi_nccl_result state = comm->error;
    bool initialised = ready(comm);
    int nranks = initialised ? comm->clique->nranks : 0;
    pthread_mutex_unlock(&lock);
    if (state != CURDI_NCCL_Success)
        return fail(comm, state, "fake NCCL: the communicator is broken");
    if (!initialised)
        return fail(comm, CURDI_NCCL_InvalidUsage,
                    "fake NCCL: the communicator is still initialising");
    if (type_bytes(call.data_type) == 0 || call.op > CURDI_NCCL_Avg ||
        ((call.kind == FAKE_BROADCAST || call.kind == FAKE_REDUCE ||
          is_p2p(call.kind)) &&
         (call.root_or_peer < 0 || call.root_or_peer >= nranks)))
        return fail(comm, CURDI_NCCL_InvalidArgument,
                    "fake NCCL: bad type, operation, root or peer");
    if (capturing(call.stream))
        return capture(call);
    return post_call(call);
}

/* Adds the call to the thread's group, which it ends when there is none. */
static curdi_nccl_result post_call(fake_call call)
{
    struct ncclComm *comm = call.comm;
    if (group_count == group_capacity) {
        size_t capacity = group_capacity != 0 ? group_capacity * 2 : 8;
        fake_call *grown = realloc(group_calls, capacity * sizeof *grown);
        if (grown == NULL)
            return fail(comm, CURDI_NCCL_SystemError,
                        "fake NCCL: out of host memory");
        group_calls = grown;
        group_capacity = capacity;
    }
    group_calls[group_count++] = call;
    if (group_depth > 0)
        return CURDI_NCCL_Success;
    group_depth++; /* a call outside a group is a group of its own */
    return ncclGroupEnd();
}

FAKE_API curdi_nccl_result ncclAllReduce(const void *send, void *recv,
                                         size_t count,
                                         curdi_nccl_data_type data_type,
                                         curdi_nccl_red_op op,
                                         curdi_nccl_comm comm,
                                         curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_ALL_REDUCE, .comm = comm,
                               .send = send, .recv = recv, .count = count,
                               .data_type = data_type, .op = op});
}

FAKE_API curdi_nccl_result ncclBroadcast(const void *send, void *recv,
                                         size_t count,
                                         curdi_nccl_data_type data_type,
                                         int root, curdi_nccl_comm comm,
                                         curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_BROADCAST, .comm = comm,
                               .send = send, .recv = recv, .count = count,
                               .data_type = data_type, .root_or_peer = root});
}

FAKE_API curdi_nccl_result ncclReduce(const void *send, void *recv,
                                      size_t count,
                                      curdi_nccl_data_type data_type,
                                      curdi_nccl_red_op op, int root,
                                      curdi_nccl_comm comm,
                                      curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_REDUCE, .comm = comm,
                               .send = send, .recv = recv, .count = count,
                               .data_type = data_type, .op = op,
                               .root_or_peer = root});
}

FAKE_API curdi_nccl_result ncclAllGather(const void *send, void *recv,
                                         size_t send_count,
                                         curdi_nccl_data_type data_type,
                                         curdi_nccl_comm comm,
                                         curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_ALL_GATHER, .comm = comm,
                               .send = send, .recv = recv,
                               .count = send_count, .data_type = data_type});
}

FAKE_API curdi_nccl_result ncclReduceScatter(const void *send, void *recv,
                                             size_t recv_count,
                                             curdi_nccl_data_type data_type,
                                             curdi_nccl_red_op op,
                                             curdi_nccl_comm comm,
                                             curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_REDUCE_SCATTER, .comm = comm,
                               .send = send, .recv = recv,
                               .count = recv_count, .data_type = data_type,
                               .op = op});
}

FAKE_API curdi_nccl_result ncclSend(const void *send, size_t count,
                                    curdi_nccl_data_type data_type, int peer,
                                    curdi_nccl_comm comm,
                                    curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_SEND, .comm = comm, .send = send,
                               .count = count, .data_type = data_type,
                               .root_or_peer = peer});
}

FAKE_API curdi_nccl_result ncclRecv(void *recv, size_t count,
                                    curdi_nccl_data_type data_type, int peer,
                                    curdi_nccl_comm comm,
                                    curdi_cu_stream stream)
{
    return enqueue((fake_call){.stream = stream, .kind = FAKE_RECV, .comm = comm, .recv = recv,
                               .count = count, .data_type = data_type,
                               .root_or_peer = peer});
}

/* ------------------------------------------------------------------------
 * Messages and counts
 * ---------------------------------------------------------------------- */
FAKE_API const char *ncclGetErrorString(curdi_nccl_result result)
{
    switch (result) {
#define FAKE_RESULT_TEXT_(name, value)                                       \
    case value:                                                              \
        return "fake NCCL: nccl" #name;
        CURDI_NCCL_RESULT_LIST(FAKE_RESULT_TEXT_)
#undef FAKE_RESULT_TEXT_
    default:
        return "fake NCCL: unknown result";
    }
}

FAKE_API const char *ncclGetLastError(curdi_nccl_comm comm)
{
    return comm != NULL ? comm->last_error : thread_error;
}

FAKE_API long fake_nccl_live(void);
FAKE_API long fake_nccl_live(void)
{
    pthread_mutex_lock(&lock);
    long count = live_comms;
    pthread_mutex_unlock(&lock);
    return count;
}

FAKE_API long fake_nccl_groups(int blocking);
FAKE_API long fake_nccl_groups(int blocking)
{
    pthread_mutex_lock(&lock);
    long count = groups_posted[blocking != 0];
    pthread_mutex_unlock(&lock);
    return count;
}

FAKE_API long fake_nccl_abandoned_joins(void);
FAKE_API long fake_nccl_abandoned_joins(void)
{
    pthread_mutex_lock(&lock);
    long count = abandoned_joins;
    pthread_mutex_unlock(&lock);
    return count;
}
