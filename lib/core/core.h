/* core.h - the device core: what every module of a curd_device builds on.
 *
 * core.c owns the part of a curd_device that every module uses and none
 * owns alone: the retained primary context and entering it, the static
 * properties read at open, the upload stream, and the registry of open
 * devices that every public entry point checks its device against (a
 * closed or never-opened pointer is refused there without being read).
 * Beside it, streams.c owns the pooled streams and events, waits.c the
 * others' work the device's next work waits for, and options.c the
 * checks of versioned structs.
 *
 * The modules above (doc/ARCHITECTURE.md has the order) keep their state
 * behind one pointer each in struct curd_device, set and cleared by their
 * own curdi_<module>_open / _close, which lib/device.c calls in order. The
 * core never calls up into them. */
#ifndef CURD_LIB_CORE_CORE_H
#define CURD_LIB_CORE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"

struct curdi_pool;
struct curdi_fence_state;
struct curdi_landing_state;
struct curdi_resident_table;
struct curdi_host_registry;
struct curdi_upload_marks_state;
struct curdi_gather_state;
struct curdi_transfer_state;
struct curdi_copy_state;
struct curdi_program_state;
struct curdi_dispatch_state;
struct curdi_batch_state;
struct curdi_session_state;
struct curdi_communicator_state;

struct curd_device {
    /* The core (core.c). Fixed after curdi_core_open but for the pools of
     * idle streams and events, which pool_lock guards. */
    int ordinal;
    curdi_cu_device cu_device;
    curdi_cu_context context;
    curd_device_props props; /* static facts read at open */
    /* The widest row pitch one strided copy takes
     * (CU_DEVICE_ATTRIBUTE_MAX_PITCH), read at open; 0 where the device
     * reports none. */
    uint64_t max_copy_pitch;
    curd_device_options options;
    pthread_mutex_t pool_lock;
    curdi_cu_stream *idle_streams; /* pooled non-blocking streams */
    size_t idle_stream_count;
    size_t idle_stream_capacity;
    curdi_cu_event *idle_events; /* pooled events, timing disabled */
    size_t idle_event_count;
    size_t idle_event_capacity;
    curdi_cu_event *idle_timed_events; /* pooled events with timing */
    size_t idle_timed_event_count;
    size_t idle_timed_event_capacity;
    curdi_cu_stream upload_stream; /* for curd_buffer_upload_async */
    /* Others' work that curd's next work waits for
     * (curd_device_wait_stream, _event): events of curd's own recorded
     * behind it (waits.c says when each is dropped). waits_lock guards
     * the list (taken before pool_lock, never after); wait_count, also
     * written under it, lets a stream skip the lock while nothing is
     * waited for. */
    pthread_mutex_t waits_lock;
    struct curdi_wait *waits;
    size_t wait_capacity;
    atomic_size_t wait_count;
    /* Statistics-only counters any module found below zero and repaired
     * (curd_stats.accounting_repairs). */
    _Atomic uint64_t accounting_repairs;
    /* A fault lost the context (curdi_core_device_mark_lost): every entry
     * point but close refuses the device from then on. */
    atomic_bool lost;

    /* The memory module (memory.c): the two pools every module above takes
     * blocks from, and the application's reclaim callback. */
    struct curdi_pool *device_pool;
    struct curdi_pool *pinned_pool;
    pthread_mutex_t reclaim_lock;
    curd_reclaim_fn reclaim_fn;
    void *reclaim_context;

    /* One pointer per other module above the core, each that module's own
     * state. */
    struct curdi_fence_state *fence;           /* core/fence.c */
    struct curdi_landing_state *landing;       /* landing.c */
    struct curdi_resident_table *resident;     /* resident.c */
    struct curdi_host_registry *host_registry; /* host_register.c */
    struct curdi_upload_marks_state
        *upload_marks;                     /* transfer/upload_marks.c */
    struct curdi_gather_state *gather;     /* gather.c */
    struct curdi_transfer_state *transfer; /* transfer.c */
    struct curdi_copy_state *copy;         /* transfer/copy.c */
    struct curdi_program_state *program;   /* program.c */
    struct curdi_dispatch_state *dispatch; /* dispatch.c */
    struct curdi_batch_state *batch;       /* batch.c */
    struct curdi_session_state *session;   /* session.c */
    struct curdi_communicator_state *comm; /* comm/communicator.c */
};

