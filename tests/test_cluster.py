"""Cluster rendering (plugin_utils: device_plugin_configs, node_labels, helm_values,
migparted_export) over the example fleet: Kubernetes objects that validate offline, configs
that satisfy the device plugin's schema, Helm values whose keys the real charts have, and the
plan-time rejections of configs the plugin would refuse."""
import copy
import os

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import (
    device_plugin_configs, device_plugin_schema, helm_values, migparted, migparted_export, node_labels)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.cluster_render_error import ClusterRenderError
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import device_plugin_chart_values
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")
K8S_VERSION = "1.31"


@pytest.fixture(scope="module")
def fleet():
    return plan_inventory([EXAMPLES]).result


def _kubernetes_validate():
    return pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) is not installed")


def _validate(obj):
    # Raises kubernetes_validate.ValidationError (with the path) on a bad manifest.
    _kubernetes_validate().validate(obj, K8S_VERSION, strict=True)


def test_device_plugin_configmap_validates_and_holds_every_config(fleet):
    configmap = device_plugin_configs.device_plugin_configmap(fleet["nodes"], fleet["device_plugin_configs"])
    _validate(configmap)
    data = configmap["data"]
    assert set(data) == set(fleet["device_plugin_configs"]) | {"exclusive"}
    for name, text in data.items():
        config = yaml.safe_load(text)
        assert device_plugin_schema.problems(config) == [], name
        assert text.startswith("version: v1\n")
    for host, plan in fleet["nodes"].items():
        assert yaml.safe_load(data[plan["device_plugin"]["config_name"]]) == plan["device_plugin"]["config"], host
    assert configmap["metadata"]["annotations"][device_plugin_configs.DEFAULT_CONFIG_ANNOTATION] == "exclusive"


def test_node_label_patches_validate_and_carry_the_plan_labels(fleet):
    patches = node_labels.node_label_patches(fleet["nodes"])
    for patch in patches:
        _validate(patch)
    assert dict((p["metadata"]["name"], p["metadata"]["labels"]) for p in patches) == dict(
        (h, {device_plugin_configs.CONFIG_LABEL: plan["device_plugin"]["config_name"]}) for h, plan in fleet["nodes"].items())


def test_node_names_are_mapped_and_checked(fleet):
    patches = node_labels.node_label_patches(fleet["nodes"], {"gpu-t4-01": "gpu-t4-01.cluster.local"})
    assert "gpu-t4-01.cluster.local" in [p["metadata"]["name"] for p in patches]
    with pytest.raises(ClusterRenderError) as info:
        node_labels.node_label_patches(fleet["nodes"], {"gpu-t4-01": "GPU_T4_01", "gpu-x": "gpu-x"})
    text = str(info.value)
    assert "gpu-t4-01: 'GPU_T4_01' is not a valid Kubernetes node name" in text
    assert "host(s) without a plan: gpu-x" in text


def test_mig_parted_objects_validate(fleet):
    document, assignment = migparted_export.mig_parted_export(fleet["nodes"])
    _validate(migparted_export.mig_parted_configmap(document))
    for patch in migparted_export.mig_config_label_patches(assignment):
        _validate(patch)
    # Only nodes with MIG-capable GPUs get a MIG config.
    assert sorted(assignment) == ["gpu-a100-01", "gpu-a100-02", "gpu-h100-01"]


def test_a_manifest_kubernetes_would_reject_is_caught():
    # The offline validation is real: a label patch with a list value fails it.
    with pytest.raises(_kubernetes_validate().ValidationError):
        _validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": ["b"]}}})


