#!/usr/bin/env bash
# The main job, from a fresh Debian machine: installs what is missing, builds
# trove in release mode, fetches a download from a local nginx (started here on
# 127.0.0.1, stopped at the end) the way a package manager would, then puts and
# gets a file through the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh demo
PKG_CONFIG_PATH=$(scripts/static-libs.sh) swift build -c release --static-swift-stdlib --product trove \
  -Xlinker -no-pie >&2
trove=$(swift build -c release --show-bin-path)/trove

work=$(mktemp -d /tmp/trove-demo.XXXXXX)
cleanup() {
  scripts/nginx.sh stop "$work/nginx" || true
  rm -rf "$work"
}
trap cleanup EXIT
store="$work/store"
mkdir -p "$work/www"
head -c 64M /dev/urandom > "$work/www/model.bin"
port=$(scripts/nginx.sh start "$work/www" "$work/nginx")
url="http://127.0.0.1:$port/model.bin"
sha=$(sha256sum "$work/www/model.bin" | cut -c1-64)

echo "\$ trove fetch --expect sha256:${sha:0:16}… $url -o model.bin -v"
"$trove" --store "$store" fetch -v --expect "sha256:$sha" "$url" -o "$work/model.bin"
cmp "$work/www/model.bin" "$work/model.bin" && echo "model.bin matches the server's file"
echo "\$ trove fetch $url -v   # again: revalidated, no body"
"$trove" --store "$store" fetch -v "$url"
echo "\$ trove fetch --expect sha256:${sha:0:16}… http://127.0.0.1:$port/mirror/model.bin   # known by its checksum: no request"
"$trove" --store "$store" fetch -v --expect "sha256:$sha" "http://127.0.0.1:$port/mirror/model.bin"
echo "\$ trove keys"
"$trove" --store "$store" keys

echo "\$ trove put model.bin   # the same bytes, put: stored once"
digest=$("$trove" --store "$store" put -v "$work/model.bin" | cut -d' ' -f1)
echo "\$ trove get $digest copy.bin -v"
"$trove" --store "$store" get -v "$digest" "$work/copy.bin" || true
cmp "$work/model.bin" "$work/copy.bin" && echo "copy.bin matches model.bin"
echo "\$ trove has $digest && echo present"
"$trove" --store "$store" has "$digest" && echo present
echo "\$ trove stats"
"$trove" --store "$store" stats
