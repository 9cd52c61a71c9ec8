/* static_sets.h - a session's static sets: the cache of immutable
 * uploads behind curd_session_upload_static (by content),
 * curd_session_upload_static_keyed (by the caller's key) and
 * curd_session_release_static (curd.h says what they promise). The
 * session module (session.h), above this one, owns sessions and embeds a
 * curdi_static_sets in each; this module owns the sets.
 *
 * A session's sets live under the session's one short lock, the one that
 * also guards its buffers (session.h says how the locks nest), never held
 * across a driver call that can wait for the GPU. That lock, the session's
 * device and its statistics are the curdi_session_shared both modules see:
 * the sets check the device and count into the statistics through it.
 *  - every live set by its address (so a set pointer is checked before it
 *    is read), the retained ones by the low 64 bits of their XXH3-128 key,
 *    and per shape (the domain, the payloads' count and lengths) the
 *    retained set last handed out: its hint. A lookup compares the
 *    request's bytes with the hint first and hashes them only when the
 *    hint differs, since a pipeline uploads what it uploaded last time,
 *    and comparing reads half what hashing and comparing read.
 *  - each set is one allocation: the public struct, its buffer handles,
 *    its payload lengths, the domain tag and a host copy of the bytes,
 *    which a hit is compared against (by the device's copy team for a
 *    large set). A keyed set holds the caller's key instead of the bytes:
 *    it is found by its domain and key alone, flagged so that no
 *    verified lookup finds it and no keyed lookup finds a verified set.
 *  - the key is XXH3 keyed with a secret drawn once per process, so that
 *    a collision is nothing an attacker can compute; the bytes are
 *    compared on every hit anyway.
 *  - the retained sets stay within the static budget: a new set that fits
 *    evicts unheld ones, the largest first, then the least recently
 *    handed out. */
#ifndef CURD_LIB_SESSION_STATIC_SETS_H
#define CURD_LIB_SESSION_STATIC_SETS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/hash_map.h"
#include "curd.h"

struct curd_device;
struct curdi_static_set; /* one set, private to session/static_set.h */

/* The first slots of each of a session's maps. */
#define CURDI_SESSION_MAP_FIRST_SLOTS 16u

/* What a session and its sets share (struct curd_session's first field). */
typedef struct curdi_session_shared {
    pthread_mutex_t lock;
    /* NULL once curd_device_close detached the session; written under the
     * module's and the session's locks, read under either or alone by
     * curd_session_free to find the module. */
    _Atomic(struct curd_device *) device;
    curd_session_stats stats; /* levels, counters and budgets */
} curdi_session_shared;

/* A session's static sets, guarded by its shared lock. */
typedef struct curdi_static_sets {
    curdi_session_shared *session; /* the session they belong to */
    curdi_hash_map live;  /* every live set, by address */
    curdi_hash_map cache; /* the retained ones, by key.low64 */
    curdi_hash_map hints; /* per shape, the retained set last handed out */
    /* The device's facts that its code depends on, hashed into every key:
     * compute capability major and minor, CURD_CAP_* capabilities. */
    uint64_t device_facts[3];
    uint64_t use_clock;
} curdi_static_sets;

/* Lock held: the session's device, checked as every entry point checks
 * its device (open, not lost, not in a fork child). */
curd_status curdi_static_sets_device(curdi_session_shared *session,
                                     const char *what,
                                     struct curd_device **out_device);

/* Frees one buffer a session made, outside the session's lock. A failure
 * can only come from a buffer freed or still used behind the session's
 * back (a caller's mistake): the device frees it at close. */
void curdi_static_sets_buffer_free(struct curd_device *device,
                                   const char *what, uint64_t id);

/* Empty sets of the session on device; false when a map could not be
 * made (curdi_static_sets_fini then frees what was). No driver call. */
bool curdi_static_sets_init(curdi_static_sets *sets,
                            curdi_session_shared *session,
                            const struct curd_device *device);
void curdi_static_sets_fini(curdi_static_sets *sets);

/* Lock held: every set out of the indexes, linked for
 * curdi_static_sets_free; the sets' levels drop to zero, their
 * cumulative counters stay. */
struct curdi_static_set *curdi_static_sets_drain(curdi_static_sets *sets);
/* Frees drained sets, outside the lock; with device not NULL their
 * buffers too (a closing device frees them itself). */
void curdi_static_sets_free(struct curd_device *device, const char *what,
                            struct curdi_static_set *drained);
/* Lock held: whether a transfer or dispatch still uses a set's buffer. */
bool curdi_static_sets_busy(const curdi_static_sets *sets,
                            struct curd_device *device);

/* curd_session_upload_static, _upload_static_keyed and
 * curd_session_release_static on a session's sets, the session checked
 * not NULL already. */
curd_status curdi_static_sets_upload(curdi_static_sets *sets,
                                     const char *domain,
                                     const curd_static_payload *payloads,
                                     size_t count,
                                     const curd_static_set **out_set);
curd_status curdi_static_sets_upload_keyed(
    curdi_static_sets *sets, const char *domain, const void *key,
    size_t key_len, const curd_static_payload *payloads, size_t count,
    const curd_static_set **out_set);
curd_status curdi_static_sets_release(curdi_static_sets *sets,
                                      const curd_static_set *set);

#endif
