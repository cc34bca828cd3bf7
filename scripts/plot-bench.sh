#!/usr/bin/env bash
# Renders trove-bench's JSON as a PNG: one bar per figure, its ratio to the
# reference measured in the same run (log scale; right of 1 = Trove better).
#   scripts/plot-bench.sh [results.json] [out.png]
set -euo pipefail
cd "$(dirname "$0")/.."
json=${1:-.build/benchmarks/latest.json}
png=${2:-Docs/benchmarks.png}

if ! command -v gnuplot >/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gnuplot-nox >/dev/null
fi

data=$(mktemp)
trap 'rm -f "$data"' EXIT
python3 - "$json" > "$data" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for r in report["results"]:
    if r.get("ratio") is None:
        continue
    label = f'{r["name"]} vs {r["reference_name"]}'.replace('"', "'")
    print(f'"{label}"\t{r["ratio"]:.4f}\t{r["suite"]}')
PY
title=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("trove-bench %s: %s, %d cores, Linux %s" % (r["date"][:10], r["cpu"], r["cores"], r["kernel"]))' "$json")
rows=$(wc -l < "$data")
gnuplot <<GP
set terminal pngcairo noenhanced size 1400,$((120 + rows * 22)) font "DejaVu Sans,10"
set output "$png"
set title "$title\nratio to the reference measured in the same run (log scale; > 1: Trove faster or smaller)"
set style fill solid 0.8 border -1
set logscale x 10
set xrange [0.005:10000]
set grid xtics
set ytics nomirror
set yrange [-1:$rows]
unset key
set xlabel "ratio"
set arrow from 1, graph 0 to 1, graph 1 nohead lc rgb "black" lw 2
set datafile separator "\t"
plot "$data" using (\$2/2.0):0:(0.001):(\$2):(\$0-0.35):(\$0+0.35):yticlabels(1) with boxxyerrorbars lc rgb "#3b7dd8"
GP
echo "trove: plot written to $png" >&2
