/*
 * curd.h - CUDA resident dispatch.
 *
 * curd is a C11 library over the CUDA Driver API. It loads the driver at run
 * time (no link-time dependency on libcuda), keeps data resident on the GPU
 * behind safe handles, pools device and page-locked host memory, and moves
 * bytes between host and device in as few DMA operations and fences as it
 * can. Every size, offset and byte counter is checked: a bad range is a typed
 * error, never a wild DMA.
 *
 * This header is the contract: what each call does, what it refuses and
 * who owns what. How curd does it and what that costs (hashes, chunk
 * sizes, thread counts, timings, what a given driver does) is in the
 * manual pages (man 3 curd, and one page per function) and doc/.
 *
 * Conventions that hold for every function below:
 *  - Every fallible call returns a curd_status. Results come back through
 *    out parameters, which are written only on success.
 *  - A call validates all of its input before it changes anything: on an
 *    error nothing was moved, allocated, freed or counted.
 *  - curd_last_error() gives the calling thread's sentence for its last
 *    failure; it names what failed and ends with "Fix: ...".
 *  - The library never prints (unless the CURD_TRACE environment variable
 *    is set, then it traces to standard error) and never exits or aborts.
 *  - Callers own their host memory; the library never hands back memory that
 *    must be freed by anything but a curd_ function.
 *  - Options and result structs start with a struct_size field that the
 *    caller sets to sizeof the struct it was compiled with (the options'
 *    _init functions do it; each result struct has an initialiser macro,
 *    curd 1.2: curd_stats stats = CURD_STATS_INIT;). That lets the
 *    structs grow without breaking callers: the library reads and writes
 *    only the fields both sides know, and rejects an options struct whose
 *    unknown tail is not zero.
 */
#ifndef CURD_H
#define CURD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* curd 1.2: an initialiser for a result struct whose first field is
 * struct_size: that field set to sizeof the struct, every other one zero
 * (CURD_STATS_INIT and its siblings below use it). */
#ifdef __cplusplus
/* C++ (before C++20) has no designated initialisers, and a brace list
 * shorter than the struct warns under -Wextra: a value-initialised copy. */
#define CURD_RESULT_INIT(type)                                                \
    ([]() {                                                                   \
        type value = type();                                                  \
        value.struct_size = sizeof(type);                                     \
        return value;                                                         \
    }())
#else
#define CURD_RESULT_INIT(type) {.struct_size = sizeof(type)}
#endif

#if defined(CURD_BUILDING) && defined(__GNUC__)
#define CURD_API __attribute__((visibility("default")))
#else
#define CURD_API
#endif

/* ------------------------------------------------------------------------
 * Version
 * The one place the version is written; the Makefile and the packaging
 * read it from here.
 * ---------------------------------------------------------------------- */
#define CURD_VERSION_MAJOR 1
#define CURD_VERSION_MINOR 1
#define CURD_VERSION_PATCH 0
#define CURD_VERSION_NUMBER                                                   \
    (CURD_VERSION_MAJOR * 10000 + CURD_VERSION_MINOR * 100 + CURD_VERSION_PATCH)

/* The version of the library loaded at run time, as CURD_VERSION_NUMBER. */
CURD_API unsigned curd_version(void);
/* The same as "MAJOR.MINOR.PATCH"; a static string. */
CURD_API const char *curd_version_string(void);

/* ------------------------------------------------------------------------
 * Status and errors
 * The numbers are part of the ABI and never change meaning.
 * ---------------------------------------------------------------------- */
typedef enum curd_status {
    CURD_OK = 0,
    CURD_E_INVALID_ARGUMENT = 1, /* null pointer, zero length, bad option */
    CURD_E_RANGE = 2,            /* a byte range past the end of its buffer */
    CURD_E_OVERFLOW = 3,         /* a size or counter sum that overflows */
    CURD_E_BUDGET = 4,           /* over a resident budget or live limit */
    CURD_E_OUT_OF_MEMORY = 5,    /* device or host memory exhausted */
    CURD_E_NO_DRIVER = 6,        /* libcuda missing or too old */
    CURD_E_NO_DEVICE = 7,        /* no such device ordinal */
    CURD_E_DRIVER = 8,           /* a driver call failed; see last_driver_code */
    CURD_E_STALE_HANDLE = 9,     /* freed, forged or foreign handle */
    CURD_E_BUSY = 10,            /* in use by work that has not completed */
    CURD_E_UNSUPPORTED = 11,     /* not possible here (e.g. after fork) */
    CURD_E_PROGRAM = 12,         /* a module image failed to load or link */
    CURD_E_DEVICE_LOST = 13,     /* the context is unusable (sticky fault) */
    CURD_E_COMM = 14             /* a communicator failed or was aborted: a
                                    peer died, timed out, or NCCL reported
                                    an error */
} curd_status;

/* "CURD_OK", "CURD_E_RANGE", ...; "CURD_E_UNKNOWN" for other values. */
CURD_API const char *curd_status_name(curd_status status);
/* The calling thread's sentence for its last failed call, ending with
 * "Fix: ..."; "" before any failure. curd_status_name, curd_last_error,
 * curd_last_driver_code, curd_version and curd_version_string never touch
 * it (so one argument list may call curd_status_name and this); any other
 * curd call on the thread may rewrite it (every failing one does). */
CURD_API const char *curd_last_error(void);
/* The CUresult of the calling thread's last failed driver call, 0 if none. */
CURD_API int curd_last_driver_code(void);

/* ------------------------------------------------------------------------
 * Driver and devices
 * A curd_device owns a retained primary context, its streams, its pools and
 * its resident buffers; curd_device_close() releases all of them. A device
 * may be used from many threads at once. CUDA contexts do not survive
 * fork(): a child must open its own device after exec.
 * ---------------------------------------------------------------------- */
typedef struct curd_device curd_device;

/* The driver's CUDA version (e.g. 13000), loading the driver if needed. */
CURD_API curd_status curd_driver_version(int *version);
/* The number of CUDA devices; 0 is not an error. */
CURD_API curd_status curd_device_count(int *count);

#define CURD_DEVICE_OPTIONS_FLAGS_KNOWN 0u

typedef struct curd_device_options {
    size_t struct_size;
    /* Idle bytes each pool may keep cached; 0 picks the default
     * (device pool: 1/8 of device memory capped at 4 GiB; pinned pool:
     * 256 MiB). */
    uint64_t device_cache_bytes;
    uint64_t pinned_cache_bytes;
    /* Hard caps on live bytes per pool (CURD_E_BUDGET past them); 0 means
     * no cap. For sharing one GPU between processes or libraries. */
    uint64_t device_live_limit_bytes;
    uint64_t pinned_live_limit_bytes;
    /* Cap on resident buffer bytes; 0 means the default budget (9/10 of
     * total memory, capped by 9/10 of live free memory plus the bytes
     * already resident). A non-zero value can only lower the budget. */
    uint64_t resident_limit_bytes;
    uint32_t flags; /* none defined yet: must be 0 */
    /* Loaded modules that no program uses, kept (least recently used
     * unloaded first) so that loading their image again costs no JIT; 0
     * picks the default, 64. */
    uint32_t module_cache_count;
} curd_device_options;

CURD_API void curd_device_options_init(curd_device_options *options);
/* options may be NULL for the defaults. The device shares the GPU's
 * primary context with every other user of it in the process (the CUDA
 * runtime, cuBLAS, PyTorch). A kernel fault breaks that context for all
 * of them, and only a reset mends it: the last curd device of the GPU to
 * close after a fault resets it, and so does an open that finds it
 * broken while no curd device of the GPU is open (another library's
 * kernel faulted). A reset frees everything any user had in the context;
 * it was unusable already. Where the driver keeps the GPU unusable after
 * the fault (curd_device_open(3) says which), the open fails with
 * CURD_E_DEVICE_LOST, its Fix a restart of the process. */
CURD_API curd_status curd_device_open(int ordinal,
                                      const curd_device_options *options,
                                      curd_device **out_device);
/* Waits for the device's outstanding work, frees every buffer, block and
 * stream it owns and releases the primary context. NULL is a no-op. Safe at
 * process exit, after the driver has begun to deinitialise. The device is
 * gone whatever this returns; if its context cannot be made current (so
 * nothing in it can be destroyed), the failure is returned and the context
 * treated as lost: the GPU's other devices report CURD_E_DEVICE_LOST and
 * the last of them to close resets it, freeing all of it. */
CURD_API curd_status curd_device_close(curd_device *device);

#define CURD_CAP_COOPERATIVE_LAUNCH (1u << 0)
#define CURD_CAP_UNIFIED_ADDRESSING (1u << 1)
#define CURD_CAP_STREAM_ORDERED_ALLOC (1u << 2) /* cuMemAllocAsync present */
#define CURD_CAP_HOST_REGISTER (1u << 3)        /* cuMemHostRegister present */
/* curd_buffer_alloc_shareable and curd_buffer_import_fd work: the driver
 * has the virtual memory management entries and the device exports
 * memory as POSIX file descriptors (curd 1.2). */
