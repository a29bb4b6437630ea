# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU catalog: the models gpuprov knows, their MIG profiles and valid placements.

Sources: NVIDIA's MIG User Guide (v580/v590) profile tables and `nvidia-smi mig -lgipp`
placement listings, nvml.h / pynvml constants, and the PCI device filters of NVIDIA
mig-parted's config-default.yaml. Values no primary source confirmed are marked UNVERIFIED
next to them; the planner treats them like the rest, so a wrong one shows up as a plan the
node's NVML refuses, never silently.

Every 7-compute-slice model (A100, H100, H200, GH200, B200) shares one profile geometry,
placements counted in 8 memory slices; the A30 has 4 compute and 4 memory slices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import ProfileSpec

# NVML GPU-instance profile enums (nvml.h NVML_GPU_INSTANCE_PROFILE_*) and the compute-instance
# profile enum used for a full-size compute instance of each size.
GI_ENUM = {"1_SLICE": 0, "2_SLICE": 1, "3_SLICE": 2, "4_SLICE": 3, "7_SLICE": 4, "8_SLICE": 5,
           "6_SLICE": 6, "1_SLICE_REV1": 7, "2_SLICE_REV1": 8, "1_SLICE_REV2": 9}
CI_ENUM_FOR_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}


class MigProfile:
    """One GPU-instance profile of one GPU model."""

    __slots__ = ("name", "gi_enum", "gi_profile_id", "compute_slices", "memory_slices",
                 "memory_gib", "max_count", "placements", "media_extensions")

    def __init__(self, name, gi_enum, gi_profile_id, compute_slices, memory_slices, memory_gib,
                 max_count, starts):
        self.name = name
        self.gi_enum = gi_enum
        self.gi_profile_id = gi_profile_id
        self.compute_slices = compute_slices
        self.memory_slices = memory_slices
        self.memory_gib = memory_gib
        self.max_count = max_count
        self.placements = [(s, memory_slices) for s in starts]
        self.media_extensions = name.endswith("+me")

    @property
    def ci_enum(self):
        return CI_ENUM_FOR_SLICES[self.compute_slices]

    @property
    def resource_name(self):
        # The device plugin names MIG resources mig-<profile>, with '+' (not allowed in a
        # resource name) written as '.'. (UNVERIFIED for the +me profiles on hardware.)
        return "nvidia.com/mig-" + self.name.replace("+", ".")

    def as_dict(self):
        return {
            "name": self.name,
            "nvml_profile_enum": self.gi_enum,
            "nvml_profile_id": self.gi_profile_id,
            "compute_slices": self.compute_slices,
            "memory_slices": self.memory_slices,
            "memory_gib": self.memory_gib,
            "max_count": self.max_count,
            "placements": [{"start": s, "size": z} for s, z in self.placements],
        }


class MigSpec:
    __slots__ = ("compute_slices", "memory_slices", "profiles", "balanced")

    def __init__(self, compute_slices, memory_slices, profiles, balanced):
        self.compute_slices = compute_slices
        self.memory_slices = memory_slices
        self.profiles = dict((p.name, p) for p in profiles)
        self.balanced = balanced

    def solver_profiles(self):
        return dict((name, ProfileSpec(name, p.placements, p.max_count, p.compute_slices))
                    for name, p in self.profiles.items())


