/* session.c - curd-bench scenarios for sessions, through the public
 * API.
 *
 * session/reuse        a session's alloc+release of a 4 KiB buffer it
 *                      holds idle (a reuse hit) against curd_buffer_alloc+
 *                      curd_buffer_free of the same size (a device-pool
 *                      hit behind the resident table and its budget).
 * session/static-hit   a 1 MiB set of four 256 KiB tables the session
 *                      holds cached, handed out and released: by its key
 *                      (curd_session_upload_static_keyed, a lookup that
 *                      reads no payload byte; the goal, >= 10x
 *                      faster than uploading) and by its bytes
 *                      (curd_session_upload_static, every byte compared,
 *                      by the copy team at this size), against uploading
 *                      the same tables into resident buffers
 *                      (curd_upload_batch, one fence), and against the
 *                      miss a session that caches nothing pays (allocate,
 *                      upload, free). A hit allocates nothing and moves
 *                      no host-to-device byte.
 *
 * Both sides of each scenario are curd: the comparison is a session's
 * against what a pipeline pays without one. Every path is checked first:
 * buffers read back through raw cuMemcpyDtoH, the session's counters and
 * the device's h2d_bytes proving hits hit and move nothing. */
#include "harness/check-memory.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

#include <stdlib.h>
#include <string.h>

#define REUSE_BYTES (4 * BENCH_KIB)
#define TABLE_COUNT 4
#define TABLE_BYTES (256 * BENCH_KIB)
#define SET_BYTES (TABLE_COUNT * TABLE_BYTES)

static int session_stats(curd_session *session, curd_session_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
    BENCH_CURD(curd_session_stats_get(session, stats));
    return 0;
}

static uint64_t device_h2d_bytes(const bench_env *env)
{
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    return curd_device_stats(env->device, &stats) == CURD_OK ? stats.h2d_bytes
                                                            : 0;
}

/* A session's hit and miss counters over the timed samples (the
 * scenario's sampling_start), for the note that says they were hits. */
typedef struct session_counters {
    curd_session *session;
    curd_session_stats at_start;
} session_counters;

static void counters_at_sampling_start(void *opaque)
{
    session_counters *counters = opaque;
    if (session_stats(counters->session, &counters->at_start) != 0)
        memset(&counters->at_start, 0, sizeof counters->at_start);
}

/* Arms the counters for bench_measure. */
static void watch_session(bench_scenario *scenario,
                          session_counters *counters, curd_session *session)
{
    counters->session = session;
    scenario->sampling_start = counters_at_sampling_start;
    scenario->sampling_context = counters;
}

/* Which of a session's hit and miss counters a note reads. */
typedef enum session_hit_kind {
    HITS_REUSE,  /* reuse_hits, reuse_misses */
    HITS_STATIC, /* static_hits, static_misses: verified uploads */
    HITS_KEYED   /* static_keyed_hits, static_keyed_misses */
} session_hit_kind;

/* The note of the hits and misses of one kind over the timed samples; 0,
 * or -1 after bench_fail(). */
static int note_session_hits(bench_scenario *scenario,
                             const session_counters *counters,
                             session_hit_kind kind, const char *what)
{
    curd_session_stats now;
    if (session_stats(counters->session, &now) != 0)
        return -1;
    const curd_session_stats *start = &counters->at_start;
    uint64_t hits = kind == HITS_REUSE ? now.reuse_hits - start->reuse_hits
                    : kind == HITS_STATIC
                        ? now.static_hits - start->static_hits
                        : now.static_keyed_hits - start->static_keyed_hits;
    uint64_t misses =
        kind == HITS_REUSE ? now.reuse_misses - start->reuse_misses
        : kind == HITS_STATIC
            ? now.static_misses - start->static_misses
            : now.static_keyed_misses - start->static_keyed_misses;
    bench_note(scenario, "%s over the timed samples: %llu hits, %llu misses%s",
               what, (unsigned long long)hits, (unsigned long long)misses,
               misses != 0 ? " (WARNING: not all hits)" : "");
    return 0;
}

/* ------------------------------------------------------------------------
 * session/reuse
 * ---------------------------------------------------------------------- */
typedef struct reuse_loop {
    const bench_env *env;
    curd_session *session;
} reuse_loop;

static int op_session_alloc_release(void *opaque, uint64_t iterations)
{
    const reuse_loop *loop = opaque;
    for (uint64_t iteration = 0; iteration < iterations; iteration++) {
        curd_buffer buffer;
        BENCH_CURD(curd_session_alloc(loop->session, REUSE_BYTES, &buffer));
        BENCH_CURD(curd_session_release(loop->session, buffer));
    }
    return 0;
}

