/* session.c - sessions: exact-size buffer reuse, and the session's
 * static sets through the static-sets module (static_sets.h). include/curd.h
 * says what a session promises, session.h how the module is shaped and in
 * what order its locks nest.
 *
 * Read top to bottom: sessions and the module, buffers (alloc, release,
 * eviction), the static sets' entry points, then new, free and
 * statistics. */
#include "session/session.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/checked.h"
#include "base/hash_map.h"
#include "base/nvtx.h"
#include "base/status.h"
#include "core/core.h"
#include "memory/memory.h"
#include "memory/resident.h"
#include "session/static_sets.h"

/* ------------------------------------------------------------------------
 * Sessions, the module and the registry of live sessions
 * ---------------------------------------------------------------------- */
typedef struct buffer_record {
    uint64_t id; /* the buffer's handle now: its key in buffers */
    size_t byte_len;
    /* Freed at once by a release: its block, for the pool once the
     * session's lock is dropped (the handle is gone already). */
    uint64_t device_ptr;
    bool idle;
    struct buffer_record *below; /* idle: the next of its size; drained:
                                    the next to free */
} buffer_record;

/* The idle buffers of one size, the last released on top. */
typedef struct idle_class {
    size_t byte_len;
    size_t count;
    buffer_record *top;
} idle_class;

struct curd_session {
    curdi_session_shared shared; /* its lock, its device, its statistics */
    struct curd_session *prev, *next; /* the device's sessions (state lock) */
    curdi_hash_map buffers; /* every buffer record, lent or idle */
    idle_class *classes; /* sorted by byte_len, none empty */
    size_t class_count;
    size_t class_capacity;
    curdi_static_sets static_sets;
};

struct curdi_session_state {
    pthread_mutex_t lock;
    curd_session *sessions;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static curdi_hash_map registry; /* sessions by address; made on the first */

curd_status curdi_session_open(curd_device *device)
{
    struct curdi_session_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the session state could not be"
                          " allocated. Fix: free host memory and try"
                          " again.");
    if (pthread_mutex_init(&state->lock, NULL) != 0) {
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the session state's lock could"
                          " not be created. Fix: free system resources and"
                          " try again.");
    }
    device->session = state;
    return CURD_OK;
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
 * `next_free`. */
typedef struct drained {
    buffer_record *records;
    struct curdi_static_set *sets;
} drained;

static void drain_record(void *link, void *context)
{
    drained *out = context;
    buffer_record *record = link;
    record->below = out->records;
    out->records = record;
}

/* Lock held: empties the session; its levels drop to zero, its
 * cumulative counters stay. */
static drained session_drain(curd_session *session)
{
    drained out = {NULL, NULL};
    curdi_hash_map_each(&session->buffers, drain_record, &out);
    out.sets = curdi_static_sets_drain(&session->static_sets);
    curdi_hash_map_clear(&session->buffers);
    session->class_count = 0;
    session->shared.stats.idle_bytes = session->shared.stats.idle_buffers = 0;
    session->shared.stats.lent_bytes = session->shared.stats.lent_buffers = 0;
    return out;
}

/* Frees records taken out under the lock (linked by `below`), and with
 * device not NULL their device memory: the buffer of a record whose
 * handle is still set, or the block of one taken from the resident table
 * already (freed at release). A closing device (NULL here) frees its
 * buffers itself. A pool that fails to take a block back has lost track
 * of it, which is no failure of the call that freed it: traced. */
static void free_records(curd_device *device, const char *what,
                         buffer_record *records)
{
    buffer_record *next;
    for (buffer_record *record = records; record != NULL; record = next) {
        next = record->below;
        if (device != NULL && record->id != 0)
            curdi_static_sets_buffer_free(device, what, record->id);
        else if (device != NULL && record->device_ptr != 0
                 && curdi_memory_device_release(device, record->device_ptr)
                        != CURD_OK)
            curdi_trace("%s: %s", what, curd_last_error());
        free(record);
    }
}

/* Frees what session_drain took out. */
static void free_drained(curd_device *device, const char *what, drained out)
{
    free_records(device, what, out.records);
    curdi_static_sets_free(device, what, out.sets);
}

