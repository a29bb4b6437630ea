# -*- coding: utf-8 -*-
"""Plans against live gpu_facts: hardware checks and the MIG work a converge must do."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import live
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner


def plan_for(variables, host="n1"):
    intent, problems = parse_intent(host, variables)
    assert not problems, problems
    plan, problems = Planner().plan_node(intent)
    assert not problems, problems
    return plan


def facts_for(plan, name="NVIDIA A100-SXM4-80GB", device="0x20B2", mig=False, instances=None):
    gpus = []
    for gpu in plan["gpus"]:
        gpus.append({"index": gpu["index"], "name": name, "pci_device_id": device, "mig_capable": True,
                     "mig_mode_current": mig, "mig_mode_pending": mig,
                     "gpu_instances": copy.deepcopy(instances if instances is not None else [])})
    return {"driver_available": True, "gpus": gpus}


A100_BALANCED = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
                 "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}}


def test_model_of_uses_pci_id_then_name():
    assert live.model_of({"pci_device_id": "0x2330", "name": "whatever"}) == "H100-80GB"
    assert live.model_of({"pci_device_id": "0xFFFF", "name": "Tesla T4"}) == "T4"
    assert live.model_of({"name": "Mystery GPU"}) is None


def test_hardware_mismatch_shows_both_sides():
    plan = plan_for(A100_BALANCED)
    assert live.hardware_mismatch(plan, facts_for(plan)) is None
    facts = facts_for(plan)
    facts["gpus"].pop()
    msg = live.hardware_mismatch(plan, facts)
    assert msg == "the inventory declares 2x A100-80GB but the node has 1x A100-80GB"
    other = facts_for(plan, name="NVIDIA H100 80GB HBM3", device="0x2330")
    assert "node has 2x H100-80GB" in live.hardware_mismatch(plan, other)
    assert "NVML is not usable" in live.hardware_mismatch(plan, {"driver_available": False, "driver_error": "x"})


def test_mig_differences_fresh_node_needs_mode_and_layout():
    plan = plan_for(A100_BALANCED)
    diff = live.mig_differences(plan, facts_for(plan))
    assert diff == {"mode": [0, 1], "pending_reset": [], "layout": [0, 1]}


def test_mig_differences_converged_node_needs_nothing():
    plan = plan_for(A100_BALANCED)
    facts = facts_for(plan, mig=True, instances=plan["gpus"][0]["mig"]["instances"])
    assert live.mig_differences(plan, facts) == {"mode": [], "pending_reset": [], "layout": []}
    # Same profiles at other placements is a difference: the plan fixes placements.
    moved = copy.deepcopy(plan["gpus"][0]["mig"]["instances"])
    moved[0]["placement"]["start"] += 1
    facts = facts_for(plan, mig=True, instances=moved)
    assert live.mig_differences(plan, facts)["layout"] == [0, 1]


def test_pending_ampere_change_is_reported_as_pending():
    plan = plan_for(A100_BALANCED)
    facts = facts_for(plan)
    for gpu in facts["gpus"]:
        gpu["mig_mode_pending"] = True
    assert live.mig_differences(plan, facts)["pending_reset"] == [0, 1]
