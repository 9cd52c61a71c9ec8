/* fence.c - words a stream writes when its work is done (see fence.h). */
#include "core/fence.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"

#define BEACON_LINE_BYTES 64u
#define BEACON_PAGE_BYTES (CURDI_BEACON_WORDS * BEACON_LINE_BYTES)
/* Polls between two readings of the clock. */
#define BEACON_POLLS_PER_CLOCK 64u

struct curdi_fence_state {
    uint64_t spin_ns; /* fixed once the device is open */
    /* The driver has the entry points the words need. */
    bool writable;
    /* Made by the first wait that polls (make_page), under page_lock;
     * page_ready says, with release and acquire, that page and
     * device_page are set. */
    pthread_mutex_t page_lock;
    atomic_bool page_ready;
    unsigned char *page;
    curdi_cu_deviceptr device_page;
    /* Bit i set: word i is free. */
    _Atomic uint64_t free_words;
    /* The last value asked of each word, read and written only by the
     * word's holder (taking and giving back order the holders). */
    uint32_t values[CURDI_BEACON_WORDS];
    /* The driver answered a write with CUDA_ERROR_NOT_SUPPORTED: every
     * wait from then on is the driver's. */
    atomic_bool unsupported;
    _Atomic uint64_t seen;
    _Atomic uint64_t synced;
};

curd_status curdi_fence_open(curd_device *device)
{
    const curdi_driver *driver = curdi_driver_get();
    struct curdi_fence_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not allocate the device's fence state."
                          " Fix: free host memory.");
    if (pthread_mutex_init(&state->page_lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "could not initialise the fence state's lock."
                          " Fix: free system resources.");
    }
    state->writable = driver->cuStreamWriteValue32 != NULL
                      && driver->cuMemHostGetDevicePointer != NULL;
    atomic_store(&state->free_words, UINT64_MAX);
    device->fence = state;
    return CURD_OK;
}

void curdi_fence_close(curd_device *device)
{
    struct curdi_fence_state *state;
    if (device == NULL || device->fence == NULL)
        return;
    state = device->fence;
    /* Errors have nowhere to go at close. */
    if (state->page != NULL && curdi_driver_usable())
        (void)curdi_driver_note(
            curdi_driver_get()->cuMemFreeHost(state->page));
    pthread_mutex_destroy(&state->page_lock);
    free(state);
    device->fence = NULL;
}

/* The page, made on the first call (context current): false when the
 * driver could not make it, this time (the wait is then the driver's; a
 * later wait tries again). */
static bool make_page(struct curdi_fence_state *state)
{
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_result cu_result;
    void *page = NULL;
    curdi_cu_deviceptr device_page = 0;
    if (atomic_load_explicit(&state->page_ready, memory_order_acquire))
        return true;
    pthread_mutex_lock(&state->page_lock);
    if (atomic_load_explicit(&state->page_ready, memory_order_relaxed)) {
        pthread_mutex_unlock(&state->page_lock);
        return true;
    }
    cu_result = curdi_driver_note(driver->cuMemHostAlloc(
        &page, BEACON_PAGE_BYTES,
        CURDI_CU_MEMHOSTALLOC_PORTABLE | CURDI_CU_MEMHOSTALLOC_DEVICEMAP));
    if (cu_result == CURDI_CUDA_SUCCESS) {
        cu_result = curdi_driver_note(
            driver->cuMemHostGetDevicePointer(&device_page, page, 0));
        if (cu_result != CURDI_CUDA_SUCCESS)
            (void)curdi_driver_note(driver->cuMemFreeHost(page));
    }
    if (cu_result != CURDI_CUDA_SUCCESS) {
        pthread_mutex_unlock(&state->page_lock);
        curdi_trace("the fence page could not be made (%u): this wait is "
                    "cuStreamSynchronize",
                    cu_result);
        return false;
    }
    /* Zero is no word's first value (values start at 1). No stream can
     * write the page before page_ready publishes it. */
    memset(page, 0, BEACON_PAGE_BYTES);
    state->page = page;
    state->device_page = device_page;
    atomic_store_explicit(&state->page_ready, true, memory_order_release);
    pthread_mutex_unlock(&state->page_lock);
    return true;
}

/* A free word, taken; CURDI_BEACON_WORDS when none is free. */
static unsigned take_word(struct curdi_fence_state *state)
{
    uint64_t free_words =
        atomic_load_explicit(&state->free_words, memory_order_relaxed);
    while (free_words != 0) {
        unsigned word = (unsigned)__builtin_ctzll(free_words);
        if (atomic_compare_exchange_weak_explicit(
                &state->free_words, &free_words,
                free_words & ~((uint64_t)1 << word), memory_order_acquire,
                memory_order_relaxed))
            return word;
    }
    return CURDI_BEACON_WORDS;
}

static void give_word(struct curdi_fence_state *state, unsigned word)
{
    CURDI_ASSERT(word < CURDI_BEACON_WORDS);
    uint64_t before = atomic_fetch_or_explicit(
        &state->free_words, (uint64_t)1 << word, memory_order_release);
    /* A word is given back once, by whoever took it. */
    CURDI_ASSERT((before & ((uint64_t)1 << word)) == 0);
    (void)before;
}

