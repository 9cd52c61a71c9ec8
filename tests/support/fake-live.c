/* fake-live.c - the stand-in driver's live counts (see fake-live.h). */
#include "support/fake-live.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

/* The function `symbol` of the stand-in that the environment variable
 * env_name (CURD_LIBCUDA, CURD_LIBNCCL) names, if it is loaded: *out_library
 * then holds it open, for the caller to dlclose after the call. NULL,
 * nothing open, when either is missing. */
static uintptr_t fake_function(const char *env_name, const char *symbol,
                               void **out_library)
{
    const char *path = getenv(env_name);
    void *library = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *found = library != NULL ? dlsym(library, symbol) : NULL;
    if (found == NULL && library != NULL) {
        dlclose(library);
        library = NULL;
    }
    *out_library = library;
    return (uintptr_t)found;
}

bool fake_live_read(const char *const *kinds, size_t count, long *counts)
{
    void *library;
    long (*live)(const char *) = (long (*)(const char *))fake_function(
        "CURD_LIBCUDA", "fake_cuda_live", &library);
    if (live == NULL)
        return false;
    for (size_t i = 0; i < count; i++)
        counts[i] = live(kinds[i]);
    dlclose(library);
    return true;
}

/* A count the stand-in NCCL keeps, read through its function `symbol`. */
static bool nccl_count(const char *symbol, long *count)
{
    void *library;
    long (*counter)(void) = (long (*)(void))fake_function(
        "CURD_LIBNCCL", symbol, &library);
    if (counter == NULL)
        return false;
    *count = counter();
    dlclose(library);
    return true;
}

bool fake_live_nccl_comms(long *count)
{
    return nccl_count("fake_nccl_live", count);
}

bool fake_live_nccl_abandoned_joins(long *count)
{
    return nccl_count("fake_nccl_abandoned_joins", count);
}

bool fake_live_nccl_groups(bool blocking, long *count)
{
    void *library;
    long (*groups)(int) = (long (*)(int))fake_function(
        "CURD_LIBNCCL", "fake_nccl_groups", &library);
    if (groups == NULL)
        return false;
    *count = groups(blocking);
    dlclose(library);
    return true;
}

bool fake_hold_events(int hold)
{
    void *library;
    void (*hold_fn)(int) = (void (*)(int))fake_function(
        "CURD_LIBCUDA", "fake_cuda_hold_events", &library);
    if (hold_fn == NULL)
        return false;
    hold_fn(hold);
    dlclose(library);
    return true;
}
