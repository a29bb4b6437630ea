# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A thin layer over nvidia-ml-py (``pynvml``) for the node modules.

Everything that talks to NVML goes through :class:`Nvml`. It turns ``NVMLError_*`` into
:class:`NvmlError`, which names the GPU and the operation and says what to do, and it
reports a node without the driver (or without nvidia-ml-py) as :class:`NvmlUnavailable`
instead of crashing.

``pynvml`` is imported lazily, so modules that use this file import on any node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import math
from collections import namedtuple

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import ProfileSpec

COMPUTE_MODE_NAMES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
COMPUTE_MODE_VALUES = dict((name, value) for value, name in COMPUTE_MODE_NAMES.items())

# Every NVML GPU-instance profile enum (NVML_GPU_INSTANCE_PROFILE_* 0 .. COUNT-1 = 0x11 in
# nvml.h): besides the plain, +me (REV1) and double-memory (REV2) profiles gpuprov plans with,
# other tools may have made GFX, NO_ME ("-me") and ALL_ME ("+me.all") instances; gpuprov must
# see those too, or it would take their slices for free.
GPU_INSTANCE_PROFILE_ENUMS = tuple(range(0x12))
_MEDIA_EXTENSION_ENUMS = (7, 8)
# Name suffixes go-nvlib gives the other variants when NVML has no name (mig_profile.go).
_ENUM_SUFFIXES = {0xA: "+gfx", 0xB: "+gfx", 0xC: "+gfx", 0x11: "+gfx", 0xD: "-me", 0xE: "-me",
                  0xF: "+me.all", 0x10: "+me.all"}
# Every NVML compute-instance profile enum (NVML_COMPUTE_INSTANCE_PROFILE_*, COUNT = 9).
_CI_PROFILE_ENUMS = tuple(range(9))
# NVML_COMPUTE_INSTANCE_PROFILE_* enum for a compute instance of N compute slices.
_CI_ENUM_FOR_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_NO_ID = 0xFFFFFFFF
_MIB = 1024 * 1024

# The A30-24GB's GPU-instance profile counts as NVIDIA publishes them (MIG User Guide, A30
# profiles). The driver's profile info reports other instanceCount values on this GPU:
# NVIDIA/mig-parted v0.15.0 pkg/mig/discovery/discovery.go hard-codes these same counts "due to
# NVML bug where GetGpuInstanceProfileInfo returns incorrect InstanceCount values", keyed by the
# A30's PCI device id. Profiles of other A30 variants keep what NVML reports.
A30_PCI_DEVICE_ID = 0x20B7
A30_INSTANCE_COUNTS = {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1}

# NVML_GPU_FABRIC_STATE_* (nvml.h) as gpuprov reports them.
_FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}

GpuProfile = namedtuple("GpuProfile", ["name", "enum", "id", "compute_slices", "max_count",
                                       "memory_mib", "placements"])
GpuInstance = namedtuple("GpuInstance", ["id", "profile", "profile_id", "start", "size", "compute_instances"])

# The oldest driver branch gpuprov supports: the newest NVML symbols it calls
# (nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetGpuInstanceProfileInfoV with profile
# names, 1g+me / 1g 2x-memory profiles) all exist there. (UNVERIFIED: from NVIDIA's release
# notes as summarised by mig-parted's configs, not checked against each nvml.h release.)
MINIMUM_DRIVER = "R525"

