"""Lower bounds on the number of GPUs; the largest one is reported."""

import math

from gpuprov.fit.units import EPS, gib_text


class Bound:
    __slots__ = ("key", "label", "gpus", "detail")

    def __init__(self, key, label, gpus, detail):
        self.key = key
        self.label = label
        self.gpus = gpus
        self.detail = detail

    def as_dict(self):
        return {"constraint": self.key, "label": self.label, "gpus": self.gpus, "detail": self.detail}


def _ceil(x):
    return int(math.ceil(x - 1e-7)) if x > 0 else 0


def _shares(item, views):
    """The smallest share of one GPU ``item`` takes, per mode and resource, over the pool.

    Returns {("mig", "memory"), ("mig", "compute"), ("shared", "memory"), ("shared",
    "compute")} -> fraction of a GPU (inf when the item cannot sit on a GPU that way).
    MIG shares count whole slices of the smallest profile the item accepts.
    """
    inf = float("inf")
    shares = {("mig", "memory"): inf, ("mig", "compute"): inf, ("shared", "memory"): inf,
              ("shared", "compute"): inf}
    for view in views:
        vi = view.index
        if not item.hard and item.memory_mib <= view.memory_mib + EPS:
            shares["shared", "memory"] = min(shares["shared", "memory"], item.memory_mib / view.memory_mib)
            shares["shared", "compute"] = min(shares["shared", "compute"], item.shared_compute[vi])
        mask = item.masks[vi]
        if mask:
            geo = view.geometry
            accepted = [p for k, p in enumerate(geo.profiles) if mask >> k & 1]
            shares["mig", "memory"] = min(shares["mig", "memory"],
                                          min(p.memory_slices for p in accepted) / float(geo.memory_slices))
            shares["mig", "compute"] = min(shares["mig", "compute"],
                                           min(p.compute_slices for p in accepted) / float(geo.compute_total))
    return shares


# Sum bounds: every GPU runs MIG or not, and each way has resources that add up to at most
# one GPU. Counting one resource per way gives a valid bound for every pairing; the first two
# are the plain ones, the others help when, say, hard work is bound by compute slices and soft
# work by memory.
_PAIRINGS = [
    ("mig-granularity", "MIG profile granularity", "memory", "memory"),
    ("compute", "compute", "compute", "compute"),
    ("mig-compute-shared-memory", "MIG compute slices and shared memory", "compute", "memory"),
    ("mig-memory-shared-compute", "MIG memory slices and shared compute", "memory", "compute"),
]


def lower_bounds(items, views):
    """Valid lower bounds on the GPU count, each with a sentence saying where it comes from."""
    bounds = []
    total_mem = sum(i.memory_mib for i in items)
    biggest = max(views, key=lambda v: v.memory_mib)
    bounds.append(Bound("memory", "memory", _ceil(total_mem / biggest.memory_mib),
                        "%s GiB / %s GiB" % (gib_text(total_mem), gib_text(biggest.memory_mib))))
    single = views[0] if len(views) == 1 else None
    shares = [_shares(item, views) for item in items]
    any_mig = any(s["mig", "memory"] < float("inf") for s in shares)

    fractions = {}
    for key, label, mig_resource, shared_resource in _PAIRINGS:
        per_item, via_mig = [], []
        for share in shares:
            mig, shared = share["mig", mig_resource], share["shared", shared_resource]
            per_item.append(min(mig, shared))
            via_mig.append(mig <= shared)
        fractions[key] = (per_item, via_mig)
        total = sum(per_item)
        if total <= 0:
            continue
        if key == "mig-granularity" and not any(i.hard for i in items):
            continue  # without hard workloads this is memory again, only blurred by slices
        if key in ("mig-compute-shared-memory", "mig-memory-shared-compute") and not any_mig:
            continue
        detail = _sum_detail(items, per_item, via_mig, single, mig_resource, shared_resource)
        if key == "compute" and not any(via_mig):
            label = "compute"
        elif key == "compute" and single is not None and single.geometry is not None:
            label = "compute slices"
        bound = Bound(key, label, _ceil(total), detail)
        if key in ("mig-compute-shared-memory", "mig-memory-shared-compute") and bound.gpus <= max(
                b.gpus for b in bounds):
            continue  # a pairing only adds a line when it beats the plain bounds
        bounds.append(bound)

    count = _count_bound(items, fractions["mig-granularity"][0], single, "memory")
    cpu_count = _count_bound(items, fractions["compute"][0], single, "compute")
    for bound in (count, cpu_count):
        if bound is not None and bound.gpus > 1:
            bounds.append(bound)
    # Martello and Toth's L2 only adds a line when it beats every simpler bound.
    packing = _l2_bound(fractions["mig-granularity"][0])
    if packing is not None and packing.gpus > max(b.gpus for b in bounds):
        bounds.append(packing)
    return bounds


