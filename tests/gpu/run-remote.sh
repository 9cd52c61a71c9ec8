#!/bin/bash
# The whole GPU check in one command, for the lent GPU machine (Ubuntu,
# NVIDIA driver, no GLib, no compilers needed). It builds nothing: run it
# from the repository root with the build outputs carried along:
#
#   here:   make all tests && tests/gpu/fetch-glib.sh && tests/gpu/pack.sh
#   there:  BUILD=build-gpu tests/gpu/run-remote.sh   (carry: build-gpu,
#           .gpu-deps; the whole build/ passes the device tool's carry limit)
#
# BUILD names the build folder (default build). Logs go to $OUT (or
# ./gpu-out) and a short summary is printed last: one line per step, the
# fault sweep's and the soak's totals, and one line per compute-sanitizer
# tool. STEPS picks the parts (default "tests sanitizers bench") and
# SANITIZERS the tools (default all four), so that
# a machine that limits each command's time can run them one by one.
#
# compute-sanitizer runs on every GPU test program: memcheck (with
# --leak-check full), initcheck and synccheck on each, racecheck on those
# that run kernels of their own (test-dispatch, test-program, test-batch,
# test-gather, the soak).
# The GPU test programs are the ones a *-fake.c twin includes (the twin
# runs the same tests on the stand-in driver), so a new one is found
# without editing this list. The sanitizers run the soak briefly
# (CURD_SOAK_SECONDS, CURD_SOAK_OPENS), the fault sweep with its transient
# failure only (CURD_SWEEP_QUICK), and skip the two tests that fault on
# purpose; each run stops after SANITIZER_TIMEOUT seconds (default 90) and
# no run starts after SANITIZER_BUDGET seconds of sanitizing (default
# 240): the summary then says how many programs a tool did not reach.
# Tools run in order of worth: memcheck, racecheck, initcheck, synccheck.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${BUILD:-build}
export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu:$PWD/$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CURD_REQUIRE_GPU=1
summary=()
steps=" ${STEPS:-tests sanitizers bench} "
wanted() { [[ $steps == *" $1 "* ]]; }

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

totals=()
if wanted tests; then
    step curd-info "$build/tools/curd-info"
    step curd-info-json "$build/tools/curd-info" --json
    mapfile -t tests < <(find "$build/tests" -maxdepth 1 -type f -name 'test-*' -perm -u+x | sort)
    step check-gpu tests/run-tests.sh --skip-is-failure "${tests[@]}"
    grep -E '^not ok|SKIP' "$out/check-gpu.log" | head -20
    # What the closing note quotes: the fault points survived, the soak's
    # totals and the thousand opens, on the GPU (the -fake twins print
    # theirs for the stand-in driver).
    mapfile -t totals < <(grep -hE '^# (fault sweep on|soak on|[0-9]+ opens and closes on)' \
        "$out/check-gpu.log" | grep -v 'curd fake CUDA device' | cut -c3-)
fi

sanitized=()
if ! wanted sanitizers; then
    :
