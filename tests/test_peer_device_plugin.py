"""NVIDIA's device plugin and GPU feature discovery judge the device-plugin configs gpuprov
writes: each one loads the way the binaries load it at start (tests/peers
device-plugin-config) and comes back with the values gpuprov meant; every config gpuprov
refuses, NVIDIA refuses too, or the README lists the rule as gpuprov's own."""
import copy
import os

import pytest
import yaml

import gpuprov.cmd_export  # noqa: F401  (imported before the collection loader, as in test_export)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, device_plugin_schema, helm_values
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import module_file
from gpuprov.planning import plan_inventory
from testlib import REPO

pytestmark = pytest.mark.peers

PLUGIN_MODULE = "github.com/NVIDIA/k8s-device-plugin"
# The environment the nvidia-device-plugin chart gives the plugin container whatever the
# values (templates/daemonset-device-plugin.yml: MPS_ROOT from mps.root, "/run/nvidia/mps").
CHART_ENV = {"MPS_ROOT": "/run/nvidia/mps"}

# Where the pinned plugin (v0.19.3, the newest the module proxy serves) and the chart gpuprov
# deploys (0.20.0) differ on what gpuprov writes (api/config/v1, v0.19.3..v0.20.0):
VERSION_DIFFERENCES = {
    # v0.19.3's NewConfig sets sharing.mps.failRequestsGreaterThanOne to true whatever the
    # file says; v0.20.0 keeps an explicit false (NVIDIA/k8s-device-plugin f14d3d12d,
    # "fix(mps): honor failRequestsGreaterThanOne").
    "sharing.mps.failRequestsGreaterThanOne=false": True,
    # New in v0.20.0 (88a79d7e9, "Add configurable allocation policy"); v0.19.3 ignores it.
    "flags.plugin.sharedDevicesAllocationPolicy": None,
}

# Nodes for every kind of config gpuprov writes: each strategy, MIG single and mixed, one
# replica count for all devices or per resource (with whole GPUs beside MIG), both plugin
# options, MPS through the plugin and on the host, a +me profile.
INVENTORY = {"all": {"hosts": {
    "n-excl": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 2},
    "n-ts2": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 2,
              "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 2}},
    "n-ts4-rename": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1,
                     "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4,
                                         "device_plugin": {"rename_by_default": True}}},
    "n-ts4-multi": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1,
                    "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4,
                                        "device_plugin": {"fail_requests_greater_than_one": False}}},
    "n-ts3-both": {"gpuprov_gpu_model": "L4", "gpuprov_gpu_count": 1,
                   "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 3,
                                       "device_plugin": {"rename_by_default": True,
                                                         "fail_requests_greater_than_one": False}}},
    "n-mps": {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 4,
              "gpuprov_sharing": {"strategy": "mps", "replicas": 8}},
    "n-mps-opts": {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 2,
                   "gpuprov_sharing": {"strategy": "mps", "replicas": 4,
                                       "device_plugin": {"rename_by_default": True,
                                                         "fail_requests_greater_than_one": False}}},
    "n-mps-host": {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 2,
                   "gpuprov_sharing": {"strategy": "mps", "replicas": 4, "mps": {"provider": "host"}}},
    "n-mig-single": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
                     "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb", "strategy": "single"}}},
    "n-mig-single-ts": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
                        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-3g.40gb", "strategy": "single"},
                                            "time_slicing_replicas": 3}},
    "n-mig-mixed": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2,
                    "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
    "n-mig-mixed-ts": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2,
                       "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"},
                                           "time_slicing_replicas": 2}},
    "n-mig-mixed-per": {
        "gpuprov_gpus": [{"model": "A100-80GB", "count": 1}, {"model": "T4", "count": 1}],
        "gpuprov_sharing": {"strategy": "mig",
                            "mig": {"devices": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]},
                            "time_slicing_replicas": {"1g.10gb": 4, "gpu": 2}}},
    "n-mig-mixed-rename": {
        "gpuprov_gpu_model": "A100-SXM4-40GB", "gpuprov_gpu_count": 2,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"},
                            "time_slicing_replicas": {"1g.5gb": 4, "3g.20gb": 2},
                            "device_plugin": {"rename_by_default": True}}},
    "n-mig-me": {
        "gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 1,
        "gpuprov_sharing": {"strategy": "mig",
                            "mig": {"devices": [{"devices": "all", "mig-enabled": True,
                                                 "mig-devices": {"1g.10gb+me": 1, "1g.10gb": 5}}]},
                            "time_slicing_replicas": {"1g.10gb+me": 2},
                            "device_plugin": {"fail_requests_greater_than_one": False}}},
}}}


