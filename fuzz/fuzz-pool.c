/* fuzz-pool.c - fuzzer-chosen pool operation sequences against the
 * reference model of tests/pool-model.h.
 *
 * Input: a configuration (cache budget, live limit, upstream capacity),
 * then operations, each an opcode byte and its arguments: acquire (sizes
 * from 0 to past the largest class), release of a live block, release of a
 * stale or foreign address, trim, statistics reset, and "fail the next
 * upstream allocation" (as out of memory, so the ladder runs, or as another
 * error). After every operation the status, the address of a cache hit,
 * the class and every statistic but upstream_ns must equal the model's,
 * and the upstream must hold exactly the bytes the model says. At the end
 * everything is released and destroyed and the upstream holds nothing.
 *
 * fuzz-srcs: lib/memory/pool.c lib/memory/pool_records.c lib/memory/pool_shards.c lib/memory/pool_fronts.c lib/base/hash_map.c lib/base/checked.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "../tests/pool-model.h"

/* Keep real allocations small: the upstream mallocs what it hands out. */
#define FUZZ_POOL_CAPACITY_MAX ((uint64_t)16 << 20)
#define FUZZ_POOL_MAX_OPS 4096u

static const size_t common_sizes[] = {1,     255,   256,    257,   1000,
                                      2048,  2049,  4096,   5000,  65536,
                                      65537, 100000, 262144, 1 << 20};

static size_t fuzz_size(fuzz_input *in)
{
    uint8_t shape = fuzz_u8(in);
    switch (shape & 3u) {
    case 0:
        return common_sizes[(shape >> 2) % (sizeof common_sizes /
                                            sizeof common_sizes[0])];
    case 1:
        return (size_t)(fuzz_u64(in) & 0x3FFFFFu); /* up to 4 MiB */
    case 2:
        return (size_t)fuzz_shaped_u64(in); /* anything, SIZE_MAX included */
    default:
        return (size_t)(fuzz_u64(in) & 0xFFFu);
    }
}

static void check_stats(curdi_pool *pool, const pool_model *model,
                        const pm_upstream *upstream)
{
    curd_pool_stats stats;
    curdi_pool_report_stats(pool, &stats);
    char why[256];
    if (!pm_compare(model, &stats, why, sizeof why)) {
        fprintf(stderr, "statistics differ: %s\n", why);
        FUZZ_CHECK(false);
    }
    FUZZ_CHECK(upstream->held_bytes == model->held);
    FUZZ_CHECK(upstream->attempts == model->attempts);
    FUZZ_CHECK(stats.cached_bytes.current <= model->budget);
}

static void do_acquire(curdi_pool *pool, pool_model *model, size_t byte_len,
                       uint64_t *handed, size_t *handed_count)
{
    uint64_t address = 0;
    size_t class_bytes = 0;
    curd_status got = curdi_pool_acquire(pool, byte_len, &address, &class_bytes);
    uint64_t predicted = 0;
    size_t want_class = 0;
    curd_status want = pm_acquire(model, byte_len, got == CURD_OK ? address : 0,
                                  &predicted, &want_class);
    if (got != want) {
        fprintf(stderr, "acquire %zu: pool %s (%s), model %s\n", byte_len,
                curd_status_name(got), curd_last_error(),
                curd_status_name(want));
        FUZZ_CHECK(false);
    }
    if (got != CURD_OK) {
        fuzz_check_fix_sentence();
        return;
    }
    FUZZ_CHECK(class_bytes == want_class);
    FUZZ_CHECK(predicted == 0 || address == predicted);
    /* The block is real memory of its whole class. */
    memset((void *)(uintptr_t)address, 0x5A, class_bytes);
    handed[*handed_count % 64] = address;
    (*handed_count)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    uint8_t config = fuzz_u8(&in);
    static const uint64_t budgets[] = {0, 256, 4096, 100000, 1 << 20, 64 << 20};
    uint64_t budget = budgets[config % 6u];
    uint64_t limit = (config & 0x40u) ? (fuzz_u64(&in) & 0xFFFFFFu) : 0;
    uint64_t capacity = (config & 0x80u)
                            ? (fuzz_u64(&in) % FUZZ_POOL_CAPACITY_MAX)
                            : FUZZ_POOL_CAPACITY_MAX;

    pm_upstream upstream;
    pm_upstream_init(&upstream, capacity);
    curdi_upstream table = pm_upstream_table(&upstream);
    curdi_pool_config pool_config = {
        .name = "fuzz",
        .cache_budget_bytes = budget,
        .live_limit_bytes = limit,
    };
    curdi_pool *pool = NULL;
    FUZZ_CHECK(curdi_pool_lifecycle_create(&table, &pool_config, &pool)
               == CURD_OK);
    pool_model model;
    pm_init(&model, budget, limit, capacity);
    uint64_t handed[64] = {0};
    size_t handed_count = 0;

    for (unsigned op = 0; op < FUZZ_POOL_MAX_OPS && fuzz_more(&in); op++) {
        uint8_t code = fuzz_u8(&in);
        switch (code % 8u) {
        case 0:
        case 1:
        case 2:
            do_acquire(pool, &model, fuzz_size(&in), handed, &handed_count);
            break;
        case 3:
        case 4:
            if (model.live_count > 0) {
                uint64_t address =
                    model.live[fuzz_u8(&in) % model.live_count].address;
                FUZZ_CHECK(curdi_pool_release(pool, address) == CURD_OK);
                FUZZ_CHECK(pm_release(&model, address) == CURD_OK);
            }
            break;
        case 5: {
            /* Stale or foreign: an address handed out before (maybe live
             * again, maybe not), or any number. */
            uint64_t address = (code & 0x80u) && handed_count > 0
                                   ? handed[fuzz_u8(&in) % (handed_count < 64
                                                                ? handed_count
                                                                : 64)]
                                   : fuzz_u64(&in);
            curd_status got = curdi_pool_release(pool, address);
            curd_status want = pm_release(&model, address);
            FUZZ_CHECK(got == want);
            if (got != CURD_OK)
                fuzz_check_fix_sentence();
            break;
        }
        case 6: {
            uint64_t keep = (code & 0x80u) ? 0 : (fuzz_u64(&in) & 0x3FFFFFFu);
            FUZZ_CHECK(curdi_pool_trim(pool, keep) == pm_trim(&model, keep));
            break;
        }
        default:
            if (code & 0x80u) {
                curdi_pool_report_stats_reset(pool);
                pm_stats_reset(&model);
            } else {
                upstream.fail_at = model.fail_at = model.attempts + 1;
                upstream.fail_status = model.fail_status =
                    (code & 0x40u) ? CURD_E_DRIVER : CURD_E_OUT_OF_MEMORY;
            }
            break;
        }
        check_stats(pool, &model, &upstream);
    }

    while (model.live_count > 0) {
        uint64_t address = model.live[0].address;
        FUZZ_CHECK(curdi_pool_release(pool, address) == CURD_OK);
        FUZZ_CHECK(pm_release(&model, address) == CURD_OK);
    }
    check_stats(pool, &model, &upstream);
    curdi_pool_lifecycle_destroy(pool);
    FUZZ_CHECK(upstream.held_bytes == 0);
    FUZZ_CHECK(upstream.held_blocks == 0);
    pm_upstream_fini(&upstream);
    pm_fini(&model);
    return 0;
}
