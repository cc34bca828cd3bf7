#!/usr/bin/env bash
# Builds the library's DocC documentation with the toolchain's own docc (no
# plugin): dumps the symbol graph, then converts Docs/Trove.docc. Broken symbol
# links fail the build. Output: .build/docs/Trove.doccarchive
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh build
swift package dump-symbol-graph >/dev/null
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
cp "$(swift build --show-bin-path)/../symbolgraph/Trove.symbols.json" "$graphs/"
mkdir -p .build/docs
docc=$(command -v docc || echo "$(dirname "$(readlink -f "$(command -v swift)")")/docc")
"$docc" convert Docs/Trove.docc \
  --additional-symbol-graph-dir "$graphs" \
  --fallback-display-name Trove --fallback-bundle-identifier org.trove.Trove \
  --output-path .build/docs/Trove.doccarchive \
  --warnings-as-errors
echo "trove: documentation in .build/docs/Trove.doccarchive" >&2
