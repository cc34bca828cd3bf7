#!/usr/bin/env bash
# Runs trove-bench (release build) with a loop-mounted reflink XFS for the
# clone figures. Arguments go to trove-bench: --quick, --suite NAME, --json PATH.
#   scripts/bench.sh                 the full run (about 10 minutes here)
#   scripts/bench.sh --quick         a small run that proves the target works
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh test
export TROVE_TESTFS_XFS_SIZE=${TROVE_TESTFS_XFS_SIZE:-8G}
source scripts/testfs.sh

# This kind of VM returns free guest memory to its host (virtio-balloon free
# page reporting), and the next process to write into it pays the host's
# re-backing: writing 512 MiB takes 0.2 s normally, 0.6-1.8 s then. That
# measures the host, not the program, and falls on whichever contender comes
# next. For the run, pages must stay free 5 minutes (the most it accepts) before
# they are reported, and trove-bench warms memory before each series;
# the setting is put back on exit. (A kernel without the knob is left alone;
# trove-bench prints what it found.)
reporting=/sys/module/page_reporting/parameters/min_free_ms
if [ -w "$reporting" ]; then
  saved_min_free_ms=$(cat "$reporting")
  trove_bench_cleanup() {
    echo "$saved_min_free_ms" >"$reporting"
    trove_testfs_cleanup
  }
  trap trove_bench_cleanup EXIT
  echo 300000 >"$reporting" 2>/dev/null || true
fi
# The chunks suite's real pair of releases, fetched once (.build/bench-data),
# for a run that includes that suite.
if [ -z "${TROVE_BENCH_CHUNKS_PAIR:-}" ] && [[ " $* " != *" --quick "* ]] \
  && { [[ " $* " != *" --suite "* ]] || [[ " $* " == *" --suite chunks "* ]]; }; then
  pair_errors=$(mktemp)
  if pair=$(scripts/real-pair.sh 2>"$pair_errors"); then
    export TROVE_BENCH_CHUNKS_PAIR=$pair
  else
    export TROVE_BENCH_CHUNKS_PAIR_UNAVAILABLE="scripts/real-pair.sh failed: $(tail -n 1 "$pair_errors")"
  fi
  rm -f "$pair_errors"
fi
static=$(scripts/static-libs.sh)
# The binary scripts/install.sh makes (see there).
PKG_CONFIG_PATH=$static swift build -c release --static-swift-stdlib --product trove \
  -Xlinker -no-pie >&2
PKG_CONFIG_PATH=$static swift build -c release --static-swift-stdlib --product trove-bench >&2
bin=$(swift build -c release --show-bin-path)
xfs_args=()
[ -n "${TROVE_TEST_XFS:-}" ] && xfs_args=(--xfs "$TROVE_TEST_XFS")
"$bin/trove-bench" --trove "$bin/trove" "${xfs_args[@]}" "$@"
