#!/bin/sh
# Unpacks Debian's libglib2.0-0 into .gpu-deps/ (ignored by git) so the test
# programs built here run on the GPU machine, which has no GLib. Never
# unpacks into /.
set -eu
top=$(git rev-parse --show-toplevel)
cd "$top"
[ -e .gpu-deps/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0 ] && exit 0
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$exclude"
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libglib2.0-0)
dpkg -x "$tmp"/libglib2.0-0_*.deb .gpu-deps
rm -rf "$tmp"
