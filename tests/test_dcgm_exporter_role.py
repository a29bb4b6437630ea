"""The dcgm_exporter role against the kubernetes.core stubs, and its values against the
Kubernetes schema (kubernetes_validate)."""
import copy
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dcgm_exporter
from testlib import REPO

STUBS = os.path.join(REPO, "tests", "stubs")
PLAYBOOK = os.path.join(STUBS, "dcgm_exporter_playbook.yml")
INVENTORY = os.path.join(REPO, "examples", "inventory.yml")
COUNTERS = os.path.join(REPO, "roles", "dcgm_exporter", "files", "gpuprov-counters.csv")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def run(tmp_path, crds=(), *extra):
    state, log = tmp_path / "cluster.json", tmp_path / "calls.jsonl"
    state.write_text(json.dumps({"crds": list(crds)}))
    if log.exists():
        log.unlink()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
               GPUPROV_FAKE_K8S_STATE=str(state), GPUPROV_FAKE_CALL_LOG=str(log), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", INVENTORY, PLAYBOOK] + list(extra), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls, json.loads(state.read_text())


def helm_values(calls):
    (call,) = [c for c in calls if c["tool"] == "kubernetes.core.helm"]
    return call["params"]


def test_no_servicemonitor_without_its_crd(tmp_path):
    proc, calls, state = run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    params = helm_values(calls)
    assert params["chart_ref"] == "gpu-helm-charts/dcgm-exporter" and params["chart_version"] == "4.8.2"
    values = params["release_values"]
    assert values["serviceMonitor"] == {"enabled": False, "honorLabels": True, "interval": "15s"}
    assert values["image"] == {"repository": "nvcr.io/nvidia/k8s/dcgm-exporter", "tag": "4.5.3-4.8.2-distroless"}
    fields = [line.split(",")[0] for line in values["customMetrics"].splitlines() if line and not line.startswith("#")]
    for field in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_DRAM_ACTIVE",
                  "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_FB_USED",
                  "DCGM_FI_DEV_FB_FREE"):
        assert field in fields
    # One release, in its own namespace; the role ran once, not per host.
    assert list(state["releases"]) == ["gpu-monitoring/dcgm-exporter"]
    assert len([c for c in calls if c["tool"] == "kubernetes.core.k8s_info"]) == 1


def test_servicemonitor_where_the_crd_exists(tmp_path):
    proc, calls, _ = run(tmp_path, ["servicemonitors.monitoring.coreos.com"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert helm_values(calls)["release_values"]["serviceMonitor"]["enabled"] is True


def test_a_counters_file_without_what_diagnose_reads_fails_before_the_cluster(tmp_path):
    bad = tmp_path / "counters.csv"
    bad.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\nDCGM_FI_DEV_FB_USED, gouge, typo\n")
    proc, calls, state = run(tmp_path, (), "-e", "dcgm_exporter_counters_file=%s" % bad)
    assert proc.returncode != 0
    assert "line 2: type 'gouge'" in proc.stdout and "gpuprov diagnose needs DCGM_FI_PROF_SM_ACTIVE" in proc.stdout
    assert not [c for c in calls if c["tool"].startswith("kubernetes.core.helm")]
    assert state.get("releases", {}) == {}


def test_values_keep_the_exporter_off_paused_nodes_and_validate():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    with open(COUNTERS) as handle:
        values = dcgm_exporter.exporter_values(handle.read(), False, collect_interval_ms=10000)
    assert values["arguments"] == ["-f", "/etc/dcgm-exporter/default-counters.csv", "-c", "10000"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "gpuprov.io/gpu-operands", "operator": "NotIn", "values": ["paused"]} in term["matchExpressions"]
    # The pod spec fields the chart's DaemonSet template takes from these values.
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dcgm-exporter",
                                                                            "namespace": "gpu-monitoring"},
                 "spec": {"selector": {"matchLabels": {"app": "dcgm"}}, "template": {
                     "metadata": {"labels": {"app": "dcgm"}},
                     "spec": {"affinity": values["affinity"], "tolerations": values["tolerations"],
                              "containers": [{"name": "exporter", "image": "%s:%s" % (values["image"]["repository"],
                                                                                       values["image"]["tag"]),
                                              "args": values["arguments"]}]}}}}
    kubernetes_validate.validate(daemonset, "1.31", strict=True)
    broken = copy.deepcopy(daemonset)
    broken["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.31", strict=True)


@pytest.mark.parametrize("text,message", [
    ("", "gpuprov diagnose needs DCGM_FI_PROF_SM_ACTIVE"),
    ("SM_ACTIVE, gauge, x\n", "line 1: 'SM_ACTIVE' is not a DCGM field name"),
    ("DCGM_FI_PROF_SM_ACTIVE, gauge\n", "line 1: expected `DCGM_FIELD, type, help`"),
    ("DCGM_FI_PROF_SM_ACTIVE, gauge, a\nDCGM_FI_PROF_SM_ACTIVE, gauge, b\n", "listed more than once"),
])
def test_counters_are_checked(text, message):
    with pytest.raises(dcgm_exporter.DcgmExporterError) as error:
        dcgm_exporter.parse_counters(text)
    assert any(message in problem for problem in error.value.problems)


def test_the_shipped_counters_pass():
    with open(COUNTERS) as handle:
        counters = dcgm_exporter.parse_counters(handle.read())
    assert ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version") in counters
