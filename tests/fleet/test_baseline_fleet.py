"""`gpuprov baseline start / collect / stop` over real SSH.

Two nodes. `start` installs gpuprov-baseline.service, whose ExecStart= the fake systemctl
runs in the node's namespace, as systemd would; the sampler it starts outlives the SSH
session that started it, so a later `collect` finds more samples than an earlier one.
`stop` ends the sampler and removes the unit; a sample file torn mid-row (the sampler killed
while writing) is read up to the tear with a note, by `collect` and by `diagnose --snapshot`.
(That a restarted sampler cuts the torn row first is tested without a fleet, in
tests/test_baseline_sampler.py.)
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
from test_fleet import FLEET_SKIP, fleet_test, free_first_host  # noqa: E402

REPO_ROOT = fleetlib.REPO_ROOT
UNIT = "gpuprov-baseline.service"
SAMPLES = "/var/lib/gpuprov/baseline/samples.csv"
NODES = [{"name": "t4", "gpus": [{"model": "T4", "count": 1}]},
         {"name": "l40s", "gpus": [{"model": "L40S", "count": 2}]}]


def gpuprov(*args):
    proc = subprocess.run([sys.executable, "-m", "gpuprov"] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def unit_state(node):
    state = json.loads(node.private_path(fleetlib.FAKE_ROOT + "/systemd.json").read_text())
    return state["units"].get(UNIT)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def collect(inventory, out):
    code, out_text, err = gpuprov("baseline", "collect", "-i", inventory, "--out", str(out), "-o", "json")
    assert code == 0, out_text + err[-3000:]
    return json.loads(out_text)["nodes"]


@pytest.fixture(scope="module")
def baseline_fleet(tmp_path_factory):
    if FLEET_SKIP:
        pytest.skip(FLEET_SKIP)
    directory = tmp_path_factory.mktemp("baseline")
    specs = [fleetlib.node_spec_from_dict(raw, "nodes[%d]" % i) for i, raw in enumerate(NODES)]
    fleet = fleetlib.Fleet.create(directory / "fleet", specs, first_host=free_first_host(len(specs)))
    fleet.up()
    try:
        yield fleet, directory
    finally:
        fleet.down()


@fleet_test
def test_baseline_samples_on_the_nodes_until_stopped(baseline_fleet):
    fleet, directory = baseline_fleet
    inventory = str(fleet.inventory)
    t4, l40s = fleet.node("t4"), fleet.node("l40s")

    code, out, err = gpuprov("baseline", "start", "-i", inventory, "--interval", "0s")
    assert code == 2 and "--interval: '0s'" in err
    assert unit_state(t4) is None                       # bad input: nothing changed

    code, out, err = gpuprov("baseline", "start", "-i", inventory, "--interval", "1s", "-o", "json")
    assert code == 0, out + err[-3000:]
    assert {host: node["status"] for host, node in json.loads(out)["nodes"].items()} == {
        "l40s": "changed", "t4": "changed"}
    for node in (t4, l40s):
        unit = unit_state(node)
        assert unit["active"] and unit["enabled"] and alive(unit["main_pid"])
        text = node.private_path("/etc/systemd/system/" + UNIT).read_text()
        assert "--interval 1 --dir /var/lib/gpuprov/baseline" in text

    time.sleep(3)
    first = collect(inventory, directory / "snap1")
    time.sleep(3)
    # No controller connection in between: the unit kept sampling.
    second = collect(inventory, directory / "snap2")
    for host, gpus in (("t4", 1), ("l40s", 2)):
        assert first[host]["samples"] >= 2 * gpus
        assert second[host]["samples"] >= first[host]["samples"] + 2 * gpus
        assert second[host]["last"] > first[host]["last"]
    rows = (directory / "snap2" / "utilization" / "l40s.csv").read_text().splitlines()
    assert {row.split(", ")[1] for row in rows} == {"0", "1"} and "NVIDIA L40S" in rows[0]
    facts = json.loads((directory / "snap2" / "facts" / "l40s.json").read_text())
    assert len(facts["gpu_facts"]["gpus"]) == 2

    pid = unit_state(t4)["main_pid"]
    code, out, err = gpuprov("baseline", "stop", "-i", inventory)
    assert code == 0, out + err[-3000:]
    assert not alive(pid)
    assert not t4.private_path("/etc/systemd/system/" + UNIT).exists()
    assert not t4.private_path("/usr/local/libexec/gpuprov/gpuprov-baseline-sampler").exists()

    # The sampler died mid-row (as under SIGKILL or a full disk): read up to the tear.
    samples = t4.private_path(SAMPLES)
    stopped = samples.read_text()
    samples.write_text(stopped + "2026/12/01 10:00:00.000, 0, Tesla T4, 12")
    torn = collect(inventory, directory / "snap3")["t4"]
    assert torn["samples"] == len(stopped.splitlines())
    assert "cut off mid-row" in torn["notes"][0]
    snapshot = directory / "snap3"
    (snapshot / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": [
        {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": str(count)}}}
        for name, count in (("t4", 1), ("l40s", 2))]}))
    (snapshot / "pods.json").write_text(json.dumps({"kind": "PodList", "items": []}))
    (snapshot / "events.json").write_text(json.dumps({"kind": "EventList", "items": []}))
    code, out, err = gpuprov("diagnose", "--snapshot", str(snapshot), "-o", "json")
    assert code == 0, err
    assert any("utilization/t4.csv: line %d is cut off mid-row" % (len(stopped.splitlines()) + 1) in note
               for note in json.loads(out)["notes"])
