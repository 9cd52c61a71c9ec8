/* fuzz-transfer-validate.c - the transfer entry points' validation against
 * an independent reference, on the stand-in driver.
 *
 * The public calls (curd_download_batch, curd_upload_batch and the four
 * single transfers) run for real against tests/fake/fake-cuda.c, built as
 * $(BUILD)/fuzz/libcuda-fake.so.1 beside this harness and loaded through
 * CURD_LIBCUDA; the stand-in keeps "device" memory on the host, so the
 * harness reads every buffer's bytes straight through its device pointer.
 *
 * Input: a few buffer sizes (one buffer possibly freed again at once),
 * the call, then its items. Each item picks a handle (a live buffer, one
 * just freed, one freed by an earlier input, one of a second device, zero,
 * or 64 forged bits), an offset and a length (in range, at the edges, or
 * shaped 64-bit numbers), a capacity, and a host address: packed after the
 * item before, at a gap, anywhere in a host arena (so destinations
 * overlap), a repeat of an earlier one, NULL, or near the top of the
 * address space.
 *
 * The reference, written from include/curd.h's rules in validation order:
 * per item, NULL host (INVALID_ARGUMENT), byte_len over capacity (RANGE),
 * host + byte_len past the address space (OVERFLOW, or RANGE for a
 * whole-buffer call of a live buffer whose size is not byte_len), the
 * lengths' sum past
 * 2^64-1 (OVERFLOW, no item); for downloads, any two destinations sharing
 * a byte (INVALID_ARGUMENT naming a pair that does; found byte by byte on
 * an owner map of the arena); a handle that is not one of this input's
 * live buffers (STALE_HANDLE); offset + byte_len past 2^64-1 (OVERFLOW) or
 * past the buffer (RANGE); a whole-buffer call whose byte_len is not the
 * buffer's size (RANGE). All sums in 128 bits. The status must match, and
 * the message must name the same item (or none). On a rejection no byte of
 * the arenas or of any buffer changed and the transfer counters did not
 * move; on success every destination holds the model's bytes, nothing else
 * in the arena changed, uploads applied in item order, and fences grew by
 * one exactly when bytes moved.
 *
 * Built from the whole library (FUZZ_SRCS_transfer-validate in fuzz.mk). */
#include "fuzz-stand-in.h"

#define MAX_ITEMS 16
#define MAX_BUFFER_LEN FUZZ_MAX_BUFFER_LEN
/* Host addresses of items the reference may accept start below
 * ARENA_SPAN; an accepted item moves at most MAX_BUFFER_LEN bytes, so
 * ARENA_LEN bounds every byte a correct library writes or reads. */
#define ARENA_SPAN 4096u
#define ARENA_LEN (ARENA_SPAN + MAX_BUFFER_LEN)
#define NO_ITEM SIZE_MAX

enum call_kind {
    CALL_DOWNLOAD_BATCH,
    CALL_UPLOAD_BATCH,
    CALL_DOWNLOAD_RANGE,
    CALL_UPLOAD_AT,
    CALL_DOWNLOAD_WHOLE,
    CALL_UPLOAD_WHOLE,
    CALL_KINDS
};

typedef struct item {
    uint64_t id;
    size_t offset;
    size_t byte_len;
    unsigned char *host;
    size_t capacity; /* downloads; uploads have none (SIZE_MAX) */
} item;

typedef struct verdict {
    curd_status status;
    size_t item; /* the item the message names, or NO_ITEM */
    bool pair;   /* overlapping destinations: the message names two */
} verdict;

static bool trace; /* FUZZ_TRANSFER_TRACE=1: one line per call on stderr */

static unsigned char arena[ARENA_LEN];
static unsigned char arena_before[ARENA_LEN];
static uint16_t owner[ARENA_LEN + 1]; /* item index + 1; the last: beyond */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    trace = getenv("FUZZ_TRANSFER_TRACE") != NULL;
    fuzz_stand_in_open("fuzz-transfer-validate");
    return 0;
}

/* ------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------- */