#define CURD_CAP_SHAREABLE (1u << 4)

typedef struct curd_device_props {
    size_t struct_size;
    int ordinal;
    char name[256];
    char pci_bus_id[32];
    int compute_capability_major;
    int compute_capability_minor;
    uint64_t total_memory_bytes;
    uint64_t free_memory_bytes; /* live, read at the call */
    int multiprocessor_count;
    int max_threads_per_block;
    int max_block_dim[3];
    int max_grid_dim[3];
    int shared_memory_per_block_bytes;
    int async_engine_count;
    int driver_version;
    uint32_t capabilities; /* CURD_CAP_* */
    uint64_t resident_budget_bytes; /* live, read at the call */
} curd_device_props;

/* curd 1.2: curd_device_props props = CURD_DEVICE_PROPS_INIT; */
#define CURD_DEVICE_PROPS_INIT CURD_RESULT_INIT(curd_device_props)

/* props->struct_size must be set by the caller. */
CURD_API curd_status curd_device_info(curd_device *device,
                                      curd_device_props *props);

/* Checks the device end to end: loads a tiny kernel of the library's own
 * as a program, dispatches it on random bytes in borrowed memory and
 * verifies every byte (curd_device_self_test(3)); it is counted in
 * curd_stats like any load and dispatch. Writes a one-line report
 * (NUL-terminated, truncated to report_capacity; report may be NULL when
 * the capacity is 0). CURD_OK when every byte matched. */
CURD_API curd_status curd_device_self_test(curd_device *device, char *report,
                                           size_t report_capacity);

/* ------------------------------------------------------------------------
 * Pools and statistics
 * Each device has two pools: device memory and page-locked (pinned) host
 * memory. Requests round up to a size class with bounded waste (at most
 * 255 bytes up to 2 KiB, less than 1/8 of the request above); released
 * blocks are cached up to the pool's cache budget (curd_block_acquire(3)
 * says how). When the driver
 * runs out of memory a pool trims its cache, asks the reclaim callback,
 * trims every pool, and only then reports CURD_E_OUT_OF_MEMORY. A request
 * larger than all the memory behind its pool (the device's total memory;
 * the host's physical memory for pinned blocks) is CURD_E_OUT_OF_MEMORY at
 * once: nothing is trimmed, called or counted.
 * ---------------------------------------------------------------------- */
typedef enum curd_pool_kind {
    CURD_POOL_DEVICE = 0,
    CURD_POOL_PINNED = 1
} curd_pool_kind;

/* A block handed out by a pool. Treat it as a value: copy it, keep it, and
 * give it back once with curd_block_release(). */
typedef struct curd_block {
    uint64_t device_ptr; /* CUdeviceptr for device blocks, 0 for pinned */
    void *host_ptr;      /* host address for pinned blocks, NULL for device */
    size_t byte_len;     /* what was asked for */
    size_t class_bytes;  /* what the block really holds (>= byte_len) */
    uint32_t pool_kind;  /* curd_pool_kind */
    uint32_t reserved;   /* curd's own (a token naming the block); keep it */
} curd_block;

CURD_API curd_status curd_block_acquire(curd_device *device,
                                        curd_pool_kind kind, size_t byte_len,
                                        curd_block *out_block);
/* Releasing a block twice, to another device, or one that curd never
 * handed out (a copy altered in any field) is CURD_E_STALE_HANDLE and
 * changes nothing. */
CURD_API curd_status curd_block_release(curd_device *device,
                                        const curd_block *block);

/* A level and its history: current and peak levels, cumulative amounts
 * added (allocated) and removed (freed). For the pools, current, allocated
 * and freed are exact; peak is exact while one thread uses a pool and, with
 * threads using it at once, may be off by less than 2 MiB per other
 * thread, though a cached_bytes peak never passes the pool's
 * cache_budget_bytes (curd_device_stats(3)). */
typedef struct curd_stat_family {
    uint64_t current;
    uint64_t peak;
    uint64_t allocated;
    uint64_t freed;
} curd_stat_family;

typedef struct curd_pool_stats {
    curd_stat_family live_bytes;      /* class bytes handed out */
    curd_stat_family cached_bytes;    /* class bytes idle in the cache */
    curd_stat_family requested_bytes; /* bytes asked for, before rounding */
    curd_stat_family live_blocks;
    curd_stat_family cached_blocks;
    uint64_t upstream_allocs;
    uint64_t upstream_frees;
    uint64_t cache_hits;
    uint64_t cache_misses;
    uint64_t oom_retries;
    uint64_t oom_failures;
    uint64_t upstream_ns; /* time spent in upstream alloc and free calls */
    uint64_t cache_budget_bytes;
    uint64_t live_limit_bytes; /* 0: no cap */
} curd_pool_stats;

typedef struct curd_stats {
    size_t struct_size;
    curd_pool_stats device_pool;
    curd_pool_stats pinned_pool;
    /* Transfers. */
    uint64_t h2d_bytes;   /* bytes copied host to device */
    uint64_t d2h_bytes;   /* bytes copied device to host */
    uint64_t copy_ops;    /* DMA operations enqueued (fused spans count 1) */
    uint64_t fences;      /* host waits on device work */
    uint64_t fill_ops;    /* device-side memsets */
    uint64_t fill_bytes;
    /* Resident buffers: bytes and count. */
    curd_stat_family resident_bytes;
    curd_stat_family resident_buffers;
    /* Statistics-only counters found below zero and repaired to zero. */
    uint64_t accounting_repairs;
    /* Fields above are curd 1.0's; a caller built against it passes its
     * smaller struct_size and gets just those. */
    /* Programs: the module cache. A failed load counts nothing. */
    uint64_t module_cache_hits;   /* loads that found their module loaded */
    uint64_t module_cache_misses; /* loads that loaded (JIT-compiled) it */
    uint64_t jit_ns;              /* time those misses spent loading it */
    uint64_t modules_loaded;      /* level: modules loaded now */
    uint64_t modules_cached;      /* level: of those, idle (no program) */
    uint64_t module_evictions;    /* idle modules unloaded past the bound */
    /* Dispatches, counted once their work is complete (curd_dispatch or
     * curd_pending_wait returned CURD_OK, or curd_pending_free found it
     * done without a wait). A failed dispatch, or one whose wait failed,
     * counts nothing. */
    uint64_t dispatches;
    uint64_t launches;            /* kernel launches of dispatches and
                                     batch runs, each iteration one */
    uint64_t dispatch_device_ns;  /* sums of their curd_timing fields; a
                                     synchronous curd_dispatch is timed
                                     on the device only under CURD_TRACE */
    uint64_t dispatch_enqueue_ns;
    uint64_t dispatch_wait_ns;
    /* Batches (curd_batch_run, _run_async), counted once complete. */
    uint64_t batch_runs;     /* runs completed */
    uint64_t graph_replays;  /* of those, replays of a captured graph */
    uint64_t graph_captures; /* graphs captured and instantiated */
    uint64_t graph_updates;  /* kernel nodes changed in place */
    /* Fields above are curd 1.0's second part; those below came with
     * curd 1.1 (a caller built before passes its smaller struct_size).
     * Copies between resident buffers (curd_buffer_copy, _copy_async,
     * curd_batch_copy), counted on success only: bytes copied, and ops,
     * one per DMA span (adjacent copies fused count one). A copy between
     * two devices counts on its destination device. */
    uint64_t d2d_bytes, d2d_ops;   /* copies within one device */
    uint64_t peer_bytes, peer_ops; /* copies between devices (dst device counts) */
    /* Collectives (curd 1.1), counted once complete: operations run on
     * this device's communicators, and the bytes of the larger of each
     * operation's send and receive ranges. */
    uint64_t collective_ops;
    uint64_t collective_bytes;
    /* curd 1.1: bytes of the live imported buffers (curd_buffer_import),
     * a level; they count in no resident statistic or budget. */
    uint64_t imported_bytes;
} curd_stats;

/* curd 1.2: curd_stats stats = CURD_STATS_INIT; */
#define CURD_STATS_INIT CURD_RESULT_INIT(curd_stats)

/* stats->struct_size must be set by the caller: at least up to
 * accounting_repairs (the 1.0 struct); only struct_size bytes are written
 * (those of this version's fields that fit). */
CURD_API curd_status curd_device_stats(curd_device *device, curd_stats *stats);
/* Resets the cumulative counters (allocated, freed, hits, ops, dispatches,
 * timing sums, ...) and sets each peak to its current level. Levels
 * (current, modules_loaded, modules_cached) are untouched. */
CURD_API curd_status curd_device_stats_reset(curd_device *device);
/* Frees cached blocks upstream until each pool caches at most keep_bytes:
 * the device pool, then the pinned pool. CURD_E_OVERFLOW when a pool's
 * cumulative counters lack room to count its trim (counters never
 * saturate); that pool and any after it are left as they were, and
 * curd_device_stats_reset() makes room. */
