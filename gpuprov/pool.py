"""Where GPU capacity is free: per node and resource, allocatable, allocated, free, and the
GPU memory each free slot offers (`gpuprov pool`).

Reads the same snapshot model as diagnose (nodes, pods, optional gpu facts); nothing here
talks to a cluster or prints.

Memory per slot, first source that answers:
- MIG resource `nvidia.com/mig-<profile>`: GFD's `nvidia.com/mig-<profile>.memory` label (MiB,
  mixed strategy; NVIDIA/k8s-device-plugin v0.20.0 README, MIG strategies), else the catalog's instance size for the
  node's GPU model, else the size in the profile name (`20gb` read as 20 GiB: UNVERIFIED, the
  names round, e.g. 1g.10gb holds 9.62 GiB on an A100-40GB).
- Whole-GPU resources (`nvidia.com/gpu`, `nvidia.com/gpu.shared`): the GPU's memory (GFD's
  `nvidia.com/gpu.memory` label, MiB; else gpu facts; else the catalog) divided by the slots
  each GPU advertises (capacity / GPUs), because time-slicing and MPS replicas share it.
Isolation is hard for a MIG instance or a whole GPU that nobody shares (its memory is the
pod's alone) and soft for replicas of time-slicing or MPS.

Where the cluster uses DRA (ResourceSlices and ResourceClaims in the snapshot), each node's
devices are rows too, beside the device-plugin resources: published devices, those allocated
to claims, the free ones, and their memory as the slice publishes it.
"""
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value
from gpuprov.diagnose.sizing import MIB_PER_GIB, gpu_model

SCHEMA = "gpuprov.pool/v1"
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<profile>\d+g\.\d+gb(\+me)?)\Z", re.ASCII)
_PROFILE_GB = re.compile(r"\.(\d+)gb", re.ASCII)


def _int_label(labels, key):
    value = labels.get(key, "")
    return digits_value(value)


def _model(node, facts):
    names = [gpu.name for gpu in facts] + [node.labels.get("nvidia.com/gpu.product")]
    return gpu_model(names)


def _gpu_count(node, facts):
    return len(facts) or _int_label(node.labels, "nvidia.com/gpu.count")


def slot(node, resource, facts, capacity):
    """(MiB per slot or None, isolation, sharing, where the figure came from)."""
    labels = node.labels
    mig = _MIG_RESOURCE.match(resource)
    if mig:
        profile = mig.group("profile")
        replicas = _int_label(labels, "nvidia.com/mig-%s.replicas" % profile) or 1
        memory, source = _int_label(labels, "nvidia.com/mig-%s.memory" % profile), "GFD label"
        if memory is None:
            model = _model(node, facts)
            entry = model.profile(profile) if model else None
            if entry is not None:
                memory, source = entry.memory_gib * MIB_PER_GIB, "catalog %s" % model.key
        if memory is None:
            size = _PROFILE_GB.search(profile)
            memory, source = (int(size.group(1)) * MIB_PER_GIB, "profile name") if size else (None, None)
        if memory is None:
            return None, "hard" if replicas == 1 else "soft", "mig", None
        sharing = "mig" if replicas == 1 else "mig+%s" % (labels.get("nvidia.com/mig-%s.sharing-strategy" % profile)
                                                          or "time-slicing")
        return memory / replicas, "hard" if replicas == 1 else "soft", sharing, source
    memory, source = _int_label(labels, "nvidia.com/gpu.memory"), "GFD label"
    if memory is None and facts:
        memory, source = min(gpu.memory_total_mib for gpu in facts), "gpu facts"
    if memory is None:
        model = _model(node, facts)
        if model is not None:
            memory, source = model.memory_mib, "catalog %s" % model.key
    count = _gpu_count(node, facts)
    per_gpu = capacity // count if count and capacity and capacity % count == 0 else 1
    strategy = labels.get("nvidia.com/gpu.sharing-strategy") or ("time-slicing" if per_gpu > 1 else "none")
    if not count and strategy != "none":
        memory = None     # shared, but over how many GPUs is unknown: no honest figure per slot
    if per_gpu == 1 and strategy == "none":
        isolation, sharing = "hard", "exclusive"
    else:
        isolation, sharing = "soft", strategy if strategy != "none" else "time-slicing"
    if memory is None:
        return None, isolation, sharing, None
    return memory / per_gpu, isolation, sharing, source


