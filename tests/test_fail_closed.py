"""Fail closed: a node that needs a MIG or host-MPS change and cannot be drained (no
gpuprov_kubeconfig) stops before anything on it changes, naming the opt-in. site.yml runs on a
local node with the fake NVML, nvidia-smi, systemctl and MPS control."""
import hashlib
import os
import subprocess
import sys

import pytest
import yaml

from testlib import FAKES, REPO

sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake's python folder comes first)

PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
MIG_BALANCED = {"strategy": "mig", "mig": {"config": "all-balanced"}}
HOST_MPS = {"strategy": "mps", "replicas": 4, "mps": {"provider": "host", "active_thread_percentage": 25}}

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="ansible-playbook is not installed beside this Python")


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest() if os.path.exists(path) else None


def _run(tmp_path, model, sharing, new_node=True, **host_vars):
    nvml = str(tmp_path / "nvml.json")
    if new_node:
        fake_pynvml.write_new_state(nvml, gpus=[(model, 1)])
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": dict({
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gpuprov_gpu_model": model, "gpuprov_gpu_count": 1, "gpuprov_sharing": sharing,
        "gpu_mps_control_binary": os.path.join(FAKES, "bin", "nvidia-cuda-mps-control")}, **host_vars)}}}))
    env = dict(os.environ, PATH=os.path.join(FAKES, "bin") + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.path.join(FAKES, "python"), GPUPROV_FAKE_NVML_STATE=nvml,
               GPUPROV_FAKE_SYSTEMD_STATE=str(tmp_path / "systemd.json"),
               GPUPROV_FAKE_SYSTEMD_UNIT_PATH=str(tmp_path / "units"),
               GPUPROV_FAKE_MPS_STATE=str(tmp_path / "mps.json"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    before = dict((name, _digest(str(tmp_path / name))) for name in ("nvml.json", "systemd.json", "mps.json"))
    proc = subprocess.run([PLAYBOOK, "-i", str(inventory), os.path.join(REPO, "playbooks", "site.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    after = dict((name, _digest(str(tmp_path / name))) for name in before)
    return proc, before, after


def test_a_mig_change_without_a_drain_stops_before_touching_the_node(tmp_path):
    proc, before, after = _run(tmp_path, "H100-80GB", MIG_BALANCED)
    assert proc.returncode != 0
    assert "gpu01: gpuprov_kubeconfig: not set, so the node cannot be drained" in proc.stdout
    assert "MIG mode on GPU 0" in proc.stdout
    assert "set gpuprov_allow_undrained: true" in proc.stdout
    assert after == before  # NVML (MIG mode, instances), units and MPS untouched


def test_a_host_mps_change_without_a_drain_stops_too(tmp_path):
    proc, before, after = _run(tmp_path, "L40S", HOST_MPS)
    assert proc.returncode != 0
    assert "gpu01: gpuprov_kubeconfig: not set, so the node cannot be drained" in proc.stdout
    assert "host MPS yes" in proc.stdout
    assert after == before


def test_a_node_with_nothing_disruptive_to_do_runs_without_a_drain(tmp_path):
    # Time-slicing is the device plugin's business: nothing on the node changes.
    proc, before, after = _run(tmp_path, "T4", {"strategy": "time-slicing", "replicas": 4})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu01: gpuprov_kubeconfig: not set" not in proc.stdout


def test_host_mps_already_as_planned_needs_no_drain(tmp_path):
    """The opt-in converges the daemon; the next run without a kubeconfig finds nothing
    disruptive to do (the check-mode probe reads the daemon as planned) and passes."""
    paths = {"gpu_mps_unit_dir": str(tmp_path / "units"), "gpu_mps_env_dir": str(tmp_path / "default"),
             "gpu_mps_pipe_directory": str(tmp_path / "mps-pipe"), "gpu_mps_log_directory": str(tmp_path / "mps-log"),
             "gpu_mps_start_program": str(tmp_path / "libexec" / "gpuprov-mps-start"),
             "gpu_mps_lib_dir": str(tmp_path / "lib"), "gpu_mps_start_config": str(tmp_path / "etc" / "mps.json")}
    os.makedirs(paths["gpu_mps_unit_dir"])
    os.makedirs(paths["gpu_mps_env_dir"])
    proc, before, after = _run(tmp_path, "L40S", HOST_MPS, gpuprov_allow_undrained=True, **paths)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "without a drain: gpuprov_allow_undrained is true" in proc.stdout
    assert after["mps.json"] != before["mps.json"]  # the daemon was started

    proc, before, after = _run(tmp_path, "L40S", HOST_MPS, new_node=False, **paths)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu01: gpuprov_kubeconfig: not set" not in proc.stdout
    assert "without a drain" not in proc.stdout.replace("TASK [Warn that the node is changed without a drain]", "")
