/* scattered-stages.h - the stages of a scattered transfer timed one by
 * one, where the caller's memory is cold (scenarios/scattered.c), so that
 * one run on the GPU machine tells which stage dominates.
 *
 * curd_download_batch into malloc memory (lib/transfer/: validate,
 * plan, engine) looks the destination up among the registered ranges,
 * moves the pieces into a staging slot (one strided DMA for pieces at one
 * stride, a gather kernel for irregular ones), waits for the fence, then
 * copies the slot out to the caller's memory on the calling thread (the
 * copy team joins from CURD_COPY_PARALLEL_MIN, 1 MiB); an upload copies
 * in first, then moves. The variants here time, under the same cold
 * memory as curd's, what libcurd cannot be made to time alone through its
 * public API: the host copy between a pinned area and the caller's memory
 * (memcpy, and with streaming stores), and reaching each 4 KiB page of
 * the caller's memory once (what the TLB and the first line of each page
 * cost). The DMA or kernel stage is curd's own batch into registered
 * memory (no copy) in the same scenario; the registration lookup and the
 * fixed costs are what curd's batch costs beyond the stages. */
#ifndef CURD_TOOLS_CURD_BENCH_SCENARIOS_SCATTERED_STAGES_H
#define CURD_TOOLS_CURD_BENCH_SCENARIOS_SCATTERED_STAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/common.h"

/* The environment variable that adds the stage variants to the cold
 * scenarios (any value but 0). */
#define BENCH_STAGES_VARIABLE "CURD_BENCH_STAGES"
bool bench_stages_wanted(void);

/* One stage's memory: host is the caller's (cold) memory, pinned a
 * page-locked area of the same byte_len; upload: the copy goes from host
 * into pinned, else from pinned into host. */
typedef struct bench_stage_op {
    unsigned char *host;
    unsigned char *pinned;
    size_t byte_len;
    bool upload;
} bench_stage_op;

/* bench_op_fn over a bench_stage_op: the host copy with memcpy; the same
 * with streaming (non-temporal) stores, where the machine has them
 * (bench_stage_has_streaming); one access per 4 KiB page of host (a
 * write for a download's destination, a read for an upload's source). */
int bench_stage_copy(void *op, uint64_t iterations);
int bench_stage_copy_streaming(void *op, uint64_t iterations);
int bench_stage_touch_pages(void *op, uint64_t iterations);
bool bench_stage_has_streaming(void);

/* The minor page faults of the process so far (getrusage). */
long bench_stage_minor_faults(void);

#endif