def _blocked(node):
    if node.unschedulable:
        return "cordoned"
    if not node.ready:
        return "not ready"
    return None


def pool(snapshot):
    """{"schema", "nodes": [row], "notes"}; a row per node and GPU resource it advertises."""
    running = {}
    for pod in snapshot.pods:
        if pod.node_name and pod.phase not in ("Succeeded", "Failed"):
            running.setdefault(pod.node_name, []).append(pod)
    rows, notes = [], list(snapshot.notes)
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        facts = snapshot.facts.get(node.name) or []
        for resource in sorted(set(node.allocatable) | set(node.capacity)):
            allocatable = node.allocatable.get(resource, 0)
            allocated = sum(pod.requests.get(resource, 0) for pod in running.get(node.name, []))
            free = max(allocatable - allocated, 0)
            mib, isolation, sharing, source = slot(node, resource, facts, node.capacity.get(resource, allocatable))
            if mib is None:
                notes.append("%s: %s: GPU memory unknown (no nvidia.com/gpu.memory label, gpu facts or known "
                             "model); it is left out of --fits" % (node.name, resource))
            rows.append({"node": node.name, "resource": resource, "allocatable": allocatable,
                         "allocated": allocated, "free": free,
                         "slot_gib": round(mib / MIB_PER_GIB, 2) if mib is not None else None,
                         "free_gib": round(free * mib / MIB_PER_GIB, 2) if mib is not None else None,
                         "isolation": isolation, "sharing": sharing, "memory_from": source,
                         "blocked": _blocked(node)})
    rows.extend(dra_rows(snapshot))
    rows.sort(key=lambda row: row["node"])
    return {"schema": SCHEMA, "source": snapshot.source, "nodes": rows, "notes": notes}


def dra_rows(snapshot):
    """A row per node and kind of DRA device (driver, type, MIG profile, product, memory).

    ``resource`` reads ``dra:<driver>/<type>[-<profile>]``; allocated means allocated to a
    ResourceClaim. A free device goes to the next claim whole (isolation hard); devices of a
    shared claim are used by its pods, not free for others.
    """
    from gpuprov.diagnose.dra_checks import device_usage

    blocked = dict((n.name, _blocked(n)) for n in snapshot.nodes)
    rows = []
    for node in device_usage(snapshot):
        for kind in node["kinds"]:
            name = "dra:%s/%s" % (kind["driver"], kind["kind"].replace(" ", "-"))
            gib = kind["memory_gib"]
            rows.append({"node": node["name"], "resource": name, "allocatable": kind["devices"],
                         "allocated": kind["allocated"], "free": kind["free"], "slot_gib": gib,
                         "free_gib": round(kind["free"] * gib, 2) if gib is not None else None,
                         "isolation": "hard", "sharing": "dra", "memory_from": "ResourceSlice" if gib is not None else None,
                         "blocked": blocked.get(node["name"], "not a node" if node["name"].startswith("(") else None),
                         "product": kind["product"]})
    return rows


def fits(report, need_mib, isolation=None):
    """Only the rows where a workload of need_mib (and the isolation asked) fits now."""
    kept = [row for row in report["nodes"]
            if row["free"] > 0 and row["slot_gib"] is not None and not row["blocked"]
            and row["slot_gib"] * MIB_PER_GIB >= need_mib
            and (isolation != "hard" or row["isolation"] == "hard")]
    return dict(report, nodes=kept, fits={"memory_gib": round(need_mib / MIB_PER_GIB, 2),
                                          "isolation": isolation or "any"})
