# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every GPU DaemonSet gpuprov deploys stays off a node labelled gpuprov.io/gpu-operands=paused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands, helm_values
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import device_plugin_chart_values


def _matches(term, labels):
    """Kubernetes' rule for one nodeSelectorTerm (operators In and NotIn)."""
    for expr in term["matchExpressions"]:
        value = labels.get(expr["key"])
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
        if expr["operator"] == "NotIn" and value in expr["values"]:
            return False
    return True


def _schedulable(affinity, labels):
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(_matches(term, labels) for term in terms)


def test_device_plugin_and_gfd_leave_a_paused_node():
    values = helm_values.device_plugin_values({}, {})
    affinity = values["affinity"]
    gpu_node = {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert _schedulable(affinity, gpu_node)
    assert not _schedulable(affinity, dict(gpu_node, **{"gpuprov.io/gpu-operands": "paused"}))
    assert _schedulable(affinity, {"nvidia.com/gpu.present": "true"})
    assert not _schedulable(affinity, {"nvidia.com/gpu.present": "true", "gpuprov.io/gpu-operands": "paused"})
    assert not _schedulable(affinity, {"kubernetes.io/os": "linux"})  # not a GPU node


def test_pause_affinity_keeps_every_term_of_the_charts_default():
    # The chart's values.yaml at the k8s-device-plugin version tests/peers pins (Go module cache).
    default = device_plugin_chart_values()["affinity"]
    ours = gpu_operands.gpu_operand_affinity()
    theirs_terms = default["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    our_terms = ours["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(our_terms) == len(theirs_terms)
    for theirs, mine in zip(theirs_terms, our_terms):
        assert mine["matchExpressions"][:-1] == theirs["matchExpressions"]
        assert mine["matchExpressions"][-1] == {"key": "gpuprov.io/gpu-operands", "operator": "NotIn",
                                                "values": ["paused"]}


def test_nfd_worker_is_not_paused():
    assert "affinity" not in helm_values.nfd_values()["worker"]
