"""Remedies: what to change, as report entries, inventory lines and commands."""

import json

from gpuprov.diagnose.sizing import (
    MIB_PER_GIB,
    format_gib,
    mig_cap_option,
    mig_option,
    mig_sharing,
    sharing_line,
)
from gpuprov.diagnose.thresholds import MEMORY_USABLE_FRACTION, SM_LOW_PERCENT, SM_TARGET_PERCENT


def shareable_resources(state):
    return [r for r in state.resources if r["allocatable"] > 0]


def allocation_remedy(state, sizing):
    replicas = sizing["replicas"]
    shareable = shareable_resources(state)
    if state.replicas_now > 1:
        # Already time-sliced: the new replica count replaces the old one.
        added = sum(r["allocatable"] * replicas // state.replicas_now - r["allocatable"] for r in shareable)
    else:
        added = sum(r["allocatable"] * (replicas - 1) for r in shareable)
    resource_names = ", ".join(r["name"] for r in shareable)
    summary = "time-slicing %d would add %s of %s" % (replicas, format_slots(added), resource_names)
    if state.mig_enabled:
        # Each MIG device is advertised `replicas` times; the MIG layout stays as it is.
        sharing = {"strategy": "mig", "time_slicing_replicas": replicas}
        inventory = "add `time_slicing_replicas: %d` to this node's gpuprov_sharing (strategy mig)" % replicas
    else:
        sharing = {"strategy": "time-slicing", "replicas": replicas}
        inventory = sharing_line(sharing)
    why = {"memory": "as many copies of today's per-GPU memory use as fit in %d%% of the memory"
                     % round(MEMORY_USABLE_FRACTION * 100),
           "sm": "as many copies as keep the mean SM use under %d%%" % SM_TARGET_PERCENT,
           "max-replicas": "capped by --max-replicas",
           "unknown-memory": ""}[sizing["limited_by"]]
    remedy = make_remedy(summary, sharing=sharing, inventory=inventory, added_slots=added, sizing=why)
    if not sizing["have_memory"]:
        remedy["sizing"] = ("memory use unknown (no facts or utilisation for this node): %d is a guess; run "
                            "`gpuprov baseline` or add facts/%s.json before raising it" % (replicas, state.node.name))
    if state.mig_enabled:
        remedy["summary"] += " (time-slicing each MIG device)"
    mig = _mig_alternative(state)
    if mig:
        remedy["alternatives"].append(mig)
    return remedy


def _mig_alternative(state):
    """MIG instead of time-slicing: isolated memory, when today's per-GPU use fits an instance."""
    if state.mig_enabled or not state.mig_capable or not state.gpus:
        return None
    if any(g.get("memory_peak_mib") is None for g in state.gpus):
        return None
    need = max(g["memory_peak_mib"] for g in state.gpus) / state.replicas_now
    profile = mig_option(state.model, need)
    if profile is None or profile.max_count < 2:
        return None
    whole = state.node.allocatable.get("nvidia.com/gpu", state.physical_gpus)
    added = state.physical_gpus * profile.max_count - whole
    sharing = mig_sharing(profile.name, profile.max_count)
    return {"summary": "MIG %s x%d per GPU holds today's use too (%s GiB each, memory and SMs isolated) and "
                       "would add %s; pods then request %s" % (profile.name, profile.max_count,
                                                              format_gib(profile.memory_gib * MIB_PER_GIB),
                                                              format_slots(added), profile.resource_name),
            "sharing": sharing, "inventory": sharing_line(sharing), "added_slots": added}


def memory_remedy(state):
    alternatives = []
    model = state.model
    if state.mig_capable and not state.mig_enabled:
        profile = mig_cap_option(model)
        if profile is not None:
            sharing = mig_sharing(profile.name, profile.max_count)
            alternatives.append({
                "summary": "if the pods need less memory than they hold (TensorFlow and JAX preallocate most of "
                           "it), MIG %s x%d caps each at %s GiB" % (profile.name, profile.max_count,
                                                                    format_gib(profile.memory_gib * MIB_PER_GIB)),
                "sharing": sharing, "inventory": sharing_line(sharing),
                "added_slots": state.physical_gpus * (profile.max_count - 1)})
    total = max((g.get("memory_total_mib") or 0 for g in state.gpus), default=0)
    # MPS needs Volta or newer and does not run on MIG devices.
    mps_ok = not state.mig_enabled and (model is None or float(model.compute_capability) >= 7.0)
    if total and mps_ok:
        sharing = {"strategy": "mps", "replicas": 2}
        alternatives.append({
            "summary": "%sMPS with 2 clients per GPU: the device plugin limits each to %s GiB of device memory"
                       % ("or " if alternatives else "if the pods need less memory than they hold, ",
                          format_gib(total / 2)),
            "sharing": sharing, "inventory": sharing_line(sharing), "added_slots": state.physical_gpus})
    summary = "time-slicing will not help: a second copy of today's work does not fit in GPU memory"
    if alternatives:
        summary += "; MIG or MPS memory limits might (if the pods need less than they hold), otherwise only " \
                   "more GPUs help"
    else:
        summary += "; only more GPUs (or smaller models) help"
    return make_remedy(summary, alternatives=alternatives)


def application_note(state):
    cycling = [g for g in state.gpus if g.get("pattern") == "cycling"]
    low = [g for g in state.gpus if g.get("pattern") == "low"]
    lines = []
    if cycling:
        lines.append("GPU %s: SM activity cycles between idle and busy: the pods wait on their CPU-side "
                     "input pipeline (data loading, preprocessing)" % ",".join(str(g["index"]) for g in cycling))
    if low:
        lines.append("GPU %s: memory held but SM activity stays under %d%%: the pods wait on something else "
                     "(I/O, the network, a person at a notebook)" % (",".join(str(g["index"]) for g in low),
                                                                      SM_LOW_PERCENT))
    return cycling, low, lines


def placement_remedy_for_node(node, by_reason):
    commands, actions = [], []
    for detail in by_reason:
        if detail.startswith("untolerated taint "):
            taint = detail[len("untolerated taint "):]
            key_value, effect = taint.rsplit(":", 1)
            key, _, value = key_value.partition("=")
            toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect} if value else \
                {"key": key, "operator": "Exists", "effect": effect}
            actions.append("add the toleration %s to the pods meant for this node, or remove the taint"
                           % json.dumps(toleration, separators=(", ", ": ")))
            commands.append("kubectl taint nodes %s %s-" % (node.name, taint))
        elif detail.startswith("node is cordoned"):
            actions.append("uncordon the node once its maintenance is done")
            commands.append("kubectl uncordon %s" % node.name)
        elif detail.startswith("node lacks nodeSelector label"):
            actions.append("%s: label the node if it should take these pods, or relax the pods' nodeSelector"
                           % detail)
        elif detail.startswith("node does not match"):
            actions.append("relax the pods' required node affinity, or label the node to match it")
        elif detail == "node is NotReady":
            actions.append("bring the node back to Ready (kubelet, network, container runtime)")
    return make_remedy("; ".join(sorted(set(actions))), commands=sorted(set(commands)))


