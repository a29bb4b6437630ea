"""The fake pynvml against NVIDIA's go-nvml mocks: the same NVML call sequences on both.

Each case is a JSON list of NVML calls (the `peers nvml-script` format, tests/peers/cmd/peers/
nvml_script.go). The Go peer runs it on go-nvml v0.13.4-1's mock server (dgxa100, dgxh100,
dgxh200, dgxb200); run_on_fake() runs it on roles/fake_gpu_node/files/python/pynvml.py with the
same GPUs. Return codes must agree, except where the fake is the stricter one: those steps are
listed in STRICTER with the nvml.h line (go-nvml v0.13.4-1 pkg/nvml/nvml.h) that says the
driver refuses; the mock, whose calls always succeed (go-nvml pkg/nvml/mock/server/shared.go),
does not. A call the mock leaves unimplemented is listed in MOCK_LACKS with what nvml.h says.
"""
import ctypes
import json
import os
import sys

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer
from testlib import FAKES

sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake)

pytestmark = [pytest.mark.peers,
              pytest.mark.skipif(os.geteuid() != 0, reason="the fake allows MIG calls to root only, as NVML does")]

# go-nvml mock -> the fake node with the same GPUs (catalog keys).
MOCKS = {"dgxa100": ("A100-SXM4-40GB", 8), "dgxh100": ("H100-80GB", 8), "dgxh200": ("H200-141GB", 8),
         "dgxb200": ("B200", 8)}

GPU = [{"call": "DeviceGetHandleByIndex", "args": [0], "as": "gpu"}]
ENABLE = [{"call": "DeviceSetMigMode", "args": ["@gpu", "DEVICE_MIG_ENABLE"]}]


def _profile(enum, label):
    return [{"call": "DeviceGetGpuInstanceProfileInfo", "args": ["@gpu", enum], "as": label},
            {"call": "DeviceGetGpuInstancePossiblePlacements", "args": ["@gpu", "@" + label], "as": label + "_at"}]


def _create_at(label, index, name):
    return [{"call": "DeviceCreateGpuInstanceWithPlacement",
             "args": ["@gpu", "@" + label, {"from": "@%s_at" % label, "index": index}], "as": name}]


def _full_ci(gi, enum, name):
    return [{"call": "GpuInstanceGetComputeInstanceProfileInfo",
             "args": ["@" + gi, enum, "COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED"], "as": name + "_profile"},
            {"call": "GpuInstanceCreateComputeInstance", "args": ["@" + gi, "@%s_profile" % name], "as": name}]


