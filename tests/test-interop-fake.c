/* test-interop-fake.c - every test of test-interop.c against the stand-in
 * libcuda (tests/fake/), with two devices, the kernels emulated on the
 * host, under Valgrind in make check. */
#define CURD_TEST_INTEROP_FAKE 1
#include "test-interop.c"
