"""Where NVIDIA's go-nvml MIG mocks (v0.13.4-1, pkg/nvml/mock/gpus) and gpuprov's catalog
differ, each with the primary source that decides: the one list of them. The catalog follows
the primary source; a mock is a second opinion, never a reason to change the catalog.

test_peer_mig_parted.py compares every catalog model below with its mock and fails on any
difference this list does not name, and on any entry here that is no longer a difference.
The same list tells the config-default test which placements and names a mock can express.
"""

# Catalog model -> (mock, PCI id the mock is given instead of its own, or None).
MOCKS = {
    "A100-SXM4-40GB": ("dgxa100", None),
    "A100-80GB": ("a100-sxm4-80gb", None),
    "A30": ("a30", None),
    "H100-80GB": ("dgxh100", None),
    # The H200 and B200 mocks carry PCI ids that NVIDIA's configs do not filter on (below).
    "H200-141GB": ("dgxh200", "0x233510DE"),
    "B200": ("dgxb200", "0x290110DE"),
}

ALL = "all"

# Profiles are named by NVML GPU-instance profile enum (nvml.h NVML_GPU_INSTANCE_PROFILE_*):
# 0 1_SLICE, 1 2_SLICE, 2 3_SLICE, 3 4_SLICE, 4 7_SLICE, 7 1_SLICE_REV1 (+me), 8 2_SLICE_REV1,
# 9 1_SLICE_REV2 (one compute slice, two memory slices).
DIFFERENCES = [
    {
        "field": "profile_id",
        "models": ALL,
        "profiles": ALL,
        "mock": "reports the profile enum as the profile id (mock/gpus/*.go: Id: nvml.GPU_INSTANCE_PROFILE_*)",
        "source": "nvml.h nvmlGpuInstanceProfileInfo_v2_t.id is the device's own profile id, the ID column of "
                  "`nvidia-smi mig -lgip`: 19, 20, 15, 14, 9, 5, 0 for 1g, 1g+me, 1g double memory, 2g, 3g, 4g, 7g "
                  "on A100 (NVIDIA MIG User Guide, A100 -lgip listing), H200 (NVIDIA/mig-parted#120), GH200 144G "
                  "(NVIDIA/mig-parted#139), B200 (NVIDIA/mig-parted#187); the A30's ids are UNVERIFIED",
    },
    {
        "field": "placements",
        "models": ["H100-80GB", "H200-141GB", "B200"],
        "profiles": [9, 2, 4],
        "mock": "sizes count compute slices: 1g double memory {0..6}:1, 3g {0,4}:3, 7g {0}:7",
        "source": "nvml.h nvmlGpuInstancePlacement_t counts memory slices (\"Number of memory slices occupied\"), "
                  "8 on these GPUs; `nvidia-smi mig -lgipp` on H100 80GB and H100 NVL lists {0,2,4,6}:2, "
                  "{0,4}:4, {0}:8. H200 and B200 listings are not published: their geometry is H100's (UNVERIFIED)",
    },
    {
        "field": "name",
        "models": ["H200-141GB"],
        "profiles": [0, 7, 2, 3],
        "mock": "go-nvlib names the mock's 1g, 1g+me, 3g, 4g 1g.35gb, 1g.35gb+me, 3g.88gb, 4g.88gb: its whole-GiB "
                "memory (18432 MiB for 1g, 72704 for 3g) is just over an eighth (a half) of the GPU, which "
                "go-nvlib's getMigMemorySizeGB rounds up to the next eighth",
        "source": "the driver names them 1g.18gb (16.00 GiB), 1g.18gb+me, 3g.71gb (69.50 GiB), 4g.71gb "
                  "(`nvidia-smi mig -lgip` on H200, NVIDIA/mig-parted#120; mig-parted's config-default.yaml)",
    },
    {
        "field": "name",
        "models": ["B200"],
        "profiles": [0, 7],
        "mock": "go-nvlib names the mock's 1g and 1g+me 1g.45gb and 1g.45gb+me: 23552 MiB is over an eighth of "
                "the mock's 184320 MiB",
        "source": "the driver names them 1g.23gb (20.50 GiB) and 1g.23gb+me (`nvidia-smi mig -lgip` on B200, "
                  "NVIDIA/mig-parted#187; mig-parted's config-default.yaml)",
    },
    {
        "field": "pci_device_id",
        "models": ["H200-141GB"],
        "profiles": None,
        "mock": "0x233310DE",
        "source": "NVIDIA's mig-parted config-default.yaml filters H200 141GB / H200 NVL on 0x233510DE, 0x233B10DE",
    },
    {
        "field": "pci_device_id",
        "models": ["B200"],
        "profiles": None,
        "mock": "0x2B0010DE",
        "source": "NVIDIA's mig-parted config-default.yaml filters B200 on 0x290110DE",
    },
]


def expected(models, profiles_of):
    """The set of (model, profile enum or None, field) DIFFERENCES names for ``models``;
    ``profiles_of(model)`` gives a model's profile enums."""
    result = set()
    for entry in DIFFERENCES:
        for model in (models if entry["models"] == ALL else entry["models"]):
            if entry["profiles"] is None:
                result.add((model, None, entry["field"]))
                continue
            for profile in (profiles_of(model) if entry["profiles"] == ALL else entry["profiles"]):
                result.add((model, profile, entry["field"]))
    return result


def differs(model, field, profile=None):
    """True when DIFFERENCES names this field of this model (and profile)."""
    for entry in DIFFERENCES:
        if entry["field"] != field or (entry["models"] != ALL and model not in entry["models"]):
            continue
        if entry["profiles"] in (None, ALL) or profile in entry["profiles"]:
            return True
    return False
