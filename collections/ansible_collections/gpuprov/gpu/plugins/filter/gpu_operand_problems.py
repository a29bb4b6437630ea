# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpu_operand_problems
version_added: "0.2.0"
short_description: GPU nodes whose device plugin, GFD or MPS daemon pod is missing or not ready
description:
  - Checks each planned node's pods of the device plugin release, not the DaemonSets' counts
    (a DaemonSet with no pod on a node is "ready"). Every node needs a ready device plugin and
    GPU feature discovery pod; a node whose config shares by MPS also an MPS control daemon pod.
author: gpuprov maintainers (@gpuprov)
positional: plans, fullname, node_names
options:
  _input:
    description: Pod objects of the release's namespace.
    type: list
    elements: dict
    required: true
  plans:
    description: The plans of the nodes to check (inventory host to node plan).
    type: dict
    required: true
  fullname:
    description: The chart's fullname (the device plugin DaemonSet's name).
    type: str
    required: true
  node_names:
    description: Kubernetes node name per inventory host, where they differ.
    type: dict
  with_mps:
    description:
      - Check the MPS control daemon pods too. V(false) before nodes carry their planned config
        label, as the daemon runs only on nodes whose current config shares by MPS.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Wait for every node's plugin pods
  kubernetes.core.k8s_info:
    kind: Pod
    namespace: nvidia-device-plugin
  register: pods
  until: pods.resources | gpuprov.gpu.gpu_operand_problems(plans, 'nvidia-device-plugin') | length == 0
"""

RETURN = r"""
_value:
  description: One line per missing or unready pod.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_labels, node_rollout, plan_filters


def gpu_operand_problems(pods, plans, fullname, node_names=None, with_mps=True):
    pods, plans, node_names = plan_filters.plain_data([pods, plans, node_names])
    names = node_labels.node_names(plans, node_names)
    expected = {}
    for host, plan in plans.items():
        components = ["device-plugin", "gpu-feature-discovery"]
        if with_mps and "mps" in ((plan.get("device_plugin") or {}).get("config") or {}).get("sharing", {}):
            components.append("mps-control-daemon")
        expected[names[host]] = components
    return node_rollout.operand_problems(pods, expected, fullname)


class FilterModule(object):
    def filters(self):
        return {"gpu_operand_problems": gpu_operand_problems}