/* An offset or a length near the buffer's (or any) size. */
static size_t decode_size(fuzz_input *in, size_t buffer_len, size_t below)
{
    uint8_t shape = fuzz_u8(in);
    switch (shape & 7u) {
    case 0:
    case 1:
    case 2:
        return below == 0 ? 0 : fuzz_u8(in) % (below + 1u);
    case 3:
        return below;
    case 4:
        return below + 1u + (shape >> 3);
    case 5:
        return buffer_len + (shape >> 3);
    case 6:
        return SIZE_MAX - (shape >> 3);
    default:
        return (size_t)fuzz_shaped_u64(in);
    }
}

/* Item i (at least 1) as the next row after item i - 1: its buffer,
 * length and capacity, the device and host steps of the two items before
 * it (or, after the first, steps from the input), so that a batch of rows
 * reaches the transfer module's one-range check (lib/transfer/transfer.c). The host
 * stays in the arena (the reference knows no other addresses but NULL and
 * the top of the address space). */
static bool in_arena(const unsigned char *host)
{
    return host != NULL && (uintptr_t)host >= (uintptr_t)arena
           && (uintptr_t)host < (uintptr_t)(arena + ARENA_SPAN);
}

static void decode_row(fuzz_input *in, item *items, size_t i, size_t *cursor)
{
    const item *before = &items[i - 1];
    item *it = &items[i];
    size_t device_step;
    size_t host_step;
    size_t position;
    /* Steps wrap as size_t; modulo the arena's span they still step. */
    if (i >= 2 && in_arena(before->host) && in_arena(items[i - 2].host)) {
        device_step = before->offset - items[i - 2].offset;
        host_step = (size_t)(before->host - arena)
                    - (size_t)(items[i - 2].host - arena);
    } else {
        device_step = before->byte_len + fuzz_u8(in);
        host_step = before->byte_len + fuzz_u8(in);
    }
    *it = *before;
    it->offset = before->offset + device_step;
    if (!in_arena(before->host))
        return;
    position = ((size_t)(before->host - arena) + host_step) % ARENA_SPAN;
    it->host = arena + position;
    *cursor = (position + (it->byte_len < ARENA_LEN ? it->byte_len : 0))
              % ARENA_SPAN;
}

static size_t decode_items(fuzz_input *in, item *items, size_t count,
                           uint64_t freed_now, bool upload)
{
    size_t cursor = 0;
    for (size_t i = 0; i < count; i++) {
        size_t buffer;
        item *it = &items[i];
        if (i >= 1 && (fuzz_u8(in) & 3u) == 0) {
            decode_row(in, items, i, &cursor);
            continue;
        }
        it->id = fuzz_decode_id(in, freed_now, &buffer);
        size_t len = buffer == SIZE_MAX ? MAX_BUFFER_LEN : live_lens[buffer];
        it->offset = decode_size(in, len, len / 2u);
        it->byte_len = decode_size(
            in, len, it->offset < len ? len - it->offset : 0);
        uint8_t place = fuzz_u8(in);
        size_t position = 0;
        switch (place & 7u) {
        case 0:
        case 1:
            position = cursor;
            break;
        case 2:
            position = cursor + (place >> 3);
            break;
        case 3:
        case 4:
            position = (size_t)fuzz_u64(in) % ARENA_SPAN;
            break;
        case 5: {
            /* The same destination as an earlier item, when it has one. */
            const unsigned char *earlier =
                i == 0 ? NULL : items[(place >> 3) % i].host;
            if (earlier != NULL && earlier >= arena
                && earlier < arena + ARENA_SPAN)
                position = (size_t)(earlier - arena);
            break;
        }
        default:
            position = SIZE_MAX;
            break;
        }
        if (position == SIZE_MAX) {
            if ((place & 8u) || it->byte_len == 0) {
                it->host = NULL;
            } else {
                /* Near the top of the address space, always past it by the
                 * item's end: rejected before any byte is touched. */
                uintptr_t room = (uintptr_t)(place >> 4);
                if (it->byte_len <= room)
                    it->byte_len = room + 1u;
                it->host = (unsigned char *)(UINTPTR_MAX - room);
            }
        } else {
            position %= ARENA_SPAN;
            it->host = arena + position;
            cursor = position + (it->byte_len < ARENA_LEN ? it->byte_len : 0);
            if (cursor >= ARENA_SPAN)
                cursor = 0;
        }
        uint8_t cap = fuzz_u8(in);
        switch (cap & 3u) {
        case 0:
            it->capacity = it->byte_len;
            break;
        case 1:
            it->capacity = it->byte_len + (cap >> 2);
            if (it->capacity < it->byte_len)
                it->capacity = SIZE_MAX;
            break;
        case 2:
            it->capacity = it->byte_len - (it->byte_len < (size_t)(cap >> 2)
                                               ? it->byte_len
                                               : (size_t)(cap >> 2));
            break;
        default:
            it->capacity = (size_t)fuzz_shaped_u64(in);
            break;
        }
        if (upload)
            it->capacity = SIZE_MAX;
    }
    return count;
}

