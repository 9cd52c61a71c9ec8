/* fuzz-api-faults.c - sequences of public calls on the stand-in driver,
 * each with a driver call of the fuzzer's choosing failing, and after
 * each the fault sweep's invariants (tests/support/api-sweep.h): a typed
 * error with the injected code, every statistic by its rule, the
 * bystander's bytes, nothing leaked, a device that works (or, once lost,
 * opens again and works).
 *
 * Where the sweep fails each call of one entry in turn on a fresh world,
 * this runs the entries of tests/support/api-ops.c in the fuzzer's order
 * on one world, so a failure meets the state earlier failures left:
 * pooled streams and events half reused, caches trimmed or grown, modules
 * evicted, uploads pending, a device reopened after a loss.
 *
 * Input: 8 bytes of seed for the world's random bytes, then up to 24
 * steps of 3 bytes: the entry (mod the list's length), the driver call to
 * fail (0: none; past the entry's last call: none fires), and which
 * CUresult (api_fault_results, by the low bit). The world opens per input
 * and closes at its end, where the stand-in must hold nothing but what a
 * failed context push abandoned on purpose.
 *
 * Built from the whole library and the sweep's files
 * (FUZZ_SRCS_api-faults in fuzz.mk). */
#include "fuzz.h"

#include "support/api-sweep.h"

#define MAX_STEPS 24u

static api_tally tally;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_use_stand_in_driver();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    api_world world;
    uint64_t seed = fuzz_u64(&in);
    curd_status status = api_world_open(&world, seed);
    if (status != CURD_OK) {
        fprintf(stderr, "fuzz-api-faults: cannot open the stand-in device:"
                        " %s: %s\n",
                curd_status_name(status), curd_last_error());
        abort();
    }
    for (unsigned step = 0; step < MAX_STEPS && fuzz_more(&in); step++) {
        const api_op *op = &api_ops[fuzz_u8(&in) % api_op_count];
        unsigned fail_at = fuzz_u8(&in);
        int cu_result =
            api_fault_results[fuzz_u8(&in) % api_fault_result_count];
        (void)api_sweep_run(&world, op, fail_at, cu_result, &tally);
    }
    api_world_close_checked(&world, &tally);
    return 0;
}
