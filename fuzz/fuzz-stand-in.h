/* fuzz-stand-in.h - what the harnesses that run public calls on the
 * stand-in driver (tests/fake/fake-cuda.c) share: the driver found beside
 * the harness, device 0 opened on it, a second device's buffers (stale
 * handles on device 0 whatever their bits), and each input's resident
 * buffers with their byte models and the handles freed before.
 *
 * The stand-in keeps device memory on the host, so a buffer's bytes are
 * read and written straight through its device pointer. Each harness is
 * one program: the state below is its own. */
#ifndef CURD_FUZZ_FUZZ_STAND_IN_H
#define CURD_FUZZ_FUZZ_STAND_IN_H

#include <limits.h>
#include <unistd.h>

#include "fuzz.h"

#define FUZZ_MAX_BUFFERS 6
#define FUZZ_MAX_BUFFER_LEN 1024u
#define FUZZ_STALE_RING 8u

static curd_device *device;
static uint64_t foreign_ids[2]; /* live buffers of a second device, or 0 */
static uint64_t stale_ring[FUZZ_STALE_RING];
static unsigned stale_next;

/* The input's live buffers and what each must hold. */
static uint64_t live_ids[FUZZ_MAX_BUFFERS];
static size_t live_lens[FUZZ_MAX_BUFFERS];
static uint64_t live_ptrs[FUZZ_MAX_BUFFERS];
static unsigned char *live_bytes[FUZZ_MAX_BUFFERS]; /* the stand-in's */
static unsigned char model[FUZZ_MAX_BUFFERS][FUZZ_MAX_BUFFER_LEN];
static size_t live_count;

/* Points CURD_LIBCUDA at the stand-in beside this binary (unless the
 * caller names one), opens device 0 on it, and a second device with two
 * live buffers, left open. Aborts naming the harness when it cannot. */
static inline void fuzz_stand_in_open(const char *harness)
{
    setenv("FAKE_CUDA_DEVICES", "2", 0);
    device = fuzz_open_fake_device(harness);
    curd_device *other = NULL;
    if (curd_device_open(1, NULL, &other) == CURD_OK) {
        for (unsigned i = 0; i < 2; i++) {
            curd_buffer buffer;
            if (curd_buffer_alloc(other, 64u << i, &buffer) == CURD_OK)
                foreign_ids[i] = buffer.id;
        }
        /* other stays open: its buffers must stay live. */
    }
}

/* A buffer length: one of common[8], or any up to FUZZ_MAX_BUFFER_LEN. */
static inline size_t fuzz_buffer_len(fuzz_input *in, const size_t common[8])
{
    uint8_t shape = fuzz_u8(in);
    if ((shape & 1u) == 0)
        return common[(shape >> 1) % 8u];
    return 1u + (size_t)(fuzz_u64(in) % FUZZ_MAX_BUFFER_LEN);
}

/* count buffers (lengths from common), each filled with a pattern of
 * salt through the stand-in; with free_one, the last is freed again and
 * its id returned (0 otherwise). */
static inline uint64_t fuzz_buffers_make(fuzz_input *in, size_t count,
                                         bool free_one,
                                         const size_t common[8],
                                         uint8_t salt)
{
    for (size_t b = 0; b < count; b++) {
        curd_buffer buffer;
        size_t len = fuzz_buffer_len(in, common);
        FUZZ_CHECK(curd_buffer_alloc(device, len, &buffer) == CURD_OK);
        FUZZ_CHECK(curd_buffer_device_ptr(device, buffer,
                                          &live_ptrs[live_count])
                   == CURD_OK);
        live_ids[live_count] = buffer.id;
        live_lens[live_count] = len;
        live_bytes[live_count] =
            (unsigned char *)(uintptr_t)live_ptrs[live_count];
        for (size_t at = 0; at < len; at++)
            model[live_count][at] = (uint8_t)(at * 131u + b * 29u + salt + 1u);
        memcpy(live_bytes[live_count], model[live_count], len);
        live_count++;
    }
    if (!free_one || live_count < 2)
        return 0;
    uint64_t freed = live_ids[live_count - 1];
    FUZZ_CHECK(curd_buffer_free(device, (curd_buffer){freed}) == CURD_OK);
    stale_ring[stale_next++ % FUZZ_STALE_RING] = freed;
    live_count--;
    return freed;
}

/* Frees the input's buffers; their ids join the stale ring. */
static inline void fuzz_buffers_release(void)
{
    for (size_t b = 0; b < live_count; b++) {
        FUZZ_CHECK(curd_buffer_free(device, (curd_buffer){live_ids[b]})
                   == CURD_OK);
        stale_ring[stale_next++ % FUZZ_STALE_RING] = live_ids[b];
    }
    live_count = 0;
}

/* The index of a live buffer, SIZE_MAX for any other id. */
static inline size_t fuzz_live_index(uint64_t id)
{
    for (size_t b = 0; b < live_count; b++)
        if (live_ids[b] == id && id != 0)
            return b;
    return SIZE_MAX;
}

/* A handle: a live buffer (*buffer its index), the one freed now, one
 * freed by an earlier input, one of the second device, zero, or 64 forged
 * bits (*buffer SIZE_MAX for all those). */
static inline uint64_t fuzz_decode_id(fuzz_input *in, uint64_t freed_now,
                                      size_t *buffer)
{
    uint8_t pick = fuzz_u8(in);
    *buffer = SIZE_MAX;
    switch (pick % 10u) {
    case 6:
        return freed_now;
    case 7:
        return stale_ring[(pick >> 4) % FUZZ_STALE_RING];
    case 8:
        return (pick & 0x10u) ? foreign_ids[(pick >> 5) & 1u] : 0;
    case 9:
        return fuzz_u64(in);
    default:
        *buffer = (size_t)(pick >> 4) % live_count;
        return live_ids[*buffer];
    }
}

/* Whether message names "<noun> <index>" (not a longer number). */
static inline bool fuzz_names(const char *message, const char *noun,
                              size_t index)
{
    char want[64];
    snprintf(want, sizeof want, "%s %zu", noun, index);
    for (const char *at = strstr(message, want); at != NULL;
         at = strstr(at + 1, want)) {
        char next = at[strlen(want)];
        if (next < '0' || next > '9')
            return true;
    }
    return false;
}

#endif
