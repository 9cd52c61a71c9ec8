/* test-image.c - telling images apart and checking them
 * (lib/launch/image.c), a pure module, on the CPU: PTX, cubins, fatbins
 * and device-code libraries (ar archives, built here header by header). fuzz-image checks the
 * same against a slow reference with the fuzzer's bytes. */
#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "launch/image.h"
#include "support/curd-test.h"

static void test_image_kinds_are_told_apart_by_content(void)
{
    static const char ptx[] = "\n  // a comment\n/* another\n */\t.version 8.0\n";
    g_assert_cmpint(curdi_image_kind_of(ptx, strlen(ptx)), ==,
                    CURD_IMAGE_PTX);
    g_assert_cmpint(curdi_image_kind_of(".version", 8), ==,
                    CURD_IMAGE_PTX);
    /* Cut before the directive ends: not PTX. */
    g_assert_cmpint(curdi_image_kind_of(ptx, strlen(ptx) - 10), ==, 0);
    g_assert_cmpint(curdi_image_kind_of("\x7f" "ELF\x02", 5), ==,
                    CURD_IMAGE_CUBIN);
    g_assert_cmpint(curdi_image_kind_of("\x50\xed\x55\xba", 4), ==,
                    CURD_IMAGE_FATBIN);
    g_assert_cmpint(curdi_image_kind_of("GIF89a", 6), ==, 0);
    g_assert_cmpint(curdi_image_kind_of("\x7f" "EL", 3), ==, 0);
    g_assert_cmpint(curdi_image_kind_of("// .version", 11), ==, 0);
    g_assert_cmpint(curdi_image_kind_of(NULL, 8), ==, 0);
    /* A NUL ends PTX text. */
    g_assert_cmpint(curdi_image_kind_of("  \0.version", 11), ==, 0);
    /* Random bytes are (almost surely) nothing, and never crash. */
    for (int i = 0; i < 100; i++) {
        unsigned char bytes[32];
        curd_test_fill_random(bytes, sizeof bytes);
        bytes[0] = (unsigned char)g_test_rand_int_range(0x80, 0x100);
        g_assert_cmpint(curdi_image_kind_of(bytes, sizeof bytes), ==, 0);
    }
}

/* A fatbin's first 16 bytes: magic, version, header size, payload size. */
static void fatbin_header(unsigned char *out, uint16_t header_bytes,
                          uint64_t payload_bytes)
{
    static const unsigned char magic[4] = {0x50, 0xed, 0x55, 0xba};
    memset(out, 0, 16);
    memcpy(out, magic, sizeof magic);
    out[4] = 1;
    memcpy(out + 6, &header_bytes, sizeof header_bytes);
    memcpy(out + 8, &payload_bytes, sizeof payload_bytes);
}

static void test_a_fatbin_whose_header_promises_more_than_given_is_refused(
    void)
{
    unsigned char image[64];
    curd_image_kind kind = 0;
    size_t taken = 77;
    fatbin_header(image, 16, 48);
    g_assert_cmpint(curdi_image_check(image, sizeof image, "image", &kind, &taken), ==,
                    CURD_OK);
    g_assert_cmpint(kind, ==, CURD_IMAGE_FATBIN);
    g_assert_cmpuint(taken, ==, sizeof image);
    const struct {
        uint16_t header_bytes;
        uint64_t payload_bytes;
        size_t given;
    } refused[] = {
        {16, 49, 64}, {15, 0, 64}, {64, 1, 64}, {16, UINT64_MAX, 64},
        {16, 0, 15},  {16, 0, 4},         {100, 0, 64},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
        fatbin_header(image, refused[i].header_bytes,
                      refused[i].payload_bytes);
        kind = 0;
        taken = 77;
        g_assert_cmpint(curdi_image_check(image, refused[i].given, "image", &kind,
                                          &taken),
                        ==, CURD_E_PROGRAM);
        curd_test_assert_fix_sentence();
        g_assert_cmpint(kind, ==, 0);
        g_assert_cmpuint(taken, ==, 77);
    }
}

static void test_ptx_takes_its_bytes_up_to_the_first_nul(void)
{
    static const char ptx[] = ".version 8.0\n.target sm_80\0trailing";
    curd_image_kind kind = 0;
    size_t taken = 0;
    g_assert_cmpint(curdi_image_check(ptx, sizeof ptx, "image", &kind, &taken), ==,
                    CURD_OK);
    g_assert_cmpint(kind, ==, CURD_IMAGE_PTX);
    g_assert_cmpuint(taken, ==, strlen(ptx));
    g_assert_cmpint(curdi_image_check(ptx, 12, "image", &kind, &taken), ==, CURD_OK);
    g_assert_cmpuint(taken, ==, 12);
}

