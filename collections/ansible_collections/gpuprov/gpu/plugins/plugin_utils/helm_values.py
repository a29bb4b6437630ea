# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helm values for the two charts of the cluster side, their pinned versions and the
``helm upgrade --install`` command that deploys them.

- NVIDIA device plugin: the fleet's named configs as ``config.map`` (device_plugin_configs.py),
  ``config.default`` naming the config of nodes without a label, GFD on, the pause affinity
  every GPU DaemonSet gpuprov deploys carries (gpu_operands.py), and a pod-template annotation
  with a digest of the configs, so a change to them rolls the DaemonSet (the plugin does not
  watch its ConfigMap).
- NFD: pinned chart, PCI labels by vendor only (``feature.node.kubernetes.io/pci-10de.present``,
  the label the plugin's default affinity selects) and the ``nvidia.com`` label namespace
  allowed, so GPU feature discovery labels are published.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, gpu_operands, hami_cluster
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.chart_values import deep_merge
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError

# Pinned chart versions: NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/Chart.yaml
# (v0.20.0) and kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/Chart.yaml (v0.19.0).
DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
DEVICE_PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
DEVICE_PLUGIN_CHART_NAME = "nvidia-device-plugin"
NFD_CHART_VERSION = "0.19.0"
NFD_CHART_REPO = "oci://registry.k8s.io/nfd/charts"
NFD_CHART_NAME = "node-feature-discovery"

NFD_NAMESPACE = "node-feature-discovery"

CONFIG_HASH_ANNOTATION = "gpuprov.io/device-plugin-configs-sha256"
# The chart adds checksum/config (the sha256 of its whole rendered ConfigMap) to the pod
# template unless podAnnotations has that key (NVIDIA/k8s-device-plugin v0.19.3
# deployments/helm/nvidia-device-plugin/templates/_helpers.tpl, "nvidia-device-plugin.podAnnotations";
# UNVERIFIED for 0.20.0): set to gpuprov's digest, a prune of unused configs rolls nothing.
CHART_CONFIG_CHECKSUM_ANNOTATION = "checksum/config"


def needs_cpu_manager_compat(nodes):
    """True when a node runs the static CPU manager.

    The plugin then has to pass device specs (``passDeviceSpecs``, the chart's
    ``compatWithCPUManager``), or the CPU manager's container updates drop the pods' GPU
    device access (k8s-device-plugin README).
    """
    return any((plan.get("kubelet") or {}).get("cpu_manager_policy") == "static" for plan in (nodes or {}).values())


def device_plugin_values(nodes, configs, default_config=device_plugin_configs.DEFAULT_CONFIG, image_repository=None, image_tag=None,
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
    data = device_plugin_configs.config_map_data(nodes, configs, default_config)
    digest_data = data if rollout_configs is None else device_plugin_configs.config_map_data(
        nodes, rollout_configs, default_config)
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
        "podAnnotations": {CONFIG_HASH_ANNOTATION: device_plugin_configs.configs_sha256(digest_data),
                           CHART_CONFIG_CHECKSUM_ANNOTATION: device_plugin_configs.configs_sha256(digest_data)},
        # The chart gives this affinity to the device plugin, GFD and MPS control daemon
        # DaemonSets (templates/daemonset-*.yml use .Values.affinity), so all leave a node
        # labelled gpuprov.io/gpu-operands=paused before its MIG layout changes.
        "affinity": gpu_operands.gpu_operand_affinity(),
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
