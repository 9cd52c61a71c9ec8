#!/bin/sh
# Checks the manual pages:
#   - every function declared CURD_API in the public headers
#     (include/curd.h and include/curd_comm.h, which it includes) is named
#     in the NAME section of a page in man/ (a page of its own, or a family
#     page that installs a link for it);
#   - every .Xr reference to a curd page in section 3 names a documented
#     function;
#   - every page in man/ is reachable from man/curd.3 (the overview)
#     through .Xr references;
#   - mandoc -Tlint finds no error or warning in man/*.3 and man/*.1 (the
#     tools' pages);
#   - groff (what man-db renders with) titles no page "BSD ..." and ends
#     it with curd's version (.Os curd X.Y.Z, or .TH's fourth field).
# usage: scripts/check-manpages.sh [HEADER...] (the first holds the version)
set -eu
[ $# -gt 0 ] || set -- include/curd.h include/curd_comm.h
header=$*
version_header=$1
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

scripts/curd-api-names.sh "$@" >"$tmp/declared"
for page in man/*.3; do scripts/man-names.sh "$page"; done | LC_ALL=C sort -u >"$tmp/documented"
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/documented")
if [ -n "$missing" ]; then
    echo "declared CURD_API in $header but named in no man/*.3 page:"
    echo "$missing" | sed 's/^/  /'
    echo "  (write man/NAME.3, or add .Nm NAME to a family page's NAME section)"
    fail=1
fi

sed -n 's/^\.Xr \(curd[A-Za-z0-9_]*\) 3.*/\1/p' man/*.3 | LC_ALL=C sort -u >"$tmp/referenced"
dangling=$(LC_ALL=C comm -23 "$tmp/referenced" "$tmp/documented")
if [ -n "$dangling" ]; then
    echo "referenced with .Xr NAME 3 but documented nowhere:"
    echo "$dangling" | sed 's/^/  /'
    fail=1
fi

# Every page is reachable from curd(3), the overview, through .Xr
# references (man curd, then its SEE ALSO or function index, and on).
reached=curd.3
while :; do
    next=$(for page in $reached; do
               sed -n 's/^\.Xr \(curd[A-Za-z0-9_-]*\) \([13]\).*/\1.\2/p' "man/$page"
           done | while read -r target; do
               [ -f "man/$target" ] && echo "$target"
           done; echo "$reached" | tr ' ' '\n')
    next=$(echo "$next" | LC_ALL=C sort -u | tr '\n' ' ' | sed 's/ *$//')
    [ "$next" = "$reached" ] && break
    reached=$next
done
echo "$reached" | tr ' ' '\n' | LC_ALL=C sort -u >"$tmp/reached"
(cd man && ls *.3 *.1) | LC_ALL=C sort -u >"$tmp/pages"
unreached=$(LC_ALL=C comm -23 "$tmp/pages" "$tmp/reached")
if [ -n "$unreached" ]; then
    echo "pages that no chain of .Xr references from man/curd.3 reaches:"
    echo "$unreached" | sed 's/^/  /'
    echo "  (name each in curd(3)'s function index or SEE ALSO)"
    fail=1
fi

# Errors and warnings only: mandoc's style notes include "referenced manual
# not found" for pages that are not installed yet, which the check above
# covers.
if ! command -v mandoc >/dev/null 2>&1; then
    echo "mandoc is missing (apt-get install mandoc)"
    fail=1
elif ! mandoc -Tlint -W warning man/*.3 man/*.1; then
    fail=1
fi

version=$(sed -n 's/^#define CURD_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$version_header" | paste -sd.)
if command -v groff >/dev/null 2>&1; then
    for page in man/*.3 man/*.1; do
        groff -mandoc -Tutf8 -P-c "$page" 2>/dev/null >"$tmp/page" || true
        if head -n 1 "$tmp/page" | grep -q BSD; then
            echo "$page: groff titles it '$(head -n 1 "$tmp/page" | sed 's/  */ /g')'"
            fail=1
        fi
        if ! tail -n 1 "$tmp/page" | grep -q "curd $version"; then
            echo "$page: its footer does not name curd $version: '$(tail -n 1 "$tmp/page" | sed 's/  */ /g')'"
            fail=1
        fi
    done
fi

if [ "$fail" -eq 0 ]; then
    echo "man/: $(ls man/*.3 | wc -l) pages document all $(wc -l <"$tmp/declared") functions of $header, each reachable from curd(3); mandoc -Tlint is clean"
fi
exit "$fail"
