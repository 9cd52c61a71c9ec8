/* program.c - the program module: images told apart by content, the
 * per-device module cache, the functions cached per module, and the
 * public curd_program_* entry points. program.h says how the module is
 * shaped and what it promises about locks; program_load.c makes the
 * driver calls that load a module and read a function.
 *
 * Read top to bottom: the module (the module cache, idle list, counters),
 * then the entry points, then what the dispatch module reads. */
#include "launch/program.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/checked.h"
#include "base/hash_map.h"
#include "base/status.h"
#include "core/core.h"
#include "driver/driver.h"
#include "launch/image.h"
#include "launch/jit.h"
#include "launch/program_load.h"

/* What the JIT options mean, as hashed into the key with each load's
 * jit_options: bump it when curd passes the driver another option that
 * changes the code. */
#define CURDI_JIT_OPTIONS_ID 2u

/* ------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------- */
/* One image of a load request, checked; and the request. */
typedef struct load_input {
    const unsigned char *bytes;
    size_t byte_len; /* PTX: up to its first NUL */
    curd_image_kind kind;
} load_input;

typedef struct load_request {
    load_input inputs[1 + CURD_PROGRAM_LINK_MAX];
    size_t input_count; /* 1, or 1 + desc->link_count */
    bool linked;        /* desc->link_count != 0 */
    size_t copy_bytes;  /* every input and its NUL */
    const char *entry;
    curdi_jit_options jit;
} load_request;

struct curd_program {
    curd_device *device;
    curdi_module *module;
    curdi_function *function;
    struct curd_program *prev, *next; /* the device's programs */
    uint32_t batch_uses; /* batch launches recording it, under the lock */
};

/* ------------------------------------------------------------------------
 * The module's state
 * ---------------------------------------------------------------------- */
/* Every input's length and bytes, in order (so that two lists of the
 * same bytes cut apart elsewhere or ordered otherwise differ), then the
 * facts the compiled code depends on besides them. */
static XXH128_hash_t image_key(const curd_device *device,
                               const load_request *request)
{
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    for (size_t i = 0; i < request->input_count; i++) {
        const uint64_t byte_len = request->inputs[i].byte_len;
        XXH3_128bits_update(&state, &byte_len, sizeof byte_len);
        XXH3_128bits_update(&state, request->inputs[i].bytes,
                            request->inputs[i].byte_len);
    }
    const uint32_t facts[9] = {
        (uint32_t)device->props.compute_capability_major,
        (uint32_t)device->props.compute_capability_minor,
        CURDI_JIT_OPTIONS_ID,
        request->jit.optimization_level,
        request->jit.max_registers,
        request->jit.target,
        request->jit.line_info,
        (uint32_t)request->input_count,
        request->linked ? 1u : 0u,
    };
    XXH3_128bits_update(&state, facts, sizeof facts);
    return XXH3_128bits_digest(&state);
}

/* Whether a module holds exactly the request's images and options. */
static bool module_matches(const curdi_module *m, const load_request *request)
{
    if (m->linked != request->linked ||
        m->input_count != request->input_count ||
        memcmp(&m->jit, &request->jit, sizeof m->jit) != 0)
        return false;
    for (size_t i = 0; i < m->input_count; i++) {
        const module_input *have = &m->inputs[i];
        const load_input *want = &request->inputs[i];
        if (have->byte_len != want->byte_len || have->kind != want->kind ||
            memcmp(m->image + have->offset, want->bytes, want->byte_len) != 0)
            return false;
    }
    return true;
}

/* Lock held. */
static curdi_module *cache_find(struct curdi_program_state *state,
                                XXH128_hash_t key, const load_request *request)
{
    curdi_hash_map_cursor cursor;
    for (curdi_module *m = curdi_hash_map_find(&state->modules, &key, &cursor);
         m != NULL;
         m = curdi_hash_map_find_next(&state->modules, &key, &cursor))
        if (module_matches(m, request))
            return m;
    return NULL;
}

/* Lock held. False, with nothing changed, when the cache's table is full
 * and cannot grow. */
static bool cache_insert(struct curdi_program_state *state, curdi_module *m)
{
    if (!curdi_hash_map_insert(&state->modules, &m->key, m))
        return false;
    state->counts.modules_loaded = curdi_hash_map_count(&state->modules);
    return true;
}