static void session_destroy(curd_session *session)
{
    curdi_hash_map_fini(&session->buffers);
    curdi_static_sets_fini(&session->static_sets);
    free(session->classes);
    pthread_mutex_destroy(&session->shared.lock);
    free(session);
}

void curdi_session_close(curd_device *device)
{
    if (device == NULL || device->session == NULL)
        return;
    struct curdi_session_state *state = device->session;
    pthread_mutex_lock(&state->lock);
    for (curd_session *session = state->sessions; session != NULL;
         session = session->next) {
        pthread_mutex_lock(&session->shared.lock);
        drained out = session_drain(session);
        atomic_store_explicit(&session->shared.device, NULL,
                              memory_order_relaxed);
        pthread_mutex_unlock(&session->shared.lock);
        free_drained(NULL, "curd_device_close", out);
    }
    state->sessions = NULL;
    pthread_mutex_unlock(&state->lock);
    pthread_mutex_destroy(&state->lock);
    free(state);
    device->session = NULL;
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */

/* Lock held: the index of the first class of at least byte_len bytes. */
static size_t class_lower_bound(const curd_session *session, size_t byte_len)
{
    size_t low = 0, high = session->class_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2u;
        if (session->classes[middle].byte_len < byte_len)
            low = middle + 1u;
        else
            high = middle;
    }
    return low;
}

static idle_class *class_find(curd_session *session, size_t byte_len)
{
    size_t at = class_lower_bound(session, byte_len);
    if (at < session->class_count && session->classes[at].byte_len == byte_len)
        return &session->classes[at];
    return NULL;
}

/* Lock held: the record on top of a class, out of it (and the class out
 * of the array once empty). */
static buffer_record *idle_pop(curd_session *session, idle_class *class)
{
    buffer_record *record = class->top;
    class->top = record->below;
    record->below = NULL;
    record->idle = false;
    if (--class->count == 0) {
        size_t at = (size_t)(class - session->classes);
        memmove(class, class + 1,
                (session->class_count - at - 1u) * sizeof *class);
        session->class_count--;
    }
    session->shared.stats.idle_bytes -= record->byte_len;
    session->shared.stats.idle_buffers--;
    return record;
}

/* Lock held; the array has space for one more class
 * (curdi_core_array_reserve). */
static void session_idle_push(curd_session *session, buffer_record *record)
{
    size_t at = class_lower_bound(session, record->byte_len);
    idle_class *class = &session->classes[at];
    if (at == session->class_count || class->byte_len != record->byte_len) {
        memmove(class + 1, class, (session->class_count - at) * sizeof *class);
        session->class_count++;
        class->byte_len = record->byte_len;
        class->count = 0;
        class->top = NULL;
    }
    record->below = class->top;
    record->idle = true;
    class->top = record;
    class->count++;
    session->shared.stats.idle_bytes += record->byte_len;
    session->shared.stats.idle_buffers++;
}

static void lent_add(curd_session *session, const buffer_record *record)
{
    session->shared.stats.lent_bytes += record->byte_len;
    session->shared.stats.lent_buffers++;
}

static void lent_sub(curd_session *session, const buffer_record *record)
{
    session->shared.stats.lent_bytes -= record->byte_len;
    session->shared.stats.lent_buffers--;
}

/* Lock held: a lent record the caller turns out to have freed with
 * curd_buffer_free; the session lets go of it (freed after unlocking). */
static void record_forget(curd_session *session, buffer_record *record,
                          buffer_record **to_free)
{
    curdi_hash_map_remove(&session->buffers, &record->id, record);
    lent_sub(session, record);
    record->id = 0; /* nothing left on the device */
    record->below = *to_free;
    *to_free = record;
}

