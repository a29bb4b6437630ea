# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters for the boot-time MIG restore: the state file a node keeps, and whether it needs one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: mig_boot_state
short_description: The MIG state file content that gpuprov-mig-restore restores at boot
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Takes a node plan (C(gpuprov_plan)) and the node's C(gpu_facts) and returns the content
    of the MIG state file the P(gpuprov.gpu.gpu_mig#role) role writes, one entry per GPU
    whose MIG mode gpuprov manages, with the GPU's NVML name, PCI device id and bus id, the
    planned MIG mode and the planned instances with their placements.
  - The C(gpuprov-mig-restore) program reads it at boot, and C(gpuprov status) compares a
    node's copy with it.
options:
  _input:
    description: The node plan.
    type: dict
    required: true
  gpu_facts:
    description: The node's facts from M(gpuprov.gpu.gpu_facts) (C(ansible_facts.gpu_facts)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the MIG state file
  ansible.builtin.copy:
    content: "{{ gpuprov_plan | gpuprov.gpu.mig_boot_state(ansible_facts.gpu_facts) | to_nice_json }}\n"
    dest: /etc/gpuprov/mig-state.json
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The state file content (C(format), C(host), C(gpus)).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.mig_persist import BootStateError, boot_state


def mig_boot_state(plan, gpu_facts):
    try:
        return boot_state(plan, gpu_facts)
    except BootStateError as exc:
        raise AnsibleFilterError("mig_boot_state: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"mig_boot_state": mig_boot_state}
