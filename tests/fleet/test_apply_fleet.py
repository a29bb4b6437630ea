"""`gpuprov apply` against faults, over real SSH on small test fleets.

Every test starts its own fleet of one to three simulated nodes (tests/fleet/fleet.py) and
runs the real CLI, `python -m gpuprov apply`, from the repository root (so its ansible.cfg
applies), with an inventory written here that declares each node's GPUs and sharing, plus
the fleet's connection-only inventory:

- a node whose GPUs differ from the inventory fails alone; the others converge;
- a node that dies during the run is reported unreachable, and converges once it is back;
- a failed canary stops the rollout before the next wave touches any other node;
- the dry run (--check --diff) leaves every file of every node as it was;
- a converged node whose boot-time MIG restore files were changed gets them back;
- with a fake cluster, a device-plugin pod's process holds the GPU: the MIG change succeeds
  only because gpuprov pauses the pod, and fails, naming the pod, for one it cannot pause.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
from test_fleet import FLEET_SKIP, fleet_test  # noqa: E402

sys.path.insert(0, str(fleetlib.FAKES_PYTHON))
import pynvml as fake_pynvml  # noqa: E402  (the fake, to read a node's GPU state)

REPO_ROOT = fleetlib.REPO_ROOT
APPLY_TIMEOUT_S = 900
NVML_STATE = fleetlib.FAKE_ROOT + "/nvml.json"
# What the fake tools write on reads as well, which the real ones do not have: the call log
# (one line per call, that is its job) and the empty "<state>.lock" files they take a flock
# on before reading their state. Nothing else on a node may change during a dry run.
DRY_RUN_EXCLUDED = {fleetlib.FAKE_ROOT + "/calls.jsonl"}
FAKE_LOCK_SUFFIX = ".lock"

MIG_BALANCED = {"strategy": "mig", "mig": {"config": "all-balanced"}}
TIME_SLICING = {"strategy": "time-slicing", "replicas": 4}
# NVIDIA's all-balanced layout of an H100-80GB: profile@start.
H100_BALANCED = ["1g.10gb@2", "1g.10gb@3", "2g.20gb@0", "3g.40gb@4"]
H100_BALANCED_ORDER = ["2g.20gb@0", "1g.10gb@2", "1g.10gb@3", "3g.40gb@4"]  # as the plan lists them
NUMA_KUBELET = {"cpu_manager_policy": "static", "topology_manager_policy": "single-numa-node",
                "reserved_system_cpus": "auto"}


def first_free_host(count):
    """First octet of `count` free consecutive addresses, from 127.0.0.151 (8 per xdist
    worker), apart from the ranges test_fleet.py starts at and the benchmarks' 201 and up."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = 151 + 8 * int(worker.lstrip("gw") or 0)
    for first in range(start, fleetlib.LAST_HOST_OCTET - count + 2):
        if not any(fleetlib.address_in_use("127.0.0.%d" % (first + i), fleetlib.SSH_PORT) for i in range(count)):
            return first
    pytest.skip("no %d free consecutive addresses 127.0.0.N:%d from .%d" % (count, fleetlib.SSH_PORT, start))


