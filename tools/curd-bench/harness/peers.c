/* peers.c - PyTorch's and CuPy's figures from measure.py's CSV (see
 * peers.h). */
#include "harness/peers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next field of a CSV line from *cursor into out (quotes as
 * measure.py's csv_field writes them: a quoted field, "" for a quote);
 * false at the line's end. */
static bool next_field(const char **cursor, char *out, size_t capacity)
{
    const char *at = *cursor;
    size_t length = 0;
    bool quoted = *at == '"';
    if (*at == '\0' || *at == '\n')
        return false;
    if (quoted)
        at++;
    while (*at != '\0' && *at != '\n') {
        if (quoted && *at == '"') {
            if (at[1] != '"') {
                at++;
                quoted = false;
                continue;
            }
            at++;
        } else if (!quoted && *at == ',') {
            break;
        }
        if (length + 1 < capacity)
            out[length++] = *at;
        at++;
    }
    out[length] = '\0';
    *cursor = *at == ',' ? at + 1 : at;
    return true;
}

bool bench_peer_median_ns(const char *scenario, const char *role,
                          double *out_ns, char *variant, size_t capacity)
{
    const char *path = getenv(BENCH_PEERS_CSV_VARIABLE);
    char line[1024];
    bool found = false;
    FILE *file;
    if (path == NULL || path[0] == '\0')
        return false;
    file = fopen(path, "r");
    if (file == NULL)
        return false;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        /* scenario,variant,role,size_bytes,threads,median,... */
        char fields[6][256];
        const char *cursor = line;
        unsigned count = 0;
        if (line[0] == '#')
            continue;
        while (count < 6 && next_field(&cursor, fields[count],
                                       sizeof fields[count]))
            count++;
        if (count < 6 || strcmp(fields[0], scenario) != 0
            || strcmp(fields[2], role) != 0)
            continue;
        char *end = NULL;
        double median = strtod(fields[5], &end);
        if (end == fields[5] || median <= 0.0)
            continue;
        *out_ns = median;
        if (variant != NULL && capacity > 0)
            snprintf(variant, capacity, "%s", fields[1]);
        found = true;
    }
    fclose(file);
    return found;
}
