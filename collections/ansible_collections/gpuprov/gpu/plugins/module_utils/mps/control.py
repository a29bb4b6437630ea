# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The client side of the MPS control daemon: commands written to its stdin, every change
read back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import (
    CONTROL_ENDPOINT,
    DAEMON_ENV_OVERRIDES,
    MPS_CONTROL,
    PID_FILE,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.replies import (
    format_memory_limit,
    parse_memory_limit,
    parse_percentage,
    parse_server_list,
)


class MpsControl:
    """One MPS control daemon, addressed by its pipe directory."""

    def __init__(self, runner, pipe_directory, log_directory, binary=MPS_CONTROL,
                 sleep=time.sleep, clock=time.monotonic):
        self.runner = runner
        self.pipe_directory = pipe_directory
        self.log_directory = log_directory
        self.binary = binary
        self._sleep = sleep
        self._clock = clock

    @property
    def environment(self):
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_directory,
                "CUDA_MPS_LOG_DIRECTORY": self.log_directory}

    @property
    def endpoint(self):
        return os.path.join(self.pipe_directory, CONTROL_ENDPOINT)

    def describe(self):
        return "the MPS control daemon on %s" % self.pipe_directory

    def endpoint_exists(self):
        return os.path.lexists(self.endpoint)

    def client(self, command):
        """Send one command; returns (rc, stdout, stderr) as they came."""
        return self.runner.run([self.binary], command, self.environment)

    def command(self, command):
        """Send one command to an answering daemon; its reply, or MpsError."""
        rc, out, err = self.client(command)
        if rc != 0:
            raise MpsError("%s did not accept %r (rc=%d): %s" % (
                self.describe(), command, rc, (out + err).strip() or "no output"))
        return out

    def server_list(self):
        """PIDs of the running MPS servers, or None when no daemon answers."""
        if not self.endpoint_exists():
            return None
        rc, out, _err = self.client("get_server_list")
        if rc != 0:
            return None
        return parse_server_list(out)

    def pid(self):
        try:
            with open(os.path.join(self.pipe_directory, PID_FILE)) as handle:
                text = handle.read().strip()
        except (IOError, OSError):
            return None
        return int(text) if text.isdigit() else None

    def start(self, visible_devices):
        env = dict(self.environment)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(visible_devices)
        rc, out, err = self.runner.launch([self.binary, "-d"], env, remove_env=DAEMON_ENV_OVERRIDES)
        if rc != 0:
            raise MpsError("could not start %s: %s -d exited %d: %s; see %s" % (
                self.describe(), self.binary, rc, (out + err).strip() or "no output",
                os.path.join(self.log_directory, "control.log")))
        return self.wait(True)

    def quit(self):
        self.command("quit")
        return self.wait(False)

    def wait(self, answering):
        """Wait until the daemon answers (or stops answering); the server list or None."""
        deadline = self._clock() + self.runner.timeout
        while True:
            servers = self.server_list()
            if (servers is not None) == answering:
                return servers
            if self._clock() >= deadline:
                if answering:
                    raise MpsError("%s was started but does not answer after %d seconds; see %s" % (
                        self.describe(), self.runner.timeout,
                        os.path.join(self.log_directory, "control.log")))
                raise MpsError("%s still answers %d seconds after quit: it waits for its MPS "
                               "servers' clients to finish; stop those clients and run again"
                               % (self.describe(), self.runner.timeout))
            self._sleep(0.2)

    def get_active_thread_percentage(self):
        return parse_percentage(self.command("get_default_active_thread_percentage"))

    def set_active_thread_percentage(self, value):
        self.command("set_default_active_thread_percentage %s" % _format_percentage(value))
        current = self.get_active_thread_percentage()
        if not same_percentage(current, value):
            raise MpsError("%s kept active thread percentage %s after set_default_active_thread_"
                           "percentage %s (MPS limits need a Volta or newer GPU)"
                           % (self.describe(), current, _format_percentage(value)))

    def get_pinned_memory_limit(self, ordinal):
        return parse_memory_limit(self.command("get_default_device_pinned_mem_limit %d" % ordinal))

    def set_pinned_memory_limit(self, ordinal, mib):
        reply = self.command("set_default_device_pinned_mem_limit %d %s" % (ordinal, format_memory_limit(mib)))
        current = self.get_pinned_memory_limit(ordinal)
        if current != mib:
            raise MpsError("%s kept pinned memory limit %s MiB on device %d after setting %d MiB: %s"
                           % (self.describe(), current, ordinal, mib, reply.strip() or "no reply"))


def _format_percentage(value):
    return ("%d" % value) if float(value).is_integer() else ("%g" % value)


def same_percentage(a, b):
    return a is not None and b is not None and abs(float(a) - float(b)) < 0.05
