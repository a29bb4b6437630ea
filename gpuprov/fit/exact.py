"""The exact search: a proven optimum over subsets of workload copies, for small inputs."""

import itertools

from gpuprov.fit.packing_model import gpu_cost, make_gpu, shared_ok


EXACT_LIMIT = 12         # workload copies; above this `auto` uses the heuristic
EXACT_HARD_LIMIT = 14    # the exact search needs 2^n memory and about 3^n steps


def solve_exact(items, views, method):
    """The cheapest packing (fewest GPUs first). Returns [Gpu], or None when none fits the pool.

    best(S), the cheapest packing of the workload set S, is the cheapest of: one GPU holding
    a set T that contains S's first workload, plus best(S - T). Copies of one workload are
    interchangeable, so T only takes the lowest-numbered copies left of each workload; that
    keeps 12 copies of one workload at 13 states instead of 4,096. Whether T fits one GPU
    (a MIG layout, or sharing) is computed once per T and, for MIG, memoised by the multiset
    of the workloads' acceptable profiles.
    """
    n = len(items)
    if n > EXACT_HARD_LIMIT:
        raise ValueError("the exact search handles at most %d workload copies, got %d" % (EXACT_HARD_LIMIT, n))
    by_index = dict((v.index, v) for v in views)
    groups = {}
    for k, item in enumerate(items):
        groups.setdefault(id(item.workload), []).append(k)
    group_members = list(groups.values())
    option_memo = {}

    def options(mask):
        """[(cost, view index, mode)] cheapest first, for a GPU holding exactly ``mask``."""
        found = option_memo.get(mask)
        if found is not None:
            return found
        members = [items[k] for k in range(n) if mask >> k & 1]
        found = []
        for view in views:
            vi, g = view.index, view.geometry
            best = None
            if g is not None and len(members) <= g.max_instances and all(i.masks[vi] for i in members):
                if g.fits(tuple(sorted(i.masks[vi] for i in members))) is not None:
                    best = (gpu_cost(view, "mig", members), vi, "mig")
            if shared_ok(members, view, method):
                cost = gpu_cost(view, "shared", members)
                if best is None or cost < best[0]:
                    best = (cost, vi, "shared")
            if best is not None:
                found.append(best)
        found.sort()
        option_memo[mask] = found
        return found

    def subsets(s):
        """Sets T for the GPU holding s's first workload: lowest copies of each workload only."""
        low = (s & -s).bit_length() - 1
        choices = []
        for members in group_members:
            present = [k for k in members if s >> k & 1]
            if not present:
                continue
            prefixes, acc = [0], 0
            for k in present:
                acc |= 1 << k
                prefixes.append(acc)
            choices.append(prefixes[1:] if present[0] == low else prefixes)
        for combo in itertools.product(*choices):
            t = 0
            for part in combo:
                t |= part
            yield t

    limited = [v.index for v in views if v.count is not None] if len(views) > 1 else []
    full = (1 << n) - 1
    if not limited:
        choice = _search_scalar(full, subsets, options)
    else:
        choice = _search_counted(full, subsets, options, limited, by_index)
    if choice is None:
        return None
    gpus = []
    for mask, vi, mode in choice:
        members = [items[k] for k in range(n) if mask >> k & 1]
        gpus.append(make_gpu(by_index[vi], mode, members))
    if len(views) == 1 and views[0].count is not None and len(gpus) > views[0].count:
        return None
    return gpus


def _search_scalar(full, subsets, options):
    """Min-cost partition when no pool count has to be tracked: [(mask, view index, mode)]."""
    inf = float("inf")
    memo = {0: (0, 0, None, None)}

    def best(s):
        found = memo.get(s)
        if found is not None:
            return found
        result = (inf, 0, None, None)
        for t in subsets(s):
            opts = options(t)
            if not opts:
                continue
            cost, vi, mode = opts[0]
            if cost >= result[0]:
                continue
            total = cost + best(s ^ t)[0]
            if total < result[0]:
                result = (total, t, vi, mode)
        memo[s] = result
        return result

    if best(full)[0] == inf:
        return None
    choice, s = [], full
    while s:
        _, t, vi, mode = memo[s]
        choice.append((t, vi, mode))
        s ^= t
    return choice


def _search_counted(full, subsets, options, limited, by_index):
    """Min-cost partition that keeps each counted model within the pool's count."""
    position = dict((vi, k) for k, vi in enumerate(limited))
    caps = tuple(by_index[vi].count for vi in limited)
    zero = (0,) * len(limited)
    # best(s): {GPUs used per counted model: (cost, t, view index, mode)}
    memo = {0: {zero: (0, 0, None, None)}}

    def best(s):
        found = memo.get(s)
        if found is not None:
            return found
        table = {}
        for t in subsets(s):
            opts = options(t)
            if not opts:
                continue
            before = best(s ^ t)
            for cost, vi, mode in opts:
                k = position.get(vi)
                for usage, entry in before.items():
                    if k is not None:
                        if usage[k] + 1 > caps[k]:
                            continue
                        usage = usage[:k] + (usage[k] + 1,) + usage[k + 1:]
                    total = entry[0] + cost
                    known = table.get(usage)
                    if known is None or total < known[0]:
                        table[usage] = (total, t, vi, mode)
        memo[s] = table
        return table

    final = best(full)
    if not final:
        return None
    usage = min(final, key=lambda u: (final[u][0], u))
    choice, s = [], full
    while s:
        _, t, vi, mode = memo[s][usage]
        choice.append((t, vi, mode))
        k = position.get(vi)
        if k is not None:
            usage = usage[:k] + (usage[k] - 1,) + usage[k + 1:]
        s ^= t
    return choice
