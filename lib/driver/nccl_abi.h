/* nccl_abi.h - the part of NCCL's C ABI that curd uses.
 *
 * curd never includes nccl.h: it builds without NCCL and loads
 * libnccl.so.2 at run time (lib/driver/nccl.c), only when a communicator is
 * first opened. These are curd's own declarations of the ABI facts it
 * relies on; NCCL keeps them stable across 2.x (an opaque communicator, a
 * 128-byte unique id, enum values that are only ever appended,
 * ncclConfig_t versioned by its size and version fields).
 * tests/test-nccl-abi.c reads a real nccl.h when one is found and checks
 * every value, every entry's name, return type and parameter count, and
 * the config's fields against these.
 *
 * As in cuda_abi.h, the enums are `unsigned int`: nccl.h declares them as
 * C enums whose constants are all non-negative, which GCC and Clang give
 * the underlying type unsigned int, so our function-pointer types are
 * compatible with nccl.h's, not merely the same size. */
#ifndef CURD_LIB_DRIVER_NCCL_ABI_H
#define CURD_LIB_DRIVER_NCCL_ABI_H

#include <limits.h>
#include <stddef.h>

#include "driver/cuda_abi.h"

typedef struct ncclComm *curdi_nccl_comm;     /* ncclComm_t */
typedef unsigned int curdi_nccl_result;       /* ncclResult_t */
typedef unsigned int curdi_nccl_data_type;    /* ncclDataType_t */
typedef unsigned int curdi_nccl_red_op;       /* ncclRedOp_t */

#define CURDI_NCCL_UNIQUE_ID_BYTES 128
/* ncclUniqueId: passed by value to ncclCommInitRankConfig. */
typedef struct curdi_nccl_unique_id {
    char internal[CURDI_NCCL_UNIQUE_ID_BYTES];
} curdi_nccl_unique_id;

/* NCCL_VERSION(X, Y, Z) for the 2.9+ numbering. */
#define CURDI_NCCL_VERSION(major, minor, patch)                              \
    ((major) * 10000 + (minor) * 100 + (patch))
/* The oldest NCCL curd accepts: 2.14 is the first with non-blocking
 * communicators (ncclConfig_t.blocking), ncclCommFinalize and
 * ncclGetLastError, which the no-hang waits rest on. ncclCommSplit came in
 * 2.18 and is looked up as optional. */
#define CURDI_NCCL_MIN_VERSION CURDI_NCCL_VERSION(2, 14, 0)

/* ncclResult_t values: X(name without the nccl prefix, value). Later
 * releases append (2.29 added ncclTimeout = 8); curd treats any other
 * value as an unrecognised error. */
#define CURDI_NCCL_RESULT_LIST(X)                                            \
    X(Success, 0)                                                            \
    X(UnhandledCudaError, 1)                                                 \
    X(SystemError, 2)                                                        \
    X(InternalError, 3)                                                      \
    X(InvalidArgument, 4)                                                    \
    X(InvalidUsage, 5)                                                       \
    X(RemoteError, 6)                                                        \
    X(InProgress, 7)

/* ncclDataType_t values curd uses (the fp8 types are left out). */
#define CURDI_NCCL_DATA_TYPE_LIST(X)                                         \
    X(Int8, 0)                                                               \
    X(Uint8, 1)                                                              \
    X(Int32, 2)                                                              \
    X(Uint32, 3)                                                             \
    X(Int64, 4)                                                              \
    X(Uint64, 5)                                                             \
    X(Float16, 6)                                                            \
    X(Float32, 7)                                                            \
    X(Float64, 8)                                                            \
    X(Bfloat16, 9)

/* ncclRedOp_t's built-in operations. */
#define CURDI_NCCL_RED_OP_LIST(X)                                            \
    X(Sum, 0)                                                                \
    X(Prod, 1)                                                               \
    X(Max, 2)                                                                \
    X(Min, 3)                                                                \
    X(Avg, 4)

