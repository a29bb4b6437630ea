# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.modules import gpu_facts
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fake_sysfs import build_sysfs


def _pci_numa(sysfs, bus_id, node):
    address = "0000:" + bus_id.split(":", 1)[1].lower()
    path = os.path.join(sysfs, "bus", "pci", "devices", address)
    os.makedirs(path)
    with open(os.path.join(path, "numa_node"), "w") as handle:
        handle.write("%d\n" % node)


def test_mixed_node(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1), ("H100-80GB", 1), ("T4", 1)], numa_nodes=2)
    fake_node.pynvml.set_mig_mode(state, 1, True)
    gi_ids = fake_node.pynvml.create_instances(state, 1, [("4g.40gb", 0), ("3g.40gb", 4)])
    fake_node.pynvml.add_process(state, 1, 4242, 1000, gpu_instance_id=gi_ids[1])
    fake_node.pynvml.add_process(state, 2, 77, 500)
    fake_node.save(state)
    build_sysfs(fake_node.sysfs, numa_nodes=2, cores_per_node=4, smt=False)
    _pci_numa(fake_node.sysfs, state["gpus"][0]["pci_bus_id"], 0)
    _pci_numa(fake_node.sysfs, state["gpus"][1]["pci_bus_id"], 1)
    _pci_numa(fake_node.sysfs, state["gpus"][2]["pci_bus_id"], -1)

    result = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})

    assert not result.failed and result["changed"] is False
    facts = result["ansible_facts"]["gpu_facts"]
    assert facts["driver_available"] is True
    assert facts["driver_version"] == "550.54.15"
    assert facts["cuda_driver_version"] == "12.4"
    assert facts["gpu_count"] == 3
    a100, h100, t4 = facts["gpus"]
    assert (a100["name"], a100["pci_device_id"], a100["memory_total_mib"]) == ("NVIDIA A100-SXM4-80GB", "0x20B2", 81920)
    assert a100["mig_capable"] is True and a100["mig_mode_current"] is False and a100["gpu_instances"] == []
    assert a100["numa_node"] == 0 and h100["numa_node"] == 1 and t4["numa_node"] is None
    assert h100["mig_mode_current"] is True and h100["mig_mode_pending"] is True
    assert [(g["profile"], g["placement"]) for g in h100["gpu_instances"]] == [
        ("4g.40gb", {"start": 0, "size": 4}), ("3g.40gb", {"start": 4, "size": 4})]
    assert h100["gpu_instances"][1]["profile_id"] == 9
    assert h100["gpu_instances"][1]["compute_instances"][0]["slices"] == 3
    assert h100["processes"] == [{"pid": 4242, "used_memory_mib": 1000, "gpu_instance_id": gi_ids[1]}]
    assert h100["memory_used_mib"] == 1000
    assert t4["mig_capable"] is False and t4["mig_mode_current"] is None and t4["mig_mode_pending"] is None
    assert t4["processes"] == [{"pid": 77, "used_memory_mib": 500, "gpu_instance_id": None}]
    assert t4["compute_mode"] == "DEFAULT" and t4["compute_capability"] == "7.5"
    assert facts["numa_nodes"] == [{"id": 0, "cpus": "0-3", "cpu_list": [0, 1, 2, 3]},
                                   {"id": 1, "cpus": "4-7", "cpu_list": [4, 5, 6, 7]}]
    # The keys gpuprov diagnose reads.
    for gpu in facts["gpus"]:
        for key in ("index", "name", "uuid", "memory_total_mib", "memory_used_mib", "processes", "mig_mode_current"):
            assert key in gpu


def test_no_driver_is_reported_not_failed(fake_node, run_module):
    # No state file: as on a node without libnvidia-ml.so.1.
    build_sysfs(fake_node.sysfs, numa_nodes=1, cores_per_node=2, smt=False)
    result = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})
    assert not result.failed
    facts = result["ansible_facts"]["gpu_facts"]
    assert facts["driver_available"] is False
    assert "NVML Shared Library Not Found" in facts["driver_error"]
    assert "install the NVIDIA driver" in facts["driver_error"]
    assert facts["gpus"] == [] and facts["gpu_count"] == 0
    assert facts["numa_nodes"][0]["cpus"] == "0-1"


def test_driver_not_loaded(fake_node, run_module):
    fake_node.setup([("T4", 1)], driver="not_loaded")
    result = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})
    facts = result["ansible_facts"]["gpu_facts"]
    assert facts["driver_available"] is False
    assert "modprobe nvidia" in facts["driver_error"]
    # sysfs is missing too: reported as a warning, not a failure.
    assert facts["numa_nodes"] == []
    assert any("NUMA topology unreadable" in w for w in result.warning_texts)


def test_driver_without_gpus(fake_node, run_module):
    fake_node.setup([])
    result = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})
    facts = result["ansible_facts"]["gpu_facts"]
    assert facts["driver_available"] is True and facts["gpu_count"] == 0 and facts["gpus"] == []


def test_lost_gpu_is_listed_with_its_error(fake_node, run_module):
    state = fake_node.setup([("H100-80GB", 2)])
    state["gpus"][1]["lost"] = True
    fake_node.save(state)
    result = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})
    assert not result.failed
    good, lost = result["ansible_facts"]["gpu_facts"]["gpus"]
    assert good["error"] is None and good["name"] == "NVIDIA H100 80GB HBM3"
    assert lost["index"] == 1 and lost["name"] is None
    assert "GPU is lost" in lost["error"] and "fallen off the bus" in lost["error"]


def test_older_driver_without_newer_functions_never_fails(fake_node, run_module):
    # An R470-era libnvidia-ml lacks the _v3 process listing and the named v2 profile info:
    # nvidia-ml-py raises NVMLLibraryMismatchError (not an NVMLError) and FunctionNotFound.
    state = fake_node.setup([("A100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 0)])
    state["missing_functions"] = ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGpuInstanceProfileInfoV"]
    fake_node.save(state)
    result = run_module(gpu_facts.main, {})
    assert not result.failed
    gpu = result["ansible_facts"]["gpu_facts"]["gpus"][0]
    assert gpu["error"] is None and gpu["name"] == "NVIDIA A100-SXM4-80GB"
    # Profile names come from go-nvlib's memory rule when the v1 info has no name.
    assert [g["profile"] for g in gpu["gpu_instances"]] == ["3g.40gb"]
    assert any("driver is too old" in w and "R525" in w for w in result.warning_texts)


def test_non_root_gets_facts_and_a_warning(fake_node, run_module, monkeypatch):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.save(state)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = run_module(gpu_facts.main, {})
    assert not result.failed
    gpu = result["ansible_facts"]["gpu_facts"]["gpus"][0]
    assert gpu["error"] is None and gpu["mig_mode_current"] is True and "mig_profiles" not in gpu
    assert any("run as root (become: true)" in w for w in result.warning_texts)
