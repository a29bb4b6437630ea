# -*- coding: utf-8 -*-
"""The node affinity every GPU DaemonSet gpuprov deploys carries (device plugin, GFD, MPS control
daemon, dcgm-exporter, HAMi's device plugin), so one node label takes them all off a node.

Node label that keeps every GPU operand gpuprov deploys off a node while its MIG layout
changes: a GPU reset fails while the device plugin or GFD hold the GPU open, and a drain
with ignore_daemonsets leaves them running. The gpu_mig role sets it, waits for the pods to
go, changes MIG and removes it again. (The GPU Operator has its own per-operand labels,
nvidia.com/gpu.deploy.<operand>=paused-for-mig-change; see docs/cluster-side.md.)

A module of its own so that cluster.py (which imports hami_cluster), hami_cluster.py and
dcgm_exporter.py share it without importing each other; cluster.gpu_operand_affinity is this.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
