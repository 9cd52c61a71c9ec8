/* test-comm.c - communicators and collectives across two GPUs of this
 * process: every kind of collective, every type and reduction, checked
 * element by element against a host reference (integers exactly; floats
 * within two units in the last place of the type: each GPU result is one
 * correctly rounded operation on inputs the type holds exactly); ranks in
 * one thread (curd_comm_open_all) and in two threads joined by an id;
 * refusals that enqueue nothing; a rank that never calls, caught by the
 * timeout, with the device usable after; a device closed under its
 * communicator; splits; the launcher environment; collectives recorded
 * in batches with a kernel and a download, streamed and captured into a
 * graph, each rank's batch run from its own thread and replayed with
 * fresh data, and a peer that never comes during a batch run.
 *
 * Every test opens devices 0 and 1, or skips ("needs 2 GPUs", or NCCL
 * missing). In its stand-in twin test-comm-fake (CURD_TEST_ON_FAKE,
 * tests/README.md) the stand-in driver (two devices) and the stand-in NCCL
 * (tests/fake/fake-nccl.c) run every test, no skip is allowed, and the
 * tests that need the stand-ins' knobs run too (a stalled rank, an older
 * NCCL, every NCCL call failed in turn). */
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver/nccl.h"
#include "support/curd-test.h"
#include "support/float16.h"
#include "support/kernel-load.h"
#include "support/nccl-faults.h"

#if CURD_TEST_ON_FAKE
#define PATH_ROOT "/comm-fake"
#else
#define PATH_ROOT "/comm"
#endif

#define RANKS 2

static void check_ok(curd_status status, const char *call)
{
    if (status != CURD_OK)
        g_error("%s: %s: %s", call, curd_status_name(status),
                curd_last_error());
}

static void check_refused(curd_status status, curd_status want,
                          const char *what)
{
    if (status != want)
        g_error("%s: %s where %s was due: %s", what,
                curd_status_name(status), curd_status_name(want),
                curd_last_error());
    curd_test_assert_fix_sentence();
}

/* ------------------------------------------------------------------------
 * Two devices, two ranks
 * ---------------------------------------------------------------------- */
typedef struct pair {
    curd_device *devices[RANKS];
    curd_comm *comms[RANKS];
} pair;

/* Opens devices 0 and 1, or skips with the reason. */
static bool devices_open(curd_device **devices)
{
    curd_device *first = curd_test_gpu_open();
    if (first == NULL)
        return false;
    if (!curd_test_have_gpus(RANKS)) {
        check_ok(curd_device_close(first), "curd_device_close");
        return false;
    }
    devices[0] = first;
    check_ok(curd_device_open(1, NULL, &devices[1]), "curd_device_open(1)");
    return true;
}

/* Closes the devices that are open; on the stand-ins no communicator may
 * outlive them. */
static void devices_close(curd_device **devices)
{
    for (int r = 0; r < RANKS; r++)
        if (devices[r] != NULL)
            check_ok(curd_device_close(devices[r]), "curd_device_close");
#if CURD_TEST_ON_FAKE
    g_assert_cmpint(curd_test_fake_nccl_live(), ==, 0);
#endif
}

/* NCCL is there, or the test skips (a stand-in run must have it). */
static bool nccl_there(void)
{
    curd_comm_id id;
    curd_status status = curd_comm_id_new(&id);
#if !CURD_TEST_ON_FAKE
    if (status == CURD_E_UNSUPPORTED) {
        g_test_skip_printf("no NCCL: %s", curd_last_error());
        return false;
    }
#endif
    check_ok(status, "curd_comm_id_new");
    return true;
}

static bool pair_open(pair *p, uint32_t timeout_ms)
{
    memset(p, 0, sizeof *p);
    if (!devices_open(p->devices))
        return false;
    if (!nccl_there()) {
        devices_close(p->devices);
        return false;
    }
    curd_comm_options options;
    curd_comm_options_init(&options);
    options.timeout_ms = timeout_ms;
    check_ok(curd_comm_open_all(p->devices, RANKS, &options, p->comms),
             "curd_comm_open_all");
    return true;
}

/* Closes what is left; on the stand-ins no communicator may outlive it. */
static void pair_close(pair *p)
{
    for (int r = 0; r < RANKS; r++) {
        curd_status status = curd_comm_close(p->comms[r]);
        if (status != CURD_OK && status != CURD_E_COMM)
            check_ok(status, "curd_comm_close");
        p->comms[r] = NULL;
    }
    devices_close(p->devices);
}

static curd_buffer buffer_with(curd_device *device, const void *bytes,
                               size_t byte_len)
{
    curd_buffer buffer;
    check_ok(curd_buffer_alloc(device, byte_len, &buffer),
             "curd_buffer_alloc");
    check_ok(curd_buffer_upload(device, buffer, bytes, byte_len),
             "curd_buffer_upload");
    return buffer;
}

static unsigned char *download(curd_device *device, curd_buffer buffer,
                               size_t byte_len)
{
    unsigned char *bytes = g_malloc(byte_len);
    curd_test_poison(bytes, byte_len);
    check_ok(curd_buffer_download(device, buffer, bytes, byte_len),
             "curd_buffer_download");
    return bytes;
}

/* ------------------------------------------------------------------------
 * Elements and the host reference
 * ---------------------------------------------------------------------- */
static const char *const dtype_names[] = {
    "int8",    "uint8",    "int32",   "uint32",  "int64",
    "uint64",  "float16",  "bfloat16", "float32", "float64",
};
static const unsigned dtype_bytes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const char *const kind_names[] = {
    "all-reduce", "broadcast", "reduce", "all-gather", "reduce-scatter",
    "send-recv",
};

static bool is_float(curd_dtype dtype)
{
    return dtype >= CURD_DTYPE_FLOAT16;
}

static bool is_signed(curd_dtype dtype)
{
    return dtype == CURD_DTYPE_INT8 || dtype == CURD_DTYPE_INT32 ||
           dtype == CURD_DTYPE_INT64;
}

static double load_float(const unsigned char *at, curd_dtype dtype)
{
    uint16_t half;
    float single;
    double wide;
    switch (dtype) {
    case CURD_DTYPE_FLOAT16:
        memcpy(&half, at, 2);
        return float16_to_float(half);
    case CURD_DTYPE_BFLOAT16:
        memcpy(&half, at, 2);
        return bfloat16_to_float(half);
    case CURD_DTYPE_FLOAT32:
        memcpy(&single, at, 4);
        return single;
    default:
        memcpy(&wide, at, 8);
        return wide;
    }
}

static void store_float(unsigned char *at, curd_dtype dtype, double value)
{
    uint16_t half;
    float single = (float)value;
    switch (dtype) {
    case CURD_DTYPE_FLOAT16:
        half = float_to_float16(single);
        memcpy(at, &half, 2);
        break;
    case CURD_DTYPE_BFLOAT16:
        half = float_to_bfloat16(single);
        memcpy(at, &half, 2);
        break;
    case CURD_DTYPE_FLOAT32:
        memcpy(at, &single, 4);
        break;
    default:
        memcpy(at, &value, 8);
        break;
    }
}

/* An integer element as the 64-bit value it stands for (sign-extended for
 * the signed types); stored back truncated, so sums and products wrap as
 * they do on the GPU. */
static uint64_t load_int(const unsigned char *at, curd_dtype dtype)
{
    unsigned bytes = dtype_bytes[dtype];
    uint64_t value = 0;
    memcpy(&value, at, bytes); /* little-endian */
    if (is_signed(dtype) && bytes < 8 && (value >> (bytes * 8 - 1)) != 0)
        value |= ~(uint64_t)0 << (bytes * 8);
    return value;
}

static void store_int(unsigned char *at, curd_dtype dtype, uint64_t value)
{
    memcpy(at, &value, dtype_bytes[dtype]);
}

/* out = a op b, element by element; avg divides by RANKS. */
static void reduce_pair(unsigned char *out, const unsigned char *a,
                        const unsigned char *b, size_t count,
                        curd_dtype dtype, curd_reduce_op op)
{
    unsigned bytes = dtype_bytes[dtype];
    for (size_t i = 0; i < count; i++) {
        size_t at = i * bytes;
        if (is_float(dtype)) {
            double x = load_float(a + at, dtype), y = load_float(b + at, dtype);
            double r = op == CURD_REDUCE_PROD  ? x * y
                       : op == CURD_REDUCE_MIN ? fmin(x, y)
                       : op == CURD_REDUCE_MAX ? fmax(x, y)
                                               : x + y;
            if (op == CURD_REDUCE_AVG)
                r /= RANKS;
            store_float(out + at, dtype, r);
            continue;
        }
        uint64_t x = load_int(a + at, dtype), y = load_int(b + at, dtype);
        bool less = is_signed(dtype) ? (int64_t)x < (int64_t)y : x < y;
        uint64_t r = op == CURD_REDUCE_PROD  ? x * y
                     : op == CURD_REDUCE_MIN ? (less ? x : y)
                     : op == CURD_REDUCE_MAX ? (less ? y : x)
                                             : x + y;
        if (op == CURD_REDUCE_AVG) {
            /* The sum in the element type, then divided (avg data is
             * small, so no sum wraps). */
            store_int(out + at, dtype, r);
            r = load_int(out + at, dtype);
            r = is_signed(dtype) ? (uint64_t)((int64_t)r / RANKS) : r / RANKS;
        }
        store_int(out + at, dtype, r);
    }
}

