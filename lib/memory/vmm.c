/* vmm.c - device memory through the virtual memory management calls (see
 * vmm.h). Read top to bottom: the checks and the granularity, mapping a
 * handle and unmapping it, then create, import and export. */
#include "memory/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>

#include "base/checked.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"

#define VMM_UNSUPPORTED_FIX                                                   \
    "Fix: update the NVIDIA driver, or share memory between processes"       \
    " another way (a shareable buffer needs the CUDA driver's virtual"       \
    " memory management with POSIX file descriptors)."

/* The driver's status for a failed call, the device marked lost when it
 * is. */
static curd_status driver_failed(curd_device *device, curdi_cu_result rc,
                                 const char *call)
{
    curd_status status = curdi_driver_fail((int)rc, call, CURDI_DRIVER_FIX);
    if (status == CURD_E_DEVICE_LOST)
        curdi_core_device_mark_lost(device);
    return status;
}

/* The entries, and the device's support as it was read at its open
 * (CURD_CAP_SHAREABLE: virtual memory management with POSIX file
 * descriptors, which both the export and the import use). */
static curd_status supported(curd_device *device, const char *what)
{
    if (!curdi_driver_has_vmm())
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: this CUDA driver lacks the virtual memory"
                          " management entries (cuMemCreate, cuMemMap,"
                          " cuMemExportToShareableHandle, ...). %s",
                          what, VMM_UNSUPPORTED_FIX);
    if ((device->props.capabilities & CURD_CAP_SHAREABLE) == 0)
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: device %d does not support virtual memory"
                          " management with memory exported as POSIX file"
                          " descriptors. %s",
                          what, device->ordinal, VMM_UNSUPPORTED_FIX);
    return CURD_OK;
}

/* The properties of a shareable allocation on device `ordinal`. */
static curdi_cu_mem_allocation_prop allocation_prop(int ordinal)
{
    curdi_cu_mem_allocation_prop prop = {0};
    prop.type = CURDI_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requested_handle_types = CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CURDI_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    return prop;
}

