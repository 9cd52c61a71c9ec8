/* import.c - curd_buffer_import (see import.h). */
#include "memory/import.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "memory/resident.h"

/* One attribute of the allocation holding `address` into *data; *known
 * false, with no sentence, for memory the driver does not know (host
 * memory that is not page-locked, freed or made up: its
 * CUDA_ERROR_INVALID_VALUE), which each caller words its own way. */
static curd_status read_attribute(curd_device *device, void *data,
                                  curdi_cu_pointer_attribute attribute,
                                  const char *name, uint64_t address,
                                  bool *known)
{
    curdi_cu_result rc =
        curdi_driver_note(curdi_driver_get()->cuPointerGetAttribute(
            data, attribute, (curdi_cu_deviceptr)address));
    *known = rc != CURDI_CUDA_ERROR_INVALID_VALUE;
    if (rc == CURDI_CUDA_SUCCESS || !*known)
        return CURD_OK;
    curd_status status = curdi_driver_fail((int)rc, name, CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_core_device_mark_lost(device);
    return status;
}

/* The allocation holding `address`: its memory type, start and size;
 * *known false where the driver knows none. */
static curd_status read_allocation(curd_device *device, uint64_t address,
                                   unsigned int *memory_type,
                                   uint64_t *start, uint64_t *size,
                                   bool *known)
{
    curdi_cu_deviceptr range_start = 0;
    size_t range_size = 0;
    curd_status status = read_attribute(
        device, memory_type, CURDI_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)", address,
        known);
    if (status == CURD_OK && *known)
        status = read_attribute(
            device, &range_start, CURDI_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)",
            address, known);
    if (status == CURD_OK && *known)
        status = read_attribute(
            device, &range_size, CURDI_CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_RANGE_SIZE)", address,
            known);
    *start = (uint64_t)range_start;
    *size = (uint64_t)range_size;
    return status;
}

/* Whether [address, address + byte_len) lies whole in [start, start +
 * size), which holds address. The first two tests never hold for an
 * allocation the driver reported for address; they keep the subtraction
 * in the third from wrapping. */
static bool inside(uint64_t address, uint64_t byte_len, uint64_t start,
                   uint64_t size)
{
    return address >= start && address - start <= size
           && byte_len <= size - (address - start);
}

/* Whether the driver reports `address` as page-locked host memory. */
static curd_status page_locked(curd_device *device, uint64_t address,
                               bool *out)
{
    unsigned int memory_type = 0;
    bool known = false;
    curd_status status = read_attribute(
        device, &memory_type, CURDI_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)", address,
        &known);
    *out = status == CURD_OK && known
           && memory_type == CURDI_CU_MEMORYTYPE_HOST;
    return status;
}

curd_status curdi_import_pinned_range_check(curd_device *device,
                                            const void *host, size_t byte_len,
                                            const char *what)
{
    /* Its first and its last byte: the range attributes are documented
     * for device pointers only. A range whose middle is not page-locked
     * would still be copied right, by the driver's own staging. */
    uint64_t first = (uint64_t)(uintptr_t)host;
    bool first_locked = false, last_locked = false;
    curd_status status = page_locked(device, first, &first_locked);
    if (status == CURD_OK && first_locked)
        status = page_locked(device, first + byte_len - 1u, &last_locked);
    if (status != CURD_OK)
        return status;
    if (!first_locked || !last_locked)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: [%p, +%zu) is not page-locked host memory"
                          " (its %s byte is not). Fix: pass a pinned block"
                          " (curd_block_acquire), a range registered with"
                          " curd_host_register, or memory another library"
                          " page-locked.",
                          what, host, byte_len,
                          first_locked ? "last" : "first");
    return CURD_OK;
}

/* The range is device memory of this device's context, whole in one
 * allocation. Context current. */
static curd_status check_range(curd_device *device, uint64_t device_ptr,
                               uint64_t byte_len, uint64_t end)
{
    unsigned int memory_type = 0;
    uint64_t start = 0, size = 0;
    bool known = false;
    int ordinal = -1;
    curdi_cu_context context = NULL;
    curd_status status = read_allocation(device, device_ptr, &memory_type,
                                         &start, &size, &known);
    if (status == CURD_OK && !known)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_import: 0x%" PRIx64 " is not device"
                          " memory the CUDA driver knows (host memory, freed,"
                          " or not an address cuMemAlloc or cudaMalloc"
                          " returned). Fix: pass an address inside a live"
                          " device allocation of device %d.",
                          device_ptr, device->ordinal);
    if (status == CURD_OK && memory_type != CURDI_CU_MEMORYTYPE_DEVICE)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_import: 0x%" PRIx64 " is page-locked"
                          " host memory, not device memory. Fix: use"
                          " curd_host_register for host memory, and import"
                          " device allocations only.",
                          device_ptr);
    if (status == CURD_OK)
        status = read_attribute(
            device, &ordinal, CURDI_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)",
            device_ptr, &known);
    if (status == CURD_OK && ordinal != device->ordinal)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_import: 0x%" PRIx64 " is memory of"
                          " device %d, not of device %d. Fix: import it"
                          " into a curd_device of device %d.",
                          device_ptr, ordinal, device->ordinal, ordinal);
    if (status == CURD_OK)
        status = read_attribute(
            device, &context, CURDI_CU_POINTER_ATTRIBUTE_CONTEXT,
            "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_CONTEXT)",
            device_ptr, &known);
    /* Memory of a stream-ordered pool reports no context; any other
     * must be the primary context's. */
    if (status == CURD_OK && context != NULL && context != device->context)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_buffer_import: 0x%" PRIx64 " belongs to"
                          " another CUDA context of device %d than its"
                          " primary context. Fix: import memory allocated"
                          " in the primary context (the CUDA runtime's).",
                          device_ptr, device->ordinal);
    if (status != CURD_OK)
        return status;
    if (!inside(device_ptr, byte_len, start, size))
        return curdi_fail(CURD_E_RANGE,
                          "curd_buffer_import: [0x%" PRIx64 ", 0x%" PRIx64
                          ") passes the end of its allocation [0x%" PRIx64
                          ", 0x%" PRIx64 "). Fix: import at most the"
                          " allocation's bytes from that address.",
                          device_ptr, end, start, start + size);
    return CURD_OK;
}

CURD_API curd_status curd_buffer_import(curd_device *device,
                                        uint64_t device_ptr,
                                        uint64_t byte_len,
                                        curd_buffer *out_buffer)
{
    const char *what = "curd_buffer_import";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (out_buffer == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_buffer is NULL. Fix: pass the address of"
                          " a curd_buffer to receive the handle.",
                          what);
    if (device_ptr == 0 || byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: device_ptr 0x%" PRIx64 ", byte_len %" PRIu64
                          ": %s. Fix: pass a device allocation's address and"
                          " at least one byte.",
                          what, device_ptr, byte_len,
                          device_ptr == 0 ? "a null address" : "no bytes");
    uint64_t end = 0;
    if (!curdi_u64_add(device_ptr, byte_len, &end) || byte_len > SIZE_MAX)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: 0x%" PRIx64 " + %" PRIu64 " bytes passes the"
                          " end of the address space. Fix: pass the"
                          " allocation's true length.",
                          what, device_ptr, byte_len);
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    status = check_range(device, device_ptr, byte_len, end);
    curdi_core_device_leave(device);
    uint64_t id = 0;
    if (status == CURD_OK)
        status = curdi_resident_import(device, what, device_ptr,
                                       (size_t)byte_len, 0, &id);
    if (status == CURD_OK)
        out_buffer->id = id;
    return status;
}