CURD_API curd_status curd_device_trim(curd_device *device, uint64_t keep_bytes);

/* Called when device memory runs out, after the pool's own cache did not
 * suffice: free what you can (at least bytes_needed if possible) and return
 * how many bytes you freed. Called without any curd lock held; it may call
 * curd_buffer_free() and curd_block_release() but must not allocate. */
typedef uint64_t (*curd_reclaim_fn)(void *context, uint64_t bytes_needed);
/* fn NULL removes the callback. */
CURD_API curd_status curd_device_set_reclaim(curd_device *device,
                                             curd_reclaim_fn fn, void *context);

/* ------------------------------------------------------------------------
 * Resident buffers
 * A curd_buffer names device memory owned by a device. It is a value (a
 * table index and a generation): a freed, forged or foreign handle is
 * CURD_E_STALE_HANDLE, never a use-after-free. A freed handle stays stale
 * for good (a slot is retired rather than let its generation wrap), and
 * generations start at random, so a made-up handle names a live buffer only
 * by a 1-in-2^23 accident. Resident bytes are held within the device's
 * resident budget. Buffer memory comes from the device pool; its contents
 * are undefined until written (curd_buffer_clear zeroes it on the device).
 * ---------------------------------------------------------------------- */
typedef struct curd_buffer {
    uint64_t id; /* opaque; 0 is never a live buffer */
} curd_buffer;

/* byte_len 0 is CURD_E_INVALID_ARGUMENT. CURD_E_BUDGET, with the numbers,
 * when the resident bytes (the sum of the live buffers' byte_len) would
 * pass the budget: 9/10 of total memory, capped by 9/10 of the free memory
 * plus the bytes already resident, and by options.resident_limit_bytes.
 * "Free" counts the device pool's cached blocks, which the pool gives back
 * on demand, so a freed buffer's memory is available to the next
 * allocation. Also CURD_E_BUDGET past 2^24 - 1 live buffers. */
CURD_API curd_status curd_buffer_alloc(curd_device *device, size_t byte_len,
                                       curd_buffer *out_buffer);
/* Freeing a buffer that queued work still uses (an asynchronous upload not
 * yet completed by curd_device_sync_uploads, or a transfer or fill running
 * on another thread) is CURD_E_BUSY: nothing is freed, and the caller frees
 * it after completing that work. Never deferred. A buffer of a static set
 * (curd_session_upload_static) is its session's: CURD_E_BUSY too, held or
 * only cached, its Fix naming curd_session_release_static (curd 1.2;
 * before, it was freed under the cache). A freed handle's later use is
 * CURD_E_STALE_HANDLE, its sentence naming the call that let the buffer
 * go (curd_buffer_free, curd_session_release, ...). */
CURD_API curd_status curd_buffer_free(curd_device *device, curd_buffer buffer);
/* Names byte_len bytes of device memory at device_ptr that another
 * library allocated (cudaMalloc, PyTorch, RMM: a CUdeviceptr) as a
 * curd_buffer that every transfer, dispatch and batch takes, checked like
 * any other. The range must lie whole in one allocation of the device's
 * primary context (cuPointerGetAttribute says so): else
 * CURD_E_INVALID_ARGUMENT (not device memory, another device's or
 * context's) or CURD_E_RANGE (past the allocation's end). curd never
 * frees the memory: curd_buffer_free forgets the handle (CURD_E_BUSY
 * while work that uses it is in flight), and the owner must keep the
 * memory allocated until then. It counts in no budget and no resident
 * statistic, only in curd_stats.imported_bytes. The export is
 * curd_buffer_device_ptr. */
CURD_API curd_status curd_buffer_import(curd_device *device,
                                        uint64_t device_ptr,
                                        uint64_t byte_len,
                                        curd_buffer *out_buffer);
/* Buffers shared with other processes (curd 1.2). A shareable buffer is
 * memory that other processes of the host map and use as their own, with
 * no dangling memory: each process's mapping holds the memory alive, so
 * freeing on either side never invalidates the other's, the memory goes
 * back to the driver when the last process frees its buffer (or exits,
 * killed or not), and each side's buffer is a curd_buffer that every
 * transfer, dispatch, batch, copy and collective takes, checked like any
 * other. Where the driver or the device has no virtual memory management
 * with POSIX file descriptors, each is CURD_E_UNSUPPORTED.
 *
 * curd_buffer_alloc_shareable: as curd_buffer_alloc (same refusals, and
 * the resident budget and statistics count byte_len), but the memory is
 * its own allocation, made for sharing: the driver rounds it up to its
 * allocation granularity (curd_buffer_alloc_shareable(3)), so a small
 * shareable buffer costs a whole granule of device memory, which the
 * budget sees in the driver's free memory rather than in the resident
 * bytes. */
CURD_API curd_status curd_buffer_alloc_shareable(curd_device *device,
                                                 size_t byte_len,
                                                 curd_buffer *out_buffer);
/* A new file descriptor (close-on-exec) for the memory of buffer, which
 * curd_buffer_alloc_shareable made in this process (another buffer, an
 * imported one included, is CURD_E_INVALID_ARGUMENT: an importer passes
 * on the descriptor it received). The caller owns it: pass it on
 * (curd_fd_send, or pidfd_getfd in the receiver) and close it; as long as
 * it is open it holds the memory alive too. The first export asks the
 * driver; curd keeps that descriptor until the buffer is freed and gives
 * a duplicate of it each time (CURD_E_OUT_OF_MEMORY when the process has
 * no descriptor left). */
CURD_API curd_status curd_buffer_export_fd(curd_device *device,
                                           curd_buffer buffer, int *out_fd);
/* The memory behind fd, a descriptor curd_buffer_export_fd gave in this
 * or another process, mapped for device as a buffer of byte_len bytes.
 * fd stays the caller's: the import does not take or close it, and the
 * caller may close it as soon as the call returns. byte_len must be what
 * the exporter's buffer holds (curd_fd_recv gives it): a byte_len that,
 * rounded up to the granularity, passes the end of the allocation is
 * CURD_E_RANGE; 0, a descriptor that is not open, or one that is not a
 * CUDA shareable handle (a pipe, a file) is CURD_E_INVALID_ARGUMENT, as
 * is memory of another device that this device cannot reach (no peer
 * access). The buffer counts in no budget or resident statistic, only in
 * curd_stats.imported_bytes (the memory is the exporter's allocation);
 * curd_buffer_free unmaps it, which never disturbs the other processes. */
CURD_API curd_status curd_buffer_import_fd(curd_device *device, int fd,
                                           uint64_t byte_len,
                                           curd_buffer *out_buffer);
/* Passes fd and byte_len over a connected Unix domain stream socket
 * (SCM_RIGHTS); the sender keeps its own fd (close it after). Each send
 * is received by one curd_fd_recv, which gives a new descriptor that the
 * caller owns (close-on-exec) and the byte_len sent. A socket that fails,
 * is closed at the other end or carries anything else is
 * CURD_E_INVALID_ARGUMENT (any descriptor that came with it closed), as
 * are a closed fd and a byte_len of 0. Both block; neither touches a
 * device. */
CURD_API curd_status curd_fd_send(int socket, int fd, uint64_t byte_len);
CURD_API curd_status curd_fd_recv(int socket, int *out_fd,
                                  uint64_t *out_byte_len);
CURD_API curd_status curd_buffer_size(curd_device *device, curd_buffer buffer,
                                      size_t *out_byte_len);
/* The CUdeviceptr, for interoperation with other CUDA code. Valid until the
 * buffer is freed. */
CURD_API curd_status curd_buffer_device_ptr(curd_device *device,
                                            curd_buffer buffer,
                                            uint64_t *out_device_ptr);
CURD_API curd_status curd_device_resident_bytes(curd_device *device,
                                                uint64_t *out_bytes);

/* Fills [offset, offset + byte_len) with value on the device (a memset, no
 * upload): counted in fill_ops and fill_bytes, one fence, no h2d bytes.
 * byte_len 0 costs nothing. */
CURD_API curd_status curd_buffer_fill(curd_device *device, curd_buffer buffer,
                                      size_t offset, size_t byte_len,
                                      uint8_t value);
/* Zeroes the whole buffer on the device. */
CURD_API curd_status curd_buffer_clear(curd_device *device, curd_buffer buffer);

