# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The cluster side of a fleet plan, rendered as Kubernetes objects, Helm values and files.

Pure functions over the planner's output (``nodes``: host -> node plan, ``configs``: the
fleet's ``device_plugin_configs``). The gpu_device_plugin role (through filter plugins) and
``gpuprov export`` both render from here, so what the role applies and what the export
writes are the same objects.

- Device plugin: one named config per distinct node plan, passed to the chart as
  ``config.map`` (or as a ConfigMap for ``config.name`` / the GPU Operator), ``config.default``
  naming the config of nodes without a label, and ``nvidia.com/device-plugin.config=<name>``
  on each node. The chart's config-manager sidecar follows the label; a change to the configs
  themselves changes a pod-template annotation so the DaemonSet rolls (the plugin does not
  watch its ConfigMap).
- NFD: pinned chart, PCI labels by vendor only (``feature.node.kubernetes.io/pci-10de.present``,
  the label the plugin's default affinity selects) and the ``nvidia.com`` label namespace
  allowed, so GPU feature discovery labels are published.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json

import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import (
    device_plugin, device_plugin_schema, gpu_operands, hami_cluster, kubernetes_names, node_labels)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError

# Pinned chart versions: NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/Chart.yaml
# (v0.20.0) and kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/Chart.yaml (v0.19.0).
DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
DEVICE_PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
DEVICE_PLUGIN_CHART_NAME = "nvidia-device-plugin"
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin"
NFD_CHART_VERSION = "0.19.0"
NFD_CHART_REPO = "oci://registry.k8s.io/nfd/charts"
NFD_CHART_NAME = "node-feature-discovery"
NFD_IMAGE = "registry.k8s.io/nfd/node-feature-discovery"

DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"
NFD_NAMESPACE = "node-feature-discovery"

DEFAULT_CONFIG = "exclusive"
CONFIGMAP_NAME = "gpuprov-device-plugin-configs"

CONFIG_LABEL = device_plugin.CONFIG_LABEL
CONFIG_HASH_ANNOTATION = "gpuprov.io/device-plugin-configs-sha256"
DEFAULT_CONFIG_ANNOTATION = "gpuprov.io/default-config"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuprov"}


# -- device-plugin configs -------------------------------------------------------------------
def config_text(config):
    """A config as the YAML text the plugin reads (key order kept: version first)."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def named_configs(nodes, configs, default_config=DEFAULT_CONFIG):
    """{name: config} for the ConfigMap: every planned config plus the default, all checked.

    Raises ClusterRenderError when a node names a config that is not in ``configs`` (or a
    different one), when the default is unknown, or when a config breaks the plugin's schema.
    """
    problems = []
    result = dict(configs or {})
    for host, plan in sorted((nodes or {}).items()):
        if plan["device_plugin"] is None:
            continue  # the NVIDIA device plugin does not run there (HAMi node)
        name = plan["device_plugin"]["config_name"]
        if name not in result:
            problems.append("%s: device-plugin config %s is not among the fleet's configs (%s); pass the "
                            "device_plugin_configs of the same plan" % (host, name, ", ".join(sorted(result)) or "none"))
        elif result[name] != plan["device_plugin"]["config"]:
            problems.append("%s: device-plugin config %s differs from the fleet's config of that name; "
                            "the nodes and configs come from different plans" % (host, name))
    if default_config not in result:
        if default_config != DEFAULT_CONFIG:
            problems.append("default config %r is not one of the planned configs (%s); use %s or one of those"
                            % (default_config, ", ".join(sorted(result)) or "none", DEFAULT_CONFIG))
        else:
            # Nodes without a label (new nodes, nodes outside the inventory) get whole GPUs.
            result[DEFAULT_CONFIG] = device_plugin.render("exclusive")[1]
    for name, config in sorted(result.items()):
        if not isinstance(name, str) or len(name) > kubernetes_names.LABEL_VALUE_MAX or not kubernetes_names.LABEL_VALUE_RE.match(name):
            problems.append("device-plugin config name %r is not a valid label value (63 characters, "
                            "letters, digits, '-', '_', '.')" % (name,))
        problems.extend("device-plugin config %s: %s" % (name, p) for p in device_plugin_schema.problems(config))
    if problems:
        raise ClusterRenderError(problems)
    return dict(sorted(result.items()))


def config_map_data(nodes, configs, default_config=DEFAULT_CONFIG):
    """{config name: YAML text}: the data of the plugin's ConfigMap (and Helm config.map)."""
    return dict((name, config_text(config)) for name, config in named_configs(nodes, configs, default_config).items())


def configs_sha256(data):
    """A digest of the ConfigMap data, stable across runs and Python versions."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


def device_plugin_configmap(nodes, configs, default_config=DEFAULT_CONFIG, name=CONFIGMAP_NAME,
                            namespace=DEVICE_PLUGIN_NAMESPACE):
    """The configs as a ConfigMap, for the chart's ``config.name`` or the GPU Operator's
    ``devicePlugin.config.name``; ``config.default`` must then name ``default_config``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "annotations": {DEFAULT_CONFIG_ANNOTATION: default_config},
        },
        "data": config_map_data(nodes, configs, default_config),
    }


