/* kernel-load.h - loading a kernel of the harness (tests/kernels/) by the
 * name of its PTX file, for the tests and the fuzzers (no GLib). */
#ifndef CURD_TESTS_SUPPORT_KERNEL_LOAD_H
#define CURD_TESTS_SUPPORT_KERNEL_LOAD_H

#include <stddef.h>

#include "curd.h"

/* curd_program_load of entry in tests/kernels/<file> (e.g. "add_one.ptx",
 * "curd_add_one"), from the PTX that tests/kernels/kernels.mk compiles in;
 * CURD_E_INVALID_ARGUMENT, with nothing loaded, for a file the harness
 * does not have. */
curd_status curd_test_kernel_load(curd_device *device, const char *file,
                                  const char *entry,
                                  curd_program **out_program);

/* The PTX text of tests/kernels/<file>, or NULL when the harness has no
 * such file. */
const char *curd_test_kernel_ptx(const char *file);

/* curd_program_load of entry in tests/kernels/<file> linked with the PTX of
 * link_files[0 .. link_count - 1] (curd_program_desc.link_images; at most
 * 8); CURD_E_INVALID_ARGUMENT, with nothing loaded, for a file the
 * harness does not have. */
curd_status curd_test_kernel_load_linked(curd_device *device,
                                         const char *file,
                                         const char *const *link_files,
                                         size_t link_count, const char *entry,
                                         curd_program **out_program);

#endif
