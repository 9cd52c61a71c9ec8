/* status.h - the library's one way to report a failure.
 *
 * Every failing path ends in curdi_fail() (or curdi_fail_driver() for a
 * CUresult): it stores the calling thread's sentence for curd_last_error()
 * and returns the status, so a caller writes `return curdi_fail(...)`.
 * Messages name what failed and the values involved and must end with
 * "Fix: ...". */
#ifndef CURD_LIB_STATUS_H
#define CURD_LIB_STATUS_H

#include "curd.h"

#define CURDI_PRINTF(f, a) __attribute__((format(printf, f, a)))

curd_status curdi_fail(curd_status status, const char *format, ...)
    CURDI_PRINTF(2, 3);

/* Records cu_result as the thread's last driver code and returns the status
 * it maps to (CURD_E_OUT_OF_MEMORY, CURD_E_DEVICE_LOST, CURD_E_DRIVER, ...),
 * with a sentence naming the call, the driver's error name and the fix. */
curd_status curdi_fail_driver(int cu_result, const char *call,
                              const char *fix);

/* Test-only: the calling thread's next curdi_fail() with a sentence too
 * long for the buffer finds the allocation of its full copy failed, as
 * under memory pressure. Reached through libcurd.a; hidden in libcurd.so
 * like every curdi_ symbol. */
void curdi_status_refuse_next_copy_for_test(void);

/* Writes a line to standard error when CURD_TRACE is set; nothing else in
 * the library prints. */
void curdi_trace(const char *format, ...) CURDI_PRINTF(1, 2);

#endif
