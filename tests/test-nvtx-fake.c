/* test-nvtx-fake.c - every test of test-nvtx.c on the stand-in driver and
 * NCCL (tests/fake/), with the stand-in tool tests/fake/nvtx-recorder.c. */
#define CURD_TEST_NVTX_FAKE 1
#include "test-nvtx.c"