@contextmanager
def small_fleet(directory, nodes, hosts, cluster=None, group_vars=None, control_plane=None):
    """Start `nodes` (fleet specs) and write an inventory declaring `hosts` ({name: vars},
    and `group_vars` for the group all); yields (fleet, inventory arguments for gpuprov).
    `cluster`: a fleetlib.FleetCluster, or a function of the inventory's path that returns
    one. `control_plane`: a test control plane (tests/controlplane.py) the nodes register with.
    The fleet is always stopped."""
    if FLEET_SKIP:
        pytest.skip(FLEET_SKIP)
    specs = [fleetlib.node_spec_from_dict(raw, "nodes[%d]" % i) for i, raw in enumerate(nodes)]
    inventory = directory / "gpus.yml"
    content = {"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}
    if group_vars:
        content["all"]["vars"] = group_vars
    inventory.write_text(yaml.safe_dump(content, sort_keys=False))
    if callable(cluster):
        cluster = cluster(inventory)
    fleet = fleetlib.Fleet.create(directory / "fleet", specs, first_host=first_free_host(len(specs)), cluster=cluster,
                                  control_plane=control_plane.folder if control_plane is not None else None)
    fleet.up()
    try:
        yield fleet, ["-i", str(inventory), "-i", str(fleet.connection_inventory)]
    finally:
        fleet.down()


def apply_argv(inventories, *args):
    return [sys.executable, "-m", "gpuprov", "apply", "-q"] + list(inventories) + list(args)


def gpuprov_apply(inventories, *args, env=None):
    """Run `gpuprov apply -q` to the end; (exit status, stdout + stderr)."""
    proc = subprocess.run(apply_argv(inventories, *args), cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=APPLY_TIMEOUT_S, check=False, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def summary_lines(output):
    """{host: 'status detail'} from the SUMMARY block the progress callback prints last."""
    lines = output.split("SUMMARY", 1)[1].splitlines()[1:]
    found = {}
    for line in lines:
        words = line.split(None, 1)
        # The callback's lines end at the first that is not "  HOST STATUS ..." (gpuprov
        # apply adds "  not run (...)" after them).
        if not line.startswith("  ") or len(words) < 2 or line.startswith("  not run "):
            break
        found[words[0]] = words[1]
    return found


def progress_line(host, status, task):
    """A line the progress callback prints while the run goes on."""
    return "%-24s %-11s %s" % (host, status, task)


def nvml_bytes(node):
    return node.private_path(NVML_STATE).read_bytes()


def mig_layout(node):
    """{GPU index: (MIG mode on, sorted 'profile@start')} from the node's fake NVML state."""
    state = fake_pynvml.load_state(str(node.private_path(NVML_STATE)))

    def profile(gpu, instance):
        # NVML names profiles "MIG 1g.10gb"; the plan and nvidia-smi say "1g.10gb".
        return fake_pynvml._profile_by_id(state, gpu, instance["profile_id"])["name"].replace("MIG ", "", 1)

    return dict((gpu["index"], (bool(gpu["mig_current"]), sorted(
        "%s@%d" % (profile(gpu, gi), gi["placement"]["start"]) for gi in gpu["gpu_instances"])))
        for gpu in state["gpus"])


def rootfs_snapshot(node):
    """{path on the node: what is there} for everything under the node's private rootfs:
    ('dir', mode), ('link', target) or ('file', mode, sha256 of the content)."""
    root = node.rootfs
    snapshot = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            node_path = "/" + os.path.relpath(path, root)
            if node_path in DRY_RUN_EXCLUDED:
                continue
            info = os.lstat(path)
            if (os.path.dirname(node_path) == fleetlib.FAKE_ROOT and node_path.endswith(FAKE_LOCK_SUFFIX)
                    and os.path.isfile(path) and info.st_size == 0):
                continue
            if os.path.islink(path):
                snapshot[node_path] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                snapshot[node_path] = ("dir", oct(info.st_mode))
            else:
                with open(path, "rb") as handle:
                    snapshot[node_path] = ("file", oct(info.st_mode), hashlib.sha256(handle.read()).hexdigest())
    return snapshot


def snapshot_diff(before, after):
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


# ---------------------------------------------------------------------------------- tests


@fleet_test
def test_a_node_with_other_gpus_fails_alone_and_the_others_converge(tmp_path):
    nodes = [{"name": "h100-short", "gpus": [{"model": "H100-80GB", "count": 2}]},
             {"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]
    hosts = {"h100-short": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 4, "gpuprov_sharing": MIG_BALANCED},
             "h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        short = fleet.node("h100-short")
        untouched = nvml_bytes(short)

        # One wave for all; a third of the nodes may fail without stopping it.
        code, output = gpuprov_apply(inventories, "--waves", "100%", "--max-fail-percentage", "50")

        assert code == 1, output
        summary = summary_lines(output)
        assert summary["h100-short"].startswith("failed"), output
        assert ("h100-short: GPU hardware does not match the inventory: the inventory declares "
                "4x H100-80GB but the node has 2x H100-80GB") in summary["h100-short"]
        assert summary.get("h100", "").startswith("changed"), output
        # Time-slicing is the device plugin's business: nothing to do on the node itself.
        assert summary["t4"] == "unchanged    -", output
        assert "gpuprov apply: 1 changed, 1 failed, 1 unchanged" in output, output
        # The mismatched node was not touched; the other MIG node has the balanced layout.
        assert nvml_bytes(short) == untouched
        assert mig_layout(fleet.node("h100")) == {0: (True, H100_BALANCED)}
        assert mig_layout(fleet.node("t4")) == {0: (False, [])}


@fleet_test
def test_a_node_lost_mid_run_is_unreachable_and_converges_once_back(tmp_path):
    nodes = [{"name": "h100", "gpus": [{"model": "H100-80GB", "count": 2}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]
    hosts = {"h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2, "gpuprov_sharing": MIG_BALANCED},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        # Start the converge, and kill the node's sshd (and all it runs) as soon as the run
        # has changed something on it: its MIG mode is on, its layout not yet made.
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(apply_argv(inventories, "--waves", "100%", "--max-fail-percentage", "50"),
                                cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        killed = False
        try:
            for line in proc.stdout:
                lines.append(line)
                if not killed and line.split()[:2] == ["h100", "changed"]:
                    fleet.kill_node("h100")
                    killed = True
            proc.wait(timeout=APPLY_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        output = "".join(lines)

        assert killed, "the run never reported a change on h100:\n" + output
        assert proc.returncode == 1, output
        assert "UNREACHABLE" in output
        summary = summary_lines(output)
        assert summary["h100"].startswith("unreachable"), output
        assert not summary["t4"].startswith(("failed", "unreachable")), output

        fleet.start_node("h100")
        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output
        assert summary_lines(output)["h100"].startswith("changed"), output
        assert mig_layout(fleet.node("h100")) == {0: (True, H100_BALANCED), 1: (True, H100_BALANCED)}

        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output
        assert summary_lines(output) == {"h100": "unchanged    -", "t4": "unchanged    -"}, output
        assert "gpuprov apply: 2 unchanged" in output


@fleet_test
def test_a_failed_canary_stops_the_rollout_before_the_next_wave(tmp_path):
    nodes = [{"name": "canary", "gpus": [{"model": "H100-80GB", "count": 2}]},
             {"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]
    hosts = {"canary": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 4, "gpuprov_sharing": MIG_BALANCED},
             "h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING,
                    "gpuprov_kubelet": NUMA_KUBELET}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        later = [fleet.node("h100"), fleet.node("t4")]
        nvml_before = dict((node.name, nvml_bytes(node)) for node in later)
        files_before = dict((node.name, rootfs_snapshot(node)) for node in later)

        code, output = gpuprov_apply(inventories, "--waves", "1,100%")

        assert code == 1, output
        assert "the inventory declares 4x H100-80GB but the node has 2x H100-80GB" in output
        assert "not run (the rollout stopped before their wave): h100, t4" in output
        assert set(summary_lines(output)) == {"canary"}, output
        for node in later:
            assert nvml_bytes(node) == nvml_before[node.name], node.name
            assert snapshot_diff(files_before[node.name], rootfs_snapshot(node)) == [], node.name


@fleet_test
def test_a_node_of_the_last_wave_that_does_not_match_stops_the_run_before_the_canary_changes(tmp_path):
    """site.yml reads every node before its first wave: a node the last wave would reach is
    found wrong before the canary is touched, and no node changes."""
    nodes = [{"name": "canary", "gpus": [{"model": "H100-80GB", "count": 1}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]},
             {"name": "short", "gpus": [{"model": "H100-80GB", "count": 2}]}]
    hosts = {"canary": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING,
                    "gpuprov_kubelet": NUMA_KUBELET},
             "short": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 4, "gpuprov_sharing": MIG_BALANCED}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        before = dict((node.name, (nvml_bytes(node), rootfs_snapshot(node))) for node in fleet.nodes)

        code, output = gpuprov_apply(inventories, "--waves", "1,1,100%")

        assert code == 1, output
        assert "the inventory declares 4x H100-80GB but the node has 2x H100-80GB" in output
        assert "not run (the rollout stopped before their wave): canary, t4" in output, output
        assert set(summary_lines(output)) == {"short"}, output
        for node in fleet.nodes:
            nvml, files = before[node.name]
            assert nvml_bytes(node) == nvml, node.name
            assert snapshot_diff(files, rootfs_snapshot(node)) == [], node.name


@fleet_test
def test_the_dry_run_changes_no_file_on_any_node(tmp_path):
    nodes = [{"name": "h100", "gpus": [{"model": "H100-80GB", "count": 2}]},
             {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]
    hosts = {"h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2, "gpuprov_sharing": MIG_BALANCED,
                      "gpuprov_kubelet": NUMA_KUBELET},
             "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "gpuprov_sharing": TIME_SLICING,
                    "gpuprov_kubelet": NUMA_KUBELET}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        before = dict((node.name, rootfs_snapshot(node)) for node in fleet.nodes)
        for snapshot in before.values():
            assert {"/var/lib/kubelet/config.yaml", "/var/lib/kubelet/cpu_manager_state", NVML_STATE,
                    fleetlib.FAKE_ROOT + "/systemd.json", "/etc/systemd/system"} <= set(snapshot)

        code, output = gpuprov_apply(inventories, "--waves", "100%", "--check", "--diff")

        assert code == 0, output
        for node in fleet.nodes:
            assert snapshot_diff(before[node.name], rootfs_snapshot(node)) == [], node.name
        # Per node, what would change.
        assert progress_line("h100", "would change", "Enable MIG mode: GPU 0,1: MIG enabled") in output, output
        # MIG mode is not really enabled in check mode; a note names the layout to come.
        notes = [line for line in output.splitlines() if progress_line("h100", "note", "") in line]
        for gpu in (0, 1):
            assert any("GPU %d: %s" % (gpu, " ".join(H100_BALANCED_ORDER)) in note for note in notes), output
        for name in ("h100", "t4"):
            assert progress_line(name, "would change", "Write the kubelet config") in output, output
        summary = summary_lines(output)
        assert summary["h100"].startswith("would change"), output
        assert "Enable MIG mode" in summary["h100"] and "Write the kubelet config" in summary["h100"]
        assert summary["t4"].startswith("would change") and "Enable MIG mode" not in summary["t4"], output
        assert "gpuprov apply --check: 2 would change" in output


@fleet_test
def test_a_converged_node_gets_a_changed_boot_restore_file_back(tmp_path):
    nodes = [{"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]}]
    hosts = {"h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        node = fleet.node("h100")
        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output
        unit = node.private_path("/etc/systemd/system/gpuprov-mig-restore.service")
        program = node.private_path("/usr/local/libexec/gpuprov/gpuprov-mig-restore")
        installed = unit.read_bytes()

        # The MIG layout is as planned, but the unit file was edited and the program lost
        # its execute bit: the next run must notice and put both back.
        unit.write_text(unit.read_text().replace("--state-file", "--state-file-edited"))
        program.chmod(0o644)
        code, output = gpuprov_apply(inventories, "--waves", "100%")

        assert code == 0, output
        # Both files, and only they, written again by the restore's install step.
        assert progress_line("h100", "changed", "Install the boot-time MIG restore's directories, code, "
                             "program, state file and unit: files: gpuprov-mig-restore, "
                             "gpuprov-mig-restore.service") in output, output
        assert "Enable MIG mode" not in output and "Create and destroy GPU instances" not in output
        assert unit.read_bytes() == installed
        assert program.stat().st_mode & 0o777 == 0o755

        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output
        assert summary_lines(output) == {"h100": "unchanged    -"}, output


def gpuprov_status(inventories):
    """`gpuprov status -o json`: (exit status, {host: {status, drift, message}})."""
    import json
    proc = subprocess.run([sys.executable, "-m", "gpuprov", "status", "-o", "json"] + list(inventories),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=APPLY_TIMEOUT_S, check=False)
    return proc.returncode, json.loads(proc.stdout)["nodes"] if proc.stdout.strip() else proc.stderr


@fleet_test
def test_a_node_as_planned_ends_after_one_read_and_status_names_what_drifted(tmp_path, monkeypatch):
    from gpuprov.runner import run_playbook

    nodes = [{"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]}]
    hosts = {"h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED,
                      "gpuprov_kubelet": NUMA_KUBELET}}
    with small_fleet(tmp_path, nodes, hosts) as (fleet, inventories):
        node = fleet.node("h100")
        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output

        # The re-run as `gpuprov apply` runs it, with the progress callback's per-node counts.
        monkeypatch.chdir(REPO_ROOT)
        with open(os.devnull, "w") as sink:
            rc, summary = run_playbook("gpuprov.gpu.site", inventories[1::2], stdout=sink,
                                       extra_vars={"gpuprov_waves": ["100%"]})
        assert rc == 0 and summary["nodes"]["h100"]["status"] == "unchanged", summary
        # The one read; the meta task after it ends the host on the controller.
        assert summary["nodes"]["h100"]["ok"] == 1, summary

        code, status = gpuprov_status(inventories)
        assert code == 0 and status["h100"]["status"] == "in-sync", status

        # Kubelet config edited by hand: status names it, and the next converge fixes it
        # (the fast path does not hide it).
        config = node.private_path("/var/lib/kubelet/config.yaml")
        config.write_text(config.read_text().replace("cpuManagerPolicy: static", "cpuManagerPolicy: none"))
        code, status = gpuprov_status(inventories)
        assert code == 1 and status["h100"]["status"] == "drifted", status
        assert [item["area"] for item in status["h100"]["drift"]] == ["kubelet"], status
        assert "cpuManagerPolicy" in status["h100"]["drift"][0]["message"]

        code, output = gpuprov_apply(inventories, "--waves", "100%")
        assert code == 0, output
        assert progress_line("h100", "changed", "Write the kubelet config") in output, output
        assert "cpuManagerPolicy: static" in config.read_text()
        code, status = gpuprov_status(inventories)
        assert code == 0 and status["h100"]["status"] == "in-sync", status


# -------------------------------------------------------- GPU holders with a fake cluster

A100_ALL_1G = {"strategy": "mig", "mig": {"config": "all-1g.10gb"}}
PAUSE_LABEL = "gpuprov.io/gpu-operands"
# The cluster side polls every second instead of every 5-10 (the stub cluster has no clock).
FAST_CLUSTER_POLLS = {"gpu_mig_poll_interval": 1, "gpu_device_plugin_wait_delay": 1, "gpuprov_drain_retry_delay": 1,
                      "gpu_mig_operand_timeout": 5, "gpu_mig_resources_timeout": 5, "gpu_device_plugin_wait_timeout": 5}


def planned_devices(inventory):
    """{host: resources} the plan of each host advertises: what the fake device plugin
    offers when it starts (it does not read the node's GPUs)."""
    from gpuprov.planning import plan_inventory

    return dict((host, plan["resources"]) for host, plan in plan_inventory([str(inventory)]).result["nodes"].items())


def cluster_steps(fleet):
    """The cluster-side steps of the run in order: drain/uncordon and the pause label."""
    steps = []
    if not fleet.cluster_call_log.exists():
        return steps
    for line in fleet.cluster_call_log.read_text().splitlines():
        call = json.loads(line)
        params = call.get("params") or {}
        if call["tool"] == "kubernetes.core.k8s_drain":
            steps.append(params["state"])
        elif call["tool"] == "kubernetes.core.k8s" and params.get("definition", {}).get("kind") == "Node":
            labels = params["definition"]["metadata"].get("labels") or {}
            if PAUSE_LABEL in labels:
                steps.append("label %s" % labels[PAUSE_LABEL])
    return steps


def node_systemd(node):
    return json.loads(node.private_path(fleetlib.FAKE_ROOT + "/systemd.json").read_text())


@fleet_test
def test_a_device_plugin_pod_holding_the_gpu_is_paused_around_the_mig_change(tmp_path):
    nodes = [{"name": "a100", "gpus": [{"model": "A100-80GB", "count": 1}]}]
    hosts = {"a100": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": A100_ALL_1G}}
    cluster = lambda inventory: fleetlib.FleetCluster(devices=planned_devices(inventory))  # noqa: E731
    with small_fleet(tmp_path, nodes, hosts, cluster=cluster, group_vars=FAST_CLUSTER_POLLS) as (fleet, inventories):
        node = fleet.node("a100")
        pod = fleet.cluster.pod_key("a100")
        holder = fleet.cluster_state()["pods"][pod]["holder_pid"]
        assert fleetlib.pid_alive(holder)
        holders = fake_pynvml.load_state(str(node.private_path(NVML_STATE)))["holders"]
        assert {"name": "pod " + pod, "pid": holder} in holders
        # Drained through the kubeconfig, not by opt-in.
        connection = yaml.safe_load(fleet.connection_inventory.read_text())
        assert connection["all"]["vars"] == {"gpuprov_kubeconfig": str(fleet.kubeconfig)}
        assert "gpuprov_allow_undrained" not in connection["all"]["hosts"]["a100"]

        code, output = gpuprov_apply(inventories, "--waves", "100%", env=fleet.controller_env())

        assert code == 0, output
        summary = summary_lines(output)
        assert summary["a100"].startswith("changed") and summary["localhost"].startswith("changed"), output
        assert mig_layout(node) == {0: (True, sorted("1g.10gb@%d" % start for start in range(7)))}
        # The pause took the pod off the node and the kubelet stopped its process; the label is
        # gone and the node, cordoned by this run, is schedulable again.
        assert not fleetlib.pid_alive(holder)
        state = fleet.cluster_state()
        assert pod not in state["pods"]
        assert PAUSE_LABEL not in state["nodes"]["a100"]["labels"]
        assert not state["nodes"]["a100"].get("unschedulable")
        # The drain cordons first, so that any failure after it uncordons (node_drain).
        assert cluster_steps(fleet) == ["cordon", "drain", "label paused", "label None", "uncordon"]
        assert node_systemd(node)["units"]["nvidia-persistenced.service"]["active"]

        # As planned now: nothing is drained or paused again.
        fleet.cluster_call_log.unlink()
        code, output = gpuprov_apply(inventories, "--waves", "100%", env=fleet.controller_env())
        assert code == 0, output
        # The cluster play (localhost) found the device plugin deployed as planned as well.
        assert summary_lines(output) == {"a100": "unchanged    -", "localhost": "unchanged    -"}, output
        assert cluster_steps(fleet) == []


@fleet_test
def test_a_gpu_pod_gpuprov_cannot_pause_fails_the_mig_change_and_is_named(tmp_path):
    # A GPU DaemonSet gpuprov did not deploy: no pause affinity, not the device plugin's release.
    foreign = lambda inventory: fleetlib.FleetCluster(  # noqa: E731
        pod_namespace="gpu-monitoring", pod_daemonset="dcgm-exporter", pod_instance="dcgm-exporter",
        pause_affinity=False, devices=planned_devices(inventory))
    nodes = [{"name": "a100", "gpus": [{"model": "A100-80GB", "count": 1}]}]
    hosts = {"a100": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": A100_ALL_1G}}
    with small_fleet(tmp_path, nodes, hosts, cluster=foreign, group_vars=FAST_CLUSTER_POLLS) as (fleet, inventories):
        node = fleet.node("a100")
        pod = fleet.cluster.pod_key("a100")
        assert pod.startswith("gpu-monitoring/dcgm-exporter-")
        holder = fleet.cluster_state()["pods"][pod]["holder_pid"]

        code, output = gpuprov_apply(inventories, "--waves", "100%", env=fleet.controller_env())

        assert code == 1, output
        assert summary_lines(output)["a100"].startswith("failed"), output
        # nvidia-smi -r's words for a held GPU (NVML's own are "In use by another client"),
        # with the holder the fake names: the pod.
        assert "is currently in use by another process (pod %s (pid %d))" % (pod, holder) in output, output
        # The driver took the mode change as pending and the reset was refused, as the module
        # says: MIG is not on, no instance was made.
        assert "The MIG mode change is still pending" in output, output
        gpu = fake_pynvml.load_state(str(node.private_path(NVML_STATE)))["gpus"][0]
        assert (gpu["mig_current"], gpu["mig_pending"], gpu["gpu_instances"]) == (False, True, []), gpu
        # The pod was paused like any other (its affinity ignores the label) and still runs;
        # what gpuprov stopped runs again, and the pause label is gone. The node stays
        # cordoned: its GPU is not as planned.
        assert fleetlib.pid_alive(holder)
        state = fleet.cluster_state()
        assert pod in state["pods"]
        assert PAUSE_LABEL not in state["nodes"]["a100"]["labels"]
        assert cluster_steps(fleet) == ["cordon", "drain", "label paused", "label None"]
        assert state["nodes"]["a100"]["unschedulable"] is True
        assert node_systemd(node)["units"]["nvidia-persistenced.service"]["active"]
        # ... and marked as cordoned by gpuprov, so that the next run does not take it for a
        # node somebody else cordoned.
        assert state["nodes"]["a100"]["annotations"] == {"gpuprov.io/cordoned-by": "gpuprov"}

        # The operator removes that DaemonSet (its pod's process ends); the next run finishes
        # the pending change and uncordons the node.
        os.kill(holder, signal.SIGTERM)
        del state["pods"][pod]
        fleet.cluster_state_file.write_text(json.dumps(state))
        code, output = gpuprov_apply(inventories, "--waves", "100%", env=fleet.controller_env())
        assert code == 0, output
        assert mig_layout(node)[0][0] is True
        state = fleet.cluster_state()
        assert state["nodes"]["a100"]["unschedulable"] is False
        assert "gpuprov.io/cordoned-by" not in state["nodes"]["a100"]["annotations"]


@fleet_test
@pytest.mark.control_plane
def test_a_node_failing_in_its_wave_leaves_its_siblings_converged_and_uncordoned(tmp_path, cluster):
    """Two nodes in one wave on a real control plane. Both change MIG; the A100's device plugin
    then advertises other devices than its plan, so the A100 fails its wait for the planned
    resources; the H100 beside it, at the same step, must still keep its MIG state and be
    uncordoned, not be left drained when the play stops for the failure (max_fail_percentage 0).
    The A100 stays cordoned and marked, and the summary says so."""
    import cluster_objects as objects
    from controlplane import wait_for
    from gpuprov.planning import plan_inventory

    nodes = [{"name": "a100", "gpus": [{"model": "A100-80GB", "count": 1}]},
             {"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]}]
    hosts = {"a100": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": A100_ALL_1G},
             "h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG_BALANCED}}
    with small_fleet(tmp_path, nodes, hosts, control_plane=cluster) as (fleet, inventories):
        plans = plan_inventory([inventories[1]]).result
        # The A100's plugin advertises whole GPUs whatever its MIG state (a plugin with the
        # wrong config, say); the H100's reads its node's NVML.
        cluster.update_node("a100", plugin={"devices": {"nvidia.com/gpu": 1}})
        # What the cluster side deploys: every planned config in the chart's ConfigMap and each
        # node's label naming its config; the chart's DaemonSets with the pause affinity.
        for manifest in [objects.namespace(objects.PLUGIN_NAMESPACE),
                         objects.device_plugin_configmap(dict(
                             (name, yaml.safe_dump(config)) for name, config in plans["device_plugin_configs"].items())),
                         *objects.device_plugin_daemonsets(default_config="exclusive")]:
            cluster.create(manifest)
        for host, plan in plans["nodes"].items():
            cluster.core().patch_node(host, {"metadata": {"labels": {
                "nvidia.com/device-plugin.config": plan["device_plugin"]["config_name"]}}})
        wait_for(lambda: len([p for p in cluster.core().list_pod_for_all_namespaces().items
                              if p.status.phase == "Running"
                              and all(c.ready for c in p.status.container_statuses or [])]) == 4,
                 what="the plugin and GFD pods on both nodes")

        code, output = gpuprov_apply(inventories, "--waves", "100%", "--kubeconfig", cluster.kubeconfig,
                                     "-e", json.dumps(dict(FAST_CLUSTER_POLLS, gpuprov_cluster_side=False,
                                                           gpu_mig_operand_timeout=60, gpu_mig_resources_timeout=10)),
                                     env=fleet.controller_env())

        assert code == 1, output
        assert "a100: not converged: " in output, output
        assert "allocatable nvidia.com/mig-1g.10gb is 0, the plan advertises 7" in output, output
        assert "The node stays cordoned (gpuprov.io/cordoned-by=gpuprov) until a run converges it." in output
        assert summary_lines(output)["h100"].startswith("changed"), output
        h100 = cluster.core().read_node("h100")
        assert mig_layout(fleet.node("h100")) == {0: (True, H100_BALANCED)}
        assert not h100.spec.unschedulable and "gpuprov.io/cordoned-by" not in (h100.metadata.annotations or {}), output
        assert PAUSE_LABEL not in h100.metadata.labels
        # The new plugin pod advertises the new MIG devices, read from the node's NVML: the plan's;
        # the whole GPU the old one advertised stays in capacity at 0, as the kubelet keeps it.
        assert dict((k, v) for k, v in h100.status.allocatable.items() if k.startswith("nvidia.com/")) == dict(
            {"nvidia.com/gpu": "0"}, **dict((k, str(v)) for k, v in plans["nodes"]["h100"]["resources"].items()))
        a100 = cluster.core().read_node("a100")
        assert a100.spec.unschedulable and a100.metadata.annotations["gpuprov.io/cordoned-by"] == "gpuprov"
