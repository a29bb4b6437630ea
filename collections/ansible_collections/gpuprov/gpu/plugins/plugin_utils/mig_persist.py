# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The MIG state file a node keeps for its boot-time restore (gpuprov-mig-restore).

The gpuprov.gpu.gpu_mig role writes it (through the ``mig_boot_state`` filter) and
``gpuprov status`` compares a node's copy with it, so both build it here, from the node plan
and the node's gpu_facts. The format is what module_utils/mig_restore.py reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

STATE_FORMAT = 1


class BootStateError(ValueError):
    """The plan and the node's facts do not give a state file (the message says why)."""


def managed_mig_gpus(plan):
    """GPUs of a node plan whose MIG mode gpuprov manages."""
    return [g for g in plan.get("gpus") or [] if g.get("mig") and g["mig"].get("managed", True)]


def restore_wanted(plan):
    """Whether the node needs the boot-time restore: some managed GPU has MIG enabled."""
    return any(g["mig"].get("enabled") for g in managed_mig_gpus(plan))


def boot_state(plan, gpu_facts):
    """The state file's content for a node: one entry per GPU whose MIG gpuprov manages.

    Each entry has the GPU's identity as NVML reports it (name, PCI device id, bus id, from
    ``gpu_facts``), so the restore refuses other GPUs, and the planned mode and instances.
    """
    if not isinstance(plan, dict) or "gpus" not in plan:
        raise BootStateError("expected a gpuprov node plan (a dict with gpus)")
    if not isinstance(gpu_facts, dict) or not gpu_facts.get("driver_available"):
        reason = (gpu_facts or {}).get("driver_error") if isinstance(gpu_facts, dict) else None
        raise BootStateError("the node's gpu_facts have no GPUs to record (NVML not usable: %s)"
                             % (reason or "no facts"))
    live = dict((g.get("index"), g) for g in gpu_facts.get("gpus") or [])
    gpus = []
    for gpu in managed_mig_gpus(plan):
        fact = live.get(gpu["index"])
        if fact is None or fact.get("error") or not (fact.get("name") or fact.get("pci_device_id")):
            raise BootStateError("GPU %d: gpu_facts cannot identify it (%s); the node must have the GPUs its plan "
                                 "names before its MIG state is recorded"
                                 % (gpu["index"], (fact or {}).get("error") or "not in the facts"))
        enabled = bool(gpu["mig"].get("enabled"))
        gpus.append({
            "index": gpu["index"],
            "model": gpu.get("model"),
            "name": fact.get("name"),
            "pci_device_id": fact.get("pci_device_id"),
            "pci_bus_id": fact.get("pci_bus_id"),
            "mig_enabled": enabled,
            "instances": [{"profile": i["profile"],
                           "placement": {"start": i["placement"]["start"], "size": i["placement"]["size"]}}
                          for i in gpu["mig"].get("instances") or []] if enabled else [],
        })
    return {"format": STATE_FORMAT, "host": plan.get("host"), "gpus": gpus}
