/* report-run.c - the helpers the table and the writers share. */
#include "harness/report-run.h"

const char *bench_role_name(bench_role role)
{
    return role == BENCH_ROLE_CURD  ? "curd"
           : role == BENCH_ROLE_REF ? "ref"
                                    : "raw";
}

const char *bench_check_result(const bench_check *check)
{
    if (!check->has_target)
        return "-";
    return check->pass ? "PASS" : "MISS";
}

double bench_gb_per_s(uint64_t byte_count, double ns)
{
    /* Decimal GB/s: bytes per nanosecond. */
    return ns > 0.0 ? (double)byte_count / ns : 0.0;
}