/* ------------------------------------------------------------------------
 * Opening and closing the core (lib/device.c composes the rest).
 * ---------------------------------------------------------------------- */

/* Allocates a device for cu_device, retains its primary context, pushes
 * it, reads the properties and creates the upload stream. On CURD_OK the
 * context is current on this thread (curdi_core_open_done pops it); on a
 * failure nothing is left. options is already validated. */
curd_status curdi_core_open(int ordinal, curdi_cu_device cu_device,
                            const curd_device_options *options,
                            curd_device **out_device);
/* Pops the context curdi_core_open left current. */
void curdi_core_open_done(curd_device *device);
/* Destroys the pooled streams and events and the upload stream, pops the
 * context if `pushed`, releases the primary context and frees the device.
 * Driver calls are skipped when curdi_driver_usable() is false. */
void curdi_core_close(curd_device *device, bool pushed);

/* The registry of open devices. register fails (CURD_E_BUDGET) only when
 * CURDI_OPEN_DEVICES_MAX devices are open at once; unregister returns
 * false when device was not registered (closed, or never opened). */
#define CURDI_OPEN_DEVICES_MAX 256u
curd_status curdi_core_register(curd_device *device);
bool curdi_core_unregister(const curd_device *device);

/* ------------------------------------------------------------------------
 * What every entry point uses.
 * ---------------------------------------------------------------------- */

/* The check every public entry point makes of its device before it reads
 * it: NULL, or a pointer that is not an open device (closed already, or
 * never opened), is CURD_E_INVALID_ARGUMENT with a sentence naming `what`;
 * a child after fork is CURD_E_UNSUPPORTED; a device whose context a fault
 * lost is CURD_E_DEVICE_LOST. Reads the registry only, never
 * *device, so a closed device's freed memory is not touched. Lock-free:
 * a few atomic loads while few devices are open. */
curd_status curdi_core_device_check_fully(const curd_device *device,
                                          const char *what);

/* The calling thread's last device that passed curdi_core_device_check_fully,
 * with curdi_device_closes as it was then. initial-exec, as the pool's
 * thread-locals: an entry point reads it on every call. */
typedef struct curdi_checked_device {
    const curd_device *device;
    unsigned closes;
} curdi_checked_device;
extern _Thread_local curdi_checked_device curdi_device_checked
    __attribute__((tls_model("initial-exec")));
/* Moves on at every close and in a fork child (core.c). */
extern atomic_uint curdi_device_closes;

/* Whether the device passes curdi_core_device_check_fully without a look at
 * the registry: it is the device the thread checked last and no device was
 * closed since (nor the process forked), so it was open then and is open
 * now, and only its fault flag is read. Pool hits take a few tens of
 * nanoseconds, and the registry walk was a tenth of them. */
static inline bool curdi_core_device_known(const curd_device *device)
{
    return device != NULL && device == curdi_device_checked.device &&
           curdi_device_checked.closes ==
               atomic_load_explicit(&curdi_device_closes,
                                    memory_order_acquire) &&
           !atomic_load_explicit(&device->lost, memory_order_relaxed);
}

static inline curd_status curdi_core_device_check(const curd_device *device,
                                                  const char *what)
{
    if (__builtin_expect(curdi_core_device_known(device), true))
        return CURD_OK;
    return curdi_core_device_check_fully(device, what);
}

/* Makes the context of a device that passed curdi_core_device_check current on
 * this thread (CURD_E_INVALID_ARGUMENT for NULL; the driver's state is
 * checked again, since a device stays open across the driver's teardown);
 * pair with curdi_core_device_leave(). */
curd_status curdi_core_device_enter(curd_device *device);
void curdi_core_device_leave(curd_device *device);

/* A pooled non-blocking stream (never the legacy null stream). Context
 * current. */
curd_status curdi_streams_acquire(curd_device *device, curdi_cu_stream *out);
void curdi_streams_release(curd_device *device, curdi_cu_stream stream);
/* Destroys a stream left in a state the pool must not hand out again (a
 * capture that could not be ended). Context current. */
void curdi_streams_discard(curd_device *device, curdi_cu_stream stream);
/* A stream from the idle pool, or a new one, without the waits
 * curdi_streams_acquire orders it after. Context current. */
