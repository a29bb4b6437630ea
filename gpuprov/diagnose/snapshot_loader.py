"""Loading a snapshot directory (nodes.json, pods.json, events.json, facts/, utilization/)."""

import csv
import os

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files

from gpuprov.diagnose.dra_objects import parse_resource_claims, parse_resource_slices
from gpuprov.diagnose.gpu_facts import parse_gpu_facts
from gpuprov.diagnose.kubernetes_objects import parse_events, parse_nodes, parse_pods
from gpuprov.diagnose.snapshot import Snapshot, SnapshotError
from gpuprov.diagnose.utilization import UTILIZATION_FIELDS, parse_utilization_csv


def read_json(path, label):
    """JSON with the bounds of every input file (size, nesting, UTF-8, no NaN/Infinity)."""
    if not os.path.lexists(path):
        raise SnapshotError("%s: missing" % label)
    if os.path.isdir(path):
        raise SnapshotError("%s: is a directory, expected a JSON file" % label)
    try:
        text = safe_files.read_text(path, max_bytes=safe_files.SNAPSHOT_MAX_BYTES)
        return safe_files.parse_json(text, label)
    except safe_files.FileInputError as error:
        raise SnapshotError("%s: %s" % (label, error.reason)) from None


def _read_text(path, label):
    try:
        return safe_files.read_text(path, max_bytes=safe_files.SNAPSHOT_MAX_BYTES)
    except safe_files.FileInputError as error:
        raise SnapshotError("%s: %s" % (label, error.reason)) from None


def _node_files(directory, extension):
    """{node: path} for DIR/<node><extension> (and DIR/<node> when extension is .json)."""
    files = {}
    if not os.path.isdir(directory):
        return files
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if not os.path.isfile(path) or entry.startswith("."):
            continue
        if entry.endswith(extension):
            files[entry[: -len(extension)]] = path
        elif extension == ".json" and "." not in entry:
            # `ansible --tree DIR` names each file after the host, with no extension.
            files.setdefault(entry, path)
    return files


def load_gpu_data(directory, nodes, label_prefix=""):
    """Facts and utilisation for `nodes` from DIR/facts/ and DIR/utilization[/].

    Both are optional. Returns (facts, utilization, notes); a file that is present but
    malformed raises SnapshotError, a file for a node the snapshot does not know is noted
    and ignored.
    """
    known = {node.name for node in nodes}
    gpu_nodes = [node.name for node in nodes if node.is_gpu_node]
    facts, utilization, notes = {}, {}, []
    problems = []

    def per_node(folder, suffix, parse):
        """parse(path, label) for each DIR/<folder>/<node><suffix> of a known node."""
        found = {}
        for node_name, path in _node_files(os.path.join(directory, folder), suffix).items():
            label = label_prefix + os.path.relpath(path, directory)
            if node_name not in known:
                notes.append("%s: no node %s in the snapshot; ignored" % (label, node_name))
                continue
            try:
                value = parse(path, label)
            except SnapshotError as error:
                problems.extend(error.problems)
                continue
            found[node_name] = value
        return found

    # A facts file listing no GPU says nothing about the node: leave the node out.
    facts.update((node, gpus) for node, gpus in per_node(
        "facts", ".json", lambda path, label: parse_gpu_facts(read_json(path, label), label, notes)).items() if gpus)
    utilization.update(per_node("utilization", ".csv",
                                lambda path, label: parse_utilization_csv(_read_text(path, label), label, notes=notes)))

    single = os.path.join(directory, "utilization.csv")
    if os.path.isfile(single):
        label = label_prefix + "utilization.csv"
        text = _read_text(single, label)
        first = next((line for line in text.splitlines() if line.strip()), "")
        columns = len(next(csv.reader([first], skipinitialspace=True), [])) if first else 0
        try:
            if columns == len(UTILIZATION_FIELDS) + 1:
                for node_name, samples in parse_utilization_csv(text, label, with_node=True, notes=notes).items():
                    if node_name not in known:
                        notes.append("%s: no node %s in the snapshot; its rows are ignored" % (label, node_name))
                        continue
                    utilization.setdefault(node_name, []).extend(samples)
            elif columns == len(UTILIZATION_FIELDS) and len(gpu_nodes) == 1:
                utilization.setdefault(gpu_nodes[0], []).extend(parse_utilization_csv(text, label, notes=notes))
            elif columns == len(UTILIZATION_FIELDS):
                problems.append("%s: rows have no node column but the snapshot has %d GPU nodes; put each node's "
                                "CSV in utilization/<node>.csv, or add the node name as a first column"
                                % (label, len(gpu_nodes)))
            elif first:
                parse_utilization_csv(text, label)   # reports the bad field count with its line
        except SnapshotError as error:
            problems.extend(error.problems)
    if problems:
        raise SnapshotError(problems)
    return facts, utilization, notes


DRA_FILES = (("resourceslices.json", "resourceslices"), ("resourceclaims.json", "resourceclaims -A"))


def load_dra(directory):
    """(devices, claims, notes) from DIR/resourceslices.json and DIR/resourceclaims.json.

    Both optional, together: (None, None, []) when neither is there (a cluster without DRA, or a
    snapshot taken without them); one without the other is an error, since devices without
    claims would all look free.
    """
    present = [name for name, _kind in DRA_FILES if os.path.lexists(os.path.join(directory, name))]
    if not present:
        return None, None, []
    if len(present) == 1:
        missing, kind = [(n, k) for n, k in DRA_FILES if n not in present][0]
        raise SnapshotError("%s: missing beside %s (DRA devices without their claims would all look free); create "
                            "it with `kubectl get %s -o json > %s`"
                            % (missing, present[0], kind, os.path.join(directory, missing)))
    problems, devices, claims, notes = [], None, None, []
    try:
        devices, notes = parse_resource_slices(read_json(os.path.join(directory, "resourceslices.json"),
                                                          "resourceslices.json"))
    except SnapshotError as error:
        problems.extend(error.problems)
    try:
        claims = parse_resource_claims(read_json(os.path.join(directory, "resourceclaims.json"),
                                                  "resourceclaims.json"))
    except SnapshotError as error:
        problems.extend(error.problems)
    if problems:
        raise SnapshotError(problems)
    return devices, claims, notes


def load_snapshot(directory):
    """Read a snapshot directory; raise SnapshotError naming every bad file and field."""
    if not os.path.isdir(directory):
        raise SnapshotError("%s: not a directory; --snapshot takes a folder holding nodes.json, pods.json and "
                            "events.json" % directory)
    problems = []
    parsed = {}
    for filename, parser in (("nodes.json", parse_nodes), ("pods.json", parse_pods), ("events.json", parse_events)):
        path = os.path.join(directory, filename)
        try:
            parsed[filename] = parser(read_json(path, filename), filename)
        except SnapshotError as error:
            if error.problems and error.problems[0] == "%s: missing" % filename:
                kind = {"nodes.json": "nodes", "pods.json": "pods -A", "events.json": "events -A"}[filename]
                error.problems[0] += "; create it with `kubectl get %s -o json > %s`" % (kind, path)
            problems.extend(error.problems)
    if problems:
        raise SnapshotError(problems)
    nodes = parsed["nodes.json"]
    facts, utilization, notes = load_gpu_data(directory, nodes)
    dra_devices, dra_claims, dra_notes = load_dra(directory)
    return Snapshot(nodes=nodes, pods=parsed["pods.json"], events=parsed["events.json"],
                    facts=facts, utilization=utilization, notes=notes + dra_notes, source=directory,
                    dra_devices=dra_devices, dra_claims=dra_claims)