@pytest.fixture(scope="module")
def fleets(tmp_path_factory):
    """Plans of the example fleets and of INVENTORY: {name: plan result}."""
    folder = tmp_path_factory.mktemp("inventory")
    (folder / "inventory.yml").write_text(yaml.safe_dump(INVENTORY))
    plans = {"every-kind": plan_inventory([str(folder / "inventory.yml")]).result}
    for name in ("inventory.yml", os.path.join("sharing", "inventory.yml")):
        plans[name] = plan_inventory([os.path.join(REPO, "examples", name)]).result
    return plans


def written_configs(fleets):
    """{name: YAML text} of every config the fleets' ConfigMaps carry (the union per fleet)."""
    texts = {}
    for plan in fleets.values():
        nodes = dict((h, n) for h, n in plan["nodes"].items() if n["device_plugin"] is not None)
        for name, text in device_plugin_configs.config_map_data(nodes, plan["device_plugin_configs"]).items():
            assert texts.setdefault(name, text) == text, "config %s means two things" % name
    return texts


def load(tmp_path, text, gfd=False, env=CHART_ENV):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    args = [str(path)] + (["--gfd"] if gfd else [])
    for name, value in sorted(env.items()):
        args += ["--env", "%s=%s" % (name, value)]
    return run_peer("device-plugin-config", *args)


def meant(config):
    """What gpuprov's config asks of the plugin, with the plugin's documented defaults filled in
    (api/config/v1: an absent timeSlicing failRequestsGreaterThanOne is false, an absent MPS one
    true; a resource without devices means all; renameByDefault renames <name> to <name>.shared)."""
    result = {"migStrategy": config["flags"]["migStrategy"], "timeSlicing": None, "mps": None}
    for method, fail_default in (("timeSlicing", False), ("mps", True)):
        section = (config.get("sharing") or {}).get(method)
        if section is None:
            continue
        rename = section.get("renameByDefault", False)
        result[method] = {
            "renameByDefault": rename,
            "failRequestsGreaterThanOne": section.get("failRequestsGreaterThanOne", fail_default),
            "resources": [{"name": r["name"], "replicas": r["replicas"], "devices": "all",
                           "rename": r["name"] + ".shared" if rename else None} for r in section["resources"]],
        }
    return result


def loaded(config):
    """The same view of the config NVIDIA's code runs with (Go omits false and empty fields)."""
    sharing = config["sharing"]
    result = {"migStrategy": config["flags"]["migStrategy"], "timeSlicing": None, "mps": None}
    for method in ("timeSlicing", "mps"):
        section = sharing.get(method) or {}
        if not section.get("resources"):
            continue
        result[method] = {
            "renameByDefault": section.get("renameByDefault", False),
            "failRequestsGreaterThanOne": section.get("failRequestsGreaterThanOne", False),
            "resources": [{"name": r["name"], "replicas": r["replicas"], "devices": r["devices"],
                           "rename": r.get("rename")} for r in section["resources"]],
        }
    return result


def at_pinned_version(view):
    """``view`` as the pinned v0.19.3 runs it (VERSION_DIFFERENCES)."""
    view = copy.deepcopy(view)
    if view["mps"] is not None and view["mps"]["failRequestsGreaterThanOne"] is False:
        view["mps"]["failRequestsGreaterThanOne"] = VERSION_DIFFERENCES["sharing.mps.failRequestsGreaterThanOne=false"]
    return view


def test_every_written_config_loads_with_the_values_gpuprov_meant(fleets, tmp_path):
    texts = written_configs(fleets)
    # The inventory reaches every kind of config it was written for.
    kinds = set()
    for text in texts.values():
        view = meant(yaml.safe_load(text))
        kinds.add(view["migStrategy"])
        for method in ("timeSlicing", "mps"):
            if view[method]:
                kinds.add(method)
                kinds.update("%s-%s=%s" % (method, k, view[method][k]) for k in ("renameByDefault", "failRequestsGreaterThanOne"))
                if len(set(r["replicas"] for r in view[method]["resources"])) > 1:
                    kinds.add("per-resource replicas")
    assert kinds >= {"none", "single", "mixed", "timeSlicing", "mps", "per-resource replicas",
                     "timeSlicing-renameByDefault=True", "timeSlicing-failRequestsGreaterThanOne=False",
                     "mps-renameByDefault=True", "mps-failRequestsGreaterThanOne=False"}, kinds
    for name, text in sorted(texts.items()):
        for gfd in (False, True):
            result = load(tmp_path, text, gfd=gfd)
            assert result.error is None, "%s (%s): NVIDIA refuses it: %s" % (name, "gfd" if gfd else "plugin", result.error)
            assert result.data["warnings"] == [], (name, result.data["warnings"])
            assert loaded(result.data["config"]) == at_pinned_version(meant(yaml.safe_load(text))), (name, gfd)


