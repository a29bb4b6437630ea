# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""MIG layout solver: pure placement arithmetic, shared by the planner and the node modules.

A GPU's memory is cut into memory slices (8 on A100/H100/H200/B200, 4 on A30). Each GPU
instance profile may only start at certain slices and covers a fixed number of them
(NVML's ``nvmlGpuInstancePlacement_t``: ``start`` and ``size`` counted in memory slices).
A layout is valid when every instance gets one of its profile's placements, no two
placements overlap, each profile stays within its max count, and the compute slices add up
to no more than the GPU has.

The tables come from the caller: the controller passes the GPU catalog, a node passes what
NVML reports (``nvmlDeviceGetGpuInstancePossiblePlacements``), so one solver serves both.

Nothing here talks to hardware; it imports only the standard library.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
from collections import namedtuple

Instance = namedtuple("Instance", ["profile", "start", "size"])


class LayoutError(ValueError):
    """A layout that cannot exist on the GPU. ``reason`` is a sentence for people."""


class ProfileSpec:
    """What the solver needs to know of one GPU-instance profile."""

    __slots__ = ("name", "placements", "max_count", "compute_slices")

    def __init__(self, name, placements, max_count, compute_slices):
        self.name = name
        # [(start, size), ...] in memory slices, in the order the driver lists them.
        self.placements = [tuple(p) for p in placements]
        self.max_count = int(max_count)
        self.compute_slices = int(compute_slices)

    @property
    def size(self):
        return self.placements[0][1] if self.placements else 0

    def __repr__(self):
        return "ProfileSpec(%r, placements=%r, max_count=%d, compute_slices=%d)" % (
            self.name, self.placements, self.max_count, self.compute_slices)


def _mask(start, size):
    return ((1 << size) - 1) << start


def check_counts(counts, profiles, compute_total):
    """Reject counts that no placement search can satisfy, with the reason.

    ``counts``: {profile name: count}. Raises LayoutError.
    """
    for name, count in counts.items():
        if name not in profiles:
            raise LayoutError("unknown MIG profile %r (known: %s)" % (name, ", ".join(sorted(profiles))))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise LayoutError("count of %s must be a non-negative integer, got %r" % (name, count))
        if count > profiles[name].max_count:
            raise LayoutError("%d x %s exceeds the profile's maximum of %d per GPU"
                              % (count, name, profiles[name].max_count))
    compute = sum(profiles[n].compute_slices * c for n, c in counts.items())
    if compute_total is not None and compute > compute_total:
        raise LayoutError("the layout needs %d compute slices but the GPU has %d" % (compute, compute_total))


def _expand(counts, profiles):
    """Counts -> list of profile names, hardest to place first."""
    names = []
    for name, count in counts.items():
        names.extend([name] * count)
    # Big instances first (fewest ways to fit), then fewer placements, then name for determinism.
    names.sort(key=lambda n: (-profiles[n].size, len(profiles[n].placements), n))
    return names


def place(counts, profiles, compute_total=None, occupied=0):
    """Find non-overlapping placements for ``counts`` around the ``occupied`` slice mask.

    Returns a list of Instance sorted by start, or raises LayoutError saying why not.
    Deterministic: the same input always gives the same placements, lowest starts first.
    """
    check_counts(counts, profiles, compute_total)
    names = _expand(counts, profiles)
    chosen = []
    failed = set()  # (position, occupied mask, min start) states already known to fail

    def search(pos, mask, min_start):
        if pos == len(names):
            return True
        key = (pos, mask, min_start)
        if key in failed:
            return False
        name = names[pos]
        for start, size in profiles[name].placements:
            # Identical profiles are interchangeable: place them in rising start order only.
            if start < min_start:
                continue
            bits = _mask(start, size)
            if mask & bits:
                continue
            chosen.append(Instance(name, start, size))
            nxt = pos + 1
            next_min = start + 1 if nxt < len(names) and names[nxt] == name else 0
            if search(nxt, mask | bits, next_min):
                return True
            chosen.pop()
        failed.add(key)
        return False

    if not search(0, occupied, 0):
        raise LayoutError("no non-overlapping placement exists for %s" % describe_counts(counts))
    return sorted(chosen, key=lambda i: (i.start, i.profile))


def validate_instances(instances, profiles, compute_total=None):
    """Check explicit (profile, start) instances. Returns them as Instance, sorted by start."""
    result = []
    mask = 0
    counts = {}
    for inst in instances:
        name, start = inst[0], inst[1]
        spec = profiles.get(name)
        if spec is None:
            raise LayoutError("unknown MIG profile %r (known: %s)" % (name, ", ".join(sorted(profiles))))
        sizes = dict(spec.placements)
        if start not in sizes:
            raise LayoutError("%s cannot start at memory slice %r; valid starts: %s"
                              % (name, start, ", ".join(str(placement[0]) for placement in spec.placements)))
        bits = _mask(start, sizes[start])
        if mask & bits:
            raise LayoutError("%s at slice %d overlaps another instance" % (name, start))
        mask |= bits
        counts[name] = counts.get(name, 0) + 1
        result.append(Instance(name, start, sizes[start]))
    check_counts(counts, profiles, compute_total)
    return sorted(result, key=lambda i: (i.start, i.profile))


def occupied_mask(instances):
    mask = 0
    for inst in instances:
        mask |= _mask(inst.start, inst.size)
    return mask


def counts_of(instances):
    counts = {}
    for inst in instances:
        counts[inst.profile] = counts.get(inst.profile, 0) + 1
    return counts


def describe_counts(counts):
    parts = ["%dx %s" % (c, n) for n, c in sorted(counts.items()) if c]
    return " + ".join(parts) if parts else "no instances"


def idle_slices(instances, memory_slices, profiles):
    """(idle memory slices, idle compute slices) of a layout."""
    used_mem = bin(occupied_mask(instances)).count("1")
    used_compute = sum(profiles[i.profile].compute_slices for i in instances)
    return memory_slices - used_mem, used_compute


class Transition:
    """The minimal change from one layout to another on one GPU."""

    def __init__(self, keep, destroy, create):
        self.keep = sorted(keep, key=lambda i: (i.start, i.profile))
        self.destroy = sorted(destroy, key=lambda i: (i.start, i.profile))
        self.create = sorted(create, key=lambda i: (i.start, i.profile))

    @property
    def changed(self):
        return bool(self.destroy or self.create)

    def as_dict(self):
        def rows(items):
            return [{"profile": i.profile, "placement": {"start": i.start, "size": i.size}} for i in items]
        return {"kept": rows(self.keep), "destroyed": rows(self.destroy), "created": rows(self.create)}


def plan_transition(current, desired, profiles, compute_total=None, busy=(), force=False):
    """Plan the fewest destroys and creates that turn ``current`` into ``desired``.

    ``current``: Instance list as the GPU has it now.
    ``desired``: {profile: count}, or a list of (profile, start) for explicit placements.
    ``busy``: Instances that have running processes; they are never destroyed unless ``force``.

    Instances already present with a wanted profile are kept where they are whenever the rest
    of the layout can still be placed around them; new instances get explicit placements.
    Raises LayoutError when the desired layout is invalid, or when reaching it would destroy
    a busy instance without ``force``.
    """
    current = [Instance(*i) for i in current]
    busy = set(Instance(*i) for i in busy)

    if isinstance(desired, dict):
        check_counts(desired, profiles, compute_total)
        keep, create = _best_keep(current, desired, profiles, compute_total, busy, force)
    else:
        wanted = validate_instances(desired, profiles, compute_total)
        wanted_set = set(wanted)
        keep = [i for i in current if i in wanted_set]
        create = [i for i in wanted if i not in set(keep)]

    keep_set = set(keep)
    destroy = [i for i in current if i not in keep_set]
    blocked = [i for i in destroy if i in busy]
    if blocked and not force:
        raise LayoutError(
            "reaching the layout would destroy %s, which %s running processes; stop them or set force"
            % (", ".join("%s at slice %d" % (i.profile, i.start) for i in blocked),
               "has" if len(blocked) == 1 else "have"))
    return Transition(keep, destroy, create)


def _best_keep(current, desired, profiles, compute_total, busy, force):
    """Choose which current instances to keep.

    Preference, in order: keep every busy instance (unless ``force`` makes that moot), keep
    as many instances as possible, keep as many memory slices as possible. Today's GPUs hold
    at most 7 instances, so trying every subset (at most 128) is cheap and exact.
    """
    candidates = [i for i in current if desired.get(i.profile, 0) > 0]
    n_busy_total = sum(1 for i in current if i in busy)
    best_key, best = None, None
    for size in range(len(candidates), -1, -1):
        for subset in itertools.combinations(candidates, size):
            counts = counts_of(subset)
            if any(c > desired[n] for n, c in counts.items()):
                continue
            n_busy = sum(1 for i in subset if i in busy)
            key = (force or n_busy == n_busy_total, size, sum(i.size for i in subset))
            if best_key is not None and key <= best_key:
                continue
            remaining = dict((n, desired[n] - counts.get(n, 0)) for n in desired)
            try:
                create = place(remaining, profiles, compute_total, occupied=occupied_mask(subset))
            except LayoutError:
                continue
            best_key, best = key, (list(subset), create)
    if best is None:
        raise LayoutError("no non-overlapping placement exists for %s" % describe_counts(desired))
    return best
