#!/bin/sh
# Draws curd-bench's CSV (and bench/peers/measure.py's rows in the same
# format) as PNG charts with gnuplot:
#   bandwidth-upload.png, bandwidth-download.png
#       GB/s against transfer size, one line per series of the sweeps
#       (raw pageable, raw pinned, curd pageable, curd registered, and the
#       peers' torch and cupy series when their rows are there);
#   latency.png
#       the median time of every single-thread variant of the other
#       scenarios under 16 MiB, as bars grouped by scenario, coloured by
#       who did the work (raw driver, curd, peers), on a log scale.
#
# usage: scripts/bench-plot.sh OUTDIR CSV...
set -eu
outdir=${1:?usage: bench-plot.sh OUTDIR CSV...}
shift
[ $# -gt 0 ] || { echo "usage: bench-plot.sh OUTDIR CSV..." >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 ||
    { echo "bench-plot.sh: gnuplot is missing (scripts/setup-deps.sh plot)" >&2; exit 1; }
mkdir -p "$outdir"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# One pass over the CSVs: a data file per sweep series, and the latency
# bars. Fields are split as RFC 4180 says (a quoted field may hold commas).
awk -v data="$data" '
function split_csv(line,    n, i, c, field, quoted) {
    n = 0; field = ""; quoted = 0
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (quoted) {
            if (c == "\"" && substr(line, i + 1, 1) == "\"") { field = field c; i++ }
            else if (c == "\"") quoted = 0
            else field = field c
        } else if (c == "\"") quoted = 1
        else if (c == ",") { f[++n] = field; field = "" }
        else field = field c
    }
    f[++n] = field
    return n
}
# Bar colours as 0xRRGGBB in decimal, for "lc rgb variable" in gnuplot.
function colour(role) {
    if (role == "raw") return 8421504     # grey
    if (role == "curd") return 2062260    # blue
    if (role == "ref") return 2924588     # green
    if (role == "torch") return 16744206  # orange
    return 9725885                        # purple: cupy
}
/^#/ { next } # a comment (the hand-made sample says what it is)
{
    sub(/\r$/, "")
    if (split_csv($0) < 10 || f[1] == "scenario") next # the header
    scenario = f[1]; variant = f[2]; role = f[3]
    size = f[4] + 0; threads = f[5] + 0; median = f[6] + 0
    if (median <= 0) next
    if (scenario ~ /-sweep$/) {
        direction = scenario ~ /upload/ ? "upload" : "download"
        name = variant; gsub(/[^A-Za-z0-9]+/, "_", name)
        file = data "/" direction "-" name ".dat"
        if (!(file in seen)) { seen[file] = 1; print file "\t" variant >> (data "/" direction ".series") }
        print size, size / median >> file
    } else if (threads == 1 && size < 16777216) {
        if (scenario != last) { if (last != "") bar++; last = scenario }
        bar++
        label = scenario ": " variant
        gsub(/"/, "", label)
        printf "%d\t%g\t%s\t\"%s\"\n", bar, median / 1000, colour(role), label >> (data "/latency.dat")
    }
}' "$@"

plot_bandwidth() { # direction
    series=$data/$1.series
    [ -s "$series" ] || { echo "bench-plot.sh: no $1 sweep rows in the CSV"; return 0; }
    {
        echo "set terminal pngcairo size 1000,650 font ',11' noenhanced"
        echo "set output '$outdir/bandwidth-$1.png'"
        echo "set title '$1 bandwidth against transfer size (higher is better)'"
        echo "set logscale x 2; set format x '%.0b %B'"
        echo "set xlabel 'transfer size'; set ylabel 'GB/s (1e9 bytes/s)'"
        echo "set key top left; set grid"
        printf "plot "
        sep=""
        while IFS="$(printf '\t')" read -r file title; do
            sort -n "$file" -o "$file"
            printf "%s'%s' using 1:2 with linespoints lw 2 title '%s'" "$sep" "$file" "$title"
            sep=", "
        done <"$series"
        echo
    } >"$data/$1.gp"
    gnuplot "$data/$1.gp"
    echo "$outdir/bandwidth-$1.png"
}

plot_bandwidth upload
plot_bandwidth download
if [ -s "$data/latency.dat" ]; then
    bars=$(tail -n 1 "$data/latency.dat" | cut -f1)
    cat >"$data/latency.gp" <<GP
set terminal pngcairo size $((500 + bars * 30)),1000 font ',10' noenhanced
set output '$outdir/latency.png'
set title 'median time per operation (lower is better): grey raw driver, blue curd, green reference, orange PyTorch, purple CuPy'
set logscale y; set ylabel 'microseconds'; set grid ytics
set style fill solid 0.8; set boxwidth 0.8
set xtics rotate by -60 left font ',9'; set bmargin 36; set rmargin 24
set xrange [0:$(($(tail -n 1 "$data/latency.dat" | cut -f1) + 1))]
unset key
plot '$data/latency.dat' using 1:2:3:xtic(4) with boxes lc rgb variable
GP
    gnuplot "$data/latency.gp"
    echo "$outdir/latency.png"
fi
