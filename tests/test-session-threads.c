/* test-session-threads.c - test-session.c's eight threads sharing one
 * session, alone, on the stand-in libcuda, for ThreadSanitizer (make
 * check-tsan runs tests/test-*thread*): the session's lock, and under it
 * the resident table's, the pools' and the transfer module's. */
/* On the stand-in driver always: curd-test.h's CURD_TEST_ON_FAKE. */
#define CURD_TEST_ON_FAKE 1
#define SESSION_TEST_THREADS_ONLY 1
#include "test-session.c"
