# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the host MPS unit runs around ``nvidia-cuda-mps-control -d`` on every start.

Compute mode "is not persistent across reboots and always resets to Default" (nvml.h
nvmlDeviceSetComputeMode), and the ``set_default_*`` limits are the control daemon's own state,
gone when it stops. NVIDIA's device plugin sets both each time it starts its MPS daemon
(k8s-device-plugin v0.19.3 cmd/mps-control-daemon/mps/daemon.go, Start(): compute mode
EXCLUSIVE_PROCESS first, the daemon, then set_default_device_pinned_mem_limit and
set_default_active_thread_percentage). The gpu_mps role's unit does the same with this program:

* ``compute-mode`` (ExecStartPre=): EXCLUSIVE_PROCESS on the daemon's GPUs, persistence mode
  on first where nvidia-persistenced does not keep it (see Nvml.set_compute_mode);
* ``limits`` (ExecStartPost=): the default limits on the daemon that has just started, each
  read back, with the same code as the mps_daemon module (MpsDaemonManager).

Both read the settings the role wrote (JSON, the mps_daemon module's parameters). A failure
exits 1 with the reason on stderr, so systemd marks the start failed (and ``Restart=on-failure``
tries again) instead of leaving a daemon without its limits. Nothing here imports Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import sys

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import (
    COMPUTE_MODE_EXCLUSIVE_PROCESS,
    MPS_CONTROL,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.control import MpsControl
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.daemon_manager import MpsDaemonManager
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import NvmlGpus, select_gpus
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.runners import SubprocessRunner
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError

PROGRAM = "gpuprov-mps-start"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# The mps_daemon parameters the settings file may hold (the role writes exactly these).
SETTINGS = ("service", "gpus", "pipe_directory", "pipe_directory_owner", "pipe_directory_group",
            "pipe_directory_mode", "log_directory", "log_directory_owner", "log_directory_group",
            "log_directory_mode", "manage_compute_mode", "active_thread_percentage",
            "pinned_memory_limit", "replicas", "control_binary", "timeout")


class SettingsError(Exception):
    """The settings file cannot be used; the message names the file and the field."""


def load_settings(path):
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        raise SettingsError("cannot read %s: %s; run the gpuprov.gpu.gpu_mps role to write it"
                            % (path, exc.strerror or exc))
    except ValueError as exc:
        raise SettingsError("%s is not valid JSON (%s); run the gpuprov.gpu.gpu_mps role to rewrite it" % (path, exc))
    if not isinstance(data, dict):
        raise SettingsError("%s: expected a JSON object of mps_daemon parameters" % path)
    unknown = sorted(set(data) - set(SETTINGS))
    if unknown:
        raise SettingsError("%s: unknown settings %s" % (path, ", ".join(unknown)))
    for key in ("pipe_directory", "log_directory", "service"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise SettingsError("%s: %s must be set" % (path, key))
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) for g in gpus):
        raise SettingsError("%s: gpus must be a list of GPU UUIDs or indices" % path)
    return data


def set_compute_modes(settings, nvml_factory=Nvml):
    """EXCLUSIVE_PROCESS on the daemon's GPUs; returns the lines to log."""
    if not settings.get("manage_compute_mode", True):
        return ["compute mode left as it is (manage_compute_mode is false)"]
    lines = []
    with nvml_factory() as nvml:
        backend = NvmlGpus(nvml)
        for gpu in select_gpus(backend.gpus(), settings["gpus"]):
            if gpu.mig_current:
                raise MpsError("%s has MIG mode enabled: MPS on MIG devices is out of scope; disable MIG on it or "
                               "leave it out of gpu_mps_gpus" % gpu.describe())
            if gpu.compute_mode == COMPUTE_MODE_EXCLUSIVE_PROCESS:
                lines.append("%s: compute mode already %s" % (gpu.describe(), gpu.compute_mode))
                continue
            try:
                backend.set_compute_mode(gpu, COMPUTE_MODE_EXCLUSIVE_PROCESS)
            except NvmlError as exc:
                raise MpsError("could not set compute mode %s on %s: %s"
                               % (COMPUTE_MODE_EXCLUSIVE_PROCESS, gpu.describe(), exc))
            lines.append("%s: compute mode %s -> %s"
                         % (gpu.describe(), gpu.compute_mode, COMPUTE_MODE_EXCLUSIVE_PROCESS))
    return lines


def set_limits(settings, nvml_factory=Nvml, runner=None):
    """The default limits on the running daemon (MpsDaemonManager, as mps_daemon sets them);
    returns the lines to log."""
    params = dict((key, value) for key, value in settings.items() if key not in ("control_binary", "timeout"))
    params.update(state="started", allow_restart=False)
    runner = runner or SubprocessRunner(timeout=int(settings.get("timeout") or 30))
    binary = settings.get("control_binary") or MPS_CONTROL
    # `-d` returns once it has forked; the daemon may need a moment before it answers.
    MpsControl(runner, settings["pipe_directory"], settings["log_directory"], binary=binary).wait(True)
    with nvml_factory() as nvml:
        manager = MpsDaemonManager(params, NvmlGpus(nvml), runner, check_mode=False, binary=binary)
        result = manager.run()
    limits = result["limits"]["after"]
    lines = ["active thread percentage %s" % limits["active_thread_percentage"]]
    lines.extend("%s: pinned memory limit %s" % (uuid, "%d MiB" % mib if mib else "none")
                 for uuid, mib in sorted(limits["pinned_memory_limit_mib"].items()))
    lines.extend(result.get("warnings") or [])
    return lines


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Set what an MPS control daemon forgets: EXCLUSIVE_PROCESS compute mode before it starts "
                    "(compute-mode), its default thread and pinned memory limits once it answers (limits). "
                    "Run by the gpu_mps role's unit on every start.",
        epilog="exit status: 0 done, 1 failed (the reason is on stderr), 2 bad command line or settings file")
    parser.add_argument("--settings", required=True, metavar="PATH",
                        help="the mps_daemon parameters the gpuprov.gpu.gpu_mps role wrote (JSON)")
    parser.add_argument("step", choices=["compute-mode", "limits"])
    return parser


def main(argv=None, nvml_factory=Nvml, runner=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    try:
        settings = load_settings(args.settings)
    except SettingsError as exc:
        sys.stderr.write("%s: %s\n" % (PROGRAM, exc))
        return EXIT_USAGE
    try:
        if args.step == "compute-mode":
            lines = set_compute_modes(settings, nvml_factory)
        else:
            lines = set_limits(settings, nvml_factory, runner)
    except (MpsError, NvmlError) as exc:
        sys.stderr.write("%s %s: %s\n" % (PROGRAM, args.step, exc))
        return EXIT_FAILED
    for line in lines:
        sys.stdout.write("%s %s: %s\n" % (PROGRAM, args.step, line))
    return EXIT_OK
