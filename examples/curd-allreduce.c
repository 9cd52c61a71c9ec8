/*
 * curd-allreduce.c - every GPU (two to eight), a kernel on each, an
 * all-reduce over all of them.
 *
 *   cc -std=c11 curd-allreduce.c $(pkg-config --cflags --libs curd) \
 *       -o curd-allreduce
 *
 * Opens every GPU the driver sees (up to 8; at least 2), and on each a
 * resident buffer of COUNT words that a tiny kernel (PTX text embedded
 * below) fills on the GPU itself: rank r writes data[i] = i * (r + 1).
 * One communicator over the devices (curd_comm_open_all; NCCL loaded at
 * run time) then sums the buffers in place with one curd_collective_run
 * driving every rank from this thread, and each GPU's buffer is read back
 * and checked on the host: with n GPUs every word must be
 * i * (1 + 2 + ... + n) = i * n (n + 1) / 2. On N processes or N hosts the
 * same collective is one operation per process, with the communicator
 * from curd_comm_open_from_env (doc/SCALING.md).
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver, fewer than two devices, or no NCCL (the sentence on
 * standard error, ending in "Fix: ...", says which). Every error goes to
 * standard error as one line starting "curd-allreduce: "; standard output
 * carries only results.
 */
#include <curd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* scaled_index(uint32_t *data, uint32_t count, uint32_t scale): data[i] =
 * i * scale for i < count. Written by hand for PTX ISA 7.0, sm_50, so any
 * device a current driver supports JITs it. */
static const char scaled_index_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry curd_scaled_index(\n"
    "    .param .u64 data,\n"
    "    .param .u32 count,\n"
    "    .param .u32 scale\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<4>;\n"
    "\n"
    "    ld.param.u64 %rd1, [data];\n"
    "    ld.param.u32 %r1, [count];\n"
    "    ld.param.u32 %r7, [scale];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mul.wide.u32 %rd3, %r5, 4;\n"
    "    add.s64 %rd2, %rd2, %rd3;\n"
    "    mul.lo.s32 %r6, %r5, %r7;\n"
    "    st.global.u32 [%rd2], %r6;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

#define MAX_RANKS 8
#define COUNT 1000000u

/* What one GPU holds: its device, the kernel loaded there, its buffer,
 * its rank of the communicator. */
typedef struct rank_state {
    curd_device *device;
    curd_program *program;
    curd_buffer buffer;
    curd_comm *comm;
} rank_state;

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-allreduce: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    /* No driver, no device, or no NCCL (CURD_E_UNSUPPORTED from the
     * communicator calls): what this machine lacks, not a failure. */
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ||
                   status == CURD_E_UNSUPPORTED
               ? 3
               : 1;
}

/* Opens rank r's device, loads the kernel there and fills a buffer:
 * data[i] = i * (r + 1), computed on that GPU. */
