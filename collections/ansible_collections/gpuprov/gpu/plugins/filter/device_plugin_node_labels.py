# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: device_plugin_node_labels
version_added: "0.1.0"
short_description: Node label patches from a fleet plan
description:
  - Returns one partial Node object per planned node, holding the labels of its plan
    (C(nvidia.com/device-plugin.config=<config name>)), for M(kubernetes.core.k8s) with
    O(kubernetes.core.k8s#module:state=patched) or for server-side apply.
  - Node names are checked; a host whose inventory name is not its Kubernetes node name is
    mapped with O(node_names).
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.plan_nodes
"""

EXAMPLES = r"""
- name: Label each node with its device-plugin config
  kubernetes.core.k8s:
    state: patched
    merge_type: merge
    definition: "{{ item }}"
  loop: "{{ fleet.nodes | gpuprov.gpu.device_plugin_node_labels }}"
  loop_control:
    label: "{{ item.metadata.name }}"
"""

RETURN = r"""
_value:
  description: Partial Node objects (apiVersion, kind, metadata.name, metadata.labels), sorted by host.
  type: list
  elements: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_labels, plan_filters


def device_plugin_node_labels(nodes, node_names=None):
    return plan_filters.render_plan("device_plugin_node_labels", node_labels.node_label_patches, nodes, node_names)


class FilterModule(object):
    def filters(self):
        return {"device_plugin_node_labels": device_plugin_node_labels}
