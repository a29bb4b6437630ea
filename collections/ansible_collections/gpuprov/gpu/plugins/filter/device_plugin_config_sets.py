# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: device_plugin_config_sets
version_added: "0.2.0"
short_description: The device plugin configs to install, and to keep after relabelling
description:
  - The device plugin's ConfigMap is cluster-wide and its config-manager exits when a node's
    label names a config missing from it. Returns C(install) (planned configs, configs of every
    inventory node and of the deployed release), C(final) (what any inventory node or any live
    node label names once the planned nodes carry their new label) and C(unknown) (one line per
    live node whose label names a config nobody has).
author: gpuprov maintainers (@gpuprov)
positional: configs, inventory_configs, live_values, live_nodes, node_names
options:
  _input:
    description: The C(nodes) mapping of the plan of the hosts this run labels.
    type: dict
    required: true
  configs:
    description: The C(device_plugin_configs) of the same plan.
    type: dict
    required: true
  inventory_configs:
    description: Config name to config for every node of the inventory (also outside C(--limit)).
    type: dict
  live_values:
    description: The deployed release's user values (C(kubernetes.core.helm_info) C(status.values)); empty when not installed.
    type: dict
  live_nodes:
    description: The cluster's Node objects (C(kubernetes.core.k8s_info) C(resources)).
    type: list
    elements: dict
  node_names:
    description: Kubernetes node name per inventory host, where they differ.
    type: dict
"""

EXAMPLES = r"""
- name: Configs for a run limited to some hosts
  ansible.builtin.set_fact:
    sets: "{{ plans | gpuprov.gpu.device_plugin_config_sets(configs, inventory_configs, release.status.values | default({}), nodes.resources) }}"
"""

RETURN = r"""
_value:
  description: Mapping with C(install), C(final) (config name to config) and C(unknown) (list of lines).
  type: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, plan_filters


def device_plugin_config_sets(nodes, configs, inventory_configs=None, live_values=None, live_nodes=None,
                              node_names=None):
    return plan_filters.render_plan("device_plugin_config_sets", device_plugin_configs.config_sets, nodes, configs,
                                    inventory_configs, live_values, live_nodes, node_names)


class FilterModule(object):
    def filters(self):
        return {"device_plugin_config_sets": device_plugin_config_sets}
