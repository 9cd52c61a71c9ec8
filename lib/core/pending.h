/* pending.h - the pending module: work enqueued on one pooled stream and
 * fenced by one timed event, as a public curd_pending.
 *
 * A dispatch (lib/launch/dispatch.c), a batch run (lib/launch/batch.c)
 * and a copy between buffers (lib/transfer/copy.c) all end in the same
 * way: a start event, their work, an end event on one stream;
 * then the caller asks whether it is done, waits for it (the end event,
 * never the stream), has outputs copied into its memory and reads the
 * timing; or frees it. This module owns that shared part; each owner embeds
 * a curd_pending first in its own struct and gives two operations: what to
 * do once the work is complete (copy outputs, count), and how to give back
 * what it holds.
 *
 * It stands in core/, below every module that hands one out, since it
 * needs only the core, the fence and the driver.
 *
 * A pending belongs to one thread at a time (curd.h). */
#ifndef CURD_LIB_CORE_PENDING_H
#define CURD_LIB_CORE_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"

struct curd_device;

typedef struct curdi_pending_ops {
    /* The end event completed: write the outputs into the caller's memory
     * when copy_out (a wait), count what ran. Cannot fail. */
    void (*complete)(curd_pending *pending, bool copy_out);
    /* Gives back what the owner holds (its work complete, drained, or
     * lost with the context) and frees the struct if the owner allocated
     * it for this work; the base's stream and events go back after. */
    void (*release)(curd_pending *pending);
    /* Optional: waits for the work itself, instead of the end event, and
     * returns its own status and sentence (collectives poll their
     * communicators with a timeout: lib/comm/collective.c). The device
     * is not entered; device_ns stays 0. */
    curd_status (*wait)(curd_pending *pending);
    /* Optional, with wait: whether the work is complete, instead of
     * querying the end event (*out_ready 1 also when the wait would
     * fail at once). */
    curd_status (*ready)(curd_pending *pending, int *out_ready);
} curdi_pending_ops;

struct curd_pending {
    const curdi_pending_ops *ops;
    struct curd_device *device;
    curdi_cu_stream stream;   /* pooled; NULL until acquired */
    /* The caller's stream the work goes on instead of a pooled one
     * (curdi_pending_use_stream), or NULL. Such work is always timed: its
     * end event is what its wait and its release go by. */
    curdi_cu_stream caller_stream;
    /* start, end, and for split work the launches' start and end
     * (timing enabled). */
    curdi_cu_event events[4];
    /* Timed work is fenced by its end event and measured from its start;
     * untimed work (a synchronous call that asked for no timing, or work
     * on the caller's stream) takes no timed event, since recording one
     * costs about 0.8 us against 0.16 us without timing on the H100: its
     * wait is the stream's word (lib/core/fence.h) or one stream
     * synchronisation, or, on the caller's stream, its end event alone
     * (timing disabled); its device_ns stays 0. */
    bool timed;
    /* Untimed work on a pooled stream whose last kernel signals its own
     * end (curd_gather's words, lib/transfer/gather.h), set by the owner
     * before the wait: the wait polls these words instead of asking the
     * stream to write one (lib/core/fence.h). NULL: the stream's word. */
    const uint32_t *signal_words;
    unsigned signal_count;
    /* Timed work whose owner marks where its kernels start and end
     * (curdi_pending_mark): device_ns is then the kernels alone, with
     * staging_ns before and readback_ns after. */
    bool split;
    bool events_taken;
    bool waited;              /* a wait began */
    bool completed;           /* the end event completed; complete ran */
    uint64_t start_ns;        /* the public call began */
    uint64_t enqueue_ns;      /* from start_ns to the end event's record */
    uint64_t wait_ns;         /* blocked in the wait */
    uint64_t device_ns;       /* start to end event (split: the
                                 kernels), once waited */
    uint64_t staging_ns;      /* split: start to the kernels */
    uint64_t readback_ns;     /* split: the kernels to the end */
    uint64_t wall_ns;         /* from start_ns to the wait's end */
    /* A slot of the registry of live pendings taken
     * (curdi_pending_take_slot) and not yet filled; handed to the caller
     * (curdi_pending_publish): in the registry until released. */
    bool slot_taken;
    bool published;
};