def test_configs_are_checked_before_rendering(fleet):
    configs = copy.deepcopy(fleet["device_plugin_configs"])
    configs["ts-4"]["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 1
    nodes = copy.deepcopy(fleet["nodes"])
    for plan in nodes.values():
        if plan["device_plugin"]["config_name"] == "ts-4":
            plan["device_plugin"]["config"] = configs["ts-4"]
    with pytest.raises(ClusterRenderError) as info:
        helm_values.device_plugin_values(nodes, configs)
    assert "device-plugin config ts-4: sharing.timeSlicing.resources[0].replicas: must be >= 2, got 1" in str(info.value)


def test_nodes_and_configs_from_different_plans_are_refused(fleet):
    configs = dict(fleet["device_plugin_configs"])
    del configs["ts-4"]
    with pytest.raises(ClusterRenderError) as info:
        device_plugin_configs.config_map_data(fleet["nodes"], configs)
    assert "gpu-t4-01: device-plugin config ts-4 is not among the fleet's configs" in str(info.value)
    with pytest.raises(ClusterRenderError) as info:
        device_plugin_configs.config_map_data(fleet["nodes"], fleet["device_plugin_configs"], default_config="ts-16")
    assert "default config 'ts-16' is not one of the planned configs" in str(info.value)
    # A planned config may be the default; then nothing is added.
    data = device_plugin_configs.config_map_data(fleet["nodes"], fleet["device_plugin_configs"], default_config="ts-4")
    assert set(data) == set(fleet["device_plugin_configs"]) | {"exclusive"}  # exclusive is planned (gpu-l40s-02)


def test_device_plugin_values(fleet):
    values = helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"])
    assert values["config"]["map"] == device_plugin_configs.config_map_data(fleet["nodes"], fleet["device_plugin_configs"])
    assert values["config"]["default"] == "exclusive"
    assert values["gfd"] == {"enabled": True} and values["nfd"] == {"enabled": False}
    # Keys that would override every node's config through environment variables stay unset.
    for key in ("migStrategy", "failOnInitError", "deviceListStrategy", "deviceIDStrategy"):
        assert key not in values
    assert values["compatWithCPUManager"] is True  # the examples use the static CPU manager
    assert "image" not in values and "imagePullSecrets" not in values

    no_static = copy.deepcopy(fleet["nodes"])
    for plan in no_static.values():
        plan["kubelet"] = {}
    assert "compatWithCPUManager" not in helm_values.device_plugin_values(no_static, fleet["device_plugin_configs"])
    assert helm_values.device_plugin_values(no_static, fleet["device_plugin_configs"],
                                        compat_with_cpu_manager="always")["compatWithCPUManager"] is True
    assert "compatWithCPUManager" not in helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"],
                                                                      compat_with_cpu_manager="never")

    mirrored = helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"],
                                            image_repository="mirror.example.com/nvidia/k8s-device-plugin",
                                            image_pull_secrets=["pull"],
                                            extra_values={"gfd": {"sleepInterval": "120s"}, "runtimeClassName": "nvidia"})
    assert mirrored["image"] == {"repository": "mirror.example.com/nvidia/k8s-device-plugin"}
    assert mirrored["imagePullSecrets"] == [{"name": "pull"}]
    assert mirrored["gfd"] == {"enabled": True, "sleepInterval": "120s"} and mirrored["runtimeClassName"] == "nvidia"


def test_the_rollout_annotation_follows_the_configs_only(fleet):
    nodes, configs = fleet["nodes"], fleet["device_plugin_configs"]
    first = helm_values.device_plugin_values(nodes, configs)["podAnnotations"][helm_values.CONFIG_HASH_ANNOTATION]
    again = helm_values.device_plugin_values(copy.deepcopy(nodes), copy.deepcopy(configs),
                                         image_repository="mirror.example.com/x")
    assert again["podAnnotations"][helm_values.CONFIG_HASH_ANNOTATION] == first
    changed_configs = copy.deepcopy(configs)
    changed_nodes = copy.deepcopy(nodes)
    changed_configs["ts-4"]["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] = False
    for plan in changed_nodes.values():
        if plan["device_plugin"]["config_name"] == "ts-4":
            plan["device_plugin"]["config"] = changed_configs["ts-4"]
    changed = helm_values.device_plugin_values(changed_nodes, changed_configs)
    assert changed["podAnnotations"][helm_values.CONFIG_HASH_ANNOTATION] != first


def _key_paths(data, prefix=()):
    paths = set()
    for key, value in data.items():
        path = prefix + (key,)
        paths.add(path)
        # config.map keys are config names and podAnnotations keys are annotations: data, not structure.
        if isinstance(value, dict) and path not in {("config", "map"), ("podAnnotations",)}:
            paths |= _key_paths(value, path)
    return paths


@pytest.fixture(scope="module")
def nvidia_values():
    """The chart's values.yaml at the k8s-device-plugin version tests/peers pins (Go module cache)."""
    return device_plugin_chart_values()


# nfd.enabled is the condition of the NFD dependency in the chart's Chart.yaml
# ("nfd.enabled,gfd.enabled"), so values.yaml does not list it.
CHART_CONDITIONS = {("nfd", "enabled")}


def test_device_plugin_values_use_keys_of_nvidia_values_file(fleet, nvidia_values):
    values = helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"],
                                          image_repository="mirror.example.com/nvidia/k8s-device-plugin",
                                          image_tag="v0.20.0", image_pull_secrets=["pull"])
    ours = _key_paths(values) - CHART_CONDITIONS
    theirs = _key_paths(nvidia_values)
    assert ours - theirs == set()
    assert ("compatWithCPUManager",) in ours and ("podAnnotations",) in ours
    # The chart's own example of config.map is in the same shape: name -> YAML text.
    assert isinstance(nvidia_values["config"]["map"], dict) and nvidia_values["config"]["default"] == ""


