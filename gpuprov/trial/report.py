"""A trial's result for people (a table per step and the recommendation) and for tools (JSON).

Latencies are seconds in JSON (null where Prometheus had no value, "+Inf" above the largest
bucket) and milliseconds or seconds in the table; memory is MiB in JSON, GiB in the table.
"""
import math

from gpuprov import render
from gpuprov.trial import recommend
from gpuprov.trial import slo as slo_mod
from gpuprov.trial.run import OUTCOME_ERROR, OUTCOME_FOUND, OUTCOME_INTERRUPTED, OUTCOME_NONE, describe, workload_name
from gpuprov.trial.steps import advertised_replicas

FORMAT_VERSION = 1


def _seconds(value):
    if value is None:
        return None
    return "+Inf" if math.isinf(value) else round(value, 6)


def _record_dict(record, quantiles):
    workloads = []
    for key, entry in sorted(record.workloads.items()):
        workloads.append({
            "workload": workload_name(key), "namespace": key[0], "model_name": key[1],
            "requests": dict((m, round(n, 1)) for m, n in sorted(entry["requests"].items())),
            "latency_seconds": dict((m, dict((slo_mod.quantile_key(q), _seconds(v.get(q))) for q in quantiles))
                                    for m, v in sorted(entry["quantiles"].items()))})
    return {"step": "start" if record.replicas is None else record.replicas,
            "replicas": record.replicas, "config_name": record.config_name, "resources": record.resources,
            "verdict": record.verdict, "reasons": list(record.reasons),
            "window": {"start": record.started, "end": record.ended},
            "workloads": workloads, "gpus": record.gpus, "pods": record.pods}


def recommendation(result):
    """The recommendation for the best step, or None."""
    step = result.best
    if step is None:
        return None
    return {"replicas": step.replicas, "config_name": step.config_name, "gpuprov_sharing": step.sharing,
            "gpu_memory_utilization": recommend.gpu_memory_utilization(step.replicas, result.margin)}


def fit_source(result):
    """The step whose pods `fit` packs when no step passed: the first one measured, else the start."""
    measured = [r for r in result.steps if r.pods]
    return measured[0] if measured else result.start


def as_dict(result, fit=None):
    quantiles = slo_mod.quantiles_for(result.slos)
    left = result.left_at
    if left is None:
        left_at = None
    elif left == "start":
        left_at = {"step": "start", "config_name": result.start.config_name}
    else:
        left_at = {"step": left.replicas, "config_name": left.config_name}
    return {
        "format_version": FORMAT_VERSION,
        "node": result.plan.node,
        "outcome": result.outcome,
        "error": result.error,
        "slos": [s.as_dict() for s in result.slos],
        "window_seconds": result.window,
        "memory_margin": result.margin,
        "node_left_at": left_at,
        "restored": result.restored,
        "steps": [_record_dict(r, quantiles) for r in ([result.start] if result.start else []) + result.steps],
        "recommendation": recommendation(result),
        "fit": fit,
        "notes": list(result.notes),
    }


def _gib(mib):
    return "-" if mib is None else "%.1f" % (mib / 1024.0)


def _gpu_cells(record):
    if not record.gpus:
        return "-", "-"
    worst = min(record.gpus, key=lambda g: g["free_ratio"] if g["free_ratio"] is not None else 2.0)
    free = "-" if worst["free_ratio"] is None else "%s GiB (%.0f%%)" % (_gib(worst["free_mib"]), 100 * worst["free_ratio"])
    sm = [g["sm_active"] for g in record.gpus if g["sm_active"] is not None]
    return free, ("%.0f%%" % (100 * sum(sm) / len(sm)) if sm else "-")


