"""The kubelet_topology role's own drain and uncordon (tasks/drain.yml) respect the node's cordon
state, against the stub kubernetes.core: a node cordoned before the run stays cordoned, and a
node site.yml already drained (kubelet_topology_node_drained) is neither drained nor uncordoned
again."""
import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(REPO, "tests", "stubs")
PLAYBOOK = os.path.join(REPO, "tests", "playbooks", "kubelet_drain.yml")
BIN = os.path.dirname(sys.executable)
NODE = "gpu-a100-01"

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")),
                                reason="ansible-playbook is not installed beside this Python")


def run(tmp_path, unschedulable, annotations=None, **variables):
    state = tmp_path / "cluster.json"
    log = tmp_path / "calls.jsonl"
    state.write_text(json.dumps({"nodes": {NODE: {"labels": {}, "unschedulable": unschedulable,
                                                  "annotations": annotations or {}}},
                                 "pods": {"team/web-1": {"nodeName": NODE, "labels": {"app": "web"},
                                                         "owner": {"kind": "ReplicaSet", "name": "web-7d9"}}}}))
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {NODE: {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gpuprov_kubeconfig": str(tmp_path / "kubeconfig")}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
               GPUPROV_FAKE_K8S_STATE=str(state), GPUPROV_FAKE_CALL_LOG=str(log), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), PLAYBOOK,
                           "-e", json.dumps(variables)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    drains = [json.loads(line)["params"]["state"] for line in log.read_text().splitlines()
              if json.loads(line)["tool"] == "kubernetes.core.k8s_drain"] if log.exists() else []
    return proc, json.loads(state.read_text()), drains


def test_the_role_uncordons_a_node_it_cordoned(tmp_path):
    proc, state, drains = run(tmp_path, unschedulable=False)
    assert drains == ["drain", "uncordon"], proc.stdout
    assert not state["nodes"][NODE].get("unschedulable")
    assert "team/web-1" not in state["pods"]


def test_the_role_marks_its_cordon_while_it_holds_it(tmp_path):
    proc, state, _drains = run(tmp_path, unschedulable=False)
    patches = [json.loads(line)["params"]["definition"]["metadata"].get("annotations")
               for line in (tmp_path / "calls.jsonl").read_text().splitlines()
               if json.loads(line)["tool"] == "kubernetes.core.k8s"]
    assert patches == [{"gpuprov.io/cordoned-by": "gpuprov"}, {"gpuprov.io/cordoned-by": None}], proc.stdout
    assert "gpuprov.io/cordoned-by" not in state["nodes"][NODE]["annotations"]


def test_a_node_a_failed_gpuprov_run_left_cordoned_is_uncordoned(tmp_path):
    proc, state, drains = run(tmp_path, unschedulable=True, annotations={"gpuprov.io/cordoned-by": "gpuprov"})
    assert drains == ["drain", "uncordon"], proc.stdout
    assert not state["nodes"][NODE]["unschedulable"]
    assert "gpuprov.io/cordoned-by" not in state["nodes"][NODE]["annotations"]


def test_a_node_cordoned_before_the_run_stays_cordoned_through_the_kubelet_path(tmp_path):
    proc, state, drains = run(tmp_path, unschedulable=True)
    assert drains == ["drain"]  # drained for the restart, never uncordoned
    assert state["nodes"][NODE]["unschedulable"] is True
    assert "was cordoned before this run and stays cordoned" in proc.stdout


def test_a_node_the_caller_drained_is_not_drained_or_uncordoned_again(tmp_path):
    _proc, state, drains = run(tmp_path, unschedulable=True, kubelet_topology_node_drained=True)
    assert drains == []
    assert state["nodes"][NODE]["unschedulable"] is True
    assert "team/web-1" in state["pods"]
