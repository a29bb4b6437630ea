"""gpuprov diagnose --prometheus against a real Prometheus server scraping test dcgm-exporters.

One Prometheus (1 s scrapes) and two exporters serve the whole module, to keep CI lean:
node-a prints the old names (exporter <= 4.8: DCGM_FI_PROF_SM_ACTIVE, Hostname) and sits
behind a target that carries the exporter pod's own pod/namespace labels, as a
ServiceMonitor with honorLabels: false does (workload pods become exported_pod);
node-b prints the new names (DCGM_FI_PROF_SM_UTIL_RATIO, GPU_UTIL as a ratio, hostname).
"""
import json
import os
import sys
import time

import pytest

from testlib import FAKES, REPO

sys.path.insert(0, FAKES)
sys.path.insert(0, os.path.join(REPO, "tests"))

import dcgm_exporter  # noqa: E402
import prometheus_harness  # noqa: E402

from gpuprov.diagnose import prometheus  # noqa: E402

pytestmark = pytest.mark.skipif(prometheus_harness.MISSING is not None, reason=prometheus_harness.MISSING or "")

A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
UUID_A0 = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
UUID_A1 = "GPU-6a1c33b2-6f1e-4a5e-8f0e-0c7ad2f5d0a1"
UUID_B0 = "GPU-153bdcb7-df30-40e2-3f2c-379902ba72fa"
UUID_B1 = "GPU-63bc0b91-2265-1b94-831c-15c41fe92675"


def cycling(scrape):
    """SM activity of a CPU-bound input pipeline: busy one scrape, idle the next."""
    return 0.9 if scrape % 2 else 0.0


def node_a_devices():
    return [
        # GPU 0: MIG on, two 3g.20gb instances (A100 40GB: 20 GiB slices).
        dcgm_exporter.Device(0, UUID_A0, A100, {"sm_active": 0.30, "gr_engine_active": 0.35, "dram_active": 0.85,
                                                "tensor_active": 0.1, "sm_occupancy": 0.2,
                                                "fb_used": 15000, "fb_free": 5096},
                             gi_id=1, profile="3g.20gb", pod="train-0", namespace="ml"),
        dcgm_exporter.Device(0, UUID_A0, A100, {"sm_active": 0.01, "gr_engine_active": 0.01, "dram_active": 0.0,
                                                "fb_used": 9000, "fb_free": 11096},
                             gi_id=2, profile="3g.20gb", pod="idle-0", namespace="ml"),
        # GPU 1: whole, a cycling job.
        dcgm_exporter.Device(1, UUID_A1, A100, {"sm_active": cycling, "gr_engine_active": cycling,
                                                "dram_active": 0.05, "fb_used": 30000, "fb_free": 10960,
                                                "gpu_util": lambda s: 100 * cycling(s)},
                             pod="etl-0", namespace="ml"),
    ]


def node_b_devices():
    return [
        dcgm_exporter.Device(0, UUID_B0, H100, {"sm_active": 0.9, "gr_engine_active": 0.95, "dram_active": 0.3,
                                                "fb_used": 60000, "fb_free": 21559, "gpu_util": 99},
                             pod="infer-0", namespace="web"),
        dcgm_exporter.Device(1, UUID_B1, H100, {"sm_active": 0.0, "gr_engine_active": 0.0, "dram_active": 0.0,
                                                "fb_used": 0, "fb_free": 81559, "gpu_util": 0}),
    ]


@pytest.fixture(scope="module")
def server():
    exporters = [dcgm_exporter.Exporter("node-a", node_a_devices(), "old").start(),
                 dcgm_exporter.Exporter("dcgm-exporter-7k2xq", node_b_devices(), "new").start()]
    targets = [
        ("dcgm-a", "127.0.0.1:%d" % exporters[0].port,
         {"pod": "dcgm-exporter-abcde", "namespace": "gpu-operator"}),
        # Newer exporters may print their pod name as hostname: the target's `node` label wins.
        ("dcgm-b", "127.0.0.1:%d" % exporters[1].port, {"node": "node-b"}),
    ]
    server = prometheus_harness.Prometheus(targets)
    try:
        server.start()
        server.wait_for_samples('{__name__=~"DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_SM_UTIL_RATIO"}', 6)
        yield server
    finally:
        server.stop()
        for exporter in exporters:
            exporter.stop()


def test_exporter_text_is_what_prometheus_stores(server):
    # honorLabels false: the exporter's pod label went to exported_pod, the target kept its own.
    rows = server.query('DCGM_FI_PROF_SM_ACTIVE{GPU_I_ID="1"}')
    assert [row["metric"]["exported_pod"] for row in rows] == ["train-0"]
    assert rows[0]["metric"]["pod"] == "dcgm-exporter-abcde"
    assert rows[0]["metric"]["UUID"] == UUID_A0 and rows[0]["metric"]["GPU_I_PROFILE"] == "3g.20gb"
    # No GPU_UTIL on MIG instances (dcgm-exporter #50): only the whole GPU 1 has it on node-a.
    assert [row["metric"]["gpu"] for row in server.query('DCGM_FI_DEV_GPU_UTIL{Hostname="node-a"}')] == ["1"]
    assert len(server.query("DCGM_FI_PROF_SM_UTIL_RATIO")) == 2


