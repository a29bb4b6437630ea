# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Read-only GPU facts of a node: NVML for the GPUs, sysfs for their NUMA placement.

The keys returned here are a contract shared with the CLI (``gpuprov diagnose``) and the
roles; add keys, never rename them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    SysfsError,
    format_cpuset,
    read_numa_node_cpus,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import (  # noqa: F401 (sysfs_pci_address: kept here too)
    Nvml,
    NvmlError,
    NvmlUnavailable,
    sysfs_pci_address,
)


def read_gpu_numa_node(sysfs_root, bus_id):
    """The NUMA node of a PCI device, or None when the platform does not say (-1 or no file)."""
    path = os.path.join(sysfs_root, "bus", "pci", "devices", sysfs_pci_address(bus_id), "numa_node")
    try:
        with open(path) as handle:
            value = int(handle.read().strip())
    except (IOError, OSError, ValueError):
        return None
    return None if value < 0 else value


def read_numa_nodes(sysfs_root):
    """[{id, cpus: "0-15", cpu_list: [...]}] of the node, and a warning when sysfs fails."""
    try:
        nodes = read_numa_node_cpus(sysfs_root)
    except SysfsError as exc:
        return [], "NUMA topology unreadable under %s: %s" % (sysfs_root, exc)
    return [{"id": node, "cpus": format_cpuset(cpus), "cpu_list": list(cpus)}
            for node, cpus in sorted(nodes.items())], None


def _gpu_facts(nvml, index, sysfs_root, warnings):
    gpu = nvml.gpu_info(index)
    current, pending = nvml.mig_mode(index)
    gpu.update({
        "compute_mode": nvml.compute_mode(index),
        "mig_capable": current is not None,
        "mig_mode_current": current,
        "mig_mode_pending": pending,
        "gpu_instances": [],
        "processes": [],
        "numa_node": read_gpu_numa_node(sysfs_root, gpu["pci_bus_id"]),
        "error": None,
    })
    try:
        gpu["persistence_mode"] = nvml.persistence_mode(index)
    except NvmlError as exc:
        gpu["persistence_mode"] = None
        warnings.append(str(exc))
    if current:
        try:
            _mig_facts(nvml, index, gpu)
        except NvmlError as exc:
            if not (nvml.is_error(exc, "NoPermission") or nvml.is_error(exc, "FunctionNotFound")):
                raise
            # Non-root callers and older drivers still get the rest of the GPU's facts.
            warnings.append(str(exc))
    try:
        gpu["processes"] = nvml.processes(index)
    except NvmlError as exc:
        if not (nvml.is_error(exc, "NoPermission") or nvml.is_error(exc, "FunctionNotFound")):
            raise
        warnings.append(str(exc))
    return gpu


def _mig_facts(nvml, index, gpu):
    """MIG profiles and instances of a GPU with MIG on (NVML lets only root read them)."""
    profiles = nvml.mig_profiles(index)
    gpu["mig_profiles"] = [{"name": p.name, "profile_id": p.id, "compute_slices": p.compute_slices,
                            "memory_mib": p.memory_mib, "max_count": p.max_count,
                            "placements": [{"start": s, "size": z} for s, z in p.placements]}
                           for p in sorted(profiles.values(), key=lambda p: (p.compute_slices, p.memory_mib, p.name))]
    gpu["gpu_instances"] = [{
        "id": gi.id,
        "profile": gi.profile,
        "profile_id": gi.profile_id,
        "placement": {"start": gi.start, "size": gi.size},
        "compute_instances": gi.compute_instances,
    } for gi in nvml.gpu_instances(index, profiles)]
    # A MIG-enabled GPU has its compute mode per MIG device (nvml.h nvmlDeviceGetComputeMode).
    modes = nvml.mig_compute_modes(index)
    for gi in gpu["gpu_instances"]:
        for ci in gi["compute_instances"]:
            ci["compute_mode"] = modes.get((gi["id"], ci["id"]))


def _lost_gpu(index, exc):
    """A GPU NVML could not read: keep the contract keys, say what went wrong."""
    return {
        "index": index, "uuid": None, "name": None, "pci_bus_id": None, "pci_device_id": None,
        "memory_total_mib": None, "memory_used_mib": None, "compute_mode": None,
        "compute_capability": None, "mig_capable": None, "mig_mode_current": None,
        "mig_mode_pending": None, "gpu_instances": [], "processes": [], "numa_node": None,
        "persistence_mode": None, "error": str(exc),
    }


def gather(sysfs_root="/sys", nvml_factory=Nvml):
    """All GPU facts of the node. Never raises for a node without driver or GPUs.

    Returns (facts, warnings).
    """
    warnings = []
    numa_nodes, numa_warning = read_numa_nodes(sysfs_root)
    if numa_warning:
        warnings.append(numa_warning)
    facts = {
        "driver_available": False,
        "driver_error": None,
        "driver_version": None,
        "cuda_driver_version": None,
        "gpu_count": 0,
        "gpus": [],
        "numa_nodes": numa_nodes,
    }
    try:
        with nvml_factory() as nvml:
            facts["driver_available"] = True
            facts["driver_version"] = nvml.driver_version()
            facts["cuda_driver_version"] = nvml.cuda_driver_version()
            count = nvml.device_count()
            facts["gpu_count"] = count
            for index in range(count):
                try:
                    facts["gpus"].append(_gpu_facts(nvml, index, sysfs_root, warnings))
                except NvmlError as exc:
                    facts["gpus"].append(_lost_gpu(index, exc))
                    warnings.append(str(exc))
    except NvmlUnavailable as exc:
        facts["driver_error"] = str(exc)
    return facts, warnings