/* Fresh random elements: any bits for integers (avg: small values), and
 * floats in [-1, 1] that the type holds exactly. */
static void fill_elements(unsigned char *at, size_t count, curd_dtype dtype,
                          curd_reduce_op op)
{
    unsigned bytes = dtype_bytes[dtype];
    if (!is_float(dtype)) {
        curd_test_fill_random(at, count * bytes);
        if (op == CURD_REDUCE_AVG)
            for (size_t i = 0; i < count; i++)
                store_int(at + i * bytes, dtype,
                          (uint64_t)g_test_rand_int_range(0, 100));
        return;
    }
    for (size_t i = 0; i < count; i++)
        store_float(at + i * bytes, dtype, g_test_rand_double_range(-1, 1));
}

/* Equal: integers bit for bit; floats within 2 units in the last place of
 * the type (machine epsilon scaled), or a tiny absolute slack near 0. */
static void assert_elements(const unsigned char *got,
                            const unsigned char *want, size_t count,
                            curd_dtype dtype, const char *what)
{
    unsigned bytes = dtype_bytes[dtype];
    if (!is_float(dtype)) {
        for (size_t i = 0; i < count; i++)
            if (memcmp(got + i * bytes, want + i * bytes, bytes) != 0)
                g_error("%s: element %zu is 0x%" PRIx64 ", expected 0x%" PRIx64,
                        what, i, load_int(got + i * bytes, dtype),
                        load_int(want + i * bytes, dtype));
        return;
    }
    double epsilon = dtype == CURD_DTYPE_FLOAT16    ? 0x1p-10
                     : dtype == CURD_DTYPE_BFLOAT16 ? 0x1p-7
                     : dtype == CURD_DTYPE_FLOAT32  ? 0x1p-23
                                                    : 0x1p-52;
    for (size_t i = 0; i < count; i++) {
        if (memcmp(got + i * bytes, want + i * bytes, bytes) == 0)
            continue; /* the same bits (an untouched poison too) */
        double g = load_float(got + i * bytes, dtype);
        double w = load_float(want + i * bytes, dtype);
        if (!(fabs(g - w) <= 2 * epsilon * fabs(w) + 1e-30))
            g_error("%s: element %zu is %.17g, expected %.17g (tolerance 2 "
                    "ulp)",
                    what, i, g, w);
    }
}

/* ------------------------------------------------------------------------
 * One collective of each rank, checked
 * ---------------------------------------------------------------------- */
typedef struct shape {
    int kind; /* kind_names; send-recv is a send and a receive per rank */
    curd_dtype dtype;
    curd_reduce_op op;
    int root;
} shape;

static void run_checked(pair *p, const shape *s)
{
    unsigned bytes = dtype_bytes[s->dtype];
    size_t count = (size_t)g_test_rand_int_range(1, 3000);
    size_t part = count * bytes;
    bool gathers = s->kind == CURD_COLLECTIVE_ALL_GATHER;
    bool scatters = s->kind == CURD_COLLECTIVE_REDUCE_SCATTER;
    size_t send_len = scatters ? part * RANKS : part;
    size_t recv_len = gathers ? part * RANKS : part;
    /* Ranges at an offset of whole elements into larger buffers. */
    size_t send_offset = bytes * (size_t)g_test_rand_int_range(0, 8);
    size_t recv_offset = bytes * (size_t)g_test_rand_int_range(0, 8);
    unsigned char *send[RANKS], *recv_before[RANKS], *want[RANKS];
    curd_buffer send_buffers[RANKS], recv_buffers[RANKS];
    curd_collective ops[2 * RANKS];
    size_t op_count = 0;
    for (int r = 0; r < RANKS; r++) {
        send[r] = g_malloc(send_offset + send_len);
        curd_test_fill_random(send[r], send_offset + send_len);
        fill_elements(send[r] + send_offset, send_len / bytes, s->dtype,
                      s->op);
        recv_before[r] = g_malloc(recv_offset + recv_len);
        curd_test_poison(recv_before[r], recv_offset + recv_len);
        want[r] = g_memdup2(recv_before[r], recv_offset + recv_len);
        send_buffers[r] =
            buffer_with(p->devices[r], send[r], send_offset + send_len);
        recv_buffers[r] = buffer_with(p->devices[r], recv_before[r],
                                      recv_offset + recv_len);
        curd_collective op = {
            .comm = p->comms[r],
            .kind = (curd_collective_kind)s->kind,
            .dtype = s->dtype,
            .op = s->op,
            .send = send_buffers[r],
            .send_offset = send_offset,
            .recv = recv_buffers[r],
            .recv_offset = recv_offset,
            .count = count,
            .root_or_peer = s->root,
        };
        if (s->kind == 5) { /* each rank sends to the other and receives */
            op.kind = CURD_COLLECTIVE_SEND;
            op.root_or_peer = 1 - r;
            ops[op_count++] = op;
            op.kind = CURD_COLLECTIVE_RECV;
        }
        ops[op_count++] = op;
    }
    /* The reference. */
    for (int r = 0; r < RANKS; r++) {
        unsigned char *out = want[r] + recv_offset;
        const unsigned char *in0 = send[0] + send_offset;
        const unsigned char *in1 = send[1] + send_offset;
        switch (s->kind) {
        case CURD_COLLECTIVE_ALL_REDUCE:
            reduce_pair(out, in0, in1, count, s->dtype, s->op);
            break;
        case CURD_COLLECTIVE_BROADCAST:
            memcpy(out, send[s->root] + send_offset, part);
            break;
        case CURD_COLLECTIVE_REDUCE:
            if (r == s->root)
                reduce_pair(out, in0, in1, count, s->dtype, s->op);
            break;
        case CURD_COLLECTIVE_ALL_GATHER:
            memcpy(out, in0, part);
            memcpy(out + part, in1, part);
            break;
        case CURD_COLLECTIVE_REDUCE_SCATTER:
            reduce_pair(out, in0 + part * (size_t)r, in1 + part * (size_t)r,
                        count, s->dtype, s->op);
            break;
        default:
            memcpy(out, send[1 - r] + send_offset, part);
            break;
        }
    }
    check_ok(curd_collective_run(ops, op_count), "curd_collective_run");
    char *what = g_strdup_printf("%s %s %s root %d, %zu elements",
                                 kind_names[s->kind], dtype_names[s->dtype],
                                 op_names[s->op], s->root, count);
    for (int r = 0; r < RANKS; r++) {
        unsigned char *got = download(p->devices[r], recv_buffers[r],
                                      recv_offset + recv_len);
        /* Nothing outside the range was written. */
        g_assert_true(memcmp(got, want[r], recv_offset) == 0);
        assert_elements(got + recv_offset, want[r] + recv_offset,
                        recv_len / bytes, s->dtype, what);
        g_free(got);
        check_ok(curd_buffer_free(p->devices[r], send_buffers[r]),
                 "curd_buffer_free");
        check_ok(curd_buffer_free(p->devices[r], recv_buffers[r]),
                 "curd_buffer_free");
        g_free(send[r]);
        g_free(recv_before[r]);
        g_free(want[r]);
    }
    g_free(what);
}

static void test_every_collective_matches_the_host_reference(void)
{
    pair p;
    if (!pair_open(&p, 0))
        return;
    curd_stats before[RANKS];
    for (int r = 0; r < RANKS; r++)
        before[r] = curd_test_device_stats(p.devices[r]);
    unsigned runs = 0;
    for (int kind = 0; kind < 6; kind++) {
        bool reduces = kind == CURD_COLLECTIVE_ALL_REDUCE ||
                       kind == CURD_COLLECTIVE_REDUCE ||
                       kind == CURD_COLLECTIVE_REDUCE_SCATTER;
        for (int dtype = 0; dtype < 10; dtype++)
            for (int op = 0; op < (reduces ? 5 : 1); op++) {
                shape s = {kind, (curd_dtype)dtype, (curd_reduce_op)op,
                           g_test_rand_int_range(0, RANKS)};
                run_checked(&p, &s);
                runs++;
            }
    }
    for (int r = 0; r < RANKS; r++) {
        curd_stats after = curd_test_device_stats(p.devices[r]);
        /* send-recv is two operations a rank; each other run one. */
        g_assert_cmpuint(after.collective_ops - before[r].collective_ops, ==,
                         runs + 10);
        g_assert_cmpuint(after.collective_bytes, >,
                         before[r].collective_bytes);
    }
    pair_close(&p);
}

