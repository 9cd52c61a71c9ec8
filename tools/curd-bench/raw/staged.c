/* staged.c - the raw staged upload that raw/staged.h describes. */
#include "raw/staged.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGED_CHUNK_BYTES ((size_t)BENCH_STAGED_CHUNK_MIB * 1024 * 1024)
#define STAGED_SLOTS BENCH_STAGED_SLOTS
/* Slices start on a page. */
#define STAGED_SLICE_ALIGN ((size_t)4096)

typedef struct staged_helper {
    bench_staged *staged;
    unsigned index;
} staged_helper;

struct bench_staged {
    const bench_env *env;
    bench_cu_deviceptr device_ptr;
    const unsigned char *host;
    size_t byte_len;
    void *slots[STAGED_SLOTS];
    bench_cu_stream streams[STAGED_SLOTS];
    unsigned helper_count; /* the threads that copy but the caller */
    pthread_t helpers[BENCH_STAGED_THREADS];
    staged_helper helper_args[BENCH_STAGED_THREADS];
    /* Helpers sleep on `wake` unless polling is set (an upload runs) or
     * quit is. */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool quit;
    atomic_bool polling;
    /* The chunk to copy: written before chunk_number moves on, read by a
     * helper after it sees the move; each helper adds one to slices_done
     * when its slice is in. */
    unsigned char *chunk_dst;
    const unsigned char *chunk_src;
    size_t chunk_len;
    atomic_uint chunk_number;
    atomic_uint slices_done;
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Thread `index` of `threads` copies its fixed slice of the chunk. */
static void copy_slice(const bench_staged *s, unsigned index)
{
    unsigned threads = bench_staged_threads(s);
    size_t per = s->chunk_len / threads / STAGED_SLICE_ALIGN *
                 STAGED_SLICE_ALIGN;
    size_t start = per * index;
    size_t len = index + 1 == threads ? s->chunk_len - start : per;
    memcpy(s->chunk_dst + start, s->chunk_src + start, len);
}

static void *helper_main(void *opaque)
{
    staged_helper *helper = opaque;
    bench_staged *s = helper->staged;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!atomic_load(&s->polling) && !s->quit)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->quit) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        pthread_mutex_unlock(&s->lock);
        /* The caller waits for every helper's slice of a chunk before
         * the next, so no chunk is missed. */
        while (atomic_load(&s->polling)) {
            unsigned number = atomic_load(&s->chunk_number);
            if (number == seen) {
                relax();
                continue;
            }
            seen = number;
            copy_slice(s, helper->index);
            atomic_fetch_add(&s->slices_done, 1);
        }
    }
}

static void set_polling(bench_staged *s, bool polling)
{
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->polling, polling);
    if (polling)
        pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

/* One upload, the context current. */
static int upload_chunks(bench_staged *s)
{
    const bench_cuda *driver = s->env->cu;
    size_t offset;
    unsigned chunk = 0, slot;
    for (offset = 0; offset < s->byte_len;
         offset += STAGED_CHUNK_BYTES, chunk++) {
        slot = chunk % STAGED_SLOTS;
        if (chunk >= STAGED_SLOTS)
            BENCH_CU(driver->cuStreamSynchronize(s->streams[slot]));
        s->chunk_dst = s->slots[slot];
        s->chunk_src = s->host + offset;
        s->chunk_len = s->byte_len - offset < STAGED_CHUNK_BYTES
                           ? s->byte_len - offset
                           : STAGED_CHUNK_BYTES;
        atomic_store(&s->slices_done, 0);
        atomic_fetch_add(&s->chunk_number, 1);
        copy_slice(s, 0);
        while (atomic_load(&s->slices_done) != s->helper_count)
            relax();
        BENCH_CU(driver->cuMemcpyHtoDAsync(
            s->device_ptr + (bench_cu_deviceptr)offset, s->slots[slot],
            s->chunk_len, s->streams[slot]));
    }
    for (slot = 0; slot < STAGED_SLOTS; slot++)
        BENCH_CU(driver->cuStreamSynchronize(s->streams[slot]));
    return 0;
}

int bench_op_staged_upload(void *opaque, uint64_t iterations)
{
    bench_staged *s = opaque;
    uint64_t iteration;
    int result = 0;
    if (bench_raw_enter(s->env) != 0)
        return -1;
    set_polling(s, true);
    for (iteration = 0; iteration < iterations && result == 0; iteration++)
        result = upload_chunks(s);
    set_polling(s, false);
    bench_raw_leave(s->env);
    return result;
}

unsigned bench_staged_threads(const bench_staged *staged)
{
    return staged->helper_count + 1;
}

static unsigned thread_budget(void)
{
    long spare = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    if (spare < 1)
        return 1;
    return spare < (long)BENCH_STAGED_THREADS ? (unsigned)spare
                                              : BENCH_STAGED_THREADS;
}

int bench_staged_create(const bench_env *env, bench_cu_deviceptr device_ptr,
                        const void *host, size_t byte_len,
                        bench_staged **out)
{
    bench_staged *s = calloc(1, sizeof *s);
    unsigned slot, wanted;
    bench_cu_result cu_result = BENCH_CUDA_SUCCESS;
    if (s == NULL)
        return bench_fail("out of memory for the staged pipeline");
    s->env = env;
    s->device_ptr = device_ptr;
    s->host = host;
    s->byte_len = byte_len;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    *out = s;
    for (slot = 0; slot < STAGED_SLOTS; slot++)
        if (bench_stream_acquire(env, &s->streams[slot]) != 0)
            return -1;
    if (bench_raw_enter(env) != 0)
        return -1;
    for (slot = 0; slot < STAGED_SLOTS && cu_result == BENCH_CUDA_SUCCESS;
         slot++)
        cu_result = env->cu->cuMemHostAlloc(&s->slots[slot],
                                             STAGED_CHUNK_BYTES, 0);
    bench_raw_leave(env);
    if (cu_result != BENCH_CUDA_SUCCESS)
        return bench_fail_cu("cuMemHostAlloc", cu_result);
    /* Helpers the system refuses leave fewer threads, not a failure. */
    wanted = thread_budget() - 1;
    while (s->helper_count < wanted) {
        staged_helper *arg = &s->helper_args[s->helper_count];
        arg->staged = s;
        arg->index = s->helper_count + 1;
        if (pthread_create(&s->helpers[s->helper_count], NULL, helper_main,
                           arg) != 0)
            break;
        s->helper_count++;
    }
    return 0;
}

void bench_staged_destroy(bench_staged *s)
{
    unsigned i;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->quit = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    for (i = 0; i < s->helper_count; i++)
        pthread_join(s->helpers[i], NULL);
    if (bench_raw_enter(s->env) == 0) {
        for (i = 0; i < STAGED_SLOTS; i++)
            if (s->slots[i] != NULL)
                s->env->cu->cuMemFreeHost(s->slots[i]);
        bench_raw_leave(s->env);
    }
    for (i = 0; i < STAGED_SLOTS; i++)
        bench_stream_release(s->env, s->streams[i]);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
