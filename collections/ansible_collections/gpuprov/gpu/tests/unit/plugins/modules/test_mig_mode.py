# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.modules import mig_mode


def _modes(node):
    return [(g["mig_current"], g["mig_pending"]) for g in node.load()["gpus"]]


def test_hopper_enables_at_once_and_is_idempotent(fake_node, run_module):
    fake_node.setup([("H100-80GB", 2)])
    first = run_module(mig_mode.main, {"state": "enabled"})
    assert not first.failed and first["changed"] is True
    assert [g["after"] for g in first["gpus"]] == [{"current": True, "pending": True}] * 2
    assert first["reset_required"] is False
    assert _modes(fake_node) == [(True, True), (True, True)]

    second = run_module(mig_mode.main, {"state": "enabled"})
    assert second["changed"] is False
    assert all(g["activation_status"] is None for g in second["gpus"])


def test_ampere_applies_at_once_when_nothing_holds_the_gpu(fake_node, run_module):
    # The driver resets an idle Ampere GPU itself inside nvmlDeviceSetMigMode.
    fake_node.setup([("A100-80GB", 1)])
    result = run_module(mig_mode.main, {"state": "enabled"})
    gpu = result["gpus"][0]
    assert not result.failed and gpu["activation_status"] == "NVML_SUCCESS"
    assert gpu["after"] == {"current": True, "pending": True} and gpu["reset_required"] is False
    assert fake_node.calls() == []


def test_ampere_stays_pending_without_reset(fake_node, run_module):
    fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()  # nvidia-persistenced holds the GPU: the driver's own reset fails
    first = run_module(mig_mode.main, {"state": "enabled"})
    gpu = first["gpus"][0]
    assert first["changed"] is True
    assert gpu["after"] == {"current": False, "pending": True}
    assert gpu["pending"] is True and gpu["reset_required"] is True and gpu["reset_done"] is False
    assert gpu["activation_status"] == "NVML_ERROR_IN_USE"
    assert first["reset_required"] is True
    assert any("pending until the GPU is reset" in w for w in first.warning_texts)
    assert fake_node.calls() == []  # no nvidia-smi without reset: true

    # Asking again changes nothing: the change is already pending.
    second = run_module(mig_mode.main, {"state": "enabled"})
    assert second["changed"] is False and second["gpus"][0]["reset_required"] is True


def test_ampere_reset_applies_the_pending_mode(fake_node, run_module):
    # A change left pending earlier (something held the GPU then). The module must shut its
    # own NVML session down before nvidia-smi -r: the fake refuses a reset while the test
    # process (where the module runs) is still an NVML client.
    state = fake_node.setup([("A100-80GB", 2)])
    state["gpus"][1]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold()  # nvidia-persistenced: asking again cannot apply it, the reset does
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [1], "reset": True})
    assert not result.failed and result["changed"] is True
    gpu = result["gpus"][0]
    assert gpu["index"] == 1 and gpu["reset_done"] is True
    assert gpu["after"] == {"current": True, "pending": True} and gpu["reset_required"] is False
    assert [c["argv"] for c in fake_node.calls()] == [["nvidia-smi", "-r", "-i", state["gpus"][1]["pci_bus_id"]]]
    assert _modes(fake_node) == [(False, False), (True, True)]


def test_reset_failure_names_the_gpu_and_leaves_mode_pending(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["passthrough"] = True
    fake_node.save(state)
    # Passthrough: NVML reports RESET_REQUIRED, so no reset is attempted; the VM must reboot.
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed
    assert result["gpus"][0]["activation_status"] == "NVML_ERROR_RESET_REQUIRED"
    assert result["gpus"][0]["reset_required"] is True
    assert any("reboot the VM" in w for w in result.warning_texts)
    assert fake_node.calls() == []


def test_passthrough_not_supported_status_means_reboot_the_vm(fake_node, run_module):
    # The MIG User Guide's VM example: "pending enable state ... Not Supported".
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0].update(passthrough=True, passthrough_status=fake_node.pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake_node.save(state)
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed
    gpu = result["gpus"][0]
    assert gpu["activation_status"] == "NVML_ERROR_NOT_SUPPORTED" and gpu["reset_required"] is True
    assert any("reboot the VM" in w for w in result.warning_texts)
    assert not any("nvidia-smi -r" in w for w in result.warning_texts)
    assert fake_node.calls() == []  # no reset tried


def test_a_pending_change_applies_by_itself_once_nothing_holds_the_gpu(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    # Nothing holds the GPU any more: asking again lets the driver reset it itself.
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed and result["changed"] is True
    assert result["gpus"][0]["activation_status"] == "NVML_SUCCESS" and result["reset"]["gpus"] == []
    assert _modes(fake_node) == [(True, True)] and fake_node.calls() == []


def test_held_ampere_gpu_resets_once_the_holder_is_gone(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()  # nvidia-persistenced runs throughout: it is no reason to fail
    fake_node.hold(unit="nvidia-dcgm.service", name="nvidia-dcgm", persistence=False)
    held = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert held.failed and "nvidia-dcgm" in held["msg"]
    assert _modes(fake_node) == [(False, True)]
    fake_node.release(unit="nvidia-dcgm.service")
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True})
    assert not result.failed and result["gpus"][0]["reset_done"] is True
    assert _modes(fake_node) == [(True, True)]
    assert state["gpus"][0]["pci_bus_id"] in result["gpus"][0]["pci_bus_id"]


def test_non_root_is_told_to_become_root(fake_node, run_module, monkeypatch):
    fake_node.setup([("H100-80GB", 1)])
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = run_module(mig_mode.main, {"state": "enabled"})
    assert result.failed and "run as root (become: true)" in result["msg"]
    assert _modes(fake_node) == [(False, False)]


def test_reset_refused_by_nvidia_smi(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1)])
    fake_node.pynvml.add_process(state, 0, 999, 100)
    fake_node.save(state)
    result = run_module(mig_mode.main, {"state": "enabled", "reset": True, "ignore_processes": True})
    assert result.failed
    assert "GPU 0 (NVIDIA A100-SXM4-80GB, 00000000:07:00.0)" in result["msg"]
    assert "is currently in use by another process (process 999)" in result["msg"]
    assert "still pending" in result["msg"]
    # The mode was set (it is pending now), so the failed task reports a change.
    assert result["changed"] is True
    assert result["gpus"][0]["after"] == {"current": False, "pending": True}
    assert result["gpus"][0]["reset_required"] is True
    assert _modes(fake_node) == [(False, True)]


