# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a workload asks NVIDIA's DRA driver for: device requests, CEL selectors, sharing config.

The other half of dra.py (which renders what the driver publishes). Facts from the driver's
source at v0.4.0 (github.com/NVIDIA/k8s-dra-driver-gpu):

- opaque config for driver ``gpu.nvidia.com``, ``apiVersion: resource.nvidia.com/v1beta1``,
  kinds ``GpuConfig`` and ``MigDeviceConfig`` (api/nvidia.com/resource/v1beta1/api.go), both
  ``{sharing: {strategy, ...}}``; strategies ``TimeSlicing`` and ``MPS`` (sharing.go);
  GpuConfig's time-slicing takes ``timeSlicingConfig.interval`` (Default, Short, Medium, Long),
  MigDeviceConfig has no interval; ``mpsConfig`` has ``defaultActiveThreadPercentage`` (0-100),
  ``defaultPinnedDeviceMemoryLimit`` (a quantity, applied in whole MiB) and
  ``defaultPerDevicePinnedMemoryLimit`` (validate.go, sharing.go). The driver decodes this
  strictly: an unknown field fails the claim;
- both strategies need feature gates that are alpha and off by default in v0.4.0:
  ``TimeSlicingSettings`` and ``MPSSupport`` (pkg/featuregates/featuregates.go); without them
  the driver refuses the claim's config (validate.go: "... is selected as the GPU sharing
  strategy, but the ... feature gate is not enabled"). The chart sets them through its
  ``featureGates`` value;
- the attribute and capacity names a selector reads are in dra.py's docstring; CEL reaches them
  as ``device.attributes['gpu.nvidia.com'].<name>`` and ``device.capacity['gpu.nvidia.com'].<name>``
  (the driver's own demo and e2e specs use the same forms: test/e2e/framework/specs/*.tmpl).

Sharing in DRA (resource.k8s.io/v1, k8s.io/api v0.37.2 resource/v1 types.go): a device is
allocated to one ResourceClaim, and pods share a device only by referencing the same claim
(``reservedFor`` holds up to 256 consumers). A ResourceClaimTemplate gives each pod a claim of
its own: right for a workload that has its device to itself, wrong for workloads packed onto one
shared GPU. So a shared GPU is one ResourceClaim carrying the sharing config, and each workload
packed onto it references that claim by name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dra

CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
GPU_CONFIG_KIND = "GpuConfig"
MIG_CONFIG_KIND = "MigDeviceConfig"
TIME_SLICING = "TimeSlicing"
MPS = "MPS"
# The gates a claim's sharing config needs in the driver (featuregates.go, alpha, default off).
FEATURE_GATES = {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}
DEFAULT_INTERVAL = "Default"
_ATTRIBUTE = "device.attributes['%s'].%%s" % dra.DRIVER
_CAPACITY = "device.capacity['%s'].%%s" % dra.DRIVER


def cel_string(text):
    """``text`` as a CEL string literal: single quotes, with backslash, quote and control
    characters escaped, so a model or profile name cannot end the literal."""
    out = []
    for char in str(text):
        if char in ("\\", "'", '"'):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\x%02x" % ord(char))
        else:
            out.append(char)
    return "'%s'" % "".join(out)


def product_selector(model):
    """productName is one of the model's nvidia-smi names (NVML reports one of them)."""
    names = list(model.smi_names)
    if len(names) == 1:
        return "%s == %s" % (_ATTRIBUTE % "productName", cel_string(names[0]))
    return "%s in [%s]" % (_ATTRIBUTE % "productName", ", ".join(cel_string(n) for n in names))


def profile_selector(profile_name):
    return "%s == %s" % (_ATTRIBUTE % "profile", cel_string(profile_name))


def memory_selector(mib):
    """The device has at least ``mib`` MiB (rounded up to whole MiB)."""
    return "%s.compareTo(quantity(%s)) >= 0" % (_CAPACITY % "memory", cel_string(dra.mib_quantity(math.ceil(mib))))


def device_request(name, device_class, count, selectors):
    """One request of ``count`` devices of ``device_class`` matching every selector."""
    return {"name": name, "exactly": {
        "deviceClassName": device_class, "allocationMode": "ExactCount", "count": int(count),
        "selectors": [{"cel": {"expression": expression}} for expression in selectors]}}


def sharing_config(strategy, device_type=dra.GPU_TYPE, clients=None, memory_mib=None, requests=None):
    """The driver's opaque config for ``strategy`` (TimeSlicing or MPS) on a gpu or mig device.

    MPS: ``clients`` sharing the device each get 100/clients % of its threads and, with
    ``memory_mib``, memory_mib/clients MiB of pinned memory, as the device plugin's MPS does.
    """
    if strategy not in FEATURE_GATES:
        raise ValueError("sharing strategy must be %s or %s, got %r" % (TIME_SLICING, MPS, strategy))
    sharing = {"strategy": strategy}
    if strategy == TIME_SLICING and device_type == dra.GPU_TYPE:
        sharing["timeSlicingConfig"] = {"interval": DEFAULT_INTERVAL}
    if strategy == MPS:
        if not clients or clients < 1:
            raise ValueError("MPS needs the number of clients sharing the device")
        mps = {"defaultActiveThreadPercentage": 100 // clients}
        if memory_mib:
            mps["defaultPinnedDeviceMemoryLimit"] = dra.mib_quantity(int(memory_mib) // clients)
        sharing["mpsConfig"] = mps
    config = {"opaque": {"driver": dra.DRIVER, "parameters": {
        "apiVersion": CONFIG_API_VERSION,
        "kind": GPU_CONFIG_KIND if device_type == dra.GPU_TYPE else MIG_CONFIG_KIND,
        "sharing": sharing}}}
    if requests:
        config["requests"] = list(requests)
    return config


def claim_spec(requests, configs=()):
    devices = {"requests": list(requests)}
    if configs:
        devices["config"] = list(configs)
    return {"devices": devices}


def _metadata(name, namespace, labels):
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    return metadata


def resource_claim_template(name, spec, namespace=None, labels=None):
    """Each pod that names it gets a claim of its own (its devices are the pod's alone)."""
    return {"apiVersion": dra.RESOURCE_API_VERSION, "kind": "ResourceClaimTemplate",
            "metadata": _metadata(name, namespace, labels), "spec": {"spec": spec}}


def resource_claim(name, spec, namespace=None, labels=None):
    """One claim the pods that name it share (up to 256 of them)."""
    return {"apiVersion": dra.RESOURCE_API_VERSION, "kind": "ResourceClaim",
            "metadata": _metadata(name, namespace, labels), "spec": spec}
