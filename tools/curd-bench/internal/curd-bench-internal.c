/* curd-bench-internal - micro-benchmarks of libcurd's internals, which
 * the shipped curd-bench cannot see through the public API.
 *
 * Linked statically with libcurd.a, built by `make bench-internal` as
 * $(BUILD)/bench/curd-bench-internal, never installed or packaged. It
 * shares curd-bench's harness, options and report (tools/curd-bench/harness/).
 * Exit status: see tools/curd-bench/harness/main.h. */
#include "harness/main.h"
#include "internal/internal.h"

static const bench_scenario_entry scenarios[] = {
    {"pool/device-hit",
     "4 KiB device-pool cache hit: the pool alone vs curd_block_acquire",
     bench_internal_device_hit, false},
    {"pool/pinned-hit",
     "4 KiB pinned-pool cache hit: the pool alone vs curd_block_acquire",
     bench_internal_pinned_hit, false},
    {"pool/threads",
     "the pool alone at 1, 2, 4, 8 threads, shared vs a private pool per "
     "thread (the machine's ceiling)",
     bench_internal_threads, false},
};

int main(int argc, char **argv)
{
    static const bench_program program = {
        "curd-bench-internal", scenarios,
        sizeof scenarios / sizeof scenarios[0]};
    return bench_main(&program, argc, argv);
}
