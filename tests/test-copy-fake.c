/* test-copy-fake.c - every test of test-copy.c against the stand-in
 * libcuda (tests/fake/fake-cuda.c) with two fake devices, so copies
 * within a device, between devices with peer access, and staged between
 * them (CURD_PEER_ACCESS=0, or the driver's FAKE_CUDA_NO_PEER_ACCESS) all
 * run on hosts without a GPU; after each test the stand-in must hold
 * nothing curd created. */
#define TRANSFER_TEST_ON_FAKE 1
#include "test-copy.c"
