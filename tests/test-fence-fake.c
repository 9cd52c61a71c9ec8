/* test-fence-fake.c - every test of test-fence.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c), whose streams write a word as the
 * write is enqueued, so the polled fence and the driver's wait both run
 * on hosts without a GPU; after each test the stand-in must hold nothing
 * curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-fence.c"