static int rank_open(rank_state *rank, int ordinal)
{
    curd_status status = curd_device_open(ordinal, NULL, &rank->device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = scaled_index_ptx;
    desc.image_bytes = sizeof scaled_index_ptx - 1;
    desc.entry = "curd_scaled_index";
    status = curd_program_load(rank->device, &desc, &rank->program);
    if (status != CURD_OK)
        return fail("curd_program_load", status);
    status = curd_buffer_alloc(rank->device, COUNT * sizeof(uint32_t),
                               &rank->buffer);
    if (status != CURD_OK)
        return fail("curd_buffer_alloc", status);
    uint32_t count = COUNT, scale = (uint32_t)ordinal + 1u;
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = count;
    curd_arg args[] = {
        curd_arg_buffer(CURD_ROLE_OUTPUT, rank->buffer), /* stays there */
        curd_arg_scalar(&count, sizeof count),
        curd_arg_scalar(&scale, sizeof scale),
    };
    status = curd_dispatch(rank->device, rank->program, &launch, args, 3);
    return status != CURD_OK ? fail("curd_dispatch", status) : 0;
}

/* Reads rank r's buffer back and checks every word is i times the sum
 * of the scales 1..ranks. */
static int rank_check(const rank_state *rank, int ordinal, int ranks,
                      uint32_t *words)
{
    uint32_t factor = (uint32_t)(ranks * (ranks + 1) / 2);
    curd_status status = curd_buffer_download(rank->device, rank->buffer,
                                              words,
                                              COUNT * sizeof *words);
    if (status != CURD_OK)
        return fail("curd_buffer_download", status);
    for (uint32_t i = 0; i < COUNT; i++)
        if (words[i] != i * factor) {
            fprintf(stderr, "curd-allreduce: GPU %d: word %" PRIu32
                            " is %" PRIu32 ", expected %" PRIu32 "\n",
                    ordinal, i, words[i], i * factor);
            return 1;
        }
    printf("GPU %d: %u words summed over %d GPUs, data[0..3] = %" PRIu32
           " %" PRIu32 " %" PRIu32 "\n",
           ordinal, COUNT, ranks, words[0], words[1], words[2]);
    return 0;
}

static int all_reduce(rank_state *ranks, int count)
{
    curd_device *devices[MAX_RANKS];
    curd_comm *comms[MAX_RANKS] = {NULL};
    for (int r = 0; r < count; r++)
        devices[r] = ranks[r].device;
    curd_status status = curd_comm_open_all(devices, count, NULL, comms);
    if (status != CURD_OK)
        return fail("curd_comm_open_all", status);
    for (int r = 0; r < count; r++)
        ranks[r].comm = comms[r];
    /* One operation per rank, in place (send and recv the same range),
     * all in one call: one NCCL group over every GPU. */
    curd_collective ops[MAX_RANKS];
    for (int r = 0; r < count; r++)
        ops[r] = (curd_collective){
            .comm = ranks[r].comm, .kind = CURD_COLLECTIVE_ALL_REDUCE,
            .dtype = CURD_DTYPE_UINT32, .op = CURD_REDUCE_SUM,
            .send = ranks[r].buffer, .recv = ranks[r].buffer,
            .count = COUNT};
    status = curd_collective_run(ops, (size_t)count);
    return status != CURD_OK ? fail("curd_collective_run", status) : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-allreduce: unexpected argument '%s'; usage: "
                        "curd-allreduce\n", argv[1]);
        return 2;
    }
    int count = 0;
    curd_status status = curd_device_count(&count);
    if (status != CURD_OK)
        return fail("curd_device_count", status);
    if (count < 2) {
        fprintf(stderr, "curd-allreduce: this example needs 2 GPUs and the "
                        "CUDA driver sees %d. Fix: run it on a machine with "
                        "two GPUs (check nvidia-smi and "
                        "CUDA_VISIBLE_DEVICES).\n",
                count);
        return 3;
    }

    if (count > MAX_RANKS)
        count = MAX_RANKS;
    rank_state ranks[MAX_RANKS] = {{0}};
    uint32_t *words = malloc(COUNT * sizeof *words);
    int result = words == NULL ? 1 : 0;
    if (words == NULL)
        fprintf(stderr, "curd-allreduce: out of host memory\n");
    for (int r = 0; r < count && result == 0; r++)
        result = rank_open(&ranks[r], r);
    if (result == 0)
        result = all_reduce(ranks, count);
    for (int r = 0; r < count && result == 0; r++)
        result = rank_check(&ranks[r], r, count, words);

    /* Communicators first: a communicator's close waits for its work on
     * the device. */
    for (int r = 0; r < count; r++) {
        status = curd_comm_close(ranks[r].comm);
        if (status != CURD_OK && result == 0)
            result = fail("curd_comm_close", status);
    }
    for (int r = 0; r < count; r++) {
        if (ranks[r].device == NULL)
            continue;
        if (ranks[r].buffer.id != 0)
            curd_buffer_free(ranks[r].device, ranks[r].buffer);
        curd_program_free(ranks[r].program);
        status = curd_device_close(ranks[r].device);
        if (status != CURD_OK && result == 0)
            result = fail("curd_device_close", status);
    }
    free(words);
    return result;
}
