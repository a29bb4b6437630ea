# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Converging one host MPS control daemon: plan every GPU and directory, then change."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import NvmlError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import (
    COMPUTE_MODE_DEFAULT,
    COMPUTE_MODE_EXCLUSIVE_PROCESS,
    CONTROL_ENDPOINT,
    MPS_CONTROL,
    UNIX_SOCKET_PATH_MAX,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.control import (
    MpsControl,
    same_percentage,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.directories import (
    DirectorySpec,
    apply_directory,
    leftover_entries,
    plan_directory,
    read_metadata,
    remove_entries,
    write_metadata,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import (
    Gpu,
    resolve_pinned_limits,
    select_gpus,
)


class MpsDaemonManager:
    """Converge one host MPS daemon to ``params``; ``run()`` returns the module result."""

    def __init__(self, params, gpu_backend, runner, check_mode=False, warn=None, binary=MPS_CONTROL):
        self.params = params
        self.backend = gpu_backend
        self.check_mode = check_mode
        self._warnings = []
        self._warn = warn
        self.pipe = DirectorySpec(params["pipe_directory"], "pipe_directory", params.get("pipe_directory_mode", "0755"),
                                  params.get("pipe_directory_owner"), params.get("pipe_directory_group"))
        self.log = DirectorySpec(params["log_directory"], "log_directory", params.get("log_directory_mode", "0755"),
                                 params.get("log_directory_owner"), params.get("log_directory_group"))
        if self.pipe.path == self.log.path:
            raise MpsError("pipe_directory and log_directory must differ (both are %s)" % self.pipe.path)
        if len(os.path.join(self.pipe.path, CONTROL_ENDPOINT).encode("utf-8")) > UNIX_SOCKET_PATH_MAX:
            raise MpsError("pipe_directory %s is too long: the daemon's socket %s must fit in %d bytes"
                           % (self.pipe.path, os.path.join(self.pipe.path, CONTROL_ENDPOINT), UNIX_SOCKET_PATH_MAX))
        self.control = MpsControl(runner, self.pipe.path, self.log.path, binary=binary)
        self.service = params.get("service")
        self.state = params.get("state", "started")
        self.manage_compute_mode = params.get("manage_compute_mode", True)
        percentage = params.get("active_thread_percentage")
        replicas = params.get("replicas")
        if replicas is not None and replicas < 1:
            raise MpsError("replicas must be at least 1, got %r" % replicas)
        if percentage is None and replicas:
            percentage = 100 // replicas
        if percentage is not None and not 0 < float(percentage) <= 100:
            raise MpsError("active_thread_percentage must be greater than 0 and at most 100, got %r" % percentage)
        self.percentage = percentage
        self.replicas = replicas
        # what this run changed, newest last, so a failure can put it back
        self._undo = []
        self.changed = False

    # ---------------------------------------------------------------- helpers

    def warn(self, message):
        self._warnings.append(message)
        if self._warn:
            self._warn(message)

    def _resolve_gpus(self):
        gpus = select_gpus(self.backend.gpus(), self.params.get("gpus"))
        for gpu in gpus:
            if gpu.mig_current or gpu.mig_pending:
                raise MpsError("%s has MIG mode enabled%s: MPS on MIG devices is out of scope for this "
                               "module; disable MIG on it (gpuprov.gpu.mig_mode) or leave it out of gpus"
                               % (gpu.describe(), "" if gpu.mig_current else " (pending a GPU reset)"))
        if self.state == "started" and (self.percentage is not None or self.params.get("pinned_memory_limit")
                                        is not None or self.replicas):
            for gpu in gpus:
                if not gpu.volta_or_newer:
                    raise MpsError("%s, a %s of compute capability %s, predates Volta: MPS thread and memory "
                                   "limits need compute capability 7.0 or newer; leave the limits unset "
                                   "for it" % (gpu.describe(), gpu.name, gpu.compute_capability))
        return gpus

    def _detect(self):
        """'running' (with the server list), 'stale' (leftover files) or 'absent'."""
        if not os.path.isdir(self.pipe.path):
            return "absent", None, []
        servers = self.control.server_list()
        if servers is not None:
            return "running", servers, []
        leftovers = leftover_entries(self.pipe.path)
        if leftovers:
            return "stale", None, leftovers
        return "absent", None, []

    def _set_compute_modes(self, gpus, mode):
        """Set ``mode`` where it differs; returns {index: (before, after)}."""
        result = {}
        for gpu in gpus:
            before = gpu.compute_mode
            after = before
            if self.manage_compute_mode and before != mode:
                after = mode
                if not self.check_mode:
                    try:
                        self.backend.set_compute_mode(gpu, mode)
                    except NvmlError as exc:
                        raise MpsError("could not set compute mode %s on %s: %s" % (mode, gpu.describe(), exc))
                    self._undo.append(("compute_mode", gpu, before))
                self.changed = True
            result[gpu.index] = (before, after)
        return result

    def _directories(self):
        plans = [plan_directory(self.pipe), plan_directory(self.log)]
        for plan in plans:
            for message in plan["warnings"]:
                self.warn(message)
            if plan["actions"]:
                self.changed = True
                if not self.check_mode:
                    apply_directory(plan)
        return plans

    def _read_limits(self, gpus, served=None):
        """The running daemon's defaults. ``served``: the UUIDs it serves, in ordinal order
        (None: the selected GPUs); a selected GPU it does not serve has no limit."""
        served = [gpu.uuid for gpu in gpus] if served is None else served
        percentage = self.control.get_active_thread_percentage()
        pinned = {}
        for gpu in gpus:
            pinned[gpu.uuid] = None
            if gpu.uuid in served:
                pinned[gpu.uuid] = self.control.get_pinned_memory_limit(served.index(gpu.uuid))
        return {"active_thread_percentage": percentage, "pinned_memory_limit_mib": pinned}

    @staticmethod
    def _fresh_limits(gpus):
        """The defaults of a daemon that has just started: full threads, no memory limit."""
        return {"active_thread_percentage": 100.0,
                "pinned_memory_limit_mib": dict((gpu.uuid, None) for gpu in gpus)}

    @staticmethod
    def _no_limits(gpus):
        """A daemon that does not run has no limits at all."""
        return {"active_thread_percentage": None,
                "pinned_memory_limit_mib": dict((gpu.uuid, None) for gpu in gpus)}

    def _apply_limits(self, gpus, baseline, pinned_wanted):
        """Set the limits that differ from ``baseline``; returns the limits afterwards."""
        after = {"active_thread_percentage": baseline["active_thread_percentage"],
                 "pinned_memory_limit_mib": dict(baseline["pinned_memory_limit_mib"])}
        changes = []
        if self.percentage is not None and not same_percentage(baseline["active_thread_percentage"], self.percentage):
            changes.append(("active_thread_percentage", None, float(self.percentage),
                            baseline["active_thread_percentage"]))
            after["active_thread_percentage"] = float(self.percentage)
        for ordinal, gpu in enumerate(gpus):
            wanted = pinned_wanted.get(gpu.index)
            current = baseline["pinned_memory_limit_mib"].get(gpu.uuid)
            if wanted is not None and current != wanted:
                changes.append(("pinned_memory_limit", ordinal, wanted, current))
                after["pinned_memory_limit_mib"][gpu.uuid] = wanted
        if changes:
            self.changed = True
        if self.check_mode:
            return after, bool(changes)
        for kind, ordinal, value, old in changes:
            if kind == "active_thread_percentage":
                self.control.set_active_thread_percentage(value)
            else:
                self.control.set_pinned_memory_limit(ordinal, value)
            self._undo.append((kind, ordinal, old))
        return after, bool(changes)

    def _rollback(self):
        """Undo this run's changes, newest first; returns what could not be undone."""
        left = []
        for kind, target, old in reversed(self._undo):
            try:
                if kind == "compute_mode":
                    self.backend.set_compute_mode(target, old)
                elif kind == "daemon":
                    self.control.quit()
                elif old is None:
                    # MPS has no command that removes a default limit again
                    raise MpsError("the daemon keeps the new value until it restarts")
                elif kind == "active_thread_percentage":
                    self.control.set_active_thread_percentage(old)
                else:
                    self.control.set_pinned_memory_limit(target, old)
            except (MpsError, NvmlError, OSError) as exc:  # keep undoing the rest; say what stayed
                what = target.describe() if isinstance(target, Gpu) else target
                left.append("%s%s (%s)" % (kind, "" if what is None else " of %s" % what, exc))
        self._undo = []
        return left

    # ---------------------------------------------------------------- converge

    def run(self):
        gpus = self._resolve_gpus()
        try:
            if self.state == "stopped":
                result = self._stop(gpus)
            else:
                result = self._start(gpus)
        except MpsError as exc:
            undone = bool(self._undo)
            left = self._rollback() if not self.check_mode else []
            message = str(exc)
            if left:
                message += "; could not undo: " + "; ".join(left)
            elif undone:
                message += "; the changes of this run to compute mode, daemon and limits were undone"
            raise MpsError(message)
        result["warnings"] = list(self._warnings)
        return result

    def _daemon_info(self, status):
        return {"running": status == "running", "pid": None, "pipe_directory": self.pipe.path,
                "log_directory": self.log.path, "service": self.service, "started": False,
                "stopped": False, "restarted": False, "stale_recovered": False, "removed_files": []}

    def _start(self, gpus):
        pinned_wanted = resolve_pinned_limits(gpus, self.params.get("pinned_memory_limit"), self.replicas)
        status, servers, leftovers = self._detect()
        was_running = status == "running"
        daemon = self._daemon_info(status)
        visible = [gpu.uuid for gpu in gpus]
        served = None
        restart = False

        if self.service and status != "running":
            if not self.check_mode:
                raise MpsError("%s does not answer: service %s should run it; check `systemctl status "
                               "%s` and %s" % (self.control.describe(), self.service, self.service,
                                               os.path.join(self.log.path, "control.log")))
            self.warn("%s does not answer yet; service %s is expected to start it"
                      % (self.control.describe(), self.service))
        elif not self.service and status == "running":
            recorded = read_metadata(self.pipe.path)
            if recorded is None:
                self.warn("%s was not started by gpuprov: its GPU set is unknown and left as it is"
                          % self.control.describe())
            elif recorded.get("visible_devices") != visible:
                served = list(recorded.get("visible_devices") or [])
                if not self.params.get("allow_restart"):
                    raise MpsError("%s serves GPUs %s but gpus selects %s: changing them needs a daemon "
                                   "restart, which ends its MPS servers %s; set allow_restart or stop "
                                   "the daemon first" % (
                                       self.control.describe(), ", ".join(recorded.get("visible_devices") or []),
                                       ", ".join(visible), ", ".join(str(p) for p in servers) or "(none now)"))
                restart = True

        plans = self._directories()

        if status == "stale" and not self.service:
            daemon["stale_recovered"] = True
            daemon["removed_files"] = leftovers
            self.changed = True
            self.warn("%s had no answering daemon but held %s (left by a daemon that died); removed "
                      "them and started a new daemon" % (self.pipe.path, ", ".join(leftovers)))
            if not self.check_mode:
                remove_entries(self.pipe.path, leftovers)

        modes = self._set_compute_modes(gpus, COMPUTE_MODE_EXCLUSIVE_PROCESS)

        before_limits = self._read_limits(gpus, served) if was_running else self._no_limits(gpus)
        baseline = before_limits
        if restart or (status != "running" and not self.service):
            self.changed = True
            daemon["started"] = True
            daemon["restarted"] = restart
            if restart and servers:
                self.warn("restarting %s for the new GPU set ends its MPS servers %s"
                          % (self.control.describe(), ", ".join(str(p) for p in servers)))
            servers = []
            if not self.check_mode:
                if restart:
                    self.control.quit()
                servers = self.control.start(visible)
                self._undo.append(("daemon", self.pipe.path, None))
                write_metadata(self.pipe.path, {"visible_devices": visible})
            daemon["running"] = True
            baseline = self._fresh_limits(gpus)
        elif status != "running":
            baseline = self._fresh_limits(gpus)  # check mode, the service starts it later

        after_limits, limits_changed = self._apply_limits(gpus, baseline, pinned_wanted)
        if limits_changed and was_running and not restart and servers:
            self.warn("MPS servers %s of %s keep their old limits: defaults apply to servers started "
                      "later only; restart those servers' clients (or the daemon) to apply the new "
                      "limits" % (", ".join(str(p) for p in servers), self.control.describe()))

        if daemon["running"] and not self.check_mode:
            daemon["pid"] = self.control.pid()
        self._undo = []
        return self._result(daemon, was_running, gpus, modes, before_limits, after_limits, servers or [], plans)

    def _stop(self, gpus):
        status, servers, leftovers = self._detect()
        was_running = status == "running"
        daemon = self._daemon_info(status)
        before_limits = self._no_limits(gpus)
        if was_running:
            daemon["pid"] = self.control.pid()
            recorded = read_metadata(self.pipe.path) or {}
            try:
                before_limits = self._read_limits(gpus, recorded.get("visible_devices"))
            except MpsError as exc:  # only reported; it must not keep the daemon from stopping
                self.warn("could not read the limits of %s before stopping it: %s" % (self.control.describe(), exc))
            if self.service and not self.check_mode:
                raise MpsError("%s still answers although service %s should have stopped it; stop the "
                               "service (systemctl stop %s) and run again"
                               % (self.control.describe(), self.service, self.service))
            if self.service:
                self.warn("%s still answers; service %s is expected to stop it"
                          % (self.control.describe(), self.service))
            self.changed = True
            daemon["stopped"] = True
            if servers and not self.service:
                self.warn("stopping %s ends its MPS servers %s and their clients"
                          % (self.control.describe(), ", ".join(str(p) for p in servers)))
            if not self.check_mode and not self.service:
                self.control.quit()
                # the daemon removes its own files; ours (and anything it left) go here
                leftovers = leftover_entries(self.pipe.path)
        elif status == "stale":
            daemon["stale_recovered"] = True
            self.warn("%s had no answering daemon but held %s (left by a daemon that died); removed them"
                      % (self.pipe.path, ", ".join(leftovers)))
        if leftovers:
            daemon["removed_files"] = leftovers
            self.changed = True
            if not self.check_mode:
                remove_entries(self.pipe.path, leftovers)
        if not self.check_mode:
            daemon["running"] = False
            daemon["pid"] = None
        modes = self._set_compute_modes(gpus, COMPUTE_MODE_DEFAULT)
        self._undo = []
        return self._result(daemon, was_running, gpus, modes, before_limits, self._no_limits(gpus), [], [])

    def _result(self, daemon, was_running, gpus, modes, before_limits, after_limits, servers, plans):
        gpu_rows = []
        for ordinal, gpu in enumerate(gpus):
            before, after = modes[gpu.index]
            gpu_rows.append({"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "ordinal": ordinal,
                             "memory_total_mib": gpu.memory_total_mib,
                             "compute_mode_before": before, "compute_mode_after": after})
        directories = dict((p["spec"].field, {"path": p["path"], "before": p["before"], "after": p["after"],
                                              "changed": bool(p["actions"])}) for p in plans)
        running_after = self.state == "started"
        diff = {
            "before": {"daemon_running": was_running,
                       "compute_mode": dict((r["uuid"], r["compute_mode_before"]) for r in gpu_rows),
                       "limits": before_limits,
                       "directories": dict((k, v["before"]) for k, v in directories.items())},
            "after": {"daemon_running": running_after,
                      "compute_mode": dict((r["uuid"], r["compute_mode_after"]) for r in gpu_rows),
                      "limits": after_limits,
                      "directories": dict((k, v["after"]) for k, v in directories.items())},
        }
        return {"changed": self.changed, "daemon": daemon, "gpus": gpu_rows, "servers": servers,
                "limits": {"before": before_limits, "after": after_limits},
                "directories": directories, "diff": diff}
