/* image.c - images told apart by content; image.h says what each call
 * promises.
 *
 * Read top to bottom: the kind (PTX's leading white space and comments),
 * the first bytes as a sentence shows them, the check, the entry names. */
#include "launch/image.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

#define CURDI_FATBIN_MAGIC 0xBA55ED50u

static size_t skip_space_and_comments(const unsigned char *text, size_t len,
                                      size_t at)
{
    while (at < len && text[at] != '\0') {
        unsigned char c = text[at];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
            c == '\v') {
            at++;
        } else if (c == '/' && at + 1 < len && text[at + 1] == '/') {
            while (at < len && text[at] != '\0' && text[at] != '\n')
                at++;
        } else if (c == '/' && at + 1 < len && text[at + 1] == '*') {
            at += 2;
            while (at + 1 < len && text[at] != '\0' &&
                   !(text[at] == '*' && text[at + 1] == '/'))
                at++;
            at = at + 1 < len && text[at] == '*' ? at + 2 : len;
        } else {
            break;
        }
    }
    return at;
}

int curdi_image_kind_of(const void *image, size_t image_bytes)
{
    const unsigned char *bytes = image;
    if (image == NULL || image_bytes == 0)
        return 0;
    if (image_bytes >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' &&
        bytes[2] == 'L' && bytes[3] == 'F')
        return CURD_IMAGE_CUBIN;
    if (image_bytes >= 4 &&
        ((uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 |
         (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24) ==
            CURDI_FATBIN_MAGIC)
        return CURD_IMAGE_FATBIN;
    size_t at = skip_space_and_comments(bytes, image_bytes, 0);
    if (image_bytes - at >= 8 && memcmp(bytes + at, ".version", 8) == 0)
        return CURD_IMAGE_PTX;
    return 0;
}

/* The first bytes of an image, as hex and as text, for a sentence. */
static void describe_first_bytes(const unsigned char *bytes, size_t len,
                                 char *out, size_t capacity)
{
    size_t shown = len < 8 ? len : 8, at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < shown && at + 4 < capacity; i++)
        at += (size_t)snprintf(out + at, capacity - at, "%s%02x",
                               i == 0 ? "" : " ", bytes[i]);
    if (at + 8 >= capacity)
        return;
    at += (size_t)snprintf(out + at, capacity - at, " (\"");
    for (size_t i = 0; i < shown && at + 6 < capacity; i++) {
        unsigned char c = bytes[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[at++] = (char)c;
        else
            at += (size_t)snprintf(out + at, capacity - at, "\\x%02x", c);
    }
    snprintf(out + at, capacity - at, "\")");
}

curd_status curdi_image_check(const void *image, size_t image_bytes,
                              curd_image_kind *out_kind,
                              size_t *out_image_bytes)
{
    int kind = curdi_image_kind_of(image, image_bytes);
    if (kind == 0) {
        char first[96];
        describe_first_bytes(image, image_bytes, first, sizeof first);
        return curdi_fail(CURD_E_PROGRAM,
                          "curd_program_load: the %zu-byte image is neither "
                          "PTX (text whose first directive is .version), a "
                          "cubin (ELF: 7f 45 4c 46) nor a fatbin (50 ed 55 "
                          "ba); it starts with %s. Fix: pass the bytes of a "
                          ".ptx, .cubin or .fatbin file (nvcc -ptx, -cubin or "
                          "-fatbin).",
                          image_bytes, first);
    }
    size_t taken = image_bytes;
    if (kind == CURD_IMAGE_PTX) {
        const void *nul = memchr(image, '\0', taken);
        if (nul != NULL)
            taken = (size_t)((const unsigned char *)nul -
                             (const unsigned char *)image);
    } else if (kind == CURD_IMAGE_FATBIN) {
        uint16_t header_bytes = 0;
        uint64_t payload_bytes = 0;
        if (image_bytes >= 16) {
            memcpy(&header_bytes, (const unsigned char *)image + 6, 2);
            memcpy(&payload_bytes, (const unsigned char *)image + 8, 8);
        }
        /* header_bytes first: past image_bytes, the subtraction would
         * wrap and pass any payload. */
        if (image_bytes < 16 || header_bytes < 16 ||
            header_bytes > image_bytes ||
            payload_bytes > image_bytes - header_bytes)
            return curdi_fail(CURD_E_PROGRAM,
                              "curd_program_load: the fatbin's header says "
                              "%u header bytes and %" PRIu64 " payload bytes, "
                              "more than the %zu bytes given. Fix: pass the "
                              "whole fatbin and its size.",
                              header_bytes, payload_bytes, image_bytes);
    }
    *out_kind = (curd_image_kind)kind;
    *out_image_bytes = taken;
    return CURD_OK;
}

void curdi_image_ptx_entry_names(const char *text, char *out,
                                 size_t capacity)
{
    size_t at = strlen(out);
    for (const char *p = strstr(text, ".entry"); p != NULL;
         p = strstr(p, ".entry")) {
        p += 6;
        if (*p != ' ' && *p != '\t')
            continue;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, " \t\r\n(");
        if (n == 0 || at + n + 3 >= capacity)
            continue;
        at += (size_t)snprintf(out + at, capacity - at, "%s%.*s",
                               at == 0 ? "" : ", ", (int)n, p);
    }
}
