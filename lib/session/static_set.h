/* static_set.h - what the static sets' modules share (static_sets.c,
 * static_key.c and static_lookup.c; nothing else includes it): one set as
 * they keep it, a validated upload request, and the key, lookup and hold
 * calls between them. How the sets are kept, and under which lock, is
 * static_sets.h's. */
#ifndef CURD_LIB_SESSION_STATIC_SET_H
#define CURD_LIB_SESSION_STATIC_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "curd.h"
#include "transfer/copy_team.h"

typedef struct curdi_static_set {
    curd_static_set public_set; /* the caller's pointer is its address */
    /* In live by that address (every live set), in cache by key.low64
     * (retained sets only), in hints by shape_key. */
    uint64_t shape_key;         /* curdi_static_key_shape's */
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

/* A validated upload request. */
typedef struct static_request {
    const char *what; /* the entry point, for the sentences */
    const char *domain;
    size_t domain_len;
    const curd_static_payload *payloads;
    size_t count;
    uint64_t total_bytes;
    size_t set_bytes;   /* the set's one allocation */
    uint64_t shape_key; /* curdi_static_key_shape's, once looked up */
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
bool curdi_static_lookup_set_same_shape(const static_set *set,
                                        const static_request *request);
static_set *curdi_static_lookup_find_locked(struct curdi_static_sets *sets,
                                            XXH128_hash_t key,
                                            const static_request *request);
static_set *
curdi_static_lookup_keyed_find_locked(struct curdi_static_sets *sets,
                                      XXH128_hash_t key,
                                      const static_request *request);
curd_status
curdi_static_lookup_keyed_shape_refused(const static_set *set,
                                        const static_request *request);
void curdi_static_lookup_hint_drop(struct curdi_static_sets *sets,
                                   static_set *set);
curd_status curdi_static_lookup_set_hold(static_set *set, const char *what);
void curdi_static_lookup_set_handed_out(struct curdi_static_sets *sets,
                                        static_set *set,
                                        const static_request *request,
                                        bool hit);
curd_status curdi_static_lookup_cache(struct curdi_static_sets *sets,
                                      curd_device **device,
                                      static_request *request,
                                      XXH128_hash_t *out_key,
                                      static_set **out_hit);

#endif
