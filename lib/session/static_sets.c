/* static_sets.c - a session's static sets: the cache of immutable
 * uploads, by content or by the caller's key. include/curd.h says what a
 * static set promises, static_sets.h how the sets are kept and under
 * which lock.
 *
 * Read top to bottom: the per-process key secret, the set and the
 * session's device, freeing, static sets (key, match, the keyed sets'
 * key and match, upload, release, eviction), then what the session room
 * calls to make, drain and probe them. */
#include "session/static_sets.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/hash_map.h"
#include "base/status.h"
#include "core/core.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "transfer/copy_team.h"
#include "transfer/run.h"
#include "transfer/transfer.h"

/* ------------------------------------------------------------------------
 * The key's secret, drawn once per process: XXH3 keyed with it makes a
 * collision something an attacker cannot compute without the secret. The
 * bytes are compared on every hit anyway, so even a collision could only
 * cost a comparison, never hand out the wrong set.
 * ---------------------------------------------------------------------- */
#define KEY_SECRET_BYTES 192u /* XXH3's own default secret size */
_Static_assert(KEY_SECRET_BYTES >= XXH3_SECRET_SIZE_MIN,
               "XXH3 needs a longer secret");
/* What the key covers besides the bytes, as hashed; bump it when the key's
 * layout changes. */
#define KEY_LAYOUT_VERSION 1u
/* The first word of a keyed set's key (key_keyed), never a layout
 * version. */
#define KEY_LAYOUT_KEYED 0x4b455945445f7631u /* "KEYED_v1" */

/* A verified hit large enough (curdi_run_compare_team:
 * CURD_COMPARE_PARALLEL_MIN, 1 MiB by default) compares with the device's
 * copy team, in pieces of STATIC_TEAM_PIECE_BYTES (some 2 us of one
 * core's comparing: a worker that takes the last one keeps its caller
 * waiting little), at most STATIC_TEAM_ROUND_PIECES per job. */
#define STATIC_TEAM_PIECE_BYTES ((size_t)64 * 1024)
#define STATIC_TEAM_ROUND_PIECES 64u

static unsigned char key_secret[KEY_SECRET_BYTES];
static pthread_once_t key_secret_once = PTHREAD_ONCE_INIT;

