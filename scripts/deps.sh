#!/usr/bin/env bash
# Installs the Debian packages Trove needs, if any are missing.
#   scripts/deps.sh build   libraries to build (libxxhash, libzstd, libsqlite3)
#   scripts/deps.sh test    also the tools the tests and benchmarks compare against
#                           (xxhsum, zstd, mkfs.xfs, mount/losetup, setpriv)
set -euo pipefail

packages=(libxxhash-dev libzstd-dev libsqlite3-dev pkg-config)
if [ "${1:-build}" = "test" ]; then
  packages+=(xxhash zstd xfsprogs util-linux e2fsprogs time)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "trove: installing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "trove: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
