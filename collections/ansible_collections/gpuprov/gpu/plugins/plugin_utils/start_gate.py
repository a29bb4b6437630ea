# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The start gate of a gpuprov run: ansible-playbook starts up (imports, inventory, the
playbook's parse) while ``gpuprov`` checks every plan, and contacts no host until it is told to.

``gpuprov`` (gpuprov/runner.py, ``run_playbook(prepare=...)``) passes the read end of a pipe
as GATE_FD_VAR; the progress callback calls :func:`wait_at_gate` before the first play.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

GATE_FD_VAR = "GPUPROV_START_GATE_FD"
GATE_OPEN = b"go"


def wait_at_gate(environ):
    """Hold the run until the gate's file descriptor says GATE_OPEN; SystemExit(2) at its end of file.

    Called before the first play, so a run stopped here has contacted no host. The variable is
    taken out of ``environ`` (os.environ) and the descriptor closed either way, so no worker, SSH
    client or command the run starts sees either.
    """
    fd_text = environ.pop(GATE_FD_VAR, None)
    if not fd_text:
        return
    try:
        fd = int(fd_text)
        seen = b""
        try:
            while len(seen) < len(GATE_OPEN):
                block = os.read(fd, len(GATE_OPEN) - len(seen))
                if not block:
                    break
                seen += block
        finally:
            os.close(fd)
    except (ValueError, OSError) as exc:
        raise SystemExit("gpuprov: the start gate %s=%s cannot be read (%s); nothing was run"
                         % (GATE_FD_VAR, fd_text, exc))
    if seen != GATE_OPEN:
        # SystemExit passes Ansible's callback error handling (which catches Exception).
        raise SystemExit(2)
