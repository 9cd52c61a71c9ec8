/* checked.c - checked arithmetic for sizes, ranges and counters (pure).
 *
 * Everything a transfer or a pool computes from caller-supplied numbers goes
 * through one of these helpers, so an overflow is a typed error at the one
 * place that can name it, never a wrapped value handed to the driver. */
#include "base/checked.h"

#include <inttypes.h>
#include <limits.h>

#include "base/status.h"

/* ------------------------------------------------------------------------
 * Ranges and device pointers
 * ---------------------------------------------------------------------- */

curd_status curdi_checked_range(uint64_t offset, uint64_t byte_len,
                                uint64_t buffer_len, const char *what)
{
    uint64_t end;
    if (what == NULL)
        what = "byte range";
    if (!curdi_u64_add(offset, byte_len, &end))
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s at offset %" PRIu64 " with length %" PRIu64
                          " ends past 2^64-1 bytes, in a buffer of %" PRIu64
                          " bytes. Fix: pass an offset and a length whose sum"
                          " is at most the buffer's size.",
                          what, offset, byte_len, buffer_len);
    if (end > buffer_len)
        return curdi_fail(CURD_E_RANGE,
                          "%s [%" PRIu64 ", %" PRIu64 ") (offset %" PRIu64
                          ", length %" PRIu64 ") ends %" PRIu64
                          " bytes past the end of a buffer of %" PRIu64
                          " bytes. Fix: keep offset + length within the"
                          " buffer's size, or allocate a larger buffer.",
                          what, offset, end, offset, byte_len,
                          end - buffer_len, buffer_len);
    return CURD_OK;
}

curd_status curdi_checked_host_range(const void *host, size_t byte_len,
                                     const char *what, const char *name)
{
    if (!curdi_checked_host_range_bad(host, byte_len))
        return CURD_OK;
    if (host == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s is NULL for %zu bytes; nothing was done."
                          " Fix: pass caller memory of at least that many"
                          " bytes.",
                          what, name, byte_len);
    return curdi_fail(CURD_E_OVERFLOW,
                      "%s: %s %p plus %zu bytes passes the end of the"
                      " address space; nothing was done. Fix: pass a valid"
                      " host range.",
                      what, name, host, byte_len);
}

