# -*- coding: utf-8 -*-
"""The catalog against NVIDIA's MIG User Guide, "Supported MIG Profiles" (docs.nvidia.com/datacenter/tesla/
mig-user-guide), its tables transcribed here by hand."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog

# The MIG User Guide's profile tables: (smi id, compute, memory slices, max, starts) per kind.
SEVEN_SLICE = {
    "1g": (19, 1, 1, 7, list(range(7))),
    "1g+me": (20, 1, 1, 1, list(range(7))),
    "1g2m": (15, 1, 2, 4, [0, 2, 4, 6]),
    "2g": (14, 2, 2, 3, [0, 2, 4]),
    "3g": (9, 3, 4, 2, [0, 4]),
    "4g": (5, 4, 4, 1, [0]),
    "7g": (0, 7, 8, 1, [0]),
}
NVML_ENUM = {"1g": 0, "1g+me": 7, "1g2m": 9, "2g": 1, "3g": 2, "4g": 3, "7g": 4}
# Profile names per GPU, same kind order as the reference table.
NAMES = {
    "A100-SXM4-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "A100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-NVL": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"],
    "H100-96GB": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"],
    "GH200-144GB": ["1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"],
    "H200-141GB": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "B200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
}
KINDS = ["1g", "1g+me", "1g2m", "2g", "3g", "4g", "7g"]


@pytest.mark.parametrize("model", sorted(NAMES))
def test_seven_slice_profiles_match_reference(model):
    spec = catalog.get(model)
    assert spec.mig_capable and spec.mig.compute_slices == 7 and spec.mig.memory_slices == 8
    assert list(spec.mig.profiles) == NAMES[model]
    for kind, name in zip(KINDS, NAMES[model]):
        smi_id, compute, mem, max_count, starts = SEVEN_SLICE[kind]
        profile = spec.mig.profiles[name]
        assert profile.gi_profile_id == smi_id, name
        assert profile.gi_enum == NVML_ENUM[kind], name
        assert profile.compute_slices == compute and profile.memory_slices == mem, name
        assert profile.max_count == max_count, name
        assert profile.placements == [(s, mem) for s in starts], name


def test_a30_matches_reference():
    spec = catalog.get("A30")
    assert (spec.mig.compute_slices, spec.mig.memory_slices) == (4, 4)
    got = dict((n, (p.max_count, p.placements)) for n, p in spec.mig.profiles.items())
    assert got == {
        "1g.6gb": (4, [(0, 1), (1, 1), (2, 1), (3, 1)]),
        "1g.6gb+me": (1, [(0, 1), (1, 1), (2, 1), (3, 1)]),
        "2g.12gb": (2, [(0, 2), (2, 2)]),
        "2g.12gb+me": (1, [(0, 2), (2, 2)]),
        "4g.24gb": (1, [(0, 4)]),
    }


def test_profile_memory_grows_with_slices():
    for model in catalog.all_models():
        if not model.mig_capable:
            continue
        for p in model.mig.profiles.values():
            assert 0 < p.memory_gib <= model.memory_mib / 1024.0, (model.key, p.name)


@pytest.mark.parametrize("name,key", [
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),  # GFD product label
    ("a100-80gb", "A100-80GB"),
    ("0x20B2", "A100-80GB"),
    ("0x20B210DE", "A100-80GB"),
    ("10de:2330", "H100-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-80GB"),
    ("Tesla T4", "T4"),
    ("Tesla-T4", "T4"),
    ("NVIDIA H200", "H200-141GB"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
    ("NVIDIA A30", "A30"),
])
def test_aliases(name, key):
    assert catalog.lookup(name).key == key


def test_unknown_model_suggests_close_names():
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.lookup("A100-SXM4-81GB")
    assert "A100-80GB" in info.value.suggestions
    assert "did you mean" in str(info.value)
    with pytest.raises(catalog.UnknownModelError):
        catalog.lookup("0x9999")


def test_non_mig_models_present_with_memory_and_compute_capability():
    for key, cc in [("T4", "7.5"), ("V100-16GB", "7.0"), ("V100-32GB", "7.0"), ("A10", "8.6"), ("A10G", "8.6"),
                    ("L4", "8.9"), ("L40", "8.9"), ("L40S", "8.9"), ("RTX-4090", "8.9"), ("RTX-6000-Ada", "8.9")]:
        model = catalog.get(key)
        assert not model.mig_capable and model.compute_capability == cc and model.memory_mib > 10000


def test_mps_client_limit_follows_compute_capability():
    assert catalog.get("V100-16GB").mps_max_clients == 16
    assert catalog.get("T4").mps_max_clients == 48


def test_pci_filters_match_nvidia_config_default():
    assert catalog.lookup_pci_filter("0x233510DE").key == "H200-141GB"
    assert catalog.lookup_pci_filter("0x20B710DE").key == "A30"
    assert catalog.lookup_pci_filter("0x294110DE") is None  # GB200: not in the catalog
    assert catalog.lookup_pci_filter("0x20B21234") is None  # another vendor
    with pytest.raises(ValueError):
        catalog.lookup_pci_filter("A100")