/* In place: all_reduce on one range, all_gather from the rank's own part. */
static void test_in_place_where_nccl_allows_it(void)
{
    pair p;
    if (!pair_open(&p, 0))
        return;
    enum { COUNT = 1000 };
    int32_t data[RANKS][RANKS * COUNT];
    curd_buffer buffers[RANKS];
    curd_collective ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        curd_test_fill_random(data[r], sizeof data[r]);
        buffers[r] = buffer_with(p.devices[r], data[r], sizeof data[r]);
        ops[r] = (curd_collective){
            .comm = p.comms[r], .kind = CURD_COLLECTIVE_ALL_GATHER,
            .dtype = CURD_DTYPE_INT32, .send = buffers[r],
            .send_offset = (uint64_t)r * COUNT * 4, .recv = buffers[r],
            .count = COUNT};
    }
    check_ok(curd_collective_run(ops, RANKS), "all_gather in place");
    for (int r = 0; r < RANKS; r++) {
        int32_t *got = (int32_t *)(void *)download(p.devices[r], buffers[r],
                                                   sizeof data[r]);
        for (int k = 0; k < RANKS; k++)
            g_assert_cmpmem(got + k * COUNT, COUNT * 4, data[k] + k * COUNT,
                            COUNT * 4);
        memcpy(data[r], got, sizeof data[r]);
        g_free(got);
        ops[r].kind = CURD_COLLECTIVE_ALL_REDUCE;
        ops[r].op = CURD_REDUCE_SUM;
        ops[r].send_offset = ops[r].recv_offset = 0;
        ops[r].count = RANKS * COUNT;
    }
    check_ok(curd_collective_run(ops, RANKS), "all_reduce in place");
    for (int r = 0; r < RANKS; r++) {
        int32_t *got = (int32_t *)(void *)download(p.devices[r], buffers[r],
                                                   sizeof data[r]);
        for (int i = 0; i < RANKS * COUNT; i++)
            g_assert_cmpint(got[i], ==,
                            (int32_t)((uint32_t)data[0][i] +
                                      (uint32_t)data[1][i]));
        g_free(got);
        check_ok(curd_buffer_free(p.devices[r], buffers[r]),
                 "curd_buffer_free");
    }
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * Refusals
 * ---------------------------------------------------------------------- */
/* An all-reduce of both ranks whose result is checked: a refused call
 * left nothing enqueued (a half-posted group would pair with this one). */
static void assert_all_reduce_works(pair *p)
{
    shape s = {CURD_COLLECTIVE_ALL_REDUCE, CURD_DTYPE_UINT32, CURD_REDUCE_SUM,
               0};
    run_checked(p, &s);
}

static void test_bad_input_is_refused_and_enqueues_nothing(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    curd_buffer mine, theirs;
    unsigned char bytes[4096];
    curd_test_fill_random(bytes, sizeof bytes);
    mine = buffer_with(p.devices[0], bytes, sizeof bytes);
    theirs = buffer_with(p.devices[1], bytes, sizeof bytes);
    const curd_collective good = {
        .comm = p.comms[0], .kind = CURD_COLLECTIVE_ALL_REDUCE,
        .dtype = CURD_DTYPE_FLOAT32, .op = CURD_REDUCE_SUM, .send = mine,
        .recv = mine, .recv_offset = 2048, .count = 512};
    struct {
        const char *what;
        curd_collective op;
        curd_status want;
    } cases[] = {
        {"a NULL communicator", good, CURD_E_INVALID_ARGUMENT},
        {"an unknown kind", good, CURD_E_INVALID_ARGUMENT},
        {"an unknown type", good, CURD_E_INVALID_ARGUMENT},
        {"an unknown reduction", good, CURD_E_INVALID_ARGUMENT},
        {"a root outside the size", good, CURD_E_INVALID_ARGUMENT},
        {"a negative peer", good, CURD_E_INVALID_ARGUMENT},
        {"a count past the buffer's end", good, CURD_E_RANGE},
        {"an offset past the buffer's end", good, CURD_E_RANGE},
        {"a count whose bytes overflow", good, CURD_E_OVERFLOW},
        {"an offset plus length that overflows", good, CURD_E_OVERFLOW},
        {"a buffer of another device", good, CURD_E_STALE_HANDLE},
        {"a forged buffer", good, CURD_E_STALE_HANDLE},
        {"overlapping ranges not in place", good, CURD_E_INVALID_ARGUMENT},
        {"all_gather's recv too short for every rank", good, CURD_E_RANGE},
        {"reduce_scatter's send too short for every rank", good,
         CURD_E_RANGE},
    };
    size_t c = 0;
    cases[c++].op.comm = NULL;
    cases[c++].op.kind = (curd_collective_kind)7;
    cases[c++].op.dtype = (curd_dtype)10;
    cases[c++].op.op = (curd_reduce_op)5;
    cases[c].op.kind = CURD_COLLECTIVE_BROADCAST;
    cases[c++].op.root_or_peer = RANKS;
    cases[c].op.kind = CURD_COLLECTIVE_SEND;
    cases[c++].op.root_or_peer = -1;
    cases[c++].op.count = 513;
    cases[c++].op.send_offset = 4097;
    cases[c++].op.count = UINT64_MAX / 2;
    cases[c++].op.send_offset = UINT64_MAX - 100;
    cases[c++].op.recv = theirs;
    cases[c].op.send = (curd_buffer){mine.id + 1};
    c++;
    cases[c++].op.recv_offset = 4;
    cases[c].op.kind = CURD_COLLECTIVE_ALL_GATHER;
    cases[c++].op.count = 1000; /* recv 8000 bytes from 2048 */
    cases[c].op.kind = CURD_COLLECTIVE_REDUCE_SCATTER;
    cases[c].op.recv_offset = 0;
    cases[c++].op.count = 1500; /* send 12000 bytes */
    g_assert_cmpuint(c, ==, G_N_ELEMENTS(cases));
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        curd_collective ops[2] = {good, cases[i].op};
        check_refused(curd_collective_run(ops, 2), cases[i].want,
                      cases[i].what);
        curd_pending *pending = NULL;
        check_refused(curd_collective_run_async(&cases[i].op, 1, &pending),
                      cases[i].want, cases[i].what);
        g_assert_null(pending);
    }
    check_refused(curd_collective_run(NULL, 1), CURD_E_INVALID_ARGUMENT,
                  "NULL ops");
    check_refused(curd_collective_run(&good, 0), CURD_E_INVALID_ARGUMENT,
                  "no ops");
    check_refused(curd_collective_run_async(&good, 1, NULL),
                  CURD_E_INVALID_ARGUMENT, "no out_pending");
    curd_collective across[2] = {good, good};
    across[1].comm = p.comms[1];
    across[1].send = across[1].recv = theirs;
    curd_pending *pending = NULL;
    check_refused(curd_collective_run_async(across, 2, &pending),
                  CURD_E_INVALID_ARGUMENT, "async over two devices");
    /* The bytes are as they were. */
    unsigned char *got = download(p.devices[0], mine, sizeof bytes);
    g_assert_cmpmem(got, sizeof bytes, bytes, sizeof bytes);
    g_free(got);

    /* Opening. */
    curd_comm_id id;
    check_ok(curd_comm_id_new(&id), "curd_comm_id_new");
    curd_comm *comm = NULL;
    check_refused(curd_comm_open(p.devices[0], &id, 2, 2, NULL, &comm),
                  CURD_E_INVALID_ARGUMENT, "rank 2 of 2");
    check_refused(curd_comm_open(p.devices[0], &id, 0, 0, NULL, &comm),
                  CURD_E_INVALID_ARGUMENT, "0 ranks");
    check_refused(curd_comm_open(p.devices[0], NULL, 0, 1, NULL, &comm),
                  CURD_E_INVALID_ARGUMENT, "no id");
    check_refused(curd_comm_open(p.devices[0], &id, 0, 1, NULL, NULL),
                  CURD_E_INVALID_ARGUMENT, "no out_comm");
    curd_comm_options options;
    curd_comm_options_init(&options);
    options.flags = 1;
    check_refused(curd_comm_open(p.devices[0], &id, 0, 1, &options, &comm),
                  CURD_E_INVALID_ARGUMENT, "an unknown flag");
    curd_device *same[2] = {p.devices[0], p.devices[0]};
    curd_comm *two[2] = {NULL, NULL};
    check_refused(curd_comm_open_all(same, 2, NULL, two),
                  CURD_E_INVALID_ARGUMENT, "one GPU twice");
    g_assert_null(comm);
    int rank = -1;
    check_refused(curd_comm_rank(NULL, &rank), CURD_E_INVALID_ARGUMENT,
                  "rank of NULL");
    check_refused(curd_comm_size(p.comms[0], NULL), CURD_E_INVALID_ARGUMENT,
                  "size into NULL");
    check_refused(curd_comm_split(p.comms[0], -2, 0, &comm),
                  CURD_E_INVALID_ARGUMENT, "colour -2");

    check_ok(curd_buffer_free(p.devices[0], mine), "curd_buffer_free");
    check_ok(curd_buffer_free(p.devices[1], theirs), "curd_buffer_free");
    assert_all_reduce_works(&p);
    pair_close(&p);
}

