/* static_sets.c - a session's static sets: the cache of immutable
 * uploads, by content or by the caller's key. include/curd.h says what a
 * static set promises, static_sets.h how the sets are kept and under
 * which lock.
 *
 * This file owns a set's life: the upload's checks, the miss (a new set,
 * its upload, eviction, insertion), the keyed upload, release, freeing,
 * and what the session module calls to make, drain and probe the sets. The
 * key is static_key.c's, finding a set and holding it static_lookup.c's;
 * static_set.h has what the three share.
 *
 * Read top to bottom: the session's device and freeing, static sets
 * (checks, the miss, upload, release), then what the session module calls
 * to make, drain and probe them. */
#include "session/static_sets.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/hash_map.h"
#include "base/status.h"
#include "core/core.h"
#include "memory/resident.h"
#include "session/static_set.h"
#include "transfer/transfer.h"

/* ------------------------------------------------------------------------
 * The session's device, freeing
 * ---------------------------------------------------------------------- */
/* Lock held: the session's device (static_sets.h). */
curd_status curdi_static_sets_device(curdi_session_shared *session,
                                     const char *what,
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
    curd_status status = curdi_core_device_check(device, what);
    if (status == CURD_OK)
        *out_device = device;
    return status;
}

/* Frees one buffer a session made (static_sets.h). */
void curdi_static_sets_buffer_free(curd_device *device, const char *what,
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
            curdi_static_sets_buffer_free(device, what,
                                          set->buffers[index].id);
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
                curdi_static_sets_buffer_free(device, what,
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

/* Lock held: space for one more set in the tables set_insert fills, so
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
        curdi_static_lookup_hint_drop(sets, victim);
        stats->cached_bytes -= victim->total_bytes;
        stats->cached_sets--;
        stats->static_evictions++;
        victim->next_free = *to_free;
        *to_free = victim;
    }
    set->public_set.retained = retain ? 1u : 0u;
    set->holds = 1;
    curdi_static_lookup_set_handed_out(sets, set, request, false);
    /* Space was reserved in both tables (set_reserve): the inserts cannot
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
    status = curdi_static_sets_device(sets->session, what, &now);
    static_set *theirs =
        status == CURD_OK ? curdi_static_lookup_find_locked(sets, key, request)
                          : NULL;
    if (theirs != NULL && !curdi_static_lookup_set_same_shape(theirs, request))
        /* Keyed: another thread cached other lengths under the key. */
        status = curdi_static_lookup_keyed_shape_refused(theirs, request);
    else if (theirs != NULL)
        status = curdi_static_lookup_set_hold(theirs, what);
    if (status == CURD_OK && theirs != NULL) {
        /* Another thread cached the same set while this one uploaded. */
        curdi_static_lookup_set_handed_out(sets, theirs, request, false);
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
    status = curdi_static_lookup_cache(sets, &device, &request, &key, &hit);
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
    status = curdi_static_sets_device(sets->session, request.what, &device);
    static_set *set =
        status == CURD_OK
            ? curdi_static_lookup_keyed_find_locked(sets, set_key, &request)
            : NULL;
    if (set != NULL && !curdi_static_lookup_set_same_shape(set, &request))
        status = curdi_static_lookup_keyed_shape_refused(set, &request);
    else if (set != NULL)
        status = curdi_static_lookup_set_hold(set, request.what);
    if (set != NULL && status == CURD_OK) {
        curdi_static_lookup_set_handed_out(sets, set, &request, true);
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
    curd_status status =
        curdi_static_sets_device(sets->session, what, &device);
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
