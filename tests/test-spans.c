/* test-spans.c - the copy planner (lib/transfer/spans.c) against a
 * byte-by-byte model.
 *
 * The model keeps a buffer of random bytes per key. A plan is checked by
 * "DMA-ing" each span, one byte at a time, from its buffer into a staging
 * array, slicing each item back out at its staging offset, and comparing
 * with the item's bytes read straight from the buffer. The expected spans
 * are the maximal runs of a per-buffer coverage bitmap, so a plan that
 * fuses too little, too much, or stages a byte no item asked for fails. */
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "support/curd-test.h"
#include "transfer/spans.h"

typedef unsigned __int128 u128;

/* ------------------------------------------------------------------------
 * The model
 * ---------------------------------------------------------------------- */

typedef struct model {
    size_t buffer_count;
    size_t buffer_len;
    uint64_t *keys;    /* distinct buffer keys */
    guint8 **buffers;  /* random bytes, one buffer per key */
} model;

static uint64_t rand_u64(void)
{
    return ((uint64_t)(uint32_t)g_test_rand_int() << 32)
           | (uint32_t)g_test_rand_int();
}

static model *model_new(size_t buffer_count, size_t buffer_len)
{
    model *m = g_new0(model, 1);
    m->buffer_count = buffer_count;
    m->buffer_len = buffer_len;
    m->keys = g_new(uint64_t, buffer_count);
    m->buffers = g_new(guint8 *, buffer_count);
    for (size_t b = 0; b < buffer_count; b++) {
        gboolean fresh;
        /* Distinct keys, including the extremes now and then. */
        do {
            switch (g_test_rand_int_range(0, 4)) {
            case 0:
                m->keys[b] = (uint64_t)g_test_rand_int_range(0, 3);
                break;
            case 1:
                m->keys[b] = UINT64_MAX - (uint64_t)g_test_rand_int_range(0, 3);
                break;
            default:
                m->keys[b] = rand_u64();
                break;
            }
            fresh = TRUE;
            for (size_t other = 0; other < b; other++)
                if (m->keys[other] == m->keys[b])
                    fresh = FALSE;
        } while (!fresh);
        m->buffers[b] = g_malloc(buffer_len ? buffer_len : 1);
        curd_test_fill_random(m->buffers[b], buffer_len);
    }
    return m;
}

static void model_free(model *m)
{
    for (size_t b = 0; b < m->buffer_count; b++)
        g_free(m->buffers[b]);
    g_free(m->buffers);
    g_free(m->keys);
    g_free(m);
}

static size_t model_buffer_of(const model *m, uint64_t key)
{
    for (size_t b = 0; b < m->buffer_count; b++)
        if (m->keys[b] == key)
            return b;
    g_assert_not_reached();
    return 0;
}

/* Buffer indices in increasing key order: the order spans must come in. */
static size_t *model_key_order(const model *m)
{
    size_t *order = g_new(size_t, m->buffer_count);
    for (size_t b = 0; b < m->buffer_count; b++)
        order[b] = b;
    for (size_t i = 1; i < m->buffer_count; i++)
        for (size_t j = i; j > 0 && m->keys[order[j - 1]] > m->keys[order[j]]; j--) {
            size_t swap = order[j];
            order[j] = order[j - 1];
            order[j - 1] = swap;
        }
    return order;
}

