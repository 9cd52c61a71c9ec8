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

static int run_rank(const char *role)
{
    int rank = 0;
    char kind[16] = "";
    char id_path[1024] = "";
    unsigned long long seed = 0;
    if (sscanf(role, "%d:%15[^:]:%llu:%1023s", &rank, kind, &seed,
               id_path) != 4)
        return 2;
    curd_device *device = NULL;
    curd_status status = curd_device_open(rank, NULL, &device);
    if (status != CURD_OK)
        return rank_fail(rank, "curd_device_open", status);
    curd_comm_id id;
    if (!share_id(rank, id_path, &id))
        return rank_fail(rank, "sharing the id", CURD_E_INVALID_ARGUMENT);
    curd_comm_options options;
    curd_comm_options_init(&options);
    options.timeout_ms = TIMEOUT_MS;
    curd_comm *comm = NULL;
    status = curd_comm_open(device, &id, rank, 2, &options, &comm);
    if (status != CURD_OK)
        return rank_fail(rank, "curd_comm_open", status);

    if (strcmp(kind, "check") == 0) {
        uint32_t *data = g_new(uint32_t, COUNT);
        for (uint32_t i = 0; i < COUNT; i++)
            data[i] = element_of(seed, rank, i);
        curd_buffer buffer;
        status = curd_buffer_alloc(device, COUNT * 4u, &buffer);
        if (status == CURD_OK)
            status = curd_buffer_upload(device, buffer, data, COUNT * 4u);
        curd_collective op = {.comm = comm,
                              .kind = CURD_COLLECTIVE_ALL_REDUCE,
                              .dtype = CURD_DTYPE_UINT32,
                              .op = CURD_REDUCE_SUM,
                              .send = buffer,
                              .recv = buffer,
                              .count = COUNT};
        if (status == CURD_OK)
            status = curd_collective_run(&op, 1);
        if (status == CURD_OK)
            status = curd_buffer_download(device, buffer, data, COUNT * 4u);
        if (status != CURD_OK)
            return rank_fail(rank, "the all-reduce", status);
        for (uint32_t i = 0; i < COUNT; i++)
            if (data[i] != element_of(seed, 0, i) + element_of(seed, 1, i)) {
                fprintf(stderr, "rank %d: element %" PRIu32 " is %" PRIu32
                                ", expected %" PRIu32 "\n",
                        rank, i, data[i],
                        element_of(seed, 0, i) + element_of(seed, 1, i));
                return 1;
            }
        g_free(data);
        (void)curd_buffer_free(device, buffer);
        status = curd_comm_close(comm);
        if (status != CURD_OK)
            return rank_fail(rank, "curd_comm_close", status);
        return curd_device_close(device) == CURD_OK ? 0 : 1;
    }

    /* "kill": rank 1 dies with its part of a large all-reduce in flight;
     * rank 0 calls until one call fails, each within the timeout. */
    curd_buffer buffer;
    status = curd_buffer_alloc(device, LARGE_COUNT * 4u, &buffer);
    if (status == CURD_OK)
        status = curd_buffer_clear(device, buffer);
    if (status != CURD_OK)
        return rank_fail(rank, "the large buffer", status);
    curd_collective op = {.comm = comm,
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_FLOAT32,
                          .op = CURD_REDUCE_SUM,
                          .send = buffer,
                          .recv = buffer,
                          .count = LARGE_COUNT};
    if (rank == 1) {
        curd_pending *pending = NULL;
        status = curd_collective_run_async(&op, 1, &pending);
        kill(getpid(), SIGKILL);
        return rank_fail(rank, "still alive", status);
    }
    for (int call = 0; call < 4; call++) {
        gint64 start = g_get_monotonic_time();
        status = curd_collective_run(&op, 1);
        gint64 waited_ms = (g_get_monotonic_time() - start) / 1000;
        fprintf(stderr, "rank 0: call %d: %s after %" G_GINT64_FORMAT " ms\n",
                call, curd_status_name(status), waited_ms);
        if (waited_ms > (gint64)TIMEOUT_MS + 10000)
            return rank_fail(rank, "a call past its timeout", status);
        if (status == CURD_E_COMM)
            break;
        if (status != CURD_OK)
            return rank_fail(rank, "the all-reduce", status);
    }
    if (status != CURD_E_COMM)
        return rank_fail(rank, "no failure with the peer dead", status);
    /* The device still works, and everything closes. */
    status = curd_buffer_clear(device, buffer);
    if (status == CURD_OK)
        status = curd_buffer_free(device, buffer);
    if (status != CURD_OK)
        return rank_fail(rank, "local work after the failure", status);
    (void)curd_comm_close(comm);
    return curd_device_close(device) == CURD_OK ? 0 : 1;
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

/* Starts both ranks with the environment passed through, plus the role
 * and `extra` (NAME=value strings, NULL-terminated); waits for both. */
static void run_ranks(const char *kind, const char *const *extra,
                      int *exit_statuses)
{
    char *dir = g_dir_make_tmp("curd-comm-procs-XXXXXX", NULL);
    g_assert_nonnull(dir);
    char *id_path = g_build_filename(dir, "id", NULL);
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    guint64 seed = ((guint64)g_test_rand_int() << 32) ^ g_test_rand_int();
    GPid pids[2];
    for (int rank = 0; rank < 2; rank++) {
        char **env = g_get_environ();
        char *role = g_strdup_printf("%d:%s:%" G_GUINT64_FORMAT ":%s", rank,
                                     kind, seed, id_path);
        env = g_environ_setenv(env, ROLE_VARIABLE, role, TRUE);
        for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
            char **pair = g_strsplit(extra[i], "=", 2);
            env = g_environ_setenv(env, pair[0], pair[1], TRUE);
            g_strfreev(pair);
        }
        char *argv[] = {exe, NULL};
        GError *error = NULL;
        g_assert_true(g_spawn_async(NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD,
                                    NULL, NULL, &pids[rank], &error));
        g_strfreev(env);
        g_free(role);
    }
    /* Both within a bound: a rank that hangs fails the test instead of
     * hanging it (curd's own timeouts are far below it). */
    gint64 deadline = g_get_monotonic_time() + 180 * G_USEC_PER_SEC;
    for (int rank = 0; rank < 2; rank++) {
        int status = 0;
        pid_t done;
        while ((done = waitpid(pids[rank], &status, WNOHANG)) == 0 &&
               g_get_monotonic_time() < deadline)
            g_usleep(20000);
        if (done == 0) {
            kill(pids[0], SIGKILL);
            kill(pids[1], SIGKILL);
            g_error("rank %d did not end within 180 s", rank);
        }
        g_assert_cmpint(done, ==, pids[rank]);
        exit_statuses[rank] = status;
        g_spawn_close_pid(pids[rank]);
    }
    g_remove(id_path);
    g_rmdir(dir);
    g_free(id_path);
    g_free(dir);
    g_free(exe);
}