/* Lock held. */
static void cache_remove(struct curdi_program_state *state, curdi_module *m)
{
    if (curdi_hash_map_remove(&state->modules, &m->key, m))
        state->counts.modules_loaded = curdi_hash_map_count(&state->modules);
}

/* Lock held: the idle list, most recently used first. */
static void idle_unlink(struct curdi_program_state *state, curdi_module *m)
{
    if (m->idle_prev != NULL)
        m->idle_prev->idle_next = m->idle_next;
    else
        state->idle_head = m->idle_next;
    if (m->idle_next != NULL)
        m->idle_next->idle_prev = m->idle_prev;
    else
        state->idle_tail = m->idle_prev;
    m->idle_prev = m->idle_next = NULL;
    state->idle_count--;
    state->counts.modules_cached = state->idle_count;
}

static void program_idle_push(struct curdi_program_state *state,
                              curdi_module *m)
{
    m->idle_prev = NULL;
    m->idle_next = state->idle_head;
    if (state->idle_head != NULL)
        state->idle_head->idle_prev = m;
    else
        state->idle_tail = m;
    state->idle_head = m;
    state->idle_count++;
    state->counts.modules_cached = state->idle_count;
}

/* Lock held: takes a reference, out of the idle list if it was there. */
static void module_pin(struct curdi_program_state *state, curdi_module *m)
{
    if (m->refs++ == 0)
        idle_unlink(state, m);
}

/* Lock held: drops a reference; a module nobody uses joins the idle list,
 * and the idle modules past the bound leave the cache into *evicted (the
 * caller unloads them after unlocking). */
static void module_unpin(struct curdi_program_state *state, curdi_module *m,
                         curdi_module **evicted)
{
    if (--m->refs != 0)
        return;
    program_idle_push(state, m);
    while (state->idle_count > state->idle_bound) {
        curdi_module *oldest = state->idle_tail;
        idle_unlink(state, oldest);
        cache_remove(state, oldest);
        state->counts.evictions++;
        oldest->evicted_next = *evicted;
        *evicted = oldest;
    }
}

/* Unloads a module from the driver (context current, or the driver
 * unusable: then there is nothing to unload). */
static curd_status module_unload(curdi_module *m)
{
    if (m->module == NULL || !curdi_driver_usable())
        return CURD_OK;
    curdi_cu_result rc =
        curdi_driver_note(curdi_driver_get()->cuModuleUnload(m->module));
    if (rc != CURDI_CUDA_SUCCESS && rc != CURDI_CUDA_ERROR_DEINITIALIZED)
        return curdi_driver_fail((int)rc, "cuModuleUnload", NULL);
    m->module = NULL;
    return CURD_OK;
}

/* Unloads a module the cache no longer holds and frees it, whatever the
 * driver said. Context current, or the driver unusable. */
static curd_status module_destroy(curdi_module *m)
{
    curd_status status = module_unload(m);
    curdi_function *next;
    for (curdi_function *f = m->functions; f != NULL; f = next) {
        next = f->next;
        curdi_program_load_function_free(f);
    }
    free(m->image);
    free(m->inputs);
    free(m->info_log);
    free(m);
    return status;
}

/* Unloads a list of evicted modules (linked by evicted_next), entering the
 * device; the first failure is returned. A module the driver still holds
 * (the context could not be made current, or the unload failed) goes back
 * to the idle list, past the bound, rather than being dropped: the next
 * eviction or the device's close unloads it. */
