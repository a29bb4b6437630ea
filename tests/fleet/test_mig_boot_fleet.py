"""MIG across a reboot, over real SSH: converge, `gpuprov status`, reboot, boot restore.

A Hopper node (2x H100) and an Ampere node (1x A100) are converged to NVIDIA's balanced MIG
layout with `gpuprov apply --playbook gpuprov.gpu.mig`; `gpuprov status` then says both are in
sync. The Hopper node "reboots" (the fake NVML's reboot(): instances and MIG mode gone), and
status names what drifted. Running the installed unit's ExecStart= on the node, as systemd
would at boot, brings back the identical layout, placements included, and status is in sync
again.
"""
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
from test_fleet import FLEET_SKIP, fleet_test, free_first_host  # noqa: E402

sys.path.insert(0, str(fleetlib.FAKES_PYTHON))
import pynvml as fake_pynvml  # noqa: E402  (the fake, for its reboot() helper)

REPO_ROOT = fleetlib.REPO_ROOT
UNIT = "gpuprov-mig-restore.service"
NODES = [
    {"name": "hopper", "gpus": [{"model": "H100-80GB", "count": 2}]},
    {"name": "ampere", "gpus": [{"model": "A100-80GB", "count": 1}]},
]


def gpuprov(*args):
    proc = subprocess.run([sys.executable, "-m", "gpuprov"] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=900, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def layout(node):
    """{GPU index: (MIG mode, [(profile id, start, size)])} from the node's fake NVML."""
    state = fake_pynvml.load_state(str(node.private_path(fleetlib.FAKE_ROOT + "/nvml.json")))
    return dict((gpu["index"], (gpu["mig_current"], sorted(
        (gi["profile_id"], gi["placement"]["start"], gi["placement"]["size"]) for gi in gpu["gpu_instances"])))
        for gpu in state["gpus"])


def status(inventories):
    code, out, err = gpuprov("status", *inventories, "-o", "json")
    try:
        return code, json.loads(out)["nodes"], err
    except ValueError:
        pytest.fail("gpuprov status printed no JSON (exit %d):\n%s\n%s" % (code, out, err[-4000:]))


@pytest.fixture(scope="module")
def mig_fleet(tmp_path_factory):
    if FLEET_SKIP:
        pytest.skip(FLEET_SKIP)
    directory = tmp_path_factory.mktemp("migboot")
    specs = [fleetlib.node_spec_from_dict(raw, "nodes[%d]" % i) for i, raw in enumerate(NODES)]
    fleet = fleetlib.Fleet.create(directory / "fleet", specs, first_host=free_first_host(len(specs)))
    fleet.up()
    try:
        sharing = directory / "mig.yml"
        sharing.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"vars": {
            "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}},
            # /usr/local is shared by every node of the fleet; /etc/gpuprov is private to each.
            "gpu_mig_restore_program": "/etc/gpuprov/libexec/gpuprov-mig-restore",
            "gpu_mig_restore_lib_dir": "/etc/gpuprov/lib",
            # The host's own ansible_managed, a template: status renders the restore's files as
            # the role does, or a converged node would never be in sync.
            "ansible_managed": "gpuprov on {{ inventory_hostname }}",
        }}}}}))
        yield fleet, ["-i", str(fleet.inventory), "-i", str(sharing)]
    finally:
        fleet.down()


@fleet_test
def test_mig_layout_survives_a_reboot_through_the_boot_unit(mig_fleet):
    fleet, inventories = mig_fleet
    hopper, ampere = fleet.node("hopper"), fleet.node("ampere")

    code, out, err = gpuprov("apply", *inventories, "--playbook", "gpuprov.gpu.mig", "--waves", "100%", "-q")
    assert code == 0, out[-6000:] + err[-3000:]
    converged = layout(hopper)
    assert converged[0][0] is True and len(converged[0][1]) == 4 and converged[0] == converged[1]
    for node in (hopper, ampere):
        assert node.private_path("/etc/systemd/system/" + UNIT).read_text().startswith("# gpuprov on %s\n" % node.name)
        assert json.loads(node.private_path(fleetlib.FAKE_ROOT + "/systemd.json").read_text())[
            "units"][UNIT]["enabled"] is True

    code, nodes, err = status(inventories)
    assert code == 0, (nodes, err[-3000:])
    assert nodes == {"ampere": {"status": "in-sync", "drift": [], "message": None, "node_name": "ampere"},
                     "hopper": {"status": "in-sync", "drift": [], "message": None, "node_name": "hopper"}}

    # Reboot the Hopper node: its GPU instances and (Hopper) its MIG mode are gone.
    with fake_pynvml.mutate_state(str(hopper.private_path(fleetlib.FAKE_ROOT + "/nvml.json"))) as state:
        fake_pynvml.reboot(state)
    assert layout(hopper) == {0: (False, []), 1: (False, [])}

    code, nodes, err = status(inventories)
    assert code == 1
    assert nodes["ampere"]["status"] == "in-sync"
    assert nodes["hopper"]["status"] == "drifted"
    assert [(item["area"], item["gpu"]) for item in nodes["hopper"]["drift"]] == [
        ("mig-mode", 0), ("mig-instances", 0), ("mig-mode", 1), ("mig-instances", 1)]
    messages = [item["message"] for item in nodes["hopper"]["drift"]]
    assert messages[0] == "GPU 0: MIG mode is disabled, the plan has it enabled"
    assert messages[1] == "GPU 0: instances missing: 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"

    # What systemd runs at boot: the installed unit's ExecStart=, on the node.
    unit = hopper.private_path("/etc/systemd/system/" + UNIT).read_text()
    exec_start = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert len(exec_start) == 1
    argv = shlex.split(exec_start[0])
    proc = subprocess.run(["ssh", "-F", str(fleet.ssh_config), "hopper", shlex.join(argv)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("enabled MIG mode; created 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4") == 2

    assert layout(hopper) == converged

    code, nodes, err = status(inventories)
    assert code == 0, (nodes, err[-3000:])
    assert {host: node["status"] for host, node in nodes.items()} == {"ampere": "in-sync", "hopper": "in-sync"}
