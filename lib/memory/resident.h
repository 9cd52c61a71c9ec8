/* resident.h - resident buffers: budgets, in-flight marks, the entries.
 *
 * The device's resident module (struct curdi_resident_table behind
 * curd_device.resident) keeps the pure handle table (memory/handle_table.h)
 * under a short mutex, with the budget, the statistics, and the in-flight
 * marks that transfer.c takes around each use of a buffer's device memory.
 * Device memory comes from the device pool (dev->device_pool).
 *
 * The id layout and the table's rules are in memory/handle_table.h. */
#ifndef CURD_LIB_MEMORY_RESIDENT_H
#define CURD_LIB_MEMORY_RESIDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "memory/handle_table.h"

/* ------------------------------------------------------------------------
 * The device's resident module.
 * ---------------------------------------------------------------------- */
struct curd_device;

/* Creates dev->resident; no driver call. */
curd_status curdi_resident_open(struct curd_device *device);
/* Frees every buffer back to the device pool, whatever its marks, and the
 * table. Call before the pools are destroyed and after transfer.c has
 * drained its streams (curdi_transfer_close). NULL-safe. */
void curdi_resident_close(struct curd_device *device);
/* Bytes of the live buffers (their requested sizes). */
uint64_t curdi_resident_bytes(struct curd_device *device);
void curdi_resident_stats(struct curd_device *device,
                          curd_stat_family *bytes, curd_stat_family *buffers);
/* For curd_device_stats_reset: allocated and freed to 0, peak to current. */
void curdi_resident_stats_reset(struct curd_device *device);

/* The steps of curd_buffer_alloc and curd_buffer_free that make no driver
 * call (so tests drive them on the CPU with a host-side device struct):
 *
 * reserve: checks byte_len against the budget computed from total_bytes,
 * free_bytes (live free plus the pool's cache), what is resident or being
 * allocated, and options.resident_limit_bytes; CURD_E_BUDGET with the
 * numbers over it. On CURD_OK the bytes and a table slot are set aside
 * until commit or unreserve. */
curd_status curdi_resident_reserve(struct curd_device *device,
                                   const char *what, size_t byte_len,
                                   uint64_t total_bytes, uint64_t free_bytes);
void curdi_resident_unreserve(struct curd_device *device, size_t byte_len);
/* Spends a reservation on a live buffer at device_ptr; returns its id.
 * Cannot fail: reserve grew the table for this slot and checked the
 * counters, so a block acquired after a successful reserve always gets a
 * handle. */
uint64_t curdi_resident_commit(struct curd_device *device, size_t byte_len,
                               uint64_t device_ptr);
/* commit for memory memory/vmm.c mapped in granules of 2^mapping_log2
 * bytes (curd_buffer_alloc_shareable): counted like any resident buffer,
 * at byte_len; curd_buffer_free unmaps it. Cannot fail. */
uint64_t curdi_resident_commit_mapped(struct curd_device *device,
                                      size_t byte_len, uint64_t device_ptr,
                                      uint8_t mapping_log2);
/* reserve, with the device's live free and total memory read from the
 * driver (cuMemGetInfo, plus the pool's cache): for a caller that makes
 * the memory itself (curd_buffer_alloc_shareable). Device entered. */
curd_status curdi_resident_reserve_live(struct curd_device *device,
                                        const char *what, size_t byte_len);
/* Whether id names a live mapped buffer (commit_mapped's, or an import
 * with mapping_log2 != 0). No sentence. */
bool curdi_resident_mapped(struct curd_device *device, uint64_t id);
/* Whether id names a live imported buffer (curd_buffer_import, or
 * curd_buffer_import_fd). No sentence. */
bool curdi_resident_imported(struct curd_device *device, uint64_t id);
/* A shareable buffer's exports (lib/memory/shareable.c), while the caller
 * holds a use of the live buffer id. export_dup: a dup of the descriptor
 * kept from the driver's first export into *out_fd, or -1 when none is
 * kept yet. export_keep: keeps fd, that export (or closes it when another
 * thread's was kept first), and gives a dup of the kept one. The kept
 * descriptor closes when the buffer is freed. CURD_E_OUT_OF_MEMORY, with
 * no descriptor given, when none is left to dup into. No driver call. */
curd_status curdi_resident_export_dup(struct curd_device *device,
                                      const char *what, uint64_t id,
                                      int *out_fd);
curd_status curdi_resident_export_keep(struct curd_device *device,
                                       const char *what, uint64_t id, int fd,
                                       int *out_fd);
/* Removes a live, unmarked buffer and gives its device pointer back for the
 * caller to release to the pool. CURD_E_STALE_HANDLE, or CURD_E_BUSY while
 * uses are in flight, or CURD_E_INVALID_ARGUMENT for an imported or a
 * mapped buffer (no block of curd's to give back); nothing changes on any. `what` names
 * the call in the sentences. */
