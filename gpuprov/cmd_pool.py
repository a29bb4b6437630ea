"""`gpuprov pool`: where GPU capacity is free, and what fits there now."""
import json
import os

import click

from gpuprov import diagnose as diag
from gpuprov import pool as capacity
from gpuprov import options, render
from gpuprov.errors import EXIT_FAILED, fail_bad_input
from gpuprov.diagnose.live_cluster import ClusterError, add_live_dra, fetch_cluster
from gpuprov.diagnose.snapshot_loader import load_dra, read_json
from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import parse_decimal
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import workload_memory_mib


def load_snapshot_dir(directory):
    """Nodes, pods and optional facts/<node>.json of a snapshot folder (events are not needed)."""
    if not os.path.isdir(directory):
        raise diag.SnapshotError("%s: not a directory; --snapshot takes a folder holding nodes.json and pods.json"
                                 % directory)
    problems, parsed = [], {}
    for filename, parser in (("nodes.json", diag.parse_nodes), ("pods.json", diag.parse_pods)):
        try:
            parsed[filename] = parser(read_json(os.path.join(directory, filename), filename), filename)
        except diag.SnapshotError as error:
            problems.extend(error.problems)
    if problems:
        raise diag.SnapshotError(problems)
    facts, _, notes = diag.load_gpu_data(directory, parsed["nodes.json"])
    dra_devices, dra_claims, dra_notes = load_dra(directory)
    return diag.Snapshot(nodes=parsed["nodes.json"], pods=parsed["pods.json"], events=[], facts=facts,
                         notes=notes + dra_notes, source=directory, dra_devices=dra_devices, dra_claims=dra_claims)


def load_live(kubeconfig, context):
    nodes_doc, pods_doc, _ = fetch_cluster(kubeconfig, context)
    snapshot = diag.Snapshot(nodes=diag.parse_nodes(nodes_doc, "cluster nodes"),
                             pods=diag.parse_pods(pods_doc, "cluster pods"), events=[],
                             source="context %s" % context if context else "current kubeconfig context")
    add_live_dra(snapshot, kubeconfig, context)
    return snapshot


def _gib(value):
    return "-" if value is None else ("%g" % value)


def render_table(report):
    rows = [[row["node"], row["resource"], row["allocatable"], row["allocated"], row["free"], _gib(row["slot_gib"]),
             _gib(row["free_gib"]), row["sharing"], row["blocked"] or "-"] for row in report["nodes"]]
    lines = [render.table(["NODE", "RESOURCE", "ALLOCATABLE", "ALLOCATED", "FREE", "GiB/SLOT", "FREE GiB",
                           "SHARING", "BLOCKED"], rows)]
    if "fits" in report:
        fits = report["fits"]
        lines.append("%d place(s) where %s GiB (isolation %s) fits now" % (len(rows), _gib(fits["memory_gib"]),
                                                                       fits["isolation"]))
    for note in report["notes"]:
        lines.append("Note: %s" % render.escape(note))
    return "\n".join(lines)


@click.command("pool")
@options.trust_ansible_cfg_option
@click.option("--snapshot", "snapshot_dir", metavar="DIR",
              help="Folder with nodes.json and pods.json (kubectl get ... -o json), optional facts/<node>.json; "
                   "with DRA also resourceslices.json and resourceclaims.json.")
@click.option("--kubeconfig", metavar="FILE", help="Live mode: this kubeconfig (default $KUBECONFIG or ~/.kube/config).")
@click.option("--context", metavar="NAME", help="Live mode: kubeconfig context to use.")
@click.option("--fits", "fits_memory", metavar="SIZE",
              help="Only where a workload of this GPU memory fits now (20GiB, 20GB, or a bare number of GiB).")
@click.option("--isolation", type=click.Choice(["hard", "soft"]),
              help="With --fits: hard = a MIG instance or an unshared whole GPU; soft = any slot.")
@options.output_option(["table", "json"])
def pool(snapshot_dir, kubeconfig, context, fits_memory, isolation, output):
    """Show where GPU capacity is: per node and resource, allocatable, allocated, free,
    and the GPU memory each slot offers (GiB/SLOT) and all free slots together (FREE GiB).

    Reads the cluster through the kubernetes Python client, or a saved snapshot with
    --snapshot DIR. With --fits SIZE only the nodes and resources where one more workload
    of that size fits now are listed (cordoned and not-ready nodes never are).

    Exit status: 0 listed (with --fits: at least one place fits), 1 nothing fits or the
    cluster could not be read, 2 bad input.
    """
    problems = []
    need = None
    if fits_memory is not None:
        try:
            # The unit rules of `gpuprov fit` workloads: a bare number is GiB, 20GB is 10^9 bytes.
            try:
                size = parse_decimal(fits_memory.strip(" "))
            except ValueError:
                size = fits_memory
            need = workload_memory_mib(size)
        except ValueError as error:
            problems.append("--fits: %s" % error)
    if isolation and fits_memory is None:
        problems.append("--isolation: only means something with --fits SIZE")
    if snapshot_dir and (kubeconfig or context):
        problems.append("--snapshot reads a saved snapshot; --kubeconfig/--context read a live cluster: give one")
    if problems:
        fail_bad_input(problems, header="gpuprov pool: cannot start:")
    try:
        snapshot = load_snapshot_dir(snapshot_dir) if snapshot_dir else load_live(kubeconfig, context)
    except diag.SnapshotError as error:
        fail_bad_input(error.problems, header="gpuprov pool: cannot use this input:")
    except ClusterError as error:
        render.echo("gpuprov pool: %s" % error, err=True)
        raise SystemExit(EXIT_FAILED) from None
    report = capacity.pool(snapshot)
    if need is not None:
        report = capacity.fits(report, need, isolation)
    if output == "json":
        render.echo(json.dumps(report, indent=2))
    else:
        render.echo(render_table(report))
    if need is not None and not report["nodes"]:
        raise SystemExit(EXIT_FAILED)
