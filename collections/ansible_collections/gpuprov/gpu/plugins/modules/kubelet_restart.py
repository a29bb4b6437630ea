#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_restart
short_description: Restart the kubelet, with fresh resource-manager checkpoints when asked, and check that it stays up
version_added: "0.2.0"
description:
  - With O(reset_checkpoints), stops the kubelet's unit, deletes those checkpoint files and starts
    the unit again (the kubelet refuses a CPU or memory manager checkpoint that contradicts its
    new config, and a running kubelet rewrites its checkpoints, so they go while it is stopped);
    without, restarts the unit.
  - Then asks the kubelet's /healthz until it answers C(ok), watches the unit for
    O(stable_intervals) restart intervals (the unit's C(RestartSec=)) plus O(startup_seconds),
    and fails unless the unit is still active with the same restart count (C(NRestarts)) and
    /healthz still answers C(ok). /healthz answers C(ok) before the kubelet's container manager
    has started, so a kubelet that refuses its checkpoint answers C(ok) for a few seconds of
    every run of its crash loop; one answer proves nothing.
  - Every path of O(reset_checkpoints) is checked before the unit is stopped. A failure says
    what was done before it (RV(actions)), so that the caller can put the old config back.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Checks the paths and reports what it would do; stops, deletes, starts and watches nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  service:
    description: The kubelet's systemd unit.
    type: str
    default: kubelet.service
  reset_checkpoints:
    description:
      - Absolute paths of the checkpoint files to delete with the kubelet stopped (for example
        C(/var/lib/kubelet/cpu_manager_state)); a missing one is fine, a directory is refused.
      - Empty, the unit is restarted and no file is touched.
    type: list
    elements: path
    default: []
  healthz_url:
    description: The kubelet's /healthz (C(healthzBindAddress) and C(healthzPort) of its config), asked without a proxy.
    type: str
    required: true
  retries:
    description: How many more times to ask /healthz after a first answer that is not C(ok).
    type: int
    default: 30
  delay:
    description: Seconds between two /healthz tries.
    type: float
    default: 2
  timeout:
    description: Seconds one /healthz request may take.
    type: float
    default: 5
  stable_intervals:
    description: Restart intervals (the unit's C(RestartSec=)) the unit must stay up after /healthz answered C(ok).
    type: int
    default: 2
  startup_seconds:
    description: Seconds a kubelet needs from its start to its container manager, added to the watch.
    type: float
    default: 10
requirements:
  - systemd 235 or later on the node (C(NRestarts))
"""

EXAMPLES = r"""
- name: Restart the kubelet with a fresh CPU manager checkpoint and check that it stays up
  gpuprov.gpu.kubelet_restart:
    service: kubelet
    reset_checkpoints: [/var/lib/kubelet/cpu_manager_state]
    healthz_url: http://127.0.0.1:10248/healthz
"""

RETURN = r"""
actions:
  description: What was done to the unit and the files, in order (check mode - what would be done); on a failure, what was done before it.
  returned: always
  type: list
  elements: str
  sample: [stopped kubelet, deleted /var/lib/kubelet/cpu_manager_state, started kubelet]
summary:
  description: RV(actions) in one line.
  returned: always
  type: str
healthz_tries:
  description: How many /healthz requests it took to get C(ok).
  returned: success
  type: int
restart_seconds:
  description: The unit's restart interval (C(RestartUSec)) in seconds.
  returned: success, or a failure after the first C(systemctl show)
  type: float
stable_seconds:
  description: How long the unit was watched, in whole seconds.
  returned: success, or a failure after the watch
  type: int
restarts_before:
  description: C(NRestarts) when /healthz first answered C(ok).
  returned: success, or a failure after the watch
  type: int
restarts_after:
  description: C(NRestarts) after the watch.
  returned: success, or a failure after the watch
  type: int
active_state:
  description: The unit's C(ActiveState) after the watch.
  returned: success, or a failure after the watch
  type: str
status:
  description: HTTP status of the last /healthz answer, -1 when nothing answered.
  returned: success, or a failure of a /healthz check
  type: int
content:
  description: Body of the last /healthz answer.
  returned: success, or a failure of a /healthz check
  type: str
"""

import errno
import os
import stat
import time
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.health import (
    HealthWatch,
    KubeletHealthError,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import is_normal_absolute
from ansible_collections.gpuprov.gpu.plugins.module_utils.systemd_unit import unit_name


def _systemctl(module, systemctl):
    def run(verb, service, *options):
        rc, out, err = module.run_command([systemctl, verb, service] + list(options))
        if rc != 0:
            raise KubeletHealthError("systemctl %s %s exited %d: %s" % (verb, service, rc, (err or out).strip()))
        return out

    return run


def _getter(timeout):
    def get(url):
        try:
            reply = open_url(url, method="GET", timeout=timeout, use_proxy=False, follow_redirects="none")
            return reply.getcode(), reply.read().decode("utf-8", "replace")
        except HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")
        except Exception as exc:  # refused, reset, timed out, bad URL: no answer, said as such
            return None, str(exc)

    return get


def _checkpoint_problem(path):
    """Why PATH cannot be deleted as a checkpoint file, or None (a missing file is fine)."""
    if not is_normal_absolute(path):
        return "reset_checkpoints: %r is not a normal absolute path" % (path,)
    try:
        info = os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        return "reset_checkpoints: cannot look at %s: %s" % (path, exc.strerror)
    if stat.S_ISDIR(info.st_mode):
        return "reset_checkpoints: %s is a directory, not a checkpoint file; refusing to delete it" % path
    return None


def restart(systemctl, service, checkpoints, actions):
    """Stop, delete the CHECKPOINTS, start; or restart without them. ACTIONS grows as it goes."""
    if not checkpoints:
        systemctl("restart", service)
        actions.append("restarted %s" % service)
        return
    systemctl("stop", service)
    actions.append("stopped %s" % service)
    for path in checkpoints:
        try:
            os.unlink(path)  # a link in the checkpoint's place goes, its target stays
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise KubeletHealthError("cannot delete %s: %s (%s is stopped)" % (path, exc.strerror, service))
            continue
        actions.append("deleted %s" % path)
    systemctl("start", service)
    actions.append("started %s" % service)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", default="kubelet.service"),
            reset_checkpoints=dict(type="list", elements="path", default=[]),
            healthz_url=dict(type="str", required=True),
            retries=dict(type="int", default=30),
            delay=dict(type="float", default=2),
            timeout=dict(type="float", default=5),
            stable_intervals=dict(type="int", default=2),
            startup_seconds=dict(type="float", default=10),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ("retries", "delay", "stable_intervals", "startup_seconds"):
        if params[name] < 0:
            module.fail_json(msg="%s must not be negative, got %s" % (name, params[name]), actions=[])
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be positive, got %s" % params["timeout"], actions=[])
    service, checkpoints = params["service"], params["reset_checkpoints"]
    try:
        unit_name(service)
    except ValueError as exc:
        module.fail_json(msg="service: %s" % exc, actions=[])
    problems = [problem for problem in (_checkpoint_problem(path) for path in checkpoints) if problem]
    if problems:
        module.fail_json(msg="; ".join(problems), actions=[])

    if module.check_mode:
        planned = (["would stop %s" % service] + ["would delete %s" % path for path in checkpoints if os.path.lexists(path)]
                   + ["would start %s" % service]) if checkpoints else ["would restart %s" % service]
        module.exit_json(changed=True, actions=planned, summary=", ".join(planned))

    systemctl = _systemctl(module, module.get_bin_path("systemctl", required=True))
    watch = HealthWatch(service, params["healthz_url"],
                        lambda unit, props: systemctl("show", unit, "--property=" + ",".join(props)),
                        _getter(params["timeout"]), time.sleep, time.monotonic)
    actions = []
    try:
        restart(systemctl, service, checkpoints, actions)
        facts = watch.run(params["retries"], params["delay"], params["stable_intervals"], params["startup_seconds"])
    except KubeletHealthError as exc:
        module.fail_json(msg=str(exc), changed=bool(actions), actions=actions, summary=", ".join(actions), **exc.result)
    module.exit_json(changed=True, actions=actions, summary=", ".join(actions), **facts)


if __name__ == "__main__":
    main()
