# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters that turn a gpuprov node plan into module arguments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: mig_devices
short_description: The per-GPU O(gpuprov.gpu.mig_layout#module:devices) list of a node plan
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Takes a node plan (C(gpuprov_plan)) and returns one C({index, instances}) item per GPU
    the plan has MIG enabled on, with the planned instances and placements, ready for
    the C(devices) option of M(gpuprov.gpu.mig_layout).
options:
  _input:
    description: The node plan.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Apply the planned MIG layout
  gpuprov.gpu.mig_layout:
    devices: "{{ gpuprov_plan | gpuprov.gpu.mig_devices }}"
"""

RETURN = r"""
_value:
  description: One item per MIG-enabled GPU of the plan.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError


def mig_devices(plan):
    if not isinstance(plan, dict) or "gpus" not in plan:
        raise AnsibleFilterError("mig_devices expects a gpuprov node plan (a dict with gpus)")
    devices = []
    for gpu in plan["gpus"]:
        mig = gpu.get("mig")
        if mig and mig.get("enabled") and mig.get("managed", True):
            devices.append({"index": gpu["index"], "instances": mig["instances"]})
    return devices


class FilterModule(object):
    def filters(self):
        return {"mig_devices": mig_devices}
