/* peers.h - PyTorch's and CuPy's figures from bench/peers/measure.py, for
 * the scenarios that carry them as reference lines and targets.
 *
 * measure.py writes rows in curd-bench's CSV format under curd-bench's
 * scenario names (its role column "torch" or "cupy"). A run given that
 * file in CURD_BENCH_PEERS_CSV reads its figures from it, so that one run
 * on the GPU machine compares curd with the peers measured there just
 * before; without it a scenario falls back on the figures it carries,
 * each documented where it was measured. */
#ifndef CURD_TOOLS_CURD_BENCH_HARNESS_PEERS_H
#define CURD_TOOLS_CURD_BENCH_HARNESS_PEERS_H

#include <stdbool.h>
#include <stddef.h>

#define BENCH_PEERS_CSV_VARIABLE "CURD_BENCH_PEERS_CSV"

/* The median (ns per operation) of the first row of CURD_BENCH_PEERS_CSV
 * whose scenario is `scenario` and whose role is `role`, with that row's
 * variant in variant (truncated to capacity); false when the variable is
 * unset, the file unreadable or no row matches. */
bool bench_peer_median_ns(const char *scenario, const char *role,
                          double *out_ns, char *variant, size_t capacity);

#endif
