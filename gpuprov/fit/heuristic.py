"""The heuristic search for large inputs: first-fit decreasing in a few orders, then exact
re-packs of the emptiest GPUs."""

from gpuprov.fit.exact import solve_exact
from gpuprov.fit.packing_model import Gpu, View, make_gpu, shared_ok, total_cost
from gpuprov.fit.units import EPS


NEIGHBOURHOOD_ITEMS = 10    # most workloads re-packed exactly in one improvement step
NEIGHBOURHOOD_PARTNERS = 6  # emptiest GPUs tried as partners of the emptiest one
IMPROVE_STEPS = 200         # exact re-packs per heuristic run, at most


def item_footprint(item, view):
    """(memory fraction, mode) of the smallest way ``item`` can sit on one GPU of ``view``."""
    best = None
    vi = view.index
    if not item.hard and item.memory_mib <= view.memory_mib + EPS:
        best = (item.memory_mib / view.memory_mib, "shared")
    mask = item.masks[vi]
    if mask:
        g = view.geometry
        frac = g.profiles[g.smallest(mask)].memory_slices / float(g.memory_slices)
        if best is None or frac < best[0] - EPS:
            best = (frac, "mig")
    return best


def _hard_orders(views):
    """Orders for hard items: biggest MIG footprint first, by memory slices or by compute."""
    def slices_key(item):
        shares = []
        for v in views:
            if v.geometry and item.masks[v.index]:
                profile = v.geometry.profiles[v.geometry.smallest(item.masks[v.index])]
                shares.append((profile.memory_slices / float(v.geometry.memory_slices),
                               profile.compute_slices / float(v.geometry.compute_total)))
        mem, cpu = min(shares)
        return (-mem, -cpu, -item.memory_mib, item.index)

    def compute_key(item):
        mem, cpu, _, index = slices_key(item)
        return (cpu, mem, -item.memory_mib, index)

    return [slices_key, compute_key]


def _soft_orders(views):
    """Orders for soft items: by memory, and by memory and compute together (2-D packing)."""
    biggest = max(views, key=lambda v: v.memory_mib)

    def shares(item):
        return item.memory_mib / biggest.memory_mib, item.shared_compute[biggest.index]

    def by_memory(item):
        mem, cpu = shares(item)
        return (-mem, -cpu, item.index)

    def by_sum(item):
        mem, cpu = shares(item)
        return (-(mem + cpu), -mem, item.index)

    def by_max(item):
        mem, cpu = shares(item)
        return (-max(mem, cpu), -(mem + cpu), item.index)

    return [by_memory, by_sum, by_max]


def solve_heuristic(items, views, method, lower=0):
    """Best of a few greedy passes. Returns [Gpu], or None when no pass fits the pool.

    Each pass is first-fit decreasing: hard workloads into MIG layouts, then soft ones into
    room left in MIG layouts or onto shared GPUs. Passes differ in the sort order and in
    whether soft workloads try MIG room or shared GPUs first; identical orders run once.
    """
    hard = [i for i in items if i.hard]
    soft = [i for i in items if not i.hard]
    hard_orders, soft_orders = [], []
    for key in _hard_orders(views):
        order = sorted(hard, key=key)
        if order not in hard_orders:
            hard_orders.append(order)
    for key in _soft_orders(views):
        order = sorted(soft, key=key)
        if order not in soft_orders:
            soft_orders.append(order)
    mig_room = any(v.geometry for v in views) and soft
    best, best_cost = None, None
    for hard_order in hard_orders or [[]]:
        for soft_order in soft_orders or [[]]:
            for soft_mig_first in ((True, False) if mig_room else (False,)):
                gpus = _greedy(views, method, hard_order, soft_order, soft_mig_first)
                if gpus is None:
                    continue
                cost = total_cost(gpus)
                if best is None or cost < best_cost:
                    best, best_cost = gpus, cost
    if best is not None and len(best) > lower:
        best = _improve(best, method)
    return best


def _load(gpu):
    if gpu.mode == "mig":
        g = gpu.view.geometry
        return sum(g.profiles[p].memory_slices for p in gpu.profiles) / float(g.memory_slices)
    return sum(i.memory_mib for i in gpu.items) / gpu.view.memory_mib


