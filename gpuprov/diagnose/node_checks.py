"""The per-node checks (allocation, memory, application) in their fixed order."""

import math
from dataclasses import dataclass, field

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value
from gpuprov.diagnose.remedies import (
    allocation_remedy,
    application_note,
    bandwidth_remedy,
    device_label,
    make_remedy,
    memory_remedy,
    placement_remedy_for_node,
    shareable_resources,
)
from gpuprov.diagnose.sizing import format_gib, gpu_model
from gpuprov.diagnose.snapshot import Node
from gpuprov.diagnose.thresholds import (
    DRAM_BOUND_PERCENT,
    MEMORY_USABLE_FRACTION,
    SM_TARGET_PERCENT,
    SM_UNDER_DRAM_PERCENT,
)
from gpuprov.diagnose.utilization import summarise_utilization


@dataclass
class _NodeState:
    node: Node
    pods: list
    resources: list           # [{name, capacity, allocatable, allocated, free}]
    gpus: list                # merged per-GPU view
    physical_gpus: int
    replicas_now: int
    mig_capable: bool
    mig_enabled: bool
    model: object = None      # catalog.GpuModel, None when not in the catalog
    instances: list = field(default_factory=list)   # MIG instances with DCGM figures


def _merge_gpus(facts, summaries):
    gpus = {}
    for fact in facts or []:
        gpus[fact.index] = {
            "index": fact.index, "name": fact.name, "memory_total_mib": fact.memory_total_mib,
            "memory_used_mib": fact.memory_used_mib, "memory_peak_mib": fact.memory_used_mib,
            "processes": fact.process_count, "sm_mean": None, "sm_p95": None, "pattern": None,
            "samples": 0, "mig_capable": fact.mig_capable, "mig_enabled": fact.mig_enabled,
        }
    for summary in summaries or []:
        gpu = gpus.setdefault(summary["index"], {
            "index": summary["index"], "name": summary["name"], "memory_total_mib": summary["memory_total_mib"],
            "memory_used_mib": summary["memory_used_mean_mib"], "memory_peak_mib": None, "processes": None,
            "mig_capable": None, "mig_enabled": False,
        })
        gpu.update(sm_mean=summary["sm_mean"], sm_p95=summary["sm_p95"], pattern=summary["pattern"],
                   samples=summary["samples"])
        for key in ("dram_mean", "pods", "uuid"):
            if key in summary:      # read from DCGM
                gpu[key] = summary[key]
        if not gpu.get("name"):
            gpu["name"] = summary["name"]
        if not gpu.get("memory_total_mib"):
            gpu["memory_total_mib"] = summary["memory_total_mib"]
        peaks = [v for v in (gpu.get("memory_peak_mib"), summary["memory_used_max_mib"]) if v is not None]
        gpu["memory_peak_mib"] = max(peaks) if peaks else None
    return [gpus[index] for index in sorted(gpus)]


def node_state(node, pods_on_node, facts, samples):
    resources = []
    for name in sorted(set(node.allocatable) | set(node.capacity)):
        allocatable = node.allocatable.get(name, 0)
        allocated = sum(pod.requests.get(name, 0) for pod in pods_on_node)
        resources.append({"name": name, "capacity": node.capacity.get(name, allocatable),
                          "allocatable": allocatable, "allocated": allocated,
                          "free": max(allocatable - allocated, 0)})
    summaries = summarise_utilization(samples) if samples else []
    # MIG instances (DCGM reports them apart, with their parent's index) stay out of the
    # per-GPU list, which counts physical GPUs; their parent GPU is known to be in MIG mode.
    instances = [s for s in summaries if s.get("gpu_instance_id")]
    gpus = _merge_gpus(facts, [s for s in summaries if not s.get("gpu_instance_id")])
    known = {gpu["index"] for gpu in gpus}
    for instance in instances:
        if instance["index"] not in known:
            known.add(instance["index"])
            gpus.append({"index": instance["index"], "name": instance["name"].split(" MIG ")[0],
                         "memory_total_mib": None, "memory_used_mib": None, "memory_peak_mib": None,
                         "processes": None, "sm_mean": None, "sm_p95": None, "pattern": None, "samples": 0,
                         "mig_capable": True, "mig_enabled": True})
        else:
            parent = next(gpu for gpu in gpus if gpu["index"] == instance["index"])
            parent["mig_enabled"] = True
    gpus.sort(key=lambda gpu: gpu["index"])
    physical = len(gpus)
    if not physical and digits_value(node.labels.get("nvidia.com/gpu.count", "")) is not None:
        physical = digits_value(node.labels["nvidia.com/gpu.count"])
    whole = node.capacity.get("nvidia.com/gpu") or node.capacity.get("nvidia.com/gpu.shared") or 0
    if not physical:
        physical = whole
    replicas_now = whole // physical if (physical and whole and whole % physical == 0) else 1
    mig_enabled = any(r["name"].startswith("nvidia.com/mig-") for r in resources) or \
        any(g.get("mig_enabled") for g in gpus)
    model = gpu_model([g.get("name") for g in gpus] + [node.labels.get("nvidia.com/gpu.product")])
    capable_values = [g.get("mig_capable") for g in gpus if g.get("mig_capable") is not None]
    if model is not None:
        mig_capable = model.mig_capable
    elif capable_values:
        mig_capable = all(capable_values)
    elif node.labels.get("nvidia.com/mig.capable") in ("true", "false"):
        mig_capable = node.labels["nvidia.com/mig.capable"] == "true"
    else:
        mig_capable = None
    return _NodeState(node=node, pods=pods_on_node, resources=resources, gpus=gpus, physical_gpus=physical,
                      replicas_now=max(replicas_now, 1), mig_capable=bool(mig_capable or mig_enabled),
                      mig_enabled=mig_enabled, model=model, instances=instances)


