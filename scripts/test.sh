#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what is missing,
# makes the test filesystems (a loop-mounted XFS with reflink=1, a small tmpfs),
# builds, runs every test, and checks formatting and the docs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh test
source scripts/testfs.sh
# One S3 service (Ceph's radosgw on a one-node cluster on 127.0.0.1) for the whole run.
trove_s3_dir=$(mktemp -d /tmp/trove-s3.XXXXXX)
# Credential bindings the tests' library calls make stay out of this user's home.
XDG_CONFIG_HOME=$(mktemp -d /tmp/trove-config.XXXXXX)
export XDG_CONFIG_HOME
trap 'scripts/s3-ceph.sh stop "$trove_s3_dir"; rm -rf "$trove_s3_dir" "$XDG_CONFIG_HOME"; trove_testfs_cleanup' EXIT
if scripts/s3-ceph.sh start "$trove_s3_dir" >/dev/null; then export TROVE_TEST_S3=$trove_s3_dir; fi

swift build --build-tests
swift test --skip-build
# The benchmark target works (speed is not asserted: these machines are shared).
"$(swift build --show-bin-path)/trove-bench" --quick ${TROVE_TEST_XFS:+--xfs "$TROVE_TEST_XFS"} \
  --json .build/benchmarks/quick.json >/dev/null
swift format lint --strict --recursive Package.swift Sources Tests Benchmarks
scripts/docs.sh >/dev/null
echo "trove: all checks passed" >&2
