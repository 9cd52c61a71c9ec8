/* test-batch-fake.c - every test of test-batch.c against the stand-in
 * libcuda (tests/fake/), the kernels emulated on the host, under Valgrind
 * in make check. */
#define CURD_TEST_BATCH_FAKE 1
#include "test-batch.c"
