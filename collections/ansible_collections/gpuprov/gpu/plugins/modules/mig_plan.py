#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_plan
short_description: Plan a node's MIG layout from plain inputs, without a gpuprov inventory
version_added: "0.2.0"
description:
  - Runs on the controller. Takes the GPU model and count a node must have and its MIG
    request, either as mig-parted entries (O(devices)) or as a config name (O(config)),
    validates them and plans the node with the same planner that C(gpuprov plan) uses.
  - Given the node's C(gpu_facts) (from M(gpuprov.gpu.gpu_facts)), it also checks that the
    node has exactly O(gpu_count) GPUs of O(gpu_model).
  - Every problem names the variable it comes from (see O(variable_names)); nothing is sent
    to the node. The P(gpuprov.gpu.gpu_mig#role) role uses it for its plain inputs.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
    details: Runs entirely on the controller; nothing is sent to the node.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: The module never changes anything, so check mode gives the same result.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: all
    details: The plan is computed on the controller.
options:
  gpu_model:
    description: The GPU model the node must have, as C(gpuprov catalog) lists it (for example V(A100-80GB)).
    type: str
    required: true
  gpu_count:
    description: How many GPUs of O(gpu_model) the node must have.
    type: int
    default: 1
  devices:
    description:
      - The MIG layout in mig-parted's own form - a list of entries with C(devices) (V(all)
        or GPU indices), C(mig-enabled), C(mig-devices) ({profile - count}) and an optional
        C(device-filter).
      - Mutually exclusive with O(config).
    type: list
    elements: dict
  config:
    description:
      - A config name - a built-in one (V(all-disabled), V(all-enabled), V(all-balanced),
        V(all-<profile>)) or, with O(config_file), one of that file's C(mig-configs).
      - Mutually exclusive with O(devices).
    type: str
  config_file:
    description:
      - A mig-parted config file (C(version) v1 with C(mig-configs)) on the controller. A
        relative path is looked up like the C(src) of M(ansible.builtin.copy) (the role's and
        the playbook's C(files/) folders, then the playbook's folder).
    type: path
  gpu_facts:
    description: The node's GPU facts, as M(gpuprov.gpu.gpu_facts) returns them; when given, the node's GPUs are checked.
    type: dict
  variable_names:
    description:
      - The names problems are reported under, for each of O(gpu_model), O(gpu_count),
        O(devices), O(config) and O(config_file) (for example C({devices - gpu_mig_devices})).
      - Defaults to the C(gpu_mig_*) variables of the P(gpuprov.gpu.gpu_mig#role) role.
    type: dict
seealso:
  - module: gpuprov.gpu.node_plan
  - module: gpuprov.gpu.mig_layout
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuprov.gpu.gpu_facts:

- name: Plan two 3g.40gb on each of 2 A100-80GB, and check the node has them
  gpuprov.gpu.mig_plan:
    gpu_model: A100-80GB
    gpu_count: 2
    devices:
      - devices: all
        mig-enabled: true
        mig-devices: {3g.40gb: 2}
    gpu_facts: "{{ ansible_facts.gpu_facts }}"
  register: mig

- name: Apply it
  gpuprov.gpu.mig_layout:
    devices: "{{ mig.plan | gpuprov.gpu.mig_devices }}"
"""

RETURN = r"""
plan:
  description: The node plan, in the form of C(gpuprov plan -o json) under C(nodes.<host>).
  returned: success
  type: dict
problems:
  description: "One C(HOST: VARIABLE: reason) line per problem."
  returned: failure
  type: list
  elements: str
"""
