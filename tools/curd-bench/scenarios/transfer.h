/* transfer.h - the copies that the transfer scenarios (scenarios/transfer.c)
 * and the size sweeps (scenarios/sweep.c) time, and the set-up and checks
 * around them. */
#ifndef CURD_TOOLS_CURD_BENCH_SCENARIOS_TRANSFER_H
#define CURD_TOOLS_CURD_BENCH_SCENARIOS_TRANSFER_H

#include "harness/common.h"

/* What one timed variant works on. */
typedef struct bench_copy_op {
    const bench_env *env;
    curd_buffer buffer;
    bench_cu_deviceptr device_ptr;
    bench_cu_stream stream;
    void *host; /* source of an upload, destination of a download */
    void *host_out; /* the download side of a round trip */
    size_t byte_len;
    const curd_download *items; /* batched reads */
    const curd_upload *upload_items; /* batched writes */
    size_t item_count;
    size_t piece_bytes;
    /* Raw pieces: piece i is at offsets[i] in the buffer (NULL: at
     * i * stride, where stride 0 is piece_bytes) and at i * piece_bytes
     * in host memory. */
    size_t stride;
    const size_t *offsets;
    /* Pinned memory a raw staged copy goes through (byte_len of it). */
    void *bounce;
} bench_copy_op;

/* The resources one scenario holds; bench_transfer_free releases whatever is
 * set. */
typedef struct bench_transfer_state {
    const bench_env *env;
    size_t byte_len;
    curd_buffer buffer;
    bench_cu_deviceptr device_ptr;
    bench_cu_stream stream;
    bool have_stream;
    unsigned char *reference; /* the random bytes (malloc) */
    unsigned char *scratch;   /* read-back and poison (malloc) */
    unsigned char *host;      /* the caller's memory (malloc) */
    bool host_registered;
    void *pinned; /* cuMemHostAlloc */
    void *pinned_out; /* cuMemHostAlloc, round trips */
    unsigned char *host_out; /* malloc, round trips */
} bench_transfer_state;

/* Timed operations over a bench_copy_op (bench_op_fn): curd's
 * synchronous upload and download of the whole buffer, and the raw
 * driver's synchronous copy and asynchronous copy plus one
 * cuStreamSynchronize, each with the context pushed once per batch. */
int bench_op_curd_upload(void *op, uint64_t iterations);
int bench_op_curd_download(void *op, uint64_t iterations);
int bench_op_raw_htod_sync(void *op, uint64_t iterations);
int bench_op_raw_htod_async(void *op, uint64_t iterations);
int bench_op_raw_dtoh_sync(void *op, uint64_t iterations);
int bench_op_raw_dtoh_async(void *op, uint64_t iterations);
/* The raw driver staging by hand on the calling thread: memcpy into the
 * op's bounce, then its asynchronous copy and one cuStreamSynchronize
 * (upload); the copy and the fence, then memcpy out of the bounce
 * (download). What one core allows a pageable transfer without curd. */
int bench_op_raw_htod_staged(void *op, uint64_t iterations);
int bench_op_raw_dtoh_staged(void *op, uint64_t iterations);
/* curd_download_batch / curd_upload_batch of the op's items. */
int bench_op_curd_download_batch(void *op, uint64_t iterations);
int bench_op_curd_upload_batch(void *op, uint64_t iterations);
/* item_count raw cuMemcpy*Async of piece_bytes each (see stride), then one
 * cuStreamSynchronize. */
int bench_op_raw_dtoh_pieces(void *op, uint64_t iterations);
int bench_op_raw_htod_pieces(void *op, uint64_t iterations);

/* The resident buffer of byte_len, a stream, the random reference bytes and
 * a scratch buffer; the scenario adds the rest. */
int bench_transfer_init(bench_transfer_state *state, const bench_env *env,
                        size_t byte_len, uint64_t seed_salt);
/* Releases whatever is set. */
void bench_transfer_free(bench_transfer_state *state);
/* The caller's memory (malloc, every page touched), registered with
 * curd_host_register when asked. */
int bench_transfer_add_host(bench_transfer_state *state, bool registered);
/* byte_len of cuMemHostAlloc memory, zeroed, in *out. */
int bench_transfer_add_pinned(bench_transfer_state *state, void **out,
                              size_t byte_len);
/* An operation on the state's buffer and stream, with host memory host. */
bench_copy_op bench_make_op(const bench_transfer_state *state, void *host);

/* Poisons destination[0, byte_len), runs op once and compares every byte
 * with expected. */
int bench_check_read_into(bench_op_fn op, void *context, void *destination,
                          const void *expected, size_t byte_len,
                          const char *what);
/* Poisons [device_ptr, + byte_len) through a raw copy of poisoned
 * scratch, runs op once, reads the range back with a raw copy into
 * poisoned scratch and compares every byte with expected. */
int bench_check_write_to(const bench_env *env, bench_op_fn op, void *context,
                         bench_cu_deviceptr device_ptr, unsigned char *scratch,
                         const void *expected, size_t byte_len,
                         const char *what);
/* Poisons the device buffer, runs one upload, reads the buffer back with a
 * raw copy into poisoned memory and compares every byte. */
int bench_check_upload(bench_transfer_state *state, bench_op_fn op,
                       void *context, const char *what);
/* Poisons the destination, runs one download of the buffer (which holds
 * the reference bytes) and compares every byte. */
int bench_check_download(bench_transfer_state *state, bench_op_fn op,
                         void *context, void *destination, const char *what);

/* Raw copies outside the timed region, for set-up and checks; 0, or -1
 * after bench_fail(). */
int bench_raw_copy_in(const bench_env *env, bench_cu_deviceptr device_ptr,
                      const void *host, size_t byte_len);
int bench_raw_copy_out(const bench_env *env, void *host,
                       bench_cu_deviceptr device_ptr, size_t byte_len);

/* Runs one batch and notes how many DMA operations and fences it cost
 * (from curd_device_stats of the op's device). */
int bench_note_batch_cost(bench_scenario *scenario, bench_copy_op *op,
                          bool upload, const char *what);

/* Whether the device can page-lock caller memory (curd_host_register). */
bool bench_has_host_register(const bench_env *env);

#endif
