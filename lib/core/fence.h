/* fence.h - the fence module: words of page-locked host memory that a
 * stream's work writes when it reaches them, so that a thread waiting for
 * a short piece of work sees its end with a load instead of a driver
 * wait.
 *
 * Why: the driver's own wait adds to every synchronous transfer a cost
 * that a word written by the stream does not. On the H100 host of
 * doc/PERFORMANCE.md (raw driver, same run), a 4 KiB DMA fenced by
 * cuStreamSynchronize took 7.46 us down and 7.82 us up; fenced by a
 * cuStreamWriteValue32 behind it and a poll of the word, 6.62 and
 * 7.21 us (64 KiB: 8.60 against 7.84, 9.23 against 8.74).
 *
 * The module owns one page (made at the first wait), mapped for the
 * device, of CURDI_BEACON_WORDS words, each on a cache line of its own,
 * and hands them out one per wait: a waiter takes a free word, asks its
 * stream to write the word's next value behind the work enqueued so far
 * (the write waits for that
 * work and is preceded by a system-wide memory fence, so the work's bytes
 * are visible once the value is), polls for up to spin_ns, and gives the
 * word back. Work that takes longer, every word taken, or a driver
 * without stream memory operations (no entry point, or
 * CUDA_ERROR_NOT_SUPPORTED): the wait is cuStreamSynchronize, as before,
 * and its result is the wait's. A write the driver refuses otherwise is
 * the wait's failure, like any enqueue that fails. A stream whose work
 * fails never writes the value; the driver wait then reports the
 * failure.
 *
 * Behind curd_device.fence; lock-free (the free words are one atomic
 * mask; a word's value belongs to whoever holds the word). */
#ifndef CURD_LIB_CORE_FENCE_H
#define CURD_LIB_CORE_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"

struct curd_device;

/* Words on one page, one per 64-byte line. */
#define CURDI_BEACON_WORDS 64u

/* Creates the module; no driver call: the page is made by the first wait
 * that polls, so a device that never waits holds none (and a close after
 * the driver's teardown, which makes no driver call, leaves none behind).
 * A page that cannot be made leaves that wait to the driver; a later one
 * tries again. A driver without cuStreamWriteValue32 or
 * cuMemHostGetDevicePointer gets no page and every wait is the driver's. */
curd_status curdi_fence_open(struct curd_device *device);
/* Frees the page, if made (context current). NULL-safe. */
void curdi_fence_close(struct curd_device *device);

/* How long a wait polls its word, in nanoseconds (0: waits are the
 * driver's alone); set once as the device opens, before any wait (the
 * transfer module sets it from the device's tuning, CURD_FENCE_SPIN_US). */
void curdi_fence_set_spin(struct curd_device *device, uint64_t spin_ns);

/* Waits for the work enqueued on `stream` so far (context current), as
 * above. For a wait that follows its work's enqueue at once: for work
 * that may have ended long ago, cuStreamSynchronize returns at once,
 * where the word still has to cross the bus. Returns the driver's result,
 * with *out_call the call it came from. */
curdi_cu_result curdi_fence_wait(struct curd_device *device,
                                  curdi_cu_stream stream,
                                  const char **out_call);

/* Whether work enqueued on `stream`, whose last kernel writes 1 to each
 * of `count` words of page-locked memory once its bytes are visible (the
 * caller cleared them before enqueueing it: curd_gather's signal,
 * lib/transfer/gather.h), is seen done by polling those words for up to
 * spin_ns; no driver call, so no context needed. False: the caller waits
 * with curdi_fence_sync. The stream needs no word of the module's, nor the
 * driver call that asks for it: on the H100 of doc/PERFORMANCE.md a graph
 * that ends in such a kernel returns 0.6 to 1.0 us sooner than one that
 * the stream's word follows. */
bool curdi_fence_signal_seen(struct curd_device *device,
                             curdi_cu_stream stream, const uint32_t *words,
                             unsigned count);
/* The driver's wait for `stream` (context current), counted as a wait
 * that did not end on a word; returns as curdi_fence_wait. */
curdi_cu_result curdi_fence_sync(struct curd_device *device,
                                 curdi_cu_stream stream,
                                 const char **out_call);

/* Whether waits may end on a word: the driver has the entry points and
 * no write was refused as unsupported (the tests' view: which call a
 * fence makes first, once the page is made). */
bool curdi_fence_available(const struct curd_device *device);

/* How many waits ended on their word and how many in the driver's wait
 * (the tests' view). */
void curdi_fence_counts(const struct curd_device *device,
                         uint64_t *out_seen, uint64_t *out_synced);

#endif
