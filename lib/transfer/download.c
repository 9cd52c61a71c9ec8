/* download.c - curd_buffer_download_async (see download.h). */
#include "transfer/download.h"

#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "core/pending.h"
#include "driver/driver.h"
#include "memory/import.h"
#include "memory/resident.h"
#include "transfer/host_register.h"
#include "transfer/transfer.h"
#include "transfer/upload_marks.h"

/* A download's curd_pending (lib/core/pending.h) and what it holds. */
typedef struct download_run {
    curd_pending base;
    curdi_resident_use use;   /* the buffer, marked in use */
    bool marked;
    uintptr_t range_key;      /* the destination's registration, or 0 */
    curdi_transfer_counts counts;
} download_run;

/* The copy completed: it is counted (the bytes are in place already). */
static void download_complete(curd_pending *pending, bool copy_out)
{
    (void)copy_out;
    download_run *run = (download_run *)(void *)pending;
    curdi_transfer_counts_add(pending->device, &run->counts);
}

static void download_release(curd_pending *pending)
{
    download_run *run = (download_run *)(void *)pending;
    curdi_host_register_unuse(pending->device, run->range_key);
    if (run->marked)
        curdi_resident_use_end(pending->device, &run->use, 1);
    free(run);
}

static const curdi_pending_ops download_ops = {.complete = download_complete,
                                               .release = download_release};

/* Everything checked, the buffer marked, the copy enqueued between the
 * pending's events. Context current; on a failure the caller drains and
 * releases. */
static curd_status download_start(download_run *run, size_t offset,
                                  void *pinned_dst, size_t byte_len,
                                  const char *what)
{
    curd_device *device = run->base.device;
    curd_status status =
        curdi_checked_range(offset, byte_len, run->use.byte_len, what);
    if (status == CURD_OK)
        status = curdi_import_pinned_range_check(device, pinned_dst, byte_len,
                                                 what);
    if (status == CURD_OK)
        status = curdi_transfer_counts_check(device, &run->counts, what);
    if (status == CURD_OK)
        status = curdi_upload_marks_wait_for(device, &run->use, 1);
    if (status != CURD_OK)
        return status;
    /* A registration of curd's stays registered until the copy is done. */
    run->range_key = curdi_host_register_use(device, pinned_dst, byte_len);
    status = curdi_pending_acquire(&run->base);
    if (status == CURD_OK)
        status = curdi_pending_begin(&run->base);
    if (status != CURD_OK)
        return status;
    /* offset + byte_len <= the buffer's size: checked above. */
    curdi_cu_result rc =
        curdi_driver_note(curdi_driver_get()->cuMemcpyDtoHAsync(
            pinned_dst, (curdi_cu_deviceptr)(run->use.device_ptr + offset),
            byte_len, run->base.stream));
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_pending_fail_driver(device, rc, "cuMemcpyDtoHAsync");
    return curdi_pending_end(&run->base);
}

CURD_API curd_status curd_buffer_download_async(curd_device *device,
                                                curd_buffer buffer,
                                                size_t offset,
                                                void *pinned_dst,
                                                size_t byte_len,
                                                curd_pending **out_pending)
{
    CURDI_RANGE("curd_buffer_download_async");
    const char *what = "curd_buffer_download_async";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    status = curdi_pending_check_out(out_pending, what);
    if (status != CURD_OK)
        return status;
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: byte_len is 0, so nothing would move. Fix:"
                          " download at least one byte.",
                          what);
    status =
        curdi_checked_host_range(pinned_dst, byte_len, what, "pinned_dst");
    if (status != CURD_OK)
        return status;
    download_run *run = calloc(1, sizeof *run);
    if (run == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: %zu bytes for the download's state could not"
                          " be allocated. Fix: free host memory.",
                          what, sizeof *run);
    curdi_pending_init(&run->base, device, &download_ops);
    run->counts = (curdi_transfer_counts){
        .d2h_bytes = byte_len, .copy_ops = 1, .fences = 1};
    CURDI_TRY(status,
              curdi_resident_use_begin(device, what, &buffer.id, 1, &run->use),
              release);
    run->marked = true;
    /* The caller receives the pending: its slot in the registry of live
     * pendings is taken before anything is enqueued. */
    CURDI_TRY(status, curdi_pending_take_slot(&run->base, what), release);
    CURDI_TRY(status, curdi_core_device_enter(device), release);
    CURDI_TRY(status, download_start(run, offset, pinned_dst, byte_len, what),
              drain);
    curdi_core_device_leave(device);
    curdi_pending_publish(&run->base);
    *out_pending = &run->base;
    return CURD_OK;
drain:
    curdi_pending_drain(&run->base);
    curdi_core_device_leave(device);
release:
    curdi_pending_release(&run->base);
    return status;
}
