"""The collection's files and manifests, chosen as `ansible-galaxy collection build` chooses them.

setup.py ships exactly these files in the wheel, with the MANIFEST.json and FILES.json that
ansible-galaxy would put in the Galaxy tarball, so `ansible-galaxy collection verify --offline
gpuprov.gpu` accepts a pip-installed copy. The rules follow ansible-core's
lib/ansible/galaxy/collection/__init__.py (2.19 to 2.21: `_build_files_manifest_walk`,
`_make_manifest`, `_make_entry`, `_build_manifest`, `_build_collection_tar`);
tests/test_collection_package.py compares the result with a real `ansible-galaxy collection
build` of the same folder. Standard library and PyYAML only: this runs inside pip's build.
"""
import fnmatch
import hashlib
import json
import os

import yaml

MANIFEST_FORMAT = 1
# _build_files_manifest_walk: always left out, then galaxy.yml's build_ignore is added.
DEFAULT_IGNORE = ("MANIFEST.json", "FILES.json", "galaxy.yml", "galaxy.yaml", ".git", "*.pyc",
                  "*.retry", "tests/output", "{namespace}-{name}-*.tar.gz")
IGNORE_DIRS = frozenset(("CVS", ".bzr", ".hg", ".git", ".svn", "__pycache__", ".tox"))
# _build_manifest's collection_info keys; galaxy.yml keys it does not list default to None
# (strings), [] (lists) or {} (dependencies), as ansible-galaxy's galaxy.yml schema does.
INFO_KEYS = ("namespace", "name", "version", "authors", "readme", "tags", "description",
             "license", "license_file", "dependencies", "repository", "documentation",
             "homepage", "issues")
LIST_KEYS = ("authors", "tags", "license")


def read_galaxy(collection_dir):
    with open(os.path.join(collection_dir, "galaxy.yml"), encoding="utf-8") as f:
        galaxy = yaml.safe_load(f)
    if galaxy.get("manifest") is not None:
        # ansible-galaxy then selects files with distlib's MANIFEST.in rules, not the walk below.
        raise ValueError("galaxy.yml: manifest: not supported by collection_build.py; use build_ignore")
    return galaxy


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(64 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def _entry(name, ftype, chksum=None):
    return {"name": name, "ftype": ftype, "chksum_type": "sha256" if chksum else None,
            "chksum_sha256": chksum, "format": MANIFEST_FORMAT}


def select_entries(collection_dir, galaxy):
    """FILES.json's `files` list: directories and files with their sha256, '.' first."""
    patterns = [p.format(namespace=galaxy["namespace"], name=galaxy["name"]) for p in DEFAULT_IGNORE]
    patterns += list(galaxy.get("build_ignore") or [])
    top = os.path.realpath(collection_dir)
    entries = [_entry(".", "dir")]

    def ignored(rel):
        return any(fnmatch.fnmatch(rel, p) for p in patterns)

    def walk(path, rel_base):
        for item in sorted(os.listdir(path)):
            abs_path = os.path.join(path, item)
            rel = os.path.join(rel_base, item) if rel_base else item
            if os.path.isdir(abs_path):
                if item in IGNORE_DIRS or ignored(rel):
                    continue
                if os.path.islink(abs_path):
                    # ansible-galaxy skips links to folders outside the collection and keeps the
                    # others as links; the wheel cannot carry links, so refuse both.
                    raise ValueError("%s: a link to a folder cannot ship in the wheel" % rel)
                entries.append(_entry(rel, "dir"))
                walk(abs_path, rel)
            elif not ignored(rel):
                if os.path.islink(abs_path) and not os.path.realpath(abs_path).startswith(top + os.sep):
                    raise ValueError("%s: links outside the collection" % rel)
                entries.append(_entry(rel, "file", _sha256(abs_path)))

    walk(top, "")
    return entries


def bytecode_dirs(entries):
    """The __pycache__ folders pip creates when it byte-compiles the installed .py files.

    `ansible-galaxy collection verify` ignores *.pyc files but reports any folder FILES.json
    does not list, so the wheel's FILES.json lists these (a listed folder that is absent is
    fine: verify only looks for extra ones).
    """
    dirs = sorted({os.path.dirname(e["name"]) for e in entries
                   if e["ftype"] == "file" and e["name"].endswith(".py")})
    return [_entry(os.path.join(d, "__pycache__") if d else "__pycache__", "dir") for d in dirs]


def collection_info(galaxy):
    info = {}
    for key in INFO_KEYS:
        default = [] if key in LIST_KEYS else ({} if key == "dependencies" else None)
        value = galaxy.get(key, default)
        info[key] = default if value is None and default is not None else value
    info["license_file"] = info["license_file"] or None
    return info


def manifests(galaxy, entries):
    """(MANIFEST.json bytes, FILES.json bytes), serialised as _build_collection_tar does."""
    files_json = json.dumps({"files": entries, "format": MANIFEST_FORMAT}, indent=True).encode("utf-8")
    manifest = {
        "collection_info": collection_info(galaxy),
        "file_manifest_file": {"name": "FILES.json", "ftype": "file", "chksum_type": "sha256",
                               "chksum_sha256": hashlib.sha256(files_json).hexdigest(),
                               "format": MANIFEST_FORMAT},
        "format": MANIFEST_FORMAT,
    }
    return json.dumps(manifest, indent=True).encode("utf-8"), files_json
