/* tuned.c - devices opened under libcurd's tuning variables (see
 * harness/common.h). */
#include "harness/tuned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define BENCH_TUNED_MAX_SETTINGS 16

int bench_tuned_open(bench_tuned *tuned, const bench_env *env,
                     const char *const *settings)
{
    char *names[BENCH_TUNED_MAX_SETTINGS] = {NULL};
    char *saved[BENCH_TUNED_MAX_SETTINGS] = {NULL};
    size_t count = 0;
    curd_status status;
    int result = 0;

    memset(tuned, 0, sizeof *tuned);
    tuned->env = *env;
    for (; settings != NULL && settings[count] != NULL; count++) {
        const char *equals = strchr(settings[count], '=');
        const char *old;
        if (count == BENCH_TUNED_MAX_SETTINGS || equals == NULL) {
            result = bench_fail("bad tuning setting '%s' (a bug in the "
                                "benchmark)", settings[count]);
            break;
        }
        names[count] = strndup(settings[count],
                               (size_t)(equals - settings[count]));
        old = names[count] != NULL ? getenv(names[count]) : NULL;
        saved[count] = old != NULL ? strdup(old) : NULL;
        if (names[count] == NULL || (old != NULL && saved[count] == NULL) ||
            setenv(names[count], equals + 1, 1) != 0) {
            result = bench_fail("out of host memory for the setting '%s'",
                                settings[count]);
            count++;
            break;
        }
    }
    if (result == 0) {
        status = curd_device_open(env->props.ordinal, NULL, &tuned->env.device);
        if (status != CURD_OK)
            result = bench_fail_curd("curd_device_open (tuned)", status);
        else
            tuned->open = true;
    }
    /* Put the run's own environment back. */
    for (size_t index = 0; index < count; index++) {
        if (names[index] == NULL)
            continue;
        if (saved[index] != NULL)
            setenv(names[index], saved[index], 1);
        else
            unsetenv(names[index]);
        free(names[index]);
        free(saved[index]);
    }
    return result;
}

void bench_tuned_close(bench_tuned *tuned)
{
    if (tuned->open)
        curd_device_close(tuned->env.device);
    tuned->open = false;
}

void bench_tuning_environment(char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    for (char **entry = environ; entry != NULL && *entry != NULL; entry++) {
        int written;
        if (strncmp(*entry, "CURD_", 5) != 0 ||
            strncmp(*entry, "CURD_LIBCUDA=", 13) == 0)
            continue;
        written = snprintf(out + used, capacity - used, "%s%s",
                           used > 0 ? " " : "", *entry);
        if (written < 0 || (size_t)written >= capacity - used)
            break;
        used += (size_t)written;
    }
}
