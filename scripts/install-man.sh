#!/bin/sh
# Installs man/*.1 (the tools) into MANDIR/man1 and man/*.3 (the API) into
# MANDIR/man3, and for every other name in a section 3 page's NAME section
# a symbolic link NAME.3 to the page, so `man 3 NAME` finds each function
# of a family.
# usage: scripts/install-man.sh MANDIR          (install)
#        scripts/install-man.sh --uninstall MANDIR
set -eu
uninstall=0
if [ "${1:-}" = "--uninstall" ]; then
    uninstall=1
    shift
fi
mandir=${1:?usage: install-man.sh [--uninstall] MANDIR}
cd "$(dirname "$0")/.."
[ "$uninstall" -eq 1 ] || install -d "$mandir/man1" "$mandir/man3"
for page in man/*.1 man/*.3; do
    file=$(basename "$page")
    section=man${file##*.}
    if [ "$uninstall" -eq 1 ]; then
        rm -f "$mandir/$section/$file"
    else
        install -m 0644 "$page" "$mandir/$section/$file"
    fi
    [ "$section" = man3 ] || continue
    for name in $(scripts/man-names.sh "$page"); do
        [ "$name.3" != "$file" ] || continue
        rm -f "$mandir/man3/$name.3"
        [ "$uninstall" -eq 1 ] || ln -s "$file" "$mandir/man3/$name.3"
    done
done
