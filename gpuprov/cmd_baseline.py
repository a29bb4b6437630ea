"""`gpuprov baseline`: record GPU utilisation on the nodes and summarise it."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import click

from gpuprov import diagnose as diag
from gpuprov import options
from gpuprov.errors import EXIT_FAILED, fail_bad_input
from gpuprov.runner import ansible_command

SCHEMA = "gpuprov.baseline/v1"
# Resolved by Ansible like gpuprov apply's site playbook: the repository's collection
# (ansible.cfg collections_path) or the installed one.
PLAYBOOK = "gpuprov.gpu.baseline"
# ansible-playbook's exit codes (lib/ansible/cli/__init__.py): 2 host failed, 4 unreachable.
_ANSIBLE_RC = {1: "error", 2: "one or more hosts failed", 3: "one or more hosts unreachable",
               4: "one or more hosts unreachable", 5: "bad options", 8: "ansible-playbook crashed",
               99: "interrupted", 250: "unexpected error"}


def build_argv(executable, playbook, inventory, dest, duration, interval, limit=None, extra_args=()):
    """The ansible-playbook command line, as an argv list (never a shell string).

    ``inventory``: one source or a list of them; ``extra_args``: e.g. the vault options.
    """
    argv = [executable]
    for source in [inventory] if isinstance(inventory, str) else inventory:
        argv += ["-i", source]
    if limit:
        argv += ["-l", limit]
    argv += list(extra_args)
    extra = {"gpuprov_baseline_duration": duration, "gpuprov_baseline_interval": interval,
             "gpuprov_baseline_dest": dest}
    # JSON extra vars keep their types and need no quoting.
    argv += ["-e", json.dumps(extra, sort_keys=True), playbook]
    return argv


def run_playbook(argv, duration, log_path):
    """Run ansible-playbook with a progress bar over the recording time; returns its exit code."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started = time.monotonic()
        try:
            with click.progressbar(length=duration, label="Recording GPU utilisation", file=sys.stderr,
                                   show_eta=True) as bar:
                shown = 0
                while process.poll() is None and shown < duration:
                    time.sleep(0.5)
                    elapsed = min(int(time.monotonic() - started), duration)
                    bar.update(elapsed - shown)
                    shown = elapsed
            if process.poll() is None:
                click.echo("Fetching the samples...", err=True)
            return process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
            raise


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


_RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=(?P<unreachable>\d+)\s+"
                         r"failed=(?P<failed>\d+)")


def failed_hosts(ansible_output):
    """Hosts the PLAY RECAP of ansible-playbook's default output lists as failed or unreachable."""
    hosts = []
    for line in ansible_output.splitlines():
        match = _RECAP_LINE.match(line.strip())
        if match and (int(match.group("unreachable")) or int(match.group("failed"))):
            hosts.append(match.group("host"))
    return sorted(set(hosts))


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
    if summary["failed_hosts"]:
        lines.append("No samples from: %s (failed or unreachable)" % ", ".join(summary["failed_hosts"]))
    if summary["out"]:
        lines.append("CSV files: %s (use with `gpuprov diagnose --gpu-data %s`)"
                     % (os.path.join(summary["out"], "utilization"), summary["out"]))
    return "\n".join(lines)


@click.command("baseline")
@options.inventory_options
@click.option("--duration", required=True, type=click.IntRange(1, 86400), metavar="SECONDS",
              help="How long to record.")
@click.option("--interval", default=1, show_default=True, type=click.IntRange(1, 3600), metavar="SECONDS",
              help="Seconds between samples (nvidia-smi -l).")
@options.output_option(["table", "json"])
@click.option("--out", "out_dir", metavar="DIR",
              help="Keep the CSV files here as DIR/utilization/<host>.csv (and ansible.log); by default "
                   "they are deleted after the summary.")
def baseline(inventory, limit, vault, duration, interval, output, out_dir):
    """Record GPU utilisation on the nodes and summarise it per node and GPU.

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
    for source in inventory:
        if not os.path.exists(source) and "," not in source:
            problems.append("%s: inventory not found; give a file or folder, or a comma-separated host list" % source)
    if interval > duration:
        problems.append("--interval %d is longer than --duration %d: no sample would be taken" % (interval, duration))
    if out_dir and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        problems.append("%s: --out must be a folder" % out_dir)
    if problems:
        fail_bad_input(problems, header="gpuprov baseline: cannot start:")
    try:
        executable = ansible_command("ansible-playbook")
    except FileNotFoundError as error:
        click.echo("gpuprov baseline: %s" % error, err=True)
        raise SystemExit(EXIT_FAILED) from None

    dest = os.path.abspath(out_dir) if out_dir else tempfile.mkdtemp(prefix="gpuprov-baseline-")
    os.makedirs(dest, exist_ok=True)
    try:
        log_path = os.path.join(dest, "ansible.log")
        argv = build_argv(executable, PLAYBOOK, list(inventory), dest, duration, interval, limit,
                          extra_args=vault.playbook_args())
        rc = run_playbook(argv, duration, log_path)
        try:
            samples = read_samples(dest)
        except diag.SnapshotError as error:
            click.echo("gpuprov baseline: a node returned unreadable samples:", err=True)
            for problem in error.problems:
                click.echo(problem, err=True)
            raise SystemExit(EXIT_FAILED) from None
        summary = {"schema": SCHEMA, "duration_s": duration, "interval_s": interval,
                   "out": dest if out_dir else None, "nodes": summarise_baseline(samples),
                   "failed_hosts": [], "ansible_rc": rc}
        if rc != 0:
            with open(log_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            click.echo("gpuprov baseline: ansible-playbook exited %d (%s); its last lines:"
                       % (rc, _ANSIBLE_RC.get(rc, "failed")), err=True)
            for line in text.splitlines()[-25:]:
                click.echo("  " + line, err=True)
            summary["failed_hosts"] = failed_hosts(text)
        if output == "json":
            click.echo(json.dumps(summary, indent=2))
        else:
            click.echo(render_table(summary))
        if rc != 0:
            raise SystemExit(EXIT_FAILED)
    finally:
        if not out_dir:
            shutil.rmtree(dest, ignore_errors=True)
