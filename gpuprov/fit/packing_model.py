"""The search's view of the problem: workload copies (items), GPU models (views), packed
GPUs, what may share a GPU, and what a packing costs."""

from gpuprov.fit.mig_geometry import geometry
from gpuprov.fit.units import EPS, NON_MIG_COMPUTE_SLICES, compute_text, gib_text


class Item:
    """One copy of a workload, as the search sees it."""

    __slots__ = ("index", "name", "workload", "memory_mib", "hard", "compute", "masks", "shared_compute")

    def __init__(self, index, name, workload):
        self.index = index
        self.name = name
        self.workload = workload
        self.memory_mib = workload.memory_mib
        self.hard = workload.hard
        self.compute = workload.compute
        self.masks = []           # per view: candidate profile mask (0: no MIG instance fits)
        self.shared_compute = []  # per view: fraction of the GPU when shared without MIG


class View:
    """A pool entry as the search sees it."""

    __slots__ = ("index", "entry", "model", "memory_mib", "geometry", "count", "shared_max")

    def __init__(self, index, entry, shared_max=None):
        self.index = index
        self.entry = entry
        self.model = entry.model
        self.memory_mib = float(entry.model.memory_mib)
        self.geometry = geometry(entry.model) if entry.model.mig_capable else None
        self.count = entry.count
        # Most soft workloads on one GPU without MIG (None: no limit); 1 forbids sharing.
        self.shared_max = shared_max


def expand(workloads):
    items = []
    for workload in workloads:
        for copy in range(workload.replicas):
            name = workload.name if workload.replicas == 1 else "%s#%d" % (workload.name, copy + 1)
            items.append(Item(len(items), name, workload))
    return items


def _shared_fraction(compute, view):
    if compute is None:
        return 0.0
    kind, amount = compute
    if kind == "fraction":
        return amount
    total = view.geometry.compute_total if view.geometry else NON_MIG_COMPUTE_SLICES
    return min(1.0, amount / float(total))


def prepare(items, views):
    for item in items:
        item.masks = [v.geometry.candidates(item.memory_mib, item.compute) if v.geometry else 0 for v in views]
        item.shared_compute = [_shared_fraction(item.compute, v) for v in views]


def check_placeable(workloads, views):
    """Problems for workloads no GPU of the pool can take, naming the workload and field."""
    problems = []
    mig_views = [v for v in views if v.geometry]
    for workload in workloads:
        where = "workload %s" % workload.name
        mem = workload.memory_mib
        if workload.hard:
            if not mig_views:
                problems.append("%s: isolation: hard needs a MIG instance, but no GPU model in the pool has MIG (%s); "
                                "add a MIG-capable model (see `gpuprov catalog`) or use isolation: soft"
                                % (where, ", ".join(v.model.key for v in views)))
                continue
            if any(v.geometry.candidates(mem, workload.compute) for v in mig_views):
                continue
            biggest_view = max(mig_views, key=lambda v: v.geometry.memory_mib[-1])
            g = biggest_view.geometry
            big = max(range(len(g.profiles)), key=lambda i: (g.memory_mib[i], g.profiles[i].compute_slices))
            if mem > g.memory_mib[big] + EPS:
                problems.append("%s: memory: %s GiB (isolation: hard) is more than the largest MIG instance in the "
                                "pool holds (%s, %s GiB on %s); use a bigger GPU model or isolation: soft"
                                % (where, gib_text(mem), g.names[big], gib_text(g.memory_mib[big]), g.model.key))
            else:
                need = max(v.geometry.compute_need(workload.compute) for v in mig_views)
                problems.append("%s: compute: %s needs %d compute slices with %s GiB; no MIG profile in the pool "
                                "has both" % (where, compute_text(workload.compute), need, gib_text(mem)))
            continue
        if any(mem <= v.memory_mib + EPS for v in views):
            continue
        if any(v.geometry and v.geometry.candidates(mem, workload.compute) for v in views):
            continue
        biggest = max(views, key=lambda v: v.memory_mib)
        problems.append("%s: memory: %s GiB is more than any GPU in the pool has (largest: %s with %s GiB)"
                        % (where, gib_text(mem), biggest.model.key, gib_text(biggest.memory_mib)))
    return problems


class Gpu:
    """One GPU of a result: a view, a mode ('mig' or 'shared') and its items.

    For 'mig', ``profiles[k]`` is the profile index (into the view's geometry) of items[k].
    """

    __slots__ = ("view", "mode", "items", "profiles", "node", "index", "placements", "shared_method")

    def __init__(self, view, mode, items, profiles=None):
        self.view = view
        self.mode = mode
        self.items = list(items)
        self.profiles = list(profiles) if profiles is not None else None
        self.node = None
        self.index = None
        self.placements = None
        self.shared_method = "time-slicing"

    @property
    def sharing(self):
        """mig, whole, or the soft sharing method (time-slicing or mps)."""
        if self.mode == "mig":
            return "mig"
        return "whole" if len(self.items) == 1 else self.shared_method


def shared_ok(items, view, method):
    """Can these soft items share ``view``'s GPU without MIG?"""
    n = len(items)
    if n == 0 or any(i.hard for i in items):
        return False
    if n > 1 and view.shared_max is not None and n > view.shared_max:
        return False
    vi = view.index
    if n == 1:
        return items[0].memory_mib <= view.memory_mib + EPS
    if method == "mps":
        if n > view.model.mps_max_clients:
            return False
        # The device plugin gives each of N replicas memory/N (rounded down) and 1/N of the threads.
        share = (view.model.memory_mib // n)
        return all(i.memory_mib <= share + EPS and i.shared_compute[vi] <= 1.0 / n + EPS for i in items)
    return (sum(i.memory_mib for i in items) <= view.memory_mib + EPS
            and sum(i.shared_compute[vi] for i in items) <= 1.0 + EPS)


# Cost of one GPU, as one integer so that sums compare lexicographically:
# GPUs first, then the GPUs' memory (smaller models first in mixed pools), then a penalty
# for weaker isolation (soft workloads time-sliced together; a one-instance MIG layout for
# a lone soft workload that could have the whole GPU).
_GPU_WEIGHT = 10 ** 12
_MEMORY_WEIGHT = 1000


def gpu_cost(view, mode, items):
    penalty = 0
    if mode == "shared" and len(items) > 1:
        penalty = 2 * len(items)
    elif mode == "mig" and not any(i.hard for i in items):
        penalty = 1 if len(items) == 1 else 0
    return _GPU_WEIGHT + int(view.memory_mib) * _MEMORY_WEIGHT + penalty


def total_cost(gpus):
    return sum(gpu_cost(g.view, g.mode, g.items) for g in gpus)


def make_gpu(view, mode, members_list):
    if mode == "shared":
        return Gpu(view, "shared", members_list)
    g = view.geometry
    ordered = sorted(members_list, key=lambda i: (i.masks[view.index], i.index))
    layout, assignment = g.fits(tuple(i.masks[view.index] for i in ordered))
    return Gpu(view, "mig", ordered, assignment)
