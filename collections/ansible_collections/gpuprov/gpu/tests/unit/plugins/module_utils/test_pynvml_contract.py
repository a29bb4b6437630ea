# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The contract between the fake pynvml (roles/fake_gpu_node/files/python) and the real nvidia-ml-py.

The fake may only be as kind as the real module: same names, constants, signatures, struct
fields and exception classes. The last tests run the *real* nvidia-ml-py wrappers over a stub
C library (``nvmlLib`` replaced) to check the ctypes arguments gpuprov's nvml.py passes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import importlib.util
import inspect
import os
import re
import sys

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.nvml_node import FAKES

NVML_PREFIXES = ("nvml", "NVML", "c_nvml", "struct_c_nvml")
HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # nvidia-ml-py looks itself up in sys.modules while loading
    spec.loader.exec_module(module)
    return module


def _real_path():
    fake_dir = os.path.join(FAKES, "python") if FAKES else None
    for entry in sys.path:
        if not entry or (fake_dir and os.path.abspath(entry) == os.path.abspath(fake_dir)):
            continue
        candidate = os.path.join(entry, "pynvml.py")
        if os.path.isfile(candidate):
            return candidate
    return None


@pytest.fixture(scope="module")
def real():
    path = _real_path()
    if path is None:
        pytest.skip("nvidia-ml-py is not installed beside the tests (pip install nvidia-ml-py)")
    return _load("_contract_real_pynvml", path)


@pytest.fixture(scope="module")
def fake():
    if FAKES is None:
        pytest.skip("the fakes not found: the collection runs outside its repository")
    return _load("_contract_fake_pynvml", os.path.join(FAKES, "python", "pynvml.py"))


def _nvml_names(module):
    return sorted(n for n in dir(module) if n.startswith(NVML_PREFIXES))


def _used_names():
    """Every pynvml.<nvml name> the product code calls (collection plugins, CLI, device checks)."""
    roots = [os.path.join(COLLECTION, "plugins")]
    repo = os.path.dirname(os.path.dirname(FAKES)) if FAKES else None
    if repo:
        roots += [os.path.join(repo, "gpuprov"), os.path.join(repo, "tests", "device")]
    names = set()
    pattern = re.compile(r"pynvml\.((?:nvml|NVML|c_nvml|struct_c_nvml)\w*)")
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(folder, name)) as handle:
                        names.update(pattern.findall(handle.read()))
    return sorted(names)


def test_every_name_gpuprov_calls_exists_in_both(real, fake):
    used = _used_names()
    assert "nvmlDeviceSetMigMode" in used  # the scan found the product code
    assert [n for n in used if not hasattr(real, n)] == []
    assert [n for n in used if not hasattr(fake, n)] == []


def test_fake_defines_no_nvml_name_the_real_module_lacks(real, fake):
    assert [n for n in _nvml_names(fake) if not hasattr(real, n)] == []


def test_integer_constants_are_equal(real, fake):
    diff = [(n, getattr(fake, n), getattr(real, n)) for n in _nvml_names(fake)
            if isinstance(getattr(fake, n), int) and getattr(fake, n) != getattr(real, n)]
    assert diff == []


def test_function_parameter_lists_are_equal(real, fake):
    diff = []
    for name in _nvml_names(fake):
        ours = getattr(fake, name)
        if inspect.isfunction(ours):
            theirs = inspect.signature(getattr(real, name))
            if str(inspect.signature(ours)) != str(theirs):
                diff.append((name, str(inspect.signature(ours)), str(theirs)))
    assert diff == []


def test_struct_fields_and_char_array_types_are_equal(real, fake):
    checked = 0
    for name in _nvml_names(fake):
        ours = getattr(fake, name)
        if not (inspect.isclass(ours) and issubclass(ours, ctypes.Structure)):
            continue
        theirs = getattr(real, name)
        assert [f[0] for f in getattr(ours, "_fields_", [])] == [f[0] for f in getattr(theirs, "_fields_", [])], name
        for field, ctype in getattr(theirs, "_fields_", []):
            if getattr(ctype, "_type_", None) is ctypes.c_char:
                # What a caller reads back from a char array: str from nvidia-ml-py's
                # _PrintableStructure, bytes from a plain ctypes Structure.
                mine, real_obj = ours(), theirs()
                setattr(mine, field, b"x")
                setattr(real_obj, field, b"x")
                assert type(getattr(mine, field)) is type(getattr(real_obj, field)), (name, field)
        checked += 1
    assert checked >= 10


