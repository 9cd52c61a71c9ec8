/* fake-live.h - the stand-in driver's (tests/fake/) counts of live
 * objects, read through its fake_cuda_live() (no GLib: the fuzzers read
 * them too). */
#ifndef CURD_TESTS_SUPPORT_FAKE_LIVE_H
#define CURD_TESTS_SUPPORT_FAKE_LIVE_H

#include <stdbool.h>
#include <stddef.h>

/* One count for each of kinds ("device_memory", "stream",
 * "device_memory_bytes", "context_stack", ...: fake_cuda_live in
 * tests/fake/fake-cuda.c) into counts. false, counting nothing, where
 * CURD_LIBCUDA names no loaded library exporting fake_cuda_live: no
 * driver call yet, or a real driver. */
bool fake_live_read(const char *const *kinds, size_t count, long *counts);

/* Sets the stand-in's held events (fake_cuda_hold_events): events
 * recorded while hold is set answer cuEventQuery with NOT_READY until
 * recorded again, the one way to show work of someone else's still
 * running, since the stand-in's streams run at once. false, doing
 * nothing, under a real driver or before any driver call. */
bool fake_hold_events(int hold);

/* The stand-in NCCL's live communicators (fake_nccl_live) into *count;
 * false when CURD_LIBNCCL names no loaded library. */
bool fake_live_nccl_comms(long *count);

/* The communicators the stand-in NCCL saw destroyed or aborted while
 * their join still ran (fake_nccl_abandoned_joins, with
 * FAKE_NCCL_JOIN_POLLS set) into *count: what real NCCL leaks. false when
 * CURD_LIBNCCL names no loaded library. */
bool fake_live_nccl_abandoned_joins(long *count);

/* The groups the stand-in NCCL saw posted on blocking (or non-blocking)
 * communicators (fake_nccl_groups) into *count; false when CURD_LIBNCCL
 * names no loaded library. */
bool fake_live_nccl_groups(bool blocking, long *count);

#endif
