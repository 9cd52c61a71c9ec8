/* session.h - the session module: sessions and exact-size buffer reuse
 * (curd_session_*; curd.h says what a session promises). A session's
 * static sets, the content-addressed cache of immutable uploads, are the
 * static-sets module's (static_sets.h), below this one: each session
 * embeds them and calls that module to make, drain, probe and free them.
 *
 * The state (struct curdi_session_state behind curd_device.session) lists
 * the device's sessions under its own lock. Each session has one short
 * mutex of its own (in the curdi_session_shared it shares with its static
 * sets), never held across a driver call that can wait for the GPU, over:
 *  - its buffer records, by the buffer's handle now: the buffers it lent
 *    out and those waiting idle. An idle buffer waits under a handle only
 *    the session knows (curdi_resident_retag gave it a new one at its
 *    release), so the caller's copy is stale and cannot reach it;
 *  - its idle buffers by exact size: a sorted array of sizes, each a
 *    stack (the last released is the next reused; eviction takes the
 *    largest size's last released first);
 *  - its static sets (static_sets.h says how they are kept).
 * Each release spends one generation of its buffer's slot in the handle
 * table: a buffer reused some 2^23 times or more moves to a fresh slot when
 * its slot retires (resident.h), one slot's bytes of host memory each time.
 * Where two locks nest, the module's comes first, then the session's, then
 * the resident table's (curdi_resident_retag, _take and _probe run under
 * the session's lock: they make no driver call).
 *
 * A process-wide registry of live sessions lets curd_session_free refuse
 * a pointer that is not one (freed already, never made) without reading
 * it; the other entry points trust their session pointer, as the program
 * calls trust theirs. */
#ifndef CURD_LIB_SESSION_SESSION_H
#define CURD_LIB_SESSION_SESSION_H

#include "curd.h"

struct curd_device;

/* Creates dev->session, with no session yet; no driver call. */
curd_status curdi_session_open(struct curd_device *device);
/* Detaches every session of the device: frees their records and sets
 * (host memory; their buffers are freed by the resident module, which
 * closes after this one) and leaves each an empty shell whose calls fail
 * until curd_session_free frees it. NULL-safe. */
void curdi_session_close(struct curd_device *device);

#endif
