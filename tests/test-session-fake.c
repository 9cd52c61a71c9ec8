/* test-session-fake.c - every test of test-session.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c) built beside this program, so the
 * session's driver paths run, and run under Valgrind, on hosts without a
 * GPU; after each test the stand-in must hold nothing curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-session.c"
