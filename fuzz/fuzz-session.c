/* fuzz-session.c - sessions against a reference model, on the stand-in
 * driver.
 *
 * The public session calls run for real against tests/fake/fake-cuda.c,
 * built as $(BUILD)/fuzz/libcuda-fake.so.1 beside this harness; the
 * stand-in keeps "device" memory on the host, so the harness reads every
 * set's buffers straight through their device pointers.
 *
 * Input: the session's two budgets (off, or one of a few byte counts),
 * then up to MAX_STEPS steps, each an operation and its arguments:
 * allocate one of a few sizes; release a lent buffer; release a handle
 * released already, or free it; release a buffer the session did not
 * lend; free a lent buffer directly; upload a set of one to three tables
 * (one of four fixed tables each, possibly with one byte changed) under
 * one of two domains, verified or keyed (one of four keys); release a
 * held set; release a set that is gone or that nobody holds; pass bad
 * arguments; free the session and make a new one with other budgets.
 *
 * The reference, written from include/curd.h's rules: an allocation
 * reuses the last released idle buffer of exactly its size (the same
 * device memory) or allocates; a release frees a buffer larger than the
 * idle budget, else evicts the largest idle buffers (the last released of
 * a size first) until it fits and keeps it; a buffer freed directly is
 * forgotten at its release (stale); an upload hits a retained set of the
 * same domain and bytes (no host-to-device byte, the same set), else
 * uploads its payloads' bytes and retains the set when it fits the static
 * budget beside the sets held, evicting unheld sets largest first, then
 * least recently handed out. A keyed upload hits the retained keyed set
 * of its domain and key whatever the bytes (the set keeps the bytes it
 * was uploaded with), is refused with nothing changed when that set's
 * count or lengths differ, and else misses as above; keyed and verified
 * sets never answer each other's uploads. After every step every field of
 * curd_session_stats equals the model's, the device's resident bytes are
 * the baseline plus the model's idle, lent, cached and unretained bytes,
 * each call's status is the model's, h2d_bytes grew by exactly what a
 * miss uploads, and every held set's buffers hold its bytes. Freeing the
 * session returns the resident bytes to the baseline.
 *
 * Built from the whole library (FUZZ_SRCS_session in fuzz.mk). */
#include "fuzz.h"

#define MAX_STEPS 64
#define TABLES 4
#define TABLE_MAX_BYTES 3000u
#define PAYLOADS_MAX 3
#define RING 8

static const size_t alloc_sizes[6] = {1, 64, 100, 1000, 4096, 5000};
static const size_t table_lens[TABLES] = {1, 64, 1000, TABLE_MAX_BYTES};
static const uint64_t budgets[5] = {0, 64, 1000, 4096, 10000}; /* 0: off */

static curd_device *device;
static uint64_t baseline;   /* resident bytes without a session */
static curd_buffer foreign; /* never any session's */
static unsigned char tables[TABLES][TABLE_MAX_BYTES];
static bool trace; /* FUZZ_SESSION_TRACE=1: one line per step on stderr */

/* ------------------------------------------------------------------------
 * The model
 * ---------------------------------------------------------------------- */
typedef struct lent_buffer {
    curd_buffer buffer;
    size_t byte_len;
    uint64_t device_ptr;
    bool freed; /* with curd_buffer_free, behind the session's back */
} lent_buffer;

typedef struct idle_buffer {
    size_t byte_len;
    uint64_t device_ptr;
} idle_buffer;

typedef struct model_set {
    const curd_static_set *set;
    char domain;
    size_t count;
    size_t byte_lens[PAYLOADS_MAX];
    unsigned char *bytes; /* the payloads back to back */
    uint64_t total;
    uint32_t holds;
    uint64_t last_use;
    bool retained;
    bool keyed;       /* found by (domain, key), never by its bytes */
    unsigned char key;
} model_set;

static curd_session *session;
static curd_session_stats model;
static lent_buffer lent[MAX_STEPS];
static size_t lent_count;
static idle_buffer idle[MAX_STEPS]; /* in release order */
static size_t idle_count;
static model_set sets[MAX_STEPS];
static size_t set_count;
static size_t held[MAX_STEPS]; /* indices into sets, one per hold */
static size_t held_count;
static uint64_t use_clock;
static curd_buffer stale[RING];
static unsigned stale_next;
static const curd_static_set *gone[RING]; /* sets freed: never read */
static unsigned gone_next;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    trace = getenv("FUZZ_SESSION_TRACE") != NULL;
    device = fuzz_open_fake_device("fuzz-session");
    /* Fixed tables: the input picks among them and changes single bytes,
     * so equal bytes come up often. */
    uint64_t state = 0x5E5510Bu;
    for (size_t t = 0; t < TABLES; t++)
        for (size_t i = 0; i < TABLE_MAX_BYTES; i++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            tables[t][i] = (unsigned char)(state >> 56);
        }
    FUZZ_CHECK(curd_buffer_alloc(device, 64, &foreign) == CURD_OK);
    FUZZ_CHECK(curd_device_resident_bytes(device, &baseline) == CURD_OK);
    return 0;
}

