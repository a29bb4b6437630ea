# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A stand-in for nvidia-ml-py's ``pynvml`` backed by a JSON state file.

Put this directory first on ``sys.path``/``PYTHONPATH`` and ``import pynvml`` finds it. The
function names, constants, structure classes and ``NVMLError_*`` classes match nvidia-ml-py
13.x; the semantics follow NVML as documented in nvml.h and the MIG User Guide:

* profile info and possible placements per GPU model; overlapping placements or an exhausted
  profile count raise ``NVMLError_InsufficientResources``;
* destroying a GPU instance that still has compute instances or processes, or a compute
  instance with processes, raises ``NVMLError_InUse``;
* MIG calls on a GPU without MIG (T4, L40S, ...) raise ``NVMLError_NotSupported``, and so do
  GPU/compute-instance calls on a MIG-capable GPU whose MIG mode is off (nvml.h: "If device
  doesn't have MIG mode enabled" -> NVML_ERROR_NOT_SUPPORTED); possible placements answer with
  MIG off (nvml.h: "regardless of whether MIG is enabled or not"), profile info too unless the
  state says ``profile_info_needs_mig`` (older drivers), and ``nvmlDeviceGetMaxMigDeviceCount``
  is 0 with MIG off;
* compute mode of a MIG-enabled GPU lives on its MIG device handles; the parent handle is
  refused (nvml.h nvmlDeviceGetComputeMode: "device must be MIG device handle");
* ``nvmlDeviceSetMigMode`` returns the activation status instead of raising: on Ampere the
  driver resets the GPU itself and the mode applies at once unless something holds the GPU
  (then it stays pending and the status is NVML_ERROR_IN_USE), on Hopper and later it applies
  at once; with processes on the GPU, or GPU instances when leaving MIG, it stays pending
  (NVML_ERROR_IN_USE); asking again while pending retries;
* a GPU reset (``reset_gpu``, fake ``nvidia-smi -r``) fails while anything holds the GPU,
  including any other process with an open NVML session, but not nvidia-persistenced when its
  socket is in reach; on an Ampere NVSwitch node without Fabric Manager the GPUs' NVLink
  peers must be reset in the same command (``reset_groups``, nvidia-smi(1));
* the A30's profile info reports the driver's wrong instance counts (mig-parted
  pkg/mig/discovery) while creating stops at the true ones;
* NVLink links, their far ends (NVSwitches or a bridged GPU) and, on Hopper+, the fabric state
  Fabric Manager (``nvidia-fabricmanager.service`` of the fake systemctl) sets up.

State (one JSON file named by ``GPUPROV_FAKE_NVML_STATE``) is read on every call and written
after every change under an flock, so separate processes (a module, ``nvidia-smi``, a test)
see each other's work. With the variable unset, or the file missing, the node has no driver:
``nvmlInit`` raises ``NVMLError_LibraryNotFound`` as it does without libnvidia-ml.so.1.

Per-GPU test hooks in the state:
  ``lost: true``             every call on the GPU raises NVMLError_GpuIsLost
  ``fail_create_after: N``   N more GPU-instance creates succeed, then the next
                             ``fail_create_count`` (default 1) fail with ``fail_create_code``
                             (default NVML_ERROR_INSUFFICIENT_RESOURCES); then the hook clears
  ``passthrough: true``      the GPU cannot be reset from the guest (as in a VM): a MIG mode
                             change stays pending with ``passthrough_status`` (default
                             NVML_ERROR_RESET_REQUIRED; NVML_ERROR_NOT_SUPPORTED is also seen)
  ``persistence_mode``       persistence mode; without it (and without a persistence holder)
                             the compute mode is lost when the last NVML client shuts down

Node-wide keys:
  ``nvml_clients``           pids with an open NVML session (nvmlInit adds, nvmlShutdown
                             removes); a reset is refused while another live one exists
  ``holders``                what else holds the GPUs open: ``{"name", "unit"}`` while the
                             fake systemctl has the unit active (``"persistence": true`` and
                             ``"socket": PATH`` for nvidia-persistenced), ``{"name", "pid"}``
                             while the process lives
  ``empty_mig_slot_code``    what nvmlDeviceGetMigDeviceHandleByIndex answers for an empty slot
                             (NVML_ERROR_NOT_FOUND by default, or NVML_ERROR_INVALID_ARGUMENT)
  ``missing_functions``      C symbols an older libnvidia-ml lacks (FunctionNotFound, or
                             NVMLLibraryMismatchError from the unversioned wrappers)
  ``nvlink``                 {"kind": "nvswitch"} or {"kind": "pairs"} (new_state's ``nvlink``)
  ``profile_info_needs_mig`` profile info refused while MIG is off, as older drivers do

MIG management, placements and instance listing raise NO_PERMISSION unless the effective
uid is 0 (nvml.h "Requires privileged user").

Helpers for tests and the fleet: ``new_state``, ``load_state``, ``save_state``,
``mutate_state``, ``add_process``, ``add_profile``, ``set_mig_mode``, ``create_instances``,
``gpu_holders``, ``reset_gpu``, ``reset_groups``, ``nvlink_remotes``, ``reboot``. They are not NVML names (the contract test in
tests/unit/plugins/module_utils/test_pynvml_contract.py keeps every nvml* name the fake
defines equal to nvidia-ml-py's).
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import json
import os
import string
import sys
import tempfile
import uuid as _uuid
from ctypes import POINTER, Structure, addressof, c_char, c_uint, c_uint8, c_uint32, c_ulonglong, pointer

STATE_ENV = "GPUPROV_FAKE_NVML_STATE"

# --- constants (values copied from nvidia-ml-py 13.615.71) -----------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1

NVML_COMPUTEMODE_DEFAULT = 0
NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1  # support removed by NVIDIA
NVML_COMPUTEMODE_PROHIBITED = 2
NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
NVML_COMPUTEMODE_COUNT = 4

NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32
NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16
NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96
NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96
NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80
NVML_VALUE_NOT_AVAILABLE_uint = c_uint(-1)
NVML_VALUE_NOT_AVAILABLE_ulonglong = c_ulonglong(-1)

NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1

NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9
NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX = 0xA
NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX = 0xB
NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX = 0xC
NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME = 0xD
NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME = 0xE
NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME = 0xF
NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME = 0x10
NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX = 0x11
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12

NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL = 0x8
NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9

NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT = 0x1

nvmlGpuInstanceProfileInfo_v2 = 0x02000098
nvmlComputeInstanceProfileInfo_v2 = 0x02000088

NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF

NVML_GPU_FABRIC_UUID_LEN = 16
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
nvmlGpuFabricInfo_v2 = 0x02000024

# Compute slices of a full compute instance, by CI profile enum.
_CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}
_NO_ID = 0xFFFFFFFF


# --- errors: generated like nvidia-ml-py does ------------------------------------------------

class NVMLLibraryMismatchError(Exception):
    """nvidia-ml-py raises this (not an NVMLError) from wrappers marked throwOnVersionMismatch,
    e.g. nvmlDeviceGetComputeRunningProcesses, when libnvidia-ml lacks the versioned symbol."""


class NVMLError(Exception):
    _valClassMapping = dict()
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_MEMORY: "Insufficient Memory",
        NVML_ERROR_UNKNOWN: "Unknown Error",
        # Not in nvidia-ml-py's table (it asks the library); nvmlErrorString's wording.
        NVML_ERROR_IN_USE: "In use by another client",
        NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient resources",
    }

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return NVMLError._errcode_to_string.get(self.value, "NVML Error with code %d" % self.value)

    def __eq__(self, other):
        return self.value == other.value

    # nvidia-ml-py defines __eq__ without __hash__, so its errors are unhashable; so are these.


def nvmlExceptionClass(nvmlErrorCode):
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError("nvmlErrorCode %s is not valid" % nvmlErrorCode)
    return NVMLError._valClassMapping[nvmlErrorCode]


def _extractNVMLErrorsAsClasses():
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val):
            def new(typ, *args):
                return NVMLError.__new__(typ, val)
            return new
        new_error_class = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        new_error_class.__module__ = __name__
        setattr(this_module, class_name, new_error_class)
        NVMLError._valClassMapping[err_val] = new_error_class


_extractNVMLErrorsAsClasses()


def nvmlErrorString(result):
    return str(NVMLError(result))


# --- structures (same fields as nvidia-ml-py; handles are opaque as there) --------------------

class _PrintableStructure(Structure):
    """As nvidia-ml-py's: char-array fields read back as str, str values are encoded on set."""

    def __getattribute__(self, name):
        res = super(_PrintableStructure, self).__getattribute__(name)
        if isinstance(res, bytes):
            return res.decode()
        return res

    def __setattr__(self, name, value):
        if isinstance(value, str):
            value = value.encode()
        super(_PrintableStructure, self).__setattr__(name, value)


class struct_c_nvmlDevice_t(Structure):
    pass  # opaque handle, as in nvml.h


