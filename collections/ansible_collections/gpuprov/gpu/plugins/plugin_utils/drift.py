# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Is a node still what its plan says? Pure comparison for `gpuprov status`.

The gpuprov.gpu.status playbook reads each node (gpu_facts, the kubelet config in check mode,
the MPS daemon in check mode, the boot-time MIG restore) into a record; :func:`node_drift`
compares that record with the node's plan and lists every difference in words.

Record (all keys optional except gpu_facts)::

    {"gpu_facts": {...gpu_facts...},
     "kubelet": {"changed_keys": ["cpuManagerPolicy"], "error": null},      # plan has kubelet keys
     "mps": {"running": true, "changed": false, "error": null,               # plan has host MPS
             "without_limits": false, "differences": []},
     "boot": {"unit_exists": true, "unit_enabled": "enabled", "state_text": "{...}"}}  # MIG-capable
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import live
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.mig_persist import (
    BootStateError,
    boot_state,
    managed_mig_gpus,
    restore_wanted,
)

IN_SYNC = "in-sync"
DRIFTED = "drifted"
UNREACHABLE = "unreachable"
ERROR = "error"

DEFAULT_RESTORE_UNIT = "gpuprov-mig-restore.service"


def _item(area, message, gpu=None):
    return {"area": area, "gpu": gpu, "message": message}


def _instances_text(pairs):
    return " ".join("%s@%d" % (profile, start) for profile, start in sorted(pairs, key=lambda p: (p[1], p[0])))


def mig_drift(plan, facts):
    """Differences between the plan's MIG mode/instances and the live GPUs, per GPU."""
    live_gpus = dict((g.get("index"), g) for g in facts.get("gpus") or [])
    items = []
    for gpu in managed_mig_gpus(plan):
        index = gpu["index"]
        state = live_gpus.get(index) or {}
        want = bool(gpu["mig"]["enabled"])
        current = bool(state.get("mig_mode_current"))
        pending = state.get("mig_mode_pending")
        if current != want:
            if pending is not None and bool(pending) == want:
                items.append(_item("mig-mode", "GPU %d: MIG %s is pending a GPU reset (the plan has MIG %s)"
                                   % (index, "enable" if want else "disable", "enabled" if want else "disabled"),
                                   index))
            else:
                items.append(_item("mig-mode", "GPU %d: MIG mode is %s, the plan has it %s"
                                   % (index, "enabled" if current else "disabled", "enabled" if want else "disabled"),
                                   index))
        if not want:
            continue
        planned = set(live.instance_set(gpu["mig"]["instances"]))
        found = set(live.instance_set(state.get("gpu_instances") or []))
        missing, extra = planned - found, found - planned
        if missing or extra:
            parts = []
            if missing:
                parts.append("instances missing: %s" % _instances_text(missing))
            if extra:
                parts.append("extra instances: %s" % _instances_text(extra))
            items.append(_item("mig-instances", "GPU %d: %s" % (index, "; ".join(parts)), index))
        without_ci = sorted((g["profile"], g["placement"]["start"]) for g in state.get("gpu_instances") or []
                            if "compute_instances" in g and not g["compute_instances"]
                            and (g["profile"], g["placement"]["start"]) in planned)
        if without_ci:
            items.append(_item("mig-instances", "GPU %d: GPU instances without a compute instance: %s"
                               % (index, _instances_text(without_ci)), index))
    return items


