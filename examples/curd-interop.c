/*
 * curd-interop.c - curd beside CUDA code of your own: ordered on the GPU
 * both ways, with no host wait.
 *
 *   cc -std=c11 curd-interop.c $(pkg-config --cflags --libs curd) -ldl \
 *       -o curd-interop
 *
 * The program plays another library (cuBLAS, your runtime-API kernels):
 * it reaches the CUDA driver itself (dlopen, as curd does, so it builds
 * without the CUDA toolkit), retains the device's primary context, makes
 * its own stream and launches its own kernel there. Then
 *  - its kernel adds 1 to every word of a curd buffer (its device pointer
 *    from curd_buffer_device_ptr), twice, on its stream;
 *  - curd_device_wait_stream: curd's next work starts after those
 *    launches, and curd dispatches add_one on the buffer;
 *  - curd_pending_stream_wait: the program's stream waits for curd's
 *    dispatch, and its kernel adds 1 once more;
 *  - the program synchronises its stream, and curd reads the buffer back:
 *    every word is up by 4 only if each step ran after the one before.
 *
 * Exit status, as every program curd ships: 0 when all of that holds; 1
 * when something failed; 2 for bad usage (it takes no arguments); 3 when
 * there is no usable CUDA driver or device. Errors go to standard error
 * as "curd-interop: ...".
 */
#include <curd.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* add_one(uint32_t *data, uint32_t count), as in curd-dispatch.c. */
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
#define BLOCK 256u

/* ------------------------------------------------------------------------
 * The other library: the CUDA driver API, declared here as cuda.h does
 * (CUDA 12), so that this example needs no toolkit to build.
 * ---------------------------------------------------------------------- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef unsigned long long CUdeviceptr;
#define CU_STREAM_NON_BLOCKING 0x1

typedef struct driver {
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int,
                                   int *, void **);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int,
                               unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, CUstream, void **,
                               void **);
} driver;

/* The entry points, through cuGetProcAddress_v2 as CUDA 12.0 declares
 * them; the library curd loaded (CURD_LIBCUDA, or libcuda.so.1). */
static int driver_load(driver *d)
{
    const char *path = getenv("CURD_LIBCUDA");
    void *library = dlopen(path != NULL ? path : "libcuda.so.1",
                           RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "curd-interop: dlopen: %s\n", dlerror());
        return 1;
    }
    CUresult (*get)(const char *, void **, int, unsigned long long, int *);
    *(void **)&get = dlsym(library, "cuGetProcAddress_v2");
    if (get == NULL) {
        fprintf(stderr,
                "curd-interop: the driver has no cuGetProcAddress_v2\n");
        return 1;
    }
    struct {
        const char *name;
        void **slot;
    } entries[] = {
        {"cuDeviceGet", (void **)&d->cuDeviceGet},
        {"cuDevicePrimaryCtxRetain", (void **)&d->cuDevicePrimaryCtxRetain},
        {"cuDevicePrimaryCtxRelease", (void **)&d->cuDevicePrimaryCtxRelease},
        {"cuCtxPushCurrent", (void **)&d->cuCtxPushCurrent},
        {"cuCtxPopCurrent", (void **)&d->cuCtxPopCurrent},
        {"cuStreamCreate", (void **)&d->cuStreamCreate},
        {"cuStreamSynchronize", (void **)&d->cuStreamSynchronize},
        {"cuStreamDestroy", (void **)&d->cuStreamDestroy},
        {"cuModuleLoadDataEx", (void **)&d->cuModuleLoadDataEx},
        {"cuModuleGetFunction", (void **)&d->cuModuleGetFunction},
        {"cuModuleUnload", (void **)&d->cuModuleUnload},
        {"cuLaunchKernel", (void **)&d->cuLaunchKernel},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        int found = 0;
        if (get(entries[i].name, entries[i].slot, 12000, 0, &found) != 0
            || *entries[i].slot == NULL) {
            fprintf(stderr, "curd-interop: the driver has no %s\n",
                    entries[i].name);
            return 1;
        }
    }
    /* The library stays loaded: curd holds it too. */
    return 0;
}

static int cu_check(const char *call, CUresult rc)
{
    if (rc == 0)
        return 0;
    fprintf(stderr, "curd-interop: %s failed with CUresult %d\n", call, rc);
    return 1;
}

/* The other library's state: its context retain, stream and kernel. */
typedef struct other {
    driver d;
    CUdevice device;
    CUcontext context;
    CUstream stream;
    CUmodule module;
    CUfunction add_one;
} other;

static int other_begin(other *o)
{
    if (driver_load(&o->d) != 0
        || cu_check("cuDeviceGet", o->d.cuDeviceGet(&o->device, 0))
        || cu_check("cuDevicePrimaryCtxRetain",
                    o->d.cuDevicePrimaryCtxRetain(&o->context, o->device)))
        return 1;
    if (cu_check("cuCtxPushCurrent", o->d.cuCtxPushCurrent(o->context)))
        return 1;
    CUcontext popped;
    int failed =
        cu_check("cuStreamCreate",
                 o->d.cuStreamCreate(&o->stream, CU_STREAM_NON_BLOCKING))
        || cu_check("cuModuleLoadDataEx",
                    o->d.cuModuleLoadDataEx(&o->module, add_one_ptx, 0, NULL,
                                            NULL))
        || cu_check("cuModuleGetFunction",
                    o->d.cuModuleGetFunction(&o->add_one, o->module,
                                             "curd_add_one"));
    o->d.cuCtxPopCurrent(&popped);
    return failed;
}