c_nvmlDevice_t = POINTER(struct_c_nvmlDevice_t)


class struct_c_nvmlGpuInstance_t(Structure):
    pass  # opaque handle


c_nvmlGpuInstance_t = POINTER(struct_c_nvmlGpuInstance_t)


class struct_c_nvmlComputeInstance_t(Structure):
    pass  # opaque handle


c_nvmlComputeInstance_t = POINTER(struct_c_nvmlComputeInstance_t)

# What each opaque handle stands for, by the address it points at: (gpu index, gi id, ci id).
# The handle objects are kept here too, so an address is never reused while the fake runs.
_HANDLES = {}


_HANDLE_BY_KEY = {}


def _new_handle(pointer_type, what):
    """One handle per object, as NVML hands out the same handle for the same device."""
    key = (pointer_type, what)
    if key not in _HANDLE_BY_KEY:
        target = pointer_type._type_()
        _HANDLES[addressof(target)] = (what, target)
        _HANDLE_BY_KEY[key] = target
    return pointer(_HANDLE_BY_KEY[key])


def _handle_target(handle):
    """(gpu index, gi id, ci id) of a handle, or raise INVALID_ARGUMENT for an unknown one."""
    if not handle:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    entry = _HANDLES.get(addressof(handle.contents))
    if entry is None:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return entry[0]


