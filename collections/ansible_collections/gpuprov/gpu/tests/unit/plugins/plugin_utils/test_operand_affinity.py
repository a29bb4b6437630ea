# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every GPU DaemonSet chart gpuprov deploys carries the one pause affinity
(gpu_operands.gpu_operand_affinity), so the gpu_mig role's pause label takes them all off a node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dcgm_exporter, gpu_operands, helm_values

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PAUSE = {"key": gpu_operands.GPU_OPERANDS_PAUSE_LABEL, "operator": "NotIn", "values": [gpu_operands.GPU_OPERANDS_PAUSED]}
COUNTERS = os.path.join(COLLECTION, "roles", "dcgm_exporter", "files", "gpuprov-counters.csv")


def _terms(values):
    return values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def chart_values():
    """The values of each chart with GPU DaemonSets that gpuprov renders. The device-plugin
    chart's .Values.affinity serves its plugin, GFD and MPS control daemon DaemonSets.
    HAMi is not listed: its 2.10.0 chart has no affinity value for its device plugin
    (only devicePlugin.nvidiaNodeSelector; Project-HAMi/HAMi v2.10.0 charts/hami/values.yaml)."""
    with open(COUNTERS) as handle:
        counters = handle.read()
    return {
        "nvidia-device-plugin": helm_values.device_plugin_values({}, {}),
        "dcgm-exporter": dcgm_exporter.exporter_values(counters, False),
    }


def test_every_gpu_daemonset_chart_carries_the_pause_affinity():
    charts = chart_values()
    assert sorted(charts) == ["dcgm-exporter", "nvidia-device-plugin"]
    for name, values in charts.items():
        terms = _terms(values)
        assert terms, name
        # Terms are ORed: the pause rule must be in every one, or a node matching another
        # term keeps the pods while paused.
        assert all(PAUSE in term["matchExpressions"] for term in terms), name


def test_the_charts_share_the_one_helper():
    assert helm_values.device_plugin_values({}, {})["affinity"] == gpu_operands.gpu_operand_affinity()
    assert dcgm_exporter.operand_affinity() == gpu_operands.gpu_operand_affinity(terms=(("nvidia.com/gpu.present", "true"),))
