/* bench-transfer.h - the copies that the transfer scenarios (bench-transfer.c)
 * and the size sweeps (bench-sweep.c) time, and the set-up and checks
 * around them. */
#ifndef CURD_BENCH_TRANSFER_H
#define CURD_BENCH_TRANSFER_H

#include "bench-common.h"

/* What one timed variant works on. */
typedef struct bench_copy_op {
    const bench_env *env;
    curd_buffer buffer;
    bench_cu_deviceptr device_ptr;
    bench_cu_stream stream;
    void *host; /* source of an upload, destination of a download */
    void *host_out; /* the download side of a round trip */
    size_t byte_len;
    const curd_download *items; /* fused reads */
    size_t item_count;
    size_t piece_bytes;
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

/* Poisons the device buffer, runs one upload, reads the buffer back with a
 * raw copy into poisoned memory and compares every byte. */
int bench_check_upload(bench_transfer_state *state, bench_op_fn op,
                       void *context, const char *what);
/* Poisons the destination, runs one download of the buffer (which holds
 * the reference bytes) and compares every byte. */
int bench_check_download(bench_transfer_state *state, bench_op_fn op,
                         void *context, void *destination, const char *what);

/* Raw synchronous copies (cuMemcpyHtoD, cuMemcpyDtoH) with the context
 * pushed, for set-up and checks outside the timed region: a path
 * independent of curd's. */
int bench_raw_copy_in(const bench_env *env, bench_cu_deviceptr device_ptr,
                      const void *host, size_t byte_len);
int bench_raw_copy_out(const bench_env *env, void *host,
                       bench_cu_deviceptr device_ptr, size_t byte_len);

/* Whether the device can page-lock caller memory (curd_host_register). */
bool bench_has_host_register(const bench_env *env);

#endif