class c_nvmlMemory_t(_PrintableStructure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlUtilization_t(_PrintableStructure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class nvmlPciInfo_t(_PrintableStructure):
    _fields_ = [
        ("busIdLegacy", c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE),
    ]


class c_nvmlProcessInfo_v2_t(_PrintableStructure):
    _fields_ = [
        ("pid", c_uint),
        ("usedGpuMemory", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


c_nvmlProcessInfo_v3_t = c_nvmlProcessInfo_v2_t
c_nvmlProcessInfo_t = c_nvmlProcessInfo_v3_t


class nvmlFriendlyObject(object):
    def __init__(self, dictionary):
        for key in dictionary:
            setattr(self, key, dictionary[key])

    def __str__(self):
        return self.__dict__.__str__()


def nvmlStructToFriendlyObject(struct):
    data = {}
    for field in struct._fields_:
        value = getattr(struct, field[0])
        data[field[0]] = value.decode() if isinstance(value, bytes) else value
    return nvmlFriendlyObject(data)


class c_nvmlGpuInstancePlacement_t(Structure):
    _fields_ = [("start", c_uint), ("size", c_uint)]


class c_nvmlGpuInstanceProfileInfo_t(Structure):
    _fields_ = [("id", c_uint), ("isP2pSupported", c_uint), ("sliceCount", c_uint),
                ("instanceCount", c_uint), ("multiprocessorCount", c_uint),
                ("copyEngineCount", c_uint), ("decoderCount", c_uint), ("encoderCount", c_uint),
                ("jpegCount", c_uint), ("ofaCount", c_uint), ("memorySizeMB", c_ulonglong)]


class c_nvmlGpuInstanceProfileInfo_v2_t(_PrintableStructure):
    _fields_ = [("version", c_uint), ("id", c_uint), ("isP2pSupported", c_uint),
                ("sliceCount", c_uint), ("instanceCount", c_uint),
                ("multiprocessorCount", c_uint), ("copyEngineCount", c_uint),
                ("decoderCount", c_uint), ("encoderCount", c_uint), ("jpegCount", c_uint),
                ("ofaCount", c_uint), ("memorySizeMB", c_ulonglong),
                ("name", c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE)]

    def __init__(self):
        super(c_nvmlGpuInstanceProfileInfo_v2_t, self).__init__(version=nvmlGpuInstanceProfileInfo_v2)


class c_nvmlGpuInstanceInfo_t(Structure):
    _fields_ = [("device", c_nvmlDevice_t), ("id", c_uint), ("profileId", c_uint),
                ("placement", c_nvmlGpuInstancePlacement_t)]


class c_nvmlComputeInstancePlacement_t(Structure):
    _fields_ = [("start", c_uint), ("size", c_uint)]


class c_nvmlComputeInstanceProfileInfo_v2_t(_PrintableStructure):
    _fields_ = [("version", c_uint), ("id", c_uint), ("sliceCount", c_uint),
                ("instanceCount", c_uint), ("multiprocessorCount", c_uint),
                ("sharedCopyEngineCount", c_uint), ("sharedDecoderCount", c_uint),
                ("sharedEncoderCount", c_uint), ("sharedJpegCount", c_uint),
                ("sharedOfaCount", c_uint), ("name", c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE)]

    def __init__(self):
        super(c_nvmlComputeInstanceProfileInfo_v2_t, self).__init__(version=nvmlComputeInstanceProfileInfo_v2)


class c_nvmlComputeInstanceInfo_t(Structure):
    _fields_ = [("device", c_nvmlDevice_t), ("gpuInstance", c_nvmlGpuInstance_t), ("id", c_uint),
                ("profileId", c_uint), ("placement", c_nvmlComputeInstancePlacement_t)]


class c_nvmlGpuFabricInfo_v2_t(_PrintableStructure):
    _fields_ = [("version", c_uint), ("clusterUuid", c_uint8 * NVML_GPU_FABRIC_UUID_LEN),
                ("status", c_uint), ("cliqueId", c_uint32), ("state", c_uint), ("healthMask", c_uint32)]

    def __init__(self):
        super(c_nvmlGpuFabricInfo_v2_t, self).__init__(version=nvmlGpuFabricInfo_v2)


c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfo_v2_t


# --- state file -------------------------------------------------------------------------------

class FakeStateError(RuntimeError):
    """A helper was asked for something the fake GPUs cannot do (the message says why)."""


def _state_path():
    return os.environ.get(STATE_ENV) or None


@contextlib.contextmanager
def _locked(path, exclusive):
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load_state(path=None):
    path = path or _state_path()
    with _locked(path, exclusive=False):
        with open(path) as handle:
            return json.load(handle)


# The last state file read by this process: (path, its bytes, the parsed state). A real NVML
# call costs microseconds; re-parsing the JSON on each of the few hundred calls of one gather
# made the simulated nodes spend most of a read-only module run in this file. The bytes are read
# on every call, under the lock as before, so a change by any writer (atomic or not, in this
# process or another) is seen by the next call exactly as without the cache.
_parsed = (None, None, None)


def _load_shared(path):
    """The state at ``path`` as load_state reads it, parsed once per distinct content.

    The object is shared between calls: callers only read it (``_mutate`` parses its own copy).
    """
    global _parsed
    with _locked(path, exclusive=False):
        with open(path, "rb") as handle:
            raw = handle.read()
    cached_path, cached_raw, cached_state = _parsed
    if cached_path == path and cached_raw == raw:
        return cached_state
    state = json.loads(raw)
    _parsed = (path, raw, state)
    return state


def _write(path, state):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nvml-state-", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
        handle.write("\n")
    try:
        # Keep the state file's mode (mkstemp makes 0600): it stands for the GPU, not a new file.
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    except FileNotFoundError:
        pass
    os.replace(tmp, path)


def save_state(state, path=None):
    path = path or _state_path()
    with _locked(path, exclusive=True):
        _write(path, state)


@contextlib.contextmanager
def mutate_state(path=None):
    """Read-modify-write the state under one exclusive lock."""
    path = path or _state_path()
    with _locked(path, exclusive=True):
        with open(path) as handle:
            state = json.load(handle)
        before = json.dumps(state, sort_keys=True)
        yield state
        # A call that changed nothing leaves the file as it was (a read never touches the GPU).
        if json.dumps(state, sort_keys=True) != before:
            _write(path, state)


def _model_spec(key):
    """Build the per-model table from the GPU catalog (only helpers need the catalog)."""
    try:
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
    except ImportError:
        # This file is roles/fake_gpu_node/files/python/ of the collection: seven levels up is the
        # folder that holds ansible_collections/ (site-packages, or the repository's collections/).
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 7))
        sys.path.insert(0, root)
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
    model = catalog.get(key)
    major, minor = (int(x) for x in model.compute_capability.split("."))
    spec = {
        "name": model.smi_names[0],
        "pci_device_id": model.pci_device_ids[0],
        "memory_mib": model.memory_mib,
        "compute_capability": [major, minor],
        "architecture": model.architecture,
        "mig": None,
    }
    if model.mig:
        spec["mig"] = {
            "compute_slices": model.mig.compute_slices,
            "memory_slices": model.mig.memory_slices,
            "profiles": [{
                "enum": p.gi_enum,
                "id": p.gi_profile_id,
                # NVML's v2 profile name carries a "MIG " prefix (UNVERIFIED on hardware).
                "name": "MIG " + p.name,
                "slice_count": p.compute_slices,
                "instance_count": p.max_count,
                "memory_mb": int(round(p.memory_gib * 1024)),
                "placements": [[s, z] for s, z in p.placements],
            } for p in model.mig.profiles.values()],
        }
        for prof in spec["mig"]["profiles"]:
            reported = _REPORTED_INSTANCE_COUNTS.get(key, {}).get(prof["name"][4:])
            if reported is not None:
                prof["reported_instance_count"] = reported
    return spec


# What the driver's profile info reports as instanceCount where it differs from what the driver
# lets you create. NVIDIA/mig-parted v0.15.0 pkg/mig/discovery/discovery.go hard-codes the A30
# profiles "due to NVML bug where GetGpuInstanceProfileInfo returns incorrect InstanceCount
# values" without saying which values; the ones below are UNVERIFIED: the +me counts follow
# mig-parted commit 9bb73fdd (2023), which corrected config-default.yaml's 2g.12gb+me from 2 to
# 1, as a driver counting placements and not the one media engine would report them.
_REPORTED_INSTANCE_COUNTS = {"A30": {"1g.6gb+me": 4, "2g.12gb+me": 2}}


def add_profile(state, model, enum, profile_id, name, slice_count, memory_mb, placements, instance_count=1):
    """A GPU-instance profile beyond the catalog's (GFX, -me, +me.all variants that newer
    drivers offer and other tools may use). Their ids are the test's choice (UNVERIFIED)."""
    state["models"][model]["mig"]["profiles"].append({
        "enum": enum, "id": profile_id, "name": "MIG " + name, "slice_count": slice_count,
        "instance_count": instance_count, "memory_mb": memory_mb, "placements": [list(p) for p in placements]})


def new_state(gpus=(), numa_nodes=1, driver_version="550.54.15", cuda_driver_version=12040,
              driver="loaded", nvlink=None):
    """A node's state: ``gpus`` is [(catalog model key, count), ...], in index order.

    GPUs are spread over ``numa_nodes`` in order (first half on node 0, ...). ``driver`` is
    "loaded", "not_loaded" (library present, kernel module missing) or "absent". ``nvlink``:
    None (PCIe only), "nvswitch" (every GPU's NVLinks go to the baseboard's NVSwitches, as on
    HGX/DGX A100 and H100) or "pairs" (NVLink bridges join GPU 0 with 1, 2 with 3, ...).
    """
    if nvlink not in (None, "nvswitch", "pairs"):
        raise FakeStateError("nvlink must be None, 'nvswitch' or 'pairs', got %r" % (nvlink,))
    state = {"driver": driver, "driver_version": driver_version,
             "cuda_driver_version": cuda_driver_version, "models": {}, "gpus": []}
    if nvlink:
        state["nvlink"] = {"kind": nvlink}
    keys = []
    for key, count in gpus:
        if key not in state["models"]:
            state["models"][key] = _model_spec(key)
        keys.extend([key] * count)
    for index, key in enumerate(keys):
        spec = state["models"][key]
        state["gpus"].append({
            "index": index,
            "model": key,
            "uuid": "GPU-%s" % _uuid.uuid5(_uuid.NAMESPACE_URL, "gpuprov-fake/%d/%s" % (index, key)),
            "pci_bus_id": "00000000:%02X:00.0" % (0x07 + 0x10 * index),
            "numa_node": (index * numa_nodes) // max(len(keys), 1),
            "mig_current": False if spec["mig"] else None,
            "mig_pending": False if spec["mig"] else None,
            "compute_mode": NVML_COMPUTEMODE_DEFAULT,
            "persistence_mode": False,
            "utilization_gpu": 0,
            "gpu_instances": [],
            "processes": [],
            "lost": False,
        })
    return state


def write_new_state(path, **kwargs):
    state = new_state(**kwargs)
    save_state(state, path)
    return state


def add_process(state, index, pid, used_memory_mib, gpu_instance_id=None):
    """A compute process on GPU ``index`` (inside GPU instance ``gpu_instance_id`` under MIG)."""
    gpu = state["gpus"][index]
    proc = {"pid": pid, "used_memory_mib": used_memory_mib}
    if gpu_instance_id is not None:
        gi = _find_gi(gpu, gpu_instance_id)
        if gi is None:
            raise FakeStateError("GPU %d has no GPU instance %d" % (index, gpu_instance_id))
        proc["gpu_instance_id"] = gpu_instance_id
        proc["compute_instance_id"] = gi["compute_instances"][0]["id"] if gi["compute_instances"] else 0
    gpu["processes"].append(proc)
    return proc


def set_mig_mode(state, index, enabled):
    """Put MIG mode in effect directly (as after a completed reset or reboot)."""
    gpu = state["gpus"][index]
    if gpu["mig_current"] is None:
        raise FakeStateError("GPU %d (%s) has no MIG" % (index, gpu["model"]))
    gpu["mig_current"] = gpu["mig_pending"] = bool(enabled)
    if not enabled:
        gpu["gpu_instances"] = []


def create_instances(state, index, instances):
    """Create GPU instances (each with one full compute instance) at explicit placements.

    ``instances``: [(profile name as in the catalog, start), ...]. Returns the new GI ids.
    """
    gpu = state["gpus"][index]
    ids = []
    for name, start in instances:
        prof = _profile_by_name(state, gpu, name)
        size = dict((s, z) for s, z in prof["placements"])[start]
        gi = _create_gi(state, gpu, prof, start, size)
        _create_ci(state, gpu, gi, _full_ci_enum(prof))
        ids.append(gi["id"])
    return ids


def _pid_alive(pid):
    """Whether a process still exists; a zombie has closed its files, so it holds nothing."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % int(pid)) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError, IndexError):
        return True


def _unit_active(unit):
    """Whether the fake systemctl (roles/fake_gpu_node/files/bin/systemctl) has ``unit`` active."""
    path = os.environ.get("GPUPROV_FAKE_SYSTEMD_STATE")
    if not path or not os.path.exists(path):
        return False
    try:
        with open(path) as handle:
            units = json.load(handle).get("units", {})
    except ValueError:
        return False
    return bool(units.get(unit, {}).get("active"))


def gpu_holders(state, index, caller_pid=None, smi_reset=False):
    """What holds GPU ``index`` open, as descriptions; empty when a reset may go ahead.

    nvidia-smi(1) -r: "There can't be any applications using these devices (e.g. CUDA
    application, graphics application like X server, monitoring application like other
    instance of nvidia-smi)"; the DGX A100 User Guide ("Multi-Instance GPU") stops nvsm and
    dcgm before `nvidia-smi -mig 1`. NVML itself opens every GPU in nvmlInit until nvmlShutdown
    (nvml.h: nvmlShutdown "Shut down NVML by releasing all GPU resources previously allocated
    with nvmlInit"). So the holders are: compute processes, every live process with an NVML
    session (the caller's own too, unless ``caller_pid`` is the one asking for the reset, as
    nvidia-smi is), and the ``holders`` of the state: ``{"name", "unit"}`` holds while the fake
    systemctl has the unit active (nvidia-dcgm, nvsm, ...), ``{"name", "pid"}`` while the
    process lives (a device-plugin pod). A holder with ``gpus`` holds only those indices.

    nvidia-persistenced (a holder with ``"persistence": true``) holds the GPU against the
    driver's own reset inside nvmlDeviceSetMigMode (NVIDIA/gpu-operator#118: `nvidia-smi -mig`
    stayed pending "In use by another client" while only the daemon held the GPU), but not
    against ``nvidia-smi -r`` (``smi_reset``) when nvidia-smi reaches the daemon's ``socket``:
    nvidia-smi then has the daemon let go of the GPUs it resets and take them back afterwards
    (gpu-operator#118, 2021-04-06: the reset works once /run/nvidia-persistenced is shared;
    NVIDIA/NVSentinel#1243: "nvidia-smi --gpu-reset ... will automatically detect if persistence
    mode is enabled ... and handle disabling and enabling it ... as long as the
    /run/nvidia-persistenced is available"; mig-parted v0.13.1 deployments/container/Dockerfile
    links /var/run to /run for it). A persistence holder without ``socket``, or whose socket
    path does not exist, holds against ``nvidia-smi -r`` too, as in a container without it.
    """
    gpu = state["gpus"][index]
    found = ["process %s" % p["pid"] for p in gpu.get("processes", [])]
    for pid in state.get("nvml_clients", []):
        if pid != caller_pid and _pid_alive(pid):
            found.append("NVML client pid %s" % pid)
    for holder in state.get("holders", []):
        if "gpus" in holder and index not in holder["gpus"]:
            continue
        if smi_reset and holder.get("persistence") and holder.get("socket") and os.path.exists(holder["socket"]):
            continue
        if holder.get("unit") and _unit_active(holder["unit"]):
            found.append("%s (%s)" % (holder.get("name", holder["unit"]), holder["unit"]))
        elif holder.get("pid") and _pid_alive(holder["pid"]):
            found.append("%s (pid %s)" % (holder.get("name", "process"), holder["pid"]))
    return found


def reset_gpu(state, index, caller_pid=None):
    """What ``nvidia-smi -r`` does: pending MIG mode applies, instances go. Raises when busy."""
    gpu = state["gpus"][index]
    if gpu.get("lost"):
        raise FakeStateError("GPU %s is lost" % gpu["pci_bus_id"])
    holders = gpu_holders(state, index, caller_pid=os.getpid() if caller_pid is None else caller_pid,
                          smi_reset=True)
    if holders:
        raise FakeStateError("GPU %s: In use by another client (%s)" % (gpu["pci_bus_id"], ", ".join(holders)))
    if gpu.get("passthrough"):
        raise FakeStateError("Resetting GPU %s is not supported." % gpu["pci_bus_id"])
    if gpu["mig_current"] is not None:
        gpu["mig_current"] = gpu["mig_pending"]
    gpu["gpu_instances"] = []
    gpu["compute_mode"] = NVML_COMPUTEMODE_DEFAULT


def reboot(state):
    """A node reboot: GPU/compute instances never survive; Hopper+ MIG mode does not either,
    Ampere keeps (and applies a pending) mode from its InfoROM. Processes are gone."""
    for gpu in state["gpus"]:
        spec = state["models"][gpu["model"]]
        gpu["gpu_instances"] = []
        gpu["processes"] = []
        gpu["compute_mode"] = NVML_COMPUTEMODE_DEFAULT
        if gpu["mig_current"] is None:
            continue
        if spec["architecture"] == "ampere":
            gpu["mig_current"] = gpu["mig_pending"]
        else:
            gpu["mig_current"] = gpu["mig_pending"] = False


# --- internals --------------------------------------------------------------------------------

_init_count = 0


def _raise(code):
    raise NVMLError(code)


def _require_root():
    """nvml.h marks MIG management, placements, instance listing and mode changes "Requires
    privileged user" / "Requires root/admin permissions": others get NO_PERMISSION."""
    if os.geteuid() != 0:
        _raise(NVML_ERROR_NO_PERMISSION)


def _read():
    if _init_count <= 0:
        _raise(NVML_ERROR_UNINITIALIZED)
    path = _state_path()
    if not path or not os.path.exists(path):
        # The driver went away after nvmlInit: every call fails like an unloaded driver.
        _raise(NVML_ERROR_DRIVER_NOT_LOADED)
    return _load_shared(path)


@contextlib.contextmanager
def _mutate():
    if _init_count <= 0:
        _raise(NVML_ERROR_UNINITIALIZED)
    path = _state_path()
    if not path or not os.path.exists(path):
        _raise(NVML_ERROR_DRIVER_NOT_LOADED)
    with mutate_state(path) as state:
        yield state


def _deref(ref):
    """What a ctypes byref()/pointer argument points at (a plain object passes through)."""
    if hasattr(ref, "_obj"):
        return ref._obj
    if hasattr(ref, "contents"):
        return ref.contents
    return ref


class _Dev(object):
    def __init__(self, what):
        self.index, self.gi, self.ci = what


def _dev(handle):
    what = _handle_target(handle)
    if what[0] != "device":
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return _Dev(what[1:])


def _gpu(state, handle, allow_mig_device=False):
    dev = _dev(handle)
    if dev.index >= len(state["gpus"]):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    gpu = state["gpus"][dev.index]
    if gpu.get("lost"):
        _raise(NVML_ERROR_GPU_IS_LOST)
    if dev.gi != _NO_ID and not allow_mig_device:
        # Most device queries are not valid on a MIG device handle.
        _raise(NVML_ERROR_NOT_SUPPORTED)
    return gpu


def _spec(state, gpu):
    return state["models"][gpu["model"]]


def _mig_spec(state, gpu, need_enabled=True):
    spec = _spec(state, gpu)["mig"]
    if spec is None:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    if need_enabled and not gpu["mig_current"]:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    return spec


def _profile_by_enum(state, gpu, enum, need_enabled=True):
    if not 0 <= enum < NVML_GPU_INSTANCE_PROFILE_COUNT:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    for prof in _mig_spec(state, gpu, need_enabled)["profiles"]:
        if prof["enum"] == enum:
            return prof
    _raise(NVML_ERROR_NOT_SUPPORTED)


def _profile_by_id(state, gpu, profile_id, need_enabled=True):
    for prof in _mig_spec(state, gpu, need_enabled)["profiles"]:
        if prof["id"] == profile_id:
            return prof
    _raise(NVML_ERROR_INVALID_ARGUMENT)


def _profile_info_needs_mig(state):
    """Current drivers answer profile info with MIG mode off; older ones answered NOT_SUPPORTED
    (nvml.h ...ProfileInfoV still lists "If device doesn't have MIG mode enabled"): the state's
    ``profile_info_needs_mig`` plays such a driver."""
    return bool(state.get("profile_info_needs_mig"))


def _profile_by_name(state, gpu, name):
    spec = _spec(state, gpu)["mig"]
    if spec is None:
        raise FakeStateError("GPU %d (%s) has no MIG" % (gpu["index"], gpu["model"]))
    for prof in spec["profiles"]:
        if prof["name"] in (name, "MIG " + name):
            return prof
    raise FakeStateError("GPU %d (%s) has no MIG profile %s" % (gpu["index"], gpu["model"], name))


def _find_gi(gpu, gi_id):
    for gi in gpu["gpu_instances"]:
        if gi["id"] == gi_id:
            return gi
    return None


def _mask(start, size):
    return ((1 << size) - 1) << start


def _create_gi(state, gpu, prof, start, size):
    """Create a GPU instance, or raise as NVML does when it does not fit."""
    if not gpu["mig_current"]:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    if [start, size] not in [list(p) for p in prof["placements"]]:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    same = [gi for gi in gpu["gpu_instances"] if gi["profile_id"] == prof["id"]]
    if len(same) >= prof["instance_count"]:
        _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)
    used = 0
    used_compute = 0
    spec = _mig_spec(state, gpu)
    for gi in gpu["gpu_instances"]:
        used |= _mask(gi["placement"]["start"], gi["placement"]["size"])
        used_compute += _profile_by_id(state, gpu, gi["profile_id"])["slice_count"]
    if used & _mask(start, size) or used_compute + prof["slice_count"] > spec["compute_slices"]:
        _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)
    # Failure injection: ``fail_create_after`` creates succeed, then ``fail_create_count`` fail.
    after = gpu.get("fail_create_after")
    if after is not None:
        if after > 0:
            gpu["fail_create_after"] = after - 1
        else:
            code = gpu.get("fail_create_code", NVML_ERROR_INSUFFICIENT_RESOURCES)
            left = gpu.get("fail_create_count", 1) - 1
            if left > 0:
                gpu["fail_create_count"] = left
            else:
                for key in ("fail_create_after", "fail_create_count", "fail_create_code"):
                    gpu.pop(key, None)
            raise _DeferredError(code)
    # GI ids: real NVML derives them from the placement; any unique small number will do
    # here because callers must not rely on them.
    taken = set(gi["id"] for gi in gpu["gpu_instances"])
    gi_id = 1
    while gi_id in taken:
        gi_id += 1
    gi = {"id": gi_id, "profile_id": prof["id"], "placement": {"start": start, "size": size},
          "compute_instances": []}
    gpu["gpu_instances"].append(gi)
    gpu["gpu_instances"].sort(key=lambda g: g["id"])
    return gi


