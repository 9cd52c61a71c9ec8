/* fuzz.h - helpers shared by the libFuzzer harnesses in fuzz/.
 *
 * Each harness reads its input as a stream of numbers through a
 * fuzz_input, calls the library, compares every answer with an
 * independent slow reference (128-bit arithmetic, byte-by-byte models) and
 * calls FUZZ_CHECK, which aborts the harness (never the library) on a
 * disagreement so libFuzzer saves the input. */
#ifndef CURD_FUZZ_FUZZ_H
#define CURD_FUZZ_FUZZ_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "curd.h"

typedef unsigned __int128 fuzz_u128;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(condition)                                                 \
    do {                                                                      \
        if (!(condition)) {                                                   \
            fprintf(stderr, "%s:%d: reference disagrees: %s\n", __FILE__,     \
                    __LINE__, #condition);                                    \
            abort();                                                          \
        }                                                                     \
    } while (0)

typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
} fuzz_input;

static inline bool fuzz_more(const fuzz_input *in)
{
    return in->size > 0;
}

static inline uint8_t fuzz_u8(fuzz_input *in)
{
    if (in->size == 0)
        return 0;
    uint8_t value = in->data[0];
    in->data++;
    in->size--;
    return value;
}

/* Up to 8 bytes, little-endian; missing bytes read as 0. */
static inline uint64_t fuzz_u64(fuzz_input *in)
{
    uint64_t value = 0;
    for (unsigned i = 0; i < 8 && in->size > 0; i++)
        value |= (uint64_t)fuzz_u8(in) << (8 * i);
    return value;
}

/* A shape byte, then 8 bytes: raw, just below 2^64, small, or shifted down,
 * so short inputs reach both the edges and the middle of the range. */
static inline uint64_t fuzz_shaped_u64(fuzz_input *in)
{
    uint8_t shape = fuzz_u8(in);
    uint64_t raw = fuzz_u64(in);
    switch (shape & 3u) {
    case 0:
        return raw;
    case 1:
        return UINT64_MAX - (raw & 0xffffu);
    case 2:
        return raw & 0xffffu;
    default:
        return raw >> ((shape >> 2) & 63u);
    }
}

/* Points curd at the stand-in driver (tests/fake/) that fuzz.mk builds
 * beside the harness, unless CURD_LIBCUDA names one already. */
static inline void fuzz_use_stand_in_driver(void)
{
    char path[4096];
    if (getenv("CURD_LIBCUDA") != NULL)
        return;
    ssize_t got = readlink("/proc/self/exe", path, sizeof path - 32);
    if (got <= 0)
        return;
    path[got] = '\0';
    char *slash = strrchr(path, '/');
    if (slash == NULL)
        return;
    strcpy(slash + 1, "libnccl-fake.so.2"); /* the stand-in NCCL too */
    setenv("CURD_LIBNCCL", path, 0);
    strcpy(slash + 1, "libcuda-fake.so.1");
    setenv("CURD_LIBCUDA", path, 1);
}

/* A failed call's sentence must end with "Fix: ...". */
static inline void fuzz_check_fix_sentence(void)
{
    const char *message = curd_last_error();
    const char *fix = strstr(message, "Fix: ");
    size_t length = strlen(message);
    FUZZ_CHECK(fix != NULL);
    FUZZ_CHECK(strlen(fix) > 6);
    FUZZ_CHECK(message[length - 1] == '.');
}

/* For the harnesses that run the public calls on the stand-in libcuda
 * (tests/fake/fake-cuda.c), which fuzz.mk builds beside them: points
 * CURD_LIBCUDA at it unless the caller names one, gives it 64 MiB per
 * device unless FAKE_CUDA_MEMORY says otherwise, and opens device 0;
 * aborts, naming the harness, when it cannot. */
static inline curd_device *fuzz_open_fake_device(const char *harness)
{
    fuzz_use_stand_in_driver();
    setenv("FAKE_CUDA_MEMORY", "67108864", 0);
    curd_device *device = NULL;
    curd_status status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK) {
        fprintf(stderr, "%s: cannot open the stand-in device: %s: %s\n",
                harness, curd_status_name(status), curd_last_error());
        abort();
    }
    return device;
}

#endif