static void test_a_closed_communicator_is_refused(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    int rank = -1, size = -1;
    for (int r = 0; r < RANKS; r++) {
        check_ok(curd_comm_rank(p.comms[r], &rank), "curd_comm_rank");
        check_ok(curd_comm_size(p.comms[r], &size), "curd_comm_size");
        g_assert_cmpint(rank, ==, r);
        g_assert_cmpint(size, ==, RANKS);
    }
    curd_comm *gone = p.comms[1];
    check_ok(curd_comm_close(gone), "curd_comm_close");
    p.comms[1] = NULL;
    /* The pointer is only compared with the open ones, never read. */
    check_refused(curd_comm_close(gone), CURD_E_INVALID_ARGUMENT,
                  "a second close");
    check_refused(curd_comm_rank(gone, &rank), CURD_E_INVALID_ARGUMENT,
                  "rank of a closed communicator");
    g_assert_cmpint(curd_comm_close(NULL), ==, CURD_OK);
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * No hangs
 * ---------------------------------------------------------------------- */
/* Rank 1 never calls: rank 0's all-reduce fails within the timeout, its
 * communicator is aborted, and the device goes on working. */
static void test_a_rank_that_never_calls_times_out(void)
{
    pair p;
    if (!pair_open(&p, 300))
        return;
    unsigned char bytes[4096];
    curd_test_fill_random(bytes, sizeof bytes);
    curd_buffer buffer = buffer_with(p.devices[0], bytes, sizeof bytes);
    curd_collective op = {.comm = p.comms[0],
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_FLOAT32,
                          .op = CURD_REDUCE_SUM,
                          .send = buffer,
                          .recv = buffer,
                          .count = 1024};
    gint64 start = g_get_monotonic_time();
    check_refused(curd_collective_run(&op, 1), CURD_E_COMM, "a lone rank");
    gint64 waited_ms = (g_get_monotonic_time() - start) / 1000;
    g_test_message("the lone rank's call returned after %" G_GINT64_FORMAT
                   " ms: %s",
                   waited_ms, curd_last_error());
    g_assert_cmpint(waited_ms, >=, 300);
    g_assert_cmpint(waited_ms, <, 300 + 5000);
    check_refused(curd_collective_run(&op, 1), CURD_E_COMM,
                  "an aborted communicator");
    /* The device is still usable, and the buffer is not held. */
    unsigned char *got = download(p.devices[0], buffer, sizeof bytes);
    g_free(got);
    check_ok(curd_buffer_free(p.devices[0], buffer), "curd_buffer_free");
    curd_test_device_stats(p.devices[0]);
    pair_close(&p);
}

/* Rank 1 never joins: rank 0's open fails within its open timeout, and
 * leaves nothing behind. */
static void test_a_rank_that_never_joins_times_out(void)
{
    curd_device *devices[RANKS];
    if (!devices_open(devices))
        return;
    if (nccl_there()) {
        curd_comm_id id;
        check_ok(curd_comm_id_new(&id), "curd_comm_id_new");
        curd_comm_options options;
        curd_comm_options_init(&options);
        options.open_timeout_ms = 300;
        curd_comm *comm = NULL;
        gint64 start = g_get_monotonic_time();
        check_refused(curd_comm_open(devices[0], &id, 0, RANKS, &options,
                                     &comm),
                      CURD_E_COMM, "a rank alone");
        gint64 waited_ms = (g_get_monotonic_time() - start) / 1000;
        g_assert_nonnull(strstr(curd_last_error(), "open_timeout_ms"));
        g_assert_cmpint(waited_ms, >=, 300);
        g_assert_cmpint(waited_ms, <, 300 + 5000);
        g_assert_null(comm);
    }
    devices_close(devices);
}

/* Both ranks call, with their sends and receives disagreeing: NCCL or the
 * timeout catches it, never a hang. */
static void test_sends_and_receives_that_disagree_fail(void)
{
    pair p;
    if (!pair_open(&p, 500))
        return;
    curd_buffer buffers[RANKS];
    curd_collective ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        check_ok(curd_buffer_alloc(p.devices[r], 8192, &buffers[r]),
                 "curd_buffer_alloc");
        ops[r] = (curd_collective){
            .comm = p.comms[r],
            .kind = r == 0 ? CURD_COLLECTIVE_SEND : CURD_COLLECTIVE_RECV,
            .dtype = CURD_DTYPE_UINT8, .send = buffers[r],
            .recv = buffers[r], .count = r == 0 ? 8192 : 4096,
            .root_or_peer = 1 - r};
    }
    gint64 start = g_get_monotonic_time();
    curd_status status = curd_collective_run(ops, RANKS);
    gint64 waited_ms = (g_get_monotonic_time() - start) / 1000;
#if CURD_TEST_ON_FAKE
    check_refused(status, CURD_E_COMM, "a send and a smaller receive");
#else
    /* What NCCL makes of it is its own (an error, a timeout, or a
     * truncated receive); that it returns is curd's. */
    g_test_message("a send and a smaller receive: %s after %" G_GINT64_FORMAT
                   " ms: %s",
                   curd_status_name(status), waited_ms,
                   status == CURD_OK ? "" : curd_last_error());
    g_assert_true(status == CURD_OK || status == CURD_E_COMM);
#endif
    g_assert_cmpint(waited_ms, <, 500 + 5000);
    for (int r = 0; r < RANKS; r++)
        check_ok(curd_buffer_free(p.devices[r], buffers[r]),
                 "curd_buffer_free");
    pair_close(&p);
}