class GpuModel:
    __slots__ = ("key", "description", "memory_mib", "compute_capability", "architecture",
                 "smi_names", "pci_device_ids", "aliases", "mig", "_solver_profiles")

    def __init__(self, key, description, memory_mib, compute_capability, architecture,
                 smi_names, pci_device_ids, aliases=(), mig=None):
        self.key = key
        self.description = description
        self.memory_mib = memory_mib
        self.compute_capability = compute_capability
        self.architecture = architecture
        self.smi_names = list(smi_names)
        self.pci_device_ids = list(pci_device_ids)
        self.aliases = list(aliases)
        self.mig = mig
        self._solver_profiles = mig.solver_profiles() if mig else None

    @property
    def mig_capable(self):
        return self.mig is not None

    @property
    def memory_gib(self):
        return round(self.memory_mib / 1024.0, 1)

    @property
    def gfd_product(self):
        # GFD's nvidia.com/gpu.product label is the NVML name with spaces as dashes.
        return self.smi_names[0].replace(" ", "-")

    @property
    def mig_parted_filters(self):
        # mig-parted's device-filter form: <device id><vendor id>, e.g. 0x20B210DE.
        return ["0x%04X10DE" % d for d in self.pci_device_ids]

    @property
    def reset_required_for_mig_mode(self):
        # Ampere applies a MIG mode change only after a GPU reset; Hopper and later at once.
        return self.architecture == "ampere"

    @property
    def mps_max_clients(self):
        # The device plugin caps MPS replicas at 48 from compute capability 7.5, else 16.
        major, minor = (int(x) for x in self.compute_capability.split("."))
        return 48 if (major, minor) >= (7, 5) else 16

    def solver_profiles(self):
        return self._solver_profiles

    def profile(self, name):
        return self.mig.profiles.get(name) if self.mig else None

    def as_dict(self, with_profiles=False):
        data = {
            "model": self.key,
            "description": self.description,
            "memory_mib": self.memory_mib,
            "compute_capability": self.compute_capability,
            "architecture": self.architecture,
            "mig_capable": self.mig_capable,
            "nvidia_smi_names": self.smi_names,
            "gfd_product": self.gfd_product,
            "pci_device_ids": ["0x%04X" % d for d in self.pci_device_ids],
            "aliases": self.aliases,
        }
        if self.mig:
            data["mig"] = {
                "compute_slices": self.mig.compute_slices,
                "memory_slices": self.mig.memory_slices,
                "balanced": dict(self.mig.balanced),
            }
            if with_profiles:
                data["mig"]["profiles"] = [p.as_dict() for p in self.mig.profiles.values()]
        return data


# (kind, NVML enum name, nvidia-smi profile id, compute slices, memory slices, max count, starts)
# Placements from `nvidia-smi mig -lgipp` on A100-40GB, H100 80GB and H100 NVL. The same
# geometry on H200, GH200 and B200 is (UNVERIFIED): their profile ids and counts match in
# published `-lgip` output, their placement listings were not seen.
_SEVEN_SLICE_SHAPES = [
    ("1g", "1_SLICE", 19, 1, 1, 7, range(0, 7)),
    ("1g+me", "1_SLICE_REV1", 20, 1, 1, 1, range(0, 7)),
    ("1g2m", "1_SLICE_REV2", 15, 1, 2, 4, (0, 2, 4, 6)),
    ("2g", "2_SLICE", 14, 2, 2, 3, (0, 2, 4)),
    ("3g", "3_SLICE", 9, 3, 4, 2, (0, 4)),
    ("4g", "4_SLICE", 5, 4, 4, 1, (0,)),
    ("7g", "7_SLICE", 0, 7, 8, 1, (0,)),
]


def _seven_slice(gb, gib):
    """Profiles of a 7-slice model.

    ``gb``: the memory part of the profile names, as (1g, 1g double memory, 3g, 7g) numbers,
    e.g. (10, 20, 40, 80) for 1g.10gb, 1g.20gb/2g.20gb, 3g.40gb/4g.40gb, 7g.80gb.
    ``gib``: usable GiB of those four sizes as nvidia-smi reports them.
    """
    one, two, three, seven = gb
    one_gib, two_gib, three_gib, seven_gib = gib
    names = {"1g": ("1g.%dgb" % one, one_gib), "1g+me": ("1g.%dgb+me" % one, one_gib),
             "1g2m": ("1g.%dgb" % two, two_gib), "2g": ("2g.%dgb" % two, two_gib),
             "3g": ("3g.%dgb" % three, three_gib), "4g": ("4g.%dgb" % three, three_gib),
             "7g": ("7g.%dgb" % seven, seven_gib)}
    profiles = []
    for kind, enum, smi_id, compute, mem, max_count, starts in _SEVEN_SLICE_SHAPES:
        name, size_gib = names[kind]
        profiles.append(MigProfile(name, GI_ENUM[enum], smi_id, compute, mem, size_gib, max_count, starts))
    # NVIDIA's all-balanced: 2x 1g + 1x 2g + 1x 3g (mig-parted config-default.yaml).
    balanced = {names["1g"][0]: 2, names["2g"][0]: 1, names["3g"][0]: 1}
    return MigSpec(7, 8, profiles, balanced)


def _a30():
    # A30-24GB: 4 compute and 4 memory slices (MIG User Guide). Placements follow go-nvml's
    # A30 mock; the nvidia-smi profile ids are (UNVERIFIED).
    profiles = [
        MigProfile("1g.6gb", GI_ENUM["1_SLICE"], 14, 1, 1, 5.81, 4, range(0, 4)),
        MigProfile("1g.6gb+me", GI_ENUM["1_SLICE_REV1"], 21, 1, 1, 5.81, 1, range(0, 4)),
        MigProfile("2g.12gb", GI_ENUM["2_SLICE"], 5, 2, 2, 11.69, 2, (0, 2)),
        MigProfile("2g.12gb+me", GI_ENUM["2_SLICE_REV1"], 6, 2, 2, 11.69, 1, (0, 2)),
        MigProfile("4g.24gb", GI_ENUM["4_SLICE"], 0, 4, 4, 23.5, 1, (0,)),
    ]
    return MigSpec(4, 4, profiles, {"1g.6gb": 2, "2g.12gb": 1})


