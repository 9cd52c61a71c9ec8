/* nccl.h - raw NCCL, as curd-bench's collective baselines reach it.
 *
 * Like harness/cuda.h for the driver: the tool loads libnccl.so.2 itself
 * (dlopen, never a link-time dependency; $CURD_LIBNCCL when set, as
 * libcurd honours it, so both load the same library) and uses nothing of
 * libcurd's NCCL table. The declarations below are the few entries the
 * baselines need, written from NCCL's stable 2.x C ABI (nccl.h): results,
 * data types and operations are C enums (unsigned int), the communicator
 * an opaque pointer, the unique id 128 bytes passed by value. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_NCCL_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_NCCL_H

#include <limits.h>
#include <stddef.h>

#include "harness/cuda.h"

typedef unsigned int bench_nccl_result;     /* ncclResult_t */
typedef struct ncclComm *bench_nccl_comm;   /* ncclComm_t */
typedef struct bench_nccl_unique_id {       /* ncclUniqueId */
    char internal[128];
} bench_nccl_unique_id;

/* ncclConfig_t as NCCL 2.14 laid it out: NCCL reads `size` and `version`
 * first and defaults every field a caller's older layout lacks. */
typedef struct bench_nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
} bench_nccl_config;

#define BENCH_NCCL_CONFIG_MAGIC 0xcafebeefu
#define BENCH_NCCL_CONFIG_VERSION 21400u /* NCCL_VERSION(2, 14, 0) */
#define BENCH_NCCL_CONFIG_UNDEF_INT INT_MIN

#define BENCH_NCCL_SUCCESS 0u
#define BENCH_NCCL_IN_PROGRESS 7u /* ncclInProgress */
#define BENCH_NCCL_FLOAT32 7u     /* ncclFloat32 */
#define BENCH_NCCL_SUM 0u         /* ncclSum */

/* X(name, return and parameters) */
#define BENCH_NCCL_ENTRIES(X)                                                 \
    X(ncclGetVersion, (int *))                                                \
    X(ncclGetUniqueId, (bench_nccl_unique_id *))                              \
    X(ncclCommInitRank,                                                       \
      (bench_nccl_comm *, int, bench_nccl_unique_id, int))                    \
    X(ncclCommInitRankConfig,                                                 \
      (bench_nccl_comm *, int, bench_nccl_unique_id, int,                     \
       bench_nccl_config *))                                                  \
    X(ncclCommFinalize, (bench_nccl_comm))                                    \
    X(ncclCommDestroy, (bench_nccl_comm))                                     \
    X(ncclCommGetAsyncError, (bench_nccl_comm, bench_nccl_result *))          \
    X(ncclGroupStart, (void))                                                 \
    X(ncclGroupEnd, (void))                                                   \
    X(ncclAllReduce,                                                          \
      (const void *, void *, size_t, unsigned int, unsigned int,              \
       bench_nccl_comm, bench_cu_stream))

#define BENCH_NCCL_MEMBER_(name, params) bench_nccl_result(*name) params;
typedef struct bench_nccl {
    BENCH_NCCL_ENTRIES(BENCH_NCCL_MEMBER_)
    const char *(*ncclGetErrorString)(bench_nccl_result);
    int version; /* ncclGetVersion's, e.g. 22809 */
} bench_nccl;
#undef BENCH_NCCL_MEMBER_

/* Loads NCCL once; NULL when it cannot be loaded or lacks an entry, with
 * the reason in why. */
const bench_nccl *bench_nccl_load(char *why, size_t why_capacity);

/* Fails (bench_fail, -1) naming the call and NCCL's text for result. */
int bench_fail_nccl(const char *call, bench_nccl_result result);

/* Waits until none of the communicators says ncclInProgress (a
 * non-blocking communicator still joining or enqueuing; NCCL's blocking
 * ones never do), failing after timeout_ms. */
int bench_nccl_settle(const bench_nccl *nccl, const bench_nccl_comm *comms,
                      int count, unsigned timeout_ms, const char *what);

#endif
