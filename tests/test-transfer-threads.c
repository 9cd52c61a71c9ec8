/* test-transfer-threads.c - resident buffers and transfers from many threads
 * at once, for ThreadSanitizer (make check-tsan runs tests/test-*thread*).
 *
 * Runs on the stand-in libcuda built beside the program, so it needs no
 * GPU and TSan sees every lock of curd: the resident table, the transfer
 * module (registrations, pending uploads, events), the stream pool, the
 * pools, the copy team splitting large copies between its threads (which
 * poll between jobs here, joined by the threads of growths), and the
 * gather kernels' module, which the threads' first scattered reads load
 * at once.
 * Every byte is checked: each thread owns its buffers and host memory, and
 * a shared buffer is only read. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer-test.h"
#include "transfer/copy_team.h"

enum { THREADS = 6, ROUNDS = 12 };

typedef struct worker {
    curd_device *device;
    curd_buffer shared;
    const unsigned char *shared_bytes;
    size_t shared_len;
    size_t len;
    unsigned char *src;
    unsigned char *dst;
    unsigned index;
    char failure[256];
} worker;

static void worker_fail(worker *w, const char *what, curd_status status)
{
    if (w->failure[0] == '\0')
        g_snprintf(w->failure, sizeof w->failure, "thread %u: %s: %s: %s",
                   w->index, what, curd_status_name(status), curd_last_error());
}

#define WORKER_CALL(w, call)                                                  \
    do {                                                                      \
        curd_status worker_status_ = (call);                                  \
        if (worker_status_ != CURD_OK) {                                      \
            worker_fail((w), #call, worker_status_);                          \
            return NULL;                                                      \
        }                                                                     \
    } while (0)

static gpointer worker_run(gpointer data)
{
    worker *w = data;
    curd_buffer buffer = {0};
    bool registered = w->index % 2 == 0;
    WORKER_CALL(w, curd_buffer_alloc(w->device, w->len, &buffer));
    if (registered)
        WORKER_CALL(w, curd_host_register(w->device, w->src, w->len));
    for (unsigned round = 0; round < ROUNDS; round++) {
        curd_download reads[4];
        curd_download scattered[8];
        size_t quarter = w->shared_len / 4;
        /* Whole round trip, through staging or straight from registered
         * memory, large enough on some threads for the copy team. */
        WORKER_CALL(w, curd_buffer_upload(w->device, buffer, w->src, w->len));
        memset(w->dst, (int)round, w->len);
        WORKER_CALL(w, curd_buffer_download(w->device, buffer, w->dst, w->len));
        if (memcmp(w->dst, w->src, w->len) != 0) {
            worker_fail(w, "round trip compare", CURD_OK);
            return NULL;
        }
        /* Fused reads of the shared buffer, which every thread reads. */
        for (size_t i = 0; i < 4; i++)
            reads[i] = (curd_download){w->shared, i * quarter, quarter,
                                       w->dst + i * quarter, quarter};
        WORKER_CALL(w, curd_download_batch(w->device, reads, 4));
        if (memcmp(w->dst, w->shared_bytes, 4 * quarter) != 0) {
            worker_fail(w, "shared read compare", CURD_OK);
            return NULL;
        }
        /* Scattered reads of it: eight small spans, gathered on the
         * device. */
        for (size_t i = 0; i < 8; i++)
            scattered[i] = (curd_download){w->shared, i * 2000, 1000,
                                           w->dst + i * 1000, 1000};
        WORKER_CALL(w, curd_download_batch(w->device, scattered, 8));
        for (size_t i = 0; i < 8; i++)
            if (memcmp(w->dst + i * 1000, w->shared_bytes + i * 2000, 1000) !=
                0) {
                worker_fail(w, "scattered read compare", CURD_OK);
                return NULL;
            }
        /* An asynchronous upload, a fill ordered after it, a sync. */
        WORKER_CALL(w, curd_buffer_upload_async(w->device, buffer, 0, w->src,
                                                w->len));
        WORKER_CALL(w, curd_buffer_fill(w->device, buffer, 0, 16, 0xEE));
        WORKER_CALL(w, curd_device_sync_uploads(w->device));
    }
    /* Another thread's sync may have completed this thread's last upload,
     * or not yet: free until it is no longer busy. */
    for (;;) {
        curd_status status = curd_buffer_free(w->device, buffer);
        if (status == CURD_OK)
            break;
        if (status != CURD_E_BUSY) {
            worker_fail(w, "curd_buffer_free", status);
            return NULL;
        }
        WORKER_CALL(w, curd_device_sync_uploads(w->device));
    }
    if (registered)
        WORKER_CALL(w, curd_host_unregister(w->device, w->src));
    return NULL;
}

/* The stand-in driver beside the program, when it was built there (make
 * tests builds it; a build of only this program may not have). Without it
 * the device test skips, or fails where CURD_REQUIRE_GPU asks for a GPU. */
static void set_up_fake_driver(void)
{
    char *fake = curd_test_fake_driver_path();
    if (g_file_test(fake, G_FILE_TEST_EXISTS))
        curd_test_require_fake_driver();
    g_free(fake);
}