static void test_a_device_closed_under_its_communicator(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    check_ok(curd_device_close(p.devices[1]), "curd_device_close");
    p.devices[1] = NULL;
    int rank = -1;
    check_refused(curd_comm_rank(p.comms[1], &rank), CURD_E_INVALID_ARGUMENT,
                  "a communicator of a closed device");
    curd_comm *child = NULL;
    check_refused(curd_comm_split(p.comms[1], 0, 0, &child),
                  CURD_E_INVALID_ARGUMENT, "a split of it");
    check_ok(curd_comm_close(p.comms[1]), "curd_comm_close of the shell");
    p.comms[1] = NULL;
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * Asynchronous runs
 * ---------------------------------------------------------------------- */
static void test_async_runs_hold_their_buffers(void)
{
    pair p;
    if (!pair_open(&p, 0))
        return;
    enum { COUNT = 4096 };
    uint64_t data[RANKS][COUNT];
    curd_buffer buffers[RANKS];
    curd_pending *pending[RANKS];
    curd_stats before[RANKS];
    for (int r = 0; r < RANKS; r++) {
        curd_test_fill_random(data[r], sizeof data[r]);
        buffers[r] = buffer_with(p.devices[r], data[r], sizeof data[r]);
        before[r] = curd_test_device_stats(p.devices[r]);
        curd_collective op = {.comm = p.comms[r],
                              .kind = CURD_COLLECTIVE_ALL_REDUCE,
                              .dtype = CURD_DTYPE_UINT64,
                              .op = CURD_REDUCE_MAX,
                              .send = buffers[r],
                              .recv = buffers[r],
                              .count = COUNT};
        check_ok(curd_collective_run_async(&op, 1, &pending[r]),
                 "curd_collective_run_async");
        check_refused(curd_buffer_free(p.devices[r], buffers[r]),
                      CURD_E_BUSY, "freeing a buffer in flight");
    }
    check_refused(curd_comm_close(p.comms[0]), CURD_E_BUSY,
                  "closing a communicator with a run in flight");
    int ready = 0;
    check_ok(curd_pending_ready(pending[0], &ready), "curd_pending_ready");
    for (int r = 0; r < RANKS; r++) {
        curd_timing timing = {.struct_size = sizeof timing};
        check_ok(curd_pending_wait(pending[r], &timing), "curd_pending_wait");
        check_ok(curd_pending_free(pending[r]), "curd_pending_free");
    }
    for (int r = 0; r < RANKS; r++) {
        uint64_t *got = (uint64_t *)(void *)download(
            p.devices[r], buffers[r], sizeof data[r]);
        for (int i = 0; i < COUNT; i++)
            g_assert_cmpuint(got[i], ==,
                             MAX(data[0][i], data[1][i]));
        g_free(got);
        curd_stats after = curd_test_device_stats(p.devices[r]);
        g_assert_cmpuint(after.collective_ops, ==,
                         before[r].collective_ops + 1);
        g_assert_cmpuint(after.collective_bytes, ==,
                         before[r].collective_bytes + sizeof data[r]);
        check_ok(curd_buffer_free(p.devices[r], buffers[r]),
                 "curd_buffer_free");
    }
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * Ranks in threads, joined by an id; splits
 * ---------------------------------------------------------------------- */
typedef struct rank_thread {
    curd_device *device;
    const curd_comm_id *id;
    int rank;
} rank_thread;

static gpointer rank_main(gpointer data)
{
    rank_thread *t = data;
    curd_comm *comm = NULL;
    check_ok(curd_comm_open(t->device, t->id, t->rank, RANKS, NULL, &comm),
             "curd_comm_open");
    enum { COUNT = 5000 };
    int64_t mine[COUNT];
    for (int i = 0; i < COUNT; i++)
        mine[i] = (int64_t)i * (t->rank + 1);
    curd_buffer buffer = buffer_with(t->device, mine, sizeof mine);
    curd_collective op = {.comm = comm,
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_INT64,
                          .op = CURD_REDUCE_SUM,
                          .send = buffer,
                          .recv = buffer,
                          .count = COUNT};
    check_ok(curd_collective_run(&op, 1), "curd_collective_run");
    int64_t *got = (int64_t *)(void *)download(t->device, buffer,
                                               sizeof mine);
    for (int i = 0; i < COUNT; i++)
        g_assert_cmpint(got[i], ==, (int64_t)i * 3);
    g_free(got);

    /* One colour, keys reversed: the ranks swap. */
    curd_comm *child = NULL;
    curd_status status = curd_comm_split(comm, 7, -t->rank, &child);
    if (status == CURD_OK) {
        int rank = -1, size = -1;
        check_ok(curd_comm_rank(child, &rank), "curd_comm_rank");
        check_ok(curd_comm_size(child, &size), "curd_comm_size");
        g_assert_cmpint(rank, ==, RANKS - 1 - t->rank);
        g_assert_cmpint(size, ==, RANKS);
        op.comm = child;
        op.op = CURD_REDUCE_MIN;
        check_ok(curd_collective_run(&op, 1), "curd_collective_run");
        check_ok(curd_comm_close(child), "curd_comm_close");
        /* Rank 1 takes no part; rank 0 is alone. */
        status = curd_comm_split(comm,
                                 t->rank == 1 ? CURD_COMM_SPLIT_NONE : 0, 0,
                                 &child);
        check_ok(status, "curd_comm_split");
        g_assert_true((child == NULL) == (t->rank == 1));
        if (child != NULL) {
            check_ok(curd_comm_size(child, &size), "curd_comm_size");
            g_assert_cmpint(size, ==, 1);
            check_ok(curd_comm_close(child), "curd_comm_close");
        }
    } else {
        check_refused(status, CURD_E_UNSUPPORTED, "curd_comm_split");
    }
    check_ok(curd_buffer_free(t->device, buffer), "curd_buffer_free");
    check_ok(curd_comm_close(comm), "curd_comm_close");
    return NULL;
}

static void test_ranks_in_threads_joined_by_an_id(void)
{
    curd_device *devices[RANKS];
    if (!devices_open(devices))
        return;
    if (nccl_there()) {
        curd_comm_id id;
        check_ok(curd_comm_id_new(&id), "curd_comm_id_new");
        rank_thread threads[RANKS];
        GThread *running[RANKS];
        for (int r = 0; r < RANKS; r++) {
            threads[r] = (rank_thread){devices[r], &id, r};
            running[r] = g_thread_new("rank", rank_main, &threads[r]);
        }
        for (int r = 0; r < RANKS; r++)
            g_thread_join(running[r]);
    }
    devices_close(devices);
}

/* Without ncclCommSplit (NCCL before 2.18) a split is unsupported. */
static void test_a_split_without_nccl_split_is_unsupported(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    curdi_nccl *table = curdi_nccl_table_for_test();
    g_assert_nonnull(table);
    curdi_pfn_ncclCommSplit split = table->ncclCommSplit;
    table->ncclCommSplit = NULL;
    curd_comm *child = NULL;
    check_refused(curd_comm_split(p.comms[0], 0, 0, &child),
                  CURD_E_UNSUPPORTED, "a split without ncclCommSplit");
    g_assert_nonnull(strstr(curd_last_error(), "2.18"));
    table->ncclCommSplit = split;
    g_assert_null(child);
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * The pair of NCCL communicators behind a curd_comm
 * ---------------------------------------------------------------------- */

/* Opening asks NCCL to connect every collective's channels while the
 * ranks join (NCCL_RUNTIME_CONNECT=0 where the user left it unset), and
 * a communicator takes at most CURDI_COMM_MAX_RUNS_IN_FLIGHT (64)
 * asynchronous runs: the 65th is CURD_E_BUSY and enqueues nothing, and
 * the 64 complete once the peer makes its calls. */
static void test_at_most_64_runs_wait_on_a_peer(void)
{
    pair p;
    if (!pair_open(&p, 20000))
        return;
    g_assert_cmpstr(g_getenv("NCCL_RUNTIME_CONNECT"), ==, "0");
    enum { RUNS = 64, COUNT = 256 };
    float data[RANKS][COUNT];
    curd_buffer buffers[RANKS];
    for (int r = 0; r < RANKS; r++) {
        for (int i = 0; i < COUNT; i++)
            data[r][i] = (float)g_test_rand_int_range(-512, 512) / 8.0f;
        buffers[r] = buffer_with(p.devices[r], data[r], sizeof data[r]);
    }
    curd_pending *pending[RANKS][RUNS];
    curd_collective op = {.kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_FLOAT32,
                          .op = CURD_REDUCE_SUM,
                          .count = COUNT};
    /* Rank 0 alone: its runs wait on rank 1. Each run adds the two ranks'
     * values into the buffer of its own rank, in place. */
    for (int r = 0; r < RANKS; r++) {
        op.comm = p.comms[r];
        op.send = op.recv = buffers[r];
        for (int run = 0; run < RUNS; run++)
            check_ok(curd_collective_run_async(&op, 1, &pending[r][run]),
                     "curd_collective_run_async");
        if (r == 0) {
            curd_pending *extra = NULL;
            check_refused(curd_collective_run_async(&op, 1, &extra),
                          CURD_E_BUSY, "a 65th run in flight");
            g_assert_null(extra);
        }
    }
    for (int r = 0; r < RANKS; r++)
        for (int run = 0; run < RUNS; run++) {
            check_ok(curd_pending_wait(pending[r][run], NULL),
                     "curd_pending_wait");
            check_ok(curd_pending_free(pending[r][run]), "curd_pending_free");
        }
    /* Sixty-four doublings of exact sums: a power of two times the sum. */
    for (int r = 0; r < RANKS; r++) {
        float *got = (float *)(void *)download(p.devices[r], buffers[r], sizeof data[r]);
        for (int i = 0; i < COUNT; i++) {
            float want = ldexpf(data[0][i] + data[1][i], RUNS - 1);
            g_assert_cmpfloat(got[i], ==, want);
        }
        g_free(got);
        check_ok(curd_buffer_free(p.devices[r], buffers[r]),
                 "curd_buffer_free");
    }
    pair_close(&p);
}

#if CURD_TEST_ON_FAKE
/* Runs one checked operation of shape s and asserts how many groups the
 * stand-in NCCL saw posted on blocking and on non-blocking
 * communicators. */
static void run_counting_groups(pair *p, const shape *s, long want_blocking,
                                long want_nonblocking)
{
    long blocking = curd_test_fake_nccl_groups(true);
    long nonblocking = curd_test_fake_nccl_groups(false);
    run_checked(p, s);
    g_assert_cmpint(curd_test_fake_nccl_groups(true) - blocking, ==,
                    want_blocking);
    g_assert_cmpint(curd_test_fake_nccl_groups(false) - nonblocking, ==,
                    want_nonblocking);
}

static const shape all_reduce_shape = {CURD_COLLECTIVE_ALL_REDUCE,
                                       CURD_DTYPE_FLOAT32, CURD_REDUCE_SUM,
                                       0};

/* Collectives enqueue on the blocking twins (no thread per group), sends
 * and receives on the non-blocking communicators, whose channels NCCL
 * connects at their first use. */
static void test_collectives_take_the_blocking_twins(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    run_counting_groups(&p, &all_reduce_shape, RANKS, 0);
    shape send_recv = {5, CURD_DTYPE_INT32, CURD_REDUCE_SUM, 0};
    run_counting_groups(&p, &send_recv, 0, RANKS);
    pair_close(&p);
}

/* A user who asks NCCL to connect at run time (NCCL_RUNTIME_CONNECT=1)
 * keeps every group on the non-blocking communicators: a blocking one
 * would connect on the caller's thread, where a dead peer hangs it. */
static void test_runtime_connect_keeps_every_group_nonblocking(void)
{
    if (!g_test_subprocess()) {
        g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
        g_test_trap_assert_passed();
        return;
    }
    g_setenv("NCCL_RUNTIME_CONNECT", "1", TRUE);
    pair p;
    if (!pair_open(&p, 10000))
        return;
    run_counting_groups(&p, &all_reduce_shape, 0, RANKS);
    g_assert_cmpstr(g_getenv("NCCL_RUNTIME_CONNECT"), ==, "1");
    pair_close(&p);
}
#endif

/* ------------------------------------------------------------------------
 * The launcher's environment
 * ---------------------------------------------------------------------- */
static void test_one_rank_from_a_launcher_environment(void)
{
    curd_device *device = curd_test_gpu_open();
    if (device == NULL)
        return;
    if (!nccl_there()) {
        check_ok(curd_device_close(device), "curd_device_close");
        return;
    }
    curd_comm *comm = NULL;
    unsetenv("NCCL_COMM_ID");
    unsetenv("RANK");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("SLURM_PROCID");
    check_refused(curd_comm_open_from_env(device, NULL, &comm),
                  CURD_E_INVALID_ARGUMENT, "no launcher");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    char *port = g_strdup_printf("%d", g_test_rand_int_range(20000, 40000));
    setenv("MASTER_PORT", port, 1);
    g_free(port);
    check_ok(curd_comm_open_from_env(device, NULL, &comm),
             "curd_comm_open_from_env");
    g_assert_nonnull(getenv("NCCL_COMM_ID"));
    int size = 0;
    check_ok(curd_comm_size(comm, &size), "curd_comm_size");
    g_assert_cmpint(size, ==, 1);
    float values[256];
    for (int i = 0; i < 256; i++)
        values[i] = (float)i;
    curd_buffer buffer = buffer_with(device, values, sizeof values);
    curd_collective op = {.comm = comm,
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_FLOAT32,
                          .op = CURD_REDUCE_SUM,
                          .send = buffer,
                          .recv = buffer,
                          .count = 256};
    check_ok(curd_collective_run(&op, 1), "curd_collective_run");
    float *got = (float *)(void *)download(device, buffer, sizeof values);
    g_assert_cmpmem(got, sizeof values, values, sizeof values);
    g_free(got);
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    check_ok(curd_comm_close(comm), "curd_comm_close");
    /* Later ids are unique again. */
    unsetenv("NCCL_COMM_ID");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    check_ok(curd_device_close(device), "curd_device_close");
}

/* ------------------------------------------------------------------------
 * Collectives recorded in batches
 * ---------------------------------------------------------------------- */
enum { BATCH_WORDS = 3000, BATCH_RUNS = 4 };

/* A batch of one rank: its words uploaded, add_one over them, a sum of
 * every rank's words in place, the words downloaded. */
static curd_batch *collective_batch(curd_device *device, curd_comm *comm,
                                    uint32_t flags, curd_program *add_one,
                                    curd_buffer buffer, const uint32_t *input,
                                    uint32_t *output)
{
    static const uint32_t words = BATCH_WORDS;
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = flags;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(device, &options, &batch), "curd_batch_new");
    check_ok(curd_batch_upload(batch, buffer, 0, input, BATCH_WORDS * 4u),
             "curd_batch_upload");
    curd_launch launch;
    curd_launch_init(&launch);
    launch.elements = BATCH_WORDS;
    launch.block[0] = 256;
    curd_arg args[] = {curd_arg_buffer(CURD_ROLE_INOUT, buffer),
                       curd_arg_scalar(&words, sizeof words)};
    args[0].elem_bytes = 4;
    args[0].length_arg = 1;
    check_ok(curd_batch_launch(batch, add_one, &launch, args, 2, NULL),
             "curd_batch_launch");
    curd_collective op = {.comm = comm,
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_UINT32,
                          .op = CURD_REDUCE_SUM,
                          .send = buffer,
                          .recv = buffer,
                          .count = BATCH_WORDS};
    check_ok(curd_batch_collective(batch, &op), "curd_batch_collective");
    check_ok(curd_batch_download_range(batch, buffer, 0, BATCH_WORDS * 4u,
                                       output, BATCH_WORDS * 4u),
             "curd_batch_download_range");
    return batch;
}

/* One rank's thread: its batch run `runs` times, each with fresh words
 * (inputs[run][rank]); every download checked against the host sum, or,
 * with want_status set, the first run's status and how long it took. */
typedef struct batch_rank {
    pair *p;
    int rank;
    uint32_t flags;
    int runs;
    const uint32_t (*inputs)[RANKS][BATCH_WORDS];
    curd_status want_status;
    gint64 waited_ms;
} batch_rank;

static gpointer batch_rank_main(gpointer data)
{
    batch_rank *t = data;
    curd_device *device = t->p->devices[t->rank];
    curd_program *add_one = NULL;
    check_ok(curd_test_kernel_load(device, "add_one.ptx", "curd_add_one",
                                   &add_one),
             "curd_test_kernel_load");
    uint32_t *input = g_new(uint32_t, BATCH_WORDS);
    uint32_t *output = g_new(uint32_t, BATCH_WORDS);
    curd_buffer buffer;
    check_ok(curd_buffer_alloc(device, BATCH_WORDS * 4u, &buffer),
             "curd_buffer_alloc");
    curd_batch *batch = collective_batch(device, t->p->comms[t->rank],
                                         t->flags, add_one, buffer, input,
                                         output);
    curd_stats before = curd_test_device_stats(device);
    for (int run = 0; run < t->runs; run++) {
        memcpy(input, t->inputs[run][t->rank], BATCH_WORDS * 4u);
        curd_test_poison(output, BATCH_WORDS * 4u);
        gint64 start = g_get_monotonic_time();
        curd_status status;
        if (run % 2 == 0) {
            status = curd_batch_run(batch, NULL);
        } else {
            curd_pending *pending = NULL;
            check_ok(curd_batch_run_async(batch, &pending),
                     "curd_batch_run_async");
            int ready = -1;
            check_ok(curd_pending_ready(pending, &ready), "curd_pending_ready");
            g_assert_true(ready == 0 || ready == 1);
            curd_timing timing = {.struct_size = sizeof timing};
            status = curd_pending_wait(pending, &timing);
            check_ok(curd_pending_free(pending), "curd_pending_free");
        }
        t->waited_ms = (g_get_monotonic_time() - start) / 1000;
        if (t->want_status != CURD_OK) {
            check_refused(status, t->want_status, "a batch run");
            break;
        }
        check_ok(status, "a batch run with a collective");
        for (int i = 0; i < BATCH_WORDS; i++) {
            uint32_t want = 0;
            for (int r = 0; r < RANKS; r++)
                want += t->inputs[run][r][i] + 1u;
            if (output[i] != want)
                g_error("rank %d run %d word %d: %" PRIu32 " where %" PRIu32
                        " was due",
                        t->rank, run, i, output[i], want);
        }
    }
    if (t->want_status == CURD_OK) {
        curd_stats after = curd_test_device_stats(device);
        g_assert_cmpuint(after.collective_ops, ==,
                         before.collective_ops + (uint64_t)t->runs);
        g_assert_cmpuint(after.collective_bytes, ==,
                         before.collective_bytes +
                             (uint64_t)t->runs * BATCH_WORDS * 4u);
        g_assert_cmpuint(after.batch_runs, ==,
                         before.batch_runs + (uint64_t)t->runs);
        /* A graph batch is captured once and replayed by every run. */
        if (t->flags == CURD_BATCH_GRAPH)
            g_assert_cmpuint(after.graph_replays, ==,
                             before.graph_replays + (uint64_t)t->runs);
    }
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(device, buffer), "curd_buffer_free");
    check_ok(curd_program_free(add_one), "curd_program_free");
    g_free(input);
    g_free(output);
    return NULL;
}

/* Runs rank r's batch on thread r (ranks < count), and waits for them. */
static void batch_ranks_run(batch_rank *ranks, int count)
{
    GThread *running[RANKS];
    for (int r = 0; r < count; r++)
        running[r] = g_thread_new("rank", batch_rank_main, &ranks[r]);
    for (int r = 0; r < count; r++)
        g_thread_join(running[r]);
}

/* Both ranks run a batch of a kernel, an all-reduce and a download,
 * several times with fresh words, streamed or replayed as a graph. */
static void test_a_batch_holds_a_kernel_an_all_reduce_and_a_download(
    gconstpointer data)
{
    pair p;
    if (!pair_open(&p, 0))
        return;
    uint32_t(*inputs)[RANKS][BATCH_WORDS] =
        g_malloc(sizeof *inputs * BATCH_RUNS);
    curd_test_fill_random(inputs, sizeof *inputs * BATCH_RUNS);
    batch_rank ranks[RANKS];
    for (int r = 0; r < RANKS; r++)
        ranks[r] = (batch_rank){.p = &p,
                                .rank = r,
                                .flags = GPOINTER_TO_UINT(data),
                                .runs = BATCH_RUNS,
                                .inputs = (const uint32_t(*)[RANKS]
                                                            [BATCH_WORDS])inputs,
                                .want_status = CURD_OK};
    batch_ranks_run(ranks, RANKS);
    g_free(inputs);
    pair_close(&p);
}

/* A collective is checked when recorded (nothing recorded on a refusal),
 * holds its communicator, and its buffers are checked again at every
 * run. */
static void test_a_batch_collective_refuses_bad_input(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    enum { COUNT = 1024 };
    curd_buffer mine, theirs;
    check_ok(curd_buffer_alloc(p.devices[0], COUNT * 4u, &mine),
             "curd_buffer_alloc");
    check_ok(curd_buffer_alloc(p.devices[1], COUNT * 4u, &theirs),
             "curd_buffer_alloc");
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(p.devices[0], NULL, &batch), "curd_batch_new");
    curd_collective op = {.comm = p.comms[0],
                          .kind = CURD_COLLECTIVE_ALL_REDUCE,
                          .dtype = CURD_DTYPE_UINT32,
                          .op = CURD_REDUCE_SUM,
                          .send = mine,
                          .recv = mine,
                          .count = COUNT};
    check_refused(curd_batch_collective(NULL, &op), CURD_E_INVALID_ARGUMENT,
                  "no batch");
    check_refused(curd_batch_collective(batch, NULL),
                  CURD_E_INVALID_ARGUMENT, "no operation");
    curd_collective wrong = op;
    wrong.comm = p.comms[1];
    wrong.send = wrong.recv = theirs;
    check_refused(curd_batch_collective(batch, &wrong),
                  CURD_E_INVALID_ARGUMENT,
                  "a communicator of another device");
    wrong = op;
    wrong.count = COUNT + 1;
    check_refused(curd_batch_collective(batch, &wrong), CURD_E_RANGE,
                  "a range past the buffer's end");
    wrong = op;
    wrong.recv_offset = 4;
    wrong.count = COUNT - 1;
    check_refused(curd_batch_collective(batch, &wrong),
                  CURD_E_INVALID_ARGUMENT, "ranges that overlap");
    wrong = op;
    wrong.send = wrong.recv = theirs;
    check_refused(curd_batch_collective(batch, &wrong), CURD_E_STALE_HANDLE,
                  "a buffer of another device");
    wrong = op;
    wrong.dtype = (curd_dtype)77;
    check_refused(curd_batch_collective(batch, &wrong),
                  CURD_E_INVALID_ARGUMENT, "a type NCCL does not have");
    /* Nothing was recorded: an empty run, no hold. */
    curd_stats before = curd_test_device_stats(p.devices[0]);
    check_ok(curd_batch_run(batch, NULL), "an empty batch run");
    check_ok(curd_batch_collective(batch, &op), "curd_batch_collective");
    check_refused(curd_comm_close(p.comms[0]), CURD_E_BUSY,
                  "closing a communicator a batch names");
    check_ok(curd_buffer_free(p.devices[0], mine), "curd_buffer_free");
    check_refused(curd_batch_run(batch, NULL), CURD_E_STALE_HANDLE,
                  "a buffer freed since it was recorded");
    curd_stats after = curd_test_device_stats(p.devices[0]);
    g_assert_cmpuint(after.collective_ops, ==, before.collective_ops);
    check_ok(curd_batch_reset(batch), "curd_batch_reset");
    check_ok(curd_batch_free(batch), "curd_batch_free");
    check_ok(curd_buffer_free(p.devices[1], theirs), "curd_buffer_free");
    pair_close(&p);
}

