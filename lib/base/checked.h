/* checked.h - checked arithmetic for sizes, ranges and counters (pure).
 *
 * Nothing here touches the driver or allocates. The bool helpers return
 * false on overflow and leave *out unchanged; the curd_status helpers also
 * set the thread's error sentence via curdi_fail(). */
#ifndef CURD_LIB_BASE_CHECKED_H
#define CURD_LIB_BASE_CHECKED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

/* Plain arithmetic: curdi_size_add, _sub, _mul and curdi_u64_add, _sub,
 * _mul. The compiler builtins compute the exact result and say whether it
 * fits; *out is written only when it does. Inline, since the transfer
 * planner runs them for every item of a batch. */
#define CURDI_CHECKED_OP_(name, type, builtin)                                \
    static inline bool name(type a, type b, type *out)                        \
    {                                                                         \
        type result;                                                          \
        if (builtin(a, b, &result))                                           \
            return false;                                                     \
        *out = result;                                                        \
        return true;                                                          \
    }
CURDI_CHECKED_OP_(curdi_size_add, size_t, __builtin_add_overflow)
CURDI_CHECKED_OP_(curdi_size_sub, size_t, __builtin_sub_overflow)
CURDI_CHECKED_OP_(curdi_size_mul, size_t, __builtin_mul_overflow)
CURDI_CHECKED_OP_(curdi_u64_add, uint64_t, __builtin_add_overflow)
CURDI_CHECKED_OP_(curdi_u64_sub, uint64_t, __builtin_sub_overflow)
CURDI_CHECKED_OP_(curdi_u64_mul, uint64_t, __builtin_mul_overflow)
#undef CURDI_CHECKED_OP_

/* [offset, offset + byte_len) must lie within a buffer of buffer_len bytes.
 * CURD_E_OVERFLOW when offset + byte_len overflows, CURD_E_RANGE when the
 * end passes buffer_len. `what` names the range in the message
 * ("download range", ...). A zero-length range at offset == buffer_len is
 * valid. */
curd_status curdi_checked_range(uint64_t offset, uint64_t byte_len,
                                uint64_t buffer_len, const char *what);

/* The one check of a host range the API takes (transfers, batch uploads
 * and downloads, dispatch arguments, registrations): CURD_E_INVALID_
 * ARGUMENT when host is NULL for byte_len > 0, CURD_E_OVERFLOW when
 * host + byte_len passes the end of the address space. `what` names the
 * call (or its item), `name` the range ("src", "argument 2's host
 * address"). */
curd_status curdi_checked_host_range(const void *host, size_t byte_len,
                                     const char *what, const char *name);
/* Whether curdi_checked_host_range would refuse the range: for hot paths
 * that format `name` only on the way to the error. */
static inline bool curdi_checked_host_range_bad(const void *host,
                                                size_t byte_len)
{
    uintptr_t end;
    return (byte_len != 0 && host == NULL)
           || __builtin_add_overflow((uintptr_t)host, byte_len, &end);
}

/* base + offset as a device pointer; CURD_E_OVERFLOW past 2^64. */
curd_status curdi_checked_device_ptr_offset(uint64_t base, uint64_t offset,
                                            uint64_t *out);

/* Size classes with bounded waste (see checked.c for the table and the
 * worst-case waste it guarantees): 256, 512, ..., 2048, then 8 steps per
 * power of two up to 0xF000000000000000 on 64-bit, so a request above
 * 2 KiB wastes under 1/8 of itself and one of at most 2 KiB under 256
 * bytes. Every class is a multiple of 256. CURD_E_INVALID_ARGUMENT for 0
 * bytes, CURD_E_OVERFLOW when rounding up would pass SIZE_MAX (a request
 * above the last class). out_class_index may be NULL. */
curd_status curdi_checked_size_class(size_t byte_len, size_t *out_class_bytes,
                                     unsigned *out_class_index);
/* Class bytes of a class index; 0 past the last class. */
size_t curdi_checked_size_class_bytes(unsigned class_index);
/* Number of size classes. */
unsigned curdi_checked_size_class_count(void);

/* The resident budget: min(total * 9/10, free * 9/10 + resident), then
 * min with limit when limit is non-zero. Never overflows (128-bit-safe). */
uint64_t curdi_checked_resident_budget(uint64_t total_bytes,
                                       uint64_t free_bytes,
                                       uint64_t resident_bytes,
                                       uint64_t limit_bytes);

/* Atomic counters that never saturate: add fails (CURD_E_OVERFLOW, counter
 * unchanged) if it would pass UINT64_MAX. */
curd_status curdi_checked_counter_add(_Atomic uint64_t *counter,
                                      uint64_t amount);
/* One counter of a module's statistics and what a call adds to it. */
typedef struct curdi_counter_step {
    _Atomic uint64_t *counter;
    uint64_t amount;
    const char *name; /* the curd_stats field, for the sentence */
} curdi_counter_step;

/* Checks, before the work, that every counter can take its amount:
 * CURD_E_OVERFLOW naming the field and `what` (the public call) when one
 * would pass 2^64 - 1, nothing done. */
curd_status curdi_checked_counters_check(const curdi_counter_step *steps,
                                         size_t count, const char *what);
/* Adds the amounts once the work succeeded. Returns how many could not be
 * added: checked before, only a concurrent caller between the check and
 * here can push one past 2^64 - 1, and the caller counts each as an
 * accounting repair. */
unsigned curdi_checked_counters_add(const curdi_counter_step *steps,
                                    size_t count);
/* Subtract from a statistics-only counter: an underflow sets it to zero,
 * returns false and the caller counts an accounting repair. The first
 * repair in the process is reported through curdi_trace (here, once). */
bool curdi_checked_stat_sub(_Atomic uint64_t *counter, uint64_t amount);
/* Raise *peak to at least value. */
void curdi_checked_peak_raise(_Atomic uint64_t *peak, uint64_t value);

#endif
