# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""How the MPS control binary is run: through Ansible, or through plain subprocess."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import tempfile


class CommandRunner:
    """Runs the MPS control binary. ``run`` is a short client call, ``launch`` starts ``-d``.

    ``launch`` captures output in a file rather than a pipe: a daemon that keeps the
    launcher's stdout open would otherwise make the caller wait for EOF until it exits.
    """

    def __init__(self, timeout=30):
        self.timeout = timeout

    def run(self, argv, data, environ_update):
        raise NotImplementedError

    def launch(self, argv, environ_update, remove_env=()):
        env = dict(os.environ)
        for name in remove_env:
            env.pop(name, None)
        env.update(environ_update)
        with tempfile.TemporaryFile() as output:
            try:
                proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=output,
                                      stderr=subprocess.STDOUT, env=env, timeout=self.timeout,
                                      check=False)
            except OSError as exc:
                return 127, "", str(exc)
            except subprocess.TimeoutExpired:
                return 124, "", "%s did not return within %d seconds" % (" ".join(argv), self.timeout)
            output.seek(0)
            text = output.read().decode("utf-8", "replace")
        return proc.returncode, text, ""


class SubprocessRunner(CommandRunner):
    """Plain subprocess runner, for scripts that run outside Ansible."""

    def run(self, argv, data, environ_update):
        env = dict(os.environ)
        env.update(environ_update)
        try:
            proc = subprocess.run(argv, input=data, capture_output=True, text=True, env=env,
                                  timeout=self.timeout, check=False)
        except OSError as exc:
            return 127, "", str(exc)
        except subprocess.TimeoutExpired:
            return 124, "", "%s did not return within %d seconds" % (" ".join(argv), self.timeout)
        return proc.returncode, proc.stdout, proc.stderr


class ModuleRunner(CommandRunner):
    """Client calls through ``AnsibleModule.run_command`` (argv list, stdin data, no shell)."""

    def __init__(self, module, timeout=30):
        super(ModuleRunner, self).__init__(timeout)
        self.module = module

    def run(self, argv, data, environ_update):
        return self.module.run_command(argv, data=data, environ_update=environ_update,
                                       check_rc=False)
