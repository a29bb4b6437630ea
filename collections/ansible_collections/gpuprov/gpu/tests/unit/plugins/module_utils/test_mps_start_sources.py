# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The gpu_mps role copies exactly the module_utils files its unit's start program imports.

gpuprov-mps-start runs at every start of the MPS daemon outside Ansible, so AnsiballZ does not
collect its imports: the role's list (``_gpu_mps_start_sources`` in roles/gpu_mps/tasks/main.yml)
must name every file the program reaches, or the daemon fails to start with an ImportError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.test_mig_restore_sources import (
    COLLECTION,
    imported_closure,
)

ROLE = os.path.join(COLLECTION, "roles", "gpu_mps")


def role_sources():
    with open(os.path.join(ROLE, "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    lists = [task["ansible.builtin.set_fact"]["_gpu_mps_start_sources"] for task in tasks
             if "_gpu_mps_start_sources" in (task.get("ansible.builtin.set_fact") or {})]
    assert len(lists) == 1, "main.yml should set _gpu_mps_start_sources once, found %d" % len(lists)
    return lists[0]


def test_the_role_copies_every_file_the_start_program_imports():
    program = os.path.join(ROLE, "templates", "gpuprov-mps-start.py.j2")
    needed = imported_closure(program)
    assert os.path.join("mps", "unit_start.py") in needed
    assert sorted(role_sources()) == sorted(path.replace(os.sep, "/") for path in needed)


def test_the_role_creates_the_folders_of_its_sources():
    with open(os.path.join(ROLE, "tasks", "start_install.yml")) as handle:
        tasks = yaml.safe_load(handle)
    # file_set writes a file only into a folder that exists or that its directories create.
    installs = [task["gpuprov.gpu.file_set"] for task in tasks if "gpuprov.gpu.file_set" in task]
    assert len(installs) == 1
    folders = set(os.path.dirname(path) for path in role_sources()) - {""}
    assert folders == {"mps"}
    assert "{{ _gpu_mps_module_utils }}/mps" in installs[0]["directories"]
    assert "{{ _gpu_mps_module_utils }}" in installs[0]["directories"]
