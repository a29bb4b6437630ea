# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""nvml.py reads what the driver really says, and corrects it where the driver is known wrong:
A30 profile counts, compute mode of MIG-enabled GPUs, NVLink peers and the NVLink fabric."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpuprov.gpu.plugins.module_utils import gpu_info
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import A30_INSTANCE_COUNTS, Nvml
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog


def _units(fake_node, **units):
    path = os.path.join(os.path.dirname(fake_node.state_path), "systemd-state.json")
    fake_node._monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", path)
    with open(path, "w") as handle:
        json.dump({"units": dict((name.replace("_", "-") + ".service", {"active": active, "enabled": True})
                                 for name, active in units.items())}, handle)


def test_a30_counts_are_nvidias_not_the_drivers(fake_node):
    state = fake_node.setup([("A30", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.save(state)
    with Nvml() as nvml:
        profiles = nvml.mig_profiles(0)
    counts = dict((name, p.max_count) for name, p in profiles.items())
    assert counts == {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1}


def test_the_a30_table_is_the_catalogs():
    # The catalog keeps the true counts; nvml.py's correction must never drift from it.
    model = catalog.get("A30")
    assert A30_INSTANCE_COUNTS == dict((p.name, p.max_count) for p in model.mig.profiles.values())
    assert 0x20B7 in model.pci_device_ids


def test_a30_layout_beyond_the_true_count_is_refused_before_any_change(fake_node):
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import MigError, plan_layout
    import pytest

    state = fake_node.setup([("A30", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.save(state)
    before = fake_node.raw()
    with Nvml() as nvml:
        info = nvml.gpu_info(0)
        with pytest.raises(MigError) as err:
            plan_layout(nvml, 0, info, nvml.mig_mode(0), {"1g.6gb+me": 2})
    assert "1g.6gb+me" in str(err.value)
    assert fake_node.raw() == before


def test_compute_mode_of_a_mig_gpu_comes_from_its_mig_devices(fake_node):
    state = fake_node.setup([("A100-80GB", 1), ("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    fake_node.save(state)
    with Nvml() as nvml:
        assert nvml.compute_mode(0) is None  # nvml.h: the parent handle is not the one to ask
        assert sorted(nvml.mig_compute_modes(0).values()) == ["DEFAULT", "DEFAULT"]
        assert nvml.compute_mode(1) == "DEFAULT"
        assert nvml.mig_compute_modes(1) == {}


def test_gpu_facts_report_compute_mode_per_mig_device(fake_node, tmp_path):
    state = fake_node.setup([("A100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("7g.80gb", 0)])
    fake_node.save(state)
    facts, warnings = gpu_info.gather(sysfs_root=str(tmp_path))
    gpu = facts["gpus"][0]
    assert gpu["error"] is None, gpu["error"]
    assert gpu["compute_mode"] is None
    assert [ci["compute_mode"] for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]] == ["DEFAULT"]


def test_nvlink_peers_on_an_nvswitch_baseboard(fake_node):
    fake_node.setup([("A100-80GB", 4), ("T4", 1)], nvlink="nvswitch")
    with Nvml() as nvml:
        links = [nvml.nvlink(index) for index in range(5)]
    assert links[0]["active_links"] == 12 and links[0]["nvswitch"] is True
    assert links[0]["peers"] == [1, 2, 3]
    assert links[4] == {"active_links": 0, "nvswitch": False, "peers": []}


def test_nvlink_bridged_pairs(fake_node):
    fake_node.setup([("A100-80GB", 4)], nvlink="pairs")
    with Nvml() as nvml:
        assert nvml.nvlink(2) == {"active_links": 12, "nvswitch": False, "peers": [3]}


def test_fabric_state_on_hopper_nvswitch(fake_node):
    fake_node.setup([("H100-80GB", 2), ("A100-80GB", 1)], nvlink="nvswitch")
    _units(fake_node, nvidia_fabricmanager=True)
    with Nvml() as nvml:
        assert nvml.fabric_state(0) == "completed"
        assert nvml.fabric_state(2) is None  # Ampere: NVML has no fabric state
    _units(fake_node, nvidia_fabricmanager=False)
    with Nvml() as nvml:
        assert nvml.fabric_state(1) == "not-started"
