/* nccl.c - loads raw NCCL for curd-bench's collective baselines. */
#include "harness/nccl.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/clock.h"
#include "harness/common.h"

static bench_nccl nccl;
static const bench_nccl *loaded;

const bench_nccl *bench_nccl_load(char *why, size_t why_capacity)
{
    const char *override = getenv("CURD_LIBNCCL");
    const char *path =
        override != NULL && override[0] != '\0' ? override : "libnccl.so.2";
    void *library;

    if (loaded != NULL)
        return loaded;
    /* Never closed: the entries are used until the process exits, and
     * libcurd may hold the same library open. */
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(why, why_capacity, "needs libnccl.so.2 (dlopen(%s): %s)",
                 path, error != NULL ? error : "no reason given");
        return NULL;
    }
    /* POSIX lets a dlsym result convert to the function pointer type of
     * the symbol, which the declarations in nccl.h give. */
#define BENCH_NCCL_RESOLVE_(name, params)                                     \
    nccl.name = (bench_nccl_result(*) params)(uintptr_t)dlsym(library, #name); \
    if (nccl.name == NULL) {                                                  \
        snprintf(why, why_capacity, "needs libnccl.so.2 (%s lacks %s)",       \
                 path, #name);                                                \
        return NULL;                                                          \
    }
    BENCH_NCCL_ENTRIES(BENCH_NCCL_RESOLVE_)
#undef BENCH_NCCL_RESOLVE_
    nccl.ncclGetErrorString = (const char *(*)(bench_nccl_result))(uintptr_t)
        dlsym(library, "ncclGetErrorString");
    if (nccl.ncclGetVersion(&nccl.version) != BENCH_NCCL_SUCCESS)
        nccl.version = 0;
    loaded = &nccl;
    return loaded;
}

int bench_fail_nccl(const char *call, bench_nccl_result result)
{
    const char *text = loaded != NULL && loaded->ncclGetErrorString != NULL
                           ? loaded->ncclGetErrorString(result)
                           : NULL;
    return bench_fail("%s returned ncclResult %u (%s)", call, result,
                      text != NULL ? text : "no text");
}

int bench_nccl_settle(const bench_nccl *library, const bench_nccl_comm *comms,
                      int count, unsigned timeout_ms, const char *what)
{
    uint64_t start_ns = bench_now_ns();
    for (;;) {
        int busy = 0;
        for (int index = 0; index < count; index++) {
            bench_nccl_result state = BENCH_NCCL_SUCCESS;
            bench_nccl_result result =
                library->ncclCommGetAsyncError(comms[index], &state);
            if (result != BENCH_NCCL_SUCCESS)
                return bench_fail_nccl("ncclCommGetAsyncError", result);
            if (state == BENCH_NCCL_IN_PROGRESS)
                busy = 1;
            else if (state != BENCH_NCCL_SUCCESS)
                return bench_fail_nccl(what, state);
        }
        if (!busy)
            return 0;
        if (bench_now_ns() - start_ns > (uint64_t)timeout_ms * 1000000u)
            return bench_fail("%s: rank communicators still in progress "
                              "after %u ms",
                              what, timeout_ms);
    }
}