static curd_status destroy_evicted(curd_device *device, curdi_module *evicted)
{
    if (evicted == NULL)
        return CURD_OK;
    curd_status status = CURD_OK;
    bool entered = false;
    if (curdi_driver_usable()) {
        status = curdi_core_device_enter(device);
        entered = status == CURD_OK;
    }
    curdi_module *kept = NULL, *next;
    for (curdi_module *m = evicted; m != NULL; m = next) {
        next = m->evicted_next;
        curd_status unloaded = entered || !curdi_driver_usable()
                                   ? module_unload(m)
                                   : status;
        if (unloaded == CURD_OK) {
            (void)module_destroy(m);
            continue;
        }
        if (status == CURD_OK)
            status = unloaded;
        m->evicted_next = kept;
        kept = m;
    }
    if (entered)
        curdi_core_device_leave(device);
    if (kept != NULL) {
        struct curdi_program_state *state = device->program;
        pthread_mutex_lock(&state->lock);
        curdi_module *lost = NULL;
        for (curdi_module *m = kept; m != NULL; m = next) {
            next = m->evicted_next;
            if (!cache_insert(state, m)) {
                m->evicted_next = lost;
                lost = m;
                continue;
            }
            program_idle_push(state, m);
            state->counts.evictions--;
        }
        pthread_mutex_unlock(&state->lock);
        /* The table could not take it back (host memory short as well as
         * the unload refused, both at once): its bookkeeping is freed and
         * the driver's module left to the context, which frees it. */
        for (curdi_module *m = lost; m != NULL; m = next) {
            next = m->evicted_next;
            m->module = NULL;
            (void)module_destroy(m);
            curdi_trace("device %d: an evicted module the driver would not "
                        "unload could not go back into the module cache",
                        device->ordinal);
        }
    }
    return status;
}

curd_status curdi_program_open(curd_device *device)
{
    struct curdi_program_state *state = calloc(1, sizeof *state);
    if (state == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: %zu bytes for the program state "
                          "could not be allocated. Fix: free host memory and "
                          "try again.",
                          sizeof *state);
    bool table_made =
        curdi_hash_map_init(&state->modules, sizeof(XXH128_hash_t), 64);
    if (!table_made || pthread_mutex_init(&state->lock, NULL) != 0) {
        curdi_hash_map_fini(&state->modules);
        free(state);
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_device_open: the program state's table or "
                          "lock could not be created. Fix: free host memory "
                          "and try again.");
    }
    state->idle_bound = device->options.module_cache_count != 0
                            ? device->options.module_cache_count
                            : CURDI_MODULE_CACHE_DEFAULT;
    device->program = state;
    return CURD_OK;
}

void curdi_program_close(curd_device *device)
{
    if (device == NULL || device->program == NULL)
        return;
    struct curdi_program_state *state = device->program;
    curd_program *next_program;
    for (curd_program *p = state->programs; p != NULL; p = next_program) {
        next_program = p->next;
        free(p);
    }
    size_t position = 0;
    for (curdi_module *m;
         (m = curdi_hash_map_next_entry(&state->modules, &position))
         != NULL;) {
        curd_status status = module_destroy(m);
        if (status != CURD_OK)
            curdi_trace("closing device %d: %s", device->ordinal,
                        curd_last_error());
    }
    pthread_mutex_destroy(&state->lock);
    curdi_hash_map_fini(&state->modules);
    free(state);
    device->program = NULL;
}

void curdi_program_counts_read(curd_device *device,
                               curdi_program_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    if (device == NULL || device->program == NULL)
        return;
    pthread_mutex_lock(&device->program->lock);
    *counts = device->program->counts;
    pthread_mutex_unlock(&device->program->lock);
}

void curdi_program_counts_reset(curd_device *device)
{
    struct curdi_program_state *state = device->program;
    pthread_mutex_lock(&state->lock);
    state->counts.hits = 0;
    state->counts.misses = 0;
    state->counts.jit_ns = 0;
    state->counts.evictions = 0;
    pthread_mutex_unlock(&state->lock);
}

/* ------------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------- */
CURD_API void curd_program_desc_init(curd_program_desc *desc)
{
    if (desc == NULL)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
}

