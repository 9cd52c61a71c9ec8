/* test-dispatch-telemetry-fake.c - every test of test-dispatch-telemetry.c
 * against the stand-in libcuda (tests/fake/), the kernels emulated on the
 * host, under Valgrind in make check. */
#define CURD_TEST_DISPATCH_FAKE 1
#include "test-dispatch-telemetry.c"
