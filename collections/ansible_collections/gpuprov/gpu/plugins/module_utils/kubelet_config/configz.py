# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""What the kubelet's ``/configz`` shows for the managed keys, and comparing it with what
was written by meaning, not by text.

``/configz`` serves the running configuration converted to ``kubelet.config.k8s.io/v1beta1``
(cmd/kubelet/app/server.go ``setConfigz``, kubernetes v1.37.2):

- keys left out are shown with their defaults (``cpuManagerPolicy: none``,
  ``cpuManagerReconcilePeriod`` the node status update frequency, 10s, ...);
- durations and ``reservedMemory`` quantities in canonical form (``1m`` is ``1m0s``,
  ``1024Mi`` is ``1Gi``); maps of strings (``kubeReserved``, the policy options) as written;
- with ``reservedSystemCPUs`` set, ``kubeReserved.cpu`` is gone and ``systemReserved.cpu`` is
  the number of reserved CPUs: the kubelet rewrites both maps after registering them with
  configz, and configz shares those maps. A ``systemReserved`` map the config did not have is
  created after that, so configz then shows none.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (
    BOOL_OPTION,
    CPU_MANAGER_POLICY_OPTIONS,
    INT_OPTION,
    TOPOLOGY_MANAGER_POLICY_OPTIONS,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import (
    go_bool,
    go_duration,
    go_int,
    kubelet_cpuset,
    kubelet_quantity,
)

# The kubelet's v1beta1 defaults for the managed keys (pkg/kubelet/apis/config/v1beta1/
# defaults.go); None: the key is left out (an empty string, map or list is omitted).
CONFIGZ_DEFAULTS = {
    "cpuManagerPolicy": "none",
    "cpuManagerPolicyOptions": None,
    "topologyManagerPolicy": "none",
    "topologyManagerScope": "container",
    "topologyManagerPolicyOptions": None,
    "reservedSystemCPUs": None,
    "kubeReserved.cpu": None,
    "systemReserved.cpu": None,
    "memoryManagerPolicy": "None",
    "reservedMemory": None,
}
DURATION_KEYS = ("cpuManagerReconcilePeriod",)
QUANTITY_KEYS = ("kubeReserved.cpu", "systemReserved.cpu")
OPTION_KINDS = {"cpuManagerPolicyOptions": CPU_MANAGER_POLICY_OPTIONS,
                "topologyManagerPolicyOptions": TOPOLOGY_MANAGER_POLICY_OPTIONS}


def _value_at(config, dotted):
    node = config
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _empty(value):
    return value in (None, "", {}, [])


def _reserved_cpu_count(config):
    text = config.get("reservedSystemCPUs")
    if not isinstance(text, str) or text == "":
        return 0
    try:
        return len(kubelet_cpuset(text))
    except ValueError:
        return 0


def expected_configz(config, managed_keys, merged_drop_ins=False):
    """Each managed key with the value ``/configz`` will show once the kubelet runs ``config``.

    :arg config: the effective config (``layers.effective_config``) after the change.
    :arg managed_keys: dotted keys such as ``cpuManagerPolicy`` or ``kubeReserved.cpu``.
    :arg merged_drop_ins: the kubelet reads a ``--config-dir``; it then drops empty maps
        (they do not survive its JSON round trip), so an empty ``systemReserved`` is none.
    :returns: dotted key -> value (None: configz leaves the key out).
    """
    expected = {}
    reserved_cpus = _reserved_cpu_count(config)
    for key in managed_keys:
        value = _value_at(config, key)
        if key == "cpuManagerReconcilePeriod":
            try:
                zero = value is None or go_duration(value) == 0
            except ValueError:
                zero = False
            if zero:
                value = config.get("nodeStatusUpdateFrequency")
                try:
                    value = value if value is not None and go_duration(value) != 0 else "10s"
                except ValueError:
                    pass
        elif _empty(value):
            value = CONFIGZ_DEFAULTS.get(key)
        if reserved_cpus and key == "kubeReserved.cpu":
            value = None
        elif reserved_cpus and key == "systemReserved.cpu":
            system = config.get("systemReserved")
            shown = isinstance(system, dict) and (bool(system) or not merged_drop_ins)
            value = str(reserved_cpus) if shown else None
        expected[key] = value
    return expected


def _reserved_memory(value):
    result = {}
    for entry in value or []:
        if isinstance(entry, dict) and isinstance(entry.get("limits"), dict):
            result[entry.get("numaNode")] = dict(
                (resource, _amount(kubelet_quantity, amount))
                for resource, amount in entry["limits"].items())
    return result


def _amount(reader, value):
    try:
        return reader(value if not isinstance(value, (int, float)) or isinstance(value, bool)
                      else str(value))
    except ValueError:
        return ("text", value)


def _options(kinds, value):
    result = {}
    for name, text in (value or {}).items():
        kind = kinds.get(name)
        reader = go_bool if kind == BOOL_OPTION else go_int if kind == INT_OPTION else None
        result[name] = _amount(reader, text) if reader else text
    return result


def same_value(key, running, want):
    """True when configz's ``running`` and the written ``want`` mean the same to the kubelet."""
    if key in DURATION_KEYS:
        return _empty(running) == _empty(want) and (
            _empty(want) or _amount(go_duration, running) == _amount(go_duration, want))
    if key in QUANTITY_KEYS:
        return _empty(running) == _empty(want) and (
            _empty(want) or _amount(kubelet_quantity, running) == _amount(kubelet_quantity, want))
    if key == "reservedSystemCPUs":
        return _amount(kubelet_cpuset, running or "") == _amount(kubelet_cpuset, want or "")
    if key == "reservedMemory":
        return _reserved_memory(running) == _reserved_memory(want)
    if key in OPTION_KINDS:
        return _options(OPTION_KINDS[key], running) == _options(OPTION_KINDS[key], want)
    if _empty(running) and _empty(want):
        return True
    return running == want


def configz_mismatches(running, expected):
    """``KEY is RUNNING, written WANT`` for every key where configz disagrees.

    :arg running: the ``kubeletconfig`` object of ``/configz``.
    :arg expected: dotted key -> value, as ``expected_configz`` gives it.
    """
    mismatches = []
    for key in sorted(expected):
        now = _value_at(running, key)
        if not same_value(key, now, expected[key]):
            mismatches.append("%s is %s, written %s" % (
                key, json.dumps(now, sort_keys=True), json.dumps(expected[key], sort_keys=True)))
    return mismatches
