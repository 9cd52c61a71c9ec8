/* options.c - the checks of the versioned structs a caller passes in and
 * gets filled in (struct_size first): curdi_options_check and
 * curdi_options_result_struct_check. Declared in core.h. */
#include "core/core.h"

#include <stddef.h>
#include <string.h>

#include "base/status.h"

/* Past this many unknown bytes a struct_size is garbage, not a newer
 * caller: refuse it rather than read that far. */
#define CURDI_OPTIONS_MAX_TAIL 4096u

curd_status curdi_options_check(const void *options, size_t known_size,
                                size_t min_size, const char *what)
{
    if (options == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "The %s pointer is NULL. Fix: pass NULL where the "
                          "call allows it for the defaults, or a struct set "
                          "up by its _init function.",
                          what);
    size_t struct_size;
    memcpy(&struct_size, options, sizeof struct_size);
    if (struct_size < min_size)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s.struct_size is %zu, smaller than the %zu bytes "
                          "of the oldest version of that struct. Fix: "
                          "initialise it with its _init function (or set "
                          "struct_size = sizeof(%s)).",
                          what, struct_size, min_size, what);
    if (struct_size > known_size &&
        struct_size - known_size > CURDI_OPTIONS_MAX_TAIL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s.struct_size is %zu, implausibly larger than "
                          "the %zu bytes this library knows. Fix: "
                          "initialise it with its _init function.",
                          what, struct_size, known_size);
    const unsigned char *bytes = options;
    for (size_t at = known_size; at < struct_size; at++)
        if (bytes[at] != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s sets byte %zu, in a field this version of "
                              "curd (%s) does not know (it knows %zu bytes, "
                              "struct_size is %zu). Fix: leave fields of "
                              "newer versions zero, or link a newer libcurd.",
                              what, at, curd_version_string(), known_size,
                              struct_size);
    return CURD_OK;
}

curd_status curdi_options_result_struct_check(const void *result,
                                              size_t min_size,
                                              const char *call,
                                              const char *param,
                                              const char *type)
{
    if (result == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s is NULL. Fix: pass a %s with struct_size "
                          "set.",
                          call, param, type);
    size_t struct_size;
    memcpy(&struct_size, result, sizeof struct_size);
    if (struct_size < min_size)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s->struct_size is %zu, smaller than the %zu "
                          "bytes of %s. Fix: set %s->struct_size = "
                          "sizeof(%s).",
                          call, param, struct_size, min_size, type, param,
                          type);
    return CURD_OK;
}
