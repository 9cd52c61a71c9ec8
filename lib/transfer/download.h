/* download.h - the download module: curd_buffer_download_async,
 * a range of a resident buffer copied into page-locked host memory on a
 * pooled stream, handed back as a curd_pending.
 *
 * It stands in launch/ beside dispatch because its result is a
 * curd_pending (lib/core/pending.h): a wait fences it on its end event,
 * a free drains it, and the buffer stays marked in use (it cannot be
 * freed) and the destination's registration in use (it cannot be
 * unregistered) until then. The copy is one cuMemcpyDtoHAsync straight
 * into the caller's memory, which must be page-locked (checked with the
 * driver, lib/memory/import.h), so that it runs asynchronously. It counts
 * as a transfer does (d2h_bytes, copy_ops, one fence) once complete. The
 * module has no state of its own and nothing to open or close. */
#ifndef CURD_LIB_TRANSFER_DOWNLOAD_H
#define CURD_LIB_TRANSFER_DOWNLOAD_H

#include "curd.h"

#endif
