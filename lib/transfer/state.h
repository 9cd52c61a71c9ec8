/* state.h - the device's transfer state (a header alone, pure: it
 * declares what the transfer modules share behind curd_device.transfer). */
#ifndef CURD_LIB_TRANSFER_STATE_H
#define CURD_LIB_TRANSFER_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/copy_team.h"
#include "transfer/tuning.h"

/* The device's transfer state, behind curd_device.transfer: its counters
 * (lib/transfer/transfer.c's: checked before the work, added after it
 * succeeded), the engine's tuning (read from the environment at open,
 * lib/transfer/tuning.h) and the copy team that splits large host
 * copies, started by the first run that needs it (lib/transfer/run.c).
 * Declared below the modules that read it: validation reads the gather
 * policy, a run the tuning and the team; transfer.c opens and closes
 * it. */
struct curdi_transfer_state {
    curdi_tuning tuning;
    _Atomic uint64_t h2d_bytes;
    _Atomic uint64_t d2h_bytes;
    _Atomic uint64_t copy_ops;
    _Atomic uint64_t fences;
    _Atomic uint64_t fill_ops;
    _Atomic uint64_t fill_bytes;
    pthread_mutex_t team_lock;
    curdi_copy_team *team;
    bool team_tried;
    /* Workers a long upload adds to the team (curdi_plan_team_growth),
     * fixed when the team starts. */
    unsigned team_growth;
};

#endif