MODELS = [
    # --- MIG-capable ---------------------------------------------------------------------
    GpuModel("A100-SXM4-40GB", "NVIDIA A100 40GB (SXM4/PCIe)", 40960, "8.0", "ampere",
             ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"],
             [0x20B0, 0x20B1, 0x20F1], ["A100-40GB", "A100-PCIE-40GB"],
             _seven_slice((5, 10, 20, 40), (4.75, 9.62, 19.5, 39.25))),
    # A100 80GB and GH200 96GB GiB figures are (UNVERIFIED) estimates from the sibling models.
    GpuModel("A100-80GB", "NVIDIA A100 80GB (SXM4/PCIe)", 81920, "8.0", "ampere",
             ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"],
             [0x20B2, 0x20B5], ["A100-SXM4-80GB", "A100-PCIE-80GB"],
             _seven_slice((10, 20, 40, 80), (9.75, 19.62, 39.5, 79.25))),
    GpuModel("A30", "NVIDIA A30 24GB", 24576, "8.0", "ampere",
             ["NVIDIA A30"], [0x20B7], ["A30-24GB"], _a30()),
    GpuModel("H100-80GB", "NVIDIA H100 80GB (SXM5 HBM3/PCIe)", 81559, "9.0", "hopper",
             ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"],
             [0x2330, 0x2331], ["H100", "H100-SXM5-80GB", "H100-PCIE-80GB"],
             _seven_slice((10, 20, 40, 80), (9.75, 19.62, 39.5, 79.25))),
    GpuModel("H100-NVL", "NVIDIA H100 NVL 94GB", 95830, "9.0", "hopper",
             ["NVIDIA H100 NVL"], [0x2321, 0x233A], ["H100-NVL-94GB", "H800-NVL"],
             _seven_slice((12, 24, 47, 94), (10.75, 21.62, 46.38, 93.12))),
    GpuModel("H100-96GB", "NVIDIA H100 96GB / GH200 96GB", 98304, "9.0", "hopper",
             ["NVIDIA H100 96GB HBM3", "NVIDIA GH200 480GB"],
             [0x233D, 0x2342, 0x20B6], ["GH200-96GB", "GH200-480GB"],
             _seven_slice((12, 24, 48, 96), (11.0, 22.0, 47.0, 95.0))),
    # GH200 144GB: the driver names its profiles 1g.18gb ... 7g.144gb (`nvidia-smi mig -lgip`,
    # NVIDIA/mig-parted#139; all-7g.144gb in mig-parted's config-default.yaml). mig-parted and
    # the device plugin name profiles by go-nvlib's rule instead (pkg/nvlib/device
    # getMigMemorySizeGB, v0.13.0), which calls a 7g profile 7g.<total GiB rounded up>: only a
    # total above 143 and up to 144 GiB gives 7g.144gb. No published listing gives the total;
    # 146944 MiB (143.5 GiB) is the middle of that range (UNVERIFIED).
    GpuModel("GH200-144GB", "NVIDIA GH200 144GB HBM3e", 146944, "9.0", "hopper",
             ["NVIDIA GH200 144G HBM3e"], [0x2348], ["GH200-144G-HBM3E"],
             _seven_slice((18, 36, 72, 144), (17.5, 35.25, 71.0, 142.0))),
    GpuModel("H200-141GB", "NVIDIA H200 141GB (SXM/NVL)", 143771, "9.0", "hopper",
             ["NVIDIA H200", "NVIDIA H200 NVL"], [0x2335, 0x233B], ["H200", "H200-NVL", "H200-SXM-141GB"],
             _seven_slice((18, 35, 71, 141), (16.0, 32.25, 69.5, 139.75))),
    GpuModel("B200", "NVIDIA B200 180GB", 183359, "10.0", "blackwell",
             ["NVIDIA B200"], [0x2901], ["B200-180GB"],
             _seven_slice((23, 45, 90, 180), (20.5, 44.25, 89.0, 178.0))),
    # China-market variants: the MIG User Guide lists H20; mig-parted's config-default.yaml gives
    # A800/H800 the A100/H100 MIG configs and lists their PCI ids beside them ("H100-80GB,
    # H800-80GB, A100-80GB, A800-80GB"). Which id is which variant, the nvidia-smi names and the
    # memory figures are from the PCI ID database and user reports (UNVERIFIED).
    GpuModel("A800-40GB", "NVIDIA A800 40GB (PCIe; MIG as A100 40GB)", 40960, "8.0", "ampere",
             ["NVIDIA A800 40GB PCIe", "NVIDIA A800 40GB Active"], [0x20F6], ["A800-PCIE-40GB"],
             _seven_slice((5, 10, 20, 40), (4.75, 9.62, 19.5, 39.25))),
    GpuModel("A800-80GB", "NVIDIA A800 80GB (SXM4/PCIe; MIG as A100 80GB)", 81920, "8.0", "ampere",
             ["NVIDIA A800-SXM4-80GB", "NVIDIA A800 80GB PCIe"], [0x20F3, 0x20F5],
             ["A800", "A800-SXM4-80GB", "A800-PCIE-80GB"],
             _seven_slice((10, 20, 40, 80), (9.75, 19.62, 39.5, 79.25))),
    GpuModel("H800-80GB", "NVIDIA H800 80GB (SXM5/PCIe; MIG as H100 80GB)", 81559, "9.0", "hopper",
             ["NVIDIA H800", "NVIDIA H800 PCIe"], [0x2324, 0x2322], ["H800", "H800-SXM5-80GB", "H800-PCIE-80GB"],
             _seven_slice((10, 20, 40, 80), (9.75, 19.62, 39.5, 79.25))),
    # H20: 96 GB HBM3, MIG profiles as H100 96GB (MIG User Guide; HAMi's allowlist names
    # 1g.12gb/2g.24gb/3g.48gb/7g.96gb for it). Memory MiB (UNVERIFIED).
    GpuModel("H20", "NVIDIA H20 96GB", 97871, "9.0", "hopper",
             ["NVIDIA H20"], [0x2329], ["H20-96GB"],
             _seven_slice((12, 24, 48, 96), (11.0, 22.0, 47.0, 95.0))),
    # --- no MIG (not in the MIG User Guide's supported list) ---------------------------------
    # PCI device ids of these models are from the PCI ID database (UNVERIFIED here).
    GpuModel("T4", "NVIDIA Tesla T4 16GB", 15360, "7.5", "turing",
             ["Tesla T4"], [0x1EB8], ["Tesla-T4", "T4-16GB"]),
    GpuModel("V100-16GB", "NVIDIA Tesla V100 16GB (SXM2/PCIe)", 16384, "7.0", "volta",
             ["Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB"], [0x1DB1, 0x1DB4], ["V100"]),
    GpuModel("V100-32GB", "NVIDIA Tesla V100 32GB (SXM2/PCIe)", 32768, "7.0", "volta",
             ["Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB", "Tesla V100S-PCIE-32GB"],
             [0x1DB5, 0x1DB6, 0x1DF6], ["V100S"]),
    GpuModel("A10", "NVIDIA A10 24GB", 23028, "8.6", "ampere", ["NVIDIA A10"], [0x2236]),
    # A16, A40, RTX A6000, RTX 3090, L20: memory MiB as nvidia-smi reports it in user posts,
    # compute capability from NVIDIA's CUDA GPUs list (both UNVERIFIED here).
    GpuModel("A16", "NVIDIA A16 (one of the board's four 16GB GPUs)", 15356, "8.6", "ampere",
             ["NVIDIA A16"], [0x25B6], ["A16-16GB"]),  # 0x25B6 is shared with the A2 (PCI ID database)
    GpuModel("A40", "NVIDIA A40 48GB", 46068, "8.6", "ampere", ["NVIDIA A40"], [0x2235], ["A40-48GB"]),
    GpuModel("RTX-A6000", "NVIDIA RTX A6000 48GB", 49140, "8.6", "ampere",
             ["NVIDIA RTX A6000"], [0x2230], ["A6000"]),
    GpuModel("RTX-3090", "NVIDIA GeForce RTX 3090 24GB", 24576, "8.6", "ampere",
             ["NVIDIA GeForce RTX 3090"], [0x2204], ["GeForce-RTX-3090", "3090"]),
    GpuModel("A10G", "NVIDIA A10G 24GB", 23028, "8.6", "ampere", ["NVIDIA A10G"], [0x2237]),
    GpuModel("L4", "NVIDIA L4 24GB", 23034, "8.9", "ada", ["NVIDIA L4"], [0x27B8]),
    # L20: 10de:26BA "AD102GL [L20]" (lspci output seen in public reports).
    GpuModel("L20", "NVIDIA L20 48GB", 46068, "8.9", "ada", ["NVIDIA L20"], [0x26BA], ["L20-48GB"]),
    GpuModel("L40", "NVIDIA L40 48GB", 46068, "8.9", "ada", ["NVIDIA L40"], [0x26B5]),
    GpuModel("L40S", "NVIDIA L40S 48GB", 46068, "8.9", "ada", ["NVIDIA L40S"], [0x26B9]),
    GpuModel("RTX-4090", "NVIDIA GeForce RTX 4090 24GB", 24564, "8.9", "ada",
             ["NVIDIA GeForce RTX 4090"], [0x2684], ["GeForce-RTX-4090", "4090"]),
    GpuModel("RTX-6000-Ada", "NVIDIA RTX 6000 Ada Generation 48GB", 49140, "8.9", "ada",
             ["NVIDIA RTX 6000 Ada Generation"], [0x26B1], ["RTX6000-Ada"]),
]


