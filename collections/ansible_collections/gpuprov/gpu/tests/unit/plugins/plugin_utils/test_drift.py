# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov status's comparison: plugin_utils/drift.py and the MIG state file of mig_persist."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import drift, mig_persist
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

H100_MIG = {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2,
            "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}}


def plan_for(variables, host="gpu01"):
    intent, problems = parse_intent(host, variables)
    assert not problems, problems
    plan, problems = Planner().plan_node(intent)
    assert not problems, problems
    return plan


def gi(profile, start, size, with_ci=True):
    return {"id": start + 1, "profile": profile, "placement": {"start": start, "size": size},
            "compute_instances": [{"id": 0}] if with_ci else []}


def facts_as_planned(plan, name="NVIDIA H100 80GB HBM3", device="0x2330"):
    """gpu_facts of a node converged to ``plan``."""
    gpus = []
    for gpu in plan["gpus"]:
        mig = gpu["mig"]
        enabled = bool(mig and mig["enabled"])
        gpus.append({
            "index": gpu["index"], "name": name, "pci_device_id": device,
            "pci_bus_id": "00000000:%02X:00.0" % (7 + 16 * gpu["index"]), "error": None,
            "mig_capable": mig is not None, "mig_mode_current": enabled if mig else None,
            "mig_mode_pending": enabled if mig else None,
            "gpu_instances": [gi(i["profile"], i["placement"]["start"], i["placement"]["size"])
                              for i in (mig["instances"] if enabled else [])],
        })
    return {"driver_available": True, "gpus": gpus}


def boot_as_installed(plan, facts):
    return {"unit": "gpuprov-mig-restore.service", "unit_exists": True, "unit_enabled": "enabled",
            "state_text": json.dumps(mig_persist.boot_state(plan, facts), indent=2)}


def converged_record(plan):
    facts = facts_as_planned(plan)
    return {"gpu_facts": facts, "boot": boot_as_installed(plan, facts)}


def messages(result):
    return [item["message"] for item in result["drift"]]


def test_converged_node_is_in_sync():
    plan = plan_for(H100_MIG)
    assert drift.node_drift(plan, converged_record(plan)) == {"status": "in-sync", "drift": []}


def test_hopper_node_after_a_reboot_lost_mode_and_instances():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    for gpu in record["gpu_facts"]["gpus"]:
        gpu.update(mig_mode_current=False, mig_mode_pending=False, gpu_instances=[])

    result = drift.node_drift(plan, record)

    assert result["status"] == "drifted"
    assert messages(result) == [
        "GPU 0: MIG mode is disabled, the plan has it enabled",
        "GPU 0: instances missing: 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4",
        "GPU 1: MIG mode is disabled, the plan has it enabled",
        "GPU 1: instances missing: 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4",
    ]
    assert [(i["area"], i["gpu"]) for i in result["drift"]] == [
        ("mig-mode", 0), ("mig-instances", 0), ("mig-mode", 1), ("mig-instances", 1)]


def test_missing_and_extra_instances_are_named_with_their_placement():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    gpu1 = record["gpu_facts"]["gpus"][1]
    gpu1["gpu_instances"] = [gi("3g.40gb", 4, 4), gi("4g.40gb", 0, 4)]

    assert messages(drift.node_drift(plan, record)) == [
        "GPU 1: instances missing: 2g.20gb@0 1g.10gb@2 1g.10gb@3; extra instances: 4g.40gb@0"]


def test_gpu_instance_without_compute_instance_is_drift():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    record["gpu_facts"]["gpus"][0]["gpu_instances"][3] = gi("3g.40gb", 4, 4, with_ci=False)

    assert messages(drift.node_drift(plan, record)) == [
        "GPU 0: GPU instances without a compute instance: 3g.40gb@4"]


def test_ampere_change_waiting_for_a_reset_is_named():
    plan = plan_for({"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1,
                     "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}})
    facts = facts_as_planned(plan, name="NVIDIA A100-SXM4-80GB", device="0x20B2")
    facts["gpus"][0].update(mig_mode_current=False, mig_mode_pending=True, gpu_instances=[])
    record = {"gpu_facts": facts, "boot": boot_as_installed(plan, facts)}

    assert messages(drift.node_drift(plan, record))[0] == \
        "GPU 0: MIG enable is pending a GPU reset (the plan has MIG enabled)"


def test_other_hardware_is_reported_alone():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    record["gpu_facts"]["gpus"].pop()

    result = drift.node_drift(plan, record)

    assert [i["area"] for i in result["drift"]] == ["hardware"]
    assert messages(result) == ["the inventory declares 2x H100-80GB but the node has 1x H100-80GB"]


@pytest.mark.parametrize("change, message", [
    ({"unit_exists": False, "unit_enabled": None},
     "gpuprov-mig-restore.service is missing: the MIG layout will not come back after a reboot"),
    ({"unit_enabled": "disabled"},
     "gpuprov-mig-restore.service is not enabled (systemd says disabled): it will not run at boot"),
    ({"state_text": None}, "the MIG state file is missing: the restore has nothing to apply at boot"),
    ({"state_text": "{oops"}, "the MIG state file is not valid JSON"),
])
def test_boot_restore_problems(change, message):
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    record["boot"].update(change)

    result = drift.node_drift(plan, record)

    assert result["status"] == "drifted"
    assert [i["area"] for i in result["drift"]] == ["boot-restore"]
    assert messages(result)[0].startswith(message)


def test_a_stale_state_file_says_what_a_reboot_would_restore():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    old_plan = plan_for(dict(H100_MIG, gpuprov_sharing={"strategy": "mig", "mig": {"config": "all-3g.40gb"}}))
    record["boot"]["state_text"] = json.dumps(mig_persist.boot_state(old_plan, record["gpu_facts"]))

    assert messages(drift.node_drift(plan, record)) == [
        "the MIG state file records another state than the plan: a reboot would restore "
        "GPU 0: 3g.40gb@0 3g.40gb@4; GPU 1: 3g.40gb@0 3g.40gb@4"]


def test_a_leftover_unit_on_a_node_planned_without_mig():
    plan = plan_for(dict(H100_MIG, gpuprov_sharing={"strategy": "time-slicing", "replicas": 4}))
    facts = facts_as_planned(plan)
    record = {"gpu_facts": facts, "boot": {"unit": "gpuprov-mig-restore.service", "unit_exists": True,
                                           "unit_enabled": "enabled", "state_text": "{}"}}

    assert messages(drift.node_drift(plan, record)) == [
        "gpuprov-mig-restore.service is installed although the plan enables MIG on no GPU; at boot it "
        "would apply a stale MIG state"]
    record["boot"] = {"unit": "gpuprov-mig-restore.service", "unit_exists": False, "unit_enabled": None,
                      "state_text": "{}"}
    # restore_remove.yml also runs for a state file left alone: status must see it too.
    assert messages(drift.node_drift(plan, record)) == [
        "the MIG state file is still there although the plan enables MIG on no GPU (a converge removes it)"]
    record["boot"]["state_text"] = None
    assert drift.node_drift(plan, record)["status"] == "in-sync"


def test_boot_restore_not_read_is_not_compared():
    plan = plan_for(H100_MIG)
    record = converged_record(plan)
    del record["boot"]  # gpu_mig_persist: false
    assert drift.node_drift(plan, record)["status"] == "in-sync"


def test_kubelet_and_mps_drift():
    plan = plan_for({"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 1,
                     "gpuprov_sharing": {"strategy": "mps", "replicas": 4, "mps": {"provider": "host"}},
                     "gpuprov_kubelet": {"cpu_manager_policy": "static", "reserved_system_cpus": "0"}})
    facts = facts_as_planned(plan, name="NVIDIA L40S", device="0x26B9")
    base = {"gpu_facts": facts, "kubelet": {"changed_keys": [], "error": None},
            "mps": {"running": True, "changed": False, "error": None}}
    assert drift.node_drift(plan, base)["status"] == "in-sync"

    record = copy.deepcopy(base)
    record["kubelet"]["changed_keys"] = ["cpuManagerPolicy", "reservedSystemCPUs"]
    record["mps"]["running"] = False
    assert messages(drift.node_drift(plan, record)) == [
        "kubelet config differs from the plan: cpuManagerPolicy, reservedSystemCPUs",
        "the MPS control daemon is down"]

    record = copy.deepcopy(base)
    record["kubelet"]["error"] = "path /var/lib/kubelet/config.yaml does not exist"
    record["mps"]["changed"] = True
    assert messages(drift.node_drift(plan, record)) == [
        "the kubelet config could not be checked: path /var/lib/kubelet/config.yaml does not exist",
        "MPS compute mode or limits differ from the plan"]


def test_an_mps_daemon_without_its_limits_is_drift_that_names_them():
    plan = plan_for({"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 1,
                     "gpuprov_sharing": {"strategy": "mps", "replicas": 4, "mps": {"provider": "host"}}})
    facts = facts_as_planned(plan, name="NVIDIA L40S", device="0x26B9")
    record = {"gpu_facts": facts, "mps": {
        "running": True, "changed": True, "error": None, "without_limits": True,
        "differences": ["active thread percentage 100 (plan 25)", "pinned memory limit of GPU-1 none (plan 11517 MiB)"]}}
    assert messages(drift.node_drift(plan, record)) == [
        "the MPS control daemon runs without its limits (a start that did not set them): active thread "
        "percentage 100 (plan 25); pinned memory limit of GPU-1 none (plan 11517 MiB)"]
    record["mps"].update(without_limits=False, differences=["active thread percentage 50 (plan 25)"])
    assert messages(drift.node_drift(plan, record)) == [
        "MPS compute mode or limits differ from the plan: active thread percentage 50 (plan 25)"]


def test_boot_state_records_identity_mode_and_placements():
    plan = plan_for(dict(H100_MIG, gpuprov_sharing={"strategy": "mig", "mig": {"devices": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [1], "mig-enabled": False}]}}))
    facts = facts_as_planned(plan)

    state = mig_persist.boot_state(plan, facts)

    assert state == {"format": 1, "host": "gpu01", "gpus": [
        {"index": 0, "model": "H100-80GB", "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x2330",
         "pci_bus_id": "00000000:07:00.0", "mig_enabled": True,
         "instances": [{"profile": "3g.40gb", "placement": {"start": 0, "size": 4}},
                       {"profile": "3g.40gb", "placement": {"start": 4, "size": 4}}]},
        {"index": 1, "model": "H100-80GB", "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x2330",
         "pci_bus_id": "00000000:17:00.0", "mig_enabled": False, "instances": []}]}
    assert mig_persist.restore_wanted(plan)


def test_boot_state_needs_readable_gpus():
    plan = plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    facts["gpus"][1] = {"index": 1, "name": None, "pci_device_id": None, "error": "GPU is lost"}
    with pytest.raises(mig_persist.BootStateError) as err:
        mig_persist.boot_state(plan, facts)
    assert "GPU 1: gpu_facts cannot identify it (GPU is lost)" in str(err.value)
    with pytest.raises(mig_persist.BootStateError) as err:
        mig_persist.boot_state(plan, {"driver_available": False, "driver_error": "no driver"})
    assert "NVML not usable: no driver" in str(err.value)