static void assert_both_passed(const int *statuses)
{
    for (int rank = 0; rank < 2; rank++)
        if (!WIFEXITED(statuses[rank]) || WEXITSTATUS(statuses[rank]) != 0)
            g_error("rank %d ended with status 0x%x (its stderr above)", rank,
                    statuses[rank]);
}

static void test_two_processes_all_reduce(void)
{
    if (!two_gpus_and_nccl())
        return;
    int statuses[2];
    run_ranks("check", NULL, statuses);
    assert_both_passed(statuses);
}

static void test_two_processes_over_loopback_sockets(void)
{
    if (!two_gpus_and_nccl())
        return;
    static const char *const network[] = {
        "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_SOCKET_IFNAME=lo",
        NULL};
    int statuses[2];
    run_ranks("check", network, statuses);
    assert_both_passed(statuses);
}

static void test_a_rank_killed_mid_all_reduce(void)
{
    if (!two_gpus_and_nccl())
        return;
    int statuses[2];
    run_ranks("kill", NULL, statuses);
    g_assert_true(WIFSIGNALED(statuses[1]));
    g_assert_cmpint(WTERMSIG(statuses[1]), ==, SIGKILL);
    if (!WIFEXITED(statuses[0]) || WEXITSTATUS(statuses[0]) != 0)
        g_error("the surviving rank ended with status 0x%x (its stderr "
                "above)",
                statuses[0]);
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
    g_test_add_func("/comm-procs/a-rank-killed-mid-all-reduce",
                    test_a_rank_killed_mid_all_reduce);
    return g_test_run();
}