/* The JIT options of a desc whose fields validate_load copied in. */
static curd_status check_jit(const curd_device *device,
                             const curd_program_desc *given,
                             curdi_jit_options *out)
{
    int own = device->props.compute_capability_major * 10
              + device->props.compute_capability_minor;
    bool level_given = (given->flags & CURD_PROGRAM_OPTIMIZATION_LEVEL) != 0;
    if (level_given && given->jit_optimization_level > 4u)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->jit_optimization_level"
                          " is %" PRIu32 "; the JIT knows 0 to 4. Fix: pass"
                          " 0 to 4, or clear CURD_PROGRAM_OPTIMIZATION_LEVEL"
                          " for the driver's default.",
                          given->jit_optimization_level);
    if (given->jit_max_registers > 255u)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->jit_max_registers is %"
                          PRIu32 "; a thread has at most 255. Fix: pass 1"
                          " to 255, or 0 for no limit.",
                          given->jit_max_registers);
    if (given->jit_target != 0
        && (given->jit_target < 30u || given->jit_target > (uint32_t)own))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->jit_target is %" PRIu32
                          ", but device %d is compute capability %d.%d"
                          " (target %d), and code for a newer one cannot run"
                          " on it. Fix: pass a target from 30 to %d, or 0"
                          " for the device's own.",
                          given->jit_target, device->ordinal,
                          device->props.compute_capability_major,
                          device->props.compute_capability_minor, own, own);
    out->optimization_level =
        level_given ? given->jit_optimization_level : UINT32_MAX;
    out->max_registers = given->jit_max_registers;
    out->target = given->jit_target;
    out->line_info = (given->flags & CURD_PROGRAM_LINE_INFO) != 0;
    return CURD_OK;
}

/* The link list's shape (curd 1.1): a count within the bound with a
 * list, each input not NULL and not empty. Their kinds are checked with
 * the desc's image. */
static curd_status check_link_list(const curd_program_desc *given)
{
    if (given->link_count != 0 && given->link_images == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->link_count is %zu but "
                          "desc->link_images is NULL. Fix: pass the array of "
                          "images to link, or link_count 0 to load the image "
                          "alone.",
                          given->link_count);
    if (given->link_count == 0 && given->link_images != NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->link_images is set but "
                          "desc->link_count is 0, so nothing would be linked. "
                          "Fix: pass the number of images in link_count, or "
                          "link_images NULL to load the image alone.");
    if (given->link_count > CURD_PROGRAM_LINK_MAX)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->link_count is %zu, more "
                          "than the %u images a link takes besides "
                          "desc->image. Fix: link fewer images (put device "
                          "code into a library with nvcc -lib -rdc=true).",
                          given->link_count, CURD_PROGRAM_LINK_MAX);
    for (size_t i = 0; i < given->link_count; i++) {
        const curd_program_image *input = &given->link_images[i];
        if (input->image == NULL || input->image_bytes == 0)
            return curdi_fail(CURD_E_INVALID_ARGUMENT,
                              "curd_program_load: desc->link_images[%zu] has "
                              "image %s and image_bytes %zu. Fix: pass each "
                              "input's bytes and their length.",
                              i, input->image == NULL ? "NULL" : "set",
                              input->image_bytes);
    }
    return CURD_OK;
}