CASES = {
    "mode change": GPU + [
        {"call": "DeviceGetMigMode", "args": ["@gpu"]}] + ENABLE + [
        {"call": "DeviceGetMigMode", "args": ["@gpu"]},
        {"call": "DeviceSetMigMode", "args": ["@gpu", "DEVICE_MIG_DISABLE"]},
        {"call": "DeviceGetMigMode", "args": ["@gpu"]}],
    "queries with MIG off": GPU + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3") + [
        {"call": "DeviceCreateGpuInstance", "args": ["@gpu", "@p3"]}],
    "create without placement": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3") + [
        {"call": "DeviceCreateGpuInstance", "args": ["@gpu", "@p3"]},
        {"call": "DeviceCreateGpuInstance", "args": ["@gpu", "@p3"]},
        {"call": "DeviceCreateGpuInstance", "args": ["@gpu", "@p3"]}],
    "create with placement": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3")
    + _create_at("p3", 1, "upper") + _create_at("p3", 0, "lower") + [
        {"call": "GpuInstanceGetInfo", "args": ["@upper"]},
        {"call": "GpuInstanceGetInfo", "args": ["@lower"]}],
    "overlap": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3")
    + _profile("GPU_INSTANCE_PROFILE_2_SLICE", "p2") + _create_at("p3", 1, "upper") + _create_at("p2", 2, "over"),
    "destroy in use": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_7_SLICE", "p7") + _create_at("p7", 0, "gi")
    + _full_ci("gi", "COMPUTE_INSTANCE_PROFILE_7_SLICE", "ci") + [
        {"call": "GpuInstanceDestroy", "args": ["@gi"]}],
    "destroy order": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_7_SLICE", "p7") + _create_at("p7", 0, "gi")
    + _full_ci("gi", "COMPUTE_INSTANCE_PROFILE_7_SLICE", "ci") + [
        {"call": "ComputeInstanceDestroy", "args": ["@ci"]},
        {"call": "GpuInstanceDestroy", "args": ["@gi"]},
        {"call": "DeviceGetGpuInstances", "args": ["@gpu", "@p7"]}],
    "leave MIG with an instance": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3")
    + _create_at("p3", 0, "gi") + [
        {"call": "DeviceSetMigMode", "args": ["@gpu", "DEVICE_MIG_DISABLE"]}],
    "listing": GPU + ENABLE + _profile("GPU_INSTANCE_PROFILE_3_SLICE", "p3")
    + _create_at("p3", 0, "lower") + _create_at("p3", 1, "upper")
    + _full_ci("lower", "COMPUTE_INSTANCE_PROFILE_3_SLICE", "ci") + [
        {"call": "DeviceGetGpuInstances", "args": ["@gpu", "@p3"]},
        {"call": "GpuInstanceGetComputeInstances", "args": ["@lower", "@ci_profile"]},
        {"call": "GpuInstanceGetComputeInstances", "args": ["@upper", "@ci_profile"]},
        {"call": "DeviceGetMaxMigDeviceCount", "args": ["@gpu"]},
        {"call": "DeviceGetMigDeviceHandleByIndex", "args": ["@gpu", 0], "as": "mig0"},
        {"call": "DeviceGetComputeMode", "args": ["@mig0"]},
        {"call": "DeviceGetComputeMode", "args": ["@gpu"]}],
}

# (case, step index) -> the nvml.h line by which the driver refuses what the mock accepts.
STRICTER = {
    ("queries with MIG off", 3): "nvmlDeviceCreateGpuInstance: NVML_ERROR_NOT_SUPPORTED \"If device doesn't have "
                                 "MIG mode enabled or in vGPU guest\"",
    ("create without placement", 6): "nvmlDeviceCreateGpuInstance: NVML_ERROR_INSUFFICIENT_RESOURCES \"If the "
                                     "requested GPU instance could not be created\" (the profile's instanceCount, 2)",
    ("overlap", 7): "nvmlDeviceGetGpuInstancePossiblePlacements_v2: \"Creation of new GPU instance will fail if "
                    "there is overlap with the already occupied memory slices\"",
    ("destroy in use", 7): "nvmlGpuInstanceDestroy: NVML_ERROR_IN_USE \"If the GPU instance is in use. This error "
                           "would be returned if processes (e.g. CUDA application) or compute instances are active\"",
}
# (case, step index) -> the value (not the return code) where the fake is the stricter one.
STRICTER_VALUES = {
    ("leave MIG with an instance", 5): "nvmlDeviceSetMigMode: \"if device unbind fails because the device isn't "
                                       "idle, NVML_ERROR_IN_USE would be returned\" (activationStatus)",
}
# (case, step index) -> what nvml.h says of a call go-nvml's mock leaves unimplemented.
MOCK_LACKS = {
    ("listing", 11): "nvmlDeviceGetMaxMigDeviceCount: \"Returns zero if MIG is not supported or enabled\" (the fake: "
                     "the compute slices with MIG on, 0 with it off)",
    ("listing", 12): "nvmlDeviceGetMigDeviceHandleByIndex: NVML_ERROR_NOT_FOUND \"if no valid MIG device was found at "
                     "index\" (the fake: one MIG device per compute instance)",
    ("listing", 13): "nvmlDeviceGetComputeMode on a MIG device handle (the mock gave none: skipped)",
    ("listing", 14): "nvmlDeviceGetComputeMode on the parent of a MIG-enabled GPU: \"If MIG is enabled on a GPU, "
                     "device must be MIG device handle\" (the fake refuses it with NOT_SUPPORTED, a code UNVERIFIED)",
}


