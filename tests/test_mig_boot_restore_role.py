"""The gpu_mig role's boot-time restore (tasks/persist.yml) on a local fake node.

Runs the gpuprov.gpu.mig playbook against localhost with the fake NVML, nvidia-smi and
systemctl, every path of the restore under tmp_path: check mode changes nothing, a converge
installs the unit, program, node-side code and state file, the unit passes
`systemd-analyze verify`, the installed program restores the exact layout after a reboot,
a second converge changes nothing, and a plan without MIG removes it all.
"""
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from testlib import FAKES, REPO

sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake: roles/fake_gpu_node/files/python comes first)


MODULE_UTILS = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "plugins", "module_utils")
UNIT = "gpuprov-mig-restore.service"
BALANCED = [("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)]
PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))

pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")


class LocalNode:
    def __init__(self, root):
        self.root = root
        self.nvml_state = str(root / "nvml.json")
        self.systemd_state = str(root / "systemd.json")
        self.call_log = str(root / "calls.jsonl")
        self.unit_dir = root / "etc" / "systemd" / "system"
        self.state_file = root / "etc" / "gpuprov" / "mig-state.json"
        self.program = root / "libexec" / "gpuprov-mig-restore"
        self.lib_dir = root / "lib"
        self.unit_dir.mkdir(parents=True)
        fake_pynvml.write_new_state(self.nvml_state, gpus=[("H100-80GB", 1)])

    @property
    def unit_file(self):
        return self.unit_dir / UNIT

    @property
    def module_utils(self):
        return self.lib_dir / "ansible_collections" / "gpuprov" / "gpu" / "plugins" / "module_utils"

    def env(self):
        env = dict(os.environ)
        env.update({
            "PATH": os.path.join(FAKES, "bin") + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.path.join(FAKES, "python"),
            "GPUPROV_FAKE_NVML_STATE": self.nvml_state,
            "GPUPROV_FAKE_SYSTEMD_STATE": self.systemd_state,
            # Like systemd, the fake systemctl finds units by their files in this directory.
            "GPUPROV_FAKE_SYSTEMD_UNIT_PATH": str(self.unit_dir),
            "GPUPROV_FAKE_CALL_LOG": self.call_log,
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        })
        return env

    def inventory(self, sharing):
        path = self.root / "inventory.yml"
        path.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "gpuprov_gpu_model": "H100-80GB",
            "gpuprov_gpu_count": 1,
            "gpuprov_sharing": sharing,
            "gpu_mig_restore_unit_dir": str(self.unit_dir),
            "gpu_mig_restore_state_file": str(self.state_file),
            "gpu_mig_restore_program": str(self.program),
            "gpu_mig_restore_lib_dir": str(self.lib_dir),
            "gpu_mig_restore_environment": {"PYTHONPATH": os.path.join(FAKES, "python"),
                                            "GPUPROV_FAKE_NVML_STATE": self.nvml_state},
        }}}}))
        return str(path)

    def converge(self, sharing, check=False):
        argv = [PLAYBOOK, "-i", self.inventory(sharing), "gpuprov.gpu.mig"] + (["--check"] if check else [])
        proc = subprocess.run(argv, cwd=REPO, env=self.env(), capture_output=True, text=True, timeout=600,
                              check=False)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        return json.loads(proc.stdout)

    def systemd(self):
        if not os.path.exists(self.systemd_state):
            return {"units": {}, "daemon_reload_count": 0}
        with open(self.systemd_state) as handle:
            return json.load(handle)

    def calls(self):
        with open(self.call_log) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def layout(self):
        state = fake_pynvml.load_state(self.nvml_state)
        gpu = state["gpus"][0]
        names = dict((p["id"], p["name"][4:]) for p in state["models"][gpu["model"]]["mig"]["profiles"])
        return gpu["mig_current"], sorted(((names[gi["profile_id"]], gi["placement"]["start"])
                                           for gi in gpu["gpu_instances"]), key=lambda item: item[1])

    def exec_start(self):
        """ExecStart= and Environment= of the installed unit, as systemd would run them."""
        argv, env = None, {"PATH": os.path.join(FAKES, "bin") + ":/usr/bin:/bin"}
        for line in self.unit_file.read_text().splitlines():
            if line.startswith("ExecStart="):
                argv = shlex.split(line[len("ExecStart="):])
            elif line.startswith("Environment="):
                name, _sep, value = shlex.split(line[len("Environment="):])[0].partition("=")
                env[name] = value
        return argv, env


MIG = {"strategy": "mig", "mig": {"config": "all-balanced"}}


def changed_tasks(result):
    names = []
    for play in result["plays"]:
        for task in play["tasks"]:
            if task["hosts"].get("localhost", {}).get("changed"):
                names.append(task["task"]["name"])
    return names


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    return LocalNode(tmp_path_factory.mktemp("mig-boot-node"))


