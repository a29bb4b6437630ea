# -*- coding: utf-8 -*-
"""The device-plugin provider: per-profile time-slicing, plugin options, memory per slot."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import jsonschema
import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_schema, sharing
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import STRATEGIES, parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

MIXED = [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 4, "3g.40gb": 1}},
         {"devices": [2], "mig-enabled": False}]


def plan(sharing_vars, model="A100-80GB", count=3):
    intent, problems = parse_intent("n1", {"gpuprov_gpu_model": model, "gpuprov_gpu_count": count,
                                           "gpuprov_sharing": sharing_vars})
    if problems:
        return None, [str(p) for p in problems]
    node, problems = Planner().plan_node(intent)
    return node, [str(p) for p in problems]


def assert_plugin_accepts(config):
    # The project's schema (jsonschema, the standard validator) and the plugin's own rules.
    jsonschema.validate(config, device_plugin_schema.SCHEMA)
    assert device_plugin_schema.semantic_problems(config) == []


def test_unknown_strategy_names_every_providers_strategies():
    _node, problems = plan({"strategy": "dra"})
    assert problems == ["n1: gpuprov_sharing.strategy: unknown strategy 'dra'; choose one of "
                        "exclusive, time-slicing, mps, mig, hami"]
    # Each strategy has exactly one provider, and each provider key one owner.
    owners = [p.name for p in sharing.providers() for _s in p.strategies]
    assert len(owners) == len(STRATEGIES)


def test_mapping_time_slices_only_the_named_profile():
    node, problems = plan({"strategy": "mig", "mig": {"devices": MIXED}, "time_slicing_replicas": {"1g.10gb": 4}})
    assert problems == []
    # 2 GPUs x 4 instances x 4 replicas; 3g.40gb and the whole GPU stay unshared.
    assert node["resources"] == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 32, "nvidia.com/mig-3g.40gb": 2}
    config = node["device_plugin"]["config"]
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]
    assert_plugin_accepts(config)
    assert node["slots"] == [{"resource": "nvidia.com/mig-1g.10gb", "replicas": 4, "devices": 8,
                              "memory_gib_per_slot": round(9.75 / 4, 2)}]
    assert node["mig"]["time_slicing_replicas"] == {"1g.10gb": 4}


def test_mapping_with_whole_gpus_and_two_counts():
    node, problems = plan({"strategy": "mig", "mig": {"devices": MIXED},
                           "time_slicing_replicas": {"3g.40gb": 2, "gpu": 3}})
    assert problems == []
    assert node["resources"] == {"nvidia.com/gpu": 3, "nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-3g.40gb": 4}
    resources = node["device_plugin"]["config"]["sharing"]["timeSlicing"]["resources"]
    assert resources == [{"name": "nvidia.com/gpu", "replicas": 3}, {"name": "nvidia.com/mig-3g.40gb", "replicas": 2}]
    assert_plugin_accepts(node["device_plugin"]["config"])
    # Names follow content: other counts, other name.
    other, dummy = plan({"strategy": "mig", "mig": {"devices": MIXED}, "time_slicing_replicas": {"3g.40gb": 2, "gpu": 4}})
    assert other["device_plugin"]["config_name"] != node["device_plugin"]["config_name"]


def test_integer_still_time_slices_every_device():
    node, problems = plan({"strategy": "mig", "mig": {"devices": MIXED}, "time_slicing_replicas": 2})
    assert problems == []
    assert node["resources"] == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 4}
    assert node["device_plugin"]["config_name"].startswith("mig-mixed-ts-2-")


@pytest.mark.parametrize("sharing_vars, expected", [
    ({"time_slicing_replicas": {"2g.20gb": 4}}, "n1: gpuprov_sharing.time_slicing_replicas.2g.20gb: no GPU of this "
                                                "node has a 2g.20gb instance"),
    ({"time_slicing_replicas": {"1g.10gb": 0}}, "n1: gpuprov_sharing.time_slicing_replicas.1g.10gb: must be an integer"),
    ({"time_slicing_replicas": {"1g.10gb": "4"}}, "n1: gpuprov_sharing.time_slicing_replicas.1g.10gb: must be an integer"),
    ({"time_slicing_replicas": {"1g.10gb": 1}}, "n1: gpuprov_sharing.time_slicing_replicas: no device is time-sliced"),
    ({"time_slicing_replicas": {}}, "n1: gpuprov_sharing.time_slicing_replicas: must be an integer >= 2"),
    ({"time_slicing_replicas": [4]}, "n1: gpuprov_sharing.time_slicing_replicas: must be an integer >= 2"),
    ({"time_slicing_replicas": 1}, "n1: gpuprov_sharing.time_slicing_replicas: must be an integer >= 2, got 1"),
])
def test_bad_mappings_name_the_field(sharing_vars, expected):
    _node, problems = plan(dict({"strategy": "mig", "mig": {"devices": MIXED}}, **sharing_vars))
    assert any(p.startswith(expected) for p in problems), problems


def test_whole_gpu_key_needs_a_gpu_without_mig():
    devices = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    _node, problems = plan({"strategy": "mig", "mig": {"devices": devices}, "time_slicing_replicas": {"gpu": 2}})
    assert problems == ["n1: gpuprov_sharing.time_slicing_replicas.gpu: every GPU of this node has MIG instances; "
                        "no whole GPU to time-slice"]


def test_mapping_is_refused_with_the_single_strategy():
    devices = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    _node, problems = plan({"strategy": "mig", "mig": {"devices": devices, "strategy": "single"},
                            "time_slicing_replicas": {"3g.40gb": 2}})
    assert problems and "single" in problems[0] and "integer" in problems[0]


def test_plugin_options_reach_config_resources_and_name():
    node, problems = plan({"strategy": "time-slicing", "replicas": 4,
                           "device_plugin": {"rename_by_default": True, "fail_requests_greater_than_one": False}},
                          model="L40S", count=2)
    assert problems == []
    ts = node["device_plugin"]["config"]["sharing"]["timeSlicing"]
    assert ts["renameByDefault"] is True and ts["failRequestsGreaterThanOne"] is False
    assert_plugin_accepts(node["device_plugin"]["config"])
    assert node["resources"] == {"nvidia.com/gpu.shared": 8}
    assert node["device_plugin"]["config_name"] == "ts-4-rename-multi"
    assert any("may get two slots of the same device" in w for w in node["warnings"])
    assert any("pods must request nvidia.com/gpu.shared" in w for w in node["warnings"])


def test_defaults_keep_config_names_and_warn_about_multi_slot_requests():
    node, problems = plan({"strategy": "time-slicing", "replicas": 4}, model="T4", count=1)
    assert problems == [] and node["device_plugin"]["config_name"] == "ts-4"
    ts = node["device_plugin"]["config"]["sharing"]["timeSlicing"]
    assert ts["renameByDefault"] is False and ts["failRequestsGreaterThanOne"] is True
    assert any("rejects a pod asking for more than one nvidia.com/gpu" in w for w in node["warnings"])
    exclusive, dummy = plan({"strategy": "exclusive"}, model="T4", count=1)
    assert exclusive["slots"] == [] and not any("more than one" in w for w in exclusive["warnings"])


def test_mps_option_false_is_written_for_the_plugin():
    node, problems = plan({"strategy": "mps", "replicas": 4, "device_plugin": {"fail_requests_greater_than_one": False}},
                          model="L40S", count=1)
    assert problems == []
    mps = node["device_plugin"]["config"]["sharing"]["mps"]
    assert mps["failRequestsGreaterThanOne"] is False and node["device_plugin"]["config_name"] == "mps-4-multi"
    assert_plugin_accepts(node["device_plugin"]["config"])


@pytest.mark.parametrize("value, expected", [
    ({"rename_by_default": "yes"}, "n1: gpuprov_sharing.device_plugin.rename_by_default: must be true or false"),
    ({"fail_requests": True}, "n1: gpuprov_sharing.device_plugin: unknown key(s) fail_requests"),
    ("on", "n1: gpuprov_sharing.device_plugin: must be a mapping"),
])
def test_bad_plugin_options(value, expected):
    _node, problems = plan({"strategy": "time-slicing", "replicas": 4, "device_plugin": value}, model="T4", count=1)
    assert any(p.startswith(expected) for p in problems), problems


def test_plugin_options_with_exclusive_are_refused():
    _node, problems = plan({"strategy": "exclusive", "device_plugin": {"rename_by_default": True}}, model="T4", count=1)
    assert problems == ["n1: gpuprov_sharing.device_plugin: only used when GPUs are shared (time-slicing, mps, "
                        "mig with time_slicing_replicas)"]


def test_memory_per_slot_and_the_floor_warning():
    node, dummy = plan({"strategy": "time-slicing", "replicas": 4}, model="T4", count=2)
    assert node["slots"] == [{"resource": "nvidia.com/gpu", "replicas": 4, "devices": 2, "memory_gib_per_slot": 3.75}]
    assert not any("GiB of memory per slot" in w for w in node["warnings"])
    node, dummy = plan({"strategy": "time-slicing", "replicas": 16}, model="T4", count=2)
    assert node["slots"][0]["memory_gib_per_slot"] == 0.94
    assert "nvidia.com/gpu: 16 slots per device leave 0.94 GiB of memory per slot (below 2 GiB); use fewer " \
           "replicas or a larger device" in node["warnings"]
