"""The plan table `gpuprov plan` and `gpuprov apply` print: one row per node and a fleet summary."""
from gpuprov import render


def layout_text(plan):
    """A short description of a node's sharing, e.g. `8x [3g.40gb 2g.20gb 1g.10gb 1g.10gb]`."""
    strategy = plan["strategy"]
    if strategy == "time-slicing":
        # From the slots: with rename_by_default the resource is nvidia.com/gpu.shared.
        return "time-slicing x%d" % max(slot["replicas"] for slot in plan["slots"])
    if strategy == "mps":
        return "mps x%d (%s)" % (plan["mps"]["replicas"], plan["mps"]["provider"])
    if strategy == "exclusive":
        return "whole GPUs"
    if strategy == "hami":
        hami = plan["hami"]
        return "hami x%d (memory x%g, cores x%g)" % (hami["split_count"], hami["memory_scaling"], hami["core_scaling"])
    groups = []
    for gpu in plan["gpus"]:
        mig = gpu["mig"]
        if mig and mig["enabled"]:
            counts = {}
            for inst in mig["instances"]:
                counts[inst["profile"]] = counts.get(inst["profile"], 0) + 1
            text = "[" + " ".join(p if n == 1 else "%dx%s" % (n, p) for p, n in counts.items()) + "]"
        else:
            text = "[no MIG]"
        if groups and groups[-1][0] == text:
            groups[-1][1] += 1
        else:
            groups.append([text, 1])
    text = " ".join("%dx %s" % (n, t) for t, n in groups)
    ts = plan["mig"]["time_slicing_replicas"]
    if isinstance(ts, dict):
        return text + " + time-slicing " + ",".join("%s x%d" % (k, v) for k, v in sorted(ts.items()))
    return text + (" + time-slicing x%d" % ts if ts else "")


def _gpus_text(plan):
    counts = {}
    for gpu in plan["gpus"]:
        counts[gpu["model"]] = counts.get(gpu["model"], 0) + 1
    return ", ".join("%dx %s" % (n, m) for m, n in counts.items())


def plan_table(result):
    rows = []
    for host, plan in result["nodes"].items():
        resources = ", ".join("%s=%d" % (k.replace("nvidia.com/", ""), v) for k, v in plan["resources"].items())
        disruptive = [s["action"] for s in plan["actions"] if s["disruptive"] and s["action"] != "drain"]
        rows.append([host, _gpus_text(plan), plan["strategy"], layout_text(plan), resources,
                     plan["device_plugin"]["config_name"] if plan["device_plugin"] else "- (%s)" % plan["sharing_provider"],
                     ",".join(disruptive) or "-", len(plan["warnings"])])
    lines = [render.table(["NODE", "GPUS", "STRATEGY", "LAYOUT", "ADVERTISES", "DP CONFIG", "DISRUPTIVE STEPS", "WARN"],
                          rows)]
    summary = result["summary"]
    lines.append("")
    lines.append("Fleet: %d node(s), %d physical GPU(s): %s" % (
        summary["nodes"], summary["physical_gpus"],
        ", ".join("%d %s" % (n, m) for m, n in summary["gpus_by_model"].items()) or "none"))
    lines.append("Advertised: %s" % (", ".join("%s %d" % (k, v) for k, v in summary["resources"].items()) or "nothing"))
    lines.append("Device-plugin configs: %s" % ", ".join(
        "%s (%d node%s)" % (k, v, "" if v == 1 else "s") for k, v in summary["device_plugin_configs"].items()))
    slots = [(host, s) for host, plan in result["nodes"].items() for s in plan.get("slots") or []]
    if slots:
        lines.append("Memory per shared slot:")
        seen = {}
        for host, s in slots:
            text = "%s: %d slots/device, %.2f GiB/slot" % (s["resource"], s["replicas"], s["memory_gib_per_slot"])
            seen.setdefault(text, []).append(host)
        for text, hosts in seen.items():
            unique = sorted(set(hosts), key=hosts.index)
            where = render.escape(unique[0]) if len(unique) == 1 else "%s (+%d more)" % (
                render.escape(unique[0]), len(unique) - 1)
            lines.append("  %s: %s" % (where, render.escape(text)))
    if result.get("skipped_hosts"):
        lines.append("Skipped (no gpuprov_ variables): %s"
                     % ", ".join(render.escape(host) for host in result["skipped_hosts"]))
    warnings = [(host, w) for host, plan in result["nodes"].items() for w in plan["warnings"]]
    if warnings:
        lines.append("")
        lines.append("Warnings:")
        seen = {}
        for host, warning in warnings:
            seen.setdefault(warning, []).append(host)
        for warning, hosts in seen.items():
            where = render.escape(hosts[0]) if len(hosts) == 1 else "%s (+%d more)" % (
                render.escape(hosts[0]), len(hosts) - 1)
            lines.append("  %s: %s" % (where, render.escape(warning)))
    return "\n".join(lines)
