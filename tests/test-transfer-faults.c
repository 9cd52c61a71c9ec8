/* test-transfer-faults.c - every driver call of a transfer fails in turn.
 *
 * With the driver table wrapped (curd_test_faults_begin), call 1, then
 * call 2, ... of one operation returns CUDA_ERROR_UNKNOWN, until a run
 * makes fewer calls than the armed number. After each run, either the call
 * succeeded (a failure the library may ignore, such as popping the
 * context) and did all of its work, or it failed and:
 *  - every counter of curd_device_stats and the live levels of both pools
 *    are as they were (nothing counted, nothing leaked);
 *  - buffers the operation does not name hold their bytes;
 *  - the caller's sources are untouched, and the caller's destinations
 *    are untouched outside the ranges named (and, for a batch that fits
 *    one staging chunk, untouched entirely: its bytes are copied out only
 *    after the fence).
 * The batches run both ways the engine moves scattered ranges: a DMA per
 * span, and the gather and scatter kernels (forced by CURD_TRANSFER_PATH
 * when the fixture's device opens), whose module load is swept on a fresh
 * device of its own.
 * Needs a GPU (or the stand-in driver); skips with the reason otherwise. */
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/fence.h"
#include "support/curd-test.h"
#include "transfer-test.h"

#define CU_ERROR_UNKNOWN 999
#define SMALL 4096u
#define LARGE ((3u << 20) + 77u)

typedef struct fixture {
    curd_device *device;
    curd_buffer a, b, bystander;
    size_t a_len, b_len, bystander_len;
    unsigned char *a_model, *b_model, *bystander_model;
    unsigned char *host;   /* caller sources or destinations */
    unsigned char *host_copy;
    size_t host_len;
    bool registered;       /* host[0, host_len/2) is registered */
} fixture;

/* path: CURD_TRANSFER_PATH while the device opens (NULL: the default). */
static bool fixture_open_on(fixture *f, size_t a_len, size_t b_len,
                            bool register_half, const char *path)
{
    memset(f, 0, sizeof *f);
    f->device = transfer_test_open_with("CURD_TRANSFER_PATH", path);
    if (f->device == NULL)
        return false;
    f->a_len = a_len;
    f->b_len = b_len;
    f->bystander_len = 100000;
    g_assert_cmpint(curd_buffer_alloc(f->device, a_len, &f->a), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_alloc(f->device, b_len, &f->b), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_alloc(f->device, f->bystander_len,
                                      &f->bystander),
                    ==, CURD_OK);
    f->a_model = g_malloc(a_len);
    f->b_model = g_malloc(b_len);
    f->bystander_model = g_malloc(f->bystander_len);
    curd_test_fill_random(f->bystander_model, f->bystander_len);
    g_assert_cmpint(curd_buffer_upload(f->device, f->bystander,
                                       f->bystander_model, f->bystander_len),
                    ==, CURD_OK);
    f->host_len = 2 * (a_len + b_len);
    f->host = g_malloc(f->host_len);
    f->host_copy = g_malloc(f->host_len);
    if (register_half) {
        curd_device_props props;
        memset(&props, 0, sizeof props);
        props.struct_size = sizeof props;
        g_assert_cmpint(curd_device_info(f->device, &props), ==, CURD_OK);
        if (props.capabilities & CURD_CAP_HOST_REGISTER) {
            g_assert_cmpint(curd_host_register(f->device, f->host,
                                               f->host_len / 2),
                            ==, CURD_OK);
            f->registered = true;
        }
    }
    return true;
}

static bool fixture_open(fixture *f, size_t a_len, size_t b_len,
                         bool register_half)
{
    return fixture_open_on(f, a_len, b_len, register_half, NULL);
}

static void fixture_close(fixture *f)
{
    if (f->registered)
        g_assert_cmpint(curd_host_unregister(f->device, f->host), ==, CURD_OK);
    g_assert_cmpint(curd_device_close(f->device), ==, CURD_OK);
    g_free(f->a_model);
    g_free(f->b_model);
    g_free(f->bystander_model);
    g_free(f->host);
    g_free(f->host_copy);
}

/* Fresh random contents in a and b, and in the caller's memory. */
static void fixture_reset(fixture *f)
{
    curd_test_fill_random(f->a_model, f->a_len);
    curd_test_fill_random(f->b_model, f->b_len);
    g_assert_cmpint(curd_buffer_upload(f->device, f->a, f->a_model, f->a_len),
                    ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload(f->device, f->b, f->b_model, f->b_len),
                    ==, CURD_OK);
    curd_test_fill_random(f->host, f->host_len);
    memcpy(f->host_copy, f->host, f->host_len);
}

