/* image.c - images told apart by content; image.h says what each call
 * promises.
 *
 * Read top to bottom: the kind (PTX's leading white space and comments),
 * the first bytes as a sentence shows them, a library's members, the
 * check, the entry names. */
#include "launch/image.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

#define CURDI_FATBIN_MAGIC 0xBA55ED50u
#define CURDI_ARCHIVE_MAGIC "!<arch>\n"
#define CURDI_ARCHIVE_MAGIC_BYTES 8u

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
    if (image_bytes >= CURDI_ARCHIVE_MAGIC_BYTES &&
        memcmp(bytes, CURDI_ARCHIVE_MAGIC, CURDI_ARCHIVE_MAGIC_BYTES) == 0)
        return CURD_IMAGE_LIBRARY;
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

/* A library's members, walked header by header (ar's format: after the
 * magic, each member is a 60-byte header whose bytes 48 to 57 give the
 * member's size in decimal, padded with spaces, and whose last two are
 * "`\n", then the member, then a '\n' when its size is odd). CURD_OK, or
 * CURD_E_PROGRAM naming the member at fault. */
static curd_status check_archive(const unsigned char *bytes, size_t len,
                                 const char *name)
{
    size_t at = CURDI_ARCHIVE_MAGIC_BYTES;
    unsigned members = 0;
    const char *why = NULL;
    while (at < len && why == NULL) {
        if (members == CURDI_ARCHIVE_MEMBERS_MAX) {
            why = "has more members than curd walks";
            break;
        }
        if (len - at < CURDI_ARCHIVE_MEMBER_HEADER_BYTES) {
            why = "ends inside a member's 60-byte header";
            break;
        }
        const unsigned char *header = bytes + at;
        if (header[58] != '`' || header[59] != '\n') {
            why = "has a member header that does not end in \"`\\n\"";
            break;
        }
        /* The size: decimal digits, then spaces to the field's end. */
        size_t size = 0, i = 48;
        for (; i < 58 && header[i] >= '0' && header[i] <= '9'; i++)
            size = size * 10u + (size_t)(header[i] - '0');
        bool digits = i > 48;
        for (; i < 58 && header[i] == ' '; i++)
            ;
        if (!digits || i != 58) {
            why = "has a member header whose size is not a decimal number";
            break;
        }
        at += CURDI_ARCHIVE_MEMBER_HEADER_BYTES;
        if (size > len - at) {
            why = "has a member larger than the bytes that follow it";
            break;
        }
        at += size;
        /* The pad byte; a last member may go without it. */
        if (size % 2u != 0 && at < len)
            at++;
        members++;
    }
    if (why == NULL && members == 0)
        why = "has no members";
    if (why == NULL)
        return CURD_OK;
    return curdi_fail(CURD_E_PROGRAM,
                      "curd_program_load: %s, a %zu-byte library (ar "
                      "archive), %s (member %u, at byte %zu). Fix: pass the "
                      "whole .a file that nvcc -lib -rdc=true (or ar) wrote, "
                      "and its size.",
                      name, len, why, members + 1u, at);
}

curd_status curdi_image_check(const void *image, size_t image_bytes,
                              const char *name, curd_image_kind *out_kind,
                              size_t *out_image_bytes)
{
    int kind = curdi_image_kind_of(image, image_bytes);
    if (kind == 0) {
        char first[96];
        describe_first_bytes(image, image_bytes, first, sizeof first);
        return curdi_fail(CURD_E_PROGRAM,
                          "curd_program_load: %s (%zu bytes) is neither "
                          "PTX (text whose first directive is .version), a "
                          "cubin (ELF: 7f 45 4c 46), a fatbin (50 ed 55 "
                          "ba) nor a library (\"!<arch>\\n\"); it starts "
                          "with %s. Fix: pass the bytes of a .ptx, .cubin, "
                          ".fatbin or .a file (nvcc -ptx, -cubin, -fatbin, "
                          "or -lib -rdc=true).",
                          name, image_bytes, first);
    }
    if (kind == CURD_IMAGE_LIBRARY) {
        curd_status status = check_archive(image, image_bytes, name);
        if (status != CURD_OK)
            return status;
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
                              "curd_program_load: the header of the fatbin "
                              "%s says %u header bytes and %" PRIu64
                              " payload bytes, more than the %zu bytes given."
                              " Fix: pass the whole fatbin and its size.",
                              name, header_bytes, payload_bytes, image_bytes);
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
