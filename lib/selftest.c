/* selftest.c - curd_device_self_test: upload, a tiny JIT-compiled kernel,
 * download, and a check of every byte.
 *
 * It talks to the driver table directly, not through the pools or the
 * resident buffers, so that it tests the device and the driver rather
 * than the rest of curd, and so that curd-info can run it on any device
 * curd can open. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "driver.h"
#include "status.h"

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

typedef struct selftest_state {
    const curdi_driver *driver;
    curd_device *device;
    unsigned char *host_in;
    unsigned char *host_out;
    curdi_cu_deviceptr device_in;
    curdi_cu_deviceptr device_out;
    curdi_cu_stream stream;
    curdi_cu_module module;
    char jit_log[1024];
} selftest_state;

/* Frees whatever was made; work may still be queued on a failure path, so
 * the stream is drained first and destroyed rather than pooled. */
static void selftest_cleanup(selftest_state *st, bool stream_clean)
{
    const curdi_driver *driver = st->driver;
    if (st->stream != NULL && !stream_clean && curdi_driver_usable())
        curdi_driver_note(driver->cuStreamSynchronize(st->stream));
    if (st->module != NULL && curdi_driver_usable())
        curdi_driver_note(driver->cuModuleUnload(st->module));
    if (st->device_in != 0 && curdi_driver_usable())
        curdi_driver_note(driver->cuMemFree(st->device_in));
    if (st->device_out != 0 && curdi_driver_usable())
        curdi_driver_note(driver->cuMemFree(st->device_out));
    if (st->stream != NULL) {
        if (stream_clean)
            curdi_stream_release(st->device, st->stream);
        else if (curdi_driver_usable())
            curdi_driver_note(driver->cuStreamDestroy(st->stream));
    }
    free(st->host_in);
    free(st->host_out);
}