static void assert_buffer_is(fixture *f, curd_buffer buffer, size_t len,
                             const unsigned char *model)
{
    assert_buffer_holds(f->device, buffer, model, len);
}

/* Runs op with call number 1, 2, ... failing, until one run makes fewer
 * calls. check(f, status, context) judges each run; returns the number of
 * runs that failed. */
typedef curd_status (*fault_op)(fixture *f, void *context);
typedef void (*fault_check)(fixture *f, curd_status status,
                            const transfer_test_snapshot *before,
                            void *context);

static unsigned sweep(fixture *f, fault_op op, fault_check check,
                      void *context)
{
    unsigned failed_runs = 0;
    for (unsigned fail_at = 1;; fail_at++) {
        transfer_test_snapshot before;
        curd_status status;
        gboolean fired;
        fixture_reset(f);
        before = transfer_test_take(f->device);
        curd_test_faults_begin(fail_at, CU_ERROR_UNKNOWN, NULL);
        status = op(f, context);
        fired = curd_test_faults_fired();
        (void)curd_test_faults_end();
        if (status != CURD_OK) {
            g_assert_true(fired);
            g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
            failed_runs++;
        }
        check(f, status, &before, context);
        /* The bystander never changes, whatever happened. */
        assert_buffer_is(f, f->bystander, f->bystander_len,
                         f->bystander_model);
        if (!fired) {
            g_assert_cmpint(status, ==, CURD_OK);
            g_test_message("%u driver calls failed in turn", fail_at - 1);
            g_assert_cmpuint(fail_at, >, 1);
            break;
        }
        g_assert_cmpuint(fail_at, <, 1000);
    }
    return failed_runs;
}

/* ------------------------------------------------------------------------
 * Upload batches
 * ---------------------------------------------------------------------- */

typedef struct batch_layout {
    size_t count;
    size_t buffer[8]; /* 0: a, 1: b */
    size_t offset[8];
    size_t len[8];
    size_t host_at[8]; /* into f->host */
} batch_layout;

static curd_buffer layout_buffer(const fixture *f, const batch_layout *l,
                                 size_t i)
{
    return l->buffer[i] == 0 ? f->a : f->b;
}

static unsigned char *layout_model(const fixture *f, const batch_layout *l,
                                   size_t i)
{
    return l->buffer[i] == 0 ? f->a_model : f->b_model;
}

static curd_status upload_op(fixture *f, void *context)
{
    const batch_layout *l = context;
    curd_upload items[8];
    for (size_t i = 0; i < l->count; i++)
        items[i] = (curd_upload){layout_buffer(f, l, i), l->offset[i],
                                 f->host + l->host_at[i], l->len[i]};
    return curd_upload_batch(f->device, items, l->count);
}

static void upload_check(fixture *f, curd_status status,
                         const transfer_test_snapshot *before, void *context)
{
    const batch_layout *l = context;
    transfer_test_snapshot after = transfer_test_take(f->device);
    /* Sources are never written. */
    assert_same_bytes(f->host, f->host_copy, f->host_len);
    if (status == CURD_OK) {
        for (size_t i = 0; i < l->count; i++)
            memcpy(layout_model(f, l, i) + l->offset[i],
                   f->host + l->host_at[i], l->len[i]);
        assert_buffer_is(f, f->a, f->a_len, f->a_model);
        assert_buffer_is(f, f->b, f->b_len, f->b_model);
        g_assert_cmpuint(after.fences - before->fences, ==, 1);
        g_assert_cmpuint(after.pinned_live_bytes, ==, before->pinned_live_bytes);
        return;
    }
    assert_snapshot_equal(after, *before);
    /* a and b may hold some of the new bytes, inside the named ranges
     * only. */
    unsigned char *a = transfer_test_contents(f->device, f->a, f->a_len);
    unsigned char *b = transfer_test_contents(f->device, f->b, f->b_len);
    for (size_t i = 0; i < l->count; i++) {
        unsigned char *contents = l->buffer[i] == 0 ? a : b;
        memcpy(contents + l->offset[i], layout_model(f, l, i) + l->offset[i],
               l->len[i]);
    }
    assert_same_bytes(a, f->a_model, f->a_len);
    assert_same_bytes(b, f->b_model, f->b_len);
    g_free(a);
    g_free(b);
}

