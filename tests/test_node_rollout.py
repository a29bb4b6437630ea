"""Drain, device plugin restart and uncordon around a disruptive node change, against the stub
kubernetes.core (tests/stubs): k8s_drain as the real 6.2.0 module behaves (fails at once on a
PodDisruptionBudget refusal, only warns when its wait_timeout runs out, checks emptyDir before
owners), pods, PDBs and the device plugin chart's pods in the fake cluster."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster import gpu_operand_affinity
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(REPO, "tests", "stubs")
EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")
PLAYBOOK = os.path.join(REPO, "tests", "playbooks", "node_rollout.yml")
BIN = os.path.dirname(sys.executable)
NODE = "gpu-a100-01"
PLUGIN_DS = "nvidia-device-plugin/nvidia-device-plugin"
GFD_DS = "nvidia-device-plugin/nvidia-device-plugin-gpu-feature-discovery"

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")),
                                reason="ansible-playbook is not installed beside this Python")


@pytest.fixture(scope="module")
def plan():
    return plan_inventory([EXAMPLES]).result["nodes"][NODE]


def cluster_state(plan, unschedulable=False, pods=None, pdbs=None, allocatable=None, devices=None):
    """One GPU node running the device plugin chart (plugin and GFD pods, each with an emptyDir
    volume as the chart's are) and the given workload pods."""
    config = plan["device_plugin"]["config_name"]
    return {
        "nodes": {NODE: {"labels": {"nvidia.com/device-plugin.config": config, "nvidia.com/gpu.present": "true"},
                         "unschedulable": unschedulable,
                         "gpu": True, "devices": devices if devices is not None else plan["resources"],
                         "allocatable": allocatable if allocatable is not None else
                         dict((k, str(v)) for k, v in plan["resources"].items())}},
        "releases": {PLUGIN_DS: {"chart": "nvidia-device-plugin", "version": "0.20.0", "revision": 1,
                                 "daemonset": "nvidia-device-plugin", "release_name": "nvidia-device-plugin",
                                 "values": {"affinity": gpu_operand_affinity(),
                                            "config": {"default": "exclusive", "map": {
                                                "exclusive": "version: v1\n", config: "version: v1\n"}}}}},
        "daemonset_pods": {PLUGIN_DS: {NODE: 1}, GFD_DS: {NODE: 1}},
        "pods": pods or {},
        "pdbs": pdbs or {},
    }


def web_pod(**extra):
    return dict({"nodeName": NODE, "labels": {"app": "web"}, "owner": {"kind": "ReplicaSet", "name": "web-7d9"}},
                **extra)


class Cluster:
    def __init__(self, tmp_path, state):
        self.tmp_path = tmp_path
        self.state_path = tmp_path / "cluster.json"
        self.log_path = tmp_path / "calls.jsonl"
        self.state_path.write_text(json.dumps(state))
        self.inventory = tmp_path / "inventory.yml"
        self.inventory.write_text(yaml.safe_dump({"all": {"hosts": {NODE: {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "gpuprov_kubeconfig": str(tmp_path / "kubeconfig")}}}}))

    def env(self):
        return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
                    GPUPROV_FAKE_K8S_STATE=str(self.state_path), GPUPROV_FAKE_CALL_LOG=str(self.log_path),
                    ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(self.tmp_path / "tmp"))

    def run(self, **variables):
        variables = dict({"gpuprov_drain_timeout": 3, "gpuprov_drain_retry_delay": 1, "gpu_mig_poll_interval": 1,
                          "gpu_mig_operand_timeout": 2, "gpu_mig_resources_timeout": 1}, **variables)
        return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(self.inventory), PLAYBOOK,
                               "-e", json.dumps(variables)], cwd=REPO, env=self.env(), capture_output=True,
                              text=True, timeout=300)

    def adhoc(self, module, args):
        return subprocess.run([os.path.join(BIN, "ansible"), "-i", str(self.inventory), NODE, "-m", module,
                               "-a", json.dumps(args)], cwd=REPO, env=self.env(), capture_output=True,
                              text=True, timeout=120)

    def state(self):
        return json.loads(self.state_path.read_text())

    def calls(self, tool):
        if not self.log_path.exists():
            return []
        return [json.loads(line)["params"] for line in self.log_path.read_text().splitlines()
                if json.loads(line)["tool"] == "kubernetes.core." + tool]


