/* test-soak-gpu-fake.c - the soak and the thousand opens of
 * test-soak-gpu.c on the stand-in libcuda (tests/fake/fake-cuda.c) built
 * beside this program, briefly (CURD_SOAK_SECONDS, default 0.3 s here),
 * under Valgrind in make check and under ThreadSanitizer in
 * make check-tsan; its live counts prove the opens leak nothing. */
#define SOAK_ON_FAKE 1
#include "test-soak-gpu.c"
