/* pair.c - the second device of the two-GPU scenarios. */
#include "harness/pair.h"
#include "harness/report.h"

#include <stdio.h>
#include <string.h>

int bench_pair_open(const bench_env *env, const char *name,
                    bench_env *second)
{
    int device_count = 0;
    bench_env opened = *env;

    if (curd_device_count(&device_count) != CURD_OK || device_count < 2) {
        char why[64];
        snprintf(why, sizeof why, "needs 2 GPUs (%d found)", device_count);
        bench_report_skip(name, why);
        return 1;
    }
    opened.device = NULL;
    opened.context = NULL;
    BENCH_CURD(curd_device_open((env->props.ordinal + 1) % device_count, NULL,
                                &opened.device));
    memset(&opened.props, 0, sizeof opened.props);
    opened.props.struct_size = sizeof opened.props;
    if (curd_device_info(opened.device, &opened.props) != CURD_OK ||
        env->cu->cuDeviceGet(&opened.cu_device, opened.props.ordinal) !=
            BENCH_CUDA_SUCCESS ||
        env->cu->cuDevicePrimaryCtxRetain(&opened.context,
                                          opened.cu_device) !=
            BENCH_CUDA_SUCCESS) {
        curd_device_close(opened.device);
        return bench_fail("the second device (ordinal %d): curd_device_info,"
                          " cuDeviceGet or cuDevicePrimaryCtxRetain failed",
                          (env->props.ordinal + 1) % device_count);
    }
    *second = opened;
    return 0;
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
