# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: dcgm_exporter_values
version_added: "0.2.0"
short_description: Helm values for NVIDIA dcgm-exporter with gpuprov's counters
description:
  - Renders the values of the dcgm-exporter chart (4.8.2) gpuprov deploys. The counters CSV
    becomes C(customMetrics); it must hold the fields C(gpuprov diagnose --prometheus) reads
    (SM, DRAM, graphics-engine and tensor activity, SM occupancy, framebuffer used and free).
  - The exporter runs only on nodes labelled C(nvidia.com/gpu.present=true) and never on a node
    labelled C(gpuprov.io/gpu-operands=paused). Its ServiceMonitor is on only when asked (the
    role asks only where the prometheus-operator CRD exists), with C(honorLabels) so pod labels
    keep their names.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: The counters CSV text (C(DCGM_FIELD, type, help) per line).
    type: str
    required: true
  service_monitor:
    description: Whether to create the ServiceMonitor.
    type: bool
    required: true
  image_repository:
    description: The exporter image repository; empty keeps the pinned one.
    type: str
  image_tag:
    description: The image tag; empty keeps the pinned one.
    type: str
  image_pull_secrets:
    description: Names of image pull secrets in the release namespace.
    type: list
    elements: str
  collect_interval_ms:
    description: The exporter's collect interval in milliseconds; empty keeps its default (30000).
    type: int
  pod_labels:
    description: Copy the pods' labels onto their GPUs' metrics (C(kubernetes.enablePodLabels)).
    type: bool
    default: true
  extra_values:
    description: Values merged over the rendered ones.
    type: dict
"""

EXAMPLES = r"""
- name: Deploy dcgm-exporter
  kubernetes.core.helm:
    release_name: dcgm-exporter
    chart_ref: gpu-helm-charts/dcgm-exporter
    chart_version: 4.8.2
    release_namespace: gpu-monitoring
    release_values: "{{ lookup('ansible.builtin.file', 'counters.csv') | gpuprov.gpu.dcgm_exporter_values(service_monitor=false) }}"
"""

RETURN = r"""
_value:
  description: The chart values.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.dcgm_exporter import DcgmExporterError, exporter_values


def dcgm_exporter_values(counters, service_monitor, image_repository=None, image_tag=None, image_pull_secrets=None,
                         collect_interval_ms=None, pod_labels=True, extra_values=None):
    try:
        return exporter_values(counters, service_monitor, image_repository=image_repository, image_tag=image_tag,
                               image_pull_secrets=image_pull_secrets or (), collect_interval_ms=collect_interval_ms,
                               pod_labels=pod_labels, extra_values=extra_values)
    except DcgmExporterError as error:
        raise AnsibleFilterError("dcgm_exporter: " + "; ".join(error.problems))


class FilterModule(object):
    def filters(self):
        return {"dcgm_exporter_values": dcgm_exporter_values}