def test_nfd_values_use_keys_nvidia_sets_for_its_nfd_subchart(nvidia_values):
    ours = _key_paths(helm_values.nfd_values())
    theirs = _key_paths(nvidia_values["nfd"])
    assert ours - theirs == set()
    assert nvidia_values["nfd"]["worker"]["config"]["sources"]["pci"]["deviceLabelFields"] == ["vendor"]


def test_nfd_values():
    values = helm_values.nfd_values(image_repository="mirror.example.com/nfd/node-feature-discovery", image_tag="v0.19.0",
                                extra_values={"worker": {"config": {"sources": {"pci": {"deviceClassWhitelist": ["03"]}}}}})
    assert values["master"]["config"]["extraLabelNs"] == ["nvidia.com"]
    assert values["worker"]["config"]["sources"]["pci"] == {"deviceLabelFields": ["vendor"], "deviceClassWhitelist": ["03"]}
    assert values["image"] == {"repository": "mirror.example.com/nfd/node-feature-discovery", "tag": "v0.19.0"}


def test_mig_parted_export_reads_back_and_names_follow_content(fleet):
    document, assignment = migparted_export.mig_parted_export(fleet["nodes"])
    parsed = migparted.parse(document, "export")
    assert set(parsed) == set(assignment.values())
    a100 = document["mig-configs"][assignment["gpu-a100-01"]]
    assert a100 == [{"device-filter": ["0x20B210DE", "0x20B510DE"],
                     "devices": list(range(8)), "mig-enabled": True,
                     "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]
    assert assignment["gpu-a100-01"].startswith("a100-80gb-")
    # Same content, same name; a different layout, a different name.
    again, again_assignment = migparted_export.mig_parted_export(copy.deepcopy(fleet["nodes"]))
    assert again_assignment == assignment
    assert len(set(assignment.values())) == 3


def test_mig_capable_gpus_outside_mig_strategy_are_exported_disabled(tmp_path):
    """An A100 node sharing by time-slicing must have MIG off; the MIG manager needs to know."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a100-ts": {
        "gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
        "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 2}}}}}))
    nodes = plan_inventory([str(inventory)]).result["nodes"]
    document, assignment = migparted_export.mig_parted_export(nodes)
    entries = document["mig-configs"][assignment["a100-ts"]]
    assert entries == [{"device-filter": ["0x20B210DE", "0x20B510DE"],
                        "devices": [0, 1], "mig-enabled": False, "mig-devices": {}}]


def test_shell_script_quotes_every_word():
    import shlex

    commands = [["kubectl", "label", "node", "n1", "--overwrite", "a=b c"], ["echo", "$(rm -rf /)", "'x'"]]
    script = node_labels.shell_script(commands, "test")
    lines = script.splitlines()
    assert lines[:3] == ["#!/bin/sh", "# test", "set -eu"]
    assert [shlex.split(line) for line in lines[3:]] == commands


def test_plan_rejects_time_slicing_with_nothing_to_slice(gpuprov, tmp_path):
    """The plugin refuses a time-slicing config with an empty resource list: MIG mixed with
    GPUs that have MIG on but no instances gives one, so the plan stops there."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"n1": {
        "gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-enabled", "strategy": "mixed"},
                            "time_slicing_replicas": 2}}}}}))
    code, _, err = gpuprov("plan", "-i", str(inventory))
    assert code == 2
    assert "n1: gpuprov_sharing.time_slicing_replicas: the MIG layout advertises no device to time-slice" in err
