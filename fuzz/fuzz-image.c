/* fuzz-image.c - telling images apart and checking them, against a slow
 * reference.
 *
 * The reference reads an image the way a person would: the magic numbers
 * of ELF and of a fatbin compared byte by byte; for PTX, a walk that skips
 * white space and whole comments one character at a time and then wants
 * ".version" (a NUL, or a comment that never closes, ends the walk with
 * nothing); a fatbin's header and payload sizes added in 128 bits; a
 * library's members stepped over with their sizes read digit by digit
 * into 128 bits. The
 * harness checks the kind, curdi_image_check's status, the kind and length
 * it sets (PTX: up to the first NUL), that a refusal sets nothing and
 * says "Fix: ...", and that the PTX entry names fit their buffer.
 *
 * fuzz-srcs: lib/launch/image.c lib/base/status.c lib/driver/driver.c */
#include "fuzz.h"

#include "launch/image.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static bool is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
}

static bool reference_is_ptx(const uint8_t *bytes, size_t size)
{
    size_t at = 0;
    for (;;) {
        if (at >= size || bytes[at] == 0)
            return false;
        if (is_space(bytes[at])) {
            at++;
        } else if (at + 1 < size && bytes[at] == '/' && bytes[at + 1] == '/') {
            while (at < size && bytes[at] != 0 && bytes[at] != '\n')
                at++;
        } else if (at + 1 < size && bytes[at] == '/' && bytes[at + 1] == '*') {
            size_t close = at + 2;
            while (close + 1 < size && bytes[close] != 0 &&
                   !(bytes[close] == '*' && bytes[close + 1] == '/'))
                close++;
            if (close + 1 >= size || bytes[close] != '*')
                return false;
            at = close + 2;
        } else {
            break;
        }
    }
    static const char directive[] = ".version";
    for (size_t i = 0; i < 8; i++)
        if (at + i >= size || bytes[at + i] != (uint8_t)directive[i])
            return false;
    return true;
}

static int reference_kind(const uint8_t *bytes, size_t size)
{
    if (size >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
        bytes[3] == 'F')
        return CURD_IMAGE_CUBIN;
    if (size >= 4 && bytes[0] == 0x50 && bytes[1] == 0xed &&
        bytes[2] == 0x55 && bytes[3] == 0xba)
        return CURD_IMAGE_FATBIN;
    static const char archive[] = "!<arch>\n";
    if (size >= 8 && memcmp(bytes, archive, 8) == 0)
        return CURD_IMAGE_LIBRARY;
    return reference_is_ptx(bytes, size) ? CURD_IMAGE_PTX : 0;
}

/* ar: after the magic, members of a 60-byte header (size in bytes 48 to
 * 57: digits, then spaces; "`\n" at 58) and the member, padded to even
 * but for the last; at least one member. */
static bool reference_archive_fits(const uint8_t *bytes, size_t size)
{
    fuzz_u128 at = 8;
    unsigned members = 0;
    while (at < size) {
        if (members == CURDI_ARCHIVE_MEMBERS_MAX || at + 60 > size)
            return false;
        const uint8_t *header = bytes + (size_t)at;
        if (header[58] != '`' || header[59] != '\n')
            return false;
        fuzz_u128 member = 0;
        size_t i = 48;
        while (i < 58 && header[i] >= '0' && header[i] <= '9')
            member = member * 10 + (fuzz_u128)(header[i++] - '0');
        if (i == 48)
            return false;
        while (i < 58)
            if (header[i++] != ' ')
                return false;
        at += 60 + member;
        if (at > size)
            return false;
        if (member % 2 != 0 && at < size)
            at++;
        members++;
    }
    return members > 0;
}

static bool reference_fatbin_fits(const uint8_t *bytes, size_t size)
{
    if (size < 16)
        return false;
    fuzz_u128 header = (fuzz_u128)bytes[6] | (fuzz_u128)bytes[7] << 8;
    fuzz_u128 payload = 0;
    for (unsigned i = 0; i < 8; i++)
        payload |= (fuzz_u128)bytes[8 + i] << (8 * i);
    return header >= 16 && header + payload <= size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so a read past the end is caught. */
    uint8_t *image = malloc(size + 1);
    if (image == NULL)
        return 0;
    memcpy(image, data, size);
    int want = reference_kind(image, size);
    FUZZ_CHECK(curdi_image_kind_of(image, size) == want);
    if (size == 0) {
        free(image);
        return 0;
    }
    curd_image_kind kind = (curd_image_kind)77;
    size_t taken = 77;
    curd_status status = curdi_image_check(image, size, "image", &kind, &taken);
    bool fits = want != 0 &&
                (want != CURD_IMAGE_FATBIN || reference_fatbin_fits(image, size)) &&
                (want != CURD_IMAGE_LIBRARY || reference_archive_fits(image, size));
    FUZZ_CHECK((status == CURD_OK) == fits);
    if (status != CURD_OK) {
        FUZZ_CHECK(status == CURD_E_PROGRAM);
        FUZZ_CHECK((int)kind == 77 && taken == 77);
        fuzz_check_fix_sentence();
    } else {
        FUZZ_CHECK((int)kind == want);
        size_t length = want == CURD_IMAGE_PTX ? strnlen((const char *)image, size)
                                               : size;
        FUZZ_CHECK(taken == length);
    }
    if (want == CURD_IMAGE_PTX) {
        /* NUL-terminated, as the program module keeps its copy. */
        image[size] = 0;
        char names[64] = "";
        curdi_image_ptx_entry_names((const char *)image, names, sizeof names);
        FUZZ_CHECK(strlen(names) < sizeof names);
    }
    free(image);
    return 0;
}
