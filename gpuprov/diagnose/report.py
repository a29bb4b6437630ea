"""The report: run the checks over a snapshot and summarise them (schema gpuprov.diagnose/v1)."""

from gpuprov.diagnose.dra_checks import analyse_dra_pod, device_usage
from gpuprov.diagnose.kubernetes_objects import TERMINATED_PHASES
from gpuprov.diagnose.node_checks import analyse_node, has_room_now, node_state
from gpuprov.diagnose.placement import NODE_STATE_BLOCKERS, placement_blockers
from gpuprov.diagnose.pod_checks import analyse_pod, latest_events
from gpuprov.diagnose.scheduler_messages import parse_scheduler_message
from gpuprov.diagnose.thresholds import (
    DEFAULT_MAX_REPLICAS,
    MEMORY_USABLE_FRACTION,
    MIG_MEMORY_MARGIN,
    SM_TARGET_PERCENT,
)


SCHEMA = "gpuprov.diagnose/v1"

CHECKS = ("allocation", "memory", "placement", "application")


def diagnose(snapshot, max_replicas=DEFAULT_MAX_REPLICAS):
    """Run the checks over a Snapshot and return the report (see docs/diagnose.md)."""
    if max_replicas < 2:
        raise ValueError("max_replicas must be at least 2 (time-slicing needs 2 replicas or more)")
    live_pods = [p for p in snapshot.pods if p.phase not in TERMINATED_PHASES]
    bound = {}
    for pod in live_pods:
        if pod.node_name:
            bound.setdefault(pod.node_name, []).append(pod)
    gpu_nodes = [n for n in snapshot.nodes if n.is_gpu_node]
    states = [node_state(n, bound.get(n.name, []), snapshot.facts.get(n.name), snapshot.utilization.get(n.name))
              for n in gpu_nodes]
    pending = sorted((p for p in live_pods if p.is_pending and p.requests and not p.claims), key=lambda p: p.key)
    # Pods with ResourceClaims (DRA) are judged by their claims, whatever else they ask for.
    pending_dra = sorted((p for p in live_pods if p.is_pending and p.claims), key=lambda p: p.key)

    # Which free nodes turn Pending pods away, and why: the node side of check 3. A node
    # counts when it would take the pod but for its own state (taints, cordon, NotReady);
    # a selector or affinity mismatch counts only for pods no node may take at all, since
    # a pod that selects other nodes on purpose says nothing about this one.
    placement_victims = {}
    for pod in pending:
        blockers_by_node = {s.node.name: placement_blockers(pod, s.node) for s in states}
        any_feasible = any(
            not blockers_by_node[s.node.name] and
            all(s.node.allocatable.get(n, 0) >= v for n, v in pod.requests.items()) for s in states)
        for state in states:
            blockers = blockers_by_node[state.node.name]
            if not blockers or not has_room_now(state, pod.requests):
                continue
            if any_feasible and not all(category in NODE_STATE_BLOCKERS for category, _ in blockers):
                continue
            for _category, detail in blockers:
                placement_victims.setdefault(state.node.name, []).append((pod.key, detail))

    node_results = {}
    for state in states:
        node_results[state.node.name] = analyse_node(state, placement_victims, max_replicas)
    latest = latest_events(snapshot.events)
    pod_results = [analyse_pod(pod, states, node_results, latest.get(pod.key)) for pod in pending]
    for pod in pending_dra:
        event = latest.get(pod.key)
        scheduler = {"message": event.message, "time": event.time, "count": event.count,
                     "reasons": parse_scheduler_message(event.message)} if event else None
        pod_results.append(analyse_dra_pod(pod, snapshot, snapshot.nodes, scheduler))
    pod_results.sort(key=lambda r: "%s/%s" % (r["namespace"], r["name"]))

    not_run = []
    missing_memory = [r["name"] for r in node_results.values() if any(n["check"] == "memory" for n in r["not_run"])]
    if missing_memory:
        not_run.append({"check": "memory", "nodes": missing_memory,
                        "reason": "no facts/<node>.json and no utilization data"})
    missing_sm = [r["name"] for r in node_results.values()
                  if any(n["check"] == "application" for n in r["not_run"])]
    if missing_sm:
        not_run.append({"check": "application", "nodes": missing_sm,
                        "reason": "no utilization data (utilization/<node>.csv); record it with "
                                  "`gpuprov baseline record --out DIR` or `gpuprov baseline collect --out DIR`"})
    without_event = [p["namespace"] + "/" + p["name"] for p in pod_results if not p["scheduler"]]
    if without_event:
        not_run.append({"check": "placement", "pods": without_event,
                        "reason": "no FailedScheduling event (events expire after an hour by default): judged "
                                  "from the pod spec, node labels and taints only"})

    by_check = {name: 0 for name in CHECKS}
    for item in list(node_results.values()) + pod_results:
        if item["check"]:
            by_check[item["check"]] += 1
    summary = {
        "nodes": len(snapshot.nodes),
        "gpu_nodes": len(gpu_nodes),
        "gpus": sum(s.physical_gpus for s in states),
        "pending_gpu_pods": len(pending) + len(pending_dra),
        "pending_by_check": {name: sum(1 for p in pod_results if p["check"] == name) for name in CHECKS},
        "nodes_by_check": {name: sum(1 for r in node_results.values() if r["check"] == name) for name in CHECKS},
        "slots_from_sharing": sum(r["remedy"]["added_slots"] for r in node_results.values()
                                  if r["remedy"] and r["remedy"].get("sharing") and r["check"] == "allocation"),
    }
    summary["pending_unexplained"] = sum(1 for p in pod_results if p["check"] is None)
    dra_nodes = device_usage(snapshot)
    if snapshot.dra_devices is not None:
        summary["dra_devices"] = sum(n["devices"] for n in dra_nodes)
        summary["dra_devices_free"] = sum(n["free"] for n in dra_nodes)
    return {
        "schema": SCHEMA,
        "source": snapshot.source,
        "summary": summary,
        "not_run": not_run,
        "notes": list(snapshot.notes),
        "nodes": [node_results[s.node.name] for s in states],
        "pods": pod_results,
        # None when the snapshot holds no DRA objects; else devices per node and the claims.
        "dra": None if snapshot.dra_devices is None else {
            "nodes": dra_nodes,
            "claims": {"total": len(snapshot.dra_claims), "allocated": sum(1 for c in snapshot.dra_claims if c.allocated),
                       "pending": sum(1 for c in snapshot.dra_claims if not c.allocated)}},
        "thresholds": {
            "memory_usable_fraction": MEMORY_USABLE_FRACTION,
            "sm_target_percent": SM_TARGET_PERCENT,
            "max_replicas": max_replicas,
            "mig_memory_margin": MIG_MEMORY_MARGIN,
        },
    }
