#!/bin/sh
# Unpacks into .gpu-deps/ (ignored by git) what the GPU machine lacks:
# Debian's libglib2.0-0, so the test programs built here run there, and
# elfutils' libdw1 and libelf1, without which that machine's Nsight
# Systems writes only a .qdstrm file (its QdstrmImporter needs
# libdw.so.1): run nsys with .gpu-deps/usr/lib/x86_64-linux-gnu on
# LD_LIBRARY_PATH, as run-remote.sh runs the tests. Never unpacks into /.
set -eu
top=$(git rev-parse --show-toplevel)
cd "$top"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$exclude"
for wanted in libglib2.0-0:libglib-2.0.so.0 libdw1:libdw.so.1 libelf1:libelf.so.1; do
    package=${wanted%%:*}
    [ -e ".gpu-deps/usr/lib/x86_64-linux-gnu/${wanted#*:}" ] && continue
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download "$package")
    dpkg -x "$tmp/${package}"_*.deb .gpu-deps
    rm -rf "$tmp"
done
