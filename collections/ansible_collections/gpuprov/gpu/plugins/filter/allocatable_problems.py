# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: allocatable_problems
version_added: "0.2.0"
short_description: Nodes whose allocatable GPU resources differ from their plans
description:
  - Compares each Node's C(status.allocatable) with the plan's advertised resources; GPU and
    MIG resources the plan does not list must be gone.
author: gpuprov maintainers (@gpuprov)
positional: plans, node_names
options:
  _input:
    description: Node objects (C(kubernetes.core.k8s_info) C(resources)).
    type: list
    elements: dict
    required: true
  plans:
    description: Inventory host to node plan, for the nodes to check.
    type: dict
    required: true
  node_names:
    description: Kubernetes node name per inventory host, where they differ.
    type: dict
"""

EXAMPLES = r"""
- name: Wait until the node advertises its plan
  kubernetes.core.k8s_info:
    kind: Node
    name: gpu-a100-01
  register: node
  until: "node.resources | gpuprov.gpu.allocatable_problems({'gpu-a100-01': plan}) | length == 0"
"""

RETURN = r"""
_value:
  description: One line per difference; a planned node missing from the input is one line too.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_labels, node_rollout, plan_filters


def allocatable_problems(nodes, plans, node_names=None):
    nodes, plans, node_names = plan_filters.plain_data([nodes, plans, node_names])
    by_name = dict(((n.get("metadata") or {}).get("name"), n) for n in nodes or [])
    problems = []
    for host, name in sorted(node_labels.node_names(plans, node_names).items()):
        if name not in by_name:
            problems.append("%s: node not found" % name)
            continue
        problems.extend(node_rollout.allocatable_problems(by_name[name], plans[host]["resources"]))
    return problems


class FilterModule(object):
    def filters(self):
        return {"allocatable_problems": allocatable_problems}
