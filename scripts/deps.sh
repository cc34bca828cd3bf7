#!/usr/bin/env bash
# Installs the Debian packages Trove needs, if any are missing.
#   scripts/deps.sh build   libraries to build (libxxhash, libzstd, libsqlite3, libcurl,
#                           libcrypto, libmicrohttpd)
#   scripts/deps.sh demo    also nginx, which the demo serves a download from
#   scripts/deps.sh test    also the tools the tests and benchmarks compare against
#                           (xxhsum, zstd, curl, mkfs.xfs, mount/losetup, setpriv) and the
#                           servers the tests start on 127.0.0.1 themselves (nginx with its
#                           WebDAV module, redis-server, python3, and Ceph's mon, osd and
#                           radosgw for an S3 service, faketime for a skewed clock; duperemove
#                           and zsync, which the chunks benchmark compares against), a Python
#                           venv at .build/test-venv with pip, uv and prometheus_client from
#                           PyPI (the clients `trove serve`'s mirror and /metrics tests run),
#                           and boto3 and awscli from PyPI in .build/test-tools/python (the S3
#                           interop tests and benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."

# The venv of the serve tests, made when missing (a venv is cheap to make again;
# .build/ goes with a clean build).
make_test_venv() {
  local venv=.build/test-venv
  [ -x "$venv/bin/uv" ] && "$venv/bin/python" -c 'import prometheus_client' 2>/dev/null && return 0
  echo "trove: making $venv (pip, uv, prometheus_client from PyPI)" >&2
  rm -rf "$venv"
  mkdir -p .build
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip uv prometheus_client \
    || { echo "trove: could not install pip, uv and prometheus_client into $venv: the serve tests that need them are skipped" >&2; return 0; }
}

# boto3 and awscli in a venv of their own (never the system's Python),
# installed with pip from PyPI when missing; the tests and benchmarks find
# them there, and skip what needs them, saying so, when they are not.
python_tools() {
  local venv
  venv="$(cd "$(dirname "$0")/.." && pwd)/.build/test-tools/python"
  if "$venv/bin/python" -c "import boto3" 2>/dev/null && [ -x "$venv/bin/aws" ]; then return 0; fi
  echo "trove: installing boto3 and awscli from PyPI into $venv" >&2
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check boto3 awscli >/dev/null
}

packages=(libxxhash-dev libzstd-dev libsqlite3-dev libcurl4-openssl-dev libssl-dev libmicrohttpd-dev pkg-config)
if [ "${1:-build}" = "test" ]; then
  packages+=(xxhash zstd curl xfsprogs util-linux e2fsprogs time nginx-light python3 python3-venv
    python3-pip redis-server ceph-mon ceph-osd radosgw ceph-common faketime duperemove zsync openssl)
elif [ "${1:-build}" = "demo" ]; then
  packages+=(nginx-light python3 redis-server)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  if [ "${1:-build}" = "test" ]; then
    make_test_venv
    python_tools
  fi
  exit 0
fi

echo "trove: installing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "trove: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# Packages such as nginx start a system service when installed; the tests
# start their own servers on loopback, so no service may start (policy-rc.d
# exit 101 tells invoke-rc.d "not allowed").
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ "${1:-build}" = "test" ]; then
  make_test_venv
  python_tools
fi
exit 0
