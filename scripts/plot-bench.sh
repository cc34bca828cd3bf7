#!/usr/bin/env bash
# Renders trove-bench's JSON as a PNG: one bar per figure, its ratio to the
# reference measured in the same run (log scale; right of 1 = Trove better).
#   scripts/plot-bench.sh [results.json] [out.png]
# With --scale, the scale suite's curves instead: each figure of a store size
# divided by the same figure of the smallest store, against the number of
# objects (log scale; a flat line at 1 is a cost that does not grow).
#   scripts/plot-bench.sh --scale [results.json] [out.png]
set -euo pipefail
cd "$(dirname "$0")/.."
scale=0
if [ "${1:-}" = --scale ]; then scale=1; shift; fi
json=${1:-.build/benchmarks/latest.json}
png=${2:-Docs/benchmarks.png}

if ! command -v gnuplot >/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gnuplot-nox >/dev/null
fi

if [ "$scale" = 1 ]; then
  data=$(mktemp)
  trap 'rm -f "$data"' EXIT
  # One block per figure: objects, then its median over the smallest store's.
  python3 - "$json" > "$data" <<'PY'
import json, sys, re
report = json.load(open(sys.argv[1]))
curves = {}
for r in report["results"]:
    if r["suite"] != "scale" or r["unit"] == "objects/s" or r.get("reference_name", "").startswith(("find", "xxhsum")):
        continue
    name = re.sub(r", [0-9.]+[kM]? objects$", "", r["name"])
    curves.setdefault(name, []).append((int(r["parameters"]["objects"]), r["trove"]["median"]))
for name, points in curves.items():
    points.sort()
    if len(points) < 2 or points[0][1] <= 0:
        continue
    print(f'"{name}"')
    for objects, value in points:
        print(f"{objects}\t{value / points[0][1]:.4f}")
    print("\n")
PY
  title=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("trove-bench scale %s: %s, %d cores, Linux %s" % (r["date"][:10], r["cpu"], r["cores"], r["kernel"]))' "$json")
  gnuplot <<GP
set terminal pngcairo noenhanced size 1200,700 font "DejaVu Sans,10"
set output "$png"
set title "$title\ncost at each store size ÷ the same at the smallest store (log scales; 1 = does not grow)"
set logscale xy 10
set grid
set key outside right
set xlabel "objects in the store"
set ylabel "× the smallest store"
plot for [i=0:*] "$data" index i using 1:2 with linespoints title columnheader(1)
GP
  echo "trove: plot written to $png" >&2
  exit 0
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
