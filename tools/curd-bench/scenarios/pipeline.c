/* pipeline.c - curd-bench's pipeline scenario: the passes of a
 * multi-pass program, with a session (sizes reused, immutable tables
 * cached) against the same passes without one.
 *
 * One pass: 8 buffers of 4 sizes (4, 16, 64 and 256 KiB, two each), two
 * immutable 64 KiB tables uploaded, a batch of one add_one launch over
 * each buffer (recorded anew, as the buffers are new handles each pass),
 * and 4 ranges read back; then everything given back. An operation is 50
 * passes. */
#include <stdlib.h>
#include <string.h>

#include "harness/kernels.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"

#define PASSES 50u
#define BUFFERS 8u
#define TABLE_BYTES (64u * 1024u)
#define READ_BYTES 4096u

static const size_t buffer_bytes[BUFFERS] = {
    4096, 4096, 16384, 16384, 65536, 65536, 262144, 262144};

typedef struct pipeline {
    const bench_env *env;
    curd_program *add_one;
    curd_session *session; /* NULL: the passes without one */
    unsigned char *tables[2];
    unsigned char *reads[4];
} pipeline;

/* One pass; buffers come from the session or curd_buffer_alloc, the
 * tables from the session's cache or an upload batch. */
static curd_status pass(pipeline *p)
{
    curd_device *device = p->env->device;
    curd_buffer buffers[BUFFERS + 2];
    size_t count = 0;
    const curd_static_set *set = NULL;
    curd_batch *batch = NULL;
    curd_status status = CURD_OK;
    for (unsigned i = 0; status == CURD_OK && i < BUFFERS; i++) {
        status = p->session != NULL
                     ? curd_session_alloc(p->session, buffer_bytes[i],
                                          &buffers[count])
                     : curd_buffer_alloc(device, buffer_bytes[i],
                                         &buffers[count]);
        count += status == CURD_OK;
    }
    if (status == CURD_OK && p->session != NULL) {
        curd_static_payload payloads[2] = {{p->tables[0], TABLE_BYTES},
                                           {p->tables[1], TABLE_BYTES}};
        status = curd_session_upload_static(p->session, "bench/tables",
                                            payloads, 2, &set);
    } else if (status == CURD_OK) {
        curd_upload uploads[2];
        for (unsigned t = 0; status == CURD_OK && t < 2; t++) {
            status = curd_buffer_alloc(device, TABLE_BYTES, &buffers[count]);
            uploads[t] = (curd_upload){buffers[count], 0, p->tables[t],
                                       TABLE_BYTES};
            count += status == CURD_OK;
        }
        if (status == CURD_OK)
            status = curd_upload_batch(device, uploads, 2);
    }
    if (status == CURD_OK)
        status = curd_batch_new(device, NULL, &batch);
    for (unsigned i = 0; status == CURD_OK && i < BUFFERS; i++) {
        uint32_t words = (uint32_t)(buffer_bytes[i] / 4u);
        curd_launch launch;
        curd_launch_init(&launch);
        launch.elements = words;
        curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffers[i]),
                           curd_arg_scalar(&words, sizeof words)};
        status = curd_batch_launch(batch, p->add_one, &launch, args, 2, NULL);
    }
    for (unsigned r = 0; status == CURD_OK && r < 4; r++)
        status = curd_batch_download_range(batch, buffers[2 * r + 1], 0,
                                           READ_BYTES, p->reads[r],
                                           READ_BYTES);
    if (status == CURD_OK)
        status = curd_batch_run(batch, NULL);
    curd_status freed = curd_batch_free(batch);
    for (size_t i = 0; i < count; i++) {
        curd_status given = p->session != NULL && i < BUFFERS
                                ? curd_session_release(p->session, buffers[i])
                                : curd_buffer_free(device, buffers[i]);
        if (freed == CURD_OK)
            freed = given;
    }
    if (set != NULL && freed == CURD_OK)
        freed = curd_session_release_static(p->session, set);
    return status != CURD_OK ? status : freed;
}

static int op_passes(void *context, uint64_t iterations)
{
    pipeline *p = context;
    for (uint64_t i = 0; i < iterations * PASSES; i++) {
        curd_status status = pass(p);
        if (status != CURD_OK)
            return bench_fail_curd("a pipeline pass", status);
    }
    return 0;
}

int bench_session_pipeline(const bench_env *env)
{
    pipeline with = {.env = env}, without = {.env = env};
    uint64_t seed = env->seed ^ 0x91be11u;
    int result = -1;
    unsigned char *memory = malloc(2u * TABLE_BYTES + 4u * READ_BYTES);
    curd_program_desc desc;
    bench_kernel_desc(&desc, "add_one.ptx", "curd_add_one");
    if (memory == NULL) {
        bench_fail("out of host memory for the pipeline");
        goto done;
    }
    if (bench_kernel_load(env, &desc, &with.add_one, NULL, NULL) != 0)
        goto done;
    curd_status status = curd_session_new(env->device, NULL, &with.session);
    if (status != CURD_OK) {
        bench_fail_curd("curd_session_new", status);
        goto done;
    }
    without.add_one = with.add_one;
    for (unsigned t = 0; t < 2; t++) {
        with.tables[t] = without.tables[t] = memory + t * TABLE_BYTES;
        bench_fill_random(&seed, with.tables[t], TABLE_BYTES);
    }
    for (unsigned r = 0; r < 4; r++)
        with.reads[r] = without.reads[r] =
            memory + 2u * TABLE_BYTES + r * READ_BYTES;
    /* A pass reads back what it ran, so both paths are checked working
     * before they are timed (the bytes are new buffers': not compared). */
    if (op_passes(&with, 1) != 0 || op_passes(&without, 1) != 0)
        goto done;

    bench_scenario scenario;
    bench_scenario_init(&scenario, env, "session/pipeline", env->samples,
                        "50 passes: 8 buffers of 4 sizes, 2 immutable 64 KiB"
                        " tables, a batch of 8 launches, 4 read-backs");
    int with_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "with a session", .role = BENCH_ROLE_CURD,
        .op = op_passes, .context = &with, .max_iterations = 4});
    int without_index = bench_add_variant(&scenario, &(bench_variant_spec){
        .label = "without a session", .role = BENCH_ROLE_CURD,
        .op = op_passes, .context = &without, .max_iterations = 4});
    if (with_index < 0 || without_index < 0 || bench_measure(&scenario) != 0)
        goto done;
    bench_check_speedup(&scenario, with_index, without_index, 0.0, NULL);
    bench_report_scenario(&scenario);
    result = 0;
done:
    (void)curd_session_free(with.session);
    (void)curd_program_free(with.add_one);
    free(memory);
    return result;
}
