/* test-gather-fake.c - every test of test-gather.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c) built beside this program, which runs
 * the gather and scatter kernels block by block on the host, so both
 * paths run, and run under Valgrind, on hosts without a GPU; after each
 * test the stand-in must hold nothing curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-gather.c"