class _DeferredError(Exception):
    """An injected failure: the hook's bookkeeping must still be saved before raising."""

    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


def _full_ci_enum(prof):
    for enum, slices in _CI_SLICES.items():
        if slices == prof["slice_count"]:
            return enum
    _raise(NVML_ERROR_NOT_SUPPORTED)


def _ci_profiles_of(state, gpu, gi):
    """CI profiles a GI supports: every standard size up to the GI's compute slices."""
    # (Real GIs skip some sizes, e.g. no 3c on a 4g; only the full-size CI matters here.)
    slices = _profile_by_id(state, gpu, gi["profile_id"])["slice_count"]
    result = {}
    for enum, size in _CI_SLICES.items():
        if size <= slices:
            result[enum] = {"id": enum, "slice_count": size, "instance_count": slices // size}
    return slices, result


def _create_ci(state, gpu, gi, enum):
    slices, profiles = _ci_profiles_of(state, gpu, gi)
    prof = profiles.get(enum)
    if prof is None:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    used = 0
    for ci in gi["compute_instances"]:
        used |= _mask(ci["placement"]["start"], ci["placement"]["size"])
    for start in range(0, slices - prof["slice_count"] + 1, prof["slice_count"]):
        if not used & _mask(start, prof["slice_count"]):
            break
    else:
        _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)
    taken = set(ci["id"] for ci in gi["compute_instances"])
    ci_id = 0
    while ci_id in taken:
        ci_id += 1
    ci = {"id": ci_id, "profile_id": prof["id"], "placement": {"start": start, "size": prof["slice_count"]}}
    gi["compute_instances"].append(ci)
    return ci