/* Checks the plan of items against the model; see the file comment. */
static void assert_plan_matches_model(const model *m,
                                      const curdi_copy_item *items,
                                      size_t count, const curdi_span_list *plan)
{
    size_t *order = model_key_order(m);
    guint8 *covered = g_malloc0(m->buffer_len + 1);
    size_t expected_spans = 0;
    uint64_t staging_total = 0;

    g_assert_cmpuint(plan->item_count, ==, count);

    /* Expected spans: the maximal runs of covered bytes, buffer by buffer
     * in key order. */
    for (size_t o = 0; o < m->buffer_count; o++) {
        size_t b = order[o];
        memset(covered, 0, m->buffer_len + 1);
        for (size_t i = 0; i < count; i++)
            if (items[i].buffer_key == m->keys[b])
                for (uint64_t t = 0; t < items[i].byte_len; t++)
                    covered[items[i].offset + t] = 1;
        for (size_t start = 0; start < m->buffer_len;) {
            if (!covered[start]) {
                start++;
                continue;
            }
            size_t end = start;
            while (end < m->buffer_len && covered[end])
                end++;
            g_assert_cmpuint(expected_spans, <, plan->span_count);
            const curdi_copy_span *span = &plan->spans[expected_spans];
            g_assert_cmpuint(span->buffer_key, ==, m->keys[b]);
            g_assert_cmpuint(span->offset, ==, start);
            g_assert_cmpuint(span->byte_len, ==, end - start);
            /* Back to back in the staging area. */
            g_assert_cmpuint(span->staging_offset, ==, staging_total);
            staging_total += span->byte_len;
            expected_spans++;
            start = end;
        }
    }
    g_assert_cmpuint(plan->span_count, ==, expected_spans);
    g_assert_cmpuint(plan->staging_bytes, ==, staging_total);

    /* Members: every non-empty item once, span by span, each inside the
     * span that lists it, all in (key, offset, item index) order. */
    size_t non_empty = 0;
    for (size_t i = 0; i < count; i++)
        non_empty += items[i].byte_len != 0;
    g_assert_cmpuint(plan->member_count, ==, non_empty);
    guint8 *listed = g_malloc0(count ? count : 1);
    size_t next_member = 0;
    for (size_t s = 0; s < plan->span_count; s++) {
        const curdi_copy_span *span = &plan->spans[s];
        g_assert_cmpuint(span->first_member, ==, next_member);
        g_assert_cmpuint(span->member_count, >, 0);
        next_member += span->member_count;
        for (size_t e = span->first_member; e < next_member; e++) {
            size_t i = plan->members[e];
            g_assert_cmpuint(i, <, count);
            g_assert_false(listed[i]);
            listed[i] = 1;
            g_assert_cmpuint(items[i].byte_len, >, 0);
            g_assert_cmpuint(items[i].buffer_key, ==, span->buffer_key);
            g_assert_cmpuint(items[i].offset, >=, span->offset);
            g_assert_cmpuint(items[i].offset + items[i].byte_len, <=,
                             span->offset + span->byte_len);
        }
    }
    g_assert_cmpuint(next_member, ==, plan->member_count);
    for (size_t e = 1; e < plan->member_count; e++) {
        const curdi_copy_item *a = &items[plan->members[e - 1]];
        const curdi_copy_item *b = &items[plan->members[e]];
        g_assert_true(a->buffer_key < b->buffer_key
                      || (a->buffer_key == b->buffer_key
                          && (a->offset < b->offset
                              || (a->offset == b->offset
                                  && plan->members[e - 1] < plan->members[e]))));
    }
    g_free(listed);

    /* "DMA" each span into staging, byte by byte, then slice every item
     * back out and compare with the buffer read directly. */
    guint8 *staging = g_malloc(staging_total ? (size_t)staging_total : 1);
    curd_test_poison(staging, (size_t)staging_total);
    for (size_t s = 0; s < plan->span_count; s++) {
        const curdi_copy_span *span = &plan->spans[s];
        const guint8 *buffer = m->buffers[model_buffer_of(m, span->buffer_key)];
        for (uint64_t t = 0; t < span->byte_len; t++)
            staging[span->staging_offset + t] = buffer[span->offset + t];
    }
    for (size_t i = 0; i < count; i++) {
        const guint8 *buffer = m->buffers[model_buffer_of(m, items[i].buffer_key)];
        if (items[i].byte_len == 0) {
            g_assert_cmpuint(plan->item_staging_offset[i], ==, 0);
            continue;
        }
        g_assert_cmpuint(plan->item_staging_offset[i] + items[i].byte_len, <=,
                         staging_total);
        for (uint64_t t = 0; t < items[i].byte_len; t++)
            if (staging[plan->item_staging_offset[i] + t]
                != buffer[items[i].offset + t])
                g_error("item %zu (key %" PRIu64 ", offset %" PRIu64
                        ", length %" PRIu64 ") byte %" PRIu64
                        " differs in staging",
                        i, items[i].buffer_key, items[i].offset,
                        items[i].byte_len, t);
    }

    g_free(staging);
    g_free(covered);
    g_free(order);
}

/* Builds the plan, checks it against the model, frees it; returns the span
 * count for tests that expect a particular one. */
static size_t plan_and_check(const model *m, const curdi_copy_item *items,
                             size_t count)
{
    curdi_span_list plan;
    size_t span_count;
    g_assert_cmpint(curdi_spans_build(items, count, &plan), ==, CURD_OK);
    assert_plan_matches_model(m, items, count, &plan);
    span_count = plan.span_count;
    curdi_spans_free(&plan);
    g_assert_null(plan.spans);
    g_assert_null(plan.item_staging_offset);
    g_assert_cmpuint(plan.span_count, ==, 0);
    return span_count;
}