def test_cpu_manager_compat_values_reach_the_plugin(fleets, tmp_path):
    """compatWithCPUManager becomes PASS_DEVICE_SPECS=true (the chart's env), and the plugin
    runs with passDeviceSpecs on: the config file does not undo it."""
    plan = fleets["every-kind"]
    nodes = dict((h, n) for h, n in plan["nodes"].items() if n["device_plugin"] is not None)
    values = helm_values.device_plugin_values(nodes, plan["device_plugin_configs"], compat_with_cpu_manager="always")
    assert values["compatWithCPUManager"] is True
    env = dict(CHART_ENV, PASS_DEVICE_SPECS="true")
    result = load(tmp_path, values["config"]["map"]["ts-2"], env=env)
    assert result.error is None, result.error
    assert result.data["config"]["flags"]["plugin"]["passDeviceSpecs"] is True


@pytest.mark.parametrize("binary,path", [("plugin", "cmd/nvidia-device-plugin/main.go"),
                                         ("gfd", "cmd/gpu-feature-discovery/main.go")])
def test_the_harness_flags_are_nvidias(binary, path):
    """The flag tables the harness loads configs with are the ones NVIDIA's main packages
    declare (names, aliases, environment variables, defaults)."""
    source = module_file(PLUGIN_MODULE, path)
    args = ["--source", source] + (["--gfd"] if binary == "gfd" else [])
    result = run_peer("device-plugin-flags", *args)
    assert result.error is None, result.error
    assert result.data["differences"] == [], result.data["differences"]


# -- what gpuprov refuses, NVIDIA refuses: or it is one of gpuprov's own rules --------------
# gpuprov's stricter rules, each with the words the README's list of them uses
# (README.md, "Device-plugin configs: where gpuprov is stricter than NVIDIA").
STRICTER = {
    "unknown-key": "an unknown key",
    "version": "`version: v1` written out",
    "device-list-strategy": "`deviceListStrategy` empty or with a repeat",
    "duration": "`sleepInterval` as a bare number",
    "short-name": "short resource name in `sharing`",
    "device-refs": "`devices` entries in other forms",
    "two-methods": "`timeSlicing` and `mps` together",
    "duplicate-resource": "a resource listed twice",
    "mps-resource": "MPS on a resource other than `nvidia.com/gpu`",
    "mig-resource": "`nvidia.com/mig-*` without `migStrategy: mixed`",
}
# Refused by the plugin only once it sees the node's devices, which the harness has none of:
# the file and the error text in NVIDIA's source at the pinned version.
REFUSED_AT_DEVICES = {
    "mps-with-mig": ("internal/plugin/mps.go", "sharing using MPS is not supported for MIG devices"),
}