def _sum_detail(items, per_item, via_mig, single, mig_resource, shared_resource):
    """Where a sum bound comes from, e.g. '16 memory slices / 8 per GPU: ...'."""
    total = sum(per_item)
    g = single.geometry if single else None
    mig_total = sum(f for f, m in zip(per_item, via_mig) if m)
    shared = [(item, f) for item, f, m in zip(items, per_item, via_mig) if not m]
    shared_total = sum(f for _, f in shared)
    parts = []
    if mig_total > 0:
        if g is not None:
            per_gpu = g.memory_slices if mig_resource == "memory" else g.compute_total
            slices = int(round(mig_total * per_gpu))
            if not shared:
                return "%d %s slices / %d per GPU: each workload rounded up to its smallest MIG profile" % (
                    slices, mig_resource, per_gpu)
            parts.append("%d %s slices (%d per GPU) for MIG workloads" % (slices, mig_resource, per_gpu))
        else:
            parts.append("%.2f GPUs of MIG %s slices" % (mig_total, mig_resource))
    if shared_total > 0:
        if shared_resource == "memory" and single is not None:
            parts.append("%s GiB (%s per GPU) shared" % (gib_text(sum(i.memory_mib for i, _ in shared)),
                                                       gib_text(single.memory_mib)))
        elif shared_resource == "memory":
            parts.append("%.2f GPUs of shared memory" % shared_total)
        elif not parts:
            return "compute shares add up to %.2f GPUs" % shared_total
        else:
            parts.append("compute shares of %.2f GPUs" % shared_total)
    return "%s: %.2f GPUs" % (" + ".join(parts), total)


def _l2_bound(fractions):
    """Martello-Toth L2 bound of one-dimensional bin packing on the memory shares.

    For a threshold a <= 1/2: workloads above 1 - a share a GPU with nothing of size a or
    more; those above 1/2 share none with each other; workloads from a to 1/2 fill what
    those GPUs leave and need the rest of their total on further GPUs.
    """
    sizes = sorted((f for f in fractions if f > 0), reverse=True)
    if not sizes:
        return None
    best = None
    for alpha in sorted(set(f for f in sizes if f <= 0.5 + 1e-12)) or [0.5]:
        big = [f for f in sizes if f > 1 - alpha + 1e-12]
        mid = [f for f in sizes if 0.5 + 1e-12 < f <= 1 - alpha + 1e-12]
        small = [f for f in sizes if alpha - 1e-12 <= f <= 0.5 + 1e-12]
        extra = max(0, _ceil(sum(small) - (len(mid) - sum(mid))))
        value = len(big) + len(mid) + extra
        if best is None or value > best[0]:
            best = (value, len(big) + len(mid), len(small), alpha, extra)
    value, large, small, alpha, extra = best
    detail = ("%d workloads above half a GPU take one each; the %d from %s%% to half a GPU need %d more "
              "beyond the room those leave" % (large, small, ("%.1f" % (alpha * 100)).rstrip("0").rstrip("."), extra))
    return Bound("bin-packing", "bin packing of memory shares (Martello-Toth L2)", value, detail)


def _count_bound(items, fractions, single, kind):
    """k workloads that each need at least s of a GPU: at most floor(1/s) of them per GPU.

    On a one-model MIG pool, hard workloads can only sit in MIG instances, so their cap is
    also the most instances of that size a valid layout holds (7 one-slice instances, not 8).
    """
    g = single.geometry if single else None
    order = sorted(range(len(items)), key=lambda k: (-fractions[k], k))
    best = None
    all_hard = True
    for rank, k in enumerate(order, 1):
        size = fractions[k]
        if size <= 0:
            break
        all_hard = all_hard and items[k].hard
        cap = int(math.floor(1.0 / size + 1e-7))
        slices = None
        if g is not None and all_hard:
            if kind == "memory":
                slices = int(round(size * g.memory_slices))
                cap = min(cap, g.instance_cap(min_slices=slices))
            else:
                slices = int(round(size * g.compute_total))
                cap = min(cap, g.instance_cap(min_compute=slices))
        if cap < 1:
            continue
        gpus = _ceil(rank / float(cap))
        if best is None or gpus > best[0]:
            best = (gpus, rank, size, cap, slices)
    if best is None:
        return None
    gpus, rank, size, cap, slices = best
    plural = "" if rank == 1 else "s"
    if slices is not None and kind == "memory":
        smallest = [p.name for p in g.profiles if p.memory_slices >= slices][0]
        detail = "%d hard workload%s need %d+ of %d memory slices, %s or larger; at most %d per GPU" % (
            rank, plural, slices, g.memory_slices, smallest, cap)
        label = "per-GPU instance limits"
    elif slices is not None:
        detail = "%d hard workload%s need %d+ of %d compute slices; at most %d per GPU" % (
            rank, plural, slices, g.compute_total, cap)
        label = "per-GPU instance limits"
    else:
        detail = "%d workload%s each need at least %s%% of a GPU's %s; at most %d per GPU" % (
            rank, plural, ("%.1f" % (size * 100)).rstrip("0").rstrip("."), kind, cap)
        label = "per-GPU %s limits" % kind
    return Bound("per-gpu-%s-count" % kind, label, gpus, detail)
