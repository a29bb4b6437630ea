# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helm values for NVIDIA's dcgm-exporter chart as gpuprov deploys it (role dcgm_exporter).

Facts from NVIDIA/dcgm-exporter `deployment/values.yaml` and templates (chart 4.8.2):
- `customMetrics` replaces the counters list; the chart renders it into the ConfigMap
  `exporter-metrics-config-map` (key `metrics`), which its default `extraConfigMapVolumes`
  mounts over /etc/dcgm-exporter/default-counters.csv, the file `arguments: -f` reads.
- `serviceMonitor.enabled` defaults to true with no CRD check in the template: without the
  prometheus-operator CRD the install fails (`no matches for kind "ServiceMonitor"`), so the
  role asks the cluster first. `honorLabels: true` keeps the exporter's pod/namespace labels
  (with false, Prometheus renames them exported_pod/exported_namespace).
- `affinity` replaces the chart's (empty) default: the exporter runs only where
  nvidia.com/gpu.present=true (GFD's label) and never on a node labelled
  gpuprov.io/gpu-operands=paused, like the other GPU DaemonSets gpuprov deploys (see
  plugin_utils/gpu_operands.py), so a MIG change can release the GPUs first (the exporter holds
  them through its embedded nv-hostengine).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.chart_values import deep_merge

CHART_VERSION = "4.8.2"
IMAGE_REPOSITORY = "nvcr.io/nvidia/k8s/dcgm-exporter"
IMAGE_TAG = "4.5.3-4.8.2-distroless"
GPU_OPERANDS_PAUSE_LABEL = gpu_operands.GPU_OPERANDS_PAUSE_LABEL
GPU_OPERANDS_PAUSED = gpu_operands.GPU_OPERANDS_PAUSED
# What `gpuprov diagnose --prometheus` reads (NVIDIA/dcgm-exporter etc/default-counters.csv,
# 4.5.3-4.8.2): SM_ACTIVE and SM_OCCUPANCY are commented out of that default list and must be on.
REQUIRED_COUNTERS = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_DRAM_ACTIVE",
                     "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_FB_USED",
                     "DCGM_FI_DEV_FB_FREE")
# Prometheus types a counters line may name; `label` turns the field into a label
# (etc/default-counters.csv format header).
COUNTER_TYPES = ("gauge", "counter", "label")


class DcgmExporterError(Exception):
    def __init__(self, problems):
        self.problems = list(problems)
        super(DcgmExporterError, self).__init__("; ".join(self.problems))


def parse_counters(text, source="counters"):
    """[(field, type, help)] of a counters CSV; DcgmExporterError naming each bad line."""
    counters, problems = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) != 3 or not parts[0] or not parts[2]:
            problems.append("%s: line %d: expected `DCGM_FIELD, type, help`, got %r" % (source, number, line))
            continue
        field, kind, help_text = parts
        if not field.startswith(("DCGM_FI_", "DCGM_EXP_")):
            problems.append("%s: line %d: %r is not a DCGM field name (DCGM_FI_... or DCGM_EXP_...)"
                            % (source, number, field))
        if kind not in COUNTER_TYPES:
            problems.append("%s: line %d: type %r: use one of %s" % (source, number, kind, ", ".join(COUNTER_TYPES)))
        counters.append((field, kind, help_text))
    fields = [counter[0] for counter in counters]
    for field in sorted(set(f for f in fields if fields.count(f) > 1)):
        problems.append("%s: %s is listed more than once" % (source, field))
    missing = [field for field in REQUIRED_COUNTERS if field not in fields]
    if missing:
        problems.append("%s: gpuprov diagnose needs %s; add them" % (source, ", ".join(missing)))
    if problems:
        raise DcgmExporterError(problems)
    return counters


def operand_affinity():
    """Only GPU nodes (GFD's nvidia.com/gpu.present=true), never a paused one."""
    return gpu_operands.gpu_operand_affinity(terms=(("nvidia.com/gpu.present", "true"),))


def exporter_values(counters_text, service_monitor, image_repository=None, image_tag=None,
                    image_pull_secrets=(), collect_interval_ms=None, pod_labels=True, extra_values=None):
    """The chart values; DcgmExporterError when the counters or options are wrong."""
    problems = []
    try:
        parse_counters(counters_text)
    except DcgmExporterError as error:
        problems.extend(error.problems)
    if not isinstance(service_monitor, bool):
        problems.append("service_monitor: expected true or false (the role resolves auto), got %r" % (service_monitor,))
    arguments = ["-f", "/etc/dcgm-exporter/default-counters.csv"]
    if collect_interval_ms is not None:
        if isinstance(collect_interval_ms, bool) or not isinstance(collect_interval_ms, int) \
                or not 1000 <= collect_interval_ms <= 3600000:
            problems.append("collect_interval_ms: a whole number of milliseconds 1000..3600000, got %r"
                            % (collect_interval_ms,))
        else:
            arguments += ["-c", str(collect_interval_ms)]
    if problems:
        raise DcgmExporterError(problems)
    values = {
        "image": {"repository": image_repository or IMAGE_REPOSITORY, "tag": image_tag or IMAGE_TAG},
        "arguments": arguments,
        "customMetrics": counters_text if counters_text.endswith("\n") else counters_text + "\n",
        "affinity": operand_affinity(),
        # GPU nodes are often tainted for GPU pods only; the exporter must still run there.
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "kubernetes": {"enablePodLabels": bool(pod_labels)},
        "serviceMonitor": {"enabled": service_monitor, "honorLabels": True, "interval": "15s"},
    }
    if image_pull_secrets:
        values["imagePullSecrets"] = [{"name": name} for name in image_pull_secrets]
    return deep_merge(values, extra_values)