_DROP = object()
BASE = {"version": "v1", "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
TS = ["sharing", "timeSlicing"]
R0 = TS + ["resources", 0]
UUID = "b1028956-cfa2-0990-bf4a-5da9abb51763"


def _with(path, value, base=BASE):
    config = copy.deepcopy(base)
    target = config
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return config


def _mps(mig_strategy, name="nvidia.com/gpu"):
    return {"version": "v1", "flags": {"migStrategy": mig_strategy},
            "sharing": {"mps": {"resources": [{"name": name, "replicas": 2}]}}}


# name: (config, verdict). "both": NVIDIA refuses too; "stricter:RULE"; "version:KEY" (the
# chart's v0.20.0 refuses it, the pinned v0.19.3 ignores the key); "devices:KEY"
# (REFUSED_AT_DEVICES); "valid": both accept.
CASES = {
    "unknown top-level key": (_with(["timeslicing"], {}), "stricter:unknown-key"),
    "unknown flag": (_with(["flags", "migstrategy"], "mixed"), "stricter:unknown-key"),
    "flag of no plugin version": (_with(["flags", "restartOnDeviceUnhealthy"], True), "stricter:unknown-key"),
    "unknown plugin flag": (_with(["flags", "plugin"], {"passDevicesSpecs": True}), "stricter:unknown-key"),
    "unknown gfd flag": (_with(["flags", "gfd"], {"sleepinterval": "5s"}), "stricter:unknown-key"),
    "unknown sharing method": (_with(["sharing", "mig"], {"resources": []}), "stricter:unknown-key"),
    "unknown timeSlicing key": (_with(TS + ["replicas"], 4), "stricter:unknown-key"),
    "resource key typo": (_with(R0 + ["replica"], 2), "stricter:unknown-key"),
    "version v2": (_with(["version"], "v2"), "both"),
    "version missing": (_with(["version"], _DROP), "stricter:version"),
    "version empty": (_with(["version"], ""), "stricter:version"),
    "flags not a mapping": (_with(["flags"], ["migStrategy"]), "both"),
    "migStrategy all": (_with(["flags", "migStrategy"], "all"), "both"),
    "failOnInitError as a string": (_with(["flags", "failOnInitError"], "true"), "both"),
    "deviceDiscoveryStrategy cuda": (_with(["flags", "deviceDiscoveryStrategy"], "cuda"), "both"),
    "passDeviceSpecs as int": (_with(["flags", "plugin"], {"passDeviceSpecs": 1}), "both"),
    "deviceListStrategy unknown": (_with(["flags", "plugin"], {"deviceListStrategy": "env"}), "both"),
    "deviceListStrategy repeated": (_with(["flags", "plugin"], {"deviceListStrategy": ["envvar", "envvar"]}),
                                    "stricter:device-list-strategy"),
    "deviceListStrategy empty": (_with(["flags", "plugin"], {"deviceListStrategy": []}), "stricter:device-list-strategy"),
    "deviceIDStrategy serial": (_with(["flags", "plugin"], {"deviceIDStrategy": "serial"}), "both"),
    "sharedDevicesAllocationPolicy spread": (_with(["flags", "plugin"], {"sharedDevicesAllocationPolicy": "spread"}),
                                             "version:flags.plugin.sharedDevicesAllocationPolicy"),
    "sleepInterval a number": (_with(["flags", "gfd"], {"sleepInterval": 60}), "stricter:duration"),
    "sleepInterval negative": (_with(["flags", "gfd"], {"sleepInterval": "-5s"}), "stricter:duration"),
    "sleepInterval bad unit": (_with(["flags", "gfd"], {"sleepInterval": "60 seconds"}), "both"),
    "sleepInterval infinite": (_with(["flags", "gfd"], {"sleepInterval": "infinite"}), "valid"),
    "renameByDefault as a string": (_with(TS + ["renameByDefault"], "false"), "both"),
    "resources empty": (_with(TS + ["resources"], []), "both"),
    "resources missing": (_with(TS + ["resources"], _DROP), "both"),
    "resources entry not a mapping": (_with(TS + ["resources"], ["nvidia.com/gpu"]), "both"),
    "replicas 1": (_with(R0 + ["replicas"], 1), "both"),
    "replicas as a string": (_with(R0 + ["replicas"], "4"), "both"),
    "replicas as a bool": (_with(R0 + ["replicas"], True), "both"),
    "replicas missing": (_with(R0 + ["replicas"], _DROP), "both"),
    "name missing": (_with(R0 + ["name"], _DROP), "both"),
    "name without prefix": (_with(R0 + ["name"], "gpu"), "stricter:short-name"),
    "name upper case": (_with(R0 + ["name"], "nvidia.com/GPU"), "both"),
    "name with an empty label": (_with(R0 + ["name"], "nvidia.com/gpu..shared"), "both"),
    "name label ending in a dash": (_with(R0 + ["name"], "nvidia.com/gpu-.x"), "both"),
    "name of 64 characters": (_with(R0 + ["name"], "nvidia.com/" + "a" * 53), "both"),
    "name of 63 characters": (_with(R0 + ["name"], "nvidia.com/" + "a" * 52), "valid"),
    "name of another vendor": (_with(R0 + ["name"], "example.com/gpu"), "both"),
    "rename with an empty label": (_with(R0 + ["rename"], "nvidia.com/x..y"), "both"),
    "devices unknown word": (_with(R0 + ["devices"], "some"), "both"),
    "devices count 0": (_with(R0 + ["devices"], 0), "both"),
    "devices empty list": (_with(R0 + ["devices"], []), "stricter:device-refs"),
    "devices bad entry": (_with(R0 + ["devices"], ["gpu0"]), "both"),
    "devices negative": (_with(R0 + ["devices"], [-1]), "both"),
    "devices braced UUID": (_with(R0 + ["devices"], ["GPU-{%s}" % UUID]), "stricter:device-refs"),
    "devices every documented form": (_with(R0 + ["devices"], [0, "1", "0:1", "GPU-" + UUID, "MIG-" + UUID,
                                                              "MIG-GPU-%s/3/0" % UUID]), "valid"),
    "custom resource without pattern": (_with(["resources"], {"gpus": [{"name": "gpu"}]}), "both"),
    "custom resource with a bad name": (_with(["resources"], {"gpus": [{"pattern": "*", "name": "Bad_Name"}]}), "both"),
    "custom resource with a short name": (_with(["resources"], {"gpus": [{"pattern": "*", "name": "gpu"}]}), "valid"),
    "imex channel 1": (_with(["imex"], {"channelIDs": [1]}), "both"),
    "imex channels 0, 0": (_with(["imex"], {"channelIDs": [0, 0]}), "both"),
    "mps with mig strategy mixed": (_mps("mixed"), "both"),
    "mps with mig strategy single": (_mps("single"), "devices:mps-with-mig"),
    "timeSlicing and mps together": (_with(["sharing", "mps"], {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}),
                                     "stricter:two-methods"),
    "resource listed twice": (_with(TS + ["resources"], [{"name": "nvidia.com/gpu", "replicas": 2},
                                                          {"name": "nvidia.com/gpu", "replicas": 3}]),
                              "stricter:duplicate-resource"),
    "mps on a MIG resource": (_mps("none", "nvidia.com/mig-1g.10gb"), "stricter:mps-resource"),
    "MIG resource with strategy none": (_with(R0 + ["name"], "nvidia.com/mig-1g.10gb"), "stricter:mig-resource"),
    "MIG resource with strategy single": (_with(["flags", "migStrategy"], "single",
                                                _with(R0 + ["name"], "nvidia.com/mig-1g.10gb")), "stricter:mig-resource"),
}


def nvidia_error(tmp_path, config):
    """The plugin's or GFD's error for ``config`` (each reads the file), or None."""
    text = yaml.safe_dump(config, sort_keys=False)
    for gfd in (False, True):
        result = load(tmp_path, text, gfd=gfd)
        if result.error is not None:
            return result.error
    return None


def readme_section(title):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start:end if end >= 0 else len(text)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_gpuprov_refuses_what_nvidia_refuses(case, tmp_path):
    config, verdict = CASES[case]
    ours = device_plugin_schema.problems(config)
    theirs = nvidia_error(tmp_path, config)
    kind, _, key = verdict.partition(":")
    if kind == "valid":
        assert ours == [] and theirs is None, (ours, theirs)
        return
    assert ours, "gpuprov accepts a config %s" % ("NVIDIA refuses: %s" % theirs if theirs else "it should refuse")
    if kind == "both":
        assert theirs is not None, "NVIDIA accepts it; list it as gpuprov's own rule or drop the rule (gpuprov: %s)" % ours
    elif kind == "stricter":
        assert theirs is None, "NVIDIA refuses it too (%s): not one of gpuprov's own rules" % theirs
        assert STRICTER[key] in readme_section("### Device-plugin configs: where gpuprov is stricter than NVIDIA"), key
    elif kind == "version":
        assert theirs is None and key in VERSION_DIFFERENCES, (theirs, key)
    elif kind == "devices":
        assert theirs is None
        path, message = REFUSED_AT_DEVICES[key]
        with open(module_file(PLUGIN_MODULE, path), encoding="utf-8") as handle:
            assert message in handle.read()
    else:
        raise AssertionError(verdict)


def test_every_stricter_rule_has_a_case_and_a_readme_line():
    used = set(v.partition(":")[2] for _c, v in CASES.values() if v.startswith("stricter:"))
    assert used == set(STRICTER)
    section = readme_section("### Device-plugin configs: where gpuprov is stricter than NVIDIA")
    for rule, words in STRICTER.items():
        assert words in section, rule


# -- every key gpuprov's schema accepts is one NVIDIA's config has ---------------------------
# A config with every key of the schema (flags.gfd only counts in GFD's run: the plugin drops
# GFD's flags in loadConfig).
FULL = {
    "version": "v1",
    "flags": {
        "migStrategy": "single", "failOnInitError": False, "mpsRoot": "/run/nvidia/mps",
        "nvidiaDriverRoot": "/run/nvidia/driver", "nvidiaDevRoot": "/", "gdrcopyEnabled": True,
        "gdsEnabled": True, "mofedEnabled": True, "useNodeFeatureAPI": True, "deviceDiscoveryStrategy": "nvml",
        "plugin": {"passDeviceSpecs": True, "deviceListStrategy": ["envvar", "cdi-annotations"],
                   "deviceIDStrategy": "index", "cdiAnnotationPrefix": "cdi.example/",
                   "nvidiaCTKPath": "/opt/nvidia-ctk", "containerDriverRoot": "/host-driver",
                   "sharedDevicesAllocationPolicy": "packed"},
        "gfd": {"oneshot": True, "noTimestamp": True, "sleepInterval": "1m30s", "outputFile": "/tmp/gfd",
                "machineTypeFile": "/tmp/product_name"},
    },
    "resources": {"gpus": [{"pattern": "*", "name": "gpu"}], "mig": [{"pattern": "1g.10gb", "name": "mig-1g.10gb"}]},
    "sharing": {"timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                                "resources": [{"name": "nvidia.com/gpu", "rename": "nvidia.com/gpu.shared",
                                               "devices": "all", "replicas": 2}]},
                "mps": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                        "resources": [{"name": "nvidia.com/gpu", "rename": "nvidia.com/gpu.shared",
                                       "devices": "all", "replicas": 2}]}},
    "imex": {"channelIDs": [0], "required": True},
}
# Keys NVIDIA parses and then sets aside by design (api/config/v1 DisableResourceNamingInConfig:
# custom resource names and per-resource rename/devices are "not yet supported").
SET_ASIDE = ("resources.", "sharing.timeSlicing.resources[].rename", "sharing.timeSlicing.resources[].devices",
             "sharing.mps.resources[].rename", "sharing.mps.resources[].devices")


