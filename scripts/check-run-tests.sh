#!/bin/sh
# Checks what tests/run-tests.sh shows as it goes, on two stand-in test
# programs (shell scripts that print TAP): "[N/M] name" before each
# program, "[step N/M] name" before each step, a long skip reason in
# full the first time only, and a test that needs more GPUs than the host
# has counted apart, not as a skip, even under --skip-is-failure.
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
echo "ok 3 /$name/needs-two # SKIP needs 2 GPUs; this host has 1"
TAP
    chmod +x "$scratch/test-$name"
done
"$top/tests/run-tests.sh" --step a-step true "$scratch/test-first" "$scratch/test-second" >"$scratch/out" 2>&1
# With --skip-is-failure the two tests that need 2 GPUs are still not run,
# not failed; a skip that says the host has enough is a failure.
printf '#!/bin/sh\necho 1..2\necho "ok 1 /third/runs"\necho "ok 2 /third/needs-two # SKIP needs 2 GPUs; this host has 1"\n' >"$scratch/test-third"
printf '#!/bin/sh\necho 1..1\necho "ok 1 /fourth/needs-two # SKIP needs 2 GPUs; this host has 2"\n' >"$scratch/test-fourth"
chmod +x "$scratch/test-third" "$scratch/test-fourth"
"$top/tests/run-tests.sh" --skip-is-failure "$scratch/test-third" >"$scratch/out-gpus" 2>&1 || true
"$top/tests/run-tests.sh" --skip-is-failure "$scratch/test-fourth" >"$scratch/out-wrong" 2>&1 || true
bad=0
for line in "# [1/2] test-first" "# [2/2] test-second" "# [step 1/1] a-step" \
    "3 passed, 0 failed, 2 skipped, 2 need 2 GPUs (not run)"; do
    grep -q -x -F "$line" "$scratch/out" || { echo "check-run-tests: no line '$line' in:"; cat "$scratch/out"; bad=1; }
done
grep -q -x -F "1 passed, 0 failed, 0 skipped, 1 need 2 GPUs (not run)" "$scratch/out-gpus" ||
    { echo "check-run-tests: under --skip-is-failure a test needing 2 GPUs is not counted apart:"; cat "$scratch/out-gpus"; bad=1; }
grep -q -x -F "0 passed, 1 failed, 0 skipped" "$scratch/out-wrong" ||
    { echo "check-run-tests: a 'needs 2 GPUs' skip on a host with 2 is not a failure:"; cat "$scratch/out-wrong"; bad=1; }
full=$(grep -c -F "$reason" "$scratch/out" || true)
if [ "$full" -ne 1 ]; then
    echo "check-run-tests: the long skip reason is given in full $full times, not once"
    bad=1
fi
grep -q "needs-a-gpu # SKIP .*(as above)" "$scratch/out" ||
    { echo "check-run-tests: the second skip does not say '(as above)'"; bad=1; }
[ "$bad" -eq 0 ] && echo "check-run-tests: run-tests.sh numbers its programs and steps, gives a long skip reason once and counts tests that need more GPUs apart"
exit "$bad"
