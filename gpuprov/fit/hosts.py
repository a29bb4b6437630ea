"""Grouping the packed GPUs into inventory hosts, one sharing method per host."""

import re

from gpuprov.fit.model import DEFAULT_GPUS_PER_NODE


HOST_GROUP = "gpuprov_fit"


def host_name(model, number):
    return "fit-%s-%02d" % (re.sub(r"[^a-z0-9]+", "-", model.key.lower()).strip("-"), number)


class Node:
    __slots__ = ("host", "view", "strategy", "gpus", "spares", "replicas")

    def __init__(self, host, view, strategy, gpus, spares, replicas):
        self.host = host
        self.view = view
        self.strategy = strategy  # mig, time-slicing, mps or exclusive
        self.gpus = gpus          # Gpu objects, index order
        self.spares = spares      # idle GPUs of a physical node
        self.replicas = replicas


def group_nodes(result):
    """Put the result's GPUs on hosts; returns problems (empty when every model's nodes suffice).

    Every node has one gpuprov_sharing, so a node holds either MIG GPUs (and whole GPUs, as
    MIG-disabled entries), or time-sliced GPUs (and whole ones), or MPS GPUs with the same
    number of workloads (the device plugin splits each GPU into that many equal shares), or
    whole GPUs only. Hosts hold up to the pool's gpus_per_node GPUs, 8 when not given; with
    gpus_per_node the pool's GPUs are physical nodes of that size, so each host lists all of
    its GPUs (unused ones idle) and the pool's node count is a limit.
    """
    nodes, problems = [], []
    by_view = {}
    for gpu in result.gpus:
        by_view.setdefault(gpu.view.index, []).append(gpu)
    number = {}
    for vi in sorted(by_view):
        gpus = by_view[vi]
        view = gpus[0].view
        entry = view.entry
        per_node = entry.gpus_per_node or DEFAULT_GPUS_PER_NODE
        physical = entry.gpus_per_node is not None
        mig = [g for g in gpus if g.mode == "mig"]
        whole = [g for g in gpus if g.mode == "shared" and len(g.items) == 1]
        shared = [g for g in gpus if g.mode == "shared" and len(g.items) > 1]
        groups = []  # [strategy, [gpus]]
        groups.extend(["mig", chunk] for chunk in _chunks(mig, per_node))
        if result.soft_sharing == "mps":
            by_n = {}
            for g in shared:
                by_n.setdefault(len(g.items), []).append(g)
            for n in sorted(by_n, reverse=True):
                groups.extend(["mps", chunk] for chunk in _chunks(by_n[n], per_node))
        else:
            groups.extend(["time-slicing", chunk] for chunk in _chunks(shared, per_node))
        # Whole GPUs fill the room left in MIG and time-sliced nodes before new nodes open.
        for group in groups:
            if group[0] in ("mig", "time-slicing"):
                while whole and len(group[1]) < per_node:
                    group[1].append(whole.pop(0))
        groups.extend(["exclusive", chunk] for chunk in _chunks(whole, per_node))
        if physical and view.count is not None and len(groups) > view.count // per_node:
            problems.append("%s: the packing needs %d node(s) of %d GPUs (%s) but the pool has %d"
                            % (view.model.key, len(groups), per_node,
                               ", ".join("%d %s" % (sum(1 for s, _ in groups if s == k), k)
                                         for k in ("mig", "time-slicing", "mps", "exclusive")
                                         if any(s == k for s, _ in groups)),
                               view.count // per_node))
        for strategy, chunk in groups:
            number[view.model.key] = number.get(view.model.key, 0) + 1
            host = host_name(view.model, number[view.model.key])
            spares = per_node - len(chunk) if physical else 0
            replicas = max(len(g.items) for g in chunk) if strategy in ("time-slicing", "mps") else None
            node = Node(host, view, strategy, chunk, spares, replicas)
            for index, gpu in enumerate(chunk):
                gpu.node, gpu.index = host, index
            nodes.append(node)
    result.nodes = nodes
    return problems


def _chunks(seq, size):
    return [list(seq[i:i + size]) for i in range(0, len(seq), size)]


def node_vars(node):
    """The node's inventory variables, in the contract `gpuprov plan` reads."""
    count = len(node.gpus) + node.spares
    variables = {"gpuprov_gpu_model": node.view.model.key, "gpuprov_gpu_count": count}
    if node.strategy == "mig":
        entries = []
        for index in range(count):
            gpu = node.gpus[index] if index < len(node.gpus) else None
            if gpu is not None and gpu.mode == "mig":
                counts = {}
                for _, p, _inst in gpu.placements:
                    name = gpu.view.geometry.names[p]
                    counts[name] = counts.get(name, 0) + 1
                entry = {"mig-enabled": True, "mig-devices": dict(sorted(counts.items()))}
            else:
                entry = {"mig-enabled": False}
            if entries and {k: v for k, v in entries[-1].items() if k != "devices"} == entry:
                entries[-1]["devices"].append(index)
            else:
                entries.append(dict({"devices": [index]}, **entry))
        variables["gpuprov_sharing"] = {"strategy": "mig", "mig": {"strategy": "mixed", "devices": entries}}
    elif node.strategy in ("time-slicing", "mps"):
        variables["gpuprov_sharing"] = {"strategy": node.strategy, "replicas": node.replicas}
    else:
        variables["gpuprov_sharing"] = {"strategy": "exclusive"}
    return variables


def inventory(result):
    hosts = dict((node.host, node_vars(node)) for node in result.nodes)
    return {"all": {"children": {HOST_GROUP: {"hosts": hosts}}}}
