#!/bin/sh
# Builds the Debian source package the way a distribution does: the release
# tarball (scripts/make-dist.sh) becomes curd_VERSION.orig.tar.gz, debian/
# of the last commit is unpacked over it, and dpkg-source -b makes the
# 3.0 (quilt) package: curd_VERSION-REVISION.dsc and .debian.tar.xz.
#
# usage: scripts/build-source-package.sh VERSION OUTDIR
set -eu
version=${1:?usage: build-source-package.sh VERSION OUTDIR}
outdir=${2:?usage: build-source-package.sh VERSION OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$outdir"
tarball=$(scripts/make-dist.sh "$version" "$outdir")
mv "$tarball" "$outdir/curd_$version.orig.tar.gz"
rm -rf "$outdir/curd-$version"
tar -C "$outdir" -xzf "$outdir/curd_$version.orig.tar.gz"
git archive --format=tar HEAD debian | tar -C "$outdir/curd-$version" -xf -
(cd "$outdir" && dpkg-source -b "curd-$version")
ls "$outdir"/curd_"$version"*
