/* selftest.c - curd_device_self_test: a tiny kernel from embedded PTX,
 * loaded through the program module (the module cache) and run on random
 * bytes through a borrowed dispatch (staging, upload, launch, read-back,
 * one fence), every byte checked against the host's answer.
 *
 * It uses the library's own public path, so it tests the device, the
 * driver and the modules every caller's kernels go through; curd-info runs
 * it on any device curd can open. A second run finds the module cached
 * and makes no JIT. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "core/core.h"

/* out[i] = in[i] ^ 0x5A for i < byte_len, one thread per byte. Written by
 * hand for the oldest target the driver can still JIT (sm_50, PTX ISA 7.0,
 * CUDA 11.0), so any device a CUDA 12 or newer driver supports runs it;
 * ptxas from CUDA 13 accepts it for sm_75, sm_90 and sm_100. */
static const char selftest_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry curd_selftest_xor(\n"
    "    .param .u64 in_ptr,\n"
    "    .param .u64 out_ptr,\n"
    "    .param .u32 byte_len\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b16 %rs<3>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .b64 %rd<8>;\n"
    "\n"
    "    ld.param.u64 %rd1, [in_ptr];\n"
    "    ld.param.u64 %rd2, [out_ptr];\n"
    "    ld.param.u32 %r1, [byte_len];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd3, %rd1;\n"
    "    cvta.to.global.u64 %rd4, %rd2;\n"
    "    cvt.u64.u32 %rd5, %r5;\n"
    "    add.s64 %rd6, %rd3, %rd5;\n"
    "    ld.global.u8 %rs1, [%rd6];\n"
    "    xor.b16 %rs2, %rs1, 0x5A;\n"
    "    add.s64 %rd7, %rd4, %rd5;\n"
    "    st.global.u8 [%rd7], %rs2;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

#define SELFTEST_KERNEL "curd_selftest_xor"
/* Not a multiple of the block size, so the kernel's bounds check matters
 * and the last block is partly idle. */
#define SELFTEST_BYTES ((size_t)65536 + 37)
#define SELFTEST_BLOCK 256u
#define SELFTEST_XOR 0x5Au

/* A small xorshift: the data only needs to differ from run to run and
 * from the device's poison, not to be good randomness. */
static void fill_pseudo_random(unsigned char *bytes, size_t byte_len)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t state = (uint64_t)now.tv_nsec * 0x9E3779B97F4A7C15ull ^
                     (uint64_t)(uintptr_t)bytes ^ 0xD1B54A32D192ED03ull;
    if (state == 0)
        state = 1;
    for (size_t i = 0; i < byte_len; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes[i] = (unsigned char)(state >> 24);
    }
}

static void write_report(char *report, size_t capacity, const char *text)
{
    if (report == NULL || capacity == 0)
        return;
    snprintf(report, capacity, "%s", text);
}

/* Loads the kernel, runs it over host_in into host_out and checks every
 * byte. */
static curd_status selftest_run(curd_device *device, unsigned char *host_in,
                                unsigned char *host_out, char *report,
                                size_t capacity)
{
    const size_t byte_len = SELFTEST_BYTES;
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = selftest_ptx;
    desc.image_bytes = sizeof selftest_ptx - 1;
    desc.entry = SELFTEST_KERNEL;
    curd_program *program = NULL;
    curd_status status = curd_program_load(device, &desc, &program);
    if (status != CURD_OK)
        return status;
    uint32_t kernel_len = (uint32_t)byte_len;
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = byte_len;
    launch.block[0] = SELFTEST_BLOCK;
    curd_arg args[] = {
        curd_arg_host(CURD_ROLE_INPUT, host_in, byte_len),
        curd_arg_host(CURD_ROLE_OUTPUT, host_out, byte_len),
        curd_arg_scalar(&kernel_len, sizeof kernel_len),
    };
    args[0].length_arg = 2;
    args[1].length_arg = 2;
    status = curd_dispatch(device, program, &launch, args, 3);
    /* A cache hit's free makes no driver call (the module stays cached);
     * the dispatch's sentence, if any, is the one to keep. */
    (void)curd_program_free(program);
    if (status != CURD_OK)
        return status;

    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 0; i < byte_len; i++) {
        unsigned char expected = (unsigned char)(host_in[i] ^ SELFTEST_XOR);
        if (host_out[i] != expected && wrong++ == 0)
            first_wrong = i;
    }
    if (wrong != 0) {
        unsigned expected =
            (unsigned)(host_in[first_wrong] ^ SELFTEST_XOR) & 0xFFu;
        return curdi_fail(CURD_E_DRIVER,
                          "curd_device_self_test on device %d (%s): %zu of "
                          "%zu bytes came back wrong; the first at byte %zu "
                          "is 0x%02x, expected 0x%02x. Fix: check the "
                          "device's health (nvidia-smi -q, Xid errors in the "
                          "kernel log) and run the self-test under "
                          "compute-sanitizer.",
                          device->ordinal, device->props.name, wrong,
                          byte_len, first_wrong, host_out[first_wrong],
                          expected);
    }
    char text[512];
    snprintf(text, sizeof text,
             "self-test passed on device %d (%s): %zu random bytes through "
             "kernel " SELFTEST_KERNEL " (embedded PTX, module cache, "
             "borrowed dispatch), every byte verified",
             device->ordinal, device->props.name, byte_len);
    write_report(report, capacity, text);
    return CURD_OK;
}

CURD_API curd_status curd_device_self_test(curd_device *device, char *report,
                                           size_t report_capacity)
{
    if (report == NULL && report_capacity != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_device_self_test: report is NULL but "
                          "report_capacity is %zu. Fix: pass a buffer, or "
                          "NULL with capacity 0.",
                          report_capacity);
    curd_status status =
        curdi_core_device_check(device, "curd_device_self_test");
    if (status != CURD_OK) {
        write_report(report, report_capacity, curd_last_error());
        return status;
    }
    unsigned char *host_in = malloc(SELFTEST_BYTES);
    unsigned char *host_out = malloc(SELFTEST_BYTES);
    if (host_in == NULL || host_out == NULL)
        status = curdi_fail(CURD_E_OUT_OF_MEMORY,
                            "curd_device_self_test: 2 x %zu bytes of host "
                            "memory could not be allocated. Fix: free host "
                            "memory and try again.",
                            SELFTEST_BYTES);
    if (status == CURD_OK) {
        fill_pseudo_random(host_in, SELFTEST_BYTES);
        /* Poisoned: the read-back must replace every byte. */
        memset(host_out, 0xA5, SELFTEST_BYTES);
        status = selftest_run(device, host_in, host_out, report,
                              report_capacity);
    }
    if (status != CURD_OK)
        write_report(report, report_capacity, curd_last_error());
    free(host_in);
    free(host_out);
    return status;
}