/* add_one over the words at data, on the other library's stream. */
static int other_add_one(other *o, uint64_t data)
{
    CUdeviceptr words = data;
    unsigned int count = COUNT;
    void *params[] = {&words, &count};
    CUcontext popped;
    if (cu_check("cuCtxPushCurrent", o->d.cuCtxPushCurrent(o->context)))
        return 1;
    int failed = cu_check("cuLaunchKernel",
                          o->d.cuLaunchKernel(o->add_one,
                                              (COUNT + BLOCK - 1) / BLOCK, 1,
                                              1, BLOCK, 1, 1, 0, o->stream,
                                              params, NULL));
    o->d.cuCtxPopCurrent(&popped);
    return failed;
}

static int other_sync(other *o)
{
    CUcontext popped;
    if (cu_check("cuCtxPushCurrent", o->d.cuCtxPushCurrent(o->context)))
        return 1;
    int failed = cu_check("cuStreamSynchronize",
                          o->d.cuStreamSynchronize(o->stream));
    o->d.cuCtxPopCurrent(&popped);
    return failed;
}

static void other_end(other *o)
{
    CUcontext popped;
    if (o->d.cuCtxPushCurrent(o->context) == 0) {
        o->d.cuStreamSynchronize(o->stream);
        o->d.cuStreamDestroy(o->stream);
        o->d.cuModuleUnload(o->module);
        o->d.cuCtxPopCurrent(&popped);
    }
    o->d.cuDevicePrimaryCtxRelease(o->device);
}

/* ------------------------------------------------------------------------
 * curd
 * ---------------------------------------------------------------------- */
static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-interop: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* The steps of the header comment, on the buffer. */
static int interleave(curd_device *device, const curd_program *program,
                      other *o, curd_buffer buffer)
{
    uint64_t data = 0;
    curd_status status = curd_buffer_device_ptr(device, buffer, &data);
    if (status != CURD_OK)
        return fail("curd_buffer_device_ptr", status);
    /* The other library's two launches, then curd after them. */
    if (other_add_one(o, data) != 0 || other_add_one(o, data) != 0)
        return 1;
    status = curd_device_wait_stream(device, o->stream);
    if (status != CURD_OK)
        return fail("curd_device_wait_stream", status);
    uint32_t count = COUNT;
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = count;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&count, sizeof count)};
    curd_pending *pending;
    status = curd_dispatch_async(device, program, &launch, args, 2, &pending);
    if (status != CURD_OK)
        return fail("curd_dispatch_async", status);
    /* The other library's stream after curd's dispatch, then its third
     * launch: no host wait anywhere until its own synchronisation. */
    status = curd_pending_stream_wait(pending, o->stream);
    int result = status != CURD_OK ? fail("curd_pending_stream_wait", status)
                                   : other_add_one(o, data);
    if (result == 0)
        result = other_sync(o);
    status = curd_pending_wait(pending, NULL);
    if (result == 0 && status != CURD_OK)
        result = fail("curd_pending_wait", status);
    curd_pending_free(pending);
    return result;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-interop: unexpected argument '%s'; usage: "
                        "curd-interop\n", argv[1]);
        return 2;
    }
    int count = 0;
    curd_status status = curd_device_count(&count);
    if (status != CURD_OK)
        return fail("curd_device_count", status);
    if (count == 0) {
        fprintf(stderr, "curd-interop: the CUDA driver sees no device. Fix:"
                        " check nvidia-smi and CUDA_VISIBLE_DEVICES.\n");
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
    uint32_t *words = malloc(COUNT * sizeof *words);
    uint32_t *back = malloc(COUNT * sizeof *back);
    curd_buffer buffer;
    other o = {0};
    if (words == NULL || back == NULL) {
        fprintf(stderr, "curd-interop: out of host memory\n");
    } else if ((status = curd_buffer_alloc(device, COUNT * sizeof *words,
                                           &buffer))
               != CURD_OK) {
        fail("curd_buffer_alloc", status);
    } else {
        for (uint32_t i = 0; i < COUNT; i++)
            words[i] = i * 2654435761u;
        status = curd_buffer_upload(device, buffer, words,
                                    COUNT * sizeof *words);
        if (status != CURD_OK)
            fail("curd_buffer_upload", status);
        else if (other_begin(&o) == 0) {
            result = interleave(device, program, &o, buffer);
            other_end(&o);
        }
        if (result == 0) {
            status = curd_buffer_download(device, buffer, back,
                                          COUNT * sizeof *back);
            if (status != CURD_OK)
                result = fail("curd_buffer_download", status);
        }
        for (uint32_t i = 0; result == 0 && i < COUNT; i++)
            if (back[i] != words[i] + 4u) {
                fprintf(stderr,
                        "curd-interop: word %" PRIu32 " is %" PRIu32
                        ", expected %" PRIu32
                        ": a step overtook the one before it\n",
                        i, back[i], words[i] + 4u);
                result = 1;
            }
        if (result == 0)
            printf("interop: %u words, each +4 in order (the caller's two"
                   " launches, curd's dispatch, the caller's third)\n",
                   COUNT);
        curd_buffer_free(device, buffer);
    }
    free(words);
    free(back);
    curd_program_free(program);
    curd_device_close(device);
    return result;
}
