/* progress.c - the progress line on standard error.
 *
 * Shown only when standard error is a terminal (a log or a pipe stays
 * clean) and only once the run has lasted a second (a short run is not
 * worth a line), redrawn at most ten times a second: "\r" returns to the
 * start of the line and "\033[K" erases what the last draw left. */
#include "harness/progress.h"
#include "harness/clock.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define PROGRESS_AFTER_NS 1000000000u
#define PROGRESS_EVERY_NS 100000000u

static struct {
    bool terminal;
    bool shown;
    uint64_t start_ns;
    uint64_t drawn_ns;
    unsigned scenario_count;
    unsigned scenario_index;
    const char *scenario_name;
} progress;

void bench_progress_begin(unsigned scenario_count)
{
    progress.terminal = isatty(STDERR_FILENO) == 1;
    progress.start_ns = bench_now_ns();
    progress.scenario_count = scenario_count;
}

static void draw(unsigned done, unsigned total)
{
    uint64_t now_ns = bench_now_ns();
    if (!progress.terminal || progress.scenario_name == NULL ||
        now_ns - progress.start_ns < PROGRESS_AFTER_NS ||
        (progress.shown && now_ns - progress.drawn_ns < PROGRESS_EVERY_NS))
        return;
    fprintf(stderr, "\r\033[Kcurd-bench: scenario %u of %u, %s",
            progress.scenario_index + 1, progress.scenario_count,
            progress.scenario_name);
    if (total > 0)
        fprintf(stderr, ": sample %u of %u", done + 1, total);
    fprintf(stderr, " (%.0f s)",
            (double)(now_ns - progress.start_ns) / 1e9);
    fflush(stderr);
    progress.shown = true;
    progress.drawn_ns = now_ns;
}

void bench_progress_scenario(unsigned index, const char *name)
{
    progress.scenario_index = index;
    progress.scenario_name = name;
    draw(0, 0);
}

void bench_progress_samples(unsigned done, unsigned total)
{
    draw(done, total);
}

void bench_progress_clear(void)
{
    if (!progress.shown)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    progress.shown = false;
}
