"""`gpuprov baseline`: record GPU utilisation on the nodes and summarise it.

`record` samples for a fixed time while the command waits; `start` / `collect` / `stop`
leave a systemd unit sampling on each node for as long as it takes (a week before a change),
independent of the controller. Every playbook runs through gpuprov.runner, as apply and
status do, and the per-node outcome comes from the progress callback's JSON summary.
"""
import json
import os
import re
import shutil
import sys
import tempfile

import click

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import is_digits
from gpuprov import diagnose as diag
from gpuprov import options, render
from gpuprov.errors import EXIT_FAILED, fail_bad_input
from gpuprov.runner import run_playbook

SCHEMA = "gpuprov.baseline/v1"
# Resolved by Ansible like gpuprov apply's site playbook: the repository's collection
# (ansible.cfg collections_path) or the installed one.
PLAYBOOK = "gpuprov.gpu.baseline"
START_PLAYBOOK = "gpuprov.gpu.baseline_start"
COLLECT_PLAYBOOK = "gpuprov.gpu.baseline_collect"
STOP_PLAYBOOK = "gpuprov.gpu.baseline_stop"
SAFE_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*\Z")
# ansible-playbook's exit codes (lib/ansible/cli/__init__.py): 2 host failed, 4 unreachable.
_ANSIBLE_RC = {1: "error", 2: "one or more hosts failed", 3: "one or more hosts unreachable",
               4: "one or more hosts unreachable", 5: "bad options", 8: "ansible-playbook crashed",
               99: "interrupted", 250: "unexpected error"}


def read_samples(dest):
    """{node: [UtilizationSample]} from DEST/utilization/<node>.csv."""
    folder = os.path.join(dest, "utilization")
    samples = {}
    if not os.path.isdir(folder):
        return samples
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(".csv"):
            path = os.path.join(folder, entry)
            with open(path, encoding="utf-8") as handle:
                samples[entry[: -len(".csv")]] = diag.parse_utilization_csv(handle.read(), path)
    return samples


def failed_hosts(summary):
    """Hosts the progress callback's summary marks failed or unreachable, with why."""
    return {host: node.get("failed") or node.get("status")
            for host, node in sorted(((summary or {}).get("nodes") or {}).items())
            if node.get("status") in ("failed", "unreachable")}


def summarise_baseline(samples_by_node):
    """Per node and GPU: sample count, mean and p95 SM utilisation, mean and p95 memory used.

    Pure: takes {node: [UtilizationSample]} and returns {node: [GPU summary]} with the keys
    of diagnose.summarise_utilization (statistics left out when nvidia-smi printed [N/A]).
    """
    return {node: diag.summarise_utilization(samples) for node, samples in sorted(samples_by_node.items())}


def render_table(summary):
    rows = []
    for node, gpus in summary["nodes"].items():
        for gpu in gpus:
            def num(value, fmt="%.0f"):
                return fmt % value if value is not None else "-"

            rows.append([node, str(gpu["index"]), gpu["name"], str(gpu["samples"]), num(gpu["sm_mean"]) + "%",
                         num(gpu["sm_p95"]) + "%",
                         num(gpu["memory_used_mean_mib"]), num(gpu["memory_used_p95_mib"]),
                         num(gpu["memory_total_mib"]), gpu["pattern"] or "-"])
    headers = ["NODE", "GPU", "NAME", "SAMPLES", "SM MEAN", "SM P95", "MEM MEAN MiB", "MEM P95 MiB",
               "MEM TOTAL MiB", "PATTERN"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [headers] + rows]
    if not rows:
        lines.append("(no samples)")
    for host, why in summary["failed_hosts"].items():
        lines.append("No samples from %s: %s" % (host, why))
    if summary["out"]:
        lines.append("CSV files: %s (use with `gpuprov diagnose --gpu-data %s`)"
                     % (os.path.join(summary["out"], "utilization"), summary["out"]))
    return "\n".join(lines)


