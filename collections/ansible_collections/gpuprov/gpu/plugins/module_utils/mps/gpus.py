# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The GPUs one daemon serves: what the manager knows of them, choosing them, and their
pinned memory limits."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.replies import parse_memory_limit


_UUID_RE = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class Gpu:
    """What the daemon manager needs to know of one GPU."""

    def __init__(self, index, uuid, name=None, memory_total_mib=None, mig_current=False,
                 mig_pending=False, compute_mode=None, compute_capability=None):
        self.index = index
        self.uuid = uuid
        self.name = name
        self.memory_total_mib = memory_total_mib
        self.mig_current = bool(mig_current)
        self.mig_pending = bool(mig_pending)
        self.compute_mode = compute_mode
        self.compute_capability = compute_capability

    def describe(self):
        return "GPU %d (%s)" % (self.index, self.uuid)

    @property
    def volta_or_newer(self):
        """MPS limits (thread percentage, pinned memory) exist from Volta (7.0) on."""
        if not self.compute_capability:
            return True  # unknown: let the daemon refuse
        return int(str(self.compute_capability).split(".", maxsplit=1)[0]) >= 7


class NvmlGpus:
    """GPU backend over module_utils.nvml: an open ``Nvml`` session goes in."""

    def __init__(self, nvml):
        self.nvml = nvml

    def gpus(self):
        result = []
        for index in range(self.nvml.device_count()):
            info = self.nvml.gpu_info(index)
            current, pending = self.nvml.mig_mode(index)
            result.append(Gpu(index, info["uuid"], info["name"], info["memory_total_mib"],
                              mig_current=current, mig_pending=pending,
                              compute_mode=self.nvml.compute_mode(index),
                              compute_capability=info["compute_capability"]))
        return result

    def set_compute_mode(self, gpu, mode):
        self.nvml.set_compute_mode(gpu.index, mode)


def select_gpus(all_gpus, wanted):
    """GPUs named by index or UUID (``all`` for every GPU), in NVML index order."""
    if not all_gpus:
        raise MpsError("NVML reports no GPUs on this host")
    wanted = [str(w).strip() for w in (wanted or ["all"])]
    if "all" in wanted:
        if len(wanted) > 1:
            raise MpsError("gpus: 'all' cannot be combined with other entries, got %s" % ", ".join(wanted))
        return sorted(all_gpus, key=lambda g: g.index)
    by_index = dict((str(g.index), g) for g in all_gpus)
    by_uuid = dict((g.uuid.lower(), g) for g in all_gpus)
    chosen = {}
    for entry in wanted:
        gpu = by_index.get(entry) or by_uuid.get(entry.lower())
        if gpu is None:
            if entry.isdigit() or _UUID_RE.match(entry):
                raise MpsError("gpus: no GPU %s on this host (present: %s)" % (
                    entry, ", ".join("%d=%s" % (g.index, g.uuid) for g in sorted(all_gpus, key=lambda g: g.index))))
            raise MpsError("gpus: %r is neither a GPU index nor a GPU UUID" % entry)
        chosen[gpu.index] = gpu
    return [chosen[i] for i in sorted(chosen)]


def resolve_pinned_limits(gpus, pinned_memory_limit, replicas):
    """{gpu index: MiB} from the option (one number, or a map keyed by index or UUID)."""
    if pinned_memory_limit is None:
        if replicas:
            limits = {}
            for gpu in gpus:
                if not gpu.memory_total_mib:
                    raise MpsError("cannot derive a pinned memory limit for %s: NVML reports no "
                                   "memory size; set pinned_memory_limit" % gpu.describe())
                limits[gpu.index] = gpu.memory_total_mib // replicas
            return limits
        return {}
    if isinstance(pinned_memory_limit, dict):
        by_key = {}
        for gpu in gpus:
            by_key[str(gpu.index)] = gpu
            by_key[gpu.uuid.lower()] = gpu
        limits = {}
        for key, value in pinned_memory_limit.items():
            gpu = by_key.get(str(key).strip().lower())
            if gpu is None:
                raise MpsError("pinned_memory_limit: %s is not one of the selected GPUs (%s)"
                               % (key, ", ".join("%d=%s" % (g.index, g.uuid) for g in gpus)))
            limits[gpu.index] = _positive_mib(value, "pinned_memory_limit[%s]" % key, gpu)
        return limits
    return dict((gpu.index, _positive_mib(pinned_memory_limit, "pinned_memory_limit", gpu)) for gpu in gpus)


def _positive_mib(value, field, gpu):
    if isinstance(value, str):
        mib = parse_memory_limit(value) if value.strip() else None
    elif isinstance(value, int) and not isinstance(value, bool):
        mib = value
    else:
        mib = None
    if not mib or mib <= 0:
        raise MpsError("%s must be a positive number of MiB (or a string like '20G'), got %r" % (field, value))
    if gpu.memory_total_mib and mib > gpu.memory_total_mib:
        raise MpsError("%s: %d MiB is more than the %d MiB of %s" % (field, mib, gpu.memory_total_mib, gpu.describe()))
    return mib
