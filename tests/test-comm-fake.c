/* test-comm-fake.c - every test of test-comm.c on the stand-in driver
 * (two devices) and the stand-in NCCL (ranks as threads, collectives
 * computed on the host), plus the tests of the stand-ins' own knobs: a
 * stalled rank, an older NCCL, every NCCL call failed in turn. */
#define CURD_TEST_COMM_FAKE 1
#include "test-comm.c"
