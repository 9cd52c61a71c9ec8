/* test-checked.c - checked arithmetic, ranges, size classes, budgets and
 * counters (lib/base/checked.c) against independent references: unsigned
 * __int128 arithmetic and a size-class table built by a different method. */
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "support/curd-test.h"

typedef unsigned __int128 u128;

#define SENTINEL_U64 UINT64_C(0x5a5aa5a55a5aa5a5)
#define RANDOM_ROUNDS 20000

/* ------------------------------------------------------------------------
 * Random numbers and edge values
 * ---------------------------------------------------------------------- */

static uint64_t rand_u64(void)
{
    return ((uint64_t)(uint32_t)g_test_rand_int() << 32)
           | (uint32_t)g_test_rand_int();
}

static const uint64_t edges[] = {
    0,
    1,
    2,
    9,
    10,
    11,
    255,
    256,
    257,
    UINT32_MAX - UINT64_C(1),
    UINT32_MAX,
    UINT64_C(1) << 32,
    (UINT64_C(1) << 32) + 1,
    (UINT64_C(1) << 63) - 1,
    UINT64_C(1) << 63,
    (UINT64_C(1) << 63) + 1,
    UINT64_MAX - 1,
    UINT64_MAX,
};
#define EDGE_COUNT (sizeof edges / sizeof edges[0])

/* Full-width, short, near-the-top or edge values, so that random pairs both
 * overflow and fit. */
static uint64_t rand_interesting_u64(void)
{
    switch (g_test_rand_int_range(0, 4)) {
    case 0:
        return rand_u64();
    case 1:
        return rand_u64() >> g_test_rand_int_range(0, 64);
    case 2:
        return UINT64_MAX - (rand_u64() >> g_test_rand_int_range(32, 64));
    default:
        return edges[g_test_rand_int_range(0, (gint32)EDGE_COUNT)];
    }
}

/* A failure's sentence names the operation and ends with "Fix: ...". */
static void assert_fix_sentence(const char *contains)
{
    const char *message = curd_last_error();
    const char *fix;
    size_t length;
    g_assert_nonnull(message);
    fix = strstr(message, "Fix: ");
    g_assert_nonnull(fix);
    g_assert_cmpuint(strlen(fix), >, strlen("Fix: ") + 1);
    length = strlen(message);
    g_assert_cmpint(message[length - 1], ==, '.');
    if (contains != NULL)
        g_assert_nonnull(strstr(message, contains));
}

/* ------------------------------------------------------------------------
 * add / sub / mul for size_t and uint64_t
 * ---------------------------------------------------------------------- */

typedef enum arith_op { OP_ADD, OP_SUB, OP_MUL } arith_op;

typedef struct arith_case {
    arith_op op;
    gboolean is_size;
} arith_case;

static const arith_case case_size_add = { OP_ADD, TRUE };
static const arith_case case_size_sub = { OP_SUB, TRUE };
static const arith_case case_size_mul = { OP_MUL, TRUE };
static const arith_case case_u64_add = { OP_ADD, FALSE };
static const arith_case case_u64_sub = { OP_SUB, FALSE };
static const arith_case case_u64_mul = { OP_MUL, FALSE };

static void check_arith(const arith_case *c, uint64_t a64, uint64_t b64)
{
    u128 max = c->is_size ? (u128)SIZE_MAX : (u128)UINT64_MAX;
    u128 a = c->is_size ? (u128)(size_t)a64 : (u128)a64;
    u128 b = c->is_size ? (u128)(size_t)b64 : (u128)b64;
    u128 reference = 0;
    gboolean expect_fit;
    gboolean fit;
    uint64_t result;

    switch (c->op) {
    case OP_ADD:
        reference = a + b;
        expect_fit = reference <= max;
        break;
    case OP_SUB:
        expect_fit = a >= b;
        if (expect_fit)
            reference = a - b;
        break;
    default:
        reference = a * b; /* two 64-bit factors fit in 128 bits */
        expect_fit = reference <= max;
        break;
    }

    if (c->is_size) {
        size_t out = (size_t)SENTINEL_U64;
        bool (*fn)(size_t, size_t, size_t *) =
            c->op == OP_ADD   ? curdi_size_add
            : c->op == OP_SUB ? curdi_size_sub
                              : curdi_size_mul;
        fit = fn((size_t)a, (size_t)b, &out);
        result = out;
    } else {
        uint64_t out = SENTINEL_U64;
        bool (*fn)(uint64_t, uint64_t, uint64_t *) =
            c->op == OP_ADD   ? curdi_u64_add
            : c->op == OP_SUB ? curdi_u64_sub
                              : curdi_u64_mul;
        fit = fn((uint64_t)a, (uint64_t)b, &out);
        result = out;
    }

    g_assert_cmpint(fit, ==, expect_fit);
    if (expect_fit)
        g_assert_cmpuint(result, ==, (uint64_t)reference);
    else
        g_assert_cmpuint(result, ==, c->is_size ? (size_t)SENTINEL_U64
                                                : SENTINEL_U64);
}