curd_status curdi_streams_take(curd_device *device, curdi_cu_stream *out);
/* Destroy a stream or an event (nothing once the driver is unusable). */
struct curdi_driver;
void curdi_streams_destroy(const struct curdi_driver *driver,
                           curdi_cu_stream stream);
void curdi_streams_event_destroy(const struct curdi_driver *driver,
                                 curdi_cu_event event);
/* Forgets the waits recorded on a stream that leaves the pool. */
void curdi_waits_forget_stream(curd_device *device, curdi_cu_stream stream);
/* Destroys the waits' events, at the device's close (context current). */
void curdi_waits_destroy(const struct curdi_driver *driver,
                         curd_device *device);

/* Makes `stream` wait (cuStreamWaitEvent, no host wait) for the work of
 * others the device was told to wait for and that may not have
 * completed; while there is none this is one atomic load.
 * curdi_streams_acquire calls it for every pooled stream; a module that
 * enqueues on the upload stream calls it first. `owned`: the stream is
 * curd's (pooled, or the upload stream), so that seeing its later work
 * complete (curdi_waits_stream_passed) ends what it waited on; false for a
 * caller's. Context current. */
curd_status curdi_waits_stream_order_after_waits(curd_device *device,
                                                 curdi_cu_stream stream,
                                                 bool owned);
/* The work enqueued on `stream`, a pooled stream, has completed (a fence
 * or an end event seen): the waits recorded on it are over. One atomic
 * load while there are none. */
void curdi_waits_stream_passed(curd_device *device, curdi_cu_stream stream);

/* Checks that `cu_stream`, a stream a caller passed (NULL: the legacy
 * default stream), belongs to the device's context (cuStreamGetCtx):
 * CURD_E_INVALID_ARGUMENT naming `what` when it does not, or when the
 * driver does not know it as a stream. Context current. */
curd_status curdi_waits_stream_check_foreign(curd_device *device,
                                             curdi_cu_stream cu_stream,
                                             const char *what);

/* count events (timing disabled), from the idle pool or new. Context
 * current. */
curd_status curdi_streams_events_acquire(curd_device *device,
                                         curdi_cu_event *events,
                                         unsigned count);
/* Keeps the events for later use (destroys them if it cannot). */
void curdi_streams_events_release(curd_device *device,
                                  const curdi_cu_event *events,
                                  unsigned count);
/* The same for events that record time (cuEventElapsedTime). */
curd_status curdi_streams_events_acquire_timed(curd_device *device,
                                               curdi_cu_event *events,
                                               unsigned count);
void curdi_streams_events_release_timed(curd_device *device,
                                        const curdi_cu_event *events,
                                        unsigned count);

/* Marks the device, and every open device of its ordinal (they share the
 * primary context), lost after a fault that lost the context. */
void curdi_core_device_mark_lost(curd_device *device);

/* Calls fn on every open device of the same ordinal (for the last rung of
 * the out-of-memory ladder), with the registry locked so none of them is
 * closed underneath it. */
void curdi_core_devices_for_ordinal(int ordinal,
                                    void (*fn)(curd_device *, void *),
                                    void *context);

/* Validates an options struct whose first field is struct_size:
 * struct_size at least min_size, and every byte past known_size zero. */
curd_status curdi_options_check(const void *options, size_t known_size,
                                size_t min_size, const char *what);
/* Validates a struct the library fills in for call (param, of the named
 * type), whose first field is struct_size: not NULL, and struct_size at
 * least min_size (a newer caller's larger struct is fine: only the fields
 * this version knows are written). */
curd_status curdi_options_result_struct_check(const void *result,
                                              size_t min_size,
                                              const char *call,
                                              const char *param,
                                              const char *type);

/* Grows the realloc'ed *array of *capacity elements to hold at least
 * `needed` (doubling, from 8); false when it cannot, the array unchanged
 * then. For the modules' small growable lists. */
bool curdi_core_array_reserve(void **array, size_t *capacity, size_t needed,
                              size_t element_bytes);

/* The "Fix: ..." of a failed driver call on a device that was usable. */
#define CURDI_DRIVER_FIX                                                      \
    "check that the device is still usable (nvidia-smi); after a sticky"     \
    " error, close and reopen it"

#endif