/* ------------------------------------------------------------------------
 * The reference
 * ---------------------------------------------------------------------- */

/* Marks items' destination bytes on the owner map; the last entry stands
 * for every byte past the arena (two items reaching it share it). Returns
 * whether two items share a byte. Only for items whose host lies in the
 * arena (all others are rejected earlier). */
static bool destinations_overlap(const item *items, size_t count)
{
    memset(owner, 0, sizeof owner);
    for (size_t i = 0; i < count; i++) {
        if (items[i].byte_len == 0)
            continue;
        size_t start = (size_t)(items[i].host - arena);
        fuzz_u128 end = (fuzz_u128)start + items[i].byte_len;
        for (fuzz_u128 at = start; at < end; at++) {
            size_t slot = at >= ARENA_LEN ? ARENA_LEN : (size_t)at;
            if (owner[slot] != 0)
                return true;
            owner[slot] = (uint16_t)(i + 1u);
            if (slot == ARENA_LEN)
                break;
        }
    }
    return false;
}

static bool pair_overlaps(const item *items, size_t count, size_t a, size_t b)
{
    if (a >= count || b >= count || a == b || items[a].byte_len == 0
        || items[b].byte_len == 0)
        return false;
    fuzz_u128 a0 = (uintptr_t)items[a].host, b0 = (uintptr_t)items[b].host;
    fuzz_u128 a1 = a0 + items[a].byte_len, b1 = b0 + items[b].byte_len;
    return a0 < b1 && b0 < a1;
}

static verdict reference(enum call_kind kind, const item *items, size_t count,
                         bool items_null)
{
    bool upload = kind == CALL_UPLOAD_BATCH || kind == CALL_UPLOAD_AT
                  || kind == CALL_UPLOAD_WHOLE;
    bool batch = kind == CALL_UPLOAD_BATCH || kind == CALL_DOWNLOAD_BATCH;
    verdict v = { CURD_OK, NO_ITEM, false };
    if (batch && count == 0)
        return v;
    if (batch && items_null) {
        v.status = CURD_E_INVALID_ARGUMENT;
        return v;
    }
    fuzz_u128 total = 0;
    for (size_t i = 0; i < count; i++) {
        const item *it = &items[i];
        v.item = batch ? i : NO_ITEM;
        if (it->byte_len != 0 && it->host == NULL) {
            v.status = CURD_E_INVALID_ARGUMENT;
            return v;
        }
        if (!upload && it->byte_len > it->capacity) {
            v.status = CURD_E_RANGE;
            return v;
        }
        if ((fuzz_u128)(uintptr_t)it->host + it->byte_len
            > (fuzz_u128)UINTPTR_MAX) {
            /* A whole-buffer transfer of a live buffer says first that
             * the length is not the buffer's. */
            size_t live = fuzz_live_index(it->id);
            v.status = (kind == CALL_DOWNLOAD_WHOLE
                        || kind == CALL_UPLOAD_WHOLE)
                               && live != SIZE_MAX
                               && live_lens[live] != it->byte_len
                           ? CURD_E_RANGE
                           : CURD_E_OVERFLOW;
            return v;
        }
        total += it->byte_len;
        if (total > (fuzz_u128)UINT64_MAX) {
            v.status = CURD_E_OVERFLOW;
            v.item = NO_ITEM;
            return v;
        }
    }
    v.item = NO_ITEM;
    if (!upload && destinations_overlap(items, count)) {
        v.status = CURD_E_INVALID_ARGUMENT;
        v.pair = true;
        return v;
    }
    for (size_t i = 0; i < count; i++) {
        if (fuzz_live_index(items[i].id) == SIZE_MAX) {
            v.status = CURD_E_STALE_HANDLE;
            v.item = count > 1 ? i : NO_ITEM;
            return v;
        }
    }
    for (size_t i = 0; i < count; i++) {
        size_t len = live_lens[fuzz_live_index(items[i].id)];
        fuzz_u128 end = (fuzz_u128)items[i].offset + items[i].byte_len;
        if (end > (fuzz_u128)UINT64_MAX || end > len) {
            v.status = end > (fuzz_u128)UINT64_MAX ? CURD_E_OVERFLOW
                                                   : CURD_E_RANGE;
            v.item = batch ? i : NO_ITEM;
            return v;
        }
    }
    if ((kind == CALL_DOWNLOAD_WHOLE || kind == CALL_UPLOAD_WHOLE)
        && items[0].byte_len != live_lens[fuzz_live_index(items[0].id)])
        v.status = CURD_E_RANGE;
    return v;
}