static void test_arith_agrees_with_128_bit_reference(gconstpointer data)
{
    const arith_case *c = data;
    for (size_t i = 0; i < EDGE_COUNT; i++)
        for (size_t j = 0; j < EDGE_COUNT; j++)
            check_arith(c, edges[i], edges[j]);
    /* SIZE_MAX may differ from UINT64_MAX on other platforms. */
    check_arith(c, SIZE_MAX, 1);
    check_arith(c, SIZE_MAX, SIZE_MAX);
    check_arith(c, 1, SIZE_MAX);
    for (int round = 0; round < RANDOM_ROUNDS; round++)
        check_arith(c, rand_interesting_u64(), rand_interesting_u64());
}

/* ------------------------------------------------------------------------
 * Ranges and device pointers
 * ---------------------------------------------------------------------- */

static curd_status range_reference(uint64_t offset, uint64_t byte_len,
                                   uint64_t buffer_len)
{
    u128 end = (u128)offset + byte_len;
    if (end > UINT64_MAX)
        return CURD_E_OVERFLOW;
    if (end > buffer_len)
        return CURD_E_RANGE;
    return CURD_OK;
}

static void check_range(uint64_t offset, uint64_t byte_len, uint64_t buffer_len)
{
    curd_status expected = range_reference(offset, byte_len, buffer_len);
    curd_status status =
        curdi_checked_range(offset, byte_len, buffer_len, "test range");
    g_assert_cmpint(status, ==, expected);
    if (status != CURD_OK)
        assert_fix_sentence("test range");
}

static void test_range_inside_buffer_is_ok_including_empty_range_at_end(void)
{
    g_assert_cmpint(curdi_checked_range(0, 0, 0, "r"), ==, CURD_OK);
    g_assert_cmpint(curdi_checked_range(0, 4096, 4096, "r"), ==, CURD_OK);
    g_assert_cmpint(curdi_checked_range(4096, 0, 4096, "r"), ==, CURD_OK);
    g_assert_cmpint(curdi_checked_range(4095, 1, 4096, "r"), ==, CURD_OK);
    g_assert_cmpint(curdi_checked_range(UINT64_MAX, 0, UINT64_MAX, "r"), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_checked_range(0, UINT64_MAX, UINT64_MAX, "r"), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_checked_range(1, UINT64_MAX - 1, UINT64_MAX, "r"),
                    ==, CURD_OK);
}

static void test_range_past_end_is_range_error_with_fix_sentence(void)
{
    g_assert_cmpint(curdi_checked_range(0, 4097, 4096, "download range"), ==,
                    CURD_E_RANGE);
    assert_fix_sentence("download range");
    /* The numbers are in the sentence. */
    g_assert_nonnull(strstr(curd_last_error(), "4097"));
    g_assert_nonnull(strstr(curd_last_error(), "4096"));

    g_assert_cmpint(curdi_checked_range(4097, 0, 4096, "upload range"), ==,
                    CURD_E_RANGE);
    assert_fix_sentence("upload range");
    g_assert_cmpint(curdi_checked_range(1, 0, 0, "fill range"), ==,
                    CURD_E_RANGE);
    assert_fix_sentence("fill range");
    g_assert_cmpint(curdi_checked_range(UINT64_MAX, 0, UINT64_MAX - 1, "r"),
                    ==, CURD_E_RANGE);
    assert_fix_sentence(NULL);
    /* A NULL name still makes a sentence. */
    g_assert_cmpint(curdi_checked_range(5, 5, 9, NULL), ==, CURD_E_RANGE);
    assert_fix_sentence(NULL);
}

static void test_range_whose_end_overflows_is_overflow_not_range(void)
{
    g_assert_cmpint(
        curdi_checked_range(1, UINT64_MAX, UINT64_MAX, "copy range"), ==,
        CURD_E_OVERFLOW);
    assert_fix_sentence("copy range");
    g_assert_cmpint(curdi_checked_range(UINT64_MAX, 1, 0, "copy range"), ==,
                    CURD_E_OVERFLOW);
    assert_fix_sentence("copy range");
    g_assert_cmpint(curdi_checked_range(UINT64_C(1) << 63, UINT64_C(1) << 63,
                                        UINT64_MAX, "copy range"),
                    ==, CURD_E_OVERFLOW);
    assert_fix_sentence("copy range");
}

