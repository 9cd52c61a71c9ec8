/* check-memory.h - memory checks (check-memory.c): that a block holds
 * what is written to it, read back through raw copies independent of the
 * path checked. Each enters the context itself. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_CHECK_MEMORY_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_CHECK_MEMORY_H

#include "harness/common.h"

/* Random bytes in through cuMemcpyHtoD, out through cuMemcpyDtoH into
 * poisoned memory; at most 4 KiB. */
int bench_check_device_memory(const bench_env *env, uint64_t *seed,
                              bench_cu_deviceptr device_ptr, size_t byte_len,
                              const char *what);
/* Random bytes written on the host, through a scratch device allocation
 * and back into poisoned pageable memory; at most 4 KiB. */
int bench_check_host_memory(const bench_env *env, uint64_t *seed,
                            void *host_ptr, size_t byte_len,
                            const char *what);

#endif
