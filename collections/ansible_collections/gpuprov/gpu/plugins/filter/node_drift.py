# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter: compare what was read from a node with its plan (gpuprov status)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: node_drift
short_description: Whether a node is still what its gpuprov plan says, and what differs
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Takes a node plan (C(gpuprov_plan)) and a record of what was read from the node, and
    returns C({status, drift}). C(status) is V(in-sync) or V(drifted); C(drift) lists each
    difference as C({area, gpu, message}), with areas V(hardware), V(mig-mode),
    V(mig-instances) (missing and extra instances as C(profile@start)), V(kubelet), V(mps)
    and V(boot-restore).
  - The gpuprov.gpu.status playbook builds the record; C(gpuprov status) prints the result.
options:
  _input:
    description: The node plan.
    type: dict
    required: true
  record:
    description:
      - What was read from the node. C(gpu_facts) (from M(gpuprov.gpu.gpu_facts)) is
        required; C(kubelet) (C({changed_keys, error}) from M(gpuprov.gpu.kubelet_config) in
        check mode), C(mps) (C({running, changed, error}) from M(gpuprov.gpu.mps_daemon) in
        check mode) and C(boot) (C({unit, unit_exists, unit_enabled, state_text})) are
        compared when given.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Compare the node with its plan
  ansible.builtin.set_fact:
    node_status: "{{ gpuprov_plan | gpuprov.gpu.node_drift({'gpu_facts': ansible_facts.gpu_facts}) }}"
"""

RETURN = r"""
_value:
  description: C({status, drift}).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.drift import DEFAULT_RESTORE_UNIT, node_drift as _node_drift


def node_drift(plan, record):
    if not isinstance(plan, dict) or "gpus" not in plan:
        raise AnsibleFilterError("node_drift expects a gpuprov node plan (a dict with gpus)")
    if not isinstance(record, dict) or not isinstance(record.get("gpu_facts"), dict):
        raise AnsibleFilterError("node_drift expects a record with gpu_facts")
    unit = (record.get("boot") or {}).get("unit") or DEFAULT_RESTORE_UNIT
    return _node_drift(plan, record, unit_name=unit)


class FilterModule(object):
    def filters(self):
        return {"node_drift": node_drift}
