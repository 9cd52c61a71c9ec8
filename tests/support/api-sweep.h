/* api-sweep.h - every public function that reaches the driver, failed one
 * driver call at a time, with the same invariants checked after each
 * failure: by the fault sweep (tests/test-fault-sweep.c) and the fuzzer
 * (fuzz/fuzz-api-faults.c). No GLib: the fuzzer links it too.
 *
 * The one list. api_ops[] (api-ops.c) has an entry per public function
 * that calls the driver (a function may have several, one per path worth
 * failing), and api_quiet_functions[] names every other public function
 * with the reason it makes no driver call. test-fault-sweep parses
 * include/curd.h and include/curd_comm.h and fails when a CURD_API
 * function is in neither list, so a new function cannot be forgotten:
 * add an entry beside the others (setup, call, finish) or say why it
 * needs none.
 *
 * The world (api_world_open) is one device and what the entries work on:
 * two buffers with known bytes (a small one and one large enough to be
 * pipelined through several staging chunks), a bystander buffer that no
 * entry names, caller memory partly registered, and the add_one program.
 * Entries keep what they make between setup and finish in the world's
 * scratch fields (a buffer, a block, programs, a pending, words for
 * add_one, a batch, a session and its set, statistics).
 *
 * One run (api_sweep_run) of an entry with driver call `fail_at` failing
 * with `cu_result`:
 *  1. setup (not faulted), then the fault armed, the call, disarmed;
 *  2. the status is CURD_OK, or a typed error: a known curd_status with a
 *     "Fix: " sentence, the status the injected CUresult maps to, and that
 *     CUresult as the thread's last driver code;
 *  3. on an error, every field of curd_stats is as it was after setup,
 *     by api_stat_rules (the pools' own traffic may grow, balanced), as
 *     far as the entry's failure_may (API_MAY_*) widens them;
 *  4. finish (not faulted): the entry checks what it promises (the bytes
 *     moved on success; caller memory untouched on failure) and undoes
 *     what it made;
 *  5. the bystander's bytes are unchanged (a checksum), and on the
 *     stand-in driver every driver object curd does not account for
 *     (memory outside its pools, streams and events outside its idle
 *     lists, modules, registrations, link states, context retains and
 *     pushes) is as
 *     it was before setup: nothing leaked;
 *  6. the device works: a buffer round trip, every byte compared; after
 *     CURD_E_DEVICE_LOST the world is closed (the stand-in must then hold
 *     nothing) and opened again first. */
#ifndef CURD_TESTS_SUPPORT_API_SWEEP_H
#define CURD_TESTS_SUPPORT_API_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

/* ------------------------------------------------------------------------
 * Checks: a failed one calls the handler with a sentence naming the run
 * (entry, failing call) and the condition; the default prints it and
 * aborts. The handler must not return.
 * ---------------------------------------------------------------------- */
typedef void (*api_check_handler)(const char *file, int line,
                                  const char *message);