static void session_start(uint8_t idle_choice, uint8_t static_choice)
{
    curd_session_options options;
    curd_session_options_init(&options);
    uint64_t idle_budget = budgets[idle_choice % 5u];
    uint64_t static_budget = budgets[static_choice % 5u];
    options.idle_budget_bytes = idle_budget;
    options.static_budget_bytes = static_budget;
    options.flags = (idle_budget == 0 ? CURD_SESSION_NO_REUSE : 0u)
                    | (static_budget == 0 ? CURD_SESSION_NO_STATIC_CACHE : 0u);
    FUZZ_CHECK(curd_session_new(device, &options, &session) == CURD_OK);
    memset(&model, 0, sizeof model);
    model.struct_size = sizeof model;
    model.idle_budget_bytes = idle_budget;
    model.static_budget_bytes = static_budget;
    lent_count = idle_count = held_count = 0;
    use_clock = 0;
}

static void session_end(void)
{
    FUZZ_CHECK(curd_session_free(session) == CURD_OK);
    session = NULL;
    for (size_t s = 0; s < set_count; s++)
        free(sets[s].bytes);
    set_count = 0;
    uint64_t resident = 0;
    FUZZ_CHECK(curd_device_resident_bytes(device, &resident) == CURD_OK);
    FUZZ_CHECK(resident == baseline);
}

static uint64_t h2d_bytes(void)
{
    curd_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    FUZZ_CHECK(curd_device_stats(device, &stats) == CURD_OK);
    return stats.h2d_bytes;
}

static void remember_stale(curd_buffer buffer)
{
    stale[stale_next++ % RING] = buffer;
}

static void remember_gone(const curd_static_set *set)
{
    gone[gone_next++ % RING] = set;
}

/* Every byte of a set's buffers, read through their device pointers. */
static void check_set_contents(const model_set *m)
{
    const unsigned char *expected = m->bytes;
    FUZZ_CHECK(m->set->count == m->count);
    FUZZ_CHECK(m->set->retained == (m->retained ? 1u : 0u));
    for (size_t i = 0; i < m->count; i++) {
        uint64_t device_ptr = 0;
        size_t size = 0;
        FUZZ_CHECK(curd_buffer_device_ptr(device, m->set->buffers[i],
                                          &device_ptr) == CURD_OK);
        FUZZ_CHECK(curd_buffer_size(device, m->set->buffers[i], &size)
                   == CURD_OK);
        FUZZ_CHECK(size == m->byte_lens[i]);
        FUZZ_CHECK(memcmp((const void *)(uintptr_t)device_ptr, expected,
                          size) == 0);
        expected += size;
    }
}