def _sizing(state, max_replicas):
    """How many copies of today's work each GPU could hold; the limiting factor says why not more."""
    memory_copies, sm_copies = [], []
    for gpu in state.gpus:
        total, peak = gpu.get("memory_total_mib"), gpu.get("memory_peak_mib")
        if total and peak:
            per_pod = peak / state.replicas_now
            memory_copies.append((math.floor(MEMORY_USABLE_FRACTION * total / per_pod), gpu))
        if gpu.get("sm_mean") is not None and gpu["sm_mean"] > 0:
            per_pod = gpu["sm_mean"] / state.replicas_now
            sm_copies.append((math.floor(SM_TARGET_PERCENT / per_pod), gpu))
    have_memory = any(g.get("memory_total_mib") and g.get("memory_peak_mib") is not None for g in state.gpus)
    by_memory = min((c for c, _ in memory_copies), default=None)
    by_sm = min((c for c, _ in sm_copies), default=None)
    limits = []
    if by_memory is not None:
        limits.append(("memory", by_memory))
    elif not have_memory:
        # Without memory figures, only the smallest step is a safe suggestion. (Known and
        # zero everywhere means no memory limit at all.)
        limits.append(("unknown-memory", max(2, state.replicas_now)))
    if by_sm is not None:
        limits.append(("sm", by_sm))
    limits.append(("max-replicas", max_replicas))
    # min() keeps the first of equal values: a tie is explained by the measured limit.
    limit_name, replicas = min(limits, key=lambda item: item[1])
    return {"replicas": replicas, "limited_by": limit_name, "by_memory": by_memory, "by_sm": by_sm,
            "have_memory": have_memory, "have_sm": any(g.get("sm_mean") is not None for g in state.gpus)}


def _span(values, fmt):
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else "%s-%s" % (fmt(low), fmt(high))


def _gpu_evidence(state):
    """One line for all GPUs of a node; the per-GPU figures stay in the report's `gpus`."""
    if not state.gpus:
        return []
    names = sorted({g.get("name") or "GPU" for g in state.gpus})
    parts = []
    with_memory = [g for g in state.gpus if g.get("memory_peak_mib") is not None and g.get("memory_total_mib")]
    if with_memory:
        parts.append("memory peak %s of %s GiB" % (_span([g["memory_peak_mib"] for g in with_memory], format_gib),
                                                   _span([g["memory_total_mib"] for g in with_memory], format_gib)))
    with_sm = [g for g in state.gpus if g.get("sm_mean") is not None]
    if with_sm:
        patterns = {}
        for gpu in with_sm:
            patterns[gpu["pattern"]] = patterns.get(gpu["pattern"], 0) + 1
        parts.append("SM mean %s%%, p95 %s%% over %d samples (%s)" % (
            _span([g["sm_mean"] for g in with_sm], lambda v: "%.0f" % v),
            _span([g["sm_p95"] for g in with_sm], lambda v: "%.0f" % v),
            min(g["samples"] for g in with_sm),
            ", ".join("%s x%d" % (name, count) for name, count in sorted(patterns.items()))))
    return ["%d x %s: %s" % (len(state.gpus), "/".join(names), "; ".join(parts) or "no figures")]