static void test_range_check_agrees_with_128_bit_reference(void)
{
    for (size_t i = 0; i < EDGE_COUNT; i++)
        for (size_t j = 0; j < EDGE_COUNT; j++)
            for (size_t k = 0; k < EDGE_COUNT; k++)
                check_range(edges[i], edges[j], edges[k]);
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        uint64_t buffer_len = rand_interesting_u64();
        uint64_t offset;
        uint64_t byte_len;
        if (g_test_rand_bit() && buffer_len > 0) {
            /* Near the end of the buffer, where the answer flips. */
            offset = buffer_len - (rand_u64() % (buffer_len < 64 ? buffer_len : 64));
            byte_len = rand_u64() % 128;
        } else {
            offset = rand_interesting_u64();
            byte_len = rand_interesting_u64();
        }
        check_range(offset, byte_len, buffer_len);
    }
}

static void check_device_ptr(uint64_t base, uint64_t offset)
{
    u128 reference = (u128)base + offset;
    uint64_t out = SENTINEL_U64;
    curd_status status = curdi_checked_device_ptr_offset(base, offset, &out);
    if (reference > UINT64_MAX) {
        g_assert_cmpint(status, ==, CURD_E_OVERFLOW);
        g_assert_cmpuint(out, ==, SENTINEL_U64);
        assert_fix_sentence("device pointer");
    } else {
        g_assert_cmpint(status, ==, CURD_OK);
        g_assert_cmpuint(out, ==, (uint64_t)reference);
    }
}

static void test_device_ptr_offset_agrees_with_128_bit_reference(void)
{
    for (size_t i = 0; i < EDGE_COUNT; i++)
        for (size_t j = 0; j < EDGE_COUNT; j++)
            check_device_ptr(edges[i], edges[j]);
    for (int round = 0; round < RANDOM_ROUNDS; round++)
        check_device_ptr(rand_interesting_u64(), rand_interesting_u64());
}

/* ------------------------------------------------------------------------
 * Size classes
 *
 * The reference table is built by walking up from 256 in 256-byte steps to
 * 2048, then, for each power of two p from 2048 up, adding p/8 eight times,
 * in 128-bit arithmetic, stopping at the first class past SIZE_MAX.
 * ---------------------------------------------------------------------- */

static GArray *reference_classes(void)
{
    GArray *classes = g_array_new(FALSE, FALSE, sizeof(size_t));
    for (size_t c = 256; c <= 2048; c += 256)
        g_array_append_val(classes, c);
    for (u128 power = 2048;; power *= 2) {
        u128 c = power;
        for (int j = 1; j <= 8; j++) {
            c += power / 8;
            if (c > SIZE_MAX)
                return classes;
            size_t value = (size_t)c;
            g_array_append_val(classes, value);
        }
    }
}

/* The index of the smallest reference class >= byte_len, or the class
 * count when there is none. */
