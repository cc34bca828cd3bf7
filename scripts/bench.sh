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
swift build -c release --static-swift-stdlib --product trove >&2
swift build -c release --static-swift-stdlib --product trove-bench >&2
bin=$(swift build -c release --show-bin-path)
xfs_args=()
[ -n "${TROVE_TEST_XFS:-}" ] && xfs_args=(--xfs "$TROVE_TEST_XFS")
"$bin/trove-bench" --trove "$bin/trove" "${xfs_args[@]}" "$@"
