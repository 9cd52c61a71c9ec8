#!/bin/sh
# Runs each g_test program with --tap and prints one closing line:
#   N passed, N failed, N skipped
# With --skip-is-failure (make check-gpu) a skipped test counts as failed.
# Exits non-zero when anything failed or a program crashed.
skip_is_failure=0
if [ "$1" = "--skip-is-failure" ]; then
    skip_is_failure=1
    shift
fi

passed=0 failed=0 skipped=0 crashed=""
for program in "$@"; do
    log=$(mktemp)
    "$program" --tap >"$log" 2>&1
    status=$?
    cat "$log"
    p=$(grep -c '^ok .*# SKIP' "$log")
    s=$p
    p=$(grep '^ok ' "$log" | grep -vc '# SKIP')
    f=$(grep -c '^not ok ' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        crashed="$crashed $(basename "$program")(exit $status)"
        failed=$((failed + 1))
    fi
    rm -f "$log"
done

if [ "$skip_is_failure" -eq 1 ] && [ "$skipped" -ne 0 ]; then
    echo "# $skipped skipped tests count as failures under --skip-is-failure"
    failed=$((failed + skipped))
fi
[ -z "$crashed" ] || echo "# programs that exited abnormally:$crashed"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
