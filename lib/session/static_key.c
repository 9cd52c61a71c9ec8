/* static_key.c - the static sets' keys: a secret drawn once per process,
 * and XXH3-128 keyed with it over what the device's code depends on, the
 * domain, and the payloads' lengths and bytes (a verified set) or the
 * caller's key (a keyed set). Declared in static_set.h. */
#include "session/static_set.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "session/static_sets.h"

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
/* The first word of a keyed set's key (curdi_static_key_keyed), never
 * a layout version. */
#define KEY_LAYOUT_KEYED 0x4b455945445f7631u /* "KEYED_v1" */

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
