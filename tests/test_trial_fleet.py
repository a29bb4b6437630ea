"""`gpuprov trial` end to end: a real Prometheus, the SSH fleet with its fake cluster, and a
simulated inference node whose latency grows with the replicas its device-plugin config gives.

One fleet (the canary, one A100-80GB, exclusive; another node, one T4 time-sliced x2), one
Prometheus (1 s scrapes) and the simulated workloads serve the module. The canary's device
plugin advertises what its config gives (FleetCluster physical_devices), and the simulation
reads the config the node's label names, so only the trial's own converge changes what the
workloads see. Every test starts and ends with the canary as its inventory plans it:

- the trial finds the density that keeps the SLO, puts the node there, writes the host_vars
  snippet, and its HTML report renders in Chromium;
- an SLO no step meets puts the node back where it started, and fit proposes MIG;
- a step whose pods leave too little GPU memory fails on memory, before its latency is read;
- Ctrl-C in the middle of a window puts the node back;
- a Prometheus that goes away in the middle of a trial: the node is put back, the error named.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from testlib import REPO

# The simulated vLLM servers render their metrics with prometheus_client (the dev extras).
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install .[dev])")
sys.path.insert(0, os.path.join(REPO, "tests", "fleet"))
sys.path.insert(0, os.path.join(REPO, "tests"))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
import inference_server  # noqa: E402
import prometheus_harness  # noqa: E402
from test_fleet import FLEET_SKIP  # noqa: E402
from test_html_report import CHROMIUM, dump_dom  # noqa: E402

pytestmark = [pytest.mark.fleet,
              pytest.mark.skipif(FLEET_SKIP is not None, reason=FLEET_SKIP or ""),
              pytest.mark.skipif(prometheus_harness.MISSING is not None, reason=prometheus_harness.MISSING or "")]

CANARY, OTHER = "canary", "other"
A100_MIB = 81920
CONFIG_LABEL = "nvidia.com/device-plugin.config"
TRIAL_TIMEOUT_S = 300
WINDOW = "5s"
# The cluster side polls every second (the stub cluster has no clock); NFD is not what these
# tests are about, so the cluster side leaves it out.
FAST = {"gpu_mig_poll_interval": 1, "gpu_device_plugin_wait_delay": 1, "gpuprov_drain_retry_delay": 1,
        "gpu_device_plugin_wait_timeout": 10, "gpu_device_plugin_nfd_enabled": False}
SPREAD = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5)


def ttft(base):
    """Time to first token grows with the pods sharing the GPU: base x replicas, spread."""
    return lambda replicas: [base * replicas * f for f in SPREAD]


def free_first_host(count):
    """Addresses 127.0.0.191-200 (2 per xdist worker), apart from the other fleet tests' ranges."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = 191 + 2 * int(worker.lstrip("gw") or 0)
    for first in range(start, 201 - count):
        if not any(fleetlib.address_in_use("127.0.0.%d" % (first + i), fleetlib.SSH_PORT) for i in range(count)):
            return first
    pytest.skip("no %d free consecutive addresses 127.0.0.N:%d from .%d" % (count, fleetlib.SSH_PORT, start))


