"""The gpu_mig role with plain inputs (no gpuprov inventory) on a local fake node.

A good input converges to the layout gpuprov's planner picks; a bad input (a layout the GPU
cannot hold, an unknown config name, a model or count the node does not have) fails naming
the role variable, and leaves the node exactly as it was: same NVML state, no call to
nvidia-smi or systemctl, no file of the boot-time restore.
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
import pynvml as fake_pynvml  # noqa: E402  (the fake: FAKES/python comes first)

PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))
pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")

BALANCED = [("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)]


class PlainNode:
    """A fake node with 2x A100-80GB (MIG off) and the gpu_mig role run on it with plain inputs."""

    def __init__(self, root):
        self.root = root
        self.nvml_state = str(root / "nvml.json")
        self.systemd_state = str(root / "systemd.json")
        self.call_log = str(root / "calls.jsonl")
        self.restore_dir = root / "restore"
        # systemd's unit folder exists on every node; the rest of the restore's paths do not.
        (self.restore_dir / "units").mkdir(parents=True)
        fake_pynvml.write_new_state(self.nvml_state, gpus=[("A100-80GB", 2)])

    def run(self, role_vars):
        playbook = self.root / "play.yml"
        role_vars = dict(role_vars, gpu_mig_restore_unit_dir=str(self.restore_dir / "units"),
                         gpu_mig_restore_state_file=str(self.restore_dir / "mig-state.json"),
                         gpu_mig_restore_program=str(self.restore_dir / "gpuprov-mig-restore"),
                         gpu_mig_restore_lib_dir=str(self.restore_dir / "lib"),
                         gpu_mig_restore_environment={"PYTHONPATH": os.path.join(FAKES, "python"),
                                                      "GPUPROV_FAKE_NVML_STATE": self.nvml_state})
        playbook.write_text(yaml.safe_dump([{
            "hosts": "localhost", "gather_facts": False,
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "tasks": [{"ansible.builtin.include_role": {"name": "gpuprov.gpu.gpu_mig"}, "vars": role_vars}],
        }]))
        env = dict(os.environ)
        env.update({
            "PATH": os.path.join(FAKES, "bin") + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.path.join(FAKES, "python"),
            "GPUPROV_FAKE_NVML_STATE": self.nvml_state,
            "GPUPROV_FAKE_SYSTEMD_STATE": self.systemd_state,
            "GPUPROV_FAKE_SYSTEMD_UNIT_PATH": str(self.restore_dir / "units"),
            "GPUPROV_FAKE_CALL_LOG": self.call_log,
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        })
        proc = subprocess.run([PLAYBOOK, "-i", "localhost,", str(playbook)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        return proc.returncode, json.loads(proc.stdout)

    def layouts(self):
        state = fake_pynvml.load_state(self.nvml_state)
        names = dict((p["id"], p["name"][4:]) for p in state["models"]["A100-80GB"]["mig"]["profiles"])
        return [(gpu["mig_current"], sorted(((names[gi["profile_id"]], gi["placement"]["start"])
                                             for gi in gpu["gpu_instances"]), key=lambda item: item[1]))
                for gpu in state["gpus"]]

    def calls(self):
        if not os.path.exists(self.call_log):
            return []
        with open(self.call_log) as handle:
            return [json.loads(line) for line in handle if line.strip()]


def failure_messages(result):
    return [host["msg"] for play in result["plays"] for task in play["tasks"]
            for host in task["hosts"].values() if host.get("failed")]


GOOD = {"gpu_mig_gpu_model": "A100-80GB", "gpu_mig_gpu_count": 2, "gpu_mig_config": "all-balanced"}

BAD = [
    pytest.param(
        {"gpu_mig_gpu_model": "A100-80GB", "gpu_mig_gpu_count": 2,
         "gpu_mig_devices": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]},
        "gpu_mig_devices[0].mig-devices: GPU 0 (A100-80GB): 2x 4g.40gb is not a valid layout", id="layout"),
    pytest.param(
        {"gpu_mig_gpu_model": "A100-80GB", "gpu_mig_gpu_count": 2, "gpu_mig_config": "all-4g.80gb"},
        "gpu_mig_config: no built-in config named 'all-4g.80gb'", id="config-name"),
    pytest.param(
        {"gpu_mig_gpu_model": "H100-80GB", "gpu_mig_gpu_count": 2, "gpu_mig_config": "all-balanced"},
        "gpu_mig_gpu_model: gpu_mig_gpu_model/gpu_mig_gpu_count declares 2x H100-80GB but the node has "
        "2x A100-80GB", id="model"),
    pytest.param(
        {"gpu_mig_gpu_model": "A100-80GB", "gpu_mig_gpu_count": 4, "gpu_mig_config": "all-balanced"},
        "gpu_mig_gpu_model: gpu_mig_gpu_model/gpu_mig_gpu_count declares 4x A100-80GB but the node has "
        "2x A100-80GB", id="count"),
    pytest.param(
        {"gpu_mig_gpu_model": "A100-80GB", "gpu_mig_gpu_count": "two", "gpu_mig_config": "all-balanced"},
        "gpu_mig_gpu_count", id="count-type"),
]


@pytest.mark.parametrize("role_vars, expected", BAD)
def test_bad_plain_input_names_the_variable_and_leaves_the_node_untouched(tmp_path, role_vars, expected):
    node = PlainNode(tmp_path)
    with open(node.nvml_state, "rb") as handle:
        before = handle.read()

    rc, result = node.run(role_vars)

    assert rc != 0
    messages = failure_messages(result)
    assert len(messages) == 1 and expected in messages[0], messages
    with open(node.nvml_state, "rb") as handle:
        assert handle.read() == before
    # Only read-only NVML calls ran (the fakes log every nvidia-smi and systemctl call).
    assert [call["tool"] for call in node.calls()] == []
    assert [p.name for p in node.restore_dir.rglob("*")] == ["units"] and not os.path.exists(node.systemd_state)


def test_good_plain_input_converges_to_the_planned_layout_and_is_idempotent(tmp_path):
    node = PlainNode(tmp_path)

    rc, result = node.run(GOOD)

    assert rc == 0, failure_messages(result)
    assert node.layouts() == [(True, BALANCED), (True, BALANCED)]
    rc, result = node.run(GOOD)
    assert rc == 0 and result["stats"]["localhost"]["changed"] == 0, result["stats"]
