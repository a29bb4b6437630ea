# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A fleet plan's MIG geometry written as NVIDIA mig-parted config (migparted.py reads that
format): one named config per distinct MIG plan with explicit per-GPU entries and PCI device
filters, ``nvidia.com/mig.config=<name>`` per node, and the config as the ConfigMap the GPU
Operator's MIG manager reads; for the MIG manager or the nvidia-mig-parted CLI.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, node_labels

GPU_OPERATOR_NAMESPACE = "gpu-operator"
MIG_PARTED_CONFIGMAP_NAME = "gpuprov-mig-parted-config"
MIG_PARTED_CONFIGMAP_KEY = "config.yaml"  # the key the GPU Operator's MIG manager reads
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuprov"}


def _profile_order(model):
    return dict((name, i) for i, name in enumerate(model.mig.profiles))


def mig_parted_entries(plan):
    """mig-parted entries that recreate a node plan's MIG geometry, or None without MIG GPUs.

    GPUs with the same model and layout share one entry listing their indices; every entry
    carries the model's PCI device filter. GPUs the plan leaves alone (no MIG, or not
    selected by its MIG config) get no entry, which mig-parted also leaves alone.
    """
    groups = []  # [(key, entry)]
    for gpu in plan["gpus"]:
        mig = gpu["mig"]
        if mig is None or not mig.get("managed", True):
            continue
        model = catalog.get(gpu["model"])
        counts = {}
        for instance in mig["instances"]:
            counts[instance["profile"]] = counts.get(instance["profile"], 0) + 1
        order = _profile_order(model)
        counts = dict(sorted(counts.items(), key=lambda item: order.get(item[0], len(order))))
        key = (model.key, mig["enabled"], tuple(counts.items()))
        for group_key, entry in groups:
            if group_key == key:
                entry["devices"].append(gpu["index"])
                break
        else:
            filters = model.mig_parted_filters
            groups.append((key, {
                "device-filter": filters[0] if len(filters) == 1 else list(filters),
                "devices": [gpu["index"]],
                "mig-enabled": mig["enabled"],
                "mig-devices": counts,
            }))
    if not groups:
        return None
    return [group[1] for group in groups]


def mig_parted_config_name(plan, entries):
    """A name derived from the content: model(s) plus a digest of the entries."""
    models = []
    for gpu in plan["gpus"]:
        if gpu["mig"] is not None and gpu["mig"].get("managed", True) and gpu["model"] not in models:
            models.append(gpu["model"])
    slug = re.sub(r"[^a-z0-9.]+", "-", "-".join(models).lower()).strip("-.") or "mig"
    digest = hashlib.sha1(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest()[:8]
    return "%s-%s" % (slug[:63 - 9].rstrip("-."), digest)


def mig_parted_export(nodes):
    """(mig-parted document, {host: config name}) for every node with MIG-capable GPUs."""
    configs, assignment = {}, {}
    for host in sorted(nodes or {}):
        entries = mig_parted_entries(nodes[host])
        if entries is None:
            continue
        name = mig_parted_config_name(nodes[host], entries)
        configs[name] = entries
        assignment[host] = name
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}, assignment


def mig_config_label_patches(assignment, node_name_map=None):
    """Node patches with ``nvidia.com/mig.config=<name>`` for the MIG manager."""
    return node_labels.label_patches(dict((host, {MIG_CONFIG_LABEL: name}) for host, name in assignment.items()),
                                     dict((h, n) for h, n in (node_name_map or {}).items() if h in assignment))


def mig_parted_configmap(document, name=MIG_PARTED_CONFIGMAP_NAME, namespace=GPU_OPERATOR_NAMESPACE):
    """The mig-parted config as the GPU Operator reads it (``migManager.config.name``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "data": {MIG_PARTED_CONFIGMAP_KEY: yaml.safe_dump(document, sort_keys=False, default_flow_style=False)},
    }
