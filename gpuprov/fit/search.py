"""`fit`: validate, choose the search, compare with the bounds, and place MIG instances."""

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import place
from gpuprov.fit.bounds import lower_bounds
from gpuprov.fit.exact import EXACT_HARD_LIMIT, EXACT_LIMIT, solve_exact
from gpuprov.fit.heuristic import item_footprint, solve_heuristic
from gpuprov.fit.hosts import group_nodes
from gpuprov.fit.model import FitInputError, METHODS, NoFit, SOFT_SHARING
from gpuprov.fit.packing_model import View, check_placeable, expand, prepare


class FitResult:
    def __init__(self, workloads, pool, items, gpus, bounds, method, optimal, proof, soft_sharing, notes):
        self.workloads = workloads
        self.pool = pool
        self.items = items
        self.gpus = gpus
        self.bounds = bounds
        self.method = method
        self.optimal = optimal
        self.proof = proof
        self.soft_sharing = soft_sharing
        self.notes = notes
        self.nodes = []
        self.restricted = False  # packed again without sharing on MIG models (node limits)

    @property
    def lower_bound(self):
        return max(b.gpus for b in self.bounds)


def fit(workloads, pool, method="auto", soft_sharing="time-slicing"):
    """Pack ``workloads`` onto the fewest GPUs of ``pool``. Returns a FitResult.

    Raises FitInputError for workloads no GPU of the pool can take, NoFit when the pool has
    too few GPUs.
    """
    if method not in METHODS:
        raise ValueError("method must be one of %s" % ", ".join(METHODS))
    if soft_sharing not in SOFT_SHARING:
        raise ValueError("soft_sharing must be one of %s" % ", ".join(SOFT_SHARING))
    result = _solve(workloads, pool, method, soft_sharing, restrict_shared=False)
    problems = group_nodes(result)
    if not problems:
        return result
    # Physical nodes hold one sharing method each. When time-sliced GPUs and MIG GPUs of a
    # model need more nodes than the pool has, pack again without sharing on MIG models.
    retry = _solve(workloads, pool, method, "time-slicing", restrict_shared=True)
    retry_problems = group_nodes(retry)
    if retry_problems:
        raise NoFit("; ".join(problems))
    retry.notes.append("every node runs one sharing method: the fewest GPUs (%d) need more nodes than the pool "
                       "has (%s), so no GPU of a MIG-capable model is shared without MIG here"
                       % (len(result.gpus), "; ".join(problems)))
    retry.restricted = True
    retry.optimal = len(retry.gpus) == retry.lower_bound
    return retry


def _solve(workloads, pool, method, soft_sharing, restrict_shared):
    views = [View(k, entry, shared_max=1 if (restrict_shared and entry.model.mig_capable) else None)
             for k, entry in enumerate(pool)]
    problems = check_placeable(workloads, views)
    if problems:
        raise FitInputError(problems)
    items = expand(workloads)
    prepare(items, views)
    bounds = lower_bounds(items, views)
    lower = max(b.gpus for b in bounds)
    capacity = None if any(v.count is None for v in views) else sum(v.count for v in views)
    if capacity is not None and lower > capacity:
        binding = [b for b in bounds if b.gpus == lower][0]
        raise NoFit("the workloads need at least %d GPUs (lower bound from %s: %s) but the pool has %d"
                    % (lower, binding.label, binding.detail, capacity))
    # Workloads that only counted models can take (hard ones need MIG; big ones a big GPU)
    # are bounded on those models alone, so a pool too small for them fails with a reason.
    checks = []
    unlimited = [v for v in views if v.count is None]
    if unlimited:
        stuck = [i for i in items if not any(item_footprint(i, v) for v in unlimited)]
        checks.append((stuck, [v for v in views if v.count is not None],
                       "workloads that fit none of %s" % ", ".join(v.model.key for v in unlimited)))
    mig_views = [v for v in views if v.geometry]
    if mig_views and all(v.count is not None for v in mig_views):
        checks.append(([i for i in items if i.hard], mig_views, "hard-isolated workloads"))
    for subset, subviews, what in checks:
        if not subset or not subviews:
            continue
        sub_capacity = sum(v.count for v in subviews)
        sub_bounds = lower_bounds(subset, subviews)
        sub_lower = max(b.gpus for b in sub_bounds)
        if sub_lower > sub_capacity:
            binding = [b for b in sub_bounds if b.gpus == sub_lower][0]
            raise NoFit("the %d %s need at least %d GPUs of %s (lower bound from %s: %s) but the pool has %d"
                        % (len(subset), what, sub_lower, ", ".join(v.model.key for v in subviews), binding.label,
                           binding.detail, sub_capacity))
    n = len(items)
    if method == "exact" and n > EXACT_HARD_LIMIT:
        raise FitInputError(["workloads: the exact search handles at most %d workload copies (replicas count), "
                             "got %d; use --method auto or heuristic" % (EXACT_HARD_LIMIT, n)])
    if method == "exact" or (method == "auto" and n <= EXACT_LIMIT):
        gpus, used, optimal, proof = solve_exact(items, views, soft_sharing), "exact", True, "exhaustive search"
        if gpus is not None and len(gpus) > lower:
            proof = "exhaustive search found no packing into %d GPU%s" % (len(gpus) - 1, "" if len(gpus) == 2 else "s")
    else:
        gpus, used = solve_heuristic(items, views, soft_sharing, lower), "heuristic"
        optimal = gpus is not None and len(gpus) == lower
        proof = "meets the lower bound" if optimal else None
    if gpus is None:
        where = "; ".join("%s: %s" % (v.model.key, "unlimited" if v.count is None else v.count) for v in views)
        if used == "exact":
            raise NoFit("no packing of the workloads fits the pool (%s): exhaustive search" % where)
        raise NoFit("the heuristic found no packing within the pool (%s); lower bound %d GPUs; "
                    "try --method exact for up to %d workload copies" % (where, lower, EXACT_HARD_LIMIT))
    gpus = _canonical_order(gpus)
    for gpu in gpus:
        gpu.shared_method = soft_sharing
        if gpu.mode == "shared":
            gpu.items.sort(key=lambda i: i.index)
        _place(gpu)
    return FitResult(workloads, pool, items, gpus, bounds, used, optimal, proof, soft_sharing, [])


def _canonical_order(gpus):
    def key(gpu):
        mode_rank = 0 if gpu.mode == "mig" else (1 if len(gpu.items) > 1 else 2)
        return (gpu.view.index, mode_rank, min(i.index for i in gpu.items))
    return sorted(gpus, key=key)


def _place(gpu):
    """MIG placements from the solver, and which workload sits in which instance."""
    if gpu.mode != "mig":
        gpu.placements = None
        return
    g = gpu.view.geometry
    counts = {}
    for p in gpu.profiles:
        counts[g.names[p]] = counts.get(g.names[p], 0) + 1
    instances = place(counts, gpu.view.model.solver_profiles(), g.compute_total)
    free = {}
    for inst in instances:
        free.setdefault(inst.profile, []).append(inst)
    pairs = sorted(zip(gpu.items, gpu.profiles), key=lambda ip: (-ip[0].memory_mib, ip[0].index))
    placements = []
    for item, p in pairs:
        inst = free[g.names[p]].pop(0)
        placements.append((item, p, inst))
    gpu.placements = sorted(placements, key=lambda t: t[2].start)
