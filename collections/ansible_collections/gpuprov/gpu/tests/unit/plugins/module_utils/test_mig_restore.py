# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov-mig-restore (module_utils/mig_restore.py) against the fake NVML.

State files are built the way the gpu_mig role builds them: the planner's node plan and the
node's gpu_facts through plugin_utils/mig_persist.boot_state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils import gpu_info, mig_restore
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.mig_persist import boot_state
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

# all-balanced on 7-slice GPUs: the solver's placements for 3g + 2g + 2x 1g.
H100_BALANCED = [("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)]
A100_BALANCED = H100_BALANCED


def plan_for(model, count, host="node1"):
    intent, problems = parse_intent(host, {
        "gpuprov_gpu_model": model, "gpuprov_gpu_count": count,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}})
    assert not problems, problems
    plan, problems = Planner().plan_node(intent)
    assert not problems, problems
    return plan


def write_state_file(fake_node, tmp_path, plan):
    """What the role writes: boot_state(plan, gpu_facts of the node), as JSON."""
    facts, _warnings = gpu_info.gather(sysfs_root=str(tmp_path / "no-sysfs"))
    path = tmp_path / "mig-state.json"
    path.write_text(json.dumps(boot_state(plan, facts), indent=2))
    return path


def run(path, *args):
    """main() as the unit runs it; returns (exit code, stdout, stderr) through capsys."""
    return mig_restore.main(["--state-file", str(path)] + list(args))


def converged(fake_node, tmp_path, model, count):
    """A node converged to all-balanced, its state file written: (state file, plan)."""
    fake_node.setup([(model, count)])
    plan = plan_for(model, count)
    path = write_state_file(fake_node, tmp_path, plan)
    assert run(path) == mig_restore.EXIT_OK
    return path, plan


def reboot(fake_node):
    with fake_node.edit() as state:
        fake_node.pynvml.reboot(state)


def resets(fake_node):
    return [c["argv"] for c in fake_node.calls() if c["tool"] == "nvidia-smi" and "-r" in c["argv"]]


def test_restores_exact_placements_after_a_hopper_reboot(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 2)
    reboot(fake_node)
    state = fake_node.load()
    assert [(g["mig_current"], g["gpu_instances"]) for g in state["gpus"]] == [(False, []), (False, [])]
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_OK

    out = capsys.readouterr().out
    state = fake_node.load()
    for index in (0, 1):
        assert state["gpus"][index]["mig_current"] is True
        assert fake_node.layout(index) == H100_BALANCED
        # Every GPU instance got its compute instance, as mig_layout makes them.
        assert all(len(gi["compute_instances"]) == 1 for gi in state["gpus"][index]["gpu_instances"])
        assert "GPU %d (NVIDIA H100 80GB HBM3" % index in out
    assert "enabled MIG mode; created 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4" in out
    assert resets(fake_node) == []  # Hopper applies the mode at once


def test_restores_layout_after_an_ampere_reboot_without_a_reset(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "A100-80GB", 1)
    assert resets(fake_node) == []  # nothing held the GPU: the driver reset it itself
    reboot(fake_node)
    state = fake_node.load()
    assert state["gpus"][0]["mig_current"] is True and state["gpus"][0]["gpu_instances"] == []
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_OK

    assert fake_node.layout(0) == A100_BALANCED
    assert resets(fake_node) == []  # the mode survived the reboot: no reset
    out = capsys.readouterr().out
    assert "created 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4" in out
    assert "MIG mode" not in out


def test_ampere_mode_change_is_applied_with_the_modules_reset(fake_node, tmp_path):
    # Enabling was left pending (something held the GPU then). The program must shut its NVML
    # session down before nvidia-smi -r: the fake refuses a reset while this process (where
    # the program runs) is still an NVML client.
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold()  # nvidia-persistenced still holds it: asking again cannot apply it
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 1))

    assert run(path) == mig_restore.EXIT_OK

    state = fake_node.load()
    assert resets(fake_node) == [["nvidia-smi", "-r", "-i", state["gpus"][0]["pci_bus_id"]]]
    assert state["gpus"][0]["mig_current"] is True
    assert fake_node.layout(0) == A100_BALANCED


def test_ampere_without_reset_reports_the_pending_change(fake_node, tmp_path, capsys):
    fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()  # nvidia-persistenced holds the GPU: the driver cannot reset it itself
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 1))

    assert run(path, "--no-reset") == mig_restore.EXIT_FAILED

    err = capsys.readouterr().err
    assert "GPU 0 (NVIDIA A100-SXM4-80GB" in err
    assert "pending a GPU reset and --no-reset was given" in err
    assert "nvidia-smi -r -i 00000000:07:00.0" in err
    assert resets(fake_node) == []
    assert fake_node.layout(0) == []


