/* test-pool-fake.c - every test of test-pool-gpu.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c) built beside this program, so the
 * device and pinned pools, their driver upstreams and the out-of-memory
 * ladder run, and run under Valgrind, on hosts without a GPU. */
#define CURD_TEST_POOL_FAKE 1
#include "test-pool-gpu.c"
