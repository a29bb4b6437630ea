# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpu_operands_pause
version_added: "0.2.0"
short_description: Node label patches that pause and resume the GPU operands on a node
description:
  - From a node's live labels, the labels to patch before a MIG change (C(pause)) and after it
    (C(resume)). The pause sets C(gpuprov.io/gpu-operands=paused), which the node affinity of
    every GPU DaemonSet gpuprov deploys refuses.
  - HAMi's device plugin selects its nodes only by the label C(gpu=on) (HAMi 2.10.0 chart,
    C(devicePlugin.nvidiaNodeSelector)); on a node with that label the pause removes it and the
    resume puts it back, so the node leaves the pause with the labels it had.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: The node's labels (C(metadata.labels) of the Node); anything else counts as none.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Pause the GPU operands
  kubernetes.core.k8s:
    state: patched
    definition:
      apiVersion: v1
      kind: Node
      metadata:
        name: gpu-node-1
        labels: "{{ (node.resources[0].metadata.labels | gpuprov.gpu.gpu_operands_pause).pause }}"
"""

RETURN = r"""
_value:
  description: The patches and whether HAMi's plugin label was found.
  type: dict
  contains:
    pause:
      description: Labels to patch before the change (null removes a label).
      type: dict
    resume:
      description: Labels to patch afterwards.
      type: dict
    hami:
      description: Whether the node carried HAMi's plugin label, so HAMi's plugin pods must leave too.
      type: bool
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands, plan_filters


def gpu_operands_pause(node_labels):
    return gpu_operands.pause_label_patches(plan_filters.plain_data(node_labels))


class FilterModule(object):
    def filters(self):
        return {"gpu_operands_pause": gpu_operands_pause}
