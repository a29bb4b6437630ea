# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Every gpuprov_* variable a user may set for the playbooks and roles is known to intent.

An unknown gpuprov_* variable in an inventory is exit 2 (a typo guard), so a variable a new
playbook reads but known_vars.KNOWN_VARS lacks would make `gpuprov plan` refuse a valid
inventory. The variables are derived here from the YAML itself: every gpuprov_* name the
playbooks and roles mention (tasks, play vars, role defaults, and the comments that document
them), less the ones the playbooks set themselves (register, set_fact, a task's own vars).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent, known_vars

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NAME_RE = re.compile(r"\bgpuprov_[a-z0-9_]*[a-z0-9]\b")
SET_FACT_KEYS = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
PLAY_KEYS = ("hosts", "import_playbook", "ansible.builtin.import_playbook")


class _AnsibleYamlLoader(yaml.SafeLoader):
    """Safe loading that keeps Ansible's own tags (!unsafe, !vault) as plain values."""


_AnsibleYamlLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def yaml_files():
    for top in ("playbooks", "roles"):
        for folder, _dirs, files in os.walk(os.path.join(COLLECTION, top)):
            for name in sorted(files):
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(folder, name)


def set_by_playbooks(node, in_play=False):
    """gpuprov_* names a play sets itself: register, set_fact keys, a task's (not a play's) vars."""
    names = set()
    if isinstance(node, list):
        for item in node:
            names |= set_by_playbooks(item, in_play)
    elif isinstance(node, dict):
        is_play = any(key in node for key in PLAY_KEYS)
        register = node.get("register")
        if isinstance(register, str):
            names.add(register)
        for key in SET_FACT_KEYS:
            if isinstance(node.get(key), dict):
                names |= set(k for k in node[key] if isinstance(k, str))
        if not is_play and isinstance(node.get("vars"), dict):
            names |= set(k for k in node["vars"] if isinstance(k, str))
        for key, value in node.items():
            if key != "vars" or not is_play:
                names |= set_by_playbooks(value, in_play or is_play)
    return set(name for name in names if name.startswith("gpuprov_"))


def derive():
    """(names users may set, names the playbooks set) over every playbook and role file."""
    mentioned, internal = set(), set()
    for path in yaml_files():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        mentioned |= set(NAME_RE.findall(text))
        internal |= set_by_playbooks(yaml.load(text, Loader=_AnsibleYamlLoader))
    return mentioned - internal, internal


def test_the_derivation_finds_what_it_should():
    """The sweep sees play vars, documented -e variables and role defaults, and tells the
    playbooks' own facts apart (a sweep that found nothing would pass any check below)."""
    settable, internal = derive()
    # Play vars of the baseline playbooks, and a variable only documented in a comment.
    assert {"gpuprov_baseline_interval", "gpuprov_baseline_dir", "gpuprov_baseline_remove_samples"} <= settable
    # register: and set_fact: results, and a task's own vars.
    assert {"gpuprov_baseline_scratch", "gpuprov_baseline_exec_start"} <= internal
    assert "gpuprov_baseline_scratch" not in settable


def test_set_by_playbooks_reads_register_set_fact_and_task_vars_only():
    plays = [{"hosts": "all", "vars": {"gpuprov_user_var": 1},
              "tasks": [{"ansible.builtin.set_fact": {"gpuprov_fact": 1}},
                        {"ansible.builtin.command": "true", "register": "gpuprov_result",
                         "vars": {"gpuprov_task_var": 2}}]}]
    assert set_by_playbooks(plays) == {"gpuprov_fact", "gpuprov_result", "gpuprov_task_var"}


@pytest.mark.parametrize("name", sorted(derive()[0]))
def test_every_settable_variable_is_known(name):
    assert name in known_vars.KNOWN_VARS, (
        "%s is read by a playbook or role but is not in known_vars.KNOWN_VARS (INTENT_VARS or RUN_VARS): "
        "`gpuprov plan` would refuse an inventory that sets it" % name)


def test_an_unknown_variable_is_still_refused_with_a_did_you_mean():
    problems = []

    class Out:
        def add(self, field, reason):
            problems.append((field, reason))

    intent.check_variables({"gpuprov_baseline_intervall": 5, "gpuprov_baseline_interval": 5}, Out())
    assert [field for field, dummy in problems] == ["gpuprov_baseline_intervall"]
    assert "did you mean gpuprov_baseline_interval?" in problems[0][1]
