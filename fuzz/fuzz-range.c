/* fuzz-range.c - byte-range validation and device pointer offsets against
 * 128-bit references.
 *
 * Input: triples (offset, length, buffer length) of shaped 64-bit numbers,
 * each followed by a device pointer base. curdi_checked_range must say
 * CURD_E_OVERFLOW exactly when offset + length passes 2^64-1, else
 * CURD_E_RANGE exactly when the end passes the buffer, else CURD_OK, and
 * every failure must leave a sentence ending with "Fix: ...".
 * curdi_checked_device_ptr_offset must give base + offset or CURD_E_OVERFLOW with
 * the output untouched.
 *
 * fuzz-srcs: lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "base/checked.h"

#define SENTINEL UINT64_C(0x5a5aa5a55a5aa5a5)

static curd_status range_reference(uint64_t offset, uint64_t byte_len,
                                   uint64_t buffer_len)
{
    fuzz_u128 end = (fuzz_u128)offset + byte_len;
    if (end > UINT64_MAX)
        return CURD_E_OVERFLOW;
    if (end > buffer_len)
        return CURD_E_RANGE;
    return CURD_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    while (fuzz_more(&in)) {
        uint64_t offset = fuzz_shaped_u64(&in);
        uint64_t byte_len = fuzz_shaped_u64(&in);
        uint64_t buffer_len = fuzz_shaped_u64(&in);
        uint64_t base = fuzz_shaped_u64(&in);

        curd_status expected = range_reference(offset, byte_len, buffer_len);
        curd_status status =
            curdi_checked_range(offset, byte_len, buffer_len, "fuzz range");
        FUZZ_CHECK(status == expected);
        if (status != CURD_OK) {
            fuzz_check_fix_sentence();
            FUZZ_CHECK(strstr(curd_last_error(), "fuzz range") != NULL);
        }
        /* The name is optional. */
        FUZZ_CHECK(curdi_checked_range(offset, byte_len, buffer_len, NULL)
                   == expected);

        fuzz_u128 address = (fuzz_u128)base + offset;
        uint64_t out = SENTINEL;
        status = curdi_checked_device_ptr_offset(base, offset, &out);
        if (address > UINT64_MAX) {
            FUZZ_CHECK(status == CURD_E_OVERFLOW);
            FUZZ_CHECK(out == SENTINEL);
            fuzz_check_fix_sentence();
        } else {
            FUZZ_CHECK(status == CURD_OK);
            FUZZ_CHECK(out == (uint64_t)address);
        }
    }
    return 0;
}
