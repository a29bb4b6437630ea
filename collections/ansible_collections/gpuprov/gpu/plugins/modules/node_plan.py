#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_plan
short_description: Plan a GPU node from its inventory variables, and compare it with live facts
version_added: "0.1.0"
description:
  - Runs on the controller. Reads the host's C(gpuprov_*) inventory variables, validates them
    and plans the node with the same planner that C(gpuprov plan) prints, and sets the
    C(gpuprov_plan) fact.
  - Given the node's C(gpu_facts) (from M(gpuprov.gpu.gpu_facts)), it also checks that the
    node has the GPUs the inventory declares (model and count) and sets
    C(gpuprov_node_changes), the MIG work a converge must do.
  - Fails, naming the host and field, when the variables do not plan.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - ansible.builtin.action_common_attributes.facts
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
  facts:
    support: full
  platform:
    support: full
    platforms: all
    details: The node's platform does not matter; the plan is computed on the controller.
options:
  gpu_facts:
    description:
      - The node's GPU facts, as M(gpuprov.gpu.gpu_facts) returns them.
      - When omitted only the plan is computed.
    type: dict
  fail_on_mismatch:
    description:
      - Fail when the node's GPU models or count differ from the inventory. With V(false) the
        result carries C(mismatch) instead.
    type: bool
    default: true
seealso:
  - module: gpuprov.gpu.gpu_facts
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuprov.gpu.gpu_facts:

- name: Plan the node and compare with what it has
  gpuprov.gpu.node_plan:
    gpu_facts: "{{ ansible_facts.gpu_facts }}"

- name: Show the planned MIG instances of GPU 0
  ansible.builtin.debug:
    var: gpuprov_plan.gpus[0].mig.instances
"""

RETURN = r"""
ansible_facts:
  description: Facts set for the host.
  returned: success
  type: dict
  contains:
    gpuprov_plan:
      description: The node plan, as in C(gpuprov plan -o json) under C(nodes.<host>).
      returned: success
      type: dict
    gpuprov_node_changes:
      description:
        - What the node's MIG state lacks, when O(gpu_facts) was given.
        - C(mig_mode), C(mig_pending_reset) and C(mig_layout) list GPU indices; C(mig) is
          true when any of them is non-empty.
      returned: when gpu_facts was given
      type: dict
problems:
  description: "One C(HOST: FIELD: reason) line per problem in the host's variables."
  returned: failure
  type: list
  elements: str
mismatch:
  description: How the node's GPUs differ from the inventory, with O(fail_on_mismatch=false).
  returned: when the GPUs differ
  type: str
"""