/* Zeroes the base and names its owner's operations; start_ns is now; the
 * work is timed unless the owner clears `timed` before acquiring. */
void curdi_pending_init(curd_pending *pending, struct curd_device *device,
                        const curdi_pending_ops *ops);
/* Has the work go on the caller's cu_stream (NULL: a pooled one, as
 * before): checked to belong to the device's context (CURD_E_INVALID_
 * ARGUMENT naming `what`); the work then ends in an event, timed or not.
 * Before acquire; context current. */
curd_status curdi_pending_use_stream(curd_pending *pending, void *cu_stream,
                                     const char *what);
/* Takes a pooled stream (or, for work on the caller's stream, orders
 * that stream after the device's waits, core.h) and, for timed work, the
 * two timed events. Context current. */
curd_status curdi_pending_acquire(curd_pending *pending);
/* Records the start event (begin) and the end event (end, which also sets
 * enqueue_ns) on the pending's stream; untimed work records neither.
 * Context current. */
curd_status curdi_pending_begin(curd_pending *pending);
curd_status curdi_pending_end(curd_pending *pending);
/* For split work, between begin and end: records where the kernels start
 * (`kernels_end` false) or end; nothing for other work. Context current. */
curd_status curdi_pending_mark(curd_pending *pending, bool kernels_end);
/* After a failure part way: whatever was enqueued finishes (a stream
 * synchronisation; skipped when the driver is unusable). Context
 * current. */
void curdi_pending_drain(curd_pending *pending);
/* Gives back everything: when the work did not complete (a failure part
 * way, or a failed wait) it is drained first, so no block goes back to a
 * pool while the device may still use it; then ops->release, then the
 * stream and the events. */
void curdi_pending_release(curd_pending *pending);
/* Waits for the end event and reads the device time (untimed work: waits
 * for the stream), and runs ops->complete (copy_out as given) on
 * success. The pending stays allocated. */
curd_status curdi_pending_finish(curd_pending *pending, bool copy_out);
/* Takes the pending's slot in the process-wide registry of live
 * pendings, which every public call on a pending asks before it reads
 * one (so a freed pending is a typed error): the registry grows now, if
 * it must, so that publishing cannot fail. Every pending that will be
 * handed to the caller takes one, before its work is enqueued; released
 * unfilled, the slot goes back. CURD_E_OUT_OF_MEMORY (`what` names the
 * call) when the registry cannot grow. */
curd_status curdi_pending_take_slot(curd_pending *pending, const char *what);
/* The check of every asynchronous entry's out_pending, before anything
 * is done: CURD_E_INVALID_ARGUMENT (`what` names the call) when it is
 * NULL. */
curd_status curdi_pending_check_out(curd_pending **out_pending,
                                    const char *what);
/* Enters a pending the caller is about to receive in the registry, in
 * the slot it took (curdi_pending_take_slot, required); released, it
 * leaves the registry. Cannot fail. */
void curdi_pending_publish(curd_pending *pending);
/* The oldest curd_timing a caller may pass (curd 1.0's). */
#define CURDI_TIMING_SIZE_1_0 offsetof(curd_timing, staging_ns)
/* Fills a caller's timing (struct_size checked by the caller against
 * CURDI_TIMING_SIZE_1_0: only the fields it has are written) from a
 * finished pending. */
void curdi_pending_timing(const curd_pending *pending, curd_timing *timing);

/* A driver failure while enqueueing or waiting for pending work (kernels,
 * copies): its status with a Fix sentence; a lost context marks the
 * device lost (core.h). */
curd_status curdi_pending_fail_driver(struct curd_device *device,
                                      curdi_cu_result rc, const char *call);

#endif
