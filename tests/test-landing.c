/* test-landing.c - the staging slots of downloads into pageable memory
 * land in the device's landing area, each at the place after the last
 * one's, and stage through the pinned pool where they cannot
 * (lib/memory/landing.h).
 *
 * Each test downloads fresh random bytes into poisoned malloc memory and
 * compares every byte with the host model, and reads the landing module's
 * counts to see where each download landed. Each opens device 0 or skips
 * with the reason; its stand-in twin test-landing-fake (tests/README.md)
 * runs them on the stand-in driver,
 * which must hold nothing afterwards (the area is freed at close). */
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch-test.h"
#include "memory/landing.h"
#include "support/curd-test.h"
#include "transfer-test.h"

typedef struct landing_counts {
    uint64_t landed;
    uint64_t declined;
} landing_counts;

static landing_counts counts_of(curd_device *device)
{
    landing_counts counts;
    curdi_landing_counts(device, &counts.landed, &counts.declined);
    return counts;
}

/* Every granule of the made area is free: 64 one-granule places, taken
 * from wherever the cursor stands, cover the area (64 KiB is at most one
 * granule of the default 16 MiB's), all at different addresses; then
 * given back. */
static void assert_every_place_free(curd_device *device)
{
    curdi_landing places[CURDI_LANDING_GRANULES];
    for (unsigned i = 0; i < CURDI_LANDING_GRANULES; i++) {
        g_assert_true(curdi_landing_take(device, 65536, &places[i]));
        for (unsigned j = 0; j < i; j++)
            g_assert_true(places[j].host != places[i].host);
    }
    /* One more finds nothing free. */
    curdi_landing extra;
    g_assert_false(curdi_landing_take(device, 1, &extra));
    g_assert_null(extra.host);
    for (unsigned i = 0; i < CURDI_LANDING_GRANULES; i++)
        curdi_landing_give(device, &places[i]);
}