/* ------------------------------------------------------------------------
 * Transfers
 * Synchronous transfers return once the bytes have arrived. A batch is
 * validated whole before any byte moves, is staged through the pinned pool,
 * runs on one pooled stream, and ends with exactly one fence. Reads of
 * adjacent or overlapping ranges of one buffer are fused into one DMA.
 * Zero-length items are allowed and cost nothing.
 *
 * Details:
 *  - Every item is checked, zero-length ones included: its handle must be
 *    live and its offset at most the buffer's size; its host pointer may be
 *    NULL only when byte_len is 0. Ranges past the end are CURD_E_RANGE,
 *    offset + byte_len past 2^64 CURD_E_OVERFLOW, byte_len above
 *    dst_capacity CURD_E_RANGE. Nothing past byte_len of a destination is
 *    written, whatever its capacity.
 *  - Upload items whose ranges overlap apply in item order: the later item
 *    wins. Upload items adjacent on the device are fused too (their sources
 *    packed back to back in staging). Download destinations must not
 *    overlap each other (CURD_E_INVALID_ARGUMENT).
 *  - Host memory registered with curd_host_register skips staging: a fused
 *    span whose host side is one run inside a registered range moves in
 *    one DMA straight to or from it.
 *  - Large transfers are staged in chunks and pipelined: how, and the
 *    environment variables that tune it, curd_buffer_upload(3) and
 *    curd(3) say.
 *  - Counters, added only on success: h2d_bytes and d2h_bytes count the
 *    bytes that cross the bus (a fused span once); copy_ops counts DMAs (a
 *    span is cut at chunk boundaries, one DMA per piece); fences counts one
 *    per call that moved bytes (inside a pipelined transfer, the event
 *    waits that recycle staging chunks are flow control, not fences). A
 *    call that moves nothing costs no stream and no fence.
 *  - A transfer or fill of a buffer with asynchronous uploads pending runs
 *    on the upload stream, after them.
 *  - When a transfer fails, nothing is counted and nothing outside the
 *    named ranges changes; a failed upload may have written part of its
 *    device ranges, and a failed download part of its destinations (only
 *    when it streams through more than one staging chunk or lands directly
 *    in registered memory: a smaller one copies out after its fence).
 * ---------------------------------------------------------------------- */

/* byte_len must be exactly the buffer's size (else CURD_E_RANGE). */
CURD_API curd_status curd_buffer_upload(curd_device *device, curd_buffer buffer,
                                        const void *src, size_t byte_len);
CURD_API curd_status curd_buffer_upload_at(curd_device *device,
                                           curd_buffer buffer, size_t offset,
                                           const void *src, size_t byte_len);
/* byte_len must be exactly the buffer's size (else CURD_E_RANGE). */
CURD_API curd_status curd_buffer_download(curd_device *device,
                                          curd_buffer buffer, void *dst,
                                          size_t byte_len);
/* Copies [offset, offset + byte_len) into dst, which holds dst_capacity
 * bytes. */
CURD_API curd_status curd_buffer_download_range(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset, size_t byte_len,
                                                void *dst, size_t dst_capacity);

typedef struct curd_upload {
    curd_buffer buffer;
    size_t offset;
    const void *src;
    size_t byte_len;
} curd_upload;

typedef struct curd_download {
    curd_buffer buffer;
    size_t offset;
    size_t byte_len;
    void *dst;
    size_t dst_capacity;
} curd_download;

CURD_API curd_status curd_upload_batch(curd_device *device,
                                       const curd_upload *items, size_t count);
CURD_API curd_status curd_download_batch(curd_device *device,
                                         const curd_download *items,
                                         size_t count);

/* Page-locks caller memory (cuMemHostRegister, PORTABLE) so transfers from
 * and to it skip staging. The range must not overlap one already
 * registered with this device (CURD_E_INVALID_ARGUMENT); CURD_E_UNSUPPORTED
 * when the driver lacks cuMemHostRegister. Unregister with the same ptr;
 * CURD_E_BUSY while a transfer or a pending asynchronous upload uses it.
 * curd_device_close unregisters what is left. */
CURD_API curd_status curd_host_register(curd_device *device, void *ptr,
                                        size_t byte_len);
CURD_API curd_status curd_host_unregister(curd_device *device, void *ptr);

/* Enqueues an upload from page-locked memory (a pinned block or a
 * registered range) on the device's upload stream and returns at once.
 * pinned_src must stay unchanged, and the buffer may not be freed
 * (CURD_E_BUSY), until curd_device_sync_uploads() returns. From pageable
 * memory it is still correct, but returns only once the driver has staged
 * the bytes. Counted (h2d_bytes, copy_ops) when enqueued; the fence is the
 * sync's. */
CURD_API curd_status curd_buffer_upload_async(curd_device *device,
                                              curd_buffer buffer, size_t offset,
                                              const void *pinned_src,
                                              size_t byte_len);
/* curd 1.1: enqueues a download of byte_len bytes from offset in the
 * buffer into page-locked host memory (a pinned block, a range registered
 * with curd_host_register, or memory another library page-locked: the
 * driver says so of its first and last byte, else
 * CURD_E_INVALID_ARGUMENT) and returns at once with
 * a curd_pending (declared with the dispatches below): curd_pending_wait
 * fences it (the bytes are then in pinned_dst), curd_pending_free drains
 * it; curd_pending_stream_wait and _event order other work after it.
 * Until then pinned_dst must stay allocated, the buffer cannot be freed
 * (CURD_E_BUSY) and the registration cannot be unregistered. It runs
 * after the buffer's pending asynchronous uploads, and counts (d2h_bytes,
 * copy_ops, a fence) once complete. */
struct curd_pending;
CURD_API curd_status
curd_buffer_download_async(curd_device *device, curd_buffer buffer,
                           size_t offset, void *pinned_dst, size_t byte_len,
                           struct curd_pending **out_pending);
/* Waits for every upload enqueued by curd_buffer_upload_async: one fence,
 * or none when nothing is pending. If it fails, the uploads stay pending
 * (their buffers stay busy) until a later call succeeds. */
CURD_API curd_status curd_device_sync_uploads(curd_device *device);

/* ------------------------------------------------------------------------
 * Programs
 * A curd_program is one kernel (an entry) of a module image: PTX text, a
 * cubin or a fatbin, told apart by content, or (curd 1.1) a module the
 * driver's linker made of several images (curd_program_desc.link_images).
 * Loading caches the module per device, keyed by the image bytes (every
 * input's, in order, for a link), the device's compute capability and the
 * JIT options, the bytes compared on a hit (curd_program_load(3)): a
 * second load of the same image makes no JIT and no driver call. Modules
 * are shared by the programs that use them; once none does, a module stays
 * loaded among the device's idle modules (curd_device_options.
 * module_cache_count of them, least recently used unloaded first).
 *
 * A program belongs to its device and may be used from many threads.
 * curd_program_free() frees it; curd_device_close() frees every program
 * the device still has, so a program must not be used or freed after its
 * device is closed.
 * ---------------------------------------------------------------------- */
typedef struct curd_program curd_program;

typedef enum curd_image_kind {
    CURD_IMAGE_PTX = 1,    /* text: optional whitespace and comments, then
                              ".version" */
    CURD_IMAGE_CUBIN = 2,  /* ELF: 0x7f 'E' 'L' 'F' */
    CURD_IMAGE_FATBIN = 3, /* 0xBA55ED50, little-endian */
    /* curd 1.1: "!<arch>\n": a library of device code (nvcc -lib
     * -rdc=true, libcudadevrt.a), only as an input of a link. */
    CURD_IMAGE_LIBRARY = 4
} curd_image_kind;

/* curd 1.1: one more input of a link (curd_program_desc.link_images),
 * told apart by content like the desc's image: PTX (compiled with nvcc
 * -rdc=true, so that it may call functions of the other inputs), a cubin
 * (relocatable or not), a fatbin or a library. The caller owns the bytes;
 * curd copies what it needs before curd_program_load returns. */
typedef struct curd_program_image {
    const void *image;
    size_t image_bytes; /* for PTX, the text's length (a NUL inside ends
                           it) */
} curd_program_image;

/* curd 1.1: the most inputs a link takes besides the desc's image. */
#define CURD_PROGRAM_LINK_MAX 64u

/* curd 1.1: jit_optimization_level is given (else the driver's default,
 * 4). */
#define CURD_PROGRAM_OPTIMIZATION_LEVEL (1u << 0)
/* curd 1.1: the JIT generates line information (for profilers and
 * compute-sanitizer). */
#define CURD_PROGRAM_LINE_INFO (1u << 1)
#define CURD_PROGRAM_FLAGS_KNOWN                                              \
    (CURD_PROGRAM_OPTIMIZATION_LEVEL | CURD_PROGRAM_LINE_INFO)

