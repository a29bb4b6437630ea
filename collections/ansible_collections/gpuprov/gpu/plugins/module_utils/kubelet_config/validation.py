# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Validation of a KubeletConfiguration as the kubelet will read it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    CpuTopology,
    DEFAULT_SYSFS_ROOT,
    MAX_CPU_ID,
    SysfsError,
    format_cpuset,
    read_numa_node_memory,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (
    BOOL_OPTION,
    CPU_MANAGER_EXCLUSIVE_OPTIONS,
    CPU_MANAGER_POLICIES,
    CPU_MANAGER_POLICY_OPTIONS,
    DEFAULT_CPU_MANAGER_POLICY,
    DEFAULT_MEMORY_MANAGER_POLICY,
    ENUM_OPTION,
    INT_OPTION,
    MAX_ALLOWABLE_NUMA_NODES_DEFAULT,
    MAX_ALLOWABLE_NUMA_NODES_LIMIT,
    MEMORY_MANAGER_POLICIES,
    OPTION_VALUES,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_POLICY_OPTIONS,
    TOPOLOGY_MANAGER_SCOPES,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import (
    go_bool,
    go_duration,
    go_int,
    kubelet_cpuset,
    kubelet_quantity,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import format_k8s_bytes


def shown(value, limit=60):
    """A value for an error message: quoted, non-ASCII and control characters escaped,
    long text cut (text from an inventory may be hostile)."""
    if not isinstance(value, str):
        text = ascii(value)
        return text if len(text) <= limit else text[:limit] + "..."
    if len(value) > limit:
        return ascii(value[:limit]) + "..."
    return ascii(value)


def duration_problem(value):
    """Why ``value`` is not a duration the kubelet takes for cpuManagerReconcilePeriod, or None.

    The kubelet accepts a negative period (its validation has no rule for it) and then runs
    the CPU manager's reconcile loop without pause; gpuprov refuses it. ``0`` means the default
    (the kubelet's v1beta1 defaulting sets the node status update frequency, 10s)."""
    if not isinstance(value, str):
        return "%s must be a quoted Go duration such as \"10s\" or \"1m0s\"" % shown(value)
    try:
        nanoseconds = go_duration(value)
    except ValueError as exc:
        return "%s is not a Go duration such as 10s or 1m30s (%s)" % (shown(value), exc)
    if nanoseconds < 0:
        return ("%s is negative: the kubelet would run the CPU manager's reconcile loop "
                "without pause" % shown(value))
    return None


def option_value_problem(map_key, name, value):
    """Why option ``name`` of ``map_key`` (``cpuManagerPolicyOptions`` or
    ``topologyManagerPolicyOptions``) may not have ``value`` (a string, as in the file), or
    None."""
    known = (CPU_MANAGER_POLICY_OPTIONS if map_key == "cpuManagerPolicyOptions"
             else TOPOLOGY_MANAGER_POLICY_OPTIONS)
    if name not in known:
        return "unknown option (known: %s)" % ", ".join(sorted(known))
    if not isinstance(value, str):
        return "value %s must be a quoted string such as \"true\"" % shown(value)
    kind = known[name]
    try:
        if kind == BOOL_OPTION:
            go_bool(value)
        elif kind == INT_OPTION:
            number = go_int(value)
            if name == "max-allowable-numa-nodes":
                if number < MAX_ALLOWABLE_NUMA_NODES_DEFAULT:
                    return ("%s is less than %d, the kubelet's minimum"
                            % (shown(value), MAX_ALLOWABLE_NUMA_NODES_DEFAULT))
                if number > MAX_ALLOWABLE_NUMA_NODES_LIMIT:
                    return ("%s is above %d, more NUMA nodes than any machine has (a gpuprov "
                            "bound)" % (shown(value), MAX_ALLOWABLE_NUMA_NODES_LIMIT))
        elif kind == ENUM_OPTION and value not in OPTION_VALUES[name]:
            return "%s is not one of %s" % (shown(value), ", ".join(v for v in OPTION_VALUES[name] if v))
    except ValueError as exc:
        return str(exc)
    return None


def exclusive_option_problems(options):
    """The static policy's refusals of option pairs that are both true, as ``(name, reason)``."""
    enabled = set()
    for name, value in (options or {}).items():
        try:
            if name in CPU_MANAGER_POLICY_OPTIONS and go_bool(value):
                enabled.add(name)
        except ValueError:
            pass
    return [(second, "%s and %s cannot be used at the same time (the kubelet's static policy "
                     "refuses the pair)" % (first, second))
            for first, second in CPU_MANAGER_EXCLUSIVE_OPTIONS
            if first in enabled and second in enabled]


class NodeTopology(object):
    """Reads the node's topology from sysfs on first use, so configs that need no topology
    never touch sysfs."""

    def __init__(self, sysfs_root=DEFAULT_SYSFS_ROOT):
        self.sysfs_root = sysfs_root
        self._cpus = None
        self._memory = None

    @property
    def cpus(self):
        if self._cpus is None:
            self._cpus = CpuTopology.from_sysfs(self.sysfs_root)
        return self._cpus

    @property
    def memory(self):
        if self._memory is None:
            self._memory = read_numa_node_memory(self.sysfs_root)
        return self._memory


def _check_enum(config, key, allowed, errors):
    value = config.get(key)
    if value is not None and value not in allowed:
        errors.append("%s: %r is not one of %s" % (key, value, ", ".join(allowed)))


def _check_option_map(config, key, errors):
    options = config.get(key)
    if options is None:
        return
    if not isinstance(options, dict):
        errors.append("%s: must be a map of option name to string value" % key)
        return
    for name, value in options.items():
        problem = option_value_problem(key, name, value)
        if problem:
            errors.append("%s.%s: %s" % (key, name, problem))
    if key == "cpuManagerPolicyOptions":
        for name, reason in exclusive_option_problems(options):
            errors.append("%s.%s: %s" % (key, name, reason))


def _reserved_quantity(config, map_key, resource, errors):
    """kubeReserved/systemReserved[resource] as a Fraction, 0 when absent."""
    reserved = config.get(map_key) or {}
    if not isinstance(reserved, dict):
        errors.append("%s: must be a map such as {cpu: \"1\", memory: 1Gi}" % map_key)
        return Fraction(0)
    value = reserved.get(resource)
    if value is None:
        return Fraction(0)
    field = "%s.%s" % (map_key, resource)
    if not isinstance(value, str):
        errors.append("%s: %r must be a quoted string (the kubelet reads these maps as strings)"
                      % (field, value))
        return Fraction(0)
    try:
        amount = kubelet_quantity(value)
    except ValueError as exc:
        errors.append("%s: %s" % (field, exc))
        return Fraction(0)
    if amount < 0:
        errors.append("%s: %s must not be negative" % (field, value))
        return Fraction(0)
    return amount


def _check_cpu_manager(config, topology, errors):
    policy = config.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    _check_enum(config, "cpuManagerPolicy", CPU_MANAGER_POLICIES, errors)
    _check_option_map(config, "cpuManagerPolicyOptions", errors)
    # The none policy refuses any options (NewNonePolicy: "None policy: received unsupported
    # options").
    if policy == "none" and config.get("cpuManagerPolicyOptions"):
        errors.append("cpuManagerPolicyOptions: options need cpuManagerPolicy static; the none "
                      "policy rejects them")
    period = config.get("cpuManagerReconcilePeriod")
    if period is not None:
        problem = duration_problem(period)
        if problem:
            errors.append("cpuManagerReconcilePeriod: %s" % problem)

    kube_cpu = _reserved_quantity(config, "kubeReserved", "cpu", errors)
    system_cpu = _reserved_quantity(config, "systemReserved", "cpu", errors)

    reserved_cpus = config.get("reservedSystemCPUs")
    has_reserved_cpus = False
    if reserved_cpus is not None:
        if not isinstance(reserved_cpus, str):
            errors.append("reservedSystemCPUs: %s must be a cpuset string such as \"0-1\""
                          % shown(reserved_cpus))
        else:
            try:
                cpus = kubelet_cpuset(reserved_cpus, MAX_CPU_ID)
            except ValueError as exc:
                errors.append("reservedSystemCPUs: %s" % exc)
            else:
                has_reserved_cpus = bool(cpus)
                if cpus:
                    _check_online(cpus, topology, errors)
        # ValidateKubeletConfiguration: "can't use reservedSystemCPUs (--reserved-cpus) with
        # systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup".
        cgroups = [key for key in ("kubeReservedCgroup", "systemReservedCgroup")
                   if config.get(key)]
        if reserved_cpus != "" and cgroups:
            errors.append("reservedSystemCPUs: the kubelet refuses it together with %s (%s); "
                          "reserve CPUs with kubeReserved.cpu / systemReserved.cpu instead, or "
                          "remove %s" % (" and ".join(cgroups),
                                         ", ".join(shown(config[key]) for key in cgroups),
                                         " and ".join(cgroups)))
    if policy == "static" and not has_reserved_cpus and kube_cpu + system_cpu <= 0:
        errors.append(
            "cpuManagerPolicy: static needs CPUs reserved for the system: set "
            "reservedSystemCPUs, or kubeReserved.cpu / systemReserved.cpu above zero (the "
            "kubelet fails with \"[cpumanager] unable to determine reserved CPU resources for "
            "static policy\")")


def _check_online(cpus, topology, errors):
    try:
        online = set(topology.cpus.online)
    except SysfsError as exc:
        errors.append("reservedSystemCPUs: cannot check the CPUs against this node: %s" % exc)
        return
    missing = [cpu for cpu in cpus if cpu not in online]
    if missing:
        errors.append("reservedSystemCPUs: CPUs %s do not exist (or are offline) on this node; "
                      "online CPUs are %s" % (format_cpuset(missing),
                                              format_cpuset(online) or "none"))


def eviction_hard_memory(config):
    """``evictionHard["memory.available"]`` of the effective config (``layers.effective_config``:
    the main file's defaults applied), as the string in the file; ``"0"`` when the map does not
    name it: a map that is present replaces the defaults as a whole (the kubelet's defaulting
    sets ``evictionHard`` only on a main file that has none)."""
    eviction = config.get("evictionHard")
    if not isinstance(eviction, dict):
        return eviction
    return eviction.get("memory.available", "0")


def _eviction_hard_memory(config, topology, errors):
    if not isinstance(config.get("evictionHard", {}), dict):
        errors.append("evictionHard: must be a map such as {memory.available: 100Mi}")
        return Fraction(0)
    value = eviction_hard_memory(config)
    field = "evictionHard.memory.available"
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = Fraction(value[:-1])
        except ValueError:
            errors.append("%s: %r is not a percentage" % (field, value))
            return Fraction(0)
        try:
            total = sum(topology.memory.values())
        except SysfsError as exc:
            errors.append("%s: %s is relative to node memory, which could not be read: %s"
                          % (field, value, exc))
            return Fraction(0)
        return total * percent / 100
    try:
        return kubelet_quantity(value)
    except ValueError as exc:
        errors.append("%s: %s" % (field, exc))
        return Fraction(0)


def _check_memory_manager(config, topology, errors):
    _check_enum(config, "memoryManagerPolicy", MEMORY_MANAGER_POLICIES, errors)
    reserved_memory = config.get("reservedMemory")
    if reserved_memory is not None and not isinstance(reserved_memory, list):
        errors.append("reservedMemory: must be a list of {numaNode, limits}")
        return
    if config.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY) != "Static":
        return

    # The kubelet's rule: per resource, the reservedMemory sum over NUMA nodes must equal
    # what Node Allocatable reserves (for memory that includes the hard eviction threshold).
    expected = {"memory": (_reserved_quantity(config, "kubeReserved", "memory", errors)
                           + _reserved_quantity(config, "systemReserved", "memory", errors)
                           + _eviction_hard_memory(config, topology, errors))}
    for map_key in ("kubeReserved", "systemReserved"):
        reserved = config.get(map_key) or {}
        if isinstance(reserved, dict):
            for resource in reserved:
                if str(resource).startswith("hugepages-"):
                    expected[resource] = (expected.get(resource, Fraction(0))
                                          + _reserved_quantity(config, map_key, resource, errors))
    if not reserved_memory:
        errors.append("reservedMemory: memoryManagerPolicy Static needs reservedMemory per "
                      "NUMA node, summing to kubeReserved.memory + systemReserved.memory + "
                      "evictionHard memory.available (%s on this node)"
                      % format_k8s_bytes(expected["memory"]))
        return

    try:
        numa_nodes = set(topology.cpus.numa_nodes)
    except SysfsError as exc:
        numa_nodes = None
        errors.append("reservedMemory: cannot read this node's NUMA nodes: %s" % exc)
    totals = {}
    # The kubelet refuses a NUMA node reserving one resource twice (validateReservedMemory
    # Configuration: "duplicate value for NUMA node ... and resource"); a node may have one
    # entry per resource.
    seen = set()
    for index, entry in enumerate(reserved_memory):
        field = "reservedMemory[%d]" % index
        if not isinstance(entry, dict):
            errors.append("%s: must be a map {numaNode, limits}" % field)
            continue
        numa_node = entry.get("numaNode")
        if isinstance(numa_node, bool) or not isinstance(numa_node, int) or numa_node < 0:
            errors.append("%s.numaNode: %s is not a NUMA node number" % (field, shown(numa_node)))
        elif numa_nodes is not None and numa_node not in numa_nodes:
            errors.append("%s.numaNode: NUMA node %d does not exist on this node (nodes: %s)"
                          % (field, numa_node, ", ".join(str(n) for n in sorted(numa_nodes))))
        limits = entry.get("limits")
        if not isinstance(limits, dict) or not limits:
            errors.append("%s.limits: must be a non-empty map such as {memory: 1Gi}" % field)
            continue
        for resource, value in limits.items():
            if resource != "memory" and not str(resource).startswith("hugepages-"):
                errors.append("%s.limits.%s: only memory and hugepages-<size> can be reserved"
                              % (field, resource))
                continue
            if (numa_node, resource) in seen:
                errors.append("%s.limits.%s: NUMA node %s reserves %s twice (the kubelet refuses "
                              "a duplicate)" % (field, resource, shown(numa_node), resource))
            seen.add((numa_node, resource))
            try:
                amount = kubelet_quantity(value)
            except ValueError as exc:
                errors.append("%s.limits.%s: %s" % (field, resource, exc))
                continue
            if amount <= 0:
                errors.append("%s.limits.%s: %s must be above zero (the kubelet refuses a zero "
                              "reservation)" % (field, resource, shown(value)))
                continue
            totals[resource] = totals.get(resource, Fraction(0)) + amount

    for resource in sorted(set(expected) | set(totals)):
        want = expected.get(resource, Fraction(0))
        have = totals.get(resource, Fraction(0))
        if want != have:
            source = ("kubeReserved.memory + systemReserved.memory + evictionHard "
                      "memory.available" if resource == "memory"
                      else "kubeReserved + systemReserved %s" % resource)
            errors.append("reservedMemory: %s sums to %s over NUMA nodes but %s is %s; the "
                          "kubelet refuses to start unless they are equal"
                          % (resource, format_k8s_bytes(have), source, format_k8s_bytes(want)))


def _check_topology_manager(config, topology, errors):
    _check_enum(config, "topologyManagerPolicy", TOPOLOGY_MANAGER_POLICIES, errors)
    _check_enum(config, "topologyManagerScope", TOPOLOGY_MANAGER_SCOPES, errors)
    _check_option_map(config, "topologyManagerPolicyOptions", errors)
    _check_numa_node_limit(config, topology, errors)


def _check_numa_node_limit(config, topology, errors):
    """The Topology Manager refuses to start on a node with more NUMA nodes than it allows
    (8, or ``max-allowable-numa-nodes``): the kubelet exits with "unsupported on machines with
    more than 8 NUMA Nodes" for every policy but none (NewManager in
    pkg/kubelet/cm/topologymanager/topology_manager.go, kubernetes v1.37.2)."""
    policy = config.get("topologyManagerPolicy", "none")
    if policy in (None, "none") or policy not in TOPOLOGY_MANAGER_POLICIES:
        return
    limit = MAX_ALLOWABLE_NUMA_NODES_DEFAULT
    options = config.get("topologyManagerPolicyOptions")
    if isinstance(options, dict):
        try:
            limit = max(limit, go_int(options.get("max-allowable-numa-nodes")))
        except ValueError:
            pass
    try:
        count = len(topology.cpus.numa_nodes)
    except SysfsError as exc:
        errors.append("topologyManagerPolicy: cannot count this node's NUMA nodes: %s" % exc)
        return
    if count > limit:
        errors.append(
            "topologyManagerPolicy: %s needs the Topology Manager, which the kubelet refuses "
            "on a node with more than %d NUMA nodes; this node has %d (set "
            "topologyManagerPolicyOptions max-allowable-numa-nodes to %d or more, on a kubelet "
            "that supports it)" % (policy, limit, count, count))


def validate_config(config, topology):
    """Check the managed fields of a KubeletConfiguration dict as the kubelet would.

    :arg config: the effective config as a dict (after the change; ``layers.effective_config``).
    :arg topology: a ``NodeTopology``; only read when a check needs the node's CPUs or memory.
    :returns: list of error strings, each starting with the field it is about.
    """
    errors = []
    _check_cpu_manager(config, topology, errors)
    _check_topology_manager(config, topology, errors)
    _check_memory_manager(config, topology, errors)
    # A malformed kubeReserved/systemReserved map is found by more than one check.
    return [error for index, error in enumerate(errors) if error not in errors[:index]]
