/* session.c - sessions: exact-size buffer reuse and the content-addressed
 * cache of static uploads. include/curd.h says what a session promises,
 * session.h how the room is shaped and in what order its locks nest.
 *
 * Read top to bottom: the indexes, the per-process key secret, sessions and the room, buffers (alloc, release,
 * eviction), static sets (key, match, upload, release, eviction), then
 * new, free and statistics. */
#include "session/session.h"

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

#include "base/checked.h"
#include "base/hash_map.h"
#include "core/core.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "base/status.h"
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

typedef struct static_set {
    curd_static_set public_set; /* the caller's pointer is its address */
    /* In sets by that address (every live set), in cache by key.low64
     * (retained sets only), in hints by shape_key. */
    uint64_t shape_key;         /* key_shape's */
    bool hinted;                /* in the hints: the last handed out of
                                   its shape */
    XXH128_hash_t key;
    uint64_t total_bytes;
    uint64_t last_use; /* the session's use clock at its last hand-out */
    uint32_t holds;    /* hand-outs not yet released */
    size_t domain_len;
    const char *domain;         /* these four point into the allocation */
    const size_t *byte_lens;
    const unsigned char *bytes; /* the payloads back to back */
    struct static_set *next_free;
    curd_buffer buffers[];      /* public_set.count of them */
} static_set;

static curd_status session_device(curd_session *session, const char *what,
                                  curd_device **out_device)
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

static curd_status null_session(const char *what)
{
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "%s: session is NULL. Fix: pass a session from"
                      " curd_session_new().",
                      what);
}

/* What a session holds, taken out of its indexes (lock held), to be freed
 * after the lock is dropped: records linked by `below`, sets by
static void drain_set(void *link, void *context)
{
    drained *out = context;
    static_set *set = link;
    set->next_free = out->sets;
    out->sets = set;
}


/* Frees one buffer the session made, outside the session's lock. A
 * failure can only come from a buffer freed or still used behind the
 * session's back (a caller's mistake): the device frees it at close. */
static void free_buffer(curd_device *device, const char *what, uint64_t id)
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
            free_buffer(device, what, set->buffers[index].id);
    free(set);
}

/* Frees records taken out under the lock (linked by `below`), and with
 * device not NULL their device memory: the buffer of a record whose
 * handle is still set, or the block of one taken from the resident table
 * already (freed at release). A closing device (NULL here) frees its
 * buffers itself. A pool that fails to take a block back has lost track

/* Frees sets taken out under the lock (linked by `next_free`). */
static void free_sets(curd_device *device, const char *what, static_set *sets)
{
    static_set *next;
    for (static_set *set = sets; set != NULL; set = next) {
        next = set->next_free;
        free_set(device, what, set);
    }
}
/* ------------------------------------------------------------------------
 * Static sets
 * ---------------------------------------------------------------------- */

/* A validated upload request. */
typedef struct static_request {
    const char *domain;
    size_t domain_len;
    const curd_static_payload *payloads;
    size_t count;
    uint64_t total_bytes;
    size_t set_bytes;   /* the set's one allocation */
    uint64_t shape_key; /* key_shape's, once the lookup has run */
} static_request;