static void test_an_image_of_no_kind_is_refused_showing_its_first_bytes(void)
{
    curd_image_kind kind = 0;
    size_t taken = 77;
    g_assert_cmpint(curdi_image_check("GIF89a\x01", 7, "image", &kind, &taken), ==,
                    CURD_E_PROGRAM);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "47 49 46 38 39 61 01"));
    g_assert_nonnull(strstr(curd_last_error(), "GIF89a\\x01"));
    g_assert_cmpuint(taken, ==, 77);
}

/* Appends one ar member (its 60-byte header, its bytes, the pad byte
 * when odd and `pad`) to archive at *len. */
static void archive_member(unsigned char *archive, size_t *len,
                           const char *name, const char *bytes, bool pad)
{
    char header[96];
    size_t size = strlen(bytes);
    snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name,
             "0", "0", "0", "644", size);
    memcpy(archive + *len, header, 60);
    memcpy(archive + *len + 60, bytes, size);
    *len += 60 + size;
    if (size % 2 != 0 && pad)
        archive[(*len)++] = '\n';
}

static void test_a_library_is_told_apart_and_its_members_walked(void)
{
    unsigned char archive[512];
    size_t len = 8;
    memcpy(archive, "!<arch>\n", 8);
    archive_member(archive, &len, "/", "sym!", true);
    archive_member(archive, &len, "link_mix.o/", "odd", true);
    archive_member(archive, &len, "link_apply.o/", "last, odd", false);
    g_assert_cmpint(curdi_image_kind_of(archive, len), ==, CURD_IMAGE_LIBRARY);
    g_assert_cmpint(curdi_image_kind_of("!<arch>", 7), ==, 0);
    g_assert_cmpint(curdi_image_kind_of("!<thin>\n", 8), ==, 0);
    curd_image_kind kind = 0;
    size_t taken = 0;
    g_assert_cmpint(curdi_image_check(archive, len, "desc->link_images[0]",
                                      &kind, &taken),
                    ==, CURD_OK);
    g_assert_cmpint(kind, ==, CURD_IMAGE_LIBRARY);
    g_assert_cmpuint(taken, ==, len);

    /* Each refusal names the input and the member at fault. */
    unsigned char bad[512];
    const size_t second = 8 + 60 + 4; /* the second member's header */
    const struct {
        const char *what;
        size_t offset; /* of the byte changed, in the second header */
        unsigned char value;
        size_t given;
    } refusals[] = {
        {"no members", 0, 0, 8},
        {"ends inside a member's", 0, 0, second + 59},
        {"does not end in", 58, 'x', len},
        {"is not a decimal", 48, 'z', len},
        {"is not a decimal", 50, '7', len}, /* "3 7": a space inside */
        {"larger than the bytes", 0, 0, len - 5},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++) {
        memcpy(bad, archive, len);
        if (refusals[i].value != 0)
            bad[second + refusals[i].offset] = refusals[i].value;
        kind = 0;
        taken = 77;
        g_assert_cmpint(curdi_image_check(bad, refusals[i].given,
                                          "desc->link_images[3]", &kind,
                                          &taken),
                        ==, CURD_E_PROGRAM);
        curd_test_assert_fix_sentence();
        g_assert_nonnull(strstr(curd_last_error(), refusals[i].what));
        g_assert_nonnull(strstr(curd_last_error(), "desc->link_images[3]"));
        g_assert_cmpint(kind, ==, 0);
        g_assert_cmpuint(taken, ==, 77);
    }
}

static void test_ptx_entry_names_are_listed_comma_separated(void)
{
    static const char ptx[] =
        ".version 8.0\n.visible .entry first(\n) {}\n"
        ".entry\tsecond ( .param .u64 p ) {}\n.entryless x\n";
    char names[64] = "";
    curdi_image_ptx_entry_names(ptx, names, sizeof names);
    g_assert_cmpstr(names, ==, "first, second");
    /* A name that does not fit is left out, the string stays whole. */
    char small[9] = "";
    curdi_image_ptx_entry_names(ptx, small, sizeof small);
    g_assert_cmpstr(small, ==, "first");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/image/kinds-are-told-apart-by-content",
                    test_image_kinds_are_told_apart_by_content);
    g_test_add_func(
        "/image/a-fatbin-whose-header-promises-more-than-given-is-refused",
        test_a_fatbin_whose_header_promises_more_than_given_is_refused);
    g_test_add_func("/image/ptx-takes-its-bytes-up-to-the-first-nul",
                    test_ptx_takes_its_bytes_up_to_the_first_nul);
    g_test_add_func(
        "/image/an-image-of-no-kind-is-refused-showing-its-first-bytes",
        test_an_image_of_no_kind_is_refused_showing_its_first_bytes);
    g_test_add_func("/image/a-library-is-told-apart-and-its-members-walked",
                    test_a_library_is_told_apart_and_its_members_walked);
    g_test_add_func("/image/ptx-entry-names-are-listed-comma-separated",
                    test_ptx_entry_names_are_listed_comma_separated);
    return g_test_run();
}