def _check_inventory(inventory, problems):
    for source in inventory:
        if not os.path.exists(source) and "," not in source:
            problems.append("%s: inventory not found; give a file or folder, or a comma-separated host list" % source)


def _explain_rc(rc, summary):
    if rc != 0:
        render.echo("gpuprov baseline: ansible-playbook exited %d (%s)" % (rc, _ANSIBLE_RC.get(rc, "failed")), err=True)
        if not (summary or {}).get("nodes"):
            render.echo("gpuprov baseline: no node was reached; see Ansible's output above", err=True)


# Every subcommand reads an inventory (-i, -l, vault options) and prints results (-o json).
output_option = options.output_option(["table", "json"])


@click.group("baseline")
def baseline():
    """Record GPU utilisation on the nodes, for minutes (record) or for days (start,
    collect, stop), and summarise it per node and GPU.

    \b
      gpuprov baseline record -i INV --duration 300       sample now, wait, summarise
      gpuprov baseline start -i INV --interval 5s          a unit on each node samples
      gpuprov baseline collect -i INV --out DIR            fetch what it has so far
      gpuprov baseline stop -i INV                         remove the unit
      gpuprov diagnose --snapshot DIR                      (with kubectl's nodes/pods/events)
    """


@baseline.command("record")
@options.inventory_options
@click.option("--duration", required=True, type=click.IntRange(1, 86400), metavar="SECONDS",
              help="How long to record.")
@click.option("--interval", default=1, show_default=True, type=click.IntRange(1, 3600), metavar="SECONDS",
              help="Seconds between samples (nvidia-smi -l).")
@output_option
@click.option("--out", "out_dir", metavar="DIR",
              help="Keep the CSV files here as DIR/utilization/<host>.csv; by default they are deleted "
                   "after the summary.")
def record(inventory, limit, vault, duration, interval, output, out_dir):
    """Record GPU utilisation for a while and summarise it per node and GPU.

    Runs the collection's playbook gpuprov.gpu.baseline (nvidia-smi --query-gpu=...
    -l INTERVAL under `timeout DURATION` on every host), fetches each host's CSV, then
    prints mean and p95 SM utilisation and memory used per GPU. Nothing on the nodes
    changes. Keep the files with --out DIR and pass DIR to `gpuprov diagnose --gpu-data`
    for its memory and application checks.

    \b
    Exit status: 0 summary printed for every host, 1 ansible-playbook failed on some
    host (the summary covers the others), 2 bad input.
    """
    problems = []
    _check_inventory(inventory, problems)
    if interval > duration:
        problems.append("--interval %d is longer than --duration %d: no sample would be taken" % (interval, duration))
    if out_dir and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        problems.append("%s: --out must be a folder" % out_dir)
    if problems:
        fail_bad_input(problems, header="gpuprov baseline: cannot start:")
    dest = os.path.abspath(out_dir) if out_dir else tempfile.mkdtemp(prefix="gpuprov-baseline-")
    os.makedirs(dest, exist_ok=True)
    try:
        extra = {"gpuprov_baseline_duration": duration, "gpuprov_baseline_interval": interval,
                 "gpuprov_baseline_dest": dest}
        rc, run_summary = _run_with_extra(PLAYBOOK, inventory, limit, vault, extra, (), output)
        try:
            samples = read_samples(dest)
        except diag.SnapshotError as error:
            render.echo("gpuprov baseline: a node returned unreadable samples:", err=True)
            for problem in error.problems:
                render.echo(problem, err=True)
            raise SystemExit(EXIT_FAILED) from None
        summary = {"schema": SCHEMA, "duration_s": duration, "interval_s": interval,
                   "out": dest if out_dir else None, "nodes": summarise_baseline(samples),
                   "failed_hosts": failed_hosts(run_summary), "ansible_rc": rc}
        _explain_rc(rc, run_summary)
        if output == "json":
            render.echo(json.dumps(summary, indent=2))
        else:
            render.echo(render_table(summary))
        if rc != 0:
            raise SystemExit(EXIT_FAILED)
    finally:
        if not out_dir:
            shutil.rmtree(dest, ignore_errors=True)