def test_read_joins_gpus_and_mig_instances_on_uuid_and_instance_id(server):
    data = prometheus.read(prometheus.Client(server.url), 60)
    devices = {(d["node"], d["uuid"], d["gpu_instance_id"]): d for d in data["devices"]}
    assert sorted(devices) == sorted([("node-a", UUID_A0, "1"), ("node-a", UUID_A0, "2"), ("node-a", UUID_A1, ""),
                                      ("node-b", UUID_B0, ""), ("node-b", UUID_B1, "")])
    train = devices[("node-a", UUID_A0, "1")]
    assert train["pods"] == ["ml/train-0"] and train["profile"] == "3g.20gb" and train["index"] == 0
    assert train["sm_source"] == "sm_active"
    values = train["points"][-1][1]
    assert values["dram_active"] == pytest.approx(0.85) and values["sm_active"] == pytest.approx(0.30)
    assert values["fb_used"] == 15000 and values["fb_free"] == 5096
    # New names, ratio units: GPU_UTIL_RATIO 0.99 read as a ratio, not as 0.0099.
    infer = devices[("node-b", UUID_B0, "")]
    assert infer["pods"] == ["web/infer-0"] and infer["model"] == H100
    assert infer["points"][-1][1]["gpu_util"] == pytest.approx(0.99)
    assert infer["points"][-1][1]["sm_active"] == pytest.approx(0.9)
    # Old GPU_UTIL is in percent (its HELP says so): 90 -> 0.9.
    etl = devices[("node-a", UUID_A1, "")]
    assert {round(v["gpu_util"], 2) for _, v in etl["points"] if "gpu_util" in v} <= {0.0, 0.9}
    assert devices[("node-b", UUID_B1, "")]["pods"] == []
    # The cycling job shows both states over the window.
    assert {round(v["sm_active"], 1) for _, v in etl["points"]} == {0.0, 0.9}


def test_read_reports_an_unreachable_or_wrong_server():
    with pytest.raises(prometheus.PrometheusError, match="cannot connect"):
        prometheus.read(prometheus.Client("http://127.0.0.1:%d" % prometheus_harness.free_port(), timeout=5), 60)


def test_bad_promql_names_the_server_and_prometheus_error(server):
    with pytest.raises(prometheus.PrometheusError, match="HTTP 400: .*parse error"):
        prometheus.Client(server.url).query_range("rate(", time.time() - 60, time.time(), 1)


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("15m", 900), ("7d", 604800), ("2w", 1209600)])
def test_parse_duration(text, seconds):
    assert prometheus.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7", "0d", "1.5h", "7days", "-1d", ""])
def test_parse_duration_refuses(text):
    with pytest.raises(ValueError, match="whole number"):
        prometheus.parse_duration(text)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "prometheus:9090", "http://", "http://p:9090/?q=1"])
def test_check_url_refuses(url):
    with pytest.raises(ValueError):
        prometheus.check_url(url)


def test_step_keeps_points_under_the_server_limit():
    assert prometheus.step_for(7 * 86400) == 840 and 7 * 86400 / 840 <= prometheus.MAX_POINTS
    assert prometheus.step_for(30) == 1


def test_pod_of_coalesces_label_spellings():
    assert prometheus.pod_of({"exported_pod": "a", "exported_namespace": "ml", "pod": "dcgm-x"}) == "ml/a"
    assert prometheus.pod_of({"pod_name": "a", "pod_namespace": "ml"}) == "ml/a"
    assert prometheus.pod_of({"pod": "a", "namespace": "ml", "Hostname": "node-1"}) == "ml/a"
    assert prometheus.pod_of({"pod": "dcgm-exporter-x", "hostname": "dcgm-exporter-x"}) is None
    assert prometheus.pod_of({"UUID": "GPU-1"}) is None


# ------------------------------------------------------------- gpuprov diagnose --prometheus


def _node(name, allocatable, product):
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(namespace, name, node, requests):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": requests}}]},
            "status": {"phase": "Running"}}