static curd_status static_check(curd_session *session, const char *domain,
                                const curd_static_payload *payloads,
                                size_t count, const curd_static_set **out_set,
                                static_request *request)
{
    const char *what = "curd_session_upload_static";
    if (session == NULL)
        return null_session(what);
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
     * bytes. */
    size_t set_bytes = sizeof(static_set), part;
    bool fits = (uint64_t)(size_t)total == total
                && curdi_size_mul(count, sizeof(curd_buffer) + sizeof(size_t),
                                  &part)
                && curdi_size_add(set_bytes, part, &set_bytes)
                && curdi_size_add(set_bytes, domain_len, &set_bytes)
                && curdi_size_add(set_bytes, (size_t)total, &set_bytes);
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
static uint64_t key_shape(const curd_session *session,
                          const static_request *request, XXH3_state_t *state)
{
    const uint64_t facts[6] = {
        KEY_LAYOUT_VERSION,     session->device_facts[0],
        session->device_facts[1], session->device_facts[2],
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

static XXH128_hash_t key_finish(const static_request *request,
                                XXH3_state_t *state)
{
    for (size_t index = 0; index < request->count; index++)
        (void)XXH3_128bits_update(state, request->payloads[index].data,
                                  request->payloads[index].byte_len);
    return XXH3_128bits_digest(state);
}

/* The domain's length and the payloads' count and lengths: cheap, and
 * under the lock. */
static bool set_same_shape(const static_set *set,
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

/* The domain and the bytes, against the set's host copy. The set is held
 * (or the lock is), so its copy cannot go away underneath. */
static bool set_bytes_match(const static_set *set,
                            const static_request *request)
{
    const unsigned char *copy = set->bytes;
    if (memcmp(set->domain, request->domain, request->domain_len) != 0)
        return false;
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
static static_set *cache_candidate(curd_session *session, XXH128_hash_t key,
                                   const static_request *request,
                                   curdi_hash_map_cursor *cursor, bool first)
{
    static_set *set =
        first ? curdi_hash_map_find(&session->cache, &key.low64, cursor)
              : curdi_hash_map_find_next(&session->cache, &key.low64, cursor);
    for (; set != NULL;
         set = curdi_hash_map_find_next(&session->cache, &key.low64, cursor))
        if (XXH128_isEqual(set->key, key) && set_same_shape(set, request))
            return set;
    return NULL;
}

/* Lock held: a retained set with these exact bytes, compared under the
 * lock (after a collision, and a miss's second look). */
static static_set *cache_find_locked(curd_session *session, XXH128_hash_t key,
                                     const static_request *request)
{
    curdi_hash_map_cursor cursor;
    for (static_set *set = cache_candidate(session, key, request, &cursor, true);
         set != NULL;
         set = cache_candidate(session, key, request, &cursor, false))
        if (set_bytes_match(set, request))
            return set;
    return NULL;
}

/* Lock held: the retained set last handed out with the request's shape
 * (its hint), or NULL. */
static static_set *hint_find(curd_session *session, uint64_t shape_key,
                             const static_request *request)
{
    curdi_hash_map_cursor cursor;
    for (static_set *set = curdi_hash_map_find(&session->hints, &shape_key,
                                               &cursor);
         set != NULL;
         set = curdi_hash_map_find_next(&session->hints, &shape_key, &cursor))
        if (set_same_shape(set, request)
            && memcmp(set->domain, request->domain, request->domain_len)
                   == 0)
            return set;
    return NULL;
}

static void hint_drop(curd_session *session, static_set *set)
{
    if (set->hinted) {
        curdi_hash_map_remove(&session->hints, &set->shape_key, set);
        set->hinted = false;
    }
}

/* Lock held: a retained set handed out becomes its shape's hint (unless
 * the hints' table cannot grow: a hint only saves a hash). */
static void hint_take(curd_session *session, static_set *set,
                      const static_request *request)
{
    if (set->hinted || !set->public_set.retained)
        return;
    static_set *previous = hint_find(session, set->shape_key, request);
    if (previous != NULL)
        hint_drop(session, previous);
    set->hinted =
        curdi_hash_map_insert(&session->hints, &set->shape_key, set);
}

/* Lock held: one more hold of a set, before its bytes are known to match
 * (the caller drops it on a mismatch). */
static curd_status set_hold(static_set *set)
{
    if (set->holds == UINT32_MAX)
        return curdi_fail(CURD_E_BUDGET,
                          "curd_session_upload_static: the set is held"
                          " 2^32-1 times already. Fix: release each set with"
                          " curd_session_release_static() once you are done"
                          " with it.");
    set->holds++;
    return CURD_OK;
}

/* Lock held: a hold confirmed as a hand-out, a hit when counted so. */
static void set_handed_out(curd_session *session, static_set *set,
                           const static_request *request, bool hit)
{
    set->last_use = ++session->use_clock;
    hint_take(session, set, request);
    if (hit)
        session->stats.static_hits++;
}

/* Holds `set` (found under the lock, NULL for none), compares its bytes
 * outside the lock, so that threads hitting at once compare at once, and
 * counts a hit; drops the hold on a mismatch. Called without the lock,
 * which it takes. */
static curd_status hold_if_same(curd_session *session, static_set *set,
                                const static_request *request, bool *out_same)
{
    *out_same = false;
    curd_status status = set_hold(set);
    pthread_mutex_unlock(&session->lock);
    if (status != CURD_OK)
        return status;
    bool same = set_bytes_match(set, request);
    pthread_mutex_lock(&session->lock);
    if (same)
        set_handed_out(session, set, request, true);
    else
        set->holds--;
    pthread_mutex_unlock(&session->lock);
    *out_same = same;
    return CURD_OK;
}

/* The hit path: the shape's hint first (no hash of the bytes: a pipeline
 * uploads the set it uploaded last time), then the key, every candidate's
 * bytes compared. *out_hit NULL: a miss, *out_key then set. */
static curd_status cache_lookup(curd_session *session, curd_device **device,
                                static_request *request,
                                XXH128_hash_t *out_key, static_set **out_hit)
{
    const char *what = "curd_session_upload_static";
    XXH3_state_t state;
    bool same = false;
    *out_hit = NULL;
    uint64_t shape_key = key_shape(session, request, &state);
    request->shape_key = shape_key;
    pthread_mutex_lock(&session->lock);
    curd_status status = session_device(session, what, device);
    static_set *set =
        status == CURD_OK ? hint_find(session, shape_key, request) : NULL;
    if (set == NULL)
        pthread_mutex_unlock(&session->lock);
    else
        status = hold_if_same(session, set, request, &same);
    if (status != CURD_OK || same) {
        *out_hit = same ? set : NULL;
        return status;
    }
    XXH128_hash_t key = key_finish(request, &state);
    *out_key = key;
    pthread_mutex_lock(&session->lock);
    status = session_device(session, what, device);
    curdi_hash_map_cursor cursor;
    set = status == CURD_OK
              ? cache_candidate(session, key, request, &cursor, true)
              : NULL;
    if (set == NULL) {
        pthread_mutex_unlock(&session->lock);
        return status;
    }
    status = hold_if_same(session, set, request, &same);
    if (status == CURD_OK && !same) {
        /* A 128-bit collision, or a thread's miss inserted meanwhile:
         * every candidate, compared under the lock. */
        pthread_mutex_lock(&session->lock);
        set = cache_find_locked(session, key, request);
        if (set != NULL)
            status = set_hold(set);
        same = set != NULL && status == CURD_OK;
        if (same)
            set_handed_out(session, set, request, true);
        pthread_mutex_unlock(&session->lock);
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
    memcpy(domain, request->domain, request->domain_len);
    unsigned char *at = bytes;
    for (size_t index = 0; index < request->count; index++) {
        byte_lens[index] = request->payloads[index].byte_len;
        memcpy(at, request->payloads[index].data, byte_lens[index]);
        at += byte_lens[index];
        set->buffers[index].id = 0;
    }
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
    const char *what = "curd_session_upload_static";
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
                free_buffer(device, what, set->buffers[index].id);
    return status;
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
static bool set_reserve(curd_session *session)
{
    return curdi_hash_map_reserve(&session->sets, 1)
           && curdi_hash_map_reserve(&session->cache, 1);
}

/* Lock held: a new set into the session, retained when it fits the
 * static budget once unheld sets are evicted, largest first. */
static void set_insert(curd_session *session, static_set *set,
                       const static_request *request, static_set **to_free)
{
    curd_session_stats *stats = &session->stats;
    uint64_t held = 0;
    map_each(&session->cache, add_held_bytes, &held);
    bool retain = set->total_bytes <= stats->static_budget_bytes
                  && held + set->total_bytes <= stats->static_budget_bytes;
    while (retain
           && stats->cached_bytes + set->total_bytes
                  > stats->static_budget_bytes) {
        static_set *victim = NULL;
        map_each(&session->cache, pick_victim, &victim);
        uint64_t address = address_key(victim);
        curdi_hash_map_remove(&session->cache, &victim->key.low64, victim);
        curdi_hash_map_remove(&session->sets, &address, victim);
        hint_drop(session, victim);
        stats->cached_bytes -= victim->total_bytes;
        stats->cached_sets--;
        stats->static_evictions++;
        victim->next_free = *to_free;
        *to_free = victim;
    }
    set->public_set.retained = retain ? 1u : 0u;
    set->holds = 1;
    set_handed_out(session, set, request, false);
    /* Room was reserved in both tables (set_reserve). */
    uint64_t address = address_key(set);
    (void)curdi_hash_map_insert(&session->sets, &address, set);
    if (retain) {
        (void)curdi_hash_map_insert(&session->cache, &set->key.low64, set);
        stats->cached_bytes += set->total_bytes;
        stats->cached_sets++;
    } else {
        stats->unretained_bytes += set->total_bytes;
        stats->unretained_sets++;
    }
    stats->static_misses++;
}

/* The miss: a new set made and uploaded outside the lock, then kept, or
 * dropped for one another thread made meanwhile. */
static curd_status static_miss(curd_session *session, curd_device *device,
                               XXH128_hash_t key,
                               const static_request *request,
                               const curd_static_set **out_set)
{
    const char *what = "curd_session_upload_static";
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
    pthread_mutex_lock(&session->lock);
    curd_device *now = NULL;
    status = session_device(session, what, &now);
    static_set *theirs =
        status == CURD_OK ? cache_find_locked(session, key, request) : NULL;
    if (theirs != NULL)
        status = set_hold(theirs);
    if (status == CURD_OK && theirs != NULL) {
        /* Another thread cached the same set while this one uploaded. */
        set_handed_out(session, theirs, request, false);
        session->stats.static_misses++;
        set->next_free = to_free;
        to_free = set;
        *out_set = &theirs->public_set;
    } else if (status == CURD_OK && !set_reserve(session)) {
        status = curdi_fail(CURD_E_OUT_OF_MEMORY,
                            "%s: the session's table of sets could not grow;"
                            " the set was not kept. Fix: free host memory"
                            " and try again.",
                            what);
        set->next_free = to_free;
        to_free = set;
    } else if (status == CURD_OK) {
        set_insert(session, set, request, &to_free);
        *out_set = &set->public_set;
    } else {
        /* The device was closed meanwhile (freeing the buffers) or the
         * hit cannot be counted: this upload's set goes. */
        set->next_free = to_free;
        to_free = set;
    }
    pthread_mutex_unlock(&session->lock);
    free_sets(now, what, to_free);
    return status;
}

CURD_API curd_status curd_session_upload_static(
    curd_session *session, const char *domain,
    const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set)
{
    static_request request = {0};
    curd_device *device = NULL;
    static_set *hit = NULL;
    curd_status status =
        static_check(session, domain, payloads, count, out_set, &request);
    if (status != CURD_OK)
        return status;
    XXH128_hash_t key = {0, 0};
    status = cache_lookup(session, &device, &request, &key, &hit);
    if (status != CURD_OK)
        return status;
    if (hit != NULL) {
        *out_set = &hit->public_set;
        return CURD_OK;
    }
    return static_miss(session, device, key, &request, out_set);
}

/* Lock held: the live set at this address, or NULL; the address is
 * compared before anything is read through it. */
static static_set *live_set(curd_session *session, const curd_static_set *set)
{
    uint64_t address = address_key(set);
    return curdi_hash_map_find(&session->sets, &address, NULL);
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

CURD_API curd_status curd_session_release_static(curd_session *session,
                                                 const curd_static_set *set)
{
    const char *what = "curd_session_release_static";
    curd_device *device = NULL;
    static_set *to_free = NULL;
    if (session == NULL)
        return null_session(what);
    if (set == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: set is NULL. Fix: pass a set from"
                          " curd_session_upload_static().",
                          what);
    pthread_mutex_lock(&session->lock);
    curd_status status = session_device(session, what, &device);
    static_set *live = status == CURD_OK ? live_set(session, set) : NULL;
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
        uint64_t address = address_key(live);
        curdi_hash_map_remove(&session->sets, &address, live);
        session->stats.unretained_bytes -= live->total_bytes;
        session->stats.unretained_sets--;
        to_free = live;
    }
    pthread_mutex_unlock(&session->lock);
    if (to_free != NULL)
        free_set(device, what, to_free);
    return status;
}
/* Lock held: whether work in flight uses a buffer the session would free
 * (a lent one, or a set's; idle ones have handles only it knows). */
typedef struct busy_probe {
    curd_device *device;
    bool busy;
} busy_probe;

static void probe_record(void *link, void *context)
{
    busy_probe *probe = context;
    const buffer_record *record = link;
    if (!record->idle
        && curdi_resident_probe(probe->device, record->id)
               == CURDI_RESIDENT_IN_USE)
        probe->busy = true;
}

static void probe_set(void *link, void *context)
{
    busy_probe *probe = context;
    if (set_in_use(probe->device, link))
        probe->busy = true;
}