static curd_status validate_load(curd_device *device,
                                 const curd_program_desc *desc,
                                 curd_program **out_program,
                                 load_request *request)
{
    curd_status status = curdi_core_device_check(device, "curd_program_load");
    if (status != CURD_OK)
        return status;
    if (out_program == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: out_program is NULL. Fix: pass "
                          "the address of a curd_program pointer.");
    status = curdi_options_check(desc, sizeof *desc,
                                 offsetof(curd_program_desc,
                                          jit_optimization_level),
                                 "curd_program_desc");
    if (status != CURD_OK)
        return status;
    /* A curd 1.0 caller's desc ends before the JIT options: none. */
    curd_program_desc given;
    memset(&given, 0, sizeof given);
    memcpy(&given, desc,
           desc->struct_size < sizeof given ? desc->struct_size
                                            : sizeof given);
    status = check_jit(device, &given, &request->jit);
    if (status != CURD_OK)
        return status;
    if ((desc->flags & ~CURD_PROGRAM_FLAGS_KNOWN) != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->flags is 0x%x, which sets "
                          "flags this version of curd does not define "
                          "(known: 0x%x). Fix: pass flags = 0.",
                          desc->flags, CURD_PROGRAM_FLAGS_KNOWN);
    if (desc->image == NULL || desc->image_bytes == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->image is %s and "
                          "desc->image_bytes is %zu. Fix: pass the PTX text, "
                          "cubin or fatbin and its length in bytes.",
                          desc->image == NULL ? "NULL" : "set",
                          desc->image_bytes);
    if (desc->entry == NULL || desc->entry[0] == '\0')
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_load: desc->entry is %s. Fix: pass the "
                          "kernel's name.",
                          desc->entry == NULL ? "NULL" : "empty");
    status = check_link_list(&given);
    if (status != CURD_OK)
        return status;
    request->input_count = 1 + given.link_count;
    request->linked = given.link_count != 0;
    request->copy_bytes = 0;
    for (size_t i = 0; i < request->input_count; i++) {
        const void *image =
            i == 0 ? desc->image : given.link_images[i - 1].image;
        size_t image_bytes =
            i == 0 ? desc->image_bytes : given.link_images[i - 1].image_bytes;
        char name[48];
        if (i == 0)
            snprintf(name, sizeof name, "desc->image");
        else
            snprintf(name, sizeof name, "desc->link_images[%zu]", i - 1);
        load_input *input = &request->inputs[i];
        status = curdi_image_check(image, image_bytes, name, &input->kind,
                                   &input->byte_len);
        if (status != CURD_OK)
            return status;
        input->bytes = image;
        /* Each copy with its NUL; the sum cannot wrap for bytes that
         * exist, but the sizes are the caller's word. */
        if (!curdi_size_add(request->copy_bytes, input->byte_len,
                            &request->copy_bytes) ||
            !curdi_size_add(request->copy_bytes, 1, &request->copy_bytes))
            return curdi_fail(CURD_E_OVERFLOW,
                              "curd_program_load: the sizes of desc->image "
                              "and desc->link_images add up past SIZE_MAX "
                              "(%s is %zu bytes). Fix: pass each image's "
                              "real length.",
                              name, image_bytes);
    }
    if (!request->linked && request->inputs[0].kind == CURD_IMAGE_LIBRARY)
        return curdi_fail(CURD_E_PROGRAM,
                          "curd_program_load: desc->image is a library (an ar "
                          "archive of %zu bytes), which the driver only "
                          "links: it cannot be loaded alone. Fix: pass the "
                          "code that calls it as desc->image and the library "
                          "in desc->link_images.",
                          request->inputs[0].byte_len);
    request->entry = desc->entry;
    return CURD_OK;
}

/* Lock held: the function of an entry already in the module, or NULL. */
static curdi_function *cached_function(const curdi_module *m,
                                       const char *entry)
{
    for (curdi_function *f = m->functions; f != NULL; f = f->next)
        if (strcmp(f->entry, entry) == 0)
            return f;
    return NULL;
}

/* Lock held: links a new program. */
static void program_link(struct curdi_program_state *state, curd_program *p)
{
    p->prev = NULL;
    p->next = state->programs;
    if (state->programs != NULL)
        state->programs->prev = p;
    state->programs = p;
}

/* A module copy of the request, not yet loaded. */
static curdi_module *module_new(const load_request *request, XXH128_hash_t key)
{
    curdi_module *m = calloc(1, sizeof *m);
    unsigned char *image = malloc(request->copy_bytes);
    module_input *inputs = calloc(request->input_count, sizeof *inputs);
    if (m == NULL || image == NULL || inputs == NULL) {
        free(m);
        free(image);
        free(inputs);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < request->input_count; i++) {
        const load_input *input = &request->inputs[i];
        memcpy(image + at, input->bytes, input->byte_len);
        image[at + input->byte_len] = '\0'; /* PTX must be NUL-terminated */
        inputs[i].offset = at;
        inputs[i].byte_len = input->byte_len;
        inputs[i].kind = input->kind;
        at += input->byte_len + 1;
    }
    m->image = image;
    m->inputs = inputs;
    m->input_count = request->input_count;
    m->linked = request->linked;
    m->kind = request->linked ? CURD_IMAGE_CUBIN : request->inputs[0].kind;
    m->key = key;
    m->jit = request->jit;
    return m;
}

/* The slow path: the module or the function is not cached. Makes the
 * driver calls with the context current and no lock held; on success the
 * module is pinned for the program, *out_function is in its list and
 * *out_jit_ns is the time this load spent compiling (0 when found). A
 * failure leaves the cache as it was, but for a module whose JIT worked
 * and which lacks the entry: it stays, idle, so that a load of another
 * of its entries costs no JIT. */