static int op_buffer_alloc_free(void *opaque, uint64_t iterations)
{
    const reuse_loop *loop = opaque;
    for (uint64_t iteration = 0; iteration < iterations; iteration++) {
        curd_buffer buffer;
        BENCH_CURD(curd_buffer_alloc(loop->env->device, REUSE_BYTES, &buffer));
        BENCH_CURD(curd_buffer_free(loop->env->device, buffer));
    }
    return 0;
}

/* A buffer of each path holds what is written to it, and the session's
 * second allocation is the first one's memory, counted a hit. */
static int check_reuse(const bench_env *env, curd_session *session,
                       uint64_t *seed)
{
    curd_buffer first, again, plain;
    uint64_t first_ptr = 0, again_ptr = 0, plain_ptr = 0;
    curd_session_stats before, after;
    BENCH_CURD(curd_session_alloc(session, REUSE_BYTES, &first));
    BENCH_CURD(curd_buffer_device_ptr(env->device, first, &first_ptr));
    if (bench_check_device_memory(env, seed, first_ptr, REUSE_BYTES,
                                  "a session's buffer") != 0)
        return -1;
    BENCH_CURD(curd_session_release(session, first));
    if (session_stats(session, &before) != 0)
        return -1;
    BENCH_CURD(curd_session_alloc(session, REUSE_BYTES, &again));
    BENCH_CURD(curd_buffer_device_ptr(env->device, again, &again_ptr));
    if (session_stats(session, &after) != 0)
        return -1;
    BENCH_CURD(curd_session_release(session, again));
    if (again_ptr != first_ptr || after.reuse_hits != before.reuse_hits + 1)
        return bench_fail("curd_session_alloc did not reuse the idle %zu-byte"
                          " buffer (device pointer 0x%llx, then 0x%llx;"
                          " %llu reuse hits, then %llu)",
                          (size_t)REUSE_BYTES,
                          (unsigned long long)first_ptr,
                          (unsigned long long)again_ptr,
                          (unsigned long long)before.reuse_hits,
                          (unsigned long long)after.reuse_hits);
    BENCH_CURD(curd_buffer_alloc(env->device, REUSE_BYTES, &plain));
    BENCH_CURD(curd_buffer_device_ptr(env->device, plain, &plain_ptr));
    int result = bench_check_device_memory(env, seed, plain_ptr, REUSE_BYTES,
                                           "a curd_buffer_alloc buffer");
    BENCH_CURD(curd_buffer_free(env->device, plain));
    return result;
}

int bench_session_reuse(const bench_env *env)
{
    bench_scenario scenario;
    curd_session *session = NULL;
    reuse_loop loop = {env, NULL};
    session_counters counters;
    uint64_t seed = env->seed ^ 0x5E55u;
    int result = -1;

    BENCH_CURD(curd_session_new(env->device, NULL, &session));
    loop.session = session;
    if (check_reuse(env, session, &seed) != 0)
        goto done;
    bench_scenario_init(&scenario, env, "session/reuse", env->samples,
                        "4 KiB buffer: a session's alloc+release of a size"
                        " it holds idle vs curd_buffer_alloc+free");
    int reuse = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_session_alloc+release", .role = BENCH_ROLE_CURD,
        .op = op_session_alloc_release, .context = &loop});
    int plain = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_buffer_alloc+free", .role = BENCH_ROLE_CURD,
        .op = op_buffer_alloc_free, .context = &loop});
    if (reuse < 0 || plain < 0)
        goto done;
    watch_session(&scenario, &counters, session);
    if (bench_measure(&scenario) != 0)
        goto done;
    bench_check_ratio(&scenario, reuse, plain, 0.5, "<= 1/2");
    bench_check_median_ns(&scenario, reuse, 100.0, "< 100 ns");
    if (note_session_hits(&scenario, &counters, HITS_REUSE, "session reuse") != 0)
        goto done;
    bench_report_scenario(&scenario);
    result = 0;

done:
    if (session != NULL)
        curd_session_free(session);
    return result;
}

/* ------------------------------------------------------------------------
 * session/static-hit
 * ---------------------------------------------------------------------- */
typedef struct static_loop {
    const bench_env *env;
    curd_session *session;
    const curd_static_payload *payloads;
    curd_upload items[TABLE_COUNT]; /* the plain upload's */
} static_loop;

static int op_static_upload(void *opaque, uint64_t iterations)
{
    const static_loop *loop = opaque;
    for (uint64_t iteration = 0; iteration < iterations; iteration++) {
        const curd_static_set *set;
        BENCH_CURD(curd_session_upload_static(loop->session, "bench/tables",
                                              loop->payloads, TABLE_COUNT,
                                              &set));
        BENCH_CURD(curd_session_release_static(loop->session, set));
    }
    return 0;
}