static unsigned reference_class_index(const GArray *classes, size_t byte_len)
{
    unsigned low = 0;
    unsigned high = classes->len;
    while (low < high) {
        unsigned middle = low + (high - low) / 2;
        if (g_array_index(classes, size_t, middle) < byte_len)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* Requests up to 2 KiB waste under 256 bytes; larger ones under 1/8 of the
 * request. */
static void assert_waste_bounded(size_t byte_len, size_t class_bytes)
{
    g_assert_cmpuint(class_bytes, >=, byte_len);
    if (byte_len <= 2048)
        g_assert_cmpuint(class_bytes - byte_len, <, 256);
    else
        g_assert_true((u128)(class_bytes - byte_len) * 8 < (u128)byte_len);
}

/* Rounds byte_len and compares every output with the reference table. */
static void check_size_class(const GArray *classes, size_t byte_len)
{
    unsigned expected_index = reference_class_index(classes, byte_len);
    size_t class_bytes = (size_t)SENTINEL_U64;
    unsigned index = 0xdeadu;
    curd_status status =
        curdi_checked_size_class(byte_len, &class_bytes, &index);
    if (expected_index == classes->len) {
        g_assert_cmpint(status, ==, CURD_E_OVERFLOW);
        g_assert_cmpuint(class_bytes, ==, (size_t)SENTINEL_U64);
        g_assert_cmpuint(index, ==, 0xdeadu);
        assert_fix_sentence(NULL);
        return;
    }
    g_assert_cmpint(status, ==, CURD_OK);
    g_assert_cmpuint(index, ==, expected_index);
    g_assert_cmpuint(class_bytes, ==,
                     g_array_index(classes, size_t, expected_index));
    g_assert_cmpuint(curdi_checked_size_class_bytes(index), ==, class_bytes);
    assert_waste_bounded(byte_len, class_bytes);
}

static void test_size_class_of_zero_is_invalid_argument(void)
{
    size_t class_bytes = 77;
    unsigned index = 77;
    g_assert_cmpint(curdi_checked_size_class(0, &class_bytes, &index), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_cmpuint(class_bytes, ==, 77);
    g_assert_cmpuint(index, ==, 77);
    assert_fix_sentence(NULL);
}

static void test_size_class_table_matches_independent_construction(void)
{
    GArray *classes = reference_classes();
    unsigned count = curdi_checked_size_class_count();
    g_assert_cmpuint(count, ==, classes->len);
    for (unsigned i = 0; i < count; i++) {
        size_t c = curdi_checked_size_class_bytes(i);
        g_assert_cmpuint(c, ==, g_array_index(classes, size_t, i));
        g_assert_cmpuint(c % 256, ==, 0);
        if (i > 0)
            g_assert_cmpuint(c, >, curdi_checked_size_class_bytes(i - 1));
    }
    g_assert_cmpuint(curdi_checked_size_class_bytes(count), ==, 0);
    g_assert_cmpuint(curdi_checked_size_class_bytes(UINT_MAX), ==, 0);
    g_assert_cmpuint(curdi_checked_size_class_bytes(0), ==, 256);
    if (sizeof(size_t) == 8) {
        g_assert_cmpuint(count, ==, 431);
        g_assert_cmpuint(curdi_checked_size_class_bytes(count - 1), ==,
                         (size_t)UINT64_C(0xF000000000000000));
    }
    g_array_unref(classes);
}

static void test_size_class_boundaries_round_to_themselves_and_next_class(void)
{
    GArray *classes = reference_classes();
    for (unsigned i = 0; i < classes->len; i++) {
        size_t c = g_array_index(classes, size_t, i);
        size_t got = 0;
        unsigned index = 0;
        /* Exactly a class: no waste at all. */
        g_assert_cmpint(curdi_checked_size_class(c, &got, &index), ==,
                        CURD_OK);
        g_assert_cmpuint(got, ==, c);
        g_assert_cmpuint(index, ==, i);
        /* One byte less (never 0: classes start at 256): the same class. */
        g_assert_cmpint(curdi_checked_size_class(c - 1, &got, &index), ==,
                        CURD_OK);
        g_assert_cmpuint(got, ==, c);
        g_assert_cmpuint(index, ==, i);
        /* One byte more: the next class, or past the last one. */
        if (i + 1 < classes->len) {
            g_assert_cmpint(curdi_checked_size_class(c + 1, &got, &index), ==,
                            CURD_OK);
            g_assert_cmpuint(index, ==, i + 1);
        } else {
            g_assert_cmpint(curdi_checked_size_class(c + 1, &got, &index), ==,
                            CURD_E_OVERFLOW);
        }
        check_size_class(classes, c - 1);
        check_size_class(classes, c);
        check_size_class(classes, c + 1);
    }
    g_array_unref(classes);
}

static void test_size_class_worst_waste_is_under_one_eighth_above_2_kib(void)
{
    /* Over every class, the worst request is one byte above the class
     * below it: waste = step - 1 against a request of 8 steps + 1, under
     * 1/8 of the request and 1/9 of the class. The ratio grows with the
     * step, so the worst case is the top group: 2^(W-1) + 1 bytes. */
    const unsigned width = (unsigned)(sizeof(size_t) * CHAR_BIT);
    size_t worst_len = 0;
    size_t worst_waste = 0;
    for (unsigned i = 8; i < curdi_checked_size_class_count(); i++) {
        size_t request = curdi_checked_size_class_bytes(i - 1) + 1;
        size_t class_bytes = 0;
        g_assert_cmpint(curdi_checked_size_class(request, &class_bytes, NULL),
                        ==, CURD_OK);
        g_assert_cmpuint(class_bytes, ==, curdi_checked_size_class_bytes(i));
        assert_waste_bounded(request, class_bytes);
        size_t waste = class_bytes - request;
        g_assert_true((u128)waste * 9 < (u128)class_bytes);
        /* waste / request >= worst_waste / worst_len, cross-multiplied */
        if (worst_len == 0
            || (u128)waste * worst_len >= (u128)worst_waste * request) {
            worst_len = request;
            worst_waste = waste;
        }
    }
    g_assert_cmpuint(worst_len, ==, ((size_t)1 << (width - 1)) + 1);
    g_assert_cmpuint(worst_waste, ==, ((size_t)1 << (width - 4)) - 1);
    /* At 2049 (the first geometric group) it is 255 / 2049 = 12.45%. */
    {
        size_t class_bytes = 0;
        g_assert_cmpint(curdi_checked_size_class(2049, &class_bytes, NULL), ==,
                        CURD_OK);
        g_assert_cmpuint(class_bytes, ==, 2304);
    }
    /* And the small classes: 1 byte wastes 255, the most of any. */
    for (size_t request = 1; request <= 4096; request++) {
        size_t class_bytes = 0;
        g_assert_cmpint(curdi_checked_size_class(request, &class_bytes, NULL),
                        ==, CURD_OK);
        assert_waste_bounded(request, class_bytes);
        g_assert_cmpuint(class_bytes - request, <=, 255);
    }
}

static void test_size_class_waste_is_bounded_for_random_sizes(void)
{
    GArray *classes = reference_classes();
    for (int round = 0; round < RANDOM_ROUNDS * 5; round++) {
        /* Log-uniform sizes, so every group of classes is sampled. */
        size_t byte_len = (size_t)(rand_u64() >> g_test_rand_int_range(0, 64));
        if (byte_len == 0)
            byte_len = 1;
        check_size_class(classes, byte_len);
    }
    g_array_unref(classes);
}

static void test_size_class_rounding_is_monotonic_and_idempotent(void)
{
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        size_t a = (size_t)(rand_u64() >> g_test_rand_int_range(4, 64));
        size_t b = a + (size_t)(rand_u64() >> g_test_rand_int_range(4, 64));
        size_t class_a = 0, class_b = 0, again = 0;
        unsigned index_a = 0, index_b = 0;
        if (a == 0)
            a = 1;
        if (curdi_checked_size_class(a, &class_a, &index_a) != CURD_OK
            || curdi_checked_size_class(b, &class_b, &index_b) != CURD_OK)
            continue;
        g_assert_cmpuint(class_a, <=, class_b);
        g_assert_cmpuint(index_a, <=, index_b);
        g_assert_cmpint(curdi_checked_size_class(class_a, &again, NULL), ==,
                        CURD_OK);
        g_assert_cmpuint(again, ==, class_a);
    }
}

static void test_size_class_past_last_class_is_overflow(void)
{
    size_t last =
        curdi_checked_size_class_bytes(curdi_checked_size_class_count() - 1);
    size_t probes[] = { last + 1, last + 2, SIZE_MAX - 1, SIZE_MAX,
                        last + (SIZE_MAX - last) / 2 };
    for (size_t i = 0; i < G_N_ELEMENTS(probes); i++) {
        size_t class_bytes = 99;
        unsigned index = 99;
        g_assert_cmpint(
            curdi_checked_size_class(probes[i], &class_bytes, &index), ==,
            CURD_E_OVERFLOW);
        g_assert_cmpuint(class_bytes, ==, 99);
        g_assert_cmpuint(index, ==, 99);
        assert_fix_sentence(NULL);
    }
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        size_t byte_len = last + 1 + (size_t)(rand_u64() % (SIZE_MAX - last));
        size_t class_bytes = 99;
        g_assert_cmpint(curdi_checked_size_class(byte_len, &class_bytes, NULL),
                        ==, CURD_E_OVERFLOW);
        g_assert_cmpuint(class_bytes, ==, 99);
    }
}

static void test_size_class_of_1_1_gib_holds_1_125_gib_not_2(void)
{
    size_t gib = (size_t)1 << 30;
    size_t request = gib + gib / 10;
    size_t class_bytes = 0;
    g_assert_cmpint(curdi_checked_size_class(request, &class_bytes, NULL), ==,
                    CURD_OK);
    g_assert_cmpuint(class_bytes, ==, gib + gib / 8);
}

/* ------------------------------------------------------------------------
 * Resident budget
 * ---------------------------------------------------------------------- */

static uint64_t budget_reference(uint64_t total, uint64_t free_bytes,
                                 uint64_t resident, uint64_t limit)
{
    u128 by_total = (u128)total * 9 / 10;
    u128 by_free = (u128)free_bytes * 9 / 10 + resident;
    u128 budget = by_total < by_free ? by_total : by_free;
    if (limit != 0 && limit < budget)
        budget = limit;
    return (uint64_t)budget;
}

static void check_budget(uint64_t total, uint64_t free_bytes,
                         uint64_t resident, uint64_t limit)
{
    g_assert_cmpuint(
        curdi_checked_resident_budget(total, free_bytes, resident, limit), ==,
        budget_reference(total, free_bytes, resident, limit));
}

static void test_resident_budget_agrees_with_128_bit_reference(void)
{
    for (size_t a = 0; a < EDGE_COUNT; a++)
        for (size_t b = 0; b < EDGE_COUNT; b++)
            for (size_t c = 0; c < EDGE_COUNT; c++)
                for (size_t d = 0; d < EDGE_COUNT; d++)
                    check_budget(edges[a], edges[b], edges[c], edges[d]);
    for (int round = 0; round < RANDOM_ROUNDS; round++)
        check_budget(rand_interesting_u64(), rand_interesting_u64(),
                     rand_interesting_u64(),
                     g_test_rand_bit() ? 0 : rand_interesting_u64());
}

static void test_resident_budget_does_not_overflow_at_uint64_max(void)
{
    /* 9/10 of UINT64_MAX, computed without the 9x overflow. */
    uint64_t nine_tenths = (uint64_t)((u128)UINT64_MAX * 9 / 10);
    g_assert_cmpuint(
        curdi_checked_resident_budget(UINT64_MAX, UINT64_MAX, UINT64_MAX, 0),
        ==, nine_tenths);
    g_assert_cmpuint(
        curdi_checked_resident_budget(UINT64_MAX, UINT64_MAX, 0, 0), ==,
        nine_tenths);
    g_assert_cmpuint(
        curdi_checked_resident_budget(UINT64_MAX, 0, UINT64_MAX, 0), ==,
        nine_tenths);
    g_assert_cmpuint(curdi_checked_resident_budget(UINT64_MAX, 0, 0, 0), ==,
                     0);
}

static void test_resident_budget_of_an_80_gib_device(void)
{
    uint64_t gib = UINT64_C(1) << 30;
    /* Idle device: 9/10 of free memory is the tighter cap. */
    g_assert_cmpuint(curdi_checked_resident_budget(80 * gib, 79 * gib, 0, 0),
                     ==, 79 * gib * 9 / 10);
    /* 40 GiB resident, 39 GiB free: min(72, 35.1 + 40) = 72 GiB. */
    g_assert_cmpuint(
        curdi_checked_resident_budget(80 * gib, 39 * gib, 40 * gib, 0), ==,
        72 * gib);
    /* A limit lowers it. */
    g_assert_cmpuint(
        curdi_checked_resident_budget(80 * gib, 79 * gib, 0, 8 * gib), ==,
        8 * gib);
}

static void test_resident_budget_limit_can_only_lower_it(void)
{
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        uint64_t total = rand_interesting_u64();
        uint64_t free_bytes = rand_interesting_u64();
        uint64_t resident = rand_interesting_u64();
        uint64_t limit = rand_interesting_u64();
        uint64_t open =
            curdi_checked_resident_budget(total, free_bytes, resident, 0);
        uint64_t capped =
            curdi_checked_resident_budget(total, free_bytes, resident, limit);
        g_assert_cmpuint(capped, <=, open);
        if (limit == 0 || limit >= open)
            g_assert_cmpuint(capped, ==, open);
        else
            g_assert_cmpuint(capped, ==, limit);
    }
}

