/* test-program-link-fake.c - every test of test-program-link.c against
 * the stand-in libcuda (tests/fake/) built beside this program, whose
 * linker joins its inputs' texts and whose host emulation runs the linked
 * kernel; no skip is allowed, and after each test the stand-in must hold
 * nothing more (link states included) than when it began. */
#define CURD_TEST_PROGRAM_LINK_FAKE 1
#include "test-program-link.c"