static size_t read_random(unsigned char *out, size_t byte_len)
{
    size_t got = 0;
    while (got < byte_len) {
        ssize_t n = getrandom(out + got, byte_len - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    if (got < byte_len) {
        /* A kernel without getrandom, or a filter refusing it. */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        while (fd >= 0 && got < byte_len) {
            ssize_t n = read(fd, out + got, byte_len - got);
            if (n > 0)
                got += (size_t)n;
            else if (!(n < 0 && errno == EINTR))
                break;
        }
        if (fd >= 0)
            close(fd);
    }
    return got;
}

static void key_secret_draw(void)
{
    size_t got = read_random(key_secret, sizeof key_secret);
    if (got == sizeof key_secret)
        return;
    /* No randomness to be had: the clock and this process's addresses,
     * stirred (splitmix64). Weaker, still different per process and run;
     * a collision costs at most a comparison (above). */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t state = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 32)
                     ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&now;
    for (size_t at = got; at < sizeof key_secret; at++) {
        uint64_t z = (state += 0x9E3779B97F4A7C15u);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        key_secret[at] = (unsigned char)(z ^ (z >> 31));
    }
}

/* ------------------------------------------------------------------------
 * A set, the session's device, freeing
 * ---------------------------------------------------------------------- */
typedef struct curdi_static_set {
    curd_static_set public_set; /* the caller's pointer is its address */
    /* In live by that address (every live set), in cache by key.low64
     * (retained sets only), in hints by shape_key. */
    uint64_t shape_key;         /* key_shape's */
    bool hinted;                /* in the hints: the last handed out of
                                   its shape */
    /* Keyed (curd_session_upload_static_keyed): found by the caller's key,
     * never by content, and holding the key instead of a host copy of the
     * bytes. */
    bool keyed;
    XXH128_hash_t key;
    uint64_t total_bytes;
    uint64_t last_use; /* the sets' use clock at its last hand-out */
    uint32_t holds;    /* hand-outs not yet released */
    size_t domain_len;
    size_t caller_key_len;      /* keyed: the caller's key's length */
    const char *domain;         /* these four point into the allocation */
    const size_t *byte_lens;
    /* The payloads back to back, or for a keyed set the caller's key. */
    const unsigned char *bytes;
    struct curdi_static_set *next_free;
    curd_buffer buffers[];      /* public_set.count of them */
} static_set;

/* Lock held: the session's device (static_sets.h). */
curd_status curdi_session_device(curdi_session_shared *session,
                                 const char *what, curd_device **out_device)
{
    curd_device *device =
        atomic_load_explicit(&session->device, memory_order_relaxed);
    if (device == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the session's device was closed, which freed"
                          " the session's buffers and sets. Fix: free the"
                          " session with curd_session_free() and make a new"
                          " one on an open device.",
                          what);
    curd_status status = curdi_device_check(device, what);
    if (status == CURD_OK)
        *out_device = device;
    return status;
}

/* Frees one buffer a session made (static_sets.h). */
void curdi_session_buffer_free(curd_device *device, const char *what,
                               uint64_t id)
{
    if (curdi_resident_probe(device, id) == CURDI_RESIDENT_STALE)
        return; /* freed with curd_buffer_free: nothing left to do */
    if (curdi_resident_free(device, what, id) != CURD_OK)
        curdi_trace("%s: %s", what, curd_last_error());
}

static void free_set(curd_device *device, const char *what, static_set *set)
{
    if (device != NULL)
        for (size_t index = 0; index < set->public_set.count; index++)
            curdi_session_buffer_free(device, what, set->buffers[index].id);
    free(set);
}

/* Frees sets taken out under the lock (linked by `next_free`). */
static void free_sets(curd_device *device, const char *what,
                      static_set *list)
{
    static_set *next;
    for (static_set *set = list; set != NULL; set = next) {
        next = set->next_free;
        free_set(device, what, set);
    }
}

/* ------------------------------------------------------------------------
 * Static sets
 * ---------------------------------------------------------------------- */

/* A validated upload request. */
typedef struct static_request {
    const char *what; /* the entry point, for the sentences */
    const char *domain;
    size_t domain_len;
    const curd_static_payload *payloads;
    size_t count;
    uint64_t total_bytes;
    size_t set_bytes;   /* the set's one allocation */
    uint64_t shape_key; /* key_shape's, once the lookup has run */
    /* Keyed: the caller's key (NULL for a verified upload). */
    const unsigned char *caller_key;
    size_t caller_key_len;
    /* A verified lookup's comparisons: the device's copy team for a set
     * large enough to share (curdi_run_compare_team), else NULL (the
     * caller alone). */
    curdi_copy_team *team;
} static_request;

/* The key (secret, shape and bytes), the lookup and the holds, as the
 * upload's miss and the keyed upload call them. */
struct curdi_static_sets;
uint64_t curdi_static_key_shape(const struct curdi_static_sets *sets,
                                const static_request *request,
                                XXH3_state_t *state);
XXH128_hash_t curdi_static_key_finish(const static_request *request,
                                      XXH3_state_t *state);
XXH128_hash_t curdi_static_key_keyed(const struct curdi_static_sets *sets,
                                     const static_request *request);
bool curdi_static_set_same_shape(const static_set *set,
                                 const static_request *request);
static_set *curdi_static_find_locked(struct curdi_static_sets *sets,
                                     XXH128_hash_t key,
                                     const static_request *request);
static_set *curdi_static_keyed_find_locked(struct curdi_static_sets *sets,
                                           XXH128_hash_t key,
                                           const static_request *request);
curd_status curdi_static_keyed_shape_refused(const static_set *set,
                                             const static_request *request);
void curdi_static_hint_drop(struct curdi_static_sets *sets,
                            static_set *set);
curd_status curdi_static_set_hold(static_set *set, const char *what);
void curdi_static_set_handed_out(struct curdi_static_sets *sets,
                                 static_set *set,
                                 const static_request *request, bool hit);
curd_status curdi_static_cache_lookup(struct curdi_static_sets *sets,
                                      curd_device **device,
                                      static_request *request,
                                      XXH128_hash_t *out_key,
                                      static_set **out_hit);

/* Checks an upload's arguments into *request; what, caller_key and
 * caller_key_len are set in it already. */
static curd_status static_check(const char *domain,
                                const curd_static_payload *payloads,
                                size_t count, const curd_static_set **out_set,
                                static_request *request)
{
    const char *what = request->what;
    if (out_set == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_set is NULL. Fix: pass the address of a"
                          " const curd_static_set pointer.",
                          what);
    if (domain == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: domain is NULL. Fix: pass a tag naming what"
                          " the payloads are, such as"
                          " \"solver/tables-v1\".",
                          what);
    if (count == 0 || payloads == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s. Fix: pass an array of count payloads,"
                          " count at least 1.",
                          what,
                          count == 0 ? "count is 0: a set holds at least one"
                                       " payload"
                                     : "payloads is NULL");
    uint64_t total = 0;
    for (size_t index = 0; index < count; index++) {
        const curd_static_payload *payload = &payloads[index];
        if (payload->data == NULL || payload->byte_len == 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "%s: payload %zu has data %s and byte_len %zu;"
                              " nothing was uploaded. Fix: give every"
                              " payload its bytes and their length, at least"
                              " 1.",
                              what, index,
                              payload->data == NULL ? "NULL" : "set",
                              payload->byte_len);
        if (!curdi_u64_add(total, payload->byte_len, &total))
            return curdi_fail(CURD_E_OVERFLOW,
                              "%s: the payloads' lengths add up past 2^64-1"
                              " at payload %zu. Fix: pass each payload's"
                              " real length.",
                              what, index);
    }
    size_t domain_len = strlen(domain);
    /* One allocation: the set, its handles and lengths, the domain, the
     * bytes (a keyed set: the caller's key instead). */
    bool keyed = request->caller_key != NULL;
    size_t set_bytes = sizeof(static_set), part;
    bool fits = (uint64_t)(size_t)total == total
                && curdi_size_mul(count, sizeof(curd_buffer) + sizeof(size_t),
                                  &part)
                && curdi_size_add(set_bytes, part, &set_bytes)
                && curdi_size_add(set_bytes, domain_len, &set_bytes)
                && curdi_size_add(set_bytes,
                                  keyed ? request->caller_key_len
                                        : (size_t)total,
                                  &set_bytes);
    if (!fits)
        return curdi_fail(CURD_E_OVERFLOW,
                          "%s: %zu payloads of %" PRIu64 " bytes in all"
                          " cannot be held in this address space. Fix: pass"
                          " each payload's real length.",
                          what, count, total);
    request->domain = domain;
    request->domain_len = domain_len;
    request->payloads = payloads;
    request->count = count;
    request->total_bytes = total;
    request->set_bytes = set_bytes;
    return CURD_OK;
}

/* The key, in two steps over one XXH3 state: first what the device's
 * code depends on, the domain and the payloads' lengths (so the bytes'
 * split is part of it), whose digest is the request's shape key; then the
 * bytes, whose digest is the key. A hit through the shape's hint never
 * needs the second step: equal bytes have equal keys. */
uint64_t curdi_static_key_shape(const curdi_static_sets *sets,
                                const static_request *request,
                                XXH3_state_t *state)
{
    const uint64_t facts[6] = {
        KEY_LAYOUT_VERSION,     sets->device_facts[0],
        sets->device_facts[1], sets->device_facts[2],
        (uint64_t)request->domain_len, (uint64_t)request->count,
    };
    pthread_once(&key_secret_once, key_secret_draw);
    (void)XXH3_128bits_reset_withSecret(state, key_secret,
                                        sizeof key_secret);
    (void)XXH3_128bits_update(state, facts, sizeof facts);
    (void)XXH3_128bits_update(state, request->domain, request->domain_len);
    for (size_t index = 0; index < request->count; index++) {
        uint64_t byte_len = request->payloads[index].byte_len;
        (void)XXH3_128bits_update(state, &byte_len, sizeof byte_len);
    }
    /* A digest leaves the state as it was, ready for the bytes. */
    return XXH3_128bits_digest(state).low64;
}

XXH128_hash_t curdi_static_key_finish(const static_request *request,
                                      XXH3_state_t *state)
{
    for (size_t index = 0; index < request->count; index++)
        (void)XXH3_128bits_update(state, request->payloads[index].data,
                                  request->payloads[index].byte_len);
    return XXH3_128bits_digest(state);
}

/* The domain's length and the payloads' count and lengths: cheap, and
 * under the lock. */
bool curdi_static_set_same_shape(const static_set *set,
                                 const static_request *request)
{
    if (set->public_set.count != request->count
        || set->domain_len != request->domain_len
        || set->total_bytes != request->total_bytes)
        return false;
    for (size_t index = 0; index < request->count; index++)
        if (set->byte_lens[index] != request->payloads[index].byte_len)
            return false;
    return true;
}

/* The payloads' bytes against the set's host copy, shared with the
 * device's copy team (request->team; NULL: the caller alone) in pieces of
 * STATIC_TEAM_PIECE_BYTES, STATIC_TEAM_ROUND_PIECES at a time, so that
 * any number of payloads needs no allocation; a difference ends it. */
static bool payloads_match(const unsigned char *copy,
                           const static_request *request)
{
    curdi_compare_piece pieces[STATIC_TEAM_ROUND_PIECES];
    size_t taken = 0;
    for (size_t index = 0; index < request->count; index++) {
        const unsigned char *data = request->payloads[index].data;
        size_t left = request->payloads[index].byte_len;
        while (left > 0) {
            size_t byte_len =
                left < STATIC_TEAM_PIECE_BYTES ? left : STATIC_TEAM_PIECE_BYTES;
            pieces[taken++] = (curdi_compare_piece){copy, data, byte_len};
            copy += byte_len;
            data += byte_len;
            left -= byte_len;
            if (taken == STATIC_TEAM_ROUND_PIECES) {
                if (!curdi_copy_team_equal(request->team, pieces, taken))
                    return false;
                taken = 0;
            }
        }
    }
    return curdi_copy_team_equal(request->team, pieces, taken);
}

/* The domain and the bytes, against the set's host copy. The set is held
 * (or the lock is), so its copy cannot go away underneath. A keyed set
 * holds no copy and never matches here. */
static bool set_bytes_match(const static_set *set,
                            const static_request *request)
{
    if (set->keyed
        || memcmp(set->domain, request->domain, request->domain_len) != 0)
        return false;
    if (request->team != NULL)
        return payloads_match(set->bytes, request);
    const unsigned char *copy = set->bytes;
    for (size_t index = 0; index < request->count; index++) {
        size_t byte_len = request->payloads[index].byte_len;
        if (memcmp(copy, request->payloads[index].data, byte_len) != 0)
            return false;
        copy += byte_len;
    }
    return true;
}

/* Lock held: the first retained set of this shape and key (first), or
 * the next one after the cursor's. */
static static_set *cache_candidate(curdi_static_sets *sets, XXH128_hash_t key,
                                   const static_request *request,
                                   curdi_hash_map_cursor *cursor, bool first)
{
    static_set *set =
        first ? curdi_hash_map_find(&sets->cache, &key.low64, cursor)
              : curdi_hash_map_find_next(&sets->cache, &key.low64, cursor);
    for (; set != NULL;
         set = curdi_hash_map_find_next(&sets->cache, &key.low64, cursor))
        if (!set->keyed && XXH128_isEqual(set->key, key)
            && curdi_static_set_same_shape(set, request))
            return set;
    return NULL;
}

/* Lock held: a retained set with these exact bytes, compared under the
 * lock (after a collision, and a miss's second look). */
static static_set *cache_find_locked(curdi_static_sets *sets,
                                     XXH128_hash_t key,
                                     const static_request *request)
{
    curdi_hash_map_cursor cursor;
    for (static_set *set = cache_candidate(sets, key, request, &cursor, true);
         set != NULL;
         set = cache_candidate(sets, key, request, &cursor, false))
        if (set_bytes_match(set, request))
            return set;
    return NULL;
}

/* The key of a keyed set: what the device's code depends on, the domain
 * and the caller's key, never the bytes. Its layout starts with its own
 * tag, so no keyed key is a verified one's digest of the same words;
 * what keeps the two apart, though, is the keyed flag every lookup
 * checks (a verified lookup must never trust a key it cannot check, nor
 * a keyed one pay for reading bytes). */
XXH128_hash_t curdi_static_key_keyed(const curdi_static_sets *sets,
                                     const static_request *request)
{
    const uint64_t facts[6] = {
        KEY_LAYOUT_KEYED,      sets->device_facts[0],
        sets->device_facts[1], sets->device_facts[2],
        (uint64_t)request->domain_len, (uint64_t)request->caller_key_len,
    };
    XXH3_state_t state;
    pthread_once(&key_secret_once, key_secret_draw);
    (void)XXH3_128bits_reset_withSecret(&state, key_secret,
                                        sizeof key_secret);
    (void)XXH3_128bits_update(&state, facts, sizeof facts);
    (void)XXH3_128bits_update(&state, request->domain, request->domain_len);
    (void)XXH3_128bits_update(&state, request->caller_key,
                              request->caller_key_len);
    return XXH3_128bits_digest(&state);
}

/* Lock held: the retained keyed set of this domain and caller's key
 * (whatever its lengths), or NULL. */
static_set *curdi_static_keyed_find_locked(curdi_static_sets *sets,
                                           XXH128_hash_t key,
                                           const static_request *request)
{
    curdi_hash_map_cursor cursor;
    for (static_set *set = curdi_hash_map_find(&sets->cache, &key.low64,
                                               &cursor);
         set != NULL;
         set = curdi_hash_map_find_next(&sets->cache, &key.low64, &cursor))
        if (set->keyed && XXH128_isEqual(set->key, key)
            && set->domain_len == request->domain_len
            && set->caller_key_len == request->caller_key_len
            && memcmp(set->domain, request->domain, request->domain_len) == 0
            && memcmp(set->bytes, request->caller_key,
                      request->caller_key_len)
                   == 0)
            return set;
    return NULL;
}

/* Lock held: the retained set the request names: by its key for a keyed
 * one, by its bytes (compared under the lock) for a verified one. */
static_set *curdi_static_find_locked(curdi_static_sets *sets,
                                     XXH128_hash_t key,
                                     const static_request *request)
{
    return request->caller_key != NULL
               ? curdi_static_keyed_find_locked(sets, key, request)
               : cache_find_locked(sets, key, request);
}

/* A keyed set found with other lengths than the request's: refused,
 * nothing changed (a key the caller reuses for other payloads is a
 * mistake the lengths can catch for free). */
curd_status curdi_static_keyed_shape_refused(const static_set *set,
                                             const static_request *request)
{
    size_t index = 0;
    while (index < request->count && index < set->public_set.count
           && set->byte_lens[index] == request->payloads[index].byte_len)
        index++;
    if (set->public_set.count != request->count)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the set cached under domain \"%s\" and this"
                          " key holds %zu payloads, and this call passes"
                          " %zu; nothing was uploaded. Fix: give each"
                          " version of the payloads a key of its own (its"
                          " version id or content hash), or use"
                          " curd_session_upload_static(), which compares"
                          " the bytes.",
                          request->what, request->domain,
                          set->public_set.count, request->count);
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "%s: the set cached under domain \"%s\" and this key"
                      " has payload %zu of %zu bytes, and this call passes"
                      " %zu; nothing was uploaded. Fix: give each version of"
                      " the payloads a key of its own (its version id or"
                      " content hash), or use curd_session_upload_static(),"
                      " which compares the bytes.",
                      request->what, request->domain, index,
                      set->byte_lens[index],
                      request->payloads[index].byte_len);
}

