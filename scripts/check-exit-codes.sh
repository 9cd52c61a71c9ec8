#!/bin/sh
# check-exit-codes.sh - every program curd ships keeps the one exit-code
# convention (README.md, man curd-info, man curd-bench, the examples'
# comments): 0 it worked, 1 the work failed, 2 a bad command line, 3 no
# usable CUDA driver or no device; an error is one line on standard error
# starting "PROG: ", and standard output stays empty on an error.
#
# usage: scripts/check-exit-codes.sh PROGRAM...
#   Each PROGRAM is run with a bad option (-xy: must exit 2 and name '-x')
#   and with the driver hidden (CURD_LIBCUDA=/nonexistent: must exit 3
#   with a sentence ending in its Fix). A program named curd-bench is also
#   run with --samples and no value (exit 2, saying the value is missing)
#   and --list (its summaries start in one column).
set -u
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
bad=0
checks=0

fail() {
    echo "check-exit-codes: $*"
    bad=1
}

# expect STATUS PATTERN PROGRAM ARGS...: runs it, then checks the status,
# an empty standard output, and a first line of standard error that
# starts with "NAME: " and matches the extended regex PATTERN.
expect() {
    status_wanted=$1
    pattern=$2
    shift 2
    name=$(basename "$1")
    checks=$((checks + 1))
    status=0
    "$@" >"$scratch/out" 2>"$scratch/err" </dev/null || status=$?
    if [ "$status" -ne "$status_wanted" ]; then
        fail "$name ${*#"$1"}: exit $status, expected $status_wanted"
    elif [ -s "$scratch/out" ]; then
        fail "$name ${*#"$1"}: wrote to standard output on an error: $(head -c 200 "$scratch/out")"
    elif ! head -n 1 "$scratch/err" | grep -q -E "^$name: .*$pattern"; then
        fail "$name ${*#"$1"}: standard error does not start with '$name: ' and match '$pattern': $(head -c 300 "$scratch/err")"
    fi
}

[ $# -gt 0 ] || { echo "usage: scripts/check-exit-codes.sh PROGRAM..." >&2; exit 2; }
for program in "$@"; do
    if [ ! -x "$program" ]; then
        fail "$program: not built"
        continue
    fi
    expect 2 "'-x" "$program" -xy
    CURD_LIBCUDA=/nonexistent/libcuda.so.1
    export CURD_LIBCUDA
    expect 3 "Fix: " "$program"
    unset CURD_LIBCUDA
    if [ "$(basename "$program")" = curd-bench ]; then
        expect 2 "'--samples' needs a value" "$program" --samples
        checks=$((checks + 1))
        columns=$("$program" --list | awk '{ match($0, /^[^ ]+ +/); print RLENGTH }' | sort -u)
        [ "$(printf '%s\n' "$columns" | wc -l)" -eq 1 ] ||
            fail "curd-bench --list: the summaries start in columns $(echo $columns)"
    fi
done
[ "$bad" -eq 0 ] && echo "check-exit-codes: $# programs, $checks checks: exit codes 2 (bad usage) and 3 (no driver), errors on standard error only"
exit "$bad"