# --- the same scripts on the fake ------------------------------------------------------------

_ERROR_NAMES = dict((getattr(fake_pynvml, name), name[len("NVML_"):]) for name in dir(fake_pynvml)
                    if name.startswith("NVML_ERROR_"))
_ERROR_NAMES[fake_pynvml.NVML_SUCCESS] = "SUCCESS"


def _enum(value):
    return value if isinstance(value, int) else getattr(fake_pynvml, "NVML_" + value)


def _placements(nvml, device, info):
    buf = (nvml.c_nvmlGpuInstancePlacement_t * 16)()
    count = ctypes.c_uint(len(buf))
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(device, info.id, buf, ctypes.byref(count))
    return [(buf[i].start, buf[i].size) for i in range(count.value)]


def _count(listing, handle, profile_id, array_type):
    buf = (array_type * 16)()
    count = ctypes.c_uint(len(buf))
    listing(handle, profile_id, buf, ctypes.byref(count))
    return count.value


def _fake_call(nvml, call, args):
    """(what "as" saves, what is printed) of one call on the fake; NVMLError propagates."""
    if call == "DeviceGetHandleByIndex":
        return nvml.nvmlDeviceGetHandleByIndex(args[0]), None
    if call == "DeviceGetMigMode":
        return None, list(nvml.nvmlDeviceGetMigMode(args[0]))
    if call == "DeviceSetMigMode":
        return None, _ERROR_NAMES[nvml.nvmlDeviceSetMigMode(args[0], _enum(args[1]))]
    if call == "DeviceGetMaxMigDeviceCount":
        return None, nvml.nvmlDeviceGetMaxMigDeviceCount(args[0])
    if call == "DeviceGetComputeMode":
        return None, nvml.nvmlDeviceGetComputeMode(args[0])
    if call == "DeviceGetGpuInstanceProfileInfo":
        info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(args[0], _enum(args[1]))
        return info, {"sliceCount": info.sliceCount, "instanceCount": info.instanceCount}
    if call == "DeviceGetGpuInstancePossiblePlacements":
        found = _placements(nvml, args[0], args[1])
        return found, [list(p) for p in found]
    if call == "DeviceCreateGpuInstance":
        return nvml.nvmlDeviceCreateGpuInstance(args[0], args[1].id), None
    if call == "DeviceCreateGpuInstanceWithPlacement":
        start, size = args[2]
        placement = nvml.c_nvmlGpuInstancePlacement_t(start, size)
        return nvml.nvmlDeviceCreateGpuInstanceWithPlacement(args[0], args[1].id, ctypes.byref(placement)), None
    if call == "DeviceGetGpuInstances":
        return None, _count(nvml.nvmlDeviceGetGpuInstances, args[0], args[1].id, nvml.c_nvmlGpuInstance_t)
    if call == "DeviceGetMigDeviceHandleByIndex":
        return nvml.nvmlDeviceGetMigDeviceHandleByIndex(args[0], args[1]), None
    if call == "GpuInstanceGetInfo":
        info = nvml.nvmlGpuInstanceGetInfo(args[0])
        return None, {"start": info.placement.start, "size": info.placement.size}
    if call == "GpuInstanceGetComputeInstanceProfileInfo":
        info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(args[0], _enum(args[1]), _enum(args[2]))
        return info, {"sliceCount": info.sliceCount}
    if call == "GpuInstanceCreateComputeInstance":
        return nvml.nvmlGpuInstanceCreateComputeInstance(args[0], args[1].id), None
    if call == "GpuInstanceGetComputeInstances":
        return None, _count(nvml.nvmlGpuInstanceGetComputeInstances, args[0], args[1].id, nvml.c_nvmlComputeInstance_t)
    if call == "GpuInstanceDestroy":
        return None, nvml.nvmlGpuInstanceDestroy(args[0]) and None
    if call == "ComputeInstanceDestroy":
        return None, nvml.nvmlComputeInstanceDestroy(args[0]) and None
    raise AssertionError("the fake runner does not know %s" % call)


