# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of the one-call node read: node_state's arguments from a plan, and its answer
turned into the record gpuprov.gpu.node_drift compares.

The node_plan action (``read_node: true``) plans a host, runs gpuprov.gpu.node_state with the
arguments built here, and compares the answer with the plan in the same task: one round trip
for a node that is already as planned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import KubeletSettings
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.drift import DEFAULT_RESTORE_UNIT, node_drift

# The collection's node-side files the boot-time MIG restore program runs: the list
# roles/gpu_mig/tasks/persist.yml installs (``_sources``; a unit test keeps the two equal).
RESTORE_SOURCES = ("mig_solver.py", "nvml.py", "mig_manager.py", "mig_restore.py")


def kubelet_settings(plan):
    """The plan's kubelet settings with kubelet_config's option names; None when it has none."""
    kubelet = plan.get("kubelet") or {}
    settings = dict((field, kubelet[field]) for field in KubeletSettings.FIELDS if kubelet.get(field) is not None)
    return settings or None


def host_mps(plan):
    """The plan's host MPS section, or None when the daemon is not the host's (device plugin, none)."""
    mps = plan.get("mps")
    if mps and mps.get("provider") == "host":
        return mps
    return None


def mps_args(plan, service, pipe_directory, log_directory):
    """node_state's ``mps`` for a plan with host MPS (limits per GPU, as converge_node.yml sets them)."""
    mps = host_mps(plan)
    if mps is None:
        return None
    return {
        "service": service, "pipe_directory": pipe_directory, "log_directory": log_directory,
        "active_thread_percentage": mps["active_thread_percentage"],
        "pinned_memory_limit": dict((str(device["index"]), device["pinned_memory_limit_mib"])
                                    for device in mps["devices"]),
    }


def has_mig_gpus(plan):
    """Whether the plan has MIG-capable GPUs (those the boot-time restore is about)."""
    return any(gpu.get("mig") for gpu in plan.get("gpus") or [])


def sha1(text):
    """SHA-1 of text as Ansible's ``hash('sha1')`` takes it (UTF-8), or of bytes as they are."""
    if not isinstance(text, bytes):
        text = text.encode("utf-8", "surrogateescape")
    return hashlib.sha1(text).hexdigest()


def expected_entry(path, mode, isdir, checksum):
    """One "path mode is-directory sha1" line, the form persist.yml compares find's results in."""
    return "%s %s %s %s" % (path, mode, isdir, checksum if checksum is not None else "-")


def found_entries(files):
    """node_state's file records in the same "path mode is-directory sha1" form."""
    return [expected_entry(f["path"], f["mode"], f["isdir"], f["checksum"]) for f in files if f["exists"]]


def restore_files_drift(expected, files):
    """Drift items for restore files that differ from what the gpu_mig role installs."""
    found = dict((line.split(" ", 1)[0], line) for line in found_entries(files))
    differing = []
    for line in expected:
        path = line.split(" ", 1)[0]
        if found.get(path) != line:
            differing.append("%s (%s)" % (path, "missing" if path not in found else "differs"))
    if not differing:
        return []
    return [{"area": "boot-restore", "gpu": None,
             "message": "installed files differ from what gpuprov installs: %s" % ", ".join(differing)}]


def drift_record(facts, answer):
    """The record gpuprov.gpu.node_drift takes, from node_state's answer."""
    restore = answer.get("mig_restore")
    boot = None
    if restore is not None:
        boot = dict((key, restore[key]) for key in ("unit", "unit_exists", "unit_enabled", "state_text"))
    return {"gpu_facts": facts, "kubelet": answer.get("kubelet"), "mps": answer.get("mps"), "boot": boot}


def compare(plan, facts, answer, expected_restore_files, unit_name=DEFAULT_RESTORE_UNIT, unread=(),
            models_catalog=None):
    """{status, drift} of the node: node_drift's comparison, plus the restore's installed files.

    ``unread`` names parts the controller could not even ask about (for example a restore
    path that is not safe to use): each is drift, so that a converge goes on to the step
    that reports it properly.
    """
    result = node_drift(plan, drift_record(facts, answer), unit_name=unit_name, models_catalog=models_catalog)
    restore = answer.get("mig_restore")
    items = list(result["drift"])
    items.extend({"area": "boot-restore", "gpu": None, "message": "the boot-time MIG restore was not read: %s" % text}
                 for text in unread)
    if restore is not None:
        if restore.get("error"):
            items.append({"area": "boot-restore", "gpu": None,
                          "message": "the boot-time MIG restore could not be read: %s" % restore["error"]})
        # Like persist.yml: the files are compared once the unit is installed and enabled
        # (before that, node_drift already names the missing unit).
        if expected_restore_files and restore.get("unit_exists") and restore.get("unit_enabled") == "enabled":
            items.extend(restore_files_drift(expected_restore_files, restore.get("files") or []))
    return {"status": "drifted" if items else "in-sync", "drift": items}
