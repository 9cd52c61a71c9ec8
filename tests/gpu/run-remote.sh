#!/bin/bash
# The whole GPU check in one command, for the lent GPU machine (Ubuntu,
# NVIDIA driver, no GLib, no compilers needed). It builds nothing: run it
# from the repository root with the build outputs carried along:
#
#   here:   make all tests && tests/gpu/fetch-glib.sh
#   there:  tests/gpu/run-remote.sh            (carry: build, .gpu-deps)
#
# BUILD names another build folder (default build).
# Logs go to $OUT (or ./gpu-out) and a short summary is printed last.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${BUILD:-build}
export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu:$PWD/$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CURD_REQUIRE_GPU=1
summary=()

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
    | tee "$out/gpu.txt"

step() { # step NAME COMMAND... : runs, logs to $out/NAME.log, records rc
    local name=$1
    shift
    local start=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - start)) \
        "$(tail -n 1 "$out/$name.log" | cut -c1-100)")")
    return $rc
}

step curd-info "$build/tools/curd-info"
step curd-info-json "$build/tools/curd-info" --json
mapfile -t tests < <(find "$build/tests" -maxdepth 1 -type f -name 'test-*' -perm -u+x | sort)
step check-gpu tests/run-tests.sh --skip-is-failure "${tests[@]}"
grep -E '^not ok|SKIP' "$out/check-gpu.log" | head -20

if command -v compute-sanitizer >/dev/null; then
    for t in test-transfer-gpu test-gather test-resident-gpu test-pool-gpu test-program \
             test-dispatch test-dispatch-telemetry test-session test-batch; do
        [ -x "$build/tests/$t" ] || continue
        # The pool test runs the device out of memory on purpose: the driver's
        # out-of-memory answers it provokes are not errors there.
        # The program room counts a kernel's parameters by asking
        # cuFuncGetParamInfo for one past the last, which answers
        # CUDA_ERROR_INVALID_VALUE by design.
        api_errors=explicit
        case $t in test-pool-gpu | test-program | test-dispatch*) api_errors=no ;; esac
        # The fault test faults on purpose; the sanitizers run the rest.
        skip=(-s /dispatch/a-kernel-fault-loses-the-device-until-reopened
              -s /program/kernels/a-faulting-kernel-spoils-the-context-until-reopened)
        step "memcheck-$t" compute-sanitizer --tool memcheck --leak-check full --report-api-errors "$api_errors" \
            --error-exitcode 9 "$build/tests/$t" "${skip[@]}"
    done
    # test-gather: the transfer engine's own gather and scatter kernels.
    for t in test-program test-dispatch test-gather; do
        for tool in racecheck initcheck synccheck; do
            step "$tool-$t" compute-sanitizer --tool "$tool" --error-exitcode 9 \
                "$build/tests/$t" "${skip[@]}"
        done
    done
fi

if [ -x "$build/tools/curd-bench" ]; then
    # shellcheck disable=SC2086
    step curd-bench "$build/tools/curd-bench" --json="$out/bench.json" ${CURD_BENCH_ARGS:-}
    cat "$out/curd-bench.log"
fi

# What comes back from the machine is a few files: the logs travel as one
# archive beside the test log, the benchmark table and its JSON.
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz .
find "$out" -maxdepth 1 -name '*.log' ! -name check-gpu.log ! -name curd-bench.log -delete

echo "==== summary ($(head -n 1 "$out/gpu.txt"))"
printf '%s\n' "${summary[@]}"