static curd_status alloc_miss(curd_session *session, curd_device *device,
                              size_t byte_len, curd_buffer *out_buffer)
{
    const char *what = "curd_session_alloc";
    buffer_record *record = calloc(1, sizeof *record);
    uint64_t id = 0;
    if (record == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: the session's record of a buffer could not be"
                          " allocated. Fix: free host memory and try"
                          " again.",
                          what);
    /* Outside the session's lock: this enters the device and may run the
     * out-of-memory ladder. */
    curd_status status = curdi_resident_alloc(device, what, byte_len, &id);
    if (status != CURD_OK) {
        free(record);
        return status;
    }
    record->id = id;
    record->byte_len = byte_len;
    pthread_mutex_lock(&session->shared.lock);
    if (!curdi_hash_map_insert(&session->buffers, &record->id, record)) {
        pthread_mutex_unlock(&session->shared.lock);
        curdi_static_sets_buffer_free(device, what, id);
        free(record);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "%s: the session's table of buffers could not"
                          " grow; nothing was allocated. Fix: free host"
                          " memory and try again.",
                          what);
    }
    lent_add(session, record);
    session->shared.stats.reuse_misses++;
    pthread_mutex_unlock(&session->shared.lock);
    out_buffer->id = id;
    return CURD_OK;
}

CURD_API curd_status curd_session_alloc(curd_session *session, size_t byte_len,
                                        curd_buffer *out_buffer)
{
    const char *what = "curd_session_alloc";
    curd_device *device = NULL;
    if (session == NULL)
        return null_session(what);
    if (out_buffer == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_buffer is NULL. Fix: pass the address of"
                          " a curd_buffer to receive the handle.",
                          what);
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: a buffer of 0 bytes was asked for. Fix:"
                          " allocate at least one byte.",
                          what);
    pthread_mutex_lock(&session->shared.lock);
    curd_status status =
        curdi_static_sets_device(&session->shared, what, &device);
    idle_class *class =
        status == CURD_OK ? class_find(session, byte_len) : NULL;
    if (class != NULL) {
        /* The hot path: the session's lock and nothing else. */
        buffer_record *record = idle_pop(session, class);
        lent_add(session, record);
        session->shared.stats.reuse_hits++;
        out_buffer->id = record->id;
        pthread_mutex_unlock(&session->shared.lock);
        return CURD_OK;
    }
    pthread_mutex_unlock(&session->shared.lock);
    if (status != CURD_OK)
        return status;
    return alloc_miss(session, device, byte_len, out_buffer);
}

/* Why a handle that names no lent buffer of this session is refused. */
static curd_status release_refusal(curd_device *device, const char *what,
                                   uint64_t id)
{
    if (curdi_resident_probe(device, id) == CURDI_RESIDENT_STALE)
        return curdi_fail(CURD_E_STALE_HANDLE,
                          "%s: curd_buffer 0x%016" PRIx64 " is stale:"
                          " released already (a released handle is stale at"
                          " once), freed, or never issued. Fix: release each"
                          " buffer from curd_session_alloc() once, and use"
                          " the handle of each curd_session_alloc() only"
                          " until you release it.",
                          what, id);
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "%s: curd_buffer 0x%016" PRIx64 " is live but was not"
                      " lent by this session (a curd_buffer_alloc() buffer,"
                      " another session's, or a static set's). Fix: free it"
                      " with curd_buffer_free(), release it to the session"
                      " that lent it, or release its set with"
                      " curd_session_release_static().",
                      what, id);
}

/* Lock held: a buffer too large for the whole idle budget, freed at once
 * (taken here, given back to the pool after unlocking). */
static curd_status release_free(curd_session *session, curd_device *device,
                                buffer_record *record, buffer_record **to_free)
{
    uint64_t device_ptr = 0;
    curd_status status = curdi_resident_take(device, "curd_session_release",
                                             record->id, &device_ptr);
    if (status == CURD_E_STALE_HANDLE) {
        record_forget(session, record, to_free);
        return status;
    }
    if (status != CURD_OK)
        return status;
    /* The handle is gone; the block goes back to the pool once the lock
     * is dropped (the pool may free it upstream). */
    curdi_hash_map_remove(&session->buffers, &record->id, record);
    lent_sub(session, record);
    session->shared.stats.release_frees++;
    record->id = 0;
    record->device_ptr = device_ptr;
    record->below = *to_free;
    *to_free = record;
    return CURD_OK;
}

/* Lock held: the largest idle buffers out, until byte_len more bytes fit
 * in the idle budget; their handles are only the session's, so nothing
 * can be using them. */