curd_status curdi_resident_take(struct curd_device *device, const char *what,
                                uint64_t id, uint64_t *out_device_ptr);

/* A live buffer over device memory curd did not allocate
 * (curd_buffer_import, lib/memory/import.c, which checked the range with
 * the driver): in no budget and no resident statistic, counted in the
 * imported bytes alone; freeing it forgets it, or, with mapping_log2
 * != 0 (curd_buffer_import_fd: memory/vmm.c mapped it in granules of
 * 2^mapping_log2 bytes), unmaps it. CURD_E_BUDGET or
 * CURD_E_OUT_OF_MEMORY when the table cannot grow; nothing changes then.
 * No driver call. */
curd_status curdi_resident_import(struct curd_device *device,
                                  const char *what, uint64_t device_ptr,
                                  size_t byte_len, uint8_t mapping_log2,
                                  uint64_t *out_id);
/* The bytes of the live imported buffers. */
uint64_t curdi_resident_imported_bytes(struct curd_device *device);

/* For the modules above that own buffers of their own (sessions). `what`
 * names the public call in every sentence.
 *
 * alloc: curd_buffer_alloc once its arguments are checked (enters the
 * device; the budget, the pool, the handle). free: take, then the block
 * back to the device pool (whose upstream free enters the device itself);
 * no driver call unless the pool frees upstream. */
curd_status curdi_resident_alloc(struct curd_device *device, const char *what,
                                 size_t byte_len, uint64_t *out_id);
curd_status curdi_resident_free(struct curd_device *device, const char *what,
                                uint64_t id);
/* Marks the live buffer id as the calling module's own (a static set's):
 * curd_buffer_free refuses it from then on with CURD_E_BUSY, the sentence
 * ending in owner_fix (a static string: "Fix: ..."), while
 * curdi_resident_free and _take, the module's own calls, still free it. No
 * driver call. */
void curdi_resident_own(struct curd_device *device, uint64_t id,
                        const char *owner_fix);

/* Gives a live, unmarked buffer a new handle for the same memory: id and
 * every copy of it are stale from then on, as after a free, while the
 * bytes, the budget and the statistics stay as they were. A session takes
 * a released buffer back this way, so the caller's handle cannot reach it
 * while it waits idle. CURD_E_STALE_HANDLE or CURD_E_BUSY as take, or
 * CURD_E_OUT_OF_MEMORY when the table cannot grow by the slot a retired
 * one needs; nothing changes on any. No driver call. */
curd_status curdi_resident_retag(struct curd_device *device, const char *what,
                                 uint64_t id, uint64_t *out_id);

typedef enum curdi_resident_state {
    CURDI_RESIDENT_STALE = 0,  /* freed, forged, another device's */
    CURDI_RESIDENT_UNUSED = 1, /* live, nothing in flight */
    CURDI_RESIDENT_IN_USE = 2  /* live, transfers, uploads or dispatches
                                  in flight: cannot be freed now */
} curdi_resident_state;

/* What id names now, without a sentence (the caller words its own). */
curdi_resident_state curdi_resident_probe(struct curd_device *device,
                                          uint64_t id);

/* The size of the live buffer id into *out_byte_len; false, setting no
 * error sentence, when id names none. For callers that word their own
 * error (lib/transfer/transfer.c's whole-buffer lengths). */
bool curdi_resident_length(struct curd_device *device, uint64_t id,
                           size_t *out_byte_len);

/* One resolved use of a buffer: what transfer.c needs to move bytes. */
typedef struct curdi_resident_use {
    uint64_t id;
    uint64_t device_ptr;
    size_t byte_len;
    /* The buffer had asynchronous uploads pending when the use began: work
     * on it must be ordered after dev->upload_stream. */
    bool async_pending;
} curdi_resident_use;

/* Resolves count buffer ids and marks each in use (all of them, or, on a
 * stale one, none: CURD_E_STALE_HANDLE naming "<what> item <i>"). A buffer
 * named twice is marked twice. Every use must be ended with
 * curdi_resident_use_end (or turned asynchronous). `what` names the call
 * in messages. */
curd_status curdi_resident_use_begin(struct curd_device *device,
                                     const char *what, const uint64_t *ids,
                                     size_t count, curdi_resident_use *out);
void curdi_resident_use_end(struct curd_device *device,
                            const curdi_resident_use *uses, size_t count);
/* Turns a use into an asynchronous one: it stays marked (the buffer cannot
 * be freed) until curdi_resident_async_end. */
void curdi_resident_async_begin(struct curd_device *device, uint64_t id);
void curdi_resident_async_end(struct curd_device *device, uint64_t id);

#endif
