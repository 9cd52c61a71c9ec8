/* test-device-fake.c - every test of test-device.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c) built beside this program, so the
 * device paths (open, close, unwinding, fault sweeps, fork, teardown, the
 * self-test) run, and run under Valgrind, on hosts without a GPU. */
#define CURD_TEST_DEVICE_FAKE 1
#include "test-device.c"
