/* share.h - the importing process of the share/ scenarios
 * (scenarios/share.c): curd-bench started again by them, which
 * curd-bench's main hands over to before anything else. */
#ifndef CURD_TOOLS_CURD_BENCH_SCENARIOS_SHARE_H
#define CURD_TOOLS_CURD_BENCH_SCENARIOS_SHARE_H

#include <stdbool.h>

/* Set (to the descriptor of its end of the socket) in the environment of
 * the process the share/ scenarios start. */
#define BENCH_SHARE_CHILD_VARIABLE "CURD_BENCH_SHARE_CHILD"

/* Whether this process is such a child. */
bool bench_share_child_wanted(void);
/* Serves the scenario's commands until the socket closes; the process's
 * exit status. */
int bench_share_child_main(void);

#endif
