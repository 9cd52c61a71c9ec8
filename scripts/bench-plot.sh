#!/bin/sh
# Draws curd-bench's CSV (and bench/peers/measure.py's rows in the same
# format) as PNG charts with gnuplot:
#   bandwidth-upload.png, bandwidth-download.png
#       GB/s against transfer size, one line per series of the sweeps
#       (raw pageable, raw pinned, curd pageable, curd registered, and the
#       peers' torch and cupy series when their rows are there);
#   latency-1.png, latency-2.png, ...
#       the median time of every single-thread variant of the other
#       scenarios under 16 MiB, as bars grouped by scenario (the peers'
#       bars beside curd's and the raw driver's of the same scenario),
#       coloured by who did the work, on a log scale; at most
#       BENCH_PLOT_BARS (32) bars a page, so that no picture grows with
#       the number of scenarios.
# Every chart has a legend, its axes' units, and under its title the
# device, driver and date of each CSV (from the "# key: value" lines
# curd-bench writes before its header). Given several CSVs, a series or a
# bar of each is labelled with its file's name, never merged with a
# same-named one of another file. A CSV that says "# sample: ..." (the
# hand-made bench/sample-hand-made.csv) is marked on every picture as a
# sample that is not a measurement. The gnuplot scripts and their data
# stay in OUTDIR/gnuplot/ (scripts/check-bench-plot.sh reads them).
#
# usage: scripts/bench-plot.sh OUTDIR CSV...
set -eu
outdir=${1:?usage: bench-plot.sh OUTDIR CSV...}
shift
[ $# -gt 0 ] || { echo "usage: bench-plot.sh OUTDIR CSV..." >&2; exit 2; }
command -v gnuplot >/dev/null 2>&1 ||
    { echo "bench-plot.sh: gnuplot is missing (scripts/setup-deps.sh plot)" >&2; exit 1; }
bars_per_page=${BENCH_PLOT_BARS:-32}
# The data files stay beside the gnuplot scripts, so that a script can be
# run again by hand.
data=$outdir/gnuplot/data
rm -rf "$outdir/gnuplot"
rm -f "$outdir"/latency*.png "$outdir"/bandwidth-*.png
mkdir -p "$data"
tab=$(printf '\t')

# One pass over the CSVs: each file's metadata, a data file per sweep
# series and file, and the latency rows. Fields are split as RFC 4180 says
# (a quoted field may hold commas).
awk -v data="$data" -v files=$# '
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
FNR == 1 {
    file++
    name[file] = FILENAME; sub(/.*\//, "", name[file]); sub(/\.csv$/, "", name[file])
}
/^# [a-z]+: / { # metadata: "# device: ..."
    key = $2; sub(/:$/, "", key)
    meta[file, key] = substr($0, index($0, ": ") + 2)
    gsub(/["\t]/, "", meta[file, key])
    next
}
/^#/ { next }
{
    sub(/\r$/, "")
    if (split_csv($0) < 10 || f[1] == "scenario") next # the header
    scenario = f[1]; variant = f[2]; role = f[3]
    size = f[4] + 0; threads = f[5] + 0; median = f[6] + 0
    if (median <= 0) next
    gsub(/["\047\t]/, "", variant)
    tag = files > 1 ? " [" name[file] "]" : ""
    if (scenario ~ /-sweep$/) {
        direction = scenario ~ /upload/ ? "upload" : "download"
        safe = variant; gsub(/[^A-Za-z0-9]+/, "_", safe)
        out = data "/" direction "-" file "-" safe ".dat"
        if (!(out in seen)) { seen[out] = 1; print out "\t" variant tag >> (data "/" direction ".series") }
        print size, size / median >> out
        print size >> (data "/" direction ".sizes")
    } else if (threads == 1 && size < 16777216) {
        printf "%s\t%d\t%d\t%g\t%s\t%s\n", scenario, file, FNR, median / 1000, role, variant tag >> (data "/latency.rows")
    }
}
END {
    for (i = 1; i <= file; i++)
        printf "%s\t%s\t%s\t%s\t%s\n", name[i], meta[i, "device"], meta[i, "driver"], meta[i, "date"], meta[i, "sample"] > (data "/meta")
}' "$@"

# What every chart says under its title: one line per CSV, as gnuplot
# string text ("\n" between lines).
subtitle=$(awk -F "$tab" -v files=$# '
    {
        prefix = files > 1 ? $1 ": " : ""
        if ($5 != "") line = prefix "HAND-MADE SAMPLE, invented numbers, not a measurement"
        else line = prefix ($2 == "" ? "device unknown" : $2) ", driver " ($3 == "" ? "unknown" : $3) ", " ($4 == "" ? "date unknown" : $4)
        text = text (NR > 1 ? "\\n" : "") line
    }
    END { print text }' "$data/meta")
# A sample is said across the picture too, not only in the title.
sample_label=""
if awk -F "$tab" '$5 != "" { found = 1 } END { exit !found }' "$data/meta"; then
    sample_label="set label 99 'HAND-MADE SAMPLE: NOT A MEASUREMENT' at graph 0.5, 0.55 center front font ',24' textcolor rgb '#cc0000'"
fi

# "4 KiB", "1 MiB": a tick at each size the sweeps measured.
size_tics() { # sizes-file
    sort -n -u "$1" | awk '
        function name(bytes) {
            if (bytes >= 1073741824 && bytes % 1073741824 == 0) return bytes / 1073741824 " GiB"
            if (bytes >= 1048576 && bytes % 1048576 == 0) return bytes / 1048576 " MiB"
            if (bytes >= 1024 && bytes % 1024 == 0) return bytes / 1024 " KiB"
            return bytes " B"
        }
        NR == 1 { smallest = $1 }
        { text = text (NR > 1 ? ", " : "") "\"" name($1) "\" " $1; largest = $1 }
        # Space beyond the ends, so that the end ticks keep their labels.
        END { print "set xtics (" text "); set xrange [" smallest / 1.5 ":" largest * 1.5 "]" }'
}

plot_bandwidth() { # direction
    series=$data/$1.series
    [ -s "$series" ] || { echo "bench-plot.sh: no $1 sweep rows in the CSV"; return 0; }
    script=$outdir/gnuplot/bandwidth-$1.gp
    {
        echo "set terminal pngcairo size 1200,800 font ',11' noenhanced"
        echo "set output '$outdir/bandwidth-$1.png'"
        # printf, not echo: dash's echo would turn the "\n" into a newline.
        printf 'set title "%s\\n%s"\n' "$1 bandwidth against transfer size (higher is better)" "$subtitle"
        echo "set logscale x 2"
        size_tics "$data/$1.sizes"
        echo "set xlabel 'transfer size (bytes, log scale)'; set ylabel 'GB/s (10^9 bytes per second)'"
        echo "set key below left box; set grid"
        echo "$sample_label"
        printf "plot "
        sep=""
        while IFS="$tab" read -r file title; do
            sort -n "$file" -o "$file"
            printf "%s'%s' using 1:2 with linespoints lw 2 title '%s'" "$sep" "$file" "$title"
            sep=", "
        done <"$series"
        echo
    } >"$script"
    gnuplot "$script"
    echo "$outdir/bandwidth-$1.png"
}

plot_bandwidth upload
plot_bandwidth download

[ -s "$data/latency.rows" ] || exit 0
# Bars grouped by scenario (each file's in the order the file gives them),
# a gap between scenarios, a page every $bars_per_page bars; a scenario
# never straddles two pages unless it alone fills more than one.
sort -t "$tab" -s -k1,1 -k2,2n -k3,3n "$data/latency.rows" | awk -F "$tab" -v data="$data" -v per_page="$bars_per_page" '
function colour(role) { # 0xRRGGBB in decimal, for "lc rgb variable"
    if (role == "raw") return 8421504     # grey
    if (role == "curd") return 2062260    # blue
    if (role == "ref") return 2924588     # green
    if (role == "torch") return 16744206  # orange
    return 9725885                        # purple: cupy and any other
}
{ scenario[NR] = $1; line[NR] = $0; count[$1]++ }
END {
    page = 1; position = 0; previous = ""
    for (i = 1; i <= NR; i++) {
        split(line[i], field, "\t")
        if (field[1] != previous) {
            if (position > 0 && position + count[field[1]] > per_page) { page++; position = 0 }
            else if (position > 0) position++ # the gap between scenarios
            previous = field[1]
        }
        if (position >= per_page) { page++; position = 0 }
        position++
        label = field[1] ": " field[6]
        # A long label is cut (its end, the file, kept) rather than run
        # off the picture.
        if (length(label) > 72) label = substr(label, 1, 50) "..." substr(label, length(label) - 18)
        printf "%d\t%g\t%d\t\"%s\"\n", position, field[4], colour(field[5]), label > (data "/latency-" page ".dat")
        roles[page] = roles[page] " " field[5]
        last[page] = position
    }
    for (p = 1; p <= page; p++) print p "\t" last[p] "\t" roles[p] > (data "/latency.pages")
}'

pages=$(wc -l <"$data/latency.pages")
while IFS="$tab" read -r page last roles; do
    script=$outdir/gnuplot/latency-$page.gp
    {
        echo "set terminal pngcairo size 1400,1000 font ',10' noenhanced"
        echo "set output '$outdir/latency-$page.png'"
        printf 'set title "%s\\n%s"\n' "median time per operation, page $page of $pages (lower is better)" "$subtitle"
        echo "set logscale y; set ylabel 'median time per operation (microseconds, log scale)'"
        echo "set xlabel 'scenario: variant'; set grid ytics"
        echo "set style fill solid 0.8; set boxwidth 0.8"
        echo "set xtics rotate by -60 left font ',9'; set bmargin 30; set rmargin 24"
        echo "set xrange [0:$((last + 1))]"
        echo "set key outside top right box title 'who does the work'"
        echo "$sample_label"
        printf "plot '%s' using 1:2:3:xtic(4) with boxes lc rgb variable notitle" "$data/latency-$page.dat"
        # The legend: one empty series per role on this page.
        for role in raw curd ref torch cupy; do
            case " $roles " in *" $role "*) ;; *) continue ;; esac
            case $role in
            raw) printf ", NaN with boxes lc rgb '#808080' title 'raw driver'" ;;
            curd) printf ", NaN with boxes lc rgb '#1f77b4' title 'curd'" ;;
            ref) printf ", NaN with boxes lc rgb '#2ca02c' title 'reference'" ;;
            torch) printf ", NaN with boxes lc rgb '#ff7f0e' title 'PyTorch'" ;;
            cupy) printf ", NaN with boxes lc rgb '#9467bd' title 'CuPy'" ;;
            esac
        done
        echo
    } >"$script"
    gnuplot "$script"
    echo "$outdir/latency-$page.png"
done <"$data/latency.pages"