@pytest.fixture
def snapshot_dir(tmp_path):
    nodes = [_node("node-a", {"nvidia.com/mig-3g.20gb": "2", "nvidia.com/gpu": "1"}, "NVIDIA-A100-SXM4-40GB"),
             _node("node-b", {"nvidia.com/gpu": "2"}, "NVIDIA-H100-80GB-HBM3")]
    pods = [_pod("ml", "train-0", "node-a", {"nvidia.com/mig-3g.20gb": 1}),
            _pod("ml", "idle-0", "node-a", {"nvidia.com/mig-3g.20gb": 1}),
            _pod("ml", "etl-0", "node-a", {"nvidia.com/gpu": 1}),
            _pod("web", "infer-0", "node-b", {"nvidia.com/gpu": 1})]
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": nodes}))
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}))
    (tmp_path / "events.json").write_text(json.dumps({"kind": "EventList", "items": []}))
    return tmp_path


def test_diagnose_reads_mig_instances_and_finds_the_bandwidth_bound_one(gpuprov, server, snapshot_dir):
    code, out, err = gpuprov("diagnose", "--snapshot", str(snapshot_dir), "--prometheus", server.url,
                             "--since", "1m", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    nodes = {node["name"]: node for node in report["nodes"]}
    node_a = nodes["node-a"]
    # Fully allocated, and GI 1 moves memory while its SMs wait: the memory check, on bandwidth.
    assert (node_a["check"], node_a["status"]) == ("memory", "bandwidth-bound")
    assert any(line.startswith("GPU 0/GI 1 (3g.20gb) [ml/train-0]: DRAM busy 85% of cycles while SMs have "
                               "work 30%") for line in node_a["evidence"])
    assert "time-slicing or MPS will not help" in node_a["remedy"]["summary"]
    instances = {i["gpu_instance_id"]: i for i in node_a["instances"]}
    assert sorted(instances) == ["1", "2"]
    assert instances["2"]["pods"] == ["ml/idle-0"] and instances["2"]["pattern"] == "low"
    assert instances["1"]["dram_mean"] == 85 and instances["1"]["memory_total_mib"] == 20096
    # The whole GPU 1 cycles (CPU-bound input) and MIG mode is known for GPU 0.
    gpus = {g["index"]: g for g in node_a["gpus"]}
    assert gpus[1]["pattern"] == "cycling" and gpus[0]["mig_enabled"] is True
    assert node_a["physical_gpus"] == 2
    # node-b (new names, `node` target label): GPU 0 busy with web/infer-0, one GPU free.
    node_b = nodes["node-b"]
    gpus_b = {g["index"]: g for g in node_b["gpus"]}
    assert gpus_b[0]["pods"] == ["web/infer-0"] and gpus_b[0]["sm_mean"] == 90 and gpus_b[0]["pattern"] == "busy"
    assert node_b["status"] == "ok"


def test_diagnose_table_names_instances_and_pods(gpuprov, server, snapshot_dir):
    code, out, _ = gpuprov("diagnose", "--snapshot", str(snapshot_dir), "--prometheus", server.url, "--since", "1m")
    assert code == 0
    assert "node-a [memory] " in out
    assert "MIG 0/GI 2 (3g.20gb) [ml/idle-0]: SM mean 1%" in out


def test_series_of_nodes_outside_the_snapshot_are_noted(gpuprov, server, snapshot_dir):
    doc = json.loads((snapshot_dir / "nodes.json").read_text())
    doc["items"] = [item for item in doc["items"] if item["metadata"]["name"] != "node-b"]
    (snapshot_dir / "nodes.json").write_text(json.dumps(doc))
    code, out, _ = gpuprov("diagnose", "--snapshot", str(snapshot_dir), "--prometheus", server.url, "--since", "1m",
                           "-o", "json")
    assert code == 0
    assert any(note.startswith("Prometheus: DCGM series for node-b, which is no node of the snapshot")
               for note in json.loads(out)["notes"])


def test_diagnose_bad_prometheus_input(gpuprov, snapshot_dir):
    code, _, err = gpuprov("diagnose", "--snapshot", str(snapshot_dir), "--prometheus", "http://127.0.0.1:1",
                           "--since", "7x")
    assert code == 2 and "--prometheus/--since: '7x': use a whole number" in err
    code, _, err = gpuprov("diagnose", "--snapshot", str(snapshot_dir), "--prometheus",
                           "http://127.0.0.1:%d" % prometheus_harness.free_port(), "--since", "1m")
    assert code == 1 and "cannot connect" in err


def test_a_port_taken_after_the_probe_moves_the_server_to_a_new_port():
    """free_port() probes; a process that binds the port first makes Prometheus exit with
    "address already in use", and start() tries again on a new port."""
    import socket

    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    server = prometheus_harness.Prometheus([])
    server.port, server.url = taken, "http://127.0.0.1:%d" % taken
    try:
        server.start()
        assert server.port != taken
        assert server.url == "http://127.0.0.1:%d" % server.port
        assert server.query("vector(1)")[0]["value"][1] == "1"
        assert "address already in use" in server.log_text()
    finally:
        server.stop()
        holder.close()
