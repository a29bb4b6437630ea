# -*- coding: utf-8 -*-
"""The HAMi provider: advertised slots, requests, what it refuses."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner, plan_fleet


def plan(sharing_vars, model="L20", count=4, extra=None):
    variables = {"gpuprov_gpu_model": model, "gpuprov_gpu_count": count, "gpuprov_sharing": sharing_vars}
    variables.update(extra or {})
    intent, problems = parse_intent("n1", variables)
    if problems:
        return None, [str(p) for p in problems]
    node, problems = Planner().plan_node(intent)
    return node, [str(p) for p in problems]


def test_hami_node_plan():
    node, problems = plan({"strategy": "hami", "hami": {"split_count": 8, "memory_scaling": 1, "core_scaling": 1}})
    assert problems == []
    assert node["sharing_provider"] == "hami"
    assert node["resources"] == {"nvidia.com/gpu": 32}  # 4 GPUs x split_count
    assert node["device_plugin"] is None  # the NVIDIA plugin must not run here
    assert node["labels"] == {"gpu": "on"}
    hami = node["hami"]
    assert hami["requests"] == {"count": "nvidia.com/gpu", "memory_mib": "nvidia.com/gpumem",
                                "memory_percent": "nvidia.com/gpumem-percentage", "cores_percent": "nvidia.com/gpucores"}
    assert hami["gpus"][0] == {"index": 0, "memory_mib": 46068, "cores_percent": 100}
    assert node["slots"] == [{"resource": "nvidia.com/gpu", "replicas": 8, "devices": 4,
                              "memory_gib_per_slot": round(46068 / 1024.0 / 8, 2)}]
    assert any("soft" in w for w in node["warnings"])


def test_defaults_follow_hami_chart():
    node, problems = plan({"strategy": "hami"}, count=1)
    assert problems == [] and node["hami"]["split_count"] == 10 and node["resources"] == {"nvidia.com/gpu": 10}


def test_scaling_changes_registered_memory_and_warns_oversubscription():
    node, dummy = plan({"strategy": "hami", "hami": {"split_count": 4, "memory_scaling": 1.5, "core_scaling": 2}}, count=1)
    assert node["hami"]["gpus"][0] == {"index": 0, "memory_mib": int(46068 * 1.5), "cores_percent": 200}
    assert any("oversubscribes" in w for w in node["warnings"])


def test_mig_capable_gpus_are_planned_with_mig_off():
    node, problems = plan({"strategy": "hami", "hami": {"split_count": 4}}, model="A100-80GB", count=2)
    assert problems == []
    assert all(g["mig"] == {"enabled": False, "instances": [], "managed": True} for g in node["gpus"])
    assert [s["action"] for s in node["actions"] if s["action"].startswith("mig")] == ["mig-mode"]
    assert any("MIG is planned off" in w for w in node["warnings"])


@pytest.mark.parametrize("sharing_vars, expected", [
    ({"mig": {"config": "all-balanced"}}, "n1: gpuprov_sharing.mig: HAMi shares whole GPUs (hami-core) and cannot share "
                                          "MIG devices"),
    ({"mps": {"provider": "host"}}, "n1: gpuprov_sharing.mps: HAMi replaces the NVIDIA device plugin and cannot run "
                                    "beside a host MPS daemon"),
    ({"replicas": 4}, "n1: gpuprov_sharing.replicas: HAMi advertises hami.split_count"),
    ({"time_slicing_replicas": 2}, "n1: gpuprov_sharing.time_slicing_replicas: not used with strategy hami"),
    ({"device_plugin": {"rename_by_default": True}}, "n1: gpuprov_sharing.device_plugin: not used with strategy hami"),
    ({"hami": {"split_count": 0}}, "n1: gpuprov_sharing.hami.split_count: must be an integer from 1 to 100"),
    ({"hami": {"split_count": True}}, "n1: gpuprov_sharing.hami.split_count: must be an integer"),
    ({"hami": {"memory_scaling": 0}}, "n1: gpuprov_sharing.hami.memory_scaling: must be a number above 0"),
    ({"hami": {"core_scaling": "2"}}, "n1: gpuprov_sharing.hami.core_scaling: must be a number above 0"),
    ({"hami": {"splitcount": 4}}, "n1: gpuprov_sharing.hami: unknown key(s) splitcount"),
    ({"hami": 4}, "n1: gpuprov_sharing.hami: must be a mapping"),
])
def test_what_hami_refuses(sharing_vars, expected):
    _node, problems = plan(dict({"strategy": "hami"}, **sharing_vars), model="A100-80GB", count=1)
    assert any(p.startswith(expected) for p in problems), problems
    # Each problem once: the generic checks leave HAMi's keys to its provider.
    assert len(problems) == len(set(problems))


def test_hami_keys_with_another_strategy():
    _node, problems = plan({"strategy": "time-slicing", "replicas": 2, "hami": {"split_count": 4}})
    assert problems == ["n1: gpuprov_sharing.hami: not used with strategy time-slicing; it configures the hami "
                        "provider (strategy hami)"]


def test_fleet_with_hami_has_no_device_plugin_config_for_it():
    hami, dummy = parse_intent("h1", {"gpuprov_gpu_model": "L20", "gpuprov_sharing": {"strategy": "hami"}})
    ts, dummy = parse_intent("t1", {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 2}})
    result, problems = plan_fleet([hami, ts])
    assert problems == []
    assert list(result["device_plugin_configs"]) == ["ts-2"]
    assert result["summary"]["device_plugin_configs"] == {"ts-2": 1}
    assert result["summary"]["strategies"] == {"hami": 1, "time-slicing": 1}
