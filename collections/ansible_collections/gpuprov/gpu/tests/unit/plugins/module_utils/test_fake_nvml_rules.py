# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake pynvml, nvidia-smi and MPS daemon against their primary sources, both directions:
what the real driver refuses, the fake refuses; what the real driver allows, the fake allows.

Sources: nvml.h of NVIDIA/go-nvml v0.13.4-1 (pkg/nvml/nvml.h), nvidia-smi(1)
(docs.nvidia.com/deploy/nvidia-smi, "-r, --gpu-reset"), nvidia-cuda-mps-control(1), NVIDIA/
mig-parted v0.15.0 pkg/mig/discovery/discovery.go (the A30 profile counts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import json
import os
import subprocess
import sys

import pytest


def _start(fake_node, gpus, mig=(), **kwargs):
    pynvml = fake_node.pynvml
    state = fake_node.setup(gpus, **kwargs)
    for index in mig:
        pynvml.set_mig_mode(state, index, True)
    fake_node.save(state)
    pynvml.nvmlInit()
    return pynvml, state


def _smi(*args):
    smi = os.path.join(os.path.dirname(os.path.dirname(sys.modules["pynvml"].__file__)), "bin", "nvidia-smi")
    proc = subprocess.run([smi] + list(args), capture_output=True, text=True, env=dict(os.environ), check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _units(fake_node, **units):
    """Put units into the fake systemctl's state ({name: active})."""
    path = os.path.join(os.path.dirname(fake_node.state_path), "systemd-state.json")
    fake_node._monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", path)
    data = {"units": {}}
    if os.path.exists(path):
        with open(path) as handle:
            data = json.load(handle)
    for name, active in units.items():
        data["units"][name.replace("_", "-") + ".service"] = {"active": active, "enabled": True}
    with open(path, "w") as handle:
        json.dump(data, handle)


# --- nvml.h, MIG queries with MIG mode off -------------------------------------------------------

def test_max_mig_device_count_is_zero_with_mig_off(fake_node):
    # nvml.h nvmlDeviceGetMaxMigDeviceCount: "Returns zero if MIG is not supported or enabled."
    nvml, _state = _start(fake_node, [("A100-80GB", 1), ("T4", 1)])
    a100, t4 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(a100) == 0
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(t4) == 0
    with fake_node.edit() as live:
        nvml.set_mig_mode(live, 0, True)
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(a100) == 7


def test_possible_placements_answer_whether_or_not_mig_is_enabled(fake_node):
    # nvml.h nvmlDeviceGetGpuInstancePossiblePlacements_v2: "This API only returns all the
    # possible placements for the given profile regardless of whether MIG is enabled or not."
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    placements = (nvml.c_nvmlGpuInstancePlacement_t * 8)()
    count = ctypes.c_uint(8)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, 9, placements, ctypes.byref(count))
    assert [(placements[i].start, placements[i].size) for i in range(count.value)] == [(0, 4), (4, 4)]


def test_profile_info_with_mig_off_answers_on_current_drivers_and_an_option_refuses_it(fake_node):
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, nvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    assert (info.id, info.sliceCount) == (9, 3)
    # Older drivers answer NOT_SUPPORTED while MIG mode is off (nvml.h ...ProfileInfoV: "If
    # device doesn't have MIG mode enabled"): the state option profile_info_needs_mig.
    with fake_node.edit() as live:
        live["profile_info_needs_mig"] = True
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, nvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    # Creating and listing instances still need MIG mode (nvml.h: "doesn't have MIG mode enabled").
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceCreateGpuInstance(handle, 9)


def test_set_mig_mode_reports_a_busy_gpu_in_the_activation_status_not_the_return(fake_node):
    # nvml.h nvmlDeviceSetMigMode returns SUCCESS, UNINITIALIZED, INVALID_ARGUMENT,
    # NO_PERMISSION or NOT_SUPPORTED; "if device unbind fails because the device isn't idle,
    # NVML_ERROR_IN_USE would be returned" in activationStatus. GPU instances keep it busy.
    nvml, state = _start(fake_node, [("H100-80GB", 1)], mig=[0])
    with fake_node.edit() as live:
        nvml.create_instances(live, 0, [("3g.40gb", 0)])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceSetMigMode(handle, nvml.NVML_DEVICE_MIG_DISABLE) == nvml.NVML_ERROR_IN_USE
    assert nvml.nvmlDeviceGetMigMode(handle) == [1, 0]
    assert len(fake_node.load()["gpus"][0]["gpu_instances"]) == 1


# --- compute mode on MIG-enabled GPUs -----------------------------------------------------------

def test_compute_mode_of_a_mig_gpu_is_read_on_its_mig_devices(fake_node):
    # nvml.h nvmlDeviceGetComputeMode: "If MIG is enabled on a GPU, device must be MIG device
    # handle." The parent handle is refused (NOT_SUPPORTED: the code is UNVERIFIED).
    nvml, _state = _start(fake_node, [("A100-80GB", 1)], mig=[0])
    with fake_node.edit() as live:
        nvml.create_instances(live, 0, [("3g.40gb", 0), ("3g.40gb", 4)])
    parent = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetComputeMode(parent)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)
    assert nvml.nvmlDeviceGetComputeMode(mig) == nvml.NVML_COMPUTEMODE_DEFAULT
    nvml.nvmlDeviceSetComputeMode(mig, nvml.NVML_COMPUTEMODE_PROHIBITED)
    assert nvml.nvmlDeviceGetComputeMode(mig) == nvml.NVML_COMPUTEMODE_PROHIBITED
    other = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
    assert nvml.nvmlDeviceGetComputeMode(other) == nvml.NVML_COMPUTEMODE_DEFAULT


