"""The per-pod checks: why each Pending GPU pod waits."""

from gpuprov.diagnose.kubernetes_objects import is_gpu_resource
from gpuprov.diagnose.node_checks import has_room_now
from gpuprov.diagnose.placement import NODE_STATE_BLOCKERS, describe_affinity, placement_blockers
from gpuprov.diagnose.remedies import (
    format_requests,
    format_slots,
    make_remedy,
    pod_placement_remedy,
)
from gpuprov.diagnose.scheduler_messages import parse_scheduler_message


def latest_events(events):
    latest = {}
    for event in events:
        key = "%s/%s" % (event.namespace, event.pod)
        if key not in latest or event.time >= latest[key].time:
            latest[key] = event
    return latest


def analyse_pod(pod, states, node_results, event):
    result = {"namespace": pod.namespace, "name": pod.name, "requests": dict(pod.requests), "check": None,
              "status": None,
              "summary": "", "evidence": [], "remedy": None, "nodes": [], "scheduler": None}
    if event:
        result["scheduler"] = {"message": event.message, "time": event.time, "count": event.count,
                               "reasons": parse_scheduler_message(event.message)}
        result["evidence"].append("scheduler: %s" % event.message)
    if pod.scheduling_gates:
        result["summary"] = "waits on scheduling gates %s, not on GPUs" % ", ".join(pod.scheduling_gates)
        result["status"] = "gated"
        return result

    offering = {name: [s for s in states if s.node.allocatable.get(name, 0) > 0] for name in pod.requests}
    capable = [s for s in states if all(s.node.allocatable.get(n, 0) >= v for n, v in pod.requests.items())]
    if not capable:
        result["check"] = "placement"
        result["status"] = "too-large"
        lines = []
        for name, value in sorted(pod.requests.items()):
            nodes = offering[name]
            if not nodes:
                lines.append("no node advertises %s" % name)
            else:
                biggest = max(nodes, key=lambda s: s.node.allocatable[name])
                if biggest.node.allocatable[name] < value:
                    lines.append("requests %d %s; the largest node offers %d (%s)"
                                 % (value, name, biggest.node.allocatable[name], biggest.node.name))
        if not lines:
            lines.append("no single node offers all of %s" % format_requests(pod.requests))
        if all(line.startswith("no node advertises") for line in lines):
            result["status"] = "not-offered"
        result["summary"] = "; ".join(lines)
        actions = []
        if any(line.startswith("no node advertises nvidia.com/mig-") for line in lines):
            actions.append("configure that MIG profile on some nodes (gpuprov_sharing with strategy mig; "
                           "`gpuprov catalog` lists the profiles), or request nvidia.com/gpu")
        if any(line.startswith("requests ") for line in lines):
            actions.append("lower the request to what one node offers, or split the job across pods "
                           "(multi-node training: torchrun/MPI with one pod per node)")
        result["remedy"] = make_remedy("; ".join(actions) or "request a combination one node offers")
        return result

    blocked, feasible = {}, []
    for state in capable:
        blockers = placement_blockers(pod, state.node)
        if blockers:
            blocked[state.node.name] = blockers
        else:
            feasible.append(state)

    def has_room(state):
        return has_room_now(state, pod.requests)

    if not feasible:
        result["check"] = "placement"
        # Nodes the pod itself asks for (selector and affinity match) but that are closed to it.
        selected = {name: blockers for name, blockers in blocked.items()
                    if all(category in NODE_STATE_BLOCKERS for category, _ in blockers)}
        if not selected:
            lacks = sorted({category for blockers in blocked.values() for category, _ in blockers
                            if category in ("selector", "affinity")})
            result["status"] = "affinity" if lacks == ["affinity"] else "selector"
            asked = []
            if "selector" in lacks:
                asked.append("nodeSelector %s" % ", ".join("%s=%s" % kv for kv in sorted(pod.node_selector.items())))
            if "affinity" in lacks:
                asked.append("required node affinity (%s)" % describe_affinity(pod.node_affinity_terms))
            result["summary"] = "no node with enough GPUs matches its %s" % " and ".join(asked)
            result["nodes"] = sorted(blocked)
            result["remedy"] = pod_placement_remedy(pod, blocked, states, only=("selector", "affinity"))
            return result
        grouped = {}
        for node_name, blockers in selected.items():
            for category, detail in blockers:
                grouped.setdefault(detail, []).append(node_name)
        categories = sorted({category for blockers in selected.values() for category, _ in blockers})
        result["status"] = categories[0] if len(categories) == 1 else "+".join(categories)
        result["summary"] = "the node(s) it selects are closed to it: " + "; ".join(
            "%s (%s)" % (detail, ", ".join(sorted(nodes))) for detail, nodes in sorted(grouped.items()))
        result["nodes"] = sorted(selected)
        result["remedy"] = pod_placement_remedy(pod, selected, states)
        return result

    full = [s for s in feasible if not has_room(s)]
    if len(full) == len(feasible):
        verdicts = {s.node.name: node_results[s.node.name] for s in full}
        result["nodes"] = sorted(verdicts)
        helping = [r for r in verdicts.values() if r.get("remedy") and r["remedy"].get("sharing")]
        memory_bound = [r for r in verdicts.values() if r.get("check") == "memory"]
        # Free nodes the pod selects but that are closed to it (taint, cordon, NotReady).
        free_elsewhere = sorted(name for name, blockers in blocked.items()
                                if all(category in NODE_STATE_BLOCKERS for category, _ in blockers)
                                and has_room(next(s for s in states if s.node.name == name)))
        result["evidence"].append("%d node(s) may take it and none has %s free: %s"
                                  % (len(full), format_requests(pod.requests), ", ".join(sorted(verdicts))))
        if free_elsewhere:
            result["evidence"].append("GPUs are free on %s, which it selects but may not use (%s)"
                                      % (", ".join(free_elsewhere),
                                         "; ".join(sorted({d for n in free_elsewhere for _, d in blocked[n]}))))
        if memory_bound and len(memory_bound) == len(verdicts):
            result["check"] = "memory"
            result["status"] = "memory-bound"
            result["summary"] = "the nodes it may use are fully allocated and their GPU memory is full: " \
                                "time-slicing will not help"
            result["remedy"] = make_remedy("see node(s) %s: MIG or MPS with memory limits might help, otherwise "
                                       "add GPUs" % ", ".join(sorted(verdicts)))
            return result
        result["check"] = "allocation"
        result["status"] = "allocation-bound"
        result["summary"] = "all %s on the %d node(s) it may use are allocated" % (
            ", ".join(sorted(pod.requests)), len(verdicts))
        if helping:
            slots = sum(r["remedy"]["added_slots"] for r in helping)
            parts = ["%s on %s" % (r["remedy"]["inventory"], r["name"]) for r in helping]
            result["remedy"] = make_remedy("sharing adds %s: %s" % (format_slots(slots), "; ".join(parts)),
                                       added_slots=slots)
            others = [r for r in verdicts.values() if r not in helping]
            if others:
                result["remedy"]["summary"] += " (not on %s: %s)" % (
                    ", ".join(r["name"] for r in others), "; ".join(sorted({r.get("status", "") for r in others})))
        else:
            result["remedy"] = make_remedy("no node it may use has room for sharing (%s): add GPUs"
                                       % "; ".join("%s %s" % (r["name"], r.get("status", ""))
                                                   for r in verdicts.values()))
        if free_elsewhere:
            result["remedy"]["summary"] += "; or open %s to it (see that node)" % ", ".join(free_elsewhere)
        return result

    # A node it may use has room: the reason lies outside GPUs and node rules.
    roomy = sorted(s.node.name for s in feasible if has_room(s))
    result["nodes"] = roomy
    reasons = result["scheduler"]["reasons"] if result["scheduler"] else []
    other = [r for r in reasons if r["category"] not in ("taint", "selector", "cordoned", "not-ready")
             and not (r["category"] == "insufficient" and is_gpu_resource(r["detail"]))]
    if other:
        result["check"] = "placement"
        result["status"] = "other-constraint"
        result["summary"] = "GPUs are free on %s, but the scheduler rejects it there: %s" % (
            ", ".join(roomy), ", ".join("%d %s" % (r["count"], r["reason"]) for r in other))
        actions = []
        if any(r["category"] == "insufficient" for r in other):
            actions.append("lower the pod's CPU/memory requests or free them on the GPU nodes; no single node "
                           "satisfies every request at once")
        if any(r["category"] in ("pod-affinity", "topology-spread") for r in other):
            actions.append("relax the pod (anti-)affinity or topology spread constraints")
        if any(r["category"] == "volume" for r in other):
            actions.append("check the pod's volumes: their zone or binding rules exclude the GPU nodes")
        result["remedy"] = make_remedy("; ".join(actions) or "see the scheduler message")
        return result
    result["status"] = "unexplained"
    result["summary"] = "GPUs are free on %s and the pod may use them: the snapshot is older than the last " \
                        "scheduling attempt, or its scheduler (%s) is not running" % (", ".join(roomy),
                                                                                     pod.scheduler_name)
    return result
