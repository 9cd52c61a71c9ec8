#!/bin/sh
# Checks that every row of a curd-bench CSV carries its own scenario's
# label: a row of an upload scenario names no download (DtoH), and a row
# of a download scenario no upload (HtoD). The CSV is written at the end
# of the run from the scenarios the report kept, so a label that a later
# scenario wrote over would show here (it did once: the four 256 MiB
# scenarios all carried the last one's labels).
#
# usage: scripts/check-bench-labels.sh FILE.csv
set -eu
[ $# -eq 1 ] || { echo "usage: $0 FILE.csv" >&2; exit 2; }
awk -F, '
    /^#/ { next } # the metadata lines
    { label = substr($0, length($1) + 2) }
    $1 ~ /upload/ && $1 !~ /download/ && label ~ /download|DtoH/ { bad = bad $0 "\n" }
    $1 ~ /download/ && $1 !~ /upload/ && label ~ /upload|HtoD/ { bad = bad $0 "\n" }
    END {
        if (bad != "") {
            printf "%s: rows labelled for the other direction:\n%s", FILENAME, bad
            exit 1
        }
    }' "$1"
