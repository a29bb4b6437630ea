"""Reading and validating the fit input file into the model."""
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity, workload_memory_mib
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, safe_files
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import MAX_GPUS_PER_NODE, escape, short
from gpuprov.fit.model import AUTOSCALE_KEYS, FitInputError, POOL_KEYS, PoolEntry, WORKLOAD_KEYS, Workload
from gpuprov.fit.packing_model import View, check_placeable
from gpuprov.fit.units import parse_compute


# Bounds, checked before anything is built from a count (the heuristic packs every copy of
# every workload; a pool count is only compared, but 10**12 GPUs is no pool).
MAX_WORKLOADS = 1000
MAX_REPLICAS = 1000
MAX_COPIES = 5000
MAX_POOL_GPUS = 100000
MAX_NAME_LENGTH = 128


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def parse_input(data, source="input", models_catalog=None):
    """{workloads: [...], pool: ...} -> ([Workload], [PoolEntry]). Raises FitInputError.

    ``models_catalog``: a user_catalog.UserCatalog when `--catalog` adds models (None: built-ins).
    """
    problems = []
    if not isinstance(data, dict):
        raise FitInputError(["%s: expected a mapping with `workloads:` and `pool:`" % source])
    unknown = sorted(set(map(str, data)) - {"workloads", "pool"})
    if unknown:
        problems.append("%s: unknown key(s) %s; allowed: workloads, pool" % (source, ", ".join(unknown)))
    pool_problems = []
    pool = _parse_pool(data.get("pool"), pool_problems, models_catalog or catalog)
    problems.extend(pool_problems)
    workloads = _parse_workloads(data.get("workloads"), problems)
    if not pool_problems:
        # Workloads no GPU of the pool can take are bad input too; report them in the same list.
        problems.extend(check_placeable(workloads, [View(k, entry) for k, entry in enumerate(pool)]))
    if problems:
        raise FitInputError(problems)
    return workloads, pool


def _parse_pool(raw, problems, models_catalog):
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
        elif not isinstance(entry["model"], str) or len(entry["model"]) > MAX_NAME_LENGTH:
            problems.append("%s: model: must be a GPU model name of at most %d characters, got %s"
                            % (field, MAX_NAME_LENGTH, short(entry["model"])))
        else:
            try:
                model = models_catalog.lookup(entry["model"])
            except catalog.UnknownModelError as exc:
                problems.append("%s: model: %s" % (field, exc))
        count = entry.get("count", "unlimited")
        if count == "unlimited":
            count = None
        elif not _is_int(count) or count < 1:
            problems.append("%s: count: must be a positive integer or `unlimited`, got %s" % (field, short(count)))
            count = None
        elif count > MAX_POOL_GPUS:
            problems.append("%s: count: %d GPUs; the limit is %d (or `unlimited`)" % (field, count, MAX_POOL_GPUS))
            count = None
        numa = entry.get("numa_nodes")
        if numa is not None:
            if not _is_int(numa) or numa < 1:
                problems.append("%s: numa_nodes: must be a positive integer, got %s" % (field, short(numa)))
                numa = None
            elif not _is_int(entry.get("gpus_per_node")) or entry["gpus_per_node"] % numa:
                problems.append("%s: numa_nodes: needs gpus_per_node, a multiple of %d (GPUs split evenly, in "
                                "index order, among the NUMA nodes)" % (field, numa))
                numa = None
        cpu_policy = entry.get("cpu_manager_policy", "none")
        if cpu_policy not in ("none", "static"):
            problems.append("%s: cpu_manager_policy: must be none or static, got %s" % (field, short(cpu_policy)))
            cpu_policy = "none"
        per_node = entry.get("gpus_per_node")
        if per_node is not None:
            if not _is_int(per_node) or per_node < 1:
                problems.append("%s: gpus_per_node: must be a positive integer, got %s" % (field, short(per_node)))
                per_node = None
            elif per_node > MAX_GPUS_PER_NODE:
                problems.append("%s: gpus_per_node: %d; a node has at most %d GPUs" % (field, per_node, MAX_GPUS_PER_NODE))
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
            pool.append(PoolEntry(model, count, per_node, field, numa, cpu_policy))
    return pool