def _bandwidth_bound(state):
    """GPUs and MIG instances whose DRAM is busy while their SMs mostly wait (DCGM only)."""
    return [unit for unit in state.gpus + state.instances
            if unit.get("dram_mean") is not None and unit.get("sm_mean") is not None
            and unit["dram_mean"] >= DRAM_BOUND_PERCENT and unit["sm_mean"] < SM_UNDER_DRAM_PERCENT]


def _node_sm_mean(state):
    values = [g["sm_mean"] for g in state.gpus + state.instances if g.get("sm_mean") is not None]
    return round(sum(values) / len(values), 1) if values else None


def _instance_evidence(state):
    """One line per MIG instance with DCGM figures: SM and DRAM activity, memory, pods."""
    lines = []
    for unit in state.instances:
        parts = []
        if unit.get("sm_mean") is not None:
            parts.append("SM mean %.0f%%, p95 %.0f%%" % (unit["sm_mean"], unit["sm_p95"]))
        if unit.get("dram_mean") is not None:
            parts.append("DRAM mean %.0f%%" % unit["dram_mean"])
        if unit.get("memory_used_max_mib") is not None and unit.get("memory_total_mib"):
            parts.append("memory peak %s of %s GiB" % (format_gib(unit["memory_used_max_mib"]),
                                                       format_gib(unit["memory_total_mib"])))
        lines.append("MIG %s: %s (%s)" % (device_label(unit), ", ".join(parts) or "no figures",
                                          unit.get("pattern") or "-"))
    return lines


def _node_memory_peak(state):
    known = [g for g in state.gpus if g.get("memory_peak_mib") is not None and g.get("memory_total_mib")]
    if not known:
        return None
    tightest = max(known, key=lambda g: g["memory_peak_mib"] / g["memory_total_mib"])
    return {"used_mib": tightest["memory_peak_mib"], "total_mib": tightest["memory_total_mib"],
            "gpu": tightest["index"]}