static void test_each_failing_call_of_a_small_upload_batch(void)
{
    fixture f;
    if (!fixture_open(&f, SMALL, SMALL, false))
        return;
    /* Two adjacent pieces of a (one fused DMA), one of b, an empty one. */
    batch_layout l = {4, {0, 0, 1, 1}, {0, 1000, 17, 50}, {1000, 2000, 3000, 0},
                      {0, 1000, 3000, 6000}};
    unsigned failed = sweep(&f, upload_op, upload_check, &l);
    g_assert_cmpuint(failed, >=, 3);
    fixture_close(&f);
}

static void test_each_failing_call_of_a_pipelined_and_direct_upload_batch(void)
{
    fixture f;
    if (!fixture_open(&f, LARGE, SMALL, true))
        return;
    /* A large item through the pipelined staging (several chunks, events,
     * the copy team) and, when registration works, one straight from
     * registered memory. */
    batch_layout l = {2, {0, 1}, {0, 0}, {LARGE, SMALL}, {f.host_len / 2, 0}};
    unsigned failed = sweep(&f, upload_op, upload_check, &l);
    g_assert_cmpuint(failed, >=, 5);
    fixture_close(&f);
}

/* ------------------------------------------------------------------------
 * Download batches
 * ---------------------------------------------------------------------- */

typedef struct download_context {
    batch_layout layout;
    bool untouched_on_failure; /* one staging chunk, nothing direct */
} download_context;

static curd_status download_op(fixture *f, void *context)
{
    const batch_layout *l = &((download_context *)context)->layout;
    curd_download items[8];
    for (size_t i = 0; i < l->count; i++)
        items[i] = (curd_download){layout_buffer(f, l, i), l->offset[i],
                                   l->len[i], f->host + l->host_at[i],
                                   l->len[i]};
    return curd_download_batch(f->device, items, l->count);
}

static void download_check(fixture *f, curd_status status,
                           const transfer_test_snapshot *before, void *context)
{
    const download_context *d = context;
    const batch_layout *l = &d->layout;
    transfer_test_snapshot after = transfer_test_take(f->device);
    unsigned char *expected = g_memdup2(f->host_copy, f->host_len);
    /* Downloads never write a device buffer. */
    assert_buffer_is(f, f->a, f->a_len, f->a_model);
    assert_buffer_is(f, f->b, f->b_len, f->b_model);
    for (size_t i = 0; i < l->count; i++)
        memcpy(expected + l->host_at[i], layout_model(f, l, i) + l->offset[i],
               l->len[i]);
    if (status == CURD_OK) {
        assert_same_bytes(f->host, expected, f->host_len);
        g_assert_cmpuint(after.fences - before->fences, ==, 1);
        g_assert_cmpuint(after.pinned_live_bytes, ==, before->pinned_live_bytes);
        g_free(expected);
        return;
    }
    assert_snapshot_equal(after, *before);
    if (d->untouched_on_failure) {
        assert_same_bytes(f->host, f->host_copy, f->host_len);
    } else {
        /* Inside the named ranges anything may have arrived; outside,
         * nothing. */
        for (size_t i = 0; i < l->count; i++)
            memcpy(expected + l->host_at[i], f->host + l->host_at[i],
                   l->len[i]);
        assert_same_bytes(f->host, expected, f->host_len);
    }
    g_free(expected);
}

static void test_each_failing_call_of_a_small_download_batch(void)
{
    fixture f;
    if (!fixture_open(&f, SMALL, SMALL, false))
        return;
    download_context d = {{4, {0, 0, 1, 0}, {0, 1000, 17, 4096},
                           {1000, 2000, 3000, 0}, {10, 1010, 5000, 9000}},
                          true};
    unsigned failed = sweep(&f, download_op, download_check, &d);
    g_assert_cmpuint(failed, >=, 3);
    fixture_close(&f);
}

static void test_each_failing_call_of_a_pipelined_and_direct_download_batch(void)
{
    fixture f;
    if (!fixture_open(&f, LARGE, SMALL, true))
        return;
    download_context d = {{2, {0, 1}, {0, 0}, {LARGE, SMALL},
                           {f.host_len / 2, 100}},
                          false};
    unsigned failed = sweep(&f, download_op, download_check, &d);
    g_assert_cmpuint(failed, >=, 5);
    fixture_close(&f);
}

