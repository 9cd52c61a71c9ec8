/*
 * curd-dispatch.c - run a kernel of your own on borrowed memory and on a
 * resident buffer.
 *
 *   cc -std=c11 curd-dispatch.c $(pkg-config --cflags --libs curd) \
 *       -o curd-dispatch
 *
 * Loads a tiny kernel from PTX text embedded below (data[i] += 1 for
 * i < count), then
 *  - dispatches it on host memory the caller owns: curd stages the words
 *    into device memory, launches, and copies them back, one fence;
 *  - dispatches it again, asynchronously, on a resident buffer that stays
 *    on the GPU, reads back a part of it and prints the timing;
 * and checks every word against what the host computes.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-dispatch: "; standard
 * output carries only results.
 */
#include <curd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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

#define COUNT 100000u

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-dispatch: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* Whether got[i] == want[i] + 1 for every i; names the first that is not. */
static int check_added(const char *what, const uint32_t *got,
                       const uint32_t *want, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (got[i] != want[i] + 1u) {
            fprintf(stderr, "curd-dispatch: %s: word %" PRIu32 " is %" PRIu32
                            ", expected %" PRIu32 "\n",
                    what, i, got[i], want[i] + 1u);
            return 1;
        }
    return 0;
}

/* The kernel on the caller's own memory: staged, launched, copied back. */
static int borrowed(curd_device *device, const curd_program *program,
                    uint32_t *data, const uint32_t *before)
{
    uint32_t count = COUNT;
    curd_launch launch;
    curd_launch_init(&launch);  /* blocks of 256 threads */
    launch.elements = count;    /* the grid: enough blocks for count */
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INOUT, data, count * sizeof *data),
        curd_arg_scalar(&count, sizeof count),
    };
    /* The kernel reads count words: curd checks the memory holds them. */
    args[0].elem_bytes = sizeof *data;
    args[0].length_arg = 1;
    curd_status status = curd_dispatch(device, program, &launch, args, 2);
    if (status != CURD_OK)
        return fail("curd_dispatch", status);
    if (check_added("borrowed", data, before, count) != 0)
        return 1;
    printf("borrowed: %u words, data[0..2] = %" PRIu32 " %" PRIu32
           " %" PRIu32 "\n",
           count, data[0], data[1], data[2]);
    return 0;
}

/* The kernel on a resident buffer, asynchronously; a part read back. */
static int resident(curd_device *device, const curd_program *program,
                    const uint32_t *data)
{
    uint32_t count = COUNT, part[16];
    curd_buffer buffer;
    curd_status status = curd_buffer_alloc(device, count * sizeof *data,
                                           &buffer);
    if (status != CURD_OK)
        return fail("curd_buffer_alloc", status);
    status = curd_buffer_upload(device, buffer, data, count * sizeof *data);
    if (status != CURD_OK) {
        curd_buffer_free(device, buffer);
        return fail("curd_buffer_upload", status);
    }
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = count;
    curd_arg args[] = {
        curd_arg_buffer(CURD_ROLE_INOUT, buffer),
        curd_arg_scalar(&count, sizeof count),
    };
    /* Read back 16 words from word 1000 into part; the rest stays on the
     * GPU. */
    args[0].host = part;
    args[0].byte_len = sizeof part;
    args[0].read_offset = 1000 * sizeof *data;
    args[0].read_len = sizeof part;
    curd_pending *pending;
    status = curd_dispatch_async(device, program, &launch, args, 2, &pending);
    if (status != CURD_OK) {
        curd_buffer_free(device, buffer);
        return fail("curd_dispatch_async", status);
    }
    /* ... other work could run here while the GPU works ... */
    curd_timing timing = CURD_TIMING_INIT;
    status = curd_pending_wait(pending, &timing);
    curd_pending_free(pending);
    int result = status != CURD_OK ? fail("curd_pending_wait", status) : 0;
    if (result == 0)
        result = check_added("resident", part, data + 1000, 16);
    if (result == 0)
        printf("resident: part[0..2] = %" PRIu32 " %" PRIu32 " %" PRIu32
               "; %" PRIu64 " ns in all, %" PRIu64 " ns on the device\n",
               part[0], part[1], part[2], timing.wall_ns, timing.device_ns);
    curd_buffer_free(device, buffer);
    return result;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-dispatch: unexpected argument '%s'; usage: "
                        "curd-dispatch\n", argv[1]);
        return 2;
    }
    int count = 0;
    curd_status status = curd_device_count(&count);
    if (status != CURD_OK)
        return fail("curd_device_count", status);
    if (count == 0) {
        fprintf(stderr, "curd-dispatch: the CUDA driver sees no device. "
                        "Fix: check nvidia-smi and CUDA_VISIBLE_DEVICES.\n");
        return 3;
    }

    curd_device *device;
    status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = add_one_ptx;
    desc.image_bytes = sizeof add_one_ptx - 1;
    desc.entry = "curd_add_one";
    curd_program *program;
    status = curd_program_load(device, &desc, &program);
    if (status != CURD_OK) {
        curd_device_close(device);
        return fail("curd_program_load", status);
    }

    int result = 1;
    uint32_t *data = malloc(COUNT * sizeof *data);
    uint32_t *before = malloc(COUNT * sizeof *before);
    if (data == NULL || before == NULL) {
        fprintf(stderr, "curd-dispatch: out of host memory\n");
    } else {
        for (uint32_t i = 0; i < COUNT; i++)
            data[i] = before[i] = i * 2654435761u;
        result = borrowed(device, program, data, before);
        /* data now holds before + 1: the resident run adds one more. */
        if (result == 0)
            result = resident(device, program, data);
    }
    free(data);
    free(before);
    curd_program_free(program);
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
    return result;
}