# What to do, by NVML error class name.
_HINTS = {
    "NVMLError_InUse": "processes or compute instances still use it; stop them or set force",
    "NVMLError_InsufficientResources": (
        "the instance overlaps one that exists or the profile's count is used up; "
        "read the current layout with gpu_facts"),
    "NVMLError_NotSupported": (
        "this GPU or driver does not support the operation (MIG needs an A30, A100, H100, H200, "
        "GH200 or B200 class GPU with MIG mode enabled)"),
    "NVMLError_NoPermission": "run as root (become: true); NVML allows MIG changes, placements and "
                              "instance listing to root only",
    "NVMLError_GpuIsLost": (
        "the GPU has fallen off the bus; check the kernel log for Xid errors, then reset the GPU "
        "(nvidia-smi -r) or reboot the node"),
    "NVMLError_ResetRequired": "reset the GPU (nvidia-smi -r) or reboot the node (a VM needs a reboot)",
    "NVMLError_DriverNotLoaded": "load the NVIDIA kernel module (modprobe nvidia) or reinstall the driver",
    "NVMLError_LibraryNotFound": "install the NVIDIA driver (libnvidia-ml.so.1 was not found)",
    "NVMLError_Uninitialized": "NVML was not initialised; this is a bug in gpuprov, please report it",
    "NVMLError_InvalidArgument": "the request does not match the GPU's state; re-read it with gpu_facts",
    "NVMLError_NotFound": "the object no longer exists; re-read the GPU's state with gpu_facts",
    "NVMLError_LibRmVersionMismatch": "the NVIDIA library and kernel module differ; reboot or reload the driver",
    "NVMLError_FunctionNotFound": "the NVIDIA driver is too old for this call; gpuprov needs driver %s or newer"
                                  % MINIMUM_DRIVER,
}


class NvmlError(Exception):
    """An NVML call failed.

    ``gpu``: index of the GPU (None for node-wide calls), ``operation``: what was being
    done, ``code``: NVML's error code, ``hint``: what to do about it.
    """

    def __init__(self, message, gpu=None, operation=None, hint=None, code=None, reason=None,
                 error_class=None):
        super(NvmlError, self).__init__(message)
        self.message = message
        self.gpu = gpu
        self.operation = operation
        self.hint = hint
        self.code = code
        self.reason = reason
        # NVML's error class name, e.g. "NVMLError_InUse" (None when NVML raised nothing).
        self.error_class = error_class

    def __str__(self):
        text = self.message
        if self.hint:
            text = "%s; %s" % (text, self.hint)
        return text

    @classmethod
    def from_nvml(cls, exc, gpu=None, operation=None, bus_id=None):
        name = type(exc).__name__
        code = getattr(exc, "value", None)
        where = ""
        if gpu is not None:
            where = "GPU %s%s: " % (gpu, " (%s)" % bus_id if bus_id else "")
        message = "%s%s failed: %s" % (where, operation or "NVML call", exc)
        return cls(message, gpu=gpu, operation=operation, hint=_HINTS.get(name), code=code,
                   reason=str(exc), error_class=name)

    def as_dict(self):
        return {"gpu": self.gpu, "operation": self.operation, "code": self.code,
                "reason": self.reason, "hint": self.hint}


class NvmlUnavailable(NvmlError):
    """No usable NVML on this node: nvidia-ml-py missing, or no driver."""


def _import_pynvml():
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable(
            "nvidia-ml-py not installed: the Python package that provides pynvml is missing",
            operation="import pynvml", hint="install it on the node (pip install nvidia-ml-py)",
            reason="nvidia-ml-py not installed")
    return pynvml


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def sysfs_pci_address(bus_id):
    """NVML's bus id ("00000000:07:00.0") as sysfs names the device ("0000:07:00.0")."""
    domain, rest = bus_id.split(":", 1)
    return ("%04x:%s" % (int(domain, 16), rest)).lower()


def profile_name_from_memory(memory_mb, total_memory_mib, memory_gib_total, slices, enum):
    """Profile name by go-nvlib's rule, when NVML gives no name: GB =
    round(ceil(8 * mem / total) / 8 * ceil(total GiB)).

    go-nvlib (pkg/nvlib/device/mig_profile.go, getMigMemorySizeGB) rounds with Go's
    math.Round, half away from zero; Python's round() rounds half to even, which would name
    B200's 1g (1/8 of 180 GiB = 22.5) 1g.22gb instead of NVIDIA's 1g.23gb.
    """
    fraction = math.ceil(8.0 * memory_mb / total_memory_mib) / 8.0
    name = "%dg.%dgb" % (slices, int(math.floor(fraction * math.ceil(memory_gib_total) + 0.5)))
    if enum in _MEDIA_EXTENSION_ENUMS:
        name += "+me"
    return name + _ENUM_SUFFIXES.get(enum, "")