#define CURDI_NCCL_ENUM_(name, value) CURDI_NCCL_##name = value,
enum { CURDI_NCCL_RESULT_LIST(CURDI_NCCL_ENUM_) };
enum { CURDI_NCCL_DATA_TYPE_LIST(CURDI_NCCL_ENUM_) };
enum { CURDI_NCCL_RED_OP_LIST(CURDI_NCCL_ENUM_) };
#undef CURDI_NCCL_ENUM_

/* ncclConfig_t as NCCL 2.28 lays it out (its ncclConfig_v22800). NCCL
 * reads `size` first and copies no more than its own struct's size, and
 * `version` tells it which fields the caller knew, so this layout is
 * accepted by every release from 2.14 on (an older one ignores the tail)
 * and by later ones (which default the fields appended after it). The
 * entries take it by pointer; test-nccl-abi checks the field order and
 * types against nccl.h. */
typedef struct curdi_nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
    int split_share;
    int traffic_class;
    const char *comm_name;
    int collnet_enable;
    int cta_policy;
    int shrink_share;
    int nvls_ctas;
    int channels_per_net_peer;
    int nvlink_centric_sched;
} curdi_nccl_config;

/* NCCL_CONFIG_INITIALIZER's values for this layout: every tunable left
 * undefined (NCCL_CONFIG_UNDEF_INT / _PTR) so NCCL picks its defaults,
 * which is what keeps curd from ever choosing NVLS or any other
 * transport: the environment (NCCL_NVLS_ENABLE, ...) stays in charge. */
#define CURDI_NCCL_API_MAGIC 0xcafebeefu
#define CURDI_NCCL_CONFIG_VERSION CURDI_NCCL_VERSION(2, 28, 0)
#define CURDI_NCCL_CONFIG_UNDEF_INT INT_MIN
#define CURDI_NCCL_CONFIG_INITIALIZER                                        \
    {                                                                        \
        .size = sizeof(curdi_nccl_config), .magic = CURDI_NCCL_API_MAGIC,    \
        .version = CURDI_NCCL_CONFIG_VERSION,                                \
        .blocking = CURDI_NCCL_CONFIG_UNDEF_INT,                             \
        .cga_cluster_size = CURDI_NCCL_CONFIG_UNDEF_INT,                     \
        .min_ctas = CURDI_NCCL_CONFIG_UNDEF_INT,                             \
        .max_ctas = CURDI_NCCL_CONFIG_UNDEF_INT, .net_name = NULL,           \
        .split_share = CURDI_NCCL_CONFIG_UNDEF_INT,                          \
        .traffic_class = CURDI_NCCL_CONFIG_UNDEF_INT, .comm_name = NULL,     \
        .collnet_enable = CURDI_NCCL_CONFIG_UNDEF_INT,                       \
        .cta_policy = CURDI_NCCL_CONFIG_UNDEF_INT,                           \
        .shrink_share = CURDI_NCCL_CONFIG_UNDEF_INT,                         \
        .nvls_ctas = CURDI_NCCL_CONFIG_UNDEF_INT,                            \
        .channels_per_net_peer = CURDI_NCCL_CONFIG_UNDEF_INT,                \
        .nvlink_centric_sched = CURDI_NCCL_CONFIG_UNDEF_INT,                 \
    }

/* The entries that return an ncclResult_t: X(name, tier, params, args).
 * tier is REQUIRED or OPTIONAL (NULL in the table when the library lacks
 * it). The same list drives the table in nccl.h, the fault-injection
 * wrappers of the tests, the stand-in's checks and test-nccl-abi. */
