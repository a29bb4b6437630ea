# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: device_plugin_values
version_added: "0.1.0"
short_description: Helm values for the NVIDIA device plugin from a fleet plan
description:
  - Renders the values of the nvidia-device-plugin chart (0.20.0) for a fleet plan, with
    C(config.map) holding one named config per distinct node plan plus the default config,
    C(config.default), GPU feature discovery on, the NFD subchart off (NFD is its own release),
    and a pod annotation with the digest of the configs so that a config change rolls the
    DaemonSet.
  - Every config is checked against the device plugin's config schema; a config the plugin
    would reject fails the filter with the config name and the reason.
author: gpuprov maintainers (@gpuprov)
positional: configs
options:
  _input:
    description: The C(nodes) mapping of a fleet plan (inventory host to node plan).
    type: dict
    required: true
  configs:
    description: The C(device_plugin_configs) mapping of the same fleet plan (config name to config).
    type: dict
    required: true
  default_config:
    description:
      - The config of nodes without a C(nvidia.com/device-plugin.config) label.
      - C(exclusive) (whole GPUs) is added when no node uses it; any other name must be one of O(configs).
    type: str
    default: exclusive
  image_repository:
    description: The device plugin image repository, for example a mirror; empty keeps the chart's.
    type: str
  image_tag:
    description: The image tag; empty keeps the chart's (its appVersion).
    type: str
  image_pull_secrets:
    description: Names of image pull secrets in the release namespace.
    type: list
    elements: str
  compat_with_cpu_manager:
    description:
      - Set the chart's C(compatWithCPUManager) (pass device specs, privileged plugin).
      - V(auto) sets it when a planned node runs the static CPU manager.
    type: str
    choices: [auto, always, never]
    default: auto
  extra_values:
    description: Values merged over the rendered ones (mappings merge, other values replace).
    type: dict
  rollout_configs:
    description:
      - The configs the pod-template digest covers; default O(configs).
      - Pass the pruned set when O(configs) is a union kept only while nodes are relabelled, so
        that pruning later does not roll the DaemonSet again.
    type: dict
"""

EXAMPLES = r"""
- name: Deploy the device plugin with the fleet's configs
  kubernetes.core.helm:
    release_name: nvidia-device-plugin
    chart_ref: nvdp/nvidia-device-plugin
    chart_version: 0.20.0
    release_namespace: nvidia-device-plugin
    release_values: "{{ fleet.nodes | gpuprov.gpu.device_plugin_values(fleet.device_plugin_configs) }}"

- name: Same, from a mirror
  ansible.builtin.set_fact:
    plugin_values: >-
      {{ fleet.nodes | gpuprov.gpu.device_plugin_values(fleet.device_plugin_configs,
                                                        image_repository='registry.example.com/nvidia/k8s-device-plugin') }}
"""

RETURN = r"""
_value:
  description: The chart values.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, helm_values, plan_filters


def device_plugin_values(nodes, configs, default_config=device_plugin_configs.DEFAULT_CONFIG, image_repository=None, image_tag=None,
                         image_pull_secrets=None, compat_with_cpu_manager="auto", extra_values=None,
                         rollout_configs=None):
    if not isinstance(nodes, dict) or not isinstance(configs, dict):
        raise AnsibleFilterError("device_plugin_values: the input must be the plan's nodes mapping and the "
                                 "argument its device_plugin_configs mapping")
    return plan_filters.render_plan("device_plugin_values", helm_values.device_plugin_values, nodes, configs,
                                    default_config=default_config, image_repository=image_repository,
                                    image_tag=image_tag, image_pull_secrets=image_pull_secrets or [],
                                    compat_with_cpu_manager=compat_with_cpu_manager,
                                    extra_values=extra_values, rollout_configs=rollout_configs)


class FilterModule(object):
    def filters(self):
        return {"device_plugin_values": device_plugin_values}
