"""MIG geometry per GPU model: the valid layouts, enumerated once with the placement solver."""

import math

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import LayoutError, place
from gpuprov.fit.units import EPS, MIB_PER_GIB


class MigGeometry:
    """A model's MIG profiles (no +me), every valid layout, and a memoised fit check.

    A layout is a tuple of instance counts, one per profile in ``self.profiles`` order. The
    set of valid layouts is closed under removing instances, so a set of workloads fits a
    GPU exactly when some valid layout with as many instances as workloads can give each
    workload an instance it accepts (a bipartite matching).
    """

    def __init__(self, model):
        self.model = model
        self.profiles = sorted((p for p in model.mig.profiles.values() if not p.media_extensions),
                               key=lambda p: (p.memory_slices, p.compute_slices, p.memory_gib))
        self.names = [p.name for p in self.profiles]
        self.memory_mib = [p.memory_gib * MIB_PER_GIB for p in self.profiles]
        self.compute_total = model.mig.compute_slices
        self.memory_slices = model.mig.memory_slices
        self._solver = model.solver_profiles()
        self.layouts = self._enumerate()
        self.by_size = {}
        for layout in self.layouts:
            self.by_size.setdefault(sum(layout), []).append(layout)
        self.max_instances = max(self.by_size)
        self._memo = {}

    def _enumerate(self):
        found = []

        def walk(i, counts, slices, compute):
            if i == len(self.profiles):
                if any(counts):
                    found.append(tuple(counts))
                return
            p = self.profiles[i]
            for n in range(p.max_count + 1):
                if (slices + n * p.memory_slices > self.memory_slices
                        or compute + n * p.compute_slices > self.compute_total):
                    break
                walk(i + 1, counts + [n], slices + n * p.memory_slices, compute + n * p.compute_slices)

        walk(0, [], 0, 0)
        valid = []
        for counts in found:
            try:
                place(dict((self.names[i], n) for i, n in enumerate(counts) if n), self._solver, self.compute_total)
            except LayoutError:
                continue
            valid.append(counts)
        # Tightest first: fewest memory slices, then compute slices.
        valid.sort(key=lambda c: (self.slices_of(c), self.compute_of(c), c))
        return valid

    def slices_of(self, counts):
        return sum(n * p.memory_slices for n, p in zip(counts, self.profiles))

    def compute_of(self, counts):
        return sum(n * p.compute_slices for n, p in zip(counts, self.profiles))

    def candidates(self, memory_mib, compute):
        """Bit mask of the profiles a workload accepts (0: none)."""
        need_slices = self.compute_need(compute)
        mask = 0
        for i, p in enumerate(self.profiles):
            if self.memory_mib[i] + EPS >= memory_mib and p.compute_slices >= need_slices:
                mask |= 1 << i
        return mask

    def compute_need(self, compute):
        if compute is None:
            return 1
        kind, amount = compute
        if kind == "slices":
            return amount
        return max(1, int(math.ceil(amount * self.compute_total - EPS)))

    def smallest(self, mask):
        """Index of the smallest profile in ``mask`` (profiles are sorted small first)."""
        return (mask & -mask).bit_length() - 1

    def fits(self, key):
        """``key``: sorted tuple of candidate masks. -> (layout, [profile index per key position]) or None."""
        try:
            return self._memo[key]
        except KeyError:
            pass
        result = None
        for layout in self.by_size.get(len(key), ()):
            instances = [i for i, n in enumerate(layout) for _ in range(n)]
            assignment = _match(key, instances)
            if assignment is not None:
                result = (layout, assignment)
                break
        self._memo[key] = result
        return result

    def instance_cap(self, min_slices=0, min_compute=0):
        """Most instances of at least these sizes that one GPU can hold."""
        key = ("cap", min_slices, min_compute)
        if key in self._memo:
            return self._memo[key]
        best = 0
        for layout in self.layouts:
            n = sum(c for c, p in zip(layout, self.profiles)
                    if p.memory_slices >= min_slices and p.compute_slices >= min_compute)
            best = max(best, n)
        self._memo[key] = best
        return best


def _match(masks, instances):
    """Give each mask (a workload) a distinct instance whose profile bit it has, or None."""
    owner = [-1] * len(instances)

    def augment(i, seen):
        for j, profile in enumerate(instances):
            if masks[i] >> profile & 1 and not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(masks)):
        if not augment(i, [False] * len(instances)):
            return None
    assignment = [None] * len(masks)
    for j, i in enumerate(owner):
        assignment[i] = instances[j]
    return assignment


_GEOMETRY = {}


def geometry(model):
    if model.key not in _GEOMETRY:
        _GEOMETRY[model.key] = MigGeometry(model)
    return _GEOMETRY[model.key]
