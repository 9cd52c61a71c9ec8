/* test-program-fake.c - every test of test-program.c against the stand-in
 * libcuda (tests/fake/) built beside this program: module loading, the
 * cache, the fault sweep and every harness kernel (emulated on the host)
 * run, and run under Valgrind, on hosts without a GPU; after each test the
 * stand-in must hold nothing more than when it began. */
#define CURD_TEST_PROGRAM_FAKE 1
#include "test-program.c"