curd_status curdi_checked_device_ptr_offset(uint64_t base, uint64_t offset,
                                            uint64_t *out)
{
    uint64_t address;
    if (!curdi_u64_add(base, offset, &address))
        return curdi_fail(CURD_E_OVERFLOW,
                          "device pointer 0x%" PRIx64 " plus offset %" PRIu64
                          " passes 2^64-1. Fix: range-check the offset"
                          " against the buffer's size before forming the"
                          " pointer.",
                          base, offset);
    *out = address;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Size classes
 *
 * The table, with W = the width of size_t in bits (64 on every platform
 * curd ships on; the formulas hold for 32 as well):
 *
 *   index         class bytes                            serves requests
 *   0 .. 7        256 * (i + 1): 256, 512, ..., 2048     1 .. 2048
 *   8 + 8g + j-1  (8 + j) * 2^(8 + g), j = 1 .. 8        (2^(11+g), 2^(12+g)]
 *                 g = 0: 2304, 2560, ..., 4096 (step 256)
 *                 g = 1: 4608, 5120, ..., 8192 (step 512)
 *                 ... eight geometric steps per power of two ...
 *   last          15 * 2^(W-4)                           the top of its group
 *
 * The last group, g = W - 12, stops at j = 7 because j = 8 would be 2^W.
 * So there are 8 + 8 * (W - 11) - 1 classes: 431 for W = 64 (the last is
 * 0xF000000000000000 bytes), 175 for W = 32. A request larger than the last
 * class is CURD_E_OVERFLOW; 0 is CURD_E_INVALID_ARGUMENT.
 *
 * Every class is a multiple of 256, so blocks carved at class boundaries
 * stay 256-byte aligned.
 *
 * Worst-case waste (class bytes - request):
 *  - requests of 1 .. 2048 bytes waste at most 255 bytes (1 -> 256);
 *  - a request r > 2048 in group g lands in a class at most one step
 *    (2^(8+g)) above the class below it, and r is more than that lower
 *    class, which is at least 8 steps; so waste <= step - 1 < r / 8, and
 *    waste < class / 9. The ratio creeps towards 1/8 as the step grows:
 *    255 / 2049 = 12.45% at 2049 -> 2304, (2^27 - 1) / (2^30 + 1) just
 *    under 12.5% at 1 GiB + 1, and (2^60 - 1) / (2^63 + 1) at the top, but
 *    it never reaches 12.5% of the request (11.1% of the class). So a
 *    1.1 GiB request holds 1.125 GiB, not 2 GiB.
 * tests/test-checked.c checks these bounds at every class boundary +-1 and
 * at random sizes; fuzz/fuzz-size-class.c checks them against a table built
 * independently.
 * ---------------------------------------------------------------------- */

#define CURDI_CLASS_MIN_SHIFT 8u   /* 256-byte minimum and linear step */
#define CURDI_CLASS_LINEAR_COUNT 8u /* 256 .. 2048 */
#define CURDI_CLASS_GEOMETRIC_SHIFT 11u /* first power of two: 2048 */
#define CURDI_CLASS_STEPS_SHIFT 3u  /* 2^3 = 8 steps per power of two */
#define CURDI_SIZE_BITS ((unsigned)(sizeof(size_t) * CHAR_BIT))

unsigned curdi_checked_size_class_count(void)
{
    return CURDI_CLASS_LINEAR_COUNT
           + (CURDI_SIZE_BITS - CURDI_CLASS_GEOMETRIC_SHIFT)
                 * (1u << CURDI_CLASS_STEPS_SHIFT)
           - 1u;
}

size_t curdi_checked_size_class_bytes(unsigned class_index)
{
    if (class_index >= curdi_checked_size_class_count())
        return 0;
    if (class_index < CURDI_CLASS_LINEAR_COUNT)
        return (size_t)(class_index + 1u) << CURDI_CLASS_MIN_SHIFT;
    unsigned geometric = class_index - CURDI_CLASS_LINEAR_COUNT;
    unsigned group = geometric >> CURDI_CLASS_STEPS_SHIFT;
    unsigned step = (geometric & ((1u << CURDI_CLASS_STEPS_SHIFT) - 1u)) + 1u;
    /* (8 + step) << (8 + group): below 2^W for every index under the count,
     * since the last one is 15 << (W - 4). */
    return (size_t)((1u << CURDI_CLASS_STEPS_SHIFT) + step)
           << (CURDI_CLASS_GEOMETRIC_SHIFT - CURDI_CLASS_STEPS_SHIFT + group);
}

/* floor(log2(value)) for value > 0. */
static unsigned floor_log2(size_t value)
{
    return (unsigned)(sizeof(unsigned long long) * CHAR_BIT) - 1u
           - (unsigned)__builtin_clzll((unsigned long long)value);
}

curd_status curdi_checked_size_class(size_t byte_len, size_t *out_class_bytes,
                                     unsigned *out_class_index)
{
    unsigned index;
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "a size class was asked for 0 bytes. Fix: request"
                          " at least one byte.");
    if (byte_len <= ((size_t)CURDI_CLASS_LINEAR_COUNT << CURDI_CLASS_MIN_SHIFT)) {
        index = (unsigned)((byte_len - 1u) >> CURDI_CLASS_MIN_SHIFT);
    } else {
        /* last = byte_len - 1 lies in [2^k, 2^(k+1)) with k >= 11; the class
         * is the first multiple of 2^(k-3) above it. */
        size_t last = byte_len - 1u;
        unsigned k = floor_log2(last);
        unsigned step_shift = k - CURDI_CLASS_STEPS_SHIFT;
        unsigned step = (unsigned)((last - ((size_t)1 << k)) >> step_shift);
        index = CURDI_CLASS_LINEAR_COUNT
                + ((k - CURDI_CLASS_GEOMETRIC_SHIFT) << CURDI_CLASS_STEPS_SHIFT)
                + step;
    }
    if (index >= curdi_checked_size_class_count())
        return curdi_fail(CURD_E_OVERFLOW,
                          "a request of %zu bytes is larger than the largest"
                          " size class (%zu bytes); rounding it up would pass"
                          " SIZE_MAX. Fix: request at most %zu bytes.",
                          byte_len,
                          curdi_checked_size_class_bytes(
                              curdi_checked_size_class_count() - 1u),
                          curdi_checked_size_class_bytes(
                              curdi_checked_size_class_count() - 1u));
    *out_class_bytes = curdi_checked_size_class_bytes(index);
    if (out_class_index != NULL)
        *out_class_index = index;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * Budget
 * ---------------------------------------------------------------------- */

/* floor(value * 9 / 10) without the 9x overflow: value = 10q + r gives
 * 9q + floor(9r / 10). */
static uint64_t nine_tenths(uint64_t value)
{
    return value / 10u * 9u + value % 10u * 9u / 10u;
}

uint64_t curdi_checked_resident_budget(uint64_t total_bytes,
                                       uint64_t free_bytes,
                                       uint64_t resident_bytes,
                                       uint64_t limit_bytes)
{
    uint64_t budget = nine_tenths(total_bytes);
    uint64_t free_cap;
    /* A sum past 2^64-1 is larger than any total budget, which then wins. */
    if (curdi_u64_add(nine_tenths(free_bytes), resident_bytes, &free_cap)
        && free_cap < budget)
        budget = free_cap;
    if (limit_bytes != 0 && limit_bytes < budget)
        budget = limit_bytes;
    return budget;
}

/* ------------------------------------------------------------------------
 * Atomic counters. Each is a compare-and-swap loop, so concurrent callers
 * never lose an update and an add that would overflow changes nothing.
 * ---------------------------------------------------------------------- */

curd_status curdi_checked_counter_add(_Atomic uint64_t *counter,
                                      uint64_t amount)
{
    uint64_t old = atomic_load_explicit(counter, memory_order_relaxed);
    uint64_t sum;
    do {
        if (!curdi_u64_add(old, amount, &sum))
            return curdi_fail(CURD_E_OVERFLOW,
                              "a byte or event counter at %" PRIu64
                              " cannot count %" PRIu64
                              " more without passing 2^64-1. Fix: reset the"
                              " cumulative statistics with"
                              " curd_device_stats_reset().",
                              old, amount);
    } while (!atomic_compare_exchange_weak_explicit(
        counter, &old, sum, memory_order_acq_rel, memory_order_relaxed));
    return CURD_OK;
}

curd_status curdi_checked_counters_check(const curdi_counter_step *steps,
                                         size_t count, const char *what)
{
    for (size_t index = 0; index < count; index++) {
        uint64_t sum;
        uint64_t current;
        /* Adding nothing cannot pass the limit. */
        if (steps[index].amount == 0)
            continue;
        current = atomic_load(steps[index].counter);
        if (!curdi_u64_add(current, steps[index].amount, &sum))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the statistics counter %s (%" PRIu64
                              ") would pass 2^64-1 by %" PRIu64
                              "; nothing was moved. Fix: call"
                              " curd_device_stats_reset().",
                              what, steps[index].name, current,
                              steps[index].amount);
    }
    return CURD_OK;
}

unsigned curdi_checked_counters_add(const curdi_counter_step *steps,
                                    size_t count)
{
    unsigned missed = 0;
    for (size_t index = 0; index < count; index++)
        if (steps[index].amount != 0
            && curdi_checked_counter_add(steps[index].counter,
                                         steps[index].amount)
                   != CURD_OK)
            missed++;
    return missed;
}

/* Set by the first repair in the process, so the trace says it once. */
static atomic_flag curdi_repair_reported = ATOMIC_FLAG_INIT;

bool curdi_checked_stat_sub(_Atomic uint64_t *counter, uint64_t amount)
{
    uint64_t old = atomic_load_explicit(counter, memory_order_relaxed);
    uint64_t difference;
    bool exact;
    do {
        exact = curdi_u64_sub(old, amount, &difference);
        if (!exact)
            difference = 0;
    } while (!atomic_compare_exchange_weak_explicit(
        counter, &old, difference, memory_order_acq_rel,
        memory_order_relaxed));
    if (!exact && !atomic_flag_test_and_set(&curdi_repair_reported))
        curdi_trace("accounting repair: a statistics counter at %" PRIu64
                    " was asked to drop by %" PRIu64
                    "; set to 0 (reported once per process)",
                    old, amount);
    return exact;
}

void curdi_checked_peak_raise(_Atomic uint64_t *peak, uint64_t value)
{
    uint64_t old = atomic_load_explicit(peak, memory_order_relaxed);
    while (old < value
           && !atomic_compare_exchange_weak_explicit(
               peak, &old, value, memory_order_acq_rel, memory_order_relaxed)) {
    }
}
