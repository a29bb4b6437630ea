# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""mig_mode's GPU reset as the driver and nvidia-smi(1) need it: every pending GPU of the node
in one nvidia-smi -r, NVLink peers added where Fabric Manager cannot help, nvidia-persistenced
left running, and a VM told to reboot on every run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpuprov.gpu.plugins.modules import mig_mode


def _modes(node):
    return [(g["mig_current"], g["mig_pending"]) for g in node.load()["gpus"]]


def _resets(node):
    return [c["argv"] for c in node.calls() if c["tool"] == "nvidia-smi" and "-r" in c["argv"]]


def _fabric_manager(node, running):
    path = os.path.join(os.path.dirname(node.state_path), "systemd-state.json")
    node._monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", path)
    data = {"units": {}}
    if os.path.exists(path):
        with open(path) as handle:
            data = json.load(handle)
    data["units"]["nvidia-fabricmanager.service"] = {"active": running, "enabled": True}
    with open(path, "w") as handle:
        json.dump(data, handle)


def test_dgx_a100_resets_all_pending_gpus_in_one_command(fake_node, run_module):
    # nvidia-persistenced runs (it keeps the driver's own reset from applying the change), and
    # Fabric Manager does not: each A100 can only be reset together with its NVLink peers.
    state = fake_node.setup([("A100-80GB", 8)], nvlink="nvswitch")
    fake_node.hold()
    _fabric_manager(fake_node, False)
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed, result.get("msg")
    buses = [g["pci_bus_id"] for g in state["gpus"]]
    assert _resets(fake_node) == [["nvidia-smi", "-r", "-i", ",".join(buses)]]
    assert _modes(fake_node) == [(True, True)] * 8
    assert all(g["reset_done"] and not g["reset_required"] for g in result["gpus"])
    assert result["reset"]["gpus"] == list(range(8)) and result["reset"]["nvlink_peers_added"] == []


def test_without_fabric_manager_a_pending_a100_is_reset_with_its_nvlink_peers(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 4)], nvlink="nvswitch")
    fake_node.hold()
    _fabric_manager(fake_node, False)
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [0], "reset": True})
    assert not result.failed, result.get("msg")
    assert _resets(fake_node) == [["nvidia-smi", "-r", "-i", ",".join(g["pci_bus_id"] for g in state["gpus"])]]
    assert result["reset"]["nvlink_peers_added"] == [1, 2, 3]
    assert _modes(fake_node) == [(True, True)] + [(False, False)] * 3


def test_with_fabric_manager_one_a100_is_reset_alone(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 4)], nvlink="nvswitch")
    fake_node.hold()
    _fabric_manager(fake_node, True)
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [0], "reset": True})
    assert not result.failed, result.get("msg")
    assert _resets(fake_node) == [["nvidia-smi", "-r", "-i", state["gpus"][0]["pci_bus_id"]]]
    assert result["reset"]["nvlink_peers_added"] == []


def test_other_pending_gpus_of_the_node_join_the_same_reset(fake_node, run_module):
    # GPU 1 waits for a reset from an earlier run (another mig_mode call of the same play):
    # one nvidia-smi -r takes both, as mig-parted resets every GPU in one command.
    state = fake_node.setup([("A100-80GB", 2)])
    state["gpus"][1]["mig_current"], state["gpus"][1]["mig_pending"] = True, False
    fake_node.save(state)
    fake_node.hold()
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [0], "reset": True})
    assert not result.failed, result.get("msg")
    assert _resets(fake_node) == [["nvidia-smi", "-r", "-i", ",".join(g["pci_bus_id"] for g in state["gpus"])]]
    assert _modes(fake_node) == [(True, True), (False, False)]


def test_nvidia_persistenced_is_no_reason_to_fail(fake_node, run_module):
    fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()  # nvidia-persistenced runs, as on every DGX
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed, result.get("msg")
    assert result["gpus"][0]["reset_done"] is True
    assert _modes(fake_node) == [(True, True)]


def test_a_failed_reset_names_what_to_stop_and_leaves_persistenced_alone(fake_node, run_module):
    fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()
    fake_node.hold(unit="nvidia-dcgm.service", name="nvidia-dcgm", persistence=False)
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert result.failed
    assert "nvidia-dcgm" in result["msg"]  # nvidia-smi's own answer names the holder
    hint = result["msg"].split("still pending", 1)[1]
    assert "DCGM" in hint and "nvidia-persistenced and nvidia-fabricmanager may keep running" in hint
    assert _modes(fake_node) == [(False, True)]


def test_a_vm_is_told_to_reboot_on_the_second_run_too(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["passthrough"] = True
    fake_node.save(state)
    first = run_module(mig_mode.main, {"state": "enabled"})
    assert any("reboot the VM" in w for w in first.warning_texts)
    # The next run finds the change pending; it must still know it is a VM.
    second = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not second.failed, second.get("msg")
    assert any("reboot the VM" in w for w in second.warning_texts)
    assert not any("stop" in w for w in second.warning_texts)
    assert second["gpus"][0]["activation_status"] == "NVML_ERROR_RESET_REQUIRED"
    assert second["gpus"][0]["reset_required"] is True and second["changed"] is False
    assert _resets(fake_node) == []


def test_a_gpu_without_a_pci_reset_function_is_not_reset(fake_node, run_module, tmp_path):
    # mig-parted v0.13.1 deployments/systemd/service.sh (assert_gpu_reset_available): an NVIDIA
    # 3D controller without /sys/bus/pci/devices/<address>/reset cannot be reset; reboot.
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold()  # the driver's own reset cannot apply it either
    device = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:07:00.0"
    device.mkdir(parents=True)
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True, "sysfs_root": str(tmp_path / "sys")})
    assert not result.failed, result.get("msg")
    assert any("cannot be reset" in w and "reboot" in w for w in result.warning_texts)
    assert _resets(fake_node) == []
    (device / "reset").write_text("")
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True, "sysfs_root": str(tmp_path / "sys")})
    assert not result.failed and result["gpus"][0]["reset_done"] is True