static void evict_idle(curd_session *session, size_t byte_len,
                       buffer_record **to_free)
{
    while (session->class_count > 0
           && session->shared.stats.idle_bytes + byte_len
                  > session->shared.stats.idle_budget_bytes) {
        buffer_record *victim = idle_pop(
            session, &session->classes[session->class_count - 1u]);
        curdi_hash_map_remove(&session->buffers, &victim->id, victim);
        session->shared.stats.idle_evictions++;
        victim->below = *to_free;
        *to_free = victim;
    }
}

/* Lock held: a buffer that fits the idle budget waits idle under a new
 * handle, the largest idle buffers evicted first to make space. */
static curd_status release_keep(curd_session *session, curd_device *device,
                                buffer_record *record, buffer_record **to_free)
{
    uint64_t new_id = 0;
    /* Space for the class it may need, before anything changes. */
    if (!curdi_core_array_reserve(
            (void **)&session->classes, &session->class_capacity,
            session->class_count + 1u, sizeof *session->classes))
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_session_release: the session's list of idle"
                          " sizes could not grow; nothing was released."
                          " Fix: free host memory, or free the buffer with"
                          " curd_buffer_free().");
    curd_status status = curdi_resident_retag(device, "curd_session_release",
                                              record->id, &new_id);
    if (status == CURD_E_STALE_HANDLE)
        record_forget(session, record, to_free);
    if (status != CURD_OK)
        return status;
    /* An insert right after a removal never allocates: it cannot fail. */
    curdi_hash_map_remove(&session->buffers, &record->id, record);
    record->id = new_id;
    bool inserted = curdi_hash_map_insert(&session->buffers, &record->id,
                                          record);
    CURDI_ASSERT(inserted);
    lent_sub(session, record);
    evict_idle(session, record->byte_len, to_free);
    session_idle_push(session, record);
    return CURD_OK;
}

CURD_API curd_status curd_session_release(curd_session *session,
                                          curd_buffer buffer)
{
    const char *what = "curd_session_release";
    curd_device *device = NULL;
    buffer_record *to_free = NULL;
    if (session == NULL)
        return null_session(what);
    pthread_mutex_lock(&session->shared.lock);
    curd_status status =
        curdi_static_sets_device(&session->shared, what, &device);
    if (status == CURD_OK) {
        buffer_record *record =
            buffer.id != 0
                ? curdi_hash_map_find(&session->buffers, &buffer.id, NULL)
                : NULL;
        /* An idle record's handle is the session's own: one passed in was
         * guessed, and is refused like any handle not lent. */
        if (record == NULL || record->idle)
            status = release_refusal(device, what, buffer.id);
        else if (record->byte_len > session->shared.stats.idle_budget_bytes)
            status = release_free(session, device, record, &to_free);
        else
            status = release_keep(session, device, record, &to_free);
    }
    pthread_mutex_unlock(&session->shared.lock);
    free_records(device, what, to_free);
    return status;
}

/* ------------------------------------------------------------------------
 * Static sets: the static-sets module's, on the session's sets
 * ---------------------------------------------------------------------- */
CURD_API curd_status curd_session_upload_static(
    curd_session *session, const char *domain,
    const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set)
{
    CURDI_RANGE("curd_session_upload_static");
    if (session == NULL)
        return null_session("curd_session_upload_static");
    return curdi_static_sets_upload(&session->static_sets, domain, payloads,
                                    count, out_set);
}

CURD_API curd_status curd_session_upload_static_keyed(
    curd_session *session, const char *domain, const void *key,
    size_t key_len, const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set)
{
    CURDI_RANGE("curd_session_upload_static_keyed");
    if (session == NULL)
        return null_session("curd_session_upload_static_keyed");
    return curdi_static_sets_upload_keyed(&session->static_sets, domain, key,
                                          key_len, payloads, count, out_set);
}

CURD_API curd_status curd_session_release_static(curd_session *session,
                                                 const curd_static_set *set)
{
    if (session == NULL)
        return null_session("curd_session_release_static");
    return curdi_static_sets_release(&session->static_sets, set);
}