/* ------------------------------------------------------------------------
 * Atomic counters
 * ---------------------------------------------------------------------- */

static void test_counter_add_adds_and_overflow_leaves_it_unchanged(void)
{
    _Atomic uint64_t counter = 5;
    g_assert_cmpint(curdi_checked_counter_add(&counter, 7), ==, CURD_OK);
    g_assert_cmpuint(atomic_load(&counter), ==, 12);
    g_assert_cmpint(curdi_checked_counter_add(&counter, 0), ==, CURD_OK);
    g_assert_cmpuint(atomic_load(&counter), ==, 12);

    atomic_store(&counter, UINT64_MAX - 1);
    g_assert_cmpint(curdi_checked_counter_add(&counter, 1), ==, CURD_OK);
    g_assert_cmpuint(atomic_load(&counter), ==, UINT64_MAX);
    g_assert_cmpint(curdi_checked_counter_add(&counter, 0), ==, CURD_OK);
    g_assert_cmpint(curdi_checked_counter_add(&counter, 1), ==,
                    CURD_E_OVERFLOW);
    g_assert_cmpuint(atomic_load(&counter), ==, UINT64_MAX);
    assert_fix_sentence(NULL);

    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        uint64_t start = rand_interesting_u64();
        uint64_t amount = rand_interesting_u64();
        u128 reference = (u128)start + amount;
        atomic_store(&counter, start);
        curd_status status = curdi_checked_counter_add(&counter, amount);
        if (reference > UINT64_MAX) {
            g_assert_cmpint(status, ==, CURD_E_OVERFLOW);
            g_assert_cmpuint(atomic_load(&counter), ==, start);
        } else {
            g_assert_cmpint(status, ==, CURD_OK);
            g_assert_cmpuint(atomic_load(&counter), ==, (uint64_t)reference);
        }
    }
}

