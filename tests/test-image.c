/* test-image.c - telling images apart and checking them
 * (lib/launch/image.c), a pure room, on the CPU. fuzz-image checks the
 * same against a slow reference with the fuzzer's bytes. */
#include <glib.h>
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
    g_assert_cmpint(curdi_image_check(image, sizeof image, &kind, &taken), ==,
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
        g_assert_cmpint(curdi_image_check(image, refused[i].given, &kind,
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
    g_assert_cmpint(curdi_image_check(ptx, sizeof ptx, &kind, &taken), ==,
                    CURD_OK);
    g_assert_cmpint(kind, ==, CURD_IMAGE_PTX);
    g_assert_cmpuint(taken, ==, strlen(ptx));
    g_assert_cmpint(curdi_image_check(ptx, 12, &kind, &taken), ==, CURD_OK);
    g_assert_cmpuint(taken, ==, 12);
}

static void test_an_image_of_no_kind_is_refused_showing_its_first_bytes(void)
{
    curd_image_kind kind = 0;
    size_t taken = 77;
    g_assert_cmpint(curdi_image_check("GIF89a\x01", 7, &kind, &taken), ==,
                    CURD_E_PROGRAM);
    curd_test_assert_fix_sentence();
    g_assert_nonnull(strstr(curd_last_error(), "47 49 46 38 39 61 01"));
    g_assert_nonnull(strstr(curd_last_error(), "GIF89a\\x01"));
    g_assert_cmpuint(taken, ==, 77);
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
    g_test_add_func("/image/ptx-entry-names-are-listed-comma-separated",
                    test_ptx_entry_names_are_listed_comma_separated);
    return g_test_run();
}