def test_the_stub_drain_fails_at_once_on_a_disruption_budget(tmp_path, plan):
    """What kubernetes.core.k8s_drain does on its own: one refusal fails the task, the node
    stays cordoned, and the next attempt (after the replacement pod got ready) succeeds."""
    pdbs = {"team/web": {"selector": {"app": "web"}, "disruptionsAllowed": 0, "refusalsBeforeReady": 1}}
    cluster = Cluster(tmp_path, cluster_state(plan, pods={"team/web-1": web_pod()}, pdbs=pdbs))
    args = {"name": NODE, "delete_options": {"ignore_daemonsets": True, "delete_emptydir_data": True}}
    first = cluster.adhoc("kubernetes.core.k8s_drain", args)
    assert first.returncode != 0 and "would violate the pod's disruption budget" in first.stdout, first.stdout
    assert cluster.state()["nodes"][NODE]["unschedulable"] is True
    assert "team/web-1" in cluster.state()["pods"]
    second = cluster.adhoc("kubernetes.core.k8s_drain", args)
    assert second.returncode == 0, second.stdout
    assert "team/web-1" not in cluster.state()["pods"]


def test_the_stub_drain_evicts_daemonset_pods_with_emptydir_as_the_real_module_does(tmp_path, plan):
    """kubernetes.core 6.2.0 filter_pods checks emptyDir volumes before owners: with
    delete_emptydir_data it evicts the device plugin and GFD pods (their DaemonSet restarts
    them), without it the drain refuses them. gpuprov's pod selector keeps them out."""
    cluster = Cluster(tmp_path, cluster_state(plan))
    refused = cluster.adhoc("kubernetes.core.k8s_drain", {"name": NODE, "delete_options": {"ignore_daemonsets": True}})
    assert refused.returncode != 0
    assert "cannot delete Pods with local storage: nvidia-device-plugin/nvidia-device-plugin-gpu-a100-01-1" \
        in refused.stdout, refused.stdout
    assert cluster.state()["nodes"][NODE].get("unschedulable") is False  # the real module reverts its cordon
    evicted = cluster.adhoc("kubernetes.core.k8s_drain", {"name": NODE, "delete_options": {
        "ignore_daemonsets": True, "delete_emptydir_data": True}})
    assert evicted.returncode == 0, evicted.stdout
    assert cluster.state()["daemonset_pods"][PLUGIN_DS][NODE] == 2  # restarted by the eviction


def test_refused_evictions_are_retried_and_daemonset_pods_stay(tmp_path, plan):
    pdbs = {"team/web": {"selector": {"app": "web"}, "disruptionsAllowed": 0, "refusalsBeforeReady": 2}}
    pods = {"team/web-1": web_pod(),
            "team/cache-0": {"nodeName": NODE, "labels": {"app": "cache"}, "emptyDir": True,
                             "owner": {"kind": "StatefulSet", "name": "cache"}}}
    cluster = Cluster(tmp_path, cluster_state(plan, pods=pods, pdbs=pdbs))
    proc = cluster.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    drains = [c for c in cluster.calls("k8s_drain") if c["state"] == "drain"]
    assert len(drains) == 3  # two refusals, then the budget allows it
    assert all(c["pod_selectors"] == ["!pod-template-generation"] for c in drains)
    state = cluster.state()
    assert state["pods"] == {}  # the workload (emptyDir data included) is gone
    # The device plugin and GFD pods were not evicted (the node keeps its GPU operands).
    assert state["daemonset_pods"] == {PLUGIN_DS: {NODE: 1}, GFD_DS: {NODE: 1}}
    assert "NODE CHANGED" in proc.stdout
    assert state["nodes"][NODE]["unschedulable"] is False  # uncordoned: this run cordoned it


def test_a_budget_that_never_allows_stops_the_node_before_any_change(tmp_path, plan):
    pdbs = {"team/web": {"selector": {"app": "web"}, "disruptionsAllowed": 0, "refusalsBeforeReady": None}}
    cluster = Cluster(tmp_path, cluster_state(plan, pods={"team/web-1": web_pod()}, pdbs=pdbs))
    proc = cluster.run()
    assert proc.returncode != 0
    assert "NODE CHANGED" not in proc.stdout
    assert "gpu-a100-01: drain of node gpu-a100-01 did not finish: Failed to delete pod team/web-1" in proc.stdout
    assert "Nothing on the node was changed and it was uncordoned again" in proc.stdout
    # One attempt, then a retry every second until the 3 s timeout.
    assert len([c for c in cluster.calls("k8s_drain") if c["state"] == "drain"]) == 4
    state = cluster.state()
    assert "team/web-1" in state["pods"] and state["nodes"][NODE]["unschedulable"] is False


