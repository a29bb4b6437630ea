# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""One read-only pass over a GPU node: what ``gpuprov status`` and an idempotent converge need.

Each concern is read with the code its own module runs, so the answers cannot differ:

- GPUs: :func:`gpu_info.gather`, as ``gpu_facts``;
- kubelet config: :func:`kubelet_config.plan_change`, as ``kubelet_config`` in check mode;
- host MPS daemon: :class:`mps.MpsDaemonManager` with ``check_mode=True``, as ``mps_daemon``
  in check mode;
- boot-time MIG restore: the unit (exists, enabled), the recorded state file, and the mode,
  type and SHA-1 of every file and directory the gpu_mig role installs for it.

Nothing here writes: every read failure of the kubelet, MPS or restore part comes back as
``error`` text, so that one unreadable part still lets the others be compared.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import stat

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import (
    KubeletConfigError,
    KubeletSettings,
    plan_change,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.launch import config_target, read_launch
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError

# The restore's state file is a small JSON document; anything larger is not ours.
MAX_STATE_TEXT = 1024 * 1024


def read_kubelet(path, settings, sysfs_root, service="kubelet.service", root="/", config_dir=None):
    """{changed_keys, error}: the keys the kubelet_topology role would change.

    As that role does: find how ``service`` starts the kubelet (its ``--config``, its
    ``--config-dir`` drop-ins, flags that override a managed key), then compare the config
    the kubelet really runs with (``path``, or the unit's ``--config``, merged with the drop-ins).
    """
    try:
        launch = read_launch(service, root=root)
    except (IOError, OSError, ValueError) as exc:
        return {"changed_keys": [], "error": "cannot read how %s starts the kubelet: %s" % (service, exc)}
    try:
        path, config_dir = config_target(launch, settings, path, config_dir)
    except KubeletConfigError as exc:
        return {"changed_keys": [], "error": str(exc)}
    if os.path.isdir(path):
        return {"changed_keys": [], "error": "path %s is a directory; give the kubelet config file" % path}
    try:
        plan = plan_change(path, KubeletSettings(**settings), sysfs_root=sysfs_root,
                           config_dir=config_dir)
    except KubeletConfigError as exc:
        return {"changed_keys": [], "error": str(exc)}
    except TypeError as exc:  # a setting KubeletSettings does not know
        return {"changed_keys": [], "error": str(exc)}
    return {"changed_keys": list(plan.changed_keys), "error": None}


def mps_params(service, pipe_directory, log_directory, active_thread_percentage, pinned_memory_limit):
    """The ``mps_daemon`` parameters for a check of a started daemon with these limits."""
    return {
        "state": "started", "gpus": ["all"], "service": service,
        "pipe_directory": pipe_directory, "log_directory": log_directory,
        "manage_compute_mode": True, "active_thread_percentage": active_thread_percentage,
        "pinned_memory_limit": pinned_memory_limit, "replicas": None, "allow_restart": False,
    }


# What a control daemon starts with before anyone sets its defaults (MPS: every thread, no
# pinned memory limit); a daemon still at them while the plan sets limits runs without its limits.
MPS_OWN_PERCENTAGE = 100.0


def _percentage_text(value):
    return "none" if value is None else ("%d" % value if float(value).is_integer() else "%g" % value)


def mps_differences(result):
    """What a check of the daemon found different from the plan, one phrase each."""
    found = []
    for gpu in result["gpus"]:
        if gpu.get("compute_mode_before") != gpu.get("compute_mode_after"):
            found.append("compute mode of %s %s (plan %s)"
                         % (gpu["uuid"], gpu.get("compute_mode_before"), gpu.get("compute_mode_after")))
    before, after = result["limits"]["before"], result["limits"]["after"]
    if before["active_thread_percentage"] != after["active_thread_percentage"]:
        found.append("active thread percentage %s (plan %s)"
                     % (_percentage_text(before["active_thread_percentage"]),
                        _percentage_text(after["active_thread_percentage"])))
    for uuid in [gpu["uuid"] for gpu in result["gpus"]]:
        wanted = after["pinned_memory_limit_mib"].get(uuid)
        have = before["pinned_memory_limit_mib"].get(uuid)
        if have != wanted:
            found.append("pinned memory limit of %s %s (plan %s)" % (
                uuid, "none" if have is None else "%d MiB" % have, "none" if wanted is None else "%d MiB" % wanted))
    return found


def read_mps(params, runner, binary, warn, nvml_factory=Nvml):
    """{running, changed, error, without_limits, differences}: the daemon, whether compute mode
    or limits differ, and how.

    ``changed`` compares what the check read with what it wants (limits, compute modes), the
    same comparison ``gpuprov status`` always made; directories are the gpu_mps role's.
    ``without_limits``: the daemon runs with MPS's own defaults while the plan sets limits, as
    after a start that did not set them (the limits are the daemon's state, lost with it).
    """
    if binary is None:
        return {"running": False, "changed": False, "without_limits": False, "differences": [],
                "error": "nvidia-cuda-mps-control is not on the PATH of this node"}
    # Imported here: a node without host MPS (most) never compiles the daemon's code.
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.daemon_manager import MpsDaemonManager
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import NvmlGpus

    try:
        with nvml_factory() as nvml:
            manager = MpsDaemonManager(params, NvmlGpus(nvml), runner, check_mode=True, warn=warn,
                                       binary=binary)
            result = manager.run()
    except (MpsError, NvmlError) as exc:
        return {"running": False, "changed": False, "without_limits": False, "differences": [], "error": str(exc)}
    limits = result["limits"]
    modes_before = [gpu.get("compute_mode_before") for gpu in result["gpus"]]
    modes_after = [gpu.get("compute_mode_after") for gpu in result["gpus"]]
    # The check's "daemon" says what a converge would leave (running, when it would start it);
    # the diff's "before" is what it found.
    running = bool(result["diff"]["before"]["daemon_running"])
    before = limits["before"]
    at_own_defaults = (before["active_thread_percentage"] == MPS_OWN_PERCENTAGE
                       and not any(before["pinned_memory_limit_mib"].values()))
    return {"running": running,
            "changed": limits["before"] != limits["after"] or modes_before != modes_after,
            "without_limits": running and at_own_defaults and limits["before"] != limits["after"],
            "differences": mps_differences(result) if running else [],
            "error": None}


def file_record(path):
    """{path, exists, isdir, islnk, mode, checksum} of one path, without following a link.

    The fields and their forms are those of ``ansible.builtin.find`` (``mode`` as "0644",
    ``checksum`` SHA-1 of a regular file's bytes, else None).
    """
    try:
        info = os.lstat(path)
    except OSError:
        return {"path": path, "exists": False, "isdir": False, "islnk": False, "mode": None, "checksum": None}
    record = {"path": path, "exists": True, "isdir": stat.S_ISDIR(info.st_mode),
              "islnk": stat.S_ISLNK(info.st_mode), "mode": "%04o" % stat.S_IMODE(info.st_mode), "checksum": None}
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha1()
        # O_NOFOLLOW: the path was a regular file a moment ago; never read through a link put there since.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
        record["checksum"] = digest.hexdigest()
    return record


def unit_file_state(run_command, systemctl, unit):
    """systemd's UnitFileState of ``unit`` (enabled, disabled, ...), or None when it says none."""
    rc, out, _err = run_command([systemctl, "show", "--property=UnitFileState", unit])
    if rc != 0:
        return None
    for line in out.splitlines():
        if line.startswith("UnitFileState="):
            return line.split("=", 1)[1].strip() or None
    return None


def read_mig_restore(run_command, systemctl, unit, unit_path, state_file, paths):
    """The boot-time MIG restore as installed: what gpuprov.gpu.node_drift's ``boot`` reads, plus files.

    {unit, unit_exists, unit_enabled, state_text, files: [file_record...], error}
    """
    result = {"unit": unit, "unit_exists": os.path.lexists(unit_path), "unit_enabled": None,
              "state_text": None, "files": [], "error": None}
    if result["unit_exists"]:
        if systemctl is None:
            result["error"] = "systemctl is not on the PATH of this node"
        else:
            result["unit_enabled"] = unit_file_state(run_command, systemctl, unit)
    try:
        if os.path.isfile(state_file) and not os.path.islink(state_file):
            fd = os.open(state_file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as handle:
                # Like slurp: a state file that is not a regular file counts as missing.
                result["state_text"] = handle.read(MAX_STATE_TEXT + 1).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        result["error"] = "%s: %s" % (state_file, exc.strerror or exc)
    for path in paths:
        try:
            result["files"].append(file_record(path))
        except OSError as exc:
            result["files"].append({"path": path, "exists": True, "isdir": False, "islnk": False,
                                    "mode": None, "checksum": None})
            result["error"] = "%s: %s" % (path, exc.strerror or exc)
    return result
