# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov-mig-restore resets as nvidia-smi(1) and mig-parted do: all pending GPUs of the node in
one command, NVLink peers where Fabric Manager cannot help, a VM told to reboot every time."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpuprov.gpu.plugins.module_utils import mig_restore
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.test_mig_restore import (
    A100_BALANCED,
    plan_for,
    resets,
    run,
    write_state_file,
)


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


def test_a_dgx_a100_is_reset_in_one_command(fake_node, tmp_path):
    state = fake_node.setup([("A100-80GB", 8)], nvlink="nvswitch")
    fake_node.hold()  # nvidia-persistenced: the driver cannot apply the mode change itself
    _fabric_manager(fake_node, False)
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 8))

    assert run(path) == mig_restore.EXIT_OK

    assert resets(fake_node) == [["nvidia-smi", "-r", "-i", ",".join(g["pci_bus_id"] for g in state["gpus"])]]
    assert all(fake_node.layout(index) == A100_BALANCED for index in range(8))


def test_a_lone_pending_a100_takes_its_nvlink_peers_along_without_fabric_manager(fake_node, tmp_path, capsys):
    state = fake_node.setup([("A100-80GB", 4)], nvlink="nvswitch")
    for index in (1, 2, 3):
        fake_node.pynvml.set_mig_mode(state, index, True)
    fake_node.save(state)
    fake_node.hold()
    _fabric_manager(fake_node, False)
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 4))

    assert run(path) == mig_restore.EXIT_OK

    assert resets(fake_node) == [["nvidia-smi", "-r", "-i", ",".join(g["pci_bus_id"] for g in state["gpus"])]]
    assert "NVLink peers" in capsys.readouterr().out
    assert all(fake_node.layout(index) == A100_BALANCED for index in range(4))


def test_a_vm_is_told_to_reboot_every_time(fake_node, tmp_path, capsys):
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["passthrough"] = True
    fake_node.save(state)
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 1))

    assert run(path) == mig_restore.EXIT_FAILED
    assert "reboot the VM" in capsys.readouterr().err
    # The boot after: the change is pending now, the answer must stay the same.
    assert run(path) == mig_restore.EXIT_FAILED
    err = capsys.readouterr().err
    assert "reboot the VM" in err and "Stop what holds" not in err
    assert resets(fake_node) == []


def test_a_failed_reset_does_not_ask_to_stop_persistenced(fake_node, tmp_path, capsys):
    fake_node.setup([("A100-80GB", 1)])
    fake_node.hold()
    fake_node.hold(unit="nvsm.service", name="nvsm", persistence=False)
    path = write_state_file(fake_node, tmp_path, plan_for("A100-80GB", 1))

    assert run(path) == mig_restore.EXIT_FAILED

    err = capsys.readouterr().err
    assert "nvsm" in err
    assert "nvidia-persistenced and nvidia-fabricmanager may keep running" in err
