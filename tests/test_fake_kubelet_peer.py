"""The fake kubelet judged by the kubelet's own code (GPUPROV_KUBELET_PEER: the tests/peers
binary), and its own model, kept for runs without Go, held against that code."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.configz import same_value
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.kubelet_peerlib import FAKE_KUBELET, KubeletFiles
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peer_binary

pytestmark = pytest.mark.peers

CHECKPOINT_NONE = '{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'
# The keys gpuprov manages and reads back from configz.
COMPARED = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
            "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
            "reservedSystemCPUs", "kubeReserved.cpu", "systemReserved.cpu", "memoryManagerPolicy",
            "reservedMemory", "evictionHard.memory.available")


def value_at(config, dotted):
    node = config
    parts = dotted.split(".", 1) if dotted.startswith("evictionHard") else dotted.split(".")
    for key in parts:
        node = node.get(key) if isinstance(node, dict) else None
    return node


class Node(KubeletFiles):
    def __init__(self, tmp_path, **kwargs):
        super(Node, self).__init__(tmp_path, **kwargs)
        self.status = os.path.join(self.root, "status.json")
        self.call_log = os.path.join(self.root, "calls.jsonl")

    def boot(self, *flags, peer=True, config_dir=True):
        env = dict(os.environ, GPUPROV_FAKE_CALL_LOG=self.call_log, GPUPROV_SYSFS_ROOT=self.sysfs)
        env.pop("GPUPROV_KUBELET_PEER", None)
        if peer:
            env["GPUPROV_KUBELET_PEER"] = peer_binary() if peer is True else peer
        argv = [sys.executable, FAKE_KUBELET, "boot", "--config", self.config, "--root-dir",
                self.state_dir, "--status", self.status]
        if config_dir:
            argv += ["--config-dir", self.config_dir]
        if flags:
            argv += ["--"] + list(flags)
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        return result

    def status_after(self, *flags, **kwargs):
        result = self.boot(*flags, **kwargs)
        assert result.returncode == 0, result.stderr
        with open(self.status) as handle:
            return json.load(handle)

    def checkpoint(self, name, text):
        with open(os.path.join(self.state_dir, name), "w") as handle:
            handle.write(text)

    def read(self, name):
        with open(os.path.join(self.state_dir, name)) as handle:
            return json.loads(handle.read())


def test_the_peer_judges_and_its_checkpoints_and_configz_are_the_kubelets(tmp_path):
    node = Node(tmp_path)
    node.drop_in("50-gpuprov.conf", 'cpuManagerPolicy: static\nreservedSystemCPUs: "0,8"\n'
                                    'kubeReserved:\n  cpu: "1"\n  memory: 256Mi\n')
    status = node.status_after()
    assert status["healthy"] is True and status["judge"] == "peer", status
    running = status["effective_config"]
    assert running["kind"] == "KubeletConfiguration"
    # The kubelet's rewrite: kubeReserved loses cpu, systemReserved.cpu counts the CPUs.
    assert running["kubeReserved"] == {"ephemeral-storage": "1Gi", "memory": "256Mi"}
    assert running["systemReserved"]["cpu"] == "2"
    cpu_state = node.read("cpu_manager_state")
    assert cpu_state["policyName"] == "static" and cpu_state["checksum"] != 0 and "data" in cpu_state
    assert cpu_state["defaultCpuSet"] == "0-15"


def test_a_refused_checkpoint_fails_after_healthz_with_the_kubelets_words(tmp_path):
    node = Node(tmp_path)
    node.checkpoint("cpu_manager_state", CHECKPOINT_NONE)
    node.drop_in("50-gpuprov.conf", 'cpuManagerPolicy: static\nreservedSystemCPUs: "0,8"\n')
    status = node.status_after()
    assert status["healthy"] is False and status["stage"] == "container-manager"
    assert status["error"] == (
        'start cpu manager error: could not restore state from checkpoint: configured policy '
        '"static" differs from state checkpoint policy "none", please drain this node and delete '
        'the CPU manager checkpoint file "%s" before restarting Kubelet'
        % os.path.join(node.state_dir, "cpu_manager_state"))
    # The checkpoint the kubelet refused is left as it was.
    assert open(os.path.join(node.state_dir, "cpu_manager_state")).read() == CHECKPOINT_NONE


def test_a_refused_config_fails_before_healthz(tmp_path):
    node = Node(tmp_path)
    node.drop_in("50-gpuprov.conf", 'cpuManagerPolicy: static\nreservedSystemCPUs: "0,8"\n'
                                    'kubeReservedCgroup: /kube.slice\n')
    status = node.status_after()
    assert status["stage"] == "config"
    assert "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup" in status["error"]


def test_kubelet_flags_reach_the_peer(tmp_path):
    node = Node(tmp_path)
    running = node.status_after("--kube-reserved=memory=1Gi")["effective_config"]
    assert running["kubeReserved"] == {"memory": "1Gi"}


def test_a_peer_that_cannot_run_is_an_error_not_a_fall_back(tmp_path):
    node = Node(tmp_path)
    result = node.boot(peer=str(tmp_path / "missing"))
    assert result.returncode != 0
    assert "is not an executable" in result.stderr
    assert not os.path.exists(node.status)


# The fake's own model against the kubelet: drop-ins, a checkpoint left by the none policy.
MODEL_CASES = [
    ("kubeadm config as it is", {}, None),
    ("static with reserved CPUs", {"50-gpuprov.conf": 'cpuManagerPolicy: static\nreservedSystemCPUs: "0,8"\n'
                                                     'kubeReserved:\n  cpu: "1"\n'}, None),
    ("static, checkpoint of the none policy", {"50-gpuprov.conf": 'cpuManagerPolicy: static\n'
                                                                 'reservedSystemCPUs: "0,8"\n'},
     CHECKPOINT_NONE),
    ("none policy, its own checkpoint", {}, CHECKPOINT_NONE),
    ("static without a reservation", {"50-gpuprov.conf": "cpuManagerPolicy: static\n"}, None),
    ("a later drop-in wins, in a subfolder", {
        "50-gpuprov.conf": 'cpuManagerPolicy: static\nreservedSystemCPUs: "0,8"\n',
        "90-site/override.conf": "cpuManagerPolicy: none\nreservedSystemCPUs: null\n"}, CHECKPOINT_NONE),
    ("eviction default kept under a partial drop-in map", {
        "10-site.conf": "evictionHard:\n  nodefs.available: 5%\n",
        "50-gpuprov.conf": "memoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 0\n  limits:\n"
                           "    memory: 434Mi\n- numaNode: 1\n  limits:\n    memory: 434Mi\n"}, None),
    ("reservedMemory with the wrong sum", {
        "50-gpuprov.conf": "memoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 0\n  limits:\n"
                           "    memory: 1Gi\n"}, None),
    ("topology and defaults", {"50-gpuprov.conf": "topologyManagerPolicy: single-numa-node\n"
                                                  "cpuManagerReconcilePeriod: 1m\n"}, None),
    ("not a KubeletConfiguration", {"50-bad.conf": None}, None),
]
# Refusals only the peer knows: the fake's own model accepts these. Nothing else may differ.
FAKE_MODEL_LENIENT = {
    "reservedMemory with the wrong sum":
        "the reservedMemory sum (the Memory Manager's validateReservedMemory) is not modelled",
}


def lay_out(node, drop_ins, checkpoint):
    for name, text in drop_ins.items():
        if text is None:
            path = os.path.join(node.config_dir, name)
            with open(path, "w") as handle:
                handle.write("cpuManagerPolicy: none\n")
        else:
            node.drop_in(name, text)
    if checkpoint:
        node.checkpoint("cpu_manager_state", checkpoint)


@pytest.mark.parametrize("name, drop_ins, checkpoint", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_the_fakes_own_model_says_what_the_kubelet_says(tmp_path, name, drop_ins, checkpoint):
    statuses = {}
    for judge in ("peer", "fake"):
        node = Node(tmp_path / judge)
        lay_out(node, drop_ins, checkpoint)
        statuses[judge] = node.status_after(peer=(judge == "peer"))
    peer, fake = statuses["peer"], statuses["fake"]
    if name in FAKE_MODEL_LENIENT:
        assert fake["healthy"] and not peer["healthy"], (peer["error"], FAKE_MODEL_LENIENT[name])
        return
    assert (fake["healthy"], fake["stage"]) == (peer["healthy"], peer["stage"]), (fake["error"], peer["error"])
    if peer["healthy"]:
        differ = [key for key in COMPARED
                  if not same_value(key.split(".", 1)[0] if key.startswith("evictionHard") else key,
                                    value_at(fake["effective_config"], key),
                                    value_at(peer["effective_config"], key))]
        assert differ == [], dict((k, (value_at(fake["effective_config"], k),
                                       value_at(peer["effective_config"], k))) for k in differ)
    elif fake["error"].startswith("failed to load kubelet config file"):
        # A file that does not load: the same file is named (the kubelet's wording differs).
        bad = [name for name in drop_ins if name in fake["error"]]
        assert bad and bad[0] in peer["error"], (fake["error"], peer["error"])
    else:
        # The same refusal in the kubelet's words (the peer adds the container manager's prefix).
        assert fake["error"].split(": ", 1)[-1][:60] in peer["error"], (fake["error"], peer["error"])
