"""`gpuprov status`: bad input, and how nodes are classified from the status playbook's output.

The whole command against SSH nodes (converge, reboot, drift, boot restore) is tested in
tests/fleet/test_mig_boot_fleet.py.
"""
import json

import yaml

from gpuprov import cmd_status


def test_bad_inventory_exits_2_before_contacting_anything(gpuprov, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {
        "gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "no-such-config"}}}}}}))

    code, out, err = gpuprov("status", "-i", str(inventory))

    assert code == 2
    assert "gpu01" in err and "no-such-config" in err
    assert out == ""


def test_no_gpu_node_matching_the_limit_is_bad_input(gpuprov, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {
        "gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}}}}))

    code, _out, err = gpuprov("status", "-i", str(inventory), "-l", "nothing-like-this")

    assert code == 2
    assert "limit 'nothing-like-this' matches no host of the inventory" in err


def test_nodes_are_classified_from_files_and_the_run_summary(tmp_path):
    (tmp_path / "gpu01.json").write_text(json.dumps({"host": "gpu01", "status": "in-sync", "drift": []}))
    drifted = [{"area": "mig-mode", "gpu": 0, "message": "GPU 0: MIG mode is disabled, the plan has it enabled"}]
    (tmp_path / "gpu02.json").write_text(json.dumps({"host": "gpu02", "status": "drifted", "drift": drifted}))
    summary = {"nodes": {
        "gpu01": {"status": "unchanged"}, "gpu02": {"status": "unchanged"},
        "gpu03": {"status": "unreachable", "failed": "Failed to connect to the host via ssh"},
        "gpu04": {"status": "failed", "failed": "Gather GPU facts: NVML is not usable"},
    }}

    nodes = cmd_status.collect(["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"], str(tmp_path), summary)

    assert nodes == {
        "gpu01": {"status": "in-sync", "drift": [], "message": None},
        "gpu02": {"status": "drifted", "drift": drifted, "message": None},
        "gpu03": {"status": "unreachable", "drift": [], "message": "Failed to connect to the host via ssh"},
        "gpu04": {"status": "error", "drift": [], "message": "Gather GPU facts: NVML is not usable"},
        "gpu05": {"status": "error", "drift": [], "message": "the status playbook did not report on this node"},
    }
    table = cmd_status.status_table({"nodes": nodes, "summary": cmd_status.summarize(nodes)})
    lines = table.splitlines()
    assert lines[0].split() == ["NODE", "STATUS", "WHAT"]
    assert lines[1].split() == ["gpu01", "in-sync", "-"]
    assert lines[2].startswith("gpu02") and lines[2].endswith("GPU 0: MIG mode is disabled, the plan has it enabled")
    assert lines[-1] == "gpuprov status: 1 in sync, 1 drifted, 1 unreachable, 2 error"


def test_nodes_are_classified_from_the_run_summary_alone():
    """`gpuprov status` reads each node's reading from the progress callback's summary."""
    drifted = [{"area": "kubelet", "gpu": None, "message": "kubelet: cpuManagerPolicy is none, the plan has static"}]
    summary = {"check_mode": True, "nodes": {
        "gpu01": {"status": "unchanged", "node_status": {"status": "in-sync", "drift": []}},
        "gpu02": {"status": "unchanged", "node_status": {"status": "drifted", "drift": drifted}},
        "gpu03": {"status": "failed", "failed": "Plan the node, read it and compare: NVML is not usable"},
    }}

    nodes = cmd_status.collect(["gpu01", "gpu02", "gpu03"], None, summary)

    assert nodes == {
        "gpu01": {"status": "in-sync", "drift": [], "message": None},
        "gpu02": {"status": "drifted", "drift": drifted, "message": None},
        "gpu03": {"status": "error", "drift": [], "message": "Plan the node, read it and compare: NVML is not usable"},
    }
