/* test-landing-fake.c - every test of test-landing.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c), so the landing area's turns, its
 * fallbacks and its freeing at close run on hosts without a GPU; after
 * each test the stand-in must hold nothing curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-landing.c"
