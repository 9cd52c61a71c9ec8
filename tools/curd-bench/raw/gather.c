/* gather.c - scattered pieces staged by hand with the library's transfer
 * kernels (see gather.h). */
#include "raw/gather.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/kernels.h"

/* The kernels' table, as lib/transfer/gather.cu lays it out: passed by
 * value after the staging area's address. bench_raw_gather_create checks
 * its size against the PTX's parameter declaration. */
#define TABLE_PIECES 254u
typedef struct raw_table_piece {
    uint64_t device_ptr;
    uint32_t stage_offset;
    uint32_t byte_len;
} raw_table_piece;
typedef struct raw_table {
    uint32_t count;
    uint32_t range_start;
    uint32_t range_end;
    uint32_t signal_offset; /* 0: no block signals its end */
    raw_table_piece piece[TABLE_PIECES];
} raw_table;

#define TILE_BYTES 4096u
#define BLOCK_THREADS 256u

struct bench_raw_gather {
    const bench_env *env;
    bench_cu_stream stream;
    bench_cu_module module;
    bench_cu_function gather;
    bench_cu_function scatter;
    unsigned char *stage; /* page-locked, total bytes */
    unsigned char *host;
    size_t total;
    unsigned blocks; /* one per 4 KiB tile of the staging area */
    raw_table table;
};

/* The byte size the PTX declares for curd_gather's table, 0 if none. */
static size_t ptx_table_bytes(const char *ptx)
{
    const char *at = strstr(ptx, "curd_gather_param_1[");
    return at != NULL ? (size_t)strtoul(at + strlen("curd_gather_param_1["),
                                        NULL, 10)
                      : 0;
}

static int load_kernels(bench_raw_gather *g, const char *ptx)
{
    const bench_cuda *driver = g->env->cu;
    bench_cu_result rc =
        driver->cuModuleLoadDataEx(&g->module, ptx, 0, NULL, NULL);
    if (rc != BENCH_CUDA_SUCCESS) {
        g->module = NULL;
        return bench_fail_cu("cuModuleLoadDataEx (the transfer kernels)", rc);
    }
    BENCH_CU(driver->cuModuleGetFunction(&g->gather, g->module,
                                         "curd_gather"));
    BENCH_CU(driver->cuModuleGetFunction(&g->scatter, g->module,
                                         "curd_scatter"));
    void *stage = NULL;
    BENCH_CU(driver->cuMemHostAlloc(&stage, g->total,
                                    BENCH_CU_MEMHOSTALLOC_PORTABLE));
    g->stage = stage; /* set only once made: destroy frees what is set */
    return 0;
}

int bench_raw_gather_create(const bench_env *env, bench_cu_stream stream,
                            bench_cu_deviceptr device_ptr,
                            const size_t *offsets, size_t count,
                            size_t piece_bytes, unsigned char *host,
                            bench_raw_gather **out)
{
    const char *ptx = bench_kernel_ptx("gather.ptx");
    if (ptx == NULL || ptx_table_bytes(ptx) != sizeof(raw_table))
        return bench_fail("the tool's transfer kernels' PTX does not declare "
                          "a table of %zu bytes (lib/transfer/gather.cu)",
                          sizeof(raw_table));
    if (count == 0 || count > TABLE_PIECES || piece_bytes > UINT32_MAX / count)
        return bench_fail("%zu pieces of %zu bytes do not fit one launch",
                          count, piece_bytes);
    bench_raw_gather *g = calloc(1, sizeof *g);
    if (g == NULL)
        return bench_fail("out of host memory for the raw gather");
    g->env = env;
    g->stream = stream;
    g->host = host;
    g->total = count * piece_bytes;
    g->blocks = (unsigned)((g->total + TILE_BYTES - 1) / TILE_BYTES);
    g->table.count = (uint32_t)count;
    g->table.range_end = (uint32_t)g->total;
    for (size_t i = 0; i < count; i++)
        g->table.piece[i] = (raw_table_piece){
            device_ptr + offsets[i], (uint32_t)(i * piece_bytes),
            (uint32_t)piece_bytes};
    if (bench_raw_enter(env) != 0) {
        free(g);
        return -1;
    }
    int result = load_kernels(g, ptx);
    bench_raw_leave(env);
    if (result != 0) {
        bench_raw_gather_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
}

void bench_raw_gather_destroy(bench_raw_gather *g)
{
    if (g == NULL)
        return;
    if ((g->module != NULL || g->stage != NULL) && bench_raw_enter(g->env) == 0) {
        if (g->stage != NULL)
            g->env->cu->cuMemFreeHost(g->stage);
        if (g->module != NULL)
            g->env->cu->cuModuleUnload(g->module);
        bench_raw_leave(g->env);
    }
    free(g);
}

static int launch(bench_raw_gather *g, bench_cu_function kernel)
{
    uint64_t stage = (uint64_t)(uintptr_t)g->stage;
    void *params[2] = {&stage, &g->table};
    BENCH_CU(g->env->cu->cuLaunchKernel(kernel, g->blocks, 1, 1,
                                        BLOCK_THREADS, 1, 1, 0, g->stream,
                                        params, NULL));
    BENCH_CU(g->env->cu->cuStreamSynchronize(g->stream));
    return 0;
}

static int move(bench_raw_gather *g, uint64_t iterations, bool write)
{
    int result = 0;
    if (bench_raw_enter(g->env) != 0)
        return -1;
    for (uint64_t i = 0; i < iterations && result == 0; i++) {
        if (write) {
            memcpy(g->stage, g->host, g->total);
            result = launch(g, g->scatter);
        } else {
            result = launch(g, g->gather);
            if (result == 0)
                memcpy(g->host, g->stage, g->total);
        }
    }
    bench_raw_leave(g->env);
    return result;
}

int bench_op_raw_gather_read(void *gather, uint64_t iterations)
{
    return move(gather, iterations, false);
}

int bench_op_raw_scatter_write(void *gather, uint64_t iterations)
{
    return move(gather, iterations, true);
}
