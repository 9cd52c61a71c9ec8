/* fuzz-size-class.c - size-class rounding against a table built
 * independently.
 *
 * The reference table is built once by walking up: 256 to 2048 in steps of
 * 256, then for each power of two p from 2048 eight steps of p/8, in
 * 128-bit arithmetic, up to the last class that fits in size_t. For each
 * shaped request the harness checks: the class is the smallest table entry
 * at or above the request (so class >= request, and rounding is monotonic
 * and idempotent), its index matches, the waste is under 256 bytes up to
 * 2 KiB and under 1/8 of the request above, and a request past the last
 * class is CURD_E_OVERFLOW (0: CURD_E_INVALID_ARGUMENT) with the outputs
 * untouched.
 *
 * fuzz-srcs: lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "base/checked.h"

#define MAX_CLASSES 1024

static size_t classes[MAX_CLASSES];
static unsigned class_count;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t c = 256; c <= 2048; c += 256)
        classes[class_count++] = c;
    for (fuzz_u128 power = 2048;; power *= 2) {
        fuzz_u128 c = power;
        for (int step = 1; step <= 8; step++) {
            c += power / 8;
            if (c > SIZE_MAX)
                return 0;
            classes[class_count++] = (size_t)c;
        }
    }
}

/* Smallest index whose class is >= byte_len; class_count if none. */
static unsigned reference_index(size_t byte_len)
{
    unsigned low = 0;
    unsigned high = class_count;
    while (low < high) {
        unsigned middle = low + (high - low) / 2;
        if (classes[middle] < byte_len)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* Rounds byte_len, checks it, returns the class (0 on an expected error). */
static size_t check_request(size_t byte_len)
{
    size_t class_bytes = 77;
    unsigned index = 77;
    curd_status status =
        curdi_checked_size_class(byte_len, &class_bytes, &index);
    if (byte_len == 0) {
        FUZZ_CHECK(status == CURD_E_INVALID_ARGUMENT);
        FUZZ_CHECK(class_bytes == 77 && index == 77);
        fuzz_check_fix_sentence();
        return 0;
    }
    unsigned expected = reference_index(byte_len);
    if (expected == class_count) {
        FUZZ_CHECK(status == CURD_E_OVERFLOW);
        FUZZ_CHECK(class_bytes == 77 && index == 77);
        fuzz_check_fix_sentence();
        return 0;
    }
    FUZZ_CHECK(status == CURD_OK);
    FUZZ_CHECK(index == expected);
    FUZZ_CHECK(class_bytes == classes[expected]);
    FUZZ_CHECK(class_bytes >= byte_len);
    if (byte_len <= 2048)
        FUZZ_CHECK(class_bytes - byte_len < 256);
    else
        FUZZ_CHECK((fuzz_u128)(class_bytes - byte_len) * 8 < byte_len);
    FUZZ_CHECK(curdi_checked_size_class_bytes(index) == class_bytes);
    /* Without the index output, the same class. */
    size_t again = 0;
    FUZZ_CHECK(curdi_checked_size_class(byte_len, &again, NULL) == CURD_OK);
    FUZZ_CHECK(again == class_bytes);
    /* A class rounds to itself. */
    FUZZ_CHECK(curdi_checked_size_class(class_bytes, &again, &index)
               == CURD_OK);
    FUZZ_CHECK(again == class_bytes && index == expected);
    return class_bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    FUZZ_CHECK(curdi_checked_size_class_count() == class_count);
    while (fuzz_more(&in)) {
        size_t a = (size_t)fuzz_shaped_u64(&in);
        size_t b = (size_t)fuzz_shaped_u64(&in);
        uint32_t index = (uint32_t)fuzz_u64(&in);
        size_t class_a = check_request(a);
        size_t class_b = check_request(b);
        /* Monotonic: a <= b gives class(a) <= class(b) when both fit. */
        if (class_a != 0 && class_b != 0)
            FUZZ_CHECK((a <= b) ? class_a <= class_b : class_a >= class_b);
        /* A neighbour of a class boundary. */
        if (class_a != 0) {
            check_request(class_a - 1);
            check_request(class_a + 1);
        }
        FUZZ_CHECK(curdi_checked_size_class_bytes(index)
                   == (index < class_count ? classes[index] : 0));
    }
    return 0;
}
