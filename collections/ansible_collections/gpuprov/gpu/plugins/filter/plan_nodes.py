# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter: a list of plain node configs -> the fleet plan's nodes and device-plugin configs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: plan_nodes
short_description: Plan a list of node configs with the gpuprov planner, without an inventory
version_added: "0.2.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Takes a list of node configs - C(name) (the Kubernetes node name), C(gpu_model) and
    C(gpu_count) (or C(gpus), a list of C({model, count})), C(sharing) in the form of the
    C(gpuprov_sharing) inventory variable (default exclusive) and, for a named MIG config from
    a mig-parted file, C(mig_config_file) (an absolute path, or relative to the folder
    C(ansible-playbook) runs in) - and plans them as C(gpuprov plan) would.
  - Returns C({nodes, device_plugin_configs}), the two mappings of C(gpuprov plan -o json)
    that the P(gpuprov.gpu.gpu_device_plugin#role) role needs.
  - Fails with one C(VARIABLE[i].key - reason) line per problem, naming the list by O(var_name).
options:
  _input:
    description: The node configs.
    type: list
    elements: dict
    required: true
  var_name:
    description: The name of the variable that holds the list, for messages.
    type: str
    default: nodes
"""

EXAMPLES = r"""
- name: Plan two nodes
  ansible.builtin.set_fact:
    fleet: >-
      {{ [{'name': 'a100-1', 'gpu_model': 'A100-80GB', 'gpu_count': 8,
           'sharing': {'strategy': 'mig', 'mig': {'config': 'all-balanced'}}},
          {'name': 't4-1', 'gpu_model': 'T4', 'gpu_count': 4,
           'sharing': {'strategy': 'time-slicing', 'replicas': 4}}]
         | gpuprov.gpu.plan_nodes('my_nodes') }}
"""

RETURN = r"""
_value:
  description: "C(nodes): node name to node plan; C(device_plugin_configs): config name to device-plugin config."
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import plain_inputs


def plan_nodes(nodes, var_name="nodes"):
    result, problems = plain_inputs.plan_nodes(nodes, var_name)
    if problems:
        raise AnsibleFilterError("the node configs do not plan (nothing was changed): %s" % "; ".join(problems))
    return result


class FilterModule(object):
    def filters(self):
        return {"plan_nodes": plan_nodes}
