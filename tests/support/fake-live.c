/* fake-live.c - the stand-in driver's live counts (see fake-live.h). */
#include "support/fake-live.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

bool fake_live_read(const char *const *kinds, size_t count, long *counts)
{
    const char *path = getenv("CURD_LIBCUDA");
    if (path == NULL)
        return false;
    void *fake = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (fake == NULL)
        return false;
    long (*live)(const char *) =
        (long (*)(const char *))(uintptr_t)dlsym(fake, "fake_cuda_live");
    if (live != NULL)
        for (size_t i = 0; i < count; i++)
            counts[i] = live(kinds[i]);
    dlclose(fake);
    return live != NULL;
}

bool fake_live_nccl_comms(long *count)
{
    const char *path = getenv("CURD_LIBNCCL");
    if (path == NULL)
        return false;
    void *fake = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (fake == NULL)
        return false;
    long (*live)(void) =
        (long (*)(void))(uintptr_t)dlsym(fake, "fake_nccl_live");
    if (live != NULL)
        *count = live();
    dlclose(fake);
    return live != NULL;
}

bool fake_hold_events(int hold)
{
    const char *path = getenv("CURD_LIBCUDA");
    if (path == NULL)
        return false;
    void *fake = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (fake == NULL)
        return false;
    void (*hold_fn)(int) =
        (void (*)(int))(uintptr_t)dlsym(fake, "fake_cuda_hold_events");
    if (hold_fn != NULL)
        hold_fn(hold);
    dlclose(fake);
    return hold_fn != NULL;
}