class Nvml:
    """NVML session: ``with Nvml() as nvml: ...`` (init on enter, shutdown on exit)."""

    def __init__(self):
        self.pynvml = None
        self._bus_ids = {}
        self._nvlink_ends = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self):
        self.pynvml = _import_pynvml()
        try:
            self.pynvml.nvmlInit()
        except self.pynvml.NVMLError as exc:
            error = NvmlError.from_nvml(exc, operation="initialising NVML")
            if type(exc).__name__ in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"):
                raise NvmlUnavailable(error.message, operation=error.operation, hint=error.hint,
                                      code=error.code, reason=error.reason, error_class=error.error_class)
            raise error
        return self

    def __exit__(self, *exc_info):
        try:
            self.pynvml.nvmlShutdown()
        except self.pynvml.NVMLError:
            pass
        return False

    # -- plumbing ----------------------------------------------------------------------------
    def call(self, operation, func, *args, **kwargs):
        """Call ``func``; an NVMLError becomes NvmlError naming ``gpu`` (a keyword argument)."""
        gpu = kwargs.pop("gpu", None)
        try:
            return func(*args, **kwargs)
        except self.pynvml.NVMLError as exc:
            raise NvmlError.from_nvml(exc, gpu=gpu, operation=operation, bus_id=self._bus_ids.get(gpu))
        except getattr(self.pynvml, "NVMLLibraryMismatchError", ()) as exc:
            # Not an NVMLError: nvidia-ml-py's unversioned wrappers raise it when the driver's
            # library lacks the versioned symbol, i.e. the driver is older than nvidia-ml-py.
            where = "GPU %s: " % gpu if gpu is not None else ""
            raise NvmlError("%s%s failed: %s" % (where, operation, exc), gpu=gpu, operation=operation,
                            hint=_HINTS["NVMLError_FunctionNotFound"], reason=str(exc),
                            error_class="NVMLError_FunctionNotFound")

    @staticmethod
    def is_error(exc, name):
        """Whether an NvmlError came from NVML's ``NVMLError_<name>`` (e.g. "InUse")."""
        return exc.error_class == "NVMLError_" + name

    def handle(self, index):
        return self.call("opening the device", self.pynvml.nvmlDeviceGetHandleByIndex, index, gpu=index)

    # -- node --------------------------------------------------------------------------------
    def driver_version(self):
        return _text(self.call("reading the driver version", self.pynvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self):
        """The CUDA version the driver supports, as "12.4" (None when NVML cannot say)."""
        try:
            value = self.call("reading the CUDA driver version", self.pynvml.nvmlSystemGetCudaDriverVersion)
        except NvmlError:
            return None
        return "%d.%d" % (value // 1000, (value % 1000) // 10)

    def device_count(self):
        return self.call("counting GPUs", self.pynvml.nvmlDeviceGetCount)

    # -- one GPU -----------------------------------------------------------------------------
    def bus_id(self, index, handle=None):
        if index not in self._bus_ids:
            handle = handle or self.handle(index)
            pci = self.call("reading PCI info", self.pynvml.nvmlDeviceGetPciInfo, handle, gpu=index)
            self._bus_ids[index] = _text(pci.busId)
        return self._bus_ids[index]

    def gpu_info(self, index):
        """Identity and memory of one GPU (no MIG details)."""
        handle = self.handle(index)
        pci = self.call("reading PCI info", self.pynvml.nvmlDeviceGetPciInfo, handle, gpu=index)
        self._bus_ids[index] = _text(pci.busId)
        memory = self.call("reading memory info", self.pynvml.nvmlDeviceGetMemoryInfo, handle, gpu=index)
        major, minor = self.call("reading the compute capability",
                                 self.pynvml.nvmlDeviceGetCudaComputeCapability, handle, gpu=index)
        return {
            "index": index,
            "uuid": _text(self.call("reading the UUID", self.pynvml.nvmlDeviceGetUUID, handle, gpu=index)),
            "name": _text(self.call("reading the name", self.pynvml.nvmlDeviceGetName, handle, gpu=index)),
            "pci_bus_id": _text(pci.busId),
            # The 32-bit id holds the device id in its high half and NVIDIA's vendor id below.
            "pci_device_id": "0x%04X" % ((pci.pciDeviceId >> 16) & 0xFFFF),
            "memory_total_mib": int(memory.total // _MIB),
            "memory_used_mib": int(memory.used // _MIB),
            "compute_capability": "%d.%d" % (major, minor),
        }

    def compute_mode(self, index):
        """The GPU's compute mode name; None on a MIG-enabled GPU, where NVML has it per MIG
        device only (nvml.h nvmlDeviceGetComputeMode: "If MIG is enabled on a GPU, device must
        be MIG device handle"): see :meth:`mig_compute_modes`."""
        if self.mig_mode(index)[0]:
            return None
        value = self.call("reading the compute mode", self.pynvml.nvmlDeviceGetComputeMode,
                          self.handle(index), gpu=index)
        return COMPUTE_MODE_NAMES.get(value, str(value))

    def mig_compute_modes(self, index):
        """{(GPU instance id, compute instance id): compute mode name} of a MIG-enabled GPU's MIG
        devices, read on their MIG device handles; {} when MIG is off."""
        if not self.mig_mode(index)[0]:
            return {}
        modes = {}
        for gi_id, mig_handle in self._mig_devices(index, self.handle(index)):
            ci_id = self.call("reading a MIG device's compute instance",
                              self.pynvml.nvmlDeviceGetComputeInstanceId, mig_handle, gpu=index)
            value = self.call("reading the compute mode of MIG device %d/%d" % (gi_id, ci_id),
                              self.pynvml.nvmlDeviceGetComputeMode, mig_handle, gpu=index)
            modes[(gi_id, ci_id)] = COMPUTE_MODE_NAMES.get(value, str(value))
        return modes

    def persistence_mode(self, index):
        """Whether persistence mode is on (nvidia-persistenced turns it on while it runs)."""
        value = self.call("reading persistence mode", self.pynvml.nvmlDeviceGetPersistenceMode,
                          self.handle(index), gpu=index)
        return value == self.pynvml.NVML_FEATURE_ENABLED

    def set_compute_mode(self, index, mode):
        """``mode``: a COMPUTE_MODE_NAMES value such as "EXCLUSIVE_PROCESS".

        Without persistence mode the driver drops the GPU's settings, compute mode included,
        when its last client leaves (nvidia-smi docs, "Persistence Mode"), so a non-default
        mode is kept by turning persistence mode on first. Returns True when it did that.
        """
        handle = self.handle(index)
        persistence_set = False
        if mode != "DEFAULT" and not self.persistence_mode(index):
            self.call("enabling persistence mode (so compute mode %s survives the last client)" % mode,
                      self.pynvml.nvmlDeviceSetPersistenceMode, handle,
                      self.pynvml.NVML_FEATURE_ENABLED, gpu=index)
            persistence_set = True
        self.call("setting compute mode %s" % mode, self.pynvml.nvmlDeviceSetComputeMode,
                  handle, COMPUTE_MODE_VALUES[mode], gpu=index)
        return persistence_set

    def mig_mode(self, index):
        """(current, pending) as booleans, or (None, None) on a GPU without MIG."""
        try:
            current, pending = self.call("reading MIG mode", self.pynvml.nvmlDeviceGetMigMode,
                                         self.handle(index), gpu=index)
        except NvmlError as exc:
            if self.is_error(exc, "NotSupported"):
                return None, None
            raise
        return bool(current), bool(pending)

    def set_mig_mode(self, index, enabled):
        """Ask for MIG mode; returns NVML's activation status (0 = no error reported).

        The change may still be pending (Ampere needs a GPU reset): callers re-read
        :meth:`mig_mode`, as mig-parted does, instead of trusting the status alone. Asking again
        while the change is pending retries its activation and reports the status anew (nvml.h
        nvmlDeviceSetMigMode: "The caller of this API is expected to idle the device and retry
        setting the mode"); in a VM with passthrough that is NVML_ERROR_RESET_REQUIRED again.
        """
        mode = self.pynvml.NVML_DEVICE_MIG_ENABLE if enabled else self.pynvml.NVML_DEVICE_MIG_DISABLE
        return self.call("%s MIG mode" % ("enabling" if enabled else "disabling"),
                         self.pynvml.nvmlDeviceSetMigMode, self.handle(index), mode, gpu=index)

    def processes(self, index):
        """Compute processes on a GPU: [{pid, used_memory_mib, gpu_instance_id}].

        Outside MIG the GPU's own handle lists them. Under MIG, NVML lists a process on the
        MIG device (one per compute instance) it runs in; the GPU's own handle gives the
        aggregate only to privileged callers. Both are read and merged, so a process is
        attributed to its GPU instance whenever either source says which one.
        """
        handle = self.handle(index)
        found = {}
        current, _pending = self.mig_mode(index)
        if current:
            for gi_id, mig_handle in self._mig_devices(index, handle):
                procs = self.call("listing processes of GPU instance %d" % gi_id,
                                  self.pynvml.nvmlDeviceGetComputeRunningProcesses, mig_handle, gpu=index)
                for proc in procs:
                    found[(proc.pid, gi_id)] = self._process(proc, gi_id)
        procs = self.call("listing processes", self.pynvml.nvmlDeviceGetComputeRunningProcesses, handle, gpu=index)
        known_pids = set(pid for pid, _gi in found)
        for proc in procs:
            gi_id = getattr(proc, "gpuInstanceId", _NO_ID)
            gi_id = None if gi_id in (None, _NO_ID) else gi_id
            if proc.pid in known_pids:
                continue
            found[(proc.pid, gi_id)] = self._process(proc, gi_id)
        return sorted(found.values(), key=lambda p: (p["pid"], p["gpu_instance_id"] or 0))

    @staticmethod
    def _process(proc, gi_id):
        used = proc.usedGpuMemory
        return {"pid": int(proc.pid),
                "used_memory_mib": None if used is None else int(used // _MIB),
                "gpu_instance_id": gi_id}

    def _mig_devices(self, index, handle):
        count = self.call("counting MIG devices", self.pynvml.nvmlDeviceGetMaxMigDeviceCount, handle, gpu=index)
        result = []
        for slot in range(count):
            try:
                mig_handle = self.call("opening MIG device %d" % slot,
                                       self.pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot, gpu=index)
            except NvmlError as exc:
                if self.is_error(exc, "NotFound") or self.is_error(exc, "InvalidArgument"):
                    # An empty slot: drivers answer either code (go-nvlib skips both).
                    continue
                raise
            gi_id = self.call("reading a MIG device's GPU instance",
                              self.pynvml.nvmlDeviceGetGpuInstanceId, mig_handle, gpu=index)
            result.append((gi_id, mig_handle))
        return result

    # -- NVLink and the NVLink fabric --------------------------------------------------------
    def _nvlink_remote_ends(self, index):
        """(active links, set of remote PCI bus ids) of a GPU; (0, set()) without NVLink."""
        if index not in self._nvlink_ends:
            handle = self.handle(index)
            active, ends = 0, set()
            for link in range(self.pynvml.NVML_NVLINK_MAX_LINKS):
                try:
                    state = self.call("reading NVLink %d" % link, self.pynvml.nvmlDeviceGetNvLinkState,
                                      handle, link, gpu=index)
                except NvmlError as exc:
                    if link == 0 and self.is_error(exc, "NotSupported"):
                        break  # nvml.h: "if the device doesn't support this feature"
                    if self.is_error(exc, "NotSupported") or self.is_error(exc, "InvalidArgument"):
                        continue  # a link this GPU does not have
                    raise
                if state != self.pynvml.NVML_FEATURE_ENABLED:
                    continue
                active += 1
                pci = self.call("reading the far end of NVLink %d" % link,
                                self.pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link, gpu=index)
                ends.add(_text(pci.busId).lower())
            self._nvlink_ends[index] = (active, ends)
        return self._nvlink_ends[index]

    def nvlink(self, index):
        """The GPU's NVLinks: {active_links, nvswitch, peers}.

        ``peers`` are the indices of the GPUs its NVLinks reach, directly or through a shared
        NVSwitch; ``nvswitch`` is true when a link ends at something that is not a GPU of this
        node (an NVSwitch). Reads every GPU's links once per session.
        """
        active, ends = self._nvlink_remote_ends(index)
        if not active:
            return {"active_links": 0, "nvswitch": False, "peers": []}
        buses = dict((self.bus_id(i).lower(), i) for i in range(self.device_count()))
        switches = set(end for end in ends if end not in buses)
        peers = set(buses[end] for end in ends if end in buses)
        if switches:
            for other in buses.values():
                if other != index and self._nvlink_remote_ends(other)[1] & switches:
                    peers.add(other)
        peers.discard(index)
        return {"active_links": active, "nvswitch": bool(switches), "peers": sorted(peers)}

    def fabric_state(self, index):
        """The GPU's state in the NVLink fabric Fabric Manager sets up ("completed", "not-started",
        "in-progress"); None where NVML has none (nvml.h nvmlDeviceGetGpuFabricInfoV: "For Hopper
        or newer fully supported devices"; GPUs without NVSwitch answer NOT_SUPPORTED)."""
        info = self.pynvml.c_nvmlGpuFabricInfoV_t()
        try:
            self.call("reading the NVLink fabric state", self.pynvml.nvmlDeviceGetGpuFabricInfoV,
                      self.handle(index), ctypes.byref(info), gpu=index)
        except NvmlError as exc:
            if self.is_error(exc, "NotSupported") or self.is_error(exc, "FunctionNotFound"):
                return None
            raise
        state = _FABRIC_STATES.get(info.state, str(info.state))
        return None if state == "not-supported" else state

    # -- MIG profiles and instances ----------------------------------------------------------
    def mig_profiles(self, index):
        """The GPU-instance profiles this GPU offers, as NVML reports them: {name: GpuProfile},
        with the A30's counts corrected (see A30_INSTANCE_COUNTS).

        Called with MIG mode enabled; older drivers answer NotSupported otherwise (nvml.h
        ...ProfileInfoV), and the profiles are then reported as none.
        """
        handle = self.handle(index)
        infos = []
        for enum in GPU_INSTANCE_PROFILE_ENUMS:
            try:
                info = self._profile_info(index, handle, enum)
            except NvmlError as exc:
                if self.is_error(exc, "NotSupported") or self.is_error(exc, "InvalidArgument"):
                    continue  # the GPU lacks this profile
                raise
            infos.append((enum, info))
        if not infos:
            return {}
        total_mib = None
        profiles = {}
        pci = self.call("reading PCI info", self.pynvml.nvmlDeviceGetPciInfo, handle, gpu=index)
        true_counts = A30_INSTANCE_COUNTS if (pci.pciDeviceId >> 16) & 0xFFFF == A30_PCI_DEVICE_ID else {}
        for enum, info in infos:
            name = _text(getattr(info, "name", b"")) or ""
            name = name[4:] if name.startswith("MIG ") else name
            if not name:
                # Older drivers leave the name empty: derive it as go-nvlib does.
                if total_mib is None:
                    memory = self.call("reading memory info", self.pynvml.nvmlDeviceGetMemoryInfo, handle, gpu=index)
                    total_mib = memory.total / float(_MIB)
                name = profile_name_from_memory(info.memorySizeMB, total_mib, total_mib / 1024.0,
                                                info.sliceCount, enum)
            profiles[name] = GpuProfile(name, enum, info.id, info.sliceCount,
                                        true_counts.get(name, info.instanceCount),
                                        int(info.memorySizeMB), self._placements(index, handle, info))
        return profiles

    def _profile_info(self, index, handle, enum):
        """Profile info v2 (with its name); drivers without ...ProfileInfoV give v1 (no name)."""
        try:
            return self.call("reading MIG profile %d" % enum,
                             self.pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, enum, gpu=index)
        except NvmlError as exc:
            if not self.is_error(exc, "FunctionNotFound"):
                raise
        return self.call("reading MIG profile %d" % enum,
                         self.pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, enum, 1, gpu=index)

    def _placements(self, index, handle, info):
        buf = (self.pynvml.c_nvmlGpuInstancePlacement_t * max(info.instanceCount, 8))()
        count = ctypes.c_uint(len(buf))
        self.call("listing placements of MIG profile %d" % info.id,
                  self.pynvml.nvmlDeviceGetGpuInstancePossiblePlacements,
                  handle, info.id, buf, ctypes.byref(count), gpu=index)
        return [(buf[i].start, buf[i].size) for i in range(count.value)]

    @staticmethod
    def solver_profiles(profiles):
        """{name: ProfileSpec} for mig_solver, from :meth:`mig_profiles`."""
        return dict((name, ProfileSpec(name, p.placements, p.max_count, p.compute_slices))
                    for name, p in profiles.items())

    @staticmethod
    def compute_total(profiles):
        return max([p.compute_slices for p in profiles.values()] or [0])

    def gpu_instances(self, index, profiles):
        """GPU instances now on the GPU, sorted by placement start: [GpuInstance]."""
        handle = self.handle(index)
        result = []
        for prof in profiles.values():
            for gi in self._gi_handles(index, handle, prof):
                info = self.call("reading a GPU instance", self.pynvml.nvmlGpuInstanceGetInfo, gi, gpu=index)
                result.append(GpuInstance(info.id, prof.name, prof.id, info.placement.start,
                                          info.placement.size, self._compute_instances(index, gi)))
        return sorted(result, key=lambda g: (g.start, g.profile))

    def _gi_handles(self, index, handle, prof):
        buf = (self.pynvml.c_nvmlGpuInstance_t * max(prof.max_count, 1))()
        count = ctypes.c_uint(len(buf))
        self.call("listing %s GPU instances" % prof.name, self.pynvml.nvmlDeviceGetGpuInstances,
                  handle, prof.id, buf, ctypes.byref(count), gpu=index)
        return [buf[i] for i in range(count.value)]

    def _compute_instances(self, index, gi):
        result = []
        for handle, info in self._compute_instance_handles(index, gi):
            ci = self.call("reading a compute instance", self.pynvml.nvmlComputeInstanceGetInfo, handle, gpu=index)
            result.append({"id": ci.id, "profile_id": ci.profileId, "slices": info.sliceCount,
                           "placement": {"start": ci.placement.start, "size": ci.placement.size}})
        return sorted(result, key=lambda c: c["id"])

    def _compute_instance_handles(self, index, gi):
        """[(compute instance handle, its profile info)] of one GPU instance."""
        handles = []
        for enum in _CI_PROFILE_ENUMS:
            try:
                info = self.call("reading compute instance profile %d" % enum,
                                 self.pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, enum,
                                 self.pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, gpu=index)
            except NvmlError as exc:
                if self.is_error(exc, "NotSupported") or self.is_error(exc, "InvalidArgument"):
                    continue  # the GPU instance offers no compute instance of this size
                raise
            buf = (self.pynvml.c_nvmlComputeInstance_t * max(info.instanceCount, 1))()
            count = ctypes.c_uint(len(buf))
            self.call("listing compute instances", self.pynvml.nvmlGpuInstanceGetComputeInstances,
                      gi, info.id, buf, ctypes.byref(count), gpu=index)
            handles.extend((buf[i], info) for i in range(count.value))
        return handles

    def create_gpu_instance(self, index, profile, start):
        """Create a GPU instance of ``profile`` (GpuProfile) at memory slice ``start``, with one
        compute instance spanning it. Returns the new GPU instance id.

        If the compute instance cannot be created, the new GPU instance is destroyed again so
        nothing half-made is left.
        """
        sizes = dict(profile.placements)
        if start not in sizes:
            raise NvmlError("GPU %s: %s cannot start at memory slice %s (valid: %s)"
                            % (index, profile.name, start, ", ".join(str(s) for s in sorted(sizes))),
                            gpu=index, operation="creating a %s GPU instance" % profile.name)
        handle = self.handle(index)
        # nvidia-ml-py sets no argtypes for this call, so the placement goes by reference; the
        # size is in memory slices, from the placement list. (UNVERIFIED on hardware.)
        placement = self.pynvml.c_nvmlGpuInstancePlacement_t(start, sizes[start])
        gi = self.call("creating a %s GPU instance at slice %d" % (profile.name, start),
                       self.pynvml.nvmlDeviceCreateGpuInstanceWithPlacement,
                       handle, profile.id, ctypes.byref(placement), gpu=index)
        gi_id = self.call("reading the new GPU instance", self.pynvml.nvmlGpuInstanceGetInfo, gi, gpu=index).id
        try:
            self._create_full_compute_instance(index, gi, profile)
        except NvmlError:
            self.call("destroying the incomplete %s GPU instance" % profile.name,
                      self.pynvml.nvmlGpuInstanceDestroy, gi, gpu=index)
            raise
        return gi_id

    def create_compute_instance(self, index, gi_id, profile):
        """Add the full-size compute instance to an existing GPU instance of ``profile``."""
        gi = self.call("opening GPU instance %d" % gi_id, self.pynvml.nvmlDeviceGetGpuInstanceById,
                       self.handle(index), gi_id, gpu=index)
        self._create_full_compute_instance(index, gi, profile)

    def _create_full_compute_instance(self, index, gi, profile):
        ci_enum = _CI_ENUM_FOR_SLICES.get(profile.compute_slices)
        if ci_enum is None:
            raise NvmlError("GPU %s: no compute instance profile spans %d compute slices (%s)"
                            % (index, profile.compute_slices, profile.name), gpu=index,
                            operation="creating a compute instance")
        ci_info = self.call("reading the compute instance profile for %s" % profile.name,
                            self.pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, ci_enum,
                            self.pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, gpu=index)
        self.call("creating the compute instance of a %s GPU instance" % profile.name,
                  self.pynvml.nvmlGpuInstanceCreateComputeInstance, gi, ci_info.id, gpu=index)

    def destroy_gpu_instance(self, index, gi_id):
        """Destroy a GPU instance: its compute instances first, then the GPU instance."""
        handle = self.handle(index)
        gi = self.call("opening GPU instance %d" % gi_id, self.pynvml.nvmlDeviceGetGpuInstanceById,
                       handle, gi_id, gpu=index)
        for ci, _info in self._compute_instance_handles(index, gi):
            self.call("destroying a compute instance of GPU instance %d" % gi_id,
                      self.pynvml.nvmlComputeInstanceDestroy, ci, gpu=index)
        self.call("destroying GPU instance %d" % gi_id, self.pynvml.nvmlGpuInstanceDestroy, gi, gpu=index)