# --- A30: the driver's profile counts -----------------------------------------------------------

def test_a30_profile_info_reports_the_drivers_wrong_instance_counts(fake_node):
    # mig-parted v0.15.0 pkg/mig/discovery: "NVML bug where GetGpuInstanceProfileInfo returns
    # incorrect InstanceCount values" on A30; the driver still creates only the true counts.
    nvml, _state = _start(fake_node, [("A30", 1)], mig=[0])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    reported = dict((nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum).name,
                     nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum).instanceCount)
                    for enum in (0, 7, 1, 8, 3))
    true_counts = {"MIG 1g.6gb": 4, "MIG 1g.6gb+me": 1, "MIG 2g.12gb": 2, "MIG 2g.12gb+me": 1, "MIG 4g.24gb": 1}
    assert reported != true_counts and set(reported) == set(true_counts)
    me = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, nvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)
    assert me.instanceCount > 1
    first = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        handle, me.id, ctypes.byref(nvml.c_nvmlGpuInstancePlacement_t(0, 1)))
    assert first
    with pytest.raises(nvml.NVMLError_InsufficientResources):
        nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, me.id, ctypes.byref(nvml.c_nvmlGpuInstancePlacement_t(1, 1)))


# --- NVLink, NVSwitch, Fabric Manager -----------------------------------------------------------

def test_nvswitch_system_reports_switch_links(fake_node):
    nvml, state = _start(fake_node, [("A100-80GB", 8)], nvlink="nvswitch")
    gpu_buses = set(g["pci_bus_id"] for g in state["gpus"])
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    remotes = set()
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            active = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError_NotSupported:
            continue
        assert active == nvml.NVML_FEATURE_ENABLED
        assert nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link) == nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        remotes.add(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
    assert len(remotes) == 6 and not remotes & gpu_buses  # A100 baseboard: six NVSwitches
    # Without NVLink at all the first link is not supported either.
    nvml2, _state = _start(fake_node, [("A30", 1)])
    with pytest.raises(nvml2.NVMLError_NotSupported):
        nvml2.nvmlDeviceGetNvLinkState(nvml2.nvmlDeviceGetHandleByIndex(0), 0)


def test_fabric_info_on_hopper_follows_fabric_manager(fake_node):
    nvml, _state = _start(fake_node, [("H100-80GB", 2)], nvlink="nvswitch")
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = nvml.c_nvmlGpuFabricInfoV_t()
    _units(fake_node, nvidia_fabricmanager=False)
    nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    assert info.state == nvml.NVML_GPU_FABRIC_STATE_NOT_STARTED
    _units(fake_node, nvidia_fabricmanager=True)
    nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    assert info.state == nvml.NVML_GPU_FABRIC_STATE_COMPLETED and info.status == nvml.NVML_SUCCESS
    # nvml.h: "For Hopper or newer fully supported devices."
    nvml2, _state = _start(fake_node, [("A100-80GB", 2)], nvlink="nvswitch")
    with pytest.raises(nvml2.NVMLError_NotSupported):
        nvml2.nvmlDeviceGetGpuFabricInfoV(nvml2.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info))


def test_ampere_nvswitch_reset_without_fabric_manager_needs_every_nvlink_peer(fake_node):
    # nvidia-smi(1) -r: "On Ampere NVSwitch systems, Fabric Manager is required to facilitate
    # reset ... If Fabric Manager is not running ... any GPUs with NVLink connections to a GPU
    # being reset must also be reset in the same command."
    state = fake_node.setup([("A100-80GB", 4)], nvlink="nvswitch")
    buses = [g["pci_bus_id"] for g in state["gpus"]]
    _units(fake_node, nvidia_fabricmanager=False)
    rc, _out, err = _smi("-r", "-i", buses[0])
    assert rc != 0
    assert "must be reset in the same command" in err and all(b in err for b in buses[1:])
    rc, out, _err = _smi("-r", "-i", ",".join(buses))
    assert rc == 0 and out.count("was successfully reset") == 4
    _units(fake_node, nvidia_fabricmanager=True)
    rc, out, _err = _smi("-r", "-i", buses[2])
    assert rc == 0 and "GPU %s was successfully reset." % buses[2] in out


