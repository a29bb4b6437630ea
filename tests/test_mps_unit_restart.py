"""The gpu_mps role's unit keeps MPS limits and compute mode across daemon restarts and reboots.

Compute mode "is not persistent across reboots and always resets to Default" (nvml.h
nvmlDeviceSetComputeMode), and the set_default_* limits are the control daemon's state, gone
when it stops. NVIDIA's device plugin therefore sets both every time it starts its MPS daemon
(k8s-device-plugin v0.19.3 cmd/mps-control-daemon/mps/daemon.go, Start()); so must the unit.
Runs the role against localhost with the fake NVML, nvidia-cuda-mps-control and systemctl, every
path under tmp_path; the fake systemctl runs the unit's Exec*= lines as systemd does.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from testlib import FAKES, REPO

sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake)

PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))
pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")
UNIT = "gpuprov-mps.service"


class MpsNode:
    def __init__(self, root):
        self.root = root
        self.nvml_state = str(root / "nvml.json")
        self.systemd_state = str(root / "systemd.json")
        self.mps_state = str(root / "mps.json")
        self.unit_dir = root / "etc" / "systemd" / "system"
        self.unit_dir.mkdir(parents=True)
        (root / "etc" / "default").mkdir()
        fake_pynvml.write_new_state(self.nvml_state, gpus=[("H100-80GB", 2)])

    def env(self):
        env = dict(os.environ)
        env.update({
            "PATH": os.path.join(FAKES, "bin") + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.path.join(FAKES, "python"),
            "GPUPROV_FAKE_NVML_STATE": self.nvml_state,
            "GPUPROV_FAKE_SYSTEMD_STATE": self.systemd_state,
            "GPUPROV_FAKE_SYSTEMD_UNIT_PATH": str(self.unit_dir),
            "GPUPROV_FAKE_MPS_STATE": self.mps_state,
        })
        return env

    def converge(self, **extra):
        host = {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "gpu_mps_replicas": 4,
            "gpu_mps_unit_dir": str(self.unit_dir),
            "gpu_mps_env_dir": str(self.root / "etc" / "default"),
            "gpu_mps_pipe_directory": str(self.root / "run" / "nvidia-mps"),
            "gpu_mps_log_directory": str(self.root / "var" / "log" / "nvidia-mps"),
            "gpu_mps_control_binary": os.path.join(FAKES, "bin", "nvidia-cuda-mps-control"),
            "gpu_mps_start_program": str(self.root / "libexec" / "gpuprov-mps-start"),
            "gpu_mps_lib_dir": str(self.root / "lib"),
            "gpu_mps_start_config": str(self.root / "etc" / "gpuprov" / "mps.json"),
            "gpu_mps_environment": {"PYTHONPATH": os.path.join(FAKES, "python"),
                                    "GPUPROV_FAKE_NVML_STATE": self.nvml_state,
                                    "GPUPROV_FAKE_MPS_STATE": self.mps_state},
        }
        host.update(extra)
        inventory = self.root / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": host}}}))
        playbook = self.root / "mps.yml"
        playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Run the host MPS daemon", "ansible.builtin.include_role": {"name": "gpuprov.gpu.gpu_mps"}}]}]))
        proc = subprocess.run([PLAYBOOK, "-i", str(inventory), str(playbook)], cwd=REPO, env=self.env(),
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]

    def systemctl(self, *args):
        proc = subprocess.run([os.path.join(FAKES, "bin", "systemctl")] + list(args), env=self.env(),
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def daemon(self):
        with open(self.mps_state) as handle:
            daemons = json.load(handle)["daemons"]
        assert len(daemons) == 1, daemons
        return next(iter(daemons.values()))

    def limits(self):
        daemon = self.daemon()
        return daemon["default_active_thread_percentage"], daemon["default_pinned_mem_limits"]

    def compute_modes(self):
        return [gpu["compute_mode"] for gpu in fake_pynvml.load_state(self.nvml_state)["gpus"]]

    def reboot(self):
        """Power cycle: compute modes back to DEFAULT, no daemon, no unit running."""
        with fake_pynvml.mutate_state(self.nvml_state) as state:
            fake_pynvml.reboot(state)
            for gpu in state["gpus"]:
                gpu["persistence_mode"] = False
        with open(self.mps_state, "w") as handle:
            json.dump({"daemons": {}, "next_pid": 41000}, handle)
        for entry in (self.root / "run" / "nvidia-mps").iterdir():
            entry.unlink()
        with open(self.systemd_state) as handle:
            systemd = json.load(handle)
        systemd["units"][UNIT]["active"] = False
        with open(self.systemd_state, "w") as handle:
            json.dump(systemd, handle)


# H100 80GB: 81559 MiB (the catalog), four clients: 20389 MiB each; 100 // 4 = 25 %.
PLANNED = (25.0, {"0": 20389, "1": 20389})
EXCLUSIVE = [fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS] * 2


@pytest.fixture
def node(tmp_path):
    return MpsNode(tmp_path)


def test_a_daemon_restart_keeps_the_limits(node):
    node.converge()
    assert node.limits() == PLANNED and node.compute_modes() == EXCLUSIVE
    first = node.daemon()["pid"]

    node.systemctl("restart", UNIT)

    assert node.daemon()["pid"] != first  # a new daemon, with MPS's own defaults at first
    assert node.limits() == PLANNED


def test_after_a_reboot_the_unit_sets_compute_mode_and_limits_again(node):
    node.converge()
    node.reboot()
    assert node.compute_modes() == [fake_pynvml.NVML_COMPUTEMODE_DEFAULT] * 2

    node.systemctl("start", UNIT)

    assert node.compute_modes() == EXCLUSIVE
    assert node.limits() == PLANNED


def test_a_limit_change_is_kept_for_the_next_start(node):
    node.converge()
    node.converge(gpu_mps_active_thread_percentage=50)
    assert node.limits()[0] == 50.0

    node.systemctl("restart", UNIT)

    assert node.limits() == (50.0, PLANNED[1])
