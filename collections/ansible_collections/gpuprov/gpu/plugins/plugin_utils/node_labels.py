# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Node labels of a fleet plan: each inventory host's Kubernetes node name, one partial Node
object per node with the labels to set (usable as a merge patch or with server-side apply),
and the same as ``kubectl label`` commands in a shell script.

The device-plugin config labels (``nvidia.com/device-plugin.config``, node_label_patches)
and the mig-parted config labels (``nvidia.com/mig.config``, the mig-parted export) are both
rendered here, so every label gpuprov writes passes Kubernetes' label-value rule
(kubernetes_names.py) first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import kubernetes_names
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError


def node_names(nodes, node_name_map=None):
    """{inventory host: Kubernetes node name}; hosts default to their own name."""
    node_name_map = node_name_map or {}
    problems, result = [], {}
    for host in sorted(nodes or {}):
        name = node_name_map.get(host, host)
        if not isinstance(name, str) or len(name) > kubernetes_names.NODE_NAME_MAX or not kubernetes_names.NODE_NAME_RE.match(name):
            problems.append("%s: %r is not a valid Kubernetes node name (lowercase DNS name); map the host "
                            "to its node name (gpu_device_plugin_node_names)" % (host, name))
        result[host] = name
    unknown = sorted(set(node_name_map) - set(nodes or {}))
    if unknown:
        problems.append("node name mapping names host(s) without a plan: %s" % ", ".join(unknown))
    if problems:
        raise ClusterRenderError(problems)
    return result


def label_patches(labels_by_host, node_name_map=None):
    """One partial Node object per host with ``labels_by_host[host]`` as its labels; every
    node name and label value checked (ClusterRenderError lists the bad ones)."""
    names = node_names(labels_by_host, node_name_map)
    patches = []
    for host in sorted(labels_by_host):
        labels = labels_by_host[host]
        bad = ["%s=%s" % (k, v) for k, v in sorted(labels.items())
               if not (isinstance(v, str) and len(v) <= kubernetes_names.LABEL_VALUE_MAX and (v == "" or kubernetes_names.LABEL_VALUE_RE.match(v)))]
        if bad:
            raise ClusterRenderError(["%s: label value(s) not valid for Kubernetes: %s" % (host, ", ".join(bad))])
        patches.append({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": names[host], "labels": dict(sorted(labels.items()))}})
    return patches


def node_label_patches(nodes, node_name_map=None):
    """One partial Node object per planned node with the plan's labels.

    Usable as a merge patch (kubernetes.core.k8s state=patched, ``kubectl patch --type
    merge``) or with server-side apply, which owns only the fields listed.
    """
    return label_patches(dict((host, plan["labels"]) for host, plan in (nodes or {}).items()), node_name_map)


def kubectl_label_commands(patches):
    """``kubectl label`` argv lists for Node patches (``--overwrite``: the value may change)."""
    commands = []
    for patch in patches:
        labels = patch["metadata"]["labels"]
        commands.append(["kubectl", "label", "node", patch["metadata"]["name"], "--overwrite"]
                        + ["%s=%s" % (k, v) for k, v in sorted(labels.items())])
    return commands


def shell_script(commands, comment, preamble=()):
    """argv lists as a POSIX shell script; every word is quoted, so no name can inject.

    ``preamble``: fixed shell lines (not data) to run first, e.g. a ``cd``.
    """
    lines = ["#!/bin/sh", "# " + comment, "set -eu"] + list(preamble)
    lines.extend(" ".join(shlex.quote(word) for word in argv) for argv in commands)
    return "\n".join(lines) + "\n"
