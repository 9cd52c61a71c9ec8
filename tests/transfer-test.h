/* transfer-test.h - checks shared by the resident and transfer tests.
 *
 * g_assert_cmpmem takes int lengths and prints whole buffers; these take
 * size_t and name the first differing byte, which is what a failed round
 * trip of 64 MiB needs. */
#ifndef CURD_TRANSFER_TEST_H
#define CURD_TRANSFER_TEST_H

#include <glib.h>
#include <stddef.h>
#include <string.h>

static inline void transfer_test_same_bytes(const char *file, int line,
                                            const char *func,
                                            const char *what,
                                            const void *actual,
                                            const void *expected, size_t len)
{
    const unsigned char *a = actual;
    const unsigned char *b = expected;
    size_t at = 0;
    char *message;
    if (memcmp(a, b, len) == 0)
        return;
    while (a[at] == b[at])
        at++;
    message = g_strdup_printf("%s: byte %zu of %zu is 0x%02x, expected 0x%02x",
                              what, at, len, a[at], b[at]);
    g_assertion_message(G_LOG_DOMAIN, file, line, func, message);
    g_free(message);
}

/* Every byte of actual[0, len) equals expected[0, len). */
#define assert_same_bytes(actual, expected, len)                              \
    transfer_test_same_bytes(__FILE__, __LINE__, G_STRFUNC,                   \
                             #actual " vs " #expected, (actual), (expected),  \
                             (len))

#endif