void api_check_set_handler(api_check_handler handler);
void api_check_failed(const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define API_CHECK(condition, ...)                                            \
    do {                                                                     \
        if (!(condition))                                                    \
            api_check_failed(__FILE__, __LINE__, __VA_ARGS__);               \
    } while (0)
/* A call that must succeed: its status and sentence otherwise. */
#define API_OK(call)                                                         \
    do {                                                                     \
        curd_status api_ok_status_ = (call);                                 \
        if (api_ok_status_ != CURD_OK)                                       \
            api_check_failed(__FILE__, __LINE__, "%s: %s: %s", #call,        \
                             curd_status_name(api_ok_status_),               \
                             curd_last_error());                             \
    } while (0)

/* ------------------------------------------------------------------------
 * The world
 * ---------------------------------------------------------------------- */
#define API_SMALL_BYTES 4099u
/* Three staging chunks of 1 MiB, the last one short. */
#define API_LARGE_BYTES ((2u << 20) + 77u)
#define API_REGISTERED_BYTES (256u << 10)
#define API_BYSTANDER_BYTES 100000u
/* Blocks and buffers this large go upstream when released (the world's
 * cache budgets are below it). */
#define API_UPSTREAM_BYTES (8u << 20)

typedef struct api_world {
    curd_device *device;
    uint64_t random_state;
    bool can_register;

    curd_buffer small, large;
    unsigned char *small_model, *large_model;
    curd_buffer bystander;
    uint64_t bystander_sum;

    /* Caller memory: [0, API_LARGE_BYTES) pageable, then
     * API_REGISTERED_BYTES registered with the device when it can. host_copy keeps what host
     * held before the run in progress. */
    unsigned char *host, *host_copy;
    size_t host_len;
    unsigned char *registered;
    curd_program *add_one;

    /* What one entry made or took, from its setup to its finish. */
    curd_device *extra;
    curd_buffer made;
    curd_block block;
    curd_program *programs[2];
    curd_pending *pending;
    void *caller_stream; /* a CUstream of the caller's own */
    uint32_t *words;
    uint32_t *words_want;
    uint32_t word_count;
    void *range;
    curd_batch *batch;
    size_t item; /* the batch's launch */
    curd_session *session;
    const curd_static_set *set;
    curd_comm *comm, *comm_child; /* one-rank communicators */
    curd_comm_id comm_id;
    curd_stats stats; /* read by a setup, for its finish to compare */
} api_world;

/* Opens device 0 and builds the world; the status of curd_device_open
 * when that fails (the caller skips without a device), with nothing
 * left. */
curd_status api_world_open(api_world *w, uint64_t seed);
void api_world_close(api_world *w);
/* Fresh random bytes. */
void api_world_random(api_world *w, void *bytes, size_t len);
/* Gives small and large fresh random bytes (uploaded, not faulted). */
void api_world_reset_buffers(api_world *w);
/* Every byte of buffer equals expected[0, len). */
void api_world_expect_buffer(api_world *w, curd_buffer buffer,
                             const unsigned char *expected, size_t len);

/* The world's device options: caches below API_UPSTREAM_BYTES, one idle
 * module kept (so freeing a program can unload one). */
void api_world_options(curd_device_options *options);
/* A checksum of the bystander buffer's bytes. */
uint64_t api_world_bystander_sum(api_world *w);
/* Whether the world's device is lost: status is CURD_E_DEVICE_LOST, or
 * the device says so (a run marked it, or a close of another device of
 * the GPU found the fault first). A finish then frees host state only. */
bool api_world_lost(api_world *w, curd_status status);
/* The run in progress, which a failed check names. */
extern char api_run_description[256];

/* ------------------------------------------------------------------------
 * The list
 * ---------------------------------------------------------------------- */
/* What a failed call may change beyond what the statistics rules allow
 * every call, each because curd.h says so of that call (api_op's
 * failure_may; 0 for most entries): */
/* It ends what it names whatever it returns (curd_program_free,
 * curd_pending_free, the self-test's own program): the levels of what it
 * gave back (API_STAT_HELD) may stand where its success would leave
 * them. The stand-in's live counts still prove nothing leaked. */
#define API_MAY_LET_GO (1u << 0)
/* It loads a program through the module cache before the step that
 * failed, and a load that succeeded counts (curd_device_self_test): the
 * cache's counters (API_STAT_LOADS) may grow. */
#define API_MAY_LOAD (1u << 1)
/* It makes resident buffers of its own and frees them when a later step
 * fails (curd_session_upload_static): the resident families' history
 * (API_STAT_RESIDENT: peak, allocated, freed) may grow, balanced; their
 * levels stay exact. */
#define API_MAY_MAKE_AND_FREE (1u << 2)

typedef struct api_op {
    const char *function; /* as curd.h declares it */
    const char *path;     /* what this entry makes it do, for test paths */
    /* Brings the world to where the call can run; not faulted. */
    void (*setup)(api_world *w);
    curd_status (*call)(api_world *w);
    /* Checks the entry's own promises for status and undoes what setup
     * and the call made; not faulted. After CURD_E_DEVICE_LOST it frees
     * host state only: the world is opened again after it. */
    void (*finish)(api_world *w, curd_status status);
    unsigned failure_may; /* API_MAY_* */
} api_op;

extern const api_op api_ops[];
extern const size_t api_op_count;

typedef struct api_quiet_function {
    const char *function;
    const char *reason; /* why it makes no driver call */
} api_quiet_function;

extern const api_quiet_function api_quiet_functions[];
extern const size_t api_quiet_function_count;

/* ------------------------------------------------------------------------
 * Runs
 * ---------------------------------------------------------------------- */
/* The CUresults the sweep injects: a transient failure, and a fault that
 * loses the context (CUDA_ERROR_UNKNOWN, CUDA_ERROR_ILLEGAL_ADDRESS). */
extern const int api_fault_results[];
extern const size_t api_fault_result_count;

#define API_HELD_KINDS 15u

typedef struct api_tally {
    unsigned points;        /* runs whose armed failure fired */
    unsigned failed;        /* of those, runs whose call failed */
    unsigned lost;          /* of those, CURD_E_DEVICE_LOST: reopened */
    unsigned released;      /* failed releases made again for the driver */
    unsigned clean_calls;   /* driver calls of the clean runs */
    /* Runs whose failed cuCtxPushCurrent kept curd from destroying what
     * lives in the context while letting go of it (a close: the device is
     * gone whatever happens), and what the stand-in driver kept of each
     * kind since: it stays with the context until the context goes. */
    unsigned abandoning;
    long abandoned[API_HELD_KINDS];
} api_tally;

/* Closes the world; on the stand-in driver, it must then hold nothing
 * but what tally->abandoned says (nothing at all after a lost device's
 * close reset the context). */
void api_world_close_checked(api_world *w, api_tally *tally);

/* One run (see above). Returns whether the armed failure fired; a run
 * that makes fewer than fail_at driver calls must succeed. fail_at 0
 * arms nothing. */
bool api_sweep_run(api_world *w, const api_op *op, unsigned fail_at,
                   int cu_result, api_tally *tally);
/* The same with NCCL call `fail_at` failing with nccl_result (an
 * ncclResult_t): the status is the one that result maps to, or
 * CURD_E_COMM (the communicator reported or was aborted for it). */
bool api_sweep_nccl_run(api_world *w, const api_op *op, unsigned fail_at,
                        unsigned nccl_result, api_tally *tally);
/* A clean run (counting its driver calls, of which there must be some),
 * then every stride-th driver call of op (the first, then every stride
 * calls after it; 1: every one) failed in turn with each of the first
 * result_count api_fault_results; then, for an entry that makes NCCL
 * calls, every stride-th NCCL call in turn with ncclSystemError. */
void api_sweep_op(api_world *w, const api_op *op, size_t result_count,
                  unsigned stride, api_tally *tally);

/* curd_stats, field by field: what a failed call may do to each. */
typedef enum api_stat_rule {
    API_STAT_EXACT = 0, /* as it was */
    API_STAT_GROWS = 1, /* a pool's traffic: may grow, never shrink */
    API_STAT_LEVEL = 2, /* a pool's cached level: see api_stats_check */
    API_STAT_HELD = 3,  /* a level of what the device holds: exact, but
                           see API_MAY_LET_GO */
    API_STAT_LOADS = 4, /* the module cache's counts: exact, but see
                           API_MAY_LOAD */
    API_STAT_RESIDENT = 5 /* the resident families' history: exact, but
                             see API_MAY_MAKE_AND_FREE */
} api_stat_rule;

typedef struct api_stat_field {
    const char *name;
    size_t offset;
    api_stat_rule rule;
} api_stat_field;

/* The device's statistics, every field this build knows. */
curd_stats api_stats_of(curd_device *device);

extern const api_stat_field api_stat_fields[];
extern const size_t api_stat_field_count;
/* Whether the rules name every uint64_t of curd_stats after struct_size,
 * each once: false means a statistic was added without a rule. */
bool api_stat_rules_cover_the_struct(void);
/* after (a failed call's) against before (after its setup): the rules,
 * as failure_may (API_MAY_*) widens them, then per pool and for the
 * resident families: each family's allocated - freed moved as its
 * current did, and a pool's cached blocks moved by exactly the upstream
 * allocations less the upstream frees (live levels are exact). */
void api_stats_check(const curd_stats *before, const curd_stats *after,
                     unsigned failure_may);

#endif
