#!/bin/sh
# Proves that a built libcurd shared object exports exactly the public API:
#   - its SONAME is libcurd.so.MAJOR, MAJOR read from its libcurd.so.X.Y.Z
#     file name;
#   - every defined dynamic symbol is a curd_* symbol with a CURD_* version
#     (lib/curd.map), or that version node itself;
#   - every function declared CURD_API in the public headers
#     (include/curd.h and include/curd_comm.h, which it includes) is
#     exported, and every exported symbol is declared there.
# usage: scripts/check-exports.sh build/libcurd.so.X.Y.Z [HEADER...]
set -eu
so=${1:?usage: check-exports.sh LIBRARY [HEADER...]}
shift
[ $# -gt 0 ] || set -- include/curd.h include/curd_comm.h
header=$*
major=$(basename "$so" | sed -n 's/^libcurd\.so\.\([0-9]*\)\..*/\1/p')
fail=0

soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libcurd.so.$major" ]; then
    echo "SONAME is '$soname', expected libcurd.so.$major"
    fail=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "ADDRESS TYPE NAME@@VERSION" for functions and data, "ADDRESS A NODE" for
# the version node.
nm -D --defined-only "$so" >"$tmp/nm"
awk '!($2 == "A" && $3 ~ /^CURD_[0-9.]+$/) && $3 !~ /^curd_[a-z0-9_]+@@CURD_[0-9.]+$/ { print "  " $2 " " $3 }' \
    "$tmp/nm" >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
    echo "exported outside curd_* or without a CURD_ version:"
    cat "$tmp/bad"
    fail=1
fi
sed -n 's/^[0-9a-f]* [A-Za-z] \(curd_[a-z0-9_]*\)@.*/\1/p' "$tmp/nm" | sort -u >"$tmp/exported"

"$(dirname "$0")/curd-api-names.sh" "$@" | sort -u >"$tmp/declared"

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
undeclared=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
    echo "declared CURD_API in $header but not exported:"
    echo "$missing" | sed 's/^/  /'
    fail=1
fi
if [ -n "$undeclared" ]; then
    echo "exported but not declared in $header:"
    echo "$undeclared" | sed 's/^/  /'
    fail=1
fi

count=$(wc -l <"$tmp/exported")
if [ "$fail" -eq 0 ]; then
    echo "$so: SONAME $soname, $count curd_* symbols exported, all declared in $header, nothing else"
fi
exit "$fail"