def steps_table(result):
    quantiles = [q for q in slo_mod.quantiles_for(result.slos)]
    headers = ["STEP", "REPLICAS", "CONFIG", "WORKLOAD", "METRIC"] + [slo_mod.quantile_key(q).upper() for q in quantiles] \
        + ["REQUESTS", "GPU FREE (LEAST)", "SM", "RESULT"]
    rows = []
    for record in ([result.start] if result.start else []) + result.steps:
        free, sm = _gpu_cells(record)
        verdict = {"pass": "pass", "slo": "SLO broken", "memory": "memory", "start": "-",
                   "error": "error", "not run": "not run"}.get(record.verdict, record.verdict)
        replicas = record.replicas if record.replicas is not None else advertised_replicas(result.plan.start)
        first = [record.label, str(replicas), record.config_name or "-"]
        lines = [(workload_name(key), metric, entry) for key, entry in sorted(record.workloads.items())
                 for metric in sorted(entry["quantiles"])]
        if not lines:
            rows.append(first + ["-", "-"] + ["-"] * len(quantiles) + ["-", free, sm, verdict])
            continue
        for number, (name, metric, entry) in enumerate(lines):
            values = entry["quantiles"][metric]
            row = (first if number == 0 else ["", "", ""]) + [name, slo_mod.short_name(metric)]
            row += [slo_mod.duration_text(values.get(q)) for q in quantiles]
            row.append("%d" % round(entry["requests"].get(metric, 0)))
            row += [free, sm, verdict] if number == 0 else ["", "", ""]
            rows.append(row)
    return render.table(headers, rows)


def text(result, fit=None, snippet_path=None):
    """The table, the reasons of each step, and what to do. Every line is escaped: workload
    names come from Prometheus' labels, and none may print a line of its own."""
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import escape

    return "\n".join(escape(line) for line in _text_lines(result, fit, snippet_path).split("\n"))


def _text_lines(result, fit, snippet_path):
    node = result.plan.node
    lines = ["gpuprov trial %s: SLO %s; %ds windows; at least %.0f%% of each GPU's memory free" % (
        node, ", ".join(s.text for s in result.slos), result.window, 100 * result.margin), "",
        steps_table(result)]
    judged = [r for r in result.steps if r.reasons]
    if judged:
        lines.append("")
        for record in judged:
            lines.extend("%s: %s" % (record.label, reason) for reason in record.reasons)
    lines.append("")
    rec = recommendation(result)
    if result.outcome == OUTCOME_FOUND:
        lines.append("Recommendation: %d replicas per GPU on %s (%s): the most that kept every SLO and the memory "
                     "margin." % (rec["replicas"], node, rec["config_name"]))
        lines.append("  vLLM: --gpu-memory-utilization %.2f for each pod at %d pods per GPU (vLLM takes 0.9 of the "
                     "GPU by default)" % (rec["gpu_memory_utilization"], rec["replicas"]))
        if snippet_path:
            lines.append("  host_vars: written to %s" % snippet_path)
        else:
            lines.append("  host_vars/%s.yml (-w FILE writes it):" % node)
            lines.extend("    " + line for line in recommend.host_vars_snippet(node, result.best, "").splitlines()
                         if not line.startswith("#"))
    elif result.outcome == OUTCOME_NONE:
        lines.append("No step passed: time-slicing %s does not keep the SLO." % node)
        if fit is not None:
            lines.extend(fit_lines(fit, node))
    elif result.outcome in (OUTCOME_ERROR, OUTCOME_INTERRUPTED):
        lines.append("The trial stopped: %s" % result.error)
    if result.restored is False:
        lines.extend("ATTENTION: %s" % note for note in result.notes)
    else:
        lines.extend(result.notes)
        lines.append(where_now(result))
    return "\n".join(lines)


def where_now(result):
    node = result.plan.node
    left = result.left_at
    if left is None:
        return "%s was not changed." % node
    if left == "start":
        return "%s is back as it was: its inventory plan (%s)." % (node, result.start.config_name)
    return "%s is at %s now." % (node, describe(left))


def fit_lines(fit, node):
    kind = "MIG" if fit.get("method") == "mig" else "MPS"
    if fit.get("error"):
        return ["%s: fit finds no %s layout for the pods on %s: %s" % (kind, kind, node, fit["error"])]
    lines = ["For latency-sensitive workloads, fit isolates the same pods with %s on %s's GPUs:" % (kind, node)]
    for gpu in fit["gpus"]:
        lines.append("  GPU %s (%s): %s" % (gpu["gpu"], gpu["sharing"], ", ".join(gpu["workloads"])))
    lines.append("  gpuprov_sharing: %s" % render.to_json(fit["gpuprov_sharing"], depth=0))
    return lines
