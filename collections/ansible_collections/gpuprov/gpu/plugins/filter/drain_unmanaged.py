# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: drain_unmanaged
version_added: "0.2.0"
short_description: Pods on a node that no controller manages
description:
  - Given a node's pods (C(kubernetes.core.k8s_info) C(resources)), returns C(NAMESPACE/NAME)
    of each running or pending pod without an owner reference. Draining deletes such a pod for
    good (nothing re-creates it); C(kubectl drain) refuses it without C(--force), whatever its
    volumes. Mirror (static) pods and finished pods are left out.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: Pod objects.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Refuse to delete unmanaged pods
  ansible.builtin.assert:
    that: pods.resources | gpuprov.gpu.drain_unmanaged | length == 0
"""

RETURN = r"""
_value:
  description: Sorted C(NAMESPACE/NAME) of the unmanaged pods.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_rollout, plan_filters


def drain_unmanaged(pods):
    return node_rollout.pods_without_controller(plan_filters.plain_data(pods))


class FilterModule(object):
    def filters(self):
        return {"drain_unmanaged": drain_unmanaged}