def analyse_node(state, placement_victims, max_replicas):
    node = state.node
    result = {
        "name": node.name, "check": None, "status": None, "summary": "", "evidence": [], "remedy": None,
        "not_run": [], "resources": state.resources, "gpus": state.gpus,
        "physical_gpus": state.physical_gpus, "replicas_now": state.replicas_now,
        "sm_mean": _node_sm_mean(state), "memory_peak": _node_memory_peak(state),
        "gpu_pods": sorted(p.key for p in state.pods if p.requests),
    }
    if not state.gpus:
        result["not_run"].append({"check": "memory", "reason": "no facts/%s.json and no utilization data for "
                                                               "this node" % node.name})
    if not any(g.get("sm_mean") is not None for g in state.gpus + state.instances):
        result["not_run"].append({"check": "application", "reason": "no utilization data for this node; record it "
                                                                    "with `gpuprov baseline record --out DIR` or `gpuprov baseline "
                                                                    "collect --out DIR`"})
    shareable = shareable_resources(state)
    if not shareable:
        result["summary"] = "advertises no GPUs (capacity %s, allocatable 0): the device plugin is not running " \
                            "or reports the GPUs unhealthy" % (", ".join("%s %d" % (r["name"], r["capacity"])
                                                                         for r in state.resources) or "none")
        result["status"] = "unavailable"
        return result
    fully = all(r["allocated"] >= r["allocatable"] for r in shareable)
    if not fully:
        result["evidence"].append(", ".join("%d/%d %s allocated" % (r["allocated"], r["allocatable"], r["name"])
                                            for r in shareable))
    if node.unschedulable:
        result["evidence"].append("node is cordoned")
    result["evidence"].extend(_gpu_evidence(state))
    if state.instances:
        result["instances"] = state.instances
        result["evidence"].extend(_instance_evidence(state))
    cycling, low, app_lines = application_note(state)
    bound = _bandwidth_bound(state)
    bandwidth_lines = ["GPU %s: DRAM busy %.0f%% of cycles while SMs have work %.0f%%: memory-bandwidth bound"
                       % (device_label(unit), unit["dram_mean"], unit["sm_mean"]) for unit in bound]

    if fully:
        sizing = _sizing(state, max_replicas)
        result["sizing"] = sizing
        memory = _node_memory_peak(state)
        memory_text = (", memory peak %s of %s GiB (GPU %d)" % (format_gib(memory["used_mib"]),
                                                                 format_gib(memory["total_mib"]), memory["gpu"])
                       if memory else ", memory unknown")
        sm_text = ", mean SM %.0f%%" % result["sm_mean"] if result["sm_mean"] is not None else ""
        counts = ", ".join("%d/%d %s" % (r["allocated"], r["allocatable"], r["name"]) for r in shareable)
        if bound:
            # The memory check, on bandwidth: DRAM activity against SM activity (DCGM).
            result.update(check="memory", status="bandwidth-bound",
                          summary="%s allocated%s; %d of the busy GPUs/instances wait on memory bandwidth"
                                  % (counts, sm_text, len(bound)))
            result["evidence"].extend(bandwidth_lines)
            result["remedy"] = bandwidth_remedy(state, bound)
            result["evidence"].extend(app_lines)
            return result
        if sizing["by_memory"] is not None and sizing["by_memory"] <= state.replicas_now:
            result.update(check="memory", status="memory-bound",
                          summary="%s allocated%s%s" % (counts, sm_text, memory_text))
            result["remedy"] = memory_remedy(state)
            result["evidence"].extend(app_lines)
            return result
        if sizing["replicas"] <= state.replicas_now:
            # Allocation explains the queue, but sharing more would not help: say what would.
            if sizing["limited_by"] == "sm":
                status, text = "busy", "GPUs are busy: sharing would slow every pod; only more GPUs help"
            elif sizing["limited_by"] == "unknown-memory":
                status, text = "needs-data", ("already time-sliced %d ways and memory use is unknown: add "
                                              "facts/%s.json or run `gpuprov baseline record` before adding replicas"
                                              % (state.replicas_now, node.name))
            else:
                status, text = "at-limit", ("already time-sliced %d ways, the --max-replicas limit; only more "
                                            "GPUs help" % state.replicas_now)
            result.update(check="allocation", status=status,
                          summary="%s allocated%s%s" % (counts, sm_text, memory_text))
            result["remedy"] = make_remedy(text)
            result["evidence"].extend(app_lines)
            return result
        result.update(check="allocation", status="sharing-helps",
                      summary="%s allocated%s%s" % (counts, sm_text, memory_text))
        result["remedy"] = allocation_remedy(state, sizing)
        result["evidence"].extend(app_lines)
        return result

    victims = placement_victims.get(node.name) or []
    if victims:
        by_reason = {}
        for pod_key, detail in victims:
            by_reason.setdefault(detail, []).append(pod_key)
        free = ", ".join("%d %s" % (r["free"], r["name"]) for r in shareable if r["free"])
        result.update(check="placement", status="unreachable",
                      summary="%s free, but %d Pending pod(s) may not use them" % (free, len(victims)))
        # The per-pod lines below say it again, with the pods.
        result["evidence"] = [line for line in result["evidence"] if line != "node is cordoned"]
        for detail, pod_keys in sorted(by_reason.items()):
            result["evidence"].append("%s: %s" % (detail, ", ".join(sorted(pod_keys))))
        result["remedy"] = placement_remedy_for_node(node, by_reason)
        return result

    if cycling or low:
        result.update(check="application", status="app-bound",
                      summary="pods hold GPUs they keep idle; more GPUs will not help")
        result["evidence"].extend(app_lines)
        result["evidence"].append("GPU pods on the node: %s" % ", ".join(result["gpu_pods"]))
        actions = []
        if cycling:
            actions.append("CPU-bound pods: give them more CPU and data-loader workers (e.g. PyTorch "
                           "DataLoader num_workers, pinned memory), cache decoded inputs")
        if low:
            actions.append("I/O- or network-bound pods: stage data on local disk, raise read-ahead or "
                           "prefetch, check the storage/network path")
        result["remedy"] = make_remedy("; ".join(actions))
        return result

    result["evidence"].extend(bandwidth_lines)
    free = sum(r["free"] for r in shareable)
    allocated = sum(r["allocated"] for r in shareable)
    if allocated == 0:
        result.update(status="idle", summary="idle: no pod uses its GPUs and no Pending pod is kept off it")
    else:
        result.update(status="ok", summary="%d free, no Pending pod is kept off it" % free)
    return result


def has_room_now(state, requests):
    """Whether the node has `requests` free now (allocatable less what its pods request)."""
    return all(state.node.allocatable.get(name, 0) - sum(p.requests.get(name, 0) for p in state.pods) >= count
               for name, count in requests.items())
