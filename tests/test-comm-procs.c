/* test-comm-procs.c - two processes, one GPU each, joined by an id passed
 * through a file: the code path separate hosts take.
 *
 * The test runs itself twice as the ranks (CURD_COMM_PROCS_ROLE in the
 * environment; everything else passed through unchanged, NCCL_NVLS_ENABLE
 * and the like included): rank 0 makes the id and writes it to a file
 * (written aside and renamed, so rank 1 never reads half of it), rank 1
 * waits for the file. Each rank all-reduces data both can make from a
 * shared seed and checks every element. Then the same with NCCL's
 * network transport forced over loopback (NCCL_P2P_DISABLE=1,
 * NCCL_SHM_DISABLE=1, NCCL_SOCKET_IFNAME=lo). Then rank 1 kills itself
 * right after enqueueing its part of a large all-reduce: rank 0 must get
 * CURD_E_COMM within its timeout, and its device must still work.
 *
 * Skips with fewer than 2 GPUs or without NCCL; there is no stand-in
 * twin (the stand-in NCCL's ranks are threads of one process). */
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/curd-test.h"

#define ROLE_VARIABLE "CURD_COMM_PROCS_ROLE"
#define TIMEOUT_MS 5000u
#define COUNT (1u << 20)          /* elements of the checked all-reduce */
#define LARGE_COUNT (64u << 20)   /* floats of the interrupted one */

/* ------------------------------------------------------------------------
 * A rank (the child processes)
 * ---------------------------------------------------------------------- */
static int rank_fail(int rank, const char *what, curd_status status)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what,
            curd_status_name(status), curd_last_error());
    return 1;
}

/* The id: made and published by rank 0, awaited by rank 1. */
static bool share_id(int rank, const char *path, curd_comm_id *id)
{
    if (rank == 0) {
        if (curd_comm_id_new(id) != CURD_OK)
            return false;
        char *aside = g_strdup_printf("%s.tmp", path);
        bool written = g_file_set_contents(aside, (const char *)id->bytes,
                                           sizeof id->bytes, NULL) &&
                       rename(aside, path) == 0;
        g_free(aside);
        return written;
    }
    for (int tries = 0; tries < 3000; tries++) {
        char *bytes = NULL;
        gsize length = 0;
        if (g_file_get_contents(path, &bytes, &length, NULL)) {
            bool whole = length == sizeof id->bytes;
            if (whole)
                memcpy(id->bytes, bytes, sizeof id->bytes);
            g_free(bytes);
            return whole;
        }
        g_usleep(10000);
    }
    return false;
}

