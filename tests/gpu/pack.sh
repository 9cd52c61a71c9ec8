#!/bin/sh
# Packs what the GPU machine needs of a build into build-gpu/, small enough
# to carry (the device tool carries at most 64 MiB): the library, the tools,
# the GPU test programs with their debug sections stripped and the example
# programs (built here: make example-programs); no objects, no dependency
# files, no stand-in-driver twins (they run here, in make check), but the
# stand-in itself, which some CPU-side tests load. Then, there:
# BUILD=build-gpu tests/gpu/run-remote.sh
#
# usage: tests/gpu/pack.sh [BUILD]   (default build)
set -eu
build=${1:-build}
out="build-gpu"
make --no-print-directory -s SETUP=true BUILD="$build" example-programs \
    "$build/tests/gpu-tests.txt"
rm -rf "$out"
mkdir -p "$out/tests" "$out/examples"
cp -a "$build/examples/bin" "$out/examples/"
cp -a "$build"/libcurd.so* "$build/tools" "$out/"
find "$build/tests" -maxdepth 1 -type f -name 'test-*' -perm -u+x ! -name '*-fake' \
    -exec cp {} "$out/tests/" \;
# The CPU-side tests among them (test-driver, ...) load the stand-in;
# test-nvtx loads the stand-in profiler tool (tests/fake/nvtx-recorder.c).
cp "$build/tests/libcuda-fake.so.1" "$build/tests/libnvtx-recorder.so" "$out/tests/"
# Which of them need a GPU (the Makefile's GPU_TESTS): run-remote.sh's
# sanitizer runs take those.
cp "$build/tests/gpu-tests.txt" "$out/tests/"
find "$out" -name '*.o' -delete
find "$out" -name '*.d' -delete
strip --strip-debug "$out"/tests/test-*
du -sh "$out"
