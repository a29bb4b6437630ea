# -*- coding: utf-8 -*-
"""The label patches that pause the GPU operands on a node and resume them."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.filter.gpu_operands_pause import FilterModule
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands

gpu_operands_pause = FilterModule().filters()["gpu_operands_pause"]
PAUSE = "gpuprov.io/gpu-operands"


def _apply(labels, patch):
    """A JSON merge patch of metadata.labels: null removes a key."""
    after = dict(labels)
    for key, value in patch.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after


def _schedulable(affinity, labels):
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term in terms:
        ok = True
        for expr in term["matchExpressions"]:
            value = labels.get(expr["key"])
            if expr["operator"] == "In" and value not in expr["values"]:
                ok = False
            if expr["operator"] == "NotIn" and value in expr["values"]:
                ok = False
        if ok:
            return True
    return False


@pytest.mark.parametrize("labels", [
    {"feature.node.kubernetes.io/pci-10de.present": "true"},
    {"feature.node.kubernetes.io/pci-10de.present": "true", "gpu": "off"},
    {},
])
def test_a_node_without_hami_gets_only_the_pause_label(labels):
    patches = gpu_operands_pause(labels)
    assert patches == {"pause": {PAUSE: "paused"}, "resume": {PAUSE: None}, "hami": False}
    paused = _apply(labels, patches["pause"])
    assert not _schedulable(gpu_operands.gpu_operand_affinity(), dict(paused, **{"nvidia.com/gpu.present": "true"}))
    assert _apply(paused, patches["resume"]) == labels


def test_a_hami_node_loses_gpu_on_while_paused_and_gets_it_back():
    labels = {"feature.node.kubernetes.io/pci-10de.present": "true", "gpu": "on", "team": "a"}
    patches = gpu_operands_pause(labels)
    assert patches["hami"] is True
    paused = _apply(labels, patches["pause"])
    # HAMi's DaemonSet selects nodes by nodeSelector gpu: "on" (chart 2.10.0): no longer met.
    assert paused.get("gpu") != "on" and paused[PAUSE] == "paused"
    assert _apply(paused, patches["resume"]) == labels


@pytest.mark.parametrize("labels", [None, "gpu=on", ["gpu"], 3])
def test_anything_but_a_mapping_counts_as_no_labels(labels):
    assert gpu_operands_pause(labels)["hami"] is False
