"""NVIDIA's mig-parted judges gpuprov's MIG side: every file `gpuprov export mig-parted` writes
parses in mig-parted and selects, per node, the entries gpuprov meant; NVIDIA's shipped
config-default.yaml planned by gpuprov and applied by mig-parted's own config manager on
NVIDIA's NVML mocks ends in the same instances; the catalog's profile tables are held against
the mocks' (differences only as tests/mig_mock_differences.py lists them, with their source);
go-nvlib's naming rule gives every catalog profile its name from the catalog's memory figures."""
import collections
import json
import os

import pytest
import yaml

import gpuprov.cmd_export  # noqa: F401  (imported before the collection loader, as in test_export)
import mig_mock_differences as mock_differences
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, migparted, migparted_export
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent as intent_mod
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import planner
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import module_file
from gpuprov.planning import plan_inventory
from testlib import REPO

pytestmark = pytest.mark.peers

MIG_PARTED = "github.com/NVIDIA/mig-parted"


def config_default():
    return module_file(MIG_PARTED, "deployments/systemd/config-default.yaml")


# -- every exported file parses in mig-parted and selects what gpuprov meant -----------------
# Fleets beside the example: several models on one node, GPUs left out, MIG disabled on some.
EXPORT_INVENTORY = {"all": {"hosts": {
    "mixed-models": {
        "gpuprov_gpus": [{"model": "A100-80GB", "count": 2}, {"model": "T4", "count": 1}, {"model": "A30", "count": 2}],
        "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
            {"devices": [3, 4], "mig-enabled": True, "mig-devices": {"2g.12gb": 2}}]}}},
    "some-disabled": {
        "gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 4,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
            {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1g.10gb": 5, "1g.20gb": 0}},
            {"devices": [2], "mig-enabled": False}]}}},
    "all-balanced-h200": {"gpuprov_gpu_model": "H200-141GB", "gpuprov_gpu_count": 8,
                          "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
}}}


@pytest.fixture(scope="module")
def export_fleets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    (folder / "inventory.yml").write_text(yaml.safe_dump(EXPORT_INVENTORY))
    return [plan_inventory([os.path.join(REPO, "examples", "inventory.yml")]).result,
            plan_inventory([str(folder / "inventory.yml")]).result]


def pci_ids(plan, which):
    """One PCI id per GPU of a node plan, as mig-parted reads them: each model's first or last
    (A100-80GB is 0x20B2 as SXM4, 0x20B5 as PCIe)."""
    return ",".join(catalog.get(g["model"]).mig_parted_filters[which] for g in plan["gpus"])


def test_every_exported_file_parses_and_selects_what_gpuprov_meant(export_fleets, tmp_path):
    checked = 0
    for fleet in export_fleets:
        document, assignment = migparted_export.mig_parted_export(fleet["nodes"])
        path = tmp_path / "mig-parted.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))
        parsed = run_peer("mig-parted-config", path)
        assert parsed.error is None, parsed.error
        # mig-parted reads the same entries gpuprov's own reader does.
        ours = migparted.load_file(str(path))
        assert set(parsed.data["configs"]) == set(ours)
        for name, entries in parsed.data["configs"].items():
            assert [(e.get("device-filter"), e["devices"], e["mig-enabled"], dict((k, v) for k, v in e["mig-devices"].items() if v))
                    for e in entries] == \
                [(e["device-filter"][0] if len(e["device-filter"]) == 1 else e["device-filter"], e["devices"],
                  e["mig-enabled"], e["mig-devices"]) for e in ours[name]], name
        for (host, name), which in ((item, which) for item in sorted(assignment.items()) for which in (0, -1)):
            plan = fleet["nodes"][host]
            selection = run_peer("mig-parted-config", path, "--select", name, "--gpus", pci_ids(plan, which))
            assert selection.error is None, selection.error
            entries = parsed.data["configs"][name]
            for gpu, chosen in zip(plan["gpus"], selection.data["gpus"]):
                mig = gpu["mig"]
                if mig is None or not mig.get("managed", True):
                    assert chosen["entries"] == [], (host, gpu["index"], "mig-parted would touch a GPU gpuprov leaves")
                    continue
                # One entry per GPU: the last one mig-parted applies is the one that stays.
                assert len(chosen["entries"]) == 1, (host, gpu["index"], chosen)
                entry = entries[chosen["entries"][0]]
                assert entry["mig-enabled"] == mig["enabled"], (host, gpu["index"])
                wanted = collections.Counter(i["profile"] for i in mig["instances"])
                assert dict((k, v) for k, v in entry["mig-devices"].items() if v) == dict(wanted), (host, gpu["index"])
                checked += 1
    assert checked > 20


