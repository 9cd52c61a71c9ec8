#!/bin/sh
# Checks tests/gpu/run-remote.sh's accounting without a GPU: the stand-in
# driver plays one GPU, then two (FAKE_CUDA_DEVICES), and
# tests/fake/bin/compute-sanitizer and nvidia-smi stand in for NVIDIA's on
# PATH. A few real GPU test programs run, two of them with tests that
# fault on purpose (the stand-in sanitizer reports those, so they must be
# left out), one with tests that need two GPUs, and a test program that
# fails. The checks:
#   - on one GPU, a clean tree, one program in two shards: each tool
#     reaches each program and shard with 0 errors, the shards run each
#     of that program's tests once (less those that fault on purpose), the tests that need 2 GPUs and
#     curd-allreduce are "needs 2 GPUs (not run)", and the verdict is
#     PASS with nothing failed;
#   - on two GPUs, PART=2, an error planted in one test under memcheck
#     and a failing test program: the verdict is FAIL and names both,
#     with the error's program and test, and only PART=3's tools are
#     left "not run";
#   - a DEADLINE too short for any sanitizer run: each program is named
#     as not reached, none counted as clean.
#
# usage: scripts/check-run-remote.sh [BUILD]   (default build; make
#        check-run-remote builds what it needs first)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A build folder of links to the real one, plus a test program that fails.
fake_build=$scratch/build
mkdir -p "$fake_build/tests" "$fake_build/examples"
ln -s "$build/tools" "$fake_build/tools"
ln -s "$build/examples/bin" "$fake_build/examples/bin"
for f in "$build"/libcurd.so*; do ln -s "$f" "$fake_build/"; done
programs="test-copy test-dispatch test-program"
for t in $programs libcuda-fake.so.1 libnccl-fake.so.2 gpu-tests.txt; do
    ln -s "$build/tests/$t" "$fake_build/tests/$t"
done
cat >"$fake_build/tests/test-broken" <<'TAP'
#!/bin/sh
echo "1..2"
echo "ok 1 /broken/runs"
echo "not ok 2 /broken/fails"
exit 1
TAP
chmod +x "$fake_build/tests/test-broken"

PATH=$top/tests/fake/bin:$PATH
CURD_LIBCUDA=$build/tests/libcuda-fake.so.1
CURD_LIBNCCL=$build/tests/libnccl-fake.so.2
FAKE_CUDA_MEMORY=268435456
export PATH CURD_LIBCUDA CURD_LIBNCCL FAKE_CUDA_MEMORY

bad=0
# expect RUN TEXT...: RUN's output has a line holding each TEXT (fixed).
expect() {
    run=$1
    shift
    for text in "$@"; do
        grep -q -F -- "$text" "$scratch/$run.out" && continue
        echo "check-run-remote: run '$run' has no line with '$text'"
        bad=1
    done
}
# verdict RUN PATTERN: RUN's last line matches the extended regex.
verdict() {
    tail -n 1 "$scratch/$1.out" | grep -q -E -- "$2" && return 0
    echo "check-run-remote: run '$1' ends with:"
    tail -n 1 "$scratch/$1.out"
    echo "  which does not match: $2"
    bad=1
}
remote() { # remote NAME VAR=value...: runs run-remote.sh from the top
    name=$1
    shift
    rc=0
    (cd "$top" && env OUT="$scratch/out-$name" BUILD="$fake_build" "$@" \
        tests/gpu/run-remote.sh) >"$scratch/$name.out" 2>&1 || rc=$?
    echo "$rc" >"$scratch/$name.rc"
}

remote one-gpu FAKE_CUDA_DEVICES=1 STEPS="tests examples sanitizers" PROGRAMS="$programs" \
    SANITIZER_SHARDED=test-dispatch SANITIZER_SHARDS=2 \
    FAKE_SANITIZER_NOTE_IN=/dispatch/borrowed-add-one-writes-every-element
