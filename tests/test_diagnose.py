"""gpuprov diagnose: the decision sequence on crafted snapshots, bad input, live mode."""
import copy
import json
import os
import re
import shutil
import sys

import pytest
import yaml
from click.testing import CliRunner

from gpuprov import cmd_diagnose
from gpuprov import diagnose as diag

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "diagnose")
REPO = os.path.dirname(HERE)
EXAMPLE = os.path.join(REPO, "examples", "snapshot")


def fixture(name):
    return os.path.join(FIXTURES, name)


def report_for(path, **kwargs):
    return diag.diagnose(diag.load_snapshot(path), **kwargs)


def node_of(report, name):
    return next(n for n in report["nodes"] if n["name"] == name)


def pod_of(report, name):
    return next(p for p in report["pods"] if p["name"] == name or p["name"].startswith(name + "-"))


def run_cli(*args):
    result = CliRunner().invoke(cmd_diagnose.diagnose, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def snapshot_copy(tmp_path):
    """A writable copy of a fixture snapshot."""
    def make(name):
        target = tmp_path / name
        shutil.copytree(fixture(name) if name != "example" else EXAMPLE, target)
        return target
    return make


def load(path):
    with open(path) as handle:
        return json.load(handle)


def dump(path, doc):
    with open(path, "w") as handle:
        json.dump(doc, handle)


# --------------------------------------------------------------------------------------
# Pure helpers


def test_scheduler_message_is_split_into_categorised_reasons():
    message = ("0/10 nodes are available: 1 node(s) had untolerated taint {dedicated: llm-serving}, 1 node(s) had "
               "untolerated taint {node-role.kubernetes.io/control-plane: }, 1 node(s) were unschedulable, 2 "
               "Insufficient nvidia.com/gpu, 5 node(s) didn't match Pod's node affinity/selector. preemption: 0/10 "
               "nodes are available: 2 No preemption victims found for incoming pod, 8 Preemption is not helpful "
               "for scheduling.")
    reasons = diag.parse_scheduler_message(message)
    assert [(r["count"], r["category"], r["detail"]) for r in reasons] == [
        (1, "taint", "{dedicated: llm-serving}"),
        (1, "taint", "{node-role.kubernetes.io/control-plane: }"),
        (1, "cordoned", ""),
        (2, "insufficient", "nvidia.com/gpu"),
        (5, "selector", ""),
    ]
    # The counts cover every node and nothing from the preemption half leaks in.
    assert sum(r["count"] for r in reasons) == 10


def test_scheduler_message_older_and_other_forms():
    old = ("0/3 nodes are available: 1 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate, "
           "2 Insufficient cpu.")
    assert [(r["category"], r["detail"]) for r in diag.parse_scheduler_message(old)] == [
        ("taint", "{nvidia.com/gpu: present}"), ("insufficient", "cpu")]
    cordon = "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }."
    assert diag.parse_scheduler_message(cordon)[0]["category"] == "cordoned"
    affinity = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    assert diag.parse_scheduler_message(affinity)[0]["category"] == "pod-affinity"
    assert diag.parse_scheduler_message("pod has unbound immediate PersistentVolumeClaims") == []


def test_pod_requests_add_up_like_the_scheduler():
    problems = []
    spec = {
        "initContainers": [
            {"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},   # limit alone
            {"name": "b", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "2"},
                                        "limits": {"nvidia.com/mig-1g.10gb": "2"}}},
        ],
    }
    assert diag.pod_gpu_requests(spec, "pod", problems) == {"nvidia.com/gpu": 3, "nvidia.com/mig-1g.10gb": 2}
    assert problems == []
    # The classic init container ran before the sidecar, so max(3, 1 + 1) = 3; with a
    # bigger sidecar the running set wins.
    spec["initContainers"][1]["resources"]["requests"]["nvidia.com/gpu"] = "4"
    assert diag.pod_gpu_requests(spec, "pod", problems)["nvidia.com/gpu"] == 5


