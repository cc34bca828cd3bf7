# Sourced by scripts/test.sh: creates the filesystems the tests run on and
# exports where they are, or why they could not be made.
#   TROVE_TEST_XFS    a loop-mounted XFS made with reflink=1 (clones work)
#   TROVE_TEST_SMALL  an 8 MiB tmpfs (for ENOSPC, and a filesystem that cannot clone)
#   TROVE_TEST_XFS_UNAVAILABLE / TROVE_TEST_SMALL_UNAVAILABLE  the reason, when not
# Everything is unmounted and removed on exit.

trove_testfs_dir=$(mktemp -d /tmp/trove-testfs.XXXXXX)
trove_testfs_cleanup() {
  for m in "$trove_testfs_dir/xfs" "$trove_testfs_dir/small"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  rm -rf "$trove_testfs_dir"
}
trap trove_testfs_cleanup EXIT

if [ "$(id -u)" -ne 0 ]; then
  export TROVE_TEST_XFS_UNAVAILABLE="not root: loop-mounting an XFS image needs root"
  export TROVE_TEST_SMALL_UNAVAILABLE="not root: mounting a small tmpfs needs root"
else
  mkdir -p "$trove_testfs_dir/xfs" "$trove_testfs_dir/small"
  truncate -s "${TROVE_TESTFS_XFS_SIZE:-1G}" "$trove_testfs_dir/xfs.img"
  if ! out=$(mkfs.xfs -q -m reflink=1 "$trove_testfs_dir/xfs.img" 2>&1); then
    export TROVE_TEST_XFS_UNAVAILABLE="mkfs.xfs -m reflink=1 failed: ${out//$'\n'/ }"
  elif ! out=$(mount -o loop "$trove_testfs_dir/xfs.img" "$trove_testfs_dir/xfs" 2>&1); then
    export TROVE_TEST_XFS_UNAVAILABLE="mount -o loop of an XFS image failed: ${out//$'\n'/ }"
  else
    export TROVE_TEST_XFS="$trove_testfs_dir/xfs"
  fi
  if ! out=$(mount -t tmpfs -o size=8m tmpfs "$trove_testfs_dir/small" 2>&1); then
    export TROVE_TEST_SMALL_UNAVAILABLE="mount of an 8 MiB tmpfs failed: ${out//$'\n'/ }"
  else
    export TROVE_TEST_SMALL="$trove_testfs_dir/small"
  fi
fi
echo "trove: test filesystems: xfs=${TROVE_TEST_XFS:-none (${TROVE_TEST_XFS_UNAVAILABLE})}" >&2
echo "trove: test filesystems: small=${TROVE_TEST_SMALL:-none (${TROVE_TEST_SMALL_UNAVAILABLE})}" >&2
