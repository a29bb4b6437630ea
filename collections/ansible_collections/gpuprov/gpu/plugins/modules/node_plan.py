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
  - With O(read_node=true) it reads the node itself in the same task, with one call of
    M(gpuprov.gpu.node_state) (GPU facts, the kubelet config keys the plan manages, the host
    MPS daemon and its limits, the boot-time MIG restore), compares all of it with the plan,
    and sets C(gpu_facts), C(gpuprov_node_changes) (with C(in_sync)) and C(gpuprov_status).
    This is how the gpuprov.gpu.site and gpuprov.gpu.status playbooks read a node; a node
    already as planned costs this one round trip.
  - Fails, naming the host and field, when the variables do not plan.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - ansible.builtin.action_common_attributes.facts
attributes:
  action:
    support: full
    details:
      - Plans on the controller. Without O(read_node) nothing is sent to the node; with it,
        M(gpuprov.gpu.node_state) runs on the node.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: The action and M(gpuprov.gpu.node_state) never change anything, so check mode gives the same result.
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
      - When omitted (and O(read_node) is not set) only the plan is computed.
      - Mutually exclusive with O(read_node).
    type: dict
  read_node:
    description:
      - Read the node with M(gpuprov.gpu.node_state) in this task and compare everything the
        plan governs (see C(gpuprov_status) and C(gpuprov_node_changes.in_sync)).
    type: bool
    default: false
  sysfs_root:
    description: Where the node's sysfs is, with O(read_node).
    type: path
    default: /sys
  kubelet_config_path:
    description:
      - The node's kubelet config file, with O(read_node). Default, the C(--config) of the
        kubelet's unit, else C(/var/lib/kubelet/config.yaml).
    type: path
  kubelet_config_dir:
    description: The kubelet's drop-in directory, with O(read_node), when not the one of its unit.
    type: path
  kubelet_service:
    description: The kubelet's systemd unit, with O(read_node).
    type: str
    default: kubelet.service
  mps:
    description:
      - Where the host MPS daemon lives, with O(read_node), when the plan has host MPS.
      - C(service) (the systemd unit, default V(gpuprov-mps.service)), C(pipe_directory)
        (default V(/tmp/nvidia-mps)) and C(log_directory) (default V(/var/log/nvidia-mps)).
    type: dict
  mig_restore:
    description:
      - With O(read_node), on a node with MIG-capable GPUs, compare the boot-time MIG restore
        (unit, state file, and the mode and SHA-1 of each file the gpuprov.gpu.gpu_mig role
        installs, rendered from that role's templates and C(gpu_mig_restore_*) variables).
      - Set it to the role's C(gpu_mig_persist).
    type: bool
    default: true
  fail_on_mismatch:
    description:
      - Fail when the node's GPU models or count differ from the inventory. With V(false) the
        result carries C(mismatch) instead.
    type: bool
    default: true
seealso:
  - module: gpuprov.gpu.gpu_facts
  - module: gpuprov.gpu.node_state
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuprov.gpu.gpu_facts:

- name: Plan the node and compare with what it has
  gpuprov.gpu.node_plan:
    gpu_facts: "{{ ansible_facts.gpu_facts }}"

- name: Plan the node, read it in one round trip and compare
  gpuprov.gpu.node_plan:
    read_node: true

- name: Stop on a node already as planned
  ansible.builtin.meta: end_host
  when: gpuprov_node_changes.in_sync

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
        - With O(read_node), C(in_sync) is true when nothing the plan governs differs and the
          plan has no host MPS (whose unit files only the gpu_mps role renders), so a converge
          may stop.
      returned: when gpu_facts was given or read_node is set
      type: dict
    gpu_facts:
      description: The node's GPU facts, as M(gpuprov.gpu.gpu_facts) returns them.
      returned: with O(read_node)
      type: dict
    gpuprov_status:
      description:
        - C({status, drift}) as the gpuprov.gpu.node_drift filter returns it, plus
          V(boot-restore) items for installed restore files that differ.
      returned: with O(read_node)
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
