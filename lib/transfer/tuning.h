/* tuning.h - the transfer engine's tunables and the environment variables
 * that override them (pure: getenv and parsing, no driver).
 *
 * The defaults are what was measured best on the GPU machine (an H100 on
 * PCIe gen5, 16 host cores; doc/PERFORMANCE.md). Each can be overridden by
 * an environment variable, read once when a device is opened, so one
 * process can compare settings side by side by opening one device per
 * setting (curd-bench's tune/ scenarios do). A value that does not parse
 * or lies outside its range is ignored, with a CURD_TRACE line. man/curd.3
 * lists the variables. */
#ifndef CURD_LIB_TRANSFER_TUNING_H
#define CURD_LIB_TRANSFER_TUNING_H

#include <stdint.h>

#include "transfer/copy_team.h"

/* How a transfer's staged bytes cross between their device ranges and
 * the one contiguous stream that crosses the bus (lib/transfer/plan.h). */
typedef enum curdi_transfer_path {
    /* Gather/scatter when the plan has enough small spans (below). */
    CURDI_PATH_AUTO = 0,
    /* One DMA per span, never a kernel. */
    CURDI_PATH_DMA = 1,
    /* Every span that is not moved item by item goes through the device
     * staging and a kernel: the tests' switch. */
    CURDI_PATH_GATHER = 2
} curdi_transfer_path;

/* The planner's choice between a DMA per span and gather/scatter. */
typedef struct curdi_gather_policy {
    curdi_transfer_path path;          /* CURD_TRANSFER_PATH */
    uint64_t min_spans;                /* CURD_GATHER_MIN_SPANS */
    uint64_t max_span_bytes;           /* CURD_GATHER_MAX_SPAN_BYTES */
} curdi_gather_policy;

typedef struct curdi_tuning {
    curdi_gather_policy gather;
    /* Staging chunks (lib/transfer/plan.h, curdi_plan_chunk_bytes): a stream up to
     * chunk_min_bytes is one chunk; longer ones are cut into quarters
     * kept between the two. */
    uint64_t chunk_min_bytes;          /* CURD_CHUNK_MIN_BYTES */
    uint64_t chunk_max_bytes;          /* CURD_CHUNK_MAX_BYTES */
    uint64_t slots;                    /* CURD_STAGING_SLOTS */
    /* Copy threads (lib/transfer/copy_team.h); 0: one per processor online but the
     * caller's, at most CURDI_COPY_TEAM_AUTO_MAX. */
    uint64_t copy_threads;             /* CURD_COPY_THREADS */
    uint64_t copy_piece_bytes;         /* CURD_COPY_PIECE_BYTES */
    uint64_t copy_parallel_min;        /* CURD_COPY_PARALLEL_MIN */
    /* A host comparison this long or longer (a static set's verified
     * hit, lib/session/static_sets.c) is shared with the copy team;
     * UINT64_MAX: never. */
    uint64_t compare_parallel_min;     /* CURD_COMPARE_PARALLEL_MIN */
    /* Microseconds the copy threads poll before they sleep (lib/transfer/copy_team.h,
     * spin_ns); 0: they sleep at once. */
    uint64_t copy_spin_us;             /* CURD_COPY_SPIN_US */
    /* Copy threads an upload that stages at least upload_growth_min bytes
     * adds to the team for its own time (curdi_copy_team_grow); 0: none. */
    uint64_t upload_growth_threads;    /* CURD_UPLOAD_GROWTH_THREADS */
    uint64_t upload_growth_min;        /* CURD_UPLOAD_GROWTH_MIN */
    /* Host copies of a stream this long or longer use streaming stores
     * (curdi_copy_team_streaming); UINT64_MAX: never. */
    uint64_t streaming_download_min;   /* CURD_STREAMING_DOWNLOAD_MIN */
    uint64_t streaming_upload_min;     /* CURD_STREAMING_UPLOAD_MIN */
    /* A download of at most this many bytes staged for pageable memory
     * reads one byte of each line its last copy-out will write while its
     * DMAs run, so that the copy-out finds them in the cache (plan.h,
     * curdi_plan_host.touches); 0: never. */
    uint64_t touch_download_max;       /* CURD_TOUCH_DOWNLOAD_MAX */
    /* A single upload from pageable memory of at most this many bytes goes
     * to the driver as it is (lib/transfer/plan.h,
     * curdi_plan_pageable_direct); 0: never. */
    uint64_t pageable_direct_max;      /* CURD_PAGEABLE_DIRECT_MAX */
    /* Microseconds a transfer's final wait polls the word its stream
     * writes before it waits in the driver (lib/core/fence.h); 0: it waits in
     * the driver at once. */
    uint64_t fence_spin_us;           /* CURD_FENCE_SPIN_US */
    /* Bytes of the landing area that the staging slots of downloads into
     * pageable memory take turns over (lib/memory/landing.h); 0: they stage
     * through the pinned pool. */
    uint64_t landing_bytes;            /* CURD_LANDING_BYTES */
} curdi_tuning;

