#!/bin/sh
# Installs the Debian packages that a curd target needs when some are
# missing: as root it runs apt-get; otherwise it prints the exact apt-get
# line to run and fails. Does nothing when everything is there.
#
# usage: scripts/setup-deps.sh build|check|package...
#   build     the library and tools (make, make info)
#   check     the whole test suite (make check): GLib, Valgrind, clang with
#             libFuzzer and the sanitizer runtimes, mandoc for the manual
#             page check, gnuplot for the charts' check
#   package   dpkg-buildpackage -us -uc -b
#   release   make dist, the source package and its checks in .ci/run:
#             git, lintian, mandoc
#   plot      make bench-plot: gnuplot (without X)
set -eu

packages=""
for what in "${@:-build}"; do
    case "$what" in
    build) packages="$packages make gcc libc6-dev binutils libxxhash-dev" ;;
    check) packages="$packages make gcc libc6-dev binutils libxxhash-dev pkg-config libglib2.0-dev valgrind clang libclang-rt-dev mandoc gnuplot-nox" ;;
    package) packages="$packages build-essential debhelper dpkg-dev libxxhash-dev pkg-config libglib2.0-dev" ;;
    release) packages="$packages git lintian mandoc" ;;
    plot) packages="$packages gnuplot-nox" ;;
    *) echo "setup-deps.sh: unknown set '$what' (build, check, package, release, plot)" >&2; exit 2 ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "setup-deps.sh: not a Debian system; make sure these (Debian names) are installed:$packages" >&2
    exit 0
fi

missing=""
for package in $packages; do
    case " $missing " in *" $package "*) continue ;; esac
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null || true)
    case "$status" in
    ii*) ;;
    *) missing="$missing $package" ;;
    esac
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "Missing Debian packages. Install them as root, then run make again:" >&2
    echo "  apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
echo "setup-deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# $missing is a list of package names: split it on purpose.
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