/* ------------------------------------------------------------------------
 * Gathered batches: the kernels, one launch per chunk
 * ---------------------------------------------------------------------- */

/* Scattered pieces of a and b, two overlapping (the later wins) and one
 * empty: five spans; sources and destinations apart in the caller's
 * memory. */
static const batch_layout scattered_layout = {
    7, {0, 0, 1, 0, 1, 0, 1}, {0, 1500, 17, 3000, 2000, 1600, 0},
    {1000, 300, 900, 96, 1000, 500, 0}, {0, 1100, 1500, 2500, 2700, 3800, 0}};

/* Loads the kernels before a sweep (the fixture's own whole-buffer
 * transfers, gathered too, have loaded them already), so that it fails
 * the calls every gathered transfer makes; the load's own are swept
 * below. */
static void warm_the_kernels(fixture *f)
{
    download_context d = {scattered_layout, true};
    fixture_reset(f);
    g_assert_cmpint(download_op(f, &d), ==, CURD_OK);
}

static void test_each_failing_call_of_a_gathered_batch(void)
{
    fixture f;
    batch_layout l = scattered_layout;
    /* One chunk: a download's bytes reach the caller only after the
     * fence. */
    download_context d = {scattered_layout, true};
    if (!fixture_open_on(&f, SMALL, SMALL, false, "gather"))
        return;
    warm_the_kernels(&f);
    g_assert_cmpuint(sweep(&f, upload_op, upload_check, &l), >=, 3);
    g_assert_cmpuint(sweep(&f, download_op, download_check, &d), >=, 3);
    fixture_close(&f);
}

static void test_each_failing_call_of_a_pipelined_gathered_batch(void)
{
    fixture f;
    /* Several chunks (slots, events, the copy team) through the kernels,
     * a span cut at every chunk boundary. */
    batch_layout l = {3, {0, 1, 0}, {5, 100, LARGE - 1000},
                      {LARGE - 3000, 2000, 1000}, {0, LARGE, LARGE + 2000}};
    download_context d = {l, false};
    if (!fixture_open_on(&f, LARGE, SMALL, false, "gather"))
        return;
    warm_the_kernels(&f);
    g_assert_cmpuint(sweep(&f, upload_op, upload_check, &l), >=, 6);
    g_assert_cmpuint(sweep(&f, download_op, download_check, &d), >=, 6);
    fixture_close(&f);
}

static void test_each_failing_call_of_a_gather_straight_to_registered_memory(void)
{
    fixture f;
    /* Pieces of a read into the registered half, laid out as the stream:
     * one launch straight between it and the buffer. */
    download_context d = {{3, {0, 0, 0}, {0, 2000, 3100},
                           {1000, 1000, 900}, {0, 1000, 2000}},
                          false};
    if (!fixture_open_on(&f, SMALL, SMALL, true, "gather"))
        return;
    if (!f.registered) {
        g_test_skip("the driver cannot register host memory");
        fixture_close(&f);
        return;
    }
    warm_the_kernels(&f);
    g_assert_cmpuint(sweep(&f, download_op, download_check, &d), >=, 3);
    g_assert_cmpuint(sweep(&f, upload_op, upload_check, &d.layout), >=, 3);
    fixture_close(&f);
}

/* The module's load, each of its driver calls failing in turn on a device
 * of its own: the batch fails whole (nothing counted, nothing moved), and
 * the next one loads the kernels and succeeds. The planner's own choice
 * gathers the scattered batch (five small spans, with the crossover set at
 * two) while the fixture's whole-buffer transfers, one span each, leave
 * the module unloaded. */
static void test_each_failing_call_of_the_kernels_first_load(void)
{
    static const char *const entries[] = {"cuModuleLoadDataEx",
                                          "cuModuleGetFunction"};
    g_setenv("CURD_GATHER_MIN_SPANS", "2", TRUE);
    for (size_t e = 0; e < G_N_ELEMENTS(entries); e++) {
        for (unsigned fail_at = 1;; fail_at++) {
            fixture f;
            download_context d = {scattered_layout, true};
            transfer_test_snapshot before;
            curd_status status;
            gboolean fired;
            if (!fixture_open(&f, SMALL, SMALL, false))
                return;
            fixture_reset(&f);
            before = transfer_test_take(f.device);
            curd_test_faults_begin(fail_at, CU_ERROR_UNKNOWN, entries[e]);
            status = download_op(&f, &d);
            fired = curd_test_faults_fired();
            (void)curd_test_faults_end();
            download_check(&f, status, &before, &d);
            if (fired) {
                g_assert_cmpint(status, !=, CURD_OK);
                g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
                fixture_reset(&f);
                before = transfer_test_take(f.device);
                download_check(&f, download_op(&f, &d), &before, &d);
            }
            fixture_close(&f);
            if (!fired) {
                g_assert_cmpint(status, ==, CURD_OK);
                g_assert_cmpuint(fail_at, >, 1);
                break;
            }
        }
    }
    g_unsetenv("CURD_GATHER_MIN_SPANS");
}

