/* fuzz-checked-arith.c - checked add/sub/mul for size_t and uint64_t
 * against exact 128-bit arithmetic.
 *
 * Input: pairs of shaped 64-bit numbers (see fuzz.h). For each pair all six
 * helpers run; each must succeed exactly when the true result fits, write
 * the true result then, and leave the output untouched otherwise.
 *
 * fuzz-srcs: lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "base/checked.h"

#define SENTINEL UINT64_C(0xa5a55a5aa5a55a5a)

typedef enum { OP_ADD, OP_SUB, OP_MUL } arith_op;

/* The exact result, and whether it lies in [0, max]. */
static bool reference(arith_op op, fuzz_u128 a, fuzz_u128 b, fuzz_u128 max,
                      fuzz_u128 *out)
{
    switch (op) {
    case OP_ADD:
        *out = a + b;
        return *out <= max;
    case OP_SUB:
        if (a < b)
            return false;
        *out = a - b;
        return true;
    default:
        *out = a * b; /* two factors below 2^64 fit in 128 bits */
        return *out <= max;
    }
}

static void check_size(arith_op op, size_t a, size_t b)
{
    static bool (*const helpers[])(size_t, size_t, size_t *) = {
        curdi_size_add, curdi_size_sub, curdi_size_mul
    };
    fuzz_u128 expected = 0;
    bool fits = reference(op, a, b, SIZE_MAX, &expected);
    size_t out = (size_t)SENTINEL;
    bool ok = helpers[op](a, b, &out);
    FUZZ_CHECK(ok == fits);
    FUZZ_CHECK(out == (fits ? (size_t)expected : (size_t)SENTINEL));
}

static void check_u64(arith_op op, uint64_t a, uint64_t b)
{
    static bool (*const helpers[])(uint64_t, uint64_t, uint64_t *) = {
        curdi_u64_add, curdi_u64_sub, curdi_u64_mul
    };
    fuzz_u128 expected = 0;
    bool fits = reference(op, a, b, UINT64_MAX, &expected);
    uint64_t out = SENTINEL;
    bool ok = helpers[op](a, b, &out);
    FUZZ_CHECK(ok == fits);
    FUZZ_CHECK(out == (fits ? (uint64_t)expected : SENTINEL));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    while (fuzz_more(&in)) {
        uint64_t a = fuzz_shaped_u64(&in);
        uint64_t b = fuzz_shaped_u64(&in);
        for (int op = OP_ADD; op <= OP_MUL; op++) {
            check_size((arith_op)op, (size_t)a, (size_t)b);
            check_u64((arith_op)op, a, b);
        }
    }
    return 0;
}
