# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a rollout reads from the cluster between its steps: pods a drain must remove, the
device plugin chart's pods per node, a node's allocatable against its plan, and wave sizes.

Pure functions over objects as kubernetes.core.k8s_info returns them (plain dicts), used by
the playbooks through filter plugins.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import is_digits

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# The device plugin chart's DaemonSets, by component: the plugin's name is the chart's fullname,
# GFD and the MPS control daemon append a suffix (NVIDIA/k8s-device-plugin v0.20.0 chart
# templates daemonset-gfd.yml, daemonset-mps-control-daemon.yml; UNVERIFIED: the suffixes were
# not read from the v0.20.0 tag itself).
CHART_COMPONENTS = (("device-plugin", ""), ("gpu-feature-discovery", "-gpu-feature-discovery"),
                    ("mps-control-daemon", "-mps-control-daemon"))


def _owner_kinds(pod):
    return [ref.get("kind") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []]


def _key(pod):
    metadata = pod.get("metadata") or {}
    return "%s/%s" % (metadata.get("namespace"), metadata.get("name"))


def pods_left_after_drain(pods):
    """["NS/NAME", ...] of the pods a drain must have removed from the node and did not.

    Pods that stay by design: DaemonSet pods (the device plugin, GFD, NFD: a DaemonSet puts
    them back at once and they tolerate the cordon), mirror pods (the kubelet's static pods,
    which the API server cannot delete) and finished pods (they hold nothing). A pod being
    deleted (deletionTimestamp set) still holds its GPUs until its containers stop, so it counts.
    """
    left = []
    for pod in pods or []:
        metadata = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if "DaemonSet" in _owner_kinds(pod):
            continue
        left.append(_key(pod))
    return sorted(left)


def pods_without_controller(pods):
    """["NS/NAME", ...] of the pods a drain would delete for good: running or pending pods with
    no owner reference (no ReplicaSet, Job, StatefulSet or DaemonSet re-creates them). kubectl
    drain refuses them without --force (k8s.io/kubectl pkg/drain/filters.go unreplicatedFilter),
    whatever their volumes. Mirror pods (the API server cannot delete them) and finished pods
    are not counted."""
    left = []
    for pod in pods or []:
        metadata = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if not metadata.get("ownerReferences"):
            left.append(_key(pod))
    return sorted(left)


def chart_daemonsets(fullname):
    """{component: DaemonSet name} of a device plugin release whose fullname is ``fullname``."""
    return dict((component, fullname + suffix) for component, suffix in CHART_COMPONENTS)


def _ready(pod):
    if (pod.get("status") or {}).get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def operand_problems(pods, expected, fullname):
    """One line per GPU node whose device plugin chart pods are not all there and ready.

    ``expected``: {node name: [component, ...]} - e.g. ["device-plugin", "gpu-feature-discovery"]
    plus "mps-control-daemon" on nodes whose config shares by MPS. A DaemonSet with no pod on a
    node counts as "ready" in its status (desired 0 = ready 0), so each node's pod is checked.
    """
    by_ds = dict((name, component) for component, name in chart_daemonsets(fullname).items())
    found = {}
    for pod in pods or []:
        owners = [ref.get("name") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
                  if ref.get("kind") == "DaemonSet"]
        component = next((by_ds[o] for o in owners if o in by_ds), None)
        node = (pod.get("spec") or {}).get("nodeName")
        if component is None or node is None:
            continue
        found.setdefault(node, {}).setdefault(component, []).append((_key(pod), _ready(pod)))
    problems = []
    for node in sorted(expected or {}):
        for component in expected[node]:
            pods_here = found.get(node, {}).get(component, [])
            if not pods_here:
                problems.append("%s: no %s pod (DaemonSet %s) on the node" % (node, component, by_ds_name(fullname, component)))
            elif not any(ready for _key_, ready in pods_here):
                problems.append("%s: %s pod %s is not ready" % (node, component, ", ".join(k for k, _r in pods_here)))
    return problems


def by_ds_name(fullname, component):
    return chart_daemonsets(fullname)[component]


def allocatable_problems(node, resources):
    """[line] where the Node's status.allocatable differs from the plan's advertised resources.

    ``resources``: the plan's {resource: count}. Resources of the same families the plan does
    not list (an ``nvidia.com/mig-*`` or ``nvidia.com/gpu`` left over from an older layout)
    must be gone (0 or absent), or pods would be scheduled onto devices that no longer exist.
    """
    name = (node.get("metadata") or {}).get("name")
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    problems = []
    for resource, count in sorted((resources or {}).items()):
        have = allocatable.get(resource)
        if str(have) != str(count):
            problems.append("%s: allocatable %s is %s, the plan advertises %s" % (name, resource, have or 0, count))
    for resource, have in sorted(allocatable.items()):
        if resource in (resources or {}) or str(have) == "0":
            continue
        if resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-"):
            problems.append("%s: allocatable %s is %s, the plan advertises none" % (name, resource, have))
    return problems


def _pct_to_int(value, count):
    """As Ansible's serial does (ansible.utils.helpers.pct_to_int): int(pct * count) or 1."""
    if isinstance(value, str) and value.endswith("%"):
        return int(int(value[:-1]) / 100.0 * count) or 1
    return int(value)


def wave_sizes(waves, host_count, max_nodes=None):
    """Ansible ``serial`` batch sizes with no wave larger than ``max_nodes``.

    Percentages are resolved against ``host_count`` the way Ansible resolves them, then
    capped; the last size repeats until every host ran (Ansible's rule), so a capped last wave
    means every later wave has at most ``max_nodes`` nodes. ``max_nodes`` None or 0: no cap.
    """
    if isinstance(waves, (str, int)):
        waves = [waves]
    if not waves:
        raise ValueError("waves: at least one wave size is needed")
    if max_nodes is not None and (not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 0):
        raise ValueError("max nodes per wave must be a whole number >= 0 (0: no cap), got %r" % (max_nodes,))
    sizes = []
    for wave in waves:
        if isinstance(wave, bool) or not (isinstance(wave, int) or (isinstance(wave, str) and len(wave) <= 12 and (
                is_digits(wave) or (wave.endswith("%") and is_digits(wave[:-1]))))):
            raise ValueError("wave %r: use a node count (1) or a percentage (10%%)" % (wave,))
        size = _pct_to_int(wave if not is_digits(wave) else int(wave), host_count)
        if size <= 0:
            raise ValueError("wave %r: must be at least one node" % (wave,))
        if max_nodes:
            size = min(size, max_nodes)
        sizes.append(size)
    return sizes