def parse_interval(text):
    """'5s', '2m', '5' -> seconds (1..3600); ValueError otherwise."""
    value = str(text).strip()
    units = {"s": 1, "m": 60}
    factor = units.get(value[-1:], None)
    number = value[:-1] if factor else value
    if not is_digits(number) or len(number) > 4 or not 1 <= int(number) * (factor or 1) <= 3600:
        raise ValueError("%r: use whole seconds or minutes from 1s to 60m (for example 5s, 1m)" % text)
    return int(number) * (factor or 1)


def node_results(hosts, summary, rc):
    """{host: {"status", "message"}} from the progress callback's summary."""
    nodes = (summary or {}).get("nodes") or {}
    results = {}
    for host in sorted(set(hosts) | set(nodes)):
        node = nodes.get(host)
        if node is None:
            results[host] = {"status": "not run", "message": "ansible-playbook exited %d before this node ran" % rc}
        else:
            results[host] = {"status": node["status"], "message": node.get("failed") or "; ".join(node["changed"])}
    return results


def _print_nodes(results, output, extra=None):
    if output == "json":
        render.echo(json.dumps(dict(extra or {}, nodes=results), indent=2))
        return
    render.echo(render.table(["NODE", "STATUS", "WHAT"], [[host, r["status"], r["message"] or "-"]
                                                          for host, r in results.items()]))


@baseline.command("start")
@options.inventory_options
@click.option("--interval", default="5s", show_default=True, metavar="DURATION",
              help="Time between samples: whole seconds or minutes, 1s..60m.")
@options.playbook_extra_vars_option
@output_option
def start(inventory, limit, vault, interval, extra_vars, output):
    """Install and start gpuprov-baseline.service on every node: it appends one sample
    per GPU every INTERVAL to /var/lib/gpuprov/baseline/samples.csv (rotated, 8 x 64 MiB
    at most) until `gpuprov baseline stop`. Sampling goes on when this command ends, the
    controller disconnects or the node reboots. Running it again with another interval
    restarts the unit with it.

    Exit status: 0 started everywhere, 1 a node failed or was unreachable, 2 bad input.
    """
    problems = []
    _check_inventory(inventory, problems)
    try:
        seconds = parse_interval(interval)
    except ValueError as error:
        problems.append("--interval: %s" % error)
    if problems:
        fail_bad_input(problems, header="gpuprov baseline start: cannot start:")
    rc, summary = _run_with_extra(START_PLAYBOOK, inventory, limit, vault, {"gpuprov_baseline_interval": seconds},
                                  extra_vars, output)
    results = node_results([], summary, rc)
    _explain_rc(rc, summary)
    _print_nodes(results, output, {"interval_s": seconds})
    if rc != 0 or any(r["status"] not in ("changed", "unchanged") for r in results.values()):
        raise SystemExit(EXIT_FAILED)


def _run_with_extra(playbook, inventory, limit, vault, variables, extra_vars, output):
    args = vault.playbook_args()
    for item in extra_vars:
        args += ["-e", item]
    try:
        return run_playbook(playbook, list(inventory), limit=limit, extra_vars=variables, extra_args=args,
                            stdout=sys.stderr if output == "json" else None)
    except FileNotFoundError as error:
        render.echo("gpuprov baseline: %s" % error, err=True)
        raise SystemExit(EXIT_FAILED) from None


@baseline.command("stop")
@options.inventory_options
@options.playbook_extra_vars_option
@output_option
def stop(inventory, limit, vault, extra_vars, output):
    """Stop gpuprov-baseline.service and remove it and its sampler from every node. The
    samples stay on the node until collected (gpuprov_baseline_remove_samples=true removes
    them too).

    Exit status: 0 removed everywhere, 1 a node failed or was unreachable, 2 bad input.
    """
    problems = []
    _check_inventory(inventory, problems)
    if problems:
        fail_bad_input(problems, header="gpuprov baseline stop: cannot start:")
    rc, summary = _run_with_extra(STOP_PLAYBOOK, inventory, limit, vault, {}, extra_vars, output)
    results = node_results([], summary, rc)
    _explain_rc(rc, summary)
    _print_nodes(results, output)
    if rc != 0 or any(r["status"] not in ("changed", "unchanged") for r in results.values()):
        raise SystemExit(EXIT_FAILED)