/* A driver that cannot JIT the kernels' PTX: the batch the planner
 * would gather (the crossover set at two spans) still succeeds, one DMA
 * per span, and the device never tries the load again. */
static void test_a_driver_that_cannot_jit_the_kernels_leaves_dmas(void)
{
    enum { CU_ERROR_INVALID_PTX = 218 };
    fixture f;
    download_context d = {scattered_layout, true};
    transfer_test_snapshot before, after;
    g_setenv("CURD_GATHER_MIN_SPANS", "2", TRUE);
    bool opened = fixture_open(&f, SMALL, SMALL, false);
    g_unsetenv("CURD_GATHER_MIN_SPANS");
    if (!opened)
        return;
    for (int run = 0; run < 2; run++) {
        fixture_reset(&f);
        before = transfer_test_take(f.device);
        /* The first load fails as a driver without a JIT fails it; the
         * second run counts the loads it tries: none. */
        curd_test_faults_begin(run == 0 ? 1 : 0, CU_ERROR_INVALID_PTX,
                               "cuModuleLoadDataEx");
        g_assert_cmpint(download_op(&f, &d), ==, CURD_OK);
        g_assert_cmpuint(curd_test_faults_end(), ==, run == 0 ? 1 : 0);
        after = transfer_test_take(f.device);
        download_check(&f, CURD_OK, &before, &d);
        /* Five spans (two of the pieces of a overlap), one DMA each. */
        g_assert_cmpuint(after.copy_ops - before.copy_ops, ==, 5);
    }
    fixture_close(&f);
}

/* ------------------------------------------------------------------------
 * Fills, allocations, asynchronous uploads
 * ---------------------------------------------------------------------- */

static curd_status fill_op(fixture *f, void *context)
{
    (void)context;
    return curd_buffer_fill(f->device, f->a, 100, 2000, 0xA5);
}

static void fill_check(fixture *f, curd_status status,
                       const transfer_test_snapshot *before, void *context)
{
    (void)context;
    transfer_test_snapshot after = transfer_test_take(f->device);
    assert_buffer_is(f, f->b, f->b_len, f->b_model);
    if (status == CURD_OK) {
        memset(f->a_model + 100, 0xA5, 2000);
        assert_buffer_is(f, f->a, f->a_len, f->a_model);
        g_assert_cmpuint(after.fill_ops - before->fill_ops, ==, 1);
        return;
    }
    assert_snapshot_equal(after, *before);
}

static void test_each_failing_call_of_a_fill(void)
{
    fixture f;
    if (!fixture_open(&f, SMALL, SMALL, false))
        return;
    g_assert_cmpuint(sweep(&f, fill_op, fill_check, NULL), >=, 2);
    fixture_close(&f);
}

static curd_status alloc_op(fixture *f, void *context)
{
    curd_buffer *out = context;
    out->id = 0;
    return curd_buffer_alloc(f->device, 12345, out);
}

static void alloc_check(fixture *f, curd_status status,
                        const transfer_test_snapshot *before, void *context)
{
    curd_buffer *out = context;
    if (status == CURD_OK) {
        g_assert_cmpuint(out->id, !=, 0);
        g_assert_cmpint(curd_buffer_free(f->device, *out), ==, CURD_OK);
        return;
    }
    g_assert_cmpuint(out->id, ==, 0);
    assert_snapshot_equal(transfer_test_take(f->device), *before);
}

static void test_each_failing_call_of_a_buffer_allocation(void)
{
    fixture f;
    curd_buffer out = {0};
    if (!fixture_open(&f, SMALL, SMALL, false))
        return;
    /* Empty the device pool's cache so the allocation reaches cuMemAlloc. */
    g_assert_cmpint(curd_device_trim(f.device, 0), ==, CURD_OK);
    g_assert_cmpuint(sweep(&f, alloc_op, alloc_check, &out), >=, 2);
    fixture_close(&f);
}

