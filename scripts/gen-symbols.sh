#!/bin/sh
# Regenerates debian/libcurd1.symbols from a built libcurd shared object, so
# that dpkg-gensymbols -c4 (debian/rules) finds it exact.
#
# usage: scripts/gen-symbols.sh [--check] [LIBRARY]
#   LIBRARY defaults to build/libcurd.so.X.Y.Z (run `make lib` first).
#   --check   write nothing; exit 1 and show the difference when the file
#             is not what it would be regenerated to.
#
# A symbol already listed keeps its minimum version; a new one gets the
# library's version (X.Y.Z of its file name, which the Makefile takes from
# include/curd.h). A listed symbol that the library no longer
# exports would break every program linked against it: the script refuses.
set -eu
check=0
if [ "${1:-}" = "--check" ]; then
    check=1
    shift
fi
so=${1:-$(ls build/libcurd.so.*.*.* 2>/dev/null | head -n 1)}
[ -f "$so" ] || { echo "gen-symbols.sh: no ${so:-build/libcurd.so.X.Y.Z}; run make lib first" >&2; exit 1; }
# libcurd.so.X.Y.Z: X is the SONAME's number, X.Y.Z the current version.
current=$(basename "$so" | sed -n 's/^libcurd\.so\.//p')
major=${current%%.*}
symbols=debian/libcurd1.symbols

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# NAME@VERSION for each export: the version node (type A) and curd_*@@NODE.
nm -D --defined-only "$so" | awk '
    $2 == "A" { print $3 "@" $3; next }
    { sub(/@@/, "@", $3); print $3 }' | LC_ALL=C sort -u >"$tmp/exported"

# NAME@VERSION MINVER for each symbol already listed.
if [ -f "$symbols" ]; then
    sed -n 's/^ \([^ ]*\) \([^ ]*\)$/\1 \2/p' "$symbols" | LC_ALL=C sort >"$tmp/listed"
else
    : >"$tmp/listed"
fi
removed=$(cut -d' ' -f1 "$tmp/listed" | LC_ALL=C comm -23 - "$tmp/exported")
if [ -n "$removed" ]; then
    echo "gen-symbols.sh: $so no longer exports (an ABI break):" >&2
    echo "$removed" | sed 's/^/  /' >&2
    echo "  (before the first release only: delete those lines from $symbols and rerun)" >&2
    exit 1
fi

{
    echo "libcurd.so.$major libcurd1 #MINVER#"
    echo "* Build-Depends-Package: libcurd-dev"
    LC_ALL=C join -a 1 "$tmp/exported" "$tmp/listed" |
        awk -v current="$current" '{ print " " $1 " " ($2 == "" ? current : $2) }'
} >"$tmp/new"

if [ "$check" -eq 1 ]; then
    if ! diff -u "$symbols" "$tmp/new"; then
        echo "gen-symbols.sh: $symbols is out of date; run scripts/gen-symbols.sh" >&2
        exit 1
    fi
    echo "$symbols matches $so"
    exit 0
fi
cp "$tmp/new" "$symbols"
echo "wrote $symbols: $(($(wc -l <"$tmp/new") - 2)) symbols from $so"