class _Unsaved(Exception):
    """A step needs what an earlier, failed step would have saved (the peer says SKIPPED)."""


def _resolve(saved, arg):
    label = arg["from"] if isinstance(arg, dict) else arg
    if isinstance(label, str) and label.startswith("@"):
        if label[1:] not in saved:
            raise _Unsaved(label)
        value = saved[label[1:]]
        return value[arg["index"]] if isinstance(arg, dict) else value
    return arg


def run_on_fake(steps, model, count, tmp_path, monkeypatch):
    path = str(tmp_path / "nvml.json")
    fake_pynvml.write_new_state(path, gpus=[(model, count)])
    monkeypatch.setenv(fake_pynvml.STATE_ENV, path)
    monkeypatch.setattr(fake_pynvml, "_init_count", 0)
    fake_pynvml.nvmlInit()
    saved, results = {}, []
    try:
        for step in steps:
            try:
                keep, value = _fake_call(fake_pynvml, step["call"], [_resolve(saved, a) for a in step.get("args", [])])
                ret = "SUCCESS"
            except fake_pynvml.NVMLError as exc:
                keep, value, ret = None, None, _ERROR_NAMES[exc.value]
            except _Unsaved as exc:
                keep, value, ret = None, str(exc), "SKIPPED"
            results.append({"call": step["call"], "return": ret, "value": value})
            if step.get("as") and ret == "SUCCESS":
                saved[step["as"]] = keep
    finally:
        fake_pynvml.nvmlShutdown()
    return results


def _compare(case, fake_steps, mock_steps):
    """Rows (case, step, call, fake, mock, verdict); raises on a difference nothing explains."""
    rows = []
    for number, (ours, theirs) in enumerate(zip(fake_steps, mock_steps)):
        key = (case, number)
        if theirs["return"] in ("MOCK_UNIMPLEMENTED", "SKIPPED") and ours["return"] != theirs["return"]:
            assert key in MOCK_LACKS, "%s step %d: the mock lacks %s; list it in MOCK_LACKS" % (case, number, ours["call"])
            verdict = "mock lacks it"
        elif ours["return"] == theirs["return"]:
            verdict = "agree"
            if (ours["call"] == "DeviceSetMigMode" and ours["value"] != theirs["value"]):
                assert key in STRICTER_VALUES and theirs["value"] == "SUCCESS", (case, number, ours, theirs)
                verdict = "fake stricter (activation status)"
        else:
            assert key in STRICTER, "%s step %d %s: fake %s, mock %s" % (case, number, ours["call"], ours["return"],
                                                                          theirs["return"])
            assert theirs["return"] == "SUCCESS" and ours["return"].startswith("ERROR_"), (case, number, ours, theirs)
            verdict = "fake stricter"
        rows.append((case, number, ours["call"], ours["return"], theirs["return"], verdict))
    assert len(fake_steps) == len(mock_steps)
    return rows


@pytest.mark.parametrize("mock", sorted(MOCKS))
def test_fake_and_mock_agree_or_the_fake_is_stricter(mock, tmp_path, monkeypatch):
    rows = []
    for case, steps in CASES.items():
        script = tmp_path / ("%s.json" % case.replace(" ", "-"))
        script.write_text(json.dumps(steps))
        peer = run_peer("nvml-script", script, "--mock", mock)
        assert peer.error is None, peer
        rows.extend(_compare(case, run_on_fake(steps, MOCKS[mock][0], MOCKS[mock][1], tmp_path, monkeypatch),
                             peer.data["steps"]))
    # Every listed exception was met: a list entry that no longer happens is stale.
    met = set((case, number) for case, number, _call, _ours, _theirs, verdict in rows if verdict != "agree")
    assert met == set(STRICTER) | set(STRICTER_VALUES) | set(MOCK_LACKS)
    print("\n".join("%-28s %2d %-40s fake %-30s mock %-20s %s" % row for row in rows))
