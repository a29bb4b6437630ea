"""Packaging: the CLI package plus the collection.

The collection is installed as site-packages/ansible_collections/gpuprov/gpu, one of the
places Ansible searches by default (it scans sys.path), so `ansible-doc -l gpuprov.gpu`
works after `pip install .` with no path setting. It ships as `ansible-galaxy collection
build` would ship it (collection_build.py): the same files, chosen by galaxy.yml's
build_ignore, plus MANIFEST.json and FILES.json, so `ansible-galaxy collection verify
--offline gpuprov.gpu` accepts the installed copy. galaxy.yml's version is the one version
number: the wheel takes it from there.
"""
import os
import shutil
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import collection_build  # noqa: E402  (beside this file; pip's build does not put it on sys.path)

COLLECTIONS_ROOT = "collections"
COLLECTION = os.path.join(COLLECTIONS_ROOT, "ansible_collections", "gpuprov", "gpu")
GALAXY = collection_build.read_galaxy(os.path.join(HERE, COLLECTION))
ENTRIES = collection_build.select_entries(os.path.join(HERE, COLLECTION), GALAXY)


def collection_packages():
    """Every selected folder becomes a (namespace) package whose selected files are its data."""
    packages = ["ansible_collections", "ansible_collections.gpuprov"]
    package_dir = {"ansible_collections": os.path.join(COLLECTIONS_ROOT, "ansible_collections"),
                   "ansible_collections.gpuprov": os.path.join(COLLECTIONS_ROOT, "ansible_collections", "gpuprov")}
    package_data = {"ansible_collections": [], "ansible_collections.gpuprov": []}
    top = "ansible_collections.gpuprov.gpu"
    for entry in ENTRIES:
        rel = entry["name"]
        if entry["ftype"] == "dir":
            name = top if rel == "." else top + "." + rel.replace("/", ".")
            packages.append(name)
            package_dir[name] = COLLECTION if rel == "." else os.path.join(COLLECTION, rel)
            package_data[name] = []
        else:
            folder, base = os.path.split(rel)
            name = top + ("." + folder.replace("/", ".") if folder else "")
            package_data[name].append(base)
    return packages, package_dir, package_data


SELECTED = {(e["name"]) for e in ENTRIES if e["ftype"] == "file"}


class build_collection_py(build_py):
    """build_py that ships only the selected collection files and writes the manifests."""

    def run(self):
        # build/lib survives between builds: a file dropped from the selection must not linger.
        shutil.rmtree(os.path.join(self.build_lib, "ansible_collections"), ignore_errors=True)
        super().run()
        target = os.path.join(self.build_lib, "ansible_collections", "gpuprov", "gpu")
        manifest_json, files_json = collection_build.manifests(
            GALAXY, ENTRIES + collection_build.bytecode_dirs(ENTRIES))
        for name, data in (("MANIFEST.json", manifest_json), ("FILES.json", files_json)):
            with open(os.path.join(target, name), "wb") as f:
                f.write(data)

    def find_package_modules(self, package, package_dir):
        # setuptools takes every *.py of a package as a module; build_ignore must win.
        modules = super().find_package_modules(package, package_dir)
        if not package.startswith("ansible_collections"):
            return modules
        return [m for m in modules
                if os.path.relpath(m[2], COLLECTION).replace(os.sep, "/") in SELECTED]


packages, package_dir, package_data = collection_packages()
setup(
    version=GALAXY["version"],
    packages=find_packages(include=["gpuprov", "gpuprov.*"]) + packages,
    package_dir={"gpuprov": "gpuprov", **package_dir},
    package_data=package_data,
    include_package_data=False,
    cmdclass={"build_py": build_collection_py},
)
