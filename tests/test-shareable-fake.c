/* test-shareable-fake.c - every test of test-shareable.c against the
 * stand-in libcuda (tests/fake/fake-cuda.c) built beside this program, so
 * the driver paths run, and run under Valgrind, on hosts without a GPU;
 * after each test the stand-in must hold nothing curd created. Its
 * memfd-backed allocations make the two processes share bytes for real. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-shareable.c"