def schema_paths(schema, prefix=""):
    """Every key path the schema defines, arrays as []."""
    schema = device_plugin_schema.SCHEMA["$defs"][schema["$ref"].split("/")[-1]] if "$ref" in schema else schema
    paths = set()
    for key, sub in schema.get("properties", {}).items():
        path = prefix + key
        paths.add(path)
        if sub.get("type") == "array" and "items" in sub:
            paths |= schema_paths(sub["items"], path + "[].")
        paths |= schema_paths(sub, path + ".")
    return paths


def leaf_values(value, prefix=""):
    if isinstance(value, dict):
        result = {}
        for key, sub in value.items():
            result.update(leaf_values(sub, "%s%s%s" % (prefix, "." if prefix else "", key)))
        return result
    if isinstance(value, list) and value and isinstance(value[0], dict):
        result = {}
        for sub in value:
            result.update(leaf_values(sub, prefix + "[]"))
        return result
    return {prefix: value}


def test_every_schema_key_is_one_nvidia_reads(tmp_path):
    prefixes = set()
    for path in leaf_values(FULL):
        parts = path.split(".")
        prefixes |= set(".".join(parts[:i]).rstrip("[]") for i in range(1, len(parts) + 1))
    unexercised = schema_paths(device_plugin_schema.SCHEMA) - prefixes
    assert not unexercised, "keys of gpuprov's schema that FULL does not use (add them, NVIDIA must read them): %s" \
        % sorted(unexercised)
    assert device_plugin_schema.validate(FULL) == []
    text = yaml.safe_dump(FULL, sort_keys=False)
    read = {}
    for gfd in (False, True):
        result = load(tmp_path, text, gfd=gfd)
        assert result.error is None, result.error
        for path, value in leaf_values(result.data["config"]).items():
            if value is not None and (gfd or not path.startswith("flags.gfd.")):
                read[path] = value
    for path, value in sorted(leaf_values(FULL).items()):
        if path.startswith(SET_ASIDE[0]) or path in SET_ASIDE or path in VERSION_DIFFERENCES:
            continue
        assert path in read, "%s: gpuprov's schema accepts a key NVIDIA's config does not have" % path
        assert read[path] == value, (path, read[path], value)