/* Lock held: the retained set last handed out with the request's shape
 * (its hint), or NULL. */
static static_set *hint_find(curdi_static_sets *sets, uint64_t shape_key,
                             const static_request *request)
{
    curdi_hash_map_cursor cursor;
    for (static_set *set = curdi_hash_map_find(&sets->hints, &shape_key,
                                               &cursor);
         set != NULL;
         set = curdi_hash_map_find_next(&sets->hints, &shape_key, &cursor))
        if (curdi_static_set_same_shape(set, request)
            && memcmp(set->domain, request->domain, request->domain_len)
                   == 0)
            return set;
    return NULL;
}

void curdi_static_hint_drop(curdi_static_sets *sets, static_set *set)
{
    if (set->hinted) {
        curdi_hash_map_remove(&sets->hints, &set->shape_key, set);
        set->hinted = false;
    }
}

/* Lock held: a retained set handed out becomes its shape's hint (unless
 * the hints' table cannot grow: a hint only saves a hash). */
static void hint_take(curdi_static_sets *sets, static_set *set,
                      const static_request *request)
{
    if (set->hinted || !set->public_set.retained || set->keyed)
        return;
    static_set *previous = hint_find(sets, set->shape_key, request);
    if (previous != NULL)
        curdi_static_hint_drop(sets, previous);
    set->hinted =
        curdi_hash_map_insert(&sets->hints, &set->shape_key, set);
}