/* The key the pipeline vouches for: its tables' version. */
static const char tables_key[] = "tables-v1";

static int op_static_upload_keyed(void *opaque, uint64_t iterations)
{
    const static_loop *loop = opaque;
    for (uint64_t iteration = 0; iteration < iterations; iteration++) {
        const curd_static_set *set;
        BENCH_CURD(curd_session_upload_static_keyed(
            loop->session, "bench/tables", tables_key, sizeof tables_key,
            loop->payloads, TABLE_COUNT, &set));
        BENCH_CURD(curd_session_release_static(loop->session, set));
    }
    return 0;
}

static int op_upload_batch(void *opaque, uint64_t iterations)
{
    const static_loop *loop = opaque;
    for (uint64_t iteration = 0; iteration < iterations; iteration++)
        BENCH_CURD(curd_upload_batch(loop->env->device, loop->items,
                                     TABLE_COUNT));
    return 0;
}

/* Every table, read back raw into poisoned memory, equals its payload. */
static int check_tables(const bench_env *env, const curd_buffer *buffers,
                        unsigned char *const *tables, unsigned char *scratch,
                        const char *what)
{
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        uint64_t device_ptr = 0;
        BENCH_CURD(curd_buffer_device_ptr(env->device, buffers[t],
                                          &device_ptr));
        bench_poison(scratch, TABLE_BYTES);
        if (bench_raw_copy_out(env, scratch, (bench_cu_deviceptr)device_ptr,
                               TABLE_BYTES) != 0
            || bench_compare(what, tables[t], scratch, TABLE_BYTES) != 0)
            return -1;
    }
    return 0;
}

/* One hand-out of the set, verified or keyed, held until released. */
static curd_status static_take(const static_loop *loop, bool keyed,
                               const curd_static_set **out_set)
{
    return keyed ? curd_session_upload_static_keyed(
                       loop->session, "bench/tables", tables_key,
                       sizeof tables_key, loop->payloads, TABLE_COUNT,
                       out_set)
                 : curd_session_upload_static(loop->session, "bench/tables",
                                              loop->payloads, TABLE_COUNT,
                                              out_set);
}

/* The cold upload (verified or keyed) moves the set's bytes, which every
 * table holds, and a warm one nothing and gives the same set. */
static int check_cold_then_warm(static_loop *hit, bool keyed,
                                unsigned char *const *tables,
                                unsigned char *scratch)
{
    const bench_env *env = hit->env;
    const char *what = keyed ? "curd_session_upload_static_keyed"
                             : "curd_session_upload_static";
    const curd_static_set *cold = NULL, *warm = NULL;
    uint64_t h2d_start = device_h2d_bytes(env);
    BENCH_CURD(static_take(hit, keyed, &cold));
    uint64_t h2d_cold = device_h2d_bytes(env);
    int result = check_tables(env, cold->buffers, tables, scratch,
                              "a static set's table");
    bool retained = cold->retained != 0; /* cold is not read after its
                                            release */
    BENCH_CURD(curd_session_release_static(hit->session, cold));
    if (result != 0)
        return -1;
    BENCH_CURD(static_take(hit, keyed, &warm));
    uint64_t h2d_warm = device_h2d_bytes(env);
    BENCH_CURD(curd_session_release_static(hit->session, warm));
    if (!retained || warm != cold || h2d_cold - h2d_start != SET_BYTES
        || h2d_warm != h2d_cold)
        return bench_fail("%s: the cold upload moved %llu bytes (expected"
                          " %zu) into a set %s retained, the warm one %llu"
                          " (expected 0) and gave %s set",
                          what, (unsigned long long)(h2d_cold - h2d_start),
                          (size_t)SET_BYTES, retained ? "" : "not",
                          (unsigned long long)(h2d_warm - h2d_cold),
                          warm == cold ? "the same" : "another");
    return 0;
}

/* Both kinds of hit as check_cold_then_warm says, and the upload batch
 * lands every byte. */
static int check_static(static_loop *hit, static_loop *plain,
                        unsigned char *const *tables, unsigned char *scratch)
{
    const bench_env *env = hit->env;
    if (check_cold_then_warm(hit, false, tables, scratch) != 0
        || check_cold_then_warm(hit, true, tables, scratch) != 0)
        return -1;
    curd_buffer buffers[TABLE_COUNT];
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        buffers[t] = plain->items[t].buffer;
        uint64_t device_ptr = 0;
        BENCH_CURD(curd_buffer_device_ptr(env->device, buffers[t],
                                          &device_ptr));
        bench_poison(scratch, TABLE_BYTES);
        if (bench_raw_copy_in(env, (bench_cu_deviceptr)device_ptr, scratch,
                              TABLE_BYTES) != 0)
            return -1;
    }
    if (op_upload_batch(plain, 1) != 0)
        return -1;
    return check_tables(env, buffers, tables, scratch, "an uploaded table");
}

