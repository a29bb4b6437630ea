# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Which resource-manager checkpoints a config change invalidates.

The kubelet restores ``cpu_manager_state`` and ``memory_manager_state`` at start and refuses
to run (it crash-loops) when a checkpoint contradicts the config:

- CPU manager: a different policy name; under the static policy, a different set of reserved
  CPUs, since the checkpoint's default CPU set was built around the old reservation (the
  static policy's ``validateState`` in pkg/kubelet/cm/cpumanager/policy_static.go checks that
  the reserved CPUs are in the default set), and a change of ``strict-cpu-reservation``, which
  takes the reserved CPUs out of the shared pool (KEP-4540).
- Memory manager: a different policy name; under the Static policy, any change of what the
  node reserves per NUMA node - ``reservedMemory``, kube/system reserved memory and hugepages,
  and the hard eviction threshold for memory - since ``validateState`` in
  pkg/kubelet/cm/memorymanager/policy_static.go compares the checkpointed machine state with
  one computed from the reservation and fails on any difference.

Both sides are compared as the kubelet reads them: quantities by amount, cpusets by CPUs,
booleans as Go parses them, a missing key as its default.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import CpusetError, parse_cpuset
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (
    DEFAULT_CPU_MANAGER_POLICY,
    DEFAULT_MEMORY_MANAGER_POLICY,
    GO_BOOL_VALUES,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import (
    effective_eviction_hard_memory,
)


def _quantity(value):
    """A quantity as an amount for comparison; text that does not parse compares as text."""
    if value is None:
        return 0
    try:
        return k8s_quantity(value)
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
        return frozenset(parse_cpuset(str(value)))
    except CpusetError:
        return ("unparsed", str(value))


def _go_bool_option(config, map_key, name):
    options = config.get(map_key)
    if not isinstance(options, dict):
        return False
    return GO_BOOL_VALUES.get(str(options.get(name, "false")), options.get(name))


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


def _memory_reservations(config, map_key):
    reserved = config.get(map_key)
    if not isinstance(reserved, dict):
        return {}
    return dict((str(resource), _quantity(value)) for resource, value in reserved.items()
                if str(resource) == "memory" or str(resource).startswith("hugepages-"))


def cpu_manager_reset_reasons(before, after):
    """Why ``cpu_manager_state`` must be deleted before the kubelet restarts; [] if it need not."""
    old_policy = before.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    new_policy = after.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    if old_policy != new_policy:
        return ["cpuManagerPolicy changes from %s to %s" % (old_policy, new_policy)]
    if new_policy != "static":
        return []
    reasons = []
    if _cpuset(before.get("reservedSystemCPUs")) != _cpuset(after.get("reservedSystemCPUs")):
        reasons.append("reservedSystemCPUs changes under the static CPU policy")
    for map_key in ("kubeReserved", "systemReserved"):
        if _reserved(before, map_key, "cpu") != _reserved(after, map_key, "cpu"):
            reasons.append("%s.cpu changes under the static CPU policy" % map_key)
    if (_go_bool_option(before, "cpuManagerPolicyOptions", "strict-cpu-reservation")
            != _go_bool_option(after, "cpuManagerPolicyOptions", "strict-cpu-reservation")):
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
    reasons = []
    if _reserved_memory(before) != _reserved_memory(after):
        reasons.append("reservedMemory changes under the Static memory policy")
    for map_key in ("kubeReserved", "systemReserved"):
        if _memory_reservations(before, map_key) != _memory_reservations(after, map_key):
            reasons.append("%s memory or hugepages change under the Static memory policy"
                           % map_key)
    old_eviction = effective_eviction_hard_memory(before)
    new_eviction = effective_eviction_hard_memory(after)
    if (old_eviction != new_eviction
            and _quantity_or_text(old_eviction) != _quantity_or_text(new_eviction)):
        reasons.append("the hard eviction threshold for memory changes from %s to %s under the "
                       "Static memory policy" % (old_eviction, new_eviction))
    return reasons


def _quantity_or_text(value):
    if isinstance(value, str) and value.endswith("%"):
        return ("percent", value)
    return _quantity(value)