/* Lock held: one more hold of a set, before its bytes are known to match
 * (the caller drops it on a mismatch). */
curd_status curdi_static_set_hold(static_set *set, const char *what)
{
    if (set->holds == UINT32_MAX)
        return curdi_fail(CURD_E_BUDGET,
                          "%s: the set is held 2^32-1 times already. Fix:"
                          " release each set with"
                          " curd_session_release_static() once you are done"
                          " with it.",
                          what);
    set->holds++;
    return CURD_OK;
}

/* Lock held: a hold confirmed as a hand-out, a hit when counted so. */
void curdi_static_set_handed_out(curdi_static_sets *sets, static_set *set,
                                 const static_request *request, bool hit)
{
    set->last_use = ++sets->use_clock;
    hint_take(sets, set, request);
    if (hit && set->keyed)
        sets->session->stats.static_keyed_hits++;
    else if (hit)
        sets->session->stats.static_hits++;
}

/* Holds `set` (found under the lock, NULL for none), compares its bytes
 * outside the lock, so that threads hitting at once compare at once, and
 * counts a hit; drops the hold on a mismatch. Called without the lock,
 * which it takes. */
static curd_status hold_if_same(curdi_static_sets *sets, static_set *set,
                                const static_request *request, bool *out_same)
{
    *out_same = false;
    curd_status status = curdi_static_set_hold(set, request->what);
    pthread_mutex_unlock(&sets->session->lock);
    if (status != CURD_OK)
        return status;
    bool same = set_bytes_match(set, request);
    pthread_mutex_lock(&sets->session->lock);
    if (same)
        curdi_static_set_handed_out(sets, set, request, true);
    else
        set->holds--;
    pthread_mutex_unlock(&sets->session->lock);
    *out_same = same;
    return CURD_OK;
}

