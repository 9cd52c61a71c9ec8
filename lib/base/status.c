/* status.c - status names, the thread's error sentence, tracing, version. */
#include "base/status.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Version
 * ---------------------------------------------------------------------- */
#define CURDI_STRINGIFY_(x) #x
#define CURDI_STRINGIFY(x) CURDI_STRINGIFY_(x)

CURD_API unsigned curd_version(void)
{
    return CURD_VERSION_NUMBER;
}

CURD_API const char *curd_version_string(void)
{
    return CURDI_STRINGIFY(CURD_VERSION_MAJOR) "." CURDI_STRINGIFY(
        CURD_VERSION_MINOR) "." CURDI_STRINGIFY(CURD_VERSION_PATCH);
}

/* ------------------------------------------------------------------------
 * Status names
 * ---------------------------------------------------------------------- */
CURD_API const char *curd_status_name(curd_status status)
{
    switch (status) {
    case CURD_OK:
        return "CURD_OK";
    case CURD_E_INVALID_ARGUMENT:
        return "CURD_E_INVALID_ARGUMENT";
    case CURD_E_RANGE:
        return "CURD_E_RANGE";
    case CURD_E_OVERFLOW:
        return "CURD_E_OVERFLOW";
    case CURD_E_BUDGET:
        return "CURD_E_BUDGET";
    case CURD_E_OUT_OF_MEMORY:
        return "CURD_E_OUT_OF_MEMORY";
    case CURD_E_NO_DRIVER:
        return "CURD_E_NO_DRIVER";
    case CURD_E_NO_DEVICE:
        return "CURD_E_NO_DEVICE";
    case CURD_E_DRIVER:
        return "CURD_E_DRIVER";
    case CURD_E_STALE_HANDLE:
        return "CURD_E_STALE_HANDLE";
    case CURD_E_BUSY:
        return "CURD_E_BUSY";
    case CURD_E_UNSUPPORTED:
        return "CURD_E_UNSUPPORTED";
    case CURD_E_PROGRAM:
        return "CURD_E_PROGRAM";
    case CURD_E_DEVICE_LOST:
        return "CURD_E_DEVICE_LOST";
    case CURD_E_COMM:
        return "CURD_E_COMM";
    }
    return "CURD_E_UNKNOWN";
}

/* ------------------------------------------------------------------------
 * The thread's last failure
 * ---------------------------------------------------------------------- */
#define CURDI_ERROR_CAPACITY 1024

static _Thread_local char last_error[CURDI_ERROR_CAPACITY];
static _Thread_local int last_driver_code;

CURD_API const char *curd_last_error(void)
{
    return last_error;
}

CURD_API int curd_last_driver_code(void)
{
    return last_driver_code;
}

void curdi_status_note_driver_code(int cu_result)
{
    last_driver_code = cu_result;
}

static _Thread_local bool refuse_next_copy;

void curdi_status_refuse_next_copy_for_test(void)
{
    refuse_next_copy = true;
}

/* The last "Fix:" in text, NULL when there is none. */
static const char *last_fix(const char *text)
{
    const char *fix = strstr(text, "Fix:");
    const char *next;
    while (fix != NULL && (next = strstr(fix + 1, "Fix:")) != NULL)
        fix = next;
    return fix;
}

/* last_error holds the head of a sentence too long for it: ends it with
 * " ... " and the tail (its last three quarters of the buffer at most, so
 * that a quarter is left for the head). */
static void join_tail(const char *tail, size_t tail_len)
{
    const size_t capacity = sizeof last_error;
    const char joint[] = " ... ";
    if (tail_len > capacity / 4 * 3) {
        tail += tail_len - capacity / 4 * 3;
        tail_len = capacity / 4 * 3;
    }
    size_t at = capacity - 1 - tail_len - (sizeof joint - 1);
    memcpy(last_error + at, joint, sizeof joint - 1);
    at += sizeof joint - 1;
    memcpy(last_error + at, tail, tail_len);
    at += tail_len;
    last_error[at] = '\0';
}

/* A sentence longer than the buffer keeps its head and its "Fix: ..." tail
 * (the part a reader needs most), joined by " ... ". */
static void store_long_message(const char *message, size_t length)
{
    memcpy(last_error, message, sizeof last_error - 1);
    last_error[sizeof last_error - 1] = '\0';
    const char *fix = last_fix(message);
    if (fix != NULL)
        join_tail(fix, length - (size_t)(fix - message));
}

/* The format's last "Fix:" clause as the sentence ends with it, when it is
 * plain text to the end ("%%" is one '%', any other conversion disqualifies
 * it): written to out with its length returned. 0 when there is none, or
 * it needs formatting, or it is longer than out_capacity - 1. */
static size_t literal_fix_of(const char *format, char *out,
                             size_t out_capacity)
{
    const char *fix = last_fix(format);
    if (fix == NULL)
        return 0;
    size_t length = 0;
    for (const char *c = fix; *c != '\0'; c++) {
        if (*c == '%' && *++c != '%')
            return 0;
        if (length + 1 >= out_capacity)
            return 0;
        out[length++] = *c;
    }
    out[length] = '\0';
    return length;
}

/* The full copy of a long sentence could not be allocated, so last_error
 * holds only its head, which may have lost the "Fix: ..." ending. Ends it
 * with the format's own fix when that is plain text (most are), or else
 * with one that says what happened: a sentence always ends with a fix. */
static void store_cut_message(const char *format)
{
    char fix[CURDI_ERROR_CAPACITY / 4 * 3 + 1];
    size_t fix_len = literal_fix_of(format, fix, sizeof fix);
    if (fix_len == 0) {
        static const char cut[] =
            "Fix: the end of this sentence, its own fix with it, was cut "
            "for lack of host memory; free host memory and retry to read it "
            "whole.";
        memcpy(fix, cut, sizeof cut);
        fix_len = sizeof cut - 1;
    }
    join_tail(fix, fix_len);
}

curd_status curdi_fail(curd_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int length = vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    if (length < 0) {
        snprintf(last_error, sizeof last_error,
                 "%s (the error message could not be formatted). Fix: "
                 "report this as a curd bug.",
                 curd_status_name(status));
    } else if ((size_t)length >= sizeof last_error) {
        /* Too long: format again in full, then keep the head and the fix. */
        char *full = NULL;
        if (refuse_next_copy)
            refuse_next_copy = false; /* as malloc would, for a test */
        else
            full = malloc((size_t)length + 1);
        if (full != NULL) {
            va_start(args, format);
            vsnprintf(full, (size_t)length + 1, format, args);
            va_end(args);
            store_long_message(full, (size_t)length);
            free(full);
        } else {
            store_cut_message(format);
        }
    }
    curdi_trace("%s: %s", curd_status_name(status), last_error);
    return status;
}

/* ------------------------------------------------------------------------
 * Tracing
 * ---------------------------------------------------------------------- */
/* -1: not read yet; 0: off; 1: on. CURD_TRACE is read once per process. */
static atomic_int trace_state = -1;

bool curdi_trace_enabled(void)
{
    int state = atomic_load_explicit(&trace_state, memory_order_relaxed);
    if (state < 0) {
        const char *value = getenv("CURD_TRACE");
        state = value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
        atomic_store_explicit(&trace_state, state, memory_order_relaxed);
    }
    return state != 0;
}

void curdi_trace(const char *format, ...)
{
    if (!curdi_trace_enabled())
        return;
    char line[1200];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    /* One fprintf per line so lines from threads do not interleave. */
    fprintf(stderr, "curd: %s\n", line);
}
