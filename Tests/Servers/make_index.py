#!/usr/bin/env python3
"""Lays out a tiny Python package index, offline, for the mirror tests.

    make_index.py INDEX FILES FILES_URL NAME==VERSION...

Builds each wheel by hand (a zip with a module and its .dist-info: what pip
and uv read), writes it to FILES/packages/, and a PEP 503 page per project
under INDEX/simple/<name>/index.html linking to FILES_URL/packages/<wheel>
with a #sha256= fragment, plus INDEX/simple/index.html, and the same pages in
PEP 691 JSON as INDEX/simple/<name>/index.json. Prints one line per wheel:
its file name and sha256.
"""
import base64
import hashlib
import json
import os
import sys
import zipfile


def wheel(files, name, version):
    dist = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(files, "packages", f"{dist}-py3-none-any.whl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    members = {
        f"{name.replace('-', '_')}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ).encode(),
        f"{dist}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: trove-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for member, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{member},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    members[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            archive.writestr(info, data)
    with open(path, "rb") as f:
        return os.path.basename(path), hashlib.sha256(f.read()).hexdigest()


def main():
    index, files, files_url = sys.argv[1:4]
    projects = {}
    for spec in sys.argv[4:]:
        name, version = spec.split("==")
        filename, sha256 = wheel(files, name, version)
        projects.setdefault(name, []).append((filename, sha256))
        print(filename, sha256)
    simple = os.path.join(index, "simple")
    os.makedirs(simple, exist_ok=True)
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write("<!DOCTYPE html>\n<html><body>\n")
        for name in projects:
            f.write(f'<a href="{name}/">{name}</a>\n')
        f.write("</body></html>\n")
    for name, wheels in projects.items():
        folder = os.path.join(simple, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "index.html"), "w") as f:
            f.write(f"<!DOCTYPE html>\n<html><head><title>Links for {name}</title></head><body>\n")
            for filename, sha256 in wheels:
                f.write(
                    f'<a href="{files_url}/packages/{filename}#sha256={sha256}">{filename}</a><br/>\n'
                )
            f.write("</body></html>\n")
        page = {
            "meta": {"api-version": "1.0"},
            "name": name,
            "files": [
                {"filename": filename, "url": f"{files_url}/packages/{filename}",
                 "hashes": {"sha256": sha256}}
                for filename, sha256 in wheels
            ],
        }
        with open(os.path.join(folder, "index.json"), "w") as f:
            json.dump(page, f)


if __name__ == "__main__":
    main()