static void test_stat_sub_underflow_is_repaired_to_zero(void)
{
    _Atomic uint64_t counter = 10;
    g_assert_true(curdi_checked_stat_sub(&counter, 3));
    g_assert_cmpuint(atomic_load(&counter), ==, 7);
    g_assert_true(curdi_checked_stat_sub(&counter, 7));
    g_assert_cmpuint(atomic_load(&counter), ==, 0);
    g_assert_true(curdi_checked_stat_sub(&counter, 0));
    g_assert_cmpuint(atomic_load(&counter), ==, 0);
    g_assert_false(curdi_checked_stat_sub(&counter, 1));
    g_assert_cmpuint(atomic_load(&counter), ==, 0);

    atomic_store(&counter, UINT64_MAX);
    g_assert_true(curdi_checked_stat_sub(&counter, UINT64_MAX));
    g_assert_cmpuint(atomic_load(&counter), ==, 0);

    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        uint64_t start = rand_interesting_u64();
        uint64_t amount = rand_interesting_u64();
        atomic_store(&counter, start);
        gboolean exact = curdi_checked_stat_sub(&counter, amount);
        g_assert_cmpint(exact, ==, amount <= start);
        g_assert_cmpuint(atomic_load(&counter), ==,
                         amount <= start ? start - amount : 0);
    }
}

