/* test-dispatch-fake.c - every test of test-dispatch.c against the stand-in
 * libcuda (tests/fake/), the kernels emulated on the host, under Valgrind
 * in make check. */
#define CURD_TEST_DISPATCH_FAKE 1
#include "test-dispatch.c"
