# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: hami_values
version_added: "0.2.0"
short_description: Values for the HAMi chart from a fleet plan
description:
  - Cluster defaults (split count, memory and core scaling most HAMi nodes use), the per-node
    ConfigMap by name, and a digest of the per-node config as a device-plugin pod annotation so
    that a config change rolls HAMi's DaemonSet.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.plan_nodes
options:
  runtime_class_name:
    description: C(devicePlugin.runtimeClassName), for clusters where nvidia is not the default runtime.
    type: str
  extra_values:
    description: Values merged over the rendered ones.
    type: dict
"""

EXAMPLES = r"""
- name: Render HAMi's values
  ansible.builtin.set_fact:
    hami_values: "{{ fleet.nodes | gpuprov.gpu.hami_values(runtime_class_name='nvidia') }}"
"""

RETURN = r"""
_value:
  description: Helm values for the hami chart.
  type: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import hami_cluster, plan_filters


def hami_values(nodes, node_names=None, runtime_class_name=None, extra_values=None):
    return plan_filters.render_plan("hami_values", hami_cluster.values, nodes, node_names,
                                    runtime_class_name=runtime_class_name, extra_values=extra_values)


class FilterModule(object):
    def filters(self):
        return {"hami_values": hami_values}