/* After every step. */
static void check_all(void)
{
    curd_session_stats stats;
    memset(&stats, 0xA5, sizeof stats);
    stats.struct_size = sizeof stats;
    FUZZ_CHECK(curd_session_stats_get(session, &stats) == CURD_OK);
    FUZZ_CHECK(stats.idle_bytes == model.idle_bytes);
    FUZZ_CHECK(stats.idle_buffers == model.idle_buffers);
    FUZZ_CHECK(stats.lent_bytes == model.lent_bytes);
    FUZZ_CHECK(stats.lent_buffers == model.lent_buffers);
    FUZZ_CHECK(stats.cached_bytes == model.cached_bytes);
    FUZZ_CHECK(stats.cached_sets == model.cached_sets);
    FUZZ_CHECK(stats.unretained_bytes == model.unretained_bytes);
    FUZZ_CHECK(stats.unretained_sets == model.unretained_sets);
    FUZZ_CHECK(stats.reuse_hits == model.reuse_hits);
    FUZZ_CHECK(stats.reuse_misses == model.reuse_misses);
    FUZZ_CHECK(stats.static_hits == model.static_hits);
    FUZZ_CHECK(stats.static_misses == model.static_misses);
    FUZZ_CHECK(stats.idle_evictions == model.idle_evictions);
    FUZZ_CHECK(stats.static_evictions == model.static_evictions);
    FUZZ_CHECK(stats.release_frees == model.release_frees);
    FUZZ_CHECK(stats.idle_budget_bytes == model.idle_budget_bytes);
    FUZZ_CHECK(stats.static_budget_bytes == model.static_budget_bytes);
    FUZZ_CHECK(stats.static_keyed_hits == model.static_keyed_hits);
    FUZZ_CHECK(stats.static_keyed_misses == model.static_keyed_misses);
    /* The levels from the model's own lists, and the device's bytes. */
    uint64_t idle_sum = 0, lent_sum = 0, lent_live = 0, cached = 0,
             unretained = 0;
    for (size_t i = 0; i < idle_count; i++)
        idle_sum += idle[i].byte_len;
    for (size_t i = 0; i < lent_count; i++) {
        lent_sum += lent[i].byte_len;
        if (!lent[i].freed)
            lent_live += lent[i].byte_len;
    }
    for (size_t s = 0; s < set_count; s++)
        *(sets[s].retained ? &cached : &unretained) += sets[s].total;
    FUZZ_CHECK(idle_sum == model.idle_bytes && idle_count == model.idle_buffers);
    FUZZ_CHECK(lent_sum == model.lent_bytes && lent_count == model.lent_buffers);
    FUZZ_CHECK(cached == model.cached_bytes);
    FUZZ_CHECK(unretained == model.unretained_bytes);
    uint64_t resident = 0;
    FUZZ_CHECK(curd_device_resident_bytes(device, &resident) == CURD_OK);
    FUZZ_CHECK(resident
               == baseline + idle_sum + lent_live + cached + unretained);
    FUZZ_CHECK(model.idle_bytes <= model.idle_budget_bytes);
    FUZZ_CHECK(model.cached_bytes <= model.static_budget_bytes);
}

