# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_device_plugin_configs
version_added: "0.2.0"
short_description: The device plugin config of every GPU node of the inventory
description:
  - Plans every host given (with the planner that C(gpuprov plan) uses) from its inventory
    variables and returns config name to config. Hosts outside C(--limit) count too, so a
    limited run keeps the configs the other nodes use. Hosts whose settings do not plan are
    left out (C(gpuprov plan) names their problems).
author: gpuprov maintainers (@gpuprov)
positional: hosts
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: Inventory host names, e.g. C(groups['all']).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Configs of the whole inventory
  ansible.builtin.set_fact:
    inventory_configs: "{{ hostvars | gpuprov.gpu.fleet_device_plugin_configs(groups['all']) }}"
"""

RETURN = r"""
_value:
  description: Config name to device plugin config.
  type: dict
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import VAR_PREFIX, plain
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

_PLANNER = Planner()
_COMPUTED = ("gpuprov_plan", "gpuprov_node_changes")


def fleet_device_plugin_configs(hostvars, hosts):
    configs = {}
    for host in hosts or []:
        variables = hostvars[host]
        mine = dict((key, plain(variables[key])) for key in variables
                    if key.startswith(VAR_PREFIX) and key not in _COMPUTED)
        if "gpuprov_gpu_model" not in mine and "gpuprov_gpus" not in mine:
            continue
        intent, problems = parse_intent(host, mine, variables.get("inventory_dir"))
        if intent is None or problems:
            continue
        plan, problems = _PLANNER.plan_node(intent)
        # HAMi nodes (device_plugin none) name no NVIDIA plugin config.
        if plan is not None and not problems and plan.get("device_plugin"):
            configs[plan["device_plugin"]["config_name"]] = plan["device_plugin"]["config"]
    return dict(sorted(configs.items()))


class FilterModule(object):
    def filters(self):
        return {"fleet_device_plugin_configs": fleet_device_plugin_configs}
