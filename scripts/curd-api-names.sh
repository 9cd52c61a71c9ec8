#!/bin/sh
# Prints the name of every function declared CURD_API in the headers
# given (default: the public headers, include/curd.h and the
# include/curd_comm.h it includes), one a line, sorted: the public API as
# the checks of exports (check-exports.sh) and manual pages
# (check-manpages.sh) see it.
# usage: scripts/curd-api-names.sh [HEADER...]
set -eu
[ $# -gt 0 ] || set -- include/curd.h include/curd_comm.h
# A declaration may wrap after CURD_API; join lines until its '('.
awk '/^CURD_API/ { decl = $0; while (decl !~ /\(/ && (getline line) > 0) decl = decl " " line;
                   sub(/\(.*/, "", decl); n = split(decl, w, /[^A-Za-z0-9_]+/);
                   while (n > 0 && w[n] == "") n--; print w[n] }' "$@" | LC_ALL=C sort -u
