# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nfd_values
version_added: "0.1.0"
short_description: Helm values for node-feature-discovery as the NVIDIA device plugin needs it
description:
  - Renders the values of the node-feature-discovery chart (0.19.0) that the device plugin and
    GPU feature discovery rely on. PCI devices are labelled by vendor only, giving
    C(feature.node.kubernetes.io/pci-10de.present=true), the label the device plugin's default
    node affinity selects. nfd-master allows the C(nvidia.com) label namespace, so GPU feature
    discovery labels are published. nfd-worker tolerates the C(nvidia.com/gpu) taint.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: Values merged over the rendered ones (mappings merge, other values replace); C({}) for none.
    type: dict
    required: true
  image_repository:
    description: The NFD image repository, for example a mirror; empty keeps the chart's.
    type: str
  image_tag:
    description: The image tag; empty keeps the chart's (its appVersion).
    type: str
  image_pull_secrets:
    description: Names of image pull secrets in the release namespace.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Deploy NFD for the device plugin
  kubernetes.core.helm:
    release_name: node-feature-discovery
    chart_ref: oci://registry.k8s.io/nfd/charts/node-feature-discovery
    chart_version: 0.19.0
    release_namespace: node-feature-discovery
    release_values: "{{ {} | gpuprov.gpu.nfd_values(image_repository='registry.example.com/nfd/node-feature-discovery') }}"
"""

RETURN = r"""
_value:
  description: The chart values.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import helm_values, plan_filters


def nfd_values(extra_values, image_repository=None, image_tag=None, image_pull_secrets=None):
    if extra_values is not None and not isinstance(extra_values, dict):
        raise AnsibleFilterError("nfd_values: the input must be a mapping of extra values ({} for none)")
    extra_values, image_pull_secrets = plan_filters.plain_data([extra_values, image_pull_secrets])
    return helm_values.nfd_values(image_repository=image_repository, image_tag=image_tag,
                                  image_pull_secrets=image_pull_secrets or (), extra_values=extra_values)


class FilterModule(object):
    def filters(self):
        return {"nfd_values": nfd_values}
