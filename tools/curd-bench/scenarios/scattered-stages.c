/* scattered-stages.c - the stages of a cold scattered transfer (see
 * scattered-stages.h). */
#include "scenarios/scattered-stages.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define PAGE_BYTES 4096u

bool bench_stages_wanted(void)
{
    const char *value = getenv(BENCH_STAGES_VARIABLE);
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

int bench_stage_copy(void *opaque, uint64_t iterations)
{
    bench_stage_op *op = opaque;
    for (uint64_t i = 0; i < iterations; i++) {
        if (op->upload)
            memcpy(op->pinned, op->host, op->byte_len);
        else
            memcpy(op->host, op->pinned, op->byte_len);
    }
    return 0;
}

bool bench_stage_has_streaming(void)
{
#if defined(__SSE2__)
    return true;
#else
    return false;
#endif
}

/* 16-byte aligned ends (both areas are page-aligned, the length a
 * multiple of 4 KiB): loads through the cache, stores around it. */
static void copy_streaming(unsigned char *dst, const unsigned char *src,
                           size_t byte_len)
{
#if defined(__SSE2__)
    for (size_t at = 0; at + 64 <= byte_len; at += 64) {
        const __m128i *from = (const __m128i *)(const void *)(src + at);
        __m128i *to = (__m128i *)(void *)(dst + at);
        __m128i a = _mm_load_si128(from);
        __m128i b = _mm_load_si128(from + 1);
        __m128i c = _mm_load_si128(from + 2);
        __m128i d = _mm_load_si128(from + 3);
        _mm_stream_si128(to, a);
        _mm_stream_si128(to + 1, b);
        _mm_stream_si128(to + 2, c);
        _mm_stream_si128(to + 3, d);
    }
    _mm_sfence();
#else
    memcpy(dst, src, byte_len);
#endif
}

int bench_stage_copy_streaming(void *opaque, uint64_t iterations)
{
    bench_stage_op *op = opaque;
    for (uint64_t i = 0; i < iterations; i++) {
        if (op->upload)
            copy_streaming(op->pinned, op->host, op->byte_len);
        else
            copy_streaming(op->host, op->pinned, op->byte_len);
    }
    return 0;
}

int bench_stage_touch_pages(void *opaque, uint64_t iterations)
{
    bench_stage_op *op = opaque;
    volatile unsigned char *host = op->host;
    unsigned sum = 0;
    for (uint64_t i = 0; i < iterations; i++)
        for (size_t at = 0; at < op->byte_len; at += PAGE_BYTES) {
            /* A download's destination is written: the store of the
             * byte the page holds (the bytes stay what they were). */
            unsigned char byte = host[at];
            if (op->upload)
                sum += byte;
            else
                host[at] = byte;
        }
    (void)sum;
    return 0;
}

long bench_stage_minor_faults(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0;
    return usage.ru_minflt;
}
