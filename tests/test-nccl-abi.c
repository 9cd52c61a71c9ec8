/* test-nccl-abi.c - lib/driver/nccl_abi.h against a real nccl.h.
 *
 * Building curd needs no NCCL, and nccl.h needs the CUDA runtime's
 * headers to compile, so this test reads the header as text at run time:
 * $CURD_NCCL_H, else the usual places (/usr/include, /usr/local/cuda,
 * /usr/local/include), skipping when there is none. It checks every
 * value of curd's enums (ncclResult_t, ncclDataType_t, ncclRedOp_t), the
 * unique id's size and the config's magic, each entry's name, return
 * type and parameter count, and that ncclConfig_t begins with curd's
 * fields, in order, of the same types (later releases append fields). */
#include <glib.h>
#include <stddef.h>
#include <string.h>

#include "driver/nccl_abi.h"

static char *header_text;
static char *header_path;

static gboolean load_header(void)
{
    if (header_text != NULL)
        return TRUE;
    const char *candidates[] = {
        g_getenv("CURD_NCCL_H"),
        "/usr/include/nccl.h",
        "/usr/include/x86_64-linux-gnu/nccl.h",
        "/usr/local/cuda/include/nccl.h",
        "/usr/local/include/nccl.h",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(candidates); i++) {
        if (candidates[i] == NULL || candidates[i][0] == '\0')
            continue;
        if (g_file_get_contents(candidates[i], &header_text, NULL, NULL)) {
            header_path = g_strdup(candidates[i]);
            g_test_message("reading %s", header_path);
            return TRUE;
        }
    }
    g_test_skip("no nccl.h (set CURD_NCCL_H to its path)");
    return FALSE;
}

/* The first match of pattern's group 1 in the header; NULL when none. */
static char *find(const char *pattern)
{
    GRegex *regex = g_regex_new(pattern, G_REGEX_MULTILINE, 0, NULL);
    g_assert_nonnull(regex);
    GMatchInfo *match = NULL;
    char *found = NULL;
    if (g_regex_match(regex, header_text, 0, &match))
        found = g_match_info_fetch(match, 1);
    g_match_info_free(match);
    g_regex_unref(regex);
    return found;
}

static long long value_of(const char *name)
{
    char *pattern = g_strdup_printf("\\b%s\\s*=\\s*(0x[0-9a-fA-F]+|\\d+)",
                                    name);
    char *text = find(pattern);
    if (text == NULL)
        g_error("%s: no value for %s", header_path, name);
    long long value = g_ascii_strtoll(text, NULL, 0);
    g_free(text);
    g_free(pattern);
    return value;
}