static void shuffle_items(curdi_copy_item *items, size_t count)
{
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)g_test_rand_int_range(0, (gint32)i);
        curdi_copy_item swap = items[i - 1];
        items[i - 1] = items[j];
        items[j] = swap;
    }
}

/* ------------------------------------------------------------------------
 * Tests
 * ---------------------------------------------------------------------- */

static void test_random_batches_reproduce_every_requested_byte(void)
{
    for (int round = 0; round < 300; round++) {
        size_t buffer_count = (size_t)g_test_rand_int_range(1, 9);
        size_t buffer_len = (size_t)g_test_rand_int_range(1, 2048);
        size_t count = (size_t)g_test_rand_int_range(0, 120);
        model *m = model_new(buffer_count, buffer_len);
        curdi_copy_item *items = g_new0(curdi_copy_item, count ? count : 1);
        for (size_t i = 0; i < count; i++) {
            curdi_copy_item *item = &items[i];
            int shape = g_test_rand_int_range(0, 10);
            if (i > 0 && shape == 0) {
                *item = items[g_test_rand_int_range(0, (gint32)i)]; /* duplicate */
                continue;
            }
            item->buffer_key = m->keys[g_test_rand_int_range(0, (gint32)buffer_count)];
            item->offset = (uint64_t)g_test_rand_int_range(0, (gint32)buffer_len + 1);
            if (i > 0 && shape == 1 && items[i - 1].offset + items[i - 1].byte_len
                                           <= buffer_len) {
                /* Adjacent to the previous item. */
                item->buffer_key = items[i - 1].buffer_key;
                item->offset = items[i - 1].offset + items[i - 1].byte_len;
            }
            if (shape == 2) {
                item->byte_len = 0;
            } else {
                uint64_t room = buffer_len - item->offset;
                /* Mostly short, so gaps survive; sometimes long. */
                uint64_t cap = g_test_rand_bit() ? (room < 64 ? room : 64) : room;
                item->byte_len = cap ? (uint64_t)g_test_rand_int_range(0, (gint32)cap + 1) : 0;
            }
        }
        plan_and_check(m, items, count);
        g_free(items);
        model_free(m);
    }
}