def _device_handle(index, gi=_NO_ID, ci=_NO_ID):
    return _new_handle(c_nvmlDevice_t, ("device", index, gi, ci))


def _gi_handle(index, gi_id):
    return _new_handle(c_nvmlGpuInstance_t, ("gi", index, gi_id))


def _gi_of(state, gi_handle):
    if not gi_handle:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    kind, index, gi_id = _handle_target(gi_handle)
    if kind != "gi":
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if index >= len(state["gpus"]):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    gpu = state["gpus"][index]
    if gpu.get("lost"):
        _raise(NVML_ERROR_GPU_IS_LOST)
    _mig_spec(state, gpu)
    gi = _find_gi(gpu, gi_id)
    if gi is None:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return gpu, gi


def _mig_devices(gpu):
    """MIG devices (one per compute instance), in the driver's enumeration order."""
    result = []
    for gi in sorted(gpu["gpu_instances"], key=lambda g: g["id"]):
        for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
            result.append((gi, ci))
    return result


def _proc_struct(proc, mig):
    info = c_nvmlProcessInfo_v3_t()
    info.pid = proc["pid"]
    info.usedGpuMemory = int(proc["used_memory_mib"]) * 1024 * 1024
    info.gpuInstanceId = proc.get("gpu_instance_id", _NO_ID) if mig else _NO_ID
    info.computeInstanceId = proc.get("compute_instance_id", _NO_ID) if mig else _NO_ID
    return nvmlStructToFriendlyObject(info)


# --- library lifecycle ------------------------------------------------------------------------

def _release_compute_modes():
    """The driver tears a GPU's state down when its last client leaves, unless persistence
    mode is on (nvidia-smi docs, "Persistence Mode": without it "the driver is unloaded" and
    settings such as the compute mode are lost when no client is attached). Held open by
    nvidia-persistenced (a holder unit) counts as a client."""
    with mutate_state() as state:
        for gpu in state["gpus"]:
            if gpu.get("persistence_mode") or gpu.get("lost"):
                continue
            if not gpu_holders(state, gpu["index"]):
                gpu["compute_mode"] = NVML_COMPUTEMODE_DEFAULT


def nvmlInitWithFlags(flags):
    global _init_count
    path = _state_path()
    if not path or not os.path.exists(path):
        _raise(NVML_ERROR_LIBRARY_NOT_FOUND)
    driver = _load_shared(path).get("driver", "loaded")
    if driver == "absent":
        _raise(NVML_ERROR_LIBRARY_NOT_FOUND)
    if driver == "not_loaded":
        _raise(NVML_ERROR_DRIVER_NOT_LOADED)
    if _init_count == 0:
        # The process now holds every GPU open until nvmlShutdown (see gpu_holders).
        with mutate_state(path) as state:
            clients = state.setdefault("nvml_clients", [])
            if os.getpid() not in clients:
                clients.append(os.getpid())
    _init_count += 1


def nvmlInit():
    nvmlInitWithFlags(0)


def nvmlShutdown():
    global _init_count
    if _init_count <= 0:
        _raise(NVML_ERROR_UNINITIALIZED)
    _init_count -= 1
    path = _state_path()
    if _init_count == 0 and path and os.path.exists(path):
        with mutate_state(path) as state:
            state["nvml_clients"] = [pid for pid in state.get("nvml_clients", []) if pid != os.getpid()]
            if not state["nvml_clients"]:
                del state["nvml_clients"]
        _release_compute_modes()


# --- system -----------------------------------------------------------------------------------

def nvmlSystemGetDriverVersion():
    return _read()["driver_version"]


def nvmlSystemGetCudaDriverVersion():
    return _read()["cuda_driver_version"]


def nvmlSystemGetCudaDriverVersion_v2():
    return _read()["cuda_driver_version"]