/* The hit path: the shape's hint first (no hash of the bytes: a pipeline
 * uploads the set it uploaded last time), then the key, every candidate's
 * bytes compared. *out_hit NULL: a miss, *out_key then set. */
curd_status curdi_static_cache_lookup(curdi_static_sets *sets,
                                      curd_device **device,
                                      static_request *request,
                                      XXH128_hash_t *out_key,
                                      static_set **out_hit)
{
    const char *what = "curd_session_upload_static";
    XXH3_state_t state;
    bool same = false;
    *out_hit = NULL;
    uint64_t shape_key = curdi_static_key_shape(sets, request, &state);
    request->shape_key = shape_key;
    pthread_mutex_lock(&sets->session->lock);
    curd_status status = curdi_session_device(sets->session, what, device);
    if (status == CURD_OK)
        request->team = curdi_run_compare_team(*device, request->total_bytes);
    static_set *set =
        status == CURD_OK ? hint_find(sets, shape_key, request) : NULL;
    if (set == NULL)
        pthread_mutex_unlock(&sets->session->lock);
    else
        status = hold_if_same(sets, set, request, &same);
    if (status != CURD_OK || same) {
        *out_hit = same ? set : NULL;
        return status;
    }
    XXH128_hash_t key = curdi_static_key_finish(request, &state);
    *out_key = key;
    pthread_mutex_lock(&sets->session->lock);
    status = curdi_session_device(sets->session, what, device);
    curdi_hash_map_cursor cursor;
    set = status == CURD_OK
              ? cache_candidate(sets, key, request, &cursor, true)
              : NULL;
    if (set == NULL) {
        pthread_mutex_unlock(&sets->session->lock);
        return status;
    }
    status = hold_if_same(sets, set, request, &same);
    if (status == CURD_OK && !same) {
        /* A 128-bit collision, or a thread's miss inserted meanwhile:
         * every candidate, compared under the lock. */
        pthread_mutex_lock(&sets->session->lock);
        set = cache_find_locked(sets, key, request);
        if (set != NULL)
            status = curdi_static_set_hold(set, request->what);
        same = set != NULL && status == CURD_OK;
        if (same)
            curdi_static_set_handed_out(sets, set, request, true);
        pthread_mutex_unlock(&sets->session->lock);
    }
    *out_hit = same ? set : NULL;
    return status;
}

