#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_restart
short_description: Wait until a restarted kubelet answers /healthz and stays up
version_added: "0.2.0"
description:
  - Asks the kubelet's /healthz until it answers C(ok), then watches its systemd unit for
    O(stable_intervals) restart intervals (the unit's C(RestartSec=)) plus O(startup_seconds),
    then fails unless the unit is still active with the same restart count (C(NRestarts)) and
    /healthz still answers C(ok).
  - /healthz answers C(ok) before the kubelet's container manager has started, so a kubelet
    that refuses its CPU or memory manager checkpoint answers C(ok) for a few seconds of every
    run of its crash loop; one answer proves nothing.
  - Read-only; the checks a role would make with M(ansible.builtin.uri), two
    C(systemctl show) runs and M(ansible.builtin.wait_for), in one module run on the node.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Read-only; it watches the kubelet in check mode too.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  service:
    description: The kubelet's systemd unit.
    type: str
    default: kubelet.service
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
- name: Check that the kubelet came up and stays up
  gpuprov.gpu.kubelet_restart:
    service: kubelet.service
    healthz_url: http://127.0.0.1:10248/healthz
    retries: 30
    delay: 2
"""

RETURN = r"""
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

import time
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.health import (
    HealthWatch,
    KubeletHealthError,
)


def _reader(module):
    systemctl = module.get_bin_path("systemctl", required=True)

    def show(service, props):
        rc, out, err = module.run_command([systemctl, "show", service, "--property=" + ",".join(props)])
        if rc != 0:
            raise KubeletHealthError("systemctl show %s exited %d: %s" % (service, rc, (err or out).strip()))
        return out

    return show


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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", default="kubelet.service"),
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
            module.fail_json(msg="%s must not be negative, got %s" % (name, params[name]))
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be positive, got %s" % params["timeout"])
    watch = HealthWatch(params["service"], params["healthz_url"], _reader(module), _getter(params["timeout"]),
                        time.sleep, time.monotonic)
    try:
        facts = watch.run(params["retries"], params["delay"], params["stable_intervals"], params["startup_seconds"])
    except KubeletHealthError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