def test_exception_contract(real, fake):
    for name in dir(real):
        if name.startswith("NVMLError_"):
            assert hasattr(fake, name), name
            assert getattr(fake, name)(0).value == getattr(real, name)(0).value, name
    for module in (real, fake):
        assert not issubclass(module.NVMLLibraryMismatchError, module.NVMLError)
        assert type(module.NVMLError(module.NVML_ERROR_IN_USE)).__name__ == "NVMLError_InUse"
    real_hashable = real.NVMLError.__hash__ is not None
    assert (fake.NVMLError.__hash__ is not None) == real_hashable


# --- the real wrappers over a stub C library ------------------------------------------------------

class StubLib:
    """libnvidia-ml as the real wrappers see it: one H100-like GPU with MIG enabled.

    Each function checks its C arguments as nvml.h declares them: out-parameters are
    pointers (ctypes.byref), arrays are ctypes arrays of the right struct, and
    nvmlDeviceCreateGpuInstanceWithPlacement takes ``const nvmlGpuInstancePlacement_t *``.
    """

    PROFILES = {0: (19, 1, 7, [(s, 1) for s in range(7)]), 2: (9, 3, 2, [(0, 4), (4, 4)])}

    def __init__(self, real):
        self.real = real
        self.calls = []
        self.instances = []  # (gi id, profile id, start, size)

    @staticmethod
    def _out(ref, ctype):
        assert type(ref).__name__ == "CArgObject", "expected byref(%s), got %r" % (ctype.__name__, ref)
        assert isinstance(ref._obj, ctype), "expected byref(%s), got byref(%r)" % (ctype.__name__, ref._obj)
        return ref._obj

    def __getattr__(self, name):
        raise AttributeError(name)  # the real wrapper turns this into FunctionNotFound

    def nvmlInitWithFlags(self, flags):
        return 0

    def nvmlShutdown(self):
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, device):
        assert isinstance(index, ctypes.c_uint)
        self._out(device, self.real.c_nvmlDevice_t)
        return 0 if index.value == 0 else self.real.NVML_ERROR_INVALID_ARGUMENT

    def nvmlDeviceGetPciInfo_v3(self, device, pci):
        pci = self._out(pci, self.real.nvmlPciInfo_t)
        pci.busId = b"00000000:07:00.0"
        pci.pciDeviceId = 0x233010DE  # H100 80GB HBM3
        return 0

    def nvmlDeviceGetCount_v2(self, count):
        self._out(count, ctypes.c_uint).value = 1
        return 0

    def nvmlDeviceGetNvLinkState(self, device, link, active):
        assert isinstance(link, int)
        if link >= 2:
            return self.real.NVML_ERROR_INVALID_ARGUMENT
        self._out(active, ctypes.c_uint).value = self.real.NVML_FEATURE_ENABLED
        return 0

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, device, link, pci):
        self._out(pci, self.real.nvmlPciInfo_t).busId = b"00000000:C%d:00.0" % link  # two NVSwitches
        return 0

    def nvmlDeviceGetGpuFabricInfoV(self, device, info):
        # nvml.h: the caller passes a pointer to nvmlGpuFabricInfoV_t with .version set.
        info = self._out(info, self.real.c_nvmlGpuFabricInfoV_t)
        assert info.version == self.real.nvmlGpuFabricInfo_v2
        info.state = self.real.NVML_GPU_FABRIC_STATE_COMPLETED
        return 0

    def nvmlDeviceGetGpuInstanceProfileInfoV(self, device, profile, info):
        info = self._out(info, self.real.c_nvmlGpuInstanceProfileInfo_v2_t)
        assert info.version == self.real.nvmlGpuInstanceProfileInfo_v2, "the v2 struct needs its version set"
        if profile not in self.PROFILES:
            return self.real.NVML_ERROR_NOT_SUPPORTED
        info.id, info.sliceCount, info.instanceCount, _p = self.PROFILES[profile]
        info.memorySizeMB = 10240 * info.sliceCount
        info.name = b"MIG %dg.%dgb" % (info.sliceCount, 10 * info.sliceCount + (10 if profile == 2 else 0))
        return 0

    def _profile(self, profile_id):
        return next(p for p in self.PROFILES.values() if p[0] == profile_id)

    def nvmlDeviceGetGpuInstancePossiblePlacements_v2(self, device, profile_id, placements, count):
        count = self._out(count, ctypes.c_uint)  # an output: nvml.h "Returns number of placements"
        found = self._profile(profile_id)[3]
        if placements is None:
            count.value = len(found)
            return 0
        assert isinstance(placements, ctypes.Array) and placements._type_ is self.real.c_nvmlGpuInstancePlacement_t
        if len(placements) < len(found):
            return self.real.NVML_ERROR_INSUFFICIENT_SIZE
        for i, (start, size) in enumerate(found):
            placements[i].start, placements[i].size = start, size
        count.value = len(found)
        return 0

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device, profile_id, placement, instance):
        placement = self._out(placement, self.real.c_nvmlGpuInstancePlacement_t)  # by reference
        self._out(instance, self.real.c_nvmlGpuInstance_t)
        assert (placement.start, placement.size) in self._profile(profile_id)[3]
        gi_id = len(self.instances) + 1
        self.instances.append((gi_id, profile_id, placement.start, placement.size))
        self.calls.append(("create", profile_id, placement.start, placement.size))
        instance._obj.contents = self.real.struct_c_nvmlGpuInstance_t()
        self._gi_of = getattr(self, "_gi_of", {})
        self._gi_of[ctypes.addressof(instance._obj.contents)] = gi_id
        return 0

    def nvmlGpuInstanceGetInfo(self, gi, info):
        info = self._out(info, self.real.c_nvmlGpuInstanceInfo_t)
        gi_id = self._gi_of[ctypes.addressof(gi.contents)]
        _id, profile_id, start, size = self.instances[gi_id - 1]
        info.id, info.profileId = gi_id, profile_id
        info.placement.start, info.placement.size = start, size
        return 0

    def nvmlGpuInstanceGetComputeInstanceProfileInfoV(self, gi, profile, eng_profile, info):
        info = self._out(info, self.real.c_nvmlComputeInstanceProfileInfo_v2_t)
        assert info.version == self.real.nvmlComputeInstanceProfileInfo_v2
        if profile not in (0, 2):
            return self.real.NVML_ERROR_NOT_SUPPORTED
        info.id, info.sliceCount, info.instanceCount = profile, profile + 1, 1
        return 0

    def nvmlGpuInstanceCreateComputeInstance(self, gi, profile_id, instance):
        self._out(instance, self.real.c_nvmlComputeInstance_t)
        self.calls.append(("create-ci", self._gi_of[ctypes.addressof(gi.contents)], profile_id))
        return 0


