/* tuning.c - the transfer engine's tunables from the environment (see
 * tuning.h). */
#include "transfer/tuning.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

void curdi_tuning_defaults(curdi_tuning *tuning)
{
    memset(tuning, 0, sizeof *tuning);
    tuning->gather.path = CURDI_PATH_AUTO;
    tuning->gather.min_spans = CURDI_GATHER_MIN_SPANS_DEFAULT;
    tuning->gather.max_span_bytes = CURDI_GATHER_MAX_SPAN_BYTES_DEFAULT;
    tuning->chunk_min_bytes = CURDI_CHUNK_MIN_BYTES_DEFAULT;
    tuning->chunk_max_bytes = CURDI_CHUNK_MAX_BYTES_DEFAULT;
    tuning->slots = CURDI_STAGING_SLOTS_DEFAULT;
    tuning->copy_threads = 0;
    tuning->copy_piece_bytes = CURDI_COPY_PIECE_BYTES;
    tuning->copy_parallel_min = CURDI_COPY_PARALLEL_MIN;
    tuning->compare_parallel_min = CURDI_COMPARE_PARALLEL_MIN_DEFAULT;
    tuning->upload_growth_threads = CURDI_UPLOAD_GROWTH_THREADS_DEFAULT;
    tuning->upload_growth_min = CURDI_UPLOAD_GROWTH_MIN_DEFAULT;
    tuning->streaming_download_min = CURDI_STREAMING_DOWNLOAD_MIN_DEFAULT;
    tuning->streaming_upload_min = CURDI_STREAMING_UPLOAD_MIN_DEFAULT;
    tuning->touch_download_max = CURDI_TOUCH_DOWNLOAD_MAX_DEFAULT;
    tuning->pageable_direct_max = CURDI_PAGEABLE_DIRECT_MAX_DEFAULT;
    tuning->fence_spin_us = CURDI_FENCE_SPIN_US_DEFAULT;
    tuning->landing_bytes = CURDI_LANDING_BYTES_DEFAULT;
}

/* The numeric variables: where each goes and what it may be. "off" sets
 * UINT64_MAX where off_allowed. */
typedef struct knob {
    const char *name;
    size_t field; /* offsetof a uint64_t of curdi_tuning */
    uint64_t min;
    uint64_t max;
    bool off_allowed;
} knob;

#define KNOB_FIELD(member) offsetof(curdi_tuning, member)

static const knob knobs[] = {
    {"CURD_GATHER_MIN_SPANS", KNOB_FIELD(gather.min_spans), 1,
     (uint64_t)1 << 32, false},
    {"CURD_GATHER_MAX_SPAN_BYTES", KNOB_FIELD(gather.max_span_bytes), 1,
     (uint64_t)1 << 40, false},
    {"CURD_CHUNK_MIN_BYTES", KNOB_FIELD(chunk_min_bytes), 4096,
     CURDI_CHUNK_BYTES_LIMIT, false},
    {"CURD_CHUNK_MAX_BYTES", KNOB_FIELD(chunk_max_bytes), 4096,
     CURDI_CHUNK_BYTES_LIMIT, false},
    {"CURD_STAGING_SLOTS", KNOB_FIELD(slots), 1, CURDI_STAGING_SLOTS_MAX,
     false},
    {"CURD_COPY_THREADS", KNOB_FIELD(copy_threads), 0, CURDI_COPY_THREADS_MAX,
     false},
    {"CURD_COPY_PIECE_BYTES", KNOB_FIELD(copy_piece_bytes), 4096,
     CURDI_CHUNK_BYTES_LIMIT, false},
    {"CURD_COPY_PARALLEL_MIN", KNOB_FIELD(copy_parallel_min), 0,
     (uint64_t)1 << 40, false},
    {"CURD_COPY_SPIN_US", KNOB_FIELD(copy_spin_us), 0, CURDI_COPY_SPIN_US_MAX,
     false},
    {"CURD_COMPARE_PARALLEL_MIN", KNOB_FIELD(compare_parallel_min), 0,
     (uint64_t)1 << 40, true},
    {"CURD_UPLOAD_GROWTH_THREADS", KNOB_FIELD(upload_growth_threads), 0,
     CURDI_COPY_THREADS_MAX, false},
    {"CURD_UPLOAD_GROWTH_MIN", KNOB_FIELD(upload_growth_min), 0,
     (uint64_t)1 << 40, false},
    {"CURD_STREAMING_DOWNLOAD_MIN", KNOB_FIELD(streaming_download_min), 0,
     (uint64_t)1 << 40, true},
    {"CURD_STREAMING_UPLOAD_MIN", KNOB_FIELD(streaming_upload_min), 0,
     (uint64_t)1 << 40, true},
    {"CURD_TOUCH_DOWNLOAD_MAX", KNOB_FIELD(touch_download_max), 0,
     CURDI_CHUNK_BYTES_LIMIT, false},
    {"CURD_PAGEABLE_DIRECT_MAX", KNOB_FIELD(pageable_direct_max), 0,
     CURDI_CHUNK_BYTES_LIMIT, false},
    {"CURD_FENCE_SPIN_US", KNOB_FIELD(fence_spin_us), 0,
     CURDI_FENCE_SPIN_US_MAX, false},
    {"CURD_LANDING_BYTES", KNOB_FIELD(landing_bytes), 0,
     CURDI_LANDING_BYTES_MAX, false},
};

