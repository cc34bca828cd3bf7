#!/usr/bin/env bash
# Builds the library's DocC documentation with the toolchain's own docc (no
# plugin): extracts the Trove module's symbol graph, then converts
# Docs/Trove.docc. Broken symbol links fail the build.
# Output: .build/docs/Trove.doccarchive
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh build
# The library's module alone: `swift package dump-symbol-graph` walks every
# module, and fails on the test-discovery modules once tests have been built.
swift build --target Trove >/dev/null
bin=$(swift build --show-bin-path)
toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
triple=$(swiftc -print-target-info | sed -n 's/.*"triple": *"\([^"]*\)".*/\1/p' | head -n 1)
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
maps=()
for map in Sources/C*/module.modulemap; do maps+=(-Xcc "-fmodule-map-file=$PWD/$map"); done
"$toolchain/swift-symbolgraph-extract" -module-name Trove -target "$triple" \
  -module-cache-path "$bin/ModuleCache" "${maps[@]}" -I "$bin/Modules" \
  -minimum-access-level public -omit-extension-block-symbols -output-dir "$graphs"
mkdir -p .build/docs
docc=$(command -v docc || echo "$toolchain/docc")
"$docc" convert Docs/Trove.docc \
  --additional-symbol-graph-dir "$graphs" \
  --fallback-display-name Trove --fallback-bundle-identifier org.trove.Trove \
  --output-path .build/docs/Trove.doccarchive \
  --warnings-as-errors
echo "trove: documentation in .build/docs/Trove.doccarchive" >&2