/* ------------------------------------------------------------------------
 * One input
 * ---------------------------------------------------------------------- */

static void check_buffers_match_model(void)
{
    for (size_t b = 0; b < live_count; b++)
        FUZZ_CHECK(memcmp(live_bytes[b], model[b], live_lens[b]) == 0);
}

static curd_status run_call(enum call_kind kind, const item *items,
                            size_t count, bool items_null)
{
    curd_download downloads[MAX_ITEMS];
    curd_upload uploads[MAX_ITEMS];
    for (size_t i = 0; i < count; i++) {
        downloads[i] = (curd_download){ { items[i].id }, items[i].offset,
                                        items[i].byte_len, items[i].host,
                                        items[i].capacity };
        uploads[i] = (curd_upload){ { items[i].id }, items[i].offset,
                                    items[i].host, items[i].byte_len };
    }
    curd_buffer buffer = { items[0].id };
    switch (kind) {
    case CALL_DOWNLOAD_BATCH:
        return curd_download_batch(device, items_null ? NULL : downloads,
                                   count);
    case CALL_UPLOAD_BATCH:
        return curd_upload_batch(device, items_null ? NULL : uploads, count);
    case CALL_DOWNLOAD_RANGE:
        return curd_buffer_download_range(device, buffer, items[0].offset,
                                          items[0].byte_len, items[0].host,
                                          items[0].capacity);
    case CALL_UPLOAD_AT:
        return curd_buffer_upload_at(device, buffer, items[0].offset,
                                     items[0].host, items[0].byte_len);
    case CALL_DOWNLOAD_WHOLE:
        return curd_buffer_download(device, buffer, items[0].host,
                                    items[0].byte_len);
    default:
        return curd_buffer_upload(device, buffer, items[0].host,
                                  items[0].byte_len);
    }
}