class Lab:
    def __init__(self, directory):
        self.directory = directory
        self.fleet = self.prometheus = None
        self.nodes = []

    @property
    def inventories(self):
        return ["-i", str(self.inventory), "-i", str(self.fleet.connection_inventory)]

    def cluster_view(self):
        """What the trial may change, per node: its labels, what it advertises, its config."""
        state = self.fleet.cluster_state()
        view = {}
        for name in (CANARY, OTHER):
            node = state["nodes"][name]
            view[name] = {"labels": node["labels"], "allocatable": node["allocatable"],
                          "config": self.fleet.node_device_plugin_config(name),
                          "unschedulable": bool(node.get("unschedulable"))}
        return view

    def trial_argv(self, *args, prometheus=None):
        return [sys.executable, "-m", "gpuprov", "trial"] + self.inventories + [
            "--node", CANARY, "--window", WINDOW, "--prometheus", (prometheus or self.prometheus).url] + list(args)

    def trial(self, *args, prometheus=None):
        started = time.monotonic()
        proc = subprocess.run(self.trial_argv(*args, prometheus=prometheus), cwd=REPO, capture_output=True,
                              text=True, timeout=TRIAL_TIMEOUT_S, env=self.fleet.controller_env(), check=False)
        return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started

    def apply(self, *args):
        proc = subprocess.run([sys.executable, "-m", "gpuprov", "apply", "-q"] + self.inventories + list(args),
                              cwd=REPO, capture_output=True, text=True, timeout=TRIAL_TIMEOUT_S,
                              env=self.fleet.controller_env(), check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trial")
    lab = Lab(directory)
    specs = [fleetlib.node_spec_from_dict({"name": CANARY, "gpus": [{"model": "A100-80GB", "count": 1}]}, "nodes[0]"),
             fleetlib.node_spec_from_dict({"name": OTHER, "gpus": [{"model": "T4", "count": 1}]}, "nodes[1]")]
    cluster = fleetlib.FleetCluster(physical_devices={CANARY: {"nvidia.com/gpu": 1}, OTHER: {"nvidia.com/gpu": 1}})
    (directory / "inventory").mkdir()
    lab.inventory = directory / "inventory" / "gpus.yml"
    lab.inventory.write_text(yaml.safe_dump({"all": {"vars": FAST, "children": {"gpu_nodes": {"hosts": {
        CANARY: {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": {"strategy": "exclusive"}},
        OTHER: {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1,
                "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 2}}}}}}}, sort_keys=False))
    lab.fleet = fleetlib.Fleet.create(directory / "fleet", specs, first_host=free_first_host(2), cluster=cluster)
    lab.fleet.up()
    try:
        lab.apply("--waves", "100%")
        lab.chat = inference_server.Workload("ml", "org/chat-8b", ttft(0.012), ttft(0.15), 8 * 1024)
        lab.code = inference_server.Workload("ml", "org/code-3b", ttft(0.008), ttft(0.10), 8 * 1024)
        canary_gpus = [(0, "GPU-6c1a0a25-0000-4000-8000-00000000c0de", A100_MIB)]
        lab.nodes = [
            inference_server.SimulatedNode(CANARY, [lab.chat, lab.code], canary_gpus,
                                           inference_server.fleet_replicas(lab.fleet, CANARY)).start(),
            # Another node's workload, far slower: the trial must not count it.
            inference_server.SimulatedNode(OTHER, [inference_server.Workload("ml", "org/big-70b", ttft(0.5), ttft(5.0),
                                                                             12 * 1024)],
                                           [(0, "GPU-0b7e0000-0000-4000-8000-0000000007e4", 15360)],
                                           inference_server.fleet_replicas(lab.fleet, OTHER)).start()]
        targets = [t for node in lab.nodes for t in node.targets()]
        lab.targets = targets
        lab.prometheus = prometheus_harness.Prometheus(targets).start()
        lab.prometheus.wait_for_samples("vllm:time_to_first_token_seconds_count", 6)
        lab.start_view = lab.cluster_view()
        assert lab.start_view[CANARY]["labels"][CONFIG_LABEL] == "exclusive"
        assert lab.start_view[CANARY]["allocatable"] == {"nvidia.com/gpu": "1"}
        yield lab
    finally:
        if lab.prometheus:
            lab.prometheus.stop()
        for node in lab.nodes:
            node.stop()
        lab.fleet.down()


@pytest.fixture
def canary_as_planned(lab):
    """Every test starts with the canary as its inventory plans it, and must leave it so."""
    assert lab.cluster_view() == lab.start_view
    yield lab
    assert lab.cluster_view() == lab.start_view


def as_json(stdout):
    return json.loads(stdout)


def steps_of(data):
    return dict((s["step"], s) for s in data["steps"])


# ---------------------------------------------------------------------------------- tests


def test_the_trial_finds_the_density_within_the_slo_and_stays_there(lab, canary_as_planned, tmp_path):
    # chat's p99 TTFT: 18 ms x replicas; 100 ms holds up to 4 replicas, not at 8.
    snippet, page = tmp_path / "canary.yml", tmp_path / "trial.html"
    code, out, err, seconds = lab.trial("--slo", "ttft:p99<=100ms", "--steps", "2,4,8", "-o", "json",
                                        "-w", str(snippet), "--report", str(page))
    assert code == 0, out + err
    data = as_json(out)
    steps = steps_of(data)
    assert data["outcome"] == "found" and data["recommendation"]["replicas"] == 4, out
    assert [steps[s]["verdict"] for s in ("start", 2, 4, 8)] == ["start", "pass", "pass", "slo"], out
    assert any(r.startswith("ml/org/chat-8b: ttft p99") for r in steps[8]["reasons"]), steps[8]["reasons"]
    # Only the canary's workloads were read (not the other node's); p99 rises with the replicas.
    chat = [dict((w["workload"], w) for w in steps[s]["workloads"])["ml/org/chat-8b"] for s in ("start", 2, 4, 8)]
    assert set(w["workload"] for s in steps.values() for w in s["workloads"]) == {"ml/org/chat-8b", "ml/org/code-3b"}
    p99 = [w["latency_seconds"]["vllm:time_to_first_token_seconds"]["p99"] for w in chat]
    assert p99 == sorted(p99) and p99[2] <= 0.1 < p99[3], p99
    # Memory per step: one pod per slot, 8 GiB each.
    free = [round(s["gpus"][0]["free_mib"]) for s in (steps[2], steps[4])]
    assert free == [A100_MIB - 2 * 8192, A100_MIB - 4 * 8192], out
    # The node is at 4 replicas, as the recommendation says, and nothing else changed.
    view = lab.cluster_view()
    assert view[CANARY]["labels"][CONFIG_LABEL] == "ts-4" and view[CANARY]["allocatable"] == {"nvidia.com/gpu": "4"}
    assert view[OTHER] == lab.start_view[OTHER]
    assert data["node_left_at"] == {"step": 4, "config_name": "ts-4"}
    assert data["recommendation"]["gpu_memory_utilization"] == 0.22
    assert yaml.safe_load(snippet.read_text()) == {"gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}}
    assert "putting it back to 4 replicas, the last step that passed" in err
    # The report, in Chromium: p99 and p95 of 2 workloads x 2 histograms and the memory line;
    # the TTFT SLO on each workload's TTFT chart and the memory margin.
    if CHROMIUM:
        html_tag, console = dump_dom(page, tmp_path / "profile")
        assert 'data-rendered="9"' in html_tag and 'data-limits="3"' in html_tag, html_tag
        assert "data-errors" not in html_tag and console == []
    # The snippet in the inventory's host_vars makes 4 replicas the canary's plan: its config is
    # the one the node runs now.
    host_vars = lab.inventory.parent / "host_vars"
    host_vars.mkdir()
    (host_vars / "canary.yml").write_text(snippet.read_text())
    try:
        planned = plan_json(lab)["nodes"][CANARY]
    finally:
        (host_vars / "canary.yml").unlink()
        host_vars.rmdir()
    assert planned["device_plugin"]["config_name"] == "ts-4" and planned["resources"] == {"nvidia.com/gpu": 4}
    # Back to the inventory's plan for the next test: `apply -l` runs the cluster side too.
    lab.apply("-l", CANARY)


def plan_json(lab):
    proc = subprocess.run([sys.executable, "-m", "gpuprov", "plan", "-o", "json"] + lab.inventories, cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_an_slo_no_step_meets_puts_the_node_back_and_fit_proposes_mig(lab, canary_as_planned):
    # chat's p99 end-to-end latency is above 300 ms from 2 replicas on.
    code, out, err, _ = lab.trial("--slo", "e2e:p99<=300ms", "--steps", "2,4", "-o", "json")
    assert code == 1, out + err
    data = as_json(out)
    steps = steps_of(data)
    assert data["outcome"] == "none" and data["recommendation"] is None
    assert steps[2]["verdict"] == "slo" and 4 not in steps, out
    assert data["node_left_at"] == {"step": "start", "config_name": "exclusive"} and data["restored"] is True
    assert "no step passed; back where it started (its inventory plan, exclusive)" in err
    # The pods of the step that failed, each in a MIG instance of its own on the canary's A100.
    fit = data["fit"]
    assert fit["method"] == "mig" and not fit.get("error"), fit
    assert sorted(w["name"] for w in fit["workloads"]) == ["ml/chat-8b-0", "ml/code-3b-1"]
    assert fit["gpuprov_sharing"]["strategy"] == "mig"
    assert [len(g["workloads"]) for g in fit["gpus"]] == [2] and all("1g.10gb" in w for w in fit["gpus"][0]["workloads"])


def test_a_step_that_breaks_memory_stops_before_the_latency_check(lab, canary_as_planned):
    # Two pods of 38 GiB leave 4 of 80 GiB (5%) free at 2 replicas; their latency would pass.
    node = lab.nodes[0]
    try:
        lab.chat.memory_mib = lab.code.memory_mib = 38 * 1024
        node.refresh()
        code, out, err, _ = lab.trial("--slo", "ttft:p99<=100ms", "--steps", "2,4", "-o", "json")
    finally:
        lab.chat.memory_mib = lab.code.memory_mib = 8 * 1024
        node.refresh()
    assert code == 1, out + err
    data = as_json(out)
    steps = steps_of(data)
    assert steps[2]["verdict"] == "memory" and 4 not in steps, out
    assert steps[2]["reasons"] == ["GPU 0: 5% free (4.0 of 80.0 GiB), below the 10% margin"]
    # Judged on memory alone: the step's latency was never read.
    assert steps[2]["workloads"] == [] and steps["start"]["workloads"]
    assert data["outcome"] == "none" and data["node_left_at"]["step"] == "start"


def trial_until(lab, line, *args, prometheus=None):
    """Start a trial and return (process, stderr so far) once its stderr shows ``line``."""
    proc = subprocess.Popen(lab.trial_argv(*args, prometheus=prometheus), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=lab.fleet.controller_env())
    seen = []
    deadline = time.monotonic() + TRIAL_TIMEOUT_S
    while time.monotonic() < deadline:
        text = proc.stderr.readline()
        if not text:
            break
        seen.append(text)
        if line in text:
            return proc, seen
    proc.kill()
    raise AssertionError("the trial never printed %r:\n%s" % (line, "".join(seen)))


def finish(proc, seen):
    out, rest = proc.communicate(timeout=TRIAL_TIMEOUT_S)
    return proc.returncode, out, "".join(seen) + rest


def test_ctrl_c_in_the_middle_of_a_window_puts_the_node_back(lab, canary_as_planned):
    proc, seen = trial_until(lab, "step 2: measuring for 60s", "--slo", "ttft:p99<=100ms", "--steps", "2,4",
                             "--window", "60s", "-o", "json")
    assert lab.cluster_view()[CANARY]["labels"][CONFIG_LABEL] == "ts-2"  # the step is on the node
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc, seen)
    assert code == 130, out + err
    data = as_json(out)
    assert data["outcome"] == "interrupted" and data["restored"] is True
    assert steps_of(data)[2]["verdict"] == "not run"
    assert "interrupted" in err and "back where it started (its inventory plan, exclusive)" in err


def test_a_prometheus_that_goes_away_mid_trial_puts_the_node_back_and_is_named(lab, canary_as_planned):
    server = prometheus_harness.Prometheus(lab.targets).start()
    try:
        server.wait_for_samples("vllm:time_to_first_token_seconds_count", 6)
        proc, seen = trial_until(lab, "step 2: measuring for 8s", "--slo", "ttft:p99<=100ms", "--steps", "2,4",
                                 "--window", "8s", prometheus=server)
        server.stop()
        code, out, err = finish(proc, seen)
    finally:
        server.stop()
    assert code == 1, out + err
    assert "The trial stopped: %s: cannot connect" % server.url in out, out
    assert "canary is back as it was: its inventory plan (exclusive)." in out