def _parse_workloads(raw, problems):
    if raw is None:
        problems.append("workloads: required: a list of {name, memory, compute, isolation, replicas}")
        return []
    if not isinstance(raw, list) or not raw:
        problems.append("workloads: must be a non-empty list of {name, memory, compute, isolation, replicas}")
        return []
    if len(raw) > MAX_WORKLOADS:
        problems.append("workloads: %d workloads; the limit is %d" % (len(raw), MAX_WORKLOADS))
        return []
    workloads, names = [], {}
    copies = 0
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
            problems.append("%s: name: must be a string, got %s" % (where, short(name)))
            name = None
        elif len(str(name)) > MAX_NAME_LENGTH:
            problems.append("%s: name: at most %d characters, got %d" % (where, MAX_NAME_LENGTH, len(str(name))))
            name = None
        else:
            name = str(name).strip()
            if name in names:
                problems.append("workload %s: name: used twice (workloads[%d] and [%d]); names must be unique"
                                % (name, names[name], i))
            names.setdefault(name, i)
            where = "workload %s" % escape(name)
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
                memory = workload_memory_mib(entry["memory"])
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
            problems.append("%s: isolation: must be hard (own MIG instance) or soft (may share a GPU), got %s"
                            % (where, short(isolation)))
            ok = False
        replicas = entry.get("replicas", 1)
        if not _is_int(replicas) or replicas < 1:
            problems.append("%s: replicas: must be a positive integer, got %s" % (where, short(replicas)))
            ok = False
        elif replicas > MAX_REPLICAS:
            problems.append("%s: replicas: %d; the limit is %d per workload" % (where, replicas, MAX_REPLICAS))
            ok = False
        else:
            copies += replicas
            if copies > MAX_COPIES:
                problems.append("%s: replicas: %d workload copies in all; the limit is %d" % (where, copies, MAX_COPIES))
                return workloads
        gpus = entry.get("gpus", 1)
        if not _is_int(gpus) or not 1 <= gpus <= MAX_GPUS_PER_NODE:
            problems.append("%s: gpus: must be an integer from 1 to %d (whole GPUs of one node, e.g. 2 for tensor "
                            "parallel), got %s" % (where, MAX_GPUS_PER_NODE, short(gpus)))
            ok = False
        elif gpus > 1:
            if isolation == "hard":
                problems.append("%s: gpus: a MIG instance is part of one GPU; %d whole GPUs are isolated already: "
                                "use isolation: soft" % (where, gpus))
                ok = False
            if compute is not None:
                problems.append("%s: compute: a workload on %d whole GPUs has all their compute; remove compute"
                                % (where, gpus))
                ok = False
        image = entry.get("image")
        if image is not None and (not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image)):
            problems.append("%s: image: must be a container image reference, got %s" % (where, short(image)))
            ok = False
        cpu = entry.get("cpu")
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, (int, float)) or not 0 < cpu <= 1024):
            problems.append("%s: cpu: must be a number of CPU cores above 0, got %s" % (where, short(cpu)))
            ok = False
        host_memory = entry.get("host_memory")
        if host_memory is not None:
            try:
                if k8s_quantity(host_memory) <= 0:
                    raise ValueError("must be above 0")
            except ValueError:
                problems.append("%s: host_memory: must be a Kubernetes memory quantity such as 16Gi, got %s"
                                % (where, short(host_memory)))
                ok = False
        autoscale = None
        if entry.get("autoscale") is not None:
            autoscale = _parse_autoscale(entry["autoscale"], where, replicas, problems)
            ok = ok and autoscale is not None
        if ok:
            workloads.append(Workload(name, memory, compute, isolation == "hard", replicas, gpus, image, cpu,
                                      host_memory, autoscale))
    return workloads


# A per-pod metric as the HPA names it (the custom metrics API; e.g. Prometheus Adapter's names).
_METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_:.-]{0,252}$")


def _parse_autoscale(raw, where, replicas, problems):
    """{metric, target, min} -> the same with target as a Kubernetes quantity string, or None
    (problems appended). The maximum is not asked: it is the replicas fit packs."""
    field = "%s: autoscale" % where
    if not isinstance(raw, dict):
        problems.append("%s: must be a mapping {metric, target, min}, e.g. {metric: inference_qps, target: 3000, "
                        "min: 2}" % field)
        return None
    before = len(problems)
    unknown = sorted(set(map(str, raw)) - set(AUTOSCALE_KEYS))
    if unknown:
        problems.append("%s: unknown key(s) %s; allowed: %s (the most replicas is `replicas`, the slots fit packs)"
                        % (field, ", ".join(unknown), ", ".join(AUTOSCALE_KEYS)))
    metric = raw.get("metric")
    if not isinstance(metric, str) or not _METRIC_NAME.match(metric):
        problems.append("%s.metric: required: the per-pod metric the HPA reads from the custom metrics API, e.g. "
                        "inference_qps, got %s" % (field, short(metric)))
    target = raw.get("target")
    text = None
    if isinstance(target, bool) or not isinstance(target, (int, float, str)):
        problems.append("%s.target: required: the average value per pod to scale at, e.g. 3000 or \"500m\", got %s"
                        % (field, short(target)))
    else:
        text = ("%d" % target if isinstance(target, int) or float(target).is_integer()
                else "%dm" % round(target * 1000)) if not isinstance(target, str) else target.strip()
        try:
            if k8s_quantity(text) <= 0:
                raise ValueError("must be above 0")
        except ValueError:
            problems.append("%s.target: must be a Kubernetes quantity above 0 (3000, \"2.5k\", \"500m\"), got %s"
                            % (field, short(target)))
    minimum = raw.get("min", 1)
    if not _is_int(minimum) or minimum < 1:
        problems.append("%s.min: must be a positive integer, got %s" % (field, short(minimum)))
    elif _is_int(replicas) and minimum > replicas:
        problems.append("%s.min: %d is more than the %d replicas fit packs; autoscaling stays within them (raise "
                        "replicas to reserve more slots)" % (field, minimum, replicas))
    if len(problems) > before:
        return None
    return {"metric": metric, "target": text, "min": minimum}


def load_input(path, models_catalog=None):
    """Read a YAML or JSON workloads file. Raises FitInputError naming the file."""
    import os

    if not os.path.exists(path):
        raise FitInputError(["%s: no such file" % escape(path)])
    try:
        # Size, nesting, alias expansion and encoding bounded as for every input file.
        data = safe_files.load(path)
    except safe_files.FileInputError as exc:
        raise FitInputError([escape(exc)]) from None
    return parse_input(data, escape(path), models_catalog)