/* Rank r's element i: both ranks can make both ranks' data. */
static uint32_t element_of(uint64_t seed, int rank, uint32_t i)
{
    uint64_t x = seed ^ ((uint64_t)rank << 40) ^ i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* The phases a peer dies in (or stops, for "stopped"), in the order of a
 * communicator's life. */
static const char *const phases[] = {
    "before-join", "first-collective", "steady", "graph-batch", "close",
    "stopped",
};
#define PHASE_COUNT (sizeof phases / sizeof phases[0])

/* An in-place sum all-reduce of count elements of dtype in buffer. */
static curd_collective in_place_sum(curd_comm *comm, curd_buffer buffer,
                                    curd_dtype dtype, uint64_t count)
{
    return (curd_collective){.comm = comm,
                             .kind = CURD_COLLECTIVE_ALL_REDUCE,
                             .dtype = dtype,
                             .op = CURD_REDUCE_SUM,
                             .send = buffer,
                             .recv = buffer,
                             .count = count};
}

/* One checked all-reduce of COUNT uint32 (both ranks' data from the
 * seed): 0 when every element is the sum, else 1 (said on stderr). */
static int checked_all_reduce(int rank, curd_device *device, curd_comm *comm,
                              unsigned long long seed)
{
    uint32_t *data = g_new(uint32_t, COUNT);
    for (uint32_t i = 0; i < COUNT; i++)
        data[i] = element_of(seed, rank, i);
    curd_buffer buffer = {0};
    curd_status status = curd_buffer_alloc(device, COUNT * 4u, &buffer);
    if (status == CURD_OK)
        status = curd_buffer_upload(device, buffer, data, COUNT * 4u);
    curd_collective op =
        in_place_sum(comm, buffer, CURD_DTYPE_UINT32, COUNT);
    if (status == CURD_OK)
        status = curd_collective_run(&op, 1);
    curd_test_poison(data, COUNT * 4u);
    if (status == CURD_OK)
        status = curd_buffer_download(device, buffer, data, COUNT * 4u);
    if (status != CURD_OK)
        return rank_fail(rank, "the checked all-reduce", status);
    int result = 0;
    for (uint32_t i = 0; i < COUNT && result == 0; i++)
        if (data[i] != element_of(seed, 0, i) + element_of(seed, 1, i)) {
            fprintf(stderr, "rank %d: element %" PRIu32 " is %" PRIu32
                            ", expected %" PRIu32 "\n",
                    rank, i, data[i],
                    element_of(seed, 0, i) + element_of(seed, 1, i));
            result = 1;
        }
    g_free(data);
    (void)curd_buffer_free(device, buffer);
    return result;
}

/* Opens rank `rank` of two through the id in path (rank 0 makes it). */
static curd_status open_rank(int rank, curd_device *device, const char *path,
                             curd_comm **comm)
{
    curd_comm_id id;
    if (!share_id(rank, path, &id))
        return rank_fail(rank, "sharing the id", CURD_E_INVALID_ARGUMENT),
               CURD_E_INVALID_ARGUMENT;
    curd_comm_options options;
    curd_comm_options_init(&options);
    options.timeout_ms = TIMEOUT_MS;
    options.open_timeout_ms = TIMEOUT_MS;
    return curd_comm_open(device, &id, rank, 2, &options, comm);
}

/* A graph batch of one all-reduce of the buffer into itself. */
static curd_status graph_batch(curd_device *device, curd_comm *comm,
                               curd_buffer buffer, curd_batch **out)
{
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = CURD_BATCH_GRAPH;
    curd_status status = curd_batch_new(device, &options, out);
    curd_collective op =
        in_place_sum(comm, buffer, CURD_DTYPE_FLOAT32, LARGE_COUNT);
    if (status == CURD_OK)
        status = curd_batch_collective(*out, &op);
    return status;
}

/* The dying rank: does its part up to the phase, then dies (SIGKILL) or
 * stops (SIGSTOP; the parent kills it later). */
static int die_in(int rank, const char *phase, curd_device *device,
                  const char *id_path, unsigned long long seed)
{
    int sig = strcmp(phase, "stopped") == 0 ? SIGSTOP : SIGKILL;
    if (strcmp(phase, "before-join") == 0)
        kill(getpid(), SIGKILL);
    curd_comm *comm = NULL;
    curd_status status = open_rank(rank, device, id_path, &comm);
    if (status != CURD_OK)
        return rank_fail(rank, "curd_comm_open", status);
    if (strcmp(phase, "first-collective") != 0 &&
        checked_all_reduce(rank, device, comm, seed) != 0)
        return 1;
    curd_buffer buffer;
    status = curd_buffer_alloc(device, LARGE_COUNT * 4u, &buffer);
    if (status == CURD_OK)
        status = curd_buffer_clear(device, buffer);
    if (status != CURD_OK)
        return rank_fail(rank, "the large buffer", status);
    if (strcmp(phase, "graph-batch") == 0) {
        curd_batch *batch = NULL;
        status = graph_batch(device, comm, buffer, &batch);
        for (int run = 0; run < 2 && status == CURD_OK; run++)
            status = curd_batch_run(batch, NULL);
        if (status != CURD_OK)
            return rank_fail(rank, "the graph batch", status);
    }
    if (strcmp(phase, "close") != 0) {
        /* Its part of a large all-reduce in flight, then gone. */
        curd_collective op =
            in_place_sum(comm, buffer, CURD_DTYPE_FLOAT32, LARGE_COUNT);
        curd_pending *pending = NULL;
        (void)curd_collective_run_async(&op, 1, &pending);
    }
    kill(getpid(), sig);
    /* A stopped rank that the parent resumed by mistake ends here. */
    pause();
    return 1;
}

/* What the survivor does in the phase until its call fails: the call
 * that must be CURD_E_COMM, and how long it took. */
static curd_status survive(int rank, const char *phase, curd_device *device,
                           const char *id_path, unsigned long long seed,
                           gint64 *waited_ms)
{
    curd_comm *comm = NULL;
    gint64 start = g_get_monotonic_time();
    curd_status status = open_rank(rank, device, id_path, &comm);
    *waited_ms = (g_get_monotonic_time() - start) / 1000;
    if (strcmp(phase, "before-join") == 0)
        return status == CURD_OK ? (curd_comm_close(comm), CURD_OK) : status;
    if (status != CURD_OK)
        return rank_fail(rank, "curd_comm_open", status), status;
    if (strcmp(phase, "first-collective") != 0 &&
        checked_all_reduce(rank, device, comm, seed) != 0)
        return CURD_E_INVALID_ARGUMENT;
    curd_buffer buffer;
    status = curd_buffer_alloc(device, LARGE_COUNT * 4u, &buffer);
    if (status == CURD_OK)
        status = curd_buffer_clear(device, buffer);
    if (status != CURD_OK)
        return rank_fail(rank, "the large buffer", status), status;
    curd_batch *batch = NULL;
    if (strcmp(phase, "graph-batch") == 0) {
        status = graph_batch(device, comm, buffer, &batch);
        for (int run = 0; run < 2 && status == CURD_OK; run++)
            status = curd_batch_run(batch, NULL);
        if (status != CURD_OK)
            return rank_fail(rank, "the graph batch", status), status;
    }
    curd_collective op =
        in_place_sum(comm, buffer, CURD_DTYPE_FLOAT32, LARGE_COUNT);
    /* The peer is gone (or going): each call within its timeout, until
     * one fails. A close may also end well: the peer owes it nothing. */
    status = CURD_OK;
    for (int call = 0; call < 4 && status == CURD_OK; call++) {
        start = g_get_monotonic_time();
        if (strcmp(phase, "close") == 0) {
            g_usleep(500000); /* the peer dies first */
            status = curd_comm_close(comm);
            comm = NULL;
        } else if (batch != NULL) {
            status = curd_batch_run(batch, NULL);
        } else {
            status = curd_collective_run(&op, 1);
        }
        *waited_ms = (g_get_monotonic_time() - start) / 1000;
        fprintf(stderr, "rank %d (%s): call %d: %s after %" G_GINT64_FORMAT
                        " ms\n",
                rank, phase, call, curd_status_name(status), *waited_ms);
        if (comm == NULL)
            break;
    }
    if (batch != NULL)
        (void)curd_batch_free(batch);
    /* The device still works. */
    curd_status local = curd_buffer_clear(device, buffer);
    if (local == CURD_OK)
        local = curd_buffer_free(device, buffer);
    if (local != CURD_OK)
        return rank_fail(rank, "local work after the failure", local), local;
    if (comm != NULL)
        (void)curd_comm_close(comm);
    return strcmp(phase, "close") == 0 && status == CURD_OK ? CURD_E_COMM
                                                              : status;
}

static int run_rank(const char *role)
{
    int rank = 0;
    char kind[32] = "";
    char dir[1024] = "";
    unsigned long long seed = 0;
    if (sscanf(role, "%d:%31[^:]:%llu:%1023s", &rank, kind, &seed, dir) != 4)
        return 2;
    char *id_path = g_build_filename(dir, "id", NULL);
    char *second_id = g_build_filename(dir, "id-after", NULL);
    curd_device *device = NULL;
    curd_status status = curd_device_open(rank, NULL, &device);
    if (status != CURD_OK)
        return rank_fail(rank, "curd_device_open", status);
    int result = 0;
    if (strcmp(kind, "check") == 0 || strcmp(kind, "replacement") == 0) {
        /* Both ranks check one all-reduce; the replacement joins the
         * survivor's second communicator. */
        curd_comm *comm = NULL;
        status = open_rank(rank, device,
                           kind[0] == 'c' ? id_path : second_id, &comm);
        if (status != CURD_OK)
            return rank_fail(rank, "curd_comm_open", status);
        result = checked_all_reduce(rank, device, comm, seed);
        status = curd_comm_close(comm);
        if (result == 0 && status != CURD_OK)
            result = rank_fail(rank, "curd_comm_close", status);
    } else if (strncmp(kind, "die-", 4) == 0) {
        result = die_in(rank, kind + 4, device, id_path, seed);
    } else if (strncmp(kind, "survive-", 8) == 0) {
        const char *phase = kind + 8;
        gint64 waited_ms = 0;
        status = survive(rank, phase, device, id_path, seed, &waited_ms);
        if (status != CURD_E_COMM)
            result = rank_fail(rank, "no CURD_E_COMM with the peer gone",
                               status);
        else if (waited_ms > (gint64)TIMEOUT_MS + 1000)
            result = rank_fail(rank, "CURD_E_COMM past the timeout + 1 s",
                               status);
        /* A new communicator with a new peer process, checked. */
        curd_comm *comm = NULL;
        if (result == 0 &&
            (status = open_rank(rank, device, second_id, &comm)) != CURD_OK)
            result = rank_fail(rank, "curd_comm_open after the failure",
                               status);
        if (result == 0)
            result = checked_all_reduce(rank, device, comm, seed);
        if (comm != NULL && (status = curd_comm_close(comm)) != CURD_OK &&
            result == 0)
            result = rank_fail(rank, "curd_comm_close", status);
    } else {
        result = 2;
    }
    if (curd_device_close(device) != CURD_OK && result == 0)
        result = 1;
    g_free(id_path);
    g_free(second_id);
    return result;
}

/* ------------------------------------------------------------------------
 * The test (the parent process)
 * ---------------------------------------------------------------------- */
static bool two_gpus_and_nccl(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return false;
    curd_comm_id id;
    bool ready = curd_test_have_gpus(2);
    if (ready && curd_comm_id_new(&id) != CURD_OK) {
        g_test_skip_printf("no NCCL: %s", curd_last_error());
        ready = false;
    }
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    return ready;
}

/* The ranks' shared folder (ids) and seed, and the processes started. */
typedef struct job {
    char *dir;
    guint64 seed;
    const char *const *extra; /* NAME=value strings, NULL-terminated */
    GPid pids[3];
    int count;
} job;

static void job_init(job *j, const char *const *extra)
{
    memset(j, 0, sizeof *j);
    j->dir = g_dir_make_tmp("curd-comm-procs-XXXXXX", NULL);
    g_assert_nonnull(j->dir);
    j->seed = ((guint64)g_test_rand_int() << 32) ^ g_test_rand_int();
    j->extra = extra;
}

/* Starts this program as rank `rank` of `kind`, with the environment
 * passed through unchanged (NCCL_NVLS_ENABLE and the like) plus the role
 * and the job's extra variables. */
static void job_spawn(job *j, int rank, const char *kind)
{
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    char **env = g_get_environ();
    char *role = g_strdup_printf("%d:%s:%" G_GUINT64_FORMAT ":%s", rank,
                                 kind, j->seed, j->dir);
    env = g_environ_setenv(env, ROLE_VARIABLE, role, TRUE);
    for (size_t i = 0; j->extra != NULL && j->extra[i] != NULL; i++) {
        char **pair = g_strsplit(j->extra[i], "=", 2);
        env = g_environ_setenv(env, pair[0], pair[1], TRUE);
        g_strfreev(pair);
    }
    char *argv[] = {exe, NULL};
    GError *error = NULL;
    g_assert_true(g_spawn_async(NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD,
                                NULL, NULL, &j->pids[j->count++], &error));
    g_strfreev(env);
    g_free(role);
    g_free(exe);
}

/* Waits for process `index` within the bound (a process that hangs fails
 * the test instead of hanging it: curd's own timeouts are far below it);
 * its wait status. */
static int job_wait(job *j, int index)
{
    gint64 deadline = g_get_monotonic_time() + 180 * G_USEC_PER_SEC;
    int status = 0;
    pid_t done;
    while ((done = waitpid(j->pids[index], &status, WNOHANG)) == 0 &&
           g_get_monotonic_time() < deadline)
        g_usleep(20000);
    if (done == 0) {
        for (int other = 0; other < j->count; other++)
            kill(j->pids[other], SIGKILL);
        g_error("process %d did not end within 180 s", index);
    }
    g_assert_cmpint(done, ==, j->pids[index]);
    g_spawn_close_pid(j->pids[index]);
    return status;
}

static void job_end(job *j)
{
    GDir *dir = g_dir_open(j->dir, 0, NULL);
    const char *name;
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
        char *path = g_build_filename(j->dir, name, NULL);
        g_remove(path);
        g_free(path);
    }
    if (dir != NULL)
        g_dir_close(dir);
    g_rmdir(j->dir);
    g_free(j->dir);
}

