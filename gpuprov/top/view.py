"""Rendering `gpuprov top`: the latest samples of every node as a table or JSON."""
import time

from gpuprov import render

SCHEMA = "gpuprov.top/v1"


def node_view(name, state):
    """JSON-ready view of one node from its stream's snapshot."""
    gpus, by_index = [], {}
    for sample in state["samples"]:
        entry = {"index": sample.index, "name": sample.name, "uuid": sample.uuid,
                 "utilization_percent": sample.utilization_gpu, "memory_used_mib": sample.memory_used_mib,
                 "memory_total_mib": sample.memory_total_mib,
                 "processes": [{"pid": p[0], "name": p[1], "used_mib": p[2]} for p in sample.processes]}
        if sample.gpu_instance_id:
            entry["gpu_instance_id"] = sample.gpu_instance_id
            by_index.setdefault(sample.index, {}).setdefault("instances", []).append(entry)
        else:
            entry["instances"] = []
            by_index[sample.index] = dict(by_index.get(sample.index, {}), **entry)
            gpus.append(by_index[sample.index])
    for gpu in gpus:
        gpu["instances"] = by_index[gpu["index"]].get("instances", [])
    return {"status": state["status"], "message": state["message"] or None,
            "sampled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state["updated"])) if state["updated"] else None,
            "gpus": gpus}


def report(states):
    nodes = {name: node_view(name, state) for name, state in sorted(states.items())}
    counts = {}
    for node in nodes.values():
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    return {"schema": SCHEMA, "nodes": nodes, "summary": dict(sorted(counts.items()))}


def _procs(entry):
    return ", ".join("%s(%d) %d MiB" % (p["name"] or "?", p["pid"], p["used_mib"]) for p in entry["processes"]) or "-"


def table(result):
    rows = []
    for name, node in result["nodes"].items():
        if node["status"] != "ok":
            rows.append([name, "-", node["status"].upper(), "-", "-", node["message"] or "-"])
            continue
        for gpu in node["gpus"]:
            util = "MIG" if gpu["instances"] else ("-" if gpu["utilization_percent"] is None
                                                   else "%.0f%%" % gpu["utilization_percent"])
            rows.append([name, str(gpu["index"]), gpu["name"], util,
                         "%.0f/%.0f" % (gpu["memory_used_mib"], gpu["memory_total_mib"]), _procs(gpu)])
            for instance in gpu["instances"]:
                rows.append([name, "%d/GI %s" % (gpu["index"], instance["gpu_instance_id"]), "  MIG instance", "n/a",
                             "%.0f/%.0f" % (instance["memory_used_mib"], instance["memory_total_mib"]),
                             _procs(instance)])
    text = render.table(["NODE", "GPU", "NAME", "UTIL", "MEM MiB", "PROCESSES"], rows)
    summary = ", ".join("%d %s" % (count, status) for status, count in result["summary"].items())
    return "%s\n\n%s" % (text, summary)
