#!/usr/bin/env bash
# A real pair of consecutive releases of a large uncompressed artifact, for
# the chunks benchmark: the source releases (sdists) of a PyPI project, by
# default numpy 2.2.5 and 2.2.6, fetched from PyPI, checked against the sha256
# PyPI lists and unpacked to the .tar inside each .tar.gz (what pip builds
# from). Kept in .build/bench-data for later runs. Prints OLD:NEW.
#   scripts/real-pair.sh [PROJECT OLD NEW]
set -euo pipefail
cd "$(dirname "$0")/.."
project=${1:-numpy}
old=${2:-2.2.5}
new=${3:-2.2.6}
dir=$(pwd)/.build/bench-data
mkdir -p "$dir"
trap 'rm -f "$dir"/*.part' EXIT
for version in "$old" "$new"; do
  tar="$dir/$project-$version.tar"
  [ -s "$tar" ] && continue
  gz=$(/usr/bin/python3 - "$project" "$version" "$dir" <<'EOF'
import hashlib, json, os, sys, urllib.parse, urllib.request

project, version, folder = sys.argv[1:]
index = f"https://pypi.org/pypi/{project}/json"
try:
    with urllib.request.urlopen(index, timeout=60) as response:
        release = json.load(response)["releases"].get(version, [])
    sdists = [f for f in release if f["packagetype"] == "sdist"]
    if not sdists:
        sys.exit(f"{index}: no source release of {project} {version}")
    sdist = sdists[0]
    # PyPI's links may be relative to the page (a mirror's are).
    url = urllib.parse.urljoin(index, sdist["url"])
    path = os.path.join(folder, sdist["filename"])
    with urllib.request.urlopen(url, timeout=600) as response:
        data = response.read()
except OSError as error:
    sys.exit(f"cannot fetch {project} {version} from PyPI: {error}")
if hashlib.sha256(data).hexdigest() != sdist["digests"]["sha256"]:
    sys.exit(f"{url}: not the sha256 PyPI lists for it")
with open(path + ".part", "wb") as out:
    out.write(data)
os.rename(path + ".part", path)
print(path)
EOF
  )
  gzip -dc "$gz" >"$tar.part"
  mv "$tar.part" "$tar"
  rm -f "$gz"
done
echo "$dir/$project-$old.tar:$dir/$project-$new.tar"
