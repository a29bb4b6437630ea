"""The test kit: gpuprov.gpu.fake_gpu_node makes a fake GPU node, and removes it again.

Run as a consumer's prepare.yml would run it, then checked through the fakes themselves:
the fake NVML has the asked GPUs (MIG off, nothing on them), environment.json names every
state file, the fake kubelet answers /healthz, and `absent` stops it and removes the node.
"""
import json
import os
import shutil
import subprocess
import sys
import urllib.request

import pytest
import yaml

from testlib import REPO

PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))
pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")


def run_role(tmp_path, root, **role_vars):
    playbook = tmp_path / "prepare.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "roles": [dict({"role": "gpuprov.gpu.fake_gpu_node", "fake_gpu_node_root": str(root)}, **role_vars)],
    }]))
    # Nothing of the fakes in the environment: the role must find and run its own copies.
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("GPUPROV_FAKE"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([PLAYBOOK, "-i", "localhost,", str(playbook)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_fake_node_with_gpus_and_a_kubelet_then_absent(tmp_path):
    root = tmp_path / "node"
    run_role(tmp_path, root, fake_gpu_node_gpus=[{"model": "H100-80GB", "count": 2}, {"model": "T4", "count": 1}],
             fake_gpu_node_kubelet=True, fake_gpu_node_numa_nodes=2, fake_gpu_node_cores_per_numa_node=3)

    environment = json.loads((root / "environment.json").read_text())
    assert environment["PATH"].split(os.pathsep)[0] == str(root / "bin")
    assert environment["PYTHONPATH"] == str(root / "python")
    assert environment["GPUPROV_FAKE_NVML_STATE"] == str(root / "nvml-state.json")
    assert environment["GPUPROV_FAKE_SYSTEMD_UNIT_PATH"] == str(root / "etc" / "systemd" / "system")
    assert (root / "calls.jsonl").read_text() == ""
    # Through the installed fakes, as a role under test sees the node.
    listing = subprocess.run(["nvidia-smi", "-L"], env=dict(os.environ, **environment), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    assert [line.split(" (UUID")[0] for line in listing] == [
        "GPU 0: NVIDIA H100 80GB HBM3", "GPU 1: NVIDIA H100 80GB HBM3", "GPU 2: Tesla T4"]
    state = json.loads((root / "nvml-state.json").read_text())
    assert [g["mig_current"] for g in state["gpus"]] == [False, False, None]
    assert [g["numa_node"] for g in state["gpus"]] == [0, 0, 1]
    assert all(not g["gpu_instances"] and not g["processes"] for g in state["gpus"])
    # sysfs: 2 NUMA nodes x 3 cores x 2 threads; CPU c and c+6 are siblings.
    sysfs = root / "sys" / "devices" / "system"
    assert (sysfs / "cpu" / "online").read_text() == "0-11\n"
    assert (sysfs / "cpu" / "cpu7" / "topology" / "thread_siblings_list").read_text() == "1,7\n"
    assert (sysfs / "node" / "node1" / "cpulist").read_text().strip() == "3-5,9-11"
    systemd = json.loads((root / "systemd-state.json").read_text())
    assert systemd["units"]["kubelet.service"]["active"] is True
    port = int((root / "healthz.port").read_text())
    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=10) as answer:
        assert answer.read() == b"ok"
    pid = int((root / "healthz.pid").read_text())

    run_role(tmp_path, root, fake_gpu_node_state="absent")

    assert not root.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
