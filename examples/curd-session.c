/*
 * curd-session.c - reuse buffers and cache immutable uploads through a
 * session.
 *
 *   cc -std=c11 curd-session.c $(pkg-config --cflags --libs curd) \
 *       -o curd-session
 *
 * Opens a session on device 0, then, as a pipeline's passes would:
 *  - takes a 64 KiB buffer (curd_session_alloc), uses it, gives it back
 *    (curd_session_release), and takes one of the same size again: the
 *    session hands out the same memory under a new handle, with no
 *    allocation (the old handle is stale from its release);
 *  - uploads a table as a static set (curd_session_upload_static) twice:
 *    the second call finds it cached and uploads nothing;
 * checks the bytes, and prints the session's statistics. Every call is
 * checked; the first failure ends the program.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-session: ";
 * standard output carries only results.
 */
#include <curd.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { WORK_BYTES = 64 * 1024, TABLE_BYTES = 4096 };

static unsigned char table[TABLE_BYTES], back[TABLE_BYTES];

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-session: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* One buffer taken, given back, taken again. */
static int reuse(curd_session *session)
{
    curd_buffer first, second;
    curd_status status = curd_session_alloc(session, WORK_BYTES, &first);
    if (status != CURD_OK)
        return fail("curd_session_alloc", status);
    /* ... a pass would use `first` here ... */
    status = curd_session_release(session, first);
    if (status != CURD_OK)
        return fail("curd_session_release", status);
    status = curd_session_alloc(session, WORK_BYTES, &second);
    if (status != CURD_OK)
        return fail("curd_session_alloc", status);
    status = curd_session_release(session, second);
    if (status != CURD_OK)
        return fail("curd_session_release", status);
    return 0;
}

/* The table uploaded twice: once for real, once found in the cache. */
static int cache(curd_device *device, curd_session *session)
{
    curd_static_payload payload = {table, sizeof table};
    for (int pass = 0; pass < 2; pass++) {
        const curd_static_set *set;
        curd_status status = curd_session_upload_static(
            session, "example/table-v1", &payload, 1, &set);
        if (status != CURD_OK)
            return fail("curd_session_upload_static", status);
        memset(back, 0, sizeof back);
        status = curd_buffer_download_range(device, set->buffers[0], 0,
                                            sizeof back, back, sizeof back);
        /* One release for each upload that succeeded. */
        curd_status released = curd_session_release_static(session, set);
        if (status != CURD_OK)
            return fail("curd_buffer_download_range", status);
        if (released != CURD_OK)
            return fail("curd_session_release_static", released);
        if (memcmp(back, table, sizeof table) != 0) {
            fprintf(stderr, "curd-session: the cached table came back"
                            " wrong\n");
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-session: unexpected argument '%s'; usage:"
                        " curd-session\n",
                argv[1]);
        return 2;
    }
    for (size_t i = 0; i < sizeof table; i++)
        table[i] = (unsigned char)(i * 37u + 11u);

    curd_device *device = NULL;
    curd_session *session = NULL;
    curd_status status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    int result;
    status = curd_session_new(device, NULL, &session);
    if (status != CURD_OK) {
        result = fail("curd_session_new", status);
    } else {
        result = reuse(session);
        if (result == 0)
            result = cache(device, session);
        curd_session_stats stats = CURD_SESSION_STATS_INIT;
        if (result == 0) {
            status = curd_session_stats_get(session, &stats);
            if (status != CURD_OK)
                result = fail("curd_session_stats_get", status);
        }
        if (result == 0)
            printf("reuse: %" PRIu64 " hit, %" PRIu64 " miss; static sets: %"
                   PRIu64 " hit, %" PRIu64 " miss\n",
                   stats.reuse_hits, stats.reuse_misses, stats.static_hits,
                   stats.static_misses);
        /* Frees what the session still holds: the idle buffer, the
         * cached set. */
        status = curd_session_free(session);
        if (status != CURD_OK && result == 0)
            result = fail("curd_session_free", status);
    }
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
    return result;
}