def _improve(gpus, method):
    """Try to empty the least-loaded GPU of a model by re-packing it with one or two others.

    First fit decreasing leaves its losses in the last, emptiest GPUs (12+8 | 8+6+6 | 6
    where 12+6+6 | 8+8+6 fits). Re-packing the emptiest GPU together with one or two of the
    next emptiest of the same model, exactly, finds such moves. Neighbourhoods stay small
    (NEIGHBOURHOOD_ITEMS workloads), so this costs the same at any input size.
    """
    gpus = list(gpus)
    steps = 0
    improved = True
    while improved and steps < IMPROVE_STEPS:
        improved = False
        by_view = {}
        for gpu in gpus:
            by_view.setdefault(gpu.view.index, []).append(gpu)
        for group in by_view.values():
            if len(group) < 2:
                continue
            view = group[0].view
            free_view = View(view.index, view.entry, view.shared_max)
            free_view.count = None
            order = sorted(group, key=lambda g: (_load(g), len(g.items)))
            emptiest, partners = order[0], order[1:1 + NEIGHBOURHOOD_PARTNERS]
            tries = [(p,) for p in partners] + [pair for pair in _pairs(partners)]
            for others in tries:
                union = emptiest.items + [i for g in others for i in g.items]
                if len(union) > NEIGHBOURHOOD_ITEMS:
                    continue
                steps += 1
                packed = solve_exact(union, [free_view], method)
                if packed is not None and len(packed) <= len(others):
                    for gpu in packed:
                        gpu.view = view
                    keep = [g for g in gpus if g is not emptiest and all(g is not o for o in others)]
                    gpus = keep + packed
                    improved = True
                    break
                if steps >= IMPROVE_STEPS:
                    break
            if improved or steps >= IMPROVE_STEPS:
                break
    return gpus


def _pairs(seq):
    return [(a, b) for k, a in enumerate(seq) for b in seq[k + 1:]]


def _greedy(views, method, hard, soft, soft_mig_first):
    remaining = [v.count for v in views]
    gpus = []
    mig_groups = {}   # (view index, sorted mask tuple) -> ids of open GPUs with that content, in open order
    shared_open = []  # ids of shared GPUs, open order
    shared_mem, shared_cpu = {}, {}

    def try_mig(item):
        best_id, best_group, best_key = None, None, None
        for group, ids in mig_groups.items():
            if not ids:
                continue
            vi, key = group
            mask = item.masks[vi]
            if not mask or (best_id is not None and ids[0] > best_id):
                continue
            new_key = tuple(sorted(key + (mask,)))
            if views[vi].geometry.fits(new_key) is not None:
                best_id, best_group, best_key = ids[0], group, new_key
        if best_id is None:
            return False
        ids = mig_groups[best_group]
        ids.pop(0)
        if not ids:
            del mig_groups[best_group]
        gpus[best_id].items.append(item)
        add_mig(best_group[0], best_key, best_id)
        return True

    def add_mig(vi, key, gid):
        geo = views[vi].geometry
        # A GPU that cannot take even the smallest instance is full: stop looking at it.
        if geo.fits(tuple(sorted(key + ((1 << len(geo.profiles)) - 1,)))) is not None:
            _add_to_group(mig_groups, (vi, key), gid)

    def try_shared(item):
        for gid in shared_open:
            gpu = gpus[gid]
            vi = gpu.view.index
            if method == "time-slicing" and (shared_mem[gid] + item.memory_mib > gpu.view.memory_mib + EPS
                                             or shared_cpu[gid] + item.shared_compute[vi] > 1.0 + EPS):
                continue
            if shared_ok(gpu.items + [item], gpu.view, method):
                gpu.items.append(item)
                shared_mem[gid] += item.memory_mib
                shared_cpu[gid] += item.shared_compute[vi]
                return True
        return False

    def open_gpu(item):
        best = None
        for view in views:
            if remaining[view.index] == 0:
                continue
            footprint = item_footprint(item, view)
            if footprint is None:
                continue
            frac, mode = footprint
            if mode == "shared" and not shared_ok([item], view, method):
                continue
            rank = (frac, 0 if mode == "shared" else 1, view.memory_mib, view.index)
            if best is None or rank < best[0]:
                best = (rank, view, mode)
        if best is None:
            return False
        _, view, mode = best
        if remaining[view.index] is not None:
            remaining[view.index] -= 1
        gid = len(gpus)
        gpus.append(Gpu(view, mode, [item]))
        if mode == "mig":
            add_mig(view.index, (item.masks[view.index],), gid)
        else:
            shared_open.append(gid)
            shared_mem[gid] = item.memory_mib
            shared_cpu[gid] = item.shared_compute[view.index]
        return True

    for item in hard:
        if not (try_mig(item) or open_gpu(item)):
            return None
    for item in soft:
        if soft_mig_first:
            placed = try_mig(item) or try_shared(item)
        else:
            placed = try_shared(item) or try_mig(item)
        if not (placed or open_gpu(item)):
            return None
    # Give each MIG GPU's items their profiles from the tightest valid layout.
    result = []
    for gpu in gpus:
        if gpu.mode == "mig":
            result.append(make_gpu(gpu.view, "mig", gpu.items))
        else:
            result.append(gpu)
    return result


def _add_to_group(groups, group, gid):
    ids = groups.setdefault(group, [])
    # Keep ids sorted so ids[0] is the first-opened GPU of the group (first fit).
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if ids[mid] < gid:
            lo = mid + 1
        else:
            hi = mid
    ids.insert(lo, gid)