static curd_status selftest_run(selftest_state *st, char *report,
                                size_t capacity)
{
    const curdi_driver *driver = st->driver;
    const size_t byte_len = SELFTEST_BYTES;
    curdi_cu_result rc;

    st->host_in = malloc(byte_len);
    st->host_out = malloc(byte_len);
    if (st->host_in == NULL || st->host_out == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_self_test: 2 x %zu bytes of host "
                          "memory could not be allocated. Fix: free host "
                          "memory and try again.",
                          byte_len);
    fill_pseudo_random(st->host_in, byte_len);
    memset(st->host_out, 0xA5, byte_len);

    rc = driver->cuMemAlloc(&st->device_in, byte_len);
    if (rc != CURDI_CUDA_SUCCESS) {
        st->device_in = 0;
        return curdi_fail_driver((int)rc, "cuMemAlloc (self-test input)",
                                 NULL);
    }
    rc = driver->cuMemAlloc(&st->device_out, byte_len);
    if (rc != CURDI_CUDA_SUCCESS) {
        st->device_out = 0;
        return curdi_fail_driver((int)rc, "cuMemAlloc (self-test output)",
                                 NULL);
    }
    curd_status status = curdi_stream_acquire(st->device, &st->stream);
    if (status != CURD_OK) {
        st->stream = NULL;
        return status;
    }

    rc = driver->cuMemcpyHtoDAsync(st->device_in, st->host_in, byte_len,
                                   st->stream);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuMemcpyHtoDAsync (self-test)",
                                 NULL);
    /* Poison the output on the device, so a kernel that writes nothing
     * cannot pass. 0xA5 differs from every in[i] ^ 0x5A where in[i] is not
     * 0xFF; the check below compares with the host reference anyway. */
    rc = driver->cuMemsetD8Async(st->device_out, 0xA5, byte_len, st->stream);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuMemsetD8Async (self-test)",
                                 NULL);

    curdi_cu_jit_option options[2] = {
        CURDI_CU_JIT_ERROR_LOG_BUFFER,
        CURDI_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    };
    void *option_values[2] = {
        st->jit_log,
        (void *)(uintptr_t)sizeof st->jit_log,
    };
    rc = driver->cuModuleLoadDataEx(&st->module, selftest_ptx, 2, options,
                                    option_values);
    if (rc != CURDI_CUDA_SUCCESS) {
        st->module = NULL;
        st->jit_log[sizeof st->jit_log - 1] = '\0';
        char call[sizeof st->jit_log + 64];
        snprintf(call, sizeof call, "cuModuleLoadDataEx (self-test PTX%s%s)",
                 st->jit_log[0] != '\0' ? ", JIT log: " : "", st->jit_log);
        return curdi_fail_driver(
            (int)rc, call,
            "the driver could not JIT-compile the self-test PTX (sm_50, "
            "PTX ISA 7.0); check that the driver's JIT is enabled "
            "(CUDA_DISABLE_PTX_JIT unset) and the driver is not older than "
            "the device");
    }
    curdi_cu_function function = NULL;
    rc = driver->cuModuleGetFunction(&function, st->module, SELFTEST_KERNEL);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuModuleGetFunction(" SELFTEST_KERNEL
                                          ")",
                                 NULL);

    uint32_t kernel_len = (uint32_t)byte_len;
    void *params[3] = {&st->device_in, &st->device_out, &kernel_len};
    unsigned grid = (unsigned)((byte_len + SELFTEST_BLOCK - 1) / SELFTEST_BLOCK);
    rc = driver->cuLaunchKernel(function, grid, 1, 1, SELFTEST_BLOCK, 1, 1, 0,
                                st->stream, params, NULL);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuLaunchKernel(" SELFTEST_KERNEL ")",
                                 NULL);
    rc = driver->cuMemcpyDtoHAsync(st->host_out, st->device_out, byte_len,
                                   st->stream);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuMemcpyDtoHAsync (self-test)",
                                 NULL);
    rc = driver->cuStreamSynchronize(st->stream);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_fail_driver((int)rc, "cuStreamSynchronize (self-test)",
                                 NULL);

    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 0; i < byte_len; i++) {
        unsigned char expected = (unsigned char)(st->host_in[i] ^ SELFTEST_XOR);
        if (st->host_out[i] != expected && wrong++ == 0)
            first_wrong = i;
    }
    if (wrong != 0) {
        unsigned expected =
            (unsigned)(st->host_in[first_wrong] ^ SELFTEST_XOR) & 0xFFu;
        return curdi_fail(CURD_E_DRIVER,
                          "curd_device_self_test on device %d (%s): %zu of "
                          "%zu bytes came back wrong; the first at byte %zu "
                          "is 0x%02x, expected 0x%02x. Fix: check the "
                          "device's health (nvidia-smi -q, Xid errors in the "
                          "kernel log) and run the self-test under "
                          "compute-sanitizer.",
                          st->device->ordinal, st->device->props.name, wrong,
                          byte_len, first_wrong, st->host_out[first_wrong],
                          expected);
    }
    char text[512];
    snprintf(text, sizeof text,
             "self-test passed on device %d (%s): %zu random bytes uploaded, "
             "XORed by kernel " SELFTEST_KERNEL " from PTX, downloaded and "
             "verified",
             st->device->ordinal, st->device->props.name, byte_len);
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
    curd_status status = curdi_device_check(device, "curd_device_self_test");
    if (status == CURD_OK)
        status = curdi_device_enter(device);
    if (status != CURD_OK) {
        write_report(report, report_capacity, curd_last_error());
        return status;
    }
    selftest_state st;
    memset(&st, 0, sizeof st);
    st.driver = curdi_driver_get();
    st.device = device;
    status = selftest_run(&st, report, report_capacity);
    if (status != CURD_OK) {
        /* Keep the sentence: cleanup may fail quietly but must not
         * replace it. */
        char sentence[1024];
        int code = curd_last_driver_code();
        snprintf(sentence, sizeof sentence, "%s", curd_last_error());
        selftest_cleanup(&st, false);
        curdi_device_leave(device);
        write_report(report, report_capacity, sentence);
        curdi_status_note_driver_code(code);
        return curdi_fail(status, "%s", sentence);
    }
    selftest_cleanup(&st, true);
    curdi_device_leave(device);
    return CURD_OK;
}
