# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The managed settings, in the module's snake_case vocabulary: their turning into the
kubelet's own values, and the kubelet's rules for them before any node is read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import MAX_CPU_ID
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (
    AUTO,
    CPU_MANAGER_POLICIES,
    MAX_ALLOWABLE_NUMA_NODES_LIMIT,
    MEMORY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import (
    kubelet_cpuset,
    kubelet_quantity,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import (
    duration_problem,
    exclusive_option_problems,
    option_value_problem,
    shown,
)


class KubeletSettings(object):
    """The managed settings, in the module's snake_case vocabulary.

    Every attribute is ``None`` when that key is left alone. Empty values remove a key:
    ``{}`` for the option maps, ``[]`` for ``reserved_memory`` and ``""`` for
    ``reserved_system_cpus``, ``kube_reserved_cpu`` and ``system_reserved_cpu``.
    """

    FIELDS = (
        "cpu_manager_policy", "cpu_manager_policy_options", "cpu_manager_reconcile_period",
        "topology_manager_policy", "topology_manager_scope", "topology_manager_policy_options",
        "reserved_system_cpus", "kube_reserved_cpu", "system_reserved_cpu",
        "memory_manager_policy", "reserved_memory",
    )

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.FIELDS)
        if unknown:
            raise TypeError("unknown kubelet settings: %s" % ", ".join(sorted(unknown)))
        for field in self.FIELDS:
            setattr(self, field, kwargs.get(field))

    @classmethod
    def from_params(cls, params):
        return cls(**dict((field, params.get(field)) for field in cls.FIELDS))


def settings_error(message):
    """A setting that cannot be turned into a config value; ``message`` starts with the field."""
    return KubeletConfigError(message, [message])


def normalise_option_map(value, field):
    """Normalise a policy-options map to the kubelet's map[string]string form."""
    if not isinstance(value, dict):
        raise settings_error("%s: must be a map of option name to value" % field)
    normalised = {}
    for name, option_value in value.items():
        if isinstance(option_value, bool):
            option_value = "true" if option_value else "false"
        elif isinstance(option_value, int):
            option_value = str(option_value)
        elif not isinstance(option_value, str):
            raise settings_error("%s.%s: value %r must be a string, boolean or integer"
                                 % (field, name, option_value))
        normalised[str(name)] = option_value
    return dict(sorted(normalised.items()))


def reserved_memory_entries(entries):
    """Turn ``[{numa_node: 0, limits: {memory: 1Gi}}]`` into the kubelet's reservedMemory."""
    if not isinstance(entries, list):
        raise settings_error("reservedMemory: must be a list of {numa_node, limits}")
    result = []
    for index, entry in enumerate(entries):
        field = "reservedMemory[%d]" % index
        if not isinstance(entry, dict) or "numa_node" not in entry or "limits" not in entry:
            raise settings_error("%s: each entry needs numa_node and limits" % field)
        numa_node = entry["numa_node"]
        if isinstance(numa_node, bool) or not isinstance(numa_node, int):
            raise settings_error("%s.numaNode: %r is not an integer" % (field, numa_node))
        limits = entry["limits"]
        if not isinstance(limits, dict) or not limits:
            raise settings_error("%s.limits: must be a non-empty map such as {memory: 1Gi}"
                                 % field)
        result.append({
            "limits": dict(sorted((str(k), str(v)) for k, v in limits.items())),
            "numaNode": numa_node,
        })
    return result


# The kubelet's value rules for each setting, for checking settings before any node is read
# (``gpuprov plan``). ``validation.validate_config`` applies the same rules to the config
# file the kubelet will read.
_ENUMS = {
    "cpu_manager_policy": CPU_MANAGER_POLICIES,
    "topology_manager_policy": TOPOLOGY_MANAGER_POLICIES,
    "topology_manager_scope": TOPOLOGY_MANAGER_SCOPES,
    "memory_manager_policy": MEMORY_MANAGER_POLICIES,
}
_OPTION_MAPS = {
    "cpu_manager_policy_options": "cpuManagerPolicyOptions",
    "topology_manager_policy_options": "topologyManagerPolicyOptions",
}
# No Linux machine has more CPUs than CPU ids; no memory reservation lists more NUMA nodes
# than max-allowable-numa-nodes allows (gpuprov bounds, so hostile input is refused early).
MAX_CPU_QUANTITY = MAX_CPU_ID + 1
MAX_RESERVED_MEMORY_ENTRIES = MAX_ALLOWABLE_NUMA_NODES_LIMIT


def _option_text(value):
    """An option value as the module writes it: booleans as "true"/"false", integers as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return value


def _as_written(value):
    """A quantity as the module writes it into the file: numbers as their decimal text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _cpu_quantity_problem(value):
    expected = ("must be a CPU quantity such as 1, 500m or \"1.5\" (at most %d cores), got %s"
                % (MAX_CPU_QUANTITY, shown(value)))
    try:
        amount = kubelet_quantity(_as_written(value))
    except ValueError as exc:
        return "%s: %s" % (expected, exc)
    if amount < 0:
        return "%s: the kubelet refuses a negative reservation" % expected
    if amount > MAX_CPU_QUANTITY:
        return "%s: more CPUs than Linux has CPU ids" % expected
    return None


def _reserved_memory_problems(entries):
    if not isinstance(entries, list) or len(entries) > MAX_RESERVED_MEMORY_ENTRIES:
        return [("reserved_memory", "must be a list of at most %d {numa_node, limits} entries"
                 % MAX_RESERVED_MEMORY_ENTRIES)]
    problems = []
    seen = set()
    for index, entry in enumerate(entries):
        field = "reserved_memory[%d]" % index
        if not isinstance(entry, dict) or set(entry) != {"numa_node", "limits"}:
            problems.append((field, "each entry is {numa_node: N, limits: {memory: 1Gi}}"))
            continue
        node = entry["numa_node"]
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < MAX_RESERVED_MEMORY_ENTRIES:
            problems.append((field + ".numa_node", "%s is not a NUMA node number" % shown(node)))
        limits = entry["limits"]
        if not isinstance(limits, dict) or not limits:
            problems.append((field + ".limits", "must be a non-empty map such as {memory: 1Gi}"))
            continue
        for resource, value in limits.items():
            where = "%s.limits.%s" % (field, resource if isinstance(resource, str) else shown(resource))
            if resource != "memory" and not (isinstance(resource, str) and resource.startswith("hugepages-")):
                problems.append((where, "only memory and hugepages-<size> can be reserved"))
                continue
            if (node, resource) in seen:
                problems.append((where, "NUMA node %s reserves %s twice (the kubelet refuses a "
                                        "duplicate)" % (shown(node), resource)))
            seen.add((node, resource))
            try:
                amount = kubelet_quantity(_as_written(value))
            except ValueError as exc:
                problems.append((where, str(exc)))
                continue
            if amount <= 0:
                problems.append((where, "%s must be above zero (the kubelet refuses a zero "
                                        "reservation)" % shown(value)))
    return problems


def settings_problems(settings):
    """What the kubelet would refuse in a map of settings (``gpuprov_kubelet``, the module's
    snake_case names), before any node is read.

    :returns: ``[(field, reason)]``, ``field`` being the setting's path under the map
        (``""`` for the map itself).
    """
    if not isinstance(settings, dict):
        return [("", "must be a mapping of kubelet settings")]
    problems = []
    unknown = sorted(shown(key) if not isinstance(key, str) else key[:80]
                     for key in settings if key not in KubeletSettings.FIELDS)
    if unknown:
        problems.append(("", "unknown key(s) %s; allowed: %s"
                         % (", ".join(ascii(key) for key in unknown),
                            ", ".join(sorted(KubeletSettings.FIELDS)))))
    for key, allowed in sorted(_ENUMS.items()):
        if key in settings and settings[key] not in allowed:
            problems.append((key, "unknown policy %s; choose one of %s"
                             % (shown(settings[key]), ", ".join(allowed))))
    for key, map_key in sorted(_OPTION_MAPS.items()):
        options = settings.get(key)
        if options is None:
            continue
        if not isinstance(options, dict):
            problems.append((key, "must be a mapping of option name to value"))
            continue
        texts = dict((name, _option_text(value)) for name, value in options.items())
        for name, value in texts.items():
            problem = option_value_problem(map_key, name, value)
            if problem:
                problems.append(("%s.%s" % (key, name if isinstance(name, str) else shown(name)), problem))
        if map_key == "cpuManagerPolicyOptions":
            problems.extend(("%s.%s" % (key, name), reason)
                            for name, reason in exclusive_option_problems(texts))
            if options and settings.get("cpu_manager_policy") == "none":
                problems.append((key, "options need cpu_manager_policy static; the none policy "
                                      "rejects them"))
    if "cpu_manager_reconcile_period" in settings:
        problem = duration_problem(settings["cpu_manager_reconcile_period"])
        if problem:
            problems.append(("cpu_manager_reconcile_period", problem))
    reserved = settings.get("reserved_system_cpus")
    if reserved is not None and reserved != AUTO:
        try:
            if not kubelet_cpuset(reserved if isinstance(reserved, str) else str(reserved),
                                  MAX_CPU_ID, repeats=False):
                raise ValueError("the cpuset is empty")
        except ValueError as exc:
            problems.append(("reserved_system_cpus", "invalid cpuset %s: %s (use a cpuset such "
                                                     "as \"0,32\" or \"0-1\", or auto)"
                             % (shown(reserved), exc)))
    for key in ("kube_reserved_cpu", "system_reserved_cpu"):
        if key in settings:
            problem = _cpu_quantity_problem(settings[key])
            if problem:
                problems.append((key, problem))
    if settings.get("cpu_manager_policy") == "static" and reserved is None:
        reserved_cpu = 0
        for key in ("kube_reserved_cpu", "system_reserved_cpu"):
            if key in settings and _cpu_quantity_problem(settings[key]) is None:
                reserved_cpu += kubelet_quantity(_as_written(settings[key]))
        if reserved_cpu <= 0:
            problems.append(("cpu_manager_policy", "static needs a CPU reservation: set "
                                                   "reserved_system_cpus (a cpuset or auto) or "
                                                   "kube_reserved_cpu/system_reserved_cpu (the "
                                                   "kubelet refuses to start otherwise)"))
    if "reserved_memory" in settings and settings["reserved_memory"] is not None:
        problems.extend(_reserved_memory_problems(settings["reserved_memory"]))
    if settings.get("memory_manager_policy") == "Static" and not settings.get("reserved_memory"):
        problems.append(("reserved_memory", "memory_manager_policy Static needs reserved_memory "
                                            "per NUMA node (the kubelet refuses to start "
                                            "otherwise)"))
    return problems
