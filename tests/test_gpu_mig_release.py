"""The gpu_mig role releases what holds a GPU around a MIG change, on a local fake node.

The node's A100 is held by a running DCGM (nvidia-dcgm, a systemd unit of the fake systemctl)
and by a device-plugin pod's process; the fake cluster runs that pod with the pause affinity
gpuprov's charts carry. A GPU reset fails while either holds the GPU, so the MIG change only
succeeds when the role stops the service, pauses the operands, and starts/unpauses them
afterwards. nvidia-persistenced runs too, as on every DGX: it keeps the driver's own reset
inside nvmlDeviceSetMigMode from applying the change, but nvidia-smi -r has it let go of the
GPU, so the role leaves it running (mig-parted's hooks never stop it either).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from testlib import FAKES  # noqa: E402  (the fakes' one home)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(REPO, "tests", "stubs")
sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake)

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands  # noqa: E402

PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))
pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")

PERSISTENCED = "nvidia-persistenced.service"
DCGM = "nvidia-dcgm.service"
POD = "nvidia-device-plugin/nvidia-device-plugin-abcde"
MIG = {"strategy": "mig", "mig": {"config": "all-1g.10gb"}}


HAMI_POD = "kube-system/hami-device-plugin-fghij"


class HeldNode:
    """A fake node whose GPU a device-plugin pod holds: NVIDIA's (placed by gpuprov's pause
    affinity), or with ``hami`` HAMi's, which its chart places by the node label gpu=on alone."""

    def __init__(self, root, hami=False):
        self.root = root
        self.nvml_state = str(root / "nvml.json")
        self.systemd_state = str(root / "systemd.json")
        self.k8s_state = str(root / "cluster.json")
        self.call_log = str(root / "calls.jsonl")
        self.pod = subprocess.Popen(["sleep", "600"])  # the device plugin's process
        state = fake_pynvml.new_state(gpus=[("A100-80GB", 1)])
        socket = root / "run" / "nvidia-persistenced" / "socket"
        socket.parent.mkdir(parents=True)
        socket.write_text("")
        state["holders"] = [
            {"name": "nvidia-persistenced", "unit": PERSISTENCED, "persistence": True, "socket": str(socket)},
            {"name": "nvidia-dcgm", "unit": DCGM},
            {"name": "nvidia-device-plugin pod", "pid": self.pod.pid},
        ]
        fake_pynvml.save_state(state, self.nvml_state)
        with open(self.systemd_state, "w") as handle:
            json.dump({"units": {PERSISTENCED: {"active": True, "enabled": True},
                                 DCGM: {"active": True, "enabled": True}}}, handle)
        labels = {"feature.node.kubernetes.io/pci-10de.present": "true"}
        pods = {POD: {"nodeName": "localhost", "holder_pid": self.pod.pid,
                      "owner": {"kind": "DaemonSet", "name": "nvidia-device-plugin"},
                      "labels": {"app.kubernetes.io/instance": "nvidia-device-plugin"},
                      "affinity": gpu_operands.gpu_operand_affinity()}}
        if hami:
            # HAMi 2.10.0's device-plugin DaemonSet: nodeSelector from devicePlugin.nvidiaNodeSelector
            # (gpu: "on"), no affinity; the NVIDIA plugin stays off gpu=on nodes.
            labels["gpu"] = "on"
            pods = {HAMI_POD: {"nodeName": "localhost", "holder_pid": self.pod.pid,
                               "owner": {"kind": "DaemonSet", "name": "hami-device-plugin"},
                               "labels": {"app.kubernetes.io/component": "hami-device-plugin"},
                               "nodeSelector": {"gpu": "on"}}}
        with open(self.k8s_state, "w") as handle:
            json.dump({"nodes": {"localhost": {"labels": labels, "allocatable": {"nvidia.com/mig-1g.10gb": "7"}}},
                       "pods": pods}, handle)

    def env(self):
        env = dict(os.environ)
        env.update({
            "PATH": os.path.join(FAKES, "bin") + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.path.join(FAKES, "python"),
            "GPUPROV_FAKE_NVML_STATE": self.nvml_state,
            "GPUPROV_FAKE_SYSTEMD_STATE": self.systemd_state,
            "GPUPROV_FAKE_SYSTEMD_UNIT_PATH": str(self.root),
            "GPUPROV_FAKE_K8S_STATE": self.k8s_state,
            "GPUPROV_FAKE_CALL_LOG": self.call_log,
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
        })
        return env

    def converge(self, extra=None, check=False):
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": MIG,
                "gpuprov_kubeconfig": str(self.root / "kubeconfig"), "gpu_mig_persist": False,
                "gpu_mig_poll_interval": 1, "gpu_mig_operand_timeout": 3, "gpu_mig_resources_timeout": 3}
        host.update(extra or {})
        inventory = self.root / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": host}}}))
        argv = [PLAYBOOK, "-i", str(inventory), "gpuprov.gpu.mig"] + (["--check"] if check else [])
        return subprocess.run(argv, cwd=REPO, env=self.env(), capture_output=True, text=True, timeout=600,
                              check=False)

    def gpu(self):
        return fake_pynvml.load_state(self.nvml_state)["gpus"][0]

    def persistenced_active(self):
        return self.unit_active(PERSISTENCED)

    def unit_active(self, unit):
        with open(self.systemd_state) as handle:
            return json.load(handle)["units"][unit]["active"]

    def cluster(self):
        with open(self.k8s_state) as handle:
            return json.load(handle)

    def calls(self):
        if not os.path.exists(self.call_log):
            return []
        with open(self.call_log) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def close(self):
        if self.pod.poll() is None:
            self.pod.kill()
        self.pod.wait()


