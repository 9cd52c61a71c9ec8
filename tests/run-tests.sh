#!/bin/sh
# Runs each g_test program with --tap, then any extra checks, and prints one
# closing line:
#   N passed, N failed, N skipped[, N need G GPUs (not run)]
# A test that skips with "needs G GPUs; this host has H" (H < G, as
# curd_test_have_gpus in tests/support/curd-test.c words it) is counted
# apart, as not run here, and never as a failure, --skip-is-failure or
# not: on a host with enough GPUs it runs. Where H >= G the skip is wrong
# and counts as a failure.
# As it goes it prints "[N/M] name" before each program, each Valgrind run
# as it ends and each step, so that a log or a terminal shows where a long
# run stands. A skip reason longer than a line that was already given in
# full (the no-driver sentence, a few hundred times without a GPU) is
# shortened to its first words and "(as above)".
#
# usage: tests/run-tests.sh [options] PROGRAM...
#   --skip-is-failure   a skipped test counts as failed (make check-gpu)
#   --wrap CMD          run each program as `CMD PROGRAM --tap` (e.g. setarch);
#                       CMD may start with VAR=value words
#   --valgrind CMD      after the plain runs, run each program again under CMD
#                       (a valgrind command line), as many at once as there
#                       are processors (CURD_TEST_JOBS=N to change); each
#                       run is one result: passed when CMD exits 0, its log
#                       shown when not
#   --step NAME SHELL   after that, run SHELL as one result named NAME, its
#                       output shown as TAP comments; exit 0 passes, 77 skips,
#                       anything else fails (may be given several times)
#
# Exits non-zero when anything failed or a program crashed.
skip_is_failure=0 wrap="" valgrind="" steps=""
step_count=0
while [ $# -gt 0 ]; do
    case "$1" in
    --skip-is-failure) skip_is_failure=1; shift ;;
    --wrap) wrap=$2; shift 2 ;;
    --valgrind) valgrind=$2; shift 2 ;;
    --step)
        step_count=$((step_count + 1))
        eval "step_name_$step_count=\$2 step_cmd_$step_count=\$3"
        shift 3 ;;
    --) shift; break ;;
    -*) echo "run-tests.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done

passed=0 failed=0 skipped=0 crashed=""
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/log

# One result line for a whole program or step, TAP style.
result() { # status name
    case "$1" in
    pass) passed=$((passed + 1)); echo "ok - $2" ;;
    skip) skipped=$((skipped + 1)); echo "ok - $2 # SKIP" ;;
    *) failed=$((failed + 1)); echo "not ok - $2" ;;
    esac
}

# Prints a program's TAP with each long skip reason in full only the first
# time the whole run meets it ($work/reasons keeps those seen).
show_tap() { # log
    awk -v reasons="$work/reasons" '
        BEGIN { while ((getline line < reasons) > 0) seen[line] = 1 }
        /# SKIP / {
            reason = substr($0, index($0, "# SKIP ") + 7)
            if (length(reason) > 100) {
                if (reason in seen) {
                    print substr($0, 1, index($0, "# SKIP ") + 6) substr(reason, 1, 60) "... (as above)"
                    next
                }
                seen[reason] = 1
                print reason >> reasons
            }
        }
        { print }' "$1"
}

total=$#
n=0
for program in "$@"; do
    n=$((n + 1))
    echo "# [$n/$total] $(basename "$program")"
    # $wrap is split into words on purpose: it is a command prefix.
    # shellcheck disable=SC2086
    env $wrap "$program" --tap >"$log" 2>&1
    status=$?
    show_tap "$log"
    # The tests that need more GPUs than this host has: "G H" lines.
    sed -n 's/^ok .*# SKIP needs \([0-9][0-9]*\) GPUs; this host has \([0-9][0-9]*\)$/\1 \2/p' \
        "$log" >"$work/needs-one"
    cat "$work/needs-one" >>"$work/needs"
    s=$(($(grep -c '^ok .*# SKIP' "$log") - $(wc -l <"$work/needs-one")))
    p=$(grep '^ok ' "$log" | grep -vc '# SKIP')
    f=$(grep -c '^not ok ' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        crashed="$crashed $(basename "$program")(exit $status)"
        failed=$((failed + 1))
    fi
done

# The Valgrind runs are slow and independent: run as many at once as there
# are processors (CURD_TEST_JOBS overrides), then report them in order.
if [ -n "$valgrind" ] && [ $# -gt 0 ]; then
    jobs=${CURD_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
    echo "# valgrind: $total programs, $jobs at once; each is named as it ends"
    n=0
    for program in "$@"; do
        n=$((n + 1))
        printf '%s %s\n' "$n" "$program"
    done | xargs -n 2 -P "$jobs" sh -c '
        # shellcheck disable=SC2086
        env $0 "$4" --tap >"$1/$3.log" 2>&1
        status=$?
        echo $status >"$1/$3.status"
        echo "# valgrind [$3/$2] $(basename "$4"): exit $status"' \
        "$valgrind" "$work" "$total"
    n=0
    for program in "$@"; do
        n=$((n + 1))
        if [ "$(cat "$work/$n.status" 2>/dev/null)" = 0 ]; then
            result pass "valgrind $(basename "$program")"
        else
            sed 's/^/# /' "$work/$n.log"
            result fail "valgrind $(basename "$program")"
        fi
    done
fi

i=1
while [ "$i" -le "$step_count" ]; do
    eval "name=\$step_name_$i cmd=\$step_cmd_$i"
    echo "# [step $i/$step_count] $name"
    { sh -c "$cmd" 2>&1; echo $? >"$log.status"; } | sed -u 's/^/# /'
    case $(cat "$log.status") in
    0) result pass "$name" ;;
    77) result skip "$name" ;;
    *) result fail "$name" ;;
    esac
    i=$((i + 1))
done

# Not run here: counted per number of GPUs needed; a skip that says the
# host has enough is a failure.
not_run=""
if [ -s "$work/needs" ]; then
    wrong=$(awk '$2 >= $1' "$work/needs" | wc -l)
    if [ "$wrong" -ne 0 ]; then
        echo "# $wrong tests skipped saying they need more GPUs than this host has, which has enough: counted as failures"
        failed=$((failed + wrong))
    fi
    not_run=$(awk '$2 < $1 { n[$1]++ } END { for (g in n) print g, n[g] }' "$work/needs" |
        sort -n | awk '{ printf ", %d need %d GPUs (not run)", $2, $1 }')
fi
if [ "$skip_is_failure" -eq 1 ] && [ "$skipped" -ne 0 ]; then
    echo "# $skipped skipped tests count as failures under --skip-is-failure"
    failed=$((failed + skipped))
fi
[ -z "$crashed" ] || echo "# programs that exited abnormally:$crashed"
echo "$passed passed, $failed failed, $skipped skipped$not_run"
[ "$failed" -eq 0 ]