/* A new set holding the request's bytes, its buffers not yet made. */
static static_set *set_new(const static_request *request, XXH128_hash_t key)
{
    static_set *set = malloc(request->set_bytes);
    if (set == NULL)
        return NULL;
    memset(set, 0, sizeof *set);
    size_t *byte_lens = (size_t *)(void *)(set->buffers + request->count);
    char *domain = (char *)(byte_lens + request->count);
    unsigned char *bytes = (unsigned char *)domain + request->domain_len;
    bool keyed = request->caller_key != NULL;
    memcpy(domain, request->domain, request->domain_len);
    if (keyed)
        memcpy(bytes, request->caller_key, request->caller_key_len);
    unsigned char *at = bytes;
    for (size_t index = 0; index < request->count; index++) {
        byte_lens[index] = request->payloads[index].byte_len;
        if (!keyed) {
            memcpy(at, request->payloads[index].data, byte_lens[index]);
            at += byte_lens[index];
        }
        set->buffers[index].id = 0;
    }
    set->keyed = keyed;
    set->caller_key_len = keyed ? request->caller_key_len : 0;
    set->public_set.struct_size = sizeof set->public_set;
    set->public_set.count = request->count;
    set->public_set.buffers = set->buffers;
    set->key = key;
    set->total_bytes = request->total_bytes;
    set->domain_len = request->domain_len;
    set->domain = domain;
    set->byte_lens = byte_lens;
    set->bytes = bytes;
    set->shape_key = request->shape_key;
    return set;
}

/* Allocates the set's buffers and uploads the caller's payloads into them
 * in one batch; on a failure frees every buffer it made. */
static curd_status set_upload(curd_device *device, static_set *set,
                              const static_request *request)
{
    const char *what = request->what;
    size_t made = 0;
    curd_status status = CURD_OK;
    curd_upload *items = calloc(request->count, sizeof *items);
    if (items == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: the upload list of %zu payloads could not be"
                          " allocated. Fix: free host memory and try again.",
                          what, request->count);
    for (; made < request->count && status == CURD_OK; made++) {
        status = curdi_resident_alloc(device, what, set->byte_lens[made],
                                      &set->buffers[made].id);
        /* The set's buffers are the session's: curd_buffer_free refuses
         * them, so no hit ever hands out a handle freed under the cache. */
        if (status == CURD_OK)
            curdi_resident_own(device, set->buffers[made].id,
                               "Fix: release the set with"
                               " curd_session_release_static(); the session"
                               " frees its buffers when the set leaves the"
                               " cache or the session is freed.");
        items[made] = (curd_upload){set->buffers[made], 0,
                                    request->payloads[made].data,
                                    set->byte_lens[made]};
    }
    if (status == CURD_OK)
        status = curdi_transfer_upload_batch(device, what, items,
                                             request->count);
    free(items);
    /* Nothing half-made stays: the buffers made so far go, unseen by the
     * caller. */
    if (status != CURD_OK)
        for (size_t index = 0; index < made; index++)
            if (set->buffers[index].id != 0)
                curdi_session_buffer_free(device, what,
                                          set->buffers[index].id);
    return status;
}

/* Lock held: a miss counted, keyed or verified. */
static void count_miss(curdi_static_sets *sets, const static_request *request)
{
    if (request->caller_key != NULL)
        sets->session->stats.static_keyed_misses++;
    else
        sets->session->stats.static_misses++;
}

/* Lock held: the cached bytes of sets somebody holds (never evicted). */
static void add_held_bytes(void *link, void *context)
{
    const static_set *set = link;
    if (set->holds != 0)
        *(uint64_t *)context += set->total_bytes;
}

/* Lock held: the retained set nobody holds that goes first: the largest,
 * then the least recently handed out. */
static void pick_victim(void *link, void *context)
{
    static_set **victim = context;
    static_set *set = link;
    if (set->holds != 0)
        return;
    if (*victim == NULL || set->total_bytes > (*victim)->total_bytes
        || (set->total_bytes == (*victim)->total_bytes
            && set->last_use < (*victim)->last_use))
        *victim = set;
}

/* Lock held: room for one more set in the tables set_insert fills, so
 * that it cannot fail halfway. */
static bool set_reserve(curdi_static_sets *sets)
{
    return curdi_hash_map_reserve(&sets->live, 1)
           && curdi_hash_map_reserve(&sets->cache, 1);
}

/* Lock held: a new set into the session, retained when it fits the
 * static budget once unheld sets are evicted, largest first. */
static void set_insert(curdi_static_sets *sets, static_set *set,
                       const static_request *request, static_set **to_free)
{
    curd_session_stats *stats = &sets->session->stats;
    uint64_t held = 0;
    curdi_hash_map_each(&sets->cache, add_held_bytes, &held);
    bool retain = set->total_bytes <= stats->static_budget_bytes
                  && held + set->total_bytes <= stats->static_budget_bytes;
    while (retain
           && stats->cached_bytes + set->total_bytes
                  > stats->static_budget_bytes) {
        static_set *victim = NULL;
        curdi_hash_map_each(&sets->cache, pick_victim, &victim);
        uint64_t address = curdi_hash_map_address_key(victim);
        curdi_hash_map_remove(&sets->cache, &victim->key.low64, victim);
        curdi_hash_map_remove(&sets->live, &address, victim);
        curdi_static_hint_drop(sets, victim);
        stats->cached_bytes -= victim->total_bytes;
        stats->cached_sets--;
        stats->static_evictions++;
        victim->next_free = *to_free;
        *to_free = victim;
    }
    set->public_set.retained = retain ? 1u : 0u;
    set->holds = 1;
    curdi_static_set_handed_out(sets, set, request, false);
    /* Room was reserved in both tables (set_reserve): the inserts cannot
     * fail. */
    uint64_t address = curdi_hash_map_address_key(set);
    bool inserted = curdi_hash_map_insert(&sets->live, &address, set);
    CURDI_ASSERT(inserted);
    if (retain) {
        inserted = curdi_hash_map_insert(&sets->cache, &set->key.low64, set);
        CURDI_ASSERT(inserted);
        stats->cached_bytes += set->total_bytes;
        stats->cached_sets++;
    } else {
        stats->unretained_bytes += set->total_bytes;
        stats->unretained_sets++;
    }
    count_miss(sets, request);
}

