/* pair.c - the second device of the two-GPU scenarios. */
#include "harness/pair.h"
#include "harness/report.h"

#include <stdio.h>
#include <string.h>

/* Opens ordinal with curd and retains its primary context, into *out,
 * which takes every other setting from env. */
static int open_other(const bench_env *env, int ordinal, bench_env *out)
{
    bench_env opened = *env;
    opened.device = NULL;
    opened.context = NULL;
    BENCH_CURD(curd_device_open(ordinal, NULL, &opened.device));
    memset(&opened.props, 0, sizeof opened.props);
    opened.props.struct_size = sizeof opened.props;
    if (curd_device_info(opened.device, &opened.props) != CURD_OK ||
        env->cu->cuDeviceGet(&opened.cu_device, opened.props.ordinal) !=
            BENCH_CUDA_SUCCESS ||
        env->cu->cuDevicePrimaryCtxRetain(&opened.context,
                                          opened.cu_device) !=
            BENCH_CUDA_SUCCESS) {
        curd_device_close(opened.device);
        return bench_fail("device %d: curd_device_info, cuDeviceGet or "
                          "cuDevicePrimaryCtxRetain failed",
                          ordinal);
    }
    *out = opened;
    return 0;
}

int bench_pair_open(const bench_env *env, const char *name,
                    bench_env *second)
{
    int device_count = 0;
    if (curd_device_count(&device_count) != CURD_OK || device_count < 2) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 GPUs (%d found)", device_count);
        bench_report_skip(name, why);
        return 1;
    }
    return open_other(env, (env->props.ordinal + 1) % device_count, second);
}

int bench_gang_open(const bench_env *env, int most, bench_env *others,
                    int *out_count)
{
    int device_count = 0;
    BENCH_CURD(curd_device_count(&device_count));
    int count = device_count < most ? device_count : most;
    for (int index = 1; index < count; index++)
        if (open_other(env, (env->props.ordinal + index) % device_count,
                       &others[index - 1]) != 0) {
            while (--index >= 1)
                bench_pair_close(&others[index - 1]);
            return -1;
        }
    *out_count = count < 1 ? 1 : count;
    return 0;
}

void bench_gang_close(bench_env *others, int count)
{
    for (int index = 1; index < count; index++)
        bench_pair_close(&others[index - 1]);
}

void bench_pair_close(bench_env *second)
{
    if (second->context != NULL)
        second->cu->cuDevicePrimaryCtxRelease(second->cu_device);
    if (second->device != NULL)
        curd_device_close(second->device);
    second->context = NULL;
    second->device = NULL;
}