@pytest.fixture
def stub_nvml(real, monkeypatch):
    lib = StubLib(real)
    monkeypatch.setattr(real, "nvmlLib", lib)
    monkeypatch.setattr(real, "_nvmlGetFunctionPointer_cache", {})
    monkeypatch.setitem(sys.modules, "pynvml", real)
    return lib


def test_real_wrappers_accept_gpuprovs_profile_and_placement_calls(stub_nvml):
    from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml

    with Nvml() as nvml:
        profiles = nvml.mig_profiles(0)
        assert sorted(profiles) == ["1g.10gb", "3g.40gb"]  # names arrive as str, "MIG " stripped
        assert profiles["3g.40gb"].placements == [(0, 4), (4, 4)]
        gi_id = nvml.create_gpu_instance(0, profiles["3g.40gb"], 4)
    assert gi_id == 1
    assert stub_nvml.calls == [("create", 9, 4, 4), ("create-ci", 1, 2)]


def test_real_wrappers_accept_gpuprovs_nvlink_and_fabric_calls(stub_nvml):
    from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml

    with Nvml() as nvml:
        assert nvml.nvlink(0) == {"active_links": 2, "nvswitch": True, "peers": []}
        assert nvml.fabric_state(0) == "completed"


def test_a_missing_symbol_becomes_function_not_found_in_the_real_wrapper(stub_nvml, real):
    with pytest.raises(real.NVMLError_FunctionNotFound):
        real.nvmlDeviceGetMaxMigDeviceCount(real.c_nvmlDevice_t())
    with pytest.raises(real.NVMLLibraryMismatchError):
        real.nvmlDeviceGetComputeRunningProcesses(real.c_nvmlDevice_t())