def live_config_map(release_values):
    """{name: config} of a deployed device plugin release's ``config.map`` (helm_info values).

    A value that is not a YAML mapping is kept as None: its name is known, its content is not
    gpuprov's to rewrite.
    """
    result = {}
    for name, text in sorted((((release_values or {}).get("config") or {}).get("map") or {}).items()):
        try:
            config = yaml.safe_load(text) if isinstance(text, str) else text
        except yaml.YAMLError:
            config = None
        result[name] = config if isinstance(config, dict) else None
    return result


def config_sets(nodes, configs, inventory_configs=None, live_values=None, live_nodes=None, node_name_map=None):
    """The device plugin configs of the three steps of a cluster-side run.

    The ConfigMap is cluster-wide and config-manager exits when a node's label names a config
    that is not in it (NVIDIA/k8s-device-plugin v0.20.0, cmd/config-manager/main.go), so a run
    limited to some hosts must keep what other nodes use:

    - ``install``: the planned configs (``configs``), every config an inventory node names
      (``inventory_configs``, also of hosts outside ``--limit``), and every config of the
      deployed release (``live_values``), so no node loses its config while labels change;
    - ``final``: after relabelling, what any inventory node or any live node label
      (``live_nodes``: Node objects, the planned nodes counted with their new label) names;
    - ``unknown``: "NODE: reason" for live nodes whose label names a config no one has.

    Returns {"install": {...}, "final": {...}, "unknown": [...]}.
    """
    planned = dict(inventory_configs or {})
    planned.update(configs or {})
    live = live_config_map(live_values)
    install = dict((name, config) for name, config in live.items() if config is not None)
    install.update(planned)
    # A HAMi node (device_plugin none) runs no NVIDIA plugin, so no config of it counts.
    relabelled = dict((name, (nodes[host]["device_plugin"] or {}).get("config_name"))
                      for host, name in node_labels.node_names(nodes, node_name_map).items())
    final, unknown = dict(planned), []
    for node in live_nodes or []:
        name = (node.get("metadata") or {}).get("name")
        label = (relabelled[name] if name in relabelled
                 else ((node.get("metadata") or {}).get("labels") or {}).get(CONFIG_LABEL))
        if label is None or label in final:
            continue
        if live.get(label) is not None:
            final[label] = live[label]
        else:
            unknown.append("%s: its label %s=%s names a config that neither the inventory nor the deployed release "
                           "has; its device plugin cannot start (config-manager exits)" % (name, CONFIG_LABEL, label))
    return {"install": dict(sorted(install.items())), "final": dict(sorted(final.items())), "unknown": unknown}


# -- Helm values -----------------------------------------------------------------------------
def deep_merge(base, extra):
    """``extra`` merged into a copy of ``base`` (mappings merge, anything else replaces)."""
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


# The pause label and the affinity every GPU DaemonSet gpuprov deploys carries (gpu_operands.py).
GPU_OPERANDS_PAUSE_LABEL = gpu_operands.GPU_OPERANDS_PAUSE_LABEL
GPU_OPERANDS_PAUSED = gpu_operands.GPU_OPERANDS_PAUSED
gpu_operand_affinity = gpu_operands.gpu_operand_affinity


def needs_cpu_manager_compat(nodes):
    """True when a node runs the static CPU manager.

    The plugin then has to pass device specs (``passDeviceSpecs``, the chart's
    ``compatWithCPUManager``), or the CPU manager's container updates drop the pods' GPU
    device access (k8s-device-plugin README).
    """
    return any((plan.get("kubelet") or {}).get("cpu_manager_policy") == "static" for plan in (nodes or {}).values())


