/* status.h - the library's one way to report a failure.
 *
 * Every failing path ends in curdi_fail() (or curdi_driver_fail() for a
 * CUresult): it stores the calling thread's sentence for curd_last_error()
 * and returns the status, so a caller writes `return curdi_fail(...)`.
 * Messages name what failed and the values involved and must end with
 * "Fix: ...". */
#ifndef CURD_LIB_BASE_STATUS_H
#define CURD_LIB_BASE_STATUS_H

#include <stdbool.h>

#include "curd.h"

#define CURDI_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* CURDI_TRY(status, call, label): the one way to pass a failure up to a
 * function's cleanup. It evaluates call (any curd_status expression),
 * stores the result in status and, unless it is CURD_OK, jumps to label;
 * the callee has set the sentence, so the caller adds none.
 *
 * A function keeps one cleanup tail: a label per thing it acquired, in
 * reverse order of acquisition, so a failure releases exactly what was
 * taken before it, and the success path falls through the labels it also
 * needs (or returns before them):
 *
 *     curd_status status;
 *     CURDI_TRY(status, take_a(&a), out);
 *     CURDI_TRY(status, take_b(&b), release_a);
 *     CURDI_TRY(status, use(&a, &b), release_b);
 *     return CURD_OK;
 * release_b:
 *     give_b(&b);
 * release_a:
 *     give_a(&a);
 * out:
 *     return status;
 *
 * A test that fails with its own sentence forwards the same way:
 * `if (bad) CURDI_TRY(status, curdi_fail(...), release_a);`; with nothing
 * to release, `return curdi_fail(...)` is enough. Loops break out with it
 * too, rather than testing status in their condition. */
#define CURDI_TRY(status, call, label)                                        \
    do {                                                                      \
        (status) = (call);                                                    \
        if ((status) != CURD_OK)                                              \
            goto label;                                                       \
    } while (0)

curd_status curdi_fail(curd_status status, const char *format, ...)
    CURDI_PRINTF(2, 3);

/* Sets the calling thread's curd_last_driver_code() without a message,
 * for failures of driver calls (driver.c's curdi_driver_fail) and for
 * sentences that curdi_fail() writes about one. */
void curdi_status_note_driver_code(int cu_result);

/* Test-only: the calling thread's next curdi_fail() with a sentence too
 * long for the buffer finds the allocation of its full copy failed, as
 * under memory pressure. Reached through libcurd.a; hidden in libcurd.so
 * like every curdi_ symbol. */
void curdi_status_refuse_next_copy_for_test(void);

/* Writes a line to standard error when CURD_TRACE is set; nothing else in
 * the library prints. */
void curdi_trace(const char *format, ...) CURDI_PRINTF(1, 2);
/* Whether CURD_TRACE is set (not empty, not "0"), read once per process:
 * for tracing that costs work (clock readings) before its line. */
bool curdi_trace_enabled(void);

#endif
