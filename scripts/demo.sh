#!/usr/bin/env bash
# The main job, from a fresh Debian machine: installs what is missing, builds
# trove in release mode, and puts and gets a file through the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh build
swift build -c release --product trove >&2
trove=$(swift build -c release --show-bin-path)/trove

work=$(mktemp -d /tmp/trove-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
store="$work/store"
head -c 64M /dev/urandom > "$work/model.bin"

echo "\$ trove put model.bin"
digest=$("$trove" --store "$store" put "$work/model.bin" | cut -d' ' -f1)
echo "$digest  model.bin"
echo "\$ trove put model.bin   # again: stored once"
"$trove" --store "$store" put -v "$work/model.bin"
echo "\$ trove get $digest copy.bin -v"
"$trove" --store "$store" get -v "$digest" "$work/copy.bin" || true
cmp "$work/model.bin" "$work/copy.bin" && echo "copy.bin matches model.bin"
echo "\$ trove has $digest && echo present"
"$trove" --store "$store" has "$digest" && echo present
echo "\$ trove stats"
"$trove" --store "$store" stats