def join_rotated(raw_dir):
    """The text of samples.csv.N ... samples.csv.1, samples.csv (oldest first) and their names."""
    names = [name for name in os.listdir(raw_dir) if name == "samples.csv" or
             (name.startswith("samples.csv.") and is_digits(name[len("samples.csv."):]))]
    names.sort(key=lambda name: -int(name.rsplit(".", 1)[1]) if name != "samples.csv" else 0)
    parts = []
    for name in names:
        with open(os.path.join(raw_dir, name), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        if parts and parts[-1] and not parts[-1].endswith("\n"):
            parts[-1] += "\n"
        parts.append(text)
    return "".join(parts), names


@baseline.command("collect")
@options.inventory_options
@click.option("--out", "out_dir", required=True, metavar="DIR",
              help="Snapshot folder: writes DIR/utilization/<node>.csv and DIR/facts/<node>.json.")
@options.playbook_extra_vars_option
@output_option
def collect(inventory, limit, vault, out_dir, extra_vars, output):
    """Fetch what gpuprov-baseline.service has recorded so far, and each node's GPU facts,
    into the snapshot folder DIR that `gpuprov diagnose --snapshot DIR` reads (add
    nodes.json, pods.json and events.json with kubectl) or `--gpu-data DIR` in live mode.
    Sampling goes on. A last row cut off mid-line is kept out, with a note.

    Exit status: 0 every node collected, 1 a node failed, was unreachable or had no samples,
    2 bad input.
    """
    problems = []
    _check_inventory(inventory, problems)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        problems.append("%s: --out must be a folder" % out_dir)
    if problems:
        fail_bad_input(problems, header="gpuprov baseline collect: cannot start:")
    dest = os.path.abspath(out_dir)
    for sub in ("raw", "facts", "utilization"):
        os.makedirs(os.path.join(dest, sub), exist_ok=True)
    rc, summary = _run_with_extra(COLLECT_PLAYBOOK, inventory, limit, vault, {"gpuprov_baseline_dest": dest},
                                  extra_vars, output)
    results = node_results([], summary, rc)
    for host, result in results.items():
        if not SAFE_HOST.match(host):
            # The name becomes a file name: refuse what could leave DIR or hide a file.
            result.update(status="bad name", message="inventory name %r cannot name a file; rename the host" % host)
            continue
        raw = os.path.join(dest, "raw", host)
        if result["status"] not in ("changed", "unchanged") or not os.path.isdir(raw):
            continue
        text, names = join_rotated(raw)
        path = os.path.join(dest, "utilization", host + ".csv")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(path + ".tmp", path)
        notes = []
        try:
            samples = diag.parse_utilization_csv(text, "utilization/%s.csv" % host, notes=notes)
        except diag.SnapshotError as error:
            result.update(status="unreadable", message="; ".join(error.problems[:3]))
            continue
        stamps = [sample.timestamp for sample in samples]
        result.update(files=names, samples=len(samples), first=min(stamps) if stamps else None,
                      last=max(stamps) if stamps else None, notes=notes,
                      message="%d samples, %s .. %s%s" % (len(samples), min(stamps) if stamps else "-",
                                                         max(stamps) if stamps else "-",
                                                         "; " + "; ".join(notes) if notes else ""))
    _explain_rc(rc, summary)
    _print_nodes(results, output, {"out": dest})
    if output != "json":
        render.echo("Snapshot: %s (add nodes.json, pods.json, events.json from kubectl, then "
                   "`gpuprov diagnose --snapshot %s`)" % (dest, dest))
    if rc != 0 or any(r["status"] not in ("changed", "unchanged") for r in results.values()):
        raise SystemExit(EXIT_FAILED)
