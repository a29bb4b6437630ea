# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: hami_configmap
version_added: "0.2.0"
short_description: HAMi's per-node device-plugin config from a fleet plan
description:
  - Returns the ConfigMap (key C(config.json)) with one C(nodeconfig) entry per node whose plan
    uses strategy C(hami); the HAMi chart reads it through
    C(devicePlugin.nodeConfiguration.externalConfigName).
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.plan_nodes
options:
  namespace:
    description: Namespace of the ConfigMap (the HAMi release's namespace).
    type: str
    default: kube-system
"""

EXAMPLES = r"""
- name: Apply HAMi's per-node config
  kubernetes.core.k8s:
    state: present
    definition: "{{ fleet.nodes | gpuprov.gpu.hami_configmap(namespace='kube-system') }}"
"""

RETURN = r"""
_value:
  description: A v1 ConfigMap.
  type: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import hami_cluster, plan_filters


def hami_configmap(nodes, node_names=None, namespace=hami_cluster.NAMESPACE):
    return plan_filters.render_plan("hami_configmap", hami_cluster.configmap, nodes, node_names, namespace=namespace)


class FilterModule(object):
    def filters(self):
        return {"hami_configmap": hami_configmap}
