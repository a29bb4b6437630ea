# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The gpu_mig role copies exactly the module_utils files the boot-time restore imports.

The restore program runs at boot outside Ansible, so AnsiballZ does not collect its imports:
the role's list (``_sources`` in roles/gpu_mig/tasks/persist.yml) must name every
module_utils file the program reaches, or the node fails at boot with an ImportError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import yaml

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULE_UTILS = os.path.join(COLLECTION, "plugins", "module_utils")
ROLE = os.path.join(COLLECTION, "roles", "gpu_mig")
PACKAGE = "ansible_collections.gpuprov.gpu.plugins.module_utils"


def _imported_modules(path):
    """Dotted names below module_utils that the file at ``path`` imports (at any depth)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:  # from ...module_utils import nvml
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module[len(PACKAGE) + 1:])
        elif isinstance(node, ast.Import):
            found.update(alias.name[len(PACKAGE) + 1:] for alias in node.names
                         if alias.name.startswith(PACKAGE + "."))
    return found


def _files_of(module):
    """The files importing ``module`` (``mps.constants``) executes, relative to module_utils."""
    parts = module.split(".")
    files = [os.path.join(*(parts[:depth] + ["__init__.py"])) for depth in range(1, len(parts))]
    as_package = os.path.join(*(parts + ["__init__.py"]))
    if os.path.isfile(os.path.join(MODULE_UTILS, as_package)):
        files.append(as_package)
    else:
        files.append(os.path.join(*parts) + ".py")
    return files


def imported_closure(entry):
    """Every module_utils file that running ``entry`` imports, directly or not."""
    seen, todo = set(), sorted(_imported_modules(entry))
    while todo:
        module = todo.pop()
        for relative in _files_of(module):
            if relative in seen:
                continue
            seen.add(relative)
            path = os.path.join(MODULE_UTILS, relative)
            assert os.path.isfile(path), "%s imports %s, which does not exist" % (entry, relative)
            todo.extend(sorted(_imported_modules(path)))
    return seen


def role_sources():
    with open(os.path.join(ROLE, "tasks", "persist.yml")) as handle:
        tasks = yaml.safe_load(handle)
    lists = [task["vars"]["_sources"] for task in tasks if "_sources" in task.get("vars", {})]
    assert len(lists) == 1, "persist.yml should define _sources once, found %d" % len(lists)
    return lists[0]


def test_the_role_copies_every_file_the_restore_program_imports():
    program = os.path.join(ROLE, "templates", "gpuprov-mig-restore.py.j2")
    needed = imported_closure(program)
    assert "mig_restore.py" in needed
    assert sorted(role_sources()) == sorted(needed)


def test_the_restore_code_needs_no_subfolder():
    # restore_install.yml copies flat files into one folder; a package among the imports
    # (e.g. mps/) would need its folder created there first.
    program = os.path.join(ROLE, "templates", "gpuprov-mig-restore.py.j2")
    assert [path for path in imported_closure(program) if os.sep in path] == []


def test_the_closure_follows_packages(tmp_path):
    # The walk itself: a package import brings its __init__.py and what that imports.
    assert _files_of("kubelet_config.plan") == [os.path.join("kubelet_config", "__init__.py"),
                                                os.path.join("kubelet_config", "plan.py")]
    assert _files_of("mps") == [os.path.join("mps", "__init__.py")]
    entry = tmp_path / "entry.py"
    entry.write_text("from %s.kubelet_config import plan_change\n" % PACKAGE)
    closure = imported_closure(str(entry))
    assert os.path.join("kubelet_config", "atomic_write.py") in closure
    assert "quantities.py" in closure
    assert "cpuset.py" in closure
