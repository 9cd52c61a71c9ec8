/* static_lookup.c - finding the static set an upload asks for: the
 * shape's hint, the key's candidates and the keyed sets, their bytes
 * compared outside the lock (with the device's copy team for a large
 * set), and the holds a hit takes. Declared in static_set.h. */
#include "session/static_set.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "base/hash_map.h"
#include "base/status.h"
#include "session/static_sets.h"
#include "transfer/run.h"

/* A verified hit large enough (curdi_run_compare_team:
 * CURD_COMPARE_PARALLEL_MIN, 1 MiB by default) compares with the device's
 * copy team, in pieces of STATIC_TEAM_PIECE_BYTES (some 2 us of one
 * core's comparing: a worker that takes the last one keeps its caller
 * waiting little), at most STATIC_TEAM_ROUND_PIECES per job. */
#define STATIC_TEAM_PIECE_BYTES ((size_t)64 * 1024)
#define STATIC_TEAM_ROUND_PIECES 64u

/* The domain's length and the payloads' count and lengths: cheap, and
 * under the lock. */
bool curdi_static_lookup_set_same_shape(const static_set *set,
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
            && curdi_static_lookup_set_same_shape(set, request))
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

/* Lock held: the retained keyed set of this domain and caller's key
 * (whatever its lengths), or NULL. */
static_set *curdi_static_lookup_keyed_find_locked(
    curdi_static_sets *sets, XXH128_hash_t key, const static_request *request)
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
static_set *curdi_static_lookup_find_locked(curdi_static_sets *sets,
                                            XXH128_hash_t key,
                                            const static_request *request)
{
    return request->caller_key != NULL
               ? curdi_static_lookup_keyed_find_locked(sets, key, request)
               : cache_find_locked(sets, key, request);
}

/* A keyed set found with other lengths than the request's: refused,
 * nothing changed (a key the caller reuses for other payloads is a
 * mistake the lengths can catch for free). */
curd_status
curdi_static_lookup_keyed_shape_refused(const static_set *set,
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
        if (curdi_static_lookup_set_same_shape(set, request)
            && memcmp(set->domain, request->domain, request->domain_len) == 0)
            return set;
    return NULL;
}

void curdi_static_lookup_hint_drop(curdi_static_sets *sets, static_set *set)
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
        curdi_static_lookup_hint_drop(sets, previous);
    set->hinted =
        curdi_hash_map_insert(&sets->hints, &set->shape_key, set);
}

/* Lock held: one more hold of a set, before its bytes are known to match
 * (the caller drops it on a mismatch). */
curd_status curdi_static_lookup_set_hold(static_set *set, const char *what)
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
void curdi_static_lookup_set_handed_out(curdi_static_sets *sets,
                                        static_set *set,
                                        const static_request *request,
                                        bool hit)
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
    curd_status status = curdi_static_lookup_set_hold(set, request->what);
    pthread_mutex_unlock(&sets->session->lock);
    if (status != CURD_OK)
        return status;
    bool same = set_bytes_match(set, request);
    pthread_mutex_lock(&sets->session->lock);
    if (same)
        curdi_static_lookup_set_handed_out(sets, set, request, true);
    else
        set->holds--;
    pthread_mutex_unlock(&sets->session->lock);
    *out_same = same;
    return CURD_OK;
}

/* The hit path: the shape's hint first (no hash of the bytes: a pipeline
 * uploads the set it uploaded last time), then the key, every candidate's
 * bytes compared. *out_hit NULL: a miss, *out_key then set. */
curd_status curdi_static_lookup_cache(curdi_static_sets *sets,
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
    curd_status status = curdi_static_sets_device(sets->session, what, device);
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
    status = curdi_static_sets_device(sets->session, what, device);
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
            status = curdi_static_lookup_set_hold(set, request->what);
        same = set != NULL && status == CURD_OK;
        if (same)
            curdi_static_lookup_set_handed_out(sets, set, request, true);
        pthread_mutex_unlock(&sets->session->lock);
    }
    *out_hit = same ? set : NULL;
    return status;
}