def test_tolerations_and_node_affinity_rules():
    taint = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
    assert diag.tolerates({"key": "dedicated", "value": "llm"}, taint)
    assert diag.tolerates({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert diag.tolerates({"operator": "Exists"}, taint)
    assert not diag.tolerates({"key": "dedicated", "value": "batch"}, taint)
    assert not diag.tolerates({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, taint)

    node = diag.Node(name="n1", allocatable={}, capacity={}, labels={"zone": "a", "gpus": "8"})
    term = lambda *exprs: [{"matchExpressions": list(exprs)}]  # noqa: E731
    assert diag.node_affinity_matches(None, node)
    assert diag.node_affinity_matches(term({"key": "zone", "operator": "In", "values": ["a", "b"]}), node)
    assert not diag.node_affinity_matches(term({"key": "zone", "operator": "NotIn", "values": ["a"]}), node)
    assert diag.node_affinity_matches(term({"key": "gpus", "operator": "Gt", "values": ["4"]}), node)
    assert not diag.node_affinity_matches(term({"key": "gpus", "operator": "Lt", "values": ["4"]}), node)
    assert diag.node_affinity_matches(term({"key": "rack", "operator": "DoesNotExist"}), node)
    assert diag.node_affinity_matches([{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                         "values": ["n1"]}]}], node)
    # Terms are ORed; an empty term matches nothing.
    assert diag.node_affinity_matches([{}] + term({"key": "zone", "operator": "Exists"}), node)
    assert not diag.node_affinity_matches([{}], node)


def test_sm_patterns():
    cycling = [0, 1, 0, 95, 97] * 10
    assert diag.classify_sm(cycling, 0.1) == "cycling"
    assert diag.classify_sm([85, 90, 92] * 10, 0.5) == "busy"
    assert diag.classify_sm([0] * 30, 0.0) == "idle"
    assert diag.classify_sm([5, 10, 15, 12] * 10, 0.2) == "low"
    # Low SM without memory held is not a starved pod.
    assert diag.classify_sm([5, 10, 15, 12] * 10, 0.01) == "moderate"
    assert diag.classify_sm([], 0.5) is None


def test_summary_statistics_skip_values_nvidia_smi_could_not_read():
    text = "".join("2026/11/30 10:00:%02d.000, 0, NVIDIA L40S, %d, 46068, %s\n" % (i, 1000 + i, value)
                   for i, value in enumerate(["10", "20", "[N/A]", "30", "40"]))
    (gpu,) = diag.summarise_utilization(diag.parse_utilization_csv(text, "x.csv"))
    assert gpu["samples"] == 5
    assert gpu["sm_mean"] == 25.0
    assert gpu["sm_p95"] == 40
    assert gpu["memory_used_max_mib"] == 1004
    assert (gpu["first"], gpu["last"]) == ("2026/11/30 10:00:00.000", "2026/11/30 10:00:04.000")


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert diag.percentile(values, 0.95) == 95
    assert diag.percentile([7], 0.95) == 7
    assert diag.percentile([], 0.95) is None


def test_utilization_csv_errors_name_file_and_line():
    header = "timestamp, index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"
    good = "2026/11/30 10:00:01.123, 0, Tesla T4, 3100, 15360, 12\n"
    assert len(diag.parse_utilization_csv(header + good, "u.csv")) == 1
    with pytest.raises(diag.SnapshotError) as error:
        diag.parse_utilization_csv(good + "2026/11/30 10:00:02.123, 0, Tesla T4, 3100\n", "utilization/n.csv")
    assert error.value.problems[0].startswith("utilization/n.csv: line 2: expected 6 fields")
    with pytest.raises(diag.SnapshotError) as error:
        diag.parse_utilization_csv("30-11-2026 10:00, 0, Tesla T4, 3100, 15360, 12\n", "u.csv")
    assert "u.csv: line 1: timestamp" in error.value.problems[0]
    with pytest.raises(diag.SnapshotError) as error:
        diag.parse_utilization_csv("2026/11/30 10:00:01.123, 0, Tesla T4, lots, 15360, 12\n", "u.csv")
    assert "u.csv: line 1: memory.used: 'lots' is not a number" in error.value.problems[0]


def test_mig_option_comes_from_the_catalog():
    a100 = diag.gpu_model(["NVIDIA A100-SXM4-80GB"])
    assert a100.key == "A100-80GB"
    assert diag.mig_option(a100, 8 * 1024).name == "1g.10gb"
    # 20 GiB plus the margin no longer fits the 19.6 GiB profiles: two 3g.40gb per GPU.
    assert diag.mig_option(a100, 20 * 1024).name == "3g.40gb"
    assert diag.mig_option(a100, 79 * 1024) is None
    assert diag.mig_cap_option(a100).name == "3g.40gb"
    # GFD's product label resolves too, with its sharing suffix.
    assert diag.gpu_model(["NVIDIA-H100-80GB-HBM3-SHARED"]).key == "H100-80GB"
    t4 = diag.gpu_model(["Tesla T4"])
    assert diag.mig_option(t4, 1024) is None
    assert diag.gpu_model(["Imaginary GPU 9000"]) is None


# --------------------------------------------------------------------------------------
# One snapshot per branch of the decision sequence


def test_allocation_bound_with_memory_headroom_suggests_time_slicing():
    report = report_for(fixture("allocation_timeslicing"))
    node = node_of(report, "gpu-a100-01")
    assert node["check"] == "allocation"
    assert node["status"] == "sharing-helps"
    peak = max(g["memory_peak_mib"] for g in node["gpus"])
    # Replicas: how many copies of today's peak fit in the usable memory.
    expected = int(diag.MEMORY_USABLE_FRACTION * 81920 // peak)
    assert expected == 3
    assert node["remedy"]["sharing"] == {"strategy": "time-slicing", "replicas": 3}
    assert node["remedy"]["inventory"] == "gpuprov_sharing: {strategy: time-slicing, replicas: 3}"
    assert node["remedy"]["added_slots"] == 8 * (3 - 1)
    assert node["sizing"]["limited_by"] == "memory"
    # A 20 GiB job does not fit a 1g.20gb instance with margin: MIG offers 3g.40gb x2.
    (mig,) = node["remedy"]["alternatives"]
    assert mig["sharing"]["mig"]["devices"][0]["mig-devices"] == {"3g.40gb": 2}
    pod = pod_of(report, "train-8")
    assert pod["check"] == "allocation"
    assert "replicas: 3} on gpu-a100-01" in pod["remedy"]["summary"]
    assert report["summary"]["slots_from_sharing"] == 16


def test_less_memory_in_use_means_more_replicas(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    os.remove(path / "utilization" / "gpu-a100-01.csv")
    facts = load(path / "facts" / "gpu-a100-01.json")
    for gpu in facts["gpus"]:
        gpu["memory_used_mib"] = 12000
    dump(path / "facts" / "gpu-a100-01.json", facts)
    node = node_of(report_for(str(path)), "gpu-a100-01")
    assert node["remedy"]["sharing"]["replicas"] == int(0.9 * 81920 // 12000) == 6
    assert node["remedy"]["alternatives"][0]["sharing"]["mig"]["devices"][0]["mig-devices"] == {"1g.20gb": 4}
    # --max-replicas caps it.
    node = node_of(report_for(str(path), max_replicas=4), "gpu-a100-01")
    assert node["remedy"]["sharing"]["replicas"] == 4
    assert node["sizing"]["limited_by"] == "max-replicas"


def test_allocation_bound_with_full_memory_says_time_slicing_will_not_help(snapshot_copy):
    report = report_for(fixture("allocation_memory_full"))
    node = node_of(report, "gpu-a100-02")
    assert node["check"] == "memory"
    assert node["remedy"]["sharing"] is None
    assert node["remedy"]["summary"].startswith("time-slicing will not help")
    strategies = [a["sharing"]["strategy"] for a in node["remedy"]["alternatives"]]
    assert strategies == ["mig", "mps"]
    assert node["remedy"]["alternatives"][0]["sharing"]["mig"]["devices"][0]["mig-devices"] == {"3g.40gb": 2}
    assert pod_of(report, "tf-4")["check"] == "memory"
    assert report["summary"]["slots_from_sharing"] == 0

    # The same node with the memory half free is allocation-bound again: memory decided it.
    path = snapshot_copy("allocation_memory_full")
    facts = load(path / "facts" / "gpu-a100-02.json")
    for gpu in facts["ansible_facts"]["gpu_facts"]["gpus"]:
        gpu["memory_used_mib"] = 30000
    dump(path / "facts" / "gpu-a100-02.json", facts)
    report = report_for(str(path))
    assert node_of(report, "gpu-a100-02")["check"] == "allocation"
    assert pod_of(report, "tf-4")["check"] == "allocation"


def test_already_time_sliced_node_is_sized_per_pod(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    os.remove(path / "utilization" / "gpu-a100-01.csv")
    nodes = load(path / "nodes.json")
    status = nodes["items"][0]["status"]
    status["capacity"]["nvidia.com/gpu"] = status["allocatable"]["nvidia.com/gpu"] = "32"   # 8 GPUs x 4
    dump(path / "nodes.json", nodes)
    pods = load(path / "pods.json")
    for item in pods["items"]:
        if item["spec"].get("nodeName"):
            item["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    dump(path / "pods.json", pods)
    facts = load(path / "facts" / "gpu-a100-01.json")
    for gpu in facts["gpus"]:
        gpu["memory_used_mib"] = 40960      # four pods of 10 GiB each
    dump(path / "facts" / "gpu-a100-01.json", facts)
    node = node_of(report_for(str(path)), "gpu-a100-01")
    assert (node["physical_gpus"], node["replicas_now"]) == (8, 4)
    assert node["remedy"]["sharing"]["replicas"] == int(0.9 * 81920 // 10240) == 7
    assert node["remedy"]["added_slots"] == 8 * 7 - 32


def test_mig_node_is_time_sliced_per_mig_device(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    os.remove(path / "utilization" / "gpu-a100-01.csv")
    nodes = load(path / "nodes.json")
    status = nodes["items"][0]["status"]
    for key in ("capacity", "allocatable"):
        del status[key]["nvidia.com/gpu"]
        status[key]["nvidia.com/mig-3g.40gb"] = "16"
    dump(path / "nodes.json", nodes)
    pods = load(path / "pods.json")
    for item in pods["items"]:
        limits = item["spec"]["containers"][0]["resources"]["limits"]
        limits["nvidia.com/mig-3g.40gb"] = "2" if item["spec"].get("nodeName") else "1"
        del limits["nvidia.com/gpu"]
    dump(path / "pods.json", pods)
    facts = load(path / "facts" / "gpu-a100-01.json")
    for gpu in facts["gpus"]:
        gpu["mig_mode_current"] = True
        gpu["memory_used_mib"] = 16000      # two 3g.40gb instances holding 8000 MiB each
    dump(path / "facts" / "gpu-a100-01.json", facts)
    report = report_for(str(path))
    node = node_of(report, "gpu-a100-01")
    assert node["resources"] == [{"name": "nvidia.com/mig-3g.40gb", "capacity": 16, "allocatable": 16,
                                  "allocated": 16, "free": 0}]
    assert node["check"] == "allocation"
    replicas = int(0.9 * 81920 // 16000)
    assert node["remedy"]["sharing"] == {"strategy": "mig", "time_slicing_replicas": replicas}
    assert node["remedy"]["added_slots"] == 16 * (replicas - 1)
    assert "time_slicing_replicas: %d" % replicas in node["remedy"]["inventory"]
    # MIG is on already: no MIG alternative.
    assert node["remedy"]["alternatives"] == []
    assert pod_of(report, "train-8")["check"] == "allocation"


def test_memory_bound_t4_offers_mps_but_not_mig(snapshot_copy):
    path = snapshot_copy("example")
    report = report_for(str(path))
    t4 = node_of(report, "gpu-t4-01")
    assert t4["check"] == "allocation" and t4["remedy"]["alternatives"] == []
    facts = load(path / "facts" / "gpu-t4-01.json")
    facts["ansible_facts"]["gpu_facts"]["gpus"][0]["memory_used_mib"] = 14000
    dump(path / "facts" / "gpu-t4-01.json", facts)
    t4 = node_of(report_for(str(path)), "gpu-t4-01")
    assert t4["check"] == "memory"
    assert [a["sharing"]["strategy"] for a in t4["remedy"]["alternatives"]] == ["mps"]


def test_placement_node_selector(snapshot_copy):
    report = report_for(fixture("placement_selector"))
    pod = pod_of(report, "wants-a100")
    assert (pod["check"], pod["status"]) == ("placement", "selector")
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in pod["summary"]
    assert pod["scheduler"]["reasons"][0]["category"] == "selector"
    assert node_of(report, "gpu-t4-01")["check"] == "placement"

    # Give the node the label and the pod fits: nothing explains the wait any more.
    path = snapshot_copy("placement_selector")
    nodes = load(path / "nodes.json")
    nodes["items"][0]["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
    dump(path / "nodes.json", nodes)
    report = report_for(str(path))
    pod = pod_of(report, "wants-a100")
    assert pod["check"] is None and pod["status"] == "unexplained"
    assert report["summary"]["pending_unexplained"] == 1


def test_placement_taint_and_a_pod_that_tolerates_it():
    report = report_for(fixture("placement_taint"))
    pod = pod_of(report, "eval-0")
    assert (pod["check"], pod["status"]) == ("placement", "taint")
    assert pod["remedy"]["commands"] == ["kubectl taint nodes gpu-h100-01 dedicated=llm-serving:NoSchedule-"]
    node = node_of(report, "gpu-h100-01")
    assert node["check"] == "placement"
    assert any("research/eval-0" in line for line in node["evidence"])
    # The pod that tolerates the taint could run: no check explains it, and no event exists.
    tolerating = pod_of(report, "vllm-new")
    assert tolerating["check"] is None and tolerating["status"] == "unexplained"
    assert {"check": "placement", "pods": ["llm-serving/vllm-new"]}.items() <= report["not_run"][-1].items()


def test_placement_affinity(snapshot_copy):
    report = report_for(fixture("placement_affinity"))
    pod = pod_of(report, "embed-0")
    assert (pod["check"], pod["status"]) == ("placement", "affinity")
    assert "topology.kubernetes.io/zone In eu-west-1c" in pod["summary"]
    path = snapshot_copy("placement_affinity")
    nodes = load(path / "nodes.json")
    nodes["items"][0]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "eu-west-1c"
    dump(path / "nodes.json", nodes)
    assert pod_of(report_for(str(path)), "embed-0")["check"] is None


def test_placement_request_no_single_node_can_satisfy():
    report = report_for(fixture("placement_too_large"))
    big = pod_of(report, "llama-0")
    assert (big["check"], big["status"]) == ("placement", "too-large")
    assert "requests 16 nvidia.com/gpu; the largest node offers 8" in big["summary"]
    mig = pod_of(report, "mig-0")
    assert (mig["check"], mig["status"]) == ("placement", "not-offered")
    assert "no node advertises nvidia.com/mig-3g.40gb" in mig["summary"]
    # Idle nodes that nobody could use are not "placement" problems.
    assert {n["status"] for n in report["nodes"]} == {"idle"}


def test_application_cpu_bound_cycling(snapshot_copy):
    report = report_for(fixture("application_cpu_bound"))
    node = node_of(report, "gpu-l40s-01")
    assert node["check"] == "application"
    assert [g["pattern"] for g in node["gpus"]] == ["cycling", "cycling", "idle", "idle"]
    assert any("cycles between idle and busy" in line for line in node["evidence"])
    assert "CPU-bound" in node["remedy"]["summary"]
    assert node["remedy"]["sharing"] is None
    assert node["evidence"][-1] == "GPU pods on the node: vision/decode-0, vision/decode-1"

    # Allocation comes first: with all four GPUs taken the same node is allocation-bound.
    path = snapshot_copy("application_cpu_bound")
    pods = load(path / "pods.json")
    for index in (2, 3):
        extra = copy.deepcopy(pods["items"][0])
        extra["metadata"]["name"] = "decode-%d" % index
        pods["items"].append(extra)
    dump(path / "pods.json", pods)
    assert node_of(report_for(str(path)), "gpu-l40s-01")["check"] == "allocation"


def test_application_io_bound_low():
    node = node_of(report_for(fixture("application_io_bound")), "gpu-l40s-01")
    assert node["check"] == "application"
    assert [g["pattern"] for g in node["gpus"][:2]] == ["low", "low"]
    assert "I/O" in node["remedy"]["summary"]
    assert "CPU-bound" not in node["remedy"]["summary"]


def test_mixed_example_fleet_exercises_every_check():
    report = report_for(EXAMPLE)
    checks = {n["name"]: (n["check"], n["status"]) for n in report["nodes"]}
    assert checks == {
        "gpu-a100-01": ("allocation", "sharing-helps"),
        "gpu-a100-02": ("memory", "memory-bound"),
        "gpu-h100-01": ("placement", "unreachable"),
        "gpu-t4-01": ("allocation", "sharing-helps"),
        "gpu-t4-02": ("allocation", "sharing-helps"),
        "gpu-t4-03": ("allocation", "busy"),
        "gpu-t4-04": ("placement", "unreachable"),
        "gpu-l40s-01": ("application", "app-bound"),
        "gpu-l40s-02": ("allocation", "sharing-helps"),
    }
    pods = {p["name"].split("-")[0] + "-" + p["name"].split("-")[1]: (p["check"], p["status"])
            for p in report["pods"]}
    assert pods["llama-finetune"] == ("placement", "too-large")
    assert pods["llama-eval"] == ("placement", "taint")
    assert pods["bert-sweep"] == ("allocation", "allocation-bound")
    assert pods["whisper-batch"] == ("allocation", "allocation-bound")
    # The control plane has no GPUs; succeeded/failed pods hold none.
    assert report["summary"]["gpu_nodes"] == 9 and report["summary"]["nodes"] == 10
    assert node_of(report, "gpu-t4-03")["resources"][0]["allocated"] == 1
    # gpu-l40s-02 has no facts and no samples: sized with the smallest step, and said so.
    l40s = node_of(report, "gpu-l40s-02")
    assert l40s["remedy"]["sharing"]["replicas"] == 2
    assert "memory use unknown" in l40s["remedy"]["sizing"]
    assert [(i["check"], i["nodes"]) for i in report["not_run"]] == [
        ("memory", ["gpu-l40s-02"]), ("application", ["gpu-l40s-02"])]


def test_every_suggested_inventory_line_is_valid_gpuprov_intent():
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent

    report = report_for(EXAMPLE)
    checked = 0
    for node in report["nodes"]:
        remedy = node["remedy"] or {}
        for item in [remedy] + list(remedy.get("alternatives") or []):
            line = item.get("inventory")
            if not line or not line.startswith("gpuprov_sharing:"):
                continue
            hostvars = yaml.safe_load(line)
            hostvars.update(gpuprov_gpu_model=node["gpus"][0]["name"] if node["gpus"] else "L40S",
                            gpuprov_gpu_count=node["physical_gpus"])
            parsed, problems = intent.parse_intent(node["name"], hostvars)
            assert problems == [], (node["name"], line, problems)
            assert parsed.strategy == item["sharing"]["strategy"]
            checked += 1
    assert checked >= 6


# --------------------------------------------------------------------------------------
# The command


def test_table_output_reads_like_the_brief():
    code, out, err = run_cli("--snapshot", EXAMPLE)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("gpu-a100-01 "))
    assert re.search(r"gpu 8/8\s+6%\s+8\.2/80 GiB\s+allocation", row)
    assert "time-slicing 8 would add 56 slots of nvidia.com/gpu" in row
    assert "gpuprov_sharing: {strategy: time-slicing, replicas: 8}" in out
    assert "alike:    ml-research/bert-sweep-4-" in out
    assert "Not run: memory check for gpu-l40s-02" in out


def test_json_output_has_the_documented_structure():
    code, out, _err = run_cli("--snapshot", EXAMPLE, "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert report["schema"] == "gpuprov.diagnose/v1"
    assert set(report) == {"schema", "source", "summary", "not_run", "notes", "nodes", "pods", "thresholds", "dra"}
    for node in report["nodes"]:
        assert {"name", "check", "status", "summary", "evidence", "remedy", "resources", "gpus"} <= set(node)
        assert node["check"] in diag.CHECKS + (None,)
    for pod in report["pods"]:
        assert {"namespace", "name", "requests", "check", "status", "summary", "evidence", "remedy",
                "scheduler"} <= set(pod)


def test_docs_example_matches_the_command_output(monkeypatch):
    with open(os.path.join(REPO, "docs", "diagnose-example.md")) as handle:
        doc = handle.read()
    command, shown = re.search(r"```console\n\$ (gpuprov diagnose [^\n]*)\n(.*?)```", doc, re.S).groups()
    monkeypatch.chdir(REPO)
    code, out, _err = run_cli(*command.split()[2:])
    assert code == 0
    assert out == shown, "docs/diagnose-example.md is out of date: regenerate it from the command"


# --------------------------------------------------------------------------------------
# Bad and partial input: exit 2, the file and field named, no traceback


def _bad(path, *needles):
    code, out, err = run_cli("--snapshot", str(path))
    assert code == 2, (out, err)
    assert "Traceback" not in err + out
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_missing_snapshot_folder_and_files(tmp_path, snapshot_copy):
    _bad(tmp_path / "nope", "not a directory")
    path = snapshot_copy("placement_selector")
    os.remove(path / "nodes.json")
    os.remove(path / "events.json")
    err = _bad(path, "nodes.json: missing", "kubectl get nodes -o json", "events.json: missing")
    assert "pods.json" not in err


def test_invalid_json_names_line_and_column(snapshot_copy):
    path = snapshot_copy("placement_selector")
    (path / "pods.json").write_text('{"kind": "List", "items": [\n  {"kind": "Pod",,}\n]}')
    _bad(path, "pods.json: not valid JSON: Expecting property name enclosed in double quotes: line 2 column")


def test_wrong_kind_is_named(snapshot_copy):
    path = snapshot_copy("placement_selector")
    shutil.copy(path / "pods.json", path / "nodes.json")
    _bad(path, "nodes.json: items[0] (ml/wants-a100): kind: is 'Pod', expected Node")
    dump(path / "nodes.json", {"apiVersion": "v1", "kind": "PodList", "items": []})
    _bad(path, "nodes.json: kind: is 'PodList', expected NodeList or List")
    dump(path / "nodes.json", [1, 2])
    _bad(path, "nodes.json: expected a JSON object")


def test_node_without_allocatable_and_pod_without_status(snapshot_copy):
    path = snapshot_copy("placement_taint")
    nodes = load(path / "nodes.json")
    del nodes["items"][0]["status"]["allocatable"]
    dump(path / "nodes.json", nodes)
    pods = load(path / "pods.json")
    del pods["items"][1]["status"]
    dump(path / "pods.json", pods)
    _bad(path, "nodes.json: items[0] (gpu-h100-01): status.allocatable: missing",
         "pods.json: items[1] (llm-serving/vllm-new): status: missing")


def test_non_integer_gpu_quantity(snapshot_copy):
    path = snapshot_copy("placement_taint")
    nodes = load(path / "nodes.json")
    nodes["items"][0]["status"]["allocatable"]["nvidia.com/gpu"] = "1500m"
    dump(path / "nodes.json", nodes)
    _bad(path, "status.allocatable.nvidia.com/gpu: '1500m' is not a whole number")


def test_bad_facts_and_utilization_files(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    facts = load(path / "facts" / "gpu-a100-01.json")
    facts["gpus"][2]["memory_used_mib"] = "9 GiB"
    dump(path / "facts" / "gpu-a100-01.json", facts)
    with open(path / "utilization" / "gpu-a100-01.csv", "a") as handle:
        handle.write("garbage\n")
    _bad(path, "facts/gpu-a100-01.json: gpus[2].memory_used_mib: expected a finite number, got '9 GiB'",
         "utilization/gpu-a100-01.csv: line 241: expected 6 fields")
    dump(path / "facts" / "gpu-a100-01.json", {"failed": True, "msg": "NVML: driver not loaded"})
    _bad(path, "facts/gpu-a100-01.json: the gpu_facts run failed on this node: NVML: driver not loaded")
    dump(path / "facts" / "gpu-a100-01.json", {"ansible_facts": {}})
    _bad(path, "facts/gpu-a100-01.json: gpus: missing")


def test_single_utilization_csv_needs_a_node_column_on_a_fleet(snapshot_copy):
    path = snapshot_copy("placement_too_large")
    line = "2026/11/30 10:00:01.000, 0, NVIDIA A100-SXM4-80GB, 100, 81920, 0\n"
    (path / "utilization.csv").write_text(line)
    _bad(path, "utilization.csv: rows have no node column but the snapshot has 2 GPU nodes")
    (path / "utilization.csv").write_text("gpu-a100-02, " + line + "gpu-a100-09, " + line)
    code, out, err = run_cli("--snapshot", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert node_of(report, "gpu-a100-02")["gpus"][0]["samples"] == 1
    assert any("no node gpu-a100-09" in note for note in report["notes"])


def test_partial_snapshot_degrades_and_says_why(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    shutil.rmtree(path / "facts")
    shutil.rmtree(path / "utilization")
    dump(path / "events.json", {"apiVersion": "v1", "kind": "List", "items": [], "metadata": {}})
    code, out, err = run_cli("--snapshot", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    node = node_of(report, "gpu-a100-01")
    assert node["check"] == "allocation"
    assert node["remedy"]["sharing"]["replicas"] == 2
    assert "memory use unknown" in node["remedy"]["sizing"]
    assert [i["check"] for i in report["not_run"]] == ["memory", "application", "placement"]


def test_facts_in_every_accepted_wrapping(snapshot_copy):
    path = snapshot_copy("allocation_memory_full")
    module_result = load(path / "facts" / "gpu-a100-02.json")
    bare = module_result["ansible_facts"]["gpu_facts"]
    expected = report_for(str(path))["nodes"][0]["gpus"]
    for doc in (bare, {"gpu_facts": bare}):
        dump(path / "facts" / "gpu-a100-02.json", doc)
        assert report_for(str(path))["nodes"][0]["gpus"] == expected
    # `ansible --tree DIR` writes the module result to a file named after the host.
    os.remove(path / "facts" / "gpu-a100-02.json")
    dump(path / "facts" / "gpu-a100-02", module_result)
    assert report_for(str(path))["nodes"][0]["gpus"] == expected


def test_facts_without_driver_or_with_unreadable_gpus_degrade(snapshot_copy):
    path = snapshot_copy("allocation_memory_full")
    module_result = load(path / "facts" / "gpu-a100-02.json")
    facts = module_result["ansible_facts"]["gpu_facts"]
    facts["gpus"][3] = {"index": 3, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": None,
                        "memory_used_mib": None, "error": "reading memory info: GPU is lost"}
    dump(path / "facts" / "gpu-a100-02.json", module_result)
    report = report_for(str(path))
    node = node_of(report, "gpu-a100-02")
    assert [g["index"] for g in node["gpus"]] == [0, 1, 2, 4, 5, 6, 7]
    assert node["check"] == "memory"
    assert any("gpus[3]: gpu_facts could not read this GPU (reading memory info: GPU is lost)" in n
               for n in report["notes"])

    dump(path / "facts" / "gpu-a100-02.json", {"ansible_facts": {"gpu_facts": {
        "driver_available": False, "driver_error": "NVML Shared Library Not Found", "gpus": []}}})
    report = report_for(str(path))
    node = node_of(report, "gpu-a100-02")
    assert node["gpus"] == [] and node["check"] == "allocation"
    assert report["not_run"][0] == {"check": "memory", "nodes": ["gpu-a100-02"],
                                    "reason": "no facts/<node>.json and no utilization data"}
    assert any("NVML Shared Library Not Found" in n for n in report["notes"])


def test_gpu_data_folder_adds_facts_and_samples(snapshot_copy, tmp_path):
    path = snapshot_copy("allocation_timeslicing")
    gpu_data = tmp_path / "gpu-data"
    gpu_data.mkdir()
    shutil.move(str(path / "facts"), str(gpu_data / "facts"))
    shutil.move(str(path / "utilization"), str(gpu_data / "utilization"))
    code, out, err = run_cli("--snapshot", str(path), "--gpu-data", str(gpu_data), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"] == report_for(fixture("allocation_timeslicing"))["nodes"]
    code, _out, err = run_cli("--snapshot", str(path), "--gpu-data", str(tmp_path / "none"))
    assert code == 2 and "--gpu-data is not a directory" in err


def test_gated_pod_waits_on_its_gates(snapshot_copy):
    path = snapshot_copy("placement_selector")
    pods = load(path / "pods.json")
    pods["items"][0]["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    dump(path / "pods.json", pods)
    pod = pod_of(report_for(str(path)), "wants-a100")
    assert (pod["check"], pod["status"]) == (None, "gated")
    assert "example.com/quota" in pod["summary"]


# --------------------------------------------------------------------------------------
# Live mode


class _FakeCoreV1Api:
    documents = {}

    def __init__(self, api_client):
        self.api_client = api_client

    def list_node(self):
        return self.documents["nodes"]

    def list_pod_for_all_namespaces(self):
        return self.documents["pods"]

    def list_event_for_all_namespaces(self, field_selector=None):
        assert field_selector == "reason=FailedScheduling"
        return self.documents["events"]


class _NoDraResourceV1Api:
    """A cluster that serves no resource.k8s.io/v1: the API server answers 404."""

    def __init__(self, api_client):
        pass

    def _missing(self):
        import kubernetes

        raise kubernetes.client.exceptions.ApiException(status=404, reason="Not Found")

    def list_resource_slice(self):
        self._missing()

    def list_resource_claim_for_all_namespaces(self):
        self._missing()


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: me, user: {token: x}}]
contexts: [{name: lab, context: {cluster: lab, user: me}}]
current-context: lab
"""


def test_live_mode_reads_the_cluster_through_the_kubernetes_client(monkeypatch, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    (tmp_path / "kc").write_text(KUBECONFIG)
    seen = {}

    def new_client(config_file=None, context=None):
        seen.update(config_file=config_file, context=context)
        return kubernetes.client.ApiClient()

    _FakeCoreV1Api.documents = {name: load(os.path.join(fixture("placement_taint"), name + ".json"))
                                for name in ("nodes", "pods", "events")}
    monkeypatch.setattr(kubernetes.config, "new_client_from_config", new_client)
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", _FakeCoreV1Api)
    monkeypatch.setattr(kubernetes.client, "ResourceV1Api", _NoDraResourceV1Api)
    code, out, err = run_cli("--kubeconfig", str(tmp_path / "kc"), "--context", "lab", "-o", "json")
    assert code == 0, err
    assert seen == {"config_file": str(tmp_path / "kc"), "context": "lab"}
    live = json.loads(out)
    offline = report_for(fixture("placement_taint"))
    assert [(p["name"], p["check"]) for p in live["pods"]] == [(p["name"], p["check"]) for p in offline["pods"]]
    assert live["source"] == "context lab"
    assert any("--gpu-data" in note for note in live["notes"])
    assert live["dra"] is None and any("serves no resource.k8s.io/v1" in note for note in live["notes"])


def test_live_mode_errors_are_clear(monkeypatch, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")

    def broken(config_file=None, context=None):
        raise kubernetes.config.ConfigException("Invalid kube-config file. No configuration found.")

    (tmp_path / "kc").write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kc"))
    monkeypatch.setattr(kubernetes.config, "new_client_from_config", broken)
    code, _out, err = run_cli("--context", "lab")
    # A kubeconfig the client refuses is bad input, like every malformed input file.
    assert code == 2
    assert "kubeconfig (default: $KUBECONFIG or ~/.kube/config) context lab: Invalid kube-config file" in err
    assert "Traceback" not in err


def test_live_mode_without_the_kubernetes_client(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    code, _out, err = run_cli("--context", "lab")
    assert code == 1
    assert "pip install 'gpuprov[cluster]'" in err


def test_snapshot_and_live_options_exclude_each_other():
    code, _out, err = run_cli("--snapshot", EXAMPLE, "--context", "lab")
    assert code == 2
    assert "give one or the other" in err


def _two_gpu_pod(path, name="train-8", count="2"):
    pods = load(path / "pods.json")
    pod = next(p for p in pods["items"] if p["metadata"]["name"] == name)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = count
    dump(path / "pods.json", pods)


def test_pending_two_gpu_pod_is_not_offered_time_slicing(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    _two_gpu_pod(path)
    report = report_for(str(path))
    pod = pod_of(report, "train-8")
    assert pod["requests"] == {"nvidia.com/gpu": 2}
    assert pod["check"] == "allocation" and pod["status"] == "multi-gpu"
    assert "time-slicing or MPS would not help" in pod["summary"]
    assert "failRequestsGreaterThanOne" in pod["summary"]
    remedy = pod["remedy"]
    assert remedy["sharing"] is None and remedy["added_slots"] == 0
    assert "replicas" not in remedy["summary"]  # no time-slicing recommendation for this pod
    assert "whole GPUs" in remedy["summary"] and "fail_requests_greater_than_one: false" in remedy["summary"]
    # The one-GPU pod of the same snapshot still gets the time-slicing remedy.
    assert "replicas: 3} on gpu-a100-01" in pod_of(report_for(fixture("allocation_timeslicing")), "train-8")[
        "remedy"]["summary"]


def test_two_gpu_pod_with_free_shared_slots_is_rejected_by_the_plugin(snapshot_copy):
    # The node is time-sliced x4 (32 slots) and has room: the scheduler would place the pod, and
    # the plugin would refuse two shared slots.
    path = snapshot_copy("allocation_timeslicing")
    os.remove(path / "utilization" / "gpu-a100-01.csv")
    nodes = load(path / "nodes.json")
    status = nodes["items"][0]["status"]
    status["capacity"]["nvidia.com/gpu"] = status["allocatable"]["nvidia.com/gpu"] = "32"
    dump(path / "nodes.json", nodes)
    _two_gpu_pod(path)
    pod = pod_of(report_for(str(path)), "train-8")
    assert pod["status"] == "multi-gpu" and "share their GPUs" in pod["summary"]
    assert "fail_requests_greater_than_one: false on gpu-a100-01" in pod["remedy"]["summary"]


def test_hami_requests_are_read_and_not_counted_as_node_resources(snapshot_copy):
    path = snapshot_copy("allocation_timeslicing")
    pods = load(path / "pods.json")
    pod = next(p for p in pods["items"] if p["metadata"]["name"] == "train-8")
    pod["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpumem": "10240", "nvidia.com/gpucores": "30"})
    dump(path / "pods.json", pods)
    pod = pod_of(report_for(str(path)), "train-8")
    assert pod["requests"] == {"nvidia.com/gpu": 1}
    assert pod["hami"] == {"nvidia.com/gpumem": 10240, "nvidia.com/gpucores": 30}
    assert any("asks HAMi for 10240 MiB, 30% of the cores per GPU" in e for e in pod["evidence"])
    # A percentage over 100 is bad input, as HAMi's webhook says.
    pods = load(path / "pods.json")
    pods["items"][-1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "150"
    dump(path / "pods.json", pods)
    with pytest.raises(diag.SnapshotError, match="nvidia.com/gpucores: 150 is a percentage, at most 100"):
        report_for(str(path))
