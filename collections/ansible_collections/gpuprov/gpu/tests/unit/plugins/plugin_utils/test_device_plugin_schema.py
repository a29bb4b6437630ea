# -*- coding: utf-8 -*-
"""The device-plugin config schema: what it accepts, what it rejects, and that the small
validator agrees with the reference JSON Schema implementation on every case."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

try:
    import jsonschema
except ImportError:  # only in the dev extra
    jsonschema = None

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.device_plugin_schema import (
    SCHEMA, DevicePluginConfigError, check, problems, semantic_problems, validate)

UUID = "b1028956-cfa2-0990-bf4a-5da9abb51763"

# Every shape the renderer produces.
RENDERED = [
    device_plugin.render("exclusive"),
    device_plugin.render("time-slicing", 4),
    device_plugin.render("mps", 8, mps_provider="device-plugin"),
    device_plugin.render("mps", 4, mps_provider="host"),
    device_plugin.render("mig", None, "single"),
    device_plugin.render("mig", None, "mixed"),
    device_plugin.render("mig", 3, "single"),
    device_plugin.render("mig", 2, "mixed", ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu"]),
]

# A config using every key of the format, valid for the plugin.
FULL = {
    "version": "v1",
    "flags": {
        "migStrategy": "mixed",
        "failOnInitError": True,
        "mpsRoot": "/run/nvidia/mps",
        "nvidiaDriverRoot": "/",
        "nvidiaDevRoot": "/",
        "gdrcopyEnabled": False,
        "gdsEnabled": False,
        "mofedEnabled": False,
        "useNodeFeatureAPI": True,
        "deviceDiscoveryStrategy": "nvml",
        "plugin": {
            "passDeviceSpecs": True,
            "deviceListStrategy": ["envvar", "cdi-annotations"],
            "deviceIDStrategy": "uuid",
            "cdiAnnotationPrefix": "cdi.k8s.io/",
            "nvidiaCTKPath": "/usr/bin/nvidia-ctk",
            "containerDriverRoot": "/driver-root",
            "sharedDevicesAllocationPolicy": "packed",
        },
        "gfd": {"oneshot": False, "noTimestamp": True, "sleepInterval": "1m30s",
                "outputFile": "/etc/kubernetes/node-feature-discovery/features.d/gfd",
                "machineTypeFile": "/sys/class/dmi/id/product_name"},
    },
    "resources": {"gpus": [{"pattern": "*", "name": "gpu"}], "mig": [{"pattern": "1g.10gb", "name": "mig-1g.10gb"}]},
    "sharing": {
        "timeSlicing": {
            "renameByDefault": True,
            "failRequestsGreaterThanOne": True,
            "resources": [
                {"name": "nvidia.com/gpu", "replicas": 2, "devices": "all"},
                {"name": "nvidia.com/mig-1g.10gb", "rename": "nvidia.com/mig-1g.10gb.shared", "replicas": 4,
                 "devices": [0, "1", "0:1", "GPU-" + UUID, "MIG-" + UUID, "MIG-GPU-" + UUID + "/3/0"]},
                {"name": "nvidia.com/mig-3g.40gb", "replicas": 2, "devices": 2},
            ],
        },
    },
    "imex": {"channelIDs": [0], "required": False},
}


def _with(path, value):
    """FULL with one value replaced (path: list of keys/indices); value _DROP removes it."""
    config = copy.deepcopy(FULL)
    target = config
    for key in path[:-1]:
        target = target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return config


_DROP = object()
TS = ["sharing", "timeSlicing"]
TS0 = TS + ["resources", 0]

INVALID = {
    "unknown top-level key": (["timeslicing"], {}),
    "wrong version": (["version"], "v2"),
    "missing version": (["version"], _DROP),
    "unknown flag (typo)": (["flags", "migstrategy"], "mixed"),
    "migStrategy not in enum": (["flags", "migStrategy"], "all"),
    "failOnInitError as a string": (["flags", "failOnInitError"], "true"),
    "deviceDiscoveryStrategy not in enum": (["flags", "deviceDiscoveryStrategy"], "cuda"),
    "passDeviceSpecs as int": (["flags", "plugin", "passDeviceSpecs"], 1),
    "deviceListStrategy unknown": (["flags", "plugin", "deviceListStrategy"], "env"),
    "deviceListStrategy list with unknown": (["flags", "plugin", "deviceListStrategy"], ["envvar", "mounts"]),
    "deviceListStrategy duplicate": (["flags", "plugin", "deviceListStrategy"], ["envvar", "envvar"]),
    "deviceIDStrategy not in enum": (["flags", "plugin", "deviceIDStrategy"], "serial"),
    "sharedDevicesAllocationPolicy not in enum": (["flags", "plugin", "sharedDevicesAllocationPolicy"], "spread"),
    "unknown plugin flag": (["flags", "plugin", "passDevicesSpecs"], True),
    "gfd sleepInterval not a duration": (["flags", "gfd", "sleepInterval"], 60),
    "gfd sleepInterval bad unit": (["flags", "gfd", "sleepInterval"], "60 seconds"),
    "unknown sharing method": (["sharing", "mig"], {"resources": []}),
    "renameByDefault as string": (TS + ["renameByDefault"], "false"),
    "unknown timeSlicing key": (TS + ["replicas"], 4),
    "empty resources": (TS + ["resources"], []),
    "missing resources": (TS + ["resources"], _DROP),
    "replicas 1": (TS0 + ["replicas"], 1),
    "replicas 0": (TS0 + ["replicas"], 0),
    "replicas as string": (TS0 + ["replicas"], "4"),
    "replicas as bool": (TS0 + ["replicas"], True),
    "replicas missing": (TS0 + ["replicas"], _DROP),
    "resource name missing": (TS0 + ["name"], _DROP),
    "resource name without prefix": (TS0 + ["name"], "gpu"),
    "resource name upper case": (TS0 + ["name"], "nvidia.com/GPU"),
    "resource key typo": (TS0 + ["replica"], 2),
    "devices unknown word": (TS0 + ["devices"], "some"),
    "devices count 0": (TS0 + ["devices"], 0),
    "devices empty list": (TS0 + ["devices"], []),
    "devices list bad entry": (TS0 + ["devices"], ["gpu0"]),
    "devices list negative": (TS0 + ["devices"], [-1]),
    "resources entry not a mapping": (TS + ["resources"], ["nvidia.com/gpu"]),
    "custom resource without pattern": (["resources", "gpus"], [{"name": "gpu"}]),
    "imex channel 1": (["imex", "channelIDs"], [1]),
    "flags not a mapping": (["flags"], ["migStrategy", "none"]),
}


@pytest.mark.parametrize("name,config", RENDERED, ids=[r[0] for r in RENDERED])
def test_every_rendered_config_is_valid(name, config):
    assert problems(config) == []
    check(name, config)


def test_full_config_is_valid():
    assert validate(FULL) == []


@pytest.mark.parametrize("case", sorted(INVALID))
def test_schema_rejects(case):
    path, value = INVALID[case]
    config = _with(path, value)
    errors = validate(config)
    assert errors, "%s was accepted" % case
    with pytest.raises(DevicePluginConfigError) as info:
        check("bad", config)
    assert "bad" in str(info.value)


def test_error_names_the_path_and_the_allowed_values():
    errors = validate(_with(TS0 + ["replicas"], 1))
    assert errors == ["sharing.timeSlicing.resources[0].replicas: must be >= 2, got 1"]
    errors = validate(_with(["flags", "migStrategy"], "all"))
    assert errors == ["flags.migStrategy: must be one of none, single, mixed, got 'all'"]
    errors = validate(_with(["flags", "migstrategy"], "mixed"))
    assert len(errors) == 1 and "unknown key 'migstrategy'" in errors[0] and "migStrategy" in errors[0]


@pytest.mark.skipif(jsonschema is None, reason="jsonschema (dev extra) is not installed")
class TestAgreesWithJsonSchema:
    """The reference implementation reads SCHEMA the same way the small validator does."""

    @staticmethod
    def _validator():
        jsonschema.Draft202012Validator.check_schema(SCHEMA)
        return jsonschema.Draft202012Validator(SCHEMA)

    def test_schema_is_a_valid_json_schema(self):
        self._validator()

    @pytest.mark.parametrize("name,config", RENDERED + [("full", FULL)], ids=[r[0] for r in RENDERED] + ["full"])
    def test_accepts_the_same(self, name, config):
        assert list(self._validator().iter_errors(config)) == []

    @pytest.mark.parametrize("case", sorted(INVALID))
    def test_rejects_the_same(self, case):
        path, value = INVALID[case]
        assert list(self._validator().iter_errors(_with(path, value))), "jsonschema accepted %s" % case


@pytest.mark.parametrize("config,expected", [
    ({"version": "v1", "flags": {"migStrategy": "mixed"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
     "using --mig-strategy=mixed is not supported with MPS"),
    ({"version": "v1", "flags": {"migStrategy": "single"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
     "sharing using MPS is not supported for MIG devices"),
    ({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]},
                                   "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
     "timeSlicing and mps are mutually exclusive"),
    ({"version": "v1", "flags": {"migStrategy": "mixed"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]}}},
     "MPS shares only nvidia.com/gpu"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4},
                                                                 {"name": "nvidia.com/gpu", "replicas": 2}]}}},
     "nvidia.com/gpu is listed more than once"),
    ({"version": "v1", "flags": {"migStrategy": "single"},
      "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]}}},
     "exists only with migStrategy mixed"),
])
def test_semantic_problems_the_plugin_rejects(config, expected):
    assert validate(config) == []
    found = semantic_problems(config)
    assert any(expected in p for p in found), found
    assert problems(config) == found


def test_mps_without_mig_is_fine():
    config = device_plugin.render("mps", 8, mps_provider="device-plugin")[1]
    assert semantic_problems(config) == []
