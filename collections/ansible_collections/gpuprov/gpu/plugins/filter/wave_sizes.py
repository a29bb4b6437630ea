# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: wave_sizes
version_added: "0.2.0"
short_description: Rollout waves (Ansible serial) with no wave larger than a cap
description:
  - Resolves percentages against the host count as Ansible's C(serial) does, then caps every
    wave at O(max_nodes). Ansible repeats the last size until every host ran, so no later wave
    drains more than O(max_nodes) nodes at once.
author: gpuprov maintainers (@gpuprov)
positional: host_count, max_nodes
options:
  _input:
    description: Wave sizes, node counts or percentages, e.g. C([1, "10%", "100%"]).
    type: list
    elements: raw
    required: true
  host_count:
    description: The number of hosts the percentages refer to.
    type: int
    required: true
  max_nodes:
    description: The largest wave; 0 for no cap.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Converge
  hosts: all
  serial: "{{ [1, '10%', '100%'] | gpuprov.gpu.wave_sizes(ansible_play_hosts_all | length, 5) }}"
  tasks: []
"""

RETURN = r"""
_value:
  description: Node counts.
  type: list
  elements: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_rollout, plan_filters


def wave_sizes(waves, host_count, max_nodes=0):
    waves = plan_filters.plain_data(waves)
    try:
        return node_rollout.wave_sizes(waves, int(host_count), int(max_nodes or 0))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("wave_sizes: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"wave_sizes": wave_sizes}