typedef struct curd_program_desc {
    size_t struct_size;
    const void *image;  /* PTX text, cubin or fatbin: told apart by content */
    size_t image_bytes; /* for PTX, the text's length (a NUL inside ends it);
                           curd copies what it needs */
    const char *entry;  /* the kernel's name (extern "C" or mangled) */
    uint32_t flags;     /* CURD_PROGRAM_* */
    /* curd 1.1: the JIT's options for PTX (a binary ignores them), part of
     * the module cache's key: the same image with other options is
     * another module. */
    uint32_t jit_optimization_level; /* 0 to 4, with the flag above */
    uint32_t jit_max_registers; /* per thread, at most 255; 0: no limit */
    /* The compute capability to compile for, as 10 * major + minor (90
     * for 9.0), at most the device's; 0: the device's own. */
    uint32_t jit_target;
    /* curd 1.1: images to link with image. With link_count 0 (and
     * link_images NULL) image is loaded alone, as in curd 1.0. Otherwise
     * image is the first input of the driver's linker and
     * link_images[0 .. link_count - 1] follow it, in that order (at most
     * CURD_PROGRAM_LINK_MAX): several PTX modules that call each other's
     * functions, or code with the library it calls. The JIT options above
     * apply to the link; the linked module's key in the module cache
     * covers every input, in order, and the options; entry may be a
     * kernel of any input; curd_program_log gives the linker's
     * information log; curd_program_info's image_kind of a linked
     * program is CURD_IMAGE_CUBIN (what the linker made). */
    const curd_program_image *link_images;
    size_t link_count;
} curd_program_desc;

CURD_API void curd_program_desc_init(curd_program_desc *desc);
/* CURD_E_PROGRAM when the image is neither PTX, cubin nor fatbin (the
 * sentence shows its first bytes), when the PTX does not compile (the
 * sentence carries the driver's JIT log) or when the image has no such
 * entry (the sentence names the entries it has). curd 1.1, a link: every
 * input is checked before any driver call (CURD_E_INVALID_ARGUMENT for
 * link_images NULL with a count, a count past CURD_PROGRAM_LINK_MAX, an
 * input NULL or of 0 bytes; CURD_E_PROGRAM for an input of no kind, and
 * for a library given alone, without link_images); CURD_E_PROGRAM when
 * the link fails (an unresolved function, an input the linker refuses),
 * the sentence carrying the linker's error log, whose names for the
 * inputs are "image" and "link_images[i]". */
CURD_API curd_status curd_program_load(curd_device *device,
                                       const curd_program_desc *desc,
                                       curd_program **out_program);
/* NULL is a no-op. The program is freed whatever this returns; an idle
 * module the driver would not unload stays cached (past the bound) until
 * the next unload or the device's close. */
CURD_API curd_status curd_program_free(curd_program *program);

/* What the driver says about a program's kernel, read once at load. */
typedef struct curd_program_props {
    size_t struct_size;
    int registers_per_thread;
    size_t static_shared_bytes;
    size_t local_bytes_per_thread;
    int max_threads_per_block;
    /* The most dynamic shared memory a launch may ask for: the device's
     * opt-in limit less the static shared memory. */
    size_t max_dynamic_shared_bytes;
    /* The kernel's parameters (cuFuncGetParamInfo, CUDA 12.4 drivers);
     * param_count_known is 0, and param_count 0, when the driver cannot
     * tell. */
    uint32_t param_count;
    uint32_t param_count_known;
    int image_kind;     /* curd_image_kind */
    int binary_version; /* e.g. 90 for sm_90 */
    int ptx_version;    /* e.g. 80 for PTX ISA 8.0 */
} curd_program_props;

/* curd 1.2: curd_program_props props = CURD_PROGRAM_PROPS_INIT; */
#define CURD_PROGRAM_PROPS_INIT CURD_RESULT_INIT(curd_program_props)

/* props->struct_size must be set by the caller. No driver call. (The
 * struct is _props, like curd_device_props, since a C function and a type
 * cannot share the name curd_program_info.) */
CURD_API curd_status curd_program_info(const curd_program *program,
                                       curd_program_props *props);
/* curd 1.1: the JIT's information log of the program's module (what
 * ptxas said: registers, spills; for a linked module, the linker's;
 * empty for a binary or a quiet JIT),
 * kept from its load, as a NUL-terminated string into dst of capacity
 * bytes (cut short to fit); *out_len, when not NULL, receives its whole
 * length without the NUL. A failed load's error log is in its
 * curd_last_error sentence. No driver call. */
CURD_API curd_status curd_program_log(const curd_program *program, char *dst,
                                      size_t capacity, size_t *out_len);

/* ------------------------------------------------------------------------
 * Dispatch
 * A launch runs one program's kernel over a grid. Its arguments are the
 * kernel's parameters in the kernel's own order, each one of:
 *  - CURD_ARG_HOST: borrowed caller memory. curd stages it into a pooled
 *    device block for the launch: inputs are copied up, outputs that are
 *    not inputs (and scratch) are zeroed on the device, outputs are read
 *    back into the caller's memory (all of it, or [read_offset, +read_len)),
 *    and the block's device pointer is passed;
 *  - CURD_ARG_BUFFER: a resident buffer; its device pointer is passed.
 *    Outputs that are not inputs are zeroed first; nothing is read back
 *    unless `host` names where (then [read_offset, +read_len) of the
 *    buffer, read_len 0 meaning the whole buffer, into host of byte_len);
 *  - CURD_ARG_SCALAR: byte_len bytes at value passed by value (1, 2, 4 or
 *    8 bytes, or a by-value struct of that size and `align`);
 *  - CURD_ARG_NULL: a null pointer.
 * A binding (HOST or BUFFER) may state the kernel's view of its length:
 * elem_bytes per element (0: 1) and either static_elems, or length_arg,
 * the index of an unsigned integer SCALAR argument whose value is the
 * element count; the binding must hold that many elements (CURD_E_RANGE).
 * When the driver can tell a kernel's parameter list (CUDA 12.4 drivers),
 * the arguments must match it in count and in size.
 *
 * Everything is checked before anything is enqueued: the arguments, the
 * launch shape against the device's and the kernel's limits, dynamic shared
 * memory (above 48 KiB the kernel's attribute is raised for it),
 * cooperative launches against co-residency (blocks per multiprocessor
 * times multiprocessors), and the transient bytes against the device's
 * memory. A refused dispatch touches nothing. One that fails later (a
 * driver call failed) leaves caller memory untouched and nothing
 * allocated or counted; resident buffers it binds as outputs, inout or
 * scratch may hold zeros or what a launch that ran wrote, the others
 * are as they were.
 *
 * A kernel fault (illegal address, trap, ...) leaves the CUDA context
 * unusable: the call returns CURD_E_DEVICE_LOST, and so does every later
 * call on that device (and on the others open on that GPU) until it is
 * closed. The last close resets the GPU's primary context, which is
 * broken for every user of it in the process; a device opened again
 * works where the driver accepts that reset (see curd_device_open).
 * ---------------------------------------------------------------------- */
typedef enum curd_arg_kind {
    CURD_ARG_NULL = 0,
    CURD_ARG_HOST = 1,
    CURD_ARG_BUFFER = 2,
    CURD_ARG_SCALAR = 3
} curd_arg_kind;

typedef enum curd_arg_role {
    CURD_ROLE_INPUT = 1,   /* read by the kernel */
    CURD_ROLE_OUTPUT = 2,  /* written by the kernel; zeroed before it (by
                              a dispatch and, from curd 1.2, a batch) */
    CURD_ROLE_INOUT = 3,   /* read and written; never zeroed: bind an
                              accumulator that must keep its bytes so */
    CURD_ROLE_SCRATCH = 4  /* the kernel's workspace: zeroed, not read back */
} curd_arg_role;

typedef struct curd_arg {
    uint32_t kind;          /* curd_arg_kind */
    uint32_t role;          /* curd_arg_role, for HOST and BUFFER */
    curd_buffer buffer;     /* BUFFER */
    void *host;             /* HOST: caller memory; BUFFER: read-back
                               destination, or NULL */
    size_t byte_len;        /* HOST, BUFFER's host: bytes of host;
                               SCALAR: bytes of value */
    const void *value;      /* SCALAR */
    uint32_t align;         /* SCALAR: 0 for its natural alignment */
    uint32_t elem_bytes;    /* bindings: bytes per element; 0 means 1 */
    uint64_t static_elems;  /* bindings: the kernel's length; 0: none */
    int32_t length_arg;     /* bindings: index of the SCALAR holding the
                               element count; -1: none */
    uint32_t reserved;      /* 0 */
    uint64_t read_offset;   /* outputs: the part read back ... */
    uint64_t read_len;      /* ... 0: from read_offset to the end */
} curd_arg;

/* Convenience constructors (no call into the library). */
static inline curd_arg curd_arg_host(curd_arg_role role, void *host,
                                     size_t byte_len)
{
    curd_arg arg = {CURD_ARG_HOST, (uint32_t)role, {0}, host, byte_len, NULL,
                    0, 0, 0, -1, 0, 0, 0};
    return arg;
}
static inline curd_arg curd_arg_buffer(curd_arg_role role, curd_buffer buffer)
{
    curd_arg arg = {CURD_ARG_BUFFER, (uint32_t)role, buffer, NULL, 0, NULL,
                    0, 0, 0, -1, 0, 0, 0};
    return arg;
}
static inline curd_arg curd_arg_scalar(const void *value, size_t byte_len)
{
    curd_arg arg = {CURD_ARG_SCALAR, 0, {0}, NULL, byte_len, value,
                    0, 0, 0, -1, 0, 0, 0};
    return arg;
}
static inline curd_arg curd_arg_null(void)
{
    curd_arg arg = {CURD_ARG_NULL, 0, {0}, NULL, 0, NULL, 0, 0, 0, -1, 0, 0, 0};
    return arg;
}