static curd_status load_slow(curd_device *device, const load_request *request,
                             XXH128_hash_t key, curdi_module *found,
                             curdi_module **out_module,
                             curdi_function **out_function,
                             uint64_t *out_jit_ns)
{
    struct curdi_program_state *state = device->program;
    curd_status status = curdi_core_device_enter(device);
    if (status != CURD_OK) {
        if (found != NULL) {
            curdi_module *evicted = NULL;
            pthread_mutex_lock(&state->lock);
            module_unpin(state, found, &evicted);
            pthread_mutex_unlock(&state->lock);
            (void)destroy_evicted(device, evicted);
        }
        return status;
    }
    curdi_module *m = found;
    curdi_module *evicted = NULL;
    bool inserted = false; /* m is the module this load compiled */
    uint64_t jit_ns = 0;
    if (m == NULL) {
        curdi_module *fresh = module_new(request, key);
        if (fresh == NULL) {
            curdi_core_device_leave(device);
            return curdi_fail(CURD_E_OUT_OF_MEMORY,
                              "curd_program_load: %zu bytes for a copy of the "
                              "images could not be allocated. Fix: free host "
                              "memory and try again.",
                              request->copy_bytes);
        }
        status = curdi_program_load_module(fresh, request->entry, &jit_ns);
        if (status != CURD_OK) {
            (void)module_destroy(fresh);
            curdi_core_device_leave(device);
            return status;
        }
        pthread_mutex_lock(&state->lock);
        m = cache_find(state, key, request);
        if (m != NULL) {
            /* Another thread loaded it meanwhile: keep theirs. */
            module_pin(state, m);
            pthread_mutex_unlock(&state->lock);
            (void)module_destroy(fresh);
        } else {
            if (!cache_insert(state, fresh)) {
                pthread_mutex_unlock(&state->lock);
                (void)module_destroy(fresh);
                curdi_core_device_leave(device);
                return curdi_fail(CURD_E_OUT_OF_MEMORY,
                                  "curd_program_load: the module cache's "
                                  "table could not grow. Fix: free host "
                                  "memory and try again.");
            }
            m = fresh;
            m->refs = 1;
            inserted = true;
            pthread_mutex_unlock(&state->lock);
        }
    }
    curdi_function *f = NULL;
    status = curdi_program_load_function(device, m, request->entry, &f);
    pthread_mutex_lock(&state->lock);
    if (status != CURD_OK && inserted && m->refs == 1
        && status != CURD_E_PROGRAM) {
        /* Not a missing entry: the module this load added goes again. */
        m->refs = 0;
        cache_remove(state, m);
        m->evicted_next = evicted;
        evicted = m;
    } else if (status != CURD_OK) {
        module_unpin(state, m, &evicted);
    } else {
        curdi_function *theirs = cached_function(m, request->entry);
        if (theirs != NULL) {
            curdi_program_load_function_free(f);
            f = theirs;
        } else {
            f->next = m->functions;
            m->functions = f;
        }
    }
    pthread_mutex_unlock(&state->lock);
    if (evicted != NULL) {
        /* Keep the load's sentence; an eviction failure is only traced. */
        char sentence[1024];
        int code = curd_last_driver_code();
        snprintf(sentence, sizeof sentence, "%s", curd_last_error());
        curdi_module *next;
        for (curdi_module *e = evicted; e != NULL; e = next) {
            next = e->evicted_next;
            if (module_destroy(e) != CURD_OK)
                curdi_trace("curd_program_load: %s", curd_last_error());
        }
        if (status != CURD_OK) {
            curdi_status_note_driver_code(code);
            status = curdi_fail(status, "%s", sentence);
        }
    }
    curdi_core_device_leave(device);
    if (status != CURD_OK)
        return status;
    *out_module = m;
    *out_function = f;
    *out_jit_ns = jit_ns;
    return CURD_OK;
}

