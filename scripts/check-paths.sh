#!/bin/sh
# check-paths.sh - what a move can leave stale, found before a reader does:
#
#  1. every header's include guard is its path: CURD_ and the path in
#     capitals, with '/', '.' and '-' as '_' (lib/core/fence.h guards with
#     CURD_LIB_CORE_FENCE_H); the public headers in include/ are named by
#     their file alone (include/curd.h: CURD_H, include/curd_comm.h:
#     CURD_COMM_H);
#  2. every path of the tree named in a .c or .h file, a manual page, a
#     doc/*.md, README.md or tools/curd-bench/README.md exists: a path
#     starting lib/, include/, tools/, tests/, fuzz/, scripts/, doc/, mk/,
#     man/ or examples/, or a lib/ module's file written from inside lib/
#     (core/pending.h). A path ending in no extension may name the program
#     built from path.c (tests/test-pool); a pattern (tests/test-*.c) must
#     match a file; a placeholder in <angle brackets> or {braces} is not
#     checked. Paths under build/ and $(BUILD)/ are generated and skipped
#     (only a path that starts a word is read).
#
# Prints each offence as FILE:LINE: and a sentence; exits 1 on any.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

# Paths written on purpose although no such file is, each with its reason.
#   lib/signal.h   doc/ARCHITECTURE.md says why the fence module may not be
#                  called signal: that header would shadow <signal.h>.
allowed="lib/signal.h"

bad=0
guards=0
headers=$(find include lib tools tests fuzz -name '*.h' | sort)
for header in $headers; do
    case "$header" in
        include/*) base=${header#include/}
                   want=$(printf '%s' "${base%.h}" | tr 'a-z.-' 'A-Z__')_H ;;
        *) want=CURD_$(printf '%s' "${header%.h}" | tr 'a-z/.-' 'A-Z___')_H ;;
    esac
    # The first #ifndef and the #define after it.
    got=$(awk '/^#[[:space:]]*ifndef[[:space:]]/ && !g { g = $2; next }
               g && /^#[[:space:]]*define[[:space:]]/ { print g, $2; exit }' "$header")
    guards=$((guards + 1))
    if [ "$got" != "$want $want" ]; then
        echo "check-paths: $header:1: its include guard is '${got:-none}', not $want (#ifndef $want, #define $want)"
        bad=1
    fi
done

# The files whose text names paths.
sources=$(find lib include tools tests fuzz examples -name '*.[ch]' | sort)
lib_sources=$(find lib -name '*.[ch]' | sort)
documents=$(find man -type f | sort)
documents="$documents $(find doc -maxdepth 1 -name '*.md' | sort) README.md tools/curd-bench/README.md"

exists() {
    # A pattern: one match is enough (an unmatched glob stays as written).
    case "$1" in
        *'*'* | *'?'*)
            # shellcheck disable=SC2086 # the word is a pattern to expand
            set -- $1
            [ -e "$1" ]
            return ;;
    esac
    [ -e "$1" ] || [ -e "$1.c" ]
}

# FILE:LINE:PATH for each path that starts a word: after the start of a
# line or a character that cannot be part of a path (so not build/lib/...
# or $(BUILD)/tests/...).
prefixes='lib|include|tools|tests|fuzz|scripts|doc|mk|man|examples'
layers=$(find lib -mindepth 1 -maxdepth 1 -type d -exec basename {} \; | sort | paste -s -d'|' -)
named=$( {
    # shellcheck disable=SC2086 # the lists are words
    grep -n -o -E "(^|[^A-Za-z0-9_./\$-])($prefixes)/[A-Za-z0-9_./*?<>{}-]*[A-Za-z0-9_*>}]" \
        $sources $documents /dev/null
    # A module's file named from inside lib/, the way the includes name it.
    # shellcheck disable=SC2086
    grep -n -o -E "(^|[^A-Za-z0-9_./\$-])($layers)/[A-Za-z0-9_]+\.[ch]\b" \
        $lib_sources /dev/null | sed -E 's|^([^:]*:[0-9]+:[^A-Za-z0-9_]?)|\1lib/|'
} | sed -E 's|^([^:]*:[0-9]+:)[^A-Za-z0-9_]|\1|')

checked=0
stale=$(printf '%s\n' "$named" | while IFS=: read -r file line path; do
    [ -n "$path" ] || continue
    case "$path" in *'<'* | *'{'*) continue ;; esac
    case " $allowed " in *" $path "*) continue ;; esac
    exists "$path" || echo "check-paths: $file:$line: names $path, which is not in the tree (moved? fix the text, or explain it in scripts/check-paths.sh's allow-list)"
done)
checked=$(printf '%s\n' "$named" | grep -c .)
if [ -n "$stale" ]; then
    printf '%s\n' "$stale"
    bad=1
fi

echo "check-paths: $guards include guards follow their paths; $checked paths named in sources, manual pages and doc/ checked"
[ "$bad" -eq 0 ] || echo "check-paths: FAILED (see the lines above)"
exit "$bad"
