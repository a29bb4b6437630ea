"""Pack workloads onto the fewest GPUs: sharing method, MIG layout and placements per GPU.

Users describe models ("Chat needs 10 GiB and hard isolation"), not slices. ``fit`` picks,
for every GPU it uses, one sharing method (a MIG layout, time-slicing, MPS, or the whole
GPU), puts every workload somewhere, and says which constraint bound the GPU count.

Units. MIG profile names say "gb" (``1g.10gb``) but the memory an instance really offers is
what nvidia-smi prints, in GiB: 1g.10gb on an A100-40GB holds 9.62 GiB. Sizes here follow
Kubernetes quantities, so nothing depends on a guess:

* a bare number (``memory: 10``) is GiB, the unit of nvidia-smi and of the GPU catalog;
* ``"10GiB"``/``"10Gi"`` is 10 x 2^30 bytes; ``"10GB"``/``"10G"`` is 10 x 10^9 bytes
  (9.31 GiB); ``Mi``/``MiB``, ``M``/``MB``, ``Ti``/``TiB`` and ``T``/``TB`` likewise.

A workload fits a MIG instance when its memory is at most the instance's GiB from the
catalog, so ``10`` (GiB) needs more than 1g.10gb on an A100-40GB while ``"10GB"`` fits it.

Sharing rules.

* ``isolation: hard`` workloads each get a MIG instance of their own, with memory (and
  compute slices) at least what they need. Only MIG-capable models host them.
* ``isolation: soft`` workloads may share a GPU without MIG: with time-slicing their memory
  adds up to at most the GPU's memory and their compute fractions (when given) to at most 1;
  with MPS (``soft_sharing="mps"``) the device plugin splits the GPU into equal shares, so
  each one must fit memory/N and compute 1/N. A soft workload may also take a MIG instance
  of its own on a MIG GPU, beside hard ones.
* A MIG instance is never time-sliced among several workloads. The device plugin's
  time-slicing on MIG nodes (``time_slicing_replicas``) applies to every MIG device of the
  node, so it would let pods into the hard-isolated instances too; ``fit`` never sets it.
* Media-extension profiles (``+me``) are never chosen: no workload asks for them and they
  hold no more than the plain 1g profile.
* One sharing method per GPU. Among packings with the fewest GPUs, ``fit`` prefers smaller
  GPUs (in mixed pools), then isolation: MIG instances over time-slicing for soft workloads,
  and a whole GPU over a one-instance MIG layout.

Search. Up to ``EXACT_LIMIT`` workload copies the result is a proven optimum: an exhaustive
search over subsets of workloads (the cheapest way to pack a set is one feasible GPU holding
its first workload plus the cheapest packing of the rest, memoised per set; copies of one
workload are interchangeable and searched once), where a GPU's MIG feasibility comes from
the valid layouts enumerated once per model with the placement solver, memoised by the
multiset of the workloads' acceptable profiles. Larger inputs get first-fit decreasing into
MIG layouts (from the same set of valid layouts) and onto shared GPUs, tried in a few
orders, then exact re-packs of the emptiest GPU with one or two others; such a result is
called optimal only when it meets a lower bound.

Lower bounds (every one is valid for every packing, so the largest is reported): memory
(all workloads / the biggest GPU), MIG granularity (hard workloads rounded up to their
smallest MIG profile, in memory slices), compute (slices or fractions), sums that count
compute slices on MIG GPUs and memory on shared ones (each GPU is one or the other),
per-GPU count limits (k workloads that each need more than 1/(c+1) of a GPU need k/c GPUs)
and Martello and Toth's L2 bound of bin packing.

Hosts. Each gets one ``gpuprov_sharing``, so the GPUs of a model are grouped by sharing
method into hosts of up to ``gpus_per_node`` GPUs (8 when the pool does not say); see
``group_nodes``.

Nothing here prints or exits; the CLI (``gpuprov.cmd_fit``) does.
"""
import itertools
import json
import math
import re

import yaml

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import LayoutError, place
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog

FIT_FORMAT_VERSION = 1
EXACT_LIMIT = 12         # workload copies; above this `auto` uses the heuristic
EXACT_HARD_LIMIT = 14    # the exact search needs 2^n memory and about 3^n steps
DEFAULT_GPUS_PER_NODE = 8
NEIGHBOURHOOD_ITEMS = 10    # most workloads re-packed exactly in one improvement step
NEIGHBOURHOOD_PARTNERS = 6  # emptiest GPUs tried as partners of the emptiest one
IMPROVE_STEPS = 200         # exact re-packs per heuristic run, at most
# Compute slices of the 7-slice MIG geometry; "3g" on a GPU without MIG means 3/7 of it.
NON_MIG_COMPUTE_SLICES = 7
HOST_GROUP = "gpuprov_fit"
WORKLOAD_KEYS = ("name", "memory", "compute", "isolation", "replicas")
POOL_KEYS = ("model", "count", "gpus_per_node")
SOFT_SHARING = ("time-slicing", "mps")
METHODS = ("auto", "exact", "heuristic")

_EPS = 1e-9
MIB_PER_GIB = 1024.0
_UNIT_MIB = {
    "": MIB_PER_GIB,
    "ki": 1.0 / 1024, "k": 1e3 / 2 ** 20,
    "mi": 1.0, "m": 1e6 / 2 ** 20,
    "gi": 1024.0, "g": 1e9 / 2 ** 20,
    "ti": 1024.0 * 1024, "t": 1e12 / 2 ** 20,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt]i?)b?)?\s*$", re.IGNORECASE)
_SLICES_RE = re.compile(r"^\s*(\d+)\s*g\s*$", re.IGNORECASE)
_PERCENT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*%\s*$")


class FitInputError(Exception):
    """Bad input: ``problems`` holds one `WHERE: FIELD: reason` line each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("%d problem(s) in the fit input" % len(self.problems))


class NoFit(Exception):
    """The workloads are valid but do not fit the pool; ``reason`` says why."""

    def __init__(self, reason):
        self.reason = reason
        super().__init__(reason)


def gib_text(mib):
    """MiB -> '9.62', '46', '0.5' (GiB, at most two decimals)."""
    text = "%.2f" % (mib / MIB_PER_GIB)
    return text.rstrip("0").rstrip(".") if "." in text else text


# -- input ------------------------------------------------------------------------------------

def parse_memory_mib(value):
    """A workload's memory -> MiB (float). Bare numbers are GiB; see the module docstring."""
    if isinstance(value, bool) or value is None:
        raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
    if isinstance(value, (int, float)):
        mib = float(value) * MIB_PER_GIB
    else:
        match = _SIZE_RE.match(str(value))
        if not match:
            raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
        mib = float(match.group(1)) * _UNIT_MIB[(match.group(2) or "").lower()]
    if not mib > 0 or math.isinf(mib):
        raise ValueError("must be > 0, got %r" % (value,))
    return mib