static curd_status async_op(fixture *f, void *context)
{
    (void)context;
    return curd_buffer_upload_async(f->device, f->a, 0, f->host, f->a_len);
}

static void async_check(fixture *f, curd_status status,
                        const transfer_test_snapshot *before, void *context)
{
    (void)context;
    if (status == CURD_OK) {
        /* Pending until the sync: busy, then complete. */
        g_assert_cmpint(curd_buffer_free(f->device, f->a), ==, CURD_E_BUSY);
        g_assert_cmpint(curd_device_sync_uploads(f->device), ==, CURD_OK);
        assert_buffer_is(f, f->a, f->a_len, f->host);
        return;
    }
    assert_snapshot_equal(transfer_test_take(f->device), *before);
    /* Nothing is left pending: no fence to pay. */
    transfer_test_snapshot now = transfer_test_take(f->device);
    g_assert_cmpint(curd_device_sync_uploads(f->device), ==, CURD_OK);
    assert_snapshot_equal(transfer_test_take(f->device), now);
    assert_same_bytes(f->host, f->host_copy, f->host_len);
}

static void test_each_failing_call_of_an_asynchronous_upload(void)
{
    fixture f;
    if (!fixture_open(&f, SMALL, SMALL, true))
        return;
    g_assert_cmpuint(sweep(&f, async_op, async_check, NULL), >=, 2);
    fixture_close(&f);
}

static void test_a_failed_sync_keeps_uploads_pending_until_one_succeeds(void)
{
    fixture f;
    if (!fixture_open(&f, SMALL, SMALL, false))
        return;
    fixture_reset(&f);
    g_assert_cmpint(curd_buffer_upload_async(f.device, f.a, 0, f.host, f.a_len),
                    ==, CURD_OK);
    transfer_test_snapshot before = transfer_test_take(f.device);
    /* The fence's first call (lib/core/fence.h). */
    curd_test_faults_begin(1, CU_ERROR_UNKNOWN,
                           curdi_fence_available(f.device)
                               ? "cuStreamWriteValue32"
                               : "cuStreamSynchronize");
    g_assert_cmpint(curd_device_sync_uploads(f.device), !=, CURD_OK);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    assert_snapshot_equal(transfer_test_take(f.device), before);
    g_assert_cmpint(curd_buffer_free(f.device, f.a), ==, CURD_E_BUSY);
    g_assert_cmpint(curd_device_sync_uploads(f.device), ==, CURD_OK);
    assert_buffer_is(&f, f.a, f.a_len, f.host);
    g_assert_cmpint(curd_buffer_free(f.device, f.a), ==, CURD_OK);
    fixture_close(&f);
}

static const transfer_test_case cases[] = {
    {"each-failing-call-of-a-small-upload-batch",
     test_each_failing_call_of_a_small_upload_batch},
    {"each-failing-call-of-a-pipelined-and-direct-upload-batch",
     test_each_failing_call_of_a_pipelined_and_direct_upload_batch},
    {"each-failing-call-of-a-small-download-batch",
     test_each_failing_call_of_a_small_download_batch},
    {"each-failing-call-of-a-pipelined-and-direct-download-batch",
     test_each_failing_call_of_a_pipelined_and_direct_download_batch},
    {"each-failing-call-of-a-gathered-batch",
     test_each_failing_call_of_a_gathered_batch},
    {"each-failing-call-of-a-pipelined-gathered-batch",
     test_each_failing_call_of_a_pipelined_gathered_batch},
    {"each-failing-call-of-a-gather-straight-to-registered-memory",
     test_each_failing_call_of_a_gather_straight_to_registered_memory},
    {"each-failing-call-of-the-kernels-first-load",
     test_each_failing_call_of_the_kernels_first_load},
    {"a-driver-that-cannot-jit-the-kernels-leaves-dmas",
     test_a_driver_that_cannot_jit_the_kernels_leaves_dmas},
    {"each-failing-call-of-a-fill",
     test_each_failing_call_of_a_fill},
    {"each-failing-call-of-a-buffer-allocation",
     test_each_failing_call_of_a_buffer_allocation},
    {"each-failing-call-of-an-asynchronous-upload",
     test_each_failing_call_of_an_asynchronous_upload},
    {"a-failed-sync-keeps-uploads-pending-until-one-succeeds",
     test_a_failed_sync_keeps_uploads_pending_until_one_succeeds},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "transfer-faults", cases,
                              G_N_ELEMENTS(cases));
}
