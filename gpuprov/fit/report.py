"""The fit report: the inventory text, the explanation and the JSON document."""

import math

import yaml

from gpuprov.fit.hosts import HOST_GROUP, inventory, node_vars
from gpuprov.fit.units import EPS, MIB_PER_GIB, compute_text, gib_text


FIT_FORMAT_VERSION = 1


def resource_name(gpu, profile_index):
    if gpu.mode == "mig":
        return "nvidia.com/mig-" + gpu.view.geometry.names[profile_index].replace("+", ".")
    return "nvidia.com/gpu"


def gpu_lines(gpu):
    """'Chat -> 3g.20gb@0' per workload, for comments and tables."""
    if gpu.mode == "mig":
        g = gpu.view.geometry
        return ["%s -> %s@%d" % (item.name, g.names[p], inst.start) for item, p, inst in gpu.placements]
    return [item.name for item in gpu.items]


class UnsafeText(str):
    """A string Ansible must never render as a template (written with the !unsafe tag)."""


class _InventoryDumper(yaml.SafeDumper):
    pass


def _unsafe_presenter(dumper, data):
    return dumper.represent_scalar("!unsafe", str(data), style="'")


_InventoryDumper.add_representer(UnsafeText, _unsafe_presenter)


def _data_only(value):
    """Every string that could read as Jinja ({{, {%, {#) becomes UnsafeText, recursively."""
    if isinstance(value, dict):
        return dict((_data_only(k) if not isinstance(k, str) else k, _data_only(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_data_only(v) for v in value]
    if isinstance(value, str) and "{" in value:
        return UnsafeText(value)
    return value


def inventory_text(result, source=None):
    """The inventory as YAML data only: which workload lands where is the hosts' ``fit_layout``
    variable (not gpuprov's, so `gpuprov plan` ignores it), everything goes through the YAML
    dumper (no name reaches a comment or raw text), and any string that could be read back as
    a Jinja template is written ``!unsafe``, so neither `gpuprov plan` nor ansible-playbook
    ever renders it. ``source`` is accepted for compatibility and not written."""
    hosts = {}
    for node in result.nodes:
        variables = node_vars(node)
        layout = [{"gpu": gpu.index, "sharing": gpu.sharing, "workloads": gpu_lines(gpu)} for gpu in node.gpus]
        # GPUs of a NUMA-aligned node may be placed out of order: the idle ones are the gaps.
        layout.extend({"gpu": index, "sharing": "idle", "workloads": []}
                      for index in sorted(set(range(node.gpu_count)) - set(g.index for g in node.gpus)))
        variables["fit_layout"] = sorted(layout, key=lambda entry: entry["gpu"])
        hosts[node.host] = variables
    document = {"all": {"children": {HOST_GROUP: {"hosts": hosts}}}}
    head = "# gpuprov fit: %d GPU(s) on %d node(s). Check it with: gpuprov plan -i <this file>\n" % (
        len(result.gpus), len(result.nodes))
    return head + yaml.dump(_data_only(document), Dumper=_InventoryDumper, sort_keys=False,
                            default_flow_style=False, width=120, allow_unicode=False)


def numa_node(gpu, nodes_by_host):
    """The NUMA node of a placed GPU, or None when the pool does not give topology."""
    node = nodes_by_host.get(gpu.node)
    numa = node.view.entry.numa_nodes if node is not None and node.view.entry.gpus_per_node else None
    if not numa:
        return None
    return gpu.index // (node.view.entry.gpus_per_node // numa)


def item_resources(gpu, item, profile_index=None):
    """The extended resources a container of ``item`` asks for on ``gpu`` (limits)."""
    if gpu.mode == "mig":
        return {resource_name(gpu, profile_index): 1}
    if item.gang is not None:
        return {"nvidia.com/gpu": item.workload.gpus}
    if gpu.shared_method == "hami" and len(gpu.items) > 1:
        # HAMi: one slot of one GPU, capped at the workload's memory (MiB) and share of cores.
        resources = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": int(math.ceil(item.memory_mib))}
        fraction = item.shared_compute[gpu.view.index]
        if fraction:
            resources["nvidia.com/gpucores"] = max(1, int(math.ceil(fraction * 100 - EPS)))
        return resources
    return {"nvidia.com/gpu": 1}


def profile_notes(result):
    """Why each MIG workload got its profile: the next smaller profile is too small."""
    notes, seen = [], set()
    for gpu in result.gpus:
        if gpu.mode != "mig":
            continue
        g = gpu.view.geometry
        for item, p, _inst in gpu.placements:
            key = (g.model.key, item.workload.name)
            if key in seen:
                continue
            seen.add(key)
            name = g.names[p]
            need_slices = g.compute_need(item.compute)
            smaller = [k for k in range(len(g.profiles)) if g.memory_mib[k] + EPS < item.memory_mib]
            reason = []
            if smaller:
                top = max(g.memory_mib[k] for k in smaller)
                names = [g.names[k] for k in smaller if abs(g.memory_mib[k] - top) < EPS]
                reason.append("%s %s %s GiB" % ("/".join(names), "has" if len(names) == 1 else "have", gib_text(top)))
            if item.compute is not None:
                reason.append("compute %s needs %d slice%s" % (compute_text(item.compute), need_slices,
                                                                "" if need_slices == 1 else "s"))
            notes.append("%s: %s GiB%s -> %s (%s GiB)%s" % (
                item.workload.name, gib_text(item.memory_mib), " hard" if item.hard else " soft", name,
                gib_text(g.memory_mib[p]), "; " + ", ".join(reason) if reason else ""))
    return notes


def explanation(result):
    """Sentences: every lower bound, which one binds, and how the count was proven or found."""
    used = len(result.gpus)
    lines = []
    for bound in sorted(result.bounds, key=lambda b: -b.gpus):
        lines.append("lower bound %d GPU%s from %s (%s)%s" % (
            bound.gpus, "" if bound.gpus == 1 else "s", bound.label, bound.detail,
            "; reached" if bound.gpus == used else ""))
    lines.extend(result.notes)
    lower = result.lower_bound
    plural = "" if used == 1 else "s"
    if used == lower:
        lines.append("%d GPU%s is optimal: it meets the lower bound" % (used, plural))
    elif result.method == "exact" and result.restricted:
        lines.append("%d GPU%s is the fewest under that rule (exhaustive search)" % (used, plural))
    elif result.method == "exact":
        lines.append("%d GPU%s is optimal: %s; the bounds above count totals and sizes, not which workloads "
                     "fit together on one GPU" % (used, plural, result.proof))
    else:
        lines.append("%d GPU%s from the heuristic (first-fit decreasing); the optimum is between %d and %d"
                     % (used, plural, lower, used))
    return lines


def as_dict(result, source=None):
    gpus = []
    nodes_by_host = dict((n.host, n) for n in result.nodes)
    for k, gpu in enumerate(result.gpus):
        used = sum(i.memory_mib for i in gpu.items)
        entry = {
            "gpu": k,
            "node": gpu.node,
            "index": gpu.index,
            "model": gpu.view.model.key,
            "sharing": gpu.sharing,
            "memory_gib": round(gpu.view.memory_mib / MIB_PER_GIB, 2),
            "used_gib": round(used / MIB_PER_GIB, 2),
            "idle_gib": round((gpu.view.memory_mib - used) / MIB_PER_GIB, 2),
            "workloads": [],
        }
        if gpu.mode == "mig":
            g = gpu.view.geometry
            entry["mig"] = {
                "instances": [{"profile": g.names[p], "placement": {"start": inst.start, "size": inst.size},
                               "memory_gib": g.profiles[p].memory_gib, "workload": item.name}
                              for item, p, inst in gpu.placements],
                "idle_memory_slices": g.memory_slices - sum(inst.size for _, _, inst in gpu.placements),
                "idle_compute_slices": g.compute_total - sum(g.profiles[p].compute_slices
                                                             for _, p, _ in gpu.placements),
            }
            entry["workloads"] = [{"name": item.name, "workload": item.workload.name,
                                   "memory_gib": round(item.memory_mib / MIB_PER_GIB, 2),
                                   "isolation": item.workload.isolation, "profile": g.names[p],
                                   "resource": resource_name(gpu, p), "resources": item_resources(gpu, item, p)}
                                  for item, p, _inst in gpu.placements]
        else:
            entry["workloads"] = [{"name": item.name, "workload": item.workload.name,
                                   "memory_gib": round(item.memory_mib / MIB_PER_GIB, 2),
                                   "isolation": item.workload.isolation, "resource": "nvidia.com/gpu",
                                   "resources": item_resources(gpu, item)}
                                  for item in gpu.items]
        numa = numa_node(gpu, nodes_by_host)
        if numa is not None:
            entry["numa_node"] = numa
        gpus.append(entry)
    return {
        "format": FIT_FORMAT_VERSION,
        "source": source,
        "gpus_used": len(result.gpus),
        "nodes_used": len(result.nodes),
        "optimal": result.optimal,
        "method": result.method,
        "proof": result.proof,
        "lower_bound": result.lower_bound,
        "bounds": [b.as_dict() for b in sorted(result.bounds, key=lambda b: -b.gpus)],
        "explanation": explanation(result),
        "profile_choices": profile_notes(result),
        "soft_sharing": result.soft_sharing,
        "idle_gib": round(sum(g["idle_gib"] for g in gpus), 2),
        "gpus": gpus,
        "inventory": inventory(result),
    }