static void test_sixty_four_adjacent_4_kib_reads_become_one_span(void)
{
    model *m = model_new(1, 64 * 4096);
    curdi_copy_item items[64];
    for (size_t i = 0; i < 64; i++)
        items[i] = (curdi_copy_item){ m->keys[0], i * 4096, 4096 };
    g_assert_cmpuint(plan_and_check(m, items, 64), ==, 1);
    /* In any order. */
    shuffle_items(items, 64);
    g_assert_cmpuint(plan_and_check(m, items, 64), ==, 1);
    /* The span is the whole 256 KiB and item i stages at its offset. */
    curdi_span_list plan;
    g_assert_cmpint(curdi_spans_build(items, 64, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.spans[0].offset, ==, 0);
    g_assert_cmpuint(plan.spans[0].byte_len, ==, 64 * 4096);
    g_assert_cmpuint(plan.staging_bytes, ==, 64 * 4096);
    for (size_t i = 0; i < 64; i++)
        g_assert_cmpuint(plan.item_staging_offset[i], ==, items[i].offset);
    curdi_spans_free(&plan);
    model_free(m);
}

static void test_ranges_with_a_gap_stay_separate_spans(void)
{
    model *m = model_new(1, 8192);
    curdi_copy_item items[] = {
        { m->keys[0], 0, 100 },
        { m->keys[0], 101, 100 }, /* one byte gap */
        { m->keys[0], 4096, 4096 },
    };
    g_assert_cmpuint(plan_and_check(m, items, G_N_ELEMENTS(items)), ==, 3);
    model_free(m);
}

static void test_overlapping_ranges_fuse_into_their_union(void)
{
    model *m = model_new(1, 10000);
    curdi_copy_item items[] = {
        { m->keys[0], 1000, 500 },
        { m->keys[0], 1200, 2000 }, /* overlaps the first, extends it */
        { m->keys[0], 1300, 10 },   /* inside both */
        { m->keys[0], 900, 101 },   /* ends exactly where the first starts */
        { m->keys[0], 5000, 10 },
        { m->keys[0], 4000, 1005 }, /* overlaps the previous from below */
    };
    curdi_span_list plan;
    g_assert_cmpuint(plan_and_check(m, items, G_N_ELEMENTS(items)), ==, 2);
    g_assert_cmpint(curdi_spans_build(items, G_N_ELEMENTS(items), &plan), ==,
                    CURD_OK);
    g_assert_cmpuint(plan.spans[0].offset, ==, 900);
    g_assert_cmpuint(plan.spans[0].byte_len, ==, 3200 - 900);
    g_assert_cmpuint(plan.spans[1].offset, ==, 4000);
    g_assert_cmpuint(plan.spans[1].byte_len, ==, 1010);
    g_assert_cmpuint(plan.spans[1].staging_offset, ==, 2300);
    g_assert_cmpuint(plan.item_staging_offset[2], ==, 1300 - 900);
    g_assert_cmpuint(plan.item_staging_offset[4], ==, 2300 + 1000);
    curdi_spans_free(&plan);
    model_free(m);
}

static void test_duplicate_items_share_one_span_and_one_staging_offset(void)
{
    model *m = model_new(1, 4096);
    curdi_copy_item items[16];
    curdi_span_list plan;
    for (size_t i = 0; i < 16; i++)
        items[i] = (curdi_copy_item){ m->keys[0], 512, 1024 };
    g_assert_cmpuint(plan_and_check(m, items, 16), ==, 1);
    g_assert_cmpint(curdi_spans_build(items, 16, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.staging_bytes, ==, 1024);
    for (size_t i = 0; i < 16; i++)
        g_assert_cmpuint(plan.item_staging_offset[i], ==, 0);
    curdi_spans_free(&plan);
    model_free(m);
}

static void test_same_offsets_in_different_buffers_never_fuse(void)
{
    const size_t buffer_count = 32;
    model *m = model_new(buffer_count, 4096);
    curdi_copy_item items[32 * 2];
    size_t count = 0;
    for (size_t b = 0; b < buffer_count; b++) {
        items[count++] = (curdi_copy_item){ m->keys[b], 0, 2048 };
        items[count++] = (curdi_copy_item){ m->keys[b], 2048, 2048 };
    }
    shuffle_items(items, count);
    /* Adjacent within each buffer: one span per buffer, none across. */
    g_assert_cmpuint(plan_and_check(m, items, count), ==, buffer_count);
    model_free(m);
}

static void test_zero_length_items_make_no_span_and_stage_at_zero(void)
{
    model *m = model_new(2, 4096);
    curdi_copy_item items[] = {
        { m->keys[0], 0, 0 },
        { m->keys[0], 100, 50 },
        { m->keys[0], 125, 0 },  /* inside a span: still stages at 0 */
        { m->keys[0], 4096, 0 }, /* at the end of the buffer */
        { m->keys[1], 7, 0 },    /* the only item of its buffer */
        { m->keys[0], 150, 0 },  /* at the end of a span: no extension */
    };
    curdi_span_list plan;
    g_assert_cmpuint(plan_and_check(m, items, G_N_ELEMENTS(items)), ==, 1);
    g_assert_cmpint(curdi_spans_build(items, G_N_ELEMENTS(items), &plan), ==,
                    CURD_OK);
    g_assert_cmpuint(plan.spans[0].byte_len, ==, 50);
    g_assert_cmpuint(plan.staging_bytes, ==, 50);
    for (size_t i = 0; i < G_N_ELEMENTS(items); i++)
        g_assert_cmpuint(plan.item_staging_offset[i], ==, 0);
    curdi_spans_free(&plan);

    /* A batch of nothing but zero-length items plans no span at all. */
    curdi_copy_item empty[] = { { 1, 0, 0 }, { 2, 5, 0 } };
    g_assert_cmpint(curdi_spans_build(empty, 2, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 0);
    g_assert_cmpuint(plan.staging_bytes, ==, 0);
    g_assert_cmpuint(plan.item_count, ==, 2);
    g_assert_cmpuint(plan.item_staging_offset[0], ==, 0);
    g_assert_cmpuint(plan.item_staging_offset[1], ==, 0);
    curdi_spans_free(&plan);
    model_free(m);
}

static void test_empty_batch_gives_empty_plan(void)
{
    curdi_span_list plan;
    memset(&plan, 0xa5, sizeof plan);
    g_assert_cmpint(curdi_spans_build(NULL, 0, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 0);
    g_assert_cmpuint(plan.item_count, ==, 0);
    g_assert_cmpuint(plan.staging_bytes, ==, 0);
    curdi_spans_free(&plan);
}

/* The build fails with CURD_E_OVERFLOW, leaves the poisoned plan as it
 * was and says how to fix it. */
static void assert_overflow_leaves_the_plan_untouched(
    const curdi_copy_item *items, size_t count)
{
    curdi_span_list plan;
    memset(&plan, 0xa5, sizeof plan);
    curdi_span_list before = plan;
    g_assert_cmpint(curdi_spans_build(items, count, &plan), ==,
                    CURD_E_OVERFLOW);
    g_assert_cmpmem(&plan, sizeof plan, &before, sizeof before);
    curd_test_assert_fix_sentence();
}

static void test_item_whose_end_overflows_is_overflow_and_plan_untouched(void)
{
    curdi_copy_item items[] = {
        { 1, 0, 10 },
        { 1, UINT64_MAX, 1 },
    };
    assert_overflow_leaves_the_plan_untouched(items, 2);
    g_assert_nonnull(strstr(curd_last_error(), "item 1"));
}

static void test_staging_total_past_2_64_is_overflow(void)
{
    /* Each span fits; their sum does not. */
    curdi_copy_item items[] = {
        { 1, 0, UINT64_C(1) << 63 },
        { 2, 0, UINT64_C(1) << 63 },
    };
    assert_overflow_leaves_the_plan_untouched(items, 2);

    /* One byte less in total fits exactly. */
    curdi_span_list plan;
    memset(&plan, 0xa5, sizeof plan);
    items[1].byte_len = (UINT64_C(1) << 63) - 1;
    g_assert_cmpint(curdi_spans_build(items, 2, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.staging_bytes, ==, UINT64_MAX);
    g_assert_cmpuint(plan.spans[1].staging_offset, ==, UINT64_C(1) << 63);
    curdi_spans_free(&plan);

    /* Overlap fuses before counting: two full ranges of one buffer are one
     * span, no overflow. */
    curdi_copy_item same[] = {
        { 9, 0, UINT64_MAX },
        { 9, 1, UINT64_MAX - 1 },
    };
    g_assert_cmpint(curdi_spans_build(same, 2, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.staging_bytes, ==, UINT64_MAX);
    g_assert_cmpuint(plan.item_staging_offset[1], ==, 1);
    curdi_spans_free(&plan);
}

static void test_ranges_ending_at_2_64_minus_1_plan_exactly(void)
{
    curdi_copy_item items[] = {
        { 3, UINT64_MAX - 5, 5 },
        { 3, UINT64_MAX - 10, 5 }, /* adjacent below */
        { 3, UINT64_MAX, 0 },
    };
    curdi_span_list plan;
    g_assert_cmpint(curdi_spans_build(items, 3, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.spans[0].offset, ==, UINT64_MAX - 10);
    g_assert_cmpuint(plan.spans[0].byte_len, ==, 10);
    g_assert_cmpuint(plan.item_staging_offset[0], ==, 5);
    g_assert_cmpuint(plan.item_staging_offset[1], ==, 0);
    g_assert_cmpuint(plan.item_staging_offset[2], ==, 0);
    curdi_spans_free(&plan);
}

static void test_null_arguments_are_invalid_argument(void)
{
    curdi_copy_item item = { 1, 0, 1 };
    curdi_span_list plan;
    g_assert_cmpint(curdi_spans_build(NULL, 1, &plan), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    g_assert_cmpint(curdi_spans_build(&item, 1, NULL), ==,
                    CURD_E_INVALID_ARGUMENT);
    curd_test_assert_fix_sentence();
    /* Freeing NULL or an empty plan is harmless. */
    curdi_spans_free(NULL);
    memset(&plan, 0, sizeof plan);
    curdi_spans_free(&plan);
}

static void test_large_shuffled_batch_plans_in_one_span(void)
{
    /* 100k adjacent 64-byte reads in random order; a quadratic planner
     * would take minutes here (and under Valgrind, hours). */
    const size_t count = 100000;
    curdi_copy_item *items = g_new(curdi_copy_item, count);
    curdi_span_list plan;
    for (size_t i = 0; i < count; i++)
        items[i] = (curdi_copy_item){ 42, (uint64_t)i * 64, 64 };
    shuffle_items(items, count);
    g_assert_cmpint(curdi_spans_build(items, count, &plan), ==, CURD_OK);
    g_assert_cmpuint(plan.span_count, ==, 1);
    g_assert_cmpuint(plan.staging_bytes, ==, (uint64_t)count * 64);
    for (size_t i = 0; i < count; i++)
        g_assert_cmpuint(plan.item_staging_offset[i], ==, items[i].offset);
    curdi_spans_free(&plan);
    g_free(items);
}

static int order_entry_compare(const void *left, const void *right)
{
    const curdi_order_entry *a = left;
    const curdi_order_entry *b = right;
    if (a->major != b->major)
        return a->major < b->major ? -1 : 1;
    if (a->minor != b->minor)
        return a->minor < b->minor ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index ? 1 : 0;
}

static void test_order_sort_agrees_with_qsort(void)
{
    for (int round = 0; round < 400; round++) {
        size_t count = (size_t)g_test_rand_int_range(0, 300);
        /* Few distinct keys, so ties on major and minor are common. */
        uint64_t spread = (uint64_t)g_test_rand_int_range(1, 6);
        curdi_order_entry *entries = g_new(curdi_order_entry, count + 1);
        curdi_order_entry *scratch = g_new(curdi_order_entry, count + 1);
        curdi_order_entry *expected = g_new(curdi_order_entry, count + 1);
        for (size_t i = 0; i < count; i++) {
            entries[i].major = round % 3 == 0 ? UINT64_MAX - rand_u64() % spread
                                              : rand_u64() % spread;
            entries[i].minor = rand_u64() % spread;
            entries[i].index = i;
        }
        if (round % 5 == 1) /* already in order, or reversed */
            qsort(entries, count, sizeof *entries, order_entry_compare);
        if (round % 5 == 2)
            for (size_t i = 0; i < count / 2; i++) {
                curdi_order_entry swap = entries[i];
                entries[i] = entries[count - 1 - i];
                entries[count - 1 - i] = swap;
            }
        memcpy(expected, entries, count * sizeof *entries);
        qsort(expected, count, sizeof *expected, order_entry_compare);
        curdi_spans_order_sort(entries, scratch, count);
        for (size_t i = 0; i < count; i++) {
            g_assert_cmpuint(entries[i].major, ==, expected[i].major);
            g_assert_cmpuint(entries[i].minor, ==, expected[i].minor);
            g_assert_cmpuint(entries[i].index, ==, expected[i].index);
        }
        g_free(entries);
        g_free(scratch);
        g_free(expected);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/copyplan/random-batches-reproduce-every-requested-byte",
                    test_random_batches_reproduce_every_requested_byte);
    g_test_add_func("/copyplan/sixty-four-adjacent-4-kib-reads-become-one-span",
                    test_sixty_four_adjacent_4_kib_reads_become_one_span);
    g_test_add_func("/copyplan/ranges-with-a-gap-stay-separate-spans",
                    test_ranges_with_a_gap_stay_separate_spans);
    g_test_add_func("/copyplan/overlapping-ranges-fuse-into-their-union",
                    test_overlapping_ranges_fuse_into_their_union);
    g_test_add_func("/copyplan/duplicate-items-share-one-span-and-one-staging-offset",
                    test_duplicate_items_share_one_span_and_one_staging_offset);
    g_test_add_func("/copyplan/same-offsets-in-different-buffers-never-fuse",
                    test_same_offsets_in_different_buffers_never_fuse);
    g_test_add_func("/copyplan/zero-length-items-make-no-span-and-stage-at-zero",
                    test_zero_length_items_make_no_span_and_stage_at_zero);
    g_test_add_func("/copyplan/empty-batch-gives-empty-plan",
                    test_empty_batch_gives_empty_plan);
    g_test_add_func("/copyplan/item-whose-end-overflows-is-overflow-and-plan-untouched",
                    test_item_whose_end_overflows_is_overflow_and_plan_untouched);
    g_test_add_func("/copyplan/staging-total-past-2-64-is-overflow",
                    test_staging_total_past_2_64_is_overflow);
    g_test_add_func("/copyplan/ranges-ending-at-2-64-minus-1-plan-exactly",
                    test_ranges_ending_at_2_64_minus_1_plan_exactly);
    g_test_add_func("/copyplan/null-arguments-are-invalid-argument",
                    test_null_arguments_are_invalid_argument);
    g_test_add_func("/copyplan/large-shuffled-batch-plans-in-one-span",
                    test_large_shuffled_batch_plans_in_one_span);
    g_test_add_func("/copyplan/order-sort-agrees-with-qsort",
                    test_order_sort_agrees_with_qsort);
    return g_test_run();
}
