/* fuzz-budget.c - resident budget arithmetic and the atomic counters
 * against 128-bit models.
 *
 * Input: a budget question (total, free, resident, limit), then a sequence
 * of counter operations, each an opcode byte and a shaped amount:
 * counter_add (which must fail with CURD_E_OVERFLOW and change nothing
 * exactly when the sum passes 2^64-1), stat_sub (which must clamp at zero
 * and say so) and peak_raise (which must only raise). After every step the
 * three counters equal the model's.
 *
 * fuzz-srcs: lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "base/checked.h"

static uint64_t budget_reference(uint64_t total, uint64_t free_bytes,
                                 uint64_t resident, uint64_t limit)
{
    fuzz_u128 by_total = (fuzz_u128)total * 9 / 10;
    fuzz_u128 by_free = (fuzz_u128)free_bytes * 9 / 10 + resident;
    fuzz_u128 budget = by_total < by_free ? by_total : by_free;
    if (limit != 0 && limit < budget)
        budget = limit;
    return (uint64_t)budget;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    uint64_t total = fuzz_shaped_u64(&in);
    uint64_t free_bytes = fuzz_shaped_u64(&in);
    uint64_t resident = fuzz_shaped_u64(&in);
    uint64_t limit = fuzz_shaped_u64(&in);
    uint64_t budget =
        curdi_checked_resident_budget(total, free_bytes, resident, limit);
    FUZZ_CHECK(budget == budget_reference(total, free_bytes, resident, limit));
    /* A limit only ever lowers the budget. */
    uint64_t open =
        curdi_checked_resident_budget(total, free_bytes, resident, 0);
    FUZZ_CHECK(budget <= open);
    FUZZ_CHECK(budget == ((limit != 0 && limit < open) ? limit : open));

    _Atomic uint64_t counter = fuzz_shaped_u64(&in);
    _Atomic uint64_t level = fuzz_shaped_u64(&in);
    _Atomic uint64_t peak = 0;
    fuzz_u128 model_counter = atomic_load(&counter);
    fuzz_u128 model_level = atomic_load(&level);
    fuzz_u128 model_peak = 0;
    while (fuzz_more(&in)) {
        uint8_t op = fuzz_u8(&in);
        uint64_t amount = fuzz_shaped_u64(&in);
        switch (op % 3) {
        case 0: {
            curd_status status = curdi_checked_counter_add(&counter, amount);
            if (model_counter + amount > UINT64_MAX) {
                FUZZ_CHECK(status == CURD_E_OVERFLOW);
                fuzz_check_fix_sentence();
            } else {
                FUZZ_CHECK(status == CURD_OK);
                model_counter += amount;
            }
            break;
        }
        case 1: {
            bool exact = curdi_checked_stat_sub(&level, amount);
            FUZZ_CHECK(exact == (amount <= model_level));
            model_level = amount <= model_level ? model_level - amount : 0;
            break;
        }
        default:
            curdi_checked_peak_raise(&peak, amount);
            if (amount > model_peak)
                model_peak = amount;
            break;
        }
        FUZZ_CHECK(atomic_load(&counter) == (uint64_t)model_counter);
        FUZZ_CHECK(atomic_load(&level) == (uint64_t)model_level);
        FUZZ_CHECK(atomic_load(&peak) == (uint64_t)model_peak);
    }
    return 0;
}
