# -*- coding: utf-8 -*-
"""Plain role inputs: planned by the CLI's planner, problems named after the caller's variables."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import plain_inputs
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner, plan_fleet

TWO_3G = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def inventory_plan(variables, host="n1"):
    intent, problems = parse_intent(host, variables)
    assert not problems, problems
    plan, problems = Planner().plan_node(intent)
    assert not problems, problems
    return plan


def facts(name, device, count):
    return {"driver_available": True,
            "gpus": [{"index": i, "name": name, "pci_device_id": device} for i in range(count)]}


def test_devices_plan_like_the_inventory_form():
    plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", 2, devices=TWO_3G)
    assert problems == []
    assert plan == inventory_plan({"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
                                   "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": TWO_3G}}})
    assert [[(i["profile"], i["placement"]["start"]) for i in g["mig"]["instances"]] for g in plan["gpus"]] \
        == [[("3g.40gb", 0), ("3g.40gb", 4)]] * 2


def test_builtin_config_name():
    plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", None, config="all-1g.10gb")
    assert problems == []
    assert plan["gpu_count"] == 1  # gpu_count defaults to one GPU
    assert [i["profile"] for i in plan["gpus"][0]["mig"]["instances"]] == ["1g.10gb"] * 7


def test_config_from_a_mig_parted_file(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text("version: v1\nmig-configs:\n  halves:\n    - devices: all\n      mig-enabled: true\n"
                    "      mig-devices: {3g.40gb: 2}\n")
    plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", 1, config="halves", config_file=str(path))
    assert problems == []
    assert plan["mig"]["source"].endswith("mig.yaml#halves")
    plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", 1, config="quarters", config_file=str(path))
    assert plan is None
    assert problems == ["gpu_mig_config: no config named 'quarters' in %s (it has: halves)" % path]


def test_bad_values_name_the_role_variable():
    cases = [
        (dict(devices=[{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}]),
         "gpu_mig_devices[0].mig-devices: GPU 0 (A100-80GB) has no MIG profile 7g.40gb"),
        (dict(devices=[{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]),
         "gpu_mig_devices[0].mig-devices: GPU 0 (A100-80GB): 2x 4g.40gb is not a valid layout"),
        (dict(devices=[{"devices": [3], "mig-enabled": False}]),
         "gpu_mig_devices[0].devices: GPU index 3 is beyond the node's 1 GPU(s)"),
        (dict(devices=[{"devices": "all", "mig-enable": True}]),
         "gpu_mig_devices[0]: unknown key(s) mig-enable"),
        (dict(config="all-9g.99gb"), "gpu_mig_config: no built-in config named 'all-9g.99gb'"),
        (dict(config="x", config_file="/nonexistent/mig.yaml"),
         "gpu_mig_config_file: /nonexistent/mig.yaml: file not found"),
        (dict(devices=TWO_3G, config="all-balanced"),
         "gpu_mig_devices: set either gpu_mig_devices or gpu_mig_config, not both"),
        (dict(), "gpu_mig_devices: set gpu_mig_devices (mig-parted entries) or gpu_mig_config"),
        (dict(devices=TWO_3G, config_file="/x.yaml"), "gpu_mig_config_file: only used with gpu_mig_config"),
    ]
    for kwargs, expected in cases:
        plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", 1, **kwargs)
        assert plan is None, kwargs
        assert any(p.startswith(expected) for p in problems), (kwargs, problems)


def test_bad_model_and_count_name_their_variables():
    _plan, problems = plain_inputs.plan_mig("n1", "A100-81GB", 1, devices=TWO_3G)
    assert problems[0].startswith("gpu_mig_gpu_model: unknown GPU model 'A100-81GB'")
    _plan, problems = plain_inputs.plan_mig("n1", "A100-80GB", 0, devices=TWO_3G)
    assert problems[0].startswith("gpu_mig_gpu_count: must be a positive integer, got 0")
    _plan, problems = plain_inputs.plan_mig("n1", "T4", 1, devices=TWO_3G)
    assert problems == ["gpu_mig_gpu_model: MIG asked on a node whose GPUs have no MIG (T4)"]
    _plan, problems = plain_inputs.plan_mig("n1", None, 1, devices=TWO_3G)
    assert problems[0].startswith("gpu_mig_gpu_model: required")


def test_caller_names_replace_the_defaults():
    names = {"devices": "mig_layout", "gpu_model": "node_gpu"}
    _plan, problems = plain_inputs.plan_mig(
        "n1", "A100-80GB", 1, devices=[{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}],
        names=names)
    assert problems[0].startswith("mig_layout[0].mig-devices: ")
    _plan, problems = plain_inputs.plan_mig("n1", "L4", 1, devices=TWO_3G, names=names)
    assert problems[0].startswith("node_gpu: ")


def test_rename_field_matches_whole_names_only():
    renames = {"gpuprov_sharing.mig.config": "gpu_mig_config", "gpuprov_sharing": "nodes[0].sharing"}
    assert plain_inputs.rename_field("gpuprov_sharing.mig.config(all-x)", renames) == "gpu_mig_config(all-x)"
    assert plain_inputs.rename_field("gpuprov_sharing.mig.configs", renames) == "nodes[0].sharing.mig.configs"
    assert plain_inputs.rename_field("gpuprov_sharing", renames) == "nodes[0].sharing"
    assert plain_inputs.rename_field("/etc/mig.yaml: mig-configs.a[0]", renames) == "/etc/mig.yaml: mig-configs.a[0]"


def test_hardware_checked_against_model_and_count():
    plan, _problems = plain_inputs.plan_mig("n1", "A100-80GB", 2, devices=TWO_3G)
    assert plain_inputs.hardware_problem(plan, facts("NVIDIA A100-SXM4-80GB", "0x20B2", 2)) is None
    assert plain_inputs.hardware_problem(plan, facts("NVIDIA A100-SXM4-80GB", "0x20B2", 1)) == (
        "gpu_mig_gpu_model: gpu_mig_gpu_model/gpu_mig_gpu_count declares 2x A100-80GB "
        "but the node has 1x A100-80GB")
    assert "node has 2x H100-80GB" in plain_inputs.hardware_problem(plan, facts("NVIDIA H100 80GB HBM3", "0x2330", 2))


NODES = [
    {"name": "a100-1", "gpu_model": "A100-80GB", "gpu_count": 2,
     "sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
    {"name": "t4-1", "gpu_model": "T4", "gpu_count": 4, "sharing": {"strategy": "time-slicing", "replicas": 4}},
    {"name": "l40s-1", "gpus": [{"model": "L40S", "count": 1}]},
]


def test_node_list_plans_like_an_inventory():
    result, problems = plain_inputs.plan_nodes(NODES, "gpu_device_plugin_nodes")
    assert problems == []
    intents = []
    for node in NODES:
        variables = dict(("gpuprov_" + k, v) for k, v in node.items() if k != "name")
        intents.append(parse_intent(node["name"], variables)[0])
    expected, _problems = plan_fleet(intents)
    assert result == {"nodes": expected["nodes"], "device_plugin_configs": expected["device_plugin_configs"]}
    assert sorted(result["nodes"]) == ["a100-1", "l40s-1", "t4-1"]


def test_node_list_problems_name_the_item():
    bad = [dict(NODES[0]), dict(NODES[1], sharing={"strategy": "time-slicing", "replicas": 1}),
           {"name": "x", "gpu_modl": "T4"}, dict(NODES[0])]
    _result, problems = plain_inputs.plan_nodes(bad, "gpu_device_plugin_nodes")
    assert problems == [
        "gpu_device_plugin_nodes[1].sharing.replicas: must be an integer >= 2 (the device plugin rejects fewer), got 1",
        "gpu_device_plugin_nodes[2]: unknown key(s) gpu_modl; allowed: name, gpu_model, gpu_count, gpus, sharing, "
        "mig_config_file",
        "gpu_device_plugin_nodes[3].name: node a100-1 is listed twice",
    ]
    _result, problems = plain_inputs.plan_nodes([], "v")
    assert problems == ["v: must be a non-empty list of {name, gpu_model, gpu_count, sharing}"]
    bad_layout = [dict(NODES[0], sharing={"strategy": "mig", "mig": {"devices": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]}})]
    _result, problems = plain_inputs.plan_nodes(bad_layout, "v")
    assert problems[0].startswith("v[0].sharing.mig.devices[0].mig-devices: GPU 0 (A100-80GB): 2x 4g.40gb")
