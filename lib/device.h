/* device.h - what a curd_device holds, for the library's other rooms.
 *
 * device.c owns the context, the streams and the list of open devices;
 * memory.c owns the two pools and the reclaim callback; resident.c the
 * buffer table. The transfer room spans several files: transfer.c the
 * public transfers and the transfer telemetry; hostreg.c the room's shared
 * host-side state (host registrations, pending asynchronous uploads, the
 * device's copy team and idle events); xfer.c the plan and engine of a
 * transfer; copyteam.c the threads that split large host copies.
 * Each room initialises and tears down its own fields through the
 * curdi_*_open / curdi_*_close pair it declares in its own header
 * (curdi_transfer_open opens hostreg.c's part too). */
#ifndef CURD_LIB_DEVICE_H
#define CURD_LIB_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuda_abi.h"
#include "curd.h"
#include "pool.h"

struct curdi_resident_table;
struct curdi_host_registry;
struct curdi_program_room;

struct curd_device {
    /* device.c */
    int ordinal;
    curdi_cu_device cu_device;
    curdi_cu_context context;
    curd_device_props props; /* static facts read at open */
    curd_device_options options;
    pthread_mutex_t stream_lock;
    curdi_cu_stream *idle_streams; /* pooled non-blocking streams */
    size_t idle_stream_count;
    size_t idle_stream_capacity;
    curdi_cu_stream upload_stream; /* for curd_buffer_upload_async */
    struct curd_device *next_open; /* process-wide list of open devices */

    /* memory.c */
    curdi_pool *device_pool;
    curdi_pool *pinned_pool;
    pthread_mutex_t reclaim_lock;
    curd_reclaim_fn reclaim_fn;
    void *reclaim_context;

    /* resident.c */
    struct curdi_resident_table *resident;

    /* program.c */
    struct curdi_program_room *program;

    /* hostreg.c */
    struct curdi_host_registry *host_registry;
    /* transfer.c */
    _Atomic uint64_t h2d_bytes;
    _Atomic uint64_t d2h_bytes;
    _Atomic uint64_t copy_ops;
    _Atomic uint64_t fences;
    _Atomic uint64_t fill_ops;
    _Atomic uint64_t fill_bytes;
    _Atomic uint64_t accounting_repairs;
};

/* Validates a device pointer argument (CURD_E_INVALID_ARGUMENT for NULL,
 * CURD_E_UNSUPPORTED in a child after fork) and makes its context current
 * on this thread; pair with curdi_device_leave(). */
curd_status curdi_device_enter(curd_device *device);
void curdi_device_leave(curd_device *device);

/* The checks an entry point makes before it uses one of the device's rooms
 * without making the context current: room is that room's field, NULL when
 * the device is NULL (CURD_E_INVALID_ARGUMENT, worded as a NULL device);
 * CURD_E_UNSUPPORTED in a child after fork. */
curd_status curdi_device_check_room(const void *room, const char *what);

/* A pooled non-blocking stream (never the legacy null stream). */
curd_status curdi_stream_acquire(curd_device *device, curdi_cu_stream *out);
void curdi_stream_release(curd_device *device, curdi_cu_stream stream);

/* Calls fn on every open device of the same ordinal (for the last rung of
 * the out-of-memory ladder). */
void curdi_devices_for_ordinal(int ordinal, void (*fn)(curd_device *, void *),
                               void *context);

/* Validates an options struct whose first field is struct_size:
 * struct_size at least min_size, and every byte past known_size zero. */
curd_status curdi_options_check(const void *options, size_t known_size,
                                size_t min_size, const char *what);
/* Validates a struct the library fills in for call (param, of the named
 * type), whose first field is struct_size: not NULL, and struct_size at
 * least min_size (a newer caller's larger struct is fine: only the fields
 * this version knows are written). */
curd_status curdi_result_struct_check(const void *result, size_t min_size,
                                      const char *call, const char *param,
                                      const char *type);

#endif