/* Whether each of `count` words reads `value` within spin_ns. The
 * acquire loads order the caller's later reads of the work's bytes after
 * them. */
static bool poll_words(const uint32_t *words, unsigned count, uint32_t value,
                       uint64_t spin_ns)
{
    uint64_t deadline = 0;
    unsigned seen = 0;
    for (unsigned polls = 0;; polls++) {
        while (seen < count
               && __atomic_load_n(&words[seen], __ATOMIC_ACQUIRE) == value)
            seen++;
        if (seen == count)
            return true;
        if (polls % BEACON_POLLS_PER_CLOCK == 0) {
            uint64_t now = curdi_clock_ns();
            if (deadline == 0)
                deadline = now + spin_ns;
            else if (now >= deadline)
                return false;
        }
        curdi_clock_pause();
    }
}

/* Asks the stream to write word's next value and polls for it: SUCCESS
 * once seen; NOT_READY when the poll ran out or the driver does not
 * support the write (the caller then waits in the driver); the driver's
 * error when it refused the write otherwise. */
static curdi_cu_result wait_on_word(struct curdi_fence_state *state,
                                    unsigned word, curdi_cu_stream stream,
                                    uint64_t spin_ns)
{
    const size_t offset = (size_t)word * BEACON_LINE_BYTES;
    uint32_t value = state->values[word] + 1u;
    curdi_cu_result cu_result;
    /* A value of 0 could be a fresh word's: skip it when the count wraps. */
    if (value == 0)
        value = 1;
    state->values[word] = value;
    cu_result = curdi_driver_note(curdi_driver_get()->cuStreamWriteValue32(
        stream, state->device_page + offset, value,
        CURDI_CU_STREAM_WRITE_VALUE_DEFAULT));
    if (cu_result == CURDI_CUDA_SUCCESS)
        return poll_words((const uint32_t *)(state->page + offset), 1u, value,
                          spin_ns)
                   ? CURDI_CUDA_SUCCESS
                   : CURDI_CUDA_ERROR_NOT_READY;
    if (cu_result == CURDI_CUDA_ERROR_NOT_SUPPORTED) {
        if (!atomic_exchange(&state->unsupported, true))
            curdi_trace("cuStreamWriteValue32 is not supported here: "
                        "transfers wait in cuStreamSynchronize");
        return CURDI_CUDA_ERROR_NOT_READY;
    }
    return cu_result;
}

void curdi_fence_set_spin(curd_device *device, uint64_t spin_ns)
{
    device->fence->spin_ns = spin_ns;
}

/* The fence's answer; a stream seen through its work has passed the
 * device's waits recorded on it. */
static curdi_cu_result fence_passed(curd_device *device,
                                    curdi_cu_stream stream,
                                    curdi_cu_result cu_result)
{
    if (cu_result == CURDI_CUDA_SUCCESS)
        curdi_waits_stream_passed(device, stream);
    return cu_result;
}

curdi_cu_result curdi_fence_sync(curd_device *device, curdi_cu_stream stream,
                                 const char **out_call)
{
    atomic_fetch_add_explicit(&device->fence->synced, 1u,
                              memory_order_relaxed);
    *out_call = "cuStreamSynchronize";
    return fence_passed(device, stream,
                        curdi_driver_note(
                            curdi_driver_get()->cuStreamSynchronize(stream)));
}

curdi_cu_result curdi_fence_wait(curd_device *device, curdi_cu_stream stream,
                                  const char **out_call)
{
    struct curdi_fence_state *state = device->fence;
    uint64_t spin_ns = state->spin_ns;
    if (spin_ns > 0 && state->writable
        && !atomic_load_explicit(&state->unsupported, memory_order_relaxed)
        && make_page(state)) {
        unsigned word = take_word(state);
        if (word < CURDI_BEACON_WORDS) {
            curdi_cu_result cu_result =
                wait_on_word(state, word, stream, spin_ns);
            give_word(state, word);
            if (cu_result != CURDI_CUDA_ERROR_NOT_READY) {
                *out_call = "cuStreamWriteValue32";
                if (cu_result == CURDI_CUDA_SUCCESS)
                    atomic_fetch_add_explicit(&state->seen, 1u,
                                              memory_order_relaxed);
                return fence_passed(device, stream, cu_result);
            }
        }
    }
    return curdi_fence_sync(device, stream, out_call);
}

bool curdi_fence_signal_seen(curd_device *device, curdi_cu_stream stream,
                             const uint32_t *words, unsigned count)
{
    struct curdi_fence_state *state = device->fence;
    if (state->spin_ns == 0 || !poll_words(words, count, 1u, state->spin_ns))
        return false;
    atomic_fetch_add_explicit(&state->seen, 1u, memory_order_relaxed);
    (void)fence_passed(device, stream, CURDI_CUDA_SUCCESS);
    return true;
}

bool curdi_fence_available(const curd_device *device)
{
    const struct curdi_fence_state *state = device->fence;
    return state->writable && !atomic_load(&state->unsupported);
}

void curdi_fence_counts(const curd_device *device, uint64_t *out_seen,
                         uint64_t *out_synced)
{
    struct curdi_fence_state *state = device->fence;
    *out_seen = atomic_load(&state->seen);
    *out_synced = atomic_load(&state->synced);
}