static void test_enum_values_match(void)
{
    if (!load_header())
        return;
#define CHECK_VALUE_(name, value)                                            \
    g_assert_cmpint(value_of("nccl" #name), ==, value);
    CURDI_NCCL_RESULT_LIST(CHECK_VALUE_)
    CURDI_NCCL_DATA_TYPE_LIST(CHECK_VALUE_)
    CURDI_NCCL_RED_OP_LIST(CHECK_VALUE_)
#undef CHECK_VALUE_
    char *bytes = find("#define\\s+NCCL_UNIQUE_ID_BYTES\\s+(\\d+)");
    g_assert_nonnull(bytes);
    g_assert_cmpint(g_ascii_strtoll(bytes, NULL, 10), ==,
                    CURDI_NCCL_UNIQUE_ID_BYTES);
    g_free(bytes);
    char *magic = find("#define\\s+NCCL_API_MAGIC\\s+(0x[0-9a-fA-F]+)");
    if (magic != NULL) /* before 2.19 the initializer spelt it out */
        g_assert_cmpuint(g_ascii_strtoull(magic, NULL, 16), ==,
                         CURDI_NCCL_API_MAGIC);
    g_free(magic);
}

/* Parameters of a declaration's text "(a, b, c)": 0 for "()" or
 * "(void)". */
static unsigned parameter_count(const char *list)
{
    char *inside = g_strstrip(g_strndup(list + 1, strlen(list) - 2));
    unsigned count = 0;
    if (inside[0] != '\0' && strcmp(inside, "void") != 0) {
        count = 1;
        for (const char *at = inside; *at != '\0'; at++)
            count += *at == ',';
    }
    g_free(inside);
    return count;
}

static void check_entry(const char *name, const char *returns,
                        const char *our_params)
{
    char *pattern = g_strdup_printf("^%s\\s+%s\\s*(\\([^)]*\\))\\s*;",
                                    returns, name);
    char *params = find(pattern);
    if (params == NULL)
        g_error("%s declares no %s returning %s", header_path, name,
                returns);
    g_assert_cmpuint(parameter_count(params), ==,
                     parameter_count(our_params));
    g_free(params);
    g_free(pattern);
}

static void test_entries_match(void)
{
    if (!load_header())
        return;
#define CHECK_ENTRY_(name, tier, params, args)                               \
    check_entry(#name, "ncclResult_t", #params);
    CURDI_NCCL_ENTRY_LIST(CHECK_ENTRY_)
#undef CHECK_ENTRY_
#define CHECK_TEXT_ENTRY_(name, params, args)                                \
    check_entry(#name, "const\\s+char\\s*\\*", #params);
    CURDI_NCCL_TEXT_ENTRY_LIST(CHECK_TEXT_ENTRY_)
#undef CHECK_TEXT_ENTRY_
}

static void test_config_begins_with_curds_fields(void)
{
    if (!load_header())
        return;
    static const struct {
        const char *type;
        const char *name;
        size_t offset;
    } fields[] = {
#define FIELD_(type, nccl_name, ours)                                        \
    {type, nccl_name, offsetof(curdi_nccl_config, ours)}
        FIELD_("size_t", "size", size),
        FIELD_("unsigned int", "magic", magic),
        FIELD_("unsigned int", "version", version),
        FIELD_("int", "blocking", blocking),
        FIELD_("int", "cgaClusterSize", cga_cluster_size),
        FIELD_("int", "minCTAs", min_ctas),
        FIELD_("int", "maxCTAs", max_ctas),
        FIELD_("const char *", "netName", net_name),
        FIELD_("int", "splitShare", split_share),
        FIELD_("int", "trafficClass", traffic_class),
        FIELD_("const char *", "commName", comm_name),
        FIELD_("int", "collnetEnable", collnet_enable),
        FIELD_("int", "CTAPolicy", cta_policy),
        FIELD_("int", "shrinkShare", shrink_share),
        FIELD_("int", "nvlsCTAs", nvls_ctas),
        FIELD_("int", "nChannelsPerNetPeer", channels_per_net_peer),
        FIELD_("int", "nvlinkCentricSched", nvlink_centric_sched),
#undef FIELD_
    };
    char *body = find("typedef struct ncclConfig_v\\d+\\s*\\{([^}]*)\\}\\s*"
                      "ncclConfig_t;");
    g_assert_nonnull(body);
    /* Each field: comments dropped, "type name;" with the type's spaces
     * normalised. */
    GRegex *comments = g_regex_new("/\\*.*?\\*/", G_REGEX_DOTALL, 0, NULL);
    char *plain = g_regex_replace_literal(comments, body, -1, 0, "", 0, NULL);
    g_regex_unref(comments);
    char **declarations = g_strsplit(plain, ";", -1);
    size_t found = 0;
    for (size_t i = 0; declarations[i] != NULL; i++) {
        char *declaration = g_strstrip(declarations[i]);
        if (declaration[0] == '\0')
            continue;
        if (found == G_N_ELEMENTS(fields))
            break; /* fields a later release appended */
        const char *name = strrchr(declaration, ' ');
        const char *star = strrchr(declaration, '*');
        if (star != NULL && (name == NULL || star > name))
            name = star;
        g_assert_nonnull(name);
        char *type = g_strstrip(g_strndup(declaration,
                                          (size_t)(name - declaration) +
                                              (*name == '*')));
        char **words = g_strsplit_set(type, " \t\n", -1);
        char *joined = g_strjoinv(" ", words);
        GRegex *spaces = g_regex_new("\\s+", 0, 0, NULL);
        char *normal = g_regex_replace_literal(spaces, joined, -1, 0, " ", 0,
                                               NULL);
        g_regex_unref(spaces);
        char *star_spaced = g_strdup(normal);
        if (g_str_has_suffix(star_spaced, "*") &&
            !g_str_has_suffix(star_spaced, " *")) {
            g_free(star_spaced);
            star_spaced = g_strdup_printf(
                "%.*s *", (int)strlen(normal) - 1, normal);
        }
        g_assert_cmpstr(name + 1, ==, fields[found].name);
        g_assert_cmpstr(g_strstrip(star_spaced), ==, fields[found].type);
        found++;
        g_free(star_spaced);
        g_free(normal);
        g_free(joined);
        g_strfreev(words);
        g_free(type);
    }
    /* An NCCL older than 2.28 lists fewer; what it lists must agree. */
    g_assert_cmpuint(found, >=, 5);
    g_strfreev(declarations);
    g_free(plain);
    g_free(body);
    g_assert_cmpuint(fields[G_N_ELEMENTS(fields) - 1].offset +
                         sizeof(int),
                     <=, sizeof(curdi_nccl_config));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/nccl-abi/enum-values-match", test_enum_values_match);
    g_test_add_func("/nccl-abi/entries-match", test_entries_match);
    g_test_add_func("/nccl-abi/config-begins-with-curds-fields",
                    test_config_begins_with_curds_fields);
    int result = g_test_run();
    g_free(header_text);
    g_free(header_path);
    return result;
}