/* Closing a device under a graph batch that names its communicator: the
 * communicator is aborted (NCCL's finalize would wait for the graph), the
 * batch freed after, and the shell closes. */
static void test_a_device_closed_under_a_batch_collective(void)
{
    pair p;
    if (!pair_open(&p, 10000))
        return;
    curd_buffer buffer;
    check_ok(curd_buffer_alloc(p.devices[1], 4096, &buffer),
             "curd_buffer_alloc");
    curd_batch_options options;
    curd_batch_options_init(&options);
    options.flags = CURD_BATCH_GRAPH;
    curd_batch *batch = NULL;
    check_ok(curd_batch_new(p.devices[1], &options, &batch),
             "curd_batch_new");
    curd_collective op = {.comm = p.comms[1],
                          .kind = CURD_COLLECTIVE_BROADCAST,
                          .dtype = CURD_DTYPE_UINT8,
                          .send = buffer,
                          .recv = buffer,
                          .count = 4096,
                          .root_or_peer = 0};
    check_ok(curd_batch_collective(batch, &op), "curd_batch_collective");
    gint64 start = g_get_monotonic_time();
    check_ok(curd_device_close(p.devices[1]), "curd_device_close");
    g_assert_cmpint((g_get_monotonic_time() - start) / 1000, <, 5000);
    p.devices[1] = NULL;
    check_ok(curd_comm_close(p.comms[1]), "curd_comm_close of the shell");
    p.comms[1] = NULL;
    pair_close(&p);
}