def test_check_mode_predicts_and_changes_nothing(fake_node, run_module):
    fake_node.setup([("A100-80GB", 1), ("H100-80GB", 1)])
    before = fake_node.raw()
    result = run_module(mig_mode.main, {"state": "enabled"}, check_mode=True, diff=True)
    assert result["changed"] is True
    ampere, hopper = result["gpus"]
    # Nothing holds either GPU: Ampere's driver resets it itself, Hopper needs no reset.
    assert ampere["after"] == {"current": True, "pending": True} and ampere["reset_required"] is False
    assert hopper["after"] == {"current": True, "pending": True} and hopper["reset_required"] is False
    assert fake_node.raw() == before
    assert "GPU 0 (NVIDIA A100-SXM4-80GB): MIG disabled\n" in result["diff"]["before"]
    assert "GPU 0 (NVIDIA A100-SXM4-80GB): MIG enabled" in result["diff"]["after"]
    assert "GPU 1 (NVIDIA H100 80GB HBM3): MIG enabled" in result["diff"]["after"]


def test_refuses_gpu_with_processes_and_lists_pids(fake_node, run_module):
    state = fake_node.setup([("H100-80GB", 2)])
    fake_node.pynvml.add_process(state, 1, 4242, 100)
    fake_node.pynvml.add_process(state, 1, 4343, 100)
    fake_node.save(state)
    result = run_module(mig_mode.main, {"state": "enabled"})
    assert result.failed
    assert "GPU 1 (NVIDIA H100 80GB HBM3, 00000000:17:00.0) has running processes (PIDs 4242, 4343)" in result["msg"]
    # Checked before any change: GPU 0 was not touched either.
    assert _modes(fake_node) == [(False, False), (False, False)]


def test_ignore_processes_leaves_the_change_pending(fake_node, run_module):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.add_process(state, 0, 4242, 100)
    fake_node.save(state)
    result = run_module(mig_mode.main, {"state": "enabled", "ignore_processes": True})
    gpu = result["gpus"][0]
    assert gpu["activation_status"] == "NVML_ERROR_IN_USE"
    assert gpu["after"] == {"current": False, "pending": True} and gpu["reset_required"] is True


def test_all_skips_gpus_without_mig(fake_node, run_module):
    fake_node.setup([("H100-80GB", 1), ("T4", 1)])
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": ["all"]})
    assert not result.failed
    assert [g["index"] for g in result["gpus"]] == [0]
    assert result["skipped_gpus"] == [{"index": 1, "name": "Tesla T4", "reason": "no MIG support"}]


def test_naming_a_gpu_without_mig_fails(fake_node, run_module):
    fake_node.setup([("H100-80GB", 1), ("T4", 1)])
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [0, 1]})
    assert result.failed
    assert "GPU 1 (Tesla T4, 00000000:17:00.0) does not support MIG" in result["msg"]
    assert _modes(fake_node) == [(False, False), (None, None)]


def test_unknown_index_fails(fake_node, run_module):
    fake_node.setup([("H100-80GB", 1)])
    result = run_module(mig_mode.main, {"state": "enabled", "gpus": [3]})
    assert result.failed and "GPU 3 does not exist; this node has 1 GPU(s)" in result["msg"]


def test_disable_destroys_instances_first(fake_node, run_module):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    fake_node.save(state)
    result = run_module(mig_mode.main, {"state": "disabled"})
    assert not result.failed and result["changed"] is True
    gpu = result["gpus"][0]
    assert [d["profile"] for d in gpu["destroyed_instances"]] == ["3g.40gb", "3g.40gb"]
    assert gpu["after"] == {"current": False, "pending": False}
    assert fake_node.load()["gpus"][0]["gpu_instances"] == []


def test_no_driver_fails_with_a_clear_message(fake_node, run_module):
    result = run_module(mig_mode.main, {"state": "enabled"})
    assert result.failed
    assert result["msg"].startswith("No usable NVML on this node")
    assert "install the NVIDIA driver" in result["msg"]