#define CURD_LAUNCH_COOPERATIVE (1u << 0) /* cuLaunchCooperativeKernel */
#define CURD_LAUNCH_FLAGS_KNOWN CURD_LAUNCH_COOPERATIVE

typedef struct curd_launch {
    size_t struct_size;
    /* The grid; all zero: grid[0] = ceil(elements / block[0]), 1, 1. */
    uint32_t grid[3];
    uint32_t block[3];
    uint64_t elements;
    uint32_t dynamic_shared_bytes;
    uint32_t flags;      /* CURD_LAUNCH_* */
    /* Launches in a row on one stream, each seeing the last one's writes
     * (fixpoint iterations); curd_launch_init sets 1; 0 is invalid. */
    uint32_t iterations;
    /* curd 1.1: a CUstream of the device's primary context (a
     * cudaStream_t) to enqueue the dispatch on instead of curd's own, the
     * cuBLAS SetStream habit; NULL (curd_launch_init): curd's. The work
     * is ordered after what the caller enqueued there before, and the
     * caller's later work after it; curd adds no fence of its own (a
     * synchronous dispatch waits for its end event only). What it holds
     * (staging, device blocks) goes back once the stream has passed its
     * end event, never earlier. The caller times its own stream: an
     * asynchronous dispatch there reports no device_ns (0), unless
     * CURD_TRACE is set; a synchronous one that asks for its timing
     * (below) is timed. Batch launches take none: a batch's stream is
     * curd_batch_options.cu_stream. */
    void *cu_stream;
    /* curd 1.1: where curd_dispatch writes the dispatch's timing (its
     * struct_size set by the caller), without CURD_TRACE; NULL: none.
     * curd_dispatch_async's comes from curd_pending_wait instead, and
     * batch launches take none. */
    struct curd_timing *timing;
} curd_launch;

CURD_API void curd_launch_init(curd_launch *launch);

/* The time a dispatch took, in nanoseconds. A caller built against curd
 * 1.0 passes the struct without the fields from staging_ns on; they are
 * then not written. */
typedef struct curd_timing {
    size_t struct_size;
    uint64_t wall_ns;    /* from the call's start to the results in place */
    uint64_t device_ns;  /* the kernel launches alone, by device events (a
                            batch run: all its work) */
    uint64_t enqueue_ns; /* validating, staging and enqueueing */
    uint64_t wait_ns;    /* blocked waiting for the device */
    /* curd 1.1, a dispatch's, by device events: its inputs' uploads and
     * its outputs' zeroing before the launches, and its read-backs after
     * them (0 for a batch run). */
    uint64_t staging_ns;
    uint64_t readback_ns;
} curd_timing;

/* curd 1.2: curd_timing timing = CURD_TIMING_INIT; */
#define CURD_TIMING_INIT CURD_RESULT_INIT(curd_timing)

/* Runs the launch and waits: on CURD_OK every output is in place. */
CURD_API curd_status curd_dispatch(curd_device *device,
                                   const curd_program *program,
                                   const curd_launch *launch,
                                   const curd_arg *args, size_t nargs);

/* A dispatch in flight. It belongs to one thread at a time. The caller's
 * output memory must stay valid until curd_pending_wait (or _free)
 * returns; the arguments array and input memory may be reused at once
 * (inputs are staged before the call returns). */
typedef struct curd_pending curd_pending;

/* Enqueues the launch and returns at once. */
CURD_API curd_status curd_dispatch_async(curd_device *device,
                                         const curd_program *program,
                                         const curd_launch *launch,
                                         const curd_arg *args, size_t nargs,
                                         curd_pending **out_pending);
/* *out_ready is 1 when the work is complete (no wait), else 0. */
CURD_API curd_status curd_pending_ready(curd_pending *pending, int *out_ready);
/* Waits, writes the outputs into the caller's memory and fills timing
 * (may be NULL). Once only, even when it fails: a wait that failed counts
 * nothing and writes no output, and a second wait is
 * CURD_E_INVALID_ARGUMENT; curd_pending_free then gives everything back. */
CURD_API curd_status curd_pending_wait(curd_pending *pending,
                                       curd_timing *timing);
/* Waits if needed (outputs not yet written are not written) and frees
 * everything the work held, whatever that wait returns (its status is
 * returned): work that did not complete is drained first (a stream
 * synchronisation), so no memory goes back to a pool while the device may
 * still use it. On a lost device it frees at once. NULL is a no-op. */
CURD_API curd_status curd_pending_free(curd_pending *pending);

/* ------------------------------------------------------------------------
 * Working beside other CUDA code
 * curd's work and another library's (cuBLAS, the CUDA runtime, PyTorch,
 * the caller's own kernels) are ordered on the device, with no host wait,
 * through the driver's own handles, passed as void *: a CUstream (a
 * cudaStream_t is one) or a CUevent (a cudaEvent_t). curd.h does not
 * include cuda.h. A stream must belong to the device's primary context
 * (the one the CUDA runtime uses for the same GPU); NULL is that
 * context's legacy default stream.
 * ---------------------------------------------------------------------- */
/* Every transfer, dispatch and batch run of the device enqueued after
 * this call starts after the work enqueued on cu_stream so far; work
 * enqueued on it later is not waited for. The call records an event of
 * curd's on cu_stream; each of curd's streams waits on it (a
 * cuStreamWaitEvent, no host wait) until curd has seen work of its own
 * behind it complete. A stream of another context is
 * CURD_E_INVALID_ARGUMENT, nothing changed. */
CURD_API curd_status curd_device_wait_stream(curd_device *device,
                                             void *cu_stream);
/* The same for the work cu_event marks now (its last record; recording
 * it again later changes nothing here). The event may belong to any
 * context, another GPU's too, as cuStreamWaitEvent allows. One of curd's
 * streams takes the wait (cuStreamWaitEvent) and the next work goes on
 * it, so that work waits on nothing more; no event is queried (a query
 * costs more than the wait). */
CURD_API curd_status curd_device_wait_event(curd_device *device,
                                            void *cu_event);
/* The other way: work enqueued on cu_stream after this call starts after
 * the pending's work (the stream waits on its end event; no host wait).
 * The pending stays the caller's to wait for or free. */
CURD_API curd_status curd_pending_stream_wait(curd_pending *pending,
                                              void *cu_stream);
/* The pending's end event (a CUevent), for cuStreamWaitEvent,
 * cudaStreamWaitEvent or cuEventQuery: valid until curd_pending_free;
 * never record or destroy it. */
CURD_API curd_status curd_pending_event(curd_pending *pending,
                                        void **out_cu_event);

/* ------------------------------------------------------------------------
 * Batches
 * A batch records work on resident buffers: fills, clears, uploads,
 * kernel launches and range downloads, each checked when it is recorded.
 * A run enqueues all of it, in the order recorded, on one pooled stream
 * with one fence (one end event): synchronously (curd_batch_run) or as a
 * curd_pending (curd_batch_run_async). A batch is reusable: run it again
 * and again; curd_batch_reset empties it.
 *
 * Borrowed memory: an upload's source is read, and a download's
 * destination written, at each run: the source when the run call is made
 * (it is staged before the call returns), the destination when the run
 * completes (curd_batch_run returns, or curd_pending_wait). Both must stay
 * valid until the batch is reset or freed. The batch keeps its pinned
 * staging between runs.
 *
 * Launches take CURD_ARG_BUFFER, CURD_ARG_SCALAR and CURD_ARG_NULL
 * arguments (scalars are copied when recorded); a buffer argument's host
 * read-back is not used: record a download. As curd_dispatch does, a
 * batch launch zeroes its OUTPUT and SCRATCH buffers (the whole buffer)
 * before it, at every run: one device memset each, enqueued in order and
 * captured into a graph batch's graph, counted in fill_ops and fill_bytes
 * (curd 1.2; curd 1.0 and 1.1 batches zeroed nothing, so a kernel that
 * accumulates into an OUTPUT binding gave another answer than through a
 * dispatch). Bind what must keep its bytes as INPUT or INOUT. A
 * curd_batch_set_args that changes which buffers are zeroed captures a
 * graph batch anew at its next run.
 *
 * Buffers are checked when recorded and again at each run: a buffer freed
 * since is CURD_E_STALE_HANDLE at the run, with nothing enqueued. A
 * program launched by a batch cannot be freed (CURD_E_BUSY) until the
 * batch is reset or freed. A batch belongs to one thread at a time; while
 * a run is pending it cannot be changed, run or freed (CURD_E_BUSY).
 *
 * Graphs: a batch made with CURD_BATCH_GRAPH is captured as a CUDA graph
 * on its first run and replayed by later runs. curd_batch_set_args and
 * curd_batch_set_launch change a recorded launch (other scalar values,
 * other buffers at least the kernel's length, another grid); the next run
 * updates the executable graph in place instead of capturing again.
 * Adding items after a run captures anew at the next run.
 * ---------------------------------------------------------------------- */
