#!/bin/sh
# Runs each g_test program with --tap, then any extra checks, and prints one
# closing line:
#   N passed, N failed, N skipped
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

for program in "$@"; do
    # $wrap is split into words on purpose: it is a command prefix.
    # shellcheck disable=SC2086
    env $wrap "$program" --tap >"$log" 2>&1
    status=$?
    cat "$log"
    s=$(grep -c '^ok .*# SKIP' "$log")
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
    n=0
    for program in "$@"; do
        n=$((n + 1))
        printf '%s %s\n' "$n" "$program"
    done | xargs -n 2 -P "$jobs" sh -c '
        # shellcheck disable=SC2086
        env $0 "$3" --tap >"$1/$2.log" 2>&1
        echo $? >"$1/$2.status"' "$valgrind" "$work"
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
    echo "# $name"
    { sh -c "$cmd" 2>&1; echo $? >"$log.status"; } | sed 's/^/# /'
    case $(cat "$log.status") in
    0) result pass "$name" ;;
    77) result skip "$name" ;;
    *) result fail "$name" ;;
    esac
    i=$((i + 1))
done

if [ "$skip_is_failure" -eq 1 ] && [ "$skipped" -ne 0 ]; then
    echo "# $skipped skipped tests count as failures under --skip-is-failure"
    failed=$((failed + skipped))
fi
[ -z "$crashed" ] || echo "# programs that exited abnormally:$crashed"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
