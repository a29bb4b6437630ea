"""`gpuprov top` over real SSH (paramiko): every GPU and MIG instance, host keys checked.

Three nodes: an A100 in MIG mode with two instances and processes in them, an H100 with a
busy process, and a T4. One test reads them all with --once -o json; one replaces a node's
key in known_hosts (refused, named, the others still read); one kills a node while `top`
streams (shown unreachable, the others go on refreshing).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
from test_fleet import FLEET_SKIP, fleet_test, free_first_host  # noqa: E402

sys.path.insert(0, str(fleetlib.FAKES_PYTHON))
import pynvml as fake_pynvml  # noqa: E402  (the fake, for its state helpers)

REPO_ROOT = fleetlib.REPO_ROOT
NODES = [{"name": "a100", "gpus": [{"model": "A100-80GB", "count": 1}]},
         {"name": "h100", "gpus": [{"model": "H100-80GB", "count": 1}]},
         {"name": "t4", "gpus": [{"model": "T4", "count": 1}]}]


def gpuprov(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "gpuprov"] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def top_fleet(tmp_path_factory):
    if FLEET_SKIP:
        pytest.skip(FLEET_SKIP)
    directory = tmp_path_factory.mktemp("top")
    specs = [fleetlib.node_spec_from_dict(raw, "nodes[%d]" % i) for i, raw in enumerate(NODES)]
    fleet = fleetlib.Fleet.create(directory / "fleet", specs, first_host=free_first_host(len(specs)))
    fleet.up()
    with fake_pynvml.mutate_state(str(fleet.node("a100").private_path(fleetlib.FAKE_ROOT + "/nvml.json"))) as state:
        fake_pynvml.set_mig_mode(state, 0, True)
        first, second = fake_pynvml.create_instances(state, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
        fake_pynvml.add_process(state, 0, os.getpid(), 12000, gpu_instance_id=first)
    with fake_pynvml.mutate_state(str(fleet.node("h100").private_path(fleetlib.FAKE_ROOT + "/nvml.json"))) as state:
        state["gpus"][0]["utilization_gpu"] = 87
        fake_pynvml.add_process(state, 0, os.getpid(), 30000)
    try:
        yield fleet, (first, second)
    finally:
        fleet.down()


@fleet_test
def test_once_json_shows_every_gpu_and_mig_instance(top_fleet):
    fleet, (first, second) = top_fleet
    code, out, err = gpuprov("top", "-i", str(fleet.inventory), "--once", "-o", "json", "--interval", "1")
    assert code == 0, out + err
    nodes = json.loads(out)["nodes"]
    assert {name: node["status"] for name, node in nodes.items()} == {"a100": "ok", "h100": "ok", "t4": "ok"}
    (a100,) = nodes["a100"]["gpus"]
    assert a100["utilization_percent"] is None          # NVML: not supported on a MIG-enabled GPU
    instances = {i["gpu_instance_id"]: i for i in a100["instances"]}
    assert sorted(instances) == sorted([str(first), str(second)])
    assert instances[str(first)]["memory_used_mib"] == 12000 and instances[str(second)]["processes"] == []
    (proc,) = instances[str(first)]["processes"]
    assert proc["pid"] == os.getpid() and proc["used_mib"] == 12000 and proc["name"]   # /proc/PID/comm
    (h100,) = nodes["h100"]["gpus"]
    assert (h100["utilization_percent"], h100["memory_used_mib"], h100["name"]) == (87, 30000, "NVIDIA H100 80GB HBM3")
    assert nodes["t4"]["gpus"][0]["name"] == "Tesla T4"


@fleet_test
def test_a_wrong_host_key_is_refused_and_named(top_fleet, tmp_path):
    fleet, _ = top_fleet
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    lines = Path(fleet.known_hosts).read_text().splitlines()
    t4 = fleet.node("t4")
    wrong = tmp_path / "known_hosts"
    wrong.write_text("".join(
        (line.split()[0] + " " + " ".join(Path(str(other) + ".pub").read_text().split()[:2]) if
         line.startswith("[%s]" % t4.address) else line) + "\n" for line in lines))
    code, out, err = gpuprov("top", "-i", str(fleet.inventory), "--once", "-o", "json", "--known-hosts", str(wrong))
    assert code == 1, err
    nodes = json.loads(out)["nodes"]
    assert nodes["t4"]["status"] == "refused" and nodes["t4"]["gpus"] == []
    assert nodes["t4"]["message"].startswith("host key of [%s]:%d (ssh-ed25519) does not match known_hosts"
                                             % (t4.address, fleetlib.SSH_PORT))
    assert nodes["a100"]["status"] == nodes["h100"]["status"] == "ok"
    # An unknown host is refused too, never added.
    missing = tmp_path / "only_others"
    missing.write_text("".join(line + "\n" for line in lines if not line.startswith("[%s]" % t4.address)))
    code, out, _ = gpuprov("top", "-i", str(fleet.inventory), "-l", "t4", "--once", "-o", "json",
                           "--known-hosts", str(missing))
    assert code == 1 and "is not in known_hosts" in json.loads(out)["nodes"]["t4"]["message"]
    assert missing.read_text().count("\n") == len(lines) - 1


@fleet_test
def test_a_node_that_dies_mid_stream_shows_unreachable_and_the_rest_go_on(top_fleet):
    fleet, _ = top_fleet
    frame_count = 20
    proc = subprocess.Popen([sys.executable, "-m", "gpuprov", "top", "-i", str(fleet.inventory), "--interval", "1",
                             "--frames", str(frame_count)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    out_lines = []
    killed = False
    try:
        # Kill t4 once a frame has shown every node (on a loaded machine the first SSH
        # connections take a while), then let top run out its frames.
        for line in proc.stdout:
            out_lines.append(line)
            if not killed and line.strip() == "3 ok":
                fleet.kill_node("t4")
                killed = True
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        fleet.start_node("t4")
    out = "".join(out_lines)
    assert killed, out + err
    assert proc.returncode == 1, err
    frames = [parse_frame(frame) for frame in out.split("gpuprov top  ")[1:]]
    assert len(frames) == frame_count
    # Before the kill every node showed its GPU; after it, t4 is unreachable and the others go on.
    before = next(i for i, frame in enumerate(frames) if frame["summary"] == "3 ok")
    assert frames[before]["rows"]["t4"][0][:3] == ["0", "Tesla T4", "0%"]
    last = frames[-1]
    assert last["summary"] == "2 ok, 1 unreachable"
    assert last["rows"]["t4"][0][:2] == ["-", "UNREACHABLE"]
    assert last["rows"]["h100"][0][:3] == ["0", "NVIDIA H100 80GB HBM3", "87%"]
    assert [row[0] for row in last["rows"]["a100"]] == ["0", "0/GI 1", "0/GI 2"]


def parse_frame(text):
    """{"rows": {node: [cells]}, "summary": last line} of one printed frame."""
    lines = [line for line in text.splitlines() if line.strip()]
    rows = {}
    for line in lines[2:-1]:
        cells = re.split(r"\s{2,}", line.strip())
        rows.setdefault(cells[0], []).append(cells[1:])
    return {"rows": rows, "summary": lines[-1]}