/* log2 of the minimum granularity of allocations on device `ordinal`. */
static curd_status granularity_log2(curd_device *device, const char *what,
                                    int ordinal, uint8_t *out)
{
    curdi_cu_mem_allocation_prop prop = allocation_prop(ordinal);
    size_t granularity = 0;
    curdi_cu_result rc =
        curdi_driver_note(curdi_driver_get()->cuMemGetAllocationGranularity(
            &granularity, curdi_cu_mem_allocation_prop_abi(&prop),
            CURDI_CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemGetAllocationGranularity");
    if (granularity == 0 || (granularity & (granularity - 1u)) != 0)
        return curdi_fail(CURD_E_UNSUPPORTED,
                          "%s: the driver reports an allocation granularity"
                          " of %zu bytes for device %d, not a power of two."
                          " %s",
                          what, granularity, ordinal, VMM_UNSUPPORTED_FIX);
    uint8_t log2 = 0;
    while (((size_t)1 << log2) != granularity)
        log2++;
    *out = log2;
    return CURD_OK;
}

bool curdi_vmm_round_up(uint64_t byte_len, uint8_t granularity_log2,
                        uint64_t *out_mapped_len)
{
    uint64_t mask = ((uint64_t)1 << granularity_log2) - 1u;
    uint64_t sum = 0;
    if (!curdi_u64_add(byte_len, mask, &sum))
        return false;
    *out_mapped_len = sum & ~mask;
    return true;
}

/* Reserves mapping->mapped_len bytes of addresses, maps handle there and
 * gives the device read and write access; on a failure nothing is left
 * mapped or reserved. *map_refused: the map itself failed with
 * CUDA_ERROR_INVALID_VALUE or CUDA_ERROR_NOT_SUPPORTED (a size past the
 * allocation's end), with no sentence, for the caller to word. */
static curd_status map_handle(curd_device *device, curdi_cu_mem_handle handle,
                              curdi_vmm_mapping *mapping, bool *map_refused)
{
    const curdi_driver *driver = curdi_driver_get();
    size_t mapped_len = (size_t)mapping->mapped_len;
    curdi_cu_deviceptr address = 0;
    *map_refused = false;
    curdi_cu_result rc = curdi_driver_note(driver->cuMemAddressReserve(
        &address, mapped_len, (size_t)1 << mapping->granularity_log2, 0, 0));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemAddressReserve");
    rc = curdi_driver_note(driver->cuMemMap(address, mapped_len, 0, handle, 0));
    /* Driver 580 answers a size past the allocation's end with
     * CUDA_ERROR_NOT_SUPPORTED, the documentation with
     * CUDA_ERROR_INVALID_VALUE. */
    if (rc == CURDI_CUDA_ERROR_INVALID_VALUE
        || rc == CURDI_CUDA_ERROR_NOT_SUPPORTED) {
        *map_refused = true;
        (void)driver->cuMemAddressFree(address, mapped_len);
        return CURD_E_RANGE;
    }
    if (rc != CURDI_CUDA_SUCCESS) {
        curd_status status = driver_failed(device, rc, "cuMemMap");
        (void)driver->cuMemAddressFree(address, mapped_len);
        return status;
    }
    curdi_cu_mem_access_desc access = {0};
    access.location.type = CURDI_CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device->ordinal;
    access.flags = CURDI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = curdi_driver_note(driver->cuMemSetAccess(
        address, mapped_len, curdi_cu_mem_access_desc_abi(&access), 1));
    if (rc != CURDI_CUDA_SUCCESS) {
        curd_status status = driver_failed(device, rc, "cuMemSetAccess");
        (void)driver->cuMemUnmap(address, mapped_len);
        (void)driver->cuMemAddressFree(address, mapped_len);
        return status;
    }
    mapping->device_ptr = (uint64_t)address;
    return CURD_OK;
}

/* Lets go of a handle whose memory is mapped (or that failed to map): the
 * mapping holds its own reference. A failure keeps one reference the
 * driver drops at exit; nothing of curd's depends on it, so it is not
 * reported. */
static void release_handle(curdi_cu_mem_handle handle)
{
    (void)curdi_driver_note(curdi_driver_get()->cuMemRelease(handle));
}

curd_status curdi_vmm_unmap(curd_device *device,
                            const curdi_vmm_mapping *mapping)
{
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_result rc = curdi_driver_note(driver->cuMemUnmap(
        (curdi_cu_deviceptr)mapping->device_ptr, (size_t)mapping->mapped_len));
    if (rc == CURDI_CUDA_ERROR_DEINITIALIZED)
        return CURD_OK; /* the driver let go of everything at exit */
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemUnmap");
    (void)curdi_driver_note(driver->cuMemAddressFree(
        (curdi_cu_deviceptr)mapping->device_ptr, (size_t)mapping->mapped_len));
    return CURD_OK;
}

curd_status curdi_vmm_create(curd_device *device, const char *what,
                             uint64_t byte_len, curdi_vmm_mapping *out)
{
    curdi_vmm_mapping mapping = {0};
    curd_status status = supported(device, what);
    if (status == CURD_OK)
        status = granularity_log2(device, what, device->ordinal,
                                  &mapping.granularity_log2);
    if (status != CURD_OK)
        return status;
    if (!curdi_vmm_round_up(byte_len, mapping.granularity_log2,
                            &mapping.mapped_len)
        || mapping.mapped_len > SIZE_MAX)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: %" PRIu64 " bytes rounded up to the"
                          " allocation granularity (%" PRIu64 " bytes) pass"
                          " 2^64 - 1. Fix: ask for fewer bytes.",
                          what, byte_len,
                          (uint64_t)1 << mapping.granularity_log2);
    curdi_cu_mem_allocation_prop prop = allocation_prop(device->ordinal);
    curdi_cu_mem_handle handle = 0;
    curdi_cu_result rc = curdi_driver_note(curdi_driver_get()->cuMemCreate(
        &handle, (size_t)mapping.mapped_len,
        curdi_cu_mem_allocation_prop_abi(&prop), 0));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemCreate");
    bool map_refused = false;
    status = map_handle(device, handle, &mapping, &map_refused);
    if (map_refused)
        /* The allocation was made with this very size. */
        status = curdi_driver_fail((int)CURDI_CUDA_ERROR_INVALID_VALUE,
                                   "cuMemMap", CURDI_DRIVER_FIX);
    release_handle(handle);
    if (status == CURD_OK)
        *out = mapping;
    return status;
}

/* The device the allocation behind handle lives on. */
static curd_status allocation_device(curd_device *device,
                                     curdi_cu_mem_handle handle,
                                     int *out_ordinal)
{
    curdi_cu_mem_allocation_prop prop = {0};
    curdi_cu_result rc = curdi_driver_note(
        curdi_driver_get()->cuMemGetAllocationPropertiesFromHandle(
            curdi_cu_mem_allocation_prop_abi(&prop), handle));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc,
                             "cuMemGetAllocationPropertiesFromHandle");
    *out_ordinal = prop.location.id;
    return CURD_OK;
}

