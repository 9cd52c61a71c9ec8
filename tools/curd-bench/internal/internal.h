/* internal.h - curd-bench-internal's scenarios
 * (internal/pool.c). */
#ifndef CURD_TOOLS_CURD_BENCH_INTERNAL_INTERNAL_H
#define CURD_TOOLS_CURD_BENCH_INTERNAL_INTERNAL_H

#include "harness/common.h"

int bench_internal_device_hit(const bench_env *env);
int bench_internal_pinned_hit(const bench_env *env);
int bench_internal_threads(const bench_env *env);

#endif
