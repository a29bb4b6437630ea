# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A node plan as NVIDIA's DRA driver for GPUs would publish it: ResourceSlices, DeviceClasses.

The driver is github.com/NVIDIA/k8s-dra-driver-gpu (now kubernetes-sigs/dra-driver-nvidia-gpu),
release v0.4.0. Every fact below was read in its source at that tag (paths relative to it):

- driver name ``gpu.nvidia.com`` (cmd/gpu-kubelet-plugin/main.go, DriverName);
- without the DynamicMIG feature gate (alpha, off by default: pkg/featuregates/featuregates.go)
  MIG is static: a GPU with MIG mode on publishes only the MIG devices that exist on it, a GPU
  with MIG off publishes itself (cmd/gpu-kubelet-plugin/nvlib.go, GetPerGpuAllocatableDevices);
  all devices of a node go into one ResourceSlice of the pool named after the node
  (driver.go, publishResources);
- a full GPU is ``gpu-<minor>`` (deviceinfo.go, GpuInfo.CanonicalName) with attributes ``type``
  = gpu, ``uuid``, ``productName`` (NVML's name), ``brand``, ``architecture``,
  ``cudaComputeCapability``, ``driverVersion``, ``cudaDriverVersion`` (the last three as
  versions), ``resource.kubernetes.io/pciBusID``, ``resource.kubernetes.io/pcieRoot`` and
  ``addressingMode`` where the platform has one (GpuInfo.Attributes), and capacity ``memory``
  in bytes (partitions.go, fullGpuCapacity);
- a MIG device is ``gpu-<minor>-mig-<profile without dots, RFC 1123>-<GPU instance profile
  id>-<placement start>`` (mig.go, MigSpecTuple.ToCanonicalName, toRFC1123Compliant) with
  attributes ``type`` = mig, ``parentUUID``, ``profile`` (e.g. ``1g.10gb``), ``uuid`` and the
  parent's productName, brand, architecture, versions and PCI attributes (mig.go,
  CommonAttributesMig); capacities ``multiprocessors``, ``copyEngines``, ``decoders``,
  ``encoders``, ``jpegEngines``, ``ofaEngines``, ``memory`` (the profile's MiB in bytes:
  CommonCapacitiesMig) and ``memorySlice<i>`` = 1 for each memory slice it occupies
  (deviceinfo.go, MigDeviceInfo.GetDevice);
- DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` select ``type`` gpu and mig of
  this driver; for ``resource.k8s.io/v1`` the gpu class also names ``extendedResourceName:
  nvidia.com/gpu`` (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml,
  deviceclass-mig.yaml);
- the chart installs on Kubernetes >= 1.32 (Chart.yaml kubeVersion); docs/prerequisites.md asks
  for 1.34.2 or later, where DynamicResourceAllocation is on by default; the chart refuses to run
  the GPU plugin beside NVIDIA's device plugin on the same node (templates/validation.yaml).

Architecture names are go-nvlib's (github.com/NVIDIA/go-nvlib v0.10.0, the driver's pinned
version: pkg/nvlib/device/device.go, GetArchitectureAsString); compute capability is NVML's
"major.minor", published as a semantic version ("8.0" -> "8.0.0", Masterminds semver).

What a plan cannot know, and so is left out of what gpuprov renders: uuid and parentUUID,
brand (which NVML brand a model reports is UNVERIFIED), the driver and CUDA versions, the PCI
attributes, addressingMode, and the MIG engine capacities (multiprocessors, copy engines,
decoders, encoders, JPEG, OFA: not in gpuprov's catalog). Also UNVERIFIED here: that a GPU's
minor number equals its NVML index (the usual case; the driver names devices by minor), the
exact bytes of ``memory`` (the catalog holds nvidia-smi's MiB for a GPU and two-decimal GiB
for a MIG profile), which of a model's nvidia-smi names a node reports (the first one is
rendered), and that the profile name go-nvlib derives from NVML's memory sizes (mig_profile.go,
getMigMemorySizeGB) is the catalog's for every model (the A30's profile ids are UNVERIFIED in
the catalog too). Claims written by gpuprov select on productName (every name of the model),
profile and memory only, so they match what the real driver publishes.

Not a sharing provider: a provider plans a node (what it advertises, its node config); DRA
is another rendering of the same plan. Under DRA a GPU is shared per claim (the driver's
GpuConfig / MigDeviceConfig sharing), not per node, so the plan's replicas, MPS daemons and
HAMi settings have no place in a slice (dra_claims.py renders the per-claim side).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

DRIVER = "gpu.nvidia.com"
DRIVER_RELEASE = "v0.4.0"
RESOURCE_API_VERSION = "resource.k8s.io/v1"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
GPU_TYPE = "gpu"
MIG_TYPE = "mig"
CLASS_TYPES = {GPU_CLASS: GPU_TYPE, MIG_CLASS: MIG_TYPE}
GPU_EXTENDED_RESOURCE = "nvidia.com/gpu"
# k8s.io/api resource/v1 types.go: ResourceSliceMaxDevices. The driver v0.4.0 puts every device
# of a node in one slice; a node with more devices (over 18 MIG-partitioned GPUs) is split here
# into several slices of one pool, as the API requires (how the driver itself copes is UNVERIFIED).
MAX_DEVICES_PER_SLICE = 128
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuprov"}
# go-nvlib v0.10.0 GetArchitectureAsString, keyed by gpuprov's catalog names.
ARCHITECTURES = {"kepler": "Kepler", "maxwell": "Maxwell", "pascal": "Pascal", "volta": "Volta",
                 "turing": "Turing", "ampere": "Ampere", "ada": "Ada Lovelace", "hopper": "Hopper",
                 "blackwell": "Blackwell"}
MIB = 1024 * 1024
_NOT_RFC1123 = re.compile(r"[^a-z0-9.-]")


class DraRenderError(ValueError):
    """The plans cannot be rendered; ``problems`` holds one `HOST: FIELD: reason` line each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(DraRenderError, self).__init__("; ".join(self.problems))


def mib_quantity(mib):
    """A whole number of MiB as Kubernetes writes a binary quantity: 80Gi, 9984Mi."""
    mib = int(mib)
    return "%dGi" % (mib // 1024) if mib % 1024 == 0 else "%dMi" % mib


def rfc1123(name):
    """The driver's toRFC1123Compliant (cmd/gpu-kubelet-plugin/mig.go)."""
    text = _NOT_RFC1123.sub("-", name.lower()).strip("-")
    if text.endswith("."):
        text = text[:-1]
    return text[:253]


def gpu_device_name(minor):
    return "gpu-%d" % minor


def mig_device_name(minor, profile, gi_profile_id, start):
    return "gpu-%d-mig-%s-%d-%d" % (minor, rfc1123(profile.replace(".", "")), gi_profile_id, start)


def version(text):
    """NVML's "major.minor" as the semantic version the driver publishes ("8.0" -> "8.0.0")."""
    parts = str(text).split(".")
    while len(parts) < 3:
        parts.append("0")
    return ".".join(str(int(p)) for p in parts[:3])


def common_attributes(model, device_type):
    """The attributes of a device of ``model`` that a plan knows (see the module docstring)."""
    attributes = {"type": {"string": device_type}, "productName": {"string": model.smi_names[0]}}
    architecture = ARCHITECTURES.get(model.architecture)
    if architecture:
        attributes["architecture"] = {"string": architecture}
    attributes["cudaComputeCapability"] = {"version": version(model.compute_capability)}
    return attributes


def full_gpu_device(minor, model, memory_mib):
    return {"name": gpu_device_name(minor), "attributes": common_attributes(model, GPU_TYPE),
            "capacity": {"memory": {"value": mib_quantity(memory_mib)}}}


def mig_device(minor, model, profile, start):
    attributes = common_attributes(model, MIG_TYPE)
    attributes["profile"] = {"string": profile.name}
    capacity = {"memory": {"value": mib_quantity(round(profile.memory_gib * 1024))}}
    for slice_index in range(start, start + profile.memory_slices):
        capacity["memorySlice%d" % slice_index] = {"value": "1"}
    return {"name": mig_device_name(minor, profile.name, profile.gi_profile_id, start),
            "attributes": attributes, "capacity": capacity}


def node_devices(host, plan, model_for):
    """(devices, notes, problems) of one node plan, in GPU order."""
    devices, notes, problems = [], [], []
    for gpu in plan.get("gpus") or []:
        index = gpu["index"]
        model = model_for(gpu["model"])
        if model is None:
            problems.append("%s: gpus[%d].model: %s is in neither the built-in catalog nor --catalog; its DRA "
                            "attributes (productName, architecture, cudaComputeCapability) come from the model: "
                            "pass its catalog file with --catalog" % (host, index, gpu["model"]))
            continue
        mig = gpu.get("mig")
        if mig is not None and not mig.get("managed", True):
            notes.append("GPU %d: the plan leaves its MIG state alone, so what the driver publishes for it depends "
                         "on the node; not rendered" % index)
            continue
        if mig is None or not mig["enabled"]:
            devices.append(full_gpu_device(index, model, gpu["memory_mib"]))
            continue
        if not mig["instances"]:
            notes.append("GPU %d: MIG mode on with no instances: the driver publishes nothing for it" % index)
        for instance in mig["instances"]:
            profile = model.profile(instance["profile"])
            if profile is None:
                problems.append("%s: gpus[%d].mig: profile %s is not a profile of %s in the catalog"
                                % (host, index, instance["profile"], model.key))
                continue
            devices.append(mig_device(index, model, profile, instance["placement"]["start"]))
    return devices, notes, problems


def slice_name(node_name, number, total):
    """A fixed object name (the driver's slices get generated names; gpuprov never matches on names)."""
    base = "%s-%s" % (node_name, DRIVER)
    if total > 1:
        base += "-%d" % number
    if len(base) <= 253:
        return base
    digest = hashlib.sha256(base.encode("utf-8")).hexdigest()[:10]
    return "%s-%s" % (base[:253 - 11].rstrip("-."), digest)


def resource_slices(node_name, devices):
    """The node's pool (named after the node, as the driver names it) in slices of at most 128 devices."""
    chunks = [devices[i:i + MAX_DEVICES_PER_SLICE] for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)] or [[]]
    slices = []
    for number, chunk in enumerate(chunks):
        spec = {"driver": DRIVER, "nodeName": node_name,
                "pool": {"name": node_name, "generation": 1, "resourceSliceCount": len(chunks)}}
        if chunk:
            spec["devices"] = chunk
        slices.append({"apiVersion": RESOURCE_API_VERSION, "kind": "ResourceSlice",
                       "metadata": {"name": slice_name(node_name, number, len(chunks)), "labels": dict(MANAGED_BY)},
                       "spec": spec})
    return slices


def device_class(name):
    """The DeviceClass the driver's chart installs under ``name`` (resource.k8s.io/v1)."""
    expression = "device.driver == '%s' && device.attributes['%s'].type == '%s'" % (DRIVER, DRIVER, CLASS_TYPES[name])
    spec = {"selectors": [{"cel": {"expression": expression}}]}
    if name == GPU_CLASS:
        spec["extendedResourceName"] = GPU_EXTENDED_RESOURCE
    return {"apiVersion": RESOURCE_API_VERSION, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def sharing_notes(plan):
    """What of the node's sharing plan does not carry over to the DRA driver, and why."""
    strategy = plan.get("strategy")
    notes = []
    if plan.get("sharing_provider") == "hami":
        notes.append("strategy hami: HAMi's plugin and the DRA driver's GPU plugin would both serve these GPUs; "
                     "run one of them on the node")
    elif strategy in ("time-slicing", "mps") or (plan.get("mig") or {}).get("time_slicing_replicas"):
        what = "strategy %s" % strategy if strategy != "mig" else "MIG time_slicing_replicas"
        notes.append("%s: under the DRA driver a GPU is shared per claim (GpuConfig sharing TimeSlicing or MPS, "
                     "which `gpuprov fit -o dra` writes), not by node replicas" % what)
    mps = plan.get("mps") or {}
    if mps.get("provider") == "host":
        notes.append("a host MPS daemon is planned: the DRA driver starts its own MPS control daemon per claim; "
                     "do not run both on the node")
    return notes


def device_summary(devices):
    """'2 gpu, 16 mig 1g.10gb' for comments and tables."""
    counts = []
    for device in devices:
        attributes = device["attributes"]
        label = attributes["type"]["string"]
        if "profile" in attributes:
            label += " " + attributes["profile"]["string"]
        for entry in counts:
            if entry[0] == label:
                entry[1] += 1
                break
        else:
            counts.append([label, 1])
    return ", ".join("%d %s" % (n, label) for label, n in counts) or "no devices"


def export(nodes, model_for, node_names=None):
    """{"slices": {host: [ResourceSlice]}, "classes": [DeviceClass], "notes": {host: [text]}}.

    ``nodes``: the planner's node plans by host; ``model_for(key)``: the catalog model of a
    plan's ``gpus[].model`` (None when unknown); ``node_names``: host -> Kubernetes node name.
    Raises DraRenderError with every problem found.
    """
    node_names = node_names or {}
    slices, notes, problems, types = {}, {}, [], set()
    for host in sorted(nodes or {}):
        plan = nodes[host]
        devices, node_notes, node_problems = node_devices(host, plan, model_for)
        problems.extend(node_problems)
        node_name = node_names.get(host) or plan.get("node_name") or host
        slices[host] = resource_slices(node_name, devices)
        notes[host] = node_notes + sharing_notes(plan)
        types.update(d["attributes"]["type"]["string"] for d in devices)
    if problems:
        raise DraRenderError(problems)
    classes = [device_class(name) for name in (GPU_CLASS, MIG_CLASS) if CLASS_TYPES[name] in types]
    return {"slices": slices, "classes": classes, "notes": notes}