def device_plugin_values(nodes, configs, default_config=DEFAULT_CONFIG, image_repository=None, image_tag=None,
                         image_pull_secrets=(), compat_with_cpu_manager="auto", extra_values=None,
                         rollout_configs=None):
    """Values for the nvidia-device-plugin chart (0.20.0).

    Only chart-level keys that do not override the per-node configs are set: a value such as
    ``migStrategy`` becomes an environment variable, and the plugin ranks environment over
    its config file, which would force one MIG strategy on every node.

    ``rollout_configs``: the configs the pod-template digest covers (default: ``configs``).
    The role installs a union of old and new configs first and prunes later; both steps pass
    the pruned set here, so the prune (configs no node names) does not roll the DaemonSet again.
    """
    data = config_map_data(nodes, configs, default_config)
    digest_data = data if rollout_configs is None else config_map_data(nodes, rollout_configs, default_config)
    values = {
        "config": {"map": data, "default": default_config},
        # GFD labels (gpu.product, gpu.replicas, mig.capable, mps.capable...) drive scheduling
        # and the chart's mps-control-daemon nodeSelector.
        "gfd": {"enabled": True},
        # NFD is its own release (pinned, configured below); the chart's subchart would be a
        # second copy. The subchart's condition is "nfd.enabled,gfd.enabled" (Chart.yaml).
        "nfd": {"enabled": False},
        # A config change changes the pod template, so the DaemonSet rolls and the plugin
        # rereads its configs.
        "podAnnotations": {CONFIG_HASH_ANNOTATION: configs_sha256(digest_data)},
        # The chart gives this affinity to the device plugin, GFD and MPS control daemon
        # DaemonSets (templates/daemonset-*.yml use .Values.affinity), so all leave a node
        # labelled gpuprov.io/gpu-operands=paused before its MIG layout changes.
        "affinity": gpu_operand_affinity(),
    }
    if compat_with_cpu_manager not in ("auto", "always", "never"):
        raise ClusterRenderError(["compat_with_cpu_manager must be auto, always or never, got %r"
                                  % (compat_with_cpu_manager,)])
    if compat_with_cpu_manager == "always" or (compat_with_cpu_manager == "auto" and needs_cpu_manager_compat(nodes)):
        values["compatWithCPUManager"] = True
    _set_image(values, image_repository, image_tag, image_pull_secrets)
    values = deep_merge(values, extra_values)
    if hami_cluster.hami_hosts(nodes):
        # Both plugins serve nvidia.com/gpu: never on one node (hami_cluster.py).
        values = hami_cluster.keep_nvidia_plugin_off(values)
    return values


def _set_image(values, repository, tag, pull_secrets):
    """Both charts take the same image overrides (mirrors for air-gapped clusters)."""
    image = {}
    if repository:
        image["repository"] = repository
    if tag:
        image["tag"] = tag
    if image:
        values["image"] = image
    if pull_secrets:
        values["imagePullSecrets"] = [{"name": s} for s in pull_secrets]


def nfd_values(image_repository=None, image_tag=None, image_pull_secrets=(), extra_values=None):
    """Values for the node-feature-discovery chart (0.19.0).

    ``master.config`` and ``worker.config`` are the daemons' config files. The key paths are
    those of the NFD chart's values.yaml (read on its main branch; UNVERIFIED against the
    0.19.0 tag itself) and the ones NVIDIA's device-plugin values set for its NFD 0.19.0
    subchart (``nfd.master.config.extraLabelNs``, ``nfd.worker.config.sources.pci``), which
    the tests check when that file is at hand.
    """
    values = {
        # GFD publishes nvidia.com/* labels through NFD; nfd-master drops namespaces it does
        # not allow.
        "master": {"config": {"extraLabelNs": ["nvidia.com"]}},
        "worker": {
            # Vendor only: feature.node.kubernetes.io/pci-10de.present=true, the label the
            # device plugin's default node affinity selects (NFD's default class+vendor gives
            # pci-0302_10de.present, which it does not).
            "config": {"sources": {"pci": {"deviceLabelFields": ["vendor"]}}},
            # GPU nodes are often tainted; NFD must still label them.
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            # No pause affinity: nfd-worker reads PCI ids from sysfs and never opens a GPU, so
            # it does not block a reset, and the node keeps its labels during a MIG change.
        },
    }
    _set_image(values, image_repository, image_tag, image_pull_secrets)
    return deep_merge(values, extra_values)


def chart_ref(repo_url, repo_name, chart_name):
    """(chart_ref, needs a repository entry): OCI registries are addressed directly."""
    if repo_url.startswith("oci://"):
        return repo_url.rstrip("/") + "/" + chart_name, False
    return "%s/%s" % (repo_name, chart_name), True


def helm_command(release, chart, version, namespace, values_file):
    """The `helm upgrade --install` argv that deploys a values file."""
    return ["helm", "upgrade", "--install", release, chart, "--version", version,
            "--namespace", namespace, "--create-namespace", "--values", values_file]