static void test_stat_sub_repair_is_traced_once_per_process(void)
{
    if (g_test_subprocess()) {
        _Atomic uint64_t counter = 1;
        g_assert_false(curdi_checked_stat_sub(&counter, 2));
        g_assert_false(curdi_checked_stat_sub(&counter, 3));
        return;
    }
    /* The child inherits CURD_TRACE; without it nothing is printed. */
    g_setenv("CURD_TRACE", "1", TRUE);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_unsetenv("CURD_TRACE");
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("*accounting repair*");
    g_test_trap_assert_stderr_unmatched("*accounting repair*accounting repair*");

    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr_unmatched("*accounting repair*");
}

static void test_peak_raise_only_raises(void)
{
    _Atomic uint64_t peak = 5;
    curdi_checked_peak_raise(&peak, 3);
    g_assert_cmpuint(atomic_load(&peak), ==, 5);
    curdi_checked_peak_raise(&peak, 5);
    g_assert_cmpuint(atomic_load(&peak), ==, 5);
    curdi_checked_peak_raise(&peak, 6);
    g_assert_cmpuint(atomic_load(&peak), ==, 6);
    curdi_checked_peak_raise(&peak, UINT64_MAX);
    g_assert_cmpuint(atomic_load(&peak), ==, UINT64_MAX);
    curdi_checked_peak_raise(&peak, 0);
    g_assert_cmpuint(atomic_load(&peak), ==, UINT64_MAX);
}

#define COUNTER_THREADS 4
#define COUNTER_STEPS 20000

typedef struct counter_shared {
    _Atomic uint64_t added;
    _Atomic uint64_t drained;
    _Atomic uint64_t peak;
    int thread_number;
} counter_shared;

static gpointer counter_worker(gpointer data)
{
    counter_shared *shared = data;
    int thread_number = g_atomic_int_add(&shared->thread_number, 1);
    for (uint64_t step = 0; step < COUNTER_STEPS; step++) {
        g_assert_cmpint(curdi_checked_counter_add(&shared->added, 1), ==,
                        CURD_OK);
        g_assert_true(curdi_checked_stat_sub(&shared->drained, 1));
        /* Each thread's values are distinct; the largest must win. */
        curdi_checked_peak_raise(&shared->peak, step * COUNTER_THREADS
                                                    + (uint64_t)thread_number);
    }
    return NULL;
}

static void test_counters_are_exact_under_concurrent_threads(void)
{
    counter_shared shared = { 0 };
    GThread *threads[COUNTER_THREADS];
    atomic_store(&shared.drained, (uint64_t)COUNTER_THREADS * COUNTER_STEPS);
    for (int i = 0; i < COUNTER_THREADS; i++)
        threads[i] = g_thread_new("counter", counter_worker, &shared);
    for (int i = 0; i < COUNTER_THREADS; i++)
        g_thread_join(threads[i]);
    g_assert_cmpuint(atomic_load(&shared.added), ==,
                     (uint64_t)COUNTER_THREADS * COUNTER_STEPS);
    g_assert_cmpuint(atomic_load(&shared.drained), ==, 0);
    g_assert_cmpuint(atomic_load(&shared.peak), ==,
                     (uint64_t)COUNTER_STEPS * COUNTER_THREADS - 1);
}

/* The one host-range check: NULL for bytes, and a wrap, are refused
 * with their sentences; a range ending at the very top is fine. */