class UnknownModelError(LookupError):
    def __init__(self, name, suggestions):
        self.name = name
        self.suggestions = suggestions
        hint = (" (did you mean %s?)" % ", ".join(suggestions)) if suggestions else ""
        super(UnknownModelError, self).__init__(
            "unknown GPU model %r%s; `gpuprov catalog` lists the known models" % (name, hint))


def _norm(name):
    return re.sub(r"[^A-Z0-9]", "", str(name).upper())


def _strip_vendor(norm):
    for prefix in ("NVIDIA", "TESLA", "GEFORCE"):
        if norm.startswith(prefix) and len(norm) > len(prefix):
            norm = norm[len(prefix):]
    return norm


_PCI_RE = re.compile(r"^(?:0x)?([0-9a-f]{4})(?:10de)?$|^10de:([0-9a-f]{4})$", re.IGNORECASE)


def _build_index():
    index, pci, display = {}, {}, {}
    for model in MODELS:
        for name in [model.key, model.gfd_product] + model.smi_names + model.aliases:
            norm = _norm(name)
            for key in (norm, _strip_vendor(norm)):
                owner = index.setdefault(key, model)
                if owner is not model:
                    raise AssertionError("catalog alias %r names both %s and %s" % (name, owner.key, model.key))
            display.setdefault(name, model)
        for dev in model.pci_device_ids:
            pci[dev] = model
    return index, pci, display