def test_a_failed_reset_is_named_and_the_gpu_left_pending(fake_node, tmp_path, capsys):
    state = fake_node.setup([("A100-80GB", 1)])
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 1))
    # A process holds the GPU from the side (persistenced, DCGM): the reset must fail.
    with fake_node.edit() as state:
        fake_node.pynvml.add_process(state, 0, 777, 10)

    assert run(path) == mig_restore.EXIT_FAILED

    err = capsys.readouterr().err
    assert "GPU 0 (NVIDIA A100-SXM4-80GB, 00000000:07:00.0)" in err
    assert "has running processes (PIDs 777)" in err


def test_second_run_changes_nothing(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 2)
    reboot(fake_node)
    assert run(path) == mig_restore.EXIT_OK
    before = fake_node.raw()
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_OK

    assert fake_node.raw() == before  # not one NVML change, GPU instance ids included
    out = capsys.readouterr().out
    assert out.count("already as the state file says") == 2
    assert "(0 changed)" in out
    assert run(path, "--dry-run") == mig_restore.EXIT_OK


def test_instances_already_in_place_are_kept(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 1)
    reboot(fake_node)
    with fake_node.edit() as state:
        fake_node.pynvml.set_mig_mode(state, 0, True)
        kept_id = fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 4)])[0]
        fake_node.pynvml.create_instances(state, 0, [("4g.40gb", 0)])  # not in the plan
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_OK

    assert fake_node.layout(0) == H100_BALANCED
    gis = dict((gi["placement"]["start"], gi["id"]) for gi in fake_node.load()["gpus"][0]["gpu_instances"])
    assert gis[4] == kept_id
    out = capsys.readouterr().out
    assert "destroyed 4g.40gb@0; created 2g.20gb@0 1g.10gb@2 1g.10gb@3; kept 3g.40gb@4" in out


def test_refuses_a_state_file_for_another_gpu_model(fake_node, tmp_path, capsys):
    fake_node.setup([("H100-80GB", 4)])
    # Written for an A100-80GB node whose GPUs sat at the same PCI addresses.
    other = tmp_path / "other"
    other.mkdir()
    real_state = fake_node.raw()
    fake_node.setup([("A100-80GB", 4)])
    path = write_state_file(fake_node, other, plan_for("A100-80GB", 4))
    with open(fake_node.state_path, "wb") as handle:
        handle.write(real_state)
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_WRONG_NODE

    err = capsys.readouterr().err
    assert ("GPU 3: state file expects NVIDIA A100-SXM4-80GB (0x20B2), node has NVIDIA H100 80GB HBM3 (0x2330)"
            in err)
    assert "nothing was changed" in err
    assert fake_node.raw() == real_state


def test_a_missing_gpu_is_named_and_the_others_restored(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 3)
    reboot(fake_node)
    # GPU 1 fell off the bus: NVML lists two GPUs and the third moves up to index 1.
    with fake_node.edit() as state:
        lost = state["gpus"].pop(1)
        for index, gpu in enumerate(state["gpus"]):
            gpu["index"] = index
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_FAILED

    captured = capsys.readouterr()
    assert "GPU 1 (%s): missing: the state file expects NVIDIA H100 80GB HBM3 (0x2330) there" % lost["pci_bus_id"] \
        in captured.err
    assert "1 not restored: GPU 1" in captured.err
    # The other two, found by their PCI bus id, are restored.
    state = fake_node.load()
    assert [g["mig_current"] for g in state["gpus"]] == [True, True]
    assert fake_node.layout(0) == H100_BALANCED and fake_node.layout(1) == H100_BALANCED
    assert "(GPU 2 in the state file)" in captured.out


def test_an_unreadable_gpu_does_not_stop_the_others(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 2)
    reboot(fake_node)
    with fake_node.edit() as state:
        state["gpus"][0]["lost"] = True
    capsys.readouterr()

    assert run(path) == mig_restore.EXIT_FAILED

    err = capsys.readouterr().err
    assert "GPU 0 (00000000:07:00.0): missing" in err and "NVML cannot read" in err
    assert fake_node.layout(1) == H100_BALANCED


def test_dry_run_says_what_it_would_do_and_changes_nothing(fake_node, tmp_path, capsys):
    path, _plan = converged(fake_node, tmp_path, "H100-80GB", 1)
    reboot(fake_node)
    before = fake_node.raw()
    capsys.readouterr()

    assert run(path, "--dry-run") == mig_restore.EXIT_CHANGES_NEEDED

    assert fake_node.raw() == before
    out = capsys.readouterr().out
    assert "would: enable MIG mode; create 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4" in out