def boot_drift(plan, facts, boot, unit_name=DEFAULT_RESTORE_UNIT):
    """Differences in the boot-time MIG restore: unit, its enablement and the recorded state."""
    if boot is None:
        return []
    items = []
    if not restore_wanted(plan):
        if boot.get("unit_exists"):
            items.append(_item("boot-restore", "%s is installed although the plan enables MIG on no GPU; at boot it "
                                               "would apply a stale MIG state" % unit_name))
        elif boot.get("state_text") is not None:
            items.append(_item("boot-restore", "the MIG state file is still there although the plan enables MIG on "
                                               "no GPU (a converge removes it)"))
        return items
    if not boot.get("unit_exists"):
        items.append(_item("boot-restore", "%s is missing: the MIG layout will not come back after a reboot"
                           % unit_name))
    elif boot.get("unit_enabled") != "enabled":
        items.append(_item("boot-restore", "%s is not enabled (systemd says %s): it will not run at boot"
                           % (unit_name, boot.get("unit_enabled") or "unknown")))
    text = boot.get("state_text")
    if text is None:
        items.append(_item("boot-restore", "the MIG state file is missing: the restore has nothing to apply at boot"))
        return items
    try:
        recorded = json.loads(text)
    except ValueError as exc:
        items.append(_item("boot-restore", "the MIG state file is not valid JSON (%s)" % exc))
        return items
    try:
        expected = boot_state(plan, facts)
    except BootStateError as exc:
        items.append(_item("boot-restore", "the expected MIG state cannot be worked out: %s" % exc))
        return items
    if not isinstance(recorded, dict) or recorded.get("format") != expected["format"] \
            or recorded.get("gpus") != expected["gpus"]:
        items.append(_item("boot-restore", "the MIG state file records another state than the plan: a reboot "
                                           "would restore %s" % _recorded_text(recorded)))
    return items


def _recorded_text(recorded):
    if not isinstance(recorded, dict) or not isinstance(recorded.get("gpus"), list):
        return "something unreadable"
    parts = []
    for gpu in recorded["gpus"]:
        if not isinstance(gpu, dict):
            continue
        if gpu.get("mig_enabled"):
            pairs = [(i.get("profile"), (i.get("placement") or {}).get("start", -1))
                     for i in gpu.get("instances") or [] if isinstance(i, dict)]
            parts.append("GPU %s: %s" % (gpu.get("index"), _instances_text(pairs) or "MIG with no instances"))
        else:
            parts.append("GPU %s: no MIG" % gpu.get("index"))
    return "; ".join(parts) or "nothing"


def kubelet_drift(plan, kubelet):
    if not plan.get("kubelet") or kubelet is None:
        return []
    if kubelet.get("error"):
        return [_item("kubelet", "the kubelet config could not be checked: %s" % kubelet["error"])]
    keys = kubelet.get("changed_keys") or []
    if keys:
        return [_item("kubelet", "kubelet config differs from the plan: %s" % ", ".join(keys))]
    return []


def mps_drift(plan, mps):
    if not plan.get("mps") or plan["mps"].get("provider") != "host" or mps is None:
        return []
    if mps.get("error"):
        return [_item("mps", "the MPS daemon could not be checked: %s" % mps["error"])]
    if not mps.get("running"):
        return [_item("mps", "the MPS control daemon is down")]
    differences = "; ".join(mps.get("differences") or [])
    if mps.get("without_limits"):
        # The limits are the daemon's state: a start that does not set them loses them.
        return [_item("mps", "the MPS control daemon runs without its limits (a start that did not set them)%s"
                      % (": " + differences if differences else ""))]
    if mps.get("changed"):
        return [_item("mps", "MPS compute mode or limits differ from the plan%s"
                      % (": " + differences if differences else ""))]
    return []


def node_drift(plan, record, unit_name=DEFAULT_RESTORE_UNIT, models_catalog=None):
    """Compare one node's record with its plan: {status: in-sync|drifted, drift: [items]}.

    Each item is {area, gpu, message}; areas: hardware, mig-mode, mig-instances, kubelet,
    mps, boot-restore. ``models_catalog``: the host's user GPU models (user_catalog), if any.
    """
    facts = record.get("gpu_facts") or {}
    mismatch = live.hardware_mismatch(plan, facts, models_catalog)
    if mismatch:
        items = [_item("hardware", mismatch)]
    else:
        items = mig_drift(plan, facts)
        items.extend(boot_drift(plan, facts, record.get("boot"), unit_name))
    items.extend(kubelet_drift(plan, record.get("kubelet")))
    items.extend(mps_drift(plan, record.get("mps")))
    return {"status": DRIFTED if items else IN_SYNC, "drift": items}