/* A peer that never comes during a batch run: the stand-in NCCL's rank 1
 * stalls (both ranks run), on GPUs rank 1 never runs its batch. Every
 * rank that runs gets CURD_E_COMM within its timeout, never a hang. */
static void test_a_peer_that_never_comes_fails_a_batch_run(gconstpointer data)
{
    enum { TIMEOUT_MS = 300 };
    pair p;
    if (!pair_open(&p, TIMEOUT_MS))
        return;
    uint32_t(*inputs)[RANKS][BATCH_WORDS] = g_malloc(sizeof *inputs);
    curd_test_fill_random(inputs, sizeof *inputs);
    batch_rank ranks[RANKS];
    for (int r = 0; r < RANKS; r++)
        ranks[r] = (batch_rank){.p = &p,
                                .rank = r,
                                .flags = GPOINTER_TO_UINT(data),
                                .runs = 1,
                                .inputs = (const uint32_t(*)[RANKS]
                                                            [BATCH_WORDS])inputs,
                                .want_status = CURD_E_COMM};
#if CURD_TEST_ON_FAKE
    setenv("FAKE_NCCL_STALL_RANK", "1", 1);
    batch_ranks_run(ranks, RANKS);
    unsetenv("FAKE_NCCL_STALL_RANK");
    int running = RANKS;
#else
    batch_ranks_run(ranks, 1);
    int running = 1;
#endif
    for (int r = 0; r < running; r++) {
        g_test_message("rank %d's batch run failed after %" G_GINT64_FORMAT
                       " ms",
                       r, ranks[r].waited_ms);
        g_assert_cmpint(ranks[r].waited_ms, <, TIMEOUT_MS + 5000);
    }
    g_free(inputs);
    pair_close(&p);
}

/* ------------------------------------------------------------------------
 * Missing NCCL, and the stand-ins' own knobs
 * ---------------------------------------------------------------------- */
static void missing_nccl_child(void)
{
    curd_comm_id id;
    curd_status status = curd_comm_id_new(&id);
    if (status != CURD_E_UNSUPPORTED ||
        strstr(curd_last_error(), "libnccl2") == NULL)
        g_error("%s: %s", curd_status_name(status), curd_last_error());
    curd_test_assert_fix_sentence();
}

static void test_without_nccl_communicators_are_unsupported(void)
{
    if (g_test_subprocess()) {
        missing_nccl_child();
        return;
    }
    char *saved = g_strdup(getenv("CURD_LIBNCCL"));
    setenv("CURD_LIBNCCL", "/nonexistent/libnccl.so.2", 1);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    if (saved != NULL)
        setenv("CURD_LIBNCCL", saved, 1);
    else
        unsetenv("CURD_LIBNCCL");
    g_free(saved);
    g_test_trap_assert_passed();
}

#if CURD_TEST_ON_FAKE
static void test_an_nccl_too_old_is_unsupported(void)
{
    if (g_test_subprocess()) {
        missing_nccl_child();
        return;
    }
    setenv("FAKE_NCCL_VERSION", "21304", 1);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    unsetenv("FAKE_NCCL_VERSION");
    g_test_trap_assert_passed();
}

