/* nvtx.h - curd's work as NVTX ranges, for Nsight Systems and any other
 * tool that attaches through NVTX (NVIDIA Tools Extension, v3).
 *
 * A public entry that does work (an upload, a download, a dispatch, a
 * batch run, a copy, a collective, a wait) opens with one line,
 * CURDI_RANGE("curd_buffer_upload"); the range is pushed there and popped
 * on every return path (the compiler's cleanup attribute), on the calling
 * thread, in the domain "curd". Inside them, each kernel launch is a range
 * named with the kernel's entry name (CURDI_RANGE_NAMED), and a batch's
 * graph capture and replay are ranges of their own.
 *
 * Costs: with no tool attached, or CURD_NVTX=0 in the environment (read
 * once, on the first range), a range is one relaxed load and a branch,
 * inline; nothing is called. With a tool, a fixed name is registered with
 * it once per call site (a registered string: the tool keeps no copy per
 * push) and a kernel's name goes as the event's text, which the tool
 * copies; nothing is allocated per call. A build with CURDI_NVTX=0 (make
 * NVTX=0) compiles every range out, for measuring that the ranges cost
 * nothing measurable.
 *
 * NVTX itself is header-only (third_party/nvtx3/, as NVIDIA ships it):
 * its functions are hidden weak definitions in nvtx.c, which is the one
 * file that includes it; it dlopens the tool's injection library
 * ($NVTX_INJECTION64_PATH, set by nsys) itself on the first call. */
#ifndef CURD_LIB_BASE_NVTX_H
#define CURD_LIB_BASE_NVTX_H

#include <stdatomic.h>
#include <stdbool.h>

#ifndef CURDI_NVTX
#define CURDI_NVTX 1
#endif

/* One call site of CURDI_RANGE: its fixed name and the handle the tool
 * gave for it (an nvtxStringHandle_t; NULL until registered). */
typedef struct curdi_nvtx_site {
    const char *name;
    _Atomic(void *) handle;
} curdi_nvtx_site;

#if CURDI_NVTX

/* -1: not decided yet (the first range decides); 0: no ranges (no tool
 * attached, or CURD_NVTX=0); 1: ranges go to the tool. Hidden, so that
 * the test is a load relative to the code, not through the GOT. */
extern __attribute__((visibility("hidden"))) atomic_int curdi_nvtx_state;

/* Push a range named by site (registered on its first push) or by text
 * (copied by the tool); true when a range was pushed, which
 * curdi_nvtx_end then pops. Called only while curdi_nvtx_state is not 0. */
bool curdi_nvtx_push_site(curdi_nvtx_site *site);
bool curdi_nvtx_push_text(const char *text);
void curdi_nvtx_pop(void);

static inline bool curdi_nvtx_maybe(void)
{
    return atomic_load_explicit(&curdi_nvtx_state, memory_order_relaxed) != 0;
}

/* The cleanup of a range's flag: pops what was pushed. */
static inline void curdi_nvtx_end(const bool *pushed)
{
    if (*pushed)
        curdi_nvtx_pop();
}

/* A range over the rest of the enclosing block (at most one per block),
 * named by a string literal. */
#define CURDI_RANGE(literal)                                                  \
    static curdi_nvtx_site curdi_nvtx_site_ = {literal, NULL};               \
    __attribute__((cleanup(curdi_nvtx_end), unused)) bool curdi_nvtx_pushed_ \
        = curdi_nvtx_maybe() && curdi_nvtx_push_site(&curdi_nvtx_site_)
/* The same named by a string that may change from call to call (a
 * kernel's name), evaluated only when a tool listens. */
#define CURDI_RANGE_NAMED(text)                                               \
    __attribute__((cleanup(curdi_nvtx_end), unused)) bool curdi_nvtx_pushed_ \
        = curdi_nvtx_maybe() && curdi_nvtx_push_text(text)

#else /* CURDI_NVTX == 0: every range compiled out */

#define CURDI_RANGE(literal) ((void)0)
#define CURDI_RANGE_NAMED(text) ((void)0)

#endif

#endif