typedef struct curd_batch curd_batch;

#define CURD_BATCH_GRAPH (1u << 0)
#define CURD_BATCH_FLAGS_KNOWN CURD_BATCH_GRAPH

typedef struct curd_batch_options {
    size_t struct_size;
    uint32_t flags; /* CURD_BATCH_* */
    /* curd 1.1: a CUstream of the device's primary context to enqueue
     * every run on instead of curd's own (as curd_launch.cu_stream); a
     * graph batch is captured on it too, so nothing else may enqueue
     * there while a run captures. NULL (the default): curd's. As for a
     * dispatch there, curd_batch_run_async records no timed event on it
     * (device_ns 0); curd_batch_run with a timing is timed. */
    void *cu_stream;
} curd_batch_options;

CURD_API void curd_batch_options_init(curd_batch_options *options);

/* options NULL: the defaults (a streamed batch). */
CURD_API curd_status curd_batch_new(curd_device *device,
                                    const curd_batch_options *options,
                                    curd_batch **out_batch);
/* Frees the batch (its staging, its graph). NULL is a no-op. */
CURD_API curd_status curd_batch_free(curd_batch *batch);
/* Forgets every item; the batch keeps its options. */
CURD_API curd_status curd_batch_reset(curd_batch *batch);

/* Sets [offset, offset + byte_len) of buffer to value. */
CURD_API curd_status curd_batch_fill(curd_batch *batch, curd_buffer buffer,
                                     size_t offset, size_t byte_len,
                                     uint8_t value);
/* Zeroes the whole buffer. */
CURD_API curd_status curd_batch_clear(curd_batch *batch, curd_buffer buffer);
/* Copies byte_len bytes at src into the buffer at offset, at each run. */
CURD_API curd_status curd_batch_upload(curd_batch *batch, curd_buffer buffer,
                                       size_t offset, const void *src,
                                       size_t byte_len);
/* Records a launch (see "Dispatch" for the arguments). *out_item (may be
 * NULL) names it for curd_batch_set_args / _set_launch. */
CURD_API curd_status curd_batch_launch(curd_batch *batch,
                                       const curd_program *program,
                                       const curd_launch *launch,
                                       const curd_arg *args, size_t nargs,
                                       size_t *out_item);
/* Copies [offset, offset + byte_len) of buffer into dst, at each run.
 * It takes no capacity: like memcpy it trusts that dst holds byte_len
 * bytes, and a smaller dst is overrun at every run. Prefer
 * curd_batch_download_range. */
CURD_API curd_status curd_batch_download(curd_batch *batch,
                                         curd_buffer buffer, size_t offset,
                                         size_t byte_len, void *dst);
/* curd 1.2: the same into dst, which holds dst_capacity bytes: byte_len
 * above dst_capacity is CURD_E_RANGE when recorded, nothing recorded
 * (curd_buffer_download_range's rule). Nothing past byte_len of dst is
 * written, whatever its capacity. */
CURD_API curd_status curd_batch_download_range(curd_batch *batch,
                                               curd_buffer buffer,
                                               size_t offset, size_t byte_len,
                                               void *dst, size_t dst_capacity);

/* Change a recorded launch: the same number and kinds of arguments, each
 * scalar of its recorded size (set_args); the same cooperative flag and
 * iterations (set_launch). Checked as when recorded. */
CURD_API curd_status curd_batch_set_args(curd_batch *batch, size_t item,
                                         const curd_arg *args, size_t nargs);
CURD_API curd_status curd_batch_set_launch(curd_batch *batch, size_t item,
                                           const curd_launch *launch);

/* Runs every item and waits; timing may be NULL. */
CURD_API curd_status curd_batch_run(curd_batch *batch, curd_timing *timing);
/* Enqueues every item and returns at once; curd_pending_wait writes the
 * downloads. */
CURD_API curd_status curd_batch_run_async(curd_batch *batch,
                                          curd_pending **out_pending);

/* ------------------------------------------------------------------------
 * Copies between resident buffers
 * A copy moves bytes from one resident buffer to another without touching
 * host memory: within one device (a device-to-device DMA) or between two
 * devices open in this process (one curd_device per GPU). Each curd_copy
 * is one contiguous span; a call takes many, checks every one of them
 * before anything is enqueued, moves each in one DMA (copies that
 * continue one another on both sides are fused into one) and ends with
 * one fence (the synchronous call) or one curd_pending (the asynchronous
 * one).
 *
 * Rules:
 *  - Every dst buffer belongs to dst_device and every src buffer to
 *    src_device (the same device for a copy within one device). A handle
 *    of the other device is CURD_E_INVALID_ARGUMENT; a freed, forged or
 *    foreign one CURD_E_STALE_HANDLE. Ranges are checked on both sides:
 *    past a buffer's end CURD_E_RANGE, offset + byte_len past 2^64
 *    CURD_E_OVERFLOW. A byte_len of 0 is allowed (its handles and offsets
 *    are still checked) and moves nothing.
 *  - A copy whose source and destination ranges overlap in one buffer is
 *    refused (CURD_E_INVALID_ARGUMENT): a DMA does not define the order
 *    in which it reads and writes. Copies of one call apply in order: a
 *    later copy may read what an earlier one wrote.
 *  - Every buffer named is marked in use (it cannot be freed, CURD_E_BUSY)
 *    until the copies complete: the synchronous call returns, or
 *    curd_pending_wait (or _free) of the asynchronous one returns.
 *    Buffers with asynchronous uploads pending are waited for first
 *    (their device's upload stream is synchronised). Like a
 *    dispatch's, an asynchronous copy is not ordered with other work the
 *    caller starts before it completes: do not write its source or touch
 *    its destination until then.
 *  - Between two devices: when the driver says the destination device can
 *    reach the source's memory (cuDeviceCanAccessPeer), peer access is
 *    enabled once for that ordered pair, on the first copy that needs it,
 *    and the bytes go over NVLink or PCIe directly. Otherwise they are
 *    staged through pinned host memory of the destination device's pool
 *    with no host wait (curd_buffer_copy(3) says how). The environment
 *    variable CURD_PEER_ACCESS=0,
 *    read when a device opens, makes every copy from or to that device
 *    staged. Both devices must stay open until the copy completes.
 *  - Counted in curd_stats (d2d_*, peer_*) on success only; a failed copy
 *    counts nothing, and may have written part of its destination ranges.
 * ---------------------------------------------------------------------- */
typedef struct curd_copy {
    curd_buffer dst;
    uint64_t dst_offset;
    curd_buffer src;
    uint64_t src_offset;
    uint64_t byte_len;
} curd_copy;

/* Copies every span and waits for them (one fence on dst_device).
 * copies may be NULL when count is 0 (then nothing happens). */
CURD_API curd_status curd_buffer_copy(curd_device *dst_device,
                                      curd_device *src_device,
                                      const curd_copy *copies, size_t count);
/* The same, enqueued: returns at once with *out_pending, which
 * curd_pending_wait waits for (timing from the destination device's
 * events) and curd_pending_free frees; the buffers stay marked in use
 * until then. */
CURD_API curd_status curd_buffer_copy_async(curd_device *dst_device,
                                            curd_device *src_device,
                                            const curd_copy *copies,
                                            size_t count,
                                            curd_pending **out_pending);
/* Records one copy within the batch's device (both buffers its own, their
 * ranges checked as above, byte_len at least 1), run in order with the
 * batch's other items and captured into a graph batch's graph. */
CURD_API curd_status curd_batch_copy(curd_batch *batch, const curd_copy *copy);

/* Records one collective (curd_collective, in curd_comm.h; its
 * communicator of the batch's device, every range checked as
 * curd_collective_run checks it, and each buffer again at every run). A
 * streamed batch enqueues it in order with its other items on its
 * stream; a graph batch captures it with them, so a replay runs kernels
 * and collectives together. Each item is one NCCL call of its own: every
 * rank records the same collectives in the same order and changes its
 * batch alike (a graph batch is captured again at the same run on every
 * rank), a send and a receive that must pair up within one step belong in
 * one curd_collective_run, and each rank runs its batch from its own
 * thread or process. A run's wait polls the communicators: CURD_E_COMM within their
 * timeout when a peer fails or stops answering (every communicator of the
 * batch aborted). The communicator cannot be closed (CURD_E_BUSY) until
 * the batch is reset or freed. */
