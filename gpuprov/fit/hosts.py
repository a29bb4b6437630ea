"""Grouping the packed GPUs into inventory hosts, one sharing method per host."""

import re

from gpuprov.fit.model import DEFAULT_GPUS_PER_NODE


HOST_GROUP = "gpuprov_fit"


def host_name(model, number):
    return "fit-%s-%02d" % (re.sub(r"[^a-z0-9]+", "-", model.key.lower()).strip("-"), number)


class Node:
    __slots__ = ("host", "view", "strategy", "gpus", "spares", "replicas", "time_sliced")

    def __init__(self, host, view, strategy, gpus, spares, replicas, time_sliced=None):
        self.host = host
        self.view = view
        self.strategy = strategy  # mig, time-slicing, mps, hami or exclusive
        self.gpus = gpus          # Gpu objects, index order (gpu.index may skip idle GPUs)
        self.spares = spares      # idle GPUs of a physical node
        self.replicas = replicas
        # MIG nodes only: replicas of the time-sliced whole GPUs beside MIG ones (None: none).
        self.time_sliced = time_sliced

    @property
    def gpu_count(self):
        return len(self.gpus) + self.spares

    def gpu_at(self, index):
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        return None


def group_nodes(result):
    """Put the result's GPUs on hosts; returns problems (empty when every model's nodes suffice).

    Every node has one gpuprov_sharing, so a node holds either MIG GPUs (and whole GPUs, as
    MIG-disabled entries), or time-sliced GPUs (and whole ones), or MPS GPUs with the same
    number of workloads (the device plugin splits each GPU into that many equal shares), or
    HAMi GPUs (and whole ones), or whole GPUs only. Hosts hold up to the pool's
    gpus_per_node GPUs, 8 when not given; with gpus_per_node the pool's GPUs are physical
    nodes of that size, so each host lists all of its GPUs (unused ones idle) and the pool's
    node count is a limit. When that limit is too tight, time-sliced GPUs join MIG nodes as
    MIG-disabled GPUs the device plugin time-slices (time_slicing_replicas: {gpu: N}), which
    leaves the MIG instances unshared.

    The whole GPUs of one multi-GPU workload stay on one node; with the pool's numa_nodes they
    sit within one NUMA node where the node has room (GPUs are split evenly, in index order,
    among its NUMA nodes).
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
        limit = view.count // per_node if physical and view.count is not None else None
        groups = _groups(result, gpus, per_node, merge_shared=False)
        if limit is not None and len(groups) > limit and result.soft_sharing == "time-slicing":
            merged = _groups(result, gpus, per_node, merge_shared=True)
            if len(merged) < len(groups):
                groups = merged
        if limit is not None and len(groups) > limit:
            problems.append("%s: the packing needs %d node(s) of %d GPUs (%s) but the pool has %d"
                            % (view.model.key, len(groups), per_node,
                               ", ".join("%d %s" % (sum(1 for g in groups if g[0] == k), k)
                                         for k in ("mig", "time-slicing", "mps", "hami", "exclusive")
                                         if any(g[0] == k for g in groups)),
                               limit))
        for strategy, units, time_sliced in groups:
            number[view.model.key] = number.get(view.model.key, 0) + 1
            host = host_name(view.model, number[view.model.key])
            chunk = [g for unit in units for g in unit]
            spares = per_node - len(chunk) if physical else 0
            if strategy in ("time-slicing", "mps", "hami"):
                replicas = max(len(g.items) for g in chunk)
            else:
                replicas = None
            positions = _positions(units, per_node, entry.numa_nodes if physical else None)
            for gpu, position in zip(chunk, positions):
                gpu.node, gpu.index = host, position
            ordered = sorted(chunk, key=lambda g: g.index)
            nodes.append(Node(host, view, strategy, ordered, spares, replicas, time_sliced))
    result.nodes = nodes
    return problems


def _units(gpus):
    """Whole GPUs in units that stay together: one per multi-GPU workload copy, else one GPU."""
    units, by_gang = [], {}
    for gpu in gpus:
        gang = gpu.items[0].gang if len(gpu.items) == 1 else None
        if gang is None:
            units.append([gpu])
        elif gang in by_gang:
            by_gang[gang].append(gpu)
        else:
            by_gang[gang] = [gpu]
            units.append(by_gang[gang])
    return units


def _fill(groups, units, per_node):
    """Put units into the groups' free room (first fit, a unit never split); returns the rest."""
    rest = []
    for unit in units:
        for group in groups:
            if sum(len(u) for u in group[1]) + len(unit) <= per_node:
                group[1].append(unit)
                break
        else:
            rest.append(unit)
    return rest


