# -*- coding: utf-8 -*-
"""The node affinity every GPU DaemonSet gpuprov deploys carries (device plugin, GFD, MPS control
daemon, dcgm-exporter), so one node label takes them all off a node; and the label patches that
pause and resume them, HAMi's device plugin included.

Node label that keeps every GPU operand gpuprov deploys off a node while its MIG layout
changes: a GPU reset fails while the device plugin or GFD hold the GPU open, and a drain
with ignore_daemonsets leaves them running. The gpu_mig role sets it, waits for the pods to
go, changes MIG and removes it again. (The GPU Operator has its own per-operand labels,
nvidia.com/gpu.deploy.<operand>=paused-for-mig-change; see docs/cluster-side.md.)

A module of its own so that helm_values.py (which imports hami_cluster), hami_cluster.py and
dcgm_exporter.py share it without importing each other.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import sharing_hami

GPU_OPERANDS_PAUSE_LABEL = "gpuprov.io/gpu-operands"
GPU_OPERANDS_PAUSED = "paused"

# The device-plugin chart's default required node affinity (values.yaml of 0.20.0): NVIDIA
# PCI devices found by NFD, an NVIDIA CPU (Tegra), or nvidia.com/gpu.present=true. Setting
# ``affinity`` replaces it, so it is repeated here with the pause rule added to every term.
DEVICE_PLUGIN_NODE_TERMS = (
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
    ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    ("nvidia.com/gpu.present", "true"),
)


def gpu_operand_affinity(terms=DEVICE_PLUGIN_NODE_TERMS):
    """Required node affinity for a GPU DaemonSet: its usual node terms, each ANDed with
    "not paused" (terms are ORed, expressions inside one term ANDed; NotIn also matches a
    node without the label). Every GPU DaemonSet gpuprov deploys takes this."""
    pause = {"key": GPU_OPERANDS_PAUSE_LABEL, "operator": "NotIn", "values": [GPU_OPERANDS_PAUSED]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}, dict(pause)]}
        for key, value in terms]}}}


def pause_label_patches(node_labels):
    """The node label patches that pause the GPU operands on a node and resume them, for the
    node's live labels: {"pause": labels, "resume": labels, "hami": bool} (a null value removes
    a label in a merge patch).

    HAMi's device plugin cannot take the pause affinity: HAMi 2.10.0's chart selects its nodes
    only by ``devicePlugin.nvidiaNodeSelector`` (``gpu: "on"``; values.yaml has no affinity for
    it). On a node that carries that label the pause removes it, which makes the DaemonSet
    controller delete HAMi's plugin pod there just as the affinity does for the others, and the
    resume puts it back: the node leaves the pause with the labels it entered it with (the
    gpu_device_plugin role then labels nodes by the plan)."""
    labels = node_labels if isinstance(node_labels, dict) else {}
    pause = {GPU_OPERANDS_PAUSE_LABEL: GPU_OPERANDS_PAUSED}
    resume = {GPU_OPERANDS_PAUSE_LABEL: None}
    hami = all(labels.get(key) == value for key, value in sharing_hami.NODE_LABEL.items())
    if hami:
        for key, value in sharing_hami.NODE_LABEL.items():
            pause[key] = None
            resume[key] = value
    return {"pause": pause, "resume": resume, "hami": hami}
