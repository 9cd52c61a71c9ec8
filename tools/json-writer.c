/* json-writer.c - the one JSON writer of curd-info and curd-bench. */
#include "json-writer.h"

#include <inttypes.h>
#include <math.h>

void json_writer_init(json_writer *writer, FILE *out)
{
    writer->out = out;
    writer->depth = 0;
    writer->has_value[0] = false;
    writer->after_key = false;
}

/* Before any value or key: the comma that separates it from the previous
 * one in its container. */
static void separate(json_writer *writer)
{
    if (writer->after_key) {
        writer->after_key = false;
        return;
    }
    if (writer->has_value[writer->depth])
        fputc(',', writer->out);
    writer->has_value[writer->depth] = true;
}

static void open_container(json_writer *writer, char bracket)
{
    separate(writer);
    fputc(bracket, writer->out);
    /* Deeper than the tools ever nest: keep writing, without commas,
     * rather than index past the array. */
    if (writer->depth + 1 < JSON_WRITER_MAX_DEPTH)
        writer->depth++;
    writer->has_value[writer->depth] = false;
}

static void close_container(json_writer *writer, char bracket)
{
    fputc(bracket, writer->out);
    if (writer->depth > 0)
        writer->depth--;
}

void json_object_begin(json_writer *writer)
{
    open_container(writer, '{');
}

void json_object_end(json_writer *writer)
{
    close_container(writer, '}');
}

void json_array_begin(json_writer *writer)
{
    open_container(writer, '[');
}

void json_array_end(json_writer *writer)
{
    close_container(writer, ']');
}

static void write_escaped(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0';
         c++) {
        switch (*c) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*c < 0x20)
                fprintf(out, "\\u%04x", *c);
            else
                fputc(*c, out);
        }
    }
    fputc('"', out);
}

void json_key(json_writer *writer, const char *key)
{
    separate(writer);
    write_escaped(writer->out, key);
    fputc(':', writer->out);
    writer->after_key = true;
}

void json_string(json_writer *writer, const char *text)
{
    separate(writer);
    write_escaped(writer->out, text);
}

void json_int(json_writer *writer, long long value)
{
    separate(writer);
    fprintf(writer->out, "%lld", value);
}

void json_uint(json_writer *writer, uint64_t value)
{
    separate(writer);
    fprintf(writer->out, "%" PRIu64, value);
}

void json_double(json_writer *writer, double value)
{
    separate(writer);
    if (isfinite(value))
        fprintf(writer->out, "%.6g", value);
    else
        fputs("null", writer->out);
}

void json_bool(json_writer *writer, bool value)
{
    separate(writer);
    fputs(value ? "true" : "false", writer->out);
}

void json_null(json_writer *writer)
{
    separate(writer);
    fputs("null", writer->out);
}

void json_member_string(json_writer *writer, const char *key, const char *text)
{
    json_key(writer, key);
    json_string(writer, text);
}

void json_member_int(json_writer *writer, const char *key, long long value)
{
    json_key(writer, key);
    json_int(writer, value);
}

void json_member_uint(json_writer *writer, const char *key, uint64_t value)
{
    json_key(writer, key);
    json_uint(writer, value);
}

void json_member_double(json_writer *writer, const char *key, double value)
{
    json_key(writer, key);
    json_double(writer, value);
}

void json_member_bool(json_writer *writer, const char *key, bool value)
{
    json_key(writer, key);
    json_bool(writer, value);
}
