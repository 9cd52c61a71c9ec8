#!/bin/sh
# Writes the release tarball curd-VERSION.tar.gz of the last commit into
# OUTDIR, reproducibly: git archive gives sorted entries, owner and group 0
# (root), and every mtime set to the commit's time; gzip -n leaves the name
# and time out of the gzip header. The same commit gives the same bytes.
#
# The Debian packaging (debian/) is not part of the upstream release: the
# source package adds it (scripts/build-source-package.sh).
#
# usage: scripts/make-dist.sh VERSION [OUTDIR]   (OUTDIR defaults to build)
set -eu
version=${1:?usage: make-dist.sh VERSION [OUTDIR]}
outdir=${2:-build}
name=curd-$version
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "make-dist.sh: uncommitted changes are not in $name.tar.gz (it is the last commit)" >&2
fi
mkdir -p "$outdir"
# tar.umask: no file of the tarball group- or world-writable, whatever the
# umask of the machine that makes it (git's default keeps group write).
git -c tar.umask=0022 archive --format=tar --prefix="$name/" HEAD -- . ':(exclude)debian' |
    gzip -n -9 >"$outdir/$name.tar.gz.tmp"
writable=$(tar -tvzf "$outdir/$name.tar.gz.tmp" | awk 'substr($1, 6, 1) == "w" || substr($1, 9, 1) == "w"' | head -n 3)
if [ -n "$writable" ]; then
    echo "make-dist.sh: group- or world-writable entries in $name.tar.gz:" >&2
    echo "$writable" >&2
    rm -f "$outdir/$name.tar.gz.tmp"
    exit 1
fi
mv "$outdir/$name.tar.gz.tmp" "$outdir/$name.tar.gz"
echo "$outdir/$name.tar.gz"
