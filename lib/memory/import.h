/* import.h - the import module: device memory another library allocated,
 * named as a curd_buffer (curd_buffer_import).
 *
 * import.c checks the range with the driver (cuPointerGetAttribute: it
 * must lie whole in one allocation of the device's context) and hands it
 * to the resident module, which keeps it as a live buffer flagged imported:
 * every transfer, dispatch and batch takes it like any other, curd never
 * frees it (curd_buffer_free forgets it) and it counts in no budget, only
 * in curd_stats.imported_bytes. The module has no state of its own and
 * nothing to open or close. */
#ifndef CURD_LIB_MEMORY_IMPORT_H
#define CURD_LIB_MEMORY_IMPORT_H

#include <stddef.h>

#include "curd.h"

struct curd_device;

/* The module also answers, for the modules above, whether host memory is
 * page-locked (cuPointerGetAttribute: CU_MEMORYTYPE_HOST), so a copy
 * into it runs asynchronously: the first and the last byte of [host,
 * host + byte_len) (byte_len > 0) must be, in an allocation or
 * registration of curd's or another library's, else
 * CURD_E_INVALID_ARGUMENT naming `what`. Context current. */
curd_status curdi_import_pinned_range_check(struct curd_device *device,
                                            const void *host, size_t byte_len,
                                            const char *what);

#endif
