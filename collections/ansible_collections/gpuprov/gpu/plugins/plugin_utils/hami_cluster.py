# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The cluster side of HAMi nodes: per-node config, node labels, Helm values.

Pure functions over the planner's node plans (``plan["sharing_provider"] == "hami"``). Both the
gpu_device_plugin role (tasks/hami.yml, through filter plugins) and ``gpuprov export hami``
render from here. Formats are those of HAMi v2.10.0 (Project-HAMi/HAMi v2.10.0 charts/hami; the chart's
values.yaml and templates/device-plugin/configmap.yaml):

- one ``nodeconfig`` entry per HAMi node (``name`` = Kubernetes node name) in a ConfigMap with
  key ``config.json``, which the chart's device plugin reads when
  ``devicePlugin.nodeConfiguration.externalConfigName`` names it. gpuprov owns that ConfigMap
  (the role applies it, the export writes it), so the role and the export apply one object.
- ``gpu=on`` on HAMi nodes (the chart's ``devicePlugin.nvidiaNodeSelector``), and the label
  removed from every other planned node, so a node moved off HAMi loses HAMi's plugin.
- the NVIDIA device plugin kept off ``gpu=on`` nodes by a NotIn term in its node affinity:
  both plugins serve ``nvidia.com/gpu`` and must never run on one node (Project-HAMi/HAMi v2.10.0
  charts/hami/values.yaml: resourceName ``nvidia.com/gpu``).
- HAMi's plugin reads its config once at start: the values carry a digest of the ConfigMap as
  a pod annotation, so a config change rolls the DaemonSet.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import kubernetes_names, sharing_hami
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.chart_values import deep_merge

CHART_NAME = "hami"
CHART_VERSION = "2.10.0"  # charts/hami/Chart.yaml at v2.10.0
CHART_REPO = "https://project-hami.github.io/HAMi/"
CHART_REPO_NAME = "hami-charts"
RELEASE_NAME = "hami"
NAMESPACE = "kube-system"
CONFIGMAP_NAME = "gpuprov-hami-device-plugin"
CONFIGMAP_KEY = "config.json"  # ConfigFilePath /config/config.json in HAMi's plugin
CONFIG_HASH_ANNOTATION = "gpuprov.io/hami-node-config-sha256"
NODE_LABEL_KEY, NODE_LABEL_VALUE = list(sharing_hami.NODE_LABEL.items())[0]
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuprov"}
# The NVIDIA chart's default node affinity (k8s-device-plugin 0.20.0 values.yaml): setting
# `affinity` replaces it, so the terms are repeated with the HAMi exclusion added to each.
NVIDIA_PLUGIN_DEFAULT_TERMS = [
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}]},
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": ["NVIDIA"]}]},
    {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
]
NOT_ON_HAMI_NODES = {"key": NODE_LABEL_KEY, "operator": "NotIn", "values": [NODE_LABEL_VALUE]}


class HamiRenderError(ValueError):
    def __init__(self, problems):
        self.problems = list(problems)
        super(HamiRenderError, self).__init__("; ".join(self.problems))


def hami_hosts(nodes):
    return sorted(host for host, plan in (nodes or {}).items() if plan.get("sharing_provider") == sharing_hami.HamiProvider.name)


def _node_name(host, node_name_map):
    name = (node_name_map or {}).get(host, host)
    if not isinstance(name, str) or len(name) > kubernetes_names.NODE_NAME_MAX or not kubernetes_names.NODE_NAME_RE.match(name):
        raise HamiRenderError(["%s: %r is not a valid Kubernetes node name (lowercase DNS name); map the host "
                               "to its node name (gpu_device_plugin_node_names)" % (host, name)])
    return name


