# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Which resource-manager checkpoints a config change invalidates.

The kubelet restores ``cpu_manager_state`` and ``memory_manager_state`` at start and refuses
to run (it crash-loops) when a checkpoint contradicts the config (pkg/kubelet/cm/cpumanager and
pkg/kubelet/cm/memorymanager, kubernetes v1.37.2; the peer tests in
tests/unit/plugins/module_utils/test_kubelet_peer_checkpoints.py hold this table against that code):

- CPU manager: a different policy name (``NewCheckpointState``). Under the static policy, a
  different set of reserved CPUs: ``validateState`` wants every reserved CPU in the
  checkpoint's default CPU set, and every CPU of the machine in the default set or an
  assignment, so a reservation that grows or moves into CPUs a pod holds, or changes at all
  under ``strict-cpu-reservation``, is refused (one that only shrinks is not); and a change of
  ``strict-cpu-reservation``, which takes the reserved CPUs out of the default set. The reserved CPUs are
  ``reservedSystemCPUs`` when set (the kubelet then ignores kubeReserved.cpu and
  systemReserved.cpu), otherwise as many CPUs as kubeReserved.cpu + systemReserved.cpu,
  rounded up, taken by topology.
- Memory manager: a different policy name; under the Static policy, a different reservation
  per NUMA node (``reservedMemory``, hugepages included): ``validateState`` compares the
  checkpointed machine state with one computed from it. kubeReserved/systemReserved memory and
  the hard eviction threshold reach the checkpoint only through ``reservedMemory``, which the
  kubelet requires to sum to them.

Both sides are compared as the kubelet reads them: quantities by amount, cpusets by CPUs,
booleans as Go parses them, a missing key as its default.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from fractions import Fraction

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (
    DEFAULT_CPU_MANAGER_POLICY,
    DEFAULT_MEMORY_MANAGER_POLICY,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import (
    go_bool,
    kubelet_cpuset,
    kubelet_quantity,
)


def _quantity(value):
    """A quantity as an amount for comparison; text that does not parse compares as text."""
    if value is None:
        return 0
    try:
        return kubelet_quantity(value)
    except ValueError:
        return ("unparsed", str(value))


def _reserved(config, map_key, resource):
    reserved = config.get(map_key)
    if not isinstance(reserved, dict):
        return 0
    return _quantity(reserved.get(resource))


def _cpuset(value):
    if value in (None, ""):
        return frozenset()
    try:
        return frozenset(kubelet_cpuset(str(value)))
    except ValueError:
        return ("unparsed", str(value))


def _go_bool_option(config, map_key, name):
    options = config.get(map_key)
    if not isinstance(options, dict) or name not in options:
        return False
    try:
        return go_bool(options[name])
    except ValueError:
        return ("unparsed", options[name])


def _reserved_cpu_count(config):
    """How many CPUs the static policy reserves without reservedSystemCPUs: kubeReserved.cpu +
    systemReserved.cpu, each rounded to whole millicores, then up to whole CPUs."""
    total = 0
    for map_key in ("kubeReserved", "systemReserved"):
        amount = _reserved(config, map_key, "cpu")
        if isinstance(amount, tuple):
            return amount
        total += math.floor(amount * 1000 + Fraction(1, 2)) if amount else 0
    return -(-total // 1000)


def _reserved_memory(config):
    """reservedMemory as {numaNode: {resource: amount}}."""
    result = {}
    for entry in config.get("reservedMemory") or []:
        if not isinstance(entry, dict):
            continue
        limits = entry.get("limits") if isinstance(entry.get("limits"), dict) else {}
        node = result.setdefault(entry.get("numaNode"), {})
        for resource, value in limits.items():
            node[str(resource)] = _quantity(value)
    return result


def cpu_manager_reset_reasons(before, after):
    """Why ``cpu_manager_state`` must be deleted before the kubelet restarts; [] if it need not."""
    old_policy = before.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    new_policy = after.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    if old_policy != new_policy:
        return ["cpuManagerPolicy changes from %s to %s" % (old_policy, new_policy)]
    if new_policy != "static":
        return []
    reasons = []
    old_cpus = _cpuset(before.get("reservedSystemCPUs"))
    new_cpus = _cpuset(after.get("reservedSystemCPUs"))
    old_strict = _go_bool_option(before, "cpuManagerPolicyOptions", "strict-cpu-reservation")
    new_strict = _go_bool_option(after, "cpuManagerPolicyOptions", "strict-cpu-reservation")
    # A reservation that only shrinks keeps every reserved CPU in the default set, which is
    # all validateState asks without strict-cpu-reservation.
    shrinks = (isinstance(old_cpus, frozenset) and isinstance(new_cpus, frozenset) and new_cpus
               and new_cpus < old_cpus and old_strict is False and new_strict is False)
    if old_cpus != new_cpus and not shrinks:
        reasons.append("reservedSystemCPUs changes under the static CPU policy")
    elif not new_cpus:
        old_count, new_count = _reserved_cpu_count(before), _reserved_cpu_count(after)
        if old_count != new_count:
            reasons.append("kubeReserved.cpu + systemReserved.cpu reserve %s CPUs instead of %s "
                           "under the static CPU policy" % (new_count, old_count))
    if old_strict != new_strict:
        reasons.append("cpuManagerPolicyOptions strict-cpu-reservation changes")
    return reasons


def memory_manager_reset_reasons(before, after):
    """Why ``memory_manager_state`` must be deleted before the kubelet restarts."""
    old_policy = before.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY)
    new_policy = after.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY)
    if old_policy != new_policy:
        return ["memoryManagerPolicy changes from %s to %s" % (old_policy, new_policy)]
    if new_policy != "Static":
        return []
    if _reserved_memory(before) != _reserved_memory(after):
        return ["reservedMemory changes under the Static memory policy"]
    return []