/* Both ranks call in one group, and rank 1's half never arrives. */
static void test_a_stalled_rank_times_out(void)
{
    pair p;
    if (!pair_open(&p, 200))
        return;
    curd_buffer buffers[RANKS];
    curd_collective ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        check_ok(curd_buffer_alloc(p.devices[r], 4096, &buffers[r]),
                 "curd_buffer_alloc");
        ops[r] = (curd_collective){.comm = p.comms[r],
                                   .kind = CURD_COLLECTIVE_BROADCAST,
                                   .dtype = CURD_DTYPE_INT8,
                                   .send = buffers[r],
                                   .recv = buffers[r],
                                   .count = 4096};
    }
    setenv("FAKE_NCCL_STALL_RANK", "1", 1);
    check_refused(curd_collective_run(ops, RANKS), CURD_E_COMM,
                  "a stalled rank");
    unsetenv("FAKE_NCCL_STALL_RANK");
    g_assert_nonnull(strstr(curd_last_error(), "200 ms"));
    for (int r = 0; r < RANKS; r++)
        check_ok(curd_buffer_free(p.devices[r], buffers[r]),
                 "curd_buffer_free");
    pair_close(&p);
}

/* Every NCCL call of open, an all-reduce and close failed in turn: each
 * failure a typed error with a Fix sentence, nothing left behind (no
 * join aborted while it still ran: each join runs for a few polls, as
 * NCCL's init job does in its thread), and the devices usable after. */
static void test_every_failed_nccl_call(void)
{
    curd_device *devices[RANKS];
    if (!devices_open(devices) || !nccl_there())
        return;
    setenv("FAKE_NCCL_JOIN_POLLS", "3", 1);
    unsigned failures = 0;
    for (unsigned fail_at = 1;; fail_at++) {
        curd_comm_options options;
        curd_comm_options_init(&options);
        options.timeout_ms = 200;
        curd_comm *comms[RANKS] = {NULL, NULL};
        curd_buffer buffers[RANKS];
        curd_collective ops[RANKS];
        for (int r = 0; r < RANKS; r++) {
            check_ok(curd_buffer_alloc(devices[r], 1024, &buffers[r]),
                     "curd_buffer_alloc");
        }
        g_assert_true(nccl_faults_begin(fail_at, CURDI_NCCL_SystemError));
        curd_status statuses[3] = {CURD_OK, CURD_OK, CURD_OK};
        statuses[0] = curd_comm_open_all(devices, RANKS, &options, comms);
        if (statuses[0] != CURD_OK)
            curd_test_assert_fix_sentence();
        if (statuses[0] == CURD_OK) {
            for (int r = 0; r < RANKS; r++)
                ops[r] = (curd_collective){.comm = comms[r],
                                           .kind = CURD_COLLECTIVE_ALL_REDUCE,
                                           .dtype = CURD_DTYPE_INT32,
                                           .op = CURD_REDUCE_SUM,
                                           .send = buffers[r],
                                           .recv = buffers[r],
                                           .count = 256};
            statuses[1] = curd_collective_run(ops, RANKS);
            if (statuses[1] != CURD_OK)
                curd_test_assert_fix_sentence();
            for (int r = 0; r < RANKS; r++) {
                curd_status closed = curd_comm_close(comms[r]);
                if (statuses[2] == CURD_OK)
                    statuses[2] = closed;
            }
        }
        const char *fired = nccl_faults_fired_entry();
        nccl_faults_end();
        for (int step = 0; step < 3; step++)
            if (statuses[step] != CURD_OK) {
                g_assert_nonnull(fired);
                g_assert_true(statuses[step] == CURD_E_COMM ||
                              statuses[step] == CURD_E_INVALID_ARGUMENT ||
                              statuses[step] == CURD_E_DRIVER);
                failures++;
            }
        if (statuses[0] != CURD_OK)
            g_assert_null(comms[0]);
        for (int r = 0; r < RANKS; r++)
            check_ok(curd_buffer_free(devices[r], buffers[r]),
                     "curd_buffer_free: the buffer is not held");
        g_assert_cmpint(curd_test_fake_nccl_live(), ==, 0);
        g_assert_cmpint(curd_test_fake_nccl_abandoned_joins(), ==, 0);
        if (fired == NULL)
            break;
        g_assert_cmpuint(fail_at, <, 1000);
    }
    unsetenv("FAKE_NCCL_JOIN_POLLS");
    g_test_message("%u NCCL failures checked", failures);
    g_assert_cmpuint(failures, >, 10);
    devices_close(devices);
}
#endif

int main(int argc, char **argv)
{
#if CURD_TEST_ON_FAKE
    curd_test_require_fake_driver();
    g_setenv("FAKE_CUDA_DEVICES", "2", TRUE);
#endif
    g_test_init(&argc, &argv, NULL);
    g_test_add_func(PATH_ROOT "/every-collective-matches-the-host-reference",
                    test_every_collective_matches_the_host_reference);
    g_test_add_func(PATH_ROOT "/in-place-where-nccl-allows-it",
                    test_in_place_where_nccl_allows_it);
    g_test_add_func(PATH_ROOT "/bad-input-is-refused-and-enqueues-nothing",
                    test_bad_input_is_refused_and_enqueues_nothing);
    g_test_add_func(PATH_ROOT "/a-closed-communicator-is-refused",
                    test_a_closed_communicator_is_refused);
    g_test_add_func(PATH_ROOT "/a-rank-that-never-calls-times-out",
                    test_a_rank_that_never_calls_times_out);
    g_test_add_func(PATH_ROOT "/a-rank-that-never-joins-times-out",
                    test_a_rank_that_never_joins_times_out);
    g_test_add_func(PATH_ROOT "/sends-and-receives-that-disagree-fail",
                    test_sends_and_receives_that_disagree_fail);
    g_test_add_func(PATH_ROOT "/a-device-closed-under-its-communicator",
                    test_a_device_closed_under_its_communicator);
    g_test_add_func(PATH_ROOT "/async-runs-hold-their-buffers",
                    test_async_runs_hold_their_buffers);
    g_test_add_func(PATH_ROOT "/at-most-64-runs-wait-on-a-peer",
                    test_at_most_64_runs_wait_on_a_peer);
#if CURD_TEST_ON_FAKE
    g_test_add_func(PATH_ROOT "/collectives-take-the-blocking-twins",
                    test_collectives_take_the_blocking_twins);
    g_test_add_func(PATH_ROOT "/runtime-connect-keeps-every-group-nonblocking",
                    test_runtime_connect_keeps_every_group_nonblocking);
#endif
    g_test_add_func(PATH_ROOT "/ranks-in-threads-joined-by-an-id",
                    test_ranks_in_threads_joined_by_an_id);
    g_test_add_func(PATH_ROOT "/a-split-without-nccl-split-is-unsupported",
                    test_a_split_without_nccl_split_is_unsupported);
    g_test_add_func(PATH_ROOT "/one-rank-from-a-launcher-environment",
                    test_one_rank_from_a_launcher_environment);
    g_test_add_data_func(
        PATH_ROOT "/a-batch-holds-a-kernel-an-all-reduce-and-a-download/streamed",
        GUINT_TO_POINTER(0u),
        test_a_batch_holds_a_kernel_an_all_reduce_and_a_download);
    g_test_add_data_func(
        PATH_ROOT "/a-batch-holds-a-kernel-an-all-reduce-and-a-download/graph",
        GUINT_TO_POINTER(CURD_BATCH_GRAPH),
        test_a_batch_holds_a_kernel_an_all_reduce_and_a_download);
    g_test_add_func(PATH_ROOT "/a-batch-collective-refuses-bad-input",
                    test_a_batch_collective_refuses_bad_input);
    g_test_add_func(PATH_ROOT "/a-device-closed-under-a-batch-collective",
                    test_a_device_closed_under_a_batch_collective);
    g_test_add_data_func(
        PATH_ROOT "/a-peer-that-never-comes-fails-a-batch-run/streamed",
        GUINT_TO_POINTER(0u), test_a_peer_that_never_comes_fails_a_batch_run);
    g_test_add_data_func(
        PATH_ROOT "/a-peer-that-never-comes-fails-a-batch-run/graph",
        GUINT_TO_POINTER(CURD_BATCH_GRAPH),
        test_a_peer_that_never_comes_fails_a_batch_run);
    g_test_add_func(PATH_ROOT "/without-nccl-communicators-are-unsupported",
                    test_without_nccl_communicators_are_unsupported);
#if CURD_TEST_ON_FAKE
    g_test_add_func(PATH_ROOT "/an-nccl-too-old-is-unsupported",
                    test_an_nccl_too_old_is_unsupported);
    g_test_add_func(PATH_ROOT "/a-stalled-rank-times-out",
                    test_a_stalled_rank_times_out);
    g_test_add_func(PATH_ROOT "/every-failed-nccl-call",
                    test_every_failed_nccl_call);
#endif
    return g_test_run();
}