def parse_compute(value):
    """compute -> None, ("fraction", x) with 0 < x <= 1, or ("slices", n).

    A float (0.5, 1.0) or a percentage ("50%") is a fraction of a GPU; an integer from 2 or
    "3g" is a number of MIG compute slices. A bare 1 could mean either, so it is refused.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r" % (value,))
    if isinstance(value, int):
        if value == 1:
            raise ValueError("1 is ambiguous: write 1.0 for a whole GPU or \"1g\" for one MIG compute slice")
        if not 2 <= value <= NON_MIG_COMPUTE_SLICES:
            raise ValueError("compute slices must be from 1 to %d (\"1g\"..\"7g\"), got %r"
                             % (NON_MIG_COMPUTE_SLICES, value))
        return ("slices", value)
    if isinstance(value, float):
        fraction = value
    else:
        text = str(value)
        slices = _SLICES_RE.match(text)
        if slices:
            count = int(slices.group(1))
            if not 1 <= count <= NON_MIG_COMPUTE_SLICES:
                raise ValueError("compute slices must be from 1 to %d (\"1g\"..\"7g\"), got %r"
                                 % (NON_MIG_COMPUTE_SLICES, value))
            return ("slices", count)
        percent = _PERCENT_RE.match(text)
        try:
            fraction = float(percent.group(1)) / 100.0 if percent else float(text)
        except ValueError:
            raise ValueError("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r"
                             % (value,)) from None
    if not 0 < fraction <= 1:
        raise ValueError("a fraction of a GPU must be above 0 and at most 1, got %r "
                         "(for MIG compute slices write \"3g\")" % (value,))
    return ("fraction", fraction)


def compute_text(compute):
    if compute is None:
        return "-"
    kind, amount = compute
    return "%dg" % amount if kind == "slices" else "%g" % amount


class Workload:
    __slots__ = ("name", "memory_mib", "compute", "hard", "replicas")

    def __init__(self, name, memory_mib, compute=None, hard=False, replicas=1):
        self.name = name
        self.memory_mib = memory_mib
        self.compute = compute
        self.hard = hard
        self.replicas = replicas

    @property
    def isolation(self):
        return "hard" if self.hard else "soft"


class PoolEntry:
    __slots__ = ("model", "count", "gpus_per_node", "field")

    def __init__(self, model, count=None, gpus_per_node=None, field="pool"):
        self.model = model
        self.count = count                  # None: unlimited
        self.gpus_per_node = gpus_per_node  # None: not given (hosts group up to 8 used GPUs)
        self.field = field


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def parse_input(data, source="input"):
    """{workloads: [...], pool: ...} -> ([Workload], [PoolEntry]). Raises FitInputError."""
    problems = []
    if not isinstance(data, dict):
        raise FitInputError(["%s: expected a mapping with `workloads:` and `pool:`" % source])
    unknown = sorted(set(map(str, data)) - {"workloads", "pool"})
    if unknown:
        problems.append("%s: unknown key(s) %s; allowed: workloads, pool" % (source, ", ".join(unknown)))
    pool_problems = []
    pool = _parse_pool(data.get("pool"), pool_problems)
    problems.extend(pool_problems)
    workloads = _parse_workloads(data.get("workloads"), problems)
    if not pool_problems:
        # Workloads no GPU of the pool can take are bad input too; report them in the same list.
        problems.extend(check_placeable(workloads, [View(k, entry) for k, entry in enumerate(pool)]))
    if problems:
        raise FitInputError(problems)
    return workloads, pool


def _parse_pool(raw, problems):
    if raw is None:
        problems.append("pool: required: the GPUs to pack onto, e.g. {model: A100-80GB, count: unlimited} "
                        "or a list of {model, count}")
        return []
    entries = [raw] if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        problems.append("pool: must be {model, count} or a non-empty list of them")
        return []
    pool, seen = [], {}
    for i, entry in enumerate(entries):
        field = "pool" if isinstance(raw, dict) else "pool[%d]" % i
        if not isinstance(entry, dict):
            problems.append("%s: must be a mapping {model, count, gpus_per_node}" % field)
            continue
        unknown = sorted(set(map(str, entry)) - set(POOL_KEYS))
        if unknown:
            problems.append("%s: unknown key(s) %s; allowed: %s" % (field, ", ".join(unknown), ", ".join(POOL_KEYS)))
        model = None
        if "model" not in entry:
            problems.append("%s: model: required (see `gpuprov catalog`)" % field)
        else:
            try:
                model = catalog.lookup(entry["model"])
            except catalog.UnknownModelError as exc:
                problems.append("%s: model: %s" % (field, exc))
        count = entry.get("count", "unlimited")
        if count == "unlimited":
            count = None
        elif not _is_int(count) or count < 1:
            problems.append("%s: count: must be a positive integer or `unlimited`, got %r" % (field, count))
            count = None
        per_node = entry.get("gpus_per_node")
        if per_node is not None:
            if not _is_int(per_node) or per_node < 1:
                problems.append("%s: gpus_per_node: must be a positive integer, got %r" % (field, per_node))
                per_node = None
            elif count is not None and count % per_node:
                problems.append("%s: count: %d GPUs do not make whole nodes of %d (gpus_per_node)"
                                % (field, count, per_node))
        if model is not None:
            if model.key in seen:
                problems.append("%s: model: %s is already listed at %s; give one entry per model"
                                % (field, model.key, seen[model.key]))
                continue
            seen[model.key] = field
            pool.append(PoolEntry(model, count, per_node, field))
    return pool


def _parse_workloads(raw, problems):
    if raw is None:
        problems.append("workloads: required: a list of {name, memory, compute, isolation, replicas}")
        return []
    if not isinstance(raw, list) or not raw:
        problems.append("workloads: must be a non-empty list of {name, memory, compute, isolation, replicas}")
        return []
    workloads, names = [], {}
    for i, entry in enumerate(raw):
        where = "workloads[%d]" % i
        if not isinstance(entry, dict):
            problems.append("%s: must be a mapping {name, memory, compute, isolation, replicas}" % where)
            continue
        name = entry.get("name")
        if name is None or (isinstance(name, str) and not name.strip()):
            problems.append("%s: name: required" % where)
            name = None
        elif not isinstance(name, (str, int)) or isinstance(name, bool):
            problems.append("%s: name: must be a string, got %r" % (where, name))
            name = None
        else:
            name = str(name).strip()
            if name in names:
                problems.append("workload %s: name: used twice (workloads[%d] and [%d]); names must be unique"
                                % (name, names[name], i))
            names.setdefault(name, i)
            where = "workload %s" % name
        unknown = sorted(set(map(str, entry)) - set(WORKLOAD_KEYS))
        if unknown:
            problems.append("%s: unknown key(s) %s; allowed: %s"
                            % (where, ", ".join(unknown), ", ".join(WORKLOAD_KEYS)))
        ok = name is not None
        memory = None
        if "memory" not in entry:
            problems.append("%s: memory: required (GiB, or a size such as \"10GiB\" or \"10GB\")" % where)
            ok = False
        else:
            try:
                memory = parse_memory_mib(entry["memory"])
            except ValueError as exc:
                problems.append("%s: memory: %s" % (where, exc))
                ok = False
        compute = None
        try:
            compute = parse_compute(entry.get("compute"))
        except ValueError as exc:
            problems.append("%s: compute: %s" % (where, exc))
            ok = False
        isolation = entry.get("isolation", "soft")
        if isolation not in ("hard", "soft"):
            problems.append("%s: isolation: must be hard (own MIG instance) or soft (may share a GPU), got %r"
                            % (where, isolation))
            ok = False
        replicas = entry.get("replicas", 1)
        if not _is_int(replicas) or replicas < 1:
            problems.append("%s: replicas: must be a positive integer, got %r" % (where, replicas))
            ok = False
        if ok:
            workloads.append(Workload(name, memory, compute, isolation == "hard", replicas))
    return workloads


def load_input(path):
    """Read a YAML or JSON workloads file. Raises FitInputError naming the file."""
    kind = "JSON" if path.endswith(".json") else "YAML"
    try:
        with open(path) as handle:
            # PyYAML names the file in its errors when it reads from the file object.
            data = json.load(handle) if kind == "JSON" else yaml.safe_load(handle)
    except FileNotFoundError:
        raise FitInputError(["%s: no such file" % path]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise FitInputError(["%s: cannot read: %s" % (path, exc)]) from None
    except (ValueError, yaml.YAMLError) as exc:
        raise FitInputError(["%s: not valid %s: %s" % (path, kind, " ".join(str(exc).split()))]) from None
    return parse_input(data, path)


# -- per-model geometry -----------------------------------------------------------------------

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
            if self.memory_mib[i] + _EPS >= memory_mib and p.compute_slices >= need_slices:
                mask |= 1 << i
        return mask

    def compute_need(self, compute):
        if compute is None:
            return 1
        kind, amount = compute
        if kind == "slices":
            return amount
        return max(1, int(math.ceil(amount * self.compute_total - _EPS)))

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
            if mem > g.memory_mib[big] + _EPS:
                problems.append("%s: memory: %s GiB (isolation: hard) is more than the largest MIG instance in the "
                                "pool holds (%s, %s GiB on %s); use a bigger GPU model or isolation: soft"
                                % (where, gib_text(mem), g.names[big], gib_text(g.memory_mib[big]), g.model.key))
            else:
                need = max(v.geometry.compute_need(workload.compute) for v in mig_views)
                problems.append("%s: compute: %s needs %d compute slices with %s GiB; no MIG profile in the pool "
                                "has both" % (where, compute_text(workload.compute), need, gib_text(mem)))
            continue
        if any(mem <= v.memory_mib + _EPS for v in views):
            continue
        if any(v.geometry and v.geometry.candidates(mem, workload.compute) for v in views):
            continue
        biggest = max(views, key=lambda v: v.memory_mib)
        problems.append("%s: memory: %s GiB is more than any GPU in the pool has (largest: %s with %s GiB)"
                        % (where, gib_text(mem), biggest.model.key, gib_text(biggest.memory_mib)))
    return problems


# -- what one GPU holds -----------------------------------------------------------------------

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
        return items[0].memory_mib <= view.memory_mib + _EPS
    if method == "mps":
        if n > view.model.mps_max_clients:
            return False
        # The device plugin gives each of N replicas memory/N (rounded down) and 1/N of the threads.
        share = (view.model.memory_mib // n)
        return all(i.memory_mib <= share + _EPS and i.shared_compute[vi] <= 1.0 / n + _EPS for i in items)
    return (sum(i.memory_mib for i in items) <= view.memory_mib + _EPS
            and sum(i.shared_compute[vi] for i in items) <= 1.0 + _EPS)


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


# -- exact search -----------------------------------------------------------------------------

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
        gpus.append(_make_gpu(by_index[vi], mode, members))
    if len(views) == 1 and views[0].count is not None and len(gpus) > views[0].count:
        return None
    return gpus


def _make_gpu(view, mode, members_list):
    if mode == "shared":
        return Gpu(view, "shared", members_list)
    g = view.geometry
    ordered = sorted(members_list, key=lambda i: (i.masks[view.index], i.index))
    layout, assignment = g.fits(tuple(i.masks[view.index] for i in ordered))
    return Gpu(view, "mig", ordered, assignment)


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


# -- heuristic --------------------------------------------------------------------------------

def _footprint(item, view):
    """(memory fraction, mode) of the smallest way ``item`` can sit on one GPU of ``view``."""
    best = None
    vi = view.index
    if not item.hard and item.memory_mib <= view.memory_mib + _EPS:
        best = (item.memory_mib / view.memory_mib, "shared")
    mask = item.masks[vi]
    if mask:
        g = view.geometry
        frac = g.profiles[g.smallest(mask)].memory_slices / float(g.memory_slices)
        if best is None or frac < best[0] - _EPS:
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
            if method == "time-slicing" and (shared_mem[gid] + item.memory_mib > gpu.view.memory_mib + _EPS
                                             or shared_cpu[gid] + item.shared_compute[vi] > 1.0 + _EPS):
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
            footprint = _footprint(item, view)
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
            result.append(_make_gpu(gpu.view, "mig", gpu.items))
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


# -- lower bounds -----------------------------------------------------------------------------

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
        if not item.hard and item.memory_mib <= view.memory_mib + _EPS:
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


# -- the whole run ----------------------------------------------------------------------------

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
        stuck = [i for i in items if not any(_footprint(i, v) for v in unlimited)]
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


# -- nodes and inventory ----------------------------------------------------------------------

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


def inventory_text(result, source=None):
    """The inventory as YAML, with which workload lands where written as comments."""
    head = ["# gpuprov fit%s: %d GPU(s) on %d node(s)." % (" " + source if source else "", len(result.gpus),
                                                          len(result.nodes)),
            "# Check it with: gpuprov plan -i <this file>",
            "all:", "  children:", "    %s:" % HOST_GROUP, "      hosts:"]
    for node in result.nodes:
        for gpu in node.gpus:
            head.append("        # GPU %d (%s): %s" % (gpu.index, gpu.sharing, ", ".join(gpu_lines(gpu))))
        if node.spares:
            head.append("        # GPU %d-%d: idle" % (len(node.gpus), len(node.gpus) + node.spares - 1)
                        if node.spares > 1 else "        # GPU %d: idle" % len(node.gpus))
        body = yaml.safe_dump({node.host: node_vars(node)}, sort_keys=False, default_flow_style=False, width=120)
        head.extend("        " + line for line in body.splitlines())
    return "\n".join(head) + "\n"


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
            smaller = [k for k in range(len(g.profiles)) if g.memory_mib[k] + _EPS < item.memory_mib]
            reason = []
            if smaller:
                top = max(g.memory_mib[k] for k in smaller)
                names = [g.names[k] for k in smaller if abs(g.memory_mib[k] - top) < _EPS]
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
                                   "resource": resource_name(gpu, p)}
                                  for item, p, _inst in gpu.placements]
        else:
            entry["workloads"] = [{"name": item.name, "workload": item.workload.name,
                                   "memory_gib": round(item.memory_mib / MIB_PER_GIB, 2),
                                   "isolation": item.workload.isolation, "resource": "nvidia.com/gpu"}
                                  for item in gpu.items]
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
