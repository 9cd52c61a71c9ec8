/* driver-faults.h - failing one driver call on purpose, for the tests and
 * the fuzzers (no GLib: fuzz/ links it too).
 *
 * driver_faults_begin() wraps every entry of the library's driver table
 * (lib/driver/driver.h's test-only interface, reached through libcurd.a) with a
 * counting wrapper generated from CURDI_CUDA_ENTRY_LIST: from then on
 * driver calls are numbered 1, 2, 3, ... and call number fail_at (0: none)
 * returns cu_result instead of reaching the driver. With only_entry
 * non-NULL only calls of that entry are numbered and failed.
 * cuGetErrorName and cuGetErrorString pass through unnumbered: they only
 * describe an error, and failing them would fail the message of the
 * failure just injected. driver_faults_end() restores the real table.
 *
 * A failed call that would have let go of something (a free, a destroy,
 * an unload, an unregister, a context pop or release) leaves it with the
 * driver. Where the library, told the call failed, lets go of it anyway
 * (a pool's block "is gone whatever this returns"), the driver keeps it
 * for good; driver_faults_complete_release() then makes the withheld call
 * for real, so that a stand-in driver's live counts stay meaningful for
 * the runs that follow. */
#ifndef CURD_TESTS_SUPPORT_DRIVER_FAULTS_H
#define CURD_TESTS_SUPPORT_DRIVER_FAULTS_H

#include <stdbool.h>

/* Arms the wrappers (loading the driver first if nobody has: without one
 * nothing is wrapped and every count stays 0). false, doing nothing, when
 * they are armed already. */
bool driver_faults_begin(unsigned fail_at, int cu_result,
                         const char *only_entry);
/* Restores the real table; returns how many calls were numbered. */
unsigned driver_faults_end(void);
/* Whether the armed failure fired, and at which entry (NULL: none). */
bool driver_faults_fired(void);
const char *driver_faults_fired_entry(void);
/* Whether the failed call was one that lets go of something (above). */
bool driver_faults_fired_release(void);
/* Makes the failed release call for real (wrappers disarmed); true when
 * there was one to make. Call only where the library has let go of the
 * object: it would otherwise release it a second time. */
bool driver_faults_complete_release(void);

#endif
