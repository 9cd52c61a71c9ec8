/* test-json-writer.c - the JSON writer of curd-info and curd-bench
 * (tools/json-writer.c), byte for byte: commas placed by nesting, strings
 * escaped as RFC 8259 requires, UTF-8 passed through, numbers that are
 * not finite written as null. The project keeps this writer rather than
 * a JSON library (see json-writer.h), so this test is what stands for a
 * library's own. */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json-writer.h"

/* Runs write() on a writer over a memory stream and returns what it
 * wrote (g_free it). */
static char *written(void (*write)(json_writer *json))
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    g_assert_nonnull(out);
    json_writer json;
    json_writer_init(&json, out);
    write(&json);
    g_assert_cmpint(fclose(out), ==, 0);
    char *copy = g_strndup(text, text_len);
    free(text);
    return copy;
}

static void write_nested(json_writer *json)
{
    json_object_begin(json);
    json_member_int(json, "a", -1);
    json_key(json, "list");
    json_array_begin(json);
    json_uint(json, UINT64_MAX);
    json_array_begin(json);
    json_array_end(json);
    json_object_begin(json);
    json_object_end(json);
    json_bool(json, false);
    json_null(json);
    json_array_end(json);
    json_member_bool(json, "ok", true);
    json_object_end(json);
}

static void test_commas_follow_the_nesting(void)
{
    char *text = written(write_nested);
    g_assert_cmpstr(text, ==,
                    "{\"a\":-1,\"list\":[18446744073709551615,[],{},false,"
                    "null],\"ok\":true}");
    g_free(text);
}

static void write_strings(json_writer *json)
{
    json_array_begin(json);
    json_string(json, "quote \" backslash \\ slash /");
    json_string(json, "tab\tnewline\ncarriage\rbell\a\x01\x1f");
    json_string(json, "caf\xc3\xa9 \xe2\x86\x92 GB/s");
    json_string(json, "");
    json_array_end(json);
}

static void test_strings_are_escaped_and_utf8_passes(void)
{
    char *text = written(write_strings);
    g_assert_cmpstr(text, ==,
                    "[\"quote \\\" backslash \\\\ slash /\","
                    "\"tab\\tnewline\\ncarriage\\rbell\\u0007\\u0001\\u001f\","
                    "\"caf\xc3\xa9 \xe2\x86\x92 GB/s\",\"\"]");
    g_free(text);
}

static void write_keys(json_writer *json)
{
    json_object_begin(json);
    json_member_string(json, "we\"ird\nkey", "v");
    json_object_end(json);
}

static void test_keys_are_escaped_too(void)
{
    char *text = written(write_keys);
    g_assert_cmpstr(text, ==, "{\"we\\\"ird\\nkey\":\"v\"}");
    g_free(text);
}

static void write_doubles(json_writer *json)
{
    json_array_begin(json);
    json_double(json, 0.5);
    json_double(json, 1234567.0);
    json_double(json, -2.5e-9);
    json_double(json, NAN);
    json_double(json, INFINITY);
    json_double(json, -INFINITY);
    json_array_end(json);
}

static void test_doubles_are_numbers_or_null(void)
{
    char *text = written(write_doubles);
    g_assert_cmpstr(text, ==, "[0.5,1.23457e+06,-2.5e-09,null,null,null]");
    g_free(text);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/json-writer/commas-follow-the-nesting",
                    test_commas_follow_the_nesting);
    g_test_add_func("/json-writer/strings-are-escaped-and-utf8-passes",
                    test_strings_are_escaped_and_utf8_passes);
    g_test_add_func("/json-writer/keys-are-escaped-too",
                    test_keys_are_escaped_too);
    g_test_add_func("/json-writer/doubles-are-numbers-or-null",
                    test_doubles_are_numbers_or_null);
    return g_test_run();
}