CURD_API curd_status curd_program_load(curd_device *device,
                                       const curd_program_desc *desc,
                                       curd_program **out_program)
{
    load_request request;
    memset(&request, 0, sizeof request);
    curd_status status = validate_load(device, desc, out_program, &request);
    if (status != CURD_OK)
        return status;
    struct curdi_program_state *state = device->program;
    XXH128_hash_t key = image_key(device, &request);
    curd_program *program = calloc(1, sizeof *program);
    if (program == NULL)
        return curdi_fail(CURD_E_OUT_OF_MEMORY,
                          "curd_program_load: %zu bytes for the program could "
                          "not be allocated. Fix: free host memory and try "
                          "again.",
                          sizeof *program);
    program->device = device;

    /* The fast path: module and function cached, no driver call. */
    pthread_mutex_lock(&state->lock);
    curdi_module *m = cache_find(state, key, &request);
    if (m != NULL) {
        module_pin(state, m);
        curdi_function *f = cached_function(m, request.entry);
        if (f != NULL) {
            state->counts.hits++;
            program->module = m;
            program->function = f;
            program_link(state, program);
            pthread_mutex_unlock(&state->lock);
            *out_program = program;
            return CURD_OK;
        }
    }
    pthread_mutex_unlock(&state->lock);

    curdi_function *f = NULL;
    curdi_module *loaded = NULL;
    uint64_t jit_ns = 0;
    status = load_slow(device, &request, key, m, &loaded, &f, &jit_ns);
    if (status != CURD_OK) {
        free(program);
        /* A fault the context did not survive: later calls are refused. */
        if (status == CURD_E_DEVICE_LOST)
            curdi_core_device_mark_lost(device);
        return status;
    }
    program->module = loaded;
    program->function = f;
    pthread_mutex_lock(&state->lock);
    /* Counted once the load succeeded: a failed one counts nothing. */
    if (m != NULL) {
        state->counts.hits++;
    } else {
        state->counts.misses++;
        state->counts.jit_ns += jit_ns;
    }
    program_link(state, program);
    pthread_mutex_unlock(&state->lock);
    *out_program = program;
    return CURD_OK;
}

CURD_API curd_status curd_program_free(curd_program *program)
{
    if (program == NULL)
        return CURD_OK;
    curd_device *device = program->device;
    struct curdi_program_state *state = device->program;
    curdi_module *evicted = NULL;
    pthread_mutex_lock(&state->lock);
    if (program->batch_uses != 0) {
        uint32_t uses = program->batch_uses;
        pthread_mutex_unlock(&state->lock);
        return curdi_fail(CURD_E_BUSY,
                          "curd_program_free: %" PRIu32 " batch launches"
                          " still run kernel %s; nothing was freed. Fix:"
                          " reset or free those batches first.",
                          uses, program->function->entry);
    }
    if (program->prev != NULL)
        program->prev->next = program->next;
    else
        state->programs = program->next;
    if (program->next != NULL)
        program->next->prev = program->prev;
    module_unpin(state, program->module, &evicted);
    pthread_mutex_unlock(&state->lock);
    free(program);
    if (curdi_driver_forked()) {
        /* No driver call in a fork child: the modules go with the
         * process. */
        curdi_module *next;
        for (curdi_module *e = evicted; e != NULL; e = next) {
            next = e->evicted_next;
            e->module = NULL;
            (void)module_destroy(e);
        }
        return CURD_OK;
    }
    return destroy_evicted(device, evicted);
}

CURD_API curd_status curd_program_info(const curd_program *program,
                                       curd_program_props *props)
{
    curd_status status = curdi_program_check(program, NULL, "curd_program_info");
    if (status != CURD_OK)
        return status;
    status = curdi_options_result_struct_check(props, sizeof *props,
                                               "curd_program_info", "props",
                                               "curd_program_props");
    if (status != CURD_OK)
        return status;
    const curdi_function *f = program->function;
    curd_program_props result;
    memset(&result, 0, sizeof result);
    result.struct_size = props->struct_size;
    result.registers_per_thread = f->attrs.registers_per_thread;
    result.static_shared_bytes = f->attrs.static_shared_bytes;
    result.local_bytes_per_thread = f->attrs.local_bytes_per_thread;
    result.max_threads_per_block = f->attrs.max_threads_per_block;
    result.max_dynamic_shared_bytes = f->attrs.max_dynamic_shared_bytes;
    result.param_count = f->params.count;
    result.param_count_known = f->params.known ? 1u : 0u;
    result.image_kind = (int)program->module->kind;
    result.binary_version = f->attrs.binary_version;
    result.ptx_version = f->attrs.ptx_version;
    /* A newer caller's extra fields are left as they were. */
    memcpy(props, &result, sizeof result);
    return CURD_OK;
}

