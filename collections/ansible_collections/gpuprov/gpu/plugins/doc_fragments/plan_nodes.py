# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The input of the filters that render cluster objects from a fleet plan
    # (plugin_utils/plan_filters.render_plan): the plan's nodes and their Kubernetes names.
    DOCUMENTATION = r"""
options:
  _input:
    description: The C(nodes) mapping of a fleet plan (inventory host to node plan).
    type: dict
    required: true
  node_names:
    description: Kubernetes node name per inventory host, where they differ.
    type: dict
"""