def test_hopper_nvswitch_resets_one_gpu_without_fabric_manager(fake_node):
    # nvidia-smi(1) -r: "On Hopper and later NVSwitch systems, the dependency on Fabric Manager
    # to facilitate reset is removed."
    state = fake_node.setup([("H100-80GB", 4)], nvlink="nvswitch")
    _units(fake_node, nvidia_fabricmanager=False)
    rc, out, _err = _smi("-r", "-i", state["gpus"][1]["pci_bus_id"])
    assert rc == 0 and out.count("was successfully reset") == 1


# --- what holds a GPU against a reset -----------------------------------------------------------

def test_nvidia_persistenced_does_not_block_nvidia_smi_reset(fake_node):
    # nvidia-smi -r has nvidia-persistenced let go of the GPUs it resets, through the daemon's
    # socket (/run/nvidia-persistenced/socket): NVIDIA/gpu-operator#118 (2021-04-06, reset
    # works once the socket is visible), NVIDIA/NVSentinel#1243, mig-parted v0.13.1
    # deployments/container/Dockerfile (/var/run linked to /run for this).
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold()
    rc, out, err = _smi("-r", "-i", "0")
    assert rc == 0, err
    assert fake_node.load()["gpus"][0]["mig_current"] is True


def test_nvidia_persistenced_blocks_the_reset_where_its_socket_is_out_of_reach(fake_node):
    # gpu-operator#118: in a container without /run/nvidia-persistenced the reset fails.
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold(socket=False)
    rc, _out, err = _smi("-r", "-i", "0")
    assert rc != 0 and "nvidia-persistenced" in err


def test_nvidia_persistenced_keeps_the_drivers_own_ampere_reset_pending(fake_node):
    # gpu-operator#118: `nvidia-smi -mig` left the change pending ("In use by another client")
    # while nvidia-persistenced held the GPU; NVML itself does not ask the daemon.
    nvml, _state = _start(fake_node, [("A100-80GB", 1)])
    fake_node.hold()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceSetMigMode(handle, nvml.NVML_DEVICE_MIG_ENABLE) == nvml.NVML_ERROR_IN_USE
    assert nvml.nvmlDeviceGetMigMode(handle) == [0, 1]


def test_dcgm_blocks_nvidia_smi_reset(fake_node):
    # nvidia-smi(1) -r: "There can't be any applications using these devices (e.g. ... monitoring
    # application like other instance of nvidia-smi)"; DGX A100 User Guide: stop nvsm and dcgm.
    state = fake_node.setup([("A100-80GB", 1)])
    state["gpus"][0]["mig_pending"] = True
    fake_node.save(state)
    fake_node.hold(unit="nvidia-dcgm.service", name="nvidia-dcgm", persistence=False)
    rc, _out, err = _smi("-r", "-i", "0")
    assert rc != 0 and "nvidia-dcgm" in err


# --- the MPS control daemon: one server at a time -----------------------------------------------

def _mps(env, *commands):
    binary = os.path.join(os.path.dirname(os.path.dirname(sys.modules["pynvml"].__file__)), "bin",
                          "nvidia-cuda-mps-control")
    return subprocess.run([binary] + ([] if commands else ["-d"]), input="\n".join(commands) + "\n",
                          capture_output=True, text=True, env=env, check=False)


def test_mps_daemon_serves_one_user_at_a_time(fake_node, tmp_path):
    # nvidia-cuda-mps-control(1): "If there's an MPS server already running, but with a different
    # user id than that of the client process, the control daemon requests the existing server
    # to shutdown as soon as all its clients are done. Once the existing server has terminated,
    # the control daemon launches a new server with the user id same as that of the queued
    # client process."
    fake_node.setup([("H100-80GB", 1)])
    env = dict(os.environ, GPUPROV_FAKE_MPS_STATE=str(tmp_path / "mps.json"),
               CUDA_MPS_PIPE_DIRECTORY=str(tmp_path / "pipe"), CUDA_MPS_LOG_DIRECTORY=str(tmp_path / "log"))
    assert _mps(env).returncode == 0
    assert _mps(env, "start_server -uid 1000").returncode == 0
    first = _mps(env, "get_server_list").stdout.split()
    assert len(first) == 1
    # A client of user 1000 is connected (test hook), then user 2000 asks for a server.
    subprocess.run([os.path.join(os.path.dirname(os.path.dirname(sys.modules["pynvml"].__file__)), "bin",
                                 "nvidia-cuda-mps-control"), "--fake-client", first[0], "+1"], env=env, check=True)
    assert _mps(env, "start_server -uid 2000").returncode == 0
    assert _mps(env, "get_server_list").stdout.split() == first  # still user 1000's, draining
    subprocess.run([os.path.join(os.path.dirname(os.path.dirname(sys.modules["pynvml"].__file__)), "bin",
                                 "nvidia-cuda-mps-control"), "--fake-client", first[0], "-1"], env=env, check=True)
    second = _mps(env, "get_server_list").stdout.split()
    assert len(second) == 1 and second != first  # user 2000's server runs now