static void expect_failure(curd_status status, curd_status expected)
{
    FUZZ_CHECK(status == expected);
    fuzz_check_fix_sentence();
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */
static void step_alloc(uint8_t arg)
{
    size_t byte_len = alloc_sizes[arg % 6u];
    size_t reused = SIZE_MAX;
    for (size_t i = idle_count; i-- > 0;)
        if (idle[i].byte_len == byte_len) {
            reused = i;
            break;
        }
    curd_buffer buffer = {0};
    FUZZ_CHECK(curd_session_alloc(session, byte_len, &buffer) == CURD_OK);
    lent_buffer *l = &lent[lent_count++];
    l->buffer = buffer;
    l->byte_len = byte_len;
    l->freed = false;
    FUZZ_CHECK(curd_buffer_device_ptr(device, buffer, &l->device_ptr)
               == CURD_OK);
    if (reused != SIZE_MAX) {
        FUZZ_CHECK(l->device_ptr == idle[reused].device_ptr);
        memmove(&idle[reused], &idle[reused + 1],
                (idle_count - reused - 1u) * sizeof idle[0]);
        idle_count--;
        model.idle_bytes -= byte_len;
        model.idle_buffers--;
        model.reuse_hits++;
    } else {
        model.reuse_misses++;
    }
    model.lent_bytes += byte_len;
    model.lent_buffers++;
}

static void lent_remove(size_t which)
{
    model.lent_bytes -= lent[which].byte_len;
    model.lent_buffers--;
    lent[which] = lent[--lent_count];
}

static void step_release(uint8_t arg)
{
    if (lent_count == 0)
        return;
    size_t which = arg % lent_count;
    lent_buffer l = lent[which];
    curd_status status = curd_session_release(session, l.buffer);
    lent_remove(which);
    if (l.freed) {
        expect_failure(status, CURD_E_STALE_HANDLE);
        return;
    }
    FUZZ_CHECK(status == CURD_OK);
    remember_stale(l.buffer);
    if (l.byte_len > model.idle_budget_bytes) {
        model.release_frees++;
        return;
    }
    while (model.idle_bytes + l.byte_len > model.idle_budget_bytes) {
        size_t victim = 0;
        for (size_t i = 1; i < idle_count; i++)
            if (idle[i].byte_len >= idle[victim].byte_len)
                victim = i;
        model.idle_bytes -= idle[victim].byte_len;
        model.idle_buffers--;
        model.idle_evictions++;
        memmove(&idle[victim], &idle[victim + 1],
                (idle_count - victim - 1u) * sizeof idle[0]);
        idle_count--;
    }
    idle[idle_count++] = (idle_buffer){l.byte_len, l.device_ptr};
    model.idle_bytes += l.byte_len;
    model.idle_buffers++;
}

static void step_stale(uint8_t arg)
{
    curd_buffer buffer = stale[arg % RING];
    if (buffer.id == 0)
        return;
    expect_failure(curd_session_release(session, buffer),
                   CURD_E_STALE_HANDLE);
    expect_failure(curd_buffer_free(device, buffer), CURD_E_STALE_HANDLE);
}

static void step_foreign(void)
{
    expect_failure(curd_session_release(session, foreign),
                   CURD_E_INVALID_ARGUMENT);
}

static void step_free_directly(uint8_t arg)
{
    if (lent_count == 0)
        return;
    lent_buffer *l = &lent[arg % lent_count];
    if (l->freed)
        return;
    FUZZ_CHECK(curd_buffer_free(device, l->buffer) == CURD_OK);
    l->freed = true;
}

/* ------------------------------------------------------------------------
 * Static sets
 * ---------------------------------------------------------------------- */
static bool set_equals(const model_set *m, char domain, size_t count,
                       const size_t *byte_lens, const unsigned char *bytes,
                       uint64_t total)
{
    if (!m->retained || m->keyed || m->domain != domain || m->count != count
        || m->total != total)
        return false;
    for (size_t i = 0; i < count; i++)
        if (m->byte_lens[i] != byte_lens[i])
            return false;
    return memcmp(m->bytes, bytes, total) == 0;
}

static void set_remove(size_t which)
{
    remember_gone(sets[which].set);
    free(sets[which].bytes);
    sets[which] = sets[--set_count];
    /* Holds name sets by index: the one moved takes this index. */
    for (size_t h = 0; h < held_count; h++)
        if (held[h] == set_count)
            held[h] = which;
}

static uint64_t held_cached_bytes(void)
{
    uint64_t bytes = 0;
    for (size_t s = 0; s < set_count; s++)
        if (sets[s].retained && sets[s].holds != 0)
            bytes += sets[s].total;
    return bytes;
}

/* The model's miss: retention, evictions, the new set. */
static size_t model_insert(char domain, size_t count, const size_t *byte_lens,
                           const unsigned char *bytes, uint64_t total,
                           bool keyed)
{
    uint64_t budget = model.static_budget_bytes;
    bool retain = total <= budget && held_cached_bytes() + total <= budget;
    while (retain && model.cached_bytes + total > budget) {
        size_t victim = SIZE_MAX;
        for (size_t s = 0; s < set_count; s++) {
            const model_set *m = &sets[s];
            if (!m->retained || m->holds != 0)
                continue;
            if (victim == SIZE_MAX || m->total > sets[victim].total
                || (m->total == sets[victim].total
                    && m->last_use < sets[victim].last_use))
                victim = s;
        }
        FUZZ_CHECK(victim != SIZE_MAX);
        model.cached_bytes -= sets[victim].total;
        model.cached_sets--;
        model.static_evictions++;
        set_remove(victim);
    }
    model_set *m = &sets[set_count];
    memset(m, 0, sizeof *m);
    m->domain = domain;
    m->count = count;
    memcpy(m->byte_lens, byte_lens, count * sizeof byte_lens[0]);
    m->bytes = malloc(total);
    FUZZ_CHECK(m->bytes != NULL);
    memcpy(m->bytes, bytes, total);
    m->total = total;
    m->holds = 1;
    m->last_use = ++use_clock;
    m->retained = retain;
    if (retain) {
        model.cached_bytes += total;
        model.cached_sets++;
    } else {
        model.unretained_bytes += total;
        model.unretained_sets++;
    }
    m->keyed = keyed;
    if (keyed)
        model.static_keyed_misses++;
    else
        model.static_misses++;
    return set_count++;
}

/* An upload's payloads as the input draws them, each in memory of its
 * own (so hits come from the bytes), and the same bytes back to back. */
typedef struct drawn_upload {
    char domain_text[2];
    size_t count;
    size_t byte_lens[PAYLOADS_MAX];
    unsigned char *copies[PAYLOADS_MAX];
    unsigned char bytes[PAYLOADS_MAX * TABLE_MAX_BYTES];
    curd_static_payload payloads[PAYLOADS_MAX];
    uint64_t total;
} drawn_upload;

static void draw_upload(fuzz_input *in, drawn_upload *u)
{
    uint8_t shape = fuzz_u8(in);
    u->domain_text[0] = (shape & 1u) ? 'b' : 'a';
    u->domain_text[1] = '\0';
    u->count = 1u + (size_t)((shape >> 1) % PAYLOADS_MAX);
    u->total = 0;
    for (size_t i = 0; i < u->count; i++) {
        uint8_t pick = fuzz_u8(in);
        size_t table = pick % TABLES;
        u->byte_lens[i] = table_lens[table];
        u->copies[i] = malloc(u->byte_lens[i]);
        FUZZ_CHECK(u->copies[i] != NULL);
        memcpy(u->copies[i], tables[table], u->byte_lens[i]);
        if (pick & 0x80u)
            u->copies[i][fuzz_u8(in) % u->byte_lens[i]] ^=
                (unsigned char)(1u + (pick & 0x3Fu));
        memcpy(u->bytes + u->total, u->copies[i], u->byte_lens[i]);
        u->payloads[i] = (curd_static_payload){u->copies[i], u->byte_lens[i]};
        u->total += u->byte_lens[i];
    }
}

static void drawn_free(drawn_upload *u)
{
    for (size_t i = 0; i < u->count; i++)
        free(u->copies[i]);
}

/* A hit hands out the model's set, moving nothing; a miss moved the
 * bytes and made a new set. Either way the set is held once more. */
static void upload_done(const drawn_upload *u, const curd_static_set *set,
                        uint64_t moved, size_t hit, bool keyed)
{
    size_t which;
    if (hit != SIZE_MAX) {
        FUZZ_CHECK(moved == 0);
        FUZZ_CHECK(set == sets[hit].set);
        sets[hit].holds++;
        sets[hit].last_use = ++use_clock;
        if (keyed)
            model.static_keyed_hits++;
        else
            model.static_hits++;
        which = hit;
    } else {
        FUZZ_CHECK(moved == u->total);
        for (size_t s = 0; s < set_count; s++)
            FUZZ_CHECK(set != sets[s].set);
        which = model_insert(u->domain_text[0], u->count, u->byte_lens,
                             u->bytes, u->total, keyed);
        sets[which].set = set;
    }
    held[held_count++] = which;
    check_set_contents(&sets[which]);
}

static void step_upload(fuzz_input *in)
{
    drawn_upload u;
    draw_upload(in, &u);
    size_t hit = SIZE_MAX;
    for (size_t s = 0; s < set_count && hit == SIZE_MAX; s++)
        if (set_equals(&sets[s], u.domain_text[0], u.count, u.byte_lens,
                       u.bytes, u.total))
            hit = s;
    uint64_t h2d_before = h2d_bytes();
    const curd_static_set *set = NULL;
    FUZZ_CHECK(curd_session_upload_static(session, u.domain_text, u.payloads,
                                          u.count, &set)
               == CURD_OK);
    upload_done(&u, set, h2d_bytes() - h2d_before, hit, false);
    drawn_free(&u);
}

static void step_upload_keyed(fuzz_input *in)
{
    drawn_upload u;
    draw_upload(in, &u);
    unsigned char key = (unsigned char)(fuzz_u8(in) % 4u);
    size_t found = SIZE_MAX;
    for (size_t s = 0; s < set_count && found == SIZE_MAX; s++)
        if (sets[s].retained && sets[s].keyed && sets[s].key == key
            && sets[s].domain == u.domain_text[0])
            found = s;
    bool same_lengths = found != SIZE_MAX && sets[found].count == u.count;
    for (size_t i = 0; same_lengths && i < u.count; i++)
        same_lengths = sets[found].byte_lens[i] == u.byte_lens[i];
    uint64_t h2d_before = h2d_bytes();
    const curd_static_set *set = NULL;
    curd_status status = curd_session_upload_static_keyed(
        session, u.domain_text, &key, 1, u.payloads, u.count, &set);
    if (found != SIZE_MAX && !same_lengths) {
        expect_failure(status, CURD_E_INVALID_ARGUMENT);
        FUZZ_CHECK(set == NULL && h2d_bytes() == h2d_before);
    } else {
        FUZZ_CHECK(status == CURD_OK);
        upload_done(&u, set, h2d_bytes() - h2d_before, found, true);
        sets[held[held_count - 1]].key = key;
    }
    drawn_free(&u);
}

static void step_release_static(uint8_t arg)
{
    if (held_count == 0)
        return;
    size_t h = arg % held_count;
    size_t which = held[h];
    held[h] = held[--held_count];
    model_set *m = &sets[which];
    check_set_contents(m);
    FUZZ_CHECK(curd_session_release_static(session, m->set) == CURD_OK);
    if (--m->holds == 0 && !m->retained) {
        model.unretained_bytes -= m->total;
        model.unretained_sets--;
        set_remove(which);
    }
}

/* A set that is gone (never read: the session checks the address first),
 * or a retained one nobody holds. */
static void step_release_static_bad(uint8_t arg)
{
    const curd_static_set *set = NULL;
    if (arg & 1u) {
        set = gone[(arg >> 1) % RING];
        /* A new set may have been made at the same address. */
        for (size_t s = 0; s < set_count && set != NULL; s++)
            if (sets[s].set == set)
                set = NULL;
    } else {
        for (size_t s = 0; s < set_count && set == NULL; s++)
            if (sets[s].retained && sets[s].holds == 0)
                set = sets[s].set;
    }
    if (set == NULL)
        return;
    expect_failure(curd_session_release_static(session, set),
                   CURD_E_INVALID_ARGUMENT);
}

static void step_bad_arguments(uint8_t arg)
{
    curd_buffer buffer = {77};
    const curd_static_set *set = NULL;
    curd_static_payload payloads[2] = {{tables[0], 1}, {NULL, 1 + arg}};
    expect_failure(curd_session_alloc(session, 0, &buffer),
                   CURD_E_INVALID_ARGUMENT);
    FUZZ_CHECK(buffer.id == 77);
    expect_failure(curd_session_upload_static(session, "a", payloads, 2, &set),
                   CURD_E_INVALID_ARGUMENT);
    payloads[1] = (curd_static_payload){tables[1], 0};
    expect_failure(curd_session_upload_static(session, "a", payloads, 2, &set),
                   CURD_E_INVALID_ARGUMENT);
    expect_failure(curd_session_upload_static(session, "a", payloads, 0, &set),
                   CURD_E_INVALID_ARGUMENT);
    expect_failure(curd_session_upload_static_keyed(session, "a", NULL, 1,
                                                    payloads, 1, &set),
                   CURD_E_INVALID_ARGUMENT);
    expect_failure(curd_session_upload_static_keyed(session, "a", &arg, 0,
                                                    payloads, 1, &set),
                   CURD_E_INVALID_ARGUMENT);
    FUZZ_CHECK(set == NULL);
}

/* ------------------------------------------------------------------------
 * The run
 * ---------------------------------------------------------------------- */
enum step_kind {
    STEP_ALLOC,
    STEP_RELEASE,
    STEP_STALE,
    STEP_FOREIGN,
    STEP_FREE_DIRECTLY,
    STEP_UPLOAD,
    STEP_RELEASE_STATIC,
    STEP_RELEASE_STATIC_BAD,
    STEP_BAD_ARGUMENTS,
    STEP_UPLOAD_KEYED,
    STEP_RENEW,
    STEP_KINDS
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    memset(stale, 0, sizeof stale);
    memset(gone, 0, sizeof gone);
    session_start(fuzz_u8(&in), fuzz_u8(&in));
    check_all();
    for (unsigned step = 0; step < MAX_STEPS && fuzz_more(&in); step++) {
        uint8_t kind = fuzz_u8(&in) % STEP_KINDS;
        uint8_t arg = kind == STEP_UPLOAD || kind == STEP_UPLOAD_KEYED
                          ? 0
                          : fuzz_u8(&in);
        if (trace)
            fprintf(stderr, "step %u: kind %u arg %u\n", step, kind, arg);
        switch (kind) {
        case STEP_ALLOC:
            step_alloc(arg);
            break;
        case STEP_RELEASE:
            step_release(arg);
            break;
        case STEP_STALE:
            step_stale(arg);
            break;
        case STEP_FOREIGN:
            step_foreign();
            break;
        case STEP_FREE_DIRECTLY:
            step_free_directly(arg);
            break;
        case STEP_UPLOAD:
            step_upload(&in);
            break;
        case STEP_RELEASE_STATIC:
            step_release_static(arg);
            break;
        case STEP_RELEASE_STATIC_BAD:
            step_release_static_bad(arg);
            break;
        case STEP_BAD_ARGUMENTS:
            step_bad_arguments(arg);
            break;
        case STEP_UPLOAD_KEYED:
            step_upload_keyed(&in);
            break;
        default:
            session_end();
            session_start(arg, (uint8_t)(arg >> 4));
            break;
        }
        check_all();
    }
    session_end();
    return 0;
}