# -- NVIDIA's config-default.yaml: planned by gpuprov, applied by mig-parted on the mocks ------
def gpuprov_plan(model, count, config_name, cache):
    """gpuprov's plan of one node with ``count`` x ``model`` and config-default's ``config_name``:
    (node plan or None, the reasons it refuses)."""
    hostvars = {"gpuprov_gpu_model": model, "gpuprov_gpu_count": count, "gpuprov_mig_config_file": config_default(),
                "gpuprov_sharing": {"strategy": "mig", "mig": {"config": config_name}}}
    intent, problems = intent_mod.parse_intent("node", hostvars, None, cache)
    if intent is None or problems:
        return None, [p.reason for p in problems]
    result, problems = planner.plan_fleet([intent])
    if problems:
        return None, [p.reason for p in problems]
    return result["nodes"]["node"], []


def expressible(model, counts):
    """Whether the mock of ``model`` can show these profiles under their driver names."""
    spec = catalog.get(model).mig
    return not any(mock_differences.differs(model, "name", spec.profiles[name].gi_enum) for name in counts)


@pytest.mark.parametrize("model", sorted(mock_differences.MOCKS))
def test_config_default_planned_by_gpuprov_applied_by_mig_parted(model):
    mock, pci_id = mock_differences.MOCKS[model]
    args = [config_default(), "--each", "--mock", mock] + (["--pci-id", pci_id] if pci_id else [])
    applied = run_peer("mig-parted-apply", *args, timeout=300)
    assert applied.error is None, applied.error
    same_placements = not any(mock_differences.differs(model, "placements", p) for p in range(10))
    tables = run_peer("nvml-mock-profiles", "--mock", mock)
    # Names the mock gives profiles whose driver name differs (mig_mock_differences): a config
    # naming one of those reaches the mock's other profile.
    misnamed = set(p["name"] for p in tables.data["profiles"] if mock_differences.differs(model, "name", p["enum"]))
    cache, compared, refused, placed = {}, 0, 0, 0
    for name, result in sorted(applied.data["results"].items()):
        assert "error" not in result, (name, result)
        count = len(result["gpus"])
        plan, problems = gpuprov_plan(model, count, name, cache)
        for gpu in result["gpus"]:
            theirs = collections.Counter(dict((k, v) for k, v in (gpu["mig_config"] or {}).items() if v))
            if plan is None:
                # gpuprov refuses a profile the GPU does not have; mig-parted "applies" it and
                # ends with no instance (pkg/types MigConfig.Flatten drops what it cannot
                # parse), reporting success.
                assert any("has no MIG profile" in p for p in problems), (name, problems)
                assert gpu["entries"] and set(theirs) <= misnamed, (name, gpu)
                refused += 1
                continue
            mig = plan["gpus"][gpu["index"]]["mig"]
            if mig is None or not mig.get("managed", True):
                assert gpu["entries"] == [], (name, gpu["index"], "mig-parted touches a GPU gpuprov leaves alone")
                continue
            assert gpu["mig_enabled"] == mig["enabled"], (name, gpu["index"])
            ours = collections.Counter(i["profile"] for i in mig["instances"])
            if not expressible(model, ours):
                continue  # the mock names these profiles otherwise (mig_mock_differences)
            assert theirs == ours, (name, gpu["index"], dict(theirs), dict(ours))
            compared += 1
            if same_placements:
                assert sorted((i["profile"], i["placement"]["start"], i["placement"]["size"]) for i in gpu["gpu_instances"]) == \
                    sorted((i["profile"], i["placement"]["start"], i["placement"]["size"]) for i in mig["instances"]), \
                    (name, gpu["index"])
                placed += 1
    assert compared and refused
    assert placed or not same_placements