/* ------------------------------------------------------------------------
 * New, free, statistics
 * ---------------------------------------------------------------------- */
CURD_API void curd_session_options_init(curd_session_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

/* The budget in force: the caller's, none under its flag, or the
 * default. */
static curd_status session_budget(const curd_device *device, uint64_t asked,
                                  bool off, const char *field,
                                  const char *flag, uint64_t *out_budget)
{
    if (off && asked != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_session_new: options.%s is %" PRIu64 " and"
                          " options.flags has %s, which asks for a zero"
                          " budget. Fix: set one or the other.",
                          field, asked, flag);
    *out_budget = off ? 0 : asked != 0 ? asked
                                       : device->props.total_memory_bytes / 32u;
    return CURD_OK;
}

static curd_status session_options(curd_device *device,
                                   const curd_session_options *options,
                                   curd_session_stats *stats)
{
    curd_session_options effective;
    curd_session_options_init(&effective);
    if (options != NULL) {
        curd_status status =
            curdi_options_check(options, sizeof effective, sizeof effective,
                                "curd_session_options");
        if (status != CURD_OK)
            return status;
        /* Only the fields both sides know (the check proved the rest
         * zero). */
        memcpy(&effective, options, sizeof effective);
        if ((effective.flags & ~CURD_SESSION_FLAGS_KNOWN) != 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "curd_session_new: options.flags is 0x%x,"
                              " which sets flags this version of curd does"
                              " not define (known: 0x%x). Fix: pass only"
                              " CURD_SESSION_* flags.",
                              effective.flags, CURD_SESSION_FLAGS_KNOWN);
    }
    curd_status status = session_budget(
        device, effective.idle_budget_bytes,
        (effective.flags & CURD_SESSION_NO_REUSE) != 0, "idle_budget_bytes",
        "CURD_SESSION_NO_REUSE", &stats->idle_budget_bytes);
    if (status == CURD_OK)
        status = session_budget(
            device, effective.static_budget_bytes,
            (effective.flags & CURD_SESSION_NO_STATIC_CACHE) != 0,
            "static_budget_bytes", "CURD_SESSION_NO_STATIC_CACHE",
            &stats->static_budget_bytes);
    return status;
}

/* Enters a session in the registry of live ones (the table made on the
 * first). */
static bool session_registry_add(curd_session *session)
{
    bool added = true;
    uint64_t address = curdi_hash_map_address_key(session);
    pthread_mutex_lock(&registry_lock);
    if (registry.slots == NULL)
        added = curdi_hash_map_init(&registry, 0,
                                    CURDI_SESSION_MAP_FIRST_SLOTS);
    if (added)
        added = curdi_hash_map_insert(&registry, &address, session);
    pthread_mutex_unlock(&registry_lock);
    return added;
}

CURD_API curd_status curd_session_new(curd_device *device,
                                      const curd_session_options *options,
                                      curd_session **out_session)
{
    curd_session_stats stats;
    curd_status status = curdi_core_device_check(device, "curd_session_new");
    if (status != CURD_OK)
        return status;
    if (out_session == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_session_new: out_session is NULL. Fix: pass"
                          " the address of a curd_session pointer.");
    memset(&stats, 0, sizeof stats);
    status = session_options(device, options, &stats);
    if (status != CURD_OK)
        return status;
    curd_session *session = calloc(1, sizeof *session);
    if (session == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_session_new: the session could not be"
                          " allocated. Fix: free host memory and try"
                          " again.");
    bool made = pthread_mutex_init(&session->shared.lock, NULL) == 0;
    if (made
        && (!curdi_hash_map_init(&session->buffers, 0,
                                 CURDI_SESSION_MAP_FIRST_SLOTS)
            || !curdi_static_sets_init(&session->static_sets,
                                       &session->shared, device))) {
        pthread_mutex_destroy(&session->shared.lock);
        made = false;
    }
    if (made && !session_registry_add(session)) {
        pthread_mutex_destroy(&session->shared.lock);
        made = false;
    }
    if (!made) {
        curdi_hash_map_fini(&session->buffers);
        curdi_static_sets_fini(&session->static_sets);
        free(session);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_session_new: the session's tables or lock"
                          " could not be created. Fix: free host memory and"
                          " try again.");
    }
    stats.struct_size = sizeof stats;
    session->shared.stats = stats;
    atomic_init(&session->shared.device, device);
    struct curdi_session_state *state = device->session;
    pthread_mutex_lock(&state->lock);
    session->next = state->sessions;
    if (state->sessions != NULL)
        state->sessions->prev = session;
    state->sessions = session;
    pthread_mutex_unlock(&state->lock);
    *out_session = session;
    return CURD_OK;
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

CURD_API curd_status curd_session_free(curd_session *session)
{
    const char *what = "curd_session_free";
    if (session == NULL)
        return CURD_OK;
    /* The registry, not the session, says whether it is live: a second
     * free must not read what the first one freed. */
    pthread_mutex_lock(&registry_lock);
    uint64_t address = curdi_hash_map_address_key(session);
    bool live = registry.slots != NULL
                && curdi_hash_map_find(&registry, &address, NULL) != NULL;
    pthread_mutex_unlock(&registry_lock);
    if (!live)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: session %p is not live (freed already, or"
                          " never returned by curd_session_new()); nothing"
                          " was done. Fix: free each session once.",
                          what, (const void *)session);
    curd_device *device =
        atomic_load_explicit(&session->shared.device, memory_order_relaxed);
    drained out = {NULL, NULL};
    if (device != NULL) {
        /* The state's lock first, then the session's (session.h). */
        struct curdi_session_state *state = device->session;
        pthread_mutex_lock(&state->lock);
        pthread_mutex_lock(&session->shared.lock);
        busy_probe probe = {device, false};
        curdi_hash_map_each(&session->buffers, probe_record, &probe);
        if (probe.busy
            || curdi_static_sets_busy(&session->static_sets, device)) {
            pthread_mutex_unlock(&session->shared.lock);
            pthread_mutex_unlock(&state->lock);
            return curdi_fail(CURD_E_BUSY,
                              "%s: a buffer of the session (lent, or a"
                              " static set's) is still in use by a transfer"
                              " or dispatch in flight; nothing was freed."
                              " Fix: free the session once that work is"
                              " complete (curd_pending_wait(),"
                              " curd_device_sync_uploads()).",
                              what);
        }
        if (session->prev != NULL)
            session->prev->next = session->next;
        else
            state->sessions = session->next;
        if (session->next != NULL)
            session->next->prev = session->prev;
        out = session_drain(session);
        pthread_mutex_unlock(&session->shared.lock);
        pthread_mutex_unlock(&state->lock);
    }
    pthread_mutex_lock(&registry_lock);
    curdi_hash_map_remove(&registry, &address, session);
    pthread_mutex_unlock(&registry_lock);
    free_drained(device, what, out);
    session_destroy(session);
    return CURD_OK;
}

/* The size of curd 1.0's curd_session_stats: a caller built against it
 * passes this struct_size, and gets the fields it knows. */
#define SESSION_STATS_SIZE_1_0                                                \
    offsetof(curd_session_stats, static_keyed_hits)

CURD_API curd_status curd_session_stats_get(curd_session *session,
                                            curd_session_stats *stats)
{
    const char *what = "curd_session_stats_get";
    curd_device *device = NULL;
    if (session == NULL)
        return null_session(what);
    curd_status status = curdi_options_result_struct_check(
        stats, SESSION_STATS_SIZE_1_0, what, "stats", "curd_session_stats");
    if (status != CURD_OK)
        return status;
    pthread_mutex_lock(&session->shared.lock);
    status = curdi_static_sets_device(&session->shared, what, &device);
    curd_session_stats result = session->shared.stats;
    pthread_mutex_unlock(&session->shared.lock);
    if (status != CURD_OK)
        return status;
    result.struct_size = stats->struct_size;
    /* An older caller's struct gets the fields it has (the check above
     * proved it has 1.0's); a newer caller's extra fields are left as
     * they were. */
    memcpy(stats, &result,
           stats->struct_size < sizeof result ? stats->struct_size
                                              : sizeof result);
    return CURD_OK;
}