/* Memory of device `owner` may be mapped for this device: its own, or
 * one within its peer reach. */
static curd_status reachable(curd_device *device, const char *what, int fd,
                             int owner)
{
    if (owner == device->ordinal)
        return CURD_OK;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_device peer = 0;
    int can_access = 0;
    curdi_cu_result rc = curdi_driver_note(driver->cuDeviceGet(&peer, owner));
    if (rc == CURDI_CUDA_SUCCESS)
        rc = curdi_driver_note(driver->cuDeviceCanAccessPeer(
            &can_access, device->cu_device, peer));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuDeviceCanAccessPeer");
    if (can_access == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: descriptor %d holds memory of device %d,"
                          " which device %d cannot reach (no peer access"
                          " between them). Fix: import it into a curd_device"
                          " of device %d.",
                          what, fd, owner, device->ordinal, owner);
    return CURD_OK;
}

curd_status curdi_vmm_import(curd_device *device, const char *what, int fd,
                             uint64_t byte_len, curdi_vmm_mapping *out)
{
    curdi_vmm_mapping mapping = {0};
    int owner = -1;
    curd_status status = supported(device, what);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_mem_handle handle = 0;
    curdi_cu_result rc = curdi_driver_note(driver->cuMemImportFromShareableHandle(
        &handle, (void *)(intptr_t)fd,
        CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    /* The driver's answers for a descriptor that is no CUDA allocation's
     * (a pipe, a file, another driver's): a caller's mistake. */
    if (rc == CURDI_CUDA_ERROR_INVALID_VALUE
        || rc == CURDI_CUDA_ERROR_INVALID_HANDLE
        || rc == CURDI_CUDA_ERROR_OPERATING_SYSTEM
        || rc == CURDI_CUDA_ERROR_NOT_SUPPORTED)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: descriptor %d is not a CUDA shareable handle"
                          " (cuMemImportFromShareableHandle returned %s)."
                          " Fix: pass the descriptor curd_buffer_export_fd"
                          " gave the exporting process, as curd_fd_recv"
                          " received it.",
                          what, fd, curdi_driver_result_name(rc));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemImportFromShareableHandle");
    status = allocation_device(device, handle, &owner);
    if (status == CURD_OK)
        status = reachable(device, what, fd, owner);
    if (status == CURD_OK)
        status = granularity_log2(device, what, owner,
                                  &mapping.granularity_log2);
    if (status == CURD_OK
        && (!curdi_vmm_round_up(byte_len, mapping.granularity_log2,
                                &mapping.mapped_len)
            || mapping.mapped_len > SIZE_MAX))
        status = curdi_fail(CURD_E_RANGE,
                            "%s: byte_len %" PRIu64 " rounded up to the"
                            " granularity passes 2^64 - 1, more than any"
                            " allocation holds. Fix: pass the byte_len the"
                            " exporter sent (curd_fd_recv).",
                            what, byte_len);
    bool map_refused = false;
    if (status == CURD_OK)
        status = map_handle(device, handle, &mapping, &map_refused);
    if (map_refused)
        status = curdi_fail(CURD_E_RANGE,
                            "%s: descriptor %d names an allocation smaller"
                            " than the %" PRIu64 " bytes claimed (%" PRIu64
                            " once rounded up to the %" PRIu64 "-byte"
                            " granularity). Fix: pass the byte_len the"
                            " exporter sent with the descriptor"
                            " (curd_fd_recv).",
                            what, fd, byte_len, mapping.mapped_len,
                            (uint64_t)1 << mapping.granularity_log2);
    release_handle(handle);
    if (status == CURD_OK)
        *out = mapping;
    return status;
}

curd_status curdi_vmm_export(curd_device *device, const char *what,
                             uint64_t device_ptr, int *out_fd)
{
    curd_status status = supported(device, what);
    if (status != CURD_OK)
        return status;
    const curdi_driver *driver = curdi_driver_get();
    curdi_cu_mem_handle handle = 0;
    curdi_cu_result rc = curdi_driver_note(driver->cuMemRetainAllocationHandle(
        &handle, (void *)(uintptr_t)device_ptr));
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemRetainAllocationHandle");
    int fd = -1;
    rc = curdi_driver_note(driver->cuMemExportToShareableHandle(
        &fd, handle, CURDI_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    release_handle(handle);
    if (rc != CURDI_CUDA_SUCCESS)
        return driver_failed(device, rc, "cuMemExportToShareableHandle");
    /* A descriptor of curd's making must not leak into a program the
     * caller executes: close-on-exec, as every descriptor should be. */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    *out_fd = fd;
    return CURD_OK;
}
