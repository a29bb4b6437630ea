# -*- coding: utf-8 -*-
"""The models inference teams run (A40 ... V100-32GB) and the user catalog file."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, user_catalog
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import MIG_PARTED, module_file

# (query as nvidia-smi prints it, PCI id, catalog key, compute capability, MIG like)
MODELS = [
    ("NVIDIA A40", 0x2235, "A40", "8.6", None),
    ("NVIDIA A10", 0x2236, "A10", "8.6", None),
    ("NVIDIA A16", 0x25B6, "A16", "8.6", None),
    ("NVIDIA L4", 0x27B8, "L4", "8.9", None),
    ("NVIDIA L20", 0x26BA, "L20", "8.9", None),
    ("NVIDIA H20", 0x2329, "H20", "9.0", "H100-96GB"),
    ("NVIDIA A800-SXM4-80GB", 0x20F3, "A800-80GB", "8.0", "A100-80GB"),
    ("NVIDIA A800 80GB PCIe", 0x20F5, "A800-80GB", "8.0", "A100-80GB"),
    ("NVIDIA A800 40GB PCIe", 0x20F6, "A800-40GB", "8.0", "A100-SXM4-40GB"),
    ("NVIDIA H800", 0x2324, "H800-80GB", "9.0", "H100-80GB"),
    ("NVIDIA H800 PCIe", 0x2322, "H800-80GB", "9.0", "H100-80GB"),
    ("NVIDIA GeForce RTX 3090", 0x2204, "RTX-3090", "8.6", None),
    ("NVIDIA GeForce RTX 4090", 0x2684, "RTX-4090", "8.9", None),
    ("NVIDIA RTX A6000", 0x2230, "RTX-A6000", "8.6", None),
    ("NVIDIA RTX 6000 Ada Generation", 0x26B1, "RTX-6000-Ada", "8.9", None),
    ("Tesla V100-SXM2-32GB", 0x1DB5, "V100-32GB", "7.0", None),
]


@pytest.mark.parametrize("smi_name, pci, key, cc, mig_like", MODELS)
def test_model_by_nvidia_smi_name_and_pci_id(smi_name, pci, key, cc, mig_like):
    model = catalog.lookup(smi_name)
    assert model.key == key and model.compute_capability == cc
    assert catalog.lookup("0x%04X" % pci) is model
    assert catalog.lookup("10de:%04x" % pci) is model
    assert smi_name in model.smi_names
    if mig_like is None:
        assert not model.mig_capable
    else:
        # Same MIG geometry as the model NVIDIA's tools treat it as.
        twin = catalog.get(mig_like)
        assert [p.as_dict() for p in model.mig.profiles.values()] == [p.as_dict() for p in twin.mig.profiles.values()]
        assert model.reset_required_for_mig_mode == twin.reset_required_for_mig_mode


def test_variants_are_their_own_models_not_aliases():
    # A800/H800/H20 used to resolve to their twins; a node label or plan must name what it is.
    assert catalog.lookup("A800-80GB").key == "A800-80GB"
    assert catalog.lookup("H800").key == "H800-80GB"
    assert catalog.lookup("H20").key == "H20"
    assert catalog.lookup("NVIDIA A800-SXM4-80GB").gfd_product == "NVIDIA-A800-SXM4-80GB"


def test_variant_pci_ids_sit_with_their_geometry_in_mig_parted_config_default():
    """NVIDIA's all-balanced entries list each PCI filter with one geometry; ours must match.
    NVIDIA's default mig-parted config (deployments/systemd/config-default.yaml) at the mig-parted
    version the Go peer harness pins, read from the Go module cache."""
    with open(module_file(MIG_PARTED, "deployments/systemd/config-default.yaml")) as handle:
        configs = yaml.safe_load(handle)["mig-configs"]
    checked = set()
    for entry in configs["all-balanced"]:
        filters = entry.get("device-filter")
        filters = [filters] if isinstance(filters, str) else filters
        for device_filter in filters:
            model = catalog.lookup_pci_filter(device_filter)
            if model is None:
                continue
            assert model.mig.balanced == entry["mig-devices"], (device_filter, model.key)
            checked.add(model.key)
    assert {"A800-40GB", "A800-80GB", "H800-80GB", "H20"} <= checked


def _write(tmp_path, document, name="gpus.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document))
    return str(path)


GOOD = {"models": [{"name": "RTX-5880-Ada", "memory": "48Gi", "compute_capability": "8.9",
                    "nvidia_smi_names": ["NVIDIA RTX 5880 Ada Generation"], "aliases": ["RTX5880"],
                    "pci_device_id": "0x26BB"}]}


def test_user_catalog_adds_a_model_found_by_every_name(tmp_path):
    models = user_catalog.load_file(_write(tmp_path, GOOD))
    cat = user_catalog.UserCatalog(models)
    model = cat.lookup("NVIDIA RTX 5880 Ada Generation")
    assert model.key == "RTX-5880-Ada" and model.memory_mib == 48 * 1024 and not model.mig_capable
    assert cat.lookup("rtx5880") is model and cat.lookup("0x26BB") is model and cat.lookup("10de:26bb") is model
    assert cat.lookup("L40S").key == "L40S"  # built-ins still resolve
    with pytest.raises(catalog.UnknownModelError):
        catalog.lookup("RTX-5880-Ada")  # the built-in catalog is not changed


def test_yaml_hex_pci_id_reads_as_integer(tmp_path):
    document = {"models": [dict(GOOD["models"][0], pci_device_id=0x26BB)]}
    assert user_catalog.load_file(_write(tmp_path, document))[0].pci_device_ids == [0x26BB]


@pytest.mark.parametrize("change, field, words", [
    ({"memory": "lots"}, "models[0](RTX-5880-Ada).memory", "size"),
    ({"memory": "0Gi"}, "models[0](RTX-5880-Ada).memory", "size"),
    ({"memory_mib": 49152}, "models[0](RTX-5880-Ada).memory", "exactly one"),
    ({"compute_capability": 8.9}, "models[0](RTX-5880-Ada).compute_capability", "string"),
    ({"pci_device_id": "0x26B"}, "models[0](RTX-5880-Ada).pci_device_id", "PCI device id"),
    ({"name": "bad name!"}, "models[0].name", "letters"),
    ({"name": "L40S"}, "models[0](L40S)", "built-in model L40S"),
    ({"aliases": ["NVIDIA L4"]}, "models[0](RTX-5880-Ada)", "built-in model L4"),
    ({"pci_device_id": "0x2330"}, "models[0](RTX-5880-Ada).pci_device_id", "built-in model H100-80GB"),
    ({"mig": {}}, "models[0](RTX-5880-Ada)", "unknown key(s) mig"),
])
def test_bad_entries_name_file_and_field(tmp_path, change, field, words):
    entry = dict(GOOD["models"][0])
    entry.update(change)
    path = _write(tmp_path, {"models": [entry]})
    with pytest.raises(user_catalog.CatalogFileError) as info:
        user_catalog.load_file(path)
    assert any(p.startswith("%s: %s" % (path, field)) and words in p for p in info.value.problems), info.value.problems


def test_two_user_models_may_not_share_a_name(tmp_path):
    first = GOOD["models"][0]
    second = dict(first, name="Other", nvidia_smi_names=["NVIDIA Other"], aliases=["RTX5880"], pci_device_id="0x26BC")
    with pytest.raises(user_catalog.CatalogFileError) as info:
        user_catalog.load_file(_write(tmp_path, {"models": [first, second]}))
    assert any("'RTX5880' also names models[0]" in p for p in info.value.problems), info.value.problems


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(user_catalog.CatalogFileError, match="cannot read"):
        user_catalog.load_file(str(tmp_path / "missing.yml"))
    bad = tmp_path / "bad.yml"
    bad.write_text("models: [\n")
    with pytest.raises(user_catalog.CatalogFileError, match="not valid YAML"):
        user_catalog.load_file(str(bad))
    with pytest.raises(user_catalog.CatalogFileError, match="one key, models"):
        user_catalog.load_file(_write(tmp_path, {"gpus": []}))


def test_inventory_variable_plans_a_user_model(tmp_path):
    _write(tmp_path, GOOD)
    intent, problems = parse_intent("n1", {"gpuprov_catalog_file": "gpus.yml", "gpuprov_gpu_model": "RTX5880",
                                           "gpuprov_gpu_count": 2}, base_dir=str(tmp_path))
    assert problems == [] and [m.key for m in intent.models] == ["RTX-5880-Ada", "RTX-5880-Ada"]
    # Without the file the same host does not plan.
    intent, problems = parse_intent("n1", {"gpuprov_gpu_model": "RTX5880"}, base_dir=str(tmp_path))
    assert intent is None and problems[0].field == "gpuprov_gpu_model"


def test_inventory_variable_with_a_bad_file_names_host_variable_and_file(tmp_path):
    path = _write(tmp_path, {"models": [dict(GOOD["models"][0], memory="x")]})
    intent, problems = parse_intent("n1", {"gpuprov_catalog_file": path, "gpuprov_gpu_model": "L4"})
    assert intent is None
    assert str(problems[0]).startswith("n1: gpuprov_catalog_file: %s: models[0](RTX-5880-Ada).memory:" % path)


def test_cli_catalog_and_host_file_merge_and_clash(tmp_path):
    cli = user_catalog.UserCatalog(user_catalog.load_file(_write(tmp_path, GOOD, "cli.yml")))
    other = {"models": [dict(GOOD["models"][0], memory="32G")]}
    _write(tmp_path, other, "host.yml")
    intent, problems = parse_intent("n1", {"gpuprov_catalog_file": "host.yml", "gpuprov_gpu_model": "L4"},
                                    base_dir=str(tmp_path), user_models=cli)
    assert intent is None and "defined twice" in problems[0].reason
