/* options.h - what curd-info and curd-bench say about a command line
 * getopt_long refused (options.c), in the one form every program curd
 * ships uses: "PROG: ..." on standard error. */
#ifndef CURD_TOOLS_OPTIONS_H
#define CURD_TOOLS_OPTIONS_H

/* Says what getopt_long refused; the caller prints its usage after.
 * argument is argv[optind - 1], refused is optopt: a short option's
 * letter (inside "-xy" getopt stops at 'x' while optind still points at
 * "-xy", so the letter is named, not the argument), 0 for an unknown long
 * option, and a long option's value (above any character) for one that
 * lacks its value or was given one it takes none of; then argument is
 * that long option as written. */
void tool_bad_option(const char *program, const char *argument, int refused);

#endif
