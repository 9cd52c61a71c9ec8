/*
 * curd-batch.c - a batch object: record an upload, a kernel launch and a
 * read-back once, then run them again and again with one fence a run.
 *
 *   cc -std=c11 curd-batch.c $(pkg-config --cflags --libs curd) -o curd-batch
 *
 * Keeps COUNT words resident on device 0 and records, in one curd_batch:
 * an upload of the host words into the buffer (read at each run), a
 * launch of a tiny kernel (data[i] += 1, from PTX embedded below), and a
 * read-back of the words into host memory of a stated capacity
 * (curd_batch_download_range). Runs the batch three times with new input,
 * checks every word each time, and prints what the device counted.
 * (curd_upload_batch, a vectored transfer and no batch object, is shown
 * by curd-upload-batch.c.)
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-batch: ";
 * standard output carries only results.
 */
#include <curd.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* add_one(uint32_t *data, uint32_t count), written by hand for the oldest
 * target a current driver can JIT (PTX ISA 7.0, sm_50), so it runs on any
 * device; nvcc -ptx writes the same from a three-line CUDA C kernel. */
static const char add_one_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry curd_add_one(\n"
    "    .param .u64 data,\n"
    "    .param .u32 count\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<7>;\n"
    "    .reg .b64 %rd<4>;\n"
    "\n"
    "    ld.param.u64 %rd1, [data];\n"
    "    ld.param.u32 %r1, [count];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mul.wide.u32 %rd3, %r5, 4;\n"
    "    add.s64 %rd2, %rd2, %rd3;\n"
    "    ld.global.u32 %r6, [%rd2];\n"
    "    add.s32 %r6, %r6, 1;\n"
    "    st.global.u32 [%rd2], %r6;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

enum { COUNT = 4096, RUNS = 3 };

static uint32_t input[COUNT], output[COUNT];

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-batch: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* Records the three items; the batch reads input and writes output at
 * each run, so both must outlive it (they are static here). */
static curd_status record(curd_batch *batch, const curd_program *program,
                          curd_buffer words, uint32_t *count)
{
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = *count;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, words),
                       curd_arg_scalar(count, sizeof *count)};
    curd_status status = curd_batch_upload(batch, words, 0, input,
                                           sizeof input);
    if (status == CURD_OK)
        status = curd_batch_launch(batch, program, &launch, args, 2, NULL);
    if (status == CURD_OK)
        status = curd_batch_download_range(batch, words, 0, sizeof output,
                                           output, sizeof output);
    return status;
}

static int run(curd_device *device, const curd_program *program,
               curd_buffer words)
{
    uint32_t count = COUNT;
    curd_batch *batch = NULL;
    curd_stats before = CURD_STATS_INIT, after = CURD_STATS_INIT;
    curd_status status = curd_batch_new(device, NULL, &batch);
    if (status != CURD_OK)
        return fail("curd_batch_new", status);
    int result = 0;
    status = record(batch, program, words, &count);
    if (status != CURD_OK)
        result = fail("recording the batch", status);
    if (result == 0 && (status = curd_device_stats(device, &before))
                           != CURD_OK)
        result = fail("curd_device_stats", status);
    for (uint32_t pass = 0; result == 0 && pass < RUNS; pass++) {
        for (uint32_t i = 0; i < COUNT; i++)
            input[i] = i * 2654435761u + pass;
        memset(output, 0, sizeof output);
        status = curd_batch_run(batch, NULL);
        if (status != CURD_OK) {
            result = fail("curd_batch_run", status);
            break;
        }
        for (uint32_t i = 0; i < COUNT; i++)
            if (output[i] != input[i] + 1u) {
                fprintf(stderr, "curd-batch: run %" PRIu32 ": word %" PRIu32
                                " is %" PRIu32 ", expected %" PRIu32 "\n",
                        pass, i, output[i], input[i] + 1u);
                result = 1;
                break;
            }
    }
    if (result == 0 && (status = curd_device_stats(device, &after))
                           != CURD_OK)
        result = fail("curd_device_stats", status);
    if (result == 0)
        printf("%d runs of upload, launch and read-back: %" PRIu64
               " batch runs, %" PRIu64 " launches, %" PRIu64 " fences\n",
               RUNS, after.batch_runs - before.batch_runs,
               after.launches - before.launches,
               after.fences - before.fences);
    curd_batch_free(batch);
    return result;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-batch: unexpected argument '%s'; usage: "
                        "curd-batch\n", argv[1]);
        return 2;
    }
    curd_device *device = NULL;
    curd_status status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = add_one_ptx;
    desc.image_bytes = sizeof add_one_ptx - 1;
    desc.entry = "curd_add_one";
    curd_program *program = NULL;
    curd_buffer words;
    int result;
    status = curd_program_load(device, &desc, &program);
    if (status != CURD_OK) {
        result = fail("curd_program_load", status);
    } else if ((status = curd_buffer_alloc(device, sizeof input, &words))
               != CURD_OK) {
        result = fail("curd_buffer_alloc", status);
    } else {
        result = run(device, program, words);
    }
    curd_program_free(program);
    /* Closing frees the buffer too. */
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
    return result;
}