def test_check_mode_on_a_fresh_node_writes_nothing(node):
    result = node.converge(MIG, check=True)

    assert result["stats"]["localhost"]["failures"] == 0
    assert not node.unit_file.exists() and not node.state_file.exists() and not node.program.exists()
    assert node.layout() == (False, [])
    assert UNIT not in node.systemd()["units"]


def test_converge_installs_unit_program_code_and_state(node):
    node.converge(MIG)

    assert node.layout() == (True, BALANCED)
    systemd = node.systemd()
    assert systemd["units"][UNIT]["enabled"] is True
    assert systemd["daemon_reload_count"] == 1
    # The state file is the plan with the GPU's identity from gpu_facts, mode 0644.
    recorded = json.loads(node.state_file.read_text())
    assert recorded["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert recorded["gpus"][0]["pci_device_id"] == "0x2330"
    assert [(i["profile"], i["placement"]["start"]) for i in recorded["gpus"][0]["instances"]] == BALANCED
    assert stat.S_IMODE(node.state_file.stat().st_mode) == 0o644
    assert stat.S_IMODE(node.program.stat().st_mode) == 0o755
    # The program imports the collection's own node-side code, installed byte for byte.
    for name in ("mig_solver.py", "nvml.py", "mig_manager.py", "mig_restore.py"):
        with open(os.path.join(MODULE_UTILS, name), "rb") as source:
            assert (node.module_utils / name).read_bytes() == source.read()
    assert recorded["gpus"][0]["pci_bus_id"] == fake_pynvml.load_state(node.nvml_state)["gpus"][0]["pci_bus_id"]
    directives = [line for line in node.unit_file.read_text().splitlines() if line and not line.startswith("#")]
    for wanted in ("Type=oneshot", "RemainAfterExit=yes", "After=nvidia-persistenced.service",
                   "Wants=nvidia-persistenced.service",
                   "Before=nvidia-gpu-reset.target kubelet.service containerd.service docker.service",
                   "WantedBy=multi-user.target kubelet.service"):
        assert any(line.startswith(wanted) for line in directives), wanted
    # Optional for kubelet: nothing may make kubelet depend on the restore succeeding.
    assert not any(line.startswith(("Requires=", "RequiredBy=", "BindsTo=")) for line in directives)


def test_unit_runs_after_fabric_manager_and_persistenced_and_before_the_gpu_clients(node):
    # mig-parted v0.13.1 deployments/systemd/nvidia-mig-manager.service: After=
    # nvidia-persistenced.service nvidia-fabricmanager.service, Before=nvidia-gpu-reset.target
    # (which DCGM and nvsm wait for). A reset at boot needs Fabric Manager on HGX/DGX A100 and
    # fails while the GPU clients already hold the GPUs.
    node.converge(MIG)
    directives = dict(line.split("=", 1) for line in node.unit_file.read_text().splitlines()
                      if "=" in line and not line.startswith("#"))
    assert set(directives["After"].split()) >= {"nvidia-persistenced.service", "nvidia-fabricmanager.service"}
    assert set(directives["Before"].split()) >= {
        "nvidia-gpu-reset.target", "kubelet.service", "nvidia-dcgm.service", "dcgm.service",
        "dcgm-exporter.service", "nvsm.service"}
    assert "nvidia-persistenced.service" not in directives["Before"].split()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(node):
    proc = subprocess.run(["systemd-analyze", "verify", str(node.unit_file)], capture_output=True, text=True,
                          timeout=120, check=False)
    # verify exits 0 on some problems (an unknown Type= only warns), so its output must be clean too.
    problems = [line for line in (proc.stdout + proc.stderr).splitlines() if UNIT in line or "gpuprov" in line]
    assert proc.returncode == 0 and problems == [], proc.stdout + proc.stderr


def test_installed_program_restores_the_layout_after_a_reboot(node):
    with fake_pynvml.mutate_state(node.nvml_state) as state:
        fake_pynvml.reboot(state)
    assert node.layout() == (False, [])
    argv, env = node.exec_start()

    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert node.layout() == (True, BALANCED)
    assert "enabled MIG mode; created 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4" in proc.stdout


def test_second_converge_changes_nothing(node):
    before = node.systemd()

    result = node.converge(MIG)

    assert changed_tasks(result) == []
    assert node.systemd()["daemon_reload_count"] == before["daemon_reload_count"]


def test_a_plan_without_mig_removes_the_restore(node):
    node.converge({"strategy": "time-slicing", "replicas": 2})

    assert node.layout() == (False, [])
    assert not node.unit_file.exists() and not node.state_file.exists() and not node.program.exists()
    assert not any((node.module_utils / name).exists() for name in ("nvml.py", "mig_restore.py"))
    systemd = node.systemd()
    # Disabled, then forgotten by the daemon-reload after its file was removed.
    assert UNIT not in systemd["units"]
    assert systemd["daemon_reload_count"] == 2
    assert [c["argv"][1:] for c in node.calls() if c["tool"] == "systemctl" and c["argv"][1] == "disable"] == [
        ["disable", UNIT]]
