# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The NVIDIA device plugin's named configs: one per distinct node plan, checked, as the data
of the plugin's ConfigMap (the chart's ``config.map``, or a ConfigMap for ``config.name`` / the
GPU Operator), and the configs each step of a cluster-side run must keep.

Pure functions over the planner's output (``nodes``: host -> node plan, ``configs``: the
fleet's ``device_plugin_configs``). The gpu_device_plugin role (through filter plugins) and
``gpuprov export`` both render from here, so what the role applies and what the export
writes are the same objects. ``config.default`` names the config of nodes without a label;
each node's ``nvidia.com/device-plugin.config=<name>`` label (node_labels.py) selects its
own, which the chart's config-manager sidecar follows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import (
    device_plugin, device_plugin_schema, kubernetes_names, node_labels)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError

DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"

DEFAULT_CONFIG = "exclusive"
CONFIGMAP_NAME = "gpuprov-device-plugin-configs"

CONFIG_LABEL = device_plugin.CONFIG_LABEL
DEFAULT_CONFIG_ANNOTATION = "gpuprov.io/default-config"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuprov"}


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