static void assert_passed(int status, const char *who)
{
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        g_error("%s ended with status 0x%x (its stderr above)", who, status);
}

/* Both ranks check one all-reduce. */
static void run_check(const char *const *extra)
{
    if (!two_gpus_and_nccl())
        return;
    job j;
    job_init(&j, extra);
    job_spawn(&j, 0, "check");
    job_spawn(&j, 1, "check");
    assert_passed(job_wait(&j, 0), "rank 0");
    assert_passed(job_wait(&j, 1), "rank 1");
    job_end(&j);
}

static const char *const loopback[] = {
    "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_SOCKET_IFNAME=lo",
    NULL};

static void test_two_processes_all_reduce(void)
{
    run_check(NULL);
}

static void test_two_processes_over_loopback_sockets(void)
{
    run_check(loopback);
}

/* A peer that dies (or stops) in one phase: the survivor gets
 * CURD_E_COMM within the timeout plus one second, works on its device,
 * then opens a new communicator with a new peer process and all-reduces
 * correctly. data: the phase's index, plus PHASE_COUNT over loopback. */
static void test_a_peer_lost(gconstpointer data)
{
    if (!two_gpus_and_nccl())
        return;
    size_t index = (size_t)GPOINTER_TO_UINT(data);
    const char *phase = phases[index % PHASE_COUNT];
    job j;
    job_init(&j, index >= PHASE_COUNT ? loopback : NULL);
    char *survivor = g_strdup_printf("survive-%s", phase);
    char *dying = g_strdup_printf("die-%s", phase);
    job_spawn(&j, 0, survivor);
    job_spawn(&j, 1, dying);
    job_spawn(&j, 1, "replacement");
    assert_passed(job_wait(&j, 0), "the surviving rank 0");
    assert_passed(job_wait(&j, 2), "the replacement rank 1");
    if (strcmp(phase, "stopped") == 0)
        kill(j.pids[1], SIGKILL);
    int status = job_wait(&j, 1);
    g_assert_true(WIFSIGNALED(status));
    g_assert_cmpint(WTERMSIG(status), ==, SIGKILL);
    job_end(&j);
    g_free(survivor);
    g_free(dying);
}

int main(int argc, char **argv)
{
    const char *role = getenv(ROLE_VARIABLE);
    if (role != NULL)
        return run_rank(role);
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/comm-procs/two-processes-all-reduce",
                    test_two_processes_all_reduce);
    g_test_add_func("/comm-procs/two-processes-over-loopback-sockets",
                    test_two_processes_over_loopback_sockets);
    for (size_t index = 0; index < 2 * PHASE_COUNT; index++) {
        char *path = g_strdup_printf(
            "/comm-procs/a-peer-lost/%s%s", phases[index % PHASE_COUNT],
            index >= PHASE_COUNT ? "-over-loopback-sockets" : "");
        g_test_add_data_func(path, GUINT_TO_POINTER((guint)index),
                             test_a_peer_lost);
        g_free(path);
    }
    return g_test_run();
}