/* The miss: a new set made and uploaded outside the lock, then kept, or
 * dropped for one another thread made meanwhile. */
static curd_status static_miss(curdi_static_sets *sets, curd_device *device,
                               XXH128_hash_t key,
                               const static_request *request,
                               const curd_static_set **out_set)
{
    const char *what = request->what;
    static_set *to_free = NULL;
    static_set *set = set_new(request, key);
    if (set == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: %zu bytes for the set and its host copy could"
                          " not be allocated. Fix: free host memory, or pass"
                          " smaller sets.",
                          what, request->set_bytes);
    curd_status status = set_upload(device, set, request);
    if (status != CURD_OK) {
        free(set);
        return status;
    }
    pthread_mutex_lock(&sets->session->lock);
    curd_device *now = NULL;
    status = curdi_session_device(sets->session, what, &now);
    static_set *theirs = status == CURD_OK
                             ? curdi_static_find_locked(sets, key, request)
                             : NULL;
    if (theirs != NULL && !curdi_static_set_same_shape(theirs, request))
        /* Keyed: another thread cached other lengths under the key. */
        status = curdi_static_keyed_shape_refused(theirs, request);
    else if (theirs != NULL)
        status = curdi_static_set_hold(theirs, what);
    if (status == CURD_OK && theirs != NULL) {
        /* Another thread cached the same set while this one uploaded. */
        curdi_static_set_handed_out(sets, theirs, request, false);
        count_miss(sets, request);
        set->next_free = to_free;
        to_free = set;
        *out_set = &theirs->public_set;
    } else if (status == CURD_OK && !set_reserve(sets)) {
        status = curdi_fail(CURD_E_OUT_OF_MEMORY,
                            "%s: the session's table of sets could not grow;"
                            " the set was not kept. Fix: free host memory"
                            " and try again.",
                            what);
        set->next_free = to_free;
        to_free = set;
    } else if (status == CURD_OK) {
        set_insert(sets, set, request, &to_free);
        *out_set = &set->public_set;
    } else {
        /* The device was closed meanwhile (freeing the buffers) or the
         * hit cannot be counted: this upload's set goes. */
        set->next_free = to_free;
        to_free = set;
    }
    pthread_mutex_unlock(&sets->session->lock);
    free_sets(now, what, to_free);
    return status;
}

curd_status curdi_static_sets_upload(curdi_static_sets *sets,
                                     const char *domain,
                                     const curd_static_payload *payloads,
                                     size_t count,
                                     const curd_static_set **out_set)
{
    static_request request = {.what = "curd_session_upload_static"};
    curd_device *device = NULL;
    static_set *hit = NULL;
    curd_status status =
        static_check(domain, payloads, count, out_set, &request);
    if (status != CURD_OK)
        return status;
    XXH128_hash_t key = {0, 0};
    status = curdi_static_cache_lookup(sets, &device, &request, &key, &hit);
    if (status != CURD_OK)
        return status;
    if (hit != NULL) {
        *out_set = &hit->public_set;
        return CURD_OK;
    }
    return static_miss(sets, device, key, &request, out_set);
}

curd_status curdi_static_sets_upload_keyed(
    curdi_static_sets *sets, const char *domain, const void *key,
    size_t key_len, const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set)
{
    static_request request = {.what = "curd_session_upload_static_keyed",
                              .caller_key = key,
                              .caller_key_len = key_len};
    curd_device *device = NULL;
    if (key == NULL || key_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: key is %s. Fix: pass the bytes of a key you"
                          " vouch for (a version id, a content hash you"
                          " have), at least 1 byte, or use"
                          " curd_session_upload_static() to have the bytes"
                          " compared.",
                          request.what,
                          key == NULL ? "NULL" : "0 bytes long");
    curd_status status =
        static_check(domain, payloads, count, out_set, &request);
    if (status != CURD_OK)
        return status;
    /* A hit is this: a short hash, one lock, one probe, the lengths. */
    XXH128_hash_t set_key = curdi_static_key_keyed(sets, &request);
    pthread_mutex_lock(&sets->session->lock);
    status = curdi_session_device(sets->session, request.what, &device);
    static_set *set =
        status == CURD_OK
            ? curdi_static_keyed_find_locked(sets, set_key, &request)
            : NULL;
    if (set != NULL && !curdi_static_set_same_shape(set, &request))
        status = curdi_static_keyed_shape_refused(set, &request);
    else if (set != NULL)
        status = curdi_static_set_hold(set, request.what);
    if (set != NULL && status == CURD_OK) {
        curdi_static_set_handed_out(sets, set, &request, true);
        *out_set = &set->public_set;
    }
    pthread_mutex_unlock(&sets->session->lock);
    if (set != NULL || status != CURD_OK)
        return status;
    return static_miss(sets, device, set_key, &request, out_set);
}