@pytest.fixture
def node(tmp_path):
    held = HeldNode(tmp_path)
    yield held
    held.close()


def _steps(calls):
    """The order of the releasing steps in the call log."""
    steps = []
    for call in calls:
        params = call.get("params") or {}
        if call["tool"] == "kubernetes.core.k8s":
            labels = params["definition"]["metadata"]["labels"]
            steps.append("label %s" % labels["gpuprov.io/gpu-operands"])
        elif call["tool"] == "systemctl" and call["argv"][1] in ("start", "stop"):
            steps.append("%s %s" % (call["argv"][1], call["argv"][-1]))
    return steps


def test_check_mode_releases_nothing(node):
    proc = node.converge(check=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert node.persistenced_active() and node.unit_active(DCGM) and node.pod.poll() is None
    assert "gpuprov.io/gpu-operands" not in node.cluster()["nodes"]["localhost"]["labels"]
    assert (node.gpu()["mig_current"], node.gpu()["mig_pending"]) == (False, False)


def test_mig_change_releases_and_restores_the_gpu_holders(node):
    proc = node.converge()
    assert proc.returncode == 0, proc.stdout[-6000:]
    gpu = node.gpu()
    assert gpu["mig_current"] is True and len(gpu["gpu_instances"]) == 7
    # Paused operands before stopping the host service; both restored afterwards. The reset
    # went ahead with nvidia-persistenced running: the role never stopped it.
    assert _steps(node.calls()) == ["label paused", "stop %s" % DCGM, "start %s" % DCGM, "label None"]
    assert node.persistenced_active() and node.unit_active(DCGM)
    assert [c["argv"] for c in node.calls() if c["tool"] == "nvidia-smi"] == [
        ["nvidia-smi", "-r", "-i", node.gpu()["pci_bus_id"]]]
    cluster_state = node.cluster()
    assert "gpuprov.io/gpu-operands" not in cluster_state["nodes"]["localhost"]["labels"]
    assert POD not in cluster_state["pods"]  # the DaemonSet controller took it off the node
    assert node.pod.wait(timeout=10) is not None  # and the kubelet stopped its process

    # Already as planned: nothing is stopped or paused again.
    os.unlink(node.call_log)
    again = node.converge()
    assert again.returncode == 0, again.stdout[-4000:]
    assert _steps(node.calls()) == []


def test_without_releasing_the_holders_the_change_fails_and_services_come_back(node):
    # gpuprov told to leave DCGM alone, and no cluster access: the GPU stays held.
    proc = node.converge({"gpu_mig_host_services": [], "gpuprov_kubeconfig": ""})
    assert proc.returncode != 0
    assert "In use by another client" in proc.stdout or "in use by another process" in proc.stdout
    assert (node.gpu()["mig_current"], node.gpu()["mig_pending"]) == (False, True)
    assert node.persistenced_active() and node.unit_active(DCGM) and node.pod.poll() is None


@pytest.mark.parametrize("unit", [PERSISTENCED, "nvidia-fabricmanager"])
def test_persistenced_and_fabric_manager_are_refused_as_holders_before_any_change(node, unit):
    proc = node.converge({"gpu_mig_host_services": [DCGM, unit]})
    assert proc.returncode != 0
    text = " ".join(proc.stdout.split())
    assert "localhost: gpu_mig_host_services: %s must keep running around a MIG change" % unit in text
    assert (node.gpu()["mig_current"], node.gpu()["mig_pending"]) == (False, False)
    assert _steps(node.calls()) == []


def test_a_failed_change_still_starts_services_and_unpauses(node):
    # A holder the role does not know about (nvsm outside gpu_mig_host_services) keeps the
    # GPU busy: the change fails, and what the role stopped and paused is restored anyway.
    with fake_pynvml.mutate_state(node.nvml_state) as state:
        state["holders"].append({"name": "nvsm", "unit": "nvsm.service"})
    with open(node.systemd_state) as handle:
        systemd = json.load(handle)
    systemd["units"]["nvsm.service"] = {"active": True, "enabled": True}
    with open(node.systemd_state, "w") as handle:
        json.dump(systemd, handle)
    proc = node.converge({"gpu_mig_host_services": [DCGM]})
    assert proc.returncode != 0
    assert "nvsm" in proc.stdout
    assert _steps(node.calls()) == ["label paused", "stop %s" % DCGM, "start %s" % DCGM, "label None"]
    assert node.persistenced_active() and node.unit_active(DCGM)
    assert "gpuprov.io/gpu-operands" not in node.cluster()["nodes"]["localhost"]["labels"]


def test_hami_plugin_leaves_by_its_node_label_and_the_label_comes_back(tmp_path):
    # A node that ran HAMi (gpu=on) gets MIG: HAMi's plugin pod holds the GPU and takes no
    # affinity, so only removing gpu=on makes the DaemonSet controller stop it.
    node = HeldNode(tmp_path, hami=True)
    try:
        proc = node.converge()
        assert proc.returncode == 0, proc.stdout[-6000:]
        gpu = node.gpu()
        assert gpu["mig_current"] is True and len(gpu["gpu_instances"]) == 7
        assert node.pod.wait(timeout=10) is not None  # the kubelet stopped HAMi's plugin
        patches = [call["params"]["definition"]["metadata"]["labels"] for call in node.calls()
                   if call["tool"] == "kubernetes.core.k8s"]
        assert patches == [{"gpuprov.io/gpu-operands": "paused", "gpu": None},
                           {"gpuprov.io/gpu-operands": None, "gpu": "on"}]
        labels = node.cluster()["nodes"]["localhost"]["labels"]
        # The node leaves the pause with the labels it had (the device-plugin role relabels by plan).
        assert labels.get("gpu") == "on" and "gpuprov.io/gpu-operands" not in labels
        # The role waited for HAMi's plugin pods in HAMi's namespace as well.
        waits = [call["params"] for call in node.calls()
                 if call["tool"] == "kubernetes.core.k8s_info" and call["params"].get("kind") == "Pod"]
        assert {(w["namespace"], tuple(w["label_selectors"])) for w in waits} >= {
            ("kube-system", ("app.kubernetes.io/component=hami-device-plugin",))}
    finally:
        node.close()


def test_without_hami_the_pause_leaves_the_gpu_label_alone(node):
    proc = node.converge()
    assert proc.returncode == 0, proc.stdout[-6000:]
    patches = [call["params"]["definition"]["metadata"]["labels"] for call in node.calls()
               if call["tool"] == "kubernetes.core.k8s"]
    assert patches == [{"gpuprov.io/gpu-operands": "paused"}, {"gpuprov.io/gpu-operands": None}]


def test_an_operand_that_does_not_leave_stops_the_role_naming_it(node):
    # The plugin pod without the pause affinity (deployed by something else): it stays on the
    # node, so the role stops before touching the GPUs and says which pod held them.
    cluster_state = node.cluster()
    cluster_state["pods"][POD]["affinity"] = {}
    with open(node.k8s_state, "w") as handle:
        json.dump(cluster_state, handle)
    proc = node.converge()
    assert proc.returncode != 0
    text = " ".join(proc.stdout.split())
    assert "localhost: after 3s these pods still run on node localhost and hold its GPUs: %s." % POD in text
    assert "Nothing on the GPUs was changed." in text
    assert (node.gpu()["mig_current"], node.gpu()["mig_pending"]) == (False, False)
    assert _steps(node.calls()) == ["label paused", "label None"]  # DCGM never stopped
    assert node.persistenced_active() and node.pod.poll() is None


def test_a_node_name_the_cluster_does_not_know_stops_before_any_change(node):
    proc = node.converge({"gpuprov_node_name": "gpu-node-7"})
    assert proc.returncode != 0
    text = " ".join(proc.stdout.split())
    assert ("localhost: node gpu-node-7 is not in the cluster, so its GPU operands cannot be paused; "
            "nothing was changed. Set gpu_mig_node_name (gpuprov_node_name)") in text
    assert (node.gpu()["mig_current"], node.gpu()["mig_pending"]) == (False, False)
    assert _steps(node.calls()) == []
    assert node.persistenced_active() and node.pod.poll() is None