_INDEX, _PCI_INDEX, _DISPLAY = _build_index()
_BY_KEY = dict((m.key, m) for m in MODELS)


def all_models():
    return list(MODELS)


def get(key):
    """The model with this exact catalog key (no alias resolution)."""
    return _BY_KEY[key]


def lookup(name):
    """Resolve a catalog key, nvidia-smi name, GFD product label or PCI device id."""
    if isinstance(name, int) and not isinstance(name, bool):
        if name in _PCI_INDEX:
            return _PCI_INDEX[name]
        raise UnknownModelError("0x%04X" % name, [])
    text = str(name).strip()
    match = _PCI_RE.match(text)
    if match:
        dev = int(match.group(1) or match.group(2), 16)
        if dev in _PCI_INDEX:
            return _PCI_INDEX[dev]
    norm = _norm(text)
    model = _INDEX.get(norm) or _INDEX.get(_strip_vendor(norm))
    if model is not None:
        return model
    if match:
        raise UnknownModelError(text, [])
    raise UnknownModelError(text, suggest(text))


def lookup_pci_filter(device_filter):
    """Model for a mig-parted device filter like 0x20B210DE (None when not in the catalog)."""
    text = str(device_filter).strip().split(":", maxsplit=1)[0]
    match = re.match(r"^0x([0-9a-f]{4})([0-9a-f]{4})$", text, re.IGNORECASE)
    if not match:
        raise ValueError("device filter %r is not of the form 0x<device><vendor>, e.g. 0x20B210DE" % device_filter)
    if match.group(2).lower() != "10de":
        return None
    return _PCI_INDEX.get(int(match.group(1), 16))


def suggest(text, limit=3):
    norm = _norm(text)
    scored = []
    for name, model in _DISPLAY.items():
        ratio = difflib.SequenceMatcher(None, norm, _strip_vendor(_norm(name))).ratio()
        scored.append((ratio, model.key))
    result = []
    for ratio, key in sorted(scored, reverse=True):
        if ratio < 0.5:
            break
        if key not in result:
            result.append(key)
        if len(result) == limit:
            break
    return result


# Public names for the user catalog (plugin_utils/user_catalog.py), which indexes its models the same way.
normalized_name = _norm
strip_vendor = _strip_vendor