def _groups(result, gpus, per_node, merge_shared):
    """[(strategy, [units], time-sliced replicas or None)] for one model's GPUs."""
    mig = [g for g in gpus if g.mode == "mig"]
    whole = _units([g for g in gpus if g.mode == "shared" and len(g.items) == 1])
    shared = [g for g in gpus if g.mode == "shared" and len(g.items) > 1]
    groups = []  # [strategy, [units], time-sliced replicas]
    groups.extend(["mig", [[g] for g in chunk], None] for chunk in _chunks(mig, per_node))
    if result.soft_sharing == "mps":
        by_n = {}
        for g in shared:
            by_n.setdefault(len(g.items), []).append(g)
        for n in sorted(by_n, reverse=True):
            groups.extend(["mps", [[g] for g in chunk], None] for chunk in _chunks(by_n[n], per_node))
    elif merge_shared and shared:
        replicas = max(len(g.items) for g in shared)
        mig_groups = [g for g in groups if g[0] == "mig"]
        left = _fill(mig_groups, [[g] for g in shared], per_node)
        for group in mig_groups:
            if any(len(u[0].items) > 1 for u in group[1]):
                group[2] = replicas
        groups.extend(["time-slicing", [u for u in chunk], None] for chunk in _chunks(left, per_node))
    else:
        method = "hami" if result.soft_sharing == "hami" else "time-slicing"
        groups.extend([method, [[g] for g in chunk], None] for chunk in _chunks(shared, per_node))
    # Whole GPUs fill the room left in other nodes before new nodes open.
    whole = _fill([g for g in groups if g[0] in ("mig", "time-slicing", "hami")], whole, per_node)
    exclusive = []
    for unit in sorted(whole, key=len, reverse=True):  # first fit decreasing; stable for equal sizes
        for group in exclusive:
            if sum(len(u) for u in group[1]) + len(unit) <= per_node:
                group[1].append(unit)
                break
        else:
            exclusive.append(["exclusive", [unit], None])
    groups.extend(exclusive)
    return [tuple(g) for g in groups]


def _positions(units, per_node, numa_nodes):
    """GPU index of each GPU of ``units`` (flattened order). Without NUMA: 0, 1, 2, ...

    With NUMA nodes, units of several GPUs go first, each into the fullest NUMA node that still
    has room for all of it (best fit); single GPUs then take the lowest free indices.
    """
    flat = [g for unit in units for g in unit]
    if not numa_nodes or numa_nodes == 1:
        return list(range(len(flat)))
    block = per_node // numa_nodes
    free = [list(range(k * block, (k + 1) * block)) for k in range(numa_nodes)]
    where = {}
    for unit in sorted([u for u in units if len(u) > 1], key=len, reverse=True):
        fitting = [k for k in range(numa_nodes) if len(free[k]) >= len(unit)]
        if not fitting:
            continue  # no NUMA node has room for all of it: it spans (placed below)
        k = min(fitting, key=lambda b: (len(free[b]), b))
        for gpu in unit:
            where[id(gpu)] = free[k].pop(0)
    rest = sorted(i for block_free in free for i in block_free)
    return [where[id(g)] if id(g) in where else rest.pop(0) for g in flat]


def _chunks(seq, size):
    return [list(seq[i:i + size]) for i in range(0, len(seq), size)]


def node_vars(node):
    """The node's inventory variables, in the contract `gpuprov plan` reads."""
    count = node.gpu_count
    variables = {"gpuprov_gpu_model": node.view.model.key, "gpuprov_gpu_count": count}
    if node.strategy == "mig":
        entries = []
        for index in range(count):
            gpu = node.gpu_at(index)
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
        if node.time_sliced:
            # Only the MIG-disabled GPUs are time-sliced; MIG instances stay whole.
            variables["gpuprov_sharing"]["time_slicing_replicas"] = {"gpu": node.time_sliced}
    elif node.strategy in ("time-slicing", "mps"):
        variables["gpuprov_sharing"] = {"strategy": node.strategy, "replicas": node.replicas}
    elif node.strategy == "hami":
        variables["gpuprov_sharing"] = {"strategy": "hami", "hami": {"split_count": max(2, node.replicas)}}
    else:
        variables["gpuprov_sharing"] = {"strategy": "exclusive"}
    if node.view.entry.cpu_manager_policy == "static":
        # `fit -o pods` makes Guaranteed pods with whole CPUs for these nodes; pinning needs this.
        variables["gpuprov_kubelet"] = {"cpu_manager_policy": "static", "reserved_system_cpus": "auto",
                                        "topology_manager_policy": "single-numa-node"}
    return variables


def inventory(result):
    hosts = dict((node.host, node_vars(node)) for node in result.nodes)
    return {"all": {"children": {HOST_GROUP: {"hosts": hosts}}}}
