# -*- coding: utf-8 -*-
"""The cluster filters the gpu_device_plugin role renders with, on a plan made by the planner."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.filter.device_plugin_node_labels import FilterModule as LabelFilters
from ansible_collections.gpuprov.gpu.plugins.filter.device_plugin_values import FilterModule as ValueFilters
from ansible_collections.gpuprov.gpu.plugins.filter.nfd_values import FilterModule as NfdFilters
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent, planner

HOSTS = {
    "t4-a": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}},
    "t4-b": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}},
    "h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2,
             "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb", "strategy": "single"}}},
}

device_plugin_values = ValueFilters().filters()["device_plugin_values"]
device_plugin_node_labels = LabelFilters().filters()["device_plugin_node_labels"]
nfd_values = NfdFilters().filters()["nfd_values"]


class TaggedStr(str):
    """Like the str subclasses Ansible hands to filters."""


@pytest.fixture(scope="module")
def fleet():
    intents = []
    for host, hostvars in HOSTS.items():
        node_intent, problems = intent.parse_intent(host, hostvars)
        assert problems == []
        intents.append(node_intent)
    result, problems = planner.plan_fleet(intents)
    assert problems == []
    return result


def test_values_hold_every_config(fleet):
    values = device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"])
    assert sorted(values["config"]["map"]) == ["exclusive", "mig-single", "ts-4"]
    assert yaml.safe_load(values["config"]["map"]["mig-single"]) == {"version": "v1", "flags": {"migStrategy": "single"}}


def test_values_accept_ansible_string_subclasses(fleet):
    configs = dict((TaggedStr(k), v) for k, v in fleet["device_plugin_configs"].items())
    configs["ts-4"] = {"version": TaggedStr("v1"), "flags": {"migStrategy": TaggedStr("none")},
                       "sharing": fleet["device_plugin_configs"]["ts-4"]["sharing"]}
    values = device_plugin_values(fleet["nodes"], configs, default_config=TaggedStr("exclusive"))
    assert values["config"]["map"]["ts-4"].startswith("version: v1\n")


def test_values_errors_name_the_problem(fleet):
    with pytest.raises(AnsibleFilterError, match="device_plugin_configs"):
        device_plugin_values(["not", "a", "mapping"], fleet["device_plugin_configs"])
    with pytest.raises(AnsibleFilterError, match="t4-a: device-plugin config ts-4 is not among the fleet's configs"):
        device_plugin_values(fleet["nodes"], {"mig-single": fleet["device_plugin_configs"]["mig-single"]})
    with pytest.raises(AnsibleFilterError, match="compat_with_cpu_manager must be auto, always or never"):
        device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"], compat_with_cpu_manager="yes")
    with pytest.raises(AnsibleFilterError, match="not a gpuprov node plan mapping"):
        device_plugin_values({"t4-a": {"labels": {}}}, fleet["device_plugin_configs"])


def test_node_labels(fleet):
    patches = device_plugin_node_labels(fleet["nodes"], {"h100": "h100.dc1.example.com"})
    assert [(p["metadata"]["name"], p["metadata"]["labels"]) for p in patches] == [
        ("h100.dc1.example.com", {"nvidia.com/device-plugin.config": "mig-single"}),
        ("t4-a", {"nvidia.com/device-plugin.config": "ts-4"}),
        ("t4-b", {"nvidia.com/device-plugin.config": "ts-4"}),
    ]
    with pytest.raises(AnsibleFilterError, match="'H100' is not a valid Kubernetes node name"):
        device_plugin_node_labels(fleet["nodes"], {"h100": "H100"})


def test_nfd_values():
    values = nfd_values({}, image_repository="mirror.example.com/nfd/node-feature-discovery")
    assert values["worker"]["config"]["sources"]["pci"]["deviceLabelFields"] == ["vendor"]
    assert values["image"] == {"repository": "mirror.example.com/nfd/node-feature-discovery"}
    with pytest.raises(AnsibleFilterError, match="mapping of extra values"):
        nfd_values("worker: {}")