static void check_call(enum call_kind kind, item *items, size_t count,
                       bool items_null)
{
    bool upload = kind == CALL_UPLOAD_BATCH || kind == CALL_UPLOAD_AT
                  || kind == CALL_UPLOAD_WHOLE;
    if (kind == CALL_DOWNLOAD_WHOLE)
        items[0].capacity = items[0].byte_len;
    if (kind == CALL_DOWNLOAD_WHOLE || kind == CALL_UPLOAD_WHOLE)
        items[0].offset = 0;
    verdict want = reference(kind, items, count, items_null);

    curd_stats before = { .struct_size = sizeof before };
    curd_stats after = { .struct_size = sizeof after };
    FUZZ_CHECK(curd_device_stats(device, &before) == CURD_OK);
    memcpy(arena_before, arena, sizeof arena);

    curd_status got = run_call(kind, items, count, items_null);

    FUZZ_CHECK(curd_device_stats(device, &after) == CURD_OK);
    if (trace)
        fprintf(stderr, "call %d, %zu items: %s: %s\n", (int)kind, count,
                curd_status_name(got), got == CURD_OK ? "" : curd_last_error());
    if (got != want.status) {
        fprintf(stderr, "call %d, %zu items: library %s (%s), reference %s"
                        " (item %zu)\n",
                (int)kind, count, curd_status_name(got), curd_last_error(),
                curd_status_name(want.status), want.item);
        FUZZ_CHECK(false);
    }
    if (got != CURD_OK) {
        const char *message = curd_last_error();
        fuzz_check_fix_sentence();
        if (want.pair) {
            const char *at = strstr(message, "items ");
            size_t a = SIZE_MAX, b = SIZE_MAX;
            FUZZ_CHECK(at != NULL
                       && sscanf(at, "items %zu and %zu", &a, &b) == 2);
            FUZZ_CHECK(pair_overlaps(items, count, a, b));
        } else if (want.item != NO_ITEM) {
            if (!fuzz_names(message, "item", want.item)) {
                fprintf(stderr, "expected item %zu in: %s\n", want.item,
                        message);
                FUZZ_CHECK(false);
            }
        } else {
            FUZZ_CHECK(strstr(message, " item ") == NULL);
        }
        /* Nothing moved, nothing counted. */
        FUZZ_CHECK(memcmp(arena, arena_before, sizeof arena) == 0);
        check_buffers_match_model();
        FUZZ_CHECK(after.h2d_bytes == before.h2d_bytes);
        FUZZ_CHECK(after.d2h_bytes == before.d2h_bytes);
        FUZZ_CHECK(after.copy_ops == before.copy_ops);
        FUZZ_CHECK(after.fences == before.fences);
        return;
    }

    /* Accepted: the model moves the bytes. */
    uint64_t total = 0;
    if (!items_null) {
        for (size_t i = 0; i < count; i++) {
            const item *it = &items[i];
            if (it->byte_len == 0)
                continue;
            size_t b = fuzz_live_index(it->id);
            total += it->byte_len;
            if (upload)
                memcpy(&model[b][it->offset], it->host, it->byte_len);
            else
                memcpy(arena_before + (it->host - arena),
                       &model[b][it->offset], it->byte_len);
        }
    }
    FUZZ_CHECK(memcmp(arena, arena_before, sizeof arena) == 0);
    check_buffers_match_model();
    uint64_t moved = upload ? after.h2d_bytes - before.h2d_bytes
                            : after.d2h_bytes - before.d2h_bytes;
    FUZZ_CHECK(after.fences - before.fences == (total != 0 ? 1u : 0u));
    FUZZ_CHECK((moved != 0) == (total != 0) && moved <= total);
    FUZZ_CHECK((upload ? after.d2h_bytes - before.d2h_bytes
                       : after.h2d_bytes - before.h2d_bytes) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    item items[MAX_ITEMS];
    memset(items, 0, sizeof items);
    uint8_t header = fuzz_u8(&in);
    static const size_t common[8] = {1, 2, 7, 64, 255, 256, 513, 1024};

    /* The buffers, filled with a pattern straight through the stand-in;
     * one freed in this input: its id is stale from here on. */
    uint64_t freed_now = fuzz_buffers_make(
        &in, 1u + (size_t)(header & 7u) % FUZZ_MAX_BUFFERS,
        (header & 8u) != 0, common, header);
    for (size_t at = 0; at < ARENA_LEN; at++)
        arena[at] = (uint8_t)(at * 7u + 0x5au);

    uint8_t call = fuzz_u8(&in);
    enum call_kind kind = (enum call_kind)(call % CALL_KINDS);
    bool batch = kind == CALL_DOWNLOAD_BATCH || kind == CALL_UPLOAD_BATCH;
    bool upload = kind == CALL_UPLOAD_BATCH || kind == CALL_UPLOAD_AT
                  || kind == CALL_UPLOAD_WHOLE;
    size_t count = batch ? (size_t)(call / CALL_KINDS) % (MAX_ITEMS + 1u) : 1u;
    bool items_null = batch && count > 0 && fuzz_u8(&in) == 0xffu;
    decode_items(&in, items, count, freed_now, upload);

    check_call(kind, items, count, items_null);
    fuzz_buffers_release();
    return 0;
}
