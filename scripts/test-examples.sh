#!/bin/sh
# Builds each example program (*.c, or *.c.gz as Debian may install them)
# of a directory with the flags given, runs it, and checks its exit status:
#   0   it ran and checked what it does;
#   3   no usable CUDA driver or no device: standard error must carry a
#       sentence ending with its Fix (the library's CURD_E_NO_DRIVER one
#       when there is no driver) and standard output must be empty;
# anything else (a failure, a crash) fails the test.
#
# usage: scripts/test-examples.sh [--expect STATUS] DIR OUTDIR CC-ARGS...
#   CC-ARGS    what to compile and link with, e.g.
#              $(pkg-config --cflags --libs curd)
#   --expect   require exactly that status (make check runs the examples
#              once without a driver, --expect 3, and once on the stand-in
#              driver, --expect 0)
set -eu
expect=""
if [ "${1:-}" = "--expect" ]; then
    expect=$2
    shift 2
fi
dir=${1:?usage: test-examples.sh [--expect STATUS] DIR OUTDIR CC-ARGS...}
outdir=${2:?usage: test-examples.sh [--expect STATUS] DIR OUTDIR CC-ARGS...}
shift 2
mkdir -p "$outdir"
fail=0
count=0
for source in "$dir"/*.c "$dir"/*.c.gz; do
    [ -e "$source" ] || continue
    name=$(basename "$source" .gz)
    name=${name%.c}
    if [ "${source%.gz}" != "$source" ]; then
        gzip -dc "$source" >"$outdir/$name.c"
        source=$outdir/$name.c
    fi
    count=$((count + 1))
    if ! cc -std=c11 -Wall -Wextra -Werror "$source" -o "$outdir/$name" "$@"; then
        echo "FAIL $name: does not build"
        fail=1
        continue
    fi
    status=0
    "$outdir/$name" >"$outdir/$name.out" 2>"$outdir/$name.err" || status=$?
    verdict=ok
    case "$status" in
    0) ;;
    3) if ! grep -q "^$name: .*Fix: " "$outdir/$name.err"; then
           verdict="exit 3 without a '$name: ... Fix: ...' sentence"
       elif [ -s "$outdir/$name.out" ]; then
           verdict="exit 3 with output on standard output"
       fi ;;
    *) verdict="exit status $status" ;;
    esac
    if [ -n "$expect" ] && [ "$status" != "$expect" ]; then
        verdict="exit status $status, expected $expect"
    fi
    if [ "$verdict" = ok ]; then
        echo "ok   $name (exit $status)"
    else
        echo "FAIL $name: $verdict"
        sed 's/^/     /' "$outdir/$name.out" "$outdir/$name.err"
        fail=1
    fi
done
if [ "$count" -eq 0 ]; then
    echo "no examples in $dir"
    exit 1
fi
exit "$fail"
