/* fuzz-spans.c - the copy planner against an independent span reference
 * and a byte-by-byte DMA model.
 *
 * Input: a mode byte, then items. Each item starts with a flag byte (which
 * of four buffer keys, including 0 and 2^64-1; zero length; adjacent to or
 * a duplicate of the previous item). In narrow mode offsets and lengths
 * stay within a 1025-byte buffer; in wide mode they are shaped 64-bit
 * numbers, so ends and staging totals overflow.
 *
 * The reference joins every two non-empty items of one buffer that touch
 * or overlap (an O(n^2) union-find, not a sort-and-sweep), takes each
 * group's [min start, max end) as its span, orders the spans by (key,
 * offset) and lays them back to back. The plan must equal it exactly, or be
 * CURD_E_OVERFLOW exactly when an item's end or the staging total passes
 * 2^64-1, with the output untouched. In narrow mode each span is then
 * "DMA-ed" byte by byte from a model buffer into staging and every item is
 * sliced back out and compared with the buffer. Each span's members must
 * be exactly its group's items, all in (key, offset, item index) order.
 *
 * fuzz-srcs: lib/transfer/spans.c lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "transfer/spans.h"

#define MAX_ITEMS 128
#define NARROW_BUFFER_LEN 1025

static const uint64_t keys[4] = { 0, 1, UINT64_MAX - 1, UINT64_MAX };

/* The model buffer's byte at (key, offset): a hash, so a slice taken from
 * the wrong place does not match by accident. */
static uint8_t model_byte(uint64_t key, uint64_t offset)
{
    uint64_t x = key * UINT64_C(0x9e3779b97f4a7c15) + offset;
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return (uint8_t)x;
}

typedef struct reference_span {
    uint64_t buffer_key;
    fuzz_u128 start;
    fuzz_u128 end;
    fuzz_u128 staging_offset;
} reference_span;

