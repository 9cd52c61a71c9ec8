/* json-writer.h - the one JSON writer of curd-info and curd-bench.
 *
 * Writes to a stdio stream as the calls come, placing the commas itself:
 * a value inside an object follows its json_key(), a value inside an array
 * follows the previous one. Strings are escaped as RFC 8259 requires
 * (quote, backslash, control characters); other bytes pass through, so
 * UTF-8 stays UTF-8. Numbers that are not finite are written as null.
 * The writer does not check the nesting: the tools' code shapes it.
 *
 * Why not libjansson or json-c: the tools only write JSON, never read it,
 * as they go and from fixed shapes; what a library would add is a DOM
 * built and freed per report and a runtime dependency of curd-tools (and
 * a build dependency), for the one part that matters here, the string
 * escaping, which is 25 lines below and tested byte for byte
 * (tests/test-json-writer.c). The day a tool reads JSON, a library earns
 * its place. */
#ifndef CURD_TOOLS_JSON_WRITER_H
#define CURD_TOOLS_JSON_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_WRITER_MAX_DEPTH 16

typedef struct json_writer {
    FILE *out;
    unsigned depth;
    /* Whether the container at each depth already holds a value. */
    bool has_value[JSON_WRITER_MAX_DEPTH];
    /* A key was just written: the next value needs no comma. */
    bool after_key;
} json_writer;

void json_writer_init(json_writer *writer, FILE *out);

void json_object_begin(json_writer *writer);
void json_object_end(json_writer *writer);
void json_array_begin(json_writer *writer);
void json_array_end(json_writer *writer);

void json_key(json_writer *writer, const char *key);
void json_string(json_writer *writer, const char *text);
void json_int(json_writer *writer, long long value);
void json_uint(json_writer *writer, uint64_t value);
void json_double(json_writer *writer, double value);
void json_bool(json_writer *writer, bool value);
void json_null(json_writer *writer);

/* A key and its value, the usual pair inside an object. */
void json_member_string(json_writer *writer, const char *key,
                        const char *text);
void json_member_int(json_writer *writer, const char *key, long long value);
void json_member_uint(json_writer *writer, const char *key, uint64_t value);
void json_member_double(json_writer *writer, const char *key, double value);
void json_member_bool(json_writer *writer, const char *key, bool value);

#endif
