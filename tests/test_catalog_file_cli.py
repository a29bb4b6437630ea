"""`--catalog FILE` on the commands that plan, and on `gpuprov catalog`."""
import json

import yaml

from test_plan_cli import write_inventory

MODEL = {"name": "RTX-5880-Ada", "memory": "48Gi", "compute_capability": "8.9",
         "nvidia_smi_names": ["NVIDIA RTX 5880 Ada Generation"], "pci_device_id": "0x26BB"}


def test_plan_with_catalog_option(gpuprov, tmp_path):
    catalog_file = tmp_path / "gpus.yml"
    catalog_file.write_text(yaml.safe_dump({"models": [MODEL]}))
    inventory = write_inventory(tmp_path, {"n1": {"gpuprov_gpu_model": "NVIDIA RTX 5880 Ada Generation",
                                                  "gpuprov_gpu_count": 2,
                                                  "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}}})
    code, _out, err = gpuprov("plan", "-i", inventory, "-o", "json")
    assert code == 2 and "n1: gpuprov_gpu_model: unknown GPU model" in err
    code, out, err = gpuprov("plan", "-i", inventory, "--catalog", str(catalog_file), "-o", "json")
    assert code == 0, err
    node = json.loads(out)["nodes"]["n1"]
    assert [g["model"] for g in node["gpus"]] == ["RTX-5880-Ada"] * 2 and node["resources"] == {"nvidia.com/gpu": 8}


def test_bad_catalog_file_exits_2_naming_file_and_field(gpuprov, tmp_path):
    catalog_file = tmp_path / "gpus.yml"
    catalog_file.write_text(yaml.safe_dump({"models": [dict(MODEL, compute_capability="eight")]}))
    inventory = write_inventory(tmp_path, {"n1": {"gpuprov_gpu_model": "L4"}})
    for args in (["plan", "-i", inventory], ["export", "-i", inventory, "device-plugin"], ["catalog"]):
        code, out, err = gpuprov(*args, "--catalog", str(catalog_file))
        assert code == 2 and out == ""
        assert "%s: models[0](RTX-5880-Ada).compute_capability:" % catalog_file in err


def test_catalog_lists_user_models(gpuprov, tmp_path):
    catalog_file = tmp_path / "gpus.yml"
    catalog_file.write_text(yaml.safe_dump({"models": [MODEL]}))
    code, out, _err = gpuprov("catalog", "--catalog", str(catalog_file), "-o", "json")
    keys = [m["model"] for m in json.loads(out)["models"]]
    assert code == 0 and keys[-1] == "RTX-5880-Ada" and "L20" in keys
    code, out, _err = gpuprov("catalog", "0x26BB", "--catalog", str(catalog_file))
    assert code == 0 and "RTX-5880-Ada" in out and "MIG: not supported" in out


def test_plan_table_of_the_sharing_example(gpuprov):
    # Per-profile time-slicing, renamed shared resources and HAMi nodes in one table.
    import os

    from testlib import REPO

    code, out, err = gpuprov("plan", "-i", os.path.join(REPO, "examples", "sharing", "inventory.yml"))
    assert code == 0, err
    rows = dict((line.split()[0], line) for line in out.splitlines() if line.startswith("gpu-"))
    assert "time-slicing 1g.10gb x4" in rows["gpu-h800-01"]
    assert "time-slicing x4" in rows["gpu-4090-01"] and "gpu.shared=16" in rows["gpu-4090-01"]
    assert "hami x6" in rows["gpu-l20-01"] and "- (hami)" in rows["gpu-l20-01"]
    assert "gpu-h800-01: nvidia.com/mig-1g.10gb: 4 slots/device, 2.44 GiB/slot" in out


def test_fit_pool_of_a_user_model(gpuprov, tmp_path):
    catalog_file = tmp_path / "gpus.yml"
    catalog_file.write_text(yaml.safe_dump({"models": [MODEL]}))
    workloads = tmp_path / "w.yaml"
    workloads.write_text(yaml.safe_dump({"workloads": [{"name": "A", "memory": 30}, {"name": "B", "memory": 16}],
                                         "pool": {"model": "RTX-5880-Ada"}}))
    code, _out, err = gpuprov("fit", str(workloads))
    assert code == 2 and "pool: model: unknown GPU model 'RTX-5880-Ada'" in err
    code, out, err = gpuprov("fit", str(workloads), "--catalog", str(catalog_file), "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["gpus_used"] == 1 and data["gpus"][0]["model"] == "RTX-5880-Ada"  # 46 GiB on 48