static void test_transfers_from_many_threads_keep_every_byte(void)
{
    curd_device *device;
    /* The copy threads poll 100 us before they sleep. */
    g_setenv("CURD_COPY_SPIN_US", "100", TRUE);
    device = curd_test_gpu_open();
    g_unsetenv("CURD_COPY_SPIN_US");
    if (device == NULL)
        return;
    worker workers[THREADS];
    GThread *threads[THREADS];
    const size_t shared_len = 4 * 4096;
    unsigned char *shared_bytes = g_malloc(shared_len);
    curd_buffer shared = {0};
    curd_test_fill_random(shared_bytes, shared_len);
    g_assert_cmpint(curd_buffer_alloc(device, shared_len, &shared), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload(device, shared, shared_bytes, shared_len),
                    ==, CURD_OK);
    for (unsigned i = 0; i < THREADS; i++) {
        worker *w = &workers[i];
        memset(w, 0, sizeof *w);
        w->device = device;
        w->shared = shared;
        w->shared_bytes = shared_bytes;
        w->shared_len = shared_len;
        w->index = i;
        w->len = i % 3 == 0 ? (2u << 20) + i : 20000u + 1000u * i;
        w->src = g_malloc(w->len);
        w->dst = g_malloc(w->len > shared_len ? w->len : shared_len);
        curd_test_fill_random(w->src, w->len);
    }
    for (unsigned i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("transfer", worker_run, &workers[i]);
    for (unsigned i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    for (unsigned i = 0; i < THREADS; i++) {
        if (workers[i].failure[0] != '\0')
            g_error("%s", workers[i].failure);
        g_free(workers[i].src);
        g_free(workers[i].dst);
    }
    uint64_t resident = 0;
    g_assert_cmpint(curd_device_resident_bytes(device, &resident), ==, CURD_OK);
    g_assert_cmpuint(resident, ==, shared_len);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
    g_free(shared_bytes);
}

typedef struct team_caller {
    curdi_copy_team *team;
    unsigned char *src;
    unsigned char *dst;
    size_t len;
    int mismatches;
} team_caller;

static gpointer team_caller_run(gpointer data)
{
    team_caller *caller = data;
    curdi_copy_piece pieces[16];
    size_t piece = caller->len / 16;
    for (int round = 0; round < 10; round++) {
        /* Like a long upload, each round tries to add two workers: one
         * caller's growth at a time, ended while the others' jobs run. */
        unsigned added = curdi_copy_team_grow(caller->team, 2);
        memset(caller->dst, round, caller->len);
        for (size_t i = 0; i < 16; i++)
            pieces[i] = (curdi_copy_piece){caller->dst + i * piece,
                                           caller->src + i * piece, piece};
        curdi_copy_team_run(caller->team, pieces, 16, round % 2 == 1);
        /* The copy compared by the team too, as a static set's hit does:
         * equal, then with one byte changed. */
        curdi_compare_piece compares[16];
        for (size_t i = 0; i < 16; i++)
            compares[i] = (curdi_compare_piece){caller->dst + i * piece,
                                                caller->src + i * piece,
                                                piece};
        if (!curdi_copy_team_equal(caller->team, compares, 16))
            caller->mismatches++;
        caller->dst[(size_t)round * piece + 5] ^= 1u;
        if (curdi_copy_team_equal(caller->team, compares, 16))
            caller->mismatches++;
        caller->dst[(size_t)round * piece + 5] ^= 1u;
        curdi_copy_team_shrink(caller->team, added);
        if (memcmp(caller->dst, caller->src, 16 * piece) != 0)
            caller->mismatches++;
    }
    return NULL;
}

static void test_copy_team_shared_by_concurrent_callers(void)
{
    curdi_copy_team *team = NULL;
    team_caller callers[4];
    GThread *threads[4];
    /* The workers poll before they sleep: the hand-over without the lock
     * is what ThreadSanitizer should see. */
    curdi_copy_team_config config = {3, CURDI_COPY_PARALLEL_MIN, 500000};
    g_assert_cmpint(curdi_copy_team_create(&config, &team), ==, CURD_OK);
    for (int i = 0; i < 4; i++) {
        callers[i] = (team_caller){team, g_malloc(2u << 20), g_malloc(2u << 20),
                                   2u << 20, 0};
        curd_test_fill_random(callers[i].src, callers[i].len);
    }
    for (int i = 0; i < 4; i++)
        threads[i] = g_thread_new("copy", team_caller_run, &callers[i]);
    for (int i = 0; i < 4; i++) {
        g_thread_join(threads[i]);
        g_assert_cmpint(callers[i].mismatches, ==, 0);
        g_free(callers[i].src);
        g_free(callers[i].dst);
    }
    curdi_copy_team_destroy(team);
}

int main(int argc, char **argv)
{
    set_up_fake_driver();
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/transfer-threads/transfers-from-many-threads-keep-every-byte",
                    test_transfers_from_many_threads_keep_every_byte);
    g_test_add_func("/transfer-threads/copy-team-shared-by-concurrent-callers",
                    test_copy_team_shared_by_concurrent_callers);
    return g_test_run();
}
