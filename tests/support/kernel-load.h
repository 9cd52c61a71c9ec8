/* kernel-load.h - loading a kernel of the harness (tests/kernels/) by the
 * name of its PTX file, for the tests and the fuzzers (no GLib). */
#ifndef CURD_TEST_KERNEL_LOAD_H
#define CURD_TEST_KERNEL_LOAD_H

#include "curd.h"

/* curd_program_load of entry in tests/kernels/FILE (e.g. "add_one.ptx",
 * "curd_add_one"), from the PTX that tests/kernels/kernels.mk compiles in;
 * CURD_E_INVALID_ARGUMENT, with nothing loaded, for a file the harness
 * does not have. */
curd_status curd_test_kernel_load(curd_device *device, const char *file,
                                  const char *entry,
                                  curd_program **out_program);

#endif
