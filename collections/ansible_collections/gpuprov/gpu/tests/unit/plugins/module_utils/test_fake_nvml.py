# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake pynvml and nvidia-smi behave like the real ones where gpuprov relies on it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import subprocess
import sys

import pytest


def _start(fake_node, gpus, mig=()):
    """Write a node with ``gpus`` (MIG on for the indices in ``mig``) and initialise NVML."""
    pynvml = fake_node.pynvml
    state = fake_node.setup(gpus)
    for index in mig:
        pynvml.set_mig_mode(state, index, True)
    fake_node.save(state)
    pynvml.nvmlInit()
    return pynvml, state


def _place(pynvml, handle, profile_id, start, size):
    return pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        handle, profile_id, ctypes.byref(pynvml.c_nvmlGpuInstancePlacement_t(start, size)))


def test_error_classes_mirror_nvidia_ml_py(fake_node):
    pynvml = fake_node.pynvml
    expected = {"NVMLError_Uninitialized": 1, "NVMLError_InvalidArgument": 2, "NVMLError_NotSupported": 3,
                "NVMLError_NoPermission": 4, "NVMLError_NotFound": 6, "NVMLError_DriverNotLoaded": 9,
                "NVMLError_LibraryNotFound": 12, "NVMLError_GpuIsLost": 15, "NVMLError_ResetRequired": 16,
                "NVMLError_InUse": 19, "NVMLError_InsufficientResources": 23}
    for name, value in expected.items():
        cls = getattr(pynvml, name)
        assert issubclass(cls, pynvml.NVMLError) and cls().value == value
        assert pynvml.NVMLError(value).__class__ is cls


def test_uninitialised_and_no_driver(fake_node):
    pynvml = fake_node.pynvml
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()  # no state file: no driver
    fake_node.setup([("T4", 1)])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_overlap_and_exhausted_count_are_insufficient_resources(fake_node):
    nvml, _state = _start(fake_node, [("H100-80GB", 1)], mig=[0])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, nvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    assert (info.id, info.sliceCount, info.instanceCount, info.name) == (9, 3, 2, "MIG 3g.40gb")  # str, as nvidia-ml-py decodes char arrays
    placements = (nvml.c_nvmlGpuInstancePlacement_t * info.instanceCount)()
    count = ctypes.c_uint(info.instanceCount)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id, placements, ctypes.byref(count))
    assert [(placements[i].start, placements[i].size) for i in range(count.value)] == [(0, 4), (4, 4)]

    _place(nvml, handle, 9, 4, 4)
    with pytest.raises(nvml.NVMLError_InsufficientResources):
        _place(nvml, handle, 14, 4, 2)  # a 2g over the 3g
    _place(nvml, handle, 9, 0, 4)
    with pytest.raises(nvml.NVMLError_InsufficientResources):
        nvml.nvmlDeviceCreateGpuInstance(handle, 19)  # nothing left
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        _place(nvml, handle, 14, 1, 2)  # not a valid start for 2g
    assert [gi["placement"]["start"] for gi in fake_node.load()["gpus"][0]["gpu_instances"]] == [4, 0]


def test_destroy_with_compute_instance_or_process_is_in_use(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1)], mig=[0])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    gi = _place(nvml, handle, 0, 0, 8)
    ci_info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
        gi, nvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    ci = nvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)
    with pytest.raises(nvml.NVMLError_InUse):
        nvml.nvmlGpuInstanceDestroy(gi)
    gi_id = nvml.nvmlGpuInstanceGetInfo(gi).id
    with fake_node.edit() as live:
        nvml.add_process(live, 0, 321, 50, gpu_instance_id=gi_id)
    with pytest.raises(nvml.NVMLError_InUse):
        nvml.nvmlComputeInstanceDestroy(ci)
    # The process is reported on the MIG device and, in aggregate, on the GPU.
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    assert [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(mig)] == [321]
    assert [p.gpuInstanceId for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)] == [gi_id]
    with fake_node.edit() as live:
        live["gpus"][0]["processes"] = []
    nvml.nvmlComputeInstanceDestroy(ci)
    nvml.nvmlGpuInstanceDestroy(gi)
    assert fake_node.load()["gpus"][0]["gpu_instances"] == []


def test_mig_calls_on_non_mig_gpu_and_disabled_mig_are_not_supported(fake_node):
    nvml, _state = _start(fake_node, [("T4", 1), ("A100-80GB", 1)])
    t4, a100 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    # Profile info with MIG off answers on current drivers (test_fake_nvml_rules.py).
    for call in (lambda: nvml.nvmlDeviceGetMigMode(t4), lambda: nvml.nvmlDeviceSetMigMode(t4, 1),
                 lambda: nvml.nvmlDeviceGetGpuInstanceProfileInfo(t4, 0),
                 lambda: nvml.nvmlDeviceCreateGpuInstance(a100, 19)):
        with pytest.raises(nvml.NVMLError_NotSupported):
            call()
    assert nvml.nvmlDeviceGetMigMode(a100) == [0, 0]