/* Lock held: the live set at this address, or NULL; the address is
 * compared before anything is read through it. */
static static_set *live_set(curdi_static_sets *sets,
                            const curd_static_set *set)
{
    uint64_t address = curdi_hash_map_address_key(set);
    return curdi_hash_map_find(&sets->live, &address, NULL);
}

/* Lock held: whether a transfer or dispatch still uses one of the set's
 * buffers (its last release must not free them then). */
static bool set_in_use(curd_device *device, const static_set *set)
{
    for (size_t index = 0; index < set->public_set.count; index++)
        if (curdi_resident_probe(device, set->buffers[index].id)
            == CURDI_RESIDENT_IN_USE)
            return true;
    return false;
}

curd_status curdi_static_sets_release(curdi_static_sets *sets,
                                      const curd_static_set *set)
{
    const char *what = "curd_session_release_static";
    curd_device *device = NULL;
    static_set *to_free = NULL;
    if (set == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: set is NULL. Fix: pass a set from"
                          " curd_session_upload_static().",
                          what);
    pthread_mutex_lock(&sets->session->lock);
    curd_status status = curdi_session_device(sets->session, what, &device);
    static_set *live = status == CURD_OK ? live_set(sets, set) : NULL;
    if (status == CURD_OK && (live == NULL || live->holds == 0))
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: set %p %s. Fix: release each set once for"
                            " each curd_session_upload_static() that handed"
                            " it out, to the session that did.",
                            what, (const void *)set,
                            live == NULL
                                ? "is not a live set of this session (its"
                                  " last release freed it, or another"
                                  " session made it)"
                                : "is cached but nobody holds it: it was"
                                  " released more often than handed out");
    else if (status == CURD_OK && !live->public_set.retained
             && live->holds == 1 && set_in_use(device, live))
        status = curdi_fail(CURD_E_BUSY,
                            "%s: a buffer of set %p is still in use by a"
                            " transfer or dispatch in flight; nothing was"
                            " done. Fix: release the set once that work is"
                            " complete (curd_pending_wait(),"
                            " curd_device_sync_uploads()).",
                            what, (const void *)set);
    else if (status == CURD_OK && --live->holds == 0
             && !live->public_set.retained) {
        uint64_t address = curdi_hash_map_address_key(live);
        curdi_hash_map_remove(&sets->live, &address, live);
        sets->session->stats.unretained_bytes -= live->total_bytes;
        sets->session->stats.unretained_sets--;
        to_free = live;
    }
    pthread_mutex_unlock(&sets->session->lock);
    if (to_free != NULL)
        free_set(device, what, to_free);
    return status;
}

/* ------------------------------------------------------------------------
 * Making, draining and probing a session's sets
 * ---------------------------------------------------------------------- */
bool curdi_static_sets_init(curdi_static_sets *sets,
                            curdi_session_shared *session,
                            const curd_device *device)
{
    sets->session = session;
    sets->device_facts[0] =
        (uint64_t)(uint32_t)device->props.compute_capability_major;
    sets->device_facts[1] =
        (uint64_t)(uint32_t)device->props.compute_capability_minor;
    sets->device_facts[2] = device->props.capabilities;
    return curdi_hash_map_init(&sets->live, 0, CURDI_SESSION_MAP_FIRST_SLOTS)
           && curdi_hash_map_init(&sets->cache, 0,
                                  CURDI_SESSION_MAP_FIRST_SLOTS)
           && curdi_hash_map_init(&sets->hints, 0,
                                  CURDI_SESSION_MAP_FIRST_SLOTS);
}

void curdi_static_sets_fini(curdi_static_sets *sets)
{
    curdi_hash_map_fini(&sets->live);
    curdi_hash_map_fini(&sets->cache);
    curdi_hash_map_fini(&sets->hints);
}

static void drain_set(void *link, void *context)
{
    static_set **drained = context;
    static_set *set = link;
    set->next_free = *drained;
    *drained = set;
}

struct curdi_static_set *curdi_static_sets_drain(curdi_static_sets *sets)
{
    static_set *drained = NULL;
    curdi_hash_map_each(&sets->live, drain_set, &drained);
    curdi_hash_map_clear(&sets->live);
    curdi_hash_map_clear(&sets->cache);
    curdi_hash_map_clear(&sets->hints);
    sets->session->stats.cached_bytes = sets->session->stats.cached_sets = 0;
    sets->session->stats.unretained_bytes =
        sets->session->stats.unretained_sets = 0;
    return drained;
}

void curdi_static_sets_free(curd_device *device, const char *what,
                            struct curdi_static_set *drained)
{
    free_sets(device, what, drained);
}

bool curdi_static_sets_busy(const curdi_static_sets *sets,
                            curd_device *device)
{
    size_t position = 0;
    for (const static_set *set;
         (set = curdi_hash_map_next_entry(&sets->live, &position)) != NULL;)
        if (set_in_use(device, set))
            return true;
    return false;
}
