#!/bin/sh
# Prints the name of every function declared CURD_API in a header
# (default include/curd.h), one a line, sorted: the public API as the
# checks of exports (check-exports.sh) and manual pages
# (check-manpages.sh) see it.
# usage: scripts/curd-api-names.sh [HEADER]
set -eu
# A declaration may wrap after CURD_API; join lines until its '('.
awk '/^CURD_API/ { decl = $0; while (decl !~ /\(/ && (getline line) > 0) decl = decl " " line;
                   sub(/\(.*/, "", decl); n = split(decl, w, /[^A-Za-z0-9_]+/);
                   while (n > 0 && w[n] == "") n--; print w[n] }' "${1:-include/curd.h}" | LC_ALL=C sort -u