def test_a_gpu_planned_without_mig_is_switched_back(fake_node, tmp_path):
    fake_node.setup([("A100-80GB", 2)])
    intent, problems = parse_intent("node1", {
        "gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
            {"devices": [1], "mig-enabled": False}]}}})
    assert not problems
    plan, _problems = Planner().plan_node(intent)
    path = write_state_file(fake_node, tmp_path, plan)
    with fake_node.edit() as state:
        fake_node.pynvml.set_mig_mode(state, 1, True)

    assert run(path) == mig_restore.EXIT_OK

    state = fake_node.load()
    assert (state["gpus"][0]["mig_current"], state["gpus"][1]["mig_current"]) == (True, False)
    assert fake_node.layout(0) == [("3g.40gb", 0), ("3g.40gb", 4)]


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    (json.dumps({"format": 9, "gpus": []}), "format is 9; this program reads format 1"),
    (json.dumps({"format": 1, "gpus": [{"index": 0, "mig_enabled": "yes", "name": "x"}]}),
     "gpus[0].mig_enabled must be true or false"),
    (json.dumps({"format": 1, "gpus": [{"index": 0, "mig_enabled": True}]}),
     "gpus[0] needs the GPU's name or pci_device_id"),
    (json.dumps({"format": 1, "gpus": [{"index": 0, "mig_enabled": True, "name": "x",
                                        "instances": [{"profile": "1g.10gb"}]}]}),
     "gpus[0].instances[0]: 1g.10gb needs placement.start"),
])
def test_a_bad_state_file_is_refused_naming_file_and_field(fake_node, tmp_path, capsys, content, message):
    fake_node.setup([("H100-80GB", 1)])
    path = tmp_path / "mig-state.json"
    path.write_text(content)
    before = fake_node.raw()

    assert run(path) == mig_restore.EXIT_USAGE

    err = capsys.readouterr().err
    assert str(path) in err and message in err
    assert fake_node.raw() == before


def test_a_missing_state_file_says_how_to_write_it(tmp_path, capsys):
    assert run(tmp_path / "nope.json") == mig_restore.EXIT_USAGE
    err = capsys.readouterr().err
    assert "cannot read state file %s" % (tmp_path / "nope.json") in err
    assert "gpuprov.gpu.gpu_mig" in err


def test_no_driver_changes_nothing_and_says_so(fake_node, tmp_path, capsys):
    fake_node.setup([("H100-80GB", 1)])
    path = write_state_file(fake_node, tmp_path, plan_for("H100-80GB", 1))
    # Without its state file the fake has no driver, like a node without libnvidia-ml.so.1.
    os.unlink(fake_node.state_path)

    assert run(path) == mig_restore.EXIT_NO_NVML

    assert "NVML is not usable, nothing was changed" in capsys.readouterr().err


def test_bad_arguments_and_help(capsys):
    assert mig_restore.main(["--frobnicate"]) == mig_restore.EXIT_USAGE
    assert mig_restore.main(["--help"]) == mig_restore.EXIT_OK
    out = capsys.readouterr().out
    for code, _text in mig_restore.EXIT_CODES:
        assert "\n  %d  " % code in out


def test_state_file_checks_match_what_the_role_writes(fake_node, tmp_path):
    fake_node.setup([("H100-80GB", 2)])
    path = write_state_file(fake_node, tmp_path, plan_for("H100-80GB", 2))
    data = mig_restore.load_state(str(path))
    assert [g["pci_device_id"] for g in data["gpus"]] == ["0x2330", "0x2330"]
    broken = copy.deepcopy(data)
    broken["gpus"][1]["index"] = 0
    with pytest.raises(mig_restore.StateFileError) as err:
        mig_restore.check_state(broken, "f.json")
    assert "f.json: gpus[1]: GPU 0 is listed twice" in str(err.value)


def test_passthrough_vm_is_told_to_reboot_not_reset(fake_node, tmp_path, capsys):
    # In a VM with passthrough the mode change stays pending with activation status
    # NOT_SUPPORTED (3) on some hosts, RESET_REQUIRED (16) on others: never try a reset.
    state = fake_node.setup([("A100-80GB", 2)])
    state["gpus"][0].update(passthrough=True, passthrough_status=fake_node.pynvml.NVML_ERROR_NOT_SUPPORTED)
    state["gpus"][1].update(passthrough=True)
    fake_node.save(state)
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 2))

    assert run(path) == mig_restore.EXIT_FAILED

    err = capsys.readouterr().err
    assert "activation status 3, as in a VM with GPU passthrough); reboot the VM" in err
    assert "activation status 16, as in a VM with GPU passthrough); reboot the VM" in err
    assert resets(fake_node) == []