def test_pods_outlasting_the_drain_wait_stop_the_node(tmp_path, plan):
    """k8s_drain only warns when its wait_timeout runs out; gpuprov reads the pods back."""
    cluster = Cluster(tmp_path, cluster_state(plan, pods={"team/web-1": web_pod(terminationSeconds=3600)}))
    proc = cluster.run()
    assert proc.returncode != 0
    assert "timeout reached while pods were still running." in proc.stdout + proc.stderr
    assert "pods still on the node after 3s: team/web-1" in proc.stdout
    assert "NODE CHANGED" not in proc.stdout


def test_a_node_cordoned_before_the_run_stays_cordoned(tmp_path, plan):
    cluster = Cluster(tmp_path, cluster_state(plan, unschedulable=True, pods={"team/web-1": web_pod()}))
    proc = cluster.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NODE CHANGED" in proc.stdout
    assert "was cordoned before this run and stays cordoned" in proc.stdout
    assert cluster.state()["nodes"][NODE]["unschedulable"] is True
    assert [c["state"] for c in cluster.calls("k8s_drain")] == ["drain"]

    # Also when the drain fails: the node is left cordoned, as it was.
    pdbs = {"team/web": {"selector": {"app": "web"}, "disruptionsAllowed": 0, "refusalsBeforeReady": None}}
    cluster = Cluster(tmp_path, cluster_state(plan, unschedulable=True, pods={"team/web-1": web_pod()}, pdbs=pdbs))
    proc = cluster.run()
    assert proc.returncode != 0 and "it stays cordoned, as it was before the run" in proc.stdout
    assert cluster.state()["nodes"][NODE]["unschedulable"] is True


def test_a_node_a_failed_run_left_cordoned_is_uncordoned_by_the_next_run(tmp_path, plan):
    cluster = Cluster(tmp_path, cluster_state(plan, pods={"team/web-1": web_pod()}))
    failed = cluster.run(fail_change=True)
    assert failed.returncode != 0 and "NODE CHANGE FAILED" in failed.stdout
    node = cluster.state()["nodes"][NODE]
    # Cordoned by gpuprov, and marked so: the node is not taken for one cordoned by someone else.
    assert node["unschedulable"] is True and node["annotations"] == {"gpuprov.io/cordoned-by": "gpuprov"}

    again = cluster.run()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "was cordoned before this run" not in again.stdout
    node = cluster.state()["nodes"][NODE]
    assert node["unschedulable"] is False and "gpuprov.io/cordoned-by" not in node["annotations"]


def test_a_mig_change_restarts_the_plugin_and_waits_for_the_new_resources(tmp_path, plan):
    # The node's MIG layout changed; its config name (mig-mixed) did not, so no label change
    # restarts the plugin: it still advertises the old layout.
    stale = {"nvidia.com/mig-1g.10gb": "28"}
    state = cluster_state(plan, allocatable=stale)
    cluster = Cluster(tmp_path, state)
    proc = cluster.run()  # drain and uncordon alone
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cluster.state()["nodes"][NODE]["allocatable"] == stale

    cluster = Cluster(tmp_path, state)
    proc = cluster.run(mig_change=True, gpuprov_plan=plan)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = cluster.state()
    # The pause label took the chart's pods off the node; without it they came back afresh.
    assert after["daemonset_pods"][PLUGIN_DS][NODE] == 2
    assert after["daemonset_pods"][GFD_DS][NODE] == 2
    assert "gpuprov.io/gpu-operands" not in after["nodes"][NODE]["labels"]
    assert after["nodes"][NODE]["allocatable"] == dict((k, str(v)) for k, v in plan["resources"].items())
    patches = [c["definition"]["metadata"] for c in cluster.calls("k8s")]
    assert [p["labels"] for p in patches if "labels" in p] == [{"gpuprov.io/gpu-operands": "paused"},
                                                               {"gpuprov.io/gpu-operands": None}]
    # gpuprov's cordon mark, set with each run's drain and removed with its uncordon (the log
    # holds both runs of this test).
    assert [p["annotations"] for p in patches if "annotations" in p] == [{"gpuprov.io/cordoned-by": "gpuprov"},
                                                                         {"gpuprov.io/cordoned-by": None}] * 2


def test_a_plugin_that_advertises_other_devices_keeps_the_node_cordoned(tmp_path, plan):
    cluster = Cluster(tmp_path, cluster_state(plan, allocatable={"nvidia.com/gpu": "8"},
                                              devices={"nvidia.com/gpu": 8}))
    proc = cluster.run(mig_change=True, gpuprov_plan=plan)
    assert proc.returncode != 0
    assert "gpu-a100-01: allocatable nvidia.com/mig-1g.10gb is 0, the plan advertises 16" in proc.stdout
    assert "gpu-a100-01: allocatable nvidia.com/gpu is 8, the plan advertises none" in proc.stdout
    assert cluster.state()["nodes"][NODE]["unschedulable"] is True
