/* test-session-faults-fake.c - the fault sweeps of test-session-faults.c
 * against the stand-in libcuda (tests/fake/fake-cuda.c) built beside this
 * program, so they run, and run under Valgrind, on hosts without a GPU;
 * after each test the stand-in must hold nothing curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-session-faults.c"