elif command -v compute-sanitizer >/dev/null; then
    mapfile -t gpu_tests < <(sed -n 's/^#include "\(test-[a-z0-9-]*\)\.c"$/\1/p' \
        tests/test-*-fake.c | sort -u)
    # The soak's kernels are add_one's, which test-dispatch covers: under
    # racecheck its 16 threads of launches outlast any time limit.
    kernel_tests=(test-dispatch test-program test-batch test-gather)
    # They fault on purpose; the sanitizers run the rest.
    skip=(-s /dispatch/a-kernel-fault-loses-the-device-until-reopened
          -s /program/kernels/a-faulting-kernel-spoils-the-context-until-reopened)
    budget=${SANITIZER_BUDGET:-240}
    began=$SECONDS
    # sanitize TOOL PROGRAM...: one line for the tool in the summary.
    sanitize() {
        local tool=$1 errors=0 ran=0 failed=() skipped=0
        shift
        for t in "$@"; do
            [ -x "$build/tests/$t" ] || continue
            if [ $((SECONDS - began)) -ge "$budget" ]; then
                skipped=$((skipped + 1))
                continue
            fi
            local args=(--tool "$tool" --error-exitcode 9)
            case $tool in
            memcheck)
                # The program room counts a kernel's parameters by asking
                # cuFuncGetParamInfo for one past the last (an answered
                # CUDA_ERROR_INVALID_VALUE, by design), and the pool test
                # runs the device out of memory on purpose: API errors are
                # not errors in the programs that load kernels or fill the
                # device.
                local api_errors=explicit
                case $t in test-pool-gpu | test-program | test-dispatch* | test-batch | test-device | test-fault-sweep | test-soak-gpu | test-fence | test-landing)
                    api_errors=no ;;
                esac
                args+=(--leak-check full --report-api-errors "$api_errors") ;;
            *)
                # API errors are memcheck's to report.
                args+=(--report-api-errors no) ;;
            esac
            # The out-of-memory test fills the whole device: memcheck
            # covers it; the other tools would shadow all of it.
            local extra=()
            [ "$tool" != memcheck ] && [ "$t" = test-pool-gpu ] &&
                extra=(-s /pool-gpu/out-of-memory-trims-reclaims-trims-every-device-and-names-the-numbers)
            # initcheck keeps shadow memory on the device as the programs
            # allocate, so the device's free memory no longer returns to
            # where it was: the pool test that compares it runs under the
            # others (the soak's comparisons follow CURD_SOAK_SANITIZED).
            [ "$tool" = initcheck ] && [ "$t" = test-pool-gpu ] &&
                extra+=(-s /pool-gpu/failing-each-cuMemAlloc-in-turn-keeps-every-counter-exact)
            local log="$out/$tool-$t.log"
            # The soak's free-memory comparisons move with the tool's own
            # device bookkeeping (memcheck's too, for mapped pinned memory):
            # CURD_SOAK_SANITIZED leaves them to the plain run.
            CURD_SOAK_SECONDS=${SANITIZER_SOAK_SECONDS:-0.5} CURD_SOAK_OPENS=${SANITIZER_SOAK_OPENS:-50} \
                CURD_SWEEP_QUICK=1 CURD_SOAK_SANITIZED=1 \
                timeout "${SANITIZER_TIMEOUT:-90}" compute-sanitizer "${args[@]}" \
                "$build/tests/$t" "${skip[@]}" "${extra[@]}" >"$log" 2>&1
            local rc=$?
            ran=$((ran + 1))
            local found
            found=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -n 1)
            errors=$((errors + ${found:-0}))
            [ "$rc" -ne 0 ] && failed+=("$t rc=$rc")
        done
        local line="$tool: $ran programs, $errors errors"
        [ ${#failed[@]} -gt 0 ] && line+=", failed: ${failed[*]}"
        [ "$skipped" -gt 0 ] && line+=", $skipped not run (SANITIZER_BUDGET spent)"
        sanitized+=("$line")
    }
    # SANITIZERS picks the tools, so that they can run in separate calls.
    tools=" ${SANITIZERS:-memcheck racecheck initcheck synccheck} "
    [[ $tools == *" memcheck "* ]] && sanitize memcheck "${gpu_tests[@]}"
    [[ $tools == *" racecheck "* ]] && sanitize racecheck "${kernel_tests[@]}"
    [[ $tools == *" initcheck "* ]] && sanitize initcheck "${gpu_tests[@]}"
    [[ $tools == *" synccheck "* ]] && sanitize synccheck "${gpu_tests[@]}"
    sanitized+=("sanitizers took $((SECONDS - began)) s")
else
    sanitized+=("compute-sanitizer not found: no sanitizer ran")
fi

if wanted bench && [ -x "$build/tools/curd-bench" ]; then
    # shellcheck disable=SC2086
    step curd-bench "$build/tools/curd-bench" --json="$out/bench.json" ${CURD_BENCH_ARGS:-}
    cat "$out/curd-bench.log"
fi

# What comes back from the machine is a few files: the logs travel as one
# archive beside the test log, the benchmark table and its JSON.
tar -czf "$out.logs.tar.gz" -C "$out" --exclude logs.tar.gz . && mv "$out.logs.tar.gz" "$out/logs.tar.gz"
find "$out" -maxdepth 1 -name '*.log' ! -name check-gpu.log ! -name curd-bench.log -delete

echo "==== summary ($(head -n 1 "$out/gpu.txt"))"
printf '%s\n' "${summary[@]}" "${totals[@]}" "${sanitized[@]}"
