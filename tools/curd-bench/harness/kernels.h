/* kernels.h - the harness kernels of tests/kernels/ (kernels.c), for
 * the scenarios that launch one. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_KERNELS_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_KERNELS_H

#include "harness/common.h"

/* The PTX text of the harness kernel tests/kernels/<file>, compiled into
 * the tool from the committed PTX (harness/kernels.c); NULL for none. */
const char *bench_kernel_ptx(const char *file);
/* desc for `entry` of the harness kernel tests/kernels/<file> (image NULL
 * when there is no such file). */
void bench_kernel_desc(curd_program_desc *desc, const char *file,
                       const char *entry);
/* Loads desc through curd into *program and, when module is not NULL,
 * through the raw driver into *module and *function (the primary context
 * pushed around it); 0, or -1 after bench_fail(). */
int bench_kernel_load(const bench_env *env, const curd_program_desc *desc,
                      curd_program **program, bench_cu_module *module,
                      bench_cu_function *function);

#endif