struct curd_collective;
CURD_API curd_status curd_batch_collective(curd_batch *batch,
                                           const struct curd_collective *op);

/* ------------------------------------------------------------------------
 * Sessions
 * A curd_session, made on one device, holds two things within budgets of
 * device bytes, off the hot path of a pipeline that runs the same passes
 * again and again (curd_session_new(3)):
 *  - buffers reused by exact size: curd_session_alloc hands out an idle
 *    buffer of that size or a new one, curd_session_release takes it back
 *    (curd_session_alloc(3));
 *  - immutable uploads cached as sets: curd_session_upload_static finds a
 *    set by its exact bytes, which a hit compares (no allocation, no
 *    host-to-device byte); curd_session_upload_static_keyed by a key the
 *    caller vouches for, a hit reading no payload byte. Neither kind of
 *    set answers the other's lookups (curd_session_upload_static(3)).
 *
 * Who owns what. The buffers are ordinary curd_buffer handles of the
 * session's device. A handle given to curd_session_release is stale from
 * that moment (CURD_E_STALE_HANDLE in every call, curd_buffer_free
 * included): a use after release, or a second release, is a typed error,
 * never a write into another user's buffer. A lent buffer may be freed
 * with curd_buffer_free; a static set's buffers may not (CURD_E_BUSY, held
 * or only cached). A set stays valid, its buffers allocated, until its
 * last curd_session_release_static (one for each upload that succeeded);
 * a retained one stays cached after that, until evicted while nobody
 * holds it. Set buffers must not be written: a kernel that writes one
 * changes what every later hit gets. Idle buffers and cached sets are
 * resident buffers (the device's resident bytes and budget count them);
 * curd_session_free frees everything the session allocated, lent buffers
 * and held sets included.
 *
 * A session may be shared by threads. curd_device_close detaches the
 * device's sessions, freeing their buffers and sets: every later call on
 * such a session but curd_session_free is CURD_E_INVALID_ARGUMENT. A
 * freed session must not be used again (a second curd_session_free is
 * CURD_E_INVALID_ARGUMENT), nor a set after its last release or its
 * session's end.
 * ---------------------------------------------------------------------- */
typedef struct curd_session curd_session;

/* Reuse off: idle_budget_bytes is 0, and every release frees its buffer. */
#define CURD_SESSION_NO_REUSE (1u << 0)
/* Static cache off: static_budget_bytes is 0, every upload misses and
 * comes back not retained. */
#define CURD_SESSION_NO_STATIC_CACHE (1u << 1)
#define CURD_SESSION_FLAGS_KNOWN                                              \
    (CURD_SESSION_NO_REUSE | CURD_SESSION_NO_STATIC_CACHE)

typedef struct curd_session_options {
    size_t struct_size;
    /* Bytes of idle buffers kept for reuse; 0 picks the default, the
     * device's total memory / 32. A zero budget is asked for with
     * CURD_SESSION_NO_REUSE (then this must be 0). */
    uint64_t idle_budget_bytes;
    /* Bytes of retained static sets; 0 picks the same default. A zero
     * budget: CURD_SESSION_NO_STATIC_CACHE (then this must be 0). */
    uint64_t static_budget_bytes;
    uint32_t flags; /* CURD_SESSION_* */
} curd_session_options;

CURD_API void curd_session_options_init(curd_session_options *options);
/* options may be NULL for the defaults. */
CURD_API curd_status curd_session_new(curd_device *device,
                                      const curd_session_options *options,
                                      curd_session **out_session);
/* Frees every idle buffer, every buffer still lent, every static set (held
 * or not) and the session. CURD_E_BUSY, with nothing freed, while one of
 * those buffers has asynchronous uploads pending or a transfer or dispatch
 * in flight. NULL is a no-op. */
CURD_API curd_status curd_session_free(curd_session *session);

/* byte_len 0 is CURD_E_INVALID_ARGUMENT. A miss allocates as
 * curd_buffer_alloc does (and fails as it does). */
CURD_API curd_status curd_session_alloc(curd_session *session, size_t byte_len,
                                        curd_buffer *out_buffer);
/* CURD_E_STALE_HANDLE for a handle released already, freed, or forged;
 * CURD_E_INVALID_ARGUMENT for a live buffer this session did not lend
 * (curd_buffer_alloc's, another session's, a static set's); CURD_E_BUSY,
 * with nothing done, while it has asynchronous uploads pending or a
 * transfer or dispatch in flight. */
CURD_API curd_status curd_session_release(curd_session *session,
                                          curd_buffer buffer);

/* One immutable payload of a static set. */
typedef struct curd_static_payload {
    const void *data;
    size_t byte_len; /* at least 1 */
} curd_static_payload;

/* A set as the session hands it out: read it, never write it. */
typedef struct curd_static_set {
    size_t struct_size;         /* sizeof the struct the library filled */
    size_t count;               /* payloads, and buffers */
    const curd_buffer *buffers; /* buffers[i] holds payloads[i], exactly
                                   its byte_len */
    uint32_t retained;          /* 1: cached past its last release */
    uint32_t reserved;
} curd_static_set;

/* domain: a NUL-terminated tag naming what the payloads are (say
 * "solver/tables-v3"); sets of different domains never match. count at
 * least 1; every payload's data non-NULL and byte_len at least 1. On a
 * miss the buffers are allocated and uploaded in one batch (one fence);
 * an allocation or upload that fails part way frees what it made: nothing
 * half-uploaded is ever cached or handed out. */
CURD_API curd_status curd_session_upload_static(
    curd_session *session, const char *domain,
    const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set);
/* The set cached under (domain, key) in this session, or on a miss the
 * payloads uploaded as curd_session_upload_static does and cached under
 * it (retained, evicted and released by the same rules). A hit reads no
 * payload byte and hands out the cached set even if the payloads' bytes
 * changed: pass a key that changes whenever they do.
 * count and every byte_len must still equal the cached set's, else
 * CURD_E_INVALID_ARGUMENT with nothing changed. key: key_len bytes, at
 * least 1, copied; domain and payloads as for curd_session_upload_static.
 * Keyed sets are never found by curd_session_upload_static, nor verified
 * sets by this call (see above). Released with
 * curd_session_release_static. (curd 1.1) */
CURD_API curd_status curd_session_upload_static_keyed(
    curd_session *session, const char *domain, const void *key,
    size_t key_len, const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set);
/* Ends one hold of the set: a set not retained is freed at its last
 * release; a retained one stays cached. CURD_E_INVALID_ARGUMENT for a set
 * that is not live in this session, or released more often than handed
 * out; CURD_E_BUSY, with nothing done, when the release would free
 * buffers that work in flight still uses. */
CURD_API curd_status curd_session_release_static(curd_session *session,
                                                 const curd_static_set *set);

typedef struct curd_session_stats {
    size_t struct_size;
    uint64_t idle_bytes;       /* released buffers waiting for reuse */
    uint64_t idle_buffers;
    /* Buffers the session handed out and has not seen come back (one freed
     * with curd_buffer_free counts until the session learns of it). */
    uint64_t lent_bytes;
    uint64_t lent_buffers;
    uint64_t cached_bytes;     /* retained static sets */
    uint64_t cached_sets;
    uint64_t unretained_bytes; /* sets not retained, until their release */
    uint64_t unretained_sets;
    uint64_t reuse_hits;       /* allocations served by an idle buffer */
    uint64_t reuse_misses;     /* allocations that allocated */
    uint64_t static_hits;      /* uploads served by a cached set */
    uint64_t static_misses;    /* uploads that allocated and uploaded */
    uint64_t idle_evictions;   /* idle buffers freed to make room */
    uint64_t static_evictions; /* cached sets freed to make room */
    uint64_t release_frees;    /* released buffers freed at once: larger
                                  than the whole idle budget */
    uint64_t idle_budget_bytes;   /* the budgets in force */
    uint64_t static_budget_bytes;
    /* curd 1.1: curd_session_upload_static_keyed's, counted apart from
     * static_hits and static_misses (the verified uploads'). */
    uint64_t static_keyed_hits;   /* served by the set cached under the key */
    uint64_t static_keyed_misses; /* that allocated and uploaded */
} curd_session_stats;

/* curd 1.2: curd_session_stats stats = CURD_SESSION_STATS_INIT; */
#define CURD_SESSION_STATS_INIT CURD_RESULT_INIT(curd_session_stats)

/* stats->struct_size must be set by the caller; curd 1.0's size (the
 * struct up to static_budget_bytes) is accepted and filled to its end.
 * (_get, since a C function and a type cannot share the name
 * curd_session_stats.) */
CURD_API curd_status curd_session_stats_get(curd_session *session,
                                            curd_session_stats *stats);

/* The communicators and collectives (optional: they need NCCL at run
 * time) are declared in curd_comm.h, which is part of this header: a
 * program includes curd.h alone. */
#include "curd_comm.h"

#ifdef __cplusplus
}
#endif

#endif /* CURD_H */
