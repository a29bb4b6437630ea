"""`gpuprov export dra`: the ResourceSlices NVIDIA's DRA driver publishes for each planned node and
the DeviceClasses they belong to; every object valid for resource.k8s.io/v1 (strict, 1.34-1.37)."""
import json
import os

import pytest
import yaml

import gpuprov.cmd_export  # noqa: F401  (imported before the collection loader, as in test_export.py)
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")
SHARING = os.path.join(REPO, "examples", "sharing", "inventory.yml")
KUBERNETES = ("1.34", "1.35", "1.36", "1.37")


def validate(obj):
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) is not installed")
    for version in KUBERNETES:
        kubernetes_validate.validate(obj, version, strict=True)


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="module")
def fleet():
    return plan_inventory([EXAMPLES]).result


def export(gpuprov, *args, inventory=EXAMPLES):
    code, out, err = gpuprov("export", "-i", inventory, "dra", *args)
    assert code == 0, err
    return out


def test_the_validator_is_strict():
    """The check below means something: a field resource.k8s.io/v1 does not have is refused."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    bad = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "x"},
           "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1,
                                                                          "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "basic": {}}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.34", strict=True)


def test_every_object_validates(gpuprov):
    for inventory in (EXAMPLES, SHARING):
        docs = documents(export(gpuprov, inventory=inventory))
        assert docs
        for doc in docs:
            validate(doc)


def test_slices_follow_the_plan(gpuprov, fleet):
    docs = documents(export(gpuprov))
    slices = [d for d in docs if d["kind"] == "ResourceSlice"]
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(p["node_name"] for p in fleet["nodes"].values())
    for resource_slice in slices:
        spec = resource_slice["spec"]
        plan = next(p for p in fleet["nodes"].values() if p["node_name"] == spec["nodeName"])
        assert spec["driver"] == "gpu.nvidia.com" and spec["pool"]["name"] == spec["nodeName"]
        names = [d["name"] for d in spec["devices"]]
        assert len(names) == len(set(names))
        expected = []
        for gpu in plan["gpus"]:
            if gpu["mig"] and gpu["mig"]["enabled"]:
                # one device per planned instance, named by profile id and planned placement
                expected += [(gpu["index"], i["profile"], i["placement"]["start"]) for i in gpu["mig"]["instances"]]
            else:
                expected.append((gpu["index"], None, None))
        found = []
        for device in spec["devices"]:
            attributes = device["attributes"]
            if attributes["type"]["string"] == "mig":
                minor, start = int(device["name"].split("-")[1]), int(device["name"].rsplit("-", 1)[1])
                found.append((minor, attributes["profile"]["string"], start))
            else:
                found.append((int(device["name"].split("-")[1]), None, None))
        assert sorted(found, key=str) == sorted(expected, key=str), spec["nodeName"]


def test_mig_devices_carry_the_catalog_profile_memory(gpuprov):
    docs = documents(export(gpuprov))
    h100 = next(d for d in docs if d["kind"] == "ResourceSlice" and d["spec"]["nodeName"] == "gpu-h100-01")
    profiles = dict((d["attributes"]["profile"]["string"], d["capacity"]["memory"]["value"])
                    for d in h100["spec"]["devices"])
    # catalog H100-80GB: 1g.10gb 9.75 GiB, 2g.20gb 19.62 GiB, 4g.40gb 39.5 GiB (in MiB, rounded)
    assert profiles == {"1g.10gb": "9984Mi", "2g.20gb": "20091Mi", "4g.40gb": "40448Mi"}


def test_device_classes_are_the_ones_in_use(gpuprov):
    docs = documents(export(gpuprov))
    classes = [d for d in docs if d["kind"] == "DeviceClass"]
    assert [c["metadata"]["name"] for c in classes] == ["gpu.nvidia.com", "mig.nvidia.com"]
    only_gpus = documents(export(gpuprov, "-l", "gpu_t4"))
    assert [d["metadata"]["name"] for d in only_gpus if d["kind"] == "DeviceClass"] == ["gpu.nvidia.com"]
    assert {d["spec"]["nodeName"] for d in only_gpus if d["kind"] == "ResourceSlice"} == \
        {"gpu-t4-01", "gpu-t4-02", "gpu-t4-03", "gpu-t4-04"}


def test_comments_say_what_does_not_carry_over(gpuprov):
    text = export(gpuprov)
    assert "# gpu-l40s-02: a host MPS daemon is planned" in text
    assert "# gpu-t4-01: strategy time-slicing: under the DRA driver a GPU is shared per claim" in text
    assert "# gpu-h100-01: 32 mig 1g.10gb, 4 mig 4g.40gb, 4 mig 2g.20gb" in text


def test_json_and_output_dir(gpuprov, tmp_path):
    data = json.loads(export(gpuprov, "-o", "json"))
    assert data["kind"] == "dra"
    assert [f["name"] for f in data["files"]] == ["dra-resourceslices.yaml", "dra-deviceclasses.yaml"]
    code, out, err = gpuprov("export", "-i", EXAMPLES, "dra", "--output-dir", str(tmp_path / "out"))
    assert code == 0, err
    assert "wrote" in out
    for entry in data["files"]:
        assert (tmp_path / "out" / entry["name"]).read_text() == entry["content"]
    code, out, _err = gpuprov("export", "-i", EXAMPLES, "dra", "--output-dir", str(tmp_path / "out"))
    assert code == 0 and out.count("unchanged") == 2


def test_a_model_only_a_host_catalog_knows_needs_catalog(gpuprov, tmp_path):
    models = tmp_path / "gpus.yml"
    models.write_text("models:\n  - {name: RTX-5880-Ada, memory: 48Gi, compute_capability: '8.9', "
                      "architecture: ada, nvidia_smi_names: [\"NVIDIA RTX 5880 Ada Generation\"], "
                      "pci_device_id: '0x26BB'}\n")
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    n1:\n      gpuprov_gpu_model: RTX-5880-Ada\n      gpuprov_gpu_count: 2\n"
                         "      gpuprov_catalog_file: gpus.yml\n")
    code, out, err = gpuprov("export", "-i", str(inventory), "dra")
    assert code == 2 and out == ""
    assert "n1: gpus[0].model: RTX-5880-Ada is in neither the built-in catalog nor --catalog" in err
    code, out, err = gpuprov("export", "-i", str(inventory), "--catalog", str(models), "dra")
    assert code == 0, err
    devices = [d for d in documents(out) if d["kind"] == "ResourceSlice"][0]["spec"]["devices"]
    assert [d["attributes"]["productName"]["string"] for d in devices] == ["NVIDIA RTX 5880 Ada Generation"] * 2
    for doc in documents(out):
        validate(doc)