int bench_session_static_hit(const bench_env *env)
{
    bench_scenario scenario;
    curd_session *cached = NULL, *uncached = NULL;
    curd_session_options options;
    unsigned char *tables[TABLE_COUNT] = {NULL};
    unsigned char *scratch = NULL;
    curd_static_payload payloads[TABLE_COUNT];
    static_loop hit, miss, plain;
    session_counters counters;
    uint64_t seed = env->seed ^ 0x57A7u;
    int result = -1;

    memset(&plain, 0, sizeof plain);
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        tables[t] = bench_host_alloc(TABLE_BYTES, "a table");
        if (tables[t] == NULL)
            goto done;
        bench_fill_random(&seed, tables[t], TABLE_BYTES);
        payloads[t] = (curd_static_payload){tables[t], TABLE_BYTES};
    }
    scratch = bench_host_alloc(TABLE_BYTES, "the read-back buffer");
    if (scratch == NULL)
        goto done;
    curd_session_options_init(&options);
    options.flags = CURD_SESSION_NO_STATIC_CACHE;
    curd_status status = curd_session_new(env->device, NULL, &cached);
    if (status == CURD_OK)
        status = curd_session_new(env->device, &options, &uncached);
    if (status != CURD_OK) {
        bench_fail_curd("curd_session_new", status);
        goto done;
    }
    memset(&hit, 0, sizeof hit);
    hit.env = env;
    hit.session = cached;
    hit.payloads = payloads;
    miss = hit;
    miss.session = uncached;
    plain.env = env;
    for (size_t t = 0; t < TABLE_COUNT; t++) {
        status = curd_buffer_alloc(env->device, TABLE_BYTES,
                                   &plain.items[t].buffer);
        if (status != CURD_OK) {
            bench_fail_curd("curd_buffer_alloc", status);
            goto done;
        }
        plain.items[t].src = tables[t];
        plain.items[t].byte_len = TABLE_BYTES;
    }
    if (check_static(&hit, &plain, tables, scratch) != 0)
        goto done;

    bench_scenario_init(&scenario, env, "session/static-hit", env->samples,
                        "1 MiB set of 4 tables: a session's cached static"
                        " upload (hit by key, hit by bytes) vs uploading the"
                        " tables");
    int keyed_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_session_upload_static_keyed hit+release",
        .role = BENCH_ROLE_CURD, .op = op_static_upload_keyed,
        .context = &hit});
    int hit_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_session_upload_static hit+release (bytes compared)",
        .role = BENCH_ROLE_CURD, .op = op_static_upload, .context = &hit});
    int plain_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_upload_batch of the tables", .role = BENCH_ROLE_CURD,
        .op = op_upload_batch, .context = &plain, .bytes_per_op = SET_BYTES});
    int miss_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "curd_session_upload_static miss (cache off)",
        .role = BENCH_ROLE_CURD, .op = op_static_upload, .context = &miss,
        .bytes_per_op = SET_BYTES});
    if (keyed_index < 0 || hit_index < 0 || plain_index < 0 || miss_index < 0)
        goto done;
    watch_session(&scenario, &counters, cached);
    if (bench_measure(&scenario) != 0)
        goto done;
    bench_check_ratio(&scenario, keyed_index, plain_index, 0.1,
                      ">= 10x faster");
    bench_check_ratio(&scenario, hit_index, plain_index, 0.0, NULL);
    bench_check_ratio(&scenario, hit_index, miss_index, 0.0, NULL);
    if (note_session_hits(&scenario, &counters, HITS_KEYED,
                          "the cached session's keyed uploads")
            != 0
        || note_session_hits(&scenario, &counters, HITS_STATIC,
                             "the cached session's verified uploads")
               != 0)
        goto done;
    bench_note(&scenario, "a hit, keyed or verified, moved 0 host-to-device"
                          " bytes and gave the cold upload's set (checked"
                          " before timing); the verified hit compares its"
                          " 1 MiB with the copy team"
                          " (CURD_COMPARE_PARALLEL_MIN=off: the calling"
                          " thread alone)");
    bench_report_scenario(&scenario);
    result = 0;

done:
    for (size_t t = 0; t < TABLE_COUNT; t++)
        if (plain.items[t].buffer.id != 0)
            curd_buffer_free(env->device, plain.items[t].buffer);
    if (cached != NULL)
        curd_session_free(cached);
    if (uncached != NULL)
        curd_session_free(uncached);
    for (size_t t = 0; t < TABLE_COUNT; t++)
        free(tables[t]);
    free(scratch);
    return result;
}
