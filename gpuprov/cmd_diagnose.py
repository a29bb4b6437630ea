"""`gpuprov diagnose`: why do pods queue beside idle GPUs?"""
import json
import os
import re
import tempfile

import click

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import escape
from gpuprov import diagnose as diag
from gpuprov import options, render
from gpuprov.diagnose import html_report, prometheus
from gpuprov.diagnose.live_cluster import ClusterError, KubeconfigError, add_live_dra, fetch_cluster
from gpuprov.errors import EXIT_FAILED, fail_bad_input


def add_prometheus(snapshot, url, since_seconds):
    """Utilisation of every GPU and MIG instance from dcgm-exporter's series in Prometheus.

    It replaces utilization/<node>.csv for the nodes Prometheus knows (one source per node:
    DCGM's SM activity and nvidia-smi's utilization.gpu are different measures).
    """
    data = prometheus.read(prometheus.Client(url), since_seconds)
    samples, notes = prometheus.to_samples(data, {node.name for node in snapshot.nodes})
    replaced = sorted(node for node in samples if snapshot.utilization.get(node))
    if replaced:
        notes.append("Prometheus replaces the nvidia-smi samples of %s" % ", ".join(replaced))
    snapshot.utilization.update(samples)
    if not data["devices"]:
        notes.append("Prometheus %s holds no DCGM series for the last %ds: is dcgm-exporter scraped?"
                     % (url, since_seconds))
    snapshot.notes.extend(data["notes"] + notes)
    snapshot.notes = [note for note in snapshot.notes if not note.startswith("live mode reads no GPU")]
    return data


