/* vmm.h - the vmm module: device memory through the driver's virtual memory
 * management calls, which is what lets another process map it.
 *
 * vmm.c makes an allocation (cuMemCreate: pinned, on the device, with a
 * POSIX file descriptor as its shareable handle), reserves an address
 * range, maps the allocation there and gives the device read and write
 * access; or does the same for an allocation another process exported
 * (cuMemImportFromShareableHandle). Either way it lets go of the handle
 * once the memory is mapped: the mapping is this process's reference, so
 * unmapping it (curdi_vmm_unmap) is all a free needs, and the driver
 * frees the memory when the last process's reference goes (a process
 * that dies lets go of its own). Sizes are rounded up to the
 * allocation granularity (a power of two), whose log2 the caller keeps
 * to unmap the same range. No state of its own; every call runs with the
 * device entered. The resident module (above) keeps the buffers. */
#ifndef CURD_LIB_MEMORY_VMM_H
#define CURD_LIB_MEMORY_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

struct curd_device;

/* A mapped range: its address, the bytes mapped (byte_len rounded up to
 * the granularity) and log2 of the granularity. */
typedef struct curdi_vmm_mapping {
    uint64_t device_ptr;
    uint64_t mapped_len;
    uint8_t granularity_log2;
} curdi_vmm_mapping;

/* byte_len (> 0) rounded up to a multiple of 2^granularity_log2; false
 * when that passes 2^64 - 1. */
bool curdi_vmm_round_up(uint64_t byte_len, uint8_t granularity_log2,
                        uint64_t *out_mapped_len);

/* A new shareable allocation of at least byte_len bytes on the device,
 * mapped for it. CURD_E_UNSUPPORTED where the driver or the device has no
 * virtual memory management or no POSIX descriptors, CURD_E_OVERFLOW,
 * or the driver's status; nothing is left on any failure. `what` names
 * the public call. */
curd_status curdi_vmm_create(struct curd_device *device, const char *what,
                             uint64_t byte_len, curdi_vmm_mapping *out);

/* The allocation behind fd (not closed, not kept) mapped for the device:
 * byte_len rounded up to the granularity must not pass the allocation's
 * end (CURD_E_RANGE), the descriptor must be a CUDA shareable handle
 * (CURD_E_INVALID_ARGUMENT), and memory of another device must be within
 * the device's peer reach (CURD_E_INVALID_ARGUMENT). Nothing is left on
 * any failure. */
curd_status curdi_vmm_import(struct curd_device *device, const char *what,
                             int fd, uint64_t byte_len,
                             curdi_vmm_mapping *out);

/* A new file descriptor (close-on-exec) for the allocation mapped at
 * device_ptr; the caller owns it. */
curd_status curdi_vmm_export(struct curd_device *device, const char *what,
                             uint64_t device_ptr, int *out_fd);

/* Unmaps the range and frees its addresses. The unmap failing leaves
 * everything as it was (the driver's status); once it succeeded, the
 * mapping is gone and a failure to free the address range is not
 * reported (the memory itself is let go of; only addresses stay
 * reserved). */
curd_status curdi_vmm_unmap(struct curd_device *device,
                            const curdi_vmm_mapping *mapping);

#endif
