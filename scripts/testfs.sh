# Sourced by scripts/test.sh: creates the filesystems the tests run on and
# exports where they are, or why they could not be made.
#   TROVE_TEST_XFS    a loop-mounted XFS made with reflink=1 (clones work)
#   TROVE_TEST_SMALL  an 8 MiB tmpfs (for ENOSPC, and a filesystem that cannot clone)
#   TROVE_TEST_PRESSURE  a 320 MiB XFS with reflink=1 of its own, which the storage-
#                     pressure tests fill to the brim without disturbing the others
#   TROVE_TEST_FULL4K, TROVE_TEST_FULL1K  16 MiB ext4 volumes (4 KiB and 1 KiB
#                     blocks, no blocks reserved for root) the full-volume tests fill
#                     to the last block with dd
#   TROVE_TEST_*_UNAVAILABLE  the reason, when one could not be made
# Everything is unmounted and removed on exit.

trove_testfs_dir=$(mktemp -d /tmp/trove-testfs.XXXXXX)
trove_testfs_cleanup() {
  for m in "$trove_testfs_dir/xfs" "$trove_testfs_dir/small" "$trove_testfs_dir/pressure" \
    "$trove_testfs_dir/full4k" "$trove_testfs_dir/full1k"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  rm -rf "$trove_testfs_dir"
}
trap trove_testfs_cleanup EXIT

# trove_testfs_xfs NAME SIZE VARIABLE: makes and mounts an XFS image with
# reflink=1 at $trove_testfs_dir/NAME and exports VARIABLE (or
# VARIABLE_UNAVAILABLE with the reason).
trove_testfs_xfs() {
  local name=$1 size=$2 var=$3 out
  mkdir -p "$trove_testfs_dir/$name"
  truncate -s "$size" "$trove_testfs_dir/$name.img"
  if ! out=$(mkfs.xfs -q -m reflink=1 "$trove_testfs_dir/$name.img" 2>&1); then
    export "${var}_UNAVAILABLE=mkfs.xfs -m reflink=1 failed: ${out%%$'\n'*}"
  elif ! out=$(mount -o loop "$trove_testfs_dir/$name.img" "$trove_testfs_dir/$name" 2>&1); then
    export "${var}_UNAVAILABLE=mount -o loop of an XFS image failed: ${out%%$'\n'*}"
  else
    export "$var=$trove_testfs_dir/$name"
  fi
}

# trove_testfs_ext4 NAME BLOCKSIZE VARIABLE: a 16 MiB ext4 image with no
# blocks reserved for root, mounted at $trove_testfs_dir/NAME.
trove_testfs_ext4() {
  local name=$1 block=$2 var=$3 out
  mkdir -p "$trove_testfs_dir/$name"
  truncate -s 16M "$trove_testfs_dir/$name.img"
  if ! out=$(mkfs.ext4 -q -F -m 0 -b "$block" "$trove_testfs_dir/$name.img" 2>&1); then
    export "${var}_UNAVAILABLE=mkfs.ext4 -b $block failed: ${out%%$'\n'*}"
  elif ! out=$(mount -o loop "$trove_testfs_dir/$name.img" "$trove_testfs_dir/$name" 2>&1); then
    export "${var}_UNAVAILABLE=mount -o loop of an ext4 image failed: ${out%%$'\n'*}"
  else
    export "$var=$trove_testfs_dir/$name"
  fi
}

if [ "$(id -u)" -ne 0 ]; then
  export TROVE_TEST_XFS_UNAVAILABLE="not root: loop-mounting an XFS image needs root"
  export TROVE_TEST_PRESSURE_UNAVAILABLE="not root: loop-mounting an XFS image needs root"
  export TROVE_TEST_SMALL_UNAVAILABLE="not root: mounting a small tmpfs needs root"
  export TROVE_TEST_FULL4K_UNAVAILABLE="not root: loop-mounting an ext4 image needs root"
  export TROVE_TEST_FULL1K_UNAVAILABLE="not root: loop-mounting an ext4 image needs root"
else
  trove_testfs_ext4 full4k 4096 TROVE_TEST_FULL4K
  trove_testfs_ext4 full1k 1024 TROVE_TEST_FULL1K
  trove_testfs_xfs xfs "${TROVE_TESTFS_XFS_SIZE:-1G}" TROVE_TEST_XFS
  trove_testfs_xfs pressure 320M TROVE_TEST_PRESSURE
  mkdir -p "$trove_testfs_dir/small"
  if ! out=$(mount -t tmpfs -o size=8m tmpfs "$trove_testfs_dir/small" 2>&1); then
    export TROVE_TEST_SMALL_UNAVAILABLE="mount of an 8 MiB tmpfs failed: ${out%%$'\n'*}"
  else
    export TROVE_TEST_SMALL="$trove_testfs_dir/small"
  fi
fi
echo "trove: test filesystems: xfs=${TROVE_TEST_XFS:-none (${TROVE_TEST_XFS_UNAVAILABLE})}" >&2
echo "trove: test filesystems: pressure=${TROVE_TEST_PRESSURE:-none (${TROVE_TEST_PRESSURE_UNAVAILABLE})}" >&2
echo "trove: test filesystems: small=${TROVE_TEST_SMALL:-none (${TROVE_TEST_SMALL_UNAVAILABLE})}" >&2
echo "trove: test filesystems: full=${TROVE_TEST_FULL4K:-none (${TROVE_TEST_FULL4K_UNAVAILABLE})} ${TROVE_TEST_FULL1K:-none (${TROVE_TEST_FULL1K_UNAVAILABLE})}" >&2
