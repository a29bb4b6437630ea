# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Compare a node plan with the node's live GPU facts (from gpuprov.gpu.gpu_facts).

Used by the node_plan action (what must a converge do on this node?) and by `gpuprov
status` (has this node drifted?). Pure functions over plain data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog


def model_of(gpu, models_catalog=None):
    """Catalog key for a GPU of gpu_facts, by PCI device id first, then by NVML name.

    ``models_catalog``: a user_catalog.UserCatalog when the inventory adds models.
    """
    for key in ("pci_device_id", "name"):
        value = gpu.get(key)
        if value:
            try:
                return (models_catalog or catalog).lookup(value).key
            except catalog.UnknownModelError:
                continue
    return None


def hardware_mismatch(plan, facts, models_catalog=None, declared_by="the inventory"):
    """A sentence when the node's GPUs are not those the inventory declares, else None.

    ``declared_by`` says who declared them, e.g. the role variables of a plain input.
    """
    if not facts.get("driver_available", False):
        return "NVML is not usable on the node: %s" % (facts.get("driver_error") or "unknown reason")
    live = facts.get("gpus") or []
    planned = ["%s" % g["model"] for g in plan["gpus"]]
    found = []
    for gpu in live:
        if gpu.get("error"):
            found.append("GPU %s unreadable (%s)" % (gpu.get("index"), gpu["error"]))
        else:
            found.append(model_of(gpu, models_catalog) or "%s (%s, not in the catalog)" % (gpu.get("name"), gpu.get("pci_device_id")))
    if found != planned:
        return "%s declares %s but the node has %s" % (declared_by, _describe(planned), _describe(found))
    return None


def _describe(models):
    if not models:
        return "no GPU"
    counts = []
    for model in models:
        if counts and counts[-1][0] == model:
            counts[-1][1] += 1
        else:
            counts.append([model, 1])
    return ", ".join("%dx %s" % (n, m) for m, n in counts)


def instance_set(instances):
    return sorted((i["profile"], i["placement"]["start"]) for i in instances)


def mig_differences(plan, facts):
    """What MIG work the node needs: {'mode': [...], 'pending_reset': [...], 'layout': [...]}.

    mode: GPUs whose current MIG mode differs from the plan (and no matching change is
    pending); pending_reset: GPUs whose planned mode is pending (Ampere, awaiting a reset);
    layout: MIG-enabled GPUs whose instances (profile and placement) differ from the plan.
    """
    live = dict((g.get("index"), g) for g in facts.get("gpus") or [])
    mode, pending, layout = [], [], []
    for gpu in plan["gpus"]:
        mig = gpu["mig"]
        if mig is None or not mig.get("managed", True):
            continue
        state = live.get(gpu["index"]) or {}
        want = bool(mig["enabled"])
        current = bool(state.get("mig_mode_current"))
        if current != want:
            if state.get("mig_mode_pending") is not None and bool(state.get("mig_mode_pending")) == want:
                pending.append(gpu["index"])
            else:
                mode.append(gpu["index"])
        if want and instance_set(state.get("gpu_instances") or []) != instance_set(mig["instances"]):
            layout.append(gpu["index"])
    return {"mode": mode, "pending_reset": pending, "layout": layout}
