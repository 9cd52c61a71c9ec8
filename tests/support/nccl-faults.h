/* nccl-faults.h - failing one NCCL call on purpose, as driver-faults.h
 * does for the driver (no GLib: fuzz/ may link it too).
 *
 * nccl_faults_begin() wraps every entry of the library's NCCL table
 * (lib/driver/nccl.h's test-only interface) with a counting wrapper
 * generated from CURDI_NCCL_ENTRY_LIST: from then on NCCL calls are
 * numbered 1, 2, 3, ... and call number fail_at (0: none) returns
 * nccl_result instead of reaching NCCL. ncclGetErrorString and
 * ncclGetLastError pass through: they only describe a failure. A failed
 * ncclCommDestroy leaves the communicator with NCCL, which the library
 * then aborts; a failed ncclCommAbort would leave it for good, so the
 * wrapper makes that call for real after reporting the failure.
 * nccl_faults_end() restores the real table. NCCL must be loaded
 * (a communicator call made) before begin; without it nothing is
 * wrapped. */
#ifndef CURD_TESTS_SUPPORT_NCCL_FAULTS_H
#define CURD_TESTS_SUPPORT_NCCL_FAULTS_H

#include <stdbool.h>

/* Arms the wrappers; false, doing nothing, when they are armed already. */
bool nccl_faults_begin(unsigned fail_at, unsigned nccl_result);
/* Restores the real table; returns how many calls were numbered. */
unsigned nccl_faults_end(void);
/* The entry whose call failed since begin; NULL when none did. */
const char *nccl_faults_fired_entry(void);

#endif
