#!/bin/bash
# The whole GPU check, for a GPU machine (Ubuntu, NVIDIA driver, no GLib,
# no compilers needed). It builds nothing: run it from the repository root
# with the build outputs carried along:
#
#   here:   make all tests && tests/gpu/fetch-glib.sh && tests/gpu/pack.sh
#   there:  BUILD=build-gpu tests/gpu/run-remote.sh   (carry: build-gpu,
#           .gpu-deps; the whole build/ passes the device tool's carry limit)
#
# It runs, on as many GPUs as the machine has:
#   tests       curd-info, then every test program (tests/run-tests.sh
#               --skip-is-failure), test-comm-procs' two processes included;
#               a test that needs more GPUs than the machine has is counted
#               as "need N GPUs (not run)", never as a failure
#   examples    each example program (pack.sh builds them): exit 0 passes,
#               exit 3 saying "needs N GPUs" on a machine with fewer is not
#               run, anything else fails
#   sanitizers  compute-sanitizer's memcheck (--leak-check full),
#               racecheck, initcheck and synccheck on every GPU test program
#               (the Makefile's GPU_TESTS, which make tests writes to
#               $BUILD/tests/gpu-tests.txt, so no list here falls behind)
#   bench       curd-bench, its table and JSON
# and ends with a summary whose last line is the verdict: PASS or FAIL,
# what passed, what failed (each sanitizer error with its program and
# test), and what could not run here and why.
#
# The sanitizer runs are clean by construction:
#   - a test that faults on purpose carries /deliberate-fault/ in its path
#     (CURD_TEST_DELIBERATE_FAULT, tests/support/curd-test.h); each
#     program's list (-l) names them and they are left out (-s), so no
#     list here falls behind;
#   - --report-api-errors no: curd checks every driver result it gets and
#     turns it into a typed status that the tests assert on, so a CUDA API
#     error the tests did not expect already fails a test, while the ones
#     provoked on purpose (cuFuncGetParamInfo asked one past the last
#     parameter, PTX that must not compile, a link that must fail, device
#     memory run out, NCCL's own cudaFuncGetAttributes query) are not
#     errors;
#   - the fault sweep runs its quick form (CURD_SWEEP_QUICK=1; under
#     racecheck and initcheck every 4th call only, CURD_SWEEP_STRIDE),
#     the soak briefly (CURD_SOAK_SECONDS, CURD_SOAK_OPENS) with its
#     free-memory comparisons left to the plain run (CURD_SOAK_SANITIZED=1);
#   - the pool test that fills the device runs under memcheck only, and
#     the one that compares free memory not under initcheck (whose shadow
#     memory moves it).
# Each error a tool prints is reported with its program and the test that
# was running (the next TAP result after it; "at exit" for leaks).
#
# Variables:
#   PART        1, 2 or 3, for a machine that stops each command at 10
#               minutes (the device tool): PART=1 runs the tests and the
#               examples (5 to 6 minutes on one H200), PART=2 memcheck and
#               synccheck on every GPU test program, PART=3 racecheck and
#               initcheck, JOBS runs at a time (the four tools in one
#               call did not reach every program in 10 minutes on one
#               H200); the three cover all but the bench. Unset: every
#               step.
#   JOBS        test groups at a time (default 4), and sanitizer runs at
#               a time (default: a run for each 2 CPU cores); the programs
#               that fill the device or compare its free memory run alone
#               after the others
#   SANITIZER_SHARDED, SANITIZER_SHARDS  the programs run under each tool
#               as SHARDS runs of a part of their tests each, side by side
#               (default: test-fault-sweep in 4; under memcheck its
#               quick form took 240 s for 68 of its 89 tests)
#   STEPS       the steps, overriding PART's ("tests examples sanitizers
#               bench")
#   SANITIZERS  the tools, overriding PART's
#   PROGRAMS    test program names to run (default: all there are)
#   DEADLINE    seconds after its start by which the script is done
#               (default 560; 0 for none): no run starts that cannot end
#               by then, and the summary names what was left out
#   SANITIZER_TIMEOUT  seconds one sanitizer run may take (default 240)
#   BUILD       the build folder (default build); OUT the folder for logs
#               (default ./gpu-out)
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${BUILD:-build}
export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu:$PWD/$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CURD_REQUIRE_GPU=1
# NVLink multicast stays off: a program that uses it can put a shared
# host's GPUs out of service.
export NCCL_NVLS_ENABLE=0