/* Defaults. The gather crossover: below the span count, a DMA per span
 * costs less than the kernel's launch; above the average span size, the
 * DMAs' bus time hides their set-up. Measured on the H100 with the
 * kernels moving chunks straight across the bus (curd-bench
 * tune/gather-reads and -writes, into and out of malloc memory): 2 spans
 * lose at every size (1.03 to 1.09x slower, but 1 MiB spans); from 4
 * spans the kernels win or tie at 4 KiB (0.81x reads, 0.82x writes),
 * 64 KiB (1.02x, 0.89x) and 1 MiB (0.66x, 0.61x), and more spans win
 * more (64 of 4 KiB: 0.26x, 0.25x). */
#define CURDI_GATHER_MIN_SPANS_DEFAULT 4u
#define CURDI_GATHER_MAX_SPAN_BYTES_DEFAULT ((uint64_t)1024 * 1024)
#define CURDI_CHUNK_MIN_BYTES_DEFAULT ((uint64_t)1 << 20)
#define CURDI_CHUNK_MAX_BYTES_DEFAULT ((uint64_t)8 << 20)
#define CURDI_STAGING_SLOTS_DEFAULT 3u
/* The copies' own threshold (CURDI_COPY_PARALLEL_MIN), which the H100
 * host's wake-up costs set. On the 2-core development box, shared and
 * loaded, a 1 MiB comparison took 42 us alone and 46 to 52 us with the
 * team's one worker (curd-bench session/static-hit, medians), and no
 * size compared reliably faster with it: the crossover is the GPU
 * host's to measure (CURD_COMPARE_PARALLEL_MIN=off against the default). */
#define CURDI_COMPARE_PARALLEL_MIN_DEFAULT ((uint64_t)1 << 20)
/* Bounds the environment may set. */
#define CURDI_STAGING_SLOTS_MAX 8u
#define CURDI_COPY_THREADS_MAX CURDI_COPY_TEAM_MAX
#define CURDI_COPY_SPIN_US_MAX 100000u
#define CURDI_CHUNK_BYTES_LIMIT ((uint64_t)1 << 30)
/* A download that stages at least this many bytes writes caller memory
 * with curdi_copy_team_streaming: measured on an H100 host, a 256 MiB download
 * into malloc memory went from ~8 ms to ~5.2 ms (the 6 copy threads'
 * plain memcpy out of staging was the bottleneck, at ~32 GB/s against
 * the DMA's 55 GB/s). Smaller downloads keep memcpy, which leaves the
 * bytes in cache for the caller. */
#define CURDI_STREAMING_DOWNLOAD_MIN_DEFAULT ((uint64_t)16 << 20)
/* An upload that stages at least this many bytes, and less than
 * CURD_UPLOAD_GROWTH_MIN, writes staging with streaming stores. Measured
 * on the H100 host (doc/PERFORMANCE.md, tenth run; 4 rounds against
 * memcpy, one process each): 64 KiB 14.7-15.0 against 16.1-16.5 us,
 * 1 MiB 60-62 against 91-97 us, 16 MiB 529-544 against 697-740 us. A
 * long upload keeps memcpy: streaming stores made the 256 MiB one
 * slower, grown or not (the fifth and ninth runs). */
