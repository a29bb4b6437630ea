# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: drain_leftovers
version_added: "0.2.0"
short_description: Pods a drain should have removed from a node and did not
description:
  - Given a node's pods (C(kubernetes.core.k8s_info) C(resources)), returns C(NAMESPACE/NAME)
    of each pod still there that is not a DaemonSet pod, a mirror (static) pod or a finished pod.
    A pod being deleted still counts, as it holds its GPUs until its containers stop.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: Pod objects.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail when pods remain
  ansible.builtin.assert:
    that: pods.resources | gpuprov.gpu.drain_leftovers | length == 0
"""

RETURN = r"""
_value:
  description: Sorted C(NAMESPACE/NAME) of the pods left.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_rollout, plan_filters


def drain_leftovers(pods):
    return node_rollout.pods_left_after_drain(plan_filters.plain_data(pods))


class FilterModule(object):
    def filters(self):
        return {"drain_leftovers": drain_leftovers}
