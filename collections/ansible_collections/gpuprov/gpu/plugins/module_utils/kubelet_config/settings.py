# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The managed settings, in the module's snake_case vocabulary, and their turning into
the kubelet's own values."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError


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