# -- the catalog against the mocks' tables ----------------------------------------------------
def catalog_against_mock(model, tables):
    """{(model, profile enum or None, field)} where the catalog and the mock differ."""
    ours = dict((p.gi_enum, p) for p in catalog.get(model).mig.profiles.values())
    theirs = dict((p["enum"], p) for p in tables["profiles"])
    assert set(ours) == set(theirs), (model, sorted(ours), sorted(theirs))
    found = set()
    for enum, profile in ours.items():
        mock = theirs[enum]
        if profile.name != mock["name"]:
            found.add((model, enum, "name"))
        if profile.max_count != mock["instance_count"]:
            found.add((model, enum, "max_count"))
        if [tuple(p) for p in profile.placements] != [(p["start"], p["size"]) for p in mock["placements"]]:
            found.add((model, enum, "placements"))
        if profile.gi_profile_id != mock["id"]:
            found.add((model, enum, "profile_id"))
    if int(tables["device_id"], 16) >> 16 not in catalog.get(model).pci_device_ids:
        found.add((model, None, "pci_device_id"))
    return found


def test_catalog_against_the_mocks_differs_only_as_listed():
    found = set()
    for model, (mock, _pci) in sorted(mock_differences.MOCKS.items()):
        tables = run_peer("nvml-mock-profiles", "--mock", mock)
        assert tables.error is None, tables.error
        found |= catalog_against_mock(model, tables.data)
    listed = mock_differences.expected(sorted(mock_differences.MOCKS),
                                       lambda m: [p.gi_enum for p in catalog.get(m).mig.profiles.values()])
    assert found - listed == set(), "differences no entry of mig_mock_differences.py names"
    assert listed - found == set(), "entries of mig_mock_differences.py that are no longer differences"
    for entry in mock_differences.DIFFERENCES:
        assert entry["mock"] and entry["source"], entry


# -- profile names under go-nvlib's rule -------------------------------------------------------
def test_go_nvlib_names_every_catalog_profile_from_the_catalogs_memory():
    """mig-parted matches a config's names, and the device plugin names its nvidia.com/mig-*
    resources, by go-nvlib's rule from the profile's and the GPU's memory; the catalog's
    figures must give the catalog's names (the driver's, from its -lgip listings)."""
    questions, names = [], []
    for model in catalog.all_models():
        if not model.mig:
            continue
        for profile in model.mig.profiles.values():
            questions.append({"gi_profile": profile.gi_enum, "memory_mb": int(profile.memory_gib * 1024),
                              "device_memory_mb": model.memory_mib})
            names.append((model.key, profile.name))
    result = run_peer("mig-profile-names", stdin=json.dumps(questions))
    assert result.error is None, result.error
    wrong = [(key, name, got) for (key, name), got in zip(names, result.data) if got != name]
    assert wrong == []


def test_a_gpu_two_entries_select(tmp_path):
    """mig-parted applies every entry that selects a GPU, in order, so the last one stays;
    gpuprov refuses the file instead (README: where gpuprov and mig-parted part)."""
    document = {"version": "v1", "mig-configs": {"overlap": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]}}
    path = tmp_path / "overlap.yaml"
    path.write_text(yaml.safe_dump(document))
    model = catalog.get("A100-SXM4-40GB")
    selection = run_peer("mig-parted-config", path, "--select", "overlap", "--gpus",
                         ",".join([model.mig_parted_filters[0]] * 2))
    assert [g["entries"] for g in selection.data["gpus"]] == [[0, 1], [0]]
    applied = run_peer("mig-parted-apply", path, "overlap", "--mock", "dgxa100")
    assert applied.error is None, applied.error
    assert applied.data["gpus"][0]["mig_config"] == {"3g.20gb": 2}
    assert applied.data["gpus"][1]["mig_config"] == {"1g.5gb": 7}
    entries = migparted.parse(document)["overlap"]
    _requests, problems = migparted.resolve(entries, [model, model], "overlap")
    assert problems == [("overlap[1].devices", "GPU 0 is already selected by entry 0; each GPU may match one entry")]