CURD_API curd_status curd_program_log(const curd_program *program, char *dst,
                                      size_t capacity, size_t *out_len)
{
    curd_status status =
        curdi_program_check(program, NULL, "curd_program_log");
    if (status != CURD_OK)
        return status;
    if (dst == NULL && capacity != 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "curd_program_log: dst is NULL for %zu bytes. Fix:"
                          " pass memory of capacity bytes, or capacity 0 to"
                          " ask only for the length.",
                          capacity);
    /* Set once by the load that compiled the module, before any program
     * could see it, and freed with the module: read without the lock. */
    const char *log = program->module->info_log != NULL
                          ? program->module->info_log
                          : "";
    size_t len = strlen(log);
    if (capacity != 0) {
        size_t copied = len < capacity ? len : capacity - 1u;
        memcpy(dst, log, copied);
        dst[copied] = '\0';
    }
    if (out_len != NULL)
        *out_len = len;
    return CURD_OK;
}

/* ------------------------------------------------------------------------
 * For the dispatch module
 * ---------------------------------------------------------------------- */
curd_status curdi_program_check(const curd_program *program,
                                const curd_device *device, const char *call)
{
    if (program == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: program is NULL. Fix: pass a program from "
                          "curd_program_load().",
                          call);
    if (device != NULL && program->device != device)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: the program was loaded on device %d (%p), not "
                          "on the device given (%d, %p). Fix: load the image "
                          "on each device that runs it.",
                          call, program->device->ordinal,
                          (const void *)program->device, device->ordinal,
                          (const void *)device);
    return CURD_OK;
}

curd_device *curdi_program_device(const curd_program *program)
{
    return program->device;
}

curdi_cu_function curdi_program_function(const curd_program *program)
{
    return program->function->function;
}

void curdi_program_use(const curd_program *program)
{
    curd_program *p = (curd_program *)(uintptr_t)program;
    pthread_mutex_lock(&p->device->program->lock);
    p->batch_uses++;
    pthread_mutex_unlock(&p->device->program->lock);
}

void curdi_program_unuse(const curd_program *program)
{
    curd_program *p = (curd_program *)(uintptr_t)program;
    pthread_mutex_lock(&p->device->program->lock);
    p->batch_uses--;
    pthread_mutex_unlock(&p->device->program->lock);
}

const char *curdi_program_entry(const curd_program *program)
{
    return program->function->entry;
}

curd_image_kind curdi_program_image_kind(const curd_program *program)
{
    return program->module->kind;
}

const curdi_program_attrs *curdi_program_attrs_of(const curd_program *program)
{
    return &program->function->attrs;
}

const curdi_param_layout *curdi_program_params(const curd_program *program)
{
    return &program->function->params;
}

curd_status curdi_program_reserve_dynamic_shared(const curd_program *program,
                                                 size_t dynamic_shared_bytes)
{
    curdi_function *f = program->function;
    if (dynamic_shared_bytes <= atomic_load(&f->dynamic_shared_limit))
        return CURD_OK;
    if (dynamic_shared_bytes > f->attrs.max_dynamic_shared_bytes)
        return curdi_fail(CURD_E_RANGE,
                          "Kernel %s asks for %zu bytes of dynamic shared "
                          "memory; this device allows at most %zu for it (its "
                          "opt-in limit less %zu bytes of static shared "
                          "memory). Fix: use a smaller tile or block.",
                          f->entry, dynamic_shared_bytes,
                          f->attrs.max_dynamic_shared_bytes,
                          f->attrs.static_shared_bytes);
    /* Raised straight to the limit, so that threads raising it at once all
     * set the same value and no later call needs to raise it again. */
    size_t limit = f->attrs.max_dynamic_shared_bytes;
    curdi_cu_result rc = curdi_driver_get()->cuFuncSetAttribute(
        f->function, CURDI_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        limit > INT32_MAX ? INT32_MAX : (int)limit);
    if (rc != CURDI_CUDA_SUCCESS)
        return curdi_driver_fail((int)rc,
                                 "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_"
                                 "DYNAMIC_SHARED_SIZE_BYTES)",
                                 NULL);
    atomic_store(&f->dynamic_shared_limit, limit);
    return CURD_OK;
}