def write_report(path, text):
    """Atomically (temp file in the same folder, then rename): a reader never sees half a page,
    and a link planted at the temp name is not followed (O_EXCL)."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".gpuprov-report-", suffix=".html", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def load_live(kubeconfig, context, gpu_data):
    nodes_doc, pods_doc, events_doc = fetch_cluster(kubeconfig, context)
    problems, parsed = [], {}
    for name, parser, doc in (("nodes", diag.parse_nodes, nodes_doc), ("pods", diag.parse_pods, pods_doc),
                              ("events", diag.parse_events, events_doc)):
        try:
            parsed[name] = parser(doc, "cluster %s" % name)
        except diag.SnapshotError as error:
            problems.extend(error.problems)
    if problems:
        raise diag.SnapshotError(problems)
    snapshot = diag.Snapshot(nodes=parsed["nodes"], pods=parsed["pods"], events=parsed["events"],
                             source="context %s" % context if context else "current kubeconfig context")
    add_live_dra(snapshot, kubeconfig, context)
    if gpu_data:
        _add_gpu_data(snapshot, gpu_data)
    else:
        snapshot.notes.append("live mode reads no GPU facts or utilisation by itself: pass --gpu-data DIR "
                              "(facts/<node>.json, utilization/<node>.csv)")
    return snapshot


def _add_gpu_data(snapshot, directory):
    if not os.path.isdir(directory):
        raise diag.SnapshotError("%s: --gpu-data is not a directory" % directory)
    facts, utilization, notes = diag.load_gpu_data(directory, snapshot.nodes, label_prefix=directory.rstrip("/") + "/")
    snapshot.facts.update(facts)
    snapshot.utilization.update(utilization)
    snapshot.notes.extend(notes)


# --------------------------------------------------------------------------------------
# Table rendering


def _table(headers, rows):
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers] + rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return lines


def _short_resource(name):
    return name[len("nvidia.com/"):] if name.startswith("nvidia.com/") else name


def _node_row(node):
    allocated = ", ".join("%s %d/%d" % (_short_resource(r["name"]), r["allocated"], r["allocatable"])
                          for r in node["resources"] if r["allocatable"] or r["capacity"])
    sm = "%.0f%%" % node["sm_mean"] if node["sm_mean"] is not None else "-"
    peak = node["memory_peak"]
    memory = "%s/%s GiB" % (diag.format_gib(peak["used_mib"]), diag.format_gib(peak["total_mib"])) if peak else "-"
    if node["check"] in ("allocation", "memory") and node["remedy"]:
        # The decisive first clause; the details section has the rest.
        finding = node["remedy"]["summary"].split("; ")[0]
    else:
        finding = node["summary"]
    return [node["name"], str(node["physical_gpus"]), allocated, sm, memory, node["check"] or "-",
            node.get("status", "-"), finding]


def _wrap(prefix, text, width=100):
    indent = " " * len(prefix)
    lines, current = [], prefix
    # Keep "(GPU 7)" and "{key: }" whole.
    for word in re.split(r" (?!\d+\)|\})", text):
        if len(current) + len(word) + 1 > width and current.strip():
            lines.append(current.rstrip())
            current = indent
        current += word + " "
    lines.append(current.rstrip())
    return lines


def _remedy_lines(remedy):
    lines = []
    if not remedy:
        return lines
    if remedy.get("summary"):
        lines.extend(_wrap("    remedy:   ", remedy["summary"]))
    if remedy.get("inventory"):
        lines.append("              %s" % remedy["inventory"])
    if remedy.get("sizing"):
        lines.extend(_wrap("    sizing:   ", remedy["sizing"]))
    for alternative in remedy.get("alternatives") or []:
        lines.extend(_wrap("    instead:  ", alternative["summary"]))
        if alternative.get("inventory"):
            lines.append("              %s" % alternative["inventory"])
    for command in remedy.get("commands") or []:
        lines.append("    run:      %s" % command)
    return lines


def _pod_groups(pods):
    """Pending pods with the same finding (replicas of one job) shown once."""
    groups = {}
    for pod in pods:
        key = json.dumps([pod["check"], pod.get("status"), pod["requests"], pod["summary"], pod["remedy"],
                          pod["scheduler"]["message"] if pod["scheduler"] else None], sort_keys=True)
        groups.setdefault(key, []).append(pod)
    return list(groups.values())


def _pod_asks(pod):
    asks = ["%d %s" % (v, _short_resource(k)) for k, v in sorted(pod["requests"].items())]
    asks += ["claim %s" % (c["claim"] or "from %s" % c["template"]) for c in pod.get("claims") or []]
    return ", ".join(asks)


def render_table(report):
    summary = report["summary"]
    out = ["%s: %d GPU node(s) of %d, %d GPU(s), %d Pending GPU pod(s)%s"
           % (report["source"], summary["gpu_nodes"], summary["nodes"], summary["gpus"],
              summary["pending_gpu_pods"], "; DRA: %d device(s), %d free" % (summary["dra_devices"],
                                                                         summary["dra_devices_free"])
              if "dra_devices" in summary else ""), ""]
    if report["nodes"]:
        out.extend(_table(["NODE", "GPUS", "ALLOCATED", "SM", "MEM PEAK", "CHECK", "STATUS", "FINDING"],
                          [_node_row(n) for n in report["nodes"]]))
        out.append("")
    if report.get("dra"):
        out.append("DRA devices (ResourceSlices; allocated by ResourceClaims):")
        rows = []
        for node in report["dra"]["nodes"]:
            for number, kind in enumerate(node["kinds"]):
                memory = "%g GiB" % kind["memory_gib"] if kind["memory_gib"] is not None else "-"
                rows.append([node["name"] if number == 0 else "", "%s %s" % (kind["driver"], kind["kind"]),
                             kind["product"] or "-", memory, "%d/%d" % (kind["allocated"], kind["devices"]),
                             str(kind["free"])])
        claims = report["dra"]["claims"]
        if rows:
            out.extend(_table(["NODE", "DEVICE", "PRODUCT", "MEMORY", "ALLOCATED", "FREE"], rows))
        else:
            out.append("no ResourceSlice publishes a device")
        out.append("Claims: %d, %d allocated, %d waiting" % (claims["total"], claims["allocated"], claims["pending"]))
        out.append("")
    if report["pods"]:
        rows = [["%s/%s" % (p["namespace"], p["name"]), _pod_asks(p), p["check"] or "-", p["summary"]]
                for p in report["pods"]]
        out.extend(_table(["PENDING POD", "REQUESTS", "CHECK", "FINDING"], rows))
        out.append("")
    details = [n for n in report["nodes"] if n["check"] or n.get("status") == "unavailable"]
    if details or report["pods"]:
        out.append("Details")
    for node in details:
        out.extend(_wrap("  %s [%s] " % (node["name"], node["check"] or node.get("status")), node["summary"]))
        for line in node["evidence"]:
            out.extend(_wrap("    evidence: ", line))
        out.extend(_remedy_lines(node["remedy"]))
    for group in _pod_groups(report["pods"]):
        pod = group[0]
        out.extend(_wrap("  %s/%s [%s] " % (pod["namespace"], pod["name"], pod["check"] or pod.get("status")),
                         pod["summary"]))
        if len(group) > 1:
            out.extend(_wrap("    alike:    ", ", ".join("%s/%s" % (p["namespace"], p["name"]) for p in group[1:])))
        for line in pod["evidence"]:
            if line.startswith("scheduler: "):
                # The preemption half of the message only says preemption would not help.
                line = re.split(r"\.?\s+preemption:", line, maxsplit=1)[0]
            out.extend(_wrap("    evidence: ", line))
        out.extend(_remedy_lines(pod["remedy"]))
    if details or report["pods"]:
        out.append("")
    slots = summary["slots_from_sharing"]
    out.append("Pending pods by check: %s; unexplained %d. Sharing on the allocation-bound nodes adds %d slot(s)."
               % (", ".join("%s %d" % kv for kv in summary["pending_by_check"].items()),
                  summary["pending_unexplained"], slots))
    for item in report["not_run"]:
        who = ", ".join(item.get("nodes") or item.get("pods") or [])
        out.extend(_wrap("Not run: ", "%s check for %s: %s" % (item["check"], who, item["reason"])))
    for note in report["notes"]:
        out.extend(_wrap("Note: ", note))
    return render.lines(out)


@click.command("diagnose")
@options.trust_ansible_cfg_option
@click.option("--snapshot", "snapshot_dir", metavar="DIR",
              help="Folder with nodes.json, pods.json, events.json (kubectl get ... -o json) and optional "
                   "facts/<node>.json and utilization/<node>.csv.")
@click.option("--kubeconfig", metavar="FILE", help="Live mode: read the cluster through this kubeconfig "
                                                  "(default $KUBECONFIG or ~/.kube/config).")
@click.option("--context", metavar="NAME", help="Live mode: kubeconfig context to use.")
@click.option("--gpu-data", metavar="DIR",
              help="Folder with facts/<node>.json and utilization/<node>.csv (e.g. from `gpuprov baseline collect "
                   "--out DIR`); in live mode the only source of GPU figures.")
@options.output_option(["table", "json"], help_text="table for people, json for tools (schema gpuprov.diagnose/v1).")
@click.option("--prometheus", "prometheus_url", metavar="URL",
              help="Read GPU and MIG-instance activity from dcgm-exporter's metrics in this Prometheus "
                   "(e.g. http://prometheus:9090).")
@click.option("--since", default="7d", show_default=True, metavar="DURATION",
              help="With --prometheus: how far back to read (30m, 12h, 7d, 2w).")
@click.option("--report", "report_path", metavar="FILE.html",
              help="Also write one self-contained HTML page: per node SM activity and memory over time for "
                   "every GPU, the allocation picture, the findings and remedies.")
@click.option("--max-replicas", type=click.IntRange(2, 64), default=diag.DEFAULT_MAX_REPLICAS, show_default=True,
              help="Largest time-slicing replica count to suggest.")
def diagnose(snapshot_dir, kubeconfig, context, gpu_data, prometheus_url, since, report_path, output, max_replicas):
    """Explain why pods stay Pending while GPUs look idle, and what would fix it.

    Checks run in this order, and each node and Pending GPU pod is reported under the
    first that explains it:

    \b
      1 allocation   every GPU on the node is requested: sharing adds slots
                     (time-slicing replicas sized from memory headroom and SM use;
                     MIG when today's use fits an instance)
      2 memory       fully allocated and GPU memory nearly full: time-slicing will
                     not help; MIG or MPS with memory limits might, or nothing will
      3 placement    GPUs are free, but the pod's node selector, node affinity,
                     tolerations or size keep it off them (FailedScheduling events
                     are parsed and checked against node labels and taints)
      4 application  GPUs held but idle: SM activity cycles (CPU-bound) or stays
                     low while memory is held (I/O-bound): more GPUs will not help

    \b
    Snapshot mode (no cluster access needed):
      kubectl get nodes -o json > DIR/nodes.json
      kubectl get pods -A -o json > DIR/pods.json
      kubectl get events -A -o json > DIR/events.json
      gpuprov diagnose --snapshot DIR
    Optional, for the memory and application checks: DIR/facts/<node>.json (gpu_facts
    output) and DIR/utilization/<node>.csv (`gpuprov baseline record|collect --out DIR` writes them).
    A check that lacks its input is reported as not run, with the reason.

    Live mode (without --snapshot) reads nodes, pods and events through the kubernetes
    Python client (`pip install 'gpuprov[cluster]'`). It does not gather GPU facts or
    utilisation itself: pass them with --gpu-data DIR.

    With --prometheus URL, GPU activity comes from dcgm-exporter's series over the last
    --since (range queries, per GPU and per MIG instance joined on UUID + GPU_I_ID, pods
    where the exporter maps them; old and new metric names). SM activity is
    DCGM_FI_PROF_SM_ACTIVE, and the memory check also catches memory-bandwidth-bound work:
    DRAM_ACTIVE >= 50% while SM_ACTIVE < 50%.

    Exit status: 0 report produced (whatever it finds), 1 the cluster or Prometheus could
    not be read, 2 bad or missing input (the message names the file and field).
    """
    problems = []
    if snapshot_dir and (kubeconfig or context):
        problems.append("--snapshot reads a saved snapshot; --kubeconfig/--context read a live cluster: "
                        "give one or the other")
    since_seconds = None
    if prometheus_url:
        try:
            prometheus.check_url(prometheus_url)
            since_seconds = prometheus.parse_duration(since)
        except ValueError as error:
            problems.append("--prometheus/--since: %s" % error)
    if report_path and (os.path.isdir(report_path) or not os.path.isdir(os.path.dirname(os.path.abspath(report_path)))):
        problems.append("--report %s: give a file in an existing folder" % report_path)
    if problems:
        fail_bad_input(problems)
    try:
        if snapshot_dir:
            snapshot = diag.load_snapshot(snapshot_dir)
            if gpu_data:
                _add_gpu_data(snapshot, gpu_data)
        else:
            snapshot = load_live(kubeconfig, context, gpu_data)
        if prometheus_url:
            add_prometheus(snapshot, prometheus_url, since_seconds)
        report = diag.diagnose(snapshot, max_replicas=max_replicas)
    except diag.SnapshotError as error:
        fail_bad_input(error.problems, header="gpuprov diagnose: cannot use this input:")
    except KubeconfigError as error:
        fail_bad_input([str(error)], header="gpuprov diagnose: cannot use this input:")
    except (ClusterError, prometheus.PrometheusError) as error:
        render.echo("gpuprov diagnose: %s" % escape(str(error)), err=True)
        raise SystemExit(EXIT_FAILED) from None
    if report_path:
        write_report(report_path, html_report.render(report, snapshot))
    if output == "json":
        # Strict JSON (RFC 8259): no NaN or Infinity, which json.dumps would otherwise write.
        render.echo(json.dumps(report, indent=2, sort_keys=False, allow_nan=False))
    else:
        render.echo(render_table(report))
        if report_path:
            render.echo("Report: %s" % report_path)
