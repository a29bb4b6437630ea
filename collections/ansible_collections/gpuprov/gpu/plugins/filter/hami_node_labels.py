# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: hami_node_labels
version_added: "0.2.0"
short_description: gpu=on node label patches for HAMi nodes
description:
  - One partial Node object per planned node; HAMi nodes get C(gpu=on) (HAMi's plugin node
    selector), every other planned node C(gpu=null), which a JSON merge patch removes.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.plan_nodes
"""

EXAMPLES = r"""
- name: Label HAMi nodes
  kubernetes.core.k8s:
    state: patched
    merge_type: merge
    definition: "{{ item }}"
  loop: "{{ fleet.nodes | gpuprov.gpu.hami_node_labels }}"
"""

RETURN = r"""
_value:
  description: Partial Node objects, sorted by host.
  type: list
  elements: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import hami_cluster, plan_filters


def hami_node_labels(nodes, node_names=None):
    return plan_filters.render_plan("hami_node_labels", hami_cluster.label_patches, nodes, node_names)


class FilterModule(object):
    def filters(self):
        return {"hami_node_labels": hami_node_labels}