static void test_small_downloads_land_in_turn(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { ROUNDS = 24 };
    landing_counts before = counts_of(device);
    for (unsigned round = 0; round < ROUNDS; round++)
        transfer_test_round_trip(
            device, (size_t)g_random_int_range(1, (1 << 20) + 1));
    landing_counts after = counts_of(device);
    g_assert_cmpuint(after.landed - before.landed, ==, ROUNDS);
    g_assert_cmpuint(after.declined, ==, before.declined);
    /* Two places in a row are different lines: the second starts where
     * the first ends. */
    curdi_landing first, second;
    g_assert_true(curdi_landing_take(device, 256 * 1024, &first));
    g_assert_true(curdi_landing_take(device, 256 * 1024, &second));
    g_assert_true(second.host == first.host + 256 * 1024
                  || second.host + 3 * 256 * 1024 <= first.host);
    curdi_landing_give(device, &first);
    curdi_landing_give(device, &second);
    g_assert_null(first.host);
    assert_every_place_free(device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A download of several chunks lands slot by slot: 3 MiB is three chunks
 * of 1 MiB (the default chunks), each in a slot of its own. */
static void test_a_download_of_several_chunks_lands_each_slot(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    landing_counts before = counts_of(device);
    transfer_test_round_trip(device, 3u << 20);
    landing_counts after = counts_of(device);
    g_assert_cmpuint(after.landed - before.landed, ==, 3);
    g_assert_cmpuint(after.declined, ==, before.declined);
    assert_every_place_free(device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Uploads never land (the upload only, counted between its call); a slot
 * larger than a quarter of the area (the default 16 MiB) is declined and
 * staged through the pool. */
static void test_uploads_and_large_slots_stage_through_the_pool(void)
{
    curd_device *device = transfer_test_open_with("CURD_CHUNK_MIN_BYTES", "8m");
    if (device == NULL)
        return;
    enum { LEN = 24u << 20 };
    curd_buffer buffer = {0};
    unsigned char *model = g_malloc(LEN);
    curd_test_fill_random(model, LEN);
    g_assert_cmpint(curd_buffer_alloc(device, LEN, &buffer), ==, CURD_OK);
    landing_counts before = counts_of(device);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, LEN), ==,
                    CURD_OK);
    landing_counts after = counts_of(device);
    g_assert_cmpuint(after.landed, ==, before.landed);
    g_assert_cmpuint(after.declined, ==, before.declined);
    assert_buffer_holds(device, buffer, model, LEN);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(model);
    /* One chunk of 8 MiB: one slot, declined. */
    before = counts_of(device);
    transfer_test_round_trip(device, 8u << 20);
    after = counts_of(device);
    g_assert_cmpuint(after.landed, ==, before.landed);
    g_assert_cmpuint(after.declined - before.declined, ==, 1);
    transfer_test_round_trip(device, 1u << 20);
    g_assert_cmpuint(counts_of(device).landed - after.landed, ==, 1);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

static void test_a_landing_area_of_zero_stages_every_download(void)
{
    curd_device *device = transfer_test_open_with("CURD_LANDING_BYTES", "0");
    if (device == NULL)
        return;
    landing_counts before = counts_of(device);
    transfer_test_round_trip(device, 4096);
    transfer_test_round_trip(device, 300 * 1024);
    landing_counts after = counts_of(device);
    g_assert_cmpuint(after.landed, ==, before.landed);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* The area is made by the first landing: when the driver cannot make it
 * then, that download stages through the pool and succeeds, and the next
 * one makes the area and lands. A fresh device's first page-locked
 * allocation in a download is the area's. */
static void test_an_area_that_cannot_be_made_leaves_the_download_to_the_pool(
    void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { LEN = 100000 };
    curd_buffer buffer = {0};
    unsigned char *model = g_malloc(LEN);
    unsigned char *back = g_malloc(LEN);
    curd_test_fill_random(model, LEN);
    g_assert_cmpint(curd_buffer_alloc(device, LEN, &buffer), ==, CURD_OK);
    g_assert_cmpint(curd_buffer_upload(device, buffer, model, LEN), ==,
                    CURD_OK);
    landing_counts before = counts_of(device);
    curd_test_poison(back, LEN);
    curd_test_faults_begin(1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */,
                           "cuMemHostAlloc");
    g_assert_cmpint(curd_buffer_download(device, buffer, back, LEN), ==,
                    CURD_OK);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    assert_same_bytes(back, model, LEN);
    landing_counts after = counts_of(device);
    g_assert_cmpuint(after.landed, ==, before.landed);
    g_assert_cmpuint(after.declined - before.declined, ==, 1);
    curd_test_poison(back, LEN);
    g_assert_cmpint(curd_buffer_download(device, buffer, back, LEN), ==,
                    CURD_OK);
    assert_same_bytes(back, model, LEN);
    g_assert_cmpuint(counts_of(device).landed - after.landed, ==, 1);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(back);
    g_free(model);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* A download whose DMA fails gives its place back: typed, with its Fix
 * sentence, nothing counted, every granule free again. */
static void test_a_failed_download_gives_its_place_back(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    enum { LEN = 200000 };
    curd_buffer buffer = {0};
    unsigned char *back = g_malloc(LEN);
    transfer_test_round_trip(device, 4096); /* makes the area */
    g_assert_cmpint(curd_buffer_alloc(device, LEN, &buffer), ==, CURD_OK);
    transfer_test_snapshot before = transfer_test_take(device);
    landing_counts landed_before = counts_of(device);
    curd_test_faults_begin(1, 999, "cuMemcpyDtoHAsync");
    g_assert_cmpint(curd_buffer_download(device, buffer, back, LEN), ==,
                    CURD_E_DRIVER);
    g_assert_true(curd_test_faults_fired());
    (void)curd_test_faults_end();
    curd_test_assert_fix_sentence();
    assert_snapshot_equal(transfer_test_take(device), before);
    g_assert_cmpuint(counts_of(device).landed - landed_before.landed, ==, 1);
    assert_every_place_free(device);
    g_assert_cmpint(curd_buffer_free(device, buffer), ==, CURD_OK);
    g_free(back);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Threads download at once: each lands where granules are free or
 * stages through the pool; every byte arrives either way, and every
 * place is given back. */
#define THREADS 16
#define THREAD_ROUNDS 8

static void test_threads_take_turns(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    landing_counts before = counts_of(device);
    transfer_test_round_trips_on_threads(device, THREADS, THREAD_ROUNDS,
                                         512 * 1024);
    landing_counts after = counts_of(device);
    g_assert_cmpuint((after.landed - before.landed)
                         + (after.declined - before.declined),
                     ==, THREADS * THREAD_ROUNDS);
    g_assert_cmpuint(after.landed - before.landed, >, 0);
    assert_every_place_free(device);
    g_assert_cmpint(curd_device_close(device), ==, CURD_OK);
}

/* Dispatches add_one over `data` and its element count n, which must
 * land in `places` places. */
static void add_one_lands(curd_device *device, const curd_program *program,
                          curd_arg data, uint32_t n, uint64_t places,
                          const char *what)
{
    curd_launch launch = launch_over(n, 128);
    curd_arg args[] = {data, curd_arg_scalar(&n, sizeof n)};
    landing_counts before = counts_of(device);
    check_ok(curd_dispatch(device, program, &launch, args, 2), what);
    g_assert_cmpuint(counts_of(device).landed - before.landed, ==, places);
}

/* A dispatch's read-back alone lands: add_one over an output (zeroed on
 * the device, so every word comes back 1) and over a resident buffer
 * read back in part take one place each; an INOUT argument, whose
 * read-back comes into the block its input went out of (faster there:
 * doc/PERFORMANCE.md, tenth run), does not. Every
 * place is free again after. */
static void test_a_dispatchs_read_backs_land(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    curd_program *program = load(device, "add_one.ptx", "curd_add_one");
    for (unsigned round = 0; round < 6; round++) {
        uint32_t n = random_count(1000, 200000);
        size_t bytes = n * sizeof(uint32_t);
        uint32_t *out = g_new(uint32_t, n);
        uint32_t *ones = g_new(uint32_t, n);
        uint32_t *data = random_words(n);
        uint32_t *want = g_memdup2(data, bytes);
        for (uint32_t i = 0; i < n; i++) {
            ones[i] = 1u;
            want[i] += 1u;
        }
        curd_test_poison(out, bytes);
        add_one_lands(device, program,
                      curd_arg_host(CURD_ROLE_OUTPUT, out, bytes), n, 1,
                      "curd_dispatch, output");
        assert_words(out, ones, n, "add_one, output");

        /* A resident buffer read back from a random word on. */
        uint32_t from = (uint32_t)g_test_rand_int_range(0, (gint32)n);
        curd_buffer buffer = upload_new(device, data, bytes);
        curd_arg read_back = curd_arg_buffer(CURD_ROLE_INOUT, buffer);
        read_back.host = out;
        read_back.byte_len = bytes;
        read_back.read_offset = (size_t)from * sizeof *out;
        read_back.read_len = (size_t)(n - from) * sizeof *out;
        curd_test_poison(out, bytes);
        add_one_lands(device, program, read_back, n, 1,
                      "curd_dispatch, buffer read back");
        assert_words(out, want + from, n - from, "add_one, buffer read back");
        check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");

        add_one_lands(device, program,
                      curd_arg_host(CURD_ROLE_INOUT, data, bytes), n, 0,
                      "curd_dispatch, inout");
        assert_words(data, want, n, "add_one, inout");
        g_free(out);
        g_free(ones);
        g_free(data);
        g_free(want);
    }
    assert_every_place_free(device);
    check_ok(curd_device_close(device), "curd_device_close");
}

static const transfer_test_case cases[] = {
    {"small-downloads-land-in-turn", test_small_downloads_land_in_turn},
    {"a-download-of-several-chunks-lands-each-slot",
     test_a_download_of_several_chunks_lands_each_slot},
    {"uploads-and-large-slots-stage-through-the-pool",
     test_uploads_and_large_slots_stage_through_the_pool},
    {"a-landing-area-of-zero-stages-every-download",
     test_a_landing_area_of_zero_stages_every_download},
    {"an-area-that-cannot-be-made-leaves-the-download-to-the-pool",
     test_an_area_that_cannot_be_made_leaves_the_download_to_the_pool},
    {"a-failed-download-gives-its-place-back",
     test_a_failed_download_gives_its_place_back},
    {"threads-take-turns", test_threads_take_turns},
    {"a-dispatchs-read-backs-land", test_a_dispatchs_read_backs_land},
};

int main(int argc, char **argv)
{
    return transfer_test_main(argc, argv, "landing", cases,
                              G_N_ELEMENTS(cases));
}