def node_config(nodes, node_name_map=None):
    """HAMi's config.json document: {"nodeconfig": [one entry per HAMi node]}."""
    entries = []
    for host in hami_hosts(nodes):
        hami = nodes[host]["hami"]
        entries.append({
            "name": _node_name(host, node_name_map),
            "operatingmode": hami["operating_mode"],
            "devicesplitcount": hami["split_count"],
            "devicememoryscaling": hami["memory_scaling"],
            "devicecorescaling": hami["core_scaling"],
        })
    return {"nodeconfig": entries}


def node_config_text(nodes, node_name_map=None):
    return json.dumps(node_config(nodes, node_name_map), indent=2, sort_keys=False) + "\n"


def configmap(nodes, node_name_map=None, name=CONFIGMAP_NAME, namespace=NAMESPACE):
    """The ConfigMap HAMi's device plugin reads (values: nodeConfiguration.externalConfigName)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": dict(MANAGED_BY, **{"app.kubernetes.io/component": "hami-device-plugin"})},
        "data": {CONFIGMAP_KEY: node_config_text(nodes, node_name_map)},
    }


def label_patches(nodes, node_name_map=None):
    """Node merge patches: gpu=on on HAMi nodes, gpu removed (null) on every other planned node."""
    hami = set(hami_hosts(nodes))
    return [{"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": _node_name(host, node_name_map),
                          "labels": {NODE_LABEL_KEY: NODE_LABEL_VALUE if host in hami else None}}}
            for host in sorted(nodes or {})]


def kubectl_label_commands(patches):
    """``kubectl label`` argv lists (``KEY-`` removes a label)."""
    commands = []
    for patch in patches:
        words = ["%s=%s" % (k, v) if v is not None else "%s-" % k for k, v in sorted(patch["metadata"]["labels"].items())]
        commands.append(["kubectl", "label", "node", patch["metadata"]["name"], "--overwrite"] + words)
    return commands


def _most_common(values, default):
    counts = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    if not counts:
        return default
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]


def values(nodes, node_name_map=None, configmap_name=CONFIGMAP_NAME, runtime_class_name=None, extra_values=None):
    """Values for the hami chart (2.10.0): cluster defaults from the plans, per-node config
    from the ConfigMap above, and a config digest on the device-plugin pods."""
    hosts = hami_hosts(nodes)
    plans = [nodes[h]["hami"] for h in hosts]
    data = node_config_text(nodes, node_name_map)
    device_plugin = {
        # Cluster-wide defaults (ConfigMap hami-scheduler-device); each node's entry overrides.
        "deviceSplitCount": _most_common([p["split_count"] for p in plans], sharing_hami.DEFAULTS["split_count"]),
        "deviceMemoryScaling": _most_common([p["memory_scaling"] for p in plans], sharing_hami.DEFAULTS["memory_scaling"]),
        "deviceCoreScaling": _most_common([p["core_scaling"] for p in plans], sharing_hami.DEFAULTS["core_scaling"]),
        "nodeConfiguration": {"externalConfigName": configmap_name},
        "podAnnotations": {CONFIG_HASH_ANNOTATION: hashlib.sha256(data.encode("utf-8")).hexdigest()},
    }
    if runtime_class_name:
        device_plugin["runtimeClassName"] = runtime_class_name
    result = {"devicePlugin": device_plugin}
    return deep_merge(result, extra_values)


def keep_nvidia_plugin_off(nvidia_values):
    """NVIDIA device-plugin chart values whose node affinity excludes HAMi nodes (gpu=on).

    Adds the NotIn term to every nodeSelectorTerm already in the values, or to the chart's
    default terms when the values set none.
    """
    result = copy.deepcopy(nvidia_values or {})
    affinity = result.setdefault("affinity", {})
    required = affinity.setdefault("nodeAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or copy.deepcopy(NVIDIA_PLUGIN_DEFAULT_TERMS)
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        if NOT_ON_HAMI_NODES not in expressions:
            expressions.append(dict(NOT_ON_HAMI_NODES, values=list(NOT_ON_HAMI_NODES["values"])))
    required["nodeSelectorTerms"] = terms
    return result
