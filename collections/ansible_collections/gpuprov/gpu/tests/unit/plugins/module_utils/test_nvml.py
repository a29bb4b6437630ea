# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils import nvml as nvml_utils
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError, NvmlUnavailable


def test_missing_nvidia_ml_py_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(NvmlUnavailable) as err:
        with Nvml():
            pass
    assert err.value.reason == "nvidia-ml-py not installed"
    assert "pip install nvidia-ml-py" in str(err.value)


def test_no_driver_is_unavailable(fake_node):
    with pytest.raises(NvmlUnavailable) as err:
        with Nvml():
            pass
    assert err.value.error_class == "NVMLError_LibraryNotFound"


def test_errors_name_gpu_operation_and_what_to_do(fake_node):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    gi_id = fake_node.pynvml.create_instances(state, 0, [("7g.80gb", 0)])[0]
    fake_node.pynvml.add_process(state, 0, 5, 1, gpu_instance_id=gi_id)
    fake_node.save(state)
    with Nvml() as nvml:
        nvml.gpu_info(0)
        with pytest.raises(NvmlError) as err:
            nvml.destroy_gpu_instance(0, gi_id)
    exc = err.value
    assert exc.gpu == 0 and exc.code == 19 and exc.error_class == "NVMLError_InUse"
    assert str(exc).startswith("GPU 0 (00000000:07:00.0): destroying a compute instance of GPU instance %d failed: "
                               "In use by another client; " % gi_id)
    assert exc.hint == "processes or compute instances still use it; stop them or set force"
    assert exc.as_dict()["operation"].startswith("destroying a compute instance")


def test_profiles_and_instances_come_from_nvml(fake_node):
    state = fake_node.setup([("A30", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("2g.12gb", 2)])
    fake_node.save(state)
    with Nvml() as nvml:
        profiles = nvml.mig_profiles(0)
        assert sorted(profiles) == ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]
        assert profiles["2g.12gb"].placements == [(0, 2), (2, 2)]
        assert nvml.compute_total(profiles) == 4
        specs = nvml.solver_profiles(profiles)
        assert specs["1g.6gb"].max_count == 4 and specs["4g.24gb"].compute_slices == 4
        [gi] = nvml.gpu_instances(0, profiles)
        assert (gi.profile, gi.start, gi.size) == ("2g.12gb", 2, 2)
        new_id = nvml.create_gpu_instance(0, profiles["1g.6gb"], 1)
        with pytest.raises(NvmlError) as err:
            nvml.create_gpu_instance(0, profiles["2g.12gb"], 1)
        assert "2g.12gb cannot start at memory slice 1 (valid: 0, 2)" in str(err.value)
        assert [g.id for g in nvml.gpu_instances(0, profiles) if g.start == 1] == [new_id]


def test_processes_are_attributed_to_their_gpu_instance(fake_node):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    ids = fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    fake_node.pynvml.add_process(state, 0, 100, 512, gpu_instance_id=ids[1])
    fake_node.pynvml.add_process(state, 0, 200, 256, gpu_instance_id=ids[0])
    fake_node.save(state)
    with Nvml() as nvml:
        assert nvml.processes(0) == [{"pid": 100, "used_memory_mib": 512, "gpu_instance_id": ids[1]},
                                     {"pid": 200, "used_memory_mib": 256, "gpu_instance_id": ids[0]}]


def test_compute_mode_round_trip(fake_node):
    fake_node.setup([("L40S", 1)])
    with Nvml() as nvml:
        assert nvml.compute_mode(0) == "DEFAULT"
        nvml.set_compute_mode(0, "EXCLUSIVE_PROCESS")
        assert nvml.compute_mode(0) == "EXCLUSIVE_PROCESS"
        assert nvml.mig_mode(0) == (None, None)


def test_profile_name_rule_matches_the_catalog_names():
    # go-nvlib's rule, used when the driver gives no profile name.
    assert nvml_utils.profile_name_from_memory(9984, 81920, 80, 1, 0) == "1g.10gb"
    assert nvml_utils.profile_name_from_memory(40448, 81920, 80, 3, 2) == "3g.40gb"
    assert nvml_utils.profile_name_from_memory(4864, 40960, 40, 1, 7) == "1g.5gb+me"


def test_profile_name_rounds_half_away_from_zero_like_go_nvlib():
    # B200 (183359 MiB): 1/8 of ceil(179.06 GiB) = 22.5 -> NVIDIA's name is 1g.23gb.
    assert nvml_utils.profile_name_from_memory(20992, 183359, 183359 / 1024.0, 1, 0) == "1g.23gb"


def test_empty_mig_slot_may_answer_invalid_argument(fake_node):
    # Some drivers answer INVALID_ARGUMENT, not NOT_FOUND, for an empty MIG device slot.
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    gi_id = fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 0)])[0]
    fake_node.pynvml.add_process(state, 0, 77, 10, gpu_instance_id=gi_id)
    state["empty_mig_slot_code"] = fake_node.pynvml.NVML_ERROR_INVALID_ARGUMENT
    fake_node.save(state)
    with Nvml() as nvml:
        assert [(p["pid"], p["gpu_instance_id"]) for p in nvml.processes(0)] == [(77, gi_id)]


def test_exclusive_compute_mode_turns_persistence_on_so_it_survives_the_last_client(fake_node):
    fake_node.setup([("H100-80GB", 2)])
    with Nvml() as nvml:
        assert nvml.set_compute_mode(0, "EXCLUSIVE_PROCESS") is True
        assert nvml.persistence_mode(0) is True
        assert nvml.set_compute_mode(1, "DEFAULT") is False  # the default needs no persistence
    # NVML is shut down: no client is left, and the mode must still be there.
    with Nvml() as nvml:
        assert nvml.compute_mode(0) == "EXCLUSIVE_PROCESS"


def test_persistenced_already_keeps_the_mode(fake_node):
    fake_node.setup([("H100-80GB", 1)])
    fake_node.hold()  # nvidia-persistenced runs: persistence mode reads on
    with Nvml() as nvml:
        assert nvml.set_compute_mode(0, "EXCLUSIVE_PROCESS") is False
    assert fake_node.load()["gpus"][0]["persistence_mode"] is False
