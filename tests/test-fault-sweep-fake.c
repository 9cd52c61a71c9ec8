/* test-fault-sweep-fake.c - the fault sweep of test-fault-sweep.c on the
 * stand-in libcuda (tests/fake/fake-cuda.c) built beside this program, so
 * it runs, and runs under Valgrind, on hosts without a GPU; there the
 * stand-in's live counts also prove that no fault point leaked. */
#define FAULT_SWEEP_ON_FAKE 1
#include "test-fault-sweep.c"
