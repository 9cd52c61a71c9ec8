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
git archive --format=tar --prefix="$name/" HEAD -- . ':(exclude)debian' |
    gzip -n -9 >"$outdir/$name.tar.gz.tmp"
mv "$outdir/$name.tar.gz.tmp" "$outdir/$name.tar.gz"
echo "$outdir/$name.tar.gz"
