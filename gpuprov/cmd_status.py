"""`gpuprov status`: is every node still what its plan says?"""
import json
import os
import sys

import click

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.file_names import safe_file_name
from gpuprov import options, render
from gpuprov.planning import load_plans
from gpuprov.errors import EXIT_FAILED, EXIT_OK, fail_bad_input
from gpuprov.runner import run_playbook

PLAYBOOK = "gpuprov.gpu.status"
IN_SYNC, DRIFTED, UNREACHABLE, ERROR = "in-sync", "drifted", "unreachable", "error"


def collect(hosts, directory, summary):
    """Per host {status, drift, message} from the run summary (the progress callback keeps each
    node's reading there), else from the playbook's files in ``directory`` (gpuprov_status_dir)."""
    ran = (summary or {}).get("nodes", {})
    nodes = {}
    for host in hosts:
        path = os.path.join(directory, "%s.json" % safe_file_name(host)) if directory else None
        run = ran.get(host) or {}
        read = run.get("node_status")
        if run.get("status") == "unreachable":
            nodes[host] = {"status": UNREACHABLE, "drift": [], "message": run.get("failed") or "unreachable"}
        elif isinstance(read, dict) and run.get("status") != "failed":
            nodes[host] = {"status": read["status"], "drift": read["drift"], "message": None}
        elif path and os.path.exists(path):
            with open(path) as handle:
                data = json.load(handle)
            nodes[host] = {"status": data["status"], "drift": data["drift"], "message": None}
        elif run.get("status") == "failed":
            nodes[host] = {"status": ERROR, "drift": [], "message": run.get("failed") or "failed"}
        else:
            nodes[host] = {"status": ERROR, "drift": [], "message": "the status playbook did not report on this node"}
    return nodes


def summarize(nodes):
    counts = {}
    for node in nodes.values():
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    return dict(sorted(counts.items()))


def status_table(result):
    rows = []
    for host, node in result["nodes"].items():
        lines = [item["message"] for item in node["drift"]] or [node["message"] or "-"]
        name = node.get("node_name", host)
        rows.append([host if name == host else "%s (node %s)" % (host, name), node["status"], lines[0]])
        rows.extend(["", "", line] for line in lines[1:])
    text = render.table(["NODE", "STATUS", "WHAT"], rows)
    counts = result["summary"]
    words = {IN_SYNC: "in sync"}
    return "%s\n\ngpuprov status: %s" % (text, ", ".join(
        "%d %s" % (counts[s], words.get(s, s)) for s in (IN_SYNC, DRIFTED, UNREACHABLE, ERROR) if s in counts))


@click.command()
@options.inventory_options
@options.reading_options
@options.catalog_option
@options.output_option(["table", "json"],
                       help_text="table for people; json for tools (Ansible's progress then goes to stderr).")
@click.option("-f", "--forks", type=click.IntRange(1, 500), help="Nodes read at once (ansible-playbook --forks).")
@options.extra_vars_option
def status(inventory, limit, vault, reading, catalog_file, output, forks, extra_vars):
    """Check that every node is still what its plan says, changing nothing.

    Plans every node as `gpuprov plan` does, then reads each one over Ansible in check mode
    (the gpuprov.gpu.status playbook): GPU facts, the kubelet config, the host MPS daemon,
    and the boot-time MIG restore (unit and recorded state). Each node is then in sync,
    drifted - with every difference named: MIG mode, MIG instances missing or extra
    (profile@start), kubelet keys, MPS daemon down, boot restore unit missing or stale -
    unreachable, or in error (the read itself failed).

    A node comes back from a reboot without its MIG instances (and, on Hopper and later,
    without MIG mode) until gpuprov-mig-restore.service has run; status shows that as drift.

    `-o json` prints {"nodes": {HOST: {"status", "drift": [{"area", "gpu", "message"}],
    "message"}}, "summary": {STATUS: count}}; areas are hardware, mig-mode, mig-instances,
    kubelet, mps and boot-restore.

    Exit status: 0 every node in sync; 1 a node drifted, was unreachable or could not be
    read; 2 bad input.
    """
    plans = {}

    def check_plans():
        fleet = load_plans(inventory, limit, vault, extra_vars, catalog_file=catalog_file, reading=reading)
        if not fleet.nodes:
            fail_bad_input(["no GPU node in the inventory%s" % (" matching %r" % limit if limit else "")])
        plans["fleet"] = fleet

    # ansible-playbook starts up while the plans are checked, held before its first play, and is
    # stopped there when a plan fails; unless a vault password is asked for on the terminal,
    # which only one of the two may read at a time.
    plans_first = vault.prompts()
    if plans_first:
        check_plans()
    extra_args = vault.playbook_args()
    for item in extra_vars:
        extra_args += ["-e", item]
    # Each node's reading comes back in the run's summary: one task per node, no file written.
    variables = {"gpuprov_status_fail_on_drift": False}
    if catalog_file:
        # The node_plan action plans every host with the same models as this plan.
        variables["gpuprov_cli_catalog_file"] = os.path.abspath(catalog_file)
    try:
        rc, summary = run_playbook(PLAYBOOK, list(inventory), limit=limit, check=True, extra_vars=variables,
                                   forks=forks, extra_args=extra_args,
                                   stdout=sys.stderr if output == "json" else None,
                                   prepare=None if plans_first else check_plans)
    except FileNotFoundError as exc:
        if not plans_first:
            check_plans()  # a bad inventory is still told first
        fail_bad_input([str(exc)])
    fleet = plans["fleet"]
    nodes = collect(sorted(fleet.nodes), None, summary)
    for host, node in nodes.items():
        node["node_name"] = fleet.nodes[host].get("node_name", host)
    if rc != 0 and not (summary or {}).get("nodes"):
        render.echo("ansible-playbook exited with %d before any node was read" % rc, err=True)
    result = {"nodes": nodes, "summary": summarize(nodes)}
    if output == "json":
        render.echo(render.to_json(result))
    else:
        render.echo("")
        render.echo(status_table(result))
    in_sync = all(node["status"] == IN_SYNC for node in nodes.values())
    raise SystemExit(EXIT_OK if in_sync and nodes else EXIT_FAILED)
