"""The stub kubernetes.core.k8s_drain (tests/stubs, still used by the fleet tests' stub
cluster) held against the real module on a real API server (tests/controlplane.py): the same
node, pods and budget in both, the same call, the same outcome and message."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import cluster_objects as objects
from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(REPO, "tests", "stubs")
NODE = "gpu-a100-01"

pytestmark = pytest.mark.control_plane


def adhoc(tmp_path, env, args):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "-i", str(inventory), "localhost",
                           "-m", "kubernetes.core.k8s_drain", "-a", json.dumps(dict(args, name=NODE))],
                          cwd=REPO, env=dict(env, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp")),
                          capture_output=True, text=True, timeout=300)
    match = re.search(r"=> (\{.*\})\s*$", proc.stdout, re.S)
    result = json.loads(match.group(1)) if match else {}
    return proc.returncode, result.get("msg") or result.get("result"), proc.stdout


def stub_env(tmp_path, state):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(state))
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
                GPUPROV_FAKE_K8S_STATE=str(path)), path


CASES = {
    # case: (real pods to make, stub pods, stub budgets, k8s_drain delete_options)
    "a budget refuses the eviction": ("web", {"team/WEB": {"nodeName": NODE, "labels": {"app": "web"},
                                                           "owner": {"kind": "ReplicaSet", "name": "web-1"}}},
                                      {"team/web": {"selector": {"app": "web"}, "disruptionsAllowed": 0,
                                                    "refusalsBeforeReady": None}},
                                      {"ignore_daemonsets": True}),
    "an unmanaged pod is refused without force": ("scratch", {"team/scratch": {"nodeName": NODE, "labels": {"app": "scratch"},
                                                                              "owner": None}},
                                                  {}, {"ignore_daemonsets": True}),
    "an unmanaged pod with an emptyDir goes with delete_emptydir_data": (
        "scratch-emptydir", {"team/scratch": {"nodeName": NODE, "labels": {"app": "scratch"}, "owner": None,
                                              "emptyDir": True}},
        {}, {"ignore_daemonsets": True, "delete_emptydir_data": True}),
    # kubernetes.core 6.2.0 k8s_drain.py passes terminate_grace_period only when it is truthy
    # ("if self._drain_options.get('terminate_grace_period')"): 0 leaves the pod's own grace
    # period, so a pod that takes an hour to stop is still terminating when wait_timeout ends.
    "terminate_grace_period 0 keeps the pod's own grace period": (
        "slow", {"team/WEB": {"nodeName": NODE, "labels": {"app": "slow"},
                              "owner": {"kind": "ReplicaSet", "name": "slow-1"}, "terminationSeconds": 3600}},
        {}, {"ignore_daemonsets": True, "terminate_grace_period": 0, "wait_timeout": 3, "wait_sleep": 1}),
}
TIMEOUT_WARNING = "timeout reached while pods were still running."


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_stub_drain_answers_as_the_real_module(cluster, tmp_path, case):
    real_pods, stub_pods, stub_pdbs, options = CASES[case]
    cluster.add_node(NODE)
    cluster.create(objects.namespace("team"))
    wait_for(lambda: cluster.core().list_namespaced_service_account("team").items, what="the ServiceAccount")
    if real_pods == "web":
        cluster.create(objects.deployment("web", "team", replicas=1))
        cluster.create(objects.pod_disruption_budget("web", "team", "web", min_available=1))
        wait_for(lambda: cluster.policy().read_namespaced_pod_disruption_budget("web", "team").status.current_healthy == 1,
                 what="the budget")
    elif real_pods == "slow":
        cluster.create(objects.deployment("slow", "team", replicas=1, grace=3600, shutdown_seconds=3600))
    else:
        cluster.create(objects.bare_pod("scratch", "team", NODE, emptydir=real_pods.endswith("emptydir")))
    pod = wait_for(lambda: [p for p in cluster.core().list_namespaced_pod("team").items if p.status.phase == "Running"],
                   what="the pod")[0].metadata.name

    real = adhoc(tmp_path, cluster.ansible_env(), {"kubeconfig": cluster.kubeconfig, "delete_options": options})
    env, state_path = stub_env(tmp_path, {"nodes": {NODE: {"labels": {}}}, "pods": dict(
        (key.replace("WEB", pod), value) for key, value in stub_pods.items()), "pdbs": stub_pdbs})
    stub = adhoc(tmp_path, env, {"kubeconfig": cluster.kubeconfig, "delete_options": options})

    assert (real[0] != 0) == (stub[0] != 0), (real[2], stub[2])
    assert real[1] and real[1] == stub[1], (real[2], stub[2])
    left_real = sorted("team/" + p.metadata.name for p in cluster.core().list_namespaced_pod("team").items
                       if p.spec.node_name == NODE and not p.metadata.deletion_timestamp)
    left_stub = sorted(k for k, p in json.loads(state_path.read_text())["pods"].items() if not p.get("deleting"))
    assert left_real == left_stub
    # Pods evicted but still stopping (a replacement may run elsewhere: not counted).
    stopping_real = sorted("team/" + p.metadata.name for p in cluster.core().list_namespaced_pod("team").items
                           if p.metadata.deletion_timestamp)
    stopping_stub = sorted(k for k, p in json.loads(state_path.read_text())["pods"].items() if p.get("deleting"))
    assert stopping_real == stopping_stub
    assert (TIMEOUT_WARNING in real[2]) == (TIMEOUT_WARNING in stub[2]), (real[2], stub[2])
