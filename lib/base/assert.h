/* assert.h - CURDI_ASSERT: the library's own invariants, checked where
 * the code relies on them (zstd's debug.h is the model).
 *
 * CURDI_ASSERT(cond) states something that holds unless curd itself is
 * wrong: "nothing fails from here on", "space was reserved, so this insert
 * cannot fail", a counter that stays within its bounds. Never a check of
 * a caller's input: that is an error value (curdi_fail), always.
 *
 * Compiled in only where CURDI_DEBUG is defined: the ASan, TSan and fuzz
 * builds (the Makefile and fuzz/fuzz.mk pass -DCURDI_DEBUG). A failed
 * assertion there prints file:line and the expression to standard error
 * and aborts, so the sanitizer or the fuzzer reports it with its stack.
 * The release library keeps curd.h's promise never to abort: there the
 * condition is not evaluated (sizeof keeps its variables "used", so an
 * assertion costs nothing and warns about nothing), so it must have no
 * side effect. */
#ifndef CURD_LIB_BASE_ASSERT_H
#define CURD_LIB_BASE_ASSERT_H

#ifdef CURDI_DEBUG

#include <stdio.h>
#include <stdlib.h>

static inline void curdi_assert_fail(const char *expression, const char *file,
                                     int line)
{
    fprintf(stderr, "%s:%d: curd internal assertion failed: %s\n", file,
            line, expression);
    abort();
}

#define CURDI_ASSERT(cond)                                                    \
    ((cond) ? (void)0 : curdi_assert_fail(#cond, __FILE__, __LINE__))

#else

#define CURDI_ASSERT(cond) ((void)sizeof((cond) ? 1 : 0))

#endif

#endif
