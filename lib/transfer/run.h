/* run.h - a synchronous transfer's run: its plan, the resources it holds
 * while the engine moves its bytes, and the engine's driver side.
 *
 * A run starts from validated items (lib/transfer/validate.h: handles
 * marked, registered ranges looked up) and goes in four calls:
 *
 *   curdi_run_plan                  the device entered, the plan and its
 *                                   host side (lib/transfer/plan.h), the
 *                                   gather kernels when it gathers;
 *   curdi_run_resources_take        the copy team (warmed, grown for a
 *                                   long upload), the stream, the staging
 *                                   or landing slots, the events;
 *   curdi_engine_run                (lib/transfer/engine.h) through the
 *                                   run's ops, which enqueue driver work;
 *   curdi_run_resources_give_back   everything, in one call: drained
 *                                   first after a failure, then the team,
 *                                   events, slots, stream, plan, the
 *                                   device, and the prepared items' marks
 *                                   and registered-range uses.
 *
 * The counters stay with lib/transfer/transfer.c, which checks them
 * between the plan and the take. The fills and the upload sync use the
 * stream and the fence from here too. */
#ifndef CURD_LIB_TRANSFER_RUN_H
#define CURD_LIB_TRANSFER_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "curd.h"
#include "driver/driver.h"
#include "memory/landing.h"
#include "memory/staging.h"
#include "transfer/copy_team.h"
#include "transfer/engine.h"
#include "transfer/gather.h"
#include "transfer/plan.h"
#include "transfer/state.h"
#include "transfer/tuning.h"
#include "transfer/validate.h"

struct curd_device;

/* One run, on the caller's stack (its ops point into it). */
typedef struct curdi_run {
    struct curd_device *device;
    curdi_prepared *prepared;
    const curdi_driver *driver;
    bool entered;
    curdi_plan plan;
    curdi_plan_host host;
    /* What the engine is given. */
    curdi_engine_staging staging;
    curdi_engine_ops ops;
    /* The ops' side: the stream (the upload stream when a buffer has
     * asynchronous uploads pending, so the new work is ordered after
     * them; else a pooled one), an event per slot, and for gathering
     * plans the kernels. */
    curdi_cu_stream stream;
    bool pooled_stream;
    curdi_cu_event events[CURDI_PLAN_SLOTS_MAX];
    bool events_taken;
    curdi_gather_kernels kernels;
    /* The staging slots: blocks of the pinned pool, or for a download
     * places in the landing area (lib/memory/landing.h). */
    unsigned char *slots[CURDI_PLAN_SLOTS_MAX];
    curdi_staging slot_blocks[CURDI_PLAN_SLOTS_MAX];
    curdi_landing landings[CURDI_PLAN_SLOTS_MAX];
    unsigned slots_taken;
    /* The copy team sharing the host copies (NULL: the caller copies
     * alone), warmed at once for an upload and on a download's first wait
     * for the device (the DMAs are on their way by then;
     * lib/transfer/copy_team.h): the workers and window still to warm (0
     * workers once warmed), the warmth to cool, and the workers a long
     * upload added (curdi_copy_team_grow). */
    curdi_copy_team *team;
    unsigned warm_workers;
    uint64_t warm_window_ns;
    uint64_t warmth;
    unsigned added_workers;
    /* Everything taken: the engine may have enqueued work. */
    bool taken;
} curdi_run;

/* Enters the device and plans the prepared items (which must move some
 * bytes), gathering where the tuning says so and the device can (the
 * kernels' module loads on the first plan that gathers; a driver that
 * cannot JIT them, or a device whose kernels cannot reach host memory,
 * leaves one DMA per span), then decides the plan's host side. Whatever
 * it returns, curdi_run_resources_give_back ends the run. */
curd_status curdi_run_plan(struct curd_device *device,
                           curdi_prepared *prepared, curdi_run *run);
/* Takes what the plan's host side says the run needs (see above) and
 * fills run->staging and run->ops for curdi_engine_run. */
curd_status curdi_run_resources_take(curdi_run *run);
/* Gives back everything the run and its prepared items hold; status is
 * the run's, and after a failure the stream is drained first, so nothing
 * still enqueued reads a slot that went back to a pool. */
void curdi_run_resources_give_back(curdi_run *run, curd_status status);

/* The device's copy team, started on its first use; NULL if it could not
 * be (its users then copy, or compare, on the calling thread). A run
 * takes it through curdi_run_resources_take. */
curdi_copy_team *curdi_run_team(struct curd_device *device);
/* The device's copy team for a host comparison of byte_len bytes (a
 * static set's verified hit), or NULL when it is below the tuning's
 * compare_parallel_min (CURD_COMPARE_PARALLEL_MIN, 1 MiB by default:
 * waking the workers costs more than they save below it) or there is no
 * team. */
curdi_copy_team *curdi_run_compare_team(struct curd_device *device,
                                        uint64_t byte_len);

/* The stream a fill runs on: the upload stream when after_uploads, else a
 * pooled non-blocking stream (*out_pooled). */
curd_status curdi_run_stream_for(struct curd_device *device,
                                 bool after_uploads, curdi_cu_stream *out,
                                 bool *out_pooled);
/* After a failure: waits for whatever was enqueued on the stream before
 * its resources go back. Not a fence (nothing is counted on failure). */
void curdi_run_stream_drain(const curdi_driver *driver,
                            curdi_cu_stream stream);
/* The fence of a transfer: waits for what `stream` holds so far, polling
 * the word it writes for as long as the tuning says (lib/core/fence.h).
 * fix: the failure's Fix sentence. */
curd_status curdi_run_fence(struct curd_device *device,
                            curdi_cu_stream stream, const char *fix);

#endif
