"""gpuprov top without a fleet: the node program's lines, the inventory, the view, bad input."""
import json
import shlex
import subprocess
import sys

import pytest

from gpuprov.top import connections, node_script, view
from testlib import REPO

LINE = json.dumps({"time": 1764583200.25, "gpus": [
    {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "util": None, "used": 12000, "total": 81920,
     "mig": True, "procs": [], "instances": [{"gi": 1, "used": 12000, "total": 40192, "procs": [[42, "python", 12000]]},
                                             {"gi": 2, "used": 0, "total": 40192, "procs": []}]},
    {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-b", "util": 55, "used": 100, "total": 81920,
     "mig": False, "procs": [[7, "train", 100]], "instances": []}]})


def test_parse_line_gives_model_samples_per_gpu_and_instance():
    samples = node_script.parse_line(LINE)
    assert [(s.index, s.gpu_instance_id, s.utilization_gpu, s.memory_used_mib) for s in samples] == [
        (0, "", None, 12000), (0, "1", None, 12000), (0, "2", None, 0), (1, "", 55, 100)]
    assert samples[0].timestamp == "2025/12/01 10:00:00.250"
    assert samples[1].processes == ((42, "python", 12000),)


@pytest.mark.parametrize("line", ["", "not json", '{"time": 1}', '{"time": 1, "gpus": [{"index": 0}]}'])
def test_parse_line_refuses_what_the_program_never_prints(line):
    with pytest.raises(node_script.BadLine):
        node_script.parse_line(line)


def test_the_remote_command_is_the_fixed_program_quoted(tmp_path):
    compile(node_script.SCRIPT, "node_script", "exec")
    target = connections.Target("n", "127.0.0.1", 22, "root", None, "/usr/bin/python3", [])
    line = connections.command(target, 2)
    assert shlex.split(line) == ["/usr/bin/python3", "-c", node_script.SCRIPT, "2"]
    # Run by a shell, as sshd runs it, the quoted program reaches python intact.
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nprintf '%s\\0' \"$@\"\n")
    fake.chmod(0o755)
    target.python = str(fake)
    out = subprocess.run(["sh", "-c", connections.command(target, 0.5)], capture_output=True, check=True).stdout
    assert out.split(b"\0")[:3] == [b"-c", node_script.SCRIPT.encode(), b"0.5"]


def test_view_table_and_json():
    state = {"status": "ok", "message": "", "samples": node_script.parse_line(LINE), "updated": 1764583200.25,
             "frames": 1}
    down = {"status": "unreachable", "message": "the sampling command ended; the connection closed",
            "samples": [], "updated": None, "frames": 0}
    result = view.report({"n1": state, "n2": down})
    assert result["summary"] == {"ok": 1, "unreachable": 1}
    gpu0 = result["nodes"]["n1"]["gpus"][0]
    assert [i["gpu_instance_id"] for i in gpu0["instances"]] == ["1", "2"]
    lines = view.table(result).splitlines()
    assert lines[1].split()[:4] == ["n1", "0", "NVIDIA", "A100-SXM4-80GB"] and "MIG" in lines[1]
    assert "python(42) 12000 MiB" in lines[2]
    assert lines[4].split()[:5] == ["n1", "1", "NVIDIA", "A100-SXM4-80GB", "55%"]
    assert lines[5].split()[:3] == ["n2", "-", "UNREACHABLE"]
    assert lines[-1] == "1 ok, 1 unreachable"


def test_targets_take_connection_vars_and_the_known_hosts_of_the_ssh_args(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "all:\n  hosts:\n    gpu-1:\n      ansible_host: 127.0.0.9\n      ansible_port: 2222\n"
        "      ansible_user: ops\n      ansible_ssh_private_key_file: /keys/id\n"
        "      ansible_python_interpreter: /opt/py/bin/python3\n"
        "      ansible_ssh_common_args: -o UserKnownHostsFile=/etc/fleet/known_hosts -o StrictHostKeyChecking=yes\n"
        "    gpu-2:\n      ansible_python_interpreter: auto_silent\n")
    one, two = connections.load_targets([str(inventory)])
    assert (one.name, one.host, one.port, one.user, one.key_file, one.python, one.known_hosts) == (
        "gpu-1", "127.0.0.9", 2222, "ops", "/keys/id", "/opt/py/bin/python3", ["/etc/fleet/known_hosts"])
    assert (two.host, two.port, two.python) == ("gpu-2", 22, "python3")
    assert two.known_hosts[0].endswith("/.ssh/known_hosts")
    (only,) = connections.load_targets([str(inventory)], "gpu-2", ["/tmp/kh"])
    assert only.known_hosts == ["/tmp/kh"]


def test_bad_input_exits_2_before_connecting(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpuprov", "top"] + list(args), cwd=REPO,
                              capture_output=True, text=True, timeout=60)
    result = run("-i", str(tmp_path / "missing.yml"), "--once")
    assert result.returncode == 2 and "missing.yml: no such file or directory" in result.stderr
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    h:\n      ansible_port: lots\n")
    result = run("-i", str(inventory), "--once")
    assert result.returncode == 2 and "h: ansible_port: 'lots' is not a TCP port" in result.stderr
    result = run("-i", str(inventory), "-o", "json")
    assert result.returncode == 2 and "-o json needs --once" in result.stderr
