#!/usr/bin/env bash
# Prints a PKG_CONFIG_PATH under which `swift build` links libsqlite3,
# libzstd and libcrypto from their Debian static archives (the -dev packages
# ship them): a process then does not load, relocate and initialise those
# shared objects before main, which is most of a short command's start-up.
# It makes .build/static-libs, a folder of links to those archives with a .pc
# file for each naming only that folder, so `-lsqlite3` finds nothing but the
# .a. (SwiftPM reads the .pc files itself and keeps their -L of the system
# folder, which would find the .so first.) libxxhash stays shared: Debian's
# archive lacks the x86 dispatch (XXH3_128bits_dispatch) that picks AVX2 or
# AVX-512 at run time; its .pc names a link to the .so in the same folder.
# libcurl and libmicrohttpd stay shared objects loaded with dlopen.
# The Swift runtime's C++ needs libstdc++ and the unwinder: the folder also
# holds links to GCC's libstdc++.a and, as libgcc_s.a, libgcc_eh.a (the
# unwinder -static-libgcc would use), so the driver's -lstdc++ and -lgcc_s
# find archives there first: loading those two shared objects was a large
# share of `trove --version`. Used by scripts/install.sh and
# scripts/bench.sh:
#   PKG_CONFIG_PATH=$(scripts/static-libs.sh) swift build -c release ...
set -euo pipefail
cd "$(dirname "$0")/.."
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
folder="$PWD/.build/static-libs"
mkdir -p "$folder"
# package name, library, file linked (.a or .so), what the archive needs
while read -r package name kind needs; do
  file=/usr/lib/$multiarch/lib$name.$kind
  [ -f "$file" ] || { echo "trove static-libs: $file is missing (scripts/deps.sh build)" >&2; exit 69; }
  ln -sfn "$file" "$folder/lib$name.$kind"
  printf 'Name: %s\nDescription: %s\nVersion: 0\nLibs: -L%s -l%s %s\nCflags:\n' \
    "$package" "lib$name.$kind" "$folder" "$name" "$needs" >"$folder/$package.pc"
done <<'LIST'
sqlite3 sqlite3 a -lm
libzstd zstd a
libxxhash xxhash so
libcrypto crypto a
LIST
for pair in libstdc++.a:libstdc++.a libgcc_eh.a:libgcc_s.a; do
  # The archives of the GCC the toolchain's clang links against (swift's
  # link driver); either compiler prints the bare name when it has no such file.
  archive=$({ clang -print-file-name="${pair%%:*}" || gcc -print-file-name="${pair%%:*}"; } 2>/dev/null || true)
  [ -f "$archive" ] || { echo "trove static-libs: GCC's ${pair%%:*} is missing (Debian: libstdc++-12-dev and libgcc-12-dev, which the Swift toolchain needs too)" >&2; exit 69; }
  ln -sfn "$archive" "$folder/${pair##*:}"
done
echo "$folder"
