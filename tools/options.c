/* options.c - the sentence about a refused option (options.h). */
#include "options.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

void tool_bad_option(const char *program, const char *argument, int refused)
{
    const char *value = strchr(argument, '=');
    if (refused > 0 && refused <= UCHAR_MAX)
        fprintf(stderr, "%s: unknown option '-%c'\n", program, refused);
    else if (refused == 0)
        fprintf(stderr, "%s: unknown option '%s'\n", program, argument);
    else if (value != NULL)
        fprintf(stderr, "%s: option '%.*s' takes no value\n", program,
                (int)(value - argument), argument);
    else
        fprintf(stderr, "%s: option '%s' needs a value (%s=VALUE)\n",
                program, argument, argument);
}