#define CURDI_NCCL_ENTRY_LIST(X)                                             \
    X(ncclGetVersion, REQUIRED, (int *version), (version))                   \
    X(ncclGetUniqueId, REQUIRED, (curdi_nccl_unique_id * unique_id),         \
      (unique_id))                                                           \
    X(ncclCommInitRankConfig, REQUIRED,                                      \
      (curdi_nccl_comm * comm, int nranks, curdi_nccl_unique_id comm_id,     \
       int rank, curdi_nccl_config *config),                             \
      (comm, nranks, comm_id, rank, config))                                 \
    X(ncclCommSplit, OPTIONAL,                                               \
      (curdi_nccl_comm comm, int color, int key, curdi_nccl_comm *new_comm,  \
       curdi_nccl_config *config),                                       \
      (comm, color, key, new_comm, config))                                  \
    X(ncclCommFinalize, REQUIRED, (curdi_nccl_comm comm), (comm))            \
    X(ncclCommDestroy, REQUIRED, (curdi_nccl_comm comm), (comm))             \
    X(ncclCommAbort, REQUIRED, (curdi_nccl_comm comm), (comm))               \
    X(ncclCommGetAsyncError, REQUIRED,                                       \
      (curdi_nccl_comm comm, curdi_nccl_result * async_error),               \
      (comm, async_error))                                                   \
    X(ncclCommCount, REQUIRED, (const curdi_nccl_comm comm, int *count),     \
      (comm, count))                                                         \
    X(ncclCommUserRank, REQUIRED, (const curdi_nccl_comm comm, int *rank),   \
      (comm, rank))                                                          \
    X(ncclGroupStart, REQUIRED, (void), ())                                  \
    X(ncclGroupEnd, REQUIRED, (void), ())                                    \
    X(ncclAllReduce, REQUIRED,                                               \
      (const void *send, void *recv, size_t count,                           \
       curdi_nccl_data_type data_type, curdi_nccl_red_op op,                 \
       curdi_nccl_comm comm, curdi_cu_stream stream),                        \
      (send, recv, count, data_type, op, comm, stream))                      \
    X(ncclBroadcast, REQUIRED,                                               \
      (const void *send, void *recv, size_t count,                           \
       curdi_nccl_data_type data_type, int root, curdi_nccl_comm comm,       \
       curdi_cu_stream stream),                                              \
      (send, recv, count, data_type, root, comm, stream))                    \
    X(ncclReduce, REQUIRED,                                                  \
      (const void *send, void *recv, size_t count,                           \
       curdi_nccl_data_type data_type, curdi_nccl_red_op op, int root,       \
       curdi_nccl_comm comm, curdi_cu_stream stream),                        \
      (send, recv, count, data_type, op, root, comm, stream))                \
    X(ncclAllGather, REQUIRED,                                               \
      (const void *send, void *recv, size_t send_count,                      \
       curdi_nccl_data_type data_type, curdi_nccl_comm comm,                 \
       curdi_cu_stream stream),                                              \
      (send, recv, send_count, data_type, comm, stream))                     \
    X(ncclReduceScatter, REQUIRED,                                           \
      (const void *send, void *recv, size_t recv_count,                      \
       curdi_nccl_data_type data_type, curdi_nccl_red_op op,                 \
       curdi_nccl_comm comm, curdi_cu_stream stream),                        \
      (send, recv, recv_count, data_type, op, comm, stream))                 \
    X(ncclSend, REQUIRED,                                                    \
      (const void *send, size_t count, curdi_nccl_data_type data_type,       \
       int peer, curdi_nccl_comm comm, curdi_cu_stream stream),              \
      (send, count, data_type, peer, comm, stream))                          \
    X(ncclRecv, REQUIRED,                                                    \
      (void *recv, size_t count, curdi_nccl_data_type data_type, int peer,   \
       curdi_nccl_comm comm, curdi_cu_stream stream),                        \
      (recv, count, data_type, peer, comm, stream))

/* The two entries that describe an error and return text, never fail:
 * X(name, params, args). The fault sweep passes them through. */
#define CURDI_NCCL_TEXT_ENTRY_LIST(X)                                        \
    X(ncclGetErrorString, (curdi_nccl_result result), (result))              \
    X(ncclGetLastError, (curdi_nccl_comm comm), (comm))

#define CURDI_NCCL_PFN_(name, tier, params, args)                            \
    typedef curdi_nccl_result (*curdi_pfn_##name) params;
CURDI_NCCL_ENTRY_LIST(CURDI_NCCL_PFN_)
#undef CURDI_NCCL_PFN_
#define CURDI_NCCL_TEXT_PFN_(name, params, args)                             \
    typedef const char *(*curdi_pfn_##name) params;
CURDI_NCCL_TEXT_ENTRY_LIST(CURDI_NCCL_TEXT_PFN_)
#undef CURDI_NCCL_TEXT_PFN_

#endif