def make_remedy(summary, sharing=None, inventory=None, added_slots=0, sizing=None, alternatives=None, commands=None):
    """A report remedy: what to do, and when it is a gpuprov setting, the inventory line."""
    return {"summary": summary, "sharing": sharing, "inventory": inventory, "added_slots": added_slots,
            "sizing": sizing, "alternatives": list(alternatives or []), "commands": list(commands or [])}


def format_slots(count):
    return "%d slot%s" % (count, "" if count == 1 else "s")


def format_requests(requests):
    return ", ".join("%d %s" % (v, k) for k, v in sorted(requests.items()))


def pod_placement_remedy(pod, blocked, states, only=None):
    commands, actions = set(), set()
    for node_name, blockers in blocked.items():
        for category, detail in blockers:
            if only and category not in only:
                continue
            if category == "taint":
                taint = detail[len("untolerated taint "):]
                actions.add("tolerate %s in the pod spec, or remove the taint" % taint)
                commands.add("kubectl taint nodes %s %s-" % (node_name, taint))
            elif category == "cordoned":
                actions.add("uncordon the cordoned node(s)")
                commands.add("kubectl uncordon %s" % node_name)
            elif category == "selector":
                actions.add("the nodes with enough GPUs lack the pod's nodeSelector %s; fix the selector or "
                            "label the nodes" % ", ".join("%s=%s" % kv for kv in sorted(pod.node_selector.items())))
            elif category == "affinity":
                actions.add("the nodes with enough GPUs do not match the pod's required node affinity; relax it "
                            "or label the nodes")
            elif category == "not-ready":
                actions.add("bring NotReady node(s) back")
    return make_remedy("; ".join(sorted(actions)), commands=sorted(commands))