static size_t find_root(size_t *parent, size_t i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

static bool span_before(const reference_span *a, const reference_span *b)
{
    return a->buffer_key != b->buffer_key ? a->buffer_key < b->buffer_key
                                          : a->start < b->start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    curdi_copy_item items[MAX_ITEMS];
    size_t count = 0;
    bool wide = (fuzz_u8(&in) & 1u) != 0;

    while (fuzz_more(&in) && count < MAX_ITEMS) {
        uint8_t flags = fuzz_u8(&in);
        curdi_copy_item *item = &items[count];
        if (count > 0 && (flags & 0x10u)) {
            *item = items[count - 1];
            count++;
            continue;
        }
        item->buffer_key = keys[flags & 3u];
        if (wide) {
            item->offset = fuzz_shaped_u64(&in);
            item->byte_len = fuzz_shaped_u64(&in);
        } else {
            uint64_t offset = fuzz_u8(&in);
            offset |= (uint64_t)fuzz_u8(&in) << 8;
            uint64_t length = fuzz_u8(&in);
            length |= (uint64_t)fuzz_u8(&in) << 8;
            item->offset = offset % NARROW_BUFFER_LEN;
            item->byte_len = length % (NARROW_BUFFER_LEN - item->offset);
        }
        if (count > 0 && (flags & 0x08u)) {
            /* Adjacent to the previous item, in its buffer. */
            const curdi_copy_item *previous = &items[count - 1];
            fuzz_u128 end = (fuzz_u128)previous->offset + previous->byte_len;
            item->buffer_key = previous->buffer_key;
            if (end <= (wide ? UINT64_MAX : NARROW_BUFFER_LEN - 1)) {
                item->offset = (uint64_t)end;
                if (!wide)
                    item->byte_len %= NARROW_BUFFER_LEN - item->offset;
            }
        }
        if (flags & 0x04u)
            item->byte_len = 0;
        count++;
    }

    /* Reference: overflow of an item's end. */
    bool expect_overflow = false;
    for (size_t i = 0; i < count; i++)
        if ((fuzz_u128)items[i].offset + items[i].byte_len > UINT64_MAX)
            expect_overflow = true;

    /* Reference: groups of touching non-empty items of one buffer. */
    size_t parent[MAX_ITEMS];
    for (size_t i = 0; i < count; i++)
        parent[i] = i;
    for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++) {
            const curdi_copy_item *a = &items[i];
            const curdi_copy_item *b = &items[j];
            if (a->byte_len == 0 || b->byte_len == 0
                || a->buffer_key != b->buffer_key)
                continue;
            fuzz_u128 a_end = (fuzz_u128)a->offset + a->byte_len;
            fuzz_u128 b_end = (fuzz_u128)b->offset + b->byte_len;
            if (b->offset <= a_end && a->offset <= b_end)
                parent[find_root(parent, i)] = find_root(parent, j);
        }
    reference_span spans[MAX_ITEMS];
    size_t span_of_root[MAX_ITEMS];
    size_t span_count = 0;
    for (size_t i = 0; i < count; i++)
        span_of_root[i] = SIZE_MAX;
    for (size_t i = 0; i < count; i++) {
        if (items[i].byte_len == 0)
            continue;
        size_t root = find_root(parent, i);
        fuzz_u128 end = (fuzz_u128)items[i].offset + items[i].byte_len;
        if (span_of_root[root] == SIZE_MAX) {
            span_of_root[root] = span_count;
            spans[span_count++] = (reference_span){ items[i].buffer_key,
                                                    items[i].offset, end, 0 };
        } else {
            reference_span *span = &spans[span_of_root[root]];
            if (items[i].offset < span->start)
                span->start = items[i].offset;
            if (end > span->end)
                span->end = end;
        }
    }
    /* Insertion sort by (key, start); remember where each group went. */
    size_t position[MAX_ITEMS];
    for (size_t s = 0; s < span_count; s++)
        position[s] = s;
    for (size_t s = 1; s < span_count; s++)
        for (size_t t = s;
             t > 0 && span_before(&spans[position[t]], &spans[position[t - 1]]);
             t--) {
            size_t swap = position[t];
            position[t] = position[t - 1];
            position[t - 1] = swap;
        }
    fuzz_u128 staging_total = 0;
    for (size_t s = 0; s < span_count; s++) {
        reference_span *span = &spans[position[s]];
        span->staging_offset = staging_total;
        staging_total += span->end - span->start;
    }
    if (staging_total > UINT64_MAX)
        expect_overflow = true;

    /* The plan. */
    curdi_span_list plan;
    curdi_span_list untouched;
    memset(&plan, 0xa5, sizeof plan);
    untouched = plan;
    curd_status status = curdi_spans_build(items, count, &plan);
    if (expect_overflow) {
        FUZZ_CHECK(status == CURD_E_OVERFLOW);
        FUZZ_CHECK(memcmp(&plan, &untouched, sizeof plan) == 0);
        fuzz_check_fix_sentence();
        return 0;
    }
    FUZZ_CHECK(status == CURD_OK);
    FUZZ_CHECK(plan.item_count == count);
    FUZZ_CHECK(plan.span_count == span_count);
    FUZZ_CHECK(plan.staging_bytes == (uint64_t)staging_total);
    for (size_t s = 0; s < span_count; s++) {
        const reference_span *expected = &spans[position[s]];
        const curdi_copy_span *got = &plan.spans[s];
        FUZZ_CHECK(got->buffer_key == expected->buffer_key);
        FUZZ_CHECK(got->offset == (uint64_t)expected->start);
        FUZZ_CHECK(got->byte_len == (uint64_t)(expected->end - expected->start));
        FUZZ_CHECK(got->staging_offset == (uint64_t)expected->staging_offset);
    }
    /* Members: each span lists exactly the items of its group, and all
     * come in (key, offset, item index) order. */
    size_t next_member = 0;
    for (size_t s = 0; s < span_count; s++) {
        const curdi_copy_span *got = &plan.spans[s];
        size_t group_size = 0;
        for (size_t i = 0; i < count; i++)
            if (items[i].byte_len != 0
                && span_of_root[find_root(parent, i)] == position[s])
                group_size++;
        FUZZ_CHECK(got->first_member == next_member);
        FUZZ_CHECK(got->member_count == group_size);
        for (size_t e = got->first_member; e < got->first_member + group_size;
             e++) {
            size_t i = plan.members[e];
            FUZZ_CHECK(i < count && items[i].byte_len != 0);
            FUZZ_CHECK(span_of_root[find_root(parent, i)] == position[s]);
        }
        next_member += group_size;
    }
    FUZZ_CHECK(plan.member_count == next_member);
    for (size_t e = 1; e < plan.member_count; e++) {
        size_t a = plan.members[e - 1], b = plan.members[e];
        FUZZ_CHECK(items[a].buffer_key < items[b].buffer_key
                   || (items[a].buffer_key == items[b].buffer_key
                       && (items[a].offset < items[b].offset
                           || (items[a].offset == items[b].offset && a < b))));
    }
    for (size_t i = 0; i < count; i++) {
        uint64_t expected = 0;
        if (items[i].byte_len != 0) {
            const reference_span *span =
                &spans[span_of_root[find_root(parent, i)]];
            expected = (uint64_t)(span->staging_offset
                                  + (items[i].offset - span->start));
        }
        FUZZ_CHECK(plan.item_staging_offset[i] == expected);
    }

    /* Narrow mode: the bytes themselves. */
    if (!wide) {
        uint8_t *staging = malloc(plan.staging_bytes ? plan.staging_bytes : 1);
        FUZZ_CHECK(staging != NULL);
        memset(staging, 0xdb, plan.staging_bytes);
        for (size_t s = 0; s < plan.span_count; s++) {
            const curdi_copy_span *span = &plan.spans[s];
            for (uint64_t t = 0; t < span->byte_len; t++)
                staging[span->staging_offset + t] =
                    model_byte(span->buffer_key, span->offset + t);
        }
        for (size_t i = 0; i < count; i++)
            for (uint64_t t = 0; t < items[i].byte_len; t++)
                FUZZ_CHECK(staging[plan.item_staging_offset[i] + t]
                           == model_byte(items[i].buffer_key,
                                         items[i].offset + t));
        free(staging);
    }

    curdi_spans_free(&plan);
    FUZZ_CHECK(plan.spans == NULL && plan.item_staging_offset == NULL);
    return 0;
}
