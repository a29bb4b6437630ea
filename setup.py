"""Packaging: the CLI package plus the collection.

The collection is installed as site-packages/ansible_collections/gpuprov/gpu, one of the
places Ansible searches by default (it scans sys.path), so `ansible-doc -l gpuprov.gpu`
works after `pip install .` with no path setting. Every folder of the collection becomes a
(namespace) package whose files all ship as package data: roles, playbooks and templates
are not Python but must travel with it.
"""
import os

from setuptools import find_packages, setup

COLLECTIONS_ROOT = "collections"
SKIP_DIRS = {"__pycache__", "output", ".pytest_cache"}


def collection_packages():
    packages, package_dir, package_data = [], {}, {}
    for root, dirs, _files in os.walk(os.path.join(COLLECTIONS_ROOT, "ansible_collections")):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        rel = os.path.relpath(root, COLLECTIONS_ROOT)
        name = rel.replace(os.sep, ".")
        packages.append(name)
        package_dir[name] = root
        package_data[name] = ["*", ".*"]
    return packages, package_dir, package_data


packages, package_dir, package_data = collection_packages()
setup(
    packages=find_packages(include=["gpuprov", "gpuprov.*"]) + packages,
    package_dir={"gpuprov": "gpuprov", **package_dir},
    package_data=package_data,
    include_package_data=False,
)
