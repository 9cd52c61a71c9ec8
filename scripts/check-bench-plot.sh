#!/bin/sh
# Checks the charts of scripts/bench-plot.sh through the gnuplot scripts it
# leaves in OUTDIR/*/gnuplot/ and the pictures it draws:
#   - from the hand-made sample, every chart says so, in its title and
#     across the picture;
#   - from a curd-bench CSV given twice (as two files), every chart has a
#     legend, both axes labelled with their units, the CSV's device,
#     driver and date under its title, a bounded size; the bandwidth
#     charts tick sizes as "4 KiB", "1 MiB"; every series and bar is
#     labelled by its file, the two files' same-named series side by side.
# Exits 77 (a skip) with the reason when gnuplot is missing.
#
# usage: scripts/check-bench-plot.sh OUTDIR CURD-BENCH.csv
set -eu
outdir=${1:?usage: check-bench-plot.sh OUTDIR CURD-BENCH.csv}
csv=${2:?usage: check-bench-plot.sh OUTDIR CURD-BENCH.csv}
top=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot is missing, so the charts are not checked (scripts/setup-deps.sh plot installs it)"
    exit 77
fi
bad=0
fail() {
    echo "check-bench-plot: $*"
    bad=1
}
rm -rf "$outdir"
mkdir -p "$outdir/csv"

"$top/scripts/bench-plot.sh" "$outdir/sample" "$top/bench/sample-hand-made.csv" >/dev/null
for script in "$outdir"/sample/gnuplot/*.gp; do
    grep -q '^set title ".*HAND-MADE SAMPLE' "$script" || fail "$script: the title does not say it is a hand-made sample"
    grep -q "^set label .*HAND-MADE SAMPLE" "$script" || fail "$script: the picture does not say it is a hand-made sample"
done

# The same CSV as two files: every series and bar comes twice, once per file.
cp "$csv" "$outdir/csv/first.csv"
cp "$csv" "$outdir/csv/second.csv"
"$top/scripts/bench-plot.sh" "$outdir/two" "$outdir/csv/first.csv" "$outdir/csv/second.csv" >/dev/null
device=$(sed -n 's/^# device: //p' "$csv")
driver=$(sed -n 's/^# driver: //p' "$csv")
date=$(sed -n 's/^# date: //p' "$csv")
[ -n "$device" ] && [ -n "$driver" ] && [ -n "$date" ] ||
    fail "$csv: no '# device:', '# driver:' and '# date:' lines before the header"
charts=0
for script in "$outdir"/two/gnuplot/*.gp; do
    charts=$((charts + 1))
    picture=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$script")
    [ -s "$picture" ] || fail "$script: drew no $picture"
    title=$(grep '^set title ' "$script" || true)
    for part in "$device" "$driver" "$date" "first: " "second: "; do
        case "$title" in *"$part"*) ;; *) fail "$script: the title does not name '$part'" ;; esac
    done
    grep -q '^set key ' "$script" && ! grep -q 'unset key' "$script" || fail "$script: no legend"
    grep -q "set xlabel '" "$script" || fail "$script: no x axis label"
    grep -q "set ylabel '.*(.*)'" "$script" || fail "$script: no y axis label with its unit"
    height=$(sed -n 's/^set terminal [a-z]* size [0-9]*,\([0-9]*\).*/\1/p' "$script")
    [ -n "$height" ] && [ "$height" -le 1200 ] || fail "$script: a picture $height pixels high"
    grep -q '\[first\]' "$script" "$(dirname "$script")"/data/*.dat &&
        grep -q '\[second\]' "$script" "$(dirname "$script")"/data/*.dat ||
        fail "$script: the series or bars are not labelled by file"
done
for script in "$outdir"/two/gnuplot/bandwidth-*.gp; do
    [ -e "$script" ] || { fail "no bandwidth chart from $csv"; break; }
    grep -q '^set xtics (.*"4 KiB" 4096.*"1 MiB" 1048576' "$script" || fail "$script: the size ticks are not '4 KiB', '1 MiB'"
    grep -q "set xlabel '.*(bytes" "$script" || fail "$script: the size axis has no unit"
    first=$(grep -o "title '[^']*\[first\]'" "$script" | sed 's/ \[first\]//' | sort)
    second=$(grep -o "title '[^']*\[second\]'" "$script" | sed 's/ \[second\]//' | sort)
    [ -n "$first" ] && [ "$first" = "$second" ] || fail "$script: the two files' series are not drawn side by side"
done
[ -e "$outdir/two/latency-1.png" ] || fail "no latency chart from $csv"
[ "$bad" -eq 0 ] && echo "check-bench-plot: $charts charts with legends, units, device, driver and date, files side by side; the sample says it is one"
exit "$bad"
