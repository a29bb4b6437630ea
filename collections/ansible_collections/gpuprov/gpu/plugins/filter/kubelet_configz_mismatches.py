# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: kubelet_configz_mismatches
version_added: "0.2.0"
short_description: Where a running kubelet's configz differs from the kubelet config written
description:
  - Compares the C(kubeletconfig) object of the kubelet's C(/configz) with the values the
    P(gpuprov.gpu.kubelet_config#module) module said it will show (its RV(gpuprov.gpu.kubelet_config#module:configz)),
    by meaning, not by text - quantities by amount (C(1000m) is C(1)), durations by value
    (C(1m) is C(1m0s)), CPU sets by CPUs, C(reservedMemory) per NUMA node and resource, policy
    option booleans as the kubelet parses them.
  - The kubelet's rewrite of C(kubeReserved.cpu) and C(systemReserved.cpu) when
    C(reservedSystemCPUs) is set is part of the expected values, so it is no mismatch.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: The C(kubeletconfig) object of C(GET /api/v1/nodes/NAME/proxy/configz).
    type: dict
    required: true
  expected:
    description: Dotted key to expected value (null when configz leaves the key out).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The running kubelet has the values written
  ansible.builtin.assert:
    that: (configz.stdout | from_json).kubeletconfig | gpuprov.gpu.kubelet_configz_mismatches(write.configz) | length == 0
"""

RETURN = r"""
_value:
  description: One C(KEY is RUNNING, written EXPECTED) line per key that differs, sorted by key.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.configz import configz_mismatches
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.plan_filters import plain_data


def kubelet_configz_mismatches(running, expected):
    return configz_mismatches(plain_data(running or {}), plain_data(expected or {}))


class FilterModule(object):
    def filters(self):
        return {"kubelet_configz_mismatches": kubelet_configz_mismatches}
