#!/bin/sh
# Checks what tests/run-tests.sh shows as it goes, on two stand-in test
# programs (shell scripts that print TAP): "[N/M] name" before each
# program, "[step N/M] name" before each step, and a long skip reason in
# full the first time only.
#
# usage: scripts/check-run-tests.sh
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
reason="no GPU: CURD_E_NO_DRIVER: $(printf 'a long sentence %.0s' 1 2 3 4 5 6 7 8 9 10) Fix: install it."
for name in first second; do
    cat >"$scratch/test-$name" <<TAP
#!/bin/sh
echo "1..2"
echo "ok 1 /$name/runs"
echo "ok 2 /$name/needs-a-gpu # SKIP $reason"
TAP
    chmod +x "$scratch/test-$name"
done
"$top/tests/run-tests.sh" --step a-step true "$scratch/test-first" "$scratch/test-second" >"$scratch/out" 2>&1
bad=0
for line in "# [1/2] test-first" "# [2/2] test-second" "# [step 1/1] a-step" "3 passed, 0 failed, 2 skipped"; do
    grep -q -x -F "$line" "$scratch/out" || { echo "check-run-tests: no line '$line' in:"; cat "$scratch/out"; bad=1; }
done
full=$(grep -c -F "$reason" "$scratch/out" || true)
if [ "$full" -ne 1 ]; then
    echo "check-run-tests: the long skip reason is given in full $full times, not once"
    bad=1
fi
grep -q "needs-a-gpu # SKIP .*(as above)" "$scratch/out" ||
    { echo "check-run-tests: the second skip does not say '(as above)'"; bad=1; }
[ "$bad" -eq 0 ] && echo "check-run-tests: run-tests.sh numbers its programs and steps and gives a long skip reason once"
exit "$bad"