case ${PART:-} in
"") default_steps="tests examples sanitizers bench"
    default_tools="memcheck racecheck initcheck synccheck" ;;
1) default_steps="tests examples" default_tools="" ;;
2) default_steps="sanitizers" default_tools="memcheck synccheck" ;;
3) default_steps="sanitizers" default_tools="racecheck initcheck" ;;
*) echo "run-remote.sh: PART is 1, 2 or 3, not '$PART'" >&2; exit 2 ;;
esac
steps=" ${STEPS:-$default_steps} "
tools=${SANITIZERS:-$default_tools}
wanted() { [[ $steps == *" $1 "* ]]; }
plural() { if [ "$1" -eq 1 ]; then echo "$1 $2"; else echo "$1 ${2}s"; fi; }
deadline=${DEADLINE:-560}
# Seconds left before the deadline (a large number where there is none).
left() {
    if [ "$deadline" -eq 0 ]; then echo 1000000; else echo $((deadline - SECONDS)); fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
    >"$out/gpu.txt"
cat "$out/gpu.txt"
gpus=$(grep -c . "$out/gpu.txt")
gpu_name=$(head -n 1 "$out/gpu.txt" | cut -d, -f1)

# The test programs: every one there is, or those PROGRAMS names.
programs=()
if [ -n "${PROGRAMS:-}" ]; then
    for t in $PROGRAMS; do programs+=("$build/tests/$t"); done
else
    mapfile -t programs < <(find "$build/tests" -maxdepth 1 -type f -name 'test-*' \
        ! -name '*-fake' -perm -u+x | sort)
fi
chosen() { # chosen NAME: whether the run takes test program NAME (or
    # NAME.KofN, a shard of it under the sanitizers)
    local p name=${1%.[0-9]*of[0-9]*}
    for p in "${programs[@]}"; do [ "$(basename "$p")" = "$name" ] && return 0; done
    return 1
}

summary=() # one line per step
passed=()  # the verdict's parts
failed=()
not_run=()
# GPUs needed, by what: "N thing" lines, counted at the end.
needs_file=$out/needs.txt
: >"$needs_file"

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

# The programs that fill the device, compare its free memory (the soak's
# plain run does) or count its contexts: they run alone, after the others.
alone=" test-pool-gpu test-resident-gpu test-device test-soak-gpu "
jobs_max=${JOBS:-4}
[ "$jobs_max" -ge 1 ] || jobs_max=1
sanitizer_jobs=${JOBS:-$(($(nproc) / 2))}
[ "$sanitizer_jobs" -ge 1 ] || sanitizer_jobs=1

# The test programs, JOBS run-tests.sh at a time (the fault sweep, the
# longest, in a group of its own), then the ones that run alone; one log,
# the groups' logs one after the other, ending with their summed line.
run_tests_in_groups() {
    local groups=() t i=0 rc=0 g
    for t in "${programs[@]}"; do
        [[ $alone == *" $(basename "$t") "* ]] && continue
        if [ "$(basename "$t")" = test-fault-sweep ] && [ "$jobs_max" -gt 1 ]; then
            groups[jobs_max - 1]+=" $t"
            continue
        fi
        g=$((i % (jobs_max > 1 ? jobs_max - 1 : 1)))
        groups[g]+=" $t"
        i=$((i + 1))
    done
    local pids=()
    for g in "${!groups[@]}"; do
        # shellcheck disable=SC2086
        timeout "$(left)" tests/run-tests.sh --skip-is-failure ${groups[g]} \
            >"$out/.tests.$g.log" 2>&1 &
        pids+=($!)
    done
    for g in "${pids[@]}"; do wait "$g" || rc=1; done
    local lone=()
    for t in "${programs[@]}"; do
        [[ $alone == *" $(basename "$t") "* ]] && lone+=("$t")
    done
    if [ ${#lone[@]} -gt 0 ]; then
        timeout "$(left)" tests/run-tests.sh --skip-is-failure "${lone[@]}" \
            >"$out/.tests.alone.log" 2>&1 || rc=1
    fi
    local logs=("$out"/.tests.*.log) sums=() last
    # Each group's last line: "P passed, F failed, S skipped[, K need G
    # GPUs (not run)]..."; their sum is the run's. A group stopped before
    # it (by the DEADLINE) is a failure, named.
    for g in "${logs[@]}"; do
        last=$(tail -n 1 "$g")
        if [[ $last =~ ^[0-9]+\ passed,\ [0-9]+\ failed,\ [0-9]+\ skipped ]]; then
            sed '$d' "$g"
            sums+=("$last")
        else
            cat "$g"
            echo "not ok - the group ended before its summary (stopped at the DEADLINE?)"
            sums+=("0 passed, 1 failed, 0 skipped")
        fi
    done
    printf '%s\n' "${sums[@]}" | awk '
        { p += $1; f += $3; s += $5
          for (i = 7; i <= NF; i++) if ($(i + 1) == "need") n[$(i + 2)] += $i }
        END {
            line = p " passed, " f " failed, " s " skipped"
            for (g in n) line = line ", " n[g] " need " g " GPUs (not run)"
            print line
            exit f != 0
        }' || rc=1
    rm -f "${logs[@]}"
    return $rc
}

totals=()
if wanted tests; then
    step curd-info "$build/tools/curd-info" || failed+=("curd-info")
    step curd-info-json "$build/tools/curd-info" --json || failed+=("curd-info --json")
    if [ "$(left)" -gt 30 ]; then
        step check-gpu run_tests_in_groups
        rc=$?
        last=$(tail -n 1 "$out/check-gpu.log")
        grep -E '^not ok|# SKIP' "$out/check-gpu.log" | grep -v '# SKIP needs [0-9]* GPUs' | head -20
        if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped(.*)$ ]]; then
            passed+=("${BASH_REMATCH[1]} tests")
            if [ "${BASH_REMATCH[2]}" -ne 0 ] || [ "$rc" -ne 0 ]; then
                # The programs with a failure (or a skip, which counts as
                # one here), each with its first.
                failed+=("$(plural "${BASH_REMATCH[2]}" test) ($(awk '
                    /^# \[[0-9]+\/[0-9]+\] / { program = $3 }
                    /^not ok / && !(program in seen) { seen[program] = 1; printf "%s%s %s", sep, program, $4; sep = ", " }
                    /^ok .*# SKIP / && !/# SKIP needs [0-9]+ GPUs; this host has/ && !(program in seen) {
                        seen[program] = 1; printf "%s%s %s (skipped)", sep, program, $3; sep = ", " }
                    /^# programs that exited abnormally:/ { sub(/^# programs that exited abnormally: */, ""); printf "%s%s", sep, $0 }
                    ' "$out/check-gpu.log"); see check-gpu.log)")
            fi
            # "K need N GPUs (not run)", once for each N.
            grep -o '[0-9]* need [0-9]* GPUs (not run)' <<<"${BASH_REMATCH[4]}" |
                awk '{ print $3, $1, "test" }' >>"$needs_file"
        else
            failed+=("the test run (rc=$rc, ended with: $last)")
        fi
        # What the closing note quotes: the fault points survived, the
        # soak's totals and the thousand opens, on the GPU (the -fake twins
        # print theirs for the stand-in driver).
        mapfile -t totals < <(grep -hE '^# (fault sweep on|soak on|[0-9]+ opens and closes on)' \
            "$out/check-gpu.log" | grep -v 'curd fake CUDA device' | cut -c3-)
    else
        not_run+=("the tests (DEADLINE)")
    fi
fi

if wanted examples; then
    # pack.sh puts them in $build/examples/bin (make example-programs).
    ex_pass=0 ex_fail=() ex_needs=0
    {
        for e in "$build"/examples/bin/*; do
            [ -x "$e" ] || continue
            name=$(basename "$e")
            rc=0
            timeout 120 "$e" >"$out/example-$name.out" 2>&1 || rc=$?
            need=$(sed -n 's/.*needs \([0-9][0-9]*\) GPUs.*/\1/p' "$out/example-$name.out" | head -n 1)
            if [ "$rc" -eq 0 ]; then
                ex_pass=$((ex_pass + 1))
                echo "ok   $name"
            elif [ "$rc" -eq 3 ] && [ -n "$need" ] && [ "$gpus" -lt "$need" ]; then
                ex_needs=$((ex_needs + 1))
                echo "$need 1 example" >>"$needs_file"
                echo "not run: $name needs $need GPUs, this machine has $gpus"
            else
                ex_fail+=("$name rc=$rc")
                echo "FAIL $name (exit $rc):"
                sed 's/^/     /' "$out/example-$name.out"
            fi
        done
        echo "examples: $ex_pass passed, ${#ex_fail[@]} failed, $ex_needs not run"
    } >"$out/examples.log" 2>&1
    summary+=("$(printf '%-22s %s' examples "$(tail -n 1 "$out/examples.log")")")
    if [ $((ex_pass + ${#ex_fail[@]} + ex_needs)) -eq 0 ]; then
        failed+=("examples (none in $build/examples/bin: run tests/gpu/pack.sh)")
    fi
    [ "$ex_pass" -gt 0 ] && passed+=("$ex_pass examples")
    [ ${#ex_fail[@]} -gt 0 ] && failed+=("examples: ${ex_fail[*]}")
fi

sanitized=()
if ! wanted sanitizers; then
    [ "${PART:-}" = 1 ] &&
        not_run+=("the sanitizers (PART=2 and PART=3)")
elif ! command -v compute-sanitizer >/dev/null; then
    not_run+=("sanitizers (compute-sanitizer not found)")
else
    # The long ones first (the fault sweep, the soak: racecheck once ran
    # the soak's 16 threads of launches past any limit), so that the
    # short ones run beside them; only the order depends on these names.
    mapfile -t listed < <(sort -u "$build/tests/gpu-tests.txt" |
        awk '/^test-(fault-sweep|soak-gpu)$/ { print; next } { rest[++n] = $0 } END { for (i = 1; i <= n; i++) print rest[i] }')
    # A sharded program is SHARDS runs under each tool, NAME.KofN, each
    # the Kth of every N of its tests (never more shards than tests).
    sharded=" ${SANITIZER_SHARDED-test-fault-sweep} "
    gpu_tests=()
    for t in "${listed[@]}"; do
        if [[ $sharded == *" $t "* ]] && [ -x "$build/tests/$t" ]; then
            shards=${SANITIZER_SHARDS:-4}
            count=$("$build/tests/$t" -l 2>/dev/null | grep -c '^/')
            [ "$count" -lt "$shards" ] && shards=$count
            for ((k = 1; k <= shards; k++)); do gpu_tests+=("$t.${k}of$shards"); done
        else
            gpu_tests+=("$t")
        fi
    done
    tool_list=()
    for tool in $tools; do tool_list+=("$tool"); done
    began=$SECONDS
    # results: "tool program status errors rc failures seconds" lines
    # (the first four where it did not run), status one of clean, errors,
    # failed, timeout, late (out of time), absent.
    results=$out/sanitizer-results.txt
    errors_file=$out/sanitizer-errors.txt
    notes_file=$out/sanitizer-notes.txt
    : >"$results"
    : >"$errors_file"
    : >"$notes_file"
    # One tool on one program, in the background: its line of $results
    # and its errors go to files of its own, joined in a fixed order once
    # every run has ended.
    sanitize() { # sanitize TOOL PROGRAM (or PROGRAM.KofN, a shard)
        local tool=$1 t=$2 name=${2%.[0-9]*of[0-9]*} res=$out/.res.$1.$2 limit remaining
        local program=$build/tests/$name
        : >"$out/.err.$tool.$t"
        if [ ! -x "$program" ]; then
            echo "$tool $t absent 0" >"$res"
            return
        fi
        limit=${SANITIZER_TIMEOUT:-240}
        remaining=$(($(left) - 15))
        if [ "$remaining" -lt 30 ]; then
            echo "$tool $t late 0" >"$res"
            return
        fi
        [ "$remaining" -lt "$limit" ] && limit=$remaining
        local args=(--tool "$tool" --error-exitcode 9 --report-api-errors no)
        [ "$tool" = memcheck ] && args+=(--leak-check full)
        # The tests that fault on purpose, by their paths' tag.
        local skip=() path
        while read -r path; do
            skip+=(-s "$path")
        done < <("$program" -l 2>/dev/null | grep '^/.*/deliberate-fault/')
        # The out-of-memory test fills the whole device: memcheck covers
        # it; the other tools would shadow all of it. initcheck keeps
        # shadow memory on the device as the programs allocate, so free
        # memory no longer returns to where it was: the pool test that
        # compares it runs under the others.
        if [ "$name" = test-pool-gpu ] && [ "$tool" != memcheck ]; then
            skip+=(-s /pool-gpu/out-of-memory-trims-reclaims-trims-every-device-and-names-the-numbers)
            [ "$tool" = initcheck ] &&
                skip+=(-s /pool-gpu/failing-each-cuMemAlloc-in-turn-keeps-every-counter-exact)
        fi
        # racecheck looks for hazards in a kernel's shared memory: the
        # soak's threads run the harness's add_one, which test-dispatch
        # runs under it, and racecheck does not see the host threads it
        # exercises (under it the 8 threads' soak had not ended its first
        # test after 240 s on the H200); its opens still run under it.
        if [ "$name" = test-soak-gpu ] && [ "$tool" = racecheck ]; then
            while read -r path; do
                skip+=(-s "$path")
            done < <("$program" -l 2>/dev/null | grep -- '-threads-soak-')
        fi
        # The tests the run takes, in the order the program runs them:
        # all but those left out, or a shard's part of them.
        local order=$out/.order.$tool.$t select=()
        "$program" -l 2>/dev/null | grep '^/' | grep -v -x -F -f <(printf '%s\n' "${skip[@]}" | grep '^/') >"$order"
        if [ "$name" != "$t" ]; then
            local shard=${t##*.}
            awk -v k="${shard%of*}" -v n="${shard#*of}" '(NR - 1) % n == k - 1' "$order" >"$order.part"
            mv "$order.part" "$order"
            while read -r path; do select+=(-p "$path"); done <"$order"
        fi
        local log=$out/$tool-$t.log rc found failures status run_start=$SECONDS
        # racecheck and initcheck look at the kernels, not at the error
        # paths: the fault sweep fails every 4th call under them (it ran
        # past 240 s on the H200 with every one).
        local stride=1
        case $tool in racecheck | initcheck) stride=${SANITIZER_SWEEP_STRIDE:-4} ;; esac
        CURD_SOAK_SECONDS=${SANITIZER_SOAK_SECONDS:-0.5} CURD_SOAK_OPENS=${SANITIZER_SOAK_OPENS:-50} \
            CURD_SWEEP_QUICK=1 CURD_SWEEP_STRIDE=$stride CURD_SOAK_SANITIZED=1 \
            timeout -k 10 "$limit" compute-sanitizer "${args[@]}" \
            "$program" --tap "${select[@]}" "${skip[@]}" >"$log" 2>&1
        rc=$?
        # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E
        # errors, W warnings)" instead of an ERROR SUMMARY line.
        found=$(sed -n -e 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' \
            -e 's/^========= RACECHECK SUMMARY: .*(\([0-9]*\) errors\{0,1\},.*/\1/p' "$log" | tail -n 1)
        # Each error's first line with the test that was running: the next
        # TAP result after it (the test programs write their TAP lines
        # line by line, tests/support/curd-test.c), or the program's exit
        # (leaks).
        # A program that stopped in a test (a GLib assertion's "Bail out!")
        # reports no result for it: its errors belong to the test after
        # the last one reported, in the order the program runs them (its
        # -l list, less those left out).
        # The tool's own trouble ("Error in printing record": a record it
        # could not print, which its ERROR SUMMARY counts if it was an
        # error) goes to the notes instead, with its test as well.
        awk -v tool="$tool" -v program="$t" -v order="$order" -v notes="$out/.note.$tool.$t" '
            BEGIN { while ((getline line < order) > 0) list[++count] = line }
            function flush(test,   i) {
                for (i = 1; i <= n; i++)
                    if (note[i]) print tool, program, test, pending[i] > notes
                    else print tool, program, test, pending[i]
                n = 0
            }
            /^(not )?ok [0-9]+ \// { last = $1 == "not" ? $4 : $3; flush(last); next }
            /^Bail out!/ { bailed = 1 }
            /^========= [A-Z]/ && !/^========= (COMPUTE-SANITIZER|ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Target application|Warning)/ {
                pending[++n] = substr($0, 11)
                note[n] = $0 ~ /^========= Error in printing record/
            }
            END {
                running = "(at exit)"
                if (bailed) {
                    for (i = 1; i <= count && last != "" && list[i] != last; i++) {}
                    i = last == "" ? 1 : i + 1
                    if (i <= count) running = list[i]
                }
                flush(running)
            }' "$log" >"$out/.err.$tool.$t"
        rm -f "$order"
        failures=$(grep -c '^not ok ' "$log")
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            if [ "$limit" -lt "${SANITIZER_TIMEOUT:-240}" ]; then
                status=late # cut by the deadline, not by its own limit
            else
                status=timeout
            fi
        elif [ -z "$found" ]; then
            status=failed # no summary: the tool did not run to the end
        elif [ "$found" -gt 0 ]; then
            status=errors
        elif [ "$rc" -ne 0 ] || [ "$failures" -gt 0 ]; then
            status=failed
        else
            status=clean
        fi
        echo "$tool $t $status ${found:-0} $rc $failures $((SECONDS - run_start))s" >"$res"
    }
    # JOBS runs at a time on the one GPU (its memory and its 16 cores have
    # space for several); those that fill the device or compare its free
    # memory run alone afterwards (the soak not: its sanitized run leaves
    # its free-memory comparisons out).
    sanitize_alone=" test-pool-gpu test-resident-gpu test-device "
    shared_runs=() alone_runs=()
    for t in "${gpu_tests[@]}"; do
        chosen "$t" || continue
        for tool in "${tool_list[@]}"; do
            if [[ $sanitize_alone == *" $t "* ]]; then alone_runs+=("$tool $t"); else shared_runs+=("$tool $t"); fi
        done
    done
    for run in "${shared_runs[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "$sanitizer_jobs" ]; do wait -n; done
        # shellcheck disable=SC2086
        sanitize $run &
    done
    wait
    for run in "${alone_runs[@]}"; do
        # shellcheck disable=SC2086
        sanitize $run
    done
    for tool in "${tool_list[@]}"; do
        for t in "${gpu_tests[@]}"; do
            chosen "$t" || continue
            cat "$out/.res.$tool.$t" >>"$results"
            cat "$out/.err.$tool.$t" >>"$errors_file"
            [ -f "$out/.note.$tool.$t" ] && cat "$out/.note.$tool.$t" >>"$notes_file"
            rm -f "$out/.res.$tool.$t" "$out/.err.$tool.$t" "$out/.note.$tool.$t"
        done
    done
    # The table: errors per program and tool; "-" not run, with why below.
    sanitized+=("sanitizers: errors per program and tool, $((SECONDS - began)) s (logs: <tool>-<program>.log)")
    header=$(printf '  %-26s' program)
    for tool in "${tool_list[@]}"; do header+=$(printf ' %-10s' "$tool"); done
    sanitized+=("${header%"${header##*[! ]}"}")
    for t in "${gpu_tests[@]}"; do
        chosen "$t" || continue
        row=$(printf '  %-26s' "$t")
        for tool in "${tool_list[@]}"; do
            cell=$(awk -v tool="$tool" -v t="$t" '$1 == tool && $2 == t {
                if ($3 == "clean" || $3 == "errors") print $4
                else if ($3 == "failed") print "failed"
                else if ($3 == "timeout") print "timeout"
                else print "-" }' "$results")
            row+=$(printf ' %-10s' "${cell:--}")
        done
        sanitized+=("${row%"${row##*[! ]}"}")
    done
    for tool in "${tool_list[@]}"; do
        line=$(awk -v tool="$tool" '$1 == tool {
                total++
                if ($3 == "clean" || $3 == "errors") { reached++; errors += $4 }
                if ($3 == "failed") { reached++; failed = failed " " $2 " (rc=" $5 ", " $6 " tests failed)" }
                if ($3 == "timeout") { reached++; failed = failed " " $2 " (timed out)" }
                if ($3 == "late") late = late " " $2
                if ($3 == "absent") absent = absent " " $2
            }
            END {
                printf "%s: %d of %d programs reached, %d error%s", tool, reached, total, errors, errors == 1 ? "" : "s"
                if (failed != "") printf "; failed:%s", failed
                if (late != "") printf "; not reached (DEADLINE):%s", late
                if (absent != "") printf "; not built:%s", absent
            }' "$results")
        sanitized+=("$line")
        reached=$(awk -v tool="$tool" '$1 == tool && ($3 == "clean" || $3 == "errors") { n++ } END { print n + 0 }' "$results")
        errors=$(awk -v tool="$tool" '$1 == tool { n += $4 } END { print n + 0 }' "$results")
        bad=$(awk -v tool="$tool" '$1 == tool && ($3 == "failed" || $3 == "timeout") { printf " %s", $2 }' "$results")
        late=$(awk -v tool="$tool" '$1 == tool && ($3 == "late" || $3 == "absent") { printf " %s", $2 }' "$results")
        [ "$errors" -eq 0 ] && [ "$reached" -gt 0 ] && passed+=("$tool 0 errors on $reached programs")
        if [ "$errors" -gt 0 ]; then
            where=$(awk -v tool="$tool" '$1 == tool { k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; printf "%s%s %s", sep, $2, $3; sep = ", " } }' "$errors_file")
            failed+=("$tool $(plural "$errors" error) ($where)")
        fi
        [ -n "$bad" ] && failed+=("$tool runs that did not end cleanly:$bad")
        [ -n "$late" ] && not_run+=("$tool on$late (DEADLINE; run with SANITIZERS=$tool PROGRAMS='${late# }')")
    done
    # Every error with its program and test, the same ones counted once.
    if [ -s "$errors_file" ]; then
        sanitized+=("sanitizer errors (tool program test: first line):")
        mapfile -t lines < <(sort "$errors_file" | uniq -c | sort -rn | head -n 30 |
            awk '{ count = $1; $1 = ""; sub(/^ /, ""); print "  " $0 (count > 1 ? " (x" count ")" : "") }')
        sanitized+=("${lines[@]}")
    fi
    # The tools' own messages, which are not errors: each tool's ERROR
    # SUMMARY above counts the errors.
    if [ -s "$notes_file" ]; then
        sanitized+=("sanitizer messages that are not errors (tool program test: line):")
        mapfile -t lines < <(sort "$notes_file" | uniq -c | sort -rn | head -n 10 |
            awk '{ count = $1; $1 = ""; sub(/^ /, ""); print "  " $0 (count > 1 ? " (x" count ")" : "") }')
        sanitized+=("${lines[@]}")
    fi
    for tool in memcheck racecheck initcheck synccheck; do
        [[ " $tools " == *" $tool "* ]] && continue
        case ${PART:-}:$tool in
        [123]:memcheck | [123]:synccheck) not_run+=("$tool (PART=2)") ;;
        [123]:*) not_run+=("$tool (PART=3)") ;;
        *) not_run+=("$tool (SANITIZERS)") ;;
        esac
    done
fi

if wanted bench && [ -x "$build/tools/curd-bench" ]; then
    if [ "$(left)" -gt 180 ]; then
        # shellcheck disable=SC2086
        step curd-bench timeout "$(left)" "$build/tools/curd-bench" --json="$out/bench.json" \
            ${CURD_BENCH_ARGS:-} || failed+=("curd-bench")
        cat "$out/curd-bench.log"
    else
        not_run+=("the bench (DEADLINE; run with STEPS=bench)")
    fi
fi

# Not run for want of GPUs: "N count what" lines (what: test, example),
# one entry per N.
while read -r line; do
    not_run+=("$line")
done < <(awk '{ n[$1 " " $3] += $2 } END { for (k in n) print k, n[k] }' "$needs_file" |
    sort -k1,1n -k2,2r | awk '
    $1 != need { if (line != "") print line; need = $1; line = "needs " need " GPUs (not run):"; sep = " " }
    { line = line sep $3 " " $2 ($3 == 1 ? "" : "s"); sep = ", " }
    END { if (line != "") print line }')
rm -f "$needs_file"

# What comes back from the machine is a few files: the logs travel as one
# archive beside the test log, the benchmark table and its JSON.
tar -czf "$out.logs.tar.gz" -C "$out" --exclude logs.tar.gz . && mv "$out.logs.tar.gz" "$out/logs.tar.gz"
find "$out" -maxdepth 1 \( -name '*.log' -o -name '*.out' -o -name '*.txt' \) \
    ! -name check-gpu.log ! -name curd-bench.log ! -name gpu.txt -delete

verdict=PASS
[ ${#failed[@]} -gt 0 ] && verdict=FAIL
join() { local joined="" item; for item in "$@"; do joined+="${joined:+; }$item"; done; echo "$joined"; }
echo "==== summary ($(head -n 1 "$out/gpu.txt"); $(plural "$gpus" GPU); PART=${PART:-all}, $SECONDS s)"
printf '%s\n' "${summary[@]}" "${totals[@]}" "${sanitized[@]}"
echo "verdict: $verdict on $gpus x $gpu_name" \
    "| passed: $([ ${#passed[@]} -gt 0 ] && join "${passed[@]}" || echo nothing)" \
    "| failed: $([ ${#failed[@]} -gt 0 ] && join "${failed[@]}" || echo nothing)" \
    "| not run here: $([ ${#not_run[@]} -gt 0 ] && join "${not_run[@]}" || echo nothing)"
[ "$verdict" = PASS ]