static void test_host_range_check_refuses_null_and_wrap_only(void)
{
    unsigned char byte = 0;
    const void *top = (const void *)(UINTPTR_MAX - 15u);
    g_assert_cmpint(curdi_checked_host_range(&byte, 1, "test", "src"), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_checked_host_range(NULL, 0, "test", "src"), ==,
                    CURD_OK);
    g_assert_cmpint(curdi_checked_host_range(top, 15, "test", "src"), ==,
                    CURD_OK);
    g_assert_false(curdi_checked_host_range_bad(top, 15));
    g_assert_cmpint(curdi_checked_host_range(NULL, 4, "test", "src"), ==,
                    CURD_E_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(curd_last_error(), "test: src is NULL"));
    g_assert_cmpint(curdi_checked_host_range(top, 16, "test", "dst"), ==,
                    CURD_E_OVERFLOW);
    g_assert_nonnull(strstr(curd_last_error(), "Fix: "));
    g_assert_true(curdi_checked_host_range_bad(top, 16));
    g_assert_true(curdi_checked_host_range_bad(NULL, 1));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_data_func("/checked/size-add-agrees-with-128-bit-reference",
                         &case_size_add, test_arith_agrees_with_128_bit_reference);
    g_test_add_data_func("/checked/size-sub-agrees-with-128-bit-reference",
                         &case_size_sub, test_arith_agrees_with_128_bit_reference);
    g_test_add_data_func("/checked/size-mul-agrees-with-128-bit-reference",
                         &case_size_mul, test_arith_agrees_with_128_bit_reference);
    g_test_add_data_func("/checked/u64-add-agrees-with-128-bit-reference",
                         &case_u64_add, test_arith_agrees_with_128_bit_reference);
    g_test_add_data_func("/checked/u64-sub-agrees-with-128-bit-reference",
                         &case_u64_sub, test_arith_agrees_with_128_bit_reference);
    g_test_add_data_func("/checked/u64-mul-agrees-with-128-bit-reference",
                         &case_u64_mul, test_arith_agrees_with_128_bit_reference);

    g_test_add_func("/checked/host-range-check-refuses-null-and-wrap-only",
                    test_host_range_check_refuses_null_and_wrap_only);
    g_test_add_func("/checked/range-inside-buffer-is-ok-including-empty-range-at-end",
                    test_range_inside_buffer_is_ok_including_empty_range_at_end);
    g_test_add_func("/checked/range-past-end-is-range-error-with-fix-sentence",
                    test_range_past_end_is_range_error_with_fix_sentence);
    g_test_add_func("/checked/range-whose-end-overflows-is-overflow-not-range",
                    test_range_whose_end_overflows_is_overflow_not_range);
    g_test_add_func("/checked/range-check-agrees-with-128-bit-reference",
                    test_range_check_agrees_with_128_bit_reference);
    g_test_add_func("/checked/device-ptr-offset-agrees-with-128-bit-reference",
                    test_device_ptr_offset_agrees_with_128_bit_reference);

    g_test_add_func("/checked/size-class-of-zero-is-invalid-argument",
                    test_size_class_of_zero_is_invalid_argument);
    g_test_add_func("/checked/size-class-table-matches-independent-construction",
                    test_size_class_table_matches_independent_construction);
    g_test_add_func("/checked/size-class-boundaries-round-to-themselves-and-next-class",
                    test_size_class_boundaries_round_to_themselves_and_next_class);
    g_test_add_func("/checked/size-class-worst-waste-is-under-one-eighth-above-2-kib",
                    test_size_class_worst_waste_is_under_one_eighth_above_2_kib);
    g_test_add_func("/checked/size-class-waste-is-bounded-for-random-sizes",
                    test_size_class_waste_is_bounded_for_random_sizes);
    g_test_add_func("/checked/size-class-rounding-is-monotonic-and-idempotent",
                    test_size_class_rounding_is_monotonic_and_idempotent);
    g_test_add_func("/checked/size-class-past-last-class-is-overflow",
                    test_size_class_past_last_class_is_overflow);
    g_test_add_func("/checked/size-class-of-1-1-gib-holds-1-125-gib-not-2",
                    test_size_class_of_1_1_gib_holds_1_125_gib_not_2);

    g_test_add_func("/checked/resident-budget-agrees-with-128-bit-reference",
                    test_resident_budget_agrees_with_128_bit_reference);
    g_test_add_func("/checked/resident-budget-does-not-overflow-at-uint64-max",
                    test_resident_budget_does_not_overflow_at_uint64_max);
    g_test_add_func("/checked/resident-budget-of-an-80-gib-device",
                    test_resident_budget_of_an_80_gib_device);
    g_test_add_func("/checked/resident-budget-limit-can-only-lower-it",
                    test_resident_budget_limit_can_only_lower_it);

    g_test_add_func("/checked/counter-add-adds-and-overflow-leaves-it-unchanged",
                    test_counter_add_adds_and_overflow_leaves_it_unchanged);
    g_test_add_func("/checked/stat-sub-underflow-is-repaired-to-zero",
                    test_stat_sub_underflow_is_repaired_to_zero);
    g_test_add_func("/checked/stat-sub-repair-is-traced-once-per-process",
                    test_stat_sub_repair_is_traced_once_per_process);
    g_test_add_func("/checked/peak-raise-only-raises", test_peak_raise_only_raises);
    g_test_add_func("/checked/counters-are-exact-under-concurrent-threads",
                    test_counters_are_exact_under_concurrent_threads);

    return g_test_run();
}
