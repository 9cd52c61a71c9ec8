/* shareable.h - the shareable module: resident buffers that other
 * processes map (curd_buffer_alloc_shareable, curd_buffer_export_fd,
 * curd_buffer_import_fd) and the two helpers that pass a descriptor over
 * a Unix socket (curd_fd_send, curd_fd_recv).
 *
 * shareable.c checks the public arguments, has memory/vmm.c make, map or
 * export the memory, and hands the mapping to the resident module, which
 * keeps it as a live buffer that every transfer, dispatch, batch, copy
 * and collective takes like any other: a shareable buffer counts in the
 * resident budget and statistics (at the bytes asked for), an imported
 * one in the imported bytes only (its memory is the exporter's
 * allocation), and curd_buffer_free unmaps either. The module has no state
 * of its own and nothing to open or close; the public entries are all
 * it offers, so this header declares nothing. */
#ifndef CURD_LIB_MEMORY_SHAREABLE_H
#define CURD_LIB_MEMORY_SHAREABLE_H

#include "curd.h"

#endif