for tool in memcheck racecheck initcheck synccheck; do
    expect one-gpu "$tool: 4 of 4 programs reached, 0 errors"
done
expect one-gpu "  test-dispatch.1of2 " "  test-dispatch.2of2 "
# The tools' own "Error in printing record" is listed apart, not as an error.
expect one-gpu "sanitizer messages that are not errors (tool program test: line):"
if ! grep -q -E "^  memcheck test-dispatch\.[12]of2 /dispatch/borrowed-add-one-writes-every-element Error in printing record$" \
    "$scratch/one-gpu.out"; then
    echo "check-run-remote: the tool's own message is not listed with its test"
    bad=1
fi
if grep -q "^sanitizer errors" "$scratch/one-gpu.out"; then
    echo "check-run-remote: a clean run lists sanitizer errors"
    bad=1
fi
mkdir "$scratch/one-gpu-logs"
tar -xzf "$scratch/out-one-gpu/logs.tar.gz" -C "$scratch/one-gpu-logs"
"$build/tests/test-dispatch" -l | grep '^/' | grep -v /deliberate-fault/ | sort >"$scratch/dispatch-all"
cat "$scratch"/one-gpu-logs/memcheck-test-dispatch.?of2.log |
    sed -n 's/^ok [0-9]* \(\/[^ ]*\).*/\1/p' | sort >"$scratch/dispatch-shards"
cmp -s "$scratch/dispatch-all" "$scratch/dispatch-shards" || {
    echo "check-run-remote: the two shards of test-dispatch did not run each of its tests once:"
    diff "$scratch/dispatch-all" "$scratch/dispatch-shards" | head
    bad=1
}
expect one-gpu "0 failed, 0 skipped, " "need 2 GPUs (not run)"
verdict one-gpu '^verdict: PASS on 1 x .*\| failed: nothing \| not run here: needs 2 GPUs \(not run\): [0-9]+ tests, 1 example$'
[ "$(cat "$scratch/one-gpu.rc")" = 0 ] || { echo "check-run-remote: a clean run exits $(cat "$scratch/one-gpu.rc")"; bad=1; }

remote two-gpus FAKE_CUDA_DEVICES=2 PART=2 JOBS=3 STEPS="tests examples sanitizers" PROGRAMS="$programs test-broken" \
    FAKE_SANITIZER_ERROR_IN=/copy-gpu/one-device/one-copy-moves-every-byte FAKE_SANITIZER_TOOL=memcheck
expect two-gpus "memcheck: 3 of 3 programs reached, 1 error" \
    "memcheck test-copy /copy-gpu/one-device/one-copy-moves-every-byte Invalid __global__ read"
verdict two-gpus '^verdict: FAIL on 2 x .*\| failed: 1 test \(test-broken /broken/fails; see check-gpu.log\); memcheck 1 error \(test-copy /copy-gpu/one-device/one-copy-moves-every-byte\) \| not run here: racecheck \(PART=3\); initcheck \(PART=3\)$'
[ "$(cat "$scratch/two-gpus.rc")" != 0 ] || { echo "check-run-remote: a failing run exits 0"; bad=1; }

remote deadline STEPS=sanitizers SANITIZERS=memcheck DEADLINE=20 PROGRAMS="$programs"
expect deadline "memcheck: 0 of 3 programs reached, 0 errors; not reached (DEADLINE): test-copy test-dispatch test-program"
verdict deadline "not run here: memcheck on test-copy test-dispatch test-program \(DEADLINE; "

if [ "$bad" -ne 0 ]; then
    for run in one-gpu two-gpus deadline; do
        echo "---- $run (exit $(cat "$scratch/$run.rc")):"
        tail -n 25 "$scratch/$run.out"
    done
    exit 1
fi
echo "check-run-remote: run-remote.sh's summary counts clean runs, planted errors with their tests, failures, tests that need 2 GPUs and runs left out by its deadline"
