# -*- coding: utf-8 -*-
"""Node plans as NVIDIA's DRA driver (v0.4.0) publishes them, and what claims ask it for."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, dra, dra_claims
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner


def plan(model, count, sharing=None):
    variables = {"gpuprov_gpu_model": model, "gpuprov_gpu_count": count}
    if sharing:
        variables["gpuprov_sharing"] = sharing
    intent, problems = parse_intent("n1", variables)
    assert problems == []
    node, problems = Planner().plan_node(intent)
    assert problems == []
    return node


def model_for(key):
    try:
        return catalog.get(key)
    except KeyError:
        return None


# -- names and values as the driver writes them -------------------------------------------


@pytest.mark.parametrize("minor, profile, gi_id, start, name", [
    (0, "1g.10gb", 19, 2, "gpu-0-mig-1g10gb-19-2"),
    (3, "3g.40gb", 9, 4, "gpu-3-mig-3g40gb-9-4"),
    # '+' is not RFC 1123: toRFC1123Compliant makes it '-'.
    (1, "1g.10gb+me", 20, 6, "gpu-1-mig-1g10gb-me-20-6"),
    (12, "7g.80gb", 0, 0, "gpu-12-mig-7g80gb-0-0"),
])
def test_mig_device_names_follow_the_driver(minor, profile, gi_id, start, name):
    assert dra.mig_device_name(minor, profile, gi_id, start) == name


def test_rfc1123_as_the_driver_cleans_names():
    assert dra.rfc1123("-A_B.c+d.") == "a-b.c-d"
    assert len(dra.rfc1123("x" * 300)) == 253


@pytest.mark.parametrize("text, expected", [("8.0", "8.0.0"), ("10.0", "10.0.0"), ("7.5", "7.5.0")])
def test_compute_capability_is_a_semantic_version(text, expected):
    assert dra.version(text) == expected


@pytest.mark.parametrize("mib, quantity", [(81920, "80Gi"), (81559, "81559Mi"), (9984, "9984Mi"), (15360, "15Gi")])
def test_memory_quantities(mib, quantity):
    assert dra.mib_quantity(mib) == quantity


# -- devices of a plan ----------------------------------------------------------------------


def test_full_gpus_of_a_node_without_mig():
    devices, notes, problems = dra.node_devices("n1", plan("L40S", 2), model_for)
    assert problems == [] and notes == []
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert devices[0] == {"name": "gpu-0", "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": "NVIDIA L40S"},
        "architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9.0"}},
        "capacity": {"memory": {"value": "46068Mi"}}}


def test_a_mig_gpu_publishes_its_instances_only():
    node = plan("H100-80GB", 1, {"strategy": "mig", "mig": {"config": "all-1g.10gb"}})
    devices, _notes, problems = dra.node_devices("n1", node, model_for)
    assert problems == []
    assert [d["name"] for d in devices] == ["gpu-0-mig-1g10gb-19-%d" % i for i in range(7)]
    for i, device in enumerate(devices):
        assert device["attributes"]["type"] == {"string": "mig"}
        assert device["attributes"]["profile"] == {"string": "1g.10gb"}
        assert device["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
        # memory in whole MiB of the profile, and the one memory slice it occupies
        assert device["capacity"] == {"memory": {"value": "9984Mi"}, "memorySlice%d" % i: {"value": "1"}}


def test_mig_memory_slices_follow_the_planned_placement():
    node = plan("A100-SXM4-40GB", 1, {"strategy": "mig", "mig": {"config": "all-balanced"}})
    devices, _notes, _problems = dra.node_devices("n1", node, model_for)
    by_profile = dict((d["attributes"]["profile"]["string"], d) for d in devices)
    three = by_profile["3g.20gb"]
    start = int(three["name"].rsplit("-", 1)[1])
    assert sorted(k for k in three["capacity"] if k.startswith("memorySlice")) == \
        sorted("memorySlice%d" % i for i in range(start, start + 4))
    slices = [k for d in devices for k in d["capacity"] if k.startswith("memorySlice")]
    assert len(slices) == len(set(slices)), "two instances on one memory slice"


def test_unknown_model_and_unmanaged_gpus():
    node = plan("T4", 1)
    node["gpus"][0]["model"] = "RTX-9999"
    _devices, _notes, problems = dra.node_devices("n1", node, model_for)
    assert problems and problems[0].startswith("n1: gpus[0].model: RTX-9999 is in neither the built-in catalog")
    node = plan("A100-SXM4-40GB", 2, {"strategy": "mig", "mig": {"devices": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}})
    devices, notes, problems = dra.node_devices("n1", node, model_for)
    assert problems == []
    assert all(d["name"].startswith("gpu-0-mig-") for d in devices) and len(devices) == 7
    assert any(n.startswith("GPU 1: the plan leaves its MIG state alone") for n in notes)


def test_slices_hold_at_most_128_devices_of_one_pool():
    node = plan("H100-80GB", 64, {"strategy": "mig", "mig": {"config": "all-1g.10gb"}})
    devices, _notes, _problems = dra.node_devices("n1", node, model_for)
    slices = dra.resource_slices("node-1", devices)
    assert len(devices) == 448 and len(slices) == 4
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 128, 128, 64]
    for s in slices:
        assert s["spec"]["pool"] == {"name": "node-1", "generation": 1, "resourceSliceCount": 4}
        assert s["spec"]["nodeName"] == "node-1" and s["spec"]["driver"] == "gpu.nvidia.com"
    assert len(set(s["metadata"]["name"] for s in slices)) == 4


def test_slice_names_stay_within_253_characters():
    name = dra.slice_name("n" * 250, 0, 1)
    assert len(name) <= 253 and name != dra.slice_name("n" * 250 + "x", 0, 1)


def test_device_classes_as_the_chart_installs_them():
    gpu = dra.device_class(dra.GPU_CLASS)
    assert gpu["spec"] == {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                                "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
                           "extendedResourceName": "nvidia.com/gpu"}
    mig = dra.device_class(dra.MIG_CLASS)
    assert mig["spec"] == {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                                "device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}


def test_export_lists_only_the_classes_in_use_and_what_does_not_carry_over():
    nodes = {"t4": plan("T4", 1, {"strategy": "time-slicing", "replicas": 4}),
             "l40s": plan("L40S", 1, {"strategy": "mps", "replicas": 2, "mps": {"provider": "host"}})}
    rendered = dra.export(nodes, model_for, {"t4": "node-t4"})
    assert [c["metadata"]["name"] for c in rendered["classes"]] == ["gpu.nvidia.com"]
    assert rendered["slices"]["t4"][0]["spec"]["nodeName"] == "node-t4"
    assert any("shared per claim" in n for n in rendered["notes"]["t4"])
    assert any("host MPS daemon" in n for n in rendered["notes"]["l40s"])
    hami = dra.export({"h": plan("L20", 1, {"strategy": "hami"})}, model_for)
    assert any("HAMi" in n for n in hami["notes"]["h"])
    with pytest.raises(dra.DraRenderError) as error:
        dra.export({"x": dict(plan("T4", 1), gpus=[{"index": 0, "model": "nope", "memory_mib": 1, "mig": None}])},
                   model_for)
    assert error.value.problems[0].startswith("x: gpus[0].model: nope")


# -- claims -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, literal", [
    ("NVIDIA L40S", "'NVIDIA L40S'"),
    ("it's", "'it\\'s'"),
    ("a\\b", "'a\\\\b'"),
    ("x\ny", "'x\\x0ay'"),
    ('"q"', "'\\\"q\\\"'"),
])
def test_cel_string_literals_cannot_be_ended_by_a_name(text, literal):
    assert dra_claims.cel_string(text) == literal


def test_selectors():
    t4 = catalog.get("T4")
    assert dra_claims.product_selector(t4) == "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"
    a100 = catalog.get("A100-SXM4-40GB")
    assert dra_claims.product_selector(a100) == (
        "device.attributes['gpu.nvidia.com'].productName in ['NVIDIA A100-SXM4-40GB', 'NVIDIA A100-PCIE-40GB']")
    assert dra_claims.profile_selector("1g.10gb") == "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    # rounded up to whole MiB, never below what the workload needs
    assert dra_claims.memory_selector(9536.7) == \
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('9537Mi')) >= 0"
    assert dra_claims.memory_selector(10240) == \
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0"


def test_sharing_configs_as_the_driver_decodes_them():
    ts = dra_claims.sharing_config("TimeSlicing", requests=["gpu"])
    assert ts == {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}}}
    # MigDeviceSharing has no timeSlicingConfig: the driver's strict decoder would refuse one.
    mig = dra_claims.sharing_config("TimeSlicing", device_type="mig")
    assert mig["opaque"]["parameters"] == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                                           "sharing": {"strategy": "TimeSlicing"}}
    mps = dra_claims.sharing_config("MPS", clients=3, memory_mib=46068)
    assert mps["opaque"]["parameters"]["sharing"] == {"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 33, "defaultPinnedDeviceMemoryLimit": "15356Mi"}}
    with pytest.raises(ValueError):
        dra_claims.sharing_config("HAMi")
    with pytest.raises(ValueError):
        dra_claims.sharing_config("MPS")


def test_claim_objects():
    request = dra_claims.device_request("gpu", dra.MIG_CLASS, 1, ["true"])
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount",
                                                  "count": 1, "selectors": [{"cel": {"expression": "true"}}]}}
    spec = dra_claims.claim_spec([request])
    template = dra_claims.resource_claim_template("chat", spec, namespace="ml", labels={"a": "b"})
    assert template == {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                        "metadata": {"name": "chat", "namespace": "ml", "labels": {"a": "b"}},
                        "spec": {"spec": {"devices": {"requests": [request]}}}}
    claim = dra_claims.resource_claim("shared", dra_claims.claim_spec([request], [{"opaque": {}}]))
    assert claim["spec"]["devices"]["config"] == [{"opaque": {}}] and "namespace" not in claim["metadata"]