def test_mig_mode_ampere_pending_hopper_immediate_and_reboot(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1), ("H100-80GB", 1)])
    fake_node.hold()
    a100, h100 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    # Held by nvidia-persistenced, the driver cannot reset the A100 itself: IN_USE, pending.
    assert nvml.nvmlDeviceSetMigMode(a100, nvml.NVML_DEVICE_MIG_ENABLE) == nvml.NVML_ERROR_IN_USE
    assert nvml.nvmlDeviceSetMigMode(h100, nvml.NVML_DEVICE_MIG_ENABLE) == nvml.NVML_SUCCESS
    assert nvml.nvmlDeviceGetMigMode(a100) == [0, 1]
    assert nvml.nvmlDeviceGetMigMode(h100) == [1, 1]
    # nvidia-smi -r has the running daemon let go of the GPU (see gpu_holders): the reset works.
    with fake_node.edit() as live:
        nvml.reset_gpu(live, 0)
    assert nvml.nvmlDeviceGetMigMode(a100) == [1, 1]
    with fake_node.edit() as live:
        nvml.reboot(live)
    assert nvml.nvmlDeviceGetMigMode(a100) == [1, 1]   # Ampere keeps MIG mode (InfoROM)
    assert nvml.nvmlDeviceGetMigMode(h100) == [0, 0]   # Hopper loses it


def test_set_mig_mode_with_processes_reports_in_use(fake_node):
    nvml, state = _start(fake_node, [("H100-80GB", 1)])
    nvml.add_process(state, 0, 11, 10)
    fake_node.save(state)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceSetMigMode(handle, 1) == nvml.NVML_ERROR_IN_USE
    assert nvml.nvmlDeviceGetMigMode(handle) == [0, 1]


def test_compute_mode_refused_on_mig_gpu(fake_node):
    nvml, _state = _start(fake_node, [("H100-80GB", 2)], mig=[1])
    plain, mig = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.nvmlDeviceSetComputeMode(plain, nvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
    assert nvml.nvmlDeviceGetComputeMode(plain) == 3
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceSetComputeMode(mig, nvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)


def test_lost_gpu(fake_node):
    nvml, state = _start(fake_node, [("H100-80GB", 1)])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    state["gpus"][0]["lost"] = True
    fake_node.save(state)
    with pytest.raises(nvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetName(handle)
    with pytest.raises(nvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(0)


def test_pci_info_and_memory(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    pci = nvml.nvmlDeviceGetPciInfo(handle)
    assert pci.pciDeviceId == 0x20B210DE and pci.busId == "00000000:07:00.0"
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    assert memory.total == 81920 * 1024 * 1024 and memory.used == 0


def _smi(*args):
    smi = os.path.join(os.path.dirname(os.path.dirname(sys.modules["pynvml"].__file__)), "bin", "nvidia-smi")
    proc = subprocess.run([smi] + list(args), capture_output=True, text=True, env=dict(os.environ), check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_nvidia_smi_reset_refuses_busy_gpu_and_applies_pending_mode(fake_node):
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.pynvml.add_process(state, 0, 999, 10)
    fake_node.save(state)
    rc, out, err = _smi("-r", "-i", "0")
    assert rc != 0 and "is currently in use by another process" in err
    with fake_node.edit() as live:
        live["gpus"][0]["processes"] = []
    rc, out, err = _smi("-r", "-i", "00000000:07:00.0")
    assert rc == 0 and "GPU 00000000:07:00.0 was successfully reset." in out
    assert fake_node.load()["gpus"][0]["mig_current"] is True
    assert [c["argv"][1:] for c in fake_node.calls()] == [["-r", "-i", "0"], ["-r", "-i", "00000000:07:00.0"]]


def test_nvidia_smi_query_and_compute_mode(fake_node):
    state = fake_node.setup([("H100-80GB", 1), ("T4", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.save(state)
    rc, out, _err = _smi("-i", "1", "-c", "EXCLUSIVE_PROCESS")
    assert rc == 0
    rc, _out, err = _smi("-i", "0", "-c", "3")
    assert "not supported on a MIG-enabled device" in err
    rc, out, _err = _smi("--query-gpu=index,name,memory.total,mig.mode.current,compute_mode",
                         "--format=csv,noheader,nounits")
    assert out.splitlines() == ["0, NVIDIA H100 80GB HBM3, 81559, Enabled, Default",
                                "1, Tesla T4, 15360, [N/A], Exclusive_Process"]


def test_idle_ampere_applies_mig_mode_at_once(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    a100 = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceSetMigMode(a100, nvml.NVML_DEVICE_MIG_ENABLE) == nvml.NVML_SUCCESS
    assert nvml.nvmlDeviceGetMigMode(a100) == [1, 1]


def test_reset_refused_while_another_process_has_nvml_open(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    nvml.nvmlShutdown()
    code = "import pynvml, sys; pynvml.nvmlInit(); sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(nvml.__file__))
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline() == b"up\n"
        with fake_node.edit() as live:
            with pytest.raises(nvml.FakeStateError, match="NVML client pid %d" % child.pid):
                nvml.reset_gpu(live, 0)
    finally:
        child.stdin.close()
        child.wait()
    with fake_node.edit() as live:
        nvml.reset_gpu(live, 0)  # the client is gone


def test_compute_mode_is_lost_with_the_last_client_unless_persistent(fake_node):
    nvml, _state = _start(fake_node, [("H100-80GB", 2)])
    nvml.nvmlDeviceSetPersistenceMode(nvml.nvmlDeviceGetHandleByIndex(1), nvml.NVML_FEATURE_ENABLED)
    for index in (0, 1):
        nvml.nvmlDeviceSetComputeMode(nvml.nvmlDeviceGetHandleByIndex(index), nvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
    nvml.nvmlShutdown()
    modes = [g["compute_mode"] for g in fake_node.load()["gpus"]]
    assert modes == [nvml.NVML_COMPUTEMODE_DEFAULT, nvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS]