#define CURDI_STREAMING_UPLOAD_MIN_DEFAULT ((uint64_t)64 << 10)
/* A download up to 256 KiB touches its copy-out's lines under the DMAs:
 * the one-core copy-out of 256 KiB into cold malloc memory took 29 us of
 * a 56 us read on the H200, against 7 us warm, while the DMA's 13 us or
 * so were spent polling the fence. Measured there (curd-bench's cold
 * scattered reads with CURD_BENCH_STAGES=1, 2026-11-29, three machines):
 * cold strided reads 74.6 -> 65.3, 84.5 -> 77.3 and 71.6 -> 51.8 us,
 * irregular 68.6 -> 58.6, 110 -> 91.6 and 79.4 -> 62.9 us; warm,
 * alternated, within the runs' noise (+1.8, +0.8 and -1.5 us on 25.8).
 * Streaming stores gained more cold (1.3x to 1.5x) but cost warm reads 6
 * to 7 us (the bytes leave the cache the caller reads them from). */
#define CURDI_TOUCH_DOWNLOAD_MAX_DEFAULT ((uint64_t)256 << 10)
/* An upload from pageable memory is as fast as its host copy into
 * staging, and 6 threads copy slower than the DMA reads (doc/PERFORMANCE.md,
 * the eighth run: 10 threads took the 256 MiB upload from 5.44-6.30 to
 * 5.27-5.35 ms, but slowed every other transfer while they existed). So a
 * long upload adds threads for its own time. Measured on the H100 host
 * (the ninth run), 6 more against none: 256 MiB 5.91-6.81 against
 * 7.41-8.02 ms, 64 MiB 1.92-2.08 against 2.12-2.36 ms, but 16 MiB
 * 0.84-0.88 against 0.65-0.71 ms (the threads' start outweighs it);
 * on another machine 2, 4 and 7 more gained 5, 10 and 14% at 256 MiB. */
#define CURDI_UPLOAD_GROWTH_THREADS_DEFAULT 6u
#define CURDI_UPLOAD_GROWTH_MIN_DEFAULT ((uint64_t)64 << 20)

/* The driver takes a 4 KiB upload from pageable memory in 7.4 us on the
 * H100 host of doc/PERFORMANCE.md, staging and a DMA in 9.4 us; at 64 KiB
 * staging wins (17.5 against 18.7 us). */
#define CURDI_PAGEABLE_DIRECT_MAX_DEFAULT ((uint64_t)16 * 1024)

/* Long enough for a transfer of a few MiB to end while polled (1 MiB
 * crosses the bus in about 20 us); longer work then waits in the driver,
 * which costs the same as before, a few microseconds late. */
#define CURDI_FENCE_SPIN_US_DEFAULT 100u
#define CURDI_FENCE_SPIN_US_MAX 100000u
/* More than the L2 of the cores that copy a download out (2 MiB each on
 * the H100 host; 1 MiB downloads are copied by the caller and 6 copy
 * threads), so a place's lines have left those caches by the time the
 * turns come back to it; a landing takes at most a quarter
 * (lib/memory/landing.h). Measured there with curd (medians of 300 downloads
 * into malloc memory, three rounds; no landing / 4 MiB / 16 MiB):
 * 256 KiB 29.9-30.4 / 28.1-28.2 / 25.4-28.5 us, 512 KiB 55.1-55.8 /
 * 47.2-50.5 / 43.1-50.2 us, 1 MiB 87.3-104 / 81.6-87.9 / 60.2-70.6 us;
 * once every slot of a download landed (off / 16 MiB / 32 MiB, another
 * machine): 2 MiB 129-136 / 83.3-93.7 / 82.6-96.2 us, 4 MiB 232-250 /
 * 168-171 / 157-189 us, 8 MiB 387-402 / 279-289 / 275-282 us. */
#define CURDI_LANDING_BYTES_DEFAULT ((uint64_t)16 << 20)
#define CURDI_LANDING_BYTES_MAX ((uint64_t)1 << 30)
/* The defaults above. */
void curdi_tuning_defaults(curdi_tuning *tuning);
/* The defaults, then every variable that is set and valid; traces what it
 * ignored and, when anything was set, the result. */
void curdi_tuning_from_env(curdi_tuning *tuning);

#endif