/* A count or a size: decimal digits, then optionally k, m or g (KiB, MiB,
 * GiB). false for anything else or past UINT64_MAX. */
static bool parse_amount(const char *text, uint64_t *out)
{
    char *end = NULL;
    uint64_t value;
    unsigned shift = 0;
    if (text[0] < '0' || text[0] > '9')
        return false;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno != 0)
        return false;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        return false;
    }
    if (shift != 0 && end[1] != '\0')
        return false;
    if (value > (UINT64_MAX >> shift))
        return false;
    *out = value << shift;
    return true;
}

static bool read_path(curdi_tuning *tuning)
{
    const char *text = getenv("CURD_TRANSFER_PATH");
    if (text == NULL)
        return false;
    if (strcmp(text, "auto") == 0)
        tuning->gather.path = CURDI_PATH_AUTO;
    else if (strcmp(text, "dma") == 0)
        tuning->gather.path = CURDI_PATH_DMA;
    else if (strcmp(text, "gather") == 0)
        tuning->gather.path = CURDI_PATH_GATHER;
    else
        curdi_trace("CURD_TRANSFER_PATH=%s is not auto, dma or gather;"
                    " ignored",
                    text);
    return true;
}

void curdi_tuning_from_env(curdi_tuning *tuning)
{
    bool any;
    curdi_tuning_defaults(tuning);
    any = read_path(tuning);
    for (size_t index = 0; index < sizeof knobs / sizeof knobs[0]; index++) {
        const knob *k = &knobs[index];
        const char *text = getenv(k->name);
        uint64_t value;
        if (text == NULL)
            continue;
        any = true;
        if (k->off_allowed && strcmp(text, "off") == 0) {
            value = UINT64_MAX;
        } else if (!parse_amount(text, &value) || value < k->min
                   || value > k->max) {
            curdi_trace("%s=%s is not a whole number from %" PRIu64
                        " to %" PRIu64 " (k, m, g: KiB, MiB, GiB%s);"
                        " ignored",
                        k->name, text, k->min, k->max,
                        k->off_allowed ? "; or off" : "");
            continue;
        }
        /* field is the offset of a uint64_t member (the table above). */
        memcpy((unsigned char *)tuning + k->field, &value, sizeof value);
    }
    if (tuning->chunk_max_bytes < tuning->chunk_min_bytes)
        tuning->chunk_max_bytes = tuning->chunk_min_bytes;
    if (any)
        curdi_trace("transfer tuning: path %s, gather from %" PRIu64
                    " spans of at most %" PRIu64 " bytes, chunks %" PRIu64
                    "..%" PRIu64 " bytes, %" PRIu64 " slots, %" PRIu64
                    " copy threads (0: auto) polling %" PRIu64
                    " us, pieces of %" PRIu64
                    " bytes from %" PRIu64 " (comparisons from %" PRIu64
                    "), %" PRIu64
                    " more for uploads from %" PRIu64 " bytes, streaming from %" PRIu64
                    " down / %" PRIu64 " up (below the growth size),"
                    " pageable uploads to the"
                    " driver up to %" PRIu64 ", final waits polling %" PRIu64
                    " us, landing area %" PRIu64 " bytes, touching"
                    " downloads up to %" PRIu64 " bytes",
                    tuning->gather.path == CURDI_PATH_DMA ? "dma"
                    : tuning->gather.path == CURDI_PATH_GATHER ? "gather"
                                                               : "auto",
                    tuning->gather.min_spans, tuning->gather.max_span_bytes,
                    tuning->chunk_min_bytes, tuning->chunk_max_bytes,
                    tuning->slots, tuning->copy_threads,
                    tuning->copy_spin_us, tuning->copy_piece_bytes, tuning->copy_parallel_min,
                    tuning->compare_parallel_min,
                    tuning->upload_growth_threads, tuning->upload_growth_min,
                    tuning->streaming_download_min,
                    tuning->streaming_upload_min,
                    tuning->pageable_direct_max, tuning->fence_spin_us,
                    tuning->landing_bytes, tuning->touch_download_max);
}