def nvmlDeviceGetCount():
    return len(_read()["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    state = _read()
    if not 0 <= int(index) < len(state["gpus"]):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if state["gpus"][index].get("lost"):
        _raise(NVML_ERROR_GPU_IS_LOST)
    return _device_handle(int(index))


def nvmlDeviceGetHandleByPciBusId(pciBusId):
    if isinstance(pciBusId, bytes):
        pciBusId = pciBusId.decode()
    state = _read()
    for gpu in state["gpus"]:
        if gpu["pci_bus_id"].lower() == pciBusId.lower():
            if gpu.get("lost"):
                _raise(NVML_ERROR_GPU_IS_LOST)
            return _device_handle(gpu["index"])
    _raise(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetHandleByUUID(uuid):
    if isinstance(uuid, bytes):
        uuid = uuid.decode()
    state = _read()
    for gpu in state["gpus"]:
        if gpu["uuid"] == uuid:
            if gpu.get("lost"):
                _raise(NVML_ERROR_GPU_IS_LOST)
            return _device_handle(gpu["index"])
    _raise(NVML_ERROR_NOT_FOUND)


# --- device queries ---------------------------------------------------------------------------

def nvmlDeviceGetIndex(handle):
    return _gpu(_read(), handle)["index"]


def nvmlDeviceGetName(handle):
    state = _read()
    gpu = _gpu(state, handle, allow_mig_device=True)
    name = _spec(state, gpu)["name"]
    dev = _dev(handle)
    if dev.gi != _NO_ID:
        gi = _find_gi(gpu, dev.gi)
        if gi is None:
            _raise(NVML_ERROR_INVALID_ARGUMENT)
        name = "%s %s" % (name, _profile_by_id(state, gpu, gi["profile_id"])["name"])
    return name


def nvmlDeviceGetUUID(handle):
    state = _read()
    gpu = _gpu(state, handle, allow_mig_device=True)
    dev = _dev(handle)
    if dev.gi != _NO_ID:
        return "MIG-%s" % _uuid.uuid5(_uuid.NAMESPACE_URL, "%s/%d/%d" % (gpu["uuid"], dev.gi, dev.ci))
    return gpu["uuid"]


def nvmlDeviceGetPciInfo_v3(handle):
    state = _read()
    gpu = _gpu(state, handle)
    info = nvmlPciInfo_t()
    bus_id = gpu["pci_bus_id"].encode()
    domain, bus, devfn = gpu["pci_bus_id"].split(":")
    info.busId = bus_id
    info.busIdLegacy = ("%s:%s:%s" % (domain[-4:], bus, devfn)).encode()
    info.domain = int(domain, 16)
    info.bus = int(bus, 16)
    info.device = int(devfn.split(".")[0], 16)
    # The 32-bit PCI id: device id in the high half, NVIDIA's vendor id 0x10DE in the low half.
    info.pciDeviceId = (_spec(state, gpu)["pci_device_id"] << 16) | 0x10DE
    info.pciSubSystemId = 0x10DE << 16
    return info


def nvmlDeviceGetPciInfo(handle):
    return nvmlDeviceGetPciInfo_v3(handle)


def nvmlDeviceGetCudaComputeCapability(handle):
    state = _read()
    major, minor = _spec(state, _gpu(state, handle, allow_mig_device=True))["compute_capability"]
    return (major, minor)


def nvmlDeviceGetNumaNodeId(handle):
    return _gpu(_read(), handle)["numa_node"]


def nvmlDeviceGetMemoryInfo(handle, version=None):
    state = _read()
    gpu = _gpu(state, handle, allow_mig_device=True)
    dev = _dev(handle)
    procs = gpu["processes"]
    total_mib = _spec(state, gpu)["memory_mib"]
    if dev.gi != _NO_ID:
        gi = _find_gi(gpu, dev.gi)
        if gi is None:
            _raise(NVML_ERROR_INVALID_ARGUMENT)
        total_mib = _profile_by_id(state, gpu, gi["profile_id"])["memory_mb"]
        procs = [p for p in procs if p.get("gpu_instance_id") == dev.gi]
    used = sum(int(p["used_memory_mib"]) for p in procs) * 1024 * 1024
    info = c_nvmlMemory_t()
    info.total = total_mib * 1024 * 1024
    info.used = used
    info.free = max(info.total - used, 0)
    return info


def nvmlDeviceGetUtilizationRates(handle):
    state = _read()
    gpu = _gpu(state, handle)
    if gpu["mig_current"]:
        # NVML reports no utilization for a MIG-enabled GPU.
        _raise(NVML_ERROR_NOT_SUPPORTED)
    util = c_nvmlUtilization_t()
    util.gpu = gpu.get("utilization_gpu", 0)
    util.memory = 0
    return util


def nvmlDeviceGetComputeRunningProcesses_v3(handle):
    """Processes on a GPU or on one MIG device.

    On a MIG-enabled GPU's own handle NVML returns the aggregate of all its instances (with
    gpuInstanceId/computeInstanceId set); a MIG device handle returns only its instance's.
    Outside MIG both ids read 0xFFFFFFFF.
    """
    state = _read()
    gpu = _gpu(state, handle, allow_mig_device=True)
    dev = _dev(handle)
    mig = bool(gpu["mig_current"])
    procs = gpu["processes"]
    if dev.gi != _NO_ID:
        procs = [p for p in procs if p.get("gpu_instance_id") == dev.gi
                 and p.get("compute_instance_id", dev.ci) == dev.ci]
    return [_proc_struct(p, mig) for p in procs]


def nvmlDeviceGetComputeRunningProcesses(handle):
    return nvmlDeviceGetComputeRunningProcesses_v3(handle)


def _compute_mode_target(state, handle):
    """The dict that holds a handle's compute mode: the GPU, or the compute instance of a MIG
    device. nvml.h nvmlDeviceGetComputeMode/nvmlDeviceSetComputeMode: "If MIG is enabled on a
    GPU, device must be MIG device handle"; the parent handle of such a GPU is refused with
    NOT_SUPPORTED (which code the driver gives is UNVERIFIED)."""
    gpu = _gpu(state, handle, allow_mig_device=True)
    dev = _dev(handle)
    if dev.gi == _NO_ID:
        if gpu["mig_current"]:
            _raise(NVML_ERROR_NOT_SUPPORTED)
        return gpu, gpu
    gi = _find_gi(gpu, dev.gi)
    for ci in (gi or {}).get("compute_instances", []):
        if ci["id"] == dev.ci:
            return gpu, ci
    _raise(NVML_ERROR_INVALID_ARGUMENT)  # the MIG device is gone


def nvmlDeviceGetComputeMode(handle):
    _gpu_dict, target = _compute_mode_target(_read(), handle)
    return target.get("compute_mode", NVML_COMPUTEMODE_DEFAULT)


def nvmlDeviceSetComputeMode(handle, mode):
    mode = int(getattr(mode, "value", mode))
    with _mutate() as state:
        gpu, target = _compute_mode_target(state, handle)
        _require_root()  # nvml.h: "Requires root/admin permissions."
        if mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD:
            _raise(NVML_ERROR_NOT_SUPPORTED)
        if mode not in (NVML_COMPUTEMODE_DEFAULT, NVML_COMPUTEMODE_PROHIBITED,
                        NVML_COMPUTEMODE_EXCLUSIVE_PROCESS):
            _raise(NVML_ERROR_INVALID_ARGUMENT)
        if target is not gpu and mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
            # nvidia-smi: "Setting compute mode to EXCLUSIVE_PROCESS is not supported on a
            # MIG-enabled device. ... Not Supported" (NVIDIA/DCGM#82); the same answer on the
            # MIG device handle is UNVERIFIED.
            _raise(NVML_ERROR_NOT_SUPPORTED)
        target["compute_mode"] = mode


def nvmlDeviceGetPersistenceMode(handle):
    state = _read()
    gpu = _gpu(state, handle)
    # nvidia-persistenced keeps persistence mode on while it runs (its man page).
    return int(bool(gpu.get("persistence_mode")) or
               any(h.get("persistence") and h.get("unit") and _unit_active(h["unit"])
                   for h in state.get("holders", [])))


def nvmlDeviceSetPersistenceMode(handle, mode):
    mode = int(mode)
    if mode not in (NVML_FEATURE_DISABLED, NVML_FEATURE_ENABLED):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    with _mutate() as state:
        gpu = _gpu(state, handle)
        _require_root()  # nvml.h: "Requires root/admin permissions."
        gpu["persistence_mode"] = bool(mode)


# --- MIG mode ---------------------------------------------------------------------------------

def nvmlDeviceGetMigMode(device):
    state = _read()
    gpu = _gpu(state, device)
    _mig_spec(state, gpu, need_enabled=False)
    return [int(bool(gpu["mig_current"])), int(bool(gpu["mig_pending"]))]


def nvmlDeviceSetMigMode(device, mode):
    """Returns the activation status (NVML_SUCCESS, NVML_ERROR_IN_USE, ...), like NVML.

    Ampere: the driver resets the GPU itself and the change applies at once when nothing
    else holds the GPU (MIG User Guide: "the driver will attempt to reset the GPU"); while
    something does (see gpu_holders; the caller's own NVML session does not count) the change
    stays pending and the status is NVML_ERROR_IN_USE. Hopper+: no reset is needed; it applies
    at once unless compute processes run (IN_USE, UNVERIFIED for Hopper).
    In a VM with passthrough (``passthrough: true``) it stays pending with the GPU's
    ``passthrough_status``: NVML_ERROR_RESET_REQUIRED (default) or NVML_ERROR_NOT_SUPPORTED,
    both seen in the guide's VM example.
    Disabling MIG while GPU instances exist returns NVML_ERROR_IN_USE as the activation
    status and leaves the disable pending (nvml.h lists no IN_USE return for this call; that
    the driver keeps the change pending then is UNVERIFIED). A call on a GPU whose change is
    pending tries the activation again and reports its status anew.
    """
    mode = int(mode)
    if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    with _mutate() as state:
        gpu = _gpu(state, device)
        _mig_spec(state, gpu, need_enabled=False)
        _require_root()  # nvml.h: "Requires root user."
        wanted = bool(mode)
        if wanted == gpu["mig_current"] and wanted == gpu["mig_pending"]:
            return NVML_SUCCESS
        gpu["mig_pending"] = wanted
        if wanted == gpu["mig_current"]:
            # Cancelling a pending change needs no reset.
            return NVML_SUCCESS
        # From here on the call (re)tries to activate the pending mode: nvml.h "The caller of
        # this API is expected to idle the device and retry setting the mode".
        if gpu.get("passthrough"):
            return gpu.get("passthrough_status", NVML_ERROR_RESET_REQUIRED)
        if gpu["processes"] or (not wanted and gpu["gpu_instances"]):
            # A GPU busy with processes, or with GPU instances when leaving MIG, cannot be
            # unbound: "NVML_ERROR_IN_USE would be returned" in the activation status (the
            # return itself stays one of nvml.h's listed codes).
            return NVML_ERROR_IN_USE
        if _spec(state, gpu)["architecture"] == "ampere":
            if gpu_holders(state, gpu["index"], caller_pid=os.getpid()):
                return NVML_ERROR_IN_USE
            gpu["gpu_instances"] = []
            gpu["compute_mode"] = NVML_COMPUTEMODE_DEFAULT
        gpu["mig_current"] = wanted
        return NVML_SUCCESS


# --- GPU instances ----------------------------------------------------------------------------

def nvmlDeviceGetGpuInstanceProfileInfo(device, profile, version=2):
    state = _read()
    gpu = _gpu(state, device)
    prof = _profile_by_enum(state, gpu, int(profile), need_enabled=_profile_info_needs_mig(state))
    info = c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2 else c_nvmlGpuInstanceProfileInfo_t()
    info.id = prof["id"]
    info.isP2pSupported = 0
    info.sliceCount = prof["slice_count"]
    # What the driver reports, which is not always what it lets you create (the A30, above).
    info.instanceCount = prof.get("reported_instance_count", prof["instance_count"])
    info.multiprocessorCount = 14 * prof["slice_count"]
    info.copyEngineCount = prof["slice_count"]
    info.memorySizeMB = prof["memory_mb"]
    if version == 2:
        info.name = prof["name"]
    return info


nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo


def nvmlDeviceGetGpuInstanceProfileInfoById(device, profileId):
    state = _read()
    gpu = _gpu(state, device)
    prof = _profile_by_id(state, gpu, int(profileId), need_enabled=_profile_info_needs_mig(state))
    return nvmlDeviceGetGpuInstanceProfileInfo(device, prof["enum"])


def _fill(arrayRef, countRef, items, make):
    count = _deref(countRef)
    array = _deref(arrayRef) if arrayRef is not None else None
    if array is None:
        count.value = len(items)
        return
    if len(array) < len(items):
        count.value = len(items)
        _raise(NVML_ERROR_INSUFFICIENT_SIZE)
    for i, item in enumerate(items):
        array[i] = make(item)
    count.value = len(items)


def nvmlDeviceGetGpuInstancePossiblePlacements(device, profileId, placementsRef, countRef):
    """Python name without _v2, like nvidia-ml-py (which calls the _v2 C symbol)."""
    state = _read()
    gpu = _gpu(state, device)
    _require_root()  # nvml.h: "Requires privileged user."
    # nvml.h: "returns all the possible placements ... regardless of whether MIG is enabled or not".
    prof = _profile_by_id(state, gpu, int(profileId), need_enabled=False)
    _fill(placementsRef, countRef, prof["placements"],
          lambda p: c_nvmlGpuInstancePlacement_t(p[0], p[1]))
    return NVML_SUCCESS


def nvmlDeviceGetGpuInstanceRemainingCapacity(device, profileId):
    state = _read()
    gpu = _gpu(state, device)
    _require_root()  # nvml.h: "Requires privileged user."
    prof = _profile_by_id(state, gpu, int(profileId))
    used = 0
    compute = 0
    for gi in gpu["gpu_instances"]:
        used |= _mask(gi["placement"]["start"], gi["placement"]["size"])
        compute += _profile_by_id(state, gpu, gi["profile_id"])["slice_count"]
    same = sum(1 for gi in gpu["gpu_instances"] if gi["profile_id"] == prof["id"])
    free = [p for p in prof["placements"] if not used & _mask(p[0], p[1])]
    taken = 0
    mask = used
    for start, size in free:
        if not mask & _mask(start, size):
            mask |= _mask(start, size)
            taken += 1
    room = (_mig_spec(state, gpu)["compute_slices"] - compute) // prof["slice_count"]
    return max(0, min(taken, prof["instance_count"] - same, room))


def _create(device, profileId, placement):
    with _mutate() as state:
        gpu = _gpu(state, device)
        _require_root()  # nvml.h: "Requires privileged user."
        prof = _profile_by_id(state, gpu, int(profileId))
        if placement is None:
            # Without a placement the driver picks the first free one that fits.
            used = 0
            for gi in gpu["gpu_instances"]:
                used |= _mask(gi["placement"]["start"], gi["placement"]["size"])
            choice = next((p for p in prof["placements"] if not used & _mask(p[0], p[1])), None)
            if choice is None:
                _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)
            start, size = choice
        else:
            start, size = placement.start, placement.size
        try:
            gi = _create_gi(state, gpu, prof, start, size)
        except _DeferredError as err:
            failure = err.code
        else:
            return _gi_handle(gpu["index"], gi["id"])
    # The hook's bookkeeping was saved when the block above ended; now fail like the driver.
    _raise(failure)


def nvmlDeviceCreateGpuInstance(device, profileId):
    return _create(device, profileId, None)


def nvmlDeviceCreateGpuInstanceWithPlacement(device, profileId, placement):
    # nvidia-ml-py sets no argtypes here, so callers pass ctypes.byref(placement).
    return _create(device, profileId, _deref(placement))


def nvmlDeviceGetGpuInstances(device, profileId, gpuInstancesRef, countRef):
    state = _read()
    gpu = _gpu(state, device)
    _require_root()  # nvml.h: "Requires privileged user."
    prof = _profile_by_id(state, gpu, int(profileId))
    items = [gi for gi in gpu["gpu_instances"] if gi["profile_id"] == prof["id"]]
    _fill(gpuInstancesRef, countRef, items, lambda gi: _gi_handle(gpu["index"], gi["id"]))
    return NVML_SUCCESS


def nvmlDeviceGetGpuInstanceById(device, gpuInstanceId):
    state = _read()
    gpu = _gpu(state, device)
    _require_root()  # nvml.h: "Requires privileged user."
    _mig_spec(state, gpu)
    if _find_gi(gpu, int(gpuInstanceId)) is None:
        _raise(NVML_ERROR_NOT_FOUND)
    return _gi_handle(gpu["index"], int(gpuInstanceId))


def nvmlGpuInstanceGetInfo(gpuInstance):
    state = _read()
    gpu, gi = _gi_of(state, gpuInstance)
    info = c_nvmlGpuInstanceInfo_t()
    info.device = _device_handle(gpu["index"])
    info.id = gi["id"]
    info.profileId = gi["profile_id"]
    info.placement = c_nvmlGpuInstancePlacement_t(gi["placement"]["start"], gi["placement"]["size"])
    return info


def nvmlGpuInstanceDestroy(gpuInstance):
    with _mutate() as state:
        gpu, gi = _gi_of(state, gpuInstance)
        _require_root()  # nvml.h: "Requires privileged user."
        if gi["compute_instances"] or any(p.get("gpu_instance_id") == gi["id"] for p in gpu["processes"]):
            _raise(NVML_ERROR_IN_USE)
        gpu["gpu_instances"] = [g for g in gpu["gpu_instances"] if g["id"] != gi["id"]]
    return NVML_SUCCESS


# --- compute instances ------------------------------------------------------------------------

def nvmlGpuInstanceGetComputeInstanceProfileInfo(device, profile, engProfile, version=2):
    state = _read()
    gpu, gi = _gi_of(state, device)
    if int(engProfile) != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    if not 0 <= int(profile) < NVML_COMPUTE_INSTANCE_PROFILE_COUNT:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    _, profiles = _ci_profiles_of(state, gpu, gi)
    prof = profiles.get(int(profile))
    if prof is None:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    info = c_nvmlComputeInstanceProfileInfo_v2_t()
    info.id = prof["id"]
    info.sliceCount = prof["slice_count"]
    info.instanceCount = prof["instance_count"]
    info.multiprocessorCount = 14 * prof["slice_count"]
    info.name = "MIG %dc" % prof["slice_count"]
    return info


nvmlGpuInstanceGetComputeInstanceProfileInfoV = nvmlGpuInstanceGetComputeInstanceProfileInfo


def _ci_handle(index, gi_id, ci_id):
    return _new_handle(c_nvmlComputeInstance_t, ("ci", index, gi_id, ci_id))


def nvmlGpuInstanceCreateComputeInstance(gpuInstance, profileId):
    with _mutate() as state:
        gpu, gi = _gi_of(state, gpuInstance)
        _require_root()  # nvml.h: "Requires privileged user."
        ci = _create_ci(state, gpu, gi, int(profileId))
        return _ci_handle(gpu["index"], gi["id"], ci["id"])


def nvmlGpuInstanceGetComputeInstances(gpuInstance, profileId, computeInstancesRef, countRef):
    state = _read()
    gpu, gi = _gi_of(state, gpuInstance)
    _require_root()  # nvml.h: "Requires privileged user."
    items = [ci for ci in gi["compute_instances"] if ci["profile_id"] == int(profileId)]
    _fill(computeInstancesRef, countRef, items, lambda ci: _ci_handle(gpu["index"], gi["id"], ci["id"]))
    return NVML_SUCCESS


def _ci_of(state, computeInstance):
    if not computeInstance:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    what = _handle_target(computeInstance)
    if what[0] != "ci":
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    _kind, index, gi_id, ci_id = what
    gpu, gi = _gi_of(state, _gi_handle(index, gi_id))
    for ci in gi["compute_instances"]:
        if ci["id"] == ci_id:
            return gpu, gi, ci
    _raise(NVML_ERROR_INVALID_ARGUMENT)


def nvmlComputeInstanceGetInfo_v2(computeInstance):
    state = _read()
    gpu, gi, ci = _ci_of(state, computeInstance)
    info = c_nvmlComputeInstanceInfo_t()
    info.device = _device_handle(gpu["index"])
    info.gpuInstance = _gi_handle(gpu["index"], gi["id"])
    info.id = ci["id"]
    info.profileId = ci["profile_id"]
    info.placement = c_nvmlComputeInstancePlacement_t(ci["placement"]["start"], ci["placement"]["size"])
    return info


def nvmlComputeInstanceGetInfo(computeInstance):
    return nvmlComputeInstanceGetInfo_v2(computeInstance)


def nvmlComputeInstanceDestroy(computeInstance):
    with _mutate() as state:
        gpu, gi, ci = _ci_of(state, computeInstance)
        _require_root()  # nvml.h: "Requires privileged user."
        if any(p.get("gpu_instance_id") == gi["id"] and p.get("compute_instance_id", ci["id"]) == ci["id"]
               for p in gpu["processes"]):
            _raise(NVML_ERROR_IN_USE)
        gi["compute_instances"] = [c for c in gi["compute_instances"] if c["id"] != ci["id"]]
    return NVML_SUCCESS


# --- NVLink and the NVLink fabric ---------------------------------------------------------------
# NVLinks per GPU and NVSwitches per baseboard by compute capability major: HGX/DGX A100 have 12
# links per GPU to six NVSwitches, HGX H100 18 links to four (Fabric Manager User Guide,
# "NVSwitch-Based Systems"); the Blackwell figures are UNVERIFIED. Which link goes to which
# switch is the fake's choice (link modulo switches).
_NVLINKS = {7: (6, 6), 8: (12, 6), 9: (18, 4), 10: (18, 2)}
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"


def _switch_bus_id(number):
    return "00000000:%02X:00.0" % (0xC0 + number)


def nvlink_remotes(state, index):
    """[(remote device type, remote PCI bus id)] for each NVLink of GPU ``index``; [] without."""
    topology = state.get("nvlink")
    gpu = state["gpus"][index]
    spec = _spec(state, gpu)
    links, switches = _NVLINKS.get(spec["compute_capability"][0], (0, 0))
    # The data-centre GPUs of the catalog with NVLink: the MIG-capable ones and the V100.
    if not topology or not links or not (spec["mig"] or spec["architecture"] == "volta"):
        return []
    if topology["kind"] == "nvswitch":
        return [(NVML_NVLINK_DEVICE_TYPE_SWITCH, _switch_bus_id(link % switches)) for link in range(links)]
    partner = index ^ 1
    if partner >= len(state["gpus"]):
        return []
    return [(NVML_NVLINK_DEVICE_TYPE_GPU, state["gpus"][partner]["pci_bus_id"])] * links


def fabric_manager_running():
    """Whether the fake systemctl has nvidia-fabricmanager.service active."""
    return _unit_active(FABRIC_MANAGER_UNIT)


def _nvlink(device, link):
    state = _read()
    gpu = _gpu(state, device)
    remotes = nvlink_remotes(state, gpu["index"])
    if not remotes:
        _raise(NVML_ERROR_NOT_SUPPORTED)  # nvml.h: "if the device doesn't support this feature"
    if not 0 <= int(link) < NVML_NVLINK_MAX_LINKS:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if int(link) >= len(remotes):
        _raise(NVML_ERROR_NOT_SUPPORTED)  # a link this GPU lacks (the code is UNVERIFIED)
    return remotes[int(link)]


def nvmlDeviceGetNvLinkState(device, link):
    _nvlink(device, link)
    return NVML_FEATURE_ENABLED


def nvmlDeviceGetNvLinkRemoteDeviceType(handle, link):
    return _nvlink(handle, link)[0]


def nvmlDeviceGetNvLinkRemotePciInfo(device, link):
    bus_id = _nvlink(device, link)[1]
    info = nvmlPciInfo_t()
    domain, bus, devfn = bus_id.split(":")
    info.busId = bus_id.encode()
    info.busIdLegacy = ("%s:%s:%s" % (domain[-4:], bus, devfn)).encode()
    info.domain = int(domain, 16)
    info.bus = int(bus, 16)
    info.device = int(devfn.split(".")[0], 16)
    return info


def nvmlDeviceGetGpuFabricInfoV(device, gpuFabricInfo):
    """nvml.h: "For Hopper or newer fully supported devices. On Hopper + NVSwitch systems, GPU
    is registered with the NVIDIA Fabric Manager": COMPLETED while Fabric Manager runs,
    NOT_STARTED otherwise (the status reported then, NOT_READY here, is UNVERIFIED)."""
    state = _read()
    gpu = _gpu(state, device)
    if _spec(state, gpu)["compute_capability"][0] < 9 or (state.get("nvlink") or {}).get("kind") != "nvswitch":
        _raise(NVML_ERROR_NOT_SUPPORTED)
    info = _deref(gpuFabricInfo)
    if fabric_manager_running():
        info.state, info.status = NVML_GPU_FABRIC_STATE_COMPLETED, NVML_SUCCESS
    else:
        info.state, info.status = NVML_GPU_FABRIC_STATE_NOT_STARTED, NVML_ERROR_NOT_READY
    return NVML_SUCCESS


def reset_groups(state, indices, fabric_manager=None):
    """Why a reset of GPUs ``indices`` in one command is refused: {index: [peer indices the
    command lacks]}; empty when it may go ahead.

    nvidia-smi(1) -r: "Starting with the NVIDIA Ampere architecture, GPUs with NVLink
    connections can be individually reset. On Ampere NVSwitch systems, Fabric Manager is
    required to facilitate reset. On Hopper and later NVSwitch systems, the dependency on
    Fabric Manager to facilitate reset is removed. If Fabric Manager is not running, or if any
    of the GPUs being reset are based on an architecture preceding the NVIDIA Ampere
    architecture, any GPUs with NVLink connections to a GPU being reset must also be reset in
    the same command."
    """
    fabric_manager = fabric_manager_running() if fabric_manager is None else fabric_manager
    wanted = set(indices)
    missing = {}
    for index in sorted(wanted):
        remotes = nvlink_remotes(state, index)
        if not remotes:
            continue
        major = _spec(state, state["gpus"][index])["compute_capability"][0]
        switched = remotes[0][0] == NVML_NVLINK_DEVICE_TYPE_SWITCH
        if major >= 9 or (major == 8 and (not switched or fabric_manager)):
            continue
        ends = set(bus for _kind, bus in remotes)
        peers = [g["index"] for g in state["gpus"] if g["index"] != index
                 and ends & set(bus for _kind, bus in nvlink_remotes(state, g["index"]))]
        if switched is False:
            peers = [g["index"] for g in state["gpus"] if g["pci_bus_id"] in ends]
        lacking = [peer for peer in peers if peer not in wanted]
        if lacking:
            missing[index] = lacking
    return missing


# --- MIG device handles -----------------------------------------------------------------------

def nvmlDeviceGetMaxMigDeviceCount(device):
    state = _read()
    gpu = _gpu(state, device)
    spec = _spec(state, gpu)["mig"]
    # nvml.h: "Returns zero if MIG is not supported or enabled."
    return spec["compute_slices"] if spec and gpu["mig_current"] else 0


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    state = _read()
    gpu = _gpu(state, device)
    _mig_spec(state, gpu)
    devices = _mig_devices(gpu)
    if not 0 <= int(index) < len(devices):
        # An empty slot: NOT_FOUND on most drivers, INVALID_ARGUMENT on some (NVIDIA's go-nvlib
        # pkg/nvlib/device skips both); the state's ``empty_mig_slot_code`` picks one.
        _raise(state.get("empty_mig_slot_code", NVML_ERROR_NOT_FOUND))
    gi, ci = devices[int(index)]
    return _device_handle(gpu["index"], gi["id"], ci["id"])


def nvmlDeviceIsMigDeviceHandle(device):
    _gpu(_read(), device, allow_mig_device=True)
    return int(_dev(device).gi != _NO_ID)


def nvmlDeviceGetGpuInstanceId(device):
    _gpu(_read(), device, allow_mig_device=True)
    if _dev(device).gi == _NO_ID:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return _dev(device).gi


def nvmlDeviceGetComputeInstanceId(device):
    _gpu(_read(), device, allow_mig_device=True)
    if _dev(device).gi == _NO_ID:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return _dev(device).ci


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice):
    gpu = _gpu(_read(), migDevice, allow_mig_device=True)
    return _device_handle(gpu["index"])


# --- older drivers: functions libnvidia-ml lacks ------------------------------------------------
# The state's ``missing_functions`` lists C symbols an older libnvidia-ml.so lacks. As in
# nvidia-ml-py, the wrapper that calls one raises NVMLError_FunctionNotFound, and the
# unversioned wrappers marked throwOnVersionMismatch raise NVMLLibraryMismatchError instead.
# Python name -> the C symbol nvidia-ml-py 13.615.71 looks up for it.
_C_SYMBOLS = {
    "nvmlDeviceGetComputeRunningProcesses_v3": "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGpuInstancePossiblePlacements": "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    "nvmlDeviceGetMaxMigDeviceCount": "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex": "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceCreateGpuInstanceWithPlacement": "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlComputeInstanceGetInfo_v2": "nvmlComputeInstanceGetInfo_v2",
    "nvmlSystemGetCudaDriverVersion": "nvmlSystemGetCudaDriverVersion",
}
_THROW_ON_VERSION_MISMATCH = ("nvmlDeviceGetComputeRunningProcesses",)


def _missing(symbol):
    path = _state_path()
    if not path or not os.path.exists(path):
        return False
    return symbol in _load_shared(path).get("missing_functions", [])


def _with_symbol(func, symbol):
    def wrapper(*args, **kwargs):
        if _missing(symbol):
            _raise(NVML_ERROR_FUNCTION_NOT_FOUND)
        return func(*args, **kwargs)
    wrapper.__name__ = func.__name__
    wrapper.__signature__ = __import__("inspect").signature(func)
    return wrapper


def _throw_on_version_mismatch(func):
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except NVMLError_FunctionNotFound:  # noqa: F821 (generated above)
            raise NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not match "
                                           "the NVML lib version.")
    wrapper.__name__ = func.__name__
    wrapper.__signature__ = __import__("inspect").signature(func)
    return wrapper


def _gi_profile_info_symbol(func):
    """nvmlDeviceGetGpuInstanceProfileInfo looks up ...InfoV for version 2, ...Info for 1."""
    def wrapper(device, profile, version=2):
        if version == 2 and _missing("nvmlDeviceGetGpuInstanceProfileInfoV"):
            _raise(NVML_ERROR_FUNCTION_NOT_FOUND)
        return func(device, profile, version)
    wrapper.__name__ = func.__name__
    wrapper.__signature__ = __import__("inspect").signature(func)
    return wrapper


for _name, _symbol in _C_SYMBOLS.items():
    globals()[_name] = _with_symbol(globals()[_name], _symbol)
nvmlDeviceGetComputeRunningProcesses = _throw_on_version_mismatch(
    lambda handle: nvmlDeviceGetComputeRunningProcesses_v3(handle))
nvmlDeviceGetComputeRunningProcesses.__signature__ = __import__("inspect").signature(lambda handle: None)
nvmlDeviceGetComputeRunningProcesses.__name__ = "nvmlDeviceGetComputeRunningProcesses"
nvmlDeviceGetGpuInstanceProfileInfo = _gi_profile_info_symbol(nvmlDeviceGetGpuInstanceProfileInfo)
nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo
